#!/bin/sh
# record_heldout27.sh [names...]: run record_heldout27.py (beside this file, with record_runs.py) on the device into /tmp/h27, collect the fix
# probes, xz the corpus runs' pickles (the __<variant> runs' pickles are dropped: only their facts matter) and
# pack everything as $OUT/h27.tar.xz.partNN (the device returns at most 8 files of 16 MiB).
set -u
export PYTHONUNBUFFERED=1
root=/tmp/h27
here=$(dirname "$0")
REC_DEADLINE=${REC_DEADLINE:-540} python3 "$here/record_heldout27.py" "$root" "$@" >"$OUT/record.log" 2>&1
python3 "$here/record_heldout27.py" --collect "$root" >>"$OUT/record.log" 2>&1
rm -f "$root"/*__*/*.pickle
find "$root" -name '*.pickle' -exec xz -T0 -6 {} \;
(cd /tmp && tar cf - h27 | xz -T0 -3 | split -b 15M -d - "$OUT/h27.tar.xz.part")
ls -la "$OUT"
