#!/usr/bin/env python3
"""scaling.py BINARY: work that must grow linearly with the input (issue 14 items 3-6).

Each shape of tests/fixtures/gen_scaling.py is run at SCALE 1 and SCALE 4 (four times the
bytes). The CPU time of the child (user + system, from wait4: other jobs on a shared machine
slow the wall clock, not this) is the smallest of three runs. Linear work takes about 4 times
as long at 4n, quadratic work 16 times; fixed costs (start-up, the report) keep a quadratic
just under 16, so a ratio of RATIO_FAIL or more fails: that is twice linear, and a quadratic
past its fixed costs is well above it. The big-member shape measures the child's peak RSS
instead: four runs of one 16 MiB member each, with four jobs and a budget of 16 MiB for
inflated members (MEMREPORT_ZIP_MEMORY), must stay under 1.5 times the peak of one job (four
jobs without a budget reach about 3.5 times). A child's peak RSS counts the memory of the
process that forked it, so the peak is read by a fresh, small python that runs nothing else,
and every input is written by a separate process.

Prints "ok N - ..." or "not ok N - ...", like the other test scripts."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
GEN = os.path.join(HERE, "fixtures", "gen_scaling.py")

RATIO_FAIL = 8.0
RUNS = 2  # CPU time, the least of two: steady under load
n = 0


def report(ok, what):
    global n
    n += 1
    print("%s %d - %s" % ("ok" if ok else "not ok", n, what))
    sys.stdout.flush()


def run(argv, env=None):
    """(exit status, CPU seconds, peak RSS in KiB) of one run."""
    with open(os.devnull, "wb") as null:
        p = subprocess.Popen(argv, stdout=null, stderr=subprocess.PIPE, env=env)
        err = p.stderr.read()
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.stderr.write(err.decode("utf-8", "replace")[:300])
    return p.returncode, ru.ru_utime + ru.ru_stime, ru.ru_maxrss


def best_time(argv):
    times = []
    for _ in range(RUNS):
        rc, cpu, _ = run(argv)
        if rc != 0:
            return None
        times.append(cpu)
    return min(times)


# Runs argv (after "--") and prints its exit status and its peak RSS in KiB.
PEAK = """import os, subprocess, sys
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
_, status, ru = os.wait4(p.pid, 0)
print(os.waitstatus_to_exitcode(status), ru.ru_maxrss)
"""


def peak_rss(argv, env):
    out = subprocess.run([sys.executable, "-c", PEAK] + argv, env=env, check=True,
                         stdout=subprocess.PIPE).stdout.split()
    return int(out[0]), int(out[1])


def write(tmp, shape, scale, suffix):
    """The input of a shape at a scale, written once (the JSON and HTML checks share it)."""
    path = os.path.join(tmp, "%s%d%s" % (shape, scale, suffix))
    if not os.path.exists(path):
        subprocess.run([sys.executable, GEN, shape, str(scale), path], check=True)
    return path


def check_linear(tmp, binary, shape, suffix, what, argv_of):
    t = []
    for scale in (1, 4):
        path = write(tmp, shape, scale, suffix)
        t.append(best_time(argv_of(path, scale)))
    if None in t:
        report(False, "%s: the run failed" % what)
        return
    ratio = t[1] / max(t[0], 0.002)
    report(ratio < RATIO_FAIL,
           "%s: %.3f s at n, %.3f s at 4n (ratio %.1f, fails from %.0f)"
           % (what, t[0], t[1], ratio, RATIO_FAIL))


def main():
    binary = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out")

        def report_of(path, scale):
            return [binary, "-q", path, "--format", "json", "-o", out + ".json"]

        def page_of(path, scale):  # the HTML report: its interactive page's tables too
            return [binary, "-q", path, "-o", out + ".html"]

        def batch_of(path, scale):
            return [binary, "batch", "-q", path, "-o", "%s%d" % (out, scale)]

        check_linear(tmp, binary, "meta", ".pickle",
                     "one long user_metadata string shared by every trace entry", report_of)
        check_linear(tmp, binary, "frame", ".pickle",
                     "one long frame name shared by every frame dict", report_of)
        check_linear(tmp, binary, "path", ".pickle",
                     "one long file name shared by every frame dict", report_of)
        check_linear(tmp, binary, "frame", ".pickle",
                     "one long frame name shared by every frame dict, HTML", page_of)
        check_linear(tmp, binary, "path", ".pickle",
                     "one long file name shared by every frame dict, HTML", page_of)
        check_linear(tmp, binary, "segments", ".pickle",
                     "a long run of segment events in the replay", report_of)
        check_linear(tmp, binary, "pools", ".pickle",
                     "many private-pool segments, each allocated in the trace", report_of)
        check_linear(tmp, binary, "members", ".zip",
                     "batch discovery of a zip with many text members", batch_of)

        # Four runs of one big member each: first one job, then four within a budget that
        # holds one member. Sanitizers must not keep freed buffers around for this.
        path = write(tmp, "big", 1, ".zip")
        env = dict(os.environ, ASAN_OPTIONS="quarantine_size_mb=0:detect_leaks=0")
        rc1, one = peak_rss([binary, "batch", "-q", "-j", "1", path, "-o", out + "j1"], env)
        env["MEMREPORT_ZIP_MEMORY"] = "16MiB"
        rc4, four = peak_rss([binary, "batch", "-q", "-j", "4", path, "-o", out + "j4"], env)
        report(rc1 == 0 and rc4 == 0 and four < one * 1.5,
               "batch -j 4 over four 16 MiB members with a 16 MiB budget: peak RSS %d MiB, "
               "one job %d MiB (exit %d and %d; fails from 1.5 times)"
               % (four // 1024, one // 1024, rc4, rc1))

if __name__ == "__main__":
    main()
