#!/usr/bin/env python3
"""A seventeenth held-out set (python3 record_heldout17.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Recorded beside record_runs.py as build/h17/record_heldout17.py."""
import os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log, mem


def s_hf_auto_find_batch_size_healthy(out, facts):
    """HF Trainer on a Llama causal LM from a config (2 layers, hidden 1024, 16/4 heads, vocab 32000),
    TrainingArguments(auto_find_batch_size=True, per_device_train_batch_size=64, bf16=True), seq 512,
    4 GiB allowed: the first attempts OOM inside the first forward, accelerate's find_executable_batch_size
    catches each OutOfMemoryError (gc.collect + empty_cache), halves the batch and restarts the inner
    training loop; the run then trains 4 steps at the batch that fits; snapshot dumped by a
    TrainerCallback at the end of the last step."""
    torch = R._torch()
    from transformers import Trainer, TrainingArguments, TrainerCallback
    cap(4, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    model = R.hf_llama(L=2)
    model_facts(model, facts)
    R.hf_cfg_facts(model, facts)
    T, B, STEPS = 512, 64, 4
    ooms = []

    def obs(device, alloc, device_alloc, device_free):
        ooms.append(dict(alloc=alloc, device_alloc=device_alloc, device_free=device_free,
                         stats=R.stats_subset(torch.cuda.memory_stats())))
    torch._C._cuda_attach_out_of_memory_observer(obs)

    class DS(torch.utils.data.Dataset):
        def __len__(s):
            return 4096

        def __getitem__(s, i):
            g = torch.Generator().manual_seed(i)
            ids = torch.randint(32000, (T,), generator=g)
            return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}

    class Rec(TrainerCallback):
        def on_train_begin(s, args, state, control, **kw):
            R.log(f"[attempt] train_batch_size={state.train_batch_size} ooms_so_far={len(ooms)}")
            facts.setdefault("attempts", []).append(dict(train_batch_size=state.train_batch_size, **mem()))

        def on_step_end(s, args, state, control, **kw):
            steplog(facts, step=state.global_step, train_batch_size=state.train_batch_size)
            if state.global_step == STEPS:
                dump(out, facts)

    args = TrainingArguments(output_dir="/tmp/afbs_out", per_device_train_batch_size=B, max_steps=STEPS,
                             auto_find_batch_size=True, bf16=True, report_to=[], save_strategy="no",
                             logging_steps=1, disable_tqdm=True, dataloader_num_workers=0, learning_rate=1e-4)
    tr = Trainer(model=model, args=args, train_dataset=DS(), callbacks=[Rec()])
    facts["settings"] = dict(kind="training", framework="transformers Trainer", amp="bf16 (Trainer bf16=True)",
                             optimizer=str(args.optim), requested_microbatch=B, seq_len=T,
                             auto_find_batch_size=True, steps=STEPS)
    tr.train()
    facts["handled_ooms"] = ooms
    facts["oom"] = False
    facts["final_train_batch_size"] = tr.state.train_batch_size
    facts["logits_bytes_fp32_per_sample"] = T * 32000 * 4
    write_log(out)


def s_cudamallocasync_oom(out, facts):
    """The 8-layer GPT of record_runs.gpt (width 1024, vocab 32000, 166 M params), AdamW, bf16 autocast,
    microbatch 16 x 1024, under PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (set in the process
    environment before CUDA init) with 6 GiB allowed: dies in the forward of its first step (capacity).
    Whatever PyTorch gives with that backend is kept; facts.json 'evidence' says what failed."""
    torch = R._torch()
    ev = facts.setdefault("evidence", {})
    ev["allocator_backend"] = torch.cuda.get_allocator_backend()
    cap(6, facts)
    try:
        start_history(max_entries=20000, facts=facts)
        ev["record_memory_history"] = "ok"
    except Exception as e:
        ev["record_memory_history"] = f"failed: {type(e).__name__}: {e}"
    try:
        R.attach_oom(out, facts)
        ev["oom_observer"] = "attached"
    except Exception as e:
        ev["oom_observer"] = f"failed: {type(e).__name__}: {e}"
    torch.manual_seed(0)
    m = R.gpt(L=8).train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B, T = 16, 1024
    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", microbatch=B, seq_len=T,
                             alloc_conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF"))
    try:
        for s in range(3):
            R.gpt_step(m, opt, B, T)
            steplog(facts, step=s)
        facts["oom"] = False
        write_log(out)
    except torch.OutOfMemoryError as e:
        import traceback
        facts["oom"] = True
        facts["oom_message"] = str(e)
        write_log(out, traceback.format_exc())
        with open(os.path.join(out, "oom_message.txt"), "w") as f:
            f.write(str(e) + "\n")
    for what, fn in [("memory_summary", lambda: R.save_state(out, facts)),
                     ("dump_snapshot", lambda: torch.cuda.memory._dump_snapshot(os.path.join(out, "snapshot.pickle")))]:
        try:
            fn()
            ev[what] = "ok"
        except Exception as e:
            ev[what] = f"failed: {type(e).__name__}: {e}"
    p = os.path.join(out, "snapshot.pickle")
    if os.path.exists(p):
        import pickle
        with open(p, "rb") as f:
            snap = pickle.load(f)
        ev["snapshot_segments"] = len(snap.get("segments", []))
        ev["snapshot_trace_events"] = sum(len(t) for t in snap.get("device_traces", []))
    try:
        ev["memory_allocated"] = torch.cuda.memory_allocated()
        ev["memory_reserved"] = torch.cuda.memory_reserved()
    except Exception as e:
        ev["memory_allocated"] = f"failed: {e}"


def _cat_grow(out, facts):
    """Feature extraction with a growing buffer: a frozen 4-layer MLP encoder (1024 -> 4096 -> 4096 ->
    4096 -> 2048, fp32) under torch.no_grad() over batches of 512 x 1024; each batch's 2048-d features
    (4 MiB) are appended with feats = torch.cat([feats, f]) so every step allocates a buffer 4 MiB larger
    than the last and frees the old one; 3 GiB allowed; dies at the cat."""
    torch = R._torch()
    import torch.nn as nn
    cap(3, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    enc = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 4096), nn.GELU(),
                        nn.Linear(4096, 4096), nn.GELU(), nn.Linear(4096, 2048)).cuda().eval()
    model_facts(enc, facts)
    B, D = 512, 2048
    facts["settings"] = dict(kind="inference (feature extraction)", framework="plain PyTorch", amp=None,
                             no_grad=True, batch=B, feature_dim=D, chunk_bytes=B * D * 4,
                             grow="feats = torch.cat([feats, f])",
                             alloc_conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF"))

    def body():
        feats = torch.empty(0, D, device="cuda")
        for s in range(2000):
            x = torch.randn(B, 1024, device="cuda")
            with torch.no_grad():
                f = enc(x)
            feats = torch.cat([feats, f])
            if s % 25 == 0:
                steplog(facts, step=s, feats_bytes=feats.numel() * 4)
        facts["final_feats_bytes"] = feats.numel() * 4
    run_oom(out, facts, body)
    st = facts.get("oom_observer_stats") or facts.get("stats")
    facts["note"] = "feats_bytes at the last steplog; the OOM asked for the next (larger) buffer"


def s_cat_grow_loop_oom(out, facts):
    _cat_grow(out, facts)


def s_cat_grow_loop_expandable(out, facts):
    _cat_grow(out, facts)


def s_kv_prealloc_pool_oom(out, facts):
    """A vLLM-style inference engine: a 4-layer decoder (width 1024, 16 heads, vocab 32000, bf16 weights,
    ~0.1 B params) and, at start-up, one KV-cache pool tensor of gpu_memory_utilization=0.9 of the 6 GiB
    allowed minus the weights (blocks of 16 tokens, bf16); then a batch of 16 requests of 1024 prompt
    tokens with prompt logprobs: prefill under torch.inference_mode() writes K/V into the pool, and the
    sampler computes the logits of every position in fp32 and their log_softmax: OOM there."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    cap(6, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    V, D, H, L, BS = 32000, 1024, 16, 4, 16

    class Layer(nn.Module):
        def __init__(s):
            super().__init__()
            s.ln1, s.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
            s.qkv = nn.Linear(D, 3 * D, bias=False)
            s.o = nn.Linear(D, D, bias=False)
            s.up = nn.Linear(D, 4 * D, bias=False)
            s.down = nn.Linear(4 * D, D, bias=False)

        def forward(s, x, kv_pool, li, slots):
            B, T, _ = x.shape
            q, k, v = s.qkv(s.ln1(x)).view(B, T, 3, H, D // H).unbind(2)
            kv_pool[slots // BS, 0, li, slots % BS] = k.reshape(B * T, H, D // H)
            kv_pool[slots // BS, 1, li, slots % BS] = v.reshape(B * T, H, D // H)
            a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
            x = x + s.o(a.transpose(1, 2).reshape(B, T, D))
            return x + s.down(F.gelu(s.up(s.ln2(x))))

    class Decoder(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(V, D)
            s.layers = nn.ModuleList([Layer() for _ in range(L)])
            s.ln = nn.LayerNorm(D)
            s.lm_head = nn.Linear(D, V, bias=False)

        def forward(s, ids, kv_pool, slots):
            x = s.emb(ids)
            for i, l in enumerate(s.layers):
                x = l(x, kv_pool, i, slots)
            return s.ln(x)

    m = Decoder().to(device="cuda", dtype=torch.bfloat16).eval()
    model_facts(m, facts)
    util = 0.9
    weights = torch.cuda.memory_allocated()
    block_bytes = 2 * L * BS * H * (D // H) * 2
    num_blocks = int((util * facts["cap_bytes"] - weights) // block_bytes)
    kv_pool = torch.empty(num_blocks, 2, L, BS, H, D // H, device="cuda", dtype=torch.bfloat16)
    facts["kv_pool"] = dict(gpu_memory_utilization=util, num_blocks=num_blocks, block_tokens=BS,
                            bytes=kv_pool.numel() * 2, weights_bytes_before=weights,
                            left_after_pool=facts["cap_bytes"] - torch.cuda.memory_allocated())
    R.log(f"[engine] KV cache pool: {num_blocks} blocks of {BS} tokens, {kv_pool.numel() * 2 / GiB:.2f} GiB "
          f"(gpu_memory_utilization={util})")
    NR, T = 16, 1024
    facts["settings"] = dict(kind="inference (LLM serving, prefill)", framework="plain PyTorch (vLLM-style engine)",
                             amp=None, dtype="bfloat16", inference_mode=True, requests=NR, prompt_len=T,
                             prompt_logprobs=True, logits_bytes_fp32=NR * T * V * 4)

    def body():
        steplog(facts, phase="after pool")
        with torch.inference_mode():
            ids = torch.randint(V, (NR, T), device="cuda")
            slots = torch.arange(NR * T, device="cuda")
            h = m(ids, kv_pool, slots)
            steplog(facts, phase="after prefill")
            logits = m.lm_head(h).float()  # sampler: every position's logits for prompt logprobs
            logprobs = torch.log_softmax(logits, dim=-1)
            tok = logprobs[:, -1].argmax(-1)
            steplog(facts, phase="sampled", tokens=int(tok.numel()))
    run_oom(out, facts, body)


def s_ckpt_load_no_map_location_oom(out, facts):
    """Resume from a checkpoint: the 8-layer GPT of record_runs.gpt (width 1024, vocab 32000, 166 M params
    fp32) with an EMA copy of the weights, fused AdamW, bf16 autocast, microbatch 2 x 256. Setup
    (history off): the training runs 2 steps, the budget is set to its peak reserved + 5 %, and it
    torch.save()s {model, ema, optimizer, step} from the GPU (checkpoint tensors are CUDA tensors), then everything is freed and the
    cache emptied. Resume (history on): model and EMA built on the GPU, AdamW created, then
    ckpt = torch.load(path) without map_location: every tensor of the checkpoint lands on the GPU beside
    the model and EMA; OOM inside torch.load."""
    torch = R._torch()
    import copy
    B, T = 2, 256
    path = "/tmp/h17_resume_ckpt.pt"

    def build():
        torch.manual_seed(0)
        m = R.gpt(L=8).train()
        ema = copy.deepcopy(m).eval().requires_grad_(False)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
        return m, ema, opt
    m, ema, opt = build()
    model_facts(m, facts)
    for s in range(2):
        R.gpt_step(m, opt, B, T)
        with torch.no_grad():
            for pe, p in zip(ema.parameters(), m.parameters()):
                pe.lerp_(p, 0.001)
        steplog(facts, key="setup_steps", step=s)
    facts["setup_peak_allocated"] = torch.cuda.max_memory_allocated()
    facts["setup_peak_reserved"] = torch.cuda.max_memory_reserved()
    # the training ran with this much; the budget is its peak reserved + 5 % (it fits, with headroom)
    capb = (int(facts["setup_peak_reserved"] * 1.05) // (2 * MiB)) * 2 * MiB
    torch.cuda.set_per_process_memory_fraction(capb / torch.cuda.get_device_properties(0).total_memory)
    facts["cap_bytes"] = capb
    facts["cap_set"] = "after the setup's 2 training steps (run uncapped): their peak reserved + 5 %"
    facts["opt_state_bytes"] = R.opt_state_bytes(opt)
    t0 = time.time()
    torch.save({"model": m.state_dict(), "ema": ema.state_dict(), "optimizer": opt.state_dict(), "step": 2}, path)
    facts["ckpt_file_bytes"] = os.path.getsize(path)
    facts["save_seconds"] = round(time.time() - t0, 2)
    del m, ema, opt
    import gc
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    facts["after_setup_allocated"] = torch.cuda.memory_allocated()
    start_history(max_entries=20000, facts=facts)
    m, ema, opt = build()
    facts["settings"] = dict(kind="training (resume from checkpoint)", framework="plain PyTorch", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", microbatch=B, seq_len=T, ema=True,
                             load="torch.load(path) without map_location", ckpt_keys=["model", "ema", "optimizer", "step"])

    def body():
        steplog(facts, phase="model, ema, optimizer built")
        ckpt = torch.load(path)  # no map_location: CUDA tensors come back to the GPU
        m.load_state_dict(ckpt["model"])
        ema.load_state_dict(ckpt["ema"])
        opt.load_state_dict(ckpt["optimizer"])
        steplog(facts, phase="loaded")
        for s in range(2):
            R.gpt_step(m, opt, B, T)
            steplog(facts, step=s)
    run_oom(out, facts, body)
    os.remove(path)


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "hf_auto_find_batch_size_healthy": dict(fn=s_hf_auto_find_batch_size_healthy, group="solo"),
    "cudamallocasync_oom": dict(fn=s_cudamallocasync_oom, group="solo",
                                env={"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}),
    "cat_grow_loop_oom": dict(fn=s_cat_grow_loop_oom, group="solo", doc=_cat_grow.__doc__),
    "cat_grow_loop_expandable": dict(fn=s_cat_grow_loop_expandable, group="solo", doc=_cat_grow.__doc__,
                                     env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
    "kv_prealloc_pool_oom": dict(fn=s_kv_prealloc_pool_oom, group="solo"),
    "ckpt_load_no_map_location_oom": dict(fn=s_ckpt_load_no_map_location_oom, group="solo"),
})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    R.main()
