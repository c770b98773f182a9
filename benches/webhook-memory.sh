#!/usr/bin/env bash
# Memory of the conversion webhook under large reviews: the `edgeplane serve --kubernetes`
# binary (against the in-process API emulator, on 127.0.0.0/8 only) is sent a ConversionReview
# of one v1beta1 object holding a list of zeros at the limit of JSON values per review (the
# worst case that is converted), then four at once, then a 3 MiB one (refused: too many
# values) and a 15 MiB one (refused with 413 before it is read). Prints the resident memory
# and its peak (VmRSS/VmHWM, KiB) after each step; asserts nothing.
#
#   benches/webhook-memory.sh
#
# It runs the ignored `webhook_limits::webhook_memory_figure` test of tests/kube.rs.
set -euo pipefail

cd "$(dirname "$0")/.."
out="$(timeout 300 cargo test -q -j "${CARGO_JOBS:-1}" --test kube \
    webhook_limits::webhook_memory_figure -- --ignored --nocapture 2>&1)" || { echo "$out"; exit 1; }
line="$(grep -o 'webhook memory .*' <<<"$out" || true)"
[ -n "$line" ] || { echo "$out"; exit 1; }
echo "$line"
