#!/bin/sh
# capture.sh BINARY: memreport.capture (python/) against the stand-in torch in tests/capture/,
# with BINARY writing the reports. Prints "ok N - ..." or "not ok N - ..." (test_capture.py).
bin=$1
if ! command -v python3 >/dev/null 2>&1; then
	echo "not ok 1 - memreport.capture's tests need python3"
	exit 0
fi
PYTHONDONTWRITEBYTECODE=1 python3 tests/capture/test_capture.py "$bin"
rc=$?
[ "$rc" -eq 0 ] || echo "not ok - tests/capture/test_capture.py stopped with status $rc"
