#!/bin/sh
# run.sh BUILD_DIR BINARY: runs every test and ends with "N passed, N failed, N skipped".
# Unit tests are the cmocka programs BUILD_DIR/tests/test_*; the scripts print "ok N - ...",
# "not ok N - ..." and, when what a check needs is absent (the shared samples, Chromium,
# node_modules), "ok N - ... # SKIP why". A skip is counted apart, never as passed nor failed.
# Samples come from tests/corpus, unpacked first into build/corpus (tests/unpack_corpus.sh), and
# from $MEMREPORT_SHARED (default ../shared). The browser tests, which mostly wait on
# Chromium, make install/deb/wheel, the golden outputs and threads.sh run
# beside the others, in a second lane whose lines are printed last.
set -u
build=$1
bin=$2
shared=${MEMREPORT_SHARED:-../shared}
export MEMREPORT_SHARED="$shared"
passed=0
failed=0
skipped=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# python3 as PATH finds it, resolved once: a version manager's shim (pyenv's is a bash script)
# would cost a shell and a lookup on each of the scripts' hundred calls
if py=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null) && [ -x "$py" ]; then
	mkdir "$work/bin" && ln -s "$py" "$work/bin/python3" && PATH="$work/bin:$PATH" && export PATH
fi

# count NAME PASSED FAILED SKIPPED: one group's line, added to the totals
count() {
	echo "$1: $2 passed, $3 failed, $4 skipped"
	passed=$((passed + $2))
	failed=$((failed + $3))
	skipped=$((skipped + $4))
}

# tap NAME FILE: counts the ok / not ok / SKIP lines of a script's output; prints the rest
# (failures and their details) first.
tap() {
	grep -v '^ok ' "$2"
	count "$1" "$(grep '^ok ' "$2" | grep -vc '# SKIP')" "$(grep -c '^not ok ' "$2")" \
		"$(grep -c '^ok .*# SKIP' "$2")"
}

if ! sh tests/unpack_corpus.sh; then
	count tests/unpack_corpus.sh 0 1 0
fi
(sh tests/browser.sh "$bin" >"$work/browser" 2>&1
	[ -f tests/browser/run.sh ] && sh tests/browser/run.sh "$bin" >>"$work/browser" 2>&1
	sh tests/install.sh "$bin" >"$work/install" 2>&1
	for s in golden threads; do
		sh "tests/$s.sh" "$bin" >"$work/$s" 2>&1
	done) &
lane=$!

for t in "$build"/tests/test_*; do
	[ -x "$t" ] || continue
	log="$t.log"
	"$t" >"$log" 2>&1
	rc=$?
	p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
	f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
	s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
	p=${p:-0}
	f=${f:-0}
	s=${s:-0}
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1 # crashed or sanitizer report before the summary
	fi
	if [ "$f" -ne 0 ]; then
		grep -E '^\[  (FAILED|  ERROR) \]|ERROR|error:|Sanitizer|runtime error' "$log" | head -n 20
	fi
	count "$(basename "$t")" "$p" "$f" "$s"
done
# the command line; every saved fuzz input, replayed; work that grows linearly with the input;
# sharded batches and their merge; the interactive page's data block against its reference;
# the stage order of docs/architecture.md; functions of at most 120 lines; memreport.capture
# against a stand-in torch; what memreport concludes about every real run; the capacity plan
# against the batch sizes that were really tried; runs whose trace is cut as a wrapped ring
# buffer cuts it; hostile inputs
for s in "sh tests/cli.sh $bin" "sh tests/fuzz/replay.sh $build" "sh tests/scaling.sh $bin" \
	"sh tests/cli_shard.sh $bin" "sh tests/page_data.sh $bin" "sh tools/check_layers.sh" \
	"sh tools/check_functions.sh" "sh tests/capture.sh $bin" "python3 tests/diagnosis.py $bin" \
	"python3 tests/capacity.py $bin" "python3 tests/truncated.py $bin" "sh tests/hostile.sh $bin"; do
	$s >"$work/out" 2>&1
	name=${s#sh }
	name=${name#python3 }
	tap "${name%% *}" "$work/out"
done
# the checked-in style
if command -v clang-format >/dev/null 2>&1; then
	if make -s format-check >/dev/null 2>&1; then
		count format 1 0 0
	else
		echo "format: run make format"
		count format 0 1 0
	fi
fi
# the second lane: Chromium on the reports (tests/browser.sh, tests/browser/run.sh); make
# install, make deb, make wheel; the golden outputs, one thread against several
wait "$lane"
tap tests/browser.sh "$work/browser"
tap tests/install.sh "$work/install"
for s in golden threads; do
	tap "tests/$s.sh" "$work/$s"
done
if [ "$skipped" -ne 0 ]; then
	echo "(skipped: checks whose samples or tools are absent here; README.md, Building and testing)"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
