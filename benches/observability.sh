#!/usr/bin/env bash
# What observability costs: edgeplane's HTTP/1.1 keep-alive throughput (one proxy core, the
# 1x1 layout of benches/load.sh) with nothing on, with the JSON access log written to a file,
# and with every request's span exported over OTLP/HTTP to a local sink (nginx answering 200),
# each configuration run RUNS times (default 3) in alternation. Prints one line per run and
# the median requests per second and proxy CPU time per request (user + system) of each
# configuration with its ratio to "off"; on a machine whose speed varies between runs the CPU
# time per request is the steadier of the two. The request
# metrics are always on; their own per-request cost is benches/metrics.rs.
#
#   benches/observability.sh            (EDGEPLANE_BIN, LOAD_DURATION, RUNS as in load.sh)
#
# Everything listens on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-3}
work=$(mktemp -d)
trap 'kill "$sink_pid" 2>/dev/null || true; rm -rf "$work"' EXIT

# The OTLP sink: nginx on one port, answering every POST with an empty 200.
sink_port=${OBS_SINK_PORT:-28990}
mkdir -p "$work/sink"
cat >"$work/sink/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $work/sink/nginx.pid;
error_log $work/sink/error.log;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path $work/sink;
    server { listen 127.0.0.1:$sink_port; location / { client_max_body_size 64m; return 200; } }
}
CONF
taskset -c "${LOAD_CPU_GEN:-0}" nginx -c "$work/sink/nginx.conf" -p "$work/sink" &
sink_pid=$!
sleep 0.5

declare -A flags=(
    [off]=""
    [access-log]="--access-log json --access-log-file $work/access.log"
    [tracing]="--otlp-endpoint http://127.0.0.1:$sink_port --otlp-sample-ratio 1.0"
)
declare -A results cpus
for run in $(seq 1 "$runs"); do
    for config in off access-log tracing; do
        # The cell's requests per second, and the proxy's CPU time per request (user + system,
        # microseconds: load.sh's `cpu/user` column).
        # One run per call: this script takes the turns and the median itself.
        read -r out cpu < <(EDGEPLANE_FLAGS="${flags[$config]}" LOAD_NO_INSTALL=1 LOAD_RUNS=1 \
            benches/load.sh --proxies edgeplane --protocols http1 --layouts 1x1 2>/dev/null |
            awk '/ edgeplane / { r = ""; c = ""
                for (i = 1; i <= NF; i++) {
                    if (r == "" && $i ~ /^[0-9]+$/ && $i > 1000) r = $i
                    if (c == "" && $i ~ /^[0-9]+\.[0-9]\/[0-9]+\.[0-9]$/) { split($i, p, "/"); c = p[1] }
                }
                if (r != "") { print r, (c == "" ? 0 : c); found = 1; exit } }
                END { if (!found) print 0, 0 }' || true)
        echo "run $run $config: ${out:-?} rps, ${cpu:-?} us of CPU per request"
        results[$config]="${results[$config]:-} ${out:-0}"
        cpus[$config]="${cpus[$config]:-} ${cpu:-0}"
        rm -f "$work/access.log"
    done
done
# A run whose figures could not be read measured nothing: say so and fail, not a ratio of 0.
for config in off access-log tracing; do
    case " ${results[$config]} ${cpus[$config]} " in
    *" 0 "*) echo "error: a $config run gave no figures (benches/load.sh failed?)" >&2; failed=1 ;;
    esac
done
median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
off=$(echo "${results[off]}" | median)
off_cpu=$(echo "${cpus[off]}" | median)
for config in off access-log tracing; do
    m=$(echo "${results[$config]}" | median)
    c=$(echo "${cpus[$config]}" | median)
    awk -v n="$config" -v m="$m" -v o="$off" -v c="$c" -v oc="$off_cpu" 'BEGIN {
        printf "%-11s median %7d rps  %.3fx off   CPU %6.1f us/request  %.3fx off\n",
            n, m, (o > 0 ? m / o : 0), c, (oc > 0 ? c / oc : 0) }'
done
[ -z "${failed:-}" ] || exit 1
