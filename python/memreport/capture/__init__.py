"""Capture the evidence of a CUDA out-of-memory error, and the memreport report beside it.

    import memreport.capture

    with memreport.capture.on_oom(out_dir="memreport_runs", max_entries=100_000):
        train()

or, without changing the script:

    python -m memreport.capture [--out DIR] [--max-entries N] -- train.py ARGS...
    torchrun --nproc-per-node 8 -m memreport.capture -- train.py ARGS...

Inside the block PyTorch records the allocator's history (`_record_memory_history`) and an
out-of-memory observer is attached; nothing else runs until an allocation fails (no polling, no
per-step hooks). When an out-of-memory error leaves the block, its rank's run folder receives

    oom_snapshot.pickle   the snapshot, dumped by the observer at the moment of the OOM
    oom_message.txt       the traceback and message, as a training log shows them
    memory_summary.txt    torch.cuda.memory_summary() of the device that ran out, at the OOM
    memory_stats.json     torch.cuda.memory_stats() of that device, at the OOM
    report.html           memreport's report of the four files
    report.md             the same, short, for a ticket

and the error is raised again, unchanged. Whatever goes wrong while capturing is a warning on
standard error, never an exception of its own. `dump()` saves the same evidence on request.

Folders: OUT/RUN/ for a single process, OUT/RUN/rank{N}/ for each rank of a distributed job
(RANK, else LOCAL_RANK, else torch.distributed), and OUT/RUN/step_{S}/[rank{N}/] for
`dump(step=S)`: the layout `memreport batch OUT -o DIR` groups as one run per RUN with a row per
rank. RUN is the same for every rank of one job: $MEMREPORT_RUN_NAME, else torchrun's run id
(TORCHELASTIC_RUN_ID, when --rdzv-id or --standalone gives one), else the Slurm job and step,
else the launcher's start time and process id (ranks started by one torchrun or mp.spawn share
their parent), else this process's start time and id.
"""

import json
import os
import re
import subprocess
import sys
import threading
import time
import traceback
import weakref
from contextlib import ContextDecorator

__all__ = ["on_oom", "dump", "run_folder", "DEFAULT_OUT_DIR", "DEFAULT_MAX_ENTRIES"]

DEFAULT_OUT_DIR = "memreport_runs"
# 100 000 events: about 7-20 MB of snapshot with Python stacks on the project's corpus.
DEFAULT_MAX_ENTRIES = 100_000
SNAPSHOT, MESSAGE, SUMMARY, STATS = (
    "oom_snapshot.pickle",
    "oom_message.txt",
    "memory_summary.txt",
    "memory_stats.json",
)

_lock = threading.RLock()
_active = []  # the on_oom blocks entered and not left, innermost last
_observer_attached = False
_run_name = None
_dump_count = 0
_captured = weakref.WeakSet()  # errors already saved by an inner block (never kept alive here)


def _warn(message):
    try:
        sys.stderr.write("memreport.capture: warning: %s\n" % message)
        sys.stderr.flush()
    except Exception:
        pass


def _say(message):
    try:
        sys.stderr.write("memreport.capture: %s\n" % message)
        sys.stderr.flush()
    except Exception:
        pass


def _torch():
    """The torch module, or None (memreport.capture itself never needs it to import)."""
    try:
        import torch

        return torch
    except Exception as err:
        _warn("cannot import torch (%s): nothing is captured" % err)
        return None


# ---- where the evidence goes ---------------------------------------------------------------

_UNSAFE = re.compile(r"[^A-Za-z0-9._+=@-]+")


def _safe(name):
    name = _UNSAFE.sub("_", str(name)).strip("._")
    return name[:120] or "run"


def _rank():
    """This process's rank in a distributed job, or None for a single process."""
    for var in ("RANK", "LOCAL_RANK"):
        value = os.environ.get(var, "").strip()
        if value.isdigit():
            return int(value)
    torch = sys.modules.get("torch")
    try:
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:
        pass
    return None


def _started(pid):
    """Start time of a process, from /proc (Linux), as seconds since the epoch; or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # field 22, starttime, counted after "pid (comm)"
        with open("/proc/stat") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except Exception:
        return None


def _stamp(seconds):
    return time.strftime("%Y%m%d-%H%M%S", time.localtime(seconds))


def _default_run_name():
    env = os.environ
    if env.get("MEMREPORT_RUN_NAME"):
        return _safe(env["MEMREPORT_RUN_NAME"])
    restart = env.get("TORCHELASTIC_RESTART_COUNT", "0")
    again = "-restart" + restart if restart.isdigit() and int(restart) > 0 else ""
    run_id = env.get("TORCHELASTIC_RUN_ID", "")
    if run_id and run_id != "none":
        return "torchrun-" + _safe(run_id) + again
    if env.get("SLURM_JOB_ID"):
        step = env.get("SLURM_STEP_ID")
        return "slurm-" + _safe(env["SLURM_JOB_ID"]) + ("-" + _safe(step) if step else "")
    if _rank() is not None:
        # ranks started by one launcher (torchrun without a run id, mp.spawn) share a parent
        ppid = os.getppid()
        started = _started(ppid)
        return (_stamp(started) + "-" if started else "") + "ppid%d" % ppid + again
    started = _started(os.getpid()) or time.time()
    return "%s-pid%d" % (_stamp(started), os.getpid())


def run_folder(out_dir=DEFAULT_OUT_DIR, sub=None, run_name=None):
    """The folder this process writes to: OUT/RUN[/SUB][/rank{N}]."""
    global _run_name
    with _lock:
        if run_name is None:
            if _run_name is None:
                _run_name = _default_run_name()
            run_name = _run_name
    parts = [os.fspath(out_dir), _safe(run_name)]
    if sub:
        parts.append(_safe(sub))
    rank = _rank()
    if rank is not None:
        parts.append("rank%d" % rank)
    return os.path.join(*parts)


# ---- writing the evidence ------------------------------------------------------------------


def _write(path, fill, binary=False):
    """Writes a file through a hidden temporary name, so no half-written file is ever seen."""
    tmp = os.path.join(os.path.dirname(path), ".%s.%d.part" % (os.path.basename(path), os.getpid()))
    try:
        with open(tmp, "wb" if binary else "w") as f:
            fill(f)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _save_state(torch, folder, names, device=None, problems=None):
    """Writes the snapshot, summary and stats under the given names; returns the names written.
    Each file is attempted on its own: one failing does not stop the others."""
    written = []
    problems = [] if problems is None else problems

    def snapshot(f):
        f.close()  # _dump_snapshot opens the path itself
        torch.cuda.memory._dump_snapshot(f.name)

    def summary(f):
        f.write(torch.cuda.memory_summary(device=device))

    def stats(f):
        json.dump(torch.cuda.memory_stats(device=device), f, indent=1, sort_keys=True, default=str)
        f.write("\n")

    for key, fill, binary in (("snapshot", snapshot, True), ("summary", summary, False), ("stats", stats, False)):
        name = names.get(key)
        if not name:
            continue
        try:
            _write(os.path.join(folder, name), fill, binary)
            written.append(name)
        except Exception as err:
            problems.append("%s: %s" % (name, err))
    return written


def _report(folder, inputs):
    """Runs memreport on the inputs (names inside folder): report.html and report.md."""
    if not inputs:
        return []
    from memreport import find_binary

    binary = find_binary()
    if not binary:
        _warn(
            "the memreport program was not found (install the memreport wheel, or set "
            "MEMREPORT_BIN): the evidence in %s has no report" % folder
        )
        return []
    try:
        timeout = float(os.environ.get("MEMREPORT_REPORT_TIMEOUT", "600"))
    except ValueError:
        timeout = 600.0
    done = []
    for fmt, name in (("html", "report.html"), ("md", "report.md")):
        cmd = [binary, "-q", *inputs, "--format", fmt, "-o", name]
        try:
            p = subprocess.run(
                cmd, cwd=folder, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, timeout=timeout,
            )
        except Exception as err:
            _warn("memreport did not write %s: %s" % (os.path.join(folder, name), err))
            continue
        if p.returncode == 0:
            done.append(name)
        else:
            err = p.stderr.decode("utf-8", "replace").strip()
            _warn("memreport exited %d writing %s: %s" % (p.returncode, name, err))
    return done


def _oom_in(exc, torch):
    """The out-of-memory error in exc or in its causes and contexts, or None."""
    types = []
    for owner in (torch, getattr(torch, "cuda", None)):
        t = getattr(owner, "OutOfMemoryError", None)
        if isinstance(t, type) and issubclass(t, BaseException):
            types.append(t)
    seen = set()
    while exc is not None and id(exc) not in seen and len(seen) < 32:
        seen.add(id(exc))
        try:
            if types and isinstance(exc, tuple(types)):
                return exc
            # PyTorch before 1.13 raised a plain RuntimeError
            if isinstance(exc, RuntimeError) and "CUDA out of memory" in str(exc):
                return exc
        except Exception:
            pass
        exc = exc.__cause__ or exc.__context__
    return None


def _observer(device, alloc, device_allocated, device_free):
    """Called by PyTorch's allocator on every OOM, before the error is raised. An exception
    escaping from here would replace the OOM error, so none does (but Ctrl-C)."""
    try:
        with _lock:
            capture = _active[-1] if _active else None
        if capture is not None:
            capture._at_oom(device, alloc, device_allocated, device_free)
    except Exception as err:
        _warn("could not save the out-of-memory moment: %s" % err)


class on_oom(ContextDecorator):
    """Records the allocator history inside the block; when a CUDA out-of-memory error leaves
    it, saves the evidence and the report in this rank's run folder and raises the error again,
    unchanged. Also usable as a decorator.

    out_dir      where run folders go (default "memreport_runs")
    max_entries  allocator events kept in the history ring buffer (default 100 000); PyTorch's
                 own default is unbounded
    stacks       "python" (default) or "all" (adds C++ frames: slower, larger snapshots)
    context      which events keep a stack: "all" (default), "alloc", "state" or None
    run_name     the RUN folder name (default: shared by every rank of the job, see the module)
    report       run memreport on the evidence (default True)
    """

    def __init__(self, out_dir=DEFAULT_OUT_DIR, max_entries=DEFAULT_MAX_ENTRIES, *,
                 stacks="python", context="all", run_name=None, report=True):
        self.out_dir = os.fspath(out_dir)
        self.max_entries = int(max_entries)
        self.stacks = stacks
        self.context = context
        self.run_name = run_name
        self.report = report
        self.folder = None  # the run folder, once something was written there
        self._torch = None
        self._recording = False
        self._staged = None  # (folder, [(hidden name, final name)], new folders) of the last OOM

    # -- entering: history and the observer --

    def __enter__(self):
        global _observer_attached
        self.folder = None
        self._staged = None
        self._recording = False
        self._torch = torch = _torch()
        with _lock:
            outer = any(c._recording for c in _active)
        if torch is not None and not outer:  # inside another block, its recording goes on
            try:
                self._record(torch, True)
                self._recording = True
            except Exception as err:
                _warn("could not start recording the allocator history: %s" % err)
            with _lock:
                attach = not _observer_attached
                _observer_attached = True
            if attach:
                try:
                    torch._C._cuda_attach_out_of_memory_observer(_observer)
                except Exception as err:
                    _warn(
                        "no out-of-memory observer (%s): the snapshot will be taken when the "
                        "error reaches memreport.capture, not at the moment it happened" % err
                    )
        with _lock:
            _active.append(self)
        return self

    def _record(self, torch, on):
        record = torch.cuda.memory._record_memory_history
        if not on:
            try:
                record(enabled=None)
            except TypeError:
                record(False)  # the API of PyTorch 2.0
            return
        try:
            record(enabled="all", context=self.context, stacks=self.stacks,
                   max_entries=self.max_entries)
        except TypeError:
            # PyTorch 2.0: _record_memory_history(enabled: bool, record_context, trace_alloc_max_entries, ...)
            record(True, trace_alloc_max_entries=self.max_entries,
                   trace_alloc_record_context=self.context is not None)

    # -- at the OOM (from the observer) --

    def _at_oom(self, device, alloc, device_allocated, device_free):
        torch = self._torch
        self._discard()  # an earlier OOM that the program recovered from (a cuDNN retry, say)
        folder = run_folder(self.out_dir, run_name=self.run_name)
        new = []
        d = folder
        while d and not os.path.isdir(d):
            new.append(d)
            d = os.path.dirname(d)
        os.makedirs(folder, exist_ok=True)
        names = {"snapshot": "." + SNAPSHOT, "summary": "." + SUMMARY, "stats": "." + STATS}
        problems = []
        written = _save_state(torch, folder, names, device=device, problems=problems)
        finals = {"." + SNAPSHOT: SNAPSHOT, "." + SUMMARY: SUMMARY, "." + STATS: STATS}
        self._staged = (folder, [(w, finals[w]) for w in written], new, problems)

    def _discard(self):
        staged, self._staged = self._staged, None
        if not staged:
            return
        folder, files, new, _ = staged
        for hidden, _final in files:
            try:
                os.unlink(os.path.join(folder, hidden))
            except OSError:
                pass
        for d in new:  # deepest first; only the folders this OOM made, and only if empty
            try:
                os.rmdir(d)
            except OSError:
                break

    # -- leaving --

    def __exit__(self, exc_type, exc, tb):
        with _lock:
            for i in range(len(_active) - 1, -1, -1):
                if _active[i] is self:
                    del _active[i]
                    break
        try:
            oom = _oom_in(exc, self._torch) if exc is not None and self._torch is not None else None
            if oom is not None and oom not in _captured:
                _captured.add(oom)
                self._finish(exc)
            else:
                self._discard()  # no OOM, or one the program handled: nothing is left
        except Exception as err:
            _warn("could not save the out-of-memory evidence: %s" % err)
        if self._recording:
            self._recording = False
            try:
                self._record(self._torch, False)
            except Exception as err:
                _warn("could not stop recording the allocator history: %s" % err)
        return False  # the exception, if any, goes on unchanged

    def _finish(self, exc):
        torch = self._torch
        staged, self._staged = self._staged, None
        problems = []
        if staged:
            folder, files, _new, problems = staged
            inputs = []
            for hidden, final in files:
                try:
                    os.replace(os.path.join(folder, hidden), os.path.join(folder, final))
                    inputs.append(final)
                except OSError as err:
                    problems.append("%s: %s" % (final, err))
        else:
            # no observer call (PyTorch without one, another allocator backend): the state now
            folder = run_folder(self.out_dir, run_name=self.run_name)
            os.makedirs(folder, exist_ok=True)
            names = {"snapshot": SNAPSHOT, "summary": SUMMARY, "stats": STATS}
            inputs = _save_state(torch, folder, names, problems=problems)
        self.folder = folder
        try:
            text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            _write(os.path.join(folder, MESSAGE), lambda f: f.write(text))
            inputs.insert(1 if inputs[:1] == [SNAPSHOT] else 0, MESSAGE)
        except Exception as err:
            problems.append("%s: %s" % (MESSAGE, err))
        for problem in problems:
            _warn("could not write %s" % problem)
        reports = _report(folder, inputs) if self.report else []
        where = os.path.join(folder, reports[0]) if reports else folder
        _say("out of memory: evidence%s in %s" % (" and report" if reports else "", where))


def dump(out_dir=None, *, step=None, name=None, run_name=None, report=True):
    """Saves the evidence now (snapshot.pickle, memory_summary.txt, memory_stats.json and the
    report) in OUT/RUN/step_{step}/[rank{N}/] (or OUT/RUN/NAME/..., or dump_{k} for the k-th
    unnamed dump of this process). Inside an on_oom block its out_dir and run_name are the
    defaults. Returns the folder, or None when nothing could be written (with a warning)."""
    global _dump_count
    try:
        torch = _torch()
        if torch is None:
            return None
        with _lock:
            capture = _active[-1] if _active else None
            if step is not None:
                sub = "step_%d" % int(step)
            elif name:
                sub = str(name)
            else:
                _dump_count += 1
                sub = "dump_%d" % _dump_count
        if out_dir is None:
            out_dir = capture.out_dir if capture else DEFAULT_OUT_DIR
        if run_name is None and capture is not None:
            run_name = capture.run_name
        folder = run_folder(out_dir, sub, run_name)
        os.makedirs(folder, exist_ok=True)
        try:
            if torch.cuda.is_initialized():
                torch.cuda.synchronize()  # so frees waiting on other streams are complete
        except Exception:
            pass
        problems = []
        names = {"snapshot": "snapshot.pickle", "summary": SUMMARY, "stats": STATS}
        inputs = _save_state(torch, folder, names, problems=problems)
        for problem in problems:
            _warn("could not write %s" % problem)
        if report:
            _report(folder, inputs)
        return folder if inputs else None
    except Exception as err:
        _warn("could not dump the memory state: %s" % err)
        return None
