#!/usr/bin/env python3
"""truncated.py BINARY: corpus runs cut as a wrapped ring buffer would cut them
(tools/truncate_trace.py: the last events of the trace, the segments kept), beside the run's text
evidence; the report must keep what the full trace shows, or say less, never something else.
Prints "ok N - ..." / "not ok N - ..." lines. Runs from build/corpus (tests/unpack_corpus.sh)."""
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, "tools")
import truncate_trace  # noqa: E402

BIN = os.path.abspath(sys.argv[1])
subprocess.run(["sh", "tests/unpack_corpus.sh"])
# (run, cut, what must hold): cause, run kind, first recommendation
CASES = [
    # a fragmentation OOM: the replays from the window start with the recorded layout, and
    # cannot withdraw expandable segments
    ("varlen_train_fragmentation_oom", "0.5", dict(cause="fragmentation", first="expandable_segments")),
    ("varlen_train_fragmentation_oom", "0.05", dict(cause="fragmentation", first="expandable_segments")),
    ("oom_fragmentation", "0.05", dict(cause="fragmentation", first="expandable_segments")),
    # a training run dying in its evaluation pass: no backward in the last 5% of the trace,
    # but the optimizer's state is live: training, not inference
    ("eval_bigger_batch_oom", "0.05", dict(cause="capacity", kind="training")),
    # a healthy run whose window holds too few iterations to compare: healthy within the
    # window only (the run went on longer than it shows; growth across iterations is unseen)
    ("lightning_healthy", "0.2", dict(cause=None, verdict="Healthy within the trace's window")),
    # a leak of detached forward outputs that began long before the window: what the growing
    # stack holds from before it counts, so packing the free pieces buys less than the leak
    # has already grown (not fragmentation)
    ("global_feature_leak_oom", "0.5", dict(cause="capacity", first="release_references",
                                            verdict="Out of memory from a leak")),
    # the same leak cut to its last two iterations, too few to measure growth: the window's one
    # whole iteration carried its feature map past its backward, and the same line holds as
    # much again from before the window: kept across steps, what outgrows the free pieces
    ("global_feature_leak_oom", "0.2", dict(cause="capacity", first="release_references",
                                            verdict="Out of memory with an earlier iteration's activations")),
    # a chat server's kept KV caches, cut to the last 4 requests: the window's two increments and the
    # caches its growing site holds from before it are the leak's run
    ("hf_chat_session_kv_cache_leak_oom", "0.5", dict(cause="capacity", first="release_references",
                                                      verdict="Out of memory from a leak")),
    # the same cut to its last 2 requests: one whole request's rise, and the caches the lines that kept
    # it hold from the requests before the window (twice that or more) are a leak, not fragmentation
    ("hf_chat_session_kv_cache_leak_oom", "0.2", dict(cause="capacity", first="release_references",
                                                      verdict="Out of memory from a leak")),
    # each step's logits appended to a list, no OOM, cut to one whole step: its rise and the two or more
    # steps' worth its line holds from before the window are growth, not a healthy window
    ("train_leak", "0.5", dict(cause=None, first="release_references", verdict="Memory grows")),
    # a new optimizer every 4 steps, each kept by its scheduler, cut to the last two steps: those two
    # rises and the two made before the window, live at the snapshot on the same lines, are the leak
    ("optimizer_recreated_leak_oom", "0.5", dict(cause="capacity", first="release_references",
                                                 verdict="Out of memory from a leak")),
    # an exception kept with its step's graph, cut to a window after that step: the window's forwards
    # make and free activations on the lines that still hold the kept graph's from before it
    ("stored_exception_graph_leak_oom", "0.5", dict(cause="capacity", first="release_references",
                                                    verdict="Out of memory with an earlier iteration's activations")),
    # retain_graph=True, cut after the step whose graph is kept: the window's backward and optimizer
    # step, then the next forward making its activations on the lines still holding the older graph's
    ("retain_graph_step_oom", "0.5", dict(cause="capacity", first="release_references",
                                          verdict="Out of memory with an earlier iteration's activations")),
    # checkpointing off after eval(), cut to a window with no checkpointed forward: the failing forward's
    # layer operations ran checkpointed in the window's earlier backward (its recompute), here outside it
    ("hf_gradckpt_eval_mode_left_oom", "0.5", dict(cause="capacity", first="restore_checkpointing",
                                                   verdict="Out of memory with activation checkpointing")),
    # nine deepcopies of the model kept, the window holding the last few: the copies at the snapshot
    ("ema_deepcopy_each_eval_leak_oom", "0.2", dict(cause="capacity", first="release_references",
                                                    verdict="Out of memory with copies of the model kept")),
    # autocast told in a window whose weights were made before it: their half-size copies, counted
    # against the parameters live at the snapshot; a model cast to bf16 is copied by nothing
    ("unet_amp_highres_oom", "0.5", dict(cause="capacity", techniques=["autocast"])),
    # a first forward cut to its last layers and the loss: too few layer boundaries in the window to
    # measure what its layers keep, but the tensors of 11 operations made before the window in 186
    # blocks are a saved graph's (training), not a no_grad forward's output
    ("hf_llama_oom", "0.2", dict(cause="capacity", kind="training", first="reduce_microbatch")),
    ("torchvision_vit_b16_train_oom", "0.05", dict(cause="capacity", kind="training")),
    # inference keeping every layer's attention weights: 7 lines of outputs from before the window,
    # no graph; the window cannot tell, and the report says so rather than training
    ("hf_output_attentions_infer_oom", "0.05", dict(cause="capacity", kind="unknown")),
    # empty_cache() after every step, cut to two steps: one release asked for again, and the same call's
    # release after the trace's last reservation (the run ended): the loop's habit, to remove
    ("empty_cache_each_step_healthy", "0.2", dict(cause=None, first="remove_empty_cache")),
    ("hf_gpt2_oom", "0.5", dict(cause="capacity", techniques=["autocast"])),
    ("bf16cast_gc_capped_healthy", "0.5", dict(cause=None, no_techniques=["autocast"])),
    ("gptneox_bf16_loaded_ft_oom", "0.2", dict(cause="capacity", no_techniques=["autocast"])),
]
n = 0
work = tempfile.mkdtemp()
try:
    for name, cut, want in CASES:
        n += 1
        src = os.path.join("build/corpus", name)
        d = os.path.join(work, "%s.%s" % (name, cut))
        os.mkdir(d)
        for t in ("oom_message.txt", "memory_summary.txt", "train.log"):
            if os.path.isfile(os.path.join(src, t)):
                shutil.copy(os.path.join(src, t), d)
        pk = "oom_snapshot.pickle"
        if not os.path.isfile(os.path.join(src, pk)):
            pk = "snapshot.pickle"
        with open(os.path.join(src, pk), "rb") as f:
            snap = pickle.load(f)
        truncate_trace.truncate(snap, cut)
        with open(os.path.join(d, pk), "wb") as f:
            pickle.dump(snap, f, protocol=4)
        p = subprocess.run([BIN, d, "--format", "json", "-q", "-o", "-"], capture_output=True)
        if p.returncode:
            print("not ok %d - %s cut to %s: memreport failed" % (n, name, cut))
            continue
        doc = json.loads(p.stdout)
        got = dict(cause=(doc.get("oom") or {}).get("cause"), kind=(doc.get("run") or {}).get("kind"),
                   first=(doc.get("recommendations") or [{}])[0].get("id"))
        verdict = doc.get("verdict") or ""
        tech = (doc.get("run") or {}).get("techniques") or []
        bad = ["%s %s, want %s" % (k, got[k], v) for k, v in want.items()
               if k in got and got[k] != v]
        bad += ["no technique %s" % t for t in want.get("techniques", []) if t not in tech]
        bad += ["technique %s" % t for t in want.get("no_techniques", []) if t in tech]
        if "verdict" in want and not verdict.startswith(want["verdict"]):
            bad.append("verdict %r, want it to begin %r" % (verdict[:60], want["verdict"]))
        print("%s %d - %s cut to %s: %s" % ("not ok" if bad else "ok", n, name, cut,
                                          "; ".join(bad) or "%(cause)s, %(kind)s, %(first)s" % got))
finally:
    shutil.rmtree(work)
