#!/bin/sh
# threads.sh BINARY: outputs are byte-identical whether memreport runs on one thread
# (MEMREPORT_THREADS=1) or on as many as it likes (the replays of a report, the allocations
# read beside them, the devices' allocations and moments, simulate's two replays, diff's two
# loads, a batch's runs).
#
# The project corpus' six largest snapshots (build/corpus, tests/samples.sh) and every shared
# one (with the 1 M-event gpt_large_trace, unpacked into build/) in JSON (the formats render the
# same analysis: the threads are in the replays, simulate, diff and batch), simulate, a diff
# of each pair of neighbours; the two-device fixture in JSON and HTML; and a batch of the whole
# project corpus (every run's report), each run both ways and compared byte for byte. Prints
# "ok N - ..." / "not ok N - ..." lines.
set -u
bin=$1
case $bin in /*) ;; *) bin="$(pwd)/$bin" ;; esac
. tests/samples.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
n=0
# same LABEL ARGS...: one output (-o is added), written on one thread and on several
same() {
	label=$1
	shift
	n=$((n + 1))
	MEMREPORT_THREADS=1 "$bin" "$@" -o "$work/one" >/dev/null 2>&1
	r1=$?
	"$bin" "$@" -o "$work/many" >/dev/null 2>&1
	r2=$?
	if [ "$r1" = "$r2" ] && { [ ! -e "$work/one" ] && [ ! -e "$work/many" ] ||
		diff -r "$work/one" "$work/many" >/dev/null 2>&1; }; then
		echo "ok $n - one thread and several write the same bytes: $label"
	else
		echo "not ok $n - one thread and several differ: $label (exit $r1 / $r2)"
	fi
	rm -rf "$work/one" "$work/many"
}
# Every run's report is compared through the batch below; one by one (a report, simulate, a
# diff) the project's six longest traces, where the replays and the allocations running side
# by side have the most to do, and every shared sample.
snaps=$(ls -S "$samples_project"/*/snapshot.pickle "$samples_project"/*/oom_snapshot.pickle \
	2>/dev/null | head -n 6)
for d in "$samples_shared"/*/; do
	for f in "$d"snapshot.pickle "$d"oom_snapshot.pickle; do
		[ -f "$f" ] && snaps="$snaps $f"
	done
done
[ -f build/gpt_large_trace.pickle ] && snaps="$snaps build/gpt_large_trace.pickle"
last=""
for s in $snaps; do
	name=$(basename "$(dirname "$s")")/$(basename "$s")
	same "$name json" -q "$s" --format json
	same "$name simulate" simulate "$s" --alloc-conf expandable_segments:True
	[ -n "$last" ] && same "diff $name" diff -q "$last" "$s" --format json
	last=$s
done
# two devices: their allocations and moments are read side by side
multi=tests/fixtures/eras/multi_device.pickle
same "two devices json" -q "$multi" --format json
same "two devices html" -q "$multi" --format html
same "batch of the project's corpus" batch -q "$samples_project" -j 2
