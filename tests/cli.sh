#!/bin/sh
# cli.sh BINARY: the command-line contract. Prints "ok N - ..." or "not ok N - ...".
set -u
bin=$1
case $bin in /*) ;; *) bin="$(pwd)/$bin" ;; esac
. tests/samples.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }
check() { # check DESCRIPTION COMMAND...: passes when the command succeeds
	d=$1
	shift
	if "$@" >/dev/null 2>&1; then ok "$d"; else nok "$d"; fi
}

# expect_fail DESCRIPTION FILE: exit 2, one line on stderr naming the file, no output file left.
expect_fail() {
	d=$1
	f=$2
	out="$tmp/out.html"
	rm -f "$out"
	"$bin" "$f" -o "$out" 2>"$tmp/err" >/dev/null
	rc=$?
	lines=$(wc -l < "$tmp/err")
	left=$(ls "$tmp" | grep -c 'out.html')
	if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && grep -qF "$f" "$tmp/err" && [ "$left" -eq 0 ]; then
		ok "$d"
	else
		nok "$d (exit $rc, $lines stderr lines, $left output files: $(head -c 300 "$tmp/err"))"
	fi
}

check "--help exits 0" "$bin" --help
check "--version exits 0" "$bin" --version
"$bin" --bogus >/dev/null 2>&1
[ $? -eq 2 ] && ok "unknown option exits 2" || nok "unknown option exits 2"

snap=$(sample_snapshot mlp_healthy)
# PyTorch's own reserved bytes for the snapshot's moment
reserved=$(sed -n 's/.*"reserved_bytes.all.current": \([0-9]*\).*/\1/p' "$(sample_dir mlp_healthy)/memory_stats.json")
if [ -f "$snap" ] && [ -n "$reserved" ]; then
	"$bin" "$snap" --format json -o "$tmp/r.json" && grep -q '"schema": "memreport/1"' "$tmp/r.json" \
		&& ok "json report written" || nok "json report written"
	"$bin" "$snap" --format json -o - | grep -q "\"reserved_bytes\": $reserved," \
		&& ok "json to stdout with -o -" || nok "json to stdout with -o -"
	"$bin" "$snap" --format text -o - | grep -q 'fragmentation' && ok "text report" || nok "text report"
	"$bin" "$snap" --format md -o - | grep -q '^| 0 |' && ok "markdown report" || nok "markdown report"
	"$bin" "$snap" -o "$tmp/r.html" && grep -q '</html>' "$tmp/r.html" && ok "html report" || nok "html report"
	"$bin" "$snap" -o "$tmp/by_ext.json" && grep -q '"schema": "memreport/1"' "$tmp/by_ext.json" \
		&& "$bin" "$snap" -o "$tmp/by_ext.md" && grep -q '^| 0 |' "$tmp/by_ext.md" \
		&& ok "-o r.json / r.md without --format take the format from the extension" \
		|| nok "-o r.json / r.md without --format take the format from the extension"
	"$bin" "$snap" --format json -o "$tmp/clash.html" 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq 2 ] && [ ! -e "$tmp/clash.html" ] && grep -q 'disagree' "$tmp/err" \
		&& ok "--format json -o x.html exits 2" || nok "--format json -o x.html exits 2 (exit $rc)"
	"$bin" "$snap" --device 3 --format json -o "$tmp/nodev.json" 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq 2 ] && [ ! -e "$tmp/nodev.json" ] && grep -q 'has no device 3 (it has device 0)' "$tmp/err" \
		&& ok "--device naming a device the snapshot lacks exits 2" || nok "--device naming a device the snapshot lacks exits 2 (exit $rc)"
	cat "$snap" | "$bin" - --format json -o - | grep -q "\"reserved_bytes\": $reserved," \
		&& ok "standard input" || nok "standard input"
	cp "$snap" "$tmp/copy.pickle"
	"$bin" -q "$tmp/copy.pickle" && [ -f "$tmp/copy.pickle.html" ] \
		&& ok "default output beside the input" || nok "default output beside the input"
	a=$("$bin" "$snap" -o - | cksum)
	b=$("$bin" "$snap" -o - | cksum)
	[ "$a" = "$b" ] && ok "html is deterministic" || nok "html is deterministic"
	# a cut snapshot, a flipped one, random bytes
	size=$(wc -c < "$snap")
	head -c $((size / 2)) "$snap" > "$tmp/cut.pickle"
	expect_fail "truncated snapshot" "$tmp/cut.pickle"
else
	nok "mlp_healthy of tests/corpus, with its memory_stats.json, is in build/corpus"
fi
# several inputs are one run: the snapshot at the OOM and the log the user saw, whose message
# gives the limit the snapshot lacks (facts.json: what the OOM observer was told)
frag=$(sample_snapshot oom_fragmentation)
fdir=$(sample_dir oom_fragmentation)
ask=$(sed -n 's/.*"alloc": \([0-9]*\).*/\1/p' "$fdir/facts.json")
cap=$(sed -n 's/.*"device_alloc": \([0-9]*\).*/\1/p' "$fdir/facts.json")
"$bin" "$frag" "$fdir/train.log" --format json -o - >"$tmp/two.json" 2>"$tmp/err"
if grep -q '"kind": "snapshot"}, {"path": "[^"]*train.log", "kind": "oom_message"}' "$tmp/two.json" &&
	grep -q "\"requested_bytes\": $ask, \"cause\": \"fragmentation\"" "$tmp/two.json" &&
	grep -q "\"limit_bytes\": $cap," "$tmp/two.json"; then
	ok "snapshot and log: one run, the log's limit ($cap) with the snapshot's request ($ask)"
else
	nok "snapshot and log: one run with the log's limit $cap ($(head -c 300 "$tmp/err"))"
fi
: > "$tmp/empty"
expect_fail "empty file" "$tmp/empty"
printf 'hello, this is not a snapshot\n' > "$tmp/text.txt"
expect_fail "text that is neither a table nor an OOM message" "$tmp/text.txt"
# REDUCE os.system, protocol 2: nothing may run.
printf '\200\002cposix\nsystem\nq\000X\035\000\000\000touch /tmp/memreport_pwned_cliq\001\205q\002Rq\003.' > "$tmp/evil.pickle"
rm -f /tmp/memreport_pwned_cli
expect_fail "pickle with GLOBAL/REDUCE" "$tmp/evil.pickle"
grep -q "GLOBAL" "$tmp/err" && grep -q "byte 2" "$tmp/err" && ok "error names the opcode and offset" \
	|| nok "error names the opcode and offset ($(cat "$tmp/err"))"
[ ! -e /tmp/memreport_pwned_cli ] && ok "nothing executed" || nok "nothing executed"
# a pickle of a list of ints, a dict that is not a snapshot
printf '\200\004\225\013\000\000\000\000\000\000\000]\224(K\001K\002K\003e.' > "$tmp/ints.pickle"
expect_fail "pickle of a list of ints" "$tmp/ints.pickle"
grep -q "not a PyTorch memory snapshot" "$tmp/err" && ok "says not a snapshot" || nok "says not a snapshot"
printf '\200\004}\224\214\001a\224K\001s.' > "$tmp/dict.pickle"
expect_fail "pickle of a dict that is not a snapshot" "$tmp/dict.pickle"
"$bin" /nonexistent/file.pickle -o "$tmp/x.html" 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "/nonexistent/file.pickle" "$tmp/err" && ok "missing file exits 2" || nok "missing file exits 2"
# unwritable output: exit 1
if [ -f "$snap" ]; then
	"$bin" "$snap" -o /nonexistent-dir/r.html 2>/dev/null
	[ $? -eq 1 ] && ok "unwritable output exits 1" || nok "unwritable output exits 1"
	if [ -w /dev/full ]; then
		"$bin" "$snap" --format json -o - > /dev/full 2>/dev/null
		[ $? -eq 1 ] && ok "full disk on stdout exits 1" || nok "full disk on stdout exits 1"
	fi
fi
# -o targets that are not regular files (issue 14 item 1): a device or FIFO is written in place,
# a link is written through; only a regular file is replaced by a rename. The device nodes are
# private copies of /dev/null and /dev/full (mknod, as root), so no test can harm the real ones.
snap_small=samples/mlp_healthy.pickle
case $snap_small in /*) ;; *) snap_small="$(cd "$(dirname "$0")/.." && pwd)/$snap_small" ;; esac
if mknod "$tmp/null" c 1 3 2>/dev/null && mknod "$tmp/full" c 1 7 2>/dev/null; then
	"$bin" "$snap_small" --format json -o "$tmp/null" 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq 0 ] && [ -c "$tmp/null" ] && ! ls "$tmp" | grep -q tmp \
		&& ok "-o a null device: written, still a device" || nok "-o a null device (exit $rc: $(cat "$tmp/err"))"
	"$bin" "$snap_small" --format json -o "$tmp/full" 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq 1 ] && [ -c "$tmp/full" ] && grep -q "No space left on device" "$tmp/err" && [ "$(wc -l <"$tmp/err")" -eq 1 ] \
		&& ok "-o a full device: exit 1, No space left on device, still a device" \
		|| nok "-o a full device (exit $rc: $(cat "$tmp/err"))"
	rm -f "$tmp/null" "$tmp/full"
else
	ok "-o a device # SKIP mknod needs root"
fi
mkfifo "$tmp/fifo"
timeout 60 cat "$tmp/fifo" >"$tmp/from_fifo" &
reader=$!
"$bin" "$snap_small" --format json -o "$tmp/fifo" 2>"$tmp/err"
rc=$?
wait "$reader"
[ "$rc" -eq 0 ] && [ -p "$tmp/fifo" ] && grep -q '"schema": "memreport/1"' "$tmp/from_fifo" \
	&& ok "-o a FIFO: the report goes down the pipe, the FIFO stays" || nok "-o a FIFO (exit $rc: $(cat "$tmp/err"))"
rm -f "$tmp/fifo" "$tmp/from_fifo"
mkdir -p "$tmp/links"
: >"$tmp/links/real.json"
chmod 600 "$tmp/links/real.json"
ln -s real.json "$tmp/links/link.json"
ln -s missing.json "$tmp/links/dangling.json"
"$bin" "$snap_small" --format json -o "$tmp/links/link.json" 2>"$tmp/err" &&
	"$bin" "$snap_small" --format json -o "$tmp/links/dangling.json" 2>>"$tmp/err"
rc=$?
[ "$rc" -eq 0 ] && [ -L "$tmp/links/link.json" ] && [ -L "$tmp/links/dangling.json" ] \
	&& grep -q '"schema": "memreport/1"' "$tmp/links/real.json" && grep -q '"schema": "memreport/1"' "$tmp/links/missing.json" \
	&& [ "$(stat -c %a "$tmp/links/real.json")" = 600 ] && [ "$(ls "$tmp/links" | wc -l)" -eq 4 ] \
	&& ok "-o a symbolic link writes through it (dangling too), the link and the file's mode stay" \
	|| nok "-o a symbolic link writes through it (exit $rc: $(cat "$tmp/err"); $(ls -l "$tmp/links"))"
"$bin" "$snap_small" -o "$tmp/links" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 1 ] && grep -q 'is a folder' "$tmp/err" && ok "-o a folder exits 1" || nok "-o a folder exits 1 (exit $rc: $(cat "$tmp/err"))"

# gzip and xz inputs (issue 15 item 6), found by their content whatever their names: the same
# report as the plain files, for a run on the command line, a run folder and a zip
if command -v gzip >/dev/null && command -v xz >/dev/null; then
	frag=samples/oom_fragmentation
	mkdir -p "$tmp/gz/run"
	gzip -c "$frag.pickle" >"$tmp/gz/run/snapshot.bin"
	xz -c "$frag.log" >"$tmp/gz/run/train.log.xz"
	"$bin" "$frag.pickle" "$frag.log" --format json -o "$tmp/gz/plain.json"
	"$bin" "$tmp/gz/run/snapshot.bin" "$tmp/gz/run/train.log.xz" --format json -o "$tmp/gz/packed.json"
	rc=$?
	sed "s|$tmp/gz/run/snapshot.bin|$frag.pickle|; s|$tmp/gz/run/train.log.xz|$frag.log|" "$tmp/gz/packed.json" >"$tmp/gz/packed.sed"
	[ "$rc" -eq 0 ] && cmp -s "$tmp/gz/plain.json" "$tmp/gz/packed.sed" \
		&& ok "a gzip snapshot and an xz log give the report of the plain files" \
		|| nok "a gzip snapshot and an xz log give the report of the plain files (exit $rc)"
	(cd "$tmp/gz" && zip -qr run.zip run)
	"$bin" batch "$tmp/gz/run" "$tmp/gz/run.zip" -o "$tmp/gz/out" -q
	rc=$?
	[ "$rc" -eq 0 ] && [ "$(grep -c '{"path": "run/snapshot.bin", "kind": "snapshot"}, {"path": "run/train.log.xz", "kind": "oom_message"}' "$tmp/gz/out/index.json")" -eq 2 ] \
		&& ok "batch reads gzip and xz members of folders and zips" || nok "batch reads gzip and xz members of folders and zips (exit $rc)"
fi

# --redact-paths rewrites recorded paths only, never code (issue 15 item 6): the change stays in
# its code fence, byte for byte
cap=$(sample_snapshot oom_capacity)
if [ -f "$cap" ]; then
	"$bin" "$cap" --redact-paths --format md -o "$tmp/red.md"
	"$bin" "$cap" --redact-paths -o "$tmp/red.html"
	grep -A1 '^   ```$' "$tmp/red.md" | grep -q '^   batch_size //= 2; accumulate' && grep -q 'batch_size //= 2' "$tmp/red.html" \
		&& ! grep -q 'redacted&gt;/=' "$tmp/red.md" && grep -q '&lt;redacted&gt;/train.py' "$tmp/red.md" \
		&& ok "--redact-paths keeps code (batch_size //= 2, fenced) and still redacts recorded paths" \
		|| nok "--redact-paths keeps code (batch_size //= 2, fenced) and still redacts recorded paths"
fi

# --device N: only device N, which the evidence must have (issue 15 item 6)
multi=tests/fixtures/eras/multi_device.pickle
[ "$("$bin" "$multi" --device 1 --format json -o - | grep -o '"device": [0-9]*' | sort -u | tr '\n' ' ')" = '"device": 1 ' ] \
	&& ok "--device 1 reports device 1 only" || nok "--device 1 reports device 1 only"
for cmdline in "$multi --device 2" "diff $multi $multi --device 2" "simulate $multi --alloc-conf recorded --device 2" \
	"tests/fixtures/text/legacy_fairseq_2gpu.log --device 2"; do
	# shellcheck disable=SC2086
	"$bin" $cmdline -o "$tmp/dev.out" 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq 2 ] && [ ! -e "$tmp/dev.out" ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q 'no device 2 (it has .*0, 1)' "$tmp/err" \
		&& ok "$cmdline: exit 2, listing devices 0 and 1" || nok "$cmdline: exit 2 listing the devices (exit $rc: $(cat "$tmp/err"))"
done
"$bin" batch "$multi" -o "$tmp/devb" --device 2 -q 2>/dev/null
rc=$?
[ "$rc" -eq 2 ] && grep -q 'no device 2 (it has devices 0, 1)' "$tmp/devb/index.json" \
	&& ok "batch --device 2: the row says which devices the run has, exit 2" || nok "batch --device 2 (exit $rc)"

# a run folder or a zip of one run is a single-run input (issue 15 item 6): the discovery of batch
mkdir -p "$tmp/one/run"
cp samples/oom_fragmentation.pickle "$tmp/one/run/oom_snapshot.pickle"
cp samples/oom_fragmentation.log "$tmp/one/run/train.log"
"$bin" samples/oom_fragmentation.pickle samples/oom_fragmentation.log --format json -o - | grep -v '"path"' >"$tmp/one/files.json"
"$bin" "$tmp/one/run/" --format json -o - 2>"$tmp/err" | grep -v '"path"' >"$tmp/one/folder.json"
rc=$?
(cd "$tmp/one" && zip -qr run.zip run)
"$bin" "$tmp/one/run.zip" --format json -o - | grep -v '"path"' >"$tmp/one/zip.json"
[ "$rc" -eq 0 ] && [ -s "$tmp/one/files.json" ] && cmp -s "$tmp/one/files.json" "$tmp/one/folder.json" && cmp -s "$tmp/one/files.json" "$tmp/one/zip.json" \
	&& ok "a run folder and a zip of it report what their files report" \
	|| nok "a run folder and a zip of it report what their files report (exit $rc: $(cat "$tmp/err"))"
"$bin" -q "$tmp/one/run/" && [ -s "$tmp/one/run.html" ] && ok "a folder's default report is FOLDER.html beside it" \
	|| nok "a folder's default report is FOLDER.html beside it ($(ls "$tmp/one"))"
mkdir -p "$tmp/one/two/a" "$tmp/one/two/b"
cp samples/mlp_healthy.pickle "$tmp/one/two/a/"
cp samples/mlp_healthy.pickle "$tmp/one/two/b/"
"$bin" "$tmp/one/two" -o "$tmp/one/two.html" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 2 ] && [ ! -e "$tmp/one/two.html" ] && grep -q 'holds 2 runs ("two/a", "two/b")' "$tmp/err" \
	&& ok "a folder of several runs exits 2 naming them" || nok "a folder of several runs exits 2 naming them (exit $rc: $(cat "$tmp/err"))"
"$bin" "$tmp/one/run" samples/mlp_healthy.pickle -o "$tmp/one/x.html" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 2 ] && grep -q 'give it alone' "$tmp/err" && ok "a folder with other inputs exits 2" || nok "a folder with other inputs exits 2 (exit $rc)"
sum=$(cksum <"$tmp/one/run/train.log")
"$bin" "$tmp/one/run" -o "$tmp/one/run/train.log" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 2 ] && [ "$(cksum <"$tmp/one/run/train.log")" = "$sum" ] && grep -q 'overwrite its own evidence' "$tmp/err" \
	&& ok "a folder's report never lands on one of its files" || nok "a folder's report never lands on one of its files (exit $rc)"

# never over the evidence (issue 14 item 2): an output that is an input, by name, through a link,
# as a hard link, or as the default path, exits 2 with one line and leaves the input as it was
# expect_guard DESCRIPTION PROTECTED COMMAND...
expect_guard() {
	d=$1
	keep=$2
	shift 2
	sum=$(cksum <"$keep")
	"$@" >/dev/null 2>"$tmp/err"
	rc=$?
	if [ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q 'would overwrite its own evidence' "$tmp/err" \
		&& [ "$(cksum <"$keep")" = "$sum" ]; then ok "$d"; else nok "$d (exit $rc: $(head -c 300 "$tmp/err"))"; fi
}
mkdir -p "$tmp/ev"
cp "$snap_small" "$tmp/ev/s.pickle"
cp "$snap_small" "$tmp/ev/t.pickle"
cp samples/oom_fragmentation.log "$tmp/ev/s.pickle.html"
ln -s s.pickle "$tmp/ev/link.pickle"
ln "$tmp/ev/s.pickle" "$tmp/ev/hard.pickle"
expect_guard "-o the input itself" "$tmp/ev/s.pickle" "$bin" "$tmp/ev/s.pickle" -o "$tmp/ev/s.pickle"
expect_guard "-o a link to the input" "$tmp/ev/s.pickle" "$bin" "$tmp/ev/s.pickle" -o "$tmp/ev/link.pickle"
expect_guard "-o a hard link of the input" "$tmp/ev/s.pickle" "$bin" "$tmp/ev/s.pickle" --format json -o "$tmp/ev/hard.pickle"
expect_guard "the default output is the second input" "$tmp/ev/s.pickle.html" "$bin" "$tmp/ev/s.pickle" "$tmp/ev/s.pickle.html"
expect_guard "diff -o AFTER" "$tmp/ev/t.pickle" "$bin" diff "$tmp/ev/s.pickle" "$tmp/ev/t.pickle" --format json -o "$tmp/ev/t.pickle"
expect_guard "simulate -o SNAPSHOT" "$tmp/ev/s.pickle" "$bin" simulate "$tmp/ev/s.pickle" --alloc-conf recorded -o "$tmp/ev/link.pickle"
mkdir -p "$tmp/ev/out"
"$bin" "$snap_small" --format json -o - | python3 -c "import json,sys; d=json.load(sys.stdin); print(json.dumps({'allocated_bytes.all.current': d['devices'][0]['allocated_bytes'], 'reserved_bytes.all.current': d['devices'][0]['reserved_bytes']}))" >"$tmp/ev/out/index.json"
expect_guard "batch: index.json would land on an input" "$tmp/ev/out/index.json" "$bin" batch "$tmp/ev/out/index.json" "$tmp/ev/s.pickle" -o "$tmp/ev/out" -q
[ "$(ls "$tmp/ev/out")" = index.json ] && ok "batch: nothing written when an output is an input" || nok "batch: nothing written when an output is an input ($(ls "$tmp/ev/out"))"
"$bin" batch "$tmp/ev/out" -o "$tmp/ev/out" -q 2>"$tmp/err"
rc=$?
[ "$rc" -eq 2 ] && grep -q 'is the input folder' "$tmp/err" && [ "$(ls "$tmp/ev/out")" = index.json ] \
	&& ok "batch: -o the input folder is refused" || nok "batch: -o the input folder is refused (exit $rc: $(cat "$tmp/err"))"

# CI use (issue 15 item 5): --fail-on exits 3 exactly when the report holds a finding at or
# above that severity (the report is written all the same); 2 and 1 outrank it. The bundled
# samples and eras at both severities, every third of the corpus's runs at one.
corpus_snaps=$(for d in $(sample_dirs); do echo "$d"/*snapshot.pickle; done)
mkdir -p "$tmp/ci"
: >"$tmp/ci/list"
k=0
# shellcheck disable=SC2086
for f in samples/*.pickle tests/fixtures/eras/*.pickle $corpus_snaps; do
	[ -f "$f" ] || continue
	k=$((k + 1))
	sevs="warning critical"
	# the corpus's runs: every third, at one severity each in turn
	case $f in samples/* | tests/*) ;; *) [ $((k % 3)) -eq 0 ] || continue
		[ $((k % 2)) -eq 0 ] && sevs=warning || sevs=critical ;; esac
	for sev in $sevs; do
		"$bin" "$f" --format json -o "$tmp/ci/$k.$sev.json" --fail-on "$sev" -q 2>/dev/null
		echo "$f $k $sev $?" >>"$tmp/ci/list"
	done
done
# what each exit should have been, from the report it wrote (one python3 for them all)
bad=$(python3 -c "import json, sys
levels = {'info': 0, 'warning': 1, 'critical': 2}
bad, seen = [], set()
for line in open(sys.argv[1]):
    f, k, sev, rc = line.split()
    d = json.load(open('%s/%s.%s.json' % (sys.argv[2], k, sev)))
    want = 3 if any(levels[x['severity']] >= levels[sev] for x in d['findings']) else 0
    seen.add(rc)
    if str(want) != rc:
        bad.append('%s:%s:%s/%s' % (f, sev, rc, want))
print(' '.join(bad))
print('seen', ' '.join(sorted(seen)))" "$tmp/ci/list" "$tmp/ci" 2>&1)
seen=$(echo "$bad" | sed -n 's/^seen //p')
bad=$(echo "$bad" | grep -v '^seen ')
case $seen in *0*) ;; *) bad="$bad (never 0)" ;; esac
case $seen in *3*) ;; *) bad="$bad (never 3)" ;; esac
[ -z "$bad" ] && ok "--fail-on exits 3 exactly when a finding is at or above it, 0 otherwise" \
	|| nok "--fail-on exits 3 exactly when a finding is at or above it:$bad"
"$bin" /nonexistent.pickle --fail-on warning -o "$tmp/ci2.json" 2>/dev/null
[ $? -eq 2 ] && ok "--fail-on: an unusable input still exits 2" || nok "--fail-on: an unusable input still exits 2"
if [ -w /dev/full ]; then
	"$bin" samples/oom_fragmentation.pickle --fail-on warning -q --format json -o - >/dev/full 2>/dev/null
	[ $? -eq 1 ] && ok "--fail-on: a full disk still exits 1" || nok "--fail-on: a full disk still exits 1"
fi
"$bin" samples/oom_fragmentation.pickle --fail-on info -o "$tmp/ci3.json" 2>/dev/null
[ $? -eq 2 ] && [ ! -e "$tmp/ci3.json" ] && ok "--fail-on info is bad usage" || nok "--fail-on info is bad usage"
# the JSON and the Markdown say what made them: memreport's version and the inputs
version=$("$bin" --version | sed 's/^memreport //')
"$bin" samples/oom_fragmentation.pickle samples/oom_fragmentation.log --format json -o "$tmp/v.json"
"$bin" samples/oom_fragmentation.pickle samples/oom_fragmentation.log --format md -o "$tmp/v.md"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['memreport'] == sys.argv[2], d['memreport']
assert [i['path'] for i in d['inputs']] == ['samples/oom_fragmentation.pickle', 'samples/oom_fragmentation.log']" "$tmp/v.json" "$version" \
	&& grep -qxF "<sub>memreport $version from samples/oom\\_fragmentation.pickle (snapshot), samples/oom\\_fragmentation.log (oom_message)</sub>" "$tmp/v.md" \
	&& ok "JSON (key memreport) and Markdown name memreport $version and the inputs" \
	|| nok "JSON (key memreport) and Markdown name memreport $version and the inputs ($(sed -n 5p "$tmp/v.md"))"

# the man page's examples run (issue 15 item 5): every indented line of its EXAMPLES section,
# with memreport on PATH, in a folder holding the files they name
mkdir -p "$tmp/man/bin" "$tmp/man/memreport_runs/before" "$tmp/man/memreport_runs/after"
ln -s "$bin" "$tmp/man/bin/memreport"
cp samples/oom_fragmentation.pickle "$tmp/man/oom_snapshot.pickle"
cp samples/oom_fragmentation.log "$tmp/man/train.log"
cp samples/mlp_healthy.pickle "$tmp/man/snapshot.pickle"
cp samples/mlp_healthy.pickle "$tmp/man/memreport_runs/before/snapshot.pickle"
cp samples/oom_fragmentation.pickle "$tmp/man/memreport_runs/after/snapshot.pickle"
awk '/^# /{ on = ($0 == "# EXAMPLES") } on && /^    [^ ]/ { sub(/^    /, ""); print }' docs/memreport.1.md >"$tmp/man/examples"
count=$(wc -l <"$tmp/man/examples")
failed=""
while IFS= read -r example; do
	(cd "$tmp/man" && PATH="$tmp/man/bin:$PATH" sh -c "$example" >/dev/null 2>"$tmp/man/err") || failed="$failed [$example: $(head -c 200 "$tmp/man/err")]"
done <"$tmp/man/examples"
[ "$count" -ge 5 ] && [ -z "$failed" ] && ok "the man page's $count examples run" || nok "the man page's examples run ($count found):$failed"

# 80 columns (issue 15 item 6): --help of every command, and every text output, line by line
# longest FILE...: the widest line in columns (UTF-8 characters), 0 for empty files
longest() { cat "$@" | LC_ALL=C.UTF-8 wc -L | tr -d ' '; }
for c in "" batch diff simulate merge; do
	# shellcheck disable=SC2086
	"$bin" $c --help >"$tmp/help_$c.txt"
done
w=$(longest "$tmp"/help_*.txt)
[ "$w" -le 80 ] && ok "--help of every command fits 80 columns ($w)" || nok "--help of every command fits 80 columns (longest $w)"
: >"$tmp/texts"
# the corpus's snapshots and texts: tests/golden.sh checks the width of the text reports it
# writes of them; their logs here
corpus_texts=$(for d in $(sample_dirs); do echo "$d"/train.log; done)
# shellcheck disable=SC2086
for f in samples/*.pickle samples/*.log tests/fixtures/eras/*.pickle tests/fixtures/text/* $corpus_texts \
	"${samples_shared%/corpus}"/third_party/snapshots/*; do
	[ -f "$f" ] || continue
	"$bin" "$f" --format text -o - >>"$tmp/texts" 2>/dev/null
	case $f in samples/* | tests/fixtures/*) "$bin" "$f" --format text --redact-paths -o - >>"$tmp/texts" 2>/dev/null ;; esac
done
"$bin" simulate samples/oom_fragmentation.pickle --alloc-conf expandable_segments:True --limit 4GiB --format text >>"$tmp/texts"
w=$(longest "$tmp/texts")
[ "$w" -le 80 ] && [ "$(wc -l <"$tmp/texts")" -gt 1000 ] && ok "every text report and simulate's text fit 80 columns ($w)" \
	|| nok "every text report and simulate's text fit 80 columns (longest $w)"

# memreport simulate
if [ -f tests/cli_simulate.sh ]; then
	out=$(sh tests/cli_simulate.sh "$bin" $((n + 1)))
	echo "$out"
	n=$((n + $(echo "$out" | grep -c '^\(not \)\{0,1\}ok ')))
fi
# memreport batch and diff
sh "$(dirname "$0")/cli_batch.sh" "$bin" "$n"
