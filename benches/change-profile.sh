#!/usr/bin/env bash
# One change's instructions end to end: `edgeplane serve --config-dir` on N route files of the
# standalone benchmark's shape (benches/route-files.sh) under callgrind, instrumentation
# switched on after the first load, then CHANGE_COUNT route files added one at a time (each
# waited for until its table is published and its status sealed), then the counts dumped.
# Every thread of the process is counted: the file provider, the reconciler's thread
# (translation, metric handles, sealing, the problem set) and the async workers. Prints the
# inclusive instructions per change of the parts named below (a part absent from the profile
# is named as such); the callgrind file is kept. Fails when callgrind wrote no profile.
#
#   benches/change-profile.sh target-rel/profiling/edgeplane
#   CHANGE_ROUTES=10000 CHANGE_COUNT=5 CHANGE_OUT=/abs/path.cg benches/change-profile.sh BIN
#
# Build BIN with the `profiling` profile (line tables). Instruction counts do not depend on
# the machine's load. Loopback only (a random 127.x.y.z, ports 8080 and 18482); nothing is
# asserted.
set -euo pipefail

bin=$(readlink -f "${1:?usage: benches/change-profile.sh BIN}")
cd "$(dirname "$0")/.."
# shellcheck source=benches/route-files.sh
. benches/route-files.sh
routes=${CHANGE_ROUTES:-50000}
changes=${CHANGE_COUNT:-3}
work=$(mktemp -d)
out=${CHANGE_OUT:-$work/callgrind.out}
server=""
cleanup() {
    [ -z "$server" ] || kill -KILL "$server" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work/config"
}
trap cleanup EXIT
route_files "$work/config" "$routes"
bind="127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))"
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" \
    "$bin" serve --config-dir "$work/config" --bind-address "$bind" \
    --admin-addr "$bind:18482" --dashboard-addr 127.0.0.1:0 >"$work/serve.log" 2>&1 &
server=$!
published() { grep -c 'route table published' "$work/serve.log" || true; }
# Bounded waits: 0.5 s steps, up to 20 minutes for the first load and 5 for each change.
wait_for() {
    for _ in $(seq "$2"); do
        kill -0 "$server" 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
        [ "$(published)" -ge "$1" ] && return 0
        sleep 0.5
    done
    echo "no table $1 in time" >&2
    exit 1
}
wait_for 1 2400
sleep 20
first=$(published)
callgrind_control -i on "$server" >/dev/null
for k in $(seq "$changes"); do
    printf 'apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: new-%s}\nspec:\n  parentRefs: [{name: gw}]\n  hostnames: [new-%s.example]\n  rules:\n  - backendRefs: [{name: base, port: 80}]\n' \
        "$k" "$k" >"$work/config/new-$k.yaml"
    wait_for $((first + k)) 600
    # The status is sealed after the swap: give it time before the next change.
    sleep 8
done
callgrind_control -i off "$server" >/dev/null
callgrind_control -d "$server" >/dev/null
# The dump is written while the process runs on: wait until its size stays put (bounded).
dump=""
size=-1
for _ in $(seq 120); do
    sleep 1
    dump=$(readlink -f "$(ls "$out".* 2>/dev/null | head -1)")
    [ -n "$dump" ] || continue
    now=$(stat -c %s "$dump")
    [ "$now" -gt 0 ] && [ "$now" = "$size" ] && break
    size=$now
done
if [ -z "$dump" ] || [ ! -s "$dump" ]; then
    echo "no callgrind dump at $out.*" >&2
    exit 1
fi
echo "$routes routes, $changes changes, $dump"
# Run from / so that callgrind_annotate names every function with its object (` [BIN]`).
(cd / && callgrind_annotate --inclusive=yes "$dump" 2>/dev/null) | awk -v n="$changes" '
    / PROGRAM TOTALS/ { gsub(",", "", $1); printf "%-40s %6.1fM\n", "whole process", $1 / n / 1e6 }
    {
        split("Incremental::translate Metrics::attach HostIndex::iter StatusReport::seal ProblemSet::of ConfigDir<S>::read_changed objects::collect", parts, " ")
        for (i in parts) {
            if (index($0, "edgeplane::") && index($0, parts[i] " [") && !seen[parts[i]]++) {
                v = $1; gsub(",", "", v); printf "%-40s %6.1fM\n", parts[i], v / n / 1e6
            }
        }
    }
    # A part the profile does not name ran no instruction in these changes (or was renamed):
    # say so rather than leave it out; no total at all is a failed run.
    / PROGRAM TOTALS/ { total = 1 }
    END {
        for (i in parts) if (!seen[parts[i]]) printf "%-40s not in the profile\n", parts[i]
        if (!total) { print "callgrind_annotate printed no totals" > "/dev/stderr"; exit 1 }
    }'
