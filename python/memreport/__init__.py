"""memreport: explain PyTorch CUDA out-of-memory errors.

The report itself is written by the `memreport` program (a native binary that this package
installs next to the Python interpreter's scripts, so it is on PATH in an activated
environment). `memreport.capture` records the allocator's history in a PyTorch process and, when
it runs out of memory, saves the evidence and writes the report.
"""

import os
import shutil
import sys
import sysconfig

__all__ = ["find_binary", "__version__"]


def _version():
    try:
        from importlib.metadata import version

        return version("memreport")
    except Exception:  # not installed (a source checkout on PYTHONPATH)
        return "unknown"


__version__ = _version()


def find_binary():
    """Path of the memreport program, or None.

    In order: $MEMREPORT_BIN; the scripts folder of this interpreter's environment (where pip
    put it), including the per-user one; a bin/ folder beside the package (pip install
    --target); then PATH.
    """
    env = os.environ.get("MEMREPORT_BIN")
    if env:
        return env if os.access(env, os.X_OK) else None
    places = []
    for scheme in (None, os.name + "_user"):
        try:
            p = sysconfig.get_path("scripts", scheme) if scheme else sysconfig.get_path("scripts")
            if p:
                places.append(p)
        except Exception:
            pass
    places.append(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bin"))
    places.append(os.path.dirname(sys.executable))
    for d in places:
        p = os.path.join(d, "memreport")
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return shutil.which("memreport")
