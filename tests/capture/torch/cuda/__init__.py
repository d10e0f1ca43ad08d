"""torch.cuda: availability, the summary and the stats of the recorded moment."""

import json
import os

from .. import FIXTURES, OutOfMemoryError, _log  # noqa: F401  (torch.cuda.OutOfMemoryError)
from . import memory  # noqa: F401


def is_available():
    return True


def is_initialized():
    return True


def current_device():
    return 0


def synchronize(device=None):
    _log("synchronize")


def memory_summary(device=None, abbreviated=False):
    _log("memory_summary", device=device, abbreviated=abbreviated)
    with open(os.path.join(FIXTURES, "memory_summary.txt")) as f:
        return f.read()


def memory_stats(device=None):
    _log("memory_stats", device=device)
    with open(os.path.join(FIXTURES, "memory_stats.json")) as f:
        return json.load(f)
