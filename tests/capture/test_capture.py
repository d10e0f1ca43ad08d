#!/usr/bin/env python3
"""test_capture.py BINARY: memreport.capture (python/) against the stand-in torch beside this
file, with the real memreport BINARY writing the reports. Prints "ok N - ..." / "not ok N - ..."."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BIN = os.path.abspath(sys.argv[1])
SAMPLE = os.path.join(ROOT, "samples", "oom_fragmentation.pickle")
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "capture")
OOM_FILES = ["memory_stats.json", "memory_summary.txt", "oom_message.txt", "oom_snapshot.pickle",
             "report.html", "report.md"]
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
from torch import OOM_MESSAGE  # noqa: E402  (the stand-in's message)

n = 0
TMP = tempfile.mkdtemp(prefix="memreport-capture-")


def ok(cond, desc, detail=""):
    global n
    n += 1
    line = "%s %d - %s" % ("ok" if cond else "not ok", n, desc)
    if not cond and detail:
        line += " (%s)" % str(detail)[:600].replace("\n", " | ")
    print(line, flush=True)
    return cond


def scratch(name):
    d = os.path.join(TMP, name)
    os.makedirs(d)
    return d


def env_for(cwd, torch=True, **extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MEMREPORT_RUN_NAME", "PYTHONPATH")
           and not k.startswith(("TORCHELASTIC_", "SLURM_", "FAKE_TORCH_"))}
    path = [os.path.join(ROOT, "python")]
    if torch:
        path.insert(0, HERE)
    env.update(PYTHONPATH=os.pathsep.join(path), MEMREPORT_BIN=BIN, PYTHONDONTWRITEBYTECODE="1",
               FAKE_TORCH_LOG=os.path.join(cwd, "calls.jsonl"))
    env.update({k: str(v) for k, v in extra.items()})
    return env


def python(cwd, code=None, args=(), env=None, **extra):
    cmd = [sys.executable] + (["-c", textwrap.dedent(code)] if code is not None else []) + list(args)
    return subprocess.run(cmd, cwd=cwd, env=env or env_for(cwd, **extra), capture_output=True,
                          text=True, timeout=300)


def calls(cwd):
    try:
        with open(os.path.join(cwd, "calls.jsonl")) as f:
            return [json.loads(line) for line in f]
    except FileNotFoundError:
        return []


def files(d):
    """Every file under d (hidden ones too), relative, sorted."""
    out = []
    for root, _dirs, names in os.walk(d):
        out += [os.path.relpath(os.path.join(root, x), d) for x in names]
    return sorted(out)


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def only_run(cwd, out="runs"):
    runs = os.listdir(os.path.join(cwd, out)) if os.path.isdir(os.path.join(cwd, out)) else []
    return os.path.join(cwd, out, runs[0]) if len(runs) == 1 else None


def result(p):
    """The last line of standard output, as JSON."""
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except Exception:
        return {}


def check_evidence(folder, what, snapshot="oom_snapshot.pickle", message=True):
    """The files of one OOM folder, and that the reports are the real binary's."""
    names = OOM_FILES if message else sorted(
        ["memory_stats.json", "memory_summary.txt", snapshot, "report.html", "report.md"])
    got = files(folder) if folder and os.path.isdir(folder) else []
    if not ok(got == names, "%s: the folder holds exactly %s" % (what, ", ".join(names)), got):
        return
    ok(read(os.path.join(folder, snapshot), "rb") == read(SAMPLE, "rb"),
       "%s: %s is the snapshot torch dumped" % (what, snapshot))
    ok(read(os.path.join(folder, "memory_summary.txt")) == read(os.path.join(FIXTURES, "memory_summary.txt")),
       "%s: memory_summary.txt is torch.cuda.memory_summary()" % what)
    ok(json.loads(read(os.path.join(folder, "memory_stats.json")))
       == json.loads(read(os.path.join(FIXTURES, "memory_stats.json"))),
       "%s: memory_stats.json is torch.cuda.memory_stats()" % what)
    inputs = [snapshot] + (["oom_message.txt"] if message else []) + ["memory_summary.txt", "memory_stats.json"]
    if message:
        text = read(os.path.join(folder, "oom_message.txt"))
        ok(text.startswith("Traceback (most recent call last):")
           and text.rstrip("\n").endswith("torch.OutOfMemoryError: " + OOM_MESSAGE),
           "%s: oom_message.txt is the traceback and message as a log shows them" % what, text[-300:])
    mine = os.path.join(TMP, "direct.html")
    subprocess.run([BIN, "-q"] + inputs + ["-o", mine], cwd=folder, check=False)
    ok(os.path.exists(mine) and read(mine, "rb") == read(os.path.join(folder, "report.html"), "rb"),
       "%s: report.html is what the memreport binary writes for these inputs" % what)
    md = read(os.path.join(folder, "report.md"))
    want = "expandable\\_segments" if message else "memreport"
    ok(md.startswith("### memreport") and want in md, "%s: report.md is memreport's Markdown" % what, md[:200])


# ---- an OOM inside the block ------------------------------------------------------------------

cwd = scratch("oom")
p = python(cwd, """
    import json, sys, traceback, torch
    import memreport.capture as mc
    seen = {}
    def step():
        try:
            torch._fake_oom()
        except BaseException as e:
            seen["e"], seen["tb"] = e, [tuple(f) for f in traceback.extract_tb(e.__traceback__)]
            raise
    try:
        with mc.on_oom(out_dir="runs", max_entries=12345) as cap:
            step()
        print(json.dumps({"propagated": False}))
    except torch.cuda.OutOfMemoryError as e:
        tb = [tuple(f) for f in traceback.extract_tb(e.__traceback__)]
        print(json.dumps({"propagated": True, "same": e is seen["e"], "type": type(e).__qualname__,
                          "module": type(e).__module__, "message": str(e),
                          "tb": tb[-len(seen["tb"]):] == seen["tb"], "inner": seen["tb"][-1][2],
                          "folder": cap.folder}))
""")
r = result(p)
ok(p.returncode == 0 and r.get("propagated"), "the OOM error leaves the block", p.stderr)
ok(r.get("same") is True, "it is the very exception object torch raised")
ok(r.get("type") == "OutOfMemoryError" and r.get("module") == "torch", "of the same type")
ok(r.get("message") == OOM_MESSAGE, "with the same message")
ok(r.get("tb") is True and r.get("inner") == "_fake_oom", "and the same traceback, down to the raise")
run = only_run(cwd)
ok(run is not None and r.get("folder") == os.path.relpath(run, cwd),
   "one run folder, runs/RUN (no rank folder for a single process)", (run, r.get("folder")))
check_evidence(run, "single process")
c = calls(cwd)
names = [x["call"] for x in c]
rec = [x["args"] for x in c if x["call"] == "_record_memory_history"]
ok(rec[:1] == [{"enabled": "all", "context": "all", "stacks": "python", "max_entries": 12345}],
   "history recorded with max_entries, Python stacks, every event", rec)
ok(len(rec) == 2 and rec[1]["enabled"] is None, "history recording stopped when the block ends", rec)
ok(names.count("_cuda_attach_out_of_memory_observer") == 1, "the OOM observer is attached once", names)
i = names.index("oom") if "oom" in names else -1
ok(i >= 0 and names[i + 1:i + 4] == ["_dump_snapshot", "memory_summary", "memory_stats"],
   "snapshot, summary and stats are taken in the observer, at the OOM", names)
ok([x["args"].get("device") for x in c if x["call"] in ("memory_summary", "memory_stats")] == [0, 0],
   "summary and stats of the device that ran out", c)
ok("report.html" in p.stderr and "warning" not in p.stderr, "one line on stderr says where the report is",
   p.stderr)

# ---- no OOM: nothing but history ----------------------------------------------------------

cwd = scratch("none")
p = python(cwd, """
    import torch, memreport.capture as mc
    with mc.on_oom(out_dir="runs"):
        total = sum(range(1000))
    try:
        with mc.on_oom(out_dir="runs"):
            raise ValueError("not about memory")
    except ValueError as e:
        print(e)
""")
ok(p.returncode == 0 and p.stdout.strip() == "not about memory", "another exception goes through unchanged",
   p.stderr)
ok(not os.path.exists(os.path.join(cwd, "runs")), "without an OOM nothing is written", files(cwd))
names = [x["call"] for x in calls(cwd)]
ok(sorted(set(names)) == ["_cuda_attach_out_of_memory_observer", "_record_memory_history"],
   "without an OOM the only calls are the history and the observer (no polling, no hooks)", names)
ok(p.stderr == "", "and nothing on stderr", p.stderr)

# ---- an OOM the program handles (cuDNN retries, batch-size search) ---------------------------

cwd = scratch("handled")
p = python(cwd, """
    import os, json, torch, memreport.capture as mc
    with mc.on_oom(out_dir="runs"):
        try:
            torch._fake_oom()
        except torch.OutOfMemoryError:
            inside = [os.path.join(r, f) for r, _, fs in os.walk("runs") for f in fs]
    print(json.dumps(inside))
""")
r = result(p)
ok(p.returncode == 0 and isinstance(r, list)
   and sorted(os.path.basename(x) for x in r) == [".memory_stats.json", ".memory_summary.txt", ".oom_snapshot.pickle"],
   "the OOM moment is saved at once, hidden until the error leaves the block", (r, p.stderr))
ok(not os.path.exists(os.path.join(cwd, "runs")), "an OOM handled inside the block leaves nothing", files(cwd))

# ---- python -m memreport.capture -- script args ---------------------------------------------

cwd = scratch("cli")
with open(os.path.join(cwd, "train.py"), "w") as f:
    f.write(textwrap.dedent("""\
        import json, sys, torch
        json.dump({"argv": sys.argv, "name": __name__}, open("seen.json", "w"))
        def step():
            torch._fake_oom()
        step()
    """))
p = python(cwd, args=["-m", "memreport.capture", "--out", "runs", "--max-entries", "777", "--",
                      "train.py", "--lr", "1", "-m", "x"])
seen = json.loads(read(os.path.join(cwd, "seen.json"))) if os.path.exists(os.path.join(cwd, "seen.json")) else {}
ok(seen.get("argv") == ["train.py", "--lr", "1", "-m", "x"] and seen.get("name") == "__main__",
   "the script runs as __main__ with its own argv", seen)
ok(p.returncode == 1, "exit status 1, as python train.py would give", p.returncode)
err = p.stderr.rstrip("\n")
ok(err.endswith("torch.OutOfMemoryError: " + OOM_MESSAGE) and 'File "train.py", line 4, in step' in err,
   "the original traceback and message are printed", err[-400:])
check_evidence(only_run(cwd), "python -m memreport.capture")
rec = [x["args"] for x in calls(cwd) if x["call"] == "_record_memory_history"]
ok(rec[:1] and rec[0].get("max_entries") == 777, "--max-entries reaches _record_memory_history", rec)

with open(os.path.join(cwd, "mytrain.py"), "w") as f:
    f.write("import sys, json, torch\njson.dump(sys.argv[1:], open('seen2.json', 'w'))\ntorch._fake_oom()\n")
p = python(cwd, args=["-m", "memreport.capture", "--out=runs2", "-m", "mytrain", "a", "--b"])
ok(p.returncode == 1 and json.loads(read(os.path.join(cwd, "seen2.json"))) == ["a", "--b"]
   and only_run(cwd, "runs2") and "oom_snapshot.pickle" in files(only_run(cwd, "runs2")),
   "-m MODULE ARGS runs a module the same way", p.stderr[-300:])
with open(os.path.join(cwd, "quits.py"), "w") as f:
    f.write("import sys\nsys.exit(3)\n")
p = python(cwd, args=["-m", "memreport.capture", "--out", "runs3", "quits.py"])
ok(p.returncode == 3 and not os.path.exists(os.path.join(cwd, "runs3")),
   "the script's own exit status is kept, and nothing is written", (p.returncode, p.stderr))
p = python(cwd, args=["-m", "memreport.capture", "--bogus", "x.py"])
ok(p.returncode == 2 and "unknown option" in p.stderr, "an unknown option exits 2", p.stderr)

# ---- every rank of a torchrun job -------------------------------------------------------------

cwd = scratch("torchrun")
with open(os.path.join(cwd, "train.py"), "w") as f:
    f.write("import torch, memreport.capture as mc\nmc.dump(step=100)\ntorch._fake_oom()\n")
procs = [subprocess.Popen([sys.executable, "-m", "memreport.capture", "--out", "runs", "--", "train.py"],
                          cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env_for(cwd, RANK=r, LOCAL_RANK=r, WORLD_SIZE=2, TORCHELASTIC_RUN_ID="none",
                                      TORCHELASTIC_RESTART_COUNT=0))
         for r in (0, 1)]
outs = [pr.communicate(timeout=300) for pr in procs]
ok([pr.returncode for pr in procs] == [1, 1], "both ranks fail with their OOM", [o[1][-300:] for o in outs])
run = only_run(cwd)
ok(run is not None and "ppid%d" % os.getpid() in os.path.basename(run),
   "the ranks of one launcher share one run folder (torchrun without a run id)",
   os.listdir(os.path.join(cwd, "runs")) if os.path.isdir(os.path.join(cwd, "runs")) else None)
if run:
    ok(sorted(os.listdir(run)) == ["rank0", "rank1", "step_100"], "one folder per rank, rank{N}", os.listdir(run))
    for r in (0, 1):
        check_evidence(os.path.join(run, "rank%d" % r), "rank %d" % r)
        check_evidence(os.path.join(run, "step_100", "rank%d" % r), "rank %d dump(step=100)" % r,
                       snapshot="snapshot.pickle", message=False)
    b = subprocess.run([BIN, "batch", "-q", "runs", "-o", "batch"], cwd=cwd, capture_output=True, text=True)
    try:
        rows = json.loads(read(os.path.join(cwd, "batch", "index.json")))["runs"]
    except Exception:
        rows = []
    got = sorted((x.get("group"), x.get("rank"), x.get("iteration") or 0, x.get("error")) for x in rows)
    g = "runs/" + os.path.basename(run)
    ok(b.returncode == 0 and got == [(g, 0, 0, None), (g, 0, 100, None), (g, 1, 0, None), (g, 1, 100, None)],
       "memreport batch lists one run: a row per rank, at the OOM and at step 100", (b.stderr, got))
    oom_rows = [x for x in rows if x.get("iteration") is None]
    ok(len(oom_rows) == 2 and all(x["summary"]["oom_cause"] == "fragmentation" and
                                  [i["kind"] for i in x["result"]["inputs"]] ==
                                  ["snapshot", "memory_stats", "memory_summary", "oom_message"] for x in oom_rows),
       "each rank's row reads its four files (the reports beside them are not inputs)",
       [x.get("result", {}).get("inputs") for x in oom_rows])

cwd = scratch("torchrun_id")
p = python(cwd, "import torch, memreport.capture as mc\nwith mc.on_oom('runs'):\n    torch._fake_oom()\n",
           RANK=3, LOCAL_RANK=1, TORCHELASTIC_RUN_ID="job 42/x", TORCHELASTIC_RESTART_COUNT=1)
ok(files(os.path.join(cwd, "runs")) == ["torchrun-job_42_x-restart1/rank3/" + x for x in OOM_FILES],
   "with a torchrun run id and a restart: runs/torchrun-ID-restartN/rank{RANK}", files(cwd))
cwd = scratch("named")
p = python(cwd, "import torch, memreport.capture as mc\nwith mc.on_oom('runs'):\n    torch._fake_oom()\n",
           LOCAL_RANK=2, MEMREPORT_RUN_NAME="exp7")
ok(files(os.path.join(cwd, "runs")) == ["exp7/rank2/" + x for x in OOM_FILES],
   "MEMREPORT_RUN_NAME names the run; LOCAL_RANK when RANK is not set", files(cwd))

# ---- capturing fails: the original error still comes out --------------------------------------

RAISE_AND_REPORT = """
    import json, torch, memreport.capture as mc
    raised = []
    try:
        with mc.on_oom(out_dir=%r):
            try:
                torch._fake_oom()
            except BaseException as e:
                raised.append(e)
                raise
    except BaseException as e:
        print(json.dumps({"same": bool(raised) and e is raised[0], "type": type(e).__qualname__,
                          "message": str(e)}))
"""


def survives(what, out_dir="runs", **extra):
    cwd = scratch(what.replace(" ", "_").replace("/", "_")[:40])
    with open(os.path.join(cwd, "blocker"), "w") as f:
        f.write("a file where a folder should be\n")
    p = python(cwd, RAISE_AND_REPORT % out_dir, **extra)
    r = result(p)
    ok(p.returncode == 0 and r.get("same") is True and r.get("type") == "OutOfMemoryError"
       and r.get("message") == OOM_MESSAGE, "%s: the original OOM error is raised again" % what,
       (p.stdout, p.stderr[-400:]))
    return cwd, p


cwd, p = survives("unwritable out_dir", out_dir="blocker/runs")
ok("memreport.capture: warning:" in p.stderr and "Traceback" not in p.stderr,
   "unwritable out_dir: a warning on stderr, no traceback of its own", p.stderr)
cwd, p = survives("failing _dump_snapshot", FAKE_TORCH_DUMP_FAILS=1)
run = only_run(cwd)
ok("oom_snapshot.pickle" in p.stderr and "warning" in p.stderr, "failing _dump_snapshot: a warning names the file",
   p.stderr)
ok(run and files(run) == ["memory_stats.json", "memory_summary.txt", "oom_message.txt", "report.html", "report.md"],
   "failing _dump_snapshot: the other evidence and the report are still written", files(cwd))
cwd, p = survives("no memreport binary", MEMREPORT_BIN="/nonexistent/memreport")
run = only_run(cwd)
ok("was not found" in p.stderr and run and files(run) == OOM_FILES[:4],
   "no memreport binary: a warning, and the evidence without a report", (p.stderr, files(cwd)))
cwd, p = survives("memreport fails", MEMREPORT_BIN=shutil.which("false") or "/bin/false")
ok("memreport exited 1" in p.stderr, "memreport fails: a warning with its exit status", p.stderr)

# ---- dump() on request, the PyTorch 2.0 API, no observer, no torch ----------------------------

cwd = scratch("dump")
p = python(cwd, """
    import json, memreport.capture as mc
    print(json.dumps([mc.dump(out_dir="d", step=7), mc.dump(out_dir="d")]))
""")
r = result(p)
run = only_run(cwd, "d")
ok(p.returncode == 0 and run and r == [os.path.relpath(os.path.join(run, "step_7"), cwd),
                                       os.path.relpath(os.path.join(run, "dump_1"), cwd)],
   "dump() returns its folder: step_S, or dump_K when no step is given", (r, p.stderr))
if run:
    check_evidence(os.path.join(run, "step_7"), "dump(step=7)", snapshot="snapshot.pickle", message=False)

cwd = scratch("legacy")
p = python(cwd, "import torch, memreport.capture as mc\nwith mc.on_oom('runs', max_entries=55):\n    torch._fake_oom()\n",
           FAKE_TORCH_API="legacy")
rec = [x["args"] for x in calls(cwd) if x["call"] == "_record_memory_history"]
ok(rec[:1] == [{"enabled": True, "record_context": True, "trace_alloc_max_entries": 55,
                "trace_alloc_record_context": True}] and len(rec) == 2 and rec[1]["enabled"] is False,
   "PyTorch 2.0's history API is used when the string API is missing", rec)
ok(only_run(cwd) and files(only_run(cwd)) == OOM_FILES, "PyTorch 2.0 API: the evidence is complete", files(cwd))

cwd = scratch("no_observer")
p = python(cwd, "import torch, memreport.capture as mc\nwith mc.on_oom('runs'):\n    torch._fake_oom()\n",
           FAKE_TORCH_NO_OBSERVER=1)
ok("no out-of-memory observer" in p.stderr and only_run(cwd) and files(only_run(cwd)) == OOM_FILES,
   "without an observer API: a warning, and the snapshot is taken when the error leaves the block",
   (p.stderr, files(cwd)))

cwd = scratch("no_torch")
os.makedirs(os.path.join(cwd, "shadow", "torch"))
with open(os.path.join(cwd, "shadow", "torch", "__init__.py"), "w") as f:
    f.write("raise ImportError('no torch here')\n")
env = env_for(cwd, torch=False)
env["PYTHONPATH"] = os.path.join(cwd, "shadow") + os.pathsep + env["PYTHONPATH"]
p = python(cwd, """
    import memreport.capture as mc
    try:
        with mc.on_oom("runs"):
            raise KeyError("k")
    except KeyError as e:
        print("KeyError", e)
""", env=env)
ok(p.returncode == 0 and p.stdout.strip() == "KeyError 'k'" and "cannot import torch" in p.stderr
   and not os.path.exists(os.path.join(cwd, "runs")),
   "without torch: memreport.capture imports, warns, and lets errors through", (p.stdout, p.stderr))

# ---- the decorator, nested blocks, python -m memreport ----------------------------------------

cwd = scratch("nested")
p = python(cwd, """
    import torch, memreport.capture as mc
    @mc.on_oom(out_dir="inner")
    def step():
        torch._fake_oom()
    try:
        with mc.on_oom(out_dir="outer"):
            step()
    except torch.OutOfMemoryError:
        print("caught")
""")
ok(p.stdout.strip() == "caught" and only_run(cwd, "inner") and files(only_run(cwd, "inner")) == OOM_FILES
   and not os.path.exists(os.path.join(cwd, "outer")),
   "as a decorator, nested in a block: the innermost saves the OOM, once", (p.stderr, files(cwd)))
rec = [x["args"]["enabled"] for x in calls(cwd) if x["call"] == "_record_memory_history"]
ok(rec == ["all", None], "nested: the outer block's recording goes on until the outer block ends", rec)

p = python(TMP, args=["-m", "memreport", "--version"])
v = subprocess.run([BIN, "--version"], capture_output=True, text=True).stdout
ok(p.returncode == 0 and p.stdout == v and v.startswith("memreport "), "python -m memreport runs the binary",
   (p.stdout, p.stderr))

shutil.rmtree(TMP, ignore_errors=True)
