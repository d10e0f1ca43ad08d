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
	"$bin" "$snap" --device 3 --format json -o - | grep -q '"devices": \[\]' \
		&& ok "--device filters devices" || nok "--device filters devices"
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
# memreport simulate
if [ -f tests/cli_simulate.sh ]; then
	out=$(sh tests/cli_simulate.sh "$bin" $((n + 1)))
	echo "$out"
	n=$((n + $(echo "$out" | grep -c '^\(not \)\{0,1\}ok ')))
fi
# memreport batch and diff
sh "$(dirname "$0")/cli_batch.sh" "$bin" "$n"
