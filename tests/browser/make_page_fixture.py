#!/usr/bin/env python3
"""Builds the page data block (schema memreport-page/1, docs/page-schema.md) from a snapshot, the
oracle that tests/browser/check_page_data.py compares the block memreport writes with.

Usage:
  make_page_fixture.py SNAPSHOT [--memreport ./memreport] [--json OUT.json]

This is the reference for the C emitter: every rule of docs/page-schema.md is implemented here
once, as plainly as possible, so that the C side can be checked against it value for value.
Three things it takes from memreport's own JSON report of the same snapshot (--format json)
instead of computing them: the peak (devices[].peak_allocated_event and peak_allocated_bytes:
the exact allocator replay's), the iteration starts (devices[].iteration_starts: the run's
structure) and the moment the verdict speaks of (verdict_moment). Standard library only. The
snapshot is untrusted: it is read with an Unpickler whose find_class raises, so no pickle can
import or call anything."""
import argparse
import json
import pickle
import re
import subprocess
import sys

SCHEMA = "memreport-page/1"
BAND_BUDGET = 40000  # bands per page, shared equally by the devices that have a trace
SERIES_POINTS = 2000  # at most this many points per series
ITERATION_MOMENTS = 12  # iteration boundaries that get a moment (segment maps), per device
MAX_FRAMES = 48  # frames kept per stack (innermost first), after filtering
MIB = 1 << 20
SMALL_SEGMENT = 2 * MIB  # the small pool's segment size (kSmallBuffer)
LARGE_NO_SPLIT = MIB  # large-pool remainders up to kSmallSize are not split off

# Frames PyTorch's own viewer hides (frameFilter), plus the caching allocator's C++ frames.
HIDDEN_NAMES = ("unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start",
                "__libc_start_main", "PyEval_", "PyObject_", "PyFunction_",
                "CUDACachingAllocator")
HIDDEN_FILES = ("core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c",
                "Objects/call.c", "Objects/methodobject.c", "pycore_ceval.h", "ceval.c",
                "cpython/abstract.h", "CUDACachingAllocator", "memory_snapshot.cpp")
STDLIB = re.compile(r"/lib/python[23][0-9.]*/")

STATE_ACTIVE, STATE_PENDING, STATE_FREE = 0, 1, 2
POOL_LARGE, POOL_SMALL, POOL_PRIVATE = 0, 1, 2


class NoGlobals(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing global {module}.{name}")


def load_snapshot(path):
    with open(path, "rb") as f:
        snap = NoGlobals(f).load()
    if isinstance(snap, list):  # torch.cuda.memory_snapshot(): a bare segment list
        snap = {"segments": snap, "device_traces": []}
    return snap


# ---- stacks ----

def hidden(frame):
    name, file = str(frame.get("name", "")), str(frame.get("filename", ""))
    return any(h in name for h in HIDDEN_NAMES) or any(h in file for h in HIDDEN_FILES)


def in_package(path, pkg, win_pkg):
    """The last folder named pkg is the package itself: no site-packages below it (a virtual
    environment called torch is not torch)."""
    last = max(path.rfind(pkg), path.rfind(win_pkg))
    return last >= 0 and "-packages" not in path[last + 1:]


def is_library(file):
    """torch itself (functorch, triton), an installed package, or the standard library."""
    return (file.startswith("torch/") or in_package(file, "/torch/", "\\torch\\") or
            in_package(file, "/functorch/", "\\functorch\\") or
            in_package(file, "/triton/", "\\triton\\") or "site-packages" in file or
            "dist-packages" in file or STDLIB.search(file) is not None)


class Stacks:
    """The shared strings, frames and stacks tables; ids in order of first reference."""

    def __init__(self):
        self.strings, self.string_ids = [], {}
        self.frames, self.frame_ids = [], {}
        self.stacks, self.stack_ids = [], {}

    def string(self, s):
        if s not in self.string_ids:
            self.string_ids[s] = len(self.strings)
            self.strings.append(s)
        return self.string_ids[s]

    def frame(self, name, file, line):
        key = (name, file, line)
        if key not in self.frame_ids:
            self.frame_ids[key] = len(self.frames) // 3
            self.frames += [self.string(name), self.string(file), line]
        return self.frame_ids[key]

    def stack(self, frames):
        """Stack id of a recorded frame list (innermost first), or -1 for none at all."""
        if not frames:
            return -1
        kept = []
        for f in frames:
            if not isinstance(f, dict) or hidden(f):
                continue
            line = f.get("line", 0)
            kept.append((str(f.get("name", "")), str(f.get("filename", "")),
                         line if isinstance(line, int) else 0))
        kept = tuple(kept[:MAX_FRAMES])
        if not kept:
            return -1
        if kept not in self.stack_ids:
            user = lib = -1
            for i, (_, file, _) in enumerate(kept):
                if not file.endswith(".py"):
                    continue
                if is_library(file):
                    if lib < 0:
                        lib = i
                elif user < 0:
                    user = i
            self.stack_ids[kept] = len(self.stacks)
            self.stacks.append([user, lib] + [self.frame(*k) for k in kept])
        return self.stack_ids[kept]


# ---- one device ----

def segment_pool(seg):
    pid = seg.get("segment_pool_id") or (0, 0)
    if tuple(pid) != (0, 0):
        return POOL_PRIVATE
    if "segment_type" not in seg:  # PyTorch 1.x: small-pool segments are exactly 2 MiB
        return POOL_SMALL if seg.get("total_size") == SMALL_SEGMENT else POOL_LARGE
    return POOL_SMALL if seg.get("segment_type") == "small" else POOL_LARGE


def snapshot_blocks(seg):
    """(address, size, requested, state, frames) of a snapshot segment's blocks."""
    out, addr = [], seg["address"]
    for b in seg.get("blocks", []):
        a = b.get("address", addr)
        size = b.get("size", 0)
        req = b.get("requested_size")
        if req is None:
            hist = b.get("history") or [{}]
            req = hist[0].get("real_size", size)
        state = {"active_allocated": STATE_ACTIVE, "active_pending_free": STATE_PENDING,
                 "active_awaiting_free": STATE_PENDING}.get(b.get("state"), STATE_FREE)
        frames = b.get("frames")
        if frames is None:
            frames = (b.get("history") or [{}])[0].get("frames", [])
        out.append((a, size, req if state != STATE_FREE else 0, state, frames))
        addr = a + size
    return out


def uses_time(events):
    prev = None
    for e in events:
        t = e.get("time_us")
        if not isinstance(t, int) or (prev is not None and t < prev):
            return False
        prev = t
    return bool(events) and events[-1]["time_us"] > events[0]["time_us"]


class Alloc:
    __slots__ = ("start", "end", "freereq", "bytes", "frames", "block", "addr", "group", "key")

    def __init__(self, start, addr, nbytes, frames):
        self.start, self.end, self.freereq = start, -1, -1
        self.addr, self.bytes, self.frames = addr, nbytes, frames
        self.block = None  # the snapshot block (size, state) when still live at the end


def device_allocations(events, segs):
    """Every allocation of the device: from the trace, and those older than the trace (live
    in the snapshot but never allocated in it, or freed in it without an alloc)."""
    allocs, live = [], {}
    for i, e in enumerate(events):
        act, addr = e.get("action"), e.get("addr")
        if act == "alloc":
            if addr in live:  # an unrecorded free: close the old one here
                live.pop(addr).end = i
            a = Alloc(i, addr, e.get("size", 0), e.get("frames") or [])
            allocs.append(a)
            live[addr] = a
        elif act in ("free_requested", "free_completed"):
            a = live.get(addr)
            if a is None:  # allocated before the trace began
                a = Alloc(-1, addr, e.get("size", 0), e.get("frames") or [])
                allocs.append(a)
                live[addr] = a
            if act == "free_requested":
                a.freereq = i
            else:
                a.end = i
                del live[addr]
    older = []
    for seg in segs:
        for (addr, size, req, state, frames) in snapshot_blocks(seg):
            if state == STATE_FREE:
                continue
            a = live.get(addr)
            if a is None:
                a = Alloc(-1, addr, req, frames)
                older.append(a)
            a.block = (size, state)
    # Stacking order: the allocations older than the trace first, those still live at the end
    # lowest, then the last freed first (ties in order of first appearance: in the trace, then
    # in the snapshot); then the trace's own, in the order of their alloc events.
    first = [a for a in allocs if a.start < 0] + older
    first.sort(key=lambda a: -(a.end if a.end >= 0 else len(events)))
    return first + [a for a in allocs if a.start >= 0]


def series(n_events, points, values_after):
    """Per bucket of k consecutive events: the first event's index and the maximum of each
    value after any event in it."""
    k = max(1, -(-n_events // points))
    idx, out = [], [[] for _ in values_after]
    for b in range(0, n_events, k):
        idx.append(b)
        for o, vals in zip(out, values_after):
            o.append(max(vals[b:b + k]))
    return k, idx, out


def round_block(nbytes):
    return max(512, -(-nbytes // 512) * 512)


def segments_at(segs, events, m):
    """Segments (address, size, pool, expandable, stream) after event m: the snapshot's, with
    the segment events after m undone, newest first."""
    cur = [[s["address"], s.get("total_size", 0), segment_pool(s), int(bool(s.get("is_expandable"))),
            s.get("stream", 0)] for s in segs]
    for e in reversed(events[m + 1:]):
        act, addr, size = e.get("action"), e.get("addr"), e.get("size", 0)
        if act == "segment_alloc":
            cur = [s for s in cur if s[0] != addr]
        elif act == "segment_free":
            pool = POOL_SMALL if size == SMALL_SEGMENT else POOL_LARGE
            cur.append([addr, size, pool, 0, e.get("stream", 0)])
        elif act == "segment_map":  # unmap [addr, addr + size) from the range holding it
            for s in cur:
                if s[0] <= addr and addr + size <= s[0] + s[1]:
                    end = s[0] + s[1]
                    s[1] = addr - s[0]
                    if addr + size < end:
                        cur.append([addr + size, end - addr - size, s[2], 1, s[4]])
                    break
            cur = [s for s in cur if s[1] > 0]
        elif act == "segment_unmap":  # map it back, joining adjacent ranges of one stream
            pool = POOL_SMALL if size == SMALL_SEGMENT else POOL_LARGE
            for s in cur:
                if s[3] and s[0] + s[1] == addr and s[4] == e.get("stream", 0):
                    s[1] += size
                    break
            else:
                cur.append([addr, size, pool, 1, e.get("stream", 0)])
            cur.sort(key=lambda s: s[0])
            joined = []
            for s in cur:
                if joined and joined[-1][3] and s[3] and joined[-1][0] + joined[-1][1] == s[0] \
                        and joined[-1][4] == s[4]:
                    joined[-1][1] += s[1]
                else:
                    joined.append(s)
            cur = joined
    cur.sort(key=lambda s: s[0])
    return cur


def moment_segments(stacks, segs, events, allocs, m, at_snapshot):
    out = []
    if at_snapshot:
        for s in sorted(segs, key=lambda s: s["address"]):
            flat = []
            for (addr, size, req, state, frames) in snapshot_blocks(s):
                flat += [addr - s["address"], size, req, state,
                         stacks.stack(frames) if state != STATE_FREE else -1]
            out.append([s["address"], s.get("total_size", 0), segment_pool(s),
                        int(bool(s.get("is_expandable"))), s.get("stream", 0), flat])
        return out
    live = []
    for a in allocs:
        if a.start <= m and (a.end < 0 or a.end > m):
            pending = 0 <= a.freereq <= m or (a.freereq < 0 and a.start < 0 and a.block
                                               and a.block[1] == STATE_PENDING)
            state = STATE_PENDING if pending else STATE_ACTIVE
            size = a.block[0] if (a.end < 0 and a.block) else round_block(a.bytes)
            live.append((a.addr, size, a.bytes, state, a))
    live.sort(key=lambda b: b[0])
    j = 0
    for (saddr, ssize, pool, expandable, stream) in segments_at(segs, events, m):
        end = saddr + ssize
        while j < len(live) and live[j][0] < saddr:
            j += 1  # a block outside every segment: inconsistent input, left out
        inside = []
        while j < len(live) and live[j][0] < end:
            inside.append(live[j])
            j += 1
        flat, pos = [], saddr
        for k, (addr, size, req, state, a) in enumerate(inside):
            if addr > pos:
                flat += [pos - saddr, addr - pos, 0, STATE_FREE, -1]
            nxt = inside[k + 1][0] if k + 1 < len(inside) else end
            estimated = not (a.end < 0 and a.block)
            if estimated and pool != POOL_SMALL and 0 < nxt - (addr + size) <= LARGE_NO_SPLIT:
                size = nxt - addr  # the allocator does not split off such a remainder
            size = max(0, min(size, nxt - addr))
            flat += [addr - saddr, size, req, state, stacks.stack(a.frames)]
            pos = addr + size
        if pos < end:
            flat += [pos - saddr, end - pos, 0, STATE_FREE, -1]
        out.append([saddr, ssize, pool, expandable, stream, flat])
    return out


def iteration_ends(starts):
    """The last event of each iteration but the last: the event before each start after the
    first."""
    return [start - 1 for start in (starts or [])[1:]]


def build_device(stacks, dev, segs, events, band_budget, facts):
    n = len(events)
    use_time = uses_time(events)
    t0 = events[0]["time_us"] if use_time else None

    def x(i):  # x is the event index, as in PyTorch's viewer: idle gaps take no room
        return i

    allocs = device_allocations(events, segs)
    d = {"device": dev, "x_unit": "event", "t0_us": t0, "events": n,
         "x_end": x(n - 1) if n else 0}
    if not n:
        d.update({"truncated": False, "series": None, "bands": [], "allocations": len(allocs),
                  "band_min_bytes": None, "marks": []})
        d["moments"] = [{"event": -1, "x": 0, "source": "snapshot", "kinds": ["snapshot"],
                         "segments": moment_segments(stacks, segs, events, allocs, -1, True)}]
        d["_moments"] = {"peak": [], "oom": [], "snapshot": [0]}
        return d

    # Bands: the largest allocations, ties in stacking order.
    order = sorted(range(len(allocs)), key=lambda i: (-allocs[i].bytes, i))
    chosen = set(order[:band_budget])
    bands = []
    for i, a in enumerate(allocs):
        if i in chosen:
            bands += [x(a.start) if a.start >= 0 else -1, x(a.end) if a.end >= 0 else -1,
                      a.bytes, stacks.stack(a.frames)]

    # Values after each event: active (live requested bytes), the part not in bands, reserved.
    delta_all, delta_small = [0] * (n + 1), [0] * (n + 1)
    for i, a in enumerate(allocs):
        s, e = (a.start if a.start >= 0 else 0), (a.end if a.end >= 0 else n)
        delta_all[s] += a.bytes
        delta_all[e] -= a.bytes
        if i not in chosen:
            delta_small[s] += a.bytes
            delta_small[e] -= a.bytes
    reserved_end = sum(s.get("total_size", 0) for s in segs)
    change = [0] * n
    for i, e in enumerate(events):
        act, size = e.get("action"), e.get("size", 0)
        if act in ("segment_alloc", "segment_map"):
            change[i] = size
        elif act in ("segment_free", "segment_unmap"):
            change[i] = -size
    reserved0 = reserved_end - sum(change)
    active, small, reserved = [], [], []
    va = vs = 0
    vr = reserved0
    for i in range(n):
        va += delta_all[i]
        vs += delta_small[i]
        vr += change[i]
        active.append(va)
        small.append(vs)
        reserved.append(vr)
    k, idx, (s_active, s_reserved, s_small) = series(n, SERIES_POINTS, [active, reserved, small])
    d["truncated"] = any(a.start < 0 for a in allocs) or reserved0 > 0
    d["series"] = {"events_per_point": k, "x": [x(i) for i in idx],
                   "t_us": [events[i]["time_us"] - t0 for i in idx] if use_time else None,
                   "active": s_active, "reserved": s_reserved, "small": s_small}
    d["bands"] = bands
    d["allocations"] = len(allocs)
    d["band_min_bytes"] = min(allocs[i].bytes for i in chosen) if chosen else None

    # Marks, each tied to the moment after its event; one moment per distinct event. The peak
    # is the report's (the allocator replay's peak of allocated bytes); only the last OOM gets
    # a moment.
    peak = min(facts["peak_allocated_event"], n - 1)
    marks = [{"kind": "peak", "event": peak, "bytes": facts["peak_allocated_bytes"]}]
    ooms = [i for i, e in enumerate(events) if e.get("action") == "oom"]
    for i in ooms:
        marks.append({"kind": "oom", "event": i, "bytes": events[i].get("size", 0),
                      "_moment": i == ooms[-1]})
    iters = iteration_ends(facts.get("iteration_starts"))
    if len(iters) <= ITERATION_MOMENTS:
        with_moment = set(range(len(iters)))
    else:
        k = ITERATION_MOMENTS - 1  # evenly spaced, the first and the last included
        with_moment = {(2 * j * (len(iters) - 1) + k) // (2 * k) for j in range(k + 1)}
    for j, i in enumerate(iters):
        marks.append({"kind": "iteration", "event": i, "n": j + 1, "_moment": j in with_moment})
    marks.append({"kind": "snapshot", "event": n - 1})
    marks.sort(key=lambda mk: (mk["event"], ["peak", "oom", "iteration", "snapshot"].index(
        mk["kind"])))
    moments, by_event = [], {}
    for mk in marks:
        mk["x"] = x(mk["event"])
        if not mk.pop("_moment", True):
            mk["moment"] = -1
            continue
        ev = mk["event"]
        if ev not in by_event:
            by_event[ev] = len(moments)
            moments.append({"event": ev, "x": x(ev), "kinds": [],
                            "source": "snapshot" if ev == n - 1 else "trace"})
        mk["moment"] = by_event[ev]
        if mk["kind"] not in moments[by_event[ev]]["kinds"]:
            moments[by_event[ev]]["kinds"].append(mk["kind"])
    for mo in moments:
        mo["segments"] = moment_segments(stacks, segs, events, allocs, mo["event"],
                                         mo["source"] == "snapshot")
    d["marks"] = [{k: mk[k] for k in ("kind", "event", "x", "moment", "bytes", "n") if k in mk}
                  for mk in marks]
    d["moments"] = moments
    d["_moments"] = {k: [i for i, mo in enumerate(moments) if k in mo["kinds"]]
                     for k in ("peak", "oom", "snapshot")}
    return d


def build(snap, report):
    """The data block of snapshot snap; report is memreport's JSON report of it."""
    stacks = Stacks()
    facts = {d["device"]: d for d in report.get("devices", [])}
    segs = sorted((s for s in snap.get("segments", []) if isinstance(s, dict)),
                  key=lambda s: s.get("address", 0))
    traces = snap.get("device_traces") or []
    devs = sorted({s.get("device", 0) for s in segs} |
                  {i for i, t in enumerate(traces) if t})
    traced = max(1, sum(1 for i in devs if i < len(traces) and traces[i]))
    out = []
    for dev in devs:
        events = [e for e in (traces[dev] if dev < len(traces) else []) if isinstance(e, dict)]
        dsegs = [s for s in segs if s.get("device", 0) == dev]
        out.append(build_device(stacks, dev, dsegs, events, BAND_BUDGET // traced,
                                facts.get(dev, {})))
    # The moment the verdict speaks of, on the diagnosed device (else the first): its OOM, its
    # peak or its snapshot; the snapshot when the device has no such moment.
    focus = None
    said = report.get("verdict_moment") or {}
    if out:
        d = next((d for d in out if d["device"] == said.get("device")), out[0])
        found = d["_moments"].get(said.get("moment")) or d["_moments"]["snapshot"]
        focus = {"device": d["device"], "moment": found[-1]}
    for d in out:
        d.pop("_moments", None)
    return {"schema": SCHEMA, "focus": focus, "devices": out, "strings": stacks.strings,
            "frames": stacks.frames, "stacks": stacks.stacks}


def to_json(data):
    """Compact JSON that is safe inside <script type="application/json">: no '<', '>' or '&'
    survive as such, so neither </script> nor <!-- can end or change the element."""
    text = json.dumps(data, separators=(",", ":"))  # ASCII: a lone surrogate is \udXXX too
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def report_json(snapshot, memreport="./memreport"):
    """memreport's own JSON report of the snapshot (the peak, the iterations, the verdict)."""
    out = subprocess.run([memreport, snapshot, "-q", "--format", "json", "-o", "-"],
                         check=True, capture_output=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("snapshot")
    ap.add_argument("--json", help="write the data block here (default: standard output)")
    ap.add_argument("--memreport", default="./memreport")
    args = ap.parse_args()
    data_json = to_json(build(load_snapshot(args.snapshot),
                              report_json(args.snapshot, args.memreport)))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            f.write(data_json)
    else:
        sys.stdout.write(data_json)


if __name__ == "__main__":
    main()
