#!/bin/sh
# tests/browser/bench.sh BINARY SNAPSHOT: writes the report of SNAPSHOT with the binary and
# prints bench.js's JSON line (page bytes, open and draw times in headless Chromium).
# For `make bench`: the 88 MB sample is build/gpt_large_trace.pickle after make check.
set -eu
bin=$1
snap=$2
here=$(dirname "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" "$snap" -q -o "$tmp/page.html"
node "$here/bench.js" "$tmp/page.html" "${BENCH_RUNS:-5}"
