#!/bin/sh
# fuzz.sh BUILD_DIR TARGET SECONDS [LIBFUZZER_ARG...]: runs one libFuzzer target (built by
# `make fuzz` as BUILD_DIR/fuzz_TARGET) for SECONDS over its saved corpus tests/fuzz/TARGET/.
# Inputs that add coverage go to BUILD_DIR/corpus/TARGET (not committed: minimise them into
# tests/fuzz/TARGET with -merge=1 when worth keeping); crashes, leaks and timeouts are written to
# tests/fuzz/TARGET/crash-* (or leak-*, timeout-*, oom-*) so the fix is committed with its input
# and `make check` replays it forever. The full log is BUILD_DIR/fuzz_TARGET.log; the last lines
# (libFuzzer's final stats: executions, coverage) are printed.
set -u
build=$1
target=$2
seconds=$3
shift 3
bin="$build/fuzz_$target"
[ -x "$bin" ] || { echo "fuzz.sh: $bin is not built (make fuzz)" >&2; exit 1; }
dict=tests/fuzz/pickle.dict
maxlen=65536
if [ "$target" = text ]; then
	dict=tests/fuzz/text.dict
	maxlen=16384
fi
mkdir -p "$build/corpus/$target" "tests/fuzz/$target"
log="$build/fuzz_$target.log"
"$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
	-max_len="$maxlen" -dict="$dict" -print_final_stats=1 \
	-artifact_prefix="tests/fuzz/$target/" "$@" "$build/corpus/$target" "tests/fuzz/$target" \
	>"$log" 2>&1
rc=$?
grep -E '^#[0-9]+ +DONE|^stat::number_of_executed_units|^stat::peak_rss|ERROR|SUMMARY|Test unit written' "$log" | tail -n 8
echo "fuzz_$target: exit $rc (log: $log)"
exit $rc
