#!/bin/sh
# golden.sh BINARY [--update]: one sha256 per output of every command on the real samples.
#
# Two sets, both in tests/golden/sha256.txt. The project's: every report format of every sample
# of tests/corpus (as tests/unpack_corpus.sh unpacks it into build/corpus), the text evidence
# alone, batch over that corpus, diff and simulate on its samples. The shared one, its labels
# under shared/: the same for the samples of $MEMREPORT_SHARED/corpus that the project lacks,
# third_party/snapshots, batch over both folders, diff and simulate on the variable-length runs.
# Each runs from a work folder where the inputs have short relative names (so no machine's
# paths reach an output), with the version string normalised. Without the shared samples only
# the project's set is compared and the shared one is skipped.
# Only the hashes are committed, never outputs (some derive from third-party files).
#
# A refactor keeps every hash. A change of behaviour regenerates them on purpose with
# `make golden` (this script with --update, which needs the shared samples) and says so in its
# commit; a silent change fails. Prints "ok N - ..." / "not ok N - ..." / "ok N - # SKIP" lines.
set -u
bin=$1
update=${2:-}
case $bin in /*) ;; *) bin="$(pwd)/$bin" ;; esac
top=$(pwd)
shared=${MEMREPORT_SHARED:-../shared}
case $shared in /*) ;; *) shared="$top/$shared" ;; esac
want="$top/tests/golden/sha256.txt"
have_shared=no
[ -d "$shared/corpus" ] && [ -d "$shared/third_party/snapshots" ] && have_shared=yes
if [ "$update" = --update ] && [ "$have_shared" = no ]; then
	echo "golden.sh: make golden needs the shared samples (no $shared/corpus): hashes unchanged" >&2
	exit 1
fi
if ! sh "$top/tests/unpack_corpus.sh"; then
	echo "not ok 1 - golden outputs: tests/corpus could not be unpacked into build/corpus"
	exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/project" "$work/shared" "$work/out"
ln -s "$top/build/corpus" "$work/project/corpus"
got="$work/got.txt"
: >"$got"

# run LABEL ARGS...: one output of memreport (-o is added), hashed with the version normalised.
# The outputs wait in $work/out and are hashed a few hundred at a time (flush): one sed and one
# sha256sum for all of them rather than three processes for each. $plan keeps the order: a
# file's line "F PATH LABEL", an exit status's "X STATUS LABEL".
version=$("$bin" --version | sed 's/^memreport //')
plan="$work/plan"
: >"$plan"
pending=0
outputs=0
widest=0 # the widest line of every text-format output: each must fit 80 columns
flush() {
	[ "$pending" -gt 0 ] || return 0
	awk '$1 == "F" { print $2 }' "$plan" | xargs sed -i "s/$version/VERSION/g"
	w=$(awk '$1 == "F" && $3 ~ /[\/.]text$/ { print $2 }' "$plan" | xargs -r cat |
		LC_ALL=C.UTF-8 wc -L | tr -d ' ')
	[ "${w:-0}" -gt "$widest" ] && widest=$w
	awk '$1 == "F" { print $2 }' "$plan" | xargs sha256sum >"$work/sums"
	awk 'NR == FNR { sum[$2] = $1; next }
	     $1 == "F" { print sum[$2], $3; next }
	     { print $2, $3 }' "$work/sums" "$plan" >>"$got"
	rm -rf "$work/out"/*
	: >"$plan"
	pending=0
}
run() {
	label=$1
	shift
	outputs=$((outputs + 1))
	out="$work/out/$outputs"
	"$bin" "$@" -o "$out" >/dev/null 2>"$work/err"
	rc=$?
	if [ -d "$out" ]; then
		(cd "$out" && find . -type f | LC_ALL=C sort | while read -r f; do
			printf 'F %s %s/%s\n' "$out/${f#./}" "$label" "${f#./}"
		done) >>"$plan"
	elif [ -f "$out" ]; then
		printf 'F %s %s\n' "$out" "$label" >>"$plan"
	fi
	printf 'X %s %s#exit\n' "$rc" "$label" >>"$plan"
	pending=$((pending + 1))
	[ "$pending" -lt 200 ] || flush
}

snapshot_of() {
	for f in "corpus/$1/snapshot.pickle" "corpus/$1/oom_snapshot.pickle"; do
		[ -f "$f" ] && { echo "$f"; return; }
	done
	[ "$1" = gpt_large_trace ] && [ -f gpt_large_trace.pickle ] && echo gpt_large_trace.pickle
}

# samples PREFIX NAME...: every output of each sample folder corpus/NAME, labels under PREFIX
samples() {
	prefix=$1
	shift
	for s in "$@"; do
		d=corpus/$s/ # with its slash, as the outputs have always named it (corpus/NAME//file)
		snap=$(snapshot_of "$s")
		if [ -n "$snap" ]; then
			for fmt in html json md text; do
				run "$prefix$s/$fmt" "$snap" -q --format "$fmt"
			done
			[ -f "$d/train.log" ] && run "$prefix$s/with_log.json" "$snap" "$d/train.log" --format json
			run "$prefix$s/redacted.md" "$snap" --redact-paths --format md
		fi
		# every text input alone in JSON; in text the tables and messages (a log and a stats
		# dump render through the same text writer, and their JSON holds what it prints)
		for t in memory_summary.txt memory_summary_abbrev.txt oom_message.txt train.log memory_stats.json; do
			[ -f "$d/$t" ] || continue
			run "$prefix$s/$t.json" "$d/$t" --format json
			case $t in train.log | memory_stats.json) continue ;; esac
			run "$prefix$s/$t.text" "$d/$t" --format text
		done
		[ -f "$d/train.log" ] && run "$prefix$s/train.log.html" "$d/train.log"
	done
}

# pairs PREFIX "A B"...: diff of each pair of samples, labels under PREFIX
pairs() {
	prefix=$1
	shift
	for pair in "$@"; do
		set -- $pair
		a=$(snapshot_of "$1")
		b=$(snapshot_of "$2")
		run "${prefix}diff/$1-$2.html" diff "$a" "$b"
		run "${prefix}diff/$1-$2.json" diff "$a" "$b" --format json
	done
}

# replays PREFIX NAME...: simulate with the settings the README talks about, labels under PREFIX
replays() {
	prefix=$1
	shift
	for s in "$@"; do
		snap=$(snapshot_of "$s")
		for conf in recorded expandable_segments:True max_split_size_mb:128 \
			"roundup_power2_divisions:[256:1,>:4]" garbage_collection_threshold:0.6; do
			run "${prefix}simulate/$s/$conf.json" simulate "$snap" --alloc-conf "$conf" --format json
		done
		run "${prefix}simulate/$s/limit.text" simulate "$snap" --alloc-conf expandable_segments:True \
			--limit 4GiB --format text
	done
}

# The project's set: its corpus alone.
cd "$work/project" || exit 1
samples "" $(cd corpus && ls)
run "batch/corpus" batch corpus -j 2
pairs "" "oom_fragmentation oom_fragmentation_expandable" "leak_val_graph leak_val_fixed"
replays "" oom_fragmentation mlp_healthy oom_capacity

# The shared set: the samples only the shared corpus has, other people's snapshots.
if [ "$have_shared" = yes ]; then
	cd "$work/shared" || exit 1
	ln -s "$shared/corpus" corpus
	ln -s "$shared/third_party/snapshots" third_party
	big="$shared/corpus/gpt_large_trace/snapshot.pickle.xz"
	if [ -f "$top/build/gpt_large_trace.pickle" ]; then
		ln -s "$top/build/gpt_large_trace.pickle" gpt_large_trace.pickle
	elif [ -f "$big" ] && command -v xz >/dev/null; then
		xz -dkc "$big" >gpt_large_trace.pickle
	fi
	only=
	for d in corpus/*/; do
		s=$(basename "$d")
		[ -d "$top/tests/corpus/$s" ] || only="$only $s"
	done
	samples shared/ $only
	for f in third_party/*; do
		s=$(basename "$f")
		for fmt in html json md text; do
			run "shared/third_party/$s/$fmt" "$f" --format "$fmt"
		done
	done
	run "shared/batch/corpus" batch corpus -j 2
	run "shared/batch/third_party" batch third_party -j 2
	pairs shared/ "gpt_varlen gpt_varlen_expandable" \
		"gpt_varlen7_expandable_maxsplit gpt_varlen7_expandable"
	replays shared/ gpt_varlen gpt_varlen7_expandable_maxsplit
fi

flush
cd "$top" || exit 1
# the corpus's text reports, read here rather than written again by cli.sh
if [ "$widest" -le 80 ]; then
	echo "ok 2 - every text-format output above fits 80 columns ($widest)"
else
	echo "not ok 2 - every text-format output above fits 80 columns (longest $widest)"
fi
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
# Compare label by label so a failure names the output that changed.
if [ "$have_shared" = yes ]; then
	cp "$want" "$work/want"
else
	grep -v ' shared/' "$want" >"$work/want"
fi
sort -k2 "$work/want" >"$work/want.sorted"
sort -k2 "$got" >"$work/got.sorted"
changed=$(join -1 2 -2 2 -a 1 -a 2 -e MISSING -o 0,1.1,2.1 "$work/want.sorted" "$work/got.sorted" 2>/dev/null |
	awk '$2 != $3 { print $1 " (was " $2 ", now " $3 ")" }')
if [ -z "$changed" ]; then
	echo "ok 1 - golden outputs: $(wc -l <"$work/want") hashes unchanged"
else
	count=$(echo "$changed" | wc -l)
	echo "not ok 1 - golden outputs: $count changed (a behaviour change regenerates them on purpose with make golden):"
	echo "$changed" | head -n 20 | sed 's/^/#   /'
fi
if [ "$have_shared" = no ]; then
	echo "ok 2 - # SKIP golden outputs of the shared samples ($(grep -c ' shared/' "$want") hashes): no $shared/corpus"
fi
