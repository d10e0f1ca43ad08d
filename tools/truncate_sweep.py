#!/usr/bin/env python3
"""truncate_sweep.py BINARY OUT.jsonl [CUT...]: every corpus run with a trace, cut as a wrapped
ring buffer would (tools/truncate_trace.py) to the last CUT of its events (default 0.5 0.2 0.05),
reported beside the run's text evidence, against the full-trace report and tests/diagnosis.py's
expectations. One JSON line per run and cut; a summary table on stdout. An analysis tool for
people (slow: the whole corpus), not a test; tests/truncated.py is the fast test.
"""
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import truncate_trace  # noqa: E402

BIN = os.path.abspath(sys.argv[1])
OUT = sys.argv[2]
CUTS = sys.argv[3:] or ["0.5", "0.2", "0.05"]
SHARED = os.environ.get("MEMREPORT_SHARED", "../shared")
ROOTS = ["build/corpus", os.path.join(SHARED, "corpus")]
TEXTS = ("oom_message.txt", "memory_summary.txt", "train.log")


def expectations():
    """diagnosis.py's TABLE (what a good report says), read without running its checks."""
    src = open("tests/diagnosis.py").read()
    src = src[:src.index("\ndef report(")]
    env = {"__name__": "table", "__file__": "tests/diagnosis.py"}
    argv, sys.argv = sys.argv, ["diagnosis.py", BIN]
    try:
        exec(compile(src, "tests/diagnosis.py", "exec"), env)
    finally:
        sys.argv = argv
    # the sweep gives every run its text evidence: a run's row that reads its log wins
    table = {}
    for name, want in env["TABLE"]:
        if name not in table or want.get("log"):
            table[name] = want
    return table


def summary(doc):
    if doc is None:
        return None
    oom = doc.get("oom")
    run = doc.get("run") or {}
    recs = [r["id"] for r in doc.get("recommendations", [])]
    dev = max(doc.get("devices") or [{}], key=lambda d: d.get("reserved_bytes") or 0)
    return dict(cause=oom.get("cause") if oom else None, kind=run.get("kind"),
                iterations=run.get("iterations"), first=recs[0] if recs else "", recs=recs,
                finds=[f["id"] for f in doc.get("findings", [])],
                verdict=doc.get("verdict") or "", truncated=dev.get("trace_truncated"),
                events=dev.get("trace_events"))


def report(d):
    p = subprocess.run([BIN, d, "--format", "json", "-q", "-o", "-"], capture_output=True)
    if p.returncode != 0:
        return None
    return summary(json.loads(p.stdout))


def violations(s, want):
    """What of diagnosis.py's row for the run the report s contradicts."""
    bad = []
    if "cause" in want and s["cause"] != want["cause"]:
        bad.append("cause %s want %s" % (s["cause"], want["cause"]))
    kinds = want.get("kind") if isinstance(want.get("kind"), tuple) else (want.get("kind"),)
    if "kind" in want and s["kind"] not in kinds:
        bad.append("kind %s want %s" % (s["kind"], want["kind"]))
    if "kind_in" in want and s["kind"] not in want["kind_in"]:
        bad.append("kind %s want %s" % (s["kind"], want["kind_in"]))
    if "first" in want:
        ok = want["first"] if isinstance(want["first"], tuple) else (want["first"],)
        if s["first"] not in ok:
            bad.append("first %s want %s" % (s["first"], "|".join(ok)))
    bad += ["recommends %s" % r for r in want.get("never", []) if r in s["recs"]]
    bad += ["%s first" % r for r in want.get("not_first", []) if s["first"] == r]
    bad += ["finds %s" % f for f in want.get("no_finds", []) if f in s["finds"]]
    return bad


def runs():
    seen = set()
    for root in ROOTS:
        if not os.path.isdir(root):
            continue
        for name in sorted(os.listdir(root)):
            d = os.path.join(root, name)
            for f in ("oom_snapshot.pickle", "snapshot.pickle", "snapshot.pickle.xz"):
                if name not in seen and os.path.isfile(os.path.join(d, f)):
                    seen.add(name)
                    yield name, d, os.path.join(d, f)


def main():
    table = expectations()
    work = tempfile.mkdtemp(prefix="trunc_sweep.")
    rows = []
    with open(OUT, "w") as out:
        for name, d, snap_path in runs():
            with truncate_trace.opener(snap_path, "rb") as f:
                snap = pickle.load(f)
            traces = snap.get("device_traces") if isinstance(snap, dict) else None
            if not traces or max(len(t) for t in traces) < 2:
                continue
            full = list(traces)
            want = table.get(name, {})
            facts = {}
            if os.path.isfile(os.path.join(d, "facts.json")):
                facts = json.load(open(os.path.join(d, "facts.json")))
            base = None
            for cut in ["1"] + CUTS:
                rd = os.path.join(work, name + "." + cut)
                os.mkdir(rd)
                for t in TEXTS:
                    if os.path.isfile(os.path.join(d, t)):
                        shutil.copy(os.path.join(d, t), rd)
                snap["device_traces"] = list(full)
                if cut != "1":
                    truncate_trace.truncate(snap, cut)
                fname = "oom_snapshot.pickle" if "oom" in os.path.basename(snap_path) else "snapshot.pickle"
                with open(os.path.join(rd, fname), "wb") as f:
                    pickle.dump(snap, f, protocol=4)
                s = report(rd)
                shutil.rmtree(rd)
                row = dict(name=name, cut=cut, report=s, want_bad=violations(s, want) if s else ["failed"],
                           facts_kind=(facts.get("settings") or {}).get("kind"), facts_oom=facts.get("oom"))
                if cut == "1":
                    base = s
                row["full"] = base
                out.write(json.dumps(row) + "\n")
                out.flush()
                rows.append(row)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
