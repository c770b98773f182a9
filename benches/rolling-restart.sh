#!/usr/bin/env bash
# Rolling restart under traffic: three echo backends of one Service are replaced one by one
# (new endpoint ready; old one serving but terminating; old one gone from the table; old
# server closed) while two clients send requests back to back through the proxy. Prints the
# number of requests, of failed ones and of retried attempts for each run; exits non-zero if
# any request failed or needed a retry.
#
#   benches/rolling-restart.sh [RUNS]      (default 1; each run takes about 3 s)
#
# It runs the `resilience::a_rolling_restart_under_traffic_fails_no_request` integration
# test, which publishes the tables itself, on 127.0.0.0/8 only.
set -euo pipefail

runs="${1:-1}"
cd "$(dirname "$0")/.."
cargo test -j "${CARGO_JOBS:-1}" --test proxy --no-run >/dev/null 2>&1 ||
    cargo test -j "${CARGO_JOBS:-1}" --test proxy --no-run
status=0
for run in $(seq 1 "$runs"); do
    out="$(timeout 120 cargo test -q -j "${CARGO_JOBS:-1}" --test proxy \
        resilience::a_rolling_restart_under_traffic_fails_no_request -- --nocapture 2>&1)" || status=1
    line="$(grep -o 'rolling restart: .*' <<<"$out" || true)"
    echo "run $run: ${line:-no result (test output follows)}"
    [ -n "$line" ] || { echo "$out"; status=1; }
done
exit "$status"
