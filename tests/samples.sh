# samples.sh: sourced (`. tests/samples.sh`, from the project root) by the shell tests that need
# corpus samples; finds them as tests/testutil.h does for the C tests. The project's own corpus
# comes first: tests/corpus, whose pickles tests/unpack_corpus.sh decompresses into
# build/corpus (unpacked here if needed, so a script also runs alone). Then
# $MEMREPORT_SHARED/corpus (default ../shared), the only home of the large samples; when a
# sample is in neither, the caller prints "ok N - ... # SKIP reason", which tests/run.sh counts
# as skipped. A project sample is always there: if unpacking fails, that is a "not ok" line.

samples_top=$(pwd)
samples_project="$samples_top/build/corpus"
samples_shared=${MEMREPORT_SHARED:-../shared}
case $samples_shared in /*) ;; *) samples_shared="$samples_top/$samples_shared" ;; esac
samples_shared="$samples_shared/corpus"
if ! sh "$samples_top/tests/unpack_corpus.sh"; then
	echo "not ok - tests/corpus could not be unpacked into build/corpus"
fi

# sample_dir NAME: prints the folder of sample NAME; status 1 (and nothing) when no corpus has it.
sample_dir() {
	if [ -d "$samples_project/$1" ]; then
		echo "$samples_project/$1"
	elif [ -d "$samples_shared/$1" ]; then
		echo "$samples_shared/$1"
	else
		return 1
	fi
}

# sample_snapshot NAME: prints the snapshot of sample NAME (snapshot.pickle, oom_snapshot.pickle,
# or build/NAME.pickle for the shared sample kept xz-compressed); status 1 when there is none.
sample_snapshot() {
	sample_snapshot_dir=$(sample_dir "$1") || return 1
	for sample_snapshot_f in snapshot.pickle oom_snapshot.pickle; do
		if [ -f "$sample_snapshot_dir/$sample_snapshot_f" ]; then
			echo "$sample_snapshot_dir/$sample_snapshot_f"
			return 0
		fi
	done
	[ -f "$samples_top/build/$1.pickle" ] || return 1
	echo "$samples_top/build/$1.pickle"
}

# sample_dirs: prints the folder of every sample of both corpora, one a line, each name once
# (the project's copy first).
sample_dirs() {
	for sample_dirs_d in "$samples_project"/*/ "$samples_shared"/*/; do
		[ -d "$sample_dirs_d" ] || continue
		sample_dirs_d=${sample_dirs_d%/}
		sample_dirs_name=${sample_dirs_d##*/}
		case $sample_dirs_d in
		"$samples_shared"/*) [ -d "$samples_project/$sample_dirs_name" ] && continue ;;
		esac
		echo "$sample_dirs_d"
	done
}
