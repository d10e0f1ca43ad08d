#!/bin/sh
# run.sh BUILD_DIR BINARY: runs every test and ends with "N passed, N failed".
# Unit tests are the cmocka programs BUILD_DIR/tests/test_*; cli.sh checks the command line.
set -u
build=$1
bin=$2
shared=${MEMREPORT_SHARED:-../shared}
export MEMREPORT_SHARED="$shared"
passed=0
failed=0
# The large corpus sample is xz-compressed in the shared folder.
big="$shared/corpus/gpt_large_trace/snapshot.pickle.xz"
if [ -f "$big" ] && [ ! -f build/gpt_large_trace.pickle ] && command -v xz >/dev/null; then
	xz -dkc "$big" > build/gpt_large_trace.pickle.part && mv build/gpt_large_trace.pickle.part build/gpt_large_trace.pickle
fi
for t in "$build"/tests/test_*; do
	[ -x "$t" ] || continue
	log="$t.log"
	"$t" > "$log" 2>&1
	rc=$?
	p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
	f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
	p=${p:-0}
	f=${f:-0}
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1 # crashed or sanitizer report before the summary
	fi
	echo "$(basename "$t"): $p passed, $f failed"
	if [ "$f" -ne 0 ]; then
		grep -E '^\[  (FAILED|  ERROR) \]|ERROR|error:|Sanitizer|runtime error' "$log" | head -n 20
	fi
	passed=$((passed + p))
	failed=$((failed + f))
done
out=$( (sh tests/cli.sh "$bin"; [ -f tests/browser.sh ] && sh tests/browser.sh "$bin"
	[ -f tests/browser/run.sh ] && sh tests/browser/run.sh "$bin") 2>&1)
echo "$out" | grep -v '^ok ' || true
p=$(echo "$out" | grep -c '^ok ')
f=$(echo "$out" | grep -c '^not ok ')
echo "cli.sh: $p passed, $f failed"
passed=$((passed + p))
failed=$((failed + f))
# every saved fuzz input, replayed; hostile inputs through the command line; golden outputs;
# the stage order of docs/architecture.md; functions of at most 120 lines; memreport.capture
# against a stand-in torch; make install, make deb, make wheel
for s in "sh tests/fuzz/replay.sh $build" "sh tests/hostile.sh $bin" "sh tests/golden.sh $bin" \
	"sh tools/check_layers.sh" "sh tools/check_functions.sh" "sh tests/capture.sh $bin" \
	"sh tests/install.sh $bin" "sh tests/threads.sh $bin" "python3 tests/diagnosis.py $bin" "python3 tests/capacity.py $bin"; do
	out=$($s 2>&1)
	echo "$out" | grep -v '^ok ' || true
	p=$(echo "$out" | grep -c '^ok ')
	f=$(echo "$out" | grep -c '^not ok ')
	name=${s#sh }
	name=${name#python3 }
	echo "${name%% *}: $p passed, $f failed"
	passed=$((passed + p))
	failed=$((failed + f))
done
# the checked-in style
if command -v clang-format >/dev/null 2>&1; then
	if make -s format-check >/dev/null 2>&1; then
		echo "format: 1 passed, 0 failed"
		passed=$((passed + 1))
	else
		echo "format: 0 passed, 1 failed (run make format)"
		failed=$((failed + 1))
	fi
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
