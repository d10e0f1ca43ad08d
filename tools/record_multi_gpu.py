#!/usr/bin/env python3
"""Record a real two-GPU snapshot for memreport's tests (run on a machine with 2 CUDA devices).

Usage: python3 tools/record_multi_gpu.py OUTDIR
Writes OUTDIR/snapshot.pickle (history on both devices), and per device d:
memory_stats_<d>.json and memory_summary_<d>.txt, written right after the snapshot.
Device 0 trains a small MLP; device 1 keeps every other block of a run of allocations, which
leaves split segments with holes (inactive split memory) on that device only."""
import json, os, sys

import torch

MiB = 2**20


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.cuda.memory._record_memory_history(max_entries=100000)
    # device 0: a few training steps
    with torch.cuda.device(0):
        m = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 1024)).cuda()
        opt = torch.optim.Adam(m.parameters())
        for _ in range(3):
            loss = m(torch.randn(256, 1024, device="cuda")).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
    # device 1: holes inside segments
    with torch.cuda.device(1):
        big = torch.empty(64 * MiB, dtype=torch.uint8, device="cuda")
        del big
        parts = [torch.empty(6 * MiB, dtype=torch.uint8, device="cuda") for _ in range(10)]
        keep = parts[::2]
        del parts
        small = [torch.empty(1000, device="cuda") for _ in range(5)]
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    torch.cuda.memory._dump_snapshot(os.path.join(out, "snapshot.pickle"))
    for d in (0, 1):
        with open(os.path.join(out, f"memory_stats_{d}.json"), "w") as f:
            json.dump(torch.cuda.memory_stats(d), f, indent=1, sort_keys=True)
        with open(os.path.join(out, f"memory_summary_{d}.txt"), "w") as f:
            f.write(torch.cuda.memory_summary(d))
    print("kept", len(keep), len(small), "traces",
          [len(t) for t in torch.cuda.memory._snapshot()["device_traces"]])


if __name__ == "__main__":
    main()
