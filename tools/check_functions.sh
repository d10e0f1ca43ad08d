#!/bin/sh
# check_functions.sh [SRC_DIR]: no function longer than MAX_LINES lines.
#
# A function is measured from its opening brace to its closing brace, both included (the
# checked-in clang-format style puts each alone in column 0, and nothing else is written that
# way). EXCEPTIONS lists FILE:FUNCTION pairs allowed to be longer, each with the reason in
# docs/architecture.md. Prints "ok N - ..." / "not ok N - ..." lines, one per source file.
set -u
src=${1:-src}
MAX_LINES=120
EXCEPTIONS=""

n=0
for f in "$src"/*/*.c; do
	[ -f "$f" ] || continue
	out=$(awk -v max="$MAX_LINES" -v file="$f" -v allowed="$EXCEPTIONS" '
		BEGIN { split(allowed, ex, " "); for (i in ex) ok[ex[i]] = 1 }
		/^[A-Za-z_]/ { sig = $0 }
		/^\{$/ { start = NR; name = sig }
		/^\}$/ && start {
			len = NR - start + 1
			fn = name
			sub(/\(.*/, "", fn)
			gsub(/.*[ *]/, "", fn)
			if (len > longest) longest = len
			if (len > max && !ok[file ":" fn])
				bad = bad " " fn "() " len " lines (line " start ");"
			start = 0
		}
		END { printf "%d%s\n", longest, bad }' "$f")
	longest=${out%% *}
	longest=${longest%%;*}
	n=$((n + 1))
	case $out in
	*\;) echo "not ok $n - $f: over $MAX_LINES lines:${out#* }" ;;
	*) echo "ok $n - $f: longest function $longest lines" ;;
	esac
done
