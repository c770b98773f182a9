#!/usr/bin/env bash
# Writes build/link-order.txt, the functions that build.rs has the linker place together at
# the start of the binary's code: those a run of BIN executed under callgrind, most
# instructions first. The run: `serve --config-dir` on a Gateway with an HTTP and an HTTPS
# listener (a certificate made here), a route to an echo backend (`BIN echo`) and
# LINK_ORDER_ROUTES (5,000) more routes, a file each; its start and first load; 20 requests
# each over HTTP/1.1, h2c (a connection each), HTTPS with HTTP/1.1 and HTTPS with h2; a route
# file added and served; the admin endpoints (`/`, `/healthz`, `/readyz`, `/metrics`).
#
#   EDGEPLANE_LINK_MAP=$PWD/target/edgeplane.map EDGEPLANE_LINK_ORDER=0 \
#       cargo build --release --locked --bin edgeplane
#   scripts/link-order.sh target/release/edgeplane target/edgeplane.map [OUT]
#
# MAP is the linker's map of BIN's own link (EDGEPLANE_LINK_MAP, an absolute path; GNU ld's or
# lld's, rustc's default on x86_64 Linux): it names the code at each address, so BIN may be
# stripped, as the release profile's is. Make the list from the build it is for: Rust's
# symbol names carry a hash of the compiler's version and of the profile's settings (LTO,
# codegen units, debug info, strip), so a list made from another profile or rustc matches
# nothing and places nothing (it never fails the build). Code changed
# since the list was made is placed as if it were not listed. Loopback only (a random
# 127.x.y.z, ports 8080, 8443, 18483 and one for the echo backend); nothing is asserted.
set -euo pipefail

bin=${1:?usage: scripts/link-order.sh BIN MAP [OUT]}
map=${2:?usage: scripts/link-order.sh BIN MAP [OUT]}
cd "$(dirname "$0")/.."
out=${3:-build/link-order.txt}
for tool in valgrind callgrind_control curl openssl python3; do
    command -v "$tool" >/dev/null || { echo "link-order.sh: needs $tool" >&2; exit 1; }
done
# MAP is BIN's, and BIN is linked without an order (valgrind counts code outside `.text` as no
# object's).
python3 scripts/link_order.py "$bin" "$map"
work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
bind="127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))"
admin="$bind:18483"
backend=$((RANDOM % 20000 + 30000))

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=order.example -addext subjectAltName=DNS:order.example,DNS:added.example \
    -keyout "$work/tls.key" -out "$work/tls.crt" 2>/dev/null
mkdir -p "$work/config"
{
    cat <<EOF
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
  - name: https
    port: 8443
    protocol: HTTPS
    tls: {certificateRefs: [{name: order-tls}]}
---
apiVersion: v1
kind: Secret
metadata: {name: order-tls}
type: kubernetes.io/tls
stringData:
  tls.crt: |
EOF
    sed 's/^/    /' "$work/tls.crt"
    echo "  tls.key: |"
    sed 's/^/    /' "$work/tls.key"
    cat <<EOF
---
apiVersion: v1
kind: Service
metadata: {name: echo}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: echo-1
  labels: {kubernetes.io/service-name: echo}
addressType: IPv4
ports: [{name: http, port: $backend}]
endpoints: [{addresses: ['127.0.0.1'], conditions: {ready: true}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: order}
spec:
  parentRefs: [{name: gw}]
  hostnames: [order.example]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs: [{name: echo, port: 80}]
EOF
} >"$work/config/gateway.yaml"
# A first load of some size runs what a large one does (per-route work, tables growing).
for i in $(seq "${LINK_ORDER_ROUTES:-5000}"); do
    printf 'apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r-%s}\nspec:\n  parentRefs: [{name: gw}]\n  hostnames: [r-%s.example]\n  rules:\n  - backendRefs: [{name: echo, port: 80}]\n' \
        "$i" "$i" >"$work/config/r-$i.yaml"
done

"$bin" echo --listen "127.0.0.1:$backend" >"$work/echo.log" 2>&1 &
pids+=($!)
valgrind --tool=callgrind --dump-instr=yes --compress-pos=no --compress-strings=no \
    --callgrind-out-file="$work/callgrind.out" \
    "$bin" serve --config-dir "$work/config" --bind-address "$bind" --admin-addr "$admin" \
    --dashboard-addr 127.0.0.1:0 >"$work/serve.log" 2>&1 &
vpid=$!
pids+=("$vpid")

# waits LABEL COMMAND...: runs COMMAND every half second until it succeeds, for up to 5 minutes
# (callgrind runs the start about fifty times slower).
waits() {
    local label=$1
    shift
    for _ in $(seq 600); do
        "$@" >/dev/null 2>&1 && return 0
        kill -0 "$vpid" 2>/dev/null || break
        sleep 0.5
    done
    echo "link-order.sh: $label: no answer in time" >&2
    cat "$work/serve.log" >&2
    exit 1
}
ok() { [ "$(curl -s -o /dev/null -w '%{http_code}' "$@")" = 200 ]; }
waits "ready" ok "http://$admin/readyz"
waits "echo backend" ok "http://127.0.0.1:$backend/"
resolve=()
for name in order.example:8080 order.example:8443 added.example:8443; do resolve+=(--resolve "$name:$bind"); done
urls() { for i in $(seq 20); do echo "$1/p/$i"; done; }
waits "HTTP/1.1" ok -H 'Host: order.example' "http://$bind:8080/"
# One connection each for 20 requests (curl reuses it for the URLs of one invocation).
requests() {
    curl -sf "$@" >/dev/null || echo "link-order.sh: curl $* failed (exit $?)" >&2
}
requests "${resolve[@]}" $(urls "http://order.example:8080")
# curl 7.88 does not send a second request on a reused h2c prior-knowledge connection.
for url in $(urls "http://order.example:8080"); do requests --http2-prior-knowledge "${resolve[@]}" "$url"; done
requests -k --http1.1 "${resolve[@]}" $(urls "https://order.example:8443")
requests -k --http2 "${resolve[@]}" $(urls "https://order.example:8443")
curl -s -o /dev/null -H 'Host: nowhere.example' "http://$bind:8080/"
sed -e 's/name: order}/name: added}/' -e 's/\[order.example\]/[added.example]/' \
    <(awk '/^kind: HTTPRoute/ { on = 1; print "apiVersion: gateway.networking.k8s.io/v1" } on' "$work/config/gateway.yaml") \
    >"$work/config/added.yaml"
waits "added route" ok -k "${resolve[@]}" https://added.example:8443/
for path in / /healthz /readyz /metrics; do curl -s -o /dev/null "http://$admin$path"; done

callgrind_control -d "$vpid" >/dev/null 2>&1
for _ in $(seq 120); do
    [ -s "$work/callgrind.out.1" ] && break
    sleep 0.5
done
sleep 1
kill -KILL "$vpid" 2>/dev/null || true
wait "$vpid" 2>/dev/null || true
python3 scripts/link_order.py "$bin" "$map" "$work"/callgrind.out* >"$work/list"
mv "$work/list" "$out"
echo "$out: $(grep -vc '^#' "$out") functions"
