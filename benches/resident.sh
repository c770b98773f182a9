#!/usr/bin/env bash
# Resident memory by route count: `edgeplane serve --config-dir` on N route files of the
# standalone benchmark's shape (benches/route-files.sh), for each N of RESIDENT_ROUTES
# (default 0 and 5000), read 3 s after `/readyz` turned 200: `VmRSS`, `RssFile` and `RssAnon`
# of /proc/PID/status, the `Rss` of the binary's executable mapping (its code) and of all its
# mappings in /proc/PID/smaps, and RSS / N. Memory figures: valid with other builds running.
#
#   benches/resident.sh target-rel/release/edgeplane
#   RESIDENT_ROUTES=0,1000,5000 benches/resident.sh path/to/edgeplane
#
# Loopback only (a random 127.x.y.z, ports 8080 and 18482); nothing is asserted.
set -euo pipefail

bin=${1:?usage: benches/resident.sh BIN}
cd "$(dirname "$0")/.."
# shellcheck source=benches/route-files.sh
. benches/route-files.sh
work=$(mktemp -d)
server=""
cleanup() {
    [ -z "$server" ] || kill -KILL "$server" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
bind="127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))"
admin="$bind:18482"

mib() { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }
# The Rss (KiB) of PID's mappings of FILE: the executable one with `x`, else all of them.
mapped() {
    awk -v file="$2" -v exec_only="$3" '
        /^[0-9a-f]+-[0-9a-f]+ / { on = ($NF == file) && (!exec_only || $2 ~ /x/) }
        on && /^Rss:/ { kib += $2 }
        END { print kib + 0 }' "/proc/$1/smaps"
}

echo "| routes | RSS | file-backed | the binary's code | all the binary's mappings | anonymous | RSS / N |"
echo "|---|---|---|---|---|---|---|"
IFS=, read -ra sizes <<<"${RESIDENT_ROUTES:-0,5000}"
real=$(readlink -f "$bin")
for n in "${sizes[@]}"; do
    rm -rf "$work/config"
    route_files "$work/config" "$n"
    "$bin" serve --config-dir "$work/config" --bind-address "$bind" --admin-addr "$admin" \
        --dashboard-addr 127.0.0.1:0 >"$work/serve.log" 2>&1 &
    server=$!
    ready=0
    for _ in $(seq 600); do
        kill -0 "$server" 2>/dev/null || break
        if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$admin/readyz")" = 200 ]; then
            ready=1
            break
        fi
        sleep 0.1
    done
    [ "$ready" = 1 ] || { cat "$work/serve.log" >&2; exit 1; }
    sleep 3
    status=$(cat "/proc/$server/status")
    field() { awk -v f="$1:" '$1 == f { print $2 }' <<<"$status"; }
    rss=$(field VmRSS)
    code=$(mapped "$server" "$real" 1)
    all=$(mapped "$server" "$real" 0)
    per=""
    [ "$n" = 0 ] || per=$(awk -v k="$rss" -v n="$n" 'BEGIN { printf "%.1f KiB", k / n }')
    printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$n" "$(mib "$rss")" "$(mib "$(field RssFile)")" \
        "$(mib "$code")" "$(mib "$all")" "$(mib "$(field RssAnon)")" "$per"
    kill -KILL "$server"
    wait "$server" 2>/dev/null || true
    server=""
done
