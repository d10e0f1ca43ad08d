#!/usr/bin/env python3
"""truncate_trace.py IN OUT KEEP: a snapshot whose trace ring buffer wrapped.

PyTorch's _record_memory_history(max_entries=N) keeps only the last N trace events; the snapshot
still holds every segment and block as they are at the dump. This writes exactly that: the
snapshot IN (a pickle, or .xz of one) with each device trace cut to its last KEEP entries, the
segments untouched, to OUT (pickle protocol 4; .xz when OUT ends so). KEEP is a count (1000) or a
fraction of each trace (0.2). The last entries are kept, so an OOM event at a trace's end stays.
For the project's own sample files only: pickle.load trusts its input.
"""
import lzma
import pickle
import sys


def opener(path, mode):
    return lzma.open(path, mode) if path.endswith(".xz") else open(path, mode)


def keep_count(keep, n):
    """How many of n entries a KEEP of a count or a fraction leaves (at least one when n > 0)."""
    if "." in keep:
        k = int(round(float(keep) * n))
    else:
        k = int(keep)
    return max(min(k, n), 1 if n else 0)


def truncate(snap, keep):
    """Cuts snap's device traces in place; returns [(before, after)] per device."""
    counts = []
    traces = snap.get("device_traces") if isinstance(snap, dict) else None
    for i, trace in enumerate(traces or []):
        k = keep_count(keep, len(trace))
        traces[i] = trace[len(trace) - k:]
        counts.append((len(trace), k))
    return counts


def main(argv):
    if len(argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    with opener(argv[1], "rb") as f:
        snap = pickle.load(f)
    counts = truncate(snap, argv[3])
    with opener(argv[2], "wb") as f:
        pickle.dump(snap, f, protocol=4)
    for dev, (n, k) in enumerate(counts):
        print("device %d: %d of %d events kept" % (dev, k, n))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
