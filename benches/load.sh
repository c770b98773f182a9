#!/usr/bin/env bash
# Side-by-side load benchmark: one fixed nginx backend, then the same requests sent to it
# directly and through nginx, HAProxy and edgeplane, each configured alike, for HTTP/1.1,
# HTTPS with HTTP/1.1, HTTPS with h2 and h2c, in up to four CPU layouts. A cell is one
# protocol in one layout; within a cell the proxies take turns (direct, nginx, haproxy,
# edgeplane, then again), LOAD_RUNS times (3), so a slow spell of the machine hits every proxy
# alike. Prints the median run of each proxy (its RPS, and the p50/p99 of that run), the
# ratios edgeplane/nginx, edgeplane/HAProxy and edgeplane/better peer per cell, and each
# proxy's 2-core/1-core scaling; with LOAD_RESULTS_MD=FILE, writes them as Markdown.
#
#   benches/load.sh [--quick] [--proxies LIST] [--protocols LIST] [--layouts LIST]
#
# CPU layouts, for a 2-core machine (cores LOAD_CPU_GEN=0 and LOAD_CPU_PROXY=1):
#   1x1        each proxy with 1 worker alone on core 1; wrk/h2load (1 thread) and the
#              backend (1 nginx worker) on core 0.
#   2x2        each proxy with 2 workers (nginx worker_processes 2, HAProxy nbthread 2,
#              edgeplane TOKIO_WORKER_THREADS=2: one runtime and one SO_REUSEPORT socket per
#              worker) on cores 0,1; wrk/h2load (2 threads) on cores 0,1; the backend on core 0.
#              The two cores are shared: the proxy gets what the load generator and the
#              backend leave.
#   1x1-fixed, 2x2-fixed
#              the same cores, but the request (`/fixed`) is answered by the proxy itself with a
#              302 redirect, no backend involved: the proxy's own client side (accept, parse,
#              route, respond). With the backend out of the way, 2x2-fixed/1x1-fixed is the
#              proxy's own scaling from one core to two (the load generator still shares them).
#
# Everything listens on 127.0.0.1 only. docs/benchmarks.md describes what is measured, the
# configuration of each peer and the caveats.
set -euo pipefail

usage() {
    cat <<'EOF'
usage: benches/load.sh [--quick] [--proxies LIST] [--protocols LIST] [--layouts LIST]

  --quick            2 s per run, 1 s warm-up, 1 run per cell (a smoke test, not a measurement)
  --proxies LIST     comma-separated subset of: direct,nginx,haproxy,edgeplane (default: all)
  --protocols LIST   subset of: http1,https1,h2,h2c (default: all)
  --layouts LIST     subset of: 1x1,2x2,1x1-fixed,2x2-fixed (default: all; see the header of
                     this script for the cores each uses)
  (LOAD_PROXIES, LOAD_PROTOCOLS and LOAD_LAYOUTS set the same lists)

Environment:
  LOAD_RUNS            runs of every proxy per cell, taken in turns; the median is reported
                       (default 3; --quick: 1)
  LOAD_DURATION        seconds measured per run (default 10; --quick: 2)
  LOAD_WARMUP          seconds of warm-up per run, not measured (default 2; --quick: 1)
  LOAD_CONNECTIONS     HTTP/1.1 client connections, wrk (default 64)
  LOAD_H2_CONNECTIONS  HTTP/2 client connections, h2load (default 8)
  LOAD_H2_STREAMS      concurrent streams per HTTP/2 connection, h2load (default 8)
  LOAD_UPSTREAM_POOL   idle upstream keep-alive connections per proxy worker (default 128)
  LOAD_PORT_BASE       first of the loopback ports used (default 28000; uses base..base+39)
  LOAD_CPU_GEN         core of the load generator and the backend (default 0)
  LOAD_CPU_PROXY       core of the proxy in the 1x1 layout (default 1)
  LOAD_RESULTS_MD      also write the results as Markdown to this file
  LOAD_KEEP=1          keep the working directory (configs, raw tool output)
  LOAD_NO_INSTALL=1    do not install missing tools with apt-get
  EDGEPLANE_BIN        use this edgeplane binary instead of running `cargo build --profile profiling`
  EDGEPLANE_FLAGS      extra flags for `edgeplane serve` (e.g. "--access-log json"), split on spaces
EOF
}

# ---------------------------------------------------------------------------------------------
# Options

quick=0
proxies=${LOAD_PROXIES:-direct,nginx,haproxy,edgeplane}
protocols=${LOAD_PROTOCOLS:-http1,https1,h2,h2c}
layouts=${LOAD_LAYOUTS:-1x1,2x2,1x1-fixed,2x2-fixed}
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) quick=1 ;;
    --proxies) proxies=${2:?}; shift ;;
    --protocols) protocols=${2:?}; shift ;;
    --layouts) layouts=${2:?}; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
    esac
    shift
done

if [ "$quick" = 1 ]; then
    duration=${LOAD_DURATION:-2}
    warmup=${LOAD_WARMUP:-1}
    runs=${LOAD_RUNS:-1}
else
    duration=${LOAD_DURATION:-10}
    warmup=${LOAD_WARMUP:-2}
    runs=${LOAD_RUNS:-3}
fi
case "$runs" in '' | *[!0-9]* | 0) echo "LOAD_RUNS must be a positive number" >&2; exit 2 ;; esac
h1_conns=${LOAD_CONNECTIONS:-64}
h2_conns=${LOAD_H2_CONNECTIONS:-8}
h2_streams=${LOAD_H2_STREAMS:-8}
pool=${LOAD_UPSTREAM_POOL:-128}
base=${LOAD_PORT_BASE:-28000}
cpu_gen=${LOAD_CPU_GEN:-0}
cpu_proxy=${LOAD_CPU_PROXY:-1}

IFS=, read -r -a proxy_list <<<"$proxies"
IFS=, read -r -a protocol_list <<<"$protocols"
IFS=, read -r -a layout_list <<<"$layouts"
for p in "${proxy_list[@]}"; do
    case "$p" in direct | nginx | haproxy | edgeplane) ;; *) echo "unknown proxy: $p" >&2; exit 2 ;; esac
done
for p in "${protocol_list[@]}"; do
    case "$p" in http1 | https1 | h2 | h2c) ;; *) echo "unknown protocol: $p" >&2; exit 2 ;; esac
done
for l in "${layout_list[@]}"; do
    case "$l" in 1x1 | 2x2 | 1x1-fixed | 2x2-fixed) ;; *) echo "unknown layout: $l" >&2; exit 2 ;; esac
done
wants() { # wants WORD LIST...
    local w=$1; shift
    local x
    for x in "$@"; do [ "$x" = "$w" ] && return 0; done
    return 1
}

repo=$(cd "$(dirname "$0")/.." && pwd)
log() { printf '[load] %s\n' "$*" >&2; }
die() { printf '[load] error: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------------------------------------
# Tools: nginx, HAProxy, wrk, h2load (nghttp2-client), openssl, taskset

ensure_tools() {
    local missing=0 t
    for t in nginx haproxy wrk h2load openssl taskset; do
        command -v "$t" >/dev/null 2>&1 || missing=1
    done
    [ "$missing" = 0 ] && return 0
    [ "${LOAD_NO_INSTALL:-0}" = 1 ] && die "missing tools (nginx haproxy wrk h2load openssl taskset) and LOAD_NO_INSTALL=1"
    command -v apt-get >/dev/null 2>&1 || die "missing tools and no apt-get: install nginx, haproxy, wrk, nghttp2-client (h2load), openssl"
    local sudo=""
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "missing tools; run as root or install them first"
        sudo=sudo
    fi
    log "installing nginx haproxy wrk nghttp2-client openssl with apt-get"
    $sudo apt-get update
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y nginx haproxy wrk nghttp2-client openssl util-linux
}
# Debian installs nginx and haproxy in /usr/sbin, often not on a non-root user's PATH.
case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH="$PATH:/usr/sbin:/sbin" ;; esac
ensure_tools

edgeplane_bin=""
if wants edgeplane "${proxy_list[@]}"; then
    if [ -n "${EDGEPLANE_BIN:-}" ]; then
        edgeplane_bin=$EDGEPLANE_BIN
        edgeplane_source="prebuilt binary from EDGEPLANE_BIN"
    else
        log "building edgeplane (cargo build --profile profiling)"
        (cd "$repo" && cargo build --profile profiling --locked --bin edgeplane)
        edgeplane_bin="${CARGO_TARGET_DIR:-$repo/target}/profiling/edgeplane"
        edgeplane_source="profiling build (release code, line tables) of $(git -C "$repo" describe --always --dirty 2>/dev/null || echo "an unknown commit")"
    fi
    [ -x "$edgeplane_bin" ] || die "edgeplane binary not found: $edgeplane_bin"
fi

# ---------------------------------------------------------------------------------------------
# Working directory, processes, cleanup

work=$(mktemp -d "${TMPDIR:-/tmp}/edgeplane-load.XXXXXX")
chmod 755 "$work" # nginx workers may run as another user when started by root
pids=()

# Running, as opposed to gone or exited and not yet waited for (a zombie).
running() {
    local state
    state=$(awk '{ sub(/^.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null) || return 1
    [ -n "$state" ] && [ "$state" != Z ]
}

stop_pid() {
    local pid=$1 i
    kill -TERM "$pid" 2>/dev/null || return 0
    for i in $(seq 50); do
        running "$pid" || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

cleanup() {
    local pid
    for pid in "${pids[@]}"; do stop_pid "$pid"; done
    pids=()
    if [ "${LOAD_KEEP:-0}" = 1 ]; then
        log "working directory kept: $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Starts a command in the background on CPUS, recording its pid; its output goes to LOGFILE.
# start CPUS LOGFILE CMD...
start() {
    local cpus=$1 logfile=$2
    shift 2
    taskset -c "$cpus" "$@" >"$logfile" 2>&1 &
    pids+=("$!")
    last_pid=$!
}

stop_last() {
    stop_pid "$1"
    local kept=() p
    for p in "${pids[@]}"; do [ "$p" != "$1" ] && kept+=("$p"); done
    pids=("${kept[@]+"${kept[@]}"}")
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ---------------------------------------------------------------------------------------------
# Ports (all on 127.0.0.1)

backend_http=$base          # the backend as every proxy's upstream (HTTP/1.1)
backend_tls=$((base + 1))   # the backend directly, TLS with ALPN h2 and http/1.1
backend_h2c=$((base + 2))   # the backend directly, h2c (prior knowledge)
nginx_http=$((base + 10))
nginx_tls=$((base + 11))
nginx_h2c=$((base + 12))
haproxy_http=$((base + 20))
haproxy_tls=$((base + 21))
haproxy_h2c=$((base + 22))
edgeplane_http=$((base + 30)) # HTTP/1.1 and h2c (prior knowledge) on one listener
edgeplane_tls=$((base + 31))
edgeplane_admin=$((base + 39))

for port in "$backend_http" "$backend_tls" "$backend_h2c" "$nginx_http" "$nginx_tls" "$nginx_h2c" \
    "$haproxy_http" "$haproxy_tls" "$haproxy_h2c" "$edgeplane_http" "$edgeplane_tls" "$edgeplane_admin"; do
    port_in_use "$port" && die "port $port on 127.0.0.1 is in use (set LOAD_PORT_BASE)"
done

# url PROXY PROTOCOL [PATH]
url() {
    local proxy=$1 proto=$2 path=${3:-/} port
    case "$proxy" in
    direct) case "$proto" in http1) port=$backend_http ;; https1 | h2) port=$backend_tls ;; h2c) port=$backend_h2c ;; esac ;;
    nginx) case "$proto" in http1) port=$nginx_http ;; https1 | h2) port=$nginx_tls ;; h2c) port=$nginx_h2c ;; esac ;;
    haproxy) case "$proto" in http1) port=$haproxy_http ;; https1 | h2) port=$haproxy_tls ;; h2c) port=$haproxy_h2c ;; esac ;;
    edgeplane) case "$proto" in http1 | h2c) port=$edgeplane_http ;; https1 | h2) port=$edgeplane_tls ;; esac ;;
    esac
    case "$proto" in
    http1 | h2c) echo "http://127.0.0.1:$port$path" ;;
    *) echo "https://127.0.0.1:$port$path" ;;
    esac
}

# ---------------------------------------------------------------------------------------------
# Certificate: self-signed ECDSA P-256, PEM files for nginx, one bundle for HAProxy, a
# kubernetes.io/tls Secret for edgeplane.

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -keyout "$work/tls.key" -out "$work/tls.crt" 2>"$work/openssl.log" ||
    { cat "$work/openssl.log" >&2; die "openssl could not make a certificate"; }
cat "$work/tls.crt" "$work/tls.key" >"$work/tls-bundle.pem"

# ---------------------------------------------------------------------------------------------
# Configurations

body="hello, world"

# The part every nginx configuration here shares: foreground, WORKERS processes, files under
# DIR, no access log, long keep-alive.
nginx_common() {
    local dir=$1 workers=$2
    cat <<EOF
daemon off;
worker_processes $workers;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 8192; }
http {
    access_log off;
    keepalive_requests 10000000;
    keepalive_timeout 120s;
    client_body_temp_path $dir/tmp-body;
    proxy_temp_path $dir/tmp-proxy;
    fastcgi_temp_path $dir/tmp-fastcgi;
    uwsgi_temp_path $dir/tmp-uwsgi;
    scgi_temp_path $dir/tmp-scgi;
EOF
}

# The backend: one nginx worker answering every request with a fixed 200, no access log.
write_backend_conf() {
    mkdir -p "$work/backend"
    {
        nginx_common "$work/backend" 1
        cat <<EOF
    server {
        listen 127.0.0.1:$backend_http;
        listen 127.0.0.1:$backend_tls ssl http2;
        ssl_certificate $work/tls.crt;
        ssl_certificate_key $work/tls.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        location / { default_type text/plain; return 200 "$body\n"; }
        location = /fixed { return 302 /; }
    }
    server {
        listen 127.0.0.1:$backend_h2c http2;
        location / { default_type text/plain; return 200 "$body\n"; }
        location = /fixed { return 302 /; }
    }
}
EOF
    } >"$work/backend/nginx.conf"
}

# nginx as a reverse proxy: WORKERS processes, keep-alive upstream pool, X-Forwarded-* set as
# edgeplane sets them, no access log.
write_nginx_conf() {
    local workers=$1
    mkdir -p "$work/nginx"
    {
        nginx_common "$work/nginx" "$workers"
        cat <<EOF
    upstream backend {
        server 127.0.0.1:$backend_http;
        keepalive $pool;
        keepalive_requests 10000000;
        keepalive_timeout 120s;
    }
    server {
        listen 127.0.0.1:$nginx_http;
        listen 127.0.0.1:$nginx_tls ssl http2;
        listen 127.0.0.1:$nginx_h2c http2;
        ssl_certificate $work/tls.crt;
        ssl_certificate_key $work/tls.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        location / {
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host \$http_host;
            proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto \$scheme;
            proxy_set_header X-Forwarded-Host \$http_host;
        }
        # The *-fixed layouts: answered here, no backend.
        location = /fixed { return 302 /; }
    }
}
EOF
    } >"$work/nginx/nginx.conf"
}

# HAProxy: WORKERS threads, connection reuse to the backend, X-Forwarded-* set, no logging.
write_haproxy_conf() {
    local workers=$1
    mkdir -p "$work/haproxy"
    cat >"$work/haproxy/haproxy.cfg" <<EOF
global
    nbthread $workers
    maxconn 4096
defaults
    mode http
    option http-keep-alive
    http-reuse always
    timeout connect 5s
    timeout client 120s
    timeout server 120s
    timeout http-keep-alive 120s
frontend bench
    bind 127.0.0.1:$haproxy_http
    bind 127.0.0.1:$haproxy_tls ssl crt $work/tls-bundle.pem alpn h2,http/1.1
    bind 127.0.0.1:$haproxy_h2c proto h2
    option forwardfor
    http-request set-header X-Forwarded-Proto https if { ssl_fc }
    http-request set-header X-Forwarded-Proto http if !{ ssl_fc }
    http-request set-header X-Forwarded-Host %[req.hdr(host)]
    # The *-fixed layouts: answered here, no backend.
    http-request redirect location / code 302 if { path /fixed }
    default_backend backend
backend backend
    server backend1 127.0.0.1:$backend_http
EOF
}

# edgeplane, standalone: a Gateway with an HTTP listener (HTTP/1.1 and h2c) and an HTTPS
# listener, one HTTPRoute to a Service whose EndpointSlice lists the backend. X-Forwarded-*
# are always set; edgeplane has no access log.
write_edgeplane_conf() {
    mkdir -p "$work/edgeplane/config"
    local crt key
    crt=$(base64 -w0 "$work/tls.crt")
    key=$(base64 -w0 "$work/tls.key")
    cat >"$work/edgeplane/config/bench.yaml" <<EOF
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
  listeners:
  - {name: http, protocol: HTTP, port: $edgeplane_http}
  - name: https
    protocol: HTTPS
    port: $edgeplane_tls
    tls: {mode: Terminate, certificateRefs: [{kind: Secret, name: bench-tls}]}
---
apiVersion: v1
kind: Secret
metadata: {name: bench-tls, namespace: default}
type: kubernetes.io/tls
data:
  tls.crt: $crt
  tls.key: $key
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: bench, namespace: default}
spec:
  parentRefs: [{name: bench}]
  rules:
  - backendRefs: [{name: backend, port: 80}]
  # The *-fixed layouts: answered by the proxy, no backend.
  - matches: [{path: {type: Exact, value: /fixed}}]
    filters:
    - type: RequestRedirect
      requestRedirect: {path: {type: ReplaceFullPath, replaceFullPath: /}, statusCode: 302}
---
apiVersion: v1
kind: Service
metadata: {name: backend, namespace: default}
spec:
  ports: [{name: http, port: 80, targetPort: $backend_http}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: backend-1
  namespace: default
  labels: {kubernetes.io/service-name: backend}
addressType: IPv4
ports: [{name: http, port: $backend_http}]
endpoints:
- addresses: [127.0.0.1]
  conditions: {ready: true}
EOF
}

# ---------------------------------------------------------------------------------------------
# Checks and load generation

# One request with h2load; succeeds when it got a 2xx (a 3xx when redirects_ok=1, the
# *-fixed layouts) over the expected protocol.
# check_one URL PROTOCOL OUTFILE
redirects_ok=0
check_one() {
    local u=$1 proto=$2 out=$3 flags=() want
    case "$proto" in
    http1 | https1) flags=(--h1); want="http/1.1" ;;
    h2) want="h2" ;;
    h2c) want="h2c" ;;
    esac
    timeout 10 h2load -n 1 -c 1 "${flags[@]}" "$u" >"$out" 2>&1 || return 1
    grep -q "^Application protocol: $want\$" "$out" || return 1
    if [ "$redirects_ok" = 1 ]; then
        grep -q "^status codes: 0 2xx, 1 3xx" "$out"
    else
        grep -q "^status codes: 1 2xx" "$out"
    fi
}

# Waits until every wanted protocol answers through PROXY on the current layout's path (at
# most 20 s): 2xx, or the 3xx of the `-fixed` layouts.
wait_ready() {
    local proxy=$1 i proto ok
    for i in $(seq 100); do
        ok=1
        for proto in "${protocol_list[@]}"; do
            check_one "$(url "$proxy" "$proto" "${path:-/}")" "$proto" "$work/check.out" || { ok=0; break; }
        done
        [ "$ok" = 1 ] && return 0
        sleep 0.2
    done
    return 1
}

# Parses wrk output: prints "RPS P50MS P99MS ERRORS REQUESTS" or "FAIL". Latencies come as
# "812.00us", "1.23ms", "1.02s" or "1.50m".
wrk_parse() {
    awk '
    function ms(v) {
        if (v ~ /us$/) return v / 1000
        if (v ~ /ms$/) return v + 0
        if (v ~ /m$/) return v * 60000
        if (v ~ /s$/) return v * 1000
        return v + 0
    }
    $1 == "50%" { p50 = ms($2) }
    $1 == "99%" { p99 = ms($2) }
    $1 == "Requests/sec:" { rps = $2 }
    /requests in/ { total = $1 }
    /Non-2xx or 3xx responses:/ { err += $NF }
    /Socket errors:/ { gsub(/,/, ""); err += $4 + $6 + $8 + $10 }
    END {
        if (total == "" || total == 0 || rps == "") { print "FAIL"; exit }
        printf "%.0f %.3f %.3f %d %d\n", rps, p50, p99, err, total
    }'
}

# Parses h2load output and its per-request log (start, status, microseconds): h2load prints
# no percentiles. Prints "RPS P50MS P99MS ERRORS REQUESTS" or "FAIL".
h2load_parse() {
    local out=$1 reqlog=$2
    local rps err total pct
    rps=$(awk '/^finished in/ { gsub(/,/, ""); print $4 }' "$out")
    total=$(awk '/^requests:/ { gsub(/,/, ""); print $8 }' "$out")
    err=$(awk -v ok3xx="$redirects_ok" '
        /^requests:/ { gsub(/,/, ""); e += $10 + $12 + $14 }
        /^status codes:/ { gsub(/,/, ""); e += (ok3xx ? 0 : $5) + $7 + $9 }
        END { print e + 0 }' "$out")
    if [ -z "$rps" ] || [ -z "$total" ] || [ "$total" = 0 ] || [ ! -s "$reqlog" ]; then
        echo FAIL
        return
    fi
    pct=$(cut -f3 "$reqlog" | sort -n | awk '
        { v[NR] = $1 }
        END {
            i50 = int(NR * 0.50 + 0.999999); if (i50 < 1) i50 = 1
            i99 = int(NR * 0.99 + 0.999999); if (i99 < 1) i99 = 1
            printf "%.3f %.3f", v[i50] / 1000, v[i99] / 1000
        }')
    printf '%.0f %s %d %d\n' "$rps" "$pct" "$err" "$total"
}

# CPU time (clock ticks, all threads) of a process and its children (the workers of an nginx
# master): "USER+SYSTEM USER".
cpu_ticks() {
    local pid=$1 p sum=0 user=0 t u
    for p in "$pid" $(pgrep -P "$pid" 2>/dev/null || true); do
        read -r t u < <(awk '{ sub(/^.*\) /, ""); print $12 + $13, $12 }' "/proc/$p/stat" 2>/dev/null || echo 0 0)
        sum=$((sum + t))
        user=$((user + u))
    done
    echo "$sum $user"
}
clk_tck=$(getconf CLK_TCK)

# Busy and total jiffies of the two cores of the layouts: "busy0 total0 busy1 total1".
core_jiffies() {
    awk -v a="cpu$cpu_gen" -v b="cpu$cpu_proxy" '
        $1 == a || $1 == b { t = 0; for (i = 2; i <= NF; i++) t += $i; busy[$1] = t - $5 - $6; tot[$1] = t }
        END { print busy[a], tot[a], busy[b], tot[b] }' /proc/stat
}

# Runs one cell: a warm-up run of the same tool (discarded), then the measured run, with the
# CPU time the serving process (the proxy; for direct, the backend) used during it.
# Prints "RPS P50MS P99MS ERRORS CPU_US_PER_REQUEST/USER_US_PER_REQUEST BUSY0/BUSY1" (percent
# busy of the two cores over the measured run, whatever ran on them) or "FAIL".
# measure PROTOCOL URL CPUS THREADS TAG SERVER_PID
measure() {
    local proto=$1 u=$2 cpus=$3 threads=$4 tag=$5 server=$6
    local out="$work/raw/$tag.out" reqlog="$work/raw/$tag.requests" r t0 t1 j0 j1 u0 u1
    local h2flags=(-t "$threads" -c "$h2_conns" -m "$h2_streams")
    case "$proto" in
    http1 | https1)
        taskset -c "$cpus" timeout $((warmup + 30)) \
            wrk -t "$threads" -c "$h1_conns" -d "${warmup}s" "$u" >"$work/raw/$tag.warmup" 2>&1 || true
        t0=$(cpu_ticks "$server"); j0=$(core_jiffies)
        taskset -c "$cpus" timeout $((duration + 30)) \
            wrk -t "$threads" -c "$h1_conns" -d "${duration}s" --latency "$u" >"$out" 2>&1 || { echo FAIL; return; }
        t1=$(cpu_ticks "$server"); j1=$(core_jiffies)
        r=$(wrk_parse <"$out")
        ;;
    h2 | h2c)
        taskset -c "$cpus" timeout $((warmup + 30)) \
            h2load "${h2flags[@]}" -D "$warmup" "$u" >"$work/raw/$tag.warmup" 2>&1 || true
        t0=$(cpu_ticks "$server"); j0=$(core_jiffies)
        taskset -c "$cpus" timeout $((duration + 30)) \
            h2load "${h2flags[@]}" -D "$duration" --log-file="$reqlog" "$u" >"$out" 2>&1 || { echo FAIL; return; }
        t1=$(cpu_ticks "$server"); j1=$(core_jiffies)
        local want=h2
        [ "$proto" = h2c ] && want=h2c
        grep -q "^Application protocol: $want\$" "$out" || { echo FAIL; return; }
        r=$(h2load_parse "$out" "$reqlog")
        [ "${LOAD_KEEP:-0}" = 1 ] || rm -f "$reqlog" # a line per request: tens of MB per cell
        ;;
    esac
    [ "$r" = FAIL ] && { echo FAIL; return; }
    read -r t0 u0 <<<"$t0"
    read -r t1 u1 <<<"$t1"
    echo "$r $j0 $j1" | awk -v ticks=$((t1 - t0)) -v uticks=$((u1 - u0)) -v hz="$clk_tck" '{
        b0 = ($10 - $6) / ($11 - $7 + ($11 == $7)) * 100
        b1 = ($12 - $8) / ($13 - $9 + ($13 == $9)) * 100
        printf "%s %s %s %s %.1f/%.1f %.0f/%.0f\n", $1, $2, $3, $4, ticks / hz * 1e6 / $5, uticks / hz * 1e6 / $5, b0, b1
    }'
}

# ---------------------------------------------------------------------------------------------
# Proxies

start_proxy() { # start_proxy PROXY WORKERS CPUS; 0 when it serves every wanted protocol
    local proxy=$1 workers=$2 cpus=$3
    case "$proxy" in
    direct) return 0 ;;
    nginx)
        write_nginx_conf "$workers"
        nginx -t -q -e "$work/nginx/error.log" -c "$work/nginx/nginx.conf" >"$work/nginx/test.log" 2>&1 ||
            { cat "$work/nginx/test.log" >&2; return 1; }
        start "$cpus" "$work/nginx/out.log" nginx -e "$work/nginx/error.log" -c "$work/nginx/nginx.conf"
        ;;
    haproxy)
        write_haproxy_conf "$workers"
        haproxy -c -q -f "$work/haproxy/haproxy.cfg" >"$work/haproxy/test.log" 2>&1 ||
            { cat "$work/haproxy/test.log" >&2; return 1; }
        start "$cpus" "$work/haproxy/out.log" haproxy -db -f "$work/haproxy/haproxy.cfg"
        ;;
    edgeplane)
        write_edgeplane_conf
        "$edgeplane_bin" check --config-dir "$work/edgeplane/config" >"$work/edgeplane/check.log" 2>&1 ||
            { cat "$work/edgeplane/check.log" >&2; return 1; }
        # wrk sends the IP address as SNI, which rustls ignores with a warning per handshake.
        start "$cpus" "$work/edgeplane/out.log" env TOKIO_WORKER_THREADS="$workers" RUST_LOG=info,rustls=error \
            "$edgeplane_bin" serve --config-dir "$work/edgeplane/config" \
            --admin-addr "127.0.0.1:$edgeplane_admin" --dashboard-addr 127.0.0.1:0 --drain-timeout 1s \
            --upstream-max-idle "$pool" ${EDGEPLANE_FLAGS:-}
        ;;
    esac
    proxy_pid=$last_pid
    wait_ready "$proxy"
}

# Negotiated TLS version and cipher of a proxy's HTTPS port, for the log.
tls_info() {
    local u=$1 hostport
    hostport=${u#https://}
    hostport=${hostport%/}
    timeout 5 openssl s_client -connect "$hostport" -alpn http/1.1 </dev/null 2>/dev/null |
        awk '/^New, / { sub(/^New, /, ""); print; exit }'
}

proxy_version() {
    case "$1" in
    direct) echo "backend $(nginx -v 2>&1 | sed 's/^nginx version: //')" ;;
    nginx) nginx -v 2>&1 | sed 's/^nginx version: //' ;;
    haproxy) haproxy -v | awk 'NR == 1 { print "haproxy " $3 }' ;;
    edgeplane) echo "$("$edgeplane_bin" --version) ($edgeplane_source)" ;;
    esac
}

# ---------------------------------------------------------------------------------------------
# Run

mkdir -p "$work/raw"
results="$work/results.tsv"
: >"$results"

# The cores and workers of LAYOUT: sets workers, proxy_cpus, gen_cpus, threads, path and
# redirects_ok.
layout_def() {
    case "$1" in
    1x1 | 1x1-fixed) workers=1; proxy_cpus=$cpu_proxy; gen_cpus=$cpu_gen; threads=1 ;;
    2x2 | 2x2-fixed) workers=2; proxy_cpus="$cpu_gen,$cpu_proxy"; gen_cpus="$cpu_gen,$cpu_proxy"; threads=2 ;;
    esac
    case "$1" in
    *-fixed) path=/fixed; redirects_ok=1 ;;
    *) path=/; redirects_ok=0 ;;
    esac
}

# One line per layout: which cores the proxy, the load generator and the backend use.
layout_lines() {
    local l what
    for l in "${layout_list[@]}"; do
        layout_def "$l"
        what="through the proxy to the backend"
        [ "$path" = /fixed ] && what="GET /fixed answered by the proxy (302), no backend"
        printf '%s: proxy %s worker(s) on core(s) %s; load generator %s thread(s) on core(s) %s; backend (nginx, 1 worker) on core %s; %s\n' \
            "$l" "$workers" "$proxy_cpus" "$threads" "$gen_cpus" "$cpu_gen" "$what"
    done
}
redirects_ok=0

write_backend_conf
start "$cpu_gen" "$work/backend/out.log" nginx -e "$work/backend/error.log" -c "$work/backend/nginx.conf"
backend_pid=$last_pid
wait_ready direct || { cat "$work/backend/error.log" "$work/check.out" >&2; die "the backend does not answer"; }
log "backend: nginx, 1 worker on core $cpu_gen, ports $backend_http (HTTP/1.1), $backend_tls (TLS), $backend_h2c (h2c)"
[ -n "$edgeplane_bin" ] && log "edgeplane: $edgeplane_bin"
layout_lines | while IFS= read -r line; do log "layout $line"; done

# The proxies of the current worker count, all running at once on their own ports (an idle
# proxy costs nothing), so that a cell can take them in turns. proxy_pid_of[PROXY] is the pid
# to measure (direct: the backend); proxy_ok[PROXY] is 1 when it started.
declare -A proxy_pid_of proxy_ok
running_workers=""
stop_proxies() {
    local p
    for p in "${!proxy_pid_of[@]}"; do
        [ "${proxy_pid_of[$p]}" = "$backend_pid" ] && continue
        if ! running "${proxy_pid_of[$p]}"; then
            log "  $p exited during the run; its last output:"
            tail -n 20 "$work/$p/out.log" | sed 's/^/    | /' >&2
        fi
        stop_last "${proxy_pid_of[$p]}"
    done
    proxy_pid_of=()
    proxy_ok=()
}
start_proxies() { # start_proxies WORKERS CPUS
    local p
    for p in "${proxy_list[@]}"; do
        proxy_pid=""
        [ "$p" = direct ] || log "starting $p (workers $1, cores $2)"
        if start_proxy "$p" "$1" "$2"; then
            proxy_ok[$p]=1
        else
            log "  $p does not answer every protocol within 20 s; checking each"
            proxy_ok[$p]=0
        fi
        proxy_pid_of[$p]=${proxy_pid:-$backend_pid}
    done
    running_workers=$1
}

for layout in "${layout_list[@]}"; do
    layout_def "$layout"
    if [ "$running_workers" != "$workers" ]; then
        stop_proxies
        start_proxies "$workers" "$proxy_cpus"
        if wants https1 "${protocol_list[@]}" || wants h2 "${protocol_list[@]}"; then
            for proxy in "${proxy_list[@]}"; do
                log "  $proxy TLS: $(tls_info "$(url "$proxy" https1)")"
            done
        fi
    fi
    for proto in "${protocol_list[@]}"; do
        for run in $(seq "$runs"); do
            for proxy in "${proxy_list[@]}"; do
                tag="$layout-$proto-$run-$proxy"
                u=$(url "$proxy" "$proto" "$path")
                if check_one "$u" "$proto" "$work/raw/$tag.check"; then
                    r=$(measure "$proto" "$u" "$gen_cpus" "$threads" "$tag" "${proxy_pid_of[$proxy]}")
                else
                    r=FAIL
                    log "  $proto: one request over $proto failed:"
                    sed 's/^/    | /' "$work/raw/$tag.check" >&2
                fi
                log "$layout $proto run $run/$runs $proxy: $r"
                printf '%s\t%s\t%s\t%s\t%s\n' "$proto" "$layout" "$proxy" "$run" "$r" >>"$results"
            done
        done
    done
done
stop_proxies

# ---------------------------------------------------------------------------------------------
# Report

proto_name() {
    case "$1" in
    http1) echo "HTTP/1.1" ;;
    https1) echo "HTTPS (HTTP/1.1)" ;;
    h2) echo "HTTPS (h2)" ;;
    h2c) echo "h2c" ;;
    esac
}

# The median run of every proxy in every cell: "PROTOCOL LAYOUT PROXY RPS P50 P99 ERRORS CPU
# BUSY RUNS" (tabs), RPS the median of the runs' RPS and P50, P99, CPU and BUSY those of the
# run with that RPS (for an even number of runs, the lower of the middle two); ERRORS is the
# sum over the runs; RUNS lists every run's RPS in order. A cell without any successful run
# prints FAIL for its figures.
medians() {
    awk -F'\t' '
        { key = $1 "\t" $2 "\t" $3; if (!(key in seen)) { seen[key] = 1; order[++n] = key }
          split($5, f, " "); all[key] = all[key] (all[key] == "" ? "" : "/") f[1]
          if (f[1] != "FAIL" && f[1] != "") { k = ++ok[key]; line[key, k] = $5; rps[key, k] = f[1] + 0 } }
        END {
            for (i = 1; i <= n; i++) {
                key = order[i]; m = ok[key] + 0
                if (m == 0) { printf "%s\tFAIL\t-\t-\t-\t-\t-\t%s\n", key, all[key]; continue }
                # Insertion sort of the successful runs by RPS.
                for (a = 1; a <= m; a++) idx[a] = a
                for (a = 2; a <= m; a++) for (b = a; b > 1 && rps[key, idx[b]] < rps[key, idx[b - 1]]; b--) { t = idx[b]; idx[b] = idx[b - 1]; idx[b - 1] = t }
                errs = 0
                for (a = 1; a <= m; a++) { split(line[key, a], g, " "); errs += g[4] }
                split(line[key, idx[int((m + 1) / 2)]], f, " ")
                printf "%s\t%d\t%.2f\t%.2f\t%d\t%s\t%s\t%s\n", key, f[1], f[2], f[3], errs, f[5], f[6], all[key]
            }
        }' "$results"
}

# Rows in the order protocol, layout, proxy, with ratios to nginx and to direct; tabs.
rows() {
    local proto layout proxy
    for proto in "${protocol_list[@]}"; do
        for layout in "${layout_list[@]}"; do
            for proxy in "${proxy_list[@]}"; do
                awk -F'\t' -v proto="$proto" -v layout="$layout" -v proxy="$proxy" -v pname="$(proto_name "$proto")" '
                    $1 == proto && $2 == layout { rps[$3] = $4; line[$3] = $0 }
                    END {
                        split(line[proxy], f, "\t")
                        if (f[4] == "FAIL" || f[4] == "") {
                            printf "%s\t%s\t%s\tFAILED\t-\t-\t-\t-\t-\t-\t-\t%s\n", pname, layout, proxy, f[10]
                            exit
                        }
                        rn = (rps["nginx"] != "" && rps["nginx"] != "FAIL" && rps["nginx"] > 0) ? sprintf("%.2f", f[4] / rps["nginx"]) : "-"
                        rd = (rps["direct"] != "" && rps["direct"] != "FAIL" && rps["direct"] > 0) ? sprintf("%.2f", f[4] / rps["direct"]) : "-"
                        printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", pname, layout, proxy, f[4], f[5], f[6], rn, rd, f[7], f[8], f[9], f[10]
                    }' "$work/medians.tsv"
            done
        done
    done
}

# edgeplane against its peers in every cell, medians to medians: "PROTOCOL LAYOUT
# EDGEPLANE/NGINX EDGEPLANE/HAPROXY EDGEPLANE/BETTER-PEER" (tabs; "-" where one is missing).
ratios() {
    local proto layout
    for proto in "${protocol_list[@]}"; do
        for layout in "${layout_list[@]}"; do
            awk -F'\t' -v proto="$proto" -v layout="$layout" -v pname="$(proto_name "$proto")" '
                $1 == proto && $2 == layout && $4 != "FAIL" { rps[$3] = $4 }
                function r(a, b) { return (a > 0 && b > 0) ? sprintf("%.2f", a / b) : "-" }
                END {
                    e = rps["edgeplane"] + 0; n = rps["nginx"] + 0; h = rps["haproxy"] + 0
                    printf "%s\t%s\t%s\t%s\t%s\n", pname, layout, r(e, n), r(e, h), r(e, (n > h ? n : h))
                }' "$work/medians.tsv"
        done
    done
}

# Every proxy's 2-core/1-core scaling per protocol: median RPS of 2x2 over 1x1, and of
# 2x2-fixed over 1x1-fixed (tabs; "-" where a layout was not run).
scaling() {
    local proto proxy
    for proto in "${protocol_list[@]}"; do
        for proxy in "${proxy_list[@]}"; do
            awk -F'\t' -v proto="$proto" -v proxy="$proxy" -v pname="$(proto_name "$proto")" '
                $1 == proto && $3 == proxy && $4 != "FAIL" { rps[$2] = $4 }
                function r(a, b) { return (a > 0 && b > 0) ? sprintf("%.2f", a / b) : "-" }
                END { printf "%s\t%s\t%s\t%s\n", pname, proxy, r(rps["2x2"], rps["1x1"]), r(rps["2x2-fixed"], rps["1x1-fixed"]) }
            ' "$work/medians.tsv"
        done
    done
}

# Aligns tab-separated lines into columns (the first LEFT columns left-aligned).
columns() {
    awk -F'\t' -v left="$1" '
        { for (i = 1; i <= NF; i++) { cell[NR, i] = $i; if (length($i) > w[i]) w[i] = length($i) } if (NF > n) n = NF }
        END {
            for (r = 1; r <= NR; r++) {
                line = ""
                for (i = 1; i <= n; i++) line = line sprintf(i <= left ? "%-*s  " : "%*s  ", w[i], cell[r, i])
                sub(/ +$/, "", line)
                print line
            }
        }'
}

# Markdown table rows from tab-separated lines.
md_rows() { awk -F'\t' '{ line = "|"; for (i = 1; i <= NF; i++) line = line " " $i " |"; print line }'; }

medians >"$work/medians.tsv"
header=$'protocol\tlayout\tproxy\tRPS\tp50 ms\tp99 ms\tvs nginx\tvs direct\terrors\tCPU us/req all/user\tbusy %\truns RPS'
ratio_header=$'protocol\tlayout\tedgeplane/nginx\tedgeplane/HAProxy\tedgeplane/better peer'
scaling_header=$'protocol\tproxy\t2x2/1x1\t2x2-fixed/1x1-fixed'
machine="$(grep -m1 '^model name' /proc/cpuinfo | sed 's/^model name[[:space:]]*: //'), $(nproc) CPUs, Linux $(uname -r)"
versions="$(proxy_version direct); "
for p in "${proxy_list[@]}"; do [ "$p" = direct ] || versions="$versions$(proxy_version "$p"); "; done
versions="${versions}$(wrk -v 2>&1 | awk 'NR == 1 { print $1 " " $2 }'); $(h2load --version | head -n 1)"
settings="${runs} run(s) per proxy and cell, the proxies in turns; ${duration} s per run after ${warmup} s warm-up; wrk ${h1_conns} connections; h2load ${h2_conns} connections x ${h2_streams} streams; load generator threads = workers"
[ "$quick" = 1 ] && settings="$settings (--quick: a smoke test, not a measurement)"
method="RPS: the median of the runs; p50, p99, CPU and busy %: of the median run; errors: all runs; runs RPS: every run in order. CPU us/req: CPU time of the proxy (for direct: the backend) per request, all of it (user and kernel) / in user space; busy %: how busy cores $cpu_gen/$cpu_proxy were during the run, whatever ran on them"

echo
echo "Side-by-side load, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "machine: $machine"
echo "versions: $versions"
echo "settings: $settings"
echo "CPU layouts:"
layout_lines | sed 's/^/  /'
echo "method: $method"
echo
{ echo "$header"; rows; } | columns 3
echo
{ echo "$ratio_header"; ratios; } | columns 2
# The scaling table only when a layout was run on one core and on two.
pairs=0
{ wants 1x1 "${layout_list[@]}" && wants 2x2 "${layout_list[@]}"; } && pairs=1
{ wants 1x1-fixed "${layout_list[@]}" && wants 2x2-fixed "${layout_list[@]}"; } && pairs=1
if [ "$pairs" = 1 ]; then
    echo
    { echo "$scaling_header"; scaling; } | columns 2
fi

if [ -n "${LOAD_RESULTS_MD:-}" ]; then
    {
        echo "Measured $(date -u +%Y-%m-%d) on $machine."
        echo
        echo "- Versions: $versions."
        echo "- Settings: $settings."
        echo "- CPU layouts:"
        layout_lines | sed 's/^/  - /'
        echo "- Method: $method."
        echo
        echo "| Protocol | Layout | Proxy | RPS | p50 (ms) | p99 (ms) | vs nginx | vs direct | errors | CPU µs/req all/user | busy % | runs RPS |"
        echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
        rows | md_rows
        echo
        echo "| Protocol | Layout | edgeplane/nginx | edgeplane/HAProxy | edgeplane/better peer |"
        echo "|---|---|---:|---:|---:|"
        ratios | md_rows
        if [ "$pairs" = 1 ]; then
            echo
            echo "| Protocol | Proxy | 2x2/1x1 | 2x2-fixed/1x1-fixed |"
            echo "|---|---|---:|---:|"
            scaling | md_rows
        fi
    } >"$LOAD_RESULTS_MD"
    log "Markdown written to $LOAD_RESULTS_MD"
fi

if grep -q 'FAIL' "$results"; then
    log "some cells failed (see above; LOAD_KEEP=1 keeps the raw output)"
    exit 1
fi
