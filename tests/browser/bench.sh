#!/bin/sh
# tests/browser/bench.sh BINARY SNAPSHOT: builds the interactive page of SNAPSHOT with
# make_page_fixture.py and prints bench.js's JSON line (page bytes, open and draw times).
# For `make bench`: the 88 MB sample is build/gpt_large_trace.pickle after make check.
set -eu
bin=$1
snap=$2
here=$(dirname "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$here/make_page_fixture.py" "$snap" -o "$tmp/page.html" --memreport "$bin"
node "$here/bench.js" "$tmp/page.html" "${BENCH_RUNS:-5}"
