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
for f in "$shared"/third_party/snapshots/*.pickle tests/fixtures/eras/*.pickle \
	tests/fixtures/html/hostile_snapshot.pickle; do
	[ -f "$f" ] && check "$(basename "$(dirname "$f")")/$(basename "$f")" "$f"
done

# block PAGE: what the page's data block holds: "devices=0,1 focus=D paths=N" (N: strings
# holding a path of the corpus machine).
block() {
	python3 -c 'import json, re, sys
t = open(sys.argv[1], encoding="utf-8").read()
d = json.loads(re.search(r"id=\"memreport-data\">(.*?)</script>", t, re.S).group(1))
print("devices=" + ",".join(str(v["device"]) for v in d["devices"]) + " focus=" +
      str((d["focus"] or {}).get("device")) + " paths=" +
      str(sum(1 for s in d["strings"] if "/workspace/" in s or "/opt/torch/" in s)))' "$1"
}
multi=tests/fixtures/eras/multi_device.pickle
"$bin" "$multi" -q -o "$tmp/all.html" && "$bin" "$multi" -q --device 1 -o "$tmp/one.html"
got="$(block "$tmp/all.html") | $(block "$tmp/one.html")"
case $got in
"devices=0,1 "*"| devices=1 focus=1 "*) ok "--device 1 keeps only device 1 in the block ($got)" ;;
*) nok "--device 1 keeps only device 1 in the block ($got)" ;;
esac
varlen="$shared/corpus/gpt_varlen/snapshot.pickle"
if [ -f "$varlen" ]; then
	"$bin" "$varlen" -q -o "$tmp/a.html" && "$bin" "$varlen" -q -o "$tmp/b.html" &&
		"$bin" "$varlen" -q --redact-paths -o "$tmp/r.html"
	if cmp -s "$tmp/a.html" "$tmp/b.html"; then
		ok "gpt_varlen: the page is the same bytes twice"
	else
		nok "gpt_varlen: the page is the same bytes twice"
	fi
	plain=$(block "$tmp/a.html")
	redacted=$(block "$tmp/r.html")
	case "$plain $redacted" in
	*paths=0*" "*paths=0*) nok "--redact-paths rewrites the strings table ($plain / $redacted)" ;;
	*" "*paths=0) ok "--redact-paths rewrites the strings table ($plain / $redacted)" ;;
	*) nok "--redact-paths rewrites the strings table ($plain / $redacted)" ;;
	esac
fi
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
