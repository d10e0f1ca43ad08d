#!/bin/sh
# unpack_corpus.sh: the project's corpus (tests/corpus/NAME/, pickles xz-compressed) as tests
# read it: build/corpus/NAME/ with each pickle decompressed and the other files copied, nothing
# else (no .xz), so that a folder there is a run folder as PyTorch users have them. Also the
# shared corpus's large sample ($MEMREPORT_SHARED/corpus/gpt_large_trace, xz-compressed there)
# as build/gpt_large_trace.pickle when it is present. Redoes only what is missing or older than
# its source; every file appears whole (written beside, then renamed), so two runs at once are
# harmless. Run from the project root; tests/run.sh runs it before any test.
set -u
src=tests/corpus
dst=build/corpus
shared=${MEMREPORT_SHARED:-../shared}
if ! command -v xz >/dev/null 2>&1; then
	echo "unpack_corpus.sh: xz is needed to unpack $src (apt-get install xz-utils)" >&2
	exit 1
fi
stamp="$dst/.unpacked"
big="$shared/corpus/gpt_large_trace/snapshot.pickle.xz"
# nothing changed since the last complete unpack: one find, no work
if [ -f "$stamp" ] && [ -z "$(find "$src" -newer "$stamp" | head -n 1)" ] &&
	{ [ ! -f "$big" ] || [ -f build/gpt_large_trace.pickle ]; }; then
	exit 0
fi
status=0
# fresh SOURCE TARGET: true when TARGET exists and is not older than SOURCE
fresh() { [ -f "$2" ] && ! [ "$1" -nt "$2" ]; }
for d in "$src"/*/; do
	name=$(basename "$d")
	mkdir -p "$dst/$name" || exit 1
	for f in "$d"*; do
		[ -f "$f" ] || continue
		base=$(basename "$f")
		case $base in
		*.xz)
			out="$dst/$name/${base%.xz}"
			fresh "$f" "$out" && continue
			xz -dc "$f" >"$out.part" && mv "$out.part" "$out" || { rm -f "$out.part"; status=1; }
			;;
		*)
			out="$dst/$name/$base"
			fresh "$f" "$out" && continue
			cp "$f" "$out.part" && mv "$out.part" "$out" || { rm -f "$out.part"; status=1; }
			;;
		esac
	done
done
# what tests/corpus no longer holds goes too
for f in "$dst"/*/*; do
	[ -e "$f" ] || continue
	rel=${f#"$dst"/}
	[ -f "$src/$rel" ] || [ -f "$src/$rel.xz" ] || rm -f "$f"
done
for d in "$dst"/*/; do
	[ -d "$src/$(basename "$d")" ] || rm -rf "$d"
done
if [ -f "$big" ] && ! fresh "$big" build/gpt_large_trace.pickle; then
	xz -dc "$big" >build/gpt_large_trace.pickle.part &&
		mv build/gpt_large_trace.pickle.part build/gpt_large_trace.pickle || status=1
fi
if [ "$status" -eq 0 ]; then
	: >"$stamp"
else
	echo "unpack_corpus.sh: could not unpack every sample into $dst" >&2
fi
exit "$status"
