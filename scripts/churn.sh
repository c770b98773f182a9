#!/usr/bin/env sh
# Churn figures for docs/reliability.md: route changes by file writes and rolling endpoint
# updates in standalone mode while clients send continuously; prints the change rate, the
# requests sent and the non-2xx count (exit status 1 when any request failed).
#   scripts/churn.sh [ROUTE_CHANGES] [ROTATIONS]
set -eu
cd "$(dirname "$0")/.."
CHURN_ROUTE_CHANGES="${1:-1000}" CHURN_ROTATIONS="${2:-100}" \
  exec cargo bench --bench churn
