#!/bin/sh
# hostile.sh BINARY: issue 6's acceptance cases, each a real command-line run. Prints
# "ok N - ..." or "not ok N - ...". Every hostile input must exit 2 with exactly one line on
# stderr naming the input, leave the output folder empty (no report, no temporary file) and run
# nothing (the os.system pickles try to create a marker file). With MEMREPORT_VALGRIND=1 a few
# of them run again under valgrind (--error-exitcode=99, definite leaks are errors).
#
# Random flips inside a real snapshot may land in a string or a number and still decode; such a
# variant must then exit 0 with one report (valid JSON) and nothing else in the output folder.
# The requirement is "no crash, no half-written report", not "always refused".
set -u
bin=$1
. tests/samples.sh
snap=$(sample_snapshot oom_fragmentation)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
in="$tmp/in"
out="$tmp/out"
marker="$tmp/pwned"
mkdir -p "$in" "$out"
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
have_python=0
command -v python3 >/dev/null 2>&1 && have_python=1

# run_case FILE: runs the binary on FILE writing into the output folder; sets rc, lines, left.
run_case() {
	rm -rf "$out"
	mkdir -p "$out"
	"$bin" -q "$1" --format json -o "$out/report.json" >"$tmp/stdout" 2>"$tmp/err"
	rc=$?
	lines=$(wc -l <"$tmp/err" | tr -d ' ')
	left=$(ls -A "$out" | wc -l | tr -d ' ')
}

# refused DESCRIPTION FILE [WORD]: exit 2, one stderr line naming FILE (and WORD), nothing left.
refused() {
	d=$1
	f=$2
	word=${3:-}
	run_case "$f"
	if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && grep -qF "$f" "$tmp/err" && [ "$left" -eq 0 ] &&
		{ [ -z "$word" ] || grep -qF "$word" "$tmp/err"; } && [ ! -e "$marker" ]; then
		ok "$d"
	else
		nok "$d (exit $rc, $lines stderr lines, $left files left, marker $([ -e "$marker" ] && echo present || echo absent): $(head -c 300 "$tmp/err"))"
	fi
}

# refused_or_report DESCRIPTION FILE: either refused as above, or exit 0 with exactly one
# report, valid JSON, and nothing else in the output folder.
refused_or_report() {
	d=$1
	f=$2
	run_case "$f"
	if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && grep -qF "$f" "$tmp/err" && [ "$left" -eq 0 ]; then
		ok "$d (refused)"
	elif [ "$rc" -eq 0 ] && [ "$left" -eq 1 ] && [ -s "$out/report.json" ] &&
		python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$out/report.json" 2>/dev/null; then
		ok "$d (decoded: valid report)"
	else
		nok "$d (exit $rc, $lines stderr lines, $left files left: $(head -c 300 "$tmp/err"))"
	fi
}

# bytes FILE PYTHON-EXPRESSION: writes the bytes the expression evaluates to.
bytes() {
	python3 -c "import os,pickle,random,struct,sys
open(sys.argv[1],'wb').write($2)" "$1"
}

if [ "$have_python" -eq 0 ]; then
	skip "hostile pickles" "python3 is needed to write them"
	exit 0
fi

# ---- pickles that would run code -------------------------------------------------------------
cat >"$tmp/evil.py" <<PY
import os, pickle, sys
class Evil:
    def __reduce__(self):
        return (os.system, ("touch $marker",))
open(sys.argv[1], "wb").write(pickle.dumps(Evil(), protocol=int(sys.argv[2])))
PY
for proto in 2 4; do
	python3 "$tmp/evil.py" "$in/reduce_p$proto.pickle" "$proto"
	refused "REDUCE os.system, protocol $proto" "$in/reduce_p$proto.pickle" "GLOBAL"
	[ ! -e "$marker" ] && ok "REDUCE os.system, protocol $proto: nothing executed" ||
		nok "REDUCE os.system, protocol $proto: nothing executed"
done
# os.system behind a plain REDUCE whose callable came from the memo: REDUCE itself is named
bytes "$in/reduce_only.pickle" "b'\\x80\\x02N)R.'"
refused "REDUCE" "$in/reduce_only.pickle" "REDUCE"
bytes "$in/global.pickle" "b'\\x80\\x02cos\\nsystem\\n.'"
refused "GLOBAL" "$in/global.pickle" "GLOBAL"
bytes "$in/inst.pickle" "b'\\x80\\x02(ios\\nsystem\\n.'"
refused "INST" "$in/inst.pickle" "INST"
bytes "$in/obj.pickle" "b'\\x80\\x02(No.'"
refused "OBJ" "$in/obj.pickle" "OBJ"
bytes "$in/newobj.pickle" "b'\\x80\\x02N)\\x81.'"
refused "NEWOBJ" "$in/newobj.pickle" "NEWOBJ"
bytes "$in/build.pickle" "b'\\x80\\x02}}b.'"
refused "BUILD" "$in/build.pickle" "BUILD"
bytes "$in/persid.pickle" "b'\\x80\\x02P1\\n.'"
refused "PERSID" "$in/persid.pickle" "PERSID"

# ---- a real snapshot, cut, flipped; random bytes ---------------------------------------------
if [ -f "$snap" ]; then
	size=$(wc -c <"$snap" | tr -d ' ')
	k=1
	while [ "$k" -lt 40 ]; do
		head -c $((size * k / 40)) "$snap" >"$in/cut_$k.pickle"
		refused "snapshot cut at $k/40" "$in/cut_$k.pickle"
		k=$((k + 1))
	done
	for seed in 1 2 3 4 5 6 7 8 9 10; do
		python3 -c "import random,sys
d=bytearray(open(sys.argv[1],'rb').read()); r=random.Random(int(sys.argv[3]))
for _ in range(20): d[r.randrange(len(d))]=r.randrange(256)
open(sys.argv[2],'wb').write(d)" "$snap" "$in/flip_$seed.pickle" "$seed"
		refused_or_report "20 random bytes flipped in a real snapshot (seed $seed)" "$in/flip_$seed.pickle"
	done
else
	skip "snapshot cut and flipped" "$snap not found"
fi
for seed in 1 2 3 4 5 6 7 8 9 10; do
	python3 -c "import random,sys
r=random.Random(1000+int(sys.argv[2])); open(sys.argv[1],'wb').write(bytes(r.randrange(256) for _ in range(4096)))" \
		"$in/random_$seed.bin" "$seed"
	refused "4 KiB of random bytes (seed $seed)" "$in/random_$seed.bin"
done

# ---- limits ----------------------------------------------------------------------------------
bytes "$in/nested.pickle" "b'\\x80\\x04' + b']' * 1000000 + b'a' * 999999 + b'.'"
refused "1 000 000 nested lists" "$in/nested.pickle" "nesting limit"
bytes "$in/binunicode8.pickle" "b'\\x80\\x04\\x8d' + struct.pack('<Q', 2**62) + b'abc.'"
refused "BINUNICODE8 with a 2^62 length" "$in/binunicode8.pickle" "BINUNICODE8"
bytes "$in/binunicode.pickle" "b'\\x80\\x04X' + struct.pack('<I', 2**32 - 1) + b'abc.'"
refused "BINUNICODE with a 2^32-1 length" "$in/binunicode.pickle" "BINUNICODE"
bytes "$in/binget.pickle" "b'\\x80\\x04]\\x94j\\x07\\x00\\x00\\x00.'"
refused "LONG_BINGET of an index never stored" "$in/binget.pickle" "LONG_BINGET"
: >"$in/empty.pickle"
refused "an empty file" "$in/empty.pickle"
# memo amplification: one segment (50 blocks) listed 30 000 times; one trace entry 30 000 times
bytes "$in/shared_blocks.pickle" "b'\\x80\\x04}(\\x8c\\x08segments]\\x94(' + b'}\\x94(\\x8c\\ntotal_size\\x94J\\x00\\x00\\x01\\x00\\x8c\\x06blocks\\x94](' + b'}\\x94(\\x8c\\x04size\\x94M\\x00\\x02\\x8c\\x05state\\x94\\x8c\\x10active_allocated\\x94u' + b'h\\x04' * 999 + b'eu' + b'h\\x01' * 30000 + b'eu.'"
refused "one segment listed 30 000 times through the memo" "$in/shared_blocks.pickle" "memo"
bytes "$in/shared_events.pickle" "b'\\x80\\x04}(\\x8c\\x08segments]\\x8c\\x0ddevice_traces(]\\x94(}\\x94(\\x8c\\x06action\\x94\\x8c\\x05alloc\\x94\\x8c\\x04size\\x94K\\x01u' + b'h\\x01' * 29999 + b'e' + b'h\\x00' * 1023 + b'lu.'"
refused "one trace entry listed 30 million times through the memo" "$in/shared_events.pickle" "memo"
bytes "$in/self_key.pickle" "b'\\x80\\x04\\x95\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00}\\x94(\\x8c\\x08segments\\x94]\\x94\\x8c\\x12allocator_settings\\x94}\\x94(\\x8c\\x01k\\x94}\\x94h\\x06K\\x01suu.'"
run_case "$in/self_key.pickle"
[ "$rc" -eq 0 ] && [ "$left" -eq 1 ] && ok "a settings dict that is its own key (no endless recursion)" ||
	nok "a settings dict that is its own key (exit $rc: $(head -c 200 "$tmp/err"))"

# ---- not a snapshot --------------------------------------------------------------------------
bytes "$in/dict.pickle" "pickle.dumps({'a': 1, 'b': [1, 2]}, protocol=4)"
refused "a pickle of a dict that is not a snapshot" "$in/dict.pickle" "not a PyTorch memory snapshot"
bytes "$in/ints.pickle" "pickle.dumps([1, 2, 3], protocol=4)"
refused "a pickle of a list of ints" "$in/ints.pickle" "not a PyTorch memory snapshot"
bytes "$in/newline_key.pickle" "pickle.dumps({'\\nsegments\\x1b[31m': 1}, protocol=4)"
refused "a dict key with a newline and an ESC stays on one line" "$in/newline_key.pickle"
printf 'hello, this is neither a memory_summary() table nor an out-of-memory message\n' >"$in/text.txt"
refused "text that is neither a table nor an OOM message" "$in/text.txt"

# ---- compressed inputs: the limits of zip members (issue 15 item 6) ----------------------------
if command -v gzip >/dev/null && command -v xz >/dev/null; then
	# (the ratio trips after about 10 MiB of output: a bigger bomb only costs xz's time here)
	head -c $((64 << 20)) /dev/zero | xz -c -0 >"$in/bomb.xz"
	refused "64 MiB of zeros in a 10 KiB xz file" "$in/bomb.xz" "compression bomb"
	gzip -c "$(dirname "$0")/../samples/mlp_healthy.pickle" >"$in/snap.gz"
	head -c 5000 "$in/snap.gz" >"$in/cut.gz"
	refused "a gzip snapshot cut short" "$in/cut.gz" "gzip data is cut short"
	gzip -c "$in/snap.gz" >"$in/twice.gz"
	refused "a snapshot gzipped twice" "$in/twice.gz" "compressed twice"
	printf '\037\213garbage' >"$in/garbage.gz"
	refused "gzip magic and garbage" "$in/garbage.gz" "gzip data"
fi

# ---- paths in messages -----------------------------------------------------------------------
# A file name with a newline and an ESC sequence: the message stays one line and no control
# byte reaches the terminal (issue 14 item 9), for every command and for simulate's text header.
esc=$(printf '\033')
odd="$in/$(printf 'odd\nname\033[31m')"
no_control() { ! LC_ALL=C grep -q "$esc" "$1"; }
printf 'neither a table nor an OOM message\n' >"$odd.txt"
for args in "report" "diff" "simulate" "batch"; do
	case $args in
	report) "$bin" -q "$odd.txt" -o "$out/r.json" 2>"$tmp/err" ;;
	diff) "$bin" diff "$odd.txt" "$odd.missing" -o "$out/d.json" 2>"$tmp/err" ;;
	simulate) "$bin" simulate "$odd.missing" --alloc-conf recorded 2>"$tmp/err" ;;
	batch) "$bin" batch "$odd.missing" -o "$out/b" -q 2>"$tmp/err" ;;
	esac
	rc=$?
	lines=$(wc -l <"$tmp/err" | tr -d ' ')
	[ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && no_control "$tmp/err" && grep -q 'odd?name?\[31m' "$tmp/err" &&
		ok "$args: a path with a newline and an ESC is one escaped line" ||
		nok "$args: a path with a newline and an ESC is one escaped line (exit $rc, $lines lines: $(od -c "$tmp/err" | head -n 3))"
done
if [ -f "$snap" ]; then
	cp "$snap" "$odd.pickle"
	"$bin" simulate "$odd.pickle" --alloc-conf recorded --format text >"$tmp/sim.txt" 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq 0 ] && no_control "$tmp/sim.txt" && grep -q '^settings: ' "$tmp/sim.txt" &&
		grep -q 'odd?name?\[31m.pickle,' "$tmp/sim.txt" && ! grep -q '^name' "$tmp/sim.txt" &&
		ok "simulate: the text header quotes the path on one line" ||
		nok "simulate: the text header quotes the path on one line (exit $rc: $(head -n 2 "$tmp/sim.txt"))"
	rm -f "$odd.pickle"
fi

# ---- inputs that shrink while they are read (issue 14 item 7) ----------------------------------
# MEMREPORT_TEST_STOP_AT_MAP=PATH stops memreport (SIGSTOP) right after it maps PATH and before
# it reads a byte; the test truncates the file, as logrotate's copytruncate does, and continues
# it. At a page boundary the next read faults (SIGBUS, exit 135 before); inside a page the rest
# of it reads as zeros. Both must be exit 2, "file changed while being read", nothing written.
# stop_truncate_continue SIZE FILE COMMAND...: runs COMMAND, cuts FILE to SIZE while it is stopped.
stop_truncate_continue() {
	size=$1
	file=$2
	shift 2
	MEMREPORT_TEST_STOP_AT_MAP="$file" "$@" >/dev/null 2>"$tmp/err" &
	pid=$!
	i=0
	while [ "$i" -lt 300 ] && kill -0 "$pid" 2>/dev/null && ! grep -q '^State:[[:space:]]*T' "/proc/$pid/status" 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
	truncate -s "$size" "$file"
	kill -CONT "$pid" 2>/dev/null
	wait "$pid"
	rc=$?
}
small="$(dirname "$0")/../samples/oom_fragmentation.pickle"
for size in 8192 10000; do
	rm -rf "$out" && mkdir -p "$out"
	cp "$small" "$in/shrinks.pickle"
	stop_truncate_continue "$size" "$in/shrinks.pickle" "$bin" -q "$in/shrinks.pickle" --format json -o "$out/r.json"
	[ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "shrinks.pickle: file changed while being read" "$tmp/err" &&
		[ -z "$(ls -A "$out")" ] && ok "a snapshot cut to $size bytes while read: exit 2, nothing written" ||
		nok "a snapshot cut to $size bytes while read (exit $rc: $(head -c 300 "$tmp/err"))"
done
mkdir -p "$in/run"
cp "$small" "$in/run/snapshot.pickle"
stop_truncate_continue 8192 "$in/run/snapshot.pickle" "$bin" batch "$in/run" -o "$out/b" -q
[ "$rc" -eq 2 ] && grep -q "file changed while being read" "$out/b/index.json" &&
	ok "batch: a member cut while read is its row's error, exit 2" ||
	nok "batch: a member cut while read (exit $rc: $(head -c 300 "$tmp/err"))"

# ---- full disk -------------------------------------------------------------------------------
if [ -w /dev/full ] && [ -f "$snap" ]; then
	"$bin" -q "$snap" --format json -o - >/dev/full 2>"$tmp/err"
	rc=$?
	[ "$rc" -eq 1 ] && ok "a full disk on standard output exits 1" ||
		nok "a full disk on standard output exits 1 (exit $rc)"
fi

# ---- valgrind --------------------------------------------------------------------------------
if [ "${MEMREPORT_VALGRIND:-0}" = 1 ]; then
	if command -v valgrind >/dev/null 2>&1; then
		for f in reduce_p4.pickle cut_20.pickle flip_1.pickle random_1.bin binunicode8.pickle \
			binget.pickle dict.pickle text.txt shared_blocks.pickle self_key.pickle; do
			[ -f "$in/$f" ] || continue
			rm -rf "$out"
			mkdir -p "$out"
			valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
				"$bin" -q "$in/$f" --format json -o "$out/report.json" >/dev/null 2>"$tmp/vg"
			rc=$?
			[ "$rc" -ne 99 ] && [ "$rc" -le 2 ] && ok "valgrind clean: $f (exit $rc)" ||
				nok "valgrind clean: $f (exit $rc: $(head -c 400 "$tmp/vg"))"
		done
	else
		skip "valgrind runs" "valgrind not installed"
	fi
fi
