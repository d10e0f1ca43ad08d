#!/bin/sh
# scaling.sh BINARY: work that must grow linearly with the input, and the memory a batch holds
# at once (issue 14 items 3-6); see tests/scaling.py. Prints "ok N - ..." or "not ok N - ...".
if ! command -v python3 >/dev/null 2>&1; then
	echo "ok 1 - scaling # SKIP python3 is needed to write the inputs"
	exit 0
fi
exec python3 "$(dirname "$0")/scaling.py" "$1"
