#!/usr/bin/env bash
# User-space instructions per proxied request, counted by valgrind's callgrind, for nginx,
# HAProxy and edgeplane proxying HTTP/1.1 keep-alive requests to one nginx backend. Unlike
# requests per second, the count does not depend on what else the machine is doing or on the
# virtual machine's cache and TLB behaviour: it is the same for the same binary and load,
# so it compares the proxies' own code across runs and machines. The kernel's share (the
# socket work) is not counted.
#
#   benches/instructions.sh [--proxies nginx,haproxy,edgeplane]
#
# What logging and tracing cost, counted the same way: `nginx-log` is nginx with a JSON
# access log of the same fields to a file (64 KiB buffer), `edgeplane-log` edgeplane with its
# JSON access log to a file, `edgeplane-trace` edgeplane exporting every request's span over
# OTLP/HTTP to a local sink (nginx answering 200 on core 0), e.g.
#   benches/instructions.sh --proxies nginx,nginx-log,edgeplane,edgeplane-log,edgeplane-trace
#
# Each proxy runs with one worker under callgrind, pinned to core 1; wrk (1 thread, 16
# connections) and the backend run on core 0. After 3 s of warm-up the counters are zeroed,
# wrk runs for INSTR_SECONDS (default 10), and the instructions executed by the whole proxy
# process are divided by the requests wrk completed. Everything listens on 127.0.0.1.
# INSTR_WORKERS=2 runs edgeplane with two data-plane workers instead (callgrind runs one thread
# at a time, so this counts what two workers add per request, not parallel speed).
#
# INSTR_PROTOCOL=h2c counts h2c (HTTP/2 with prior knowledge) requests instead: h2load with 8
# connections of 8 streams each in place of wrk (nginx `listen ... http2`, HAProxy `proto h2`,
# edgeplane's HTTP listener, which serves h2c beside HTTP/1.1); upstream stays HTTP/1.1.
#
# INSTR_KEEP=DIR copies each proxy's callgrind output there (DIR/NAME.callgrind) for
# `callgrind_annotate --inclusive=yes` and `--tree=caller`; the figures of a request are the
# counts divided by the requests counted.
#
# glibc copies blocks of 2 KiB and more with `rep movsb`, one instruction that callgrind counts
# once per byte moved; every proxy runs with GLIBC_TUNABLES raising that threshold, so that its
# copies are counted as the vector instructions glibc uses below it (INSTR_REP_MOVSB=1 keeps
# glibc's default).
set -euo pipefail

proxies=nginx,haproxy,edgeplane
while [ $# -gt 0 ]; do
    case "$1" in
    --proxies) proxies=${2:?}; shift ;;
    -h | --help) sed -n '2,35p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
    shift
done
seconds=${INSTR_SECONDS:-10}
protocol=${INSTR_PROTOCOL:-http1}
case "$protocol" in http1 | h2c) ;; *) echo "INSTR_PROTOCOL: http1 or h2c, not $protocol" >&2; exit 2 ;; esac
base=${INSTR_PORT_BASE:-29100}
cd "$(dirname "$0")/.."

need=()
for tool in valgrind:valgrind nginx:nginx haproxy:haproxy wrk:wrk h2load:nghttp2-client taskset:util-linux curl:curl; do
    command -v "${tool%%:*}" >/dev/null || need+=("${tool#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi
bin=${EDGEPLANE_BIN:-}
if [ -z "$bin" ] && [[ ,$proxies, == *,edgeplane* ]]; then
    cargo build --profile profiling --locked --bin edgeplane
    bin=target/profiling/edgeplane
fi

work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

if [ "${INSTR_REP_MOVSB:-0}" != 1 ]; then
    export GLIBC_TUNABLES=glibc.cpu.x86_rep_movsb_threshold=0xffffffffffffffff
fi
backend=$base
# The proxies' listen options for the protocol counted.
nginx_listen="" haproxy_bind=""
if [ "$protocol" = h2c ]; then
    nginx_listen=" http2" haproxy_bind=" proto h2"
fi
mkdir -p "$work/backend" "$work/nginx" "$work/edgeplane"
cat >"$work/backend/nginx.conf" <<EOF
worker_processes 1; daemon off; pid $work/backend/nginx.pid; error_log $work/backend/error.log;
events { worker_connections 4096; }
http { access_log off; keepalive_requests 10000000;
  server { listen 127.0.0.1:$backend; location / { return 200 "hello, world\n"; } } }
EOF
cat >"$work/nginx/nginx.conf" <<EOF
worker_processes 1; master_process off; daemon off; pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log;
events { worker_connections 4096; }
http { access_log off; keepalive_requests 10000000;
  upstream backend { server 127.0.0.1:$backend; keepalive 128; }
  server { listen 127.0.0.1:$((base + 1))$nginx_listen;
    location / { proxy_pass http://backend; proxy_http_version 1.1;
      proxy_set_header Connection ""; proxy_set_header Host \$http_host;
      proxy_set_header X-Forwarded-For \$remote_addr; proxy_set_header X-Forwarded-Proto \$scheme;
      proxy_set_header X-Forwarded-Host \$http_host; } } }
EOF
# The same nginx with a JSON access log of the fields of edgeplane's line that nginx has.
mkdir -p "$work/nginx-log"
sed -e "s|access_log off;|log_format line escape=json '{\"time\":\"\$time_iso8601\",\"clientAddress\":\"\$remote_addr\",\"method\":\"\$request_method\",\"host\":\"\$host\",\"path\":\"\$request_uri\",\"protocol\":\"\$server_protocol\",\"status\":\$status,\"duration\":\$request_time,\"requestBytes\":\$request_length,\"responseBytes\":\$bytes_sent,\"upstream\":\"\$upstream_addr\",\"upstreamTime\":\$upstream_response_time,\"userAgent\":\"\$http_user_agent\",\"requestId\":\"\$request_id\"}'; access_log $work/nginx-log/access.log line buffer=64k flush=1s;|" \
    -e "s|$work/nginx/|$work/nginx-log/|g" \
    -e "s|listen 127.0.0.1:$((base + 1))|listen 127.0.0.1:$((base + 5))|" \
    "$work/nginx/nginx.conf" >"$work/nginx-log/nginx.conf"
# The OTLP sink of edgeplane-trace: nginx answering every POST with an empty 200.
mkdir -p "$work/sink"
cat >"$work/sink/nginx.conf" <<EOF
worker_processes 1; daemon off; pid $work/sink/nginx.pid; error_log $work/sink/error.log;
events { worker_connections 256; }
http { access_log off; client_body_temp_path $work/sink;
  server { listen 127.0.0.1:$((base + 6)); location / { client_max_body_size 64m; return 200; } } }
EOF
cat >"$work/haproxy.cfg" <<EOF
global
    nbthread 1
defaults
    mode http
    timeout connect 5s
    timeout client 120s
    timeout server 120s
    option http-keep-alive
    http-reuse always
frontend proxy
    bind 127.0.0.1:$((base + 2))$haproxy_bind
    option forwardfor
    http-request set-header X-Forwarded-Proto http
    http-request set-header X-Forwarded-Host %[req.hdr(host)]
    default_backend backend
backend backend
    server b1 127.0.0.1:$backend
EOF
cat >"$work/edgeplane/bench.yaml" <<EOF
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
  listeners: [{name: http, protocol: HTTP, port: $((base + 3))}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: bench, namespace: default}
spec:
  parentRefs: [{name: bench}]
  rules: [{backendRefs: [{name: backend, port: 80}]}]
---
apiVersion: v1
kind: Service
metadata: {name: backend, namespace: default}
spec: {ports: [{name: http, port: 80, targetPort: $backend}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: backend-1, namespace: default, labels: {kubernetes.io/service-name: backend}}
addressType: IPv4
ports: [{name: http, port: $backend}]
endpoints: [{addresses: [127.0.0.1], conditions: {ready: true}}]
EOF

taskset -c 0 nginx -c "$work/backend/nginx.conf" -p "$work/backend" &
pids+=($!)

# load URL SECONDS: sends the protocol's load for SECONDS and prints the requests completed.
load() {
    case "$protocol" in
    http1) taskset -c 0 wrk -t1 -c16 -d"${2}s" "$1" | awk '/requests in/ { print $1 }' ;;
    h2c) taskset -c 0 h2load -c8 -m8 -D "$2" "$1" | awk '/^requests:/ { print $8 }' ;;
    esac
}

# count NAME PORT COMMAND...: runs COMMAND under callgrind and prints its figures.
count() {
    local name=$1 port=$2
    shift 2
    local out=$work/$name.callgrind
    taskset -c 1 valgrind --tool=callgrind --callgrind-out-file="$out" "$@" >"$work/$name.log" 2>&1 &
    local vpid=$!
    pids+=("$vpid")
    local url=http://127.0.0.1:$port/ up=0 curl_flags=()
    [ "$protocol" = h2c ] && curl_flags=(--http2-prior-knowledge)
    for _ in $(seq 300); do
        if curl -sf "${curl_flags[@]}" -o /dev/null "$url"; then up=1; break; fi
        sleep 0.2
    done
    if [ "$up" = 0 ]; then
        echo "$name: did not answer on $url" >&2
        cat "$work/$name.log" >&2
        return 1
    fi
    load "$url" 3 >/dev/null
    callgrind_control -z "$vpid" >/dev/null 2>&1
    local requests
    requests=$(load "$url" "$seconds")
    callgrind_control -d "$vpid" >/dev/null 2>&1
    sleep 1
    kill "$vpid" 2>/dev/null || true
    wait "$vpid" 2>/dev/null || true
    local dump total
    dump=$(ls -t "$out".* | head -1)
    total=$(callgrind_annotate "$dump" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
    if [ -n "${INSTR_KEEP:-}" ]; then
        mkdir -p "$INSTR_KEEP"
        cp "$dump" "$INSTR_KEEP/$name.callgrind"
        echo "$requests" >"$INSTR_KEEP/$name.requests"
    fi
    printf '| %s | %s | %s | %s |\n' "$name" "$requests" "$total" "$((total / requests))"
}

label="HTTP/1.1"
[ "$protocol" = h2c ] && label="h2c (prior knowledge, 8 connections x 8 streams)"
echo "User-space instructions per proxied $label request (callgrind), $(date -u +%Y-%m-%dT%H:%MZ)"
echo
echo "| proxy | requests counted | instructions | per request |"
echo "|---|---:|---:|---:|"
IFS=, read -ra list <<<"$proxies"
for proxy in "${list[@]}"; do
    case "$proxy" in
    nginx) count nginx $((base + 1)) nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" ;;
    nginx-log) count nginx-log $((base + 5)) nginx -c "$work/nginx-log/nginx.conf" -p "$work/nginx-log" ;;
    haproxy) count haproxy $((base + 2)) haproxy -db -f "$work/haproxy.cfg" ;;
    edgeplane | edgeplane-log | edgeplane-trace)
        flags=()
        case "$proxy" in
        edgeplane-log) flags=(--access-log json --access-log-file "$work/edgeplane/access.log") ;;
        edgeplane-trace)
            if [ -z "${sink_pid:-}" ]; then
                taskset -c 0 nginx -c "$work/sink/nginx.conf" -p "$work/sink" &
                sink_pid=$!
                pids+=("$sink_pid")
            fi
            flags=(--otlp-endpoint "http://127.0.0.1:$((base + 6))" --otlp-sample-ratio 1.0)
            ;;
        esac
        TOKIO_WORKER_THREADS=${INSTR_WORKERS:-1} RUST_LOG=warn count "$proxy" $((base + 3)) "$bin" serve \
            --config-dir "$work/edgeplane" --admin-addr "127.0.0.1:$((base + 4))" \
            --dashboard-addr 127.0.0.1:0 \
            --upstream-max-idle 128 "${flags[@]}"
        ;;
    *) echo "unknown proxy: $proxy" >&2; exit 2 ;;
    esac
done
