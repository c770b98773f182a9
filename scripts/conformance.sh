#!/bin/sh
# Runs the Gateway API conformance replay (tests/conformance) and writes the upstream
# ConformanceReport YAML to the given path (default: conformance-report.yaml).
# Listener ports 80 and 8080 on loopback: run as root or with CAP_NET_BIND_SERVICE.
set -eu
cd "$(dirname "$0")/.."
out=${1:-conformance-report.yaml}
case "$out" in
/*) ;;
*) out="$(pwd)/$out" ;;
esac
CONFORMANCE_REPORT="$out" cargo test --locked --test conformance gateway_http_profile -- --nocapture
echo "report: $out"
