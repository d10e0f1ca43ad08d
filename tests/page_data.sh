#!/bin/sh
# tests/page_data.sh BINARY: the data block of the interactive page (docs/page-schema.md) that
# the binary writes for every real sample (../shared/corpus, its third-party snapshots, the
# 88 MB trace), compared value for value with the reference builder
# (tests/browser/check_page_data.py), and the 88 MB sample's page under 3 MB. Prints "ok N -
# ..." / "not ok N - ..." lines; skips without python3 or the shared samples.
set -u
bin=${1:-./memreport}
shared=${MEMREPORT_SHARED:-../shared}
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }
if ! command -v python3 >/dev/null 2>&1 || [ ! -d "$shared/corpus" ]; then
	echo "ok 1 - # SKIP page data: no python3 or no shared samples"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() { # LABEL SNAPSHOT
	if ! "$bin" "$2" -q -o "$tmp/page.html" 2>"$tmp/err"; then
		nok "page data of $1: memreport failed ($(head -c 200 "$tmp/err"))"
	elif python3 tests/browser/check_page_data.py "$tmp/page.html" "$2" --memreport "$bin" >"$tmp/out" 2>&1; then
		ok "page data of $1 equals the reference"
	else
		nok "page data of $1 ($(tail -n 1 "$tmp/out" | head -c 300))"
	fi
}
for f in "$shared"/corpus/*/snapshot.pickle "$shared"/corpus/*/oom_snapshot.pickle; do
	[ -f "$f" ] && check "$(basename "$(dirname "$f")")" "$f"
done
for f in "$shared"/third_party/snapshots/*.pickle; do
	[ -f "$f" ] && check "third_party/$(basename "$f")" "$f"
done
big=build/gpt_large_trace.pickle
if [ -f "$big" ]; then
	check gpt_large_trace "$big"
	size=$(wc -c <"$tmp/page.html")
	if [ "$size" -lt 3000000 ]; then
		ok "the 88 MB sample's page is under 3 MB ($size bytes)"
	else
		nok "the 88 MB sample's page is under 3 MB ($size bytes)"
	fi
fi
