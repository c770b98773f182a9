#!/usr/bin/env bash
# gRPC unary load: h2load sends `GrpcEcho/Echo` calls (a 5-byte gRPC frame header and an empty
# protobuf message, over h2c) to an `edgeplane echo` backend directly, then through nginx
# (`grpc_pass`), HAProxy (HTTP/2 on both sides) and edgeplane (a GRPCRoute), each proxy with
# one worker on the same core. Prints calls per second, p50 and p99 for each and edgeplane's
# ratio to each peer. Everything listens on 127.0.0.1 only.
#
#   benches/grpc.sh [--quick]
#
# Environment:
#   GRPC_DURATION        seconds measured per target (default 10; --quick: 2)
#   GRPC_WARMUP          seconds of warm-up per target, not measured (default 2; --quick: 1)
#   GRPC_CONNECTIONS     h2load client connections (default 8)
#   GRPC_STREAMS         concurrent streams per connection (default 8)
#   GRPC_PORT_BASE       first of five loopback ports used (default 28100)
#   GRPC_CPU_GEN         core of h2load and the backend (default 0)
#   GRPC_CPU_PROXY       core of edgeplane (default 1)
#   EDGEPLANE_BIN        use this edgeplane binary instead of running `cargo build --profile profiling`
set -euo pipefail

duration=${GRPC_DURATION:-10}
warmup=${GRPC_WARMUP:-2}
if [ "${1:-}" = "--quick" ]; then
    duration=${GRPC_DURATION:-2}
    warmup=${GRPC_WARMUP:-1}
elif [ -n "${1:-}" ]; then
    echo "usage: benches/grpc.sh [--quick]" >&2
    exit 2
fi
conns=${GRPC_CONNECTIONS:-8}
streams=${GRPC_STREAMS:-8}
base=${GRPC_PORT_BASE:-28100}
cpu_gen=${GRPC_CPU_GEN:-0}
cpu_proxy=${GRPC_CPU_PROXY:-1}
backend_port=$base
proxy_port=$((base + 1))
admin_port=$((base + 2))
nginx_port=$((base + 3))
haproxy_port=$((base + 4))
repo=$(cd "$(dirname "$0")/.." && pwd)

die() { echo "grpc.sh: $*" >&2; exit 1; }
command -v h2load >/dev/null 2>&1 || die "h2load not found (Debian/Ubuntu: apt-get install nghttp2-client)"
command -v taskset >/dev/null 2>&1 || die "taskset not found (util-linux)"
command -v nginx >/dev/null 2>&1 || die "nginx not found (Debian/Ubuntu: apt-get install nginx)"
command -v haproxy >/dev/null 2>&1 || die "haproxy not found (Debian/Ubuntu: apt-get install haproxy)"

if [ -n "${EDGEPLANE_BIN:-}" ]; then
    bin=$EDGEPLANE_BIN
else
    (cd "$repo" && cargo build --profile profiling --locked --bin edgeplane)
    bin="${CARGO_TARGET_DIR:-$repo/target}/profiling/edgeplane"
fi
[ -x "$bin" ] || die "edgeplane binary not found: $bin"

work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# The request body: gRPC frame (uncompressed flag 0, length 0) of an empty EchoRequest.
printf '\x00\x00\x00\x00\x00' >"$work/echo.bin"

mkdir "$work/config"
cat >"$work/config/grpc.yaml" <<YAML
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: bench}
spec: {controllerName: edgeplane.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: bench
  listeners: [{name: h2c, port: $proxy_port, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: echo}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{method: {service: gateway_api_conformance.echo_basic.grpcecho.GrpcEcho, method: Echo}}]
    backendRefs: [{name: echo, port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: echo}
spec: {ports: [{name: grpc, port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: echo-1, labels: {kubernetes.io/service-name: echo}}
addressType: IPv4
ports: [{name: grpc, port: $backend_port}]
endpoints: [{addresses: [127.0.0.1]}]
YAML

taskset -c "$cpu_gen" "$bin" echo --listen "127.0.0.1:$backend_port" --pod bench >/dev/null 2>&1 &
pids+=($!)
RUST_LOG=warn taskset -c "$cpu_proxy" "$bin" serve --config-dir "$work/config" \
    --bind-address 127.0.0.1 --admin-addr "127.0.0.1:$admin_port" >"$work/edgeplane.log" 2>&1 &
pids+=($!)

# The peers, one worker each on the proxy's core, keeping connections to the backend open.
mkdir "$work/nginx"
cat >"$work/nginx/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $work/nginx;
    # The default (1000 calls) ends each client connection early; h2load does not reconnect.
    keepalive_requests 100000000;
    upstream grpc_backend {
        server 127.0.0.1:$backend_port;
        keepalive 64;
        keepalive_requests 100000000;
    }
    server {
        listen 127.0.0.1:$nginx_port http2;
        location / { grpc_pass grpc://grpc_backend; }
    }
}
CONF
taskset -c "$cpu_proxy" nginx -e "$work/nginx/error.log" -c "$work/nginx/nginx.conf" \
    >"$work/nginx/out.log" 2>&1 &
pids+=($!)
cat >"$work/haproxy.cfg" <<CONF
global
    nbthread 1
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
frontend grpc
    bind 127.0.0.1:$haproxy_port proto h2
    default_backend echo
backend echo
    http-reuse always
    server echo 127.0.0.1:$backend_port proto h2
CONF
taskset -c "$cpu_proxy" haproxy -db -f "$work/haproxy.cfg" >"$work/haproxy.log" 2>&1 &
pids+=($!)

# Ready when one call through the proxy succeeds.
path=/gateway_api_conformance.echo_basic.grpcecho.GrpcEcho/Echo
call() {
    h2load -n "$2" -c "$3" -m "$4" ${5:+-D "$5"} -d "$work/echo.bin" \
        -H 'content-type: application/grpc' -H 'te: trailers' \
        --log-file="$work/req.log" "http://127.0.0.1:$1$path"
}
for _ in $(seq 1 100); do
    if call "$proxy_port" 1 1 1 >"$work/probe" 2>&1 && grep -q '1 succeeded' "$work/probe"; then
        break
    fi
    sleep 0.1
done
grep -q '1 succeeded' "$work/probe" || die "no gRPC call through edgeplane succeeded; log: $(cat "$work/edgeplane.log")"
# A call no route serves is answered 200 too (UNIMPLEMENTED, no message): the probe must have
# received the echo's response message.
data=$(awk '/^traffic:/ { for (i = 1; i <= NF; i++) if ($i == "data") print $(i - 1) }' "$work/probe")
[ -n "$data" ] && [ "$data" != "(0)" ] || die "the probe call got no response message (not routed?)"

# Runs one target: warm-up, then the measured run. Prints "RPS P50MS P99MS ERRORS".
measure() {
    local port=$1 out=$work/out
    taskset -c "$cpu_gen" h2load -c "$conns" -m "$streams" -D "$warmup" -d "$work/echo.bin" \
        -H 'content-type: application/grpc' -H 'te: trailers' \
        "http://127.0.0.1:$port$path" >/dev/null 2>&1 || true
    rm -f "$work/req.log"
    taskset -c "$cpu_gen" h2load -c "$conns" -m "$streams" -D "$duration" -d "$work/echo.bin" \
        -H 'content-type: application/grpc' -H 'te: trailers' \
        --log-file="$work/req.log" "http://127.0.0.1:$port$path" >"$out" 2>&1 || true
    local rps err pct
    rps=$(awk '/^finished in/ { gsub(/,/, ""); print $4 }' "$out")
    err=$(awk '/^requests:/ { gsub(/,/, ""); print $10 + $12 + $14 }' "$out")
    [ -n "$rps" ] && [ -s "$work/req.log" ] || { echo "FAIL"; return; }
    pct=$(cut -f3 "$work/req.log" | sort -n | awk '
        { v[NR] = $1 }
        END {
            i50 = int(NR * 0.50 + 0.999999); if (i50 < 1) i50 = 1
            i99 = int(NR * 0.99 + 0.999999); if (i99 < 1) i99 = 1
            printf "%.3f %.3f", v[i50] / 1000, v[i99] / 1000
        }')
    echo "$rps $pct $err"
}

# Every peer must route a call before it is measured.
for port in "$nginx_port" "$haproxy_port"; do
    for _ in $(seq 1 100); do
        call "$port" 1 1 1 >"$work/probe" 2>&1 && grep -q '1 succeeded' "$work/probe" && break
        sleep 0.1
    done
    grep -q '1 succeeded' "$work/probe" ||
        die "no gRPC call through the peer on port $port succeeded: $(cat "$work/probe" "$work/haproxy.log" "$work/nginx/error.log" 2>/dev/null)"
done

direct=$(measure "$backend_port")
nginx_row=$(measure "$nginx_port")
haproxy_row=$(measure "$haproxy_port")
proxied=$(measure "$proxy_port")
echo "gRPC unary (GrpcEcho/Echo), h2c, $conns connections x $streams streams, ${duration}s each"
printf '%-10s %12s %10s %10s %8s\n' target 'calls/s' 'p50 ms' 'p99 ms' errors
for row in "direct $direct" "nginx $nginx_row" "haproxy $haproxy_row" "edgeplane $proxied"; do
    set -- $row
    if [ "$2" = FAIL ]; then
        printf '%-10s %12s\n' "$1" FAIL
    else
        printf '%-10s %12.0f %10s %10s %8s\n' "$1" "$2" "$3" "$4" "$5"
    fi
done
set -- $proxied
e=$1
for row in "direct $direct" "nginx $nginx_row" "haproxy $haproxy_row"; do
    set -- $row
    if [ "$2" != FAIL ] && [ "$e" != FAIL ]; then
        awk -v p="$e" -v d="$2" -v n="$1" 'BEGIN { printf "edgeplane / %s: %.2f\n", n, p / d }'
    fi
done
