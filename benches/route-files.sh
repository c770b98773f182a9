# Sourced by benches/heap.sh and benches/resident.sh: `route_files DIR N` writes the standalone
# benchmark's shape into DIR: GatewayClass, Gateway `gw` (one HTTP listener on port 8080),
# Service `base` with one EndpointSlice (127.0.0.1:9, which need not answer) in `infra.yaml`,
# and N HTTPRoutes, one file, hostname and rule each (`route-I.yaml`, `route-I.example`).

route_files() {
    local dir=$1 routes=$2 i name
    mkdir -p "$dir"
    cat >"$dir/infra.yaml" <<'YAML'
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: edge}
spec: {controllerName: edgeplane.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: edge
  listeners:
  - {name: http, port: 8080, protocol: HTTP}
---
apiVersion: v1
kind: Service
metadata: {name: base}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: base-1
  labels: {kubernetes.io/service-name: base}
addressType: IPv4
ports: [{name: http, port: 9}]
endpoints: [{addresses: ['127.0.0.1'], conditions: {ready: true}}]
YAML
    for i in $(seq 0 $((routes - 1))); do
        name="route-$i"
        printf 'apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: %s}\nspec:\n  parentRefs: [{name: gw}]\n  hostnames: ['"'"'%s.example'"'"']\n  rules:\n  - backendRefs: [{name: base, port: 80}]\n' \
            "$name" "$name" >"$dir/$name.yaml"
    done
}
