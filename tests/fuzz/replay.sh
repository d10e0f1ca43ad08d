#!/bin/sh
# replay.sh BUILD_DIR: runs every fuzz replay binary (BUILD_DIR/fuzz/replay_NAME, built by
# `make check` / `make asan`) over its saved corpus tests/fuzz/NAME/. Builds nothing. Prints one
# "ok N - ..." or "not ok N - ..." line per target; a crash or a sanitizer report fails it.
set -u
build=$1
n=0
for t in pickle snapshot text pipeline zip; do
	n=$((n + 1))
	bin="$build/fuzz/replay_$t"
	if [ ! -x "$bin" ]; then
		echo "not ok $n - fuzz replay $t: $bin is not built"
		continue
	fi
	log="$build/fuzz/replay_$t.log"
	"$bin" "tests/fuzz/$t" >"$log" 2>&1
	rc=$?
	count=$(sed -n 's/^replay_[a-z]*: \([0-9]*\) inputs$/\1/p' "$log" | tail -n 1)
	if [ "$rc" -eq 0 ] && [ -n "$count" ] && ! grep -qE 'Sanitizer|runtime error|check failed' "$log"; then
		echo "ok $n - fuzz replay $t: $count saved inputs"
	else
		echo "not ok $n - fuzz replay $t (exit $rc): $(grep -E 'ERROR|runtime error|check failed|SUMMARY' "$log" | head -n 3 | tr '\n' ' ')"
	fi
done
