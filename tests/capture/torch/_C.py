"""torch._C: the OOM observer list."""

import os

from . import _log

_observers = []

if not os.environ.get("FAKE_TORCH_NO_OBSERVER"):

    def _cuda_attach_out_of_memory_observer(observer):
        _log("_cuda_attach_out_of_memory_observer")
        _observers.append(observer)
