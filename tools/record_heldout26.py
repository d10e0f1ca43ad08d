#!/usr/bin/env python3
"""A twenty-sixth held-out set (python3 record_heldout26.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Recorded beside record_runs.py as build/h26/record_heldout26.py.
Structure as set 25 (tools/record_heldout25.py): every corpus run is "solo" (alone on the GPU); the *_probe
scenarios are calibration / verification children, not corpus runs (their parents start them with --one). The
OOM observer dumps at every out-of-memory failure (the same path each time): the snapshot is the last failure's,
the one raised. facts["settings"] says, beside the run's settings and key byte counts, the right first advice
("right_advice") and what a report must not say ("report_must_not_say")."""
import contextlib, gc, json, os, random, subprocess, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log, mem
from record_runs import run_child, train_steps


R.attach_oom = R.attach_oom_every  # run_oom attaches this one
VARIANT = os.environ.get("H26_VARIANT", "")  # the *__fix probes: the same run with the fix a report proposes


# ---------------------------------------------------------------- 1. a GPT-NeoX loaded in bf16, full fine-tune

NX_B, NX_T, NX_V = 8, 2048, 50304


def s_gptneox_bf16_loaded_ft_oom(out, facts):
    """Full fine-tuning of a Pythia-410M-shaped GPTNeoXForCausalLM (24 layers, hidden 1024, 16 heads,
    intermediate 4096, rotary_pct 0.25, vocab 50304, untied head, ~405 M params) LOADED IN BF16 the way a user
    loads a checkpoint: a random-init model is save_pretrained() to /tmp first (the stand-in for a downloaded
    checkpoint), then `AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).cuda()`; no autocast
    (the weights are bf16 already), AdamW (its state will be bf16 too), `loss = model(input_ids, labels).loss`,
    microbatch 8 x 2048, use_cache left at its default; 9 GiB allowed. It dies in the first forward: the 24
    layers' saved activations at 16384 tokens (plus the 50304-way logits) do not fit beside 0.81 GB of bf16
    weights."""
    torch = R._torch()
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM, AutoModelForCausalLM
    path = "/tmp/h26_pythia410m_like"
    if not os.path.exists(os.path.join(path, "config.json")):
        torch.manual_seed(0)
        kw = dict(vocab_size=NX_V, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                  intermediate_size=4096, max_position_embeddings=2048, tie_word_embeddings=False,
                  use_parallel_residual=True)
        try:
            cfg = GPTNeoXConfig(rotary_pct=0.25, **kw)
        except TypeError:
            cfg = GPTNeoXConfig(**kw)
        GPTNeoXForCausalLM(cfg).to(torch.bfloat16).save_pretrained(path)
    cap(9, facts)
    start_history(max_entries=60000, facts=facts)
    try:
        m = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16)
        how = "from_pretrained(path, dtype=torch.bfloat16)"
    except TypeError:
        m = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.bfloat16)
        how = "from_pretrained(path, torch_dtype=torch.bfloat16)"
    m = m.cuda().train()
    if VARIANT == "gc":
        m.config.use_cache = False
        m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        facts["variant"] = "gradient_checkpointing_enable(use_reentrant=False), use_cache=False"
    model_facts(m, facts)
    R.hf_cfg_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-5, weight_decay=0.0)
    pb = facts["model_param_bytes"]
    facts["settings"] = dict(
        kind="training (full fine-tuning)", framework="transformers (own loop)", amp=None,
        weights="bf16 (loaded with " + how + ")", optimizer="torch.optim.AdamW (bf16 state, as the params)",
        microbatch=NX_B, seq_len=NX_T, vocab=NX_V, grad_checkpointing=False,
        use_cache=getattr(m.config, "use_cache", None),
        attn_implementation=getattr(m.config, "_attn_implementation", None),
        param_bytes_bf16=pb, logits_bytes_bf16=NX_B * NX_T * NX_V * 2, logits_bytes_fp32=NX_B * NX_T * NX_V * 4,
        residual_stream_bytes_bf16_per_layer=NX_B * NX_T * 1024 * 2,
        right_advice="capacity, activations of the first forward (the weights, gradients and AdamW state of a "
                     "bf16 405 M model are ~2.4 GB at most; no optimizer step has run yet): "
                     "model.gradient_checkpointing_enable() (with use_cache=False) and/or a smaller microbatch "
                     "with gradient accumulation; the 50304-way logits are a large transient at the end",
        report_must_not_say="bf16 / autocast / mixed precision / lower-precision weights as new advice (the model "
                            "was loaded in bf16: there is nothing left to halve); a leak or growth; fragmentation "
                            "/ expandable segments as the fix; optimizer-state advice first (no state exists yet); "
                            "FSDP / CPU offload; no_grad")

    def body():
        g = torch.Generator(device="cuda").manual_seed(0)

        def loss_at(s):
            idx = torch.randint(NX_V, (NX_B, NX_T), device="cuda", generator=g)
            return m(input_ids=idx, labels=idx).loss
        train_steps(facts, opt, loss_at, amp=False, B=NX_B, T=NX_T)
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 2. hand-written einsum attention, high-res ViT

EV_B, EV_IMG, EV_P, EV_D, EV_H, EV_L = 4, 512, 8, 384, 6, 6


def s_einsum_attn_vit_highres_oom(out, facts):
    """A hand-written ViT encoder for dense high-resolution inputs (the style of research code that predates
    SDPA): 512 x 512 images cut into 8 x 8 patches (4096 tokens, no class token), width 384, 6 heads, 6 blocks,
    MLP 4x, pre-LN; attention written out with einsum: `s = torch.einsum("bhqd,bhkd->bhqk", q, k) * scale;
    a = s.softmax(-1); o = torch.einsum("bhqk,bhkd->bhqd", a, v)` (no F.scaled_dot_product_attention); a
    per-token regression head (MSE against random targets, masked-autoencoder style), bf16 autocast, AdamW,
    batch 4; 8 GiB allowed. Each block's attention scores are 4 x 6 x 4096 x 4096 (403 M elements: 805 MB bf16,
    and the softmax runs in float32 under autocast: 1.61 GB), and autograd keeps them."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    cap(8, facts)
    start_history(max_entries=60000, facts=facts)
    torch.manual_seed(0)
    T = (EV_IMG // EV_P) ** 2

    class Attention(nn.Module):
        def __init__(s, d, h):
            super().__init__()
            s.h, s.scale = h, (d // h) ** -0.5
            s.qkv = nn.Linear(d, 3 * d)
            s.proj = nn.Linear(d, d)

        def forward(s, x):
            B, N, D = x.shape
            q, k, v = s.qkv(x).reshape(B, N, 3, s.h, D // s.h).permute(2, 0, 3, 1, 4)
            if VARIANT == "sdpa":
                o = F.scaled_dot_product_attention(q, k, v)
                return s.proj(o.transpose(1, 2).reshape(B, N, D))
            scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * s.scale
            attn = scores.softmax(dim=-1)
            o = torch.einsum("bhqk,bhkd->bhqd", attn, v)
            return s.proj(o.transpose(1, 2).reshape(B, N, D))

    class Block(nn.Module):
        def __init__(s, d, h):
            super().__init__()
            s.n1, s.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
            s.attn = Attention(d, h)
            s.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(s, x):
            x = x + s.attn(s.n1(x))
            return x + s.mlp(s.n2(x))

    class DenseViT(nn.Module):
        def __init__(s):
            super().__init__()
            s.patch = nn.Conv2d(3, EV_D, EV_P, EV_P)
            s.pos = nn.Parameter(torch.randn(1, T, EV_D) * 0.02)
            s.blocks = nn.ModuleList([Block(EV_D, EV_H) for _ in range(EV_L)])
            s.norm = nn.LayerNorm(EV_D)
            s.head = nn.Linear(EV_D, EV_P * EV_P * 3)

        def forward(s, x):
            x = s.patch(x).flatten(2).transpose(1, 2) + s.pos
            for b in s.blocks:
                x = b(x)
            return s.head(s.norm(x))

    m = DenseViT().cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    n = EV_B * EV_H * T * T
    facts["settings"] = dict(
        kind="training (vision, dense prediction)", framework="plain PyTorch (hand-written ViT)",
        amp="bf16 autocast", optimizer="torch.optim.AdamW", microbatch=EV_B, image=[3, EV_IMG, EV_IMG],
        patch=EV_P, tokens=T, width=EV_D, heads=EV_H, layers=EV_L, grad_checkpointing=False,
        attention="einsum q.k^T -> softmax -> einsum with v (no SDPA)",
        scores_elements_per_layer=n, scores_bytes_bf16_per_layer=n * 2, softmax_bytes_fp32_per_layer=n * 4,
        right_advice="capacity, the T x T attention tensors (4096 tokens: 0.8 GB of bf16 scores and 1.6 GB of "
                     "float32 softmax per block, all kept for backward): replace the einsum attention with "
                     "F.scaled_dot_product_attention (flash / memory-efficient kernels never materialise the "
                     "scores); otherwise fewer tokens (larger patches / smaller crops), a smaller batch, or "
                     "checkpointing of the blocks",
        report_must_not_say="mixed precision / autocast as new advice (bf16 autocast is on); a leak or growth; "
                            "fragmentation / expandable segments as the fix; FSDP / CPU offload; no_grad; "
                            "optimizer-state advice (no step has run)")

    def loss_at(s):
        x = torch.randn(EV_B, 3, EV_IMG, EV_IMG, device="cuda")
        y = torch.randn(EV_B, T, EV_P * EV_P * 3, device="cuda")
        return F.mse_loss(m(x).float(), y)
    run_oom(out, facts, lambda: train_steps(facts, opt, loss_at))


# ---------------------------------------------------------------- 3. torchmetrics AUROC keeps every pixel on the GPU

TM_B, TM_IMG = 8, 384


def s_torchmetrics_auroc_state_oom(out, facts):
    """Binary segmentation training (a small hand-written UNet: 32-64-128-256 channels, BatchNorm + ReLU, 0.97 M
    params fp32), bf16 autocast, AdamW, batches of 8 random 512 x 512 images and masks; the training metric is
    a torchmetrics `BinaryAUROC()` (thresholds=None: exact AUROC, so it keeps every prediction and target it
    is given, in list states on the metric's device) updated every step with the per-pixel probabilities
    (`probs.flatten()`, float32) and the int64 mask, to be computed at the epoch's end (an epoch of 400 steps);
    batches of 8 images of 384 x 384. Every step adds the 1.18 M pixels' predictions and targets (14.2 MB) to the
    metric's state, on the GPU: it grows until the memory is full; 3 GiB allowed. The warning torchmetrics
    prints when the metric is made is in train.log, as a user's log would have it."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    import torchmetrics
    from torchmetrics.classification import BinaryAUROC
    cap(3, facts)
    start_history(max_entries=60000, facts=facts)
    torch.manual_seed(0)

    def cbr(i, o):
        return nn.Sequential(nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU(inplace=True))

    class UNet(nn.Module):
        def __init__(s, c=(32, 64, 128, 256)):
            super().__init__()
            s.d = nn.ModuleList()
            i = 3
            for o in c:
                s.d.append(cbr(i, o))
                i = o
            s.u = nn.ModuleList([cbr(c[k + 1] + c[k], c[k]) for k in reversed(range(len(c) - 1))])
            s.out = nn.Conv2d(c[0], 1, 1)

        def forward(s, x):
            skips = []
            for k, blk in enumerate(s.d):
                x = blk(x)
                if k < len(s.d) - 1:
                    skips.append(x)
                    x = F.max_pool2d(x, 2)
            for blk in s.u:
                x = F.interpolate(x, scale_factor=2, mode="nearest")
                x = blk(torch.cat([x, skips.pop()], 1))
            return s.out(x)

    m = UNet().cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    import warnings
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        auroc = BinaryAUROC(thresholds=200 if VARIANT == "binned" else None).to("cuda")
    if VARIANT == "binned":
        facts["variant"] = "BinaryAUROC(thresholds=200)"
    for w in ws:
        R.log(f"{w.filename}:{w.lineno}: {w.category.__name__}: {w.message}")
    facts["metric_warnings"] = [str(w.message) for w in ws]
    px = TM_B * TM_IMG * TM_IMG

    def state_bytes():
        n = 0
        for name in ("preds", "target"):
            v = getattr(auroc, name, None)
            if isinstance(v, list):
                n += sum(t.numel() * t.element_size() for t in v if torch.is_tensor(t))
            elif torch.is_tensor(v):
                n += v.numel() * v.element_size()
        return n

    facts["settings"] = dict(
        kind="training (segmentation) with a running training metric", framework="plain PyTorch + torchmetrics",
        torchmetrics=torchmetrics.__version__, metric="torchmetrics.classification.BinaryAUROC() (thresholds=None)",
        metric_device="cuda", amp="bf16 autocast", optimizer="torch.optim.AdamW", microbatch=TM_B,
        image=[3, TM_IMG, TM_IMG], pixels_per_step=px, epoch_steps=400,
        metric_state_growth_per_step_bytes_expected=px * (4 + 8),
        right_advice="the metric's state grows every step (BinaryAUROC with thresholds=None keeps every pixel's "
                     "prediction and int64 target on the GPU, ~25 MB a step, until compute() at the epoch's end): "
                     "use a binned metric (BinaryAUROC(thresholds=200): constant memory), keep the state on the "
                     "CPU (compute_on_cpu=True / metric on cpu), subsample pixels, or compute and reset it per "
                     "batch; the model's step itself fits",
        report_must_not_say="a smaller batch, gradient checkpointing or accumulation as the fix (the step fits; "
                            "the metric grows); fragmentation / expandable segments as the fix; mixed precision "
                            "(autocast is on); FSDP / offload; no_grad")
    g = torch.Generator(device="cuda").manual_seed(0)

    def body():
        for s in range(int(os.environ.get("H26_STEPS", "400"))):
            x = torch.randn(TM_B, 3, TM_IMG, TM_IMG, device="cuda", generator=g)
            y = (torch.rand(TM_B, 1, TM_IMG, TM_IMG, device="cuda", generator=g) < 0.3).long()
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                logits = m(x)
            loss = F.binary_cross_entropy_with_logits(logits.float(), y.float())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            auroc.update(logits.detach().float().sigmoid().flatten(), y.flatten())
            steplog(facts, step=s, loss=float(loss), metric_state_bytes=state_bytes())
        facts["epoch_auroc"] = float(auroc.compute())
    try:
        run_oom(out, facts, body)
    finally:
        facts["metric_state_bytes_at_end"] = state_bytes()


# ---------------------------------------------------------------- 4. JAX in the same process preallocates 75%

JX_B, JX_T = 32, 2048


def _jax_prep(facts):
    """The user's JAX preprocessing helper (a jitted per-row standardisation of feature vectors); returns the
    JAX device's memory_stats."""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def standardise(x):
        return (x - x.mean(axis=1, keepdims=True)) / (x.std(axis=1, keepdims=True) + 1e-6)
    import numpy as np
    x = jnp.asarray(np.random.default_rng(0).standard_normal((4096, 1024), dtype=np.float32))
    standardise(x).block_until_ready()
    dev = jax.devices()[0]
    st = {}
    try:
        st = {k: int(v) for k, v in (dev.memory_stats() or {}).items()}
    except Exception as e:  # noqa: BLE001
        st = dict(error=repr(e))
    facts["jax"] = dict(version=jax.__version__, device=str(dev), platform=dev.platform, memory_stats=st,
                        XLA_PYTHON_CLIENT_PREALLOCATE=os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"),
                        XLA_PYTHON_CLIENT_MEM_FRACTION=os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION"))
    return dev.platform


def _jax_train(facts, steps, record):
    torch = R._torch()
    torch.manual_seed(0)
    m = R.hf_llama(L=8).cuda().train()
    if record:
        model_facts(m, facts)
        R.hf_cfg_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    g = torch.Generator(device="cuda").manual_seed(0)

    def loss_at(s):
        idx = torch.randint(32000, (JX_B, JX_T), device="cuda", generator=g)
        return m(input_ids=idx, labels=idx).loss
    return lambda: train_steps(facts, opt, loss_at, steps=steps, phases=record, B=JX_B, T=JX_T)


def s_jax_prealloc_probe(out, facts):
    """Verification child of jax_prealloc_outside_oom (not a corpus run): the same JAX helper with
    XLA_PYTHON_CLIENT_PREALLOCATE=false (set by the parent), then the same torch training, 2 steps, no history;
    says whether it fits and its peaks."""
    torch = R._torch()
    torch.empty(1, device="cuda")
    facts["platform"] = _jax_prep(facts)
    body = _jax_train(facts, 2, False)
    try:
        body()
        facts["fits"] = True
    except torch.OutOfMemoryError as e:
        facts["fits"] = False
        facts["oom_message"] = str(e)
    facts["peak_allocated"] = torch.cuda.max_memory_allocated()
    facts["peak_reserved"] = torch.cuda.max_memory_reserved()
    free, total = torch.cuda.mem_get_info()
    facts["mem_get_info_end"] = dict(free=free, total=total)


def s_jax_prealloc_outside_oom(out, facts):
    """One process uses JAX and PyTorch: a jitted JAX helper standardises a 4096 x 1024 feature matrix (the
    user's preprocessing code) with JAX's defaults, so XLA's client PREALLOCATES 75% of the GPU's memory at its
    first use (XLA_PYTHON_CLIENT_PREALLOCATE unset); then an HF Llama from a config (8 layers, hidden 1024,
    16/4 heads, vocab 32000, 155.7 M params fp32) trains with bf16 autocast and AdamW at 32 x 2048 tokens,
    no memory cap: PyTorch gets only the quarter JAX left. A child process first runs the same thing with
    XLA_PYTHON_CLIENT_PREALLOCATE=false (2 steps) to say whether the fix fits."""
    torch = R._torch()
    for k in ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR"):
        os.environ.pop(k, None)
    pr = run_child(out, "jax_prealloc_probe", {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}, timeout=150)
    facts["probe_no_prealloc"] = {k: pr.get(k) for k in ("fits", "peak_allocated", "peak_reserved", "jax",
                                                           "oom_message", "child_rc", "error", "steps")}
    start_history(max_entries=60000, facts=facts)
    torch.empty(1, device="cuda")
    try:
        plat = _jax_prep(facts)
    except Exception as e:  # noqa: BLE001
        facts["jax_error"] = repr(e)
        plat = None
    free, total = torch.cuda.mem_get_info()
    facts["mem_get_info_after_jax"] = dict(free=free, total=total)
    R.log(f"jax preprocessing done on {plat}: GPU free {free / GiB:.2f} of {total / GiB:.2f} GiB")
    pp = facts["probe_no_prealloc"]
    facts["settings"] = dict(
        kind="training", framework="transformers model, own loop; JAX (jax.jit) preprocessing in the same process",
        amp="bf16 autocast", optimizer="torch.optim.AdamW", microbatch=JX_B, seq_len=JX_T, memory_fraction=None,
        jax_platform=plat, xla_preallocate="default (true: 75% of the device at the first JAX GPU use)",
        free_after_jax=free, fits_with_xla_preallocate_false=pp.get("fits"),
        probe_peak_reserved_without_prealloc=pp.get("peak_reserved"),
        right_advice="memory outside PyTorch's allocator in this process: JAX's XLA client preallocated 75% of the "
                     "GPU at its first use, leaving PyTorch ~a quarter; set XLA_PYTHON_CLIENT_PREALLOCATE=false "
                     "(or XLA_PYTHON_CLIENT_MEM_FRACTION small / XLA_PYTHON_CLIENT_ALLOCATOR=platform) before "
                     "importing JAX, or do the preprocessing on the CPU / in torch"
                     + (" (a probe with XLA_PYTHON_CLIENT_PREALLOCATE=false ran 2 steps and fit)" if pp.get("fits")
                        else ""),
        report_must_not_say="other processes as the cause (this process holds it); a smaller batch, checkpointing "
                            "or accumulation as the first fix; fragmentation / expandable segments; a leak; "
                            "mixed precision (autocast is on); FSDP")
    if plat is None:
        facts["settings"]["note"] = "JAX failed: no outside memory; the run is a plain capacity run"
    run_oom(out, facts, _jax_train(facts, 3, True))


# ---------------------------------------------------------------- 5. torch.compile'd resnet18, too large a batch

CR_B = 1024


def s_compile_resnet18_bigbatch_oom(out, facts):
    """ImageNet-style training of torchvision resnet18 (11.7 M params fp32, BatchNorm) with `torch.compile(model)`
    (inductor, default mode: no CUDA graphs), channels_last, bf16 autocast, SGD momentum 0.9 nesterov,
    label-smoothed cross-entropy, batches of 1024 random 224 x 224 images; 5 GiB allowed. The compiled forward
    (compiled at the first call, forward and backward graphs together) keeps its saved activations for 1024
    images: it dies in the first step."""
    torch = R._torch()
    import torchvision
    import torch.nn.functional as F
    cap(5, facts)
    start_history(max_entries=60000, facts=facts)
    torch.manual_seed(0)
    m = torchvision.models.resnet18(num_classes=1000).cuda().to(memory_format=torch.channels_last).train()
    model_facts(m, facts)
    cm = torch.compile(m)
    B = int(VARIANT[1:]) if VARIANT.startswith("b") else CR_B
    facts["variant"] = VARIANT or None
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-5)
    facts["settings"] = dict(
        kind="training (vision)", framework="plain PyTorch + torchvision + torch.compile (inductor, default mode)",
        compile="torch.compile(model) default mode", amp="bf16 autocast", memory_format="channels_last",
        optimizer="torch.optim.SGD(momentum=0.9, nesterov=True)", microbatch=CR_B, image=[3, 224, 224],
        input_bytes=CR_B * 3 * 224 * 224 * 4, grad_checkpointing=False,
        right_advice="capacity, activations of the compiled graph (they scale with the batch of 1024 images; the "
                     "weights, gradients and momentum are ~0.14 GB): a smaller batch (e.g. 256-512) with gradient "
                     "accumulation to keep the effective batch (or a scaled learning rate); activation "
                     "checkpointing is the other lever",
        report_must_not_say="fragmentation / expandable segments as the fix; a leak or growth; mixed precision "
                            "(autocast is on); optimizer-state advice / FSDP / offload (state is tiny); no_grad")

    def loss_at(s):
        x = torch.randn(B, 3, 224, 224, device="cuda").contiguous(memory_format=torch.channels_last)
        y = torch.randint(1000, (B,), device="cuda")
        return F.cross_entropy(cm(x), y, label_smoothing=0.1)
    run_oom(out, facts, lambda: train_steps(facts, opt, loss_at))


# ---------------------------------------------------------------- 6. PEFT LoRA on a long-document BERT classifier

PL_B, PL_T = 8, 4096


def s_peft_lora_bert_longdoc_oom(out, facts):
    """Long-document classification with PEFT LoRA: an HF BertForSequenceClassification from a config (12 layers,
    hidden 768, 12 heads, intermediate 3072, max_position_embeddings 4096, 4 labels, sdpa; ~112 M params) cast
    to bf16 and FROZEN, `get_peft_model(LoraConfig(task_type="SEQ_CLS", r=8, lora_alpha=16, lora_dropout=0.05,
    target_modules=["query", "value"]))` (adapters and the classifier head trainable, ~0.3 M + head), bf16
    autocast, AdamW over the trainable parameters only, batches of 8 documents x 4096 tokens (padding mask:
    each document 3000-4096 real tokens); 6 GiB allowed. Backpropagating into the adapters of every layer needs
    every layer's activations although the base is frozen: it dies in the first forward."""
    torch = R._torch()
    from transformers import BertConfig, BertForSequenceClassification
    import peft
    from peft import LoraConfig, get_peft_model
    cap(6, facts)
    start_history(max_entries=60000, facts=facts)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                     intermediate_size=3072, max_position_embeddings=PL_T, num_labels=4)
    try:
        base = BertForSequenceClassification(cfg, attn_implementation="sdpa")
    except TypeError:
        base = BertForSequenceClassification(cfg)
    base = base.to(torch.bfloat16)
    if VARIANT == "gc":
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        facts["variant"] = "base.gradient_checkpointing_enable(use_reentrant=False)"
    m = get_peft_model(base, LoraConfig(task_type="SEQ_CLS", r=8, lora_alpha=16, lora_dropout=0.05,
                                        target_modules=["query", "value"]))
    m = m.cuda().train()
    model_facts(m, facts)
    R.hf_cfg_facts(base, facts)
    trainable = [p for p in m.parameters() if p.requires_grad]
    facts["trainable_params"] = sum(p.numel() for p in trainable)
    facts["trainable_param_bytes"] = sum(p.numel() * p.element_size() for p in trainable)
    facts["trainable_dtypes"] = sorted({str(p.dtype) for p in trainable})
    opt = torch.optim.AdamW(trainable, lr=2e-4)
    facts["settings"] = dict(
        kind="training (PEFT LoRA, frozen bf16 base)", framework="transformers + peft (own loop)",
        peft=peft.__version__, lora=dict(r=8, alpha=16, dropout=0.05, target_modules=["query", "value"]),
        amp="bf16 autocast", weights="bf16 frozen base", optimizer="torch.optim.AdamW over the trainable params",
        microbatch=PL_B, seq_len=PL_T, grad_checkpointing=False,
        attn_implementation=getattr(base.config, "_attn_implementation", None),
        trainable_params=facts["trainable_params"], frozen_param_bytes=facts["model_param_bytes"],
        hidden_bytes_bf16_per_layer=PL_B * PL_T * 768 * 2, intermediate_bytes_bf16_per_layer=PL_B * PL_T * 3072 * 2,
        right_advice="capacity, activations (32768 tokens a batch through 12 layers; the base is frozen but every "
                     "layer's activations are kept to reach the adapters): gradient checkpointing "
                     "(model.gradient_checkpointing_enable() + enable_input_require_grads()) and/or a smaller "
                     "batch with gradient accumulation (or shorter chunks of the documents)",
        report_must_not_say="optimizer-state advice (8-bit optimizer, optimizer offload; the trainable state is "
                            "~0.3 M params); FSDP / CPU offload of the weights as the fix; mixed precision (autocast "
                            "is on, the base is bf16); a leak or growth; fragmentation / expandable segments; "
                            "no_grad")
    g = torch.Generator().manual_seed(0)

    def loss_at(s):
        ids = torch.randint(1000, 30000, (PL_B, PL_T), generator=g)
        lens = torch.randint(3000, PL_T + 1, (PL_B,), generator=g)
        am = (torch.arange(PL_T)[None] < lens[:, None]).long()
        ids = ids * am
        lab = torch.randint(4, (PL_B,), generator=g)
        return m(input_ids=ids.cuda(), attention_mask=am.cuda(), labels=lab.cuda()).loss
    run_oom(out, facts, lambda: train_steps(facts, opt, loss_at))


# ---------------------------------------------------------------- 7. vision inference server, healthy

def s_convnext_infer_server_healthy(out, facts):
    """An image-classification server loop: torchvision convnext_small (50.2 M params) cast to bf16,
    channels_last, eval(), every request under torch.inference_mode(): 40 requests (seeded) of 1-48 images at
    a resolution drawn from 192, 224, 256, 288, 320, 384; the top-5 classes and probabilities
    (softmax in float32) go to the CPU; nothing is kept on the GPU between requests; no memory cap,
    PYTORCH_CUDA_ALLOC_CONF unset, cudnn.benchmark off. The snapshot is dumped after the last request;
    healthy."""
    torch = R._torch()
    import torchvision
    start_history(max_entries=60000, facts=facts)
    torch.manual_seed(0)
    m = torchvision.models.convnext_small(num_classes=1000).to(torch.bfloat16).cuda()
    m = m.to(memory_format=torch.channels_last).eval()
    model_facts(m, facts)
    rng = random.Random(0)
    sizes = [192, 224, 256, 288, 320, 384]
    reqs = [(rng.randint(1, 48), rng.choice(sizes)) for _ in range(40)]
    big = max(reqs, key=lambda r: r[0] * r[1] * r[1])
    facts["requests"] = [dict(batch=b, size=s) for b, s in reqs]
    facts["settings"] = dict(
        kind="inference (image classification server)", framework="torchvision forward", amp=None, weights="bf16",
        memory_format="channels_last", inference_mode=True, requests=40, batch_range=[1, 48], sizes=sizes,
        memory_fraction=None, alloc_conf=None, cudnn_benchmark=False,
        largest_request=dict(batch=big[0], size=big[1]),
        right_advice="healthy: nothing urgent; allocated returns to the weights after every request; the peak is "
                     "the largest request's forward; the varying shapes leave some cache above the peak allocated "
                     "(expandable segments is at most a secondary remark)",
        report_must_not_say="an OOM or OOM advice; a leak or growth; no_grad (inference_mode is on); training "
                            "advice (checkpointing, accumulation, optimizer, FSDP); mixed precision (bf16 weights)")
    steplog(facts, key="serve", phase="model loaded")
    g = torch.Generator().manual_seed(0)
    outs = []
    with torch.inference_mode():
        for i, (b, s) in enumerate(reqs):
            x = torch.rand(b, 3, s, s, generator=g).to(torch.bfloat16)
            x = x.cuda(non_blocking=False).contiguous(memory_format=torch.channels_last)
            logits = m(x)
            p, c = logits.float().softmax(-1).topk(5, dim=-1)
            outs.append((p.cpu(), c.cpu()))
            del logits, p, c, x
            steplog(facts, key="serve", request=i, batch=b, size=s)
    facts["results_returned"] = sum(o[0].shape[0] for o in outs)
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


# ---------------------------------------------------------------- 8. a naive continuous-batching KV server

KV_L, KV_H, KV_D, KV_HID = 16, 8, 128, 1024
KV_SLOTS, KV_REQS, KV_CHUNK = 24, 240, 4
KV_TOKEN_BYTES = 2 * KV_L * KV_H * KV_D * 2


class KVEngine:
    """A hand-written continuous-batching decode engine: one CONTIGUOUS bf16 KV buffer per request,
    (2, layers, kv_heads, prompt + max_new_tokens, head_dim), allocated when the request is admitted to a free
    slot and freed when it finishes; a prefill projection of the prompt (prompt x 64 KiB) copied in; every
    engine step each running request appends KV_CHUNK tokens."""

    def __init__(self, torch, seed=0):
        self.torch = torch
        self.rng = random.Random(seed)
        g = torch.Generator(device="cuda").manual_seed(seed)
        self.w = (torch.randn(KV_HID, KV_TOKEN_BYTES // 2, device="cuda", generator=g) * 0.02).to(torch.bfloat16)
        self.slots = {}
        self.admitted = self.finished = self.steps = 0
        self.live_kv = 0

    def draw(self):
        return self.rng.randint(64, 2048), self.rng.randint(32, 1024)

    def admit(self, p, new):
        torch = self.torch
        n = p + new
        kv = torch.empty(2, KV_L, KV_H, n, KV_D, dtype=torch.bfloat16, device="cuda")
        h = torch.randn(p, KV_HID, device="cuda", dtype=torch.bfloat16)
        pre = (h @ self.w).view(p, 2, KV_L, KV_H, KV_D).permute(1, 2, 3, 0, 4)
        kv[:, :, :, :p].copy_(pre)
        del pre, h
        self.slots[self.admitted] = dict(kv=kv, pos=p, end=n)
        self.admitted += 1
        self.live_kv += kv.numel() * 2

    def step(self):
        torch = self.torch
        ids = list(self.slots)
        h = torch.randn(len(ids) * KV_CHUNK, KV_HID, device="cuda", dtype=torch.bfloat16)
        new = (h @ self.w).view(len(ids), KV_CHUNK, 2, KV_L, KV_H, KV_D)
        for j, r in enumerate(ids):
            s = self.slots[r]
            k = min(KV_CHUNK, s["end"] - s["pos"])
            s["kv"][:, :, :, s["pos"]:s["pos"] + k].copy_(new[j, :k].permute(1, 2, 3, 0, 4))
            s["pos"] += k
            if s["pos"] >= s["end"]:
                self.live_kv -= s["kv"].numel() * 2
                del self.slots[r]
                self.finished += 1
        del new, h
        self.steps += 1

    def serve(self, total, on_step=None):
        while self.finished < total:
            while len(self.slots) < KV_SLOTS and self.admitted < total:
                self.admit(*self.draw())
            self.step()
            if on_step:
                on_step(self)


def s_kvfrag_sweep_probe(out, facts):
    """Calibration child of naive_kv_server_fragmentation_oom (not a corpus run): the same engine, no history,
    the allocator settings the parent gave; first uncapped (peaks), then under each cap of H26_KV_FACTORS x the
    uncapped peak allocated (or H26_KV_CAPS bytes), fresh engine and empty cache between tries; which caps fit."""
    torch = R._torch()
    facts["alloc_conf"] = os.environ.get("PYTORCH_CUDA_ALLOC_CONF")
    total_mem = torch.cuda.get_device_properties(0).total_memory

    def attempt(cap_bytes):
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap_bytes / total_mem) if cap_bytes else 1.0)
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        e = KVEngine(torch)
        rec = dict(cap=cap_bytes)
        try:
            e.serve(KV_REQS)
            rec["fits"] = True
        except torch.OutOfMemoryError as ex:
            rec["fits"] = False
            rec["msg"] = str(ex).split("\n")[0][:300]
            rec["at_request"] = e.admitted
            rec["finished"] = e.finished
        torch.cuda.synchronize()
        st = torch.cuda.memory_stats()
        rec.update(peak_allocated=torch.cuda.max_memory_allocated(), peak_reserved=torch.cuda.max_memory_reserved(),
                   retries=st.get("num_alloc_retries"), steps=e.steps)
        del e
        gc.collect()
        torch.cuda.empty_cache()
        return rec
    caps = os.environ.get("H26_KV_CAPS")
    rows = []
    if caps:
        for c in json.loads(caps):
            rows.append(attempt(int(c)))
    else:
        base = attempt(0)
        rows.append(base)
        for f in json.loads(os.environ.get("H26_KV_FACTORS", "[1.1, 1.2, 1.3]")):
            c = (int(base["peak_allocated"] * f) // (2 * MiB)) * 2 * MiB
            r = attempt(c)
            r["factor"] = f
            rows.append(r)
    facts["sweep"] = rows


KV_FACTORS = [1.06, 1.12, 1.18, 1.25, 1.33, 1.42, 1.55, 1.7]


def s_naive_kv_server_fragmentation_oom(out, facts):
    """A hand-written continuous-batching LLM decode server (KVEngine): 24 slots; each admitted request gets
    ONE contiguous bf16 KV buffer of (prompt + max_new_tokens) x 64 KiB (16 layers x 8 kv heads x 128 x K and V;
    prompts 64-2048 tokens, 32-1024 new tokens, seeded: buffers of 6-192 MiB), a prefill projection of the
    prompt (a transient of prompt x 64 KiB) copied in, KV_CHUNK=4 tokens appended per engine step, and the
    buffer freed when the request ends; requests end in an order unrelated to their size, and the next request
    is admitted into the freed slot: 240 requests. Buffers of different sizes and lifetimes share the
    allocator's segments (a new buffer is split from a freed one's block). The cap is calibrated in child
    processes: the uncapped native run's peak allocated times the factors KV_FACTORS, each tried natively and
    with expandable_segments:True; the run uses the largest factor at which the native allocator OOMs and the
    expandable one fits (facts: calibration). A last child re-runs the chosen cap with
    expandable_segments:True to verify."""
    torch = R._torch()
    fac = json.dumps(KV_FACTORS)
    nat = run_child(out, "kvfrag_sweep_probe", {"H26_KV_FACTORS": fac}, timeout=200, tag="_probe_native")
    rows_n = nat.get("sweep") or []
    caps = [r["cap"] for r in rows_n if r.get("cap")]
    exp = run_child(out, "kvfrag_sweep_probe", {"H26_KV_CAPS": json.dumps(caps),
                                                "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
                    timeout=200, tag="_probe_expandable")
    rows_e = {r["cap"]: r for r in (exp.get("sweep") or [])}
    cal = []
    for r in rows_n:
        if not r.get("cap"):
            continue
        e = rows_e.get(r["cap"], {})
        cal.append(dict(factor=r.get("factor"), cap=r["cap"], native_fits=r.get("fits"),
                        expandable_fits=e.get("fits"), native_peak_reserved=r.get("peak_reserved"),
                        expandable_peak_reserved=e.get("peak_reserved"), native_at_request=r.get("at_request"),
                        native_retries=r.get("retries")))
    facts["calibration"] = dict(uncapped_native=rows_n[0] if rows_n else None, rows=cal,
                                native_rc=nat.get("child_rc"), expandable_rc=exp.get("child_rc"))
    good = [c for c in cal if c["native_fits"] is False and c["expandable_fits"] is True]
    if good:
        pick = max(good, key=lambda c: c["cap"])
        rule = "largest factor at which native OOMs and expandable_segments fits"
    else:
        nat_oom = [c for c in cal if c["native_fits"] is False]
        pick = max(nat_oom, key=lambda c: c["cap"]) if nat_oom else (cal[0] if cal else dict(cap=3 * GiB,
                                                                                                factor=None))
        rule = "no factor separated them: largest native OOM (or the first)"
    capb = int(pick["cap"])
    facts["cap_rule"] = rule
    facts["cap_factor"] = pick.get("factor")
    ver = run_child(out, "kvfrag_sweep_probe", {"H26_KV_CAPS": json.dumps([capb]),
                                                "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
                    timeout=120, tag="_probe_verify")
    vr = (ver.get("sweep") or [{}])[0]
    facts["expandable_verify"] = vr
    exp_fits = vr.get("fits")
    cap(capb / GiB, facts)
    start_history(max_entries=60000, facts=facts)
    torch.manual_seed(0)
    e = KVEngine(torch)
    up = facts["calibration"]["uncapped_native"] or {}
    facts["settings"] = dict(
        kind="inference (LLM decode server, hand-written engine)", framework="plain PyTorch",
        kv_layout="one contiguous bf16 buffer per request: (2, 16 layers, 8 kv heads, prompt+max_new, 128)",
        kv_token_bytes=KV_TOKEN_BYTES, slots=KV_SLOTS, requests=KV_REQS, prompt_range=[64, 2048],
        new_tokens_range=[32, 1024], chunk_tokens=KV_CHUNK, weights_bytes=KV_HID * KV_TOKEN_BYTES,
        alloc_conf=None, cap_bytes=capb, cap_factor_of_uncapped_peak_allocated=pick.get("factor"),
        uncapped_peak_allocated=up.get("peak_allocated"), uncapped_peak_reserved=up.get("peak_reserved"),
        expandable_segments_fits_at_this_cap=exp_fits,
        right_advice=("fragmentation: the live KV buffers and the request stay well under the cap, but buffers of "
                      "different sizes and lifetimes share segments, so the freed space is in pieces too small "
                      "for the next buffer; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (a re-run at the same "
                      "cap with it " + ("FIT" if exp_fits else "did NOT fit") + "), or a paged / block KV cache "
                      "(fixed-size blocks from one preallocated pool) instead of one contiguous buffer per request")
        if exp_fits else
        ("the same run with expandable_segments:True did NOT fit at this cap: the evidence is mixed; fragmentation "
         "plus tight capacity (a paged KV pool or fewer concurrent slots)"),
        report_must_not_say="a leak or growth (requests finish and free their buffers; memory is bounded by the 24 "
                            "slots); training advice (checkpointing, accumulation, optimizer, FSDP); no_grad as the "
                            "fix; a smaller batch as the FIRST fix"
                            + ("" if exp_fits else " (expandable did not fit: a smaller batch is acceptable)"))

    def on_step(eng):
        if eng.steps % 20 == 0:
            steplog(facts, key="engine", step=eng.steps, running=len(eng.slots), admitted=eng.admitted,
                    finished=eng.finished, live_kv_bytes=eng.live_kv)

    try:
        run_oom(out, facts, lambda: e.serve(KV_REQS, on_step))
    finally:
        facts["engine_at_end"] = dict(admitted=e.admitted, finished=e.finished, running=len(e.slots),
                                      live_kv_bytes=e.live_kv, steps=e.steps)


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "gptneox_bf16_loaded_ft_oom": dict(fn=s_gptneox_bf16_loaded_ft_oom, group="solo", timeout=150),
    "einsum_attn_vit_highres_oom": dict(fn=s_einsum_attn_vit_highres_oom, group="solo", timeout=90),
    "peft_lora_bert_longdoc_oom": dict(fn=s_peft_lora_bert_longdoc_oom, group="solo", timeout=120),
    "convnext_infer_server_healthy": dict(fn=s_convnext_infer_server_healthy, group="solo", timeout=120),
    "torchmetrics_auroc_state_oom": dict(fn=s_torchmetrics_auroc_state_oom, group="solo", timeout=120),
    "jax_prealloc_outside_oom": dict(fn=s_jax_prealloc_outside_oom, group="solo", timeout=240),
    "jax_prealloc_probe": dict(fn=s_jax_prealloc_probe, group="solo", timeout=150),
    "naive_kv_server_fragmentation_oom": dict(fn=s_naive_kv_server_fragmentation_oom, group="solo", timeout=420),
    "kvfrag_sweep_probe": dict(fn=s_kvfrag_sweep_probe, group="solo", timeout=200),
    "compile_resnet18_bigbatch_oom": dict(fn=s_compile_resnet18_bigbatch_oom, group="solo", timeout=300),
})
EXP = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
for _n, _env in [("einsum_attn_vit_highres_oom", EXP), ("einsum_attn_vit_highres_oom", {"H26_VARIANT": "sdpa"}),
                 ("gptneox_bf16_loaded_ft_oom", {"H26_VARIANT": "gc"}),
                 ("peft_lora_bert_longdoc_oom", {"H26_VARIANT": "gc"}),
                 ("compile_resnet18_bigbatch_oom", {"H26_VARIANT": "b512"}),
                 ("compile_resnet18_bigbatch_oom", {"H26_VARIANT": "b256"}),
                 ("torchmetrics_auroc_state_oom", {"H26_VARIANT": "binned", "H26_STEPS": "160"}),
                 ("torchmetrics_auroc_state_oom", EXP)]:
    _tag = _env.get("H26_VARIANT") or "expandable"
    R.SCENARIOS[_n + "__" + _tag] = dict(R.SCENARIOS[_n], env=_env)
CORPUS_RUNS = ["gptneox_bf16_loaded_ft_oom", "einsum_attn_vit_highres_oom", "peft_lora_bert_longdoc_oom",
               "convnext_infer_server_healthy", "torchmetrics_auroc_state_oom", "jax_prealloc_outside_oom",
               "naive_kv_server_fragmentation_oom", "compile_resnet18_bigbatch_oom"]
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] != "--one":
        sys.argv += CORPUS_RUNS
    R.main()
