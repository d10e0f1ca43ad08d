"""python -m memreport.capture [OPTIONS] [--] SCRIPT [ARGS...]
python -m memreport.capture [OPTIONS] -m MODULE [ARGS...]

Runs SCRIPT (or MODULE) as __main__ with ARGS as its sys.argv, like `python SCRIPT ARGS`,
inside memreport.capture.on_oom(): on a CUDA out-of-memory error the evidence and the report
are written to OUT/RUN[/rank{N}]/ and the error goes on as it would without memreport (the
traceback is printed and the exit status is 1).

Options:
  --out DIR          where run folders go (default memreport_runs)
  --max-entries N    allocator events kept in the history (default 100000)
  --stacks KIND      python (default) or all (adds C++ frames)
  --run-name NAME    the RUN folder name (default: shared by the ranks of one job)
  --no-report        save the evidence only, do not run memreport
  -h, --help         this text
"""

import os
import runpy
import sys

from memreport.capture import DEFAULT_MAX_ENTRIES, DEFAULT_OUT_DIR, on_oom


def _usage(message=None):
    if message:
        sys.stderr.write("memreport.capture: %s\n" % message)
    sys.stderr.write(__doc__.split("\n\n")[0] + "\n")
    return 2


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    opts = {"out_dir": DEFAULT_OUT_DIR, "max_entries": DEFAULT_MAX_ENTRIES, "stacks": "python",
            "run_name": None, "report": True}
    module = None
    while args:
        a = args.pop(0)
        if a == "--":
            break
        if a in ("-h", "--help"):
            sys.stdout.write(__doc__)
            return 0
        if a == "--no-report":
            opts["report"] = False
            continue
        if a == "-m":
            if not args:
                return _usage("-m needs a module name")
            module = args.pop(0)
            break
        key, eq, value = a.partition("=")
        if key in ("--out", "--max-entries", "--stacks", "--run-name"):
            if not eq:
                if not args:
                    return _usage("%s needs a value" % key)
                value = args.pop(0)
            if key == "--out":
                opts["out_dir"] = value
            elif key == "--max-entries":
                try:
                    opts["max_entries"] = int(value)
                except ValueError:
                    return _usage("--max-entries needs a number, not %r" % value)
            elif key == "--stacks":
                if value not in ("python", "all"):
                    return _usage("--stacks is python or all, not %r" % value)
                opts["stacks"] = value
            else:
                opts["run_name"] = value
            continue
        if a.startswith("-") and a != "-":
            return _usage("unknown option %s" % a)
        args.insert(0, a)
        break
    if module is None and not args:
        return _usage("no script to run")

    if module is not None:
        sys.argv = [module] + args  # run_module puts the module's file in argv[0]
        with on_oom(**opts):
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    else:
        script = args[0]
        sys.argv = args
        sys.path[0] = os.path.dirname(os.path.abspath(script))  # as `python SCRIPT` does
        with on_oom(**opts):
            runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
