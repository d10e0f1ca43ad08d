#!/usr/bin/env python3
"""bench.py MEMREPORT [RUNS]: times memreport's full HTML report against python3's bare
pickle.load on the same files (median wall time, peak RSS), prints the ratios; first, what the
capacity search (--budget) adds to the report of the largest corpus trace it plans from; last,
the time the 88 MB sample's report takes to open and draw in headless Chromium
(tests/browser/bench.sh: puppeteer-core, network off; goal under 2 s), when Chromium, node and
node_modules are there.

Inputs (cached under build/bench/, never committed): the 88 MB corpus snapshot unpacked from
../shared/corpus/gpt_large_trace/snapshot.pickle.xz, and a 1 GB one made from it with
../shared/tools/scale_snapshot.py (trace repeated 12 times)."""
import json, lzma, os, resource, shutil, statistics, subprocess, sys, time

SHARED = os.environ.get("MEMREPORT_SHARED", "../shared")
OUT = "build/bench"


def ensure_inputs():
    os.makedirs(OUT, exist_ok=True)
    small = os.path.join(OUT, "gpt_large_trace.pickle")
    big = os.path.join(OUT, "gpt_large_x12.pickle")
    if not os.path.exists(small):
        with lzma.open(os.path.join(SHARED, "corpus/gpt_large_trace/snapshot.pickle.xz")) as f, \
                open(small + ".part", "wb") as g:
            shutil.copyfileobj(f, g, 1 << 20)
        os.rename(small + ".part", small)
    if not os.path.exists(big):
        print("making the 1 GB snapshot (once; about a minute)...", flush=True)
        subprocess.run([sys.executable, os.path.join(SHARED, "tools/scale_snapshot.py"), small,
                        big + ".part", "12"], check=True)
        os.rename(big + ".part", big)
    return [("88 MB", small), ("1 GB", big)]


def measure(cmd):
    """Wall seconds and peak RSS (bytes) of one run, in a fresh child each time."""
    code = ("import resource,subprocess,sys,time;t=time.perf_counter();"
            "r=subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL);"
            "w=time.perf_counter()-t;"
            "print(r.returncode,w,resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss*1024)")
    out = subprocess.run([sys.executable, "-c", code] + cmd, capture_output=True, text=True,
                         check=True).stdout.split()
    if out[0] != "0":
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return float(out[1]), int(out[2])


def device_json(memreport, path):
    out = subprocess.run([memreport, "-q", path, "--format", "json", "-o", "-"],
                         capture_output=True, check=True).stdout
    return json.loads(out)["devices"][0]


def consistency(memreport, small, big):
    """The 1 GB snapshot repeats the trace 12 times over the same segments."""
    a, b = device_json(memreport, small), device_json(memreport, big)
    same = [k for k in ("reserved_bytes", "allocated_bytes", "active_bytes", "requested_bytes",
                        "inactive_split_bytes", "segments", "largest_free_block_bytes")
            if a[k] != b[k]]
    events_ok = b["trace_events"] == 12 * a["trace_events"]
    peak = abs(b["peak_allocated_bytes"] - a["peak_allocated_bytes"]) / a["peak_allocated_bytes"]
    print(f"consistency 1 GB vs 88 MB: layout {'equal' if not same else 'DIFFERS in ' + str(same)}, "
          f"events x12 {'yes' if events_ok else 'NO'}, peak allocated within {peak * 100:.2f}%")


def capacity(memreport, runs):
    """The capacity search (--budget) on the largest corpus trace it plans from, against the
    report without it: the search must cost less than the report itself."""
    import glob
    snaps = sorted(glob.glob(os.path.join(SHARED, "corpus/*/snapshot.pickle")),
                   key=os.path.getsize, reverse=True)
    for path in snaps:
        doc = json.loads(subprocess.run([memreport, "-q", path, "--budget", "24GiB", "--format",
                                         "json", "-o", "-"], capture_output=True,
                                        check=True).stdout)
        cap = doc.get("capacity") or {}
        if cap.get("method") != "scaled_replay":
            continue
        report = os.path.join(OUT, "capacity.html")
        plain = statistics.median(measure([memreport, "-q", path, "-o", report])[0]
                                  for _ in range(runs))
        budget = statistics.median(measure([memreport, "-q", path, "--budget", "24GiB", "-o",
                                            report])[0] for _ in range(runs))
        search = max(budget - plain, 0.0)
        print(f"capacity search on {os.path.basename(os.path.dirname(path))} "
              f"({os.path.getsize(path) / 2**20:.1f} MiB, {cap['events_replayed']} events, "
              f"{len(cap['curve'])} replays): report {plain:.3f} s, with --budget {budget:.3f} s; "
              f"search/report {search / plain:.2f}")
        return
    print("capacity search: no corpus trace to plan from")


def main():
    memreport = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    print(f"machine: {os.cpu_count()} cores; {time.strftime('%Y-%m-%d')}")
    capacity(memreport, runs)
    inputs = ensure_inputs()
    consistency(memreport, inputs[0][1], inputs[1][1])
    for label, path in inputs:
        size = os.path.getsize(path)
        report = os.path.join(OUT, os.path.basename(path) + ".html")
        mr = [measure([memreport, "-q", path, "-o", report]) for _ in range(runs)]
        py_runs = runs if size < (512 << 20) else 1
        py = [measure([sys.executable, "-c",
                       "import pickle,sys;pickle.load(open(sys.argv[1],'rb'))", path])
              for _ in range(py_runs)]
        mr_t = statistics.median(t for t, _ in mr)
        mr_rss = max(r for _, r in mr)
        py_t = statistics.median(t for t, _ in py)
        py_rss = max(r for _, r in py)
        print(f"{label}: {size / 2**20:.0f} MiB, report {os.path.getsize(report) / 2**20:.2f} MiB")
        print(f"  memreport html : {mr_t:6.2f} s  peak RSS {mr_rss / 2**20:7.0f} MiB "
              f"({mr_rss / size:.2f}x the file)")
        print(f"  python3 load   : {py_t:6.2f} s  peak RSS {py_rss / 2**20:7.0f} MiB")
        print(f"  time ratio memreport/python3: {mr_t / py_t:.3f}")
    browser(memreport, inputs[0][1])


def browser(memreport, path):
    """The page in headless Chromium: its bytes, open+draw and script time (medians)."""
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    if not (os.path.exists(chromium) and shutil.which("node") and
            os.path.isdir("node_modules/puppeteer-core")):
        print("page in Chromium: skipped (no chromium, node or node_modules: npm ci)")
        return
    out = subprocess.run(["sh", "tests/browser/bench.sh", memreport, path], check=True,
                         capture_output=True, text=True).stdout.strip().splitlines()[-1]
    r = json.loads(out)
    print(f"page in Chromium (88 MB sample): {r['bytes'] / 2**20:.2f} MiB, opens and draws in "
          f"{r['open_ms']} ms (timeline script {r['script_ms']} ms, {r['pieces']} rectangles; "
          f"goal {r['goal_ms']} ms, median of {r['runs']})")


if __name__ == "__main__":
    main()
