#!/bin/sh
# check_layers.sh [SRC_DIR]: the dependency rule of docs/architecture.md.
#
# Each folder under src/ is one stage of the pipeline; STAGES lists them lowest first. A file
# may include headers of its own stage and of the stages before it, never of a later one, and
# names every project header by its stage path ("decode/pickle.h"). A folder that is not in
# STAGES, or a stage without its folder, fails too, so the order stays written down. Every .c
# has a header of its own (main.c, which exports nothing, excepted).
# Prints "ok N - ..." / "not ok N - ..." lines, one per source file (tests/run.sh counts them).
set -u
src=${1:-src}
STAGES="base model source decode load sim analyze advise report render cmd"

n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; }

rank() { # rank STAGE: its position in STAGES (1 = lowest), 0 when it is not one
	i=0
	for s in $STAGES; do
		i=$((i + 1))
		[ "$s" = "$1" ] && { echo "$i"; return; }
	done
	echo 0
}

for d in "$src"/*/; do
	stage=$(basename "$d")
	[ "$(rank "$stage")" -gt 0 ] || nok "$src/$stage/ is not a stage (add it to STAGES in $0 and to docs/architecture.md)"
done
for s in $STAGES; do
	[ -d "$src/$s" ] || nok "stage $s has no folder $src/$s/"
done

for f in "$src"/*/*.c "$src"/*/*.h; do
	[ -f "$f" ] || continue
	stage=$(basename "$(dirname "$f")")
	mine=$(rank "$stage")
	bad=""
	# every #include "..." of the file, as written
	for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
		case $inc in
		*/*) dep=${inc%%/*} ;;
		*)
			bad="$bad $inc (not named by its stage path)"
			continue
			;;
		esac
		theirs=$(rank "$dep")
		if [ "$theirs" -eq 0 ]; then
			bad="$bad $inc (no such stage)"
		elif [ "$theirs" -gt "$mine" ]; then
			bad="$bad $inc (stage $dep is above $stage)"
		elif [ ! -f "$src/$inc" ]; then
			bad="$bad $inc (no such header)"
		fi
	done
	case $f in
	*.c) [ -f "${f%.c}.h" ] || [ "$(basename "$f")" = main.c ] || bad="$bad (no header ${f%.c}.h)" ;;
	esac
	if [ -z "$bad" ]; then
		ok "$f includes only its own and lower stages"
	else
		nok "$f:$bad"
	fi
done
