#!/bin/sh
# Runs the Gateway API conformance replay (tests/conformance) and writes the upstream
# ConformanceReport YAML to the given path (default: conformance-report.yaml).
# Runs as any user: listener ports 80 and 443 are bound on local ports 18080 and 18443.
set -eu
cd "$(dirname "$0")/.."
out=${1:-conformance-report.yaml}
case "$out" in
/*) ;;
*) out="$(pwd)/$out" ;;
esac
CONFORMANCE_REPORT="$out" cargo test --locked --test conformance gateway_http_and_grpc_profiles -- --nocapture
echo "report: $out"
