#!/bin/sh
# record_heldout30.sh [names...]: run record_heldout30.py (beside this file, with record_runs.py) on the device into /tmp/h30, collect the fix
# probes, xz the corpus runs' pickles (the __<variant> runs' pickles are dropped: only their facts matter) and
# pack everything as $OUT/h30.tar.xz.partNN (the device returns at most 8 files of 16 MiB).
set -u
export PYTHONUNBUFFERED=1
root=/tmp/h30
here=$(dirname "$0")
REC_DEADLINE=${REC_DEADLINE:-540} python3 "$here/record_heldout30.py" "$root" "$@" >"$OUT/record.log" 2>&1
python3 "$here/record_heldout30.py" --collect "$root" >>"$OUT/record.log" 2>&1
rm -f "$root"/*__*/*.pickle "$root"/*/_probe*/*.pickle
find "$root" -name '*.pickle' -exec xz -T0 -6 {} \;
(cd /tmp && tar cf - h30 | xz -T0 -3 | split -b 15M -d - "$OUT/h30.tar.xz.part")
ls -la "$OUT"
