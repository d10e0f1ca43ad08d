#!/usr/bin/env python3
"""Writes the hand-made and reduced-real seeds of the fuzz corpora (tests/fuzz/<target>/seed_*).

Usage: python3 tests/fuzz/make_seeds.py [SHARED_DIR]      (default ../shared, from the repo root)

Standard library only. Real snapshots are read with an Unpickler whose find_class raises, so no
code can run; they are cut down (a few segments, blocks and trace entries; frame lists trimmed
but still shared, as PyTorch shares them) and re-dumped with protocol 4 (and 2, 3, 5 for one).
Hostile pickles are assembled byte by byte or with pickle.dumps of objects whose __reduce__
would call os.system: writing them is safe, they are never loaded here.
Every seed stays small (a few KiB): libFuzzer mutates small inputs fastest."""
import os
import pickle
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "shared")
CORPUS = os.path.join(SHARED, "corpus")


class Plain(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing global {module}.{name}")


def load(path):
    with open(path, "rb") as f:
        return Plain(f).load()


def write(target, name, data):
    d = os.path.join(HERE, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    assert len(data) <= 64 * 1024, (name, len(data))
    with open(os.path.join(d, "seed_" + name), "wb") as f:
        f.write(data)


def reduce_snapshot(snap, segments=4, blocks=6, events=40, frames=3):
    """A smaller snapshot of the same shape; shared frame lists stay shared."""
    cache = {}

    def fr(lst):
        if not isinstance(lst, list):
            return lst
        key = id(lst)
        if key not in cache:
            cache[key] = [dict(f) if isinstance(f, dict) else f for f in lst[:frames]]
        return cache[key]

    def block(b):
        b = dict(b)
        if "frames" in b:
            b["frames"] = fr(b["frames"])
        if "history" in b:
            b["history"] = [dict(h, frames=fr(h.get("frames", []))) for h in b["history"][:2]]
        return b

    def segment(s):
        s = dict(s)
        bl = [block(b) for b in s.get("blocks", [])[:blocks]]
        s["blocks"] = bl
        s["total_size"] = sum(b.get("size", 0) for b in bl)
        if "frames" in s:
            s["frames"] = fr(s["frames"])
        return s

    if isinstance(snap, list):
        return [segment(s) for s in snap[:segments]]
    out = dict(snap)
    out["segments"] = [segment(s) for s in snap.get("segments", [])[:segments]]
    if "device_traces" in snap:
        out["device_traces"] = [
            [dict(e, frames=fr(e["frames"])) if "frames" in e else dict(e) for e in t[-events:]]
            for t in snap["device_traces"]
        ]
    return out


def history_era(snap):
    """The 2.0 shape: blocks carry `history` instead of requested_size/frames; no trace."""
    segs = []
    for s in snap["segments"]:
        s = {k: v for k, v in s.items() if k in ("device", "address", "total_size", "stream",
                                                   "segment_type", "allocated_size", "active_size")}
        segs.append(s)
    for s, orig in zip(segs, snap["segments"]):
        bl = []
        for b in orig["blocks"]:
            nb = {"size": b["size"], "state": b["state"]}
            if b["state"] != "inactive":
                nb["history"] = [{"addr": b.get("address", 0), "real_size": b.get("requested_size", 0),
                                  "frames": b.get("frames", [])}]
            bl.append(nb)
        s["blocks"] = bl
    return {"segments": segs}


def real_seeds():
    samples = ["oom_fragmentation/oom_snapshot.pickle", "no_history/snapshot.pickle",
               "state_only/snapshot.pickle", "cuda_graph/snapshot.pickle",
               "multi_stream/snapshot.pickle", "oom_fragmentation_expandable/snapshot.pickle",
               "oom_fragmentation_maxsplit/snapshot.pickle", "stacks_all/snapshot.pickle",
               "oom_capacity/oom_snapshot.pickle", "leak_val_graph/snapshot.pickle"]
    out = {}
    for rel in samples:
        path = os.path.join(CORPUS, rel)
        if not os.path.exists(path):
            continue
        name = rel.split("/")[0]
        small = reduce_snapshot(load(path))
        out[name] = pickle.dumps(small, protocol=4)
    if "oom_fragmentation" in out:
        small = pickle.loads(out["oom_fragmentation"])  # our own bytes: plain data only
        for proto in (2, 3, 5):
            out[f"oom_fragmentation_p{proto}"] = pickle.dumps(small, protocol=proto)
        out["segment_list_1x"] = pickle.dumps(small["segments"], protocol=2)
        out["history_2_0"] = pickle.dumps(history_era(small), protocol=4)
        tiny = reduce_snapshot(small, segments=2, blocks=3, events=8, frames=2)
        out["tiny"] = pickle.dumps(tiny, protocol=4)
        # a snapshot with every key PyTorch writes but empty lists
        out["empty_lists"] = pickle.dumps({"segments": [], "device_traces": [[]],
                                           "allocator_settings": {}, "external_annotations": []},
                                          protocol=4)
        # legacy spellings: "free" action, active_awaiting_free, unknown keys and actions
        odd = pickle.loads(out["tiny"])
        if odd["device_traces"] and odd["device_traces"][0]:
            odd["device_traces"][0][0]["action"] = "free"
            odd["device_traces"][0][-1]["action"] = "brand_new_action"
        if odd["segments"] and odd["segments"][0]["blocks"]:
            odd["segments"][0]["blocks"][0]["state"] = "active_awaiting_free"
        odd["unknown_key"] = {"x": [1, 2.5, None, True, b"bytes"]}
        odd["allocator_settings"] = {"max_split_size": 2**64 - 1, "expandable_segments": True,
                                     "garbage_collection_threshold": 0.6,
                                     "roundup_power2_divisions": {"1": 4, "256": 8},
                                     "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
        odd["external_annotations"] = [{"device": 0, "time_us": 1, "name": "step", "stage": "START"},
                                       {"device": 0, "time_us": 9, "name": "step", "stage": "END"}]
        out["odd_spellings"] = pickle.dumps(odd, protocol=4)
    return out


P4 = b"\x80\x04"


def frame(body):
    return P4 + b"\x95" + struct.pack("<Q", len(body)) + body


class Evil:
    def __reduce__(self):
        return (os.system, ("touch /tmp/memreport_fuzz_pwned",))


def hostile():
    h = {}
    h["empty"] = b""
    h["proto_only"] = P4
    h["reduce_os_system_p2"] = pickle.dumps(Evil(), protocol=2)
    h["reduce_os_system_p4"] = pickle.dumps(Evil(), protocol=4)
    h["reduce_in_snapshot"] = pickle.dumps({"segments": [], "x": Evil()}, protocol=4)
    h["global"] = b"\x80\x02cos\nsystem\n."
    h["inst"] = b"\x80\x02(ios\nsystem\nS'id'\n."
    h["obj"] = b"\x80\x02(cos\nsystem\no."
    h["newobj"] = b"\x80\x02)\x81."
    h["build"] = b"\x80\x02}}b."
    h["persid"] = b"\x80\x02Pid\n."
    h["binpersid"] = b"\x80\x02K\x01Q."
    h["stack_global"] = b"\x80\x04\x8c\x02os\x8c\x06system\x93."
    h["nested_lists_1000"] = P4 + b"]" * 1000 + b"a" * 999 + b"."
    h["nested_marks_1000"] = P4 + b"(" * 1000 + b"l" * 1000 + b"."
    h["binunicode8_2e62"] = P4 + b"\x8d" + struct.pack("<Q", 2**62) + b"abc."
    h["binunicode_4g"] = P4 + b"X" + struct.pack("<I", 2**32 - 1) + b"abc."
    h["binbytes8_max"] = P4 + b"\x8e" + struct.pack("<Q", 2**64 - 1) + b"."
    h["long4_huge"] = P4 + b"\x8b" + struct.pack("<I", 0x7FFFFFFF) + b"\x00."
    h["long1_wide"] = P4 + b"\x8a\x20" + b"\xff" * 32 + b"."
    h["long_binget_unset"] = P4 + b"]\x94j\x07\x00\x00\x00."
    h["long_binput_huge"] = P4 + b"]r\xff\xff\xff\x7f."
    h["memo_cycle"] = P4 + b"]\x94h\x00a."                     # l = [l]
    h["dict_self_key"] = P4 + b"}\x94h\x00K\x01s."             # d = {d: 1}
    # allocator_settings whose value is a dict keyed by itself: a recursive printer never ends
    h["settings_self_key"] = frame(
        b"}\x94(\x8c\x08segments\x94]\x94\x8c\x12allocator_settings\x94}\x94(\x8c\x01k\x94"
        b"}\x94h\x06K\x01su" + b"u.")
    # one segment dict listed 2000 times through the memo, each with the same 50-block list
    blk = b"}\x94(\x8c\x04size\x94M\x00\x02\x8c\x05state\x94\x8c\x10active_allocated\x94u"
    seg = (b"}\x94(\x8c\ntotal_size\x94J\x00\x00\x01\x00\x8c\x06blocks\x94](" + blk +
           b"h\x04" * 49 + b"eu")
    h["shared_segments"] = P4 + b"}(\x8c\x08segments]\x94(" + seg + b"h\x01" * 1999 + b"eu."
    h["truncated_frame"] = P4 + b"\x95\x10\x00\x00\x00\x00\x00\x00\x00]"
    h["text_mode_protocol0"] = b"(lp0\nI1\na."
    h["not_a_pickle"] = b"PK\x03\x04 this is not a pickle"
    h["list_of_ints"] = pickle.dumps([1, 2, 3], protocol=4)
    h["dict_not_snapshot"] = pickle.dumps({"a": 1, "b": [1, 2]}, protocol=4)
    h["segments_not_list"] = pickle.dumps({"segments": {"a": 1}}, protocol=4)
    h["segment_without_blocks"] = pickle.dumps({"segments": [{"total_size": 1}]}, protocol=4)
    h["block_without_size"] = pickle.dumps({"segments": [{"total_size": 1, "blocks": [{}]}]}, protocol=4)
    h["device_huge"] = pickle.dumps({"segments": [{"total_size": 1, "device": 2**40, "blocks": []}]}, protocol=4)
    h["traces_many_devices"] = pickle.dumps({"segments": [], "device_traces": [[]] * 2000}, protocol=4)
    ev = {"action": "alloc", "addr": 2**64 - 1, "size": 2**64 - 1, "stream": -1, "time_us": -2**63}
    h["event_extremes"] = pickle.dumps({"segments": [], "device_traces": [[ev, dict(ev, action="oom")]]}, protocol=4)
    return h


def texts():
    t = {}
    for rel in ["oom_fragmentation/memory_summary.txt", "oom_fragmentation/memory_summary_abbrev.txt",
                "oom_fragmentation/oom_message.txt", "oom_capacity/train.log",
                "oom_fragmentation/memory_stats.json", "cuda_graph/memory_summary.txt"]:
        path = os.path.join(CORPUS, rel)
        if os.path.exists(path):
            with open(path, "rb") as f:
                t[rel.replace("/", "_")] = f.read()[:16384]
    t["neither"] = b"hello, this is neither a table nor an OOM message\n"
    t["oom_legacy"] = (b"RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.79 GiB "
                       b"total capacity; 6.50 GiB already allocated; 5.06 MiB free; 6.69 GiB reserved "
                       b"in total by PyTorch)\n")
    t["oom_driver"] = b"RuntimeError: CUDA error: out of memory\n"
    t["oom_huge_amounts"] = (b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                             b"99999999999999999999999.00 GiB. GPU 0 has a total capacity of 1e400 GiB "
                             b"of which 0 bytes is free.\n")
    t["stats_nested"] = b'{"a": {"b": {"c": 1}}, "d": [1, [2, {"e": 3}]], "f": 1e999, "g": -0}'
    t["stats_deep"] = b'{"a":' * 200 + b"1" + b"}" * 200
    t["stats_repr"] = b"{'allocated_bytes.all.current': 1, 'x': None, 'y': True}"
    t["table_border_only"] = b"|" + b"=" * 75 + b"|\n" * 3
    return t


def scaling():
    """Small versions of the shapes of tests/fixtures/gen_scaling.py (work that once grew with
    the square of the input): pickles for the pipeline, zips for the zip target."""
    sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))
    import gen_scaling as g

    p, z = {}, {}
    big = "m" * 8192
    p["shared_long_metadata"] = g.pickled(g.snapshot([g.one_segment()],
                                                     g.alloc_free_trace(60, lambda i: [], big)))
    name = "f" * 8192
    p["shared_long_frame_name"] = g.pickled(g.snapshot(
        [g.one_segment()],
        g.alloc_free_trace(60, lambda i: [{"name": name, "filename": "t.py", "line": i}], "")))
    path = "/" + "d" * 8192 + "/t.py"
    p["shared_long_file_name"] = g.pickled(g.snapshot(
        [g.one_segment()],
        g.alloc_free_trace(60, lambda i: [{"name": "step", "filename": path, "line": i}], "")))
    trace = []
    for i in range(300):
        trace.append(g.event("segment_alloc", g.BASE, 20 * g.MIB, 2 * i))
        trace.append(g.event("segment_free", g.BASE, 20 * g.MIB, 2 * i + 1))
    p["segment_event_run"] = g.pickled(g.snapshot(
        [g.one_segment()], trace + g.alloc_free_trace(1, lambda i: [], "", len(trace))))
    pools = g.shape_pools(1)
    pools["segments"] = pools["segments"][:150]
    pools["device_traces"] = [pools["device_traces"][0][150:0:-1]]  # decreasing addresses
    p["private_pool_segments"] = g.pickled(pools)
    z["many_members.zip"] = g.zipped([("run/n%03d.txt" % i, b"notes %d\n" % i) for i in range(200)]
                                     + [("run/zzz.log", g.OOM)])
    body = b"step 00000001 loss 1.2345\n" * 36000 + g.OOM  # 900 KiB, under the 1 MiB cap
    z["big_members.zip"] = g.zipped([("run%d/train.log" % r, body) for r in range(2)], level=9)
    return p, z


def main():
    pickles, zips = scaling()
    for name, data in pickles.items():
        write("pipeline", name, data)
    for name, data in zips.items():
        write("zip", name, data)
    real = real_seeds()
    for name, data in real.items():
        write("pickle", "real_" + name, data)
        write("snapshot", "real_" + name, data)
        write("pipeline", "real_" + name, data)
    for name, data in hostile().items():
        write("pickle", name, data)
        write("snapshot", name, data)
        write("pipeline", name, data)
    for name, data in texts().items():
        write("text", name, data)
        write("pipeline", "text_" + name, data)


if __name__ == "__main__":
    main()
