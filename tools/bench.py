#!/usr/bin/env python3
"""bench.py MEMREPORT [RUNS]: memreport against the floors, in one run, as ratios.

For each input (88 MB, 1 GB, 4 GB) every command runs RUNS times (default 5; 3 on the 1 GB and
4 GB files, and once but for the HTML report on the 4 GB one), each in a fresh process, and the
median wall time and the largest peak RSS are printed against the floors measured in the same
run: `cat` (reading the file), `opwalk 2` (../shared/tools/opwalk.c: the opcode walk with value
stack and memo, building nothing) and python3's bare `pickle.load` (not on the 4 GB file: it
needs about 18 GiB). Then a batch of 200 small runs (corpus folders under 256 KiB, copied)
without a cache, -j 2, in runs per second; what the capacity search (--budget) adds to the
report of the largest corpus trace it plans from; last, the time the 88 MB sample's report takes
to open and draw in headless Chromium (tests/browser/bench.sh: puppeteer-core, network off;
goal under 2 s), when Chromium, node and node_modules are there. The machine's load (`uptime`)
is printed before and after: other work on the same cores moves every figure, so compare
ratios within one run.

MEMREPORT_THREADS=1 in the environment runs memreport on one thread (see README).

Inputs (cached under build/bench/, never committed): the 88 MB corpus snapshot unpacked from
../shared/corpus/gpt_large_trace/snapshot.pickle.xz; 1 GB and 4 GB ones made from it with
../shared/tools/scale_snapshot.py (the trace repeated 12 and 52 times over the same segments).
BENCH_SIZES=88MB,1GB limits the inputs."""
import glob, json, lzma, os, shutil, statistics, subprocess, sys, time

SHARED = os.environ.get("MEMREPORT_SHARED", "../shared")
OUT = "build/bench"
SCALES = [("88MB", 1), ("1GB", 12), ("4GB", 52)]


def ensure_input(label, k):
    small = os.path.join(OUT, "gpt_large_trace.pickle")
    if not os.path.exists(small):
        with lzma.open(os.path.join(SHARED, "corpus/gpt_large_trace/snapshot.pickle.xz")) as f, \
                open(small + ".part", "wb") as g:
            shutil.copyfileobj(f, g, 1 << 20)
        os.rename(small + ".part", small)
    if k == 1:
        return small
    path = os.path.join(OUT, f"gpt_large_x{k}.pickle")
    if not os.path.exists(path):
        print(f"making the {label} snapshot (once)...", flush=True)
        subprocess.run([sys.executable, os.path.join(SHARED, "tools/scale_snapshot.py"), small,
                        path + ".part", str(k)], check=True)
        os.rename(path + ".part", path)
    return path


def ensure_opwalk():
    src = os.path.join(SHARED, "tools/opwalk.c")
    exe = "build/opwalk"
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        subprocess.run(["cc", "-O2", "-o", exe, src], check=True)
    return exe


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


def timed(cmd, runs):
    m = [measure(cmd) for _ in range(runs)]
    return statistics.median(t for t, _ in m), max(r for _, r in m)


def device_json(memreport, path):
    out = subprocess.run([memreport, "-q", path, "--format", "json", "-o", "-"],
                         capture_output=True, check=True).stdout
    return json.loads(out)["devices"][0]


def consistency(memreport, small, big, k):
    """A scaled snapshot repeats the trace k times over the same segments."""
    a, b = device_json(memreport, small), device_json(memreport, big)
    same = [key for key in ("reserved_bytes", "allocated_bytes", "active_bytes",
                            "requested_bytes", "inactive_split_bytes", "segments",
                            "largest_free_block_bytes") if a[key] != b[key]]
    events_ok = b["trace_events"] == k * a["trace_events"]
    peak = abs(b["peak_allocated_bytes"] - a["peak_allocated_bytes"]) / a["peak_allocated_bytes"]
    print(f"  consistency with 88 MB: layout {'equal' if not same else 'DIFFERS in ' + str(same)}, "
          f"events x{k} {'yes' if events_ok else 'NO'}, peak allocated within {peak * 100:.2f}%, "
          f"peaks_exact {b['peaks_exact']}")


def bench_input(memreport, opwalk, label, path, runs):
    size = os.path.getsize(path)
    print(f"{label}: {size / 2**20:.0f} MiB", flush=True)
    floors = {"cat": timed(["cat", path], runs), "opwalk 2": timed([opwalk, "2", path], runs)}
    if size < (2 << 30):
        floors["pickle.load"] = timed([sys.executable, "-c",
                                       "import pickle,sys;pickle.load(open(sys.argv[1],'rb'))",
                                       path], 1 if size > (512 << 20) else runs)
    rep = os.path.join(OUT, "out")
    cmds = [(f, [memreport, "-q", path, "--format", f, "-o", rep])
            for f in ("html", "json", "md", "text")]
    cmds.append(("simulate", [memreport, "simulate", path, "--alloc-conf",
                              "expandable_segments:True", "-o", rep]))
    cmds.append(("diff", [memreport, "diff", "-q", path, path, "-o", rep]))
    names = list(floors)
    print(f"  {'':12} {'seconds':>8} {'RSS MiB':>8} {'RSS/file':>8}" +
          "".join(f" {'/' + n:>12}" for n in names) + f" {'/html':>7}")
    for n, (t, r) in floors.items():
        print(f"  {n:12} {t:8.3f} {r / 2**20:8.0f} {r / size:8.2f}")
    html = None
    for n, cmd in cmds:
        t, r = timed(cmd, runs if n == "html" or size < (2 << 30) else 1)
        html = html or t
        print(f"  {'memreport ' + n if n == 'html' else '  ' + n:12} {t:8.3f} {r / 2**20:8.0f} "
              f"{r / size:8.2f}" + "".join(f" {t / floors[f][0]:12.3f}" for f in names) +
              f" {t / html:7.2f}", flush=True)


def batch(memreport, runs):
    """200 small runs (the corpus folders under 256 KiB, copied under other names), no cache."""
    src = [d for d in sorted(glob.glob(os.path.join(SHARED, "corpus/*/")))
           if sum(os.path.getsize(f) for f in glob.glob(d + "*")) < 256 << 10]
    root = os.path.join(OUT, "batch200")
    if not src:
        print("batch: no small corpus runs")
        return
    if not os.path.isdir(os.path.join(root, "in", "run199")):
        shutil.rmtree(root, ignore_errors=True)
        for i in range(200):
            shutil.copytree(src[i % len(src)], os.path.join(root, "in", f"run{i:03d}"))
    shutil.rmtree(os.path.join(root, "out"), ignore_errors=True)
    t, r = timed([memreport, "batch", "-q", os.path.join(root, "in"), "-o",
                  os.path.join(root, "out"), "-j", "2"], runs)
    print(f"batch of 200 small runs ({len(src)} corpus folders, copied), -j 2, no cache: "
          f"{t:.3f} s, {200 / t:.0f} runs/s, peak RSS {r / 2**20:.0f} MiB")


def capacity(memreport, runs):
    """The capacity search (--budget) on the largest corpus trace it plans from, against the
    report without it: the search must cost less than the report itself."""
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
        plain = timed([memreport, "-q", path, "-o", report], runs)[0]
        budget = timed([memreport, "-q", path, "--budget", "24GiB", "-o", report], runs)[0]
        search = max(budget - plain, 0.0)
        print(f"capacity search on {os.path.basename(os.path.dirname(path))} "
              f"({os.path.getsize(path) / 2**20:.1f} MiB, {cap['events_replayed']} events, "
              f"{len(cap['curve'])} replays): report {plain:.3f} s, with --budget {budget:.3f} s; "
              f"search/report {search / plain:.2f}")
        return
    print("capacity search: no corpus trace to plan from")


def log(memreport, runs):
    """A 256 MiB training log that ends in an OOM message (the text readers' scan of every
    line), against `cat` and `grep -c` over the same file."""
    path = os.path.join(OUT, "train256.log")
    if not os.path.exists(path):
        line = b"step %08d loss 1.2345 lr 0.0003 tokens/s 123456 | epoch 3\n"
        oom = (b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 "
               b"has a total capacity of 139.72 GiB of which 1.25 GiB is free.\n")
        with open(path + ".part", "wb") as f:
            for i in range(0, (256 << 20) // len(line % 0), 4096):
                f.write(b"".join(line % k for k in range(i, i + 4096)))
            f.write(oom)
        os.rename(path + ".part", path)
    size = os.path.getsize(path)
    cat = timed(["cat", path], runs)[0]
    grep = timed(["grep", "-c", "out of memory", path], runs)[0]
    t, r = timed([memreport, "-q", path, "--format", "json", "-o", os.path.join(OUT, "log.json")],
                 runs)
    print(f"train.log of {size / 2**20:.0f} MiB: memreport json {t:.3f} s "
          f"({size / t / 2**20:.0f} MiB/s, peak RSS {r / 2**20:.0f} MiB), /cat {t / cat:.1f}, "
          f"/grep -c {t / grep:.1f}")


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main():
    memreport = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    sizes = os.environ.get("BENCH_SIZES", ",".join(label for label, _ in SCALES)).split(",")
    print(f"machine: {os.cpu_count()} cores; {time.strftime('%Y-%m-%d %H:%M')}; {uptime()}")
    os.makedirs(OUT, exist_ok=True)
    opwalk = ensure_opwalk()
    capacity(memreport, runs)
    batch(memreport, runs)
    log(memreport, runs)
    small = ensure_input("88MB", 1)
    for label, k in SCALES:
        if label not in sizes:
            continue
        path = ensure_input(label, k)
        bench_input(memreport, opwalk, label, path, runs if k == 1 else min(runs, 3))
        if k > 1:
            consistency(memreport, small, path, k)
    browser(memreport, small)
    print(f"after: {uptime()}")


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
