"""Builds the memreport wheel: the memreport binary (installed into the environment's bin/, on
PATH) and the memreport.capture module. Run by `make wheel`, which passes the binary and the
version; no network and no build isolation are needed (Debian's python3-setuptools and
python3-wheel are enough)."""

import os
import shutil
import subprocess

from setuptools import Distribution, setup

try:
    from setuptools.command.build_scripts import build_scripts
except ImportError:  # setuptools before 69 (Debian 12 has 66): distutils' command, through setuptools
    from distutils.command.build_scripts import build_scripts
from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))
BINARY = os.environ.get("MEMREPORT_BINARY") or os.path.join(HERE, "..", "memreport")


def binary_version():
    """The version the binary reports ("memreport 0.1.0" -> "0.1.0"), so the two cannot differ."""
    out = subprocess.run([BINARY, "--version"], check=True, capture_output=True, text=True).stdout
    return out.split()[-1]


class copy_binary(build_scripts):
    """setuptools rewrites scripts as Python text; the memreport binary is copied as it is."""

    def copy_scripts(self):
        self.mkpath(self.build_dir)
        outfiles = []
        for script in self.scripts:
            out = os.path.join(self.build_dir, os.path.basename(script))
            shutil.copyfile(script, out)
            os.chmod(out, 0o755)
            outfiles.append(out)
        return outfiles, outfiles


class binary_distribution(Distribution):
    """Not pure: the wheel carries a native binary, so it is tagged with this platform."""

    def has_ext_modules(self):
        return True


class platform_wheel(bdist_wheel):
    """A wheel for this platform that any Python 3 can install (the binary is not a module)."""

    def get_tag(self):
        _, _, plat = super().get_tag()
        return "py3", "none", plat


setup(
    name="memreport",
    version=os.environ.get("MEMREPORT_VERSION") or binary_version(),
    description="Explain PyTorch CUDA out-of-memory errors; capture the evidence when a run dies",
    long_description=(
        "memreport reads PyTorch CUDA memory snapshots, memory_summary() tables, OOM messages "
        "and memory_stats() dumps and writes a report (HTML, JSON, Markdown, text). "
        "memreport.capture records the allocator history and, when the process runs out of "
        "memory, writes the snapshot, the message, the summary and the stats into a run folder "
        "with the report beside them."
    ),
    python_requires=">=3.8",
    packages=["memreport", "memreport.capture"],
    scripts=[BINARY],
    distclass=binary_distribution,
    cmdclass={"build_scripts": copy_binary, "bdist_wheel": platform_wheel},
    zip_safe=False,
)
