"""A stand-in for the few parts of PyTorch that memreport.capture calls, for the tests.

It mimics the signatures of PyTorch 2.1 to 2.11 (torch.OutOfMemoryError, the string API of
torch.cuda.memory._record_memory_history, torch._C._cuda_attach_out_of_memory_observer,
_dump_snapshot, memory_summary, memory_stats), or of PyTorch 2.0's boolean history API with
FAKE_TORCH_API=legacy. Every call is appended as one JSON line to $FAKE_TORCH_LOG.

The evidence is real: _dump_snapshot copies samples/oom_fragmentation.pickle, and
memory_summary() and memory_stats() return tests/fixtures/capture/, all recorded by PyTorch
2.11 on an H200 for the same out-of-memory moment (the corpus sample oom_fragmentation).
torch._fake_oom() plays the allocator: it calls the OOM observers with that moment's numbers,
then raises torch.OutOfMemoryError with that moment's message.

Knobs: FAKE_TORCH_API=legacy; FAKE_TORCH_NO_OBSERVER=1 (no observer API);
FAKE_TORCH_DUMP_FAILS=1 (_dump_snapshot raises OSError).
"""

import json
import os

__version__ = "2.11.0+stand-in"

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SNAPSHOT = os.path.join(ROOT, "samples", "oom_fragmentation.pickle")
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "capture")
# facts.json of the corpus sample: the observer's arguments and str() of the error
OOM_ARGS = (0, 213909504, 4294967296, 145468030976)
OOM_MESSAGE = (
    "CUDA out of memory. Tried to allocate 204.00 MiB. GPU 0 has a total capacity of 139.80 GiB "
    "of which 135.48 GiB is free. Including non-PyTorch memory, this process has 4.31 GiB memory "
    "in use. 4.00 GiB allowed; Of the allocated memory 2.29 GiB is allocated by PyTorch, and 1.52 "
    "GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try "
    "setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
    "documentation for Memory Management  "
    "(https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)"
)


def _log(call, **args):
    path = os.environ.get("FAKE_TORCH_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"call": call, "args": args, "pid": os.getpid()}, default=repr) + "\n")


class OutOfMemoryError(RuntimeError):
    """torch.OutOfMemoryError (torch._C.OutOfMemoryError, a RuntimeError)."""


from . import _C, cuda, distributed  # noqa: E402


def _fake_oom(device=0):
    """An allocation that does not fit: the observers run, then the error is raised."""
    _log("oom", device=device)
    for observer in list(_C._observers):
        observer(*OOM_ARGS)  # an observer's exception escapes, as from PyTorch's C++
    raise OutOfMemoryError(OOM_MESSAGE)
