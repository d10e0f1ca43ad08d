#!/bin/sh
# cli_batch.sh BINARY: `memreport batch` and `memreport diff` from the command line.
# Prints "ok N - ..." or "not ok N - ...". Numbering starts at $2 (default 0) + 1.
set -u
bin=$1
n=${2:-0}
. tests/samples.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }

# every sample folder of both corpora but the 88 MB one
runs=""
count=0
for d in $(sample_dirs); do
	name=$(basename "$d")
	[ "$name" = gpt_large_trace ] && continue
	runs="$runs $d"
	count=$((count + 1))
done
project=$(ls -d tests/corpus/*/ | wc -l)
[ "$count" -ge "$project" ] && ok "batch: the $project runs of tests/corpus at least ($count)" \
	|| nok "batch: the $project runs of tests/corpus at least ($count)"

# With a cache that starts empty: the uncached path is golden.sh's and test_batch's, and the
# outputs equal theirs (the hashes); here the second run is compared with this one.
# shellcheck disable=SC2086
"$bin" batch $runs -o "$tmp/out" --cache "$tmp/cache" -q 2>"$tmp/err"
rc=$?
[ "$rc" -eq 0 ] && ok "batch over the corpus exits 0" || nok "batch over the corpus exits 0 (exit $rc: $(head -c 300 "$tmp/err"))"
missing=""
for d in $runs; do
	name=$(basename "$d")
	grep -q "{\"name\": \"$name\"" "$tmp/out/index.json" || missing="$missing $name (index.json)"
	grep -q "<tr><td>$name</td>" "$tmp/out/index.html" || missing="$missing $name (index.html)"
	[ -s "$tmp/out/$name.html" ] || missing="$missing $name (report)"
done
[ -z "$missing" ] && ok "index names every run, one report per run" || nok "index names every run:$missing"
reports=$(ls "$tmp/out" | grep -cv '^index\.')
[ "$reports" -eq "$count" ] && ok "exactly $count reports" || nok "exactly $count reports (got $reports)"
grep -q '"schema": "memreport-batch/1"' "$tmp/out/index.json" && ok "index.json schema" || nok "index.json schema"
if grep -qE '(src|href)="?https?:' "$tmp/out/index.html"; then nok "index.html loads nothing from the network"; else ok "index.html loads nothing from the network"; fi
if command -v python3 >/dev/null 2>&1; then
	python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert len(d['runs'])==$count; assert all(r['result']['schema']=='memreport/1' for r in d['runs'])" "$tmp/out/index.json" 2>/dev/null \
		&& ok "index.json is valid JSON with one memreport/1 document per run" || nok "index.json is valid JSON with one memreport/1 document per run"
fi

# The index's columns say their moment, and the peak columns hold PyTorch's own peaks
# (memory_stats.json of gpt_varlen, whose snapshot's end state is far below its peak).
varlen_stats="$(sample_dir gpt_varlen)/memory_stats.json"
if ! command -v python3 >/dev/null 2>&1 || [ ! -f "$varlen_stats" ]; then
	ok "batch index: columns name their moment # SKIP needs python3 and the shared gpt_varlen"
else
	got=$(python3 - "$tmp/out/index.html" "$varlen_stats" <<'EOF'
import json, re, sys
page = open(sys.argv[1], encoding="utf-8").read()
stats = json.load(open(sys.argv[2]))
heads = re.findall(r"<th[^>]*>([^<]*)</th>", page)
row = re.search(r"<tr><td>gpt_varlen</td>(.*?)</tr>", page).group(1)
cells = re.findall(r"data-v=([0-9.-]+)", row)
want = [str(stats["reserved_bytes.all.peak"]), str(stats["allocated_bytes.all.peak"])]
print("ok" if {"Reserved at the peak", "Allocated at the peak", "Fragmentation at the snapshot"} <= set(heads)
      and cells[1:3] == want else "heads=%s cells=%s want=%s" % (heads, cells, want))
EOF
)
	[ "$got" = ok ] && ok "batch index: columns name their moment; gpt_varlen's peaks are PyTorch's" \
		|| nok "batch index: columns name their moment ($got)"
fi

# a zip of five of them gives the same five runs
if command -v zip >/dev/null 2>&1; then
	five="leak_val_fixed mlp_healthy no_history oom_capacity oom_fragmentation"
	(cd "$samples_project" && zip -qr "$tmp/five.zip" $five)
	"$bin" batch "$tmp/five.zip" -o "$tmp/zout" -q
	rc=$?
	got=$(grep -o '^{"name": "[^"]*"' "$tmp/zout/index.json" | sed 's/.*: "//; s/"$//' | sort | tr '\n' ' ')
	want=$(echo $five | tr ' ' '\n' | sort | tr '\n' ' ')
	[ "$rc" -eq 0 ] && [ "$got" = "$want" ] && ok "batch over a zip of five gives the same five runs" \
		|| nok "batch over a zip of five (exit $rc, got '$got', want '$want')"
fi

# the cache: a second run comes from it, with the same bytes
"$bin" batch $runs -o "$tmp/c2" --cache "$tmp/cache" 2>"$tmp/err"
grep -q "($count from the cache)" "$tmp/err" && ok "second batch comes from the cache" || nok "second batch comes from the cache ($(cat "$tmp/err"))"
cmp -s "$tmp/out/index.json" "$tmp/c2/index.json" && ok "cached index.json equals the uncached one" || nok "cached index.json equals the uncached one"
# three entries garbage (test_batch corrupts others in other ways): rebuilt, the rest read
spoilt=0
for f in "$tmp/cache"/*; do
	[ "$spoilt" -lt 3 ] || break
	printf 'garbage' >"$f"
	spoilt=$((spoilt + 1))
done
"$bin" batch $runs -o "$tmp/c3" --cache "$tmp/cache" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 0 ] && grep -q "($((count - 3)) from the cache)" "$tmp/err" && cmp -s "$tmp/out/index.json" "$tmp/c3/index.json" \
	&& ok "corrupt cache entries are rebuilt, not trusted" || nok "corrupt cache entries are rebuilt (exit $rc: $(cat "$tmp/err"))"

# hostile cache entries (issue 14 item 8): a FIFO, a link to /dev/zero and a huge sparse file in
# place of three entries are misses, read without blocking and without filling memory
"$bin" batch $runs -o "$tmp/c4" --cache "$tmp/cache" -q
set -- "$tmp/cache"/*.mrc
if [ "$#" -ge 3 ]; then
	rm -f "$1" "$2" "$3"
	mkfifo "$1"
	ln -s /dev/zero "$2"
	truncate -s 4G "$3"
	timeout 120 "$bin" batch $runs -o "$tmp/c5" --cache "$tmp/cache" 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq 0 ] && grep -q "($((count - 3)) from the cache)" "$tmp/err" && cmp -s "$tmp/out/index.json" "$tmp/c5/index.json" \
		&& [ -f "$1" ] && [ ! -L "$2" ] && [ "$(wc -c <"$3")" -lt 100000000 ] \
		&& ok "cache entries that are a FIFO, a link to /dev/zero or 4 GiB are misses, rebuilt as files" \
		|| nok "hostile cache entries (exit $rc: $(cat "$tmp/err"))"
else
	nok "hostile cache entries: the cache has $# entries"
fi
# a FIFO where a report goes is replaced, never waited on (the unchanged-report check reads only
# regular files)
"$bin" batch "$(sample_dir mlp_healthy)" -o "$tmp/fifo_out" -q
rm -f "$tmp/fifo_out/mlp_healthy.html"
mkfifo "$tmp/fifo_out/mlp_healthy.html"
timeout 60 "$bin" batch "$(sample_dir mlp_healthy)" -o "$tmp/fifo_out" -q
rc=$?
[ "$rc" -eq 0 ] && [ -f "$tmp/fifo_out/mlp_healthy.html" ] && ok "a FIFO in place of a report is replaced, not waited on" \
	|| nok "a FIFO in place of a report is replaced, not waited on (exit $rc)"

# a new cache folder is private (0700); an existing one keeps its permissions
"$bin" batch "$(sample_dir mlp_healthy)" -o "$tmp/c6" --cache "$tmp/newcache/sub" -q
mkdir -m 755 "$tmp/shared_cache"
"$bin" batch "$(sample_dir mlp_healthy)" -o "$tmp/c7" --cache "$tmp/shared_cache" -q
[ "$(stat -c %a "$tmp/newcache/sub")" = 700 ] && [ "$(stat -c %a "$tmp/shared_cache")" = 755 ] \
	&& ok "a new cache folder is 0700, an existing one keeps 0755" \
	|| nok "cache folder modes ($(stat -c %a "$tmp/newcache/sub" "$tmp/shared_cache" | tr '\n' ' '))"

# a broken run is listed and does not stop the others: exit 2
printf '\200\004garbage' > "$tmp/broken.pickle"
healthy=$(sample_dir mlp_healthy)
"$bin" batch "$healthy" "$tmp/broken.pickle" "$tmp/does-not-exist" -o "$tmp/b" -q 2>"$tmp/err"
rc=$?
[ "$rc" -eq 2 ] && [ -s "$tmp/b/mlp_healthy.html" ] && [ "$(grep -c '"error": null' "$tmp/b/index.json")" -eq 1 ] \
	&& grep -q broken.pickle "$tmp/b/index.html" && grep -q does-not-exist "$tmp/b/index.json" \
	&& ok "broken runs listed with their errors, exit 2" || nok "broken runs listed with their errors (exit $rc)"
"$bin" batch "$healthy" >/dev/null 2>&1
[ $? -eq 2 ] && ok "batch without -o exits 2" || nok "batch without -o exits 2"
(cd "$tmp" && "$bin" batch "$(sample_dir mlp_healthy)" -o - -q >/dev/null 2>"$tmp/err")
rc=$?
[ "$rc" -eq 2 ] && [ ! -e "$tmp/-" ] && grep -q 'standard output' "$tmp/err" \
	&& ok "batch -o - is refused, no folder named -" || nok "batch -o - is refused (exit $rc)"

# a batch written inside its input folder does not find its own reports the next time
mkdir -p "$tmp/self"
cp -r "$healthy" "$(sample_dir oom_capacity)" "$tmp/self/" && chmod -R u+w "$tmp/self"
"$bin" batch "$tmp/self" -o "$tmp/self/report" -q
"$bin" batch "$tmp/self" -o "$tmp/self/report" -q
rc=$?
runs_found=$(grep -c '^{"name": ' "$tmp/self/report/index.json")
[ "$rc" -eq 0 ] && [ "$runs_found" -eq 2 ] && ok "output folder inside the input is not read back" \
	|| nok "output folder inside the input is not read back (exit $rc, $runs_found runs)"

# a hostile archive: names that climb out are refused, nothing is written outside DIR
if command -v python3 >/dev/null 2>&1; then
	python3 - "$tmp/evil.zip" "$(sample_snapshot mlp_healthy)" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w") as z:
    data = open(sys.argv[2], "rb").read()
    z.writestr("../../escaped/snapshot.pickle", data)
    z.writestr("/abs/snapshot.pickle", data)
    z.writestr("fine/snapshot.pickle", data)
    z.writestr("bomb/snapshot.pickle", b"\x80\x04" + bytes(64 << 20), zipfile.ZIP_DEFLATED)
EOF
	mkdir -p "$tmp/h/deep"
	(cd "$tmp/h/deep" && "$bin" batch "$tmp/evil.zip" -o out -q 2>"$tmp/err")
	rc=$?
	[ "$rc" -eq 2 ] && [ -s "$tmp/h/deep/out/fine.html" ] && [ ! -e "$tmp/escaped" ] && [ ! -e "$tmp/h/escaped" ] \
		&& grep -q 'unsafe member name' "$tmp/h/deep/out/index.json" && grep -q 'zip bomb' "$tmp/h/deep/out/index.json" \
		&& ok "hostile zip: unsafe names and a bomb refused, the rest reported" \
		|| nok "hostile zip (exit $rc: $(head -c 400 "$tmp/err"))"
fi

# diff: the leak of autograd graphs
before=$(sample_snapshot leak_val_fixed)
after=$(sample_snapshot leak_val_graph)
if [ -f "$before" ] && [ -f "$after" ]; then
	"$bin" diff "$before" "$after" --format json -o "$tmp/d.json"
	rc=$?
	a=$(grep -o '"allocated_bytes.all.current": [0-9]*' "$(sample_dir leak_val_fixed)/memory_stats.json" | grep -o '[0-9]*$')
	b=$(grep -o '"allocated_bytes.all.current": [0-9]*' "$(sample_dir leak_val_graph)/memory_stats.json" | grep -o '[0-9]*$')
	want=$((b - a))
	grep -q "\"delta\": {\"reserved_bytes\": [0-9-]*, \"allocated_bytes\": $want," "$tmp/d.json" \
		&& [ "$rc" -eq 0 ] && ok "diff: delta.allocated_bytes is the memory_stats difference ($want)" \
		|| nok "diff: delta.allocated_bytes is the memory_stats difference ($want, exit $rc)"
	if command -v python3 >/dev/null 2>&1; then
		python3 -c "
import json, sys
d = json.load(open(sys.argv[1])); top = d['top_changes'][0]; want = int(sys.argv[2])
assert top['where']['name'] == 'val_loop' and 'train.py' in top['where']['filename'], top['site']
assert 2 * top['bytes_delta'] > want, (top['bytes_delta'], want)
assert any(f['name'] == 'forward' for f in top['frames'])
assert sum(c['bytes_delta'] for c in d['top_changes']) == want
" "$tmp/d.json" "$want" 2>"$tmp/err" && ok "diff: first change is the forward site that grew, with most of it" \
			|| nok "diff: first change is the forward site that grew ($(tail -n 1 "$tmp/err"))"
	fi
	"$bin" diff "$before" "$after" -o "$tmp/d.html" && grep -q '</html>' "$tmp/d.html" && ! grep -q '<module>' "$tmp/d.html" \
		&& ok "diff: html by default, escaped" || nok "diff: html by default, escaped"
	"$bin" diff "$before" "$after" --format md -o - >"$tmp/d.md" && grep -q '^### memreport diff' "$tmp/d.md" \
		&& grep -q 'val\\_loop' "$tmp/d.md" && ok "diff: --format md" || nok "diff: --format md"
	"$bin" diff "$before" "$after" --format text -o - >"$tmp/d.txt" && grep -q '^At the peak' "$tmp/d.txt" \
		&& grep -q 'in val_loop' "$tmp/d.txt" && ok "diff: --format text" || nok "diff: --format text"
	"$bin" diff "$before" >/dev/null 2>&1
	[ $? -eq 2 ] && ok "diff with one run exits 2" || nok "diff with one run exits 2"
	"$bin" diff "$before" "$tmp/missing.pickle" -o "$tmp/x.json" 2>"$tmp/err"
	[ $? -eq 2 ] && grep -q missing.pickle "$tmp/err" && [ ! -e "$tmp/x.json" ] \
		&& ok "diff with a missing run exits 2 naming it" || nok "diff with a missing run exits 2 naming it"
else
	nok "diff: leak_val_fixed and leak_val_graph of tests/corpus are in build/corpus"
fi
