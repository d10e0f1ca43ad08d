#!/bin/sh
# record_heldout37.sh [names...]: run record_heldout37.py (beside this file, with record_runs.py) on the device into /tmp/h37, collect the fix
# probes, xz the corpus runs' pickles (the __<variant> runs' pickles are dropped: only their facts matter) and
# pack everything as $OUT/h37.tar.xz.partNN (the device returns at most 8 files of 16 MiB). A stale *.pickle.xz
# next to a fresh *.pickle (a re-run on a warm machine) is replaced (xz -f).
set -u
export PYTHONUNBUFFERED=1
root=/tmp/h37
here=$(dirname "$0")
REC_DEADLINE=${REC_DEADLINE:-450} python3 "$here/record_heldout37.py" "$root" "$@" >"$OUT/record.log" 2>&1
python3 "$here/record_heldout37.py" --collect "$root" >>"$OUT/record.log" 2>&1
rm -f "$root"/*__*/*.pickle "$root"/*/_probe*/*.pickle
find "$root" -name '*.pickle' | while read -r p; do rm -f "$p.xz"; done
find "$root" -name '*.pickle' -exec xz -f -T0 -6 {} \;
(cd /tmp && tar cf - h37 | xz -T0 -3 | split -b 15M -d - "$OUT/h37.tar.xz.part")
ls -la "$OUT"
