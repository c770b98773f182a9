#!/usr/bin/env bash
# Bulk TCP throughput: iperf3 through nothing (direct), through nginx (`stream` module), HAProxy
# in TCP mode and edgeplane (a Gateway TCP listener and a TCPRoute), one after the other on
# 127.0.0.1, each proxy with one worker on the same core. Prints one line per peer with the
# received Gbit/s and its ratio to direct.
#
#   benches/tcp.sh [--quick]
#
# Environment:
#   TCP_DURATION       seconds measured per peer (default 10; --quick: 3)
#   TCP_STREAMS        parallel iperf3 streams (default 1)
#   TCP_PORT_BASE      first of the loopback ports used (default 29000; uses base..base+4)
#   TCP_CPU_GEN        core of iperf3 client and server (default 0)
#   TCP_CPU_PROXY      core of the proxy (default 1)
#   TCP_NO_INSTALL=1   do not install missing tools with apt-get
#   EDGEPLANE_BIN      use this edgeplane binary instead of running `cargo build --profile profiling`
set -euo pipefail

duration=${TCP_DURATION:-10}
if [ "${1:-}" = "--quick" ]; then
    duration=${TCP_DURATION:-3}
elif [ -n "${1:-}" ]; then
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
streams=${TCP_STREAMS:-1}
base=${TCP_PORT_BASE:-29000}
cpu_gen=${TCP_CPU_GEN:-0}
cpu_proxy=${TCP_CPU_PROXY:-1}
backend=$base
haproxy_port=$((base + 1))
edgeplane_port=$((base + 2))
admin=$((base + 3))
nginx_port=$((base + 4))

need() {
    command -v "$1" >/dev/null 2>&1 && return 0
    if [ "${TCP_NO_INSTALL:-}" = 1 ]; then
        echo "error: $1 is missing" >&2
        exit 1
    fi
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd=sudo
    $sudo_cmd apt-get install -y "$2" >/dev/null
}
need iperf3 iperf3
need haproxy haproxy
need nginx nginx
stream_module=/usr/lib/nginx/modules/ngx_stream_module.so
if [ ! -f "$stream_module" ]; then
    # Debian ships nginx's stream module as a package of its own.
    [ "${TCP_NO_INSTALL:-}" = 1 ] && { echo "error: $stream_module is missing" >&2; exit 1; }
    $([ "$(id -u)" -eq 0 ] || echo sudo) apt-get install -y libnginx-mod-stream >/dev/null
fi
need jq jq

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${EDGEPLANE_BIN:-}
if [ -z "$bin" ]; then
    (cd "$root" && cargo build --profile profiling --bin edgeplane >/dev/null)
    bin="$root/target/profiling/edgeplane"
fi

work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

taskset -c "$cpu_gen" iperf3 -s -B 127.0.0.1 -p "$backend" >"$work/iperf3-server.log" 2>&1 &
pids+=($!)

cat >"$work/haproxy.cfg" <<EOF
global
    maxconn 4096
defaults
    mode tcp
    timeout connect 5s
    timeout client 120s
    timeout server 120s
frontend bench
    bind 127.0.0.1:$haproxy_port
    default_backend backend
backend backend
    server backend1 127.0.0.1:$backend
EOF
taskset -c "$cpu_proxy" haproxy -db -f "$work/haproxy.cfg" >"$work/haproxy.log" 2>&1 &
pids+=($!)

mkdir -p "$work/nginx"
cat >"$work/nginx/nginx.conf" <<EOF
load_module $stream_module;
worker_processes 1;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 4096; }
stream {
    server {
        listen 127.0.0.1:$nginx_port;
        proxy_pass 127.0.0.1:$backend;
    }
}
EOF
taskset -c "$cpu_proxy" nginx -e "$work/nginx/error.log" -c "$work/nginx/nginx.conf" \
    >"$work/nginx/out.log" 2>&1 &
pids+=($!)

mkdir -p "$work/config"
cat >"$work/config/bench.yaml" <<EOF
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: edgeplane}
spec: {controllerName: edgeplane.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: bench, namespace: default}
spec:
  gatewayClassName: edgeplane
  addresses: [{type: IPAddress, value: 127.0.0.1}]
  listeners:
  - {name: tcp, protocol: TCP, port: $edgeplane_port}
---
apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {name: bench, namespace: default}
spec:
  parentRefs: [{name: bench}]
  rules:
  - backendRefs: [{name: backend, port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: backend, namespace: default}
spec:
  ports: [{name: tcp, port: 80, targetPort: $backend}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: backend-1
  namespace: default
  labels: {kubernetes.io/service-name: backend}
addressType: IPv4
ports: [{name: tcp, port: $backend}]
endpoints:
- addresses: [127.0.0.1]
  conditions: {ready: true}
EOF
"$bin" check --config-dir "$work/config" >"$work/check.log" 2>&1 || { cat "$work/check.log" >&2; exit 1; }
taskset -c "$cpu_proxy" "$bin" serve --config-dir "$work/config" --admin-addr "127.0.0.1:$admin" \
    --drain-timeout 1s >"$work/edgeplane.log" 2>&1 &
pids+=($!)

for _ in $(seq 1 100); do
    curl -fs "http://127.0.0.1:$admin/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done

# Received Gbit/s of one iperf3 run against PORT.
measure() {
    taskset -c "$cpu_gen" iperf3 -c 127.0.0.1 -p "$1" -t "$duration" -P "$streams" -J |
        jq '.end.sum_received.bits_per_second / 1e9'
}

direct=$(measure "$backend")
printf '%-10s %8s %10s\n' peer Gbit/s vs-direct
for peer in direct nginx haproxy edgeplane; do
    case $peer in
        direct) g=$direct ;;
        nginx) g=$(measure "$nginx_port") ;;
        haproxy) g=$(measure "$haproxy_port") ;;
        edgeplane) g=$(measure "$edgeplane_port") ;;
    esac
    printf '%-10s %8.2f %9.0f%%\n' "$peer" "$g" "$(echo "$g * 100 / $direct" | bc -l)"
done
