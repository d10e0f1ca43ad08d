"""torch.cuda.memory: history recording and snapshot dumps."""

import os
import shutil
import sys

from .. import SNAPSHOT, _log

if os.environ.get("FAKE_TORCH_API") == "legacy":

    def _record_memory_history(enabled, record_context=True, trace_alloc_max_entries=1,
                               trace_alloc_record_context=False, device=None,
                               _enable_expensive_cpp=False):
        """PyTorch 2.0."""
        if not isinstance(enabled, bool):
            raise TypeError("enabled must be a bool")
        _log("_record_memory_history", enabled=enabled, record_context=record_context,
             trace_alloc_max_entries=trace_alloc_max_entries,
             trace_alloc_record_context=trace_alloc_record_context)

else:

    def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize,
                               device=None, clear_history=False, compile_context=False,
                               global_record_annotations=False, skip_actions=None):
        """PyTorch 2.11 (2.1 had the first four and device)."""
        if isinstance(enabled, bool):
            raise TypeError("the legacy API is not mimicked here")
        if enabled not in (None, "state", "all") or context not in (None, "state", "alloc", "all"):
            raise ValueError("bad enabled/context")
        if stacks not in ("python", "all"):
            raise ValueError("bad stacks")
        _log("_record_memory_history", enabled=enabled, context=context, stacks=stacks,
             max_entries=max_entries)


def _dump_snapshot(filename="dump_snapshot.pickle", augment_with_fx_traces=False):
    _log("_dump_snapshot", filename=os.path.basename(filename))
    if os.environ.get("FAKE_TORCH_DUMP_FAILS"):
        raise OSError("stand-in: _dump_snapshot fails on purpose")
    shutil.copyfile(SNAPSHOT, filename)
