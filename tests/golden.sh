#!/bin/sh
# golden.sh BINARY [--update]: one sha256 per output of every command on the real samples.
#
# Runs every report format of every sample in $MEMREPORT_SHARED/corpus and
# third_party/snapshots, the text evidence alone, batch, diff and simulate, from a work folder
# where the inputs have short relative names (so no machine's paths reach an output), with the
# version string normalised, and compares each output's sha256 with tests/golden/sha256.txt.
# Only the hashes are committed, never outputs (some derive from third-party files).
#
# A refactor keeps every hash. A change of behaviour regenerates them on purpose with
# `make golden` (this script with --update) and says so in its commit; a silent change fails.
# Prints "ok N - ..." / "not ok N - ..." lines; skips when the shared samples are absent.
set -u
bin=$1
update=${2:-}
case $bin in /*) ;; *) bin="$(pwd)/$bin" ;; esac
top=$(pwd)
shared=${MEMREPORT_SHARED:-../shared}
case $shared in /*) ;; *) shared="$top/$shared" ;; esac
want="$top/tests/golden/sha256.txt"
if [ ! -d "$shared/corpus" ] || [ ! -d "$shared/third_party/snapshots" ]; then
	echo "ok 1 - # SKIP golden outputs: no shared samples at $shared"
	exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/in" "$work/out"
ln -s "$shared/corpus" "$work/in/corpus"
ln -s "$shared/third_party/snapshots" "$work/in/third_party"
big="$shared/corpus/gpt_large_trace/snapshot.pickle.xz"
if [ -f "$top/build/gpt_large_trace.pickle" ]; then
	ln -s "$top/build/gpt_large_trace.pickle" "$work/in/gpt_large_trace.pickle"
elif [ -f "$big" ] && command -v xz >/dev/null; then
	xz -dkc "$big" >"$work/in/gpt_large_trace.pickle"
fi
cd "$work/in" || exit 1
got="$work/got.txt"
: >"$got"

# run LABEL ARGS...: one output of memreport (-o is added), hashed with the version normalised.
version=$("$bin" --version | sed 's/^memreport //')
run() {
	label=$1
	shift
	out="$work/out/o"
	rm -rf "$out"
	"$bin" "$@" -o "$out" >/dev/null 2>"$work/err"
	rc=$?
	if [ -d "$out" ]; then
		(cd "$out" && find . -type f | LC_ALL=C sort | while read -r f; do
			printf '%s %s/%s\n' "$(sed "s/$version/VERSION/g" "$f" | sha256sum | cut -c1-64)" \
				"$label" "${f#./}"
		done) >>"$got"
	elif [ -f "$out" ]; then
		printf '%s %s\n' "$(sed "s/$version/VERSION/g" "$out" | sha256sum | cut -c1-64)" "$label" >>"$got"
	fi
	printf '%s %s#exit\n' "$rc" "$label" >>"$got"
}

snapshot_of() {
	for f in "corpus/$1/snapshot.pickle" "corpus/$1/oom_snapshot.pickle"; do
		[ -f "$f" ] && { echo "$f"; return; }
	done
	[ "$1" = gpt_large_trace ] && [ -f gpt_large_trace.pickle ] && echo gpt_large_trace.pickle
}

for d in corpus/*/; do
	s=$(basename "$d")
	snap=$(snapshot_of "$s")
	if [ -n "$snap" ]; then
		for fmt in html json md text; do
			run "$s/$fmt" "$snap" -q --format "$fmt"
		done
		[ -f "$d/train.log" ] && run "$s/with_log.json" "$snap" "$d/train.log" --format json
		run "$s/redacted.md" "$snap" --redact-paths --format md
	fi
	for t in memory_summary.txt memory_summary_abbrev.txt oom_message.txt train.log memory_stats.json; do
		[ -f "$d/$t" ] || continue
		run "$s/$t.json" "$d/$t" --format json
		run "$s/$t.text" "$d/$t" --format text
	done
	[ -f "$d/train.log" ] && run "$s/train.log.html" "$d/train.log"
done
for f in third_party/*; do
	s=$(basename "$f")
	for fmt in html json md text; do
		run "third_party/$s/$fmt" "$f" --format "$fmt"
	done
done

# batch over every corpus run, and the third-party snapshots as single-file runs
run "batch/corpus" batch corpus -j 2
run "batch/third_party" batch third_party -j 2

# diff: the pairs the corpus README compares
for pair in "gpt_varlen gpt_varlen_expandable" "oom_fragmentation oom_fragmentation_expandable" \
	"gpt_varlen7_expandable_maxsplit gpt_varlen7_expandable" "leak_val_graph leak_val_fixed"; do
	set -- $pair
	a=$(snapshot_of "$1")
	b=$(snapshot_of "$2")
	run "diff/$1-$2.html" diff "$a" "$b"
	run "diff/$1-$2.json" diff "$a" "$b" --format json
done

# simulate: the settings the README talks about, on samples that replay
for s in oom_fragmentation gpt_varlen mlp_healthy oom_capacity gpt_varlen7_expandable_maxsplit; do
	snap=$(snapshot_of "$s")
	for conf in recorded expandable_segments:True max_split_size_mb:128 \
		"roundup_power2_divisions:[256:1,>:4]" garbage_collection_threshold:0.6; do
		run "simulate/$s/$conf.json" simulate "$snap" --alloc-conf "$conf" --format json
	done
	run "simulate/$s/limit.text" simulate "$snap" --alloc-conf expandable_segments:True --limit 4GiB --format text
done

cd "$top" || exit 1
if [ "$update" = --update ]; then
	mkdir -p "$(dirname "$want")"
	cp "$got" "$want"
	echo "ok 1 - golden hashes written to tests/golden/sha256.txt ($(wc -l <"$want") lines)"
	exit 0
fi
if [ ! -f "$want" ]; then
	echo "not ok 1 - golden outputs: tests/golden/sha256.txt is missing (make golden)"
	exit 0
fi
n=0
# Compare label by label so a failure names the output that changed.
sort -k2 "$want" >"$work/want.sorted"
sort -k2 "$got" >"$work/got.sorted"
changed=$(join -1 2 -2 2 -a 1 -a 2 -e MISSING -o 0,1.1,2.1 "$work/want.sorted" "$work/got.sorted" 2>/dev/null |
	awk '$2 != $3 { print $1 " (was " $2 ", now " $3 ")" }')
if [ -z "$changed" ]; then
	echo "ok 1 - golden outputs: $(wc -l <"$want") hashes unchanged"
else
	count=$(echo "$changed" | wc -l)
	echo "not ok 1 - golden outputs: $count changed (a behaviour change regenerates them on purpose with make golden):"
	echo "$changed" | head -n 20 | sed 's/^/#   /'
fi
