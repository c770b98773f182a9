#!/usr/bin/env bash
# Heap by owner: heaptrack of `edgeplane serve --config-dir` on N route files in the standalone
# benchmark's shape (one HTTPRoute per file, one hostname and one rule each, all to one
# Service), and on the same directory with no route. Each process is killed (SIGKILL, so that
# nothing is freed on the way out) 5 s after `/readyz` turned 200; what heaptrack saw still
# allocated then is grouped by the innermost edgeplane module on each allocation's stack (up
# to three lower-case path segments: `metrics::series`, `translate::cache::incremental`), and
# printed per route: the difference between the two runs divided by N.
#
#   benches/heap.sh            # N=5000, builds target-heap/debug/edgeplane first
#   HEAP_ROUTES=1000 HEAP_BIN=path/to/edgeplane benches/heap.sh
#   HEAP_STACKS=dir benches/heap.sh   # also keeps the leaked-bytes stacks (flame graph input)
#
# The binary must be built with `--features system-allocator`: heaptrack follows `malloc`,
# which jemalloc bypasses. A debug build makes the same allocations as a release build of the
# same code. Loopback only (a random 127.x.y.z, ports 8080 and 18481); nothing is asserted.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=benches/route-files.sh
. benches/route-files.sh
routes="${HEAP_ROUTES:-5000}"
bin="${HEAP_BIN:-}"
if [ -z "$bin" ]; then
    CARGO_TARGET_DIR="$PWD/target-heap" cargo build -q --features system-allocator --bin edgeplane
    bin="$PWD/target-heap/debug/edgeplane"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# A loopback address of its own: the Gateway listens on port 8080 there.
bind="127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))"
admin="$bind:18481"

# Runs the server on directory $1 under heaptrack and writes its leaked-bytes stacks to $2.
profile() {
    local dir="$1" stacks="$2" data="$work/heaptrack-$(basename "$1")"
    heaptrack -o "$data" "$bin" serve --config-dir "$dir" --bind-address "$bind" \
        --admin-addr "$admin" --dashboard-addr 127.0.0.1:0 >"$work/heaptrack.log" 2>&1 &
    local tracker=$!
    local ready=0
    for _ in $(seq 1 600); do
        kill -0 "$tracker" 2>/dev/null || break
        if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$admin/readyz")" = 200 ]; then
            ready=1
            break
        fi
        sleep 0.5
    done
    [ "$ready" = 1 ] || { cat "$work/heaptrack.log"; exit 1; }
    sleep 5
    # The server is heaptrack's child or grandchild: the one process of BIN's name (as the
    # kernel keeps it, 15 bytes at most) under it.
    local server name
    name="$(basename "$bin" | cut -c1-15)"
    server="$(pgrep -P "$tracker" -x "$name" || pgrep -P "$(pgrep -P "$tracker" | head -1)" -x "$name")" || {
        echo "heap.sh: no process named $name under heaptrack (pid $tracker)" >&2
        exit 1
    }
    kill -KILL "$server"
    wait "$tracker" || true
    heaptrack_print -f "$data".*zst -F "$stacks" --flamegraph-cost-type leaked >/dev/null 2>&1 ||
        heaptrack_print -f "$data".*gz -F "$stacks" --flamegraph-cost-type leaked >/dev/null
}

# Bytes by owner: the innermost frame `edgeplane::a::b::c...` of each stack gives `a::b::c`; a
# trait method's frame `<edgeplane::a::b::T as Trait>::f` (written `_$LT$edgeplane..a..b..T`)
# gives `a::b`.
owners() {
    awk '{
        cost = $NF; $NF = ""; n = split($0, frames, ";"); owner = "(no edgeplane frame)"
        for (i = n; i >= 1; i--) {
            at = index(frames[i], "edgeplane::"); path = substr(frames[i], at + 11)
            if (at == 0) {
                at = index(frames[i], "$LT$edgeplane.."); path = substr(frames[i], at + 15)
                gsub(/\.\./, "::", path)
            }
            if (at > 0) {
                k = split(path, parts, "::"); owner = ""
                for (j = 1; j <= k && j <= 3 && parts[j] ~ /^[a-z_0-9]+$/; j++) {
                    owner = owner (j > 1 ? "::" : "") parts[j]
                }
                break
            }
        }
        sum[owner] += cost
    } END { for (o in sum) print o, sum[o] }' "$1"
}

route_files "$work/empty" 0
route_files "$work/routes" "$routes"

# Files written within the last 2 s are read again at every reading (their stamps are racy);
# a directory of manifests is usually older: let these settle so that their stamps are kept.
sleep 3
profile "$work/empty" "$work/empty.stacks"
profile "$work/routes" "$work/routes.stacks"
if [ -n "${HEAP_STACKS:-}" ]; then
    mkdir -p "$HEAP_STACKS"
    cp "$work/empty.stacks" "$work/routes.stacks" "$HEAP_STACKS/"
fi
owners "$work/empty.stacks" | sort >"$work/empty.owners"
owners "$work/routes.stacks" | sort >"$work/routes.owners"
for f in empty routes; do
    [ -s "$work/$f.owners" ] || { echo "heap.sh: heaptrack recorded no allocations ($f)" >&2; exit 1; }
done

echo "heap still allocated 5 s after ready, $routes routes vs none; per route by owner:"
join -a 1 -a 2 -e 0 -o 0,1.2,2.2 "$work/routes.owners" "$work/empty.owners" |
    awk -v n="$routes" '{ d = $2 - $3; t += d; tn += $2; t0 += $3
        if (d / n >= 1) printf "%8.0f B  %s\n", d / n, $1 }
        END { printf "%8.0f B  total per route (heap %.1f MB with %d routes, %.1f MB with none)\n",
            t / n, tn / 1e6, n, t0 / 1e6 }' | sort -rn
