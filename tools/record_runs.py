#!/usr/bin/env python3
"""Record real PyTorch CUDA memory evidence (snapshots, memory_summary texts, OOM logs) for memreport.

Run on a machine with CUDA and torch:  python3 record_runs.py OUTDIR [names...]
Each scenario runs in its own process (allocator settings are read at CUDA init) and writes
OUTDIR/<scenario>/ with: snapshot.pickle and/or oom_snapshot.pickle (the OOM observer dumps it at
the moment of the OOM), memory_summary.txt, memory_summary_abbrev.txt, memory_stats.json, train.log
(step lines and, for OOM runs, the traceback as a user would see it), oom_message.txt, console.log
(everything the process printed) and facts.json (ground truth read from torch itself).
Ladder scenarios (<model>_<budget>_b<k>) also write ladder.json: microbatch 1, 2, 3, ... under the
same cap until two consecutive OOMs.

Scenarios in group "par" (no OOM message that could be coloured by other processes) run REC_JOBS at
a time; "solo" ones run alone, one after another. runs.json in OUTDIR says what ran when.
Same helpers as ../shared/tools/gen_samples.py (start_history, cap, attach_oom, save_state).
"""
import contextlib, gc, json, os, subprocess, sys, time, traceback
from concurrent.futures import ThreadPoolExecutor

MiB = 2**20
GiB = 2**30
LOG = []          # lines of train.log


def _torch():
    import torch
    return torch


def log(msg):
    LOG.append(msg)
    print(msg, flush=True)


def start_history(max_entries=200000, stacks="python", context="all", facts=None):
    torch = _torch()
    torch.cuda.memory._record_memory_history(enabled="all", context=context, stacks=stacks,
                                             max_entries=max_entries)
    if facts is not None:
        facts["history"] = dict(max_entries=max_entries, stacks=stacks, context=context)


def stop_history():
    _torch().cuda.memory._record_memory_history(enabled=None)


def cap(gib, facts=None):
    torch = _torch()
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(gib * GiB / total)
    if facts is not None:
        facts["cap_gib"] = gib
        facts["cap_bytes"] = int(gib * GiB)


def attach_oom(out, facts):
    torch = _torch()

    def obs(device, alloc, device_alloc, device_free):
        path = os.path.join(out, "oom_snapshot.pickle")
        if not os.path.exists(path):
            torch.cuda.memory._dump_snapshot(path)
            facts["oom_observer"] = dict(device=device, alloc=alloc, device_alloc=device_alloc,
                                         device_free=device_free)
            facts["oom_observer_stats"] = stats_subset(torch.cuda.memory_stats())
    torch._C._cuda_attach_out_of_memory_observer(obs)


def attach_oom_every(out, facts):
    """The OOM observer of README's "Getting the evidence" as the held-out sets 21-26 use it: every failure
    overwrites the snapshot (a cuDNN workspace failure that PyTorch survives comes before the fatal one), so the
    snapshot is the last failure's, the one raised; facts count the calls. A script uses it with
    `R.attach_oom = R.attach_oom_every` (run_oom attaches R.attach_oom)."""
    torch = _torch()

    def obs(device, alloc, device_alloc, device_free):
        torch.cuda.memory._dump_snapshot(os.path.join(out, "oom_snapshot.pickle"))
        facts["oom_observer"] = dict(device=device, alloc=alloc, device_alloc=device_alloc, device_free=device_free)
        facts["oom_observer_stats"] = stats_subset(torch.cuda.memory_stats())
        facts["oom_observer_calls"] = facts.get("oom_observer_calls", 0) + 1
    torch._C._cuda_attach_out_of_memory_observer(obs)


STAT_KEYS = ["allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current",
             "reserved_bytes.all.peak", "active_bytes.all.current", "inactive_split_bytes.all.current",
             "inactive_split.all.current", "segment.all.current", "num_alloc_retries", "num_ooms",
             "requested_bytes.all.current", "oversize_allocations.current", "oversize_segments.current",
             "num_device_alloc", "num_device_free", "num_sync_all_streams", "num_oom_rejections"]


def stats_subset(stats):
    return {k: stats.get(k) for k in STAT_KEYS}


def save_state(out, facts, tag=""):
    torch = _torch()
    with open(os.path.join(out, f"memory_summary{tag}.txt"), "w") as f:
        f.write(torch.cuda.memory_summary())
    with open(os.path.join(out, f"memory_summary_abbrev{tag}.txt"), "w") as f:
        f.write(torch.cuda.memory_summary(abbreviated=True))
    stats = torch.cuda.memory_stats()
    with open(os.path.join(out, f"memory_stats{tag}.json"), "w") as f:
        json.dump(stats, f, indent=1, sort_keys=True)
    facts["stats" + tag] = stats_subset(stats)
    free, total = torch.cuda.mem_get_info()
    facts["mem_get_info" + tag] = dict(free=free, total=total)


def dump(out, facts, name="snapshot.pickle"):
    torch = _torch()
    torch.cuda.synchronize()
    torch.cuda.memory._dump_snapshot(os.path.join(out, name))
    save_state(out, facts)


def write_log(out, tb=None):
    with open(os.path.join(out, "train.log"), "w") as f:
        for line in LOG:
            f.write(line + "\n")
        if tb:
            f.write(tb)


def run_oom(out, facts, fn):
    """Run fn until it raises OutOfMemoryError; keep the traceback as a training log would and the
    allocator state as a user printing memory_summary() in the except block would see it."""
    torch = _torch()
    attach_oom(out, facts)
    try:
        fn()
        facts["oom"] = False
        if not os.path.exists(os.path.join(out, "snapshot.pickle")):
            dump(out, facts)
        write_log(out)
    except torch.OutOfMemoryError as e:
        facts["oom"] = True
        facts["oom_message"] = str(e)
        write_log(out, traceback.format_exc())
        with open(os.path.join(out, "oom_message.txt"), "w") as f:
            f.write(str(e) + "\n")
        save_state(out, facts)


def mem():
    torch = _torch()
    return dict(allocated=torch.cuda.memory_allocated(), reserved=torch.cuda.memory_reserved(),
                max_allocated=torch.cuda.max_memory_allocated(), max_reserved=torch.cuda.max_memory_reserved())


def steplog(facts, key="steps", **kw):
    rec = dict(kw)
    rec.update(mem())
    facts.setdefault(key, []).append(rec)
    parts = " ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in kw.items())
    log(f"[{key}] {parts} | allocated {rec['allocated'] / GiB:.2f} GiB reserved {rec['reserved'] / GiB:.2f} GiB")


def model_facts(m, facts, key="model"):
    ps = list(m.parameters())
    facts[key + "_params"] = sum(p.numel() for p in ps)
    facts[key + "_param_bytes"] = sum(p.numel() * p.element_size() for p in ps)
    facts[key + "_param_dtype"] = str(ps[0].dtype)
    bufs = list(m.buffers())
    facts[key + "_buffer_bytes"] = sum(b.numel() * b.element_size() for b in bufs)


def opt_state_bytes(opt):
    torch = _torch()
    n = 0
    for st in opt.state.values():
        for v in st.values():
            if torch.is_tensor(v) and v.is_cuda:
                n += v.numel() * v.element_size()
            elif isinstance(v, list):
                n += sum(t.numel() * t.element_size() for t in v if torch.is_tensor(t) and t.is_cuda)
    return n


def versions():
    from importlib import metadata
    v = {}
    for dist in ["torch", "transformers", "lightning", "pytorch-lightning", "accelerate", "torchvision", "timm",
                 "cupy-cuda13x", "triton"]:
        try:
            v[dist] = metadata.version(dist)
        except Exception:
            pass
    return v


def train_steps(facts, opt, loss_at, steps=3, amp=True, phases=True, **logged):
    """`steps` training steps (held-out sets 26, 27): loss_at(s) makes step s's batch and returns its loss (under
    bf16 autocast when amp), then backward, opt.step(), zero_grad(set_to_none=True); facts log each step (and,
    with phases, the end of each forward)."""
    torch = _torch()
    for s in range(steps):
        with torch.amp.autocast("cuda", dtype=torch.bfloat16) if amp else contextlib.nullcontext():
            loss = loss_at(s)
        if phases:
            steplog(facts, key="phases", step=s, phase="forward done")
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        steplog(facts, step=s, loss=float(loss), **logged)


def run_child(out, name, env_extra=None, timeout=150, tag="_probe"):
    """Run the child scenario `name` (held-out sets 26, 27: a calibration or fix probe) in out/<tag> with the
    allocator settings of env_extra only; return its facts (or an error record). The child is this module's
    __file__, which a held-out script sets to itself."""
    probe = os.path.join(out, tag)
    os.makedirs(probe, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")}
    env.update(env_extra or {})
    t0 = time.time()
    try:
        with open(os.path.join(probe, "console.log"), "w") as con:
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", name, probe], env=env,
                               stdout=con, stderr=subprocess.STDOUT, timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
    try:
        with open(os.path.join(probe, "facts.json")) as f:
            res = json.load(f)
    except Exception as e:  # noqa: BLE001
        res = dict(error=repr(e))
    res["child_rc"] = rc
    res["child_seconds"] = round(time.time() - t0, 1)
    return res


def collect_fix_probes(root, corpus_runs, script, counts=("steps", "phases"), cap_bytes=True, retries=False,
                       note_what="the variant named", finalize=None):
    """The fix-probe collection of held-out sets 27-32 (`--collect OUTDIR`): write each corpus run's
    <run>__<variant> results (the SCENARIOS whose name starts with run + "__") into its facts.json as fix_probes.
    counts: the facts lists whose lengths a row reports (as "<key>_done"); cap_bytes / retries: whether a row has
    cap_bytes / num_alloc_retries; finalize: {run: fn(facts, rows)} called for that run (its facts are written
    even without probe rows)."""
    finalize = finalize or {}
    for run in corpus_runs:
        fp = os.path.join(root, run, "facts.json")
        if not os.path.exists(fp):
            continue
        with open(fp) as f:
            facts = json.load(f)
        rows = []
        for name, spec in SCENARIOS.items():
            if not name.startswith(run + "__"):
                continue
            try:
                with open(os.path.join(root, name, "facts.json")) as f:
                    pf = json.load(f)
            except OSError:
                rows.append(dict(probe=name, env=spec.get("env"), error="no facts.json"))
                continue
            st = pf.get("stats") or {}
            row = dict(probe=name, env=spec.get("env"), variant=pf.get("variant"), oom=pf.get("oom"),
                       oom_message=pf.get("oom_message"))
            if cap_bytes:
                row["cap_bytes"] = pf.get("cap_bytes")
            for k in counts:
                row[k + "_done"] = len(pf.get(k, []))
            row.update(peak_allocated=st.get("allocated_bytes.all.peak"),
                       peak_reserved=st.get("reserved_bytes.all.peak"))
            if retries:
                row["num_alloc_retries"] = st.get("num_alloc_retries")
            rows.append(row)
        if rows:
            facts["fix_probes"] = dict(note="measured in the same device call: the same scenario function, each in "
                                            "its own process, with %s (%s, the __<variant> scenarios)"
                                            % (note_what, script), runs=rows)
        if run in finalize:
            finalize[run](facts, rows)
        if rows or run in finalize:
            with open(fp, "w") as f:
                json.dump(facts, f, indent=1, default=str)


# ---------------------------------------------------------------- models

def gpt(vocab=32000, d=1024, h=16, L=8, ckpt=False):
    """The 8-layer GPT of gen_samples.py."""
    torch = _torch()
    import torch.nn as nn
    from torch.utils.checkpoint import checkpoint

    class Block(nn.Module):
        def __init__(s):
            super().__init__()
            s.ln1, s.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            s.attn = nn.MultiheadAttention(d, h, batch_first=True)
            s.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(s, x):
            T = x.shape[1]
            mask = torch.triu(torch.full((T, T), float("-inf"), device=x.device), 1)
            y = s.ln1(x)
            a, _ = s.attn(y, y, y, attn_mask=mask, need_weights=False)
            x = x + a
            return x + s.mlp(s.ln2(x))

    class GPT(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(vocab, d)
            s.blocks = nn.ModuleList([Block() for _ in range(L)])
            s.ln = nn.LayerNorm(d)
            s.head = nn.Linear(d, vocab, bias=False)

        def forward(s, idx):
            x = s.emb(idx)
            for b in s.blocks:
                x = checkpoint(b, x, use_reentrant=False) if ckpt else b(x)
            return s.head(s.ln(x))

    return GPT().cuda()


def sdpa_block_cls(causal):
    """A pre-LN transformer block on F.scaled_dot_product_attention (no nn.MultiheadAttention)."""
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(s, d, h):
            super().__init__()
            s.h = h
            s.ln1, s.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            s.qkv = nn.Linear(d, 3 * d)
            s.proj = nn.Linear(d, d)
            s.fc1 = nn.Linear(d, 4 * d)
            s.fc2 = nn.Linear(4 * d, d)

        def forward(s, x):
            B, T, D = x.shape
            q, k, v = s.qkv(s.ln1(x)).view(B, T, 3, s.h, D // s.h).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            x = x + s.proj(a.transpose(1, 2).reshape(B, T, D))
            return x + s.fc2(F.gelu(s.fc1(s.ln2(x))))
    return Block


def tiny_gpt(vocab=8192, d=1024, h=16, L=6):
    import torch.nn as nn
    Block = sdpa_block_cls(True)

    class TinyGPT(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(vocab, d)
            s.blocks = nn.ModuleList([Block(d, h) for _ in range(L)])
            s.ln = nn.LayerNorm(d)
            s.head = nn.Linear(d, vocab, bias=False)

        def forward(s, idx):
            x = s.emb(idx)
            for b in s.blocks:
                x = b(x)
            return s.head(s.ln(x))
    return TinyGPT()


def ckpt_vit(d=1024, h=16, L=24, patch=16, img=224, classes=1000, ckpt=True):
    """A ViT-L/16-sized encoder with every block under torch.utils.checkpoint(use_reentrant=False)."""
    torch = _torch()
    import torch.nn as nn
    from torch.utils.checkpoint import checkpoint
    Block = sdpa_block_cls(False)
    n = (img // patch) ** 2 + 1

    class ViT(nn.Module):
        def __init__(s):
            super().__init__()
            s.patch = nn.Conv2d(3, d, patch, patch)
            s.cls = nn.Parameter(torch.zeros(1, 1, d))
            s.pos = nn.Parameter(torch.randn(1, n, d) * 0.02)
            s.blocks = nn.ModuleList([Block(d, h) for _ in range(L)])
            s.ln = nn.LayerNorm(d)
            s.head = nn.Linear(d, classes)

        def forward(s, x):
            x = s.patch(x).flatten(2).transpose(1, 2)
            x = torch.cat([s.cls.expand(x.shape[0], -1, -1), x], 1) + s.pos
            for b in s.blocks:
                x = checkpoint(b, x, use_reentrant=False) if ckpt else b(x)
            return s.head(s.ln(x[:, 0]))
    return ViT()


def hf_llama(L=4, d=1024, inter=2816, heads=16, kv=4, vocab=32000, maxpos=2048):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=d, intermediate_size=inter, num_hidden_layers=L, num_attention_heads=heads,
                      num_key_value_heads=kv, vocab_size=vocab, max_position_embeddings=maxpos)
    return LlamaForCausalLM(cfg)


def hf_cfg_facts(m, facts):
    cfg = m.config
    facts["hf_config"] = {k: getattr(cfg, k, None) for k in
                          ["model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
                           "num_attention_heads", "num_key_value_heads", "vocab_size", "use_cache",
                           "d_model", "d_ff", "num_layers", "num_decoder_layers", "ffn_dim",
                           "tie_word_embeddings"]}
    facts["hf_config"]["attn_implementation"] = getattr(cfg, "_attn_implementation", None)


def hf_lm_steps(m, opt, steps, B, T, vocab, facts=None, amp=True):
    torch = _torch()
    for s in range(steps):
        idx = torch.randint(vocab, (B, T), device="cuda")
        with torch.amp.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            loss = m(input_ids=idx, labels=idx).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if facts is not None:
            steplog(facts, step=s, loss=float(loss), B=B, T=T)


def gpt_step(model, opt, B, T, vocab=32000, amp=True, keep_logits=False):
    torch = _torch()
    import torch.nn.functional as F
    idx = torch.randint(vocab, (B, T + 1), device="cuda")
    with torch.amp.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
        logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, vocab).float(), idx[:, 1:].reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return (loss, logits) if keep_logits else loss


# ---------------------------------------------------------------- single runs

def s_hf_llama_oom(out, facts, B=8):
    """HF Llama (8 layers of width 1024, GQA 16/4 heads), AdamW, bf16 autocast, microbatch B x 2048 under
    8 GiB: dies in the forward of its first step, activations dominate."""
    torch = _torch()
    cap(8, facts)
    start_history(facts=facts)
    m = hf_llama(L=8).cuda()
    m.train()
    model_facts(m, facts)
    hf_cfg_facts(m, facts)
    T = 2048
    facts["settings"] = dict(kind="training", framework="transformers (own loop)", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", microbatch=B, seq_len=T, grad_checkpointing=False,
                             compile=False, accumulation_steps=1,
                             expandable_segments="expandable_segments:True" in os.environ.get("PYTORCH_ALLOC_CONF", ""))
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    run_oom(out, facts, lambda: hf_lm_steps(m, opt, 3, B, T, 32000, facts))


def s_hf_trainer_oom(out, facts):
    """HF Trainer on a Qwen2-style causal LM, per_device_train_batch_size=32 x 1024 tokens, bf16=True,
    under 10 GiB."""
    torch = _torch()
    from transformers import Qwen2Config, Qwen2ForCausalLM, Trainer, TrainingArguments
    cap(10, facts)
    start_history(facts=facts)
    cfg = Qwen2Config(hidden_size=768, intermediate_size=2048, num_hidden_layers=8, num_attention_heads=12,
                      num_key_value_heads=2, vocab_size=32000, max_position_embeddings=2048,
                      tie_word_embeddings=False)
    model = Qwen2ForCausalLM(cfg)
    model_facts(model, facts)
    hf_cfg_facts(model, facts)
    T, B = 1024, 32

    class DS(torch.utils.data.Dataset):
        def __len__(s):
            return 512

        def __getitem__(s, i):
            g = torch.Generator().manual_seed(i)
            ids = torch.randint(32000, (T,), generator=g)
            return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}

    args = TrainingArguments(output_dir="/tmp/trainer_out", per_device_train_batch_size=B, max_steps=3,
                             bf16=True, report_to=[], save_strategy="no", logging_steps=1, disable_tqdm=True,
                             dataloader_num_workers=0, learning_rate=1e-4)
    tr = Trainer(model=model, args=args, train_dataset=DS())
    facts["settings"] = dict(kind="training", framework="transformers Trainer", amp="bf16 (Trainer bf16=True)",
                             optimizer=str(args.optim), microbatch=B, seq_len=T,
                             grad_checkpointing=bool(args.gradient_checkpointing),
                             accumulation_steps=args.gradient_accumulation_steps, compile=False)
    run_oom(out, facts, tr.train)


def s_lbfgs_closure(out, facts):
    """Full-batch LBFGS (strong Wolfe line search) on an MLP regression: forward and backward run inside
    optimizer.step(closure); LBFGS keeps history_size pairs of flat parameter-sized vectors."""
    torch = _torch()
    import torch.nn as nn
    start_history(facts=facts)
    torch.manual_seed(0)
    W = 2048
    m = nn.Sequential(nn.Linear(2, W), nn.Tanh(), nn.Linear(W, W), nn.Tanh(), nn.Linear(W, W), nn.Tanh(),
                      nn.Linear(W, W), nn.Tanh(), nn.Linear(W, 1)).cuda()
    model_facts(m, facts)
    x = torch.rand(16384, 2, device="cuda") * 6 - 3
    y = torch.sin(x[:, :1]) * torch.cos(x[:, 1:])
    opt = torch.optim.LBFGS(m.parameters(), lr=1.0, max_iter=5, history_size=10, line_search_fn="strong_wolfe")
    calls = [0]

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(m(x), y)
        loss.backward()
        calls[0] += 1
        return loss

    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp=None, optimizer="torch.optim.LBFGS",
                             lbfgs=dict(max_iter=5, history_size=10, line_search_fn="strong_wolfe"),
                             microbatch=16384, full_batch=True, closure=True)
    for step in range(3):
        loss = opt.step(closure)
        st = opt.state[opt._params[0]]
        steplog(facts, step=step, loss=float(loss), closure_calls=calls[0], lbfgs_history=len(st.get("old_dirs", [])),
                optimizer_state_bytes=opt_state_bytes(opt))
    dump(out, facts)
    write_log(out)


def s_lightning_healthy(out, facts):
    """A LightningModule (embedding + 2-layer nn.TransformerEncoder classifier), Trainer bf16-mixed, 4
    steps; snapshot dumped by a callback after the last batch (before Lightning's teardown moves the
    model to the CPU)."""
    torch = _torch()
    import lightning as L
    import torch.nn as nn
    import torch.nn.functional as F
    start_history(facts=facts)

    class Clf(L.LightningModule):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(32000, 512)
            layer = nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True, norm_first=True)
            s.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            s.head = nn.Linear(512, 4)

        def forward(s, x):
            return s.head(s.enc(s.emb(x)).mean(1))

        def training_step(s, batch, i):
            x, y = batch
            return F.cross_entropy(s(x), y)

        def configure_optimizers(s):
            return torch.optim.AdamW(s.parameters(), lr=1e-4)

    class Rec(L.Callback):
        def on_train_batch_end(s, trainer, pl_module, outputs, batch, batch_idx):
            loss = outputs["loss"] if isinstance(outputs, dict) else outputs
            steplog(facts, step=trainer.global_step, batch_idx=batch_idx, loss=float(loss))
            if trainer.global_step >= trainer.max_steps:
                dump(out, facts)

    data = torch.utils.data.TensorDataset(torch.randint(32000, (512, 256)), torch.randint(4, (512,)))
    loader = torch.utils.data.DataLoader(data, batch_size=32)
    tr = L.Trainer(accelerator="gpu", devices=1, max_steps=4, precision="bf16-mixed", logger=False,
                   enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                   callbacks=[Rec()])
    model = Clf()
    model_facts(model, facts)
    facts["settings"] = dict(kind="training", framework="lightning Trainer", amp="bf16-mixed",
                             optimizer="torch.optim.AdamW (via optimizer.step(closure))", microbatch=32, seq_len=256)
    tr.fit(model, loader)
    facts["after_fit"] = mem()
    if not os.path.exists(os.path.join(out, "snapshot.pickle")):
        facts["dumped_after_fit"] = True
        dump(out, facts)
    write_log(out)


def s_compile_oom(out, facts):
    """torch.compile (inductor, default mode) of a 6-layer GPT on SDPA, microbatch 48 x 1024, bf16 autocast,
    AdamW, under 6 GiB."""
    torch = _torch()
    cap(6, facts)
    start_history(facts=facts)
    torch.manual_seed(0)
    m = tiny_gpt().cuda()
    model_facts(m, facts)
    cm = torch.compile(m)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B, T = 48, 1024
    facts["settings"] = dict(kind="training", framework="plain PyTorch + torch.compile(inductor)", compile=True,
                             amp="bf16 autocast", optimizer="torch.optim.AdamW", microbatch=B, seq_len=T, vocab=8192)

    def body():
        for step in range(3):
            t0 = time.time()
            loss = gpt_step(cm, opt, B, T, vocab=8192)
            steplog(facts, step=step, loss=float(loss), seconds=round(time.time() - t0, 2))
    run_oom(out, facts, body)


def s_ckpt_on_oom(out, facts):
    """ViT-L/16-sized encoder, every block under torch.utils.checkpoint(use_reentrant=False), microbatch 256
    images, bf16 autocast, AdamW, under 8 GiB: still out of memory."""
    torch = _torch()
    cap(8, facts)
    start_history(facts=facts)
    torch.manual_seed(0)
    m = ckpt_vit().cuda()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B = 256
    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", microbatch=B, image=224, tokens=197,
                             activation_checkpointing="torch.utils.checkpoint per block, use_reentrant=False",
                             grad_checkpointing=True)

    def body():
        for step in range(2):
            x = torch.randn(B, 3, 224, 224, device="cuda")
            y = torch.randint(1000, (B,), device="cuda")
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(m(x), y)
            log("forward done, backward")
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=step, loss=float(loss))
    run_oom(out, facts, body)


def s_ddp_one_rank(out, facts):
    """DDP (nccl, world size 1) around a 3-layer GPT, 3 healthy steps."""
    torch = _torch()
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29541", RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    torch.cuda.set_device(0)
    start_history(facts=facts)
    dist.init_process_group("nccl", device_id=torch.device("cuda:0"))
    try:
        model = gpt(L=3)
        model_facts(model, facts)
        steplog(facts, key="phases", phase="model on gpu")
        ddp = DDP(model, device_ids=[0])
        steplog(facts, key="phases", phase="after DDP()")
        opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4)
        facts["settings"] = dict(kind="training", framework="DDP", ddp=dict(backend="nccl", world_size=1,
                                 bucket_cap_mb=25, gradient_as_bucket_view=False, static_graph=False),
                                 amp="bf16 autocast", optimizer="torch.optim.AdamW", microbatch=4, seq_len=512)
        for step in range(3):
            loss = gpt_step(ddp, opt, 4, 512)
            steplog(facts, step=step, loss=float(loss))
        facts["optimizer_state_bytes"] = opt_state_bytes(opt)
        dump(out, facts)
        write_log(out)
    finally:
        dist.destroy_process_group()


def s_infer_mode_oom(out, facts):
    """torchvision ViT-B/16 image classification under torch.inference_mode() + bf16 autocast, batches of
    1024 images, under 3 GiB: the first batch runs out."""
    torch = _torch()
    import torchvision
    cap(3, facts)
    start_history(facts=facts)
    m = torchvision.models.vit_b_16().cuda().eval()
    model_facts(m, facts)
    B = 1024
    facts["settings"] = dict(kind="inference", framework="torchvision", inference_mode=True, amp="bf16 autocast",
                             batch=B, image=224, backward=False, optimizer=None)
    batches = [torch.randn(B, 3, 224, 224) for _ in range(2)]

    def body():
        preds = []
        with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
            for i, x in enumerate(batches):
                preds.append(m(x.cuda()).argmax(-1))
                steplog(facts, key="batches", batch=i)
        return preds
    run_oom(out, facts, body)


def s_cupy_non_pytorch(out, facts):
    """One process: CuPy holds all but 6 GiB of the GPU, then PyTorch trains (no memory fraction)."""
    torch = _torch()
    import cupy as cp
    torch.cuda.init()
    # warm-up (as a first tiny step would): creates the cuBLAS handles of this thread and of autograd's
    # backward thread, which cudaMalloc outside PyTorch's allocator
    a = torch.randn(256, 256, device="cuda", requires_grad=True)
    with torch.amp.autocast("cuda", dtype=torch.bfloat16):
        (a @ a).float().sum().backward()
    (a @ a).sum().backward()
    torch.cuda.synchronize()
    del a
    free, total = torch.cuda.mem_get_info()
    hold = free - 6 * GiB
    buf = cp.empty(hold, dtype=cp.uint8)
    buf[:1 << 20] = 1
    cp.cuda.Device(0).synchronize()
    pool = cp.get_default_memory_pool()
    facts["cupy"] = dict(requested=hold, pool_used=pool.used_bytes(), pool_total=pool.total_bytes(),
                         free_before=free, free_after=torch.cuda.mem_get_info()[0])
    log(f"cupy preprocessing buffer: {hold / GiB:.2f} GiB")
    start_history(facts=facts)
    m = hf_llama(L=4).cuda().train()
    model_facts(m, facts)
    hf_cfg_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B, T = 8, 1024
    facts["settings"] = dict(kind="training", framework="transformers (own loop) + CuPy in the same process",
                             amp="bf16 autocast", optimizer="torch.optim.AdamW", microbatch=B, seq_len=T,
                             memory_fraction=None)
    try:
        run_oom(out, facts, lambda: hf_lm_steps(m, opt, 3, B, T, 32000, facts))
    except RuntimeError as e:       # a CUDA error that is not an OutOfMemoryError: keep its evidence too
        facts["oom"] = False
        facts["cuda_error"] = str(e)
        write_log(out, traceback.format_exc())
        torch.cuda.memory._dump_snapshot(os.path.join(out, "snapshot.pickle"))
        save_state(out, facts)
    facts["cupy"]["pool_total_at_end"] = pool.total_bytes()
    del buf


def s_train_leak(out, facts):
    """2-layer GPT (width 512), bf16 autocast, AdamW, 6 steps; every step keeps its logits
    (history.append(logits.detach())) and its loss tensor (losses.append(loss), no .item())."""
    torch = _torch()
    start_history(facts=facts)
    torch.manual_seed(0)
    model = gpt(d=512, h=8, L=2)
    model_facts(model, facts)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    B, T = 8, 512
    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", microbatch=B, seq_len=T,
                             kept_per_step="logits.detach() (bf16, B x T x 32000) and the loss tensor")
    history, losses = [], []
    for step in range(6):
        loss, logits = gpt_step(model, opt, B, T, keep_logits=True)
        history.append(logits.detach())      # "for metrics at the end of the epoch"
        losses.append(loss)                  # a tensor, not loss.item()
        del logits
        steplog(facts, step=step, loss=float(loss), kept=len(history))
    facts["kept_logits_bytes_each"] = history[0].numel() * history[0].element_size()
    dump(out, facts)
    write_log(out)


def s_eval_no_grad_missing_oom(out, facts):
    """Evaluation of a BERT classifier (6 layers, width 512), model.eval() but no torch.no_grad(), keeping
    every batch's logits (preds.append(out.logits)): each kept output holds its batch's autograd graph."""
    torch = _torch()
    from transformers import BertConfig, BertForSequenceClassification
    cap(6, facts)
    start_history(facts=facts)
    cfg = BertConfig(vocab_size=30522, hidden_size=512, num_hidden_layers=6, num_attention_heads=8,
                     intermediate_size=2048, max_position_embeddings=512, num_labels=3)
    m = BertForSequenceClassification(cfg).cuda().eval()
    model_facts(m, facts)
    hf_cfg_facts(m, facts)
    B, T = 8, 256
    facts["settings"] = dict(kind="evaluation", framework="transformers (own loop)", amp=None, no_grad=False,
                             inference_mode=False, model_eval=True, batch=B, seq_len=T, optimizer=None)

    def body():
        preds = []
        for i in range(200):
            x = torch.randint(30522, (B, T), device="cuda")
            o = m(input_ids=x, attention_mask=torch.ones_like(x))
            preds.append(o.logits)
            steplog(facts, key="batches", batch=i, requires_grad=bool(o.logits.requires_grad))
        return preds
    run_oom(out, facts, body)


def var_gpt_run(sizes, facts=None):
    torch = _torch()
    torch.manual_seed(0)
    model = gpt(L=2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step, (B, T) in enumerate(sizes):
        loss = gpt_step(model, opt, B, T)
        if facts is not None:
            steplog(facts, step=step, B=B, T=T, loss=float(loss),
                    num_alloc_retries=torch.cuda.memory_stats().get("num_alloc_retries"))
    return model, opt


RETRY_SIZES_SEED = 5


def retries_sizes():
    import random
    rnd = random.Random(RETRY_SIZES_SEED)
    return [(rnd.choice([2, 4, 6, 8]), rnd.choice([256, 512, 1024, 1536, 2048])) for _ in range(8)]


def retries_try(cap_bytes):
    """One calibration run of retries_survived in a fresh process (history off); prints a JSON line."""
    torch = _torch()
    total = torch.cuda.get_device_properties(0).total_memory
    if cap_bytes:
        torch.cuda.set_per_process_memory_fraction(cap_bytes / total)
    ok = True
    try:
        res = var_gpt_run(retries_sizes())
    except torch.OutOfMemoryError:
        ok = False
    res = None
    st = torch.cuda.memory_stats()
    print(json.dumps(dict(cap=cap_bytes or None, ok=ok, num_alloc_retries=st.get("num_alloc_retries"),
                          peak_reserved=torch.cuda.max_memory_reserved(),
                          peak_allocated=torch.cuda.max_memory_allocated())), flush=True)


def s_retries_survived(out, facts):
    """2-layer GPT, bf16 autocast, AdamW, batch and sequence length vary every step, under a cap between the
    peak allocated and the peak reserved of the same run uncapped: the run survives only because the
    allocator frees its cache and retries cudaMalloc. The cap is calibrated first, each candidate in a
    fresh process of its own (history off); then the same run is recorded in this fresh process."""
    torch = _torch()
    sizes = retries_sizes()
    total = torch.cuda.get_device_properties(0).total_memory

    def child(cap_bytes):
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--retries-try", str(int(cap_bytes))],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=120)
        return json.loads(p.stdout.strip().splitlines()[-1])

    r0 = child(0)
    P, R = r0["peak_allocated"], r0["peak_reserved"]
    calib = [r0]
    chosen = None
    for f in [0.1, 0.25, 0.4, 0.55, 0.7, 0.85]:
        r = child(int(P + f * (R - P)))
        r["f"] = f
        calib.append(r)
        if r["ok"] and (r["num_alloc_retries"] or 0) > 0:
            chosen = r["cap"]
            break
    if chosen is None:
        chosen = int(R * 0.98)
    facts["calibration"] = calib
    facts["sizes"] = sizes
    facts["cap_bytes"] = chosen
    facts["cap_gib"] = chosen / GiB
    torch.cuda.set_per_process_memory_fraction(chosen / total)
    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", microbatch="varies (2-8)", seq_len="varies (256-2048)")
    start_history(facts=facts)
    attach_oom(out, facts)
    try:
        res = var_gpt_run(sizes, facts)
        facts["oom"] = False
        dump(out, facts)
        write_log(out)
    except torch.OutOfMemoryError as e:
        facts["oom"] = True
        facts["oom_message"] = str(e)
        write_log(out, traceback.format_exc())
        with open(os.path.join(out, "oom_message.txt"), "w") as f:
            f.write(str(e) + "\n")
        save_state(out, facts)


def s_gen_small_oom(out, facts, batch=48, entries=4000):
    """OPT-style decoder (12 layers of width 1024) in bf16, generate() 1800 new tokens for `batch` prompts of
    128 tokens under 4 GiB: the KV cache grows every token until it runs out. Small ring buffer (wraps)."""
    torch = _torch()
    from transformers import OPTConfig, OPTForCausalLM
    cap(4, facts)
    start_history(max_entries=entries, facts=facts)
    cfg = OPTConfig(vocab_size=50272, hidden_size=1024, num_hidden_layers=12, ffn_dim=4096, num_attention_heads=16,
                    max_position_embeddings=2048, word_embed_proj_dim=1024)
    m = OPTForCausalLM(cfg).to(torch.bfloat16).cuda().eval()
    model_facts(m, facts)
    hf_cfg_facts(m, facts)
    idx = torch.randint(4, 50272, (batch, 128), device="cuda")
    facts["settings"] = dict(kind="inference", framework="transformers generate()", dtype="bf16 weights",
                             batch=batch, prompt_len=128, max_new_tokens=1800, do_sample=False, backward=False)
    run_oom(out, facts, lambda: m.generate(idx, attention_mask=torch.ones_like(idx), max_new_tokens=1800,
                                           min_new_tokens=1800, do_sample=False, pad_token_id=1))


def s_t5_accum_oom(out, facts, layers=6, cap_gib=6, lens=(256, 256, 1024, 512)):
    """T5 (t5-small shape, encoder-decoder), bf16 autocast, AdamW, gradient accumulation of 4 microbatches of
    16; source lengths vary by microbatch: the first one of 1024 tokens runs out (6 layers: 256, 256, 1024,
    512 under 6 GiB, dying in the third microbatch; 4 layers: 256, 1024, 512, 256 under 4 GiB, dying in the
    second), with the gradients of the earlier microbatches accumulated and no optimizer step taken yet."""
    torch = _torch()
    from transformers import T5Config, T5ForConditionalGeneration
    cap(cap_gib, facts)
    start_history(facts=facts)
    cfg = T5Config(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=layers, num_decoder_layers=layers,
                   num_heads=8, dropout_rate=0.1, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    m = T5ForConditionalGeneration(cfg).cuda().train()
    model_facts(m, facts)
    hf_cfg_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    accum, B, tgt = 4, 16, 128
    lens = list(lens)
    facts["settings"] = dict(kind="training", framework="transformers (own loop)", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", microbatch=B, accumulation_steps=accum,
                             source_lens=lens, target_len=tgt, grad_checkpointing=False)

    def body():
        for step in range(2):
            for k in range(accum):
                T = lens[k]
                src = torch.randint(2, 32128, (B, T), device="cuda")
                lab = torch.randint(2, 32128, (B, tgt), device="cuda")
                with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                    loss = m(input_ids=src, attention_mask=torch.ones_like(src), labels=lab).loss / accum
                loss.backward()
                steplog(facts, key="microbatches", step=step, micro=k, src_len=T, loss=float(loss))
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=step)
    run_oom(out, facts, body)


# ---------------------------------------------------------------- microbatch ladders

def ladder(out, facts, meta, try_fn, cleanup, coarse=(), max_b=1024, seconds=150):
    """Try microbatches under the cap already set, history off: first the coarse list (stop at its first
    OOM), then linearly from the last fit + 1 (from 1 when coarse is empty) until two consecutive OOMs.
    Between tries: cleanup(), gc, empty_cache, reset_peak_memory_stats, reset_accumulated_memory_stats."""
    torch = _torch()
    t_end = time.time() + seconds
    tried = {}
    rows = []

    def attempt(B):
        cleanup()
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.reset_accumulated_memory_stats()
        base_a, base_r = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
        t0 = time.time()
        msg = None
        try:
            try_fn(B)
            fits = True
        except torch.OutOfMemoryError as e:
            fits = False
            msg = str(e).split(" GPU ")[0]
        st = torch.cuda.memory_stats()
        row = dict(microbatch=B, fits=fits, peak_reserved=torch.cuda.max_memory_reserved(),
                   peak_allocated=torch.cuda.max_memory_allocated(), num_alloc_retries=st.get("num_alloc_retries"),
                   base_allocated=base_a, base_reserved=base_r, seconds=round(time.time() - t0, 3))
        if msg:
            row["oom"] = msg
        rows.append(row)
        tried[B] = fits
        print(f"ladder B={B} fits={fits} peak_reserved={row['peak_reserved'] / GiB:.2f} GiB", flush=True)
        cleanup()
        gc.collect()
        torch.cuda.empty_cache()
        return fits

    last_fit = 0
    for B in coarse:
        if time.time() > t_end:
            break
        if attempt(B):
            last_fit = B
        else:
            break
    B, bad = last_fit + 1, 0
    while bad < 2 and B <= max_b and time.time() < t_end:
        fits = tried[B] if B in tried else attempt(B)
        bad = 0 if fits else bad + 1
        B += 1
    rows.sort(key=lambda r: r["microbatch"])
    fit = [r["microbatch"] for r in rows if r["fits"]]
    oom = [r["microbatch"] for r in rows if not r["fits"]]
    doc = dict(meta)
    doc.update(budget_bytes=facts["cap_bytes"], budget_gib=facts["cap_gib"],
               largest_fit=max(fit) if fit else None,
               first_oom_after_largest_fit=min([b for b in oom if b > (max(fit) if fit else 0)], default=None),
               complete=bad >= 2,
               method="one process, history off, same cap; per try a fresh optimizer and no gradients "
                      "(model weights kept), empty_cache + reset_peak_memory_stats + "
                      "reset_accumulated_memory_stats before each try; peak_* are torch.cuda.max_memory_*",
               ladder=rows)
    with open(os.path.join(out, "ladder.json"), "w") as f:
        json.dump(doc, f, indent=1)
    facts["ladder_summary"] = dict(largest_fit=doc["largest_fit"], first_oom=doc["first_oom_after_largest_fit"],
                                   complete=doc["complete"], tries=len(rows))


def s_ladder_llama(out, facts, k=2):
    """(a) HF Llama (4 layers of width 1024, GQA 16/4, vocab 32000), seq 1024, AdamW, bf16 autocast, 16 GiB."""
    torch = _torch()
    cap(16, facts)
    T, steps = 1024, 2
    start_history(facts=facts)
    torch.manual_seed(0)
    m = hf_llama(L=4).cuda().train()
    model_facts(m, facts)
    hf_cfg_facts(m, facts)
    facts["settings"] = dict(kind="training", framework="transformers (own loop)", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", microbatch=k, seq_len=T, steps=steps)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    hf_lm_steps(m, opt, steps, k, T, 32000, facts)
    facts["optimizer_state_bytes"] = opt_state_bytes(opt)
    dump(out, facts)
    write_log(out)
    stop_history()
    opt = None

    def try_fn(B):
        o = torch.optim.AdamW(m.parameters(), lr=1e-4)
        hf_lm_steps(m, o, steps, B, T, 32000)

    ladder(out, facts, dict(model="HF LlamaForCausalLM: 4 layers, hidden 1024, intermediate 2816, 16 heads, "
                                  "4 kv heads, vocab 32000, fp32 weights", seq_len=T, steps_per_try=steps,
                            optimizer="AdamW", amp="bf16 autocast", recorded_microbatch=k, kind="training"),
           try_fn, lambda: m.zero_grad(set_to_none=True))


def s_ladder_gpt8(out, facts, k=4):
    """(b) the 8-layer GPT of gen_samples (width 1024, vocab 32000) at seq 256, AdamW, bf16 autocast, 8 GiB."""
    torch = _torch()
    cap(8, facts)
    T, steps = 256, 2
    start_history(facts=facts)
    torch.manual_seed(0)
    m = gpt()
    model_facts(m, facts)
    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", microbatch=k, seq_len=T, steps=steps)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for s in range(steps):
        loss = gpt_step(m, opt, k, T)
        steplog(facts, step=s, loss=float(loss), B=k, T=T)
    facts["optimizer_state_bytes"] = opt_state_bytes(opt)
    loss = None
    dump(out, facts)
    write_log(out)
    stop_history()
    opt = None

    def try_fn(B):
        o = torch.optim.AdamW(m.parameters(), lr=1e-4)
        for _ in range(steps):
            gpt_step(m, o, B, T)

    ladder(out, facts, dict(model="gen_samples gpt(): 8 blocks (nn.MultiheadAttention), width 1024, 16 heads, "
                                  "vocab 32000, untied head, fp32 weights", seq_len=T, steps_per_try=steps,
                            optimizer="AdamW", amp="bf16 autocast", recorded_microbatch=k, kind="training"),
           try_fn, lambda: m.zero_grad(set_to_none=True))


def s_ladder_resnet50(out, facts, k=16):
    """(c) torchvision resnet50, SGD momentum 0.9, bf16 autocast, 224x224, 10 GiB."""
    torch = _torch()
    import torchvision
    import torch.nn.functional as F
    cap(10, facts)
    steps = 2
    start_history(facts=facts)
    torch.manual_seed(0)
    m = torchvision.models.resnet50().cuda().train()
    model_facts(m, facts)
    facts["settings"] = dict(kind="training", framework="torchvision", amp="bf16 autocast",
                             optimizer="torch.optim.SGD(momentum=0.9)", microbatch=k, image=224, steps=steps,
                             channels_last=False)

    def steps_fn(o, B, rec=False):
        for s in range(steps):
            x = torch.randn(B, 3, 224, 224, device="cuda")
            y = torch.randint(1000, (B,), device="cuda")
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(m(x), y)
            loss.backward()
            o.step()
            o.zero_grad(set_to_none=True)
            if rec:
                steplog(facts, step=s, loss=float(loss), B=B)

    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    steps_fn(opt, k, rec=True)
    facts["optimizer_state_bytes"] = opt_state_bytes(opt)
    dump(out, facts)
    write_log(out)
    stop_history()
    opt = None
    ladder(out, facts, dict(model="torchvision resnet50 (25.6 M parameters, fp32 weights, BatchNorm)", image=224,
                            steps_per_try=steps, optimizer="SGD momentum 0.9", amp="bf16 autocast",
                            recorded_microbatch=k, kind="training"),
           lambda B: steps_fn(torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9), B),
           lambda: m.zero_grad(set_to_none=True),
           coarse=[1, 2, 4, 8, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256, 288,
                   320, 352, 384, 448, 512, 640, 768])


def s_ladder_llama_infer(out, facts, k=4):
    """(d) HF Llama (the same 4-layer config as (a)) in bf16, a forward of B sequences of 1024 tokens under
    torch.inference_mode() (scoring: all-position logits), 4 GiB."""
    torch = _torch()
    cap(4, facts)
    T, steps = 1024, 2
    start_history(facts=facts)
    torch.manual_seed(0)
    m = hf_llama(L=4).to(torch.bfloat16).cuda().eval()
    model_facts(m, facts)
    hf_cfg_facts(m, facts)
    facts["settings"] = dict(kind="inference", framework="transformers forward", inference_mode=True,
                             dtype="bf16 weights", batch=k, seq_len=T, forwards=steps, backward=False, optimizer=None)

    def fwd(B, rec=False):
        for s in range(steps):
            idx = torch.randint(32000, (B, T), device="cuda")
            with torch.inference_mode():
                logits = m(input_ids=idx).logits
                pred = logits[:, -1].argmax(-1)
            del logits
            if rec:
                steplog(facts, key="batches", batch=s, B=B)
        return pred

    fwd(k, rec=True)
    dump(out, facts)
    write_log(out)
    stop_history()
    ladder(out, facts, dict(model="HF LlamaForCausalLM: 4 layers, hidden 1024, intermediate 2816, 16 heads, "
                                  "4 kv heads, vocab 32000, bf16 weights", seq_len=T, forwards_per_try=steps,
                            recorded_microbatch=k, kind="inference (torch.inference_mode, model(input_ids).logits)"),
           fwd, lambda: None)


SCENARIOS = {
    # ladders and healthy runs: REC_JOBS at a time (no OOM message of theirs is evidence)
    "llama_s1024_16g_b2": dict(fn=s_ladder_llama, group="par", timeout=260),
    "gpt8_s256_8g_b4": dict(fn=s_ladder_gpt8, group="par", timeout=260),
    "resnet50_10g_b16": dict(fn=s_ladder_resnet50, group="par", timeout=260),
    "llama_infer_s1024_4g_b4": dict(fn=s_ladder_llama_infer, group="par", timeout=260),
    "lbfgs_closure": dict(fn=s_lbfgs_closure, group="par"),
    "lightning_healthy": dict(fn=s_lightning_healthy, group="par"),
    "ddp_one_rank": dict(fn=s_ddp_one_rank, group="par"),
    "train_leak": dict(fn=s_train_leak, group="par"),
    "retries_survived": dict(fn=s_retries_survived, group="par"),
    # OOM runs: alone, so that the OOM message's free memory is this process's own story
    "hf_llama_oom": dict(fn=s_hf_llama_oom, group="solo"),
    "hf_llama_oom_b12": dict(fn=lambda o, f: s_hf_llama_oom(o, f, B=12), group="solo",
                             doc=s_hf_llama_oom.__doc__.replace("microbatch B", "microbatch 12")),
    "hf_llama_oom_expandable": dict(fn=s_hf_llama_oom, group="solo", env={"PYTORCH_ALLOC_CONF": "expandable_segments:True"}),
    "hf_trainer_oom": dict(fn=s_hf_trainer_oom, group="solo"),
    "ckpt_on_oom": dict(fn=s_ckpt_on_oom, group="solo"),
    "infer_mode_oom": dict(fn=s_infer_mode_oom, group="solo"),
    "eval_no_grad_missing_oom": dict(fn=s_eval_no_grad_missing_oom, group="solo"),
    "t5_accum_oom": dict(fn=s_t5_accum_oom, group="solo"),
    "t5_accum_oom_l4": dict(fn=lambda o, f: s_t5_accum_oom(o, f, layers=4, cap_gib=4, lens=(256, 1024, 512, 256)),
                            group="solo", doc=s_t5_accum_oom.__doc__),
    "gen_small_oom": dict(fn=s_gen_small_oom, group="solo"),
    "gen_small_oom_b96": dict(fn=lambda o, f: s_gen_small_oom(o, f, batch=96, entries=3000), group="solo",
                              doc=s_gen_small_oom.__doc__),
    "cupy_non_pytorch": dict(fn=s_cupy_non_pytorch, group="solo"),
    "compile_oom": dict(fn=s_compile_oom, group="solo", timeout=300),
}


def one(name, out):
    torch = _torch()
    spec = SCENARIOS[name]
    os.makedirs(out, exist_ok=True)
    facts = dict(scenario=name, env=spec.get("env", {}), torch=torch.__version__, versions=versions(),
                 device=torch.cuda.get_device_name(0),
                 total_memory=torch.cuda.get_device_properties(0).total_memory,
                 script=os.path.abspath(__file__), doc=(spec.get("doc") or spec["fn"].__doc__ or "").strip())
    t0 = time.time()
    try:
        spec["fn"](out, facts)
    finally:
        facts["seconds"] = round(time.time() - t0, 2)
        with open(os.path.join(out, "facts.json"), "w") as f:
            json.dump(facts, f, indent=1, default=str)


def launch(name, root, t_start, deadline):
    spec = SCENARIOS[name]
    rec = dict(name=name, group=spec["group"])
    left = deadline - (time.time() - t_start)
    if left < 20:
        rec["status"] = "skipped (deadline)"
        print(f"{name}: skipped (deadline)", flush=True)
        return rec
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    env.pop("PYTORCH_ALLOC_CONF", None)
    env.update(spec.get("env", {}))
    out = os.path.join(root, name)
    os.makedirs(out, exist_ok=True)
    rec["start"] = round(time.time() - t_start, 1)
    con = os.path.join(out, "console.log")
    with open(con, "w") as f:
        try:
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", name, out], env=env,
                               stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               timeout=min(spec.get("timeout", 180), max(left, 30)))
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    with open(con, errors="replace") as f:
        text = f.read()
    rec["end"] = round(time.time() - t_start, 1)
    rec["rc"] = rc
    rec["status"] = "ok" if rc == 0 else f"FAILED rc={rc}"
    print(f"{name}: {rec['status']} in {rec['end'] - rec['start']:.1f}s (t={rec['end']:.0f}s)", flush=True)
    if rc != 0:
        print(text[-2500:], flush=True)
    return rec


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        return one(sys.argv[2], sys.argv[3])
    if len(sys.argv) > 1 and sys.argv[1] == "--retries-try":
        return retries_try(int(sys.argv[2]))
    root = sys.argv[1]
    names = sys.argv[2:] or list(SCENARIOS)
    for n in names:
        if n not in SCENARIOS:
            sys.exit(f"unknown scenario {n}")
    os.makedirs(root, exist_ok=True)
    jobs = int(os.environ.get("REC_JOBS", "4"))
    deadline = float(os.environ.get("REC_DEADLINE", "1e9"))
    t_start = time.time()
    par = [n for n in names if SCENARIOS[n]["group"] == "par"]
    solo = [n for n in names if SCENARIOS[n]["group"] != "par"]
    recs = []
    with ThreadPoolExecutor(max(1, jobs)) as ex:
        recs += list(ex.map(lambda n: launch(n, root, t_start, deadline), par))
    for n in solo:
        recs.append(launch(n, root, t_start, deadline))
    with open(os.path.join(root, "runs.json"), "w") as f:
        json.dump(dict(jobs=jobs, runs=recs, seconds=round(time.time() - t_start, 1)), f, indent=1)


if __name__ == "__main__":
    main()
