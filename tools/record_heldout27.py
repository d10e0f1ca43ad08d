#!/usr/bin/env python3
"""A twenty-seventh held-out set (python3 record_heldout27.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Structure as set 26 (tools/record_heldout26.py): every corpus run is "solo"
(alone on the GPU); the *_probe scenarios are calibration / verification children started by their parents with
--one; the <run>__<variant> scenarios are the same run with the fix a report proposes (H27_VARIANT), whose
results `--collect OUTDIR` writes into each run's facts.json as fix_probes. The OOM observer dumps at every
out-of-memory failure (the same path each time): the snapshot is the last failure's, the one raised.
facts["settings"] says, beside the run's settings and key byte counts, the right first advice ("right_advice")
and what a report must not say ("report_must_not_say")."""
import gc, json, logging, math, os, random, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log
from record_runs import run_child, train_steps


R.attach_oom = R.attach_oom_every  # run_oom attaches this one
VARIANT = os.environ.get("H27_VARIANT", "")


def peaks():
    torch = R._torch()
    st = torch.cuda.memory_stats()
    return dict(peak_allocated=torch.cuda.max_memory_allocated(), peak_reserved=torch.cuda.max_memory_reserved(),
                num_alloc_retries=st.get("num_alloc_retries"), num_ooms=st.get("num_ooms"))


# ---------------------------------------------------------------- 1. an LLM generate() server, healthy

GS_REQS = 18


def s_hf_generate_server_varlen_healthy(out, facts):
    """A text-generation server loop: HF LlamaForCausalLM from a config (4 layers, hidden 1024, 16/4 heads,
    vocab 32000, ~110 M params) cast to bf16, eval(), every request under torch.inference_mode():
    18 requests (seeded) of 1-16 prompts, left-padded to the request's longest prompt (32-768 tokens, each
    prompt 50-100% of it, attention_mask marks the padding), greedy `generate(max_new_tokens=8..32)` with the
    default DynamicCache (it grows by torch.cat every token); the new tokens go to the CPU, nothing is kept on
    the GPU between requests; no memory cap, PYTORCH_CUDA_ALLOC_CONF unset. The snapshot is dumped after the
    last request: the varying prompt shapes and cache sizes leave cached-but-free blocks; healthy. History keeps 600000
    events (a first recording with 150000 wrapped)."""
    torch = R._torch()
    start_history(max_entries=600000, facts=facts)  # 150000 wrapped in a first recording
    torch.manual_seed(0)
    m = R.hf_llama(L=4).to(torch.bfloat16).cuda().eval()
    model_facts(m, facts)
    R.hf_cfg_facts(m, facts)
    rng = random.Random(0)
    reqs = [(rng.randint(1, 16), rng.randint(32, 768), rng.choice([8, 16, 24, 32])) for _ in range(GS_REQS)]
    facts["requests"] = [dict(batch=b, prompt=p, new_tokens=n) for b, p, n in reqs]
    facts["settings"] = dict(
        kind="inference (LLM generation server)", framework="transformers generate()", weights="bf16",
        inference_mode=True, decoding="greedy, DynamicCache (default)", requests=GS_REQS, batch_range=[1, 16],
        prompt_range=[32, 768], new_tokens=[8, 16, 24, 32], memory_fraction=None, alloc_conf=None,
        right_advice="healthy: nothing urgent; allocated returns to the weights (~0.22 GB) after every request; the "
                     "peak is the largest request's prefill (its logits and cache); the varying shapes leave some "
                     "reserved-but-free cache above the peak allocated, which PyTorch reuses (expandable segments "
                     "is at most an informational remark, never a warning)",
        report_must_not_say="an OOM or OOM advice; warning-level fragmentation / expandable_segments as a fix; a leak "
                            "or growth; no_grad (inference_mode is on, generate() is no_grad); training advice "
                            "(checkpointing, accumulation, optimizer, FSDP); mixed precision (bf16 weights); a "
                            "smaller batch")
    steplog(facts, key="serve", phase="model loaded")
    g = torch.Generator().manual_seed(0)
    results = []
    with torch.inference_mode():
        for i, (b, p, n) in enumerate(reqs):
            ids = torch.zeros(b, p, dtype=torch.long)
            am = torch.zeros(b, p, dtype=torch.long)
            for j in range(b):
                ln = rng.randint(max(8, p // 2), p)
                ids[j, p - ln:] = torch.randint(3, 32000, (ln,), generator=g)
                am[j, p - ln:] = 1
            o = m.generate(input_ids=ids.cuda(), attention_mask=am.cuda(), max_new_tokens=n, do_sample=False,
                           pad_token_id=0)
            results.append(o[:, p:].cpu())
            del o
            steplog(facts, key="serve", request=i, batch=b, prompt=p, new_tokens=n)
    facts["tokens_returned"] = sum(int(r.numel()) for r in results)
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


# ---------------------------------------------------------------- 2. explicit matmul attention, no log kept

EM_B, EM_T, EM_D, EM_H, EM_L, EM_V = 8, 2048, 640, 10, 8, 33


def s_esm_matmul_attn_nolog_oom(out, facts):
    """Masked-language-model pre-training of an ESM-shaped protein encoder written by hand: Embedding(33, 640),
    8 pre-LN blocks (10 heads, MLP 4x, GELU), attention written out as `scores = q @ k.transpose(-2, -1) /
    math.sqrt(64); scores = scores.masked_fill(~pad_mask, float("-inf")); attn = F.dropout(scores.softmax(-1),
    0.1); o = attn @ v` (no F.scaled_dot_product_attention), a 33-way token head, 15% of positions masked,
    bf16 autocast, AdamW, batches of 8 sequences padded to 2048 (each 1500-2048 real residues); 8 GiB allowed.
    Each block keeps 8 x 10 x 2048 x 2048 float32 probabilities (1.34 GB), their dropout mask and the bf16 copy
    for the second matmul: it dies in the first forward. The corpus keeps only the snapshot, memory_summary and
    memory_stats (the user kept no log and no OOM message)."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    cap(8, facts)
    start_history(max_entries=60000, facts=facts)
    torch.manual_seed(0)
    B = int(VARIANT[1:]) if VARIANT.startswith("b") else EM_B
    facts["variant"] = VARIANT or None

    class Attention(nn.Module):
        def __init__(s, d, h):
            super().__init__()
            s.h, s.dh = h, d // h
            s.qkv = nn.Linear(d, 3 * d)
            s.out = nn.Linear(d, d)

        def forward(s, x, keep):
            Bn, T, D = x.shape
            q, k, v = s.qkv(x).view(Bn, T, 3, s.h, s.dh).permute(2, 0, 3, 1, 4)
            if VARIANT == "sdpa":
                o = F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :],
                                                   dropout_p=0.1 if s.training else 0.0)
            else:
                scores = q @ k.transpose(-2, -1) / math.sqrt(s.dh)
                scores = scores.masked_fill(~keep[:, None, None, :], float("-inf"))
                attn = F.dropout(scores.softmax(dim=-1), p=0.1, training=s.training)
                o = attn @ v
            return s.out(o.transpose(1, 2).reshape(Bn, T, D))

    class Layer(nn.Module):
        def __init__(s, d, h):
            super().__init__()
            s.ln1, s.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            s.attn = Attention(d, h)
            s.fc1, s.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(s, x, keep):
            x = x + s.attn(s.ln1(x), keep)
            return x + s.fc2(F.gelu(s.fc1(s.ln2(x))))

    class ProteinMLM(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(EM_V, EM_D, padding_idx=1)
            s.pos = nn.Embedding(EM_T, EM_D)
            s.layers = nn.ModuleList([Layer(EM_D, EM_H) for _ in range(EM_L)])
            s.ln = nn.LayerNorm(EM_D)
            s.head = nn.Linear(EM_D, EM_V)

        def forward(s, tok, keep):
            x = s.emb(tok) + s.pos.weight[None, :tok.shape[1]]
            for layer in s.layers:
                x = layer(x, keep)
            return s.head(s.ln(x))

    m = ProteinMLM().cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=0.01)
    n = B * EM_H * EM_T * EM_T
    facts["settings"] = dict(
        kind="training (protein MLM, hand-written transformer)", framework="plain PyTorch", amp="bf16 autocast",
        optimizer="torch.optim.AdamW", microbatch=B, seq_len=EM_T, width=EM_D, heads=EM_H, layers=EM_L,
        attention="q @ k^T / sqrt(d) -> masked_fill(-inf) -> softmax -> dropout(0.1) -> @ v (no SDPA)",
        grad_checkpointing=False, evidence_kept="snapshot, memory_summary, memory_stats (no train.log, no OOM message)",
        scores_elements_per_layer=n, probs_bytes_fp32_per_layer=n * 4, dropout_mask_bytes_per_layer=n,
        probs_bytes_bf16_copy_per_layer=n * 2,
        right_advice="capacity, the T x T attention tensors of every block (2048 tokens: 1.34 GB of float32 "
                     "probabilities, their dropout mask and a bf16 copy per block, all kept for backward): replace "
                     "the matmul/softmax attention with F.scaled_dot_product_attention (attn_mask=the padding mask, "
                     "dropout_p=0.1: the memory-efficient kernel never materialises the scores); halving the batch "
                     "alone does not fit (measured); checkpointing of the blocks is the other lever",
        report_must_not_say="mixed precision / autocast as new advice (bf16 autocast is on); a leak or growth; "
                            "fragmentation / expandable segments as the fix; FSDP / CPU offload; no_grad; "
                            "optimizer-state advice (no step has run); a claim read from a log (there is none)")
    g = torch.Generator(device="cuda").manual_seed(0)

    def loss_at(s):
        tok = torch.randint(4, EM_V, (B, EM_T), device="cuda", generator=g)
        lens = torch.randint(1500, EM_T + 1, (B,), device="cuda", generator=g)
        keep = torch.arange(EM_T, device="cuda")[None] < lens[:, None]
        tok = tok.masked_fill(~keep, 1)
        sel = (torch.rand(B, EM_T, device="cuda", generator=g) < 0.15) & keep
        labels = tok.masked_fill(~sel, -100)
        inp = tok.masked_fill(sel, 32)
        logits = m(inp, keep)
        return F.cross_entropy(logits.float().view(-1, EM_V), labels.view(-1), ignore_index=-100)
    run_oom(out, facts, lambda: train_steps(facts, opt, loss_at, B=B, T=EM_T))


# ---------------------------------------------------------------- 3. sliding-window + flip TTA segmentation

SW_IMG, SW_TILE, SW_STRIDE, SW_CLASSES = 2048, 512, 256, 21


def s_sliding_window_seg_tta_oom(out, facts):
    """Sliding-window inference of a semantic segmentation model on large images with flip test-time
    augmentation: torchvision deeplabv3_resnet50 (weights=None, 21 classes, output stride 8, ~42 M params fp32),
    eval(), torch.inference_mode(); each 2048 x 2048 image is cut into 512 x 512 tiles with stride 256
    (7 x 7 = 49 tiles), the tiles and their horizontal flips are stacked into ONE batch of 98 and sent through
    the model in one forward, the float32 logits are un-flipped, averaged and pasted into a full-image
    accumulator; 8 GiB allowed. It dies in the backbone of the first image: 98 tiles at stride 8."""
    torch = R._torch()
    import torchvision
    cap(8, facts)
    start_history(max_entries=60000, facts=facts)
    torch.manual_seed(0)
    m = torchvision.models.segmentation.deeplabv3_resnet50(weights=None, weights_backbone=None,
                                                            num_classes=SW_CLASSES, aux_loss=False)
    m = m.cuda().eval()
    model_facts(m, facts)
    chunk = int(VARIANT[5:]) if VARIANT.startswith("chunk") else None
    facts["variant"] = VARIANT or None
    pos = [(y, x) for y in range(0, SW_IMG - SW_TILE + 1, SW_STRIDE) for x in range(0, SW_IMG - SW_TILE + 1, SW_STRIDE)]
    facts["settings"] = dict(
        kind="inference (segmentation, sliding window + flip TTA)", framework="torchvision forward",
        amp=None, weights="fp32", inference_mode=True, image=[3, SW_IMG, SW_IMG], tile=SW_TILE, stride=SW_STRIDE,
        tiles_per_image=len(pos), views_per_tile=2, batch_per_forward=2 * len(pos) if not chunk else chunk,
        output_stride=8, classes=SW_CLASSES, images=2,
        layer4_bytes_fp32_per_tile=2048 * 64 * 64 * 4, logits_bytes_fp32_per_forward=2 * len(pos) * SW_CLASSES *
        SW_TILE * SW_TILE * 4,
        right_advice="capacity of one forward: all 98 tile views go through the backbone at once (inference, "
                     "nothing is kept for a backward); run the tiles in chunks (e.g. 8-16 views per forward, "
                     "accumulating into the full-image logits; measured: fits) or bf16 / channels_last as the "
                     "secondary lever",
        report_must_not_say="training advice (activation checkpointing, gradient accumulation, optimizer, FSDP); "
                            "no_grad (inference_mode is on); a leak or growth; fragmentation / expandable "
                            "segments as the fix")
    g = torch.Generator(device="cuda").manual_seed(0)

    def body():
        with torch.inference_mode():
            for i in range(2):
                img = torch.rand(3, SW_IMG, SW_IMG, device="cuda", generator=g)
                acc = torch.zeros(SW_CLASSES, SW_IMG, SW_IMG, device="cuda")
                cnt = torch.zeros(1, SW_IMG, SW_IMG, device="cuda")
                tiles = torch.stack([img[:, y:y + SW_TILE, x:x + SW_TILE] for y, x in pos])
                views = torch.cat([tiles, tiles.flip(-1)])
                n = len(pos)
                if chunk:
                    logits = torch.cat([m(views[k:k + chunk])["out"] for k in range(0, 2 * n, chunk)])
                else:
                    logits = m(views)["out"]
                logits = (logits[:n] + logits[n:].flip(-1)) / 2
                for k, (y, x) in enumerate(pos):
                    acc[:, y:y + SW_TILE, x:x + SW_TILE] += logits[k]
                    cnt[:, y:y + SW_TILE, x:x + SW_TILE] += 1
                pred = (acc / cnt).argmax(0).to(torch.uint8).cpu()
                del img, acc, cnt, tiles, views, logits
                steplog(facts, key="images", image=i, classes_seen=int(pred.unique().numel()))
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 4. an eval pass while the step's graph is held

EO_V, EO_B, EO_EB, EO_T, EO_STEPS, EO_AT = 32000, 8, 16, 1024, 4, 2


def _evalorder_loop(facts, order, record):
    """The own training loop of eval_before_backward_graph_held_oom: a 6-layer SDPA GPT (record_runs.tiny_gpt,
    width 1024, vocab 32000), bf16 autocast, AdamW, microbatch 8 x 1024; at step EO_AT an evaluation of 4
    batches of 16 x 1024 under torch.no_grad() (model.eval(), loss.item()) runs either between the loss and
    loss.backward() (order "before_backward": the training graph and its saved activations are alive) or after
    the optimizer step ("after_step")."""
    torch = R._torch()
    import torch.nn.functional as F
    torch.manual_seed(0)
    m = R.tiny_gpt(vocab=EO_V, d=1024, h=16, L=6).cuda().train()
    if record:
        model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=3e-4)
    g = torch.Generator(device="cuda").manual_seed(0)
    gv = torch.Generator(device="cuda").manual_seed(1)

    def evaluate():
        m.eval()
        tot = 0.0
        with torch.no_grad(), torch.amp.autocast("cuda", dtype=torch.bfloat16):
            for k in range(4):
                x = torch.randint(EO_V, (EO_EB, EO_T + 1), device="cuda", generator=gv)
                logits = m(x[:, :-1])
                tot += F.cross_entropy(logits.float().view(-1, EO_V), x[:, 1:].reshape(-1)).item()
                if record:
                    steplog(facts, key="eval", batch=k)
        m.train()
        return tot / 4

    def body():
        for s in range(EO_STEPS):
            x = torch.randint(EO_V, (EO_B, EO_T + 1), device="cuda", generator=g)
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                logits = m(x[:, :-1])
                loss = F.cross_entropy(logits.float().view(-1, EO_V), x[:, 1:].reshape(-1))
            val = None
            if order == "before_backward" and s == EO_AT:
                val = evaluate()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if order == "after_step" and s == EO_AT:
                val = evaluate()
            if record:
                steplog(facts, step=s, loss=float(loss), val_loss=val if val is not None else -1.0)
    return body


def s_evalorder_probe(out, facts):
    """Calibration child of eval_before_backward_graph_held_oom (not a corpus run): the loop in the order
    H27_ORDER under the cap H27_CAP_BYTES (0: none), no history; says whether it fits and its peaks."""
    torch = R._torch()
    capb = int(os.environ.get("H27_CAP_BYTES", "0"))
    if capb:
        cap(capb / GiB, facts)
    order = os.environ.get("H27_ORDER", "after_step")
    facts["order"] = order
    try:
        _evalorder_loop(facts, order, False)()
        facts["fits"] = True
    except torch.OutOfMemoryError as e:
        facts["fits"] = False
        facts["oom_message"] = str(e)
    facts.update(peaks())


def s_eval_before_backward_graph_held_oom(out, facts):
    """An own training loop (a 6-layer SDPA GPT, width 1024, vocab 32000, 141 M params fp32, bf16 autocast,
    AdamW, microbatch 8 x 1024) whose periodic validation (4 batches of 16 x 1024 under torch.no_grad(),
    model.eval(), loss.item()) is called right after the training loss is computed and BEFORE loss.backward()
    (so that the log line has both losses): during the validation the training step's autograd graph, its saved
    activations and its float32 logits are all alive. The cap is calibrated in child processes: the same loop
    with the validation after optimizer.step() (the fix) and in the recorded order, uncapped; the cap lies
    between their peaks allocated, and a child verifies the fix fits under it. It dies in the validation of step 2 (after two optimizer steps: AdamW state exists)."""
    torch = R._torch()
    fix = run_child(out, "evalorder_probe", {"H27_ORDER": "after_step"}, timeout=120, tag="_probe_fix")
    bug = run_child(out, "evalorder_probe", {"H27_ORDER": "before_backward"}, timeout=120, tag="_probe_recorded")
    fa, ba = fix.get("peak_allocated") or 7 * GiB, bug.get("peak_allocated") or 10 * GiB
    tries = []
    for frac in (0.6, 0.75, 0.9):  # the first cap between the peaks allocated under which the fix fits
        capb = ((fa + int((ba - fa) * frac)) // (64 * MiB)) * 64 * MiB
        ver = run_child(out, "evalorder_probe", {"H27_ORDER": "after_step", "H27_CAP_BYTES": str(capb)},
                        timeout=120, tag="_probe_verify_%d" % len(tries))
        tries.append(dict(frac=frac, cap=capb, fix_fits=ver.get("fits"), peak_reserved=ver.get("peak_reserved")))
        if ver.get("fits"):
            break
    keys = ("fits", "peak_allocated", "peak_reserved", "num_alloc_retries", "child_rc", "error")
    facts["calibration"] = dict(fix_uncapped={k: fix.get(k) for k in keys},
                                recorded_uncapped={k: bug.get(k) for k in keys},
                                fix_at_cap={k: ver.get(k) for k in keys}, cap_bytes=capb, tries=tries,
                                rule="fix's uncapped peak allocated + 60% (then 75%, 90%) of the gap to the recorded "
                                     "order's peak allocated, rounded down to 64 MiB, the first under which the fix "
                                     "fits (first recordings: the fix's peak RESERVED, 12.7 GB uncapped in both "
                                     "orders, gave a cap that fitted both; +40% of the gap, 8.38 GiB, fitted neither)")
    cap(capb / GiB, facts)
    start_history(max_entries=60000, facts=facts)
    facts["settings"] = dict(
        kind="training with a periodic validation pass", framework="plain PyTorch (own loop)", amp="bf16 autocast",
        optimizer="torch.optim.AdamW", microbatch=EO_B, seq_len=EO_T, vocab=EO_V, eval_batch=EO_EB, eval_batches=4,
        eval_at_step=EO_AT, eval_under="torch.no_grad(), model.eval()",
        eval_position="after the training loss, before loss.backward()",
        train_logits_bytes_fp32=EO_B * EO_T * EO_V * 4, eval_logits_bytes_bf16=EO_EB * EO_T * EO_V * 2,
        cap_bytes=capb, fix_fits_at_cap=ver.get("fits"),
        right_advice="the validation runs while the training step's graph is alive (its saved activations and "
                     "fp32 logits, ~3-4 GB): move the validation after loss.backward()/optimizer.step() (or free "
                     "the step first: backward, then `del loss, logits`); measured: the same loop with the "
                     "validation after the step " + ("FITS" if ver.get("fits") else "does NOT fit") + " under this "
                     "cap. A smaller validation batch is the secondary lever",
        report_must_not_say="no_grad (the validation is under torch.no_grad() already); gradient checkpointing or "
                            "a smaller TRAINING microbatch as the first fix (the training step alone fits); a "
                            "leak; fragmentation / expandable segments; FSDP / offload; mixed precision")
    run_oom(out, facts, _evalorder_loop(facts, "before_backward", True))


# ---------------------------------------------------------------- 5. HF VisionEncoderDecoder captioning, accumulation

VE_B, VE_ACC, VE_IMG, VE_CAP = 48, 4, 384, 48


def s_hf_vit_gpt2_caption_accum_oom(out, facts):
    """Image-captioning fine-tuning with an HF VisionEncoderDecoderModel built from configs: a ViT-B/16 encoder
    at 384 x 384 (12 layers, hidden 768, 577 tokens) and a 6-layer GPT-2 decoder with cross-attention (width 768,
    vocab 50257), ~190 M params fp32; own loop with gradient accumulation of 4 microbatches of 48 images
    (effective batch 192) and 48-token captions, `loss = model(pixel_values, labels=labels).loss / 4`, bf16
    autocast, AdamW; 10 GiB allowed. The per-step microbatch of 48 images is what has to fit: the encoder's
    activations for 48 x 577 tokens through 12 layers; it dies in the first microbatch's forward."""
    torch = R._torch()
    from transformers import ViTConfig, GPT2Config, VisionEncoderDecoderConfig, VisionEncoderDecoderModel
    cap(10, facts)
    start_history(max_entries=60000, facts=facts)
    torch.manual_seed(0)
    enc = ViTConfig(image_size=VE_IMG, patch_size=16, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                    intermediate_size=3072)
    dec = GPT2Config(vocab_size=50257, n_positions=128, n_embd=768, n_layer=6, n_head=12)
    cfg = VisionEncoderDecoderConfig.from_encoder_decoder_configs(enc, dec)
    cfg.decoder_start_token_id = 50256
    cfg.pad_token_id = 50256
    cfg.eos_token_id = 50256
    m = VisionEncoderDecoderModel(config=cfg)
    B, acc = (int(VARIANT[1:]), VE_ACC * VE_B // int(VARIANT[1:])) if VARIANT.startswith("b") else (VE_B, VE_ACC)
    if VARIANT == "gc":  # a first recording with {"use_reentrant": False} died in backward with a SystemError
        m.gradient_checkpointing_enable()
    elif VARIANT == "gcenc":
        m.encoder.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    facts["variant"] = VARIANT or None
    m = m.cuda().train()
    model_facts(m, facts)
    facts["encoder_params"] = sum(p.numel() for p in m.encoder.parameters())
    facts["decoder_params"] = sum(p.numel() for p in m.decoder.parameters())
    facts["attn_implementation"] = dict(encoder=getattr(m.encoder.config, "_attn_implementation", None),
                                        decoder=getattr(m.decoder.config, "_attn_implementation", None))
    opt = torch.optim.AdamW(m.parameters(), lr=5e-5)
    tok = (VE_IMG // 16) ** 2 + 1
    facts["settings"] = dict(
        kind="training (image captioning fine-tune)", framework="transformers VisionEncoderDecoderModel (own loop)",
        encoder="ViT-B/16 @384 (12 x 768, 577 tokens)", decoder="GPT-2, 6 layers x 768, cross-attention",
        amp="bf16 autocast", optimizer="torch.optim.AdamW", microbatch=B, accumulation_steps=acc,
        effective_batch=B * acc, caption_tokens=VE_CAP, grad_checkpointing=VARIANT if VARIANT.startswith("gc") else False,
        encoder_hidden_bytes_bf16_per_layer=B * tok * 768 * 2, encoder_mlp_bytes_bf16_per_layer=B * tok * 3072 * 2,
        right_advice="capacity, activations of one microbatch (48 images x 577 tokens through the 12 encoder "
                     "layers; no optimizer step has run, weights ~0.76 GB): a smaller per-step microbatch with more "
                     "accumulation steps (the effective batch stays 192) and/or "
                     "model.gradient_checkpointing_enable() (both measured: fix_probes)",
        report_must_not_say="gradient accumulation as new advice without saying it is on (it is: 4 steps) / "
                            "mixed precision (autocast is on); optimizer-state advice / FSDP / offload (no state yet); "
                            "a leak or growth; fragmentation / expandable segments; no_grad")
    g = torch.Generator(device="cuda").manual_seed(0)

    def body():
        for step in range(2):
            for k in range(acc):
                px = torch.randn(B, 3, VE_IMG, VE_IMG, device="cuda", generator=g)
                lab = torch.randint(50256, (B, VE_CAP), device="cuda", generator=g)
                with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                    loss = m(pixel_values=px, labels=lab).loss / acc
                loss.backward()
                steplog(facts, key="microbatches", step=step, micro=k, loss=float(loss))
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=step)
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 6. Lightning's BatchSizeFinder, healthy after its OOMs

BF_V, BF_T, BF_STEPS = 32000, 512, 8


def s_lightning_batch_size_finder_healthy(out, facts):
    """Lightning Trainer(precision="bf16-mixed", max_steps=8) with the BatchSizeFinder callback (mode="power",
    init_val=4, steps_per_trial=2): a LightningModule around a 6-layer SDPA GPT (record_runs.tiny_gpt, width 768,
    vocab 32000, ~92 M params), AdamW, sequences of 512 tokens, train_dataloader() built from self.batch_size;
    6 GiB allowed. The finder doubles the batch (2 steps each) until a trial raises CUDA out of memory, which
    it catches (garbage_collection_cuda: gc + empty_cache), restores the weights and trains at the last batch
    that fit. The snapshot is dumped by a Callback after the last of the 8 real steps: the run is healthy, its
    memory_stats count the finder's OOM(s)."""
    torch = R._torch()
    import torch.nn.functional as F
    import lightning as L
    from lightning.pytorch.callbacks import BatchSizeFinder, Callback
    from torch.utils.data import DataLoader, TensorDataset
    cap(6, facts)
    start_history(max_entries=60000, facts=facts)
    torch.manual_seed(0)

    class H(logging.Handler):
        def emit(s, rec):
            R.log(f"{rec.levelname} {rec.name}: {rec.getMessage()}")
    for name in ("lightning.pytorch", "lightning.fabric"):
        lg = logging.getLogger(name)
        lg.setLevel(logging.INFO)
        lg.addHandler(H())
    ds = TensorDataset(torch.randint(BF_V, (4096, BF_T + 1), generator=torch.Generator().manual_seed(0)))

    class LM(L.LightningModule):
        def __init__(s):
            super().__init__()
            s.batch_size = 4
            s.net = R.tiny_gpt(vocab=BF_V, d=768, h=12, L=6)

        def training_step(s, batch, i):
            x = batch[0]
            logits = s.net(x[:, :-1])
            return F.cross_entropy(logits.float().reshape(-1, BF_V), x[:, 1:].reshape(-1))

        def configure_optimizers(s):
            return torch.optim.AdamW(s.parameters(), lr=3e-4)

        def train_dataloader(s):
            return DataLoader(ds, batch_size=s.batch_size, shuffle=True, drop_last=True)

    class Watch(Callback):
        def __init__(s):
            s.fitting = False
            s.done = False

        def on_fit_start(s, trainer, pl_module):
            s.fitting = True  # after the tuner's on_fit_start (tuner callbacks run first)
            steplog(facts, key="phases", phase="batch size chosen", batch_size=pl_module.batch_size)

        def on_train_batch_end(s, trainer, pl_module, outputs, batch, batch_idx):
            steplog(facts, key="steps" if s.fitting else "finder_steps", step=trainer.global_step,
                    batch_size=int(batch[0].shape[0]), loss=float(outputs["loss"]))
            if s.fitting and not s.done and trainer.global_step >= BF_STEPS:
                s.done = True
                facts["batch_size_used"] = pl_module.batch_size
                facts["oom"] = False
                dump(out, facts)

    model = LM()
    model_facts(model, facts)
    finder = BatchSizeFinder(mode="power", init_val=4, steps_per_trial=2, max_trials=10)
    watch = Watch()
    facts["settings"] = dict(
        kind="training", framework="lightning Trainer", precision="bf16-mixed", optimizer="torch.optim.AdamW",
        seq_len=BF_T, vocab=BF_V, max_steps=BF_STEPS,
        batch_size_finder=dict(mode="power", init_val=4, steps_per_trial=2, max_trials=10),
        right_advice="healthy: the OOM(s) in memory_stats (num_ooms) are the BatchSizeFinder's trials, caught by "
                     "Lightning; the run then trains at the largest power-of-two batch that fit, near the cap (that "
                     "is the finder's purpose); nothing urgent; at most a note that headroom is small / the trace "
                     "holds failed trials",
        report_must_not_say="an OOM cause as if the run crashed; a leak or growth (the batch grew because the "
                            "finder doubled it); fragmentation as the fix; FSDP / offload; no_grad; mixed precision "
                            "(bf16-mixed is on)")
    trainer = L.Trainer(accelerator="gpu", devices=1, precision="bf16-mixed", max_steps=BF_STEPS,
                        callbacks=[finder, watch], logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir="/tmp/h27_bsf",
                        num_sanity_val_steps=0)
    trainer.fit(model)
    facts["finder_optimal_batch_size"] = getattr(finder, "optimal_batch_size", None)
    st = torch.cuda.memory_stats()
    facts["num_ooms_at_end"] = st.get("num_ooms")
    if not watch.done:
        facts["oom"] = False
        dump(out, facts)
    write_log(out)


# ---------------------------------------------------------------- 7. variable-length training, fragmentation

VF_STEPS, VF_V = 16, 32000
VF_FACTORS = [1.02, 1.04, 1.06, 1.08, 1.12, 1.17]


def _varlen_shapes():
    rng = random.Random(0)
    out = []
    while len(out) < VF_STEPS:
        b, t = rng.randint(2, 16), rng.choice(range(256, 2049, 128))
        if b * t <= 16384:
            out.append((b, t))
    return out


def _varlen_train(facts, record):
    """A 4-layer SDPA GPT (tiny_gpt width 1024, vocab 32000, ~116 M params), bf16 autocast, AdamW, VF_STEPS steps
    whose (batch, length) come from _varlen_shapes() (batch 2-16 x length 256-2048, at most 16384 tokens)."""
    torch = R._torch()
    import torch.nn.functional as F
    torch.manual_seed(0)
    m = R.tiny_gpt(vocab=VF_V, d=1024, h=16, L=4).cuda().train()
    if record:
        model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=3e-4)
    g = torch.Generator(device="cuda").manual_seed(0)
    shapes = _varlen_shapes()

    def loss_at(s):
        b, t = shapes[s]
        x = torch.randint(VF_V, (b, t + 1), device="cuda", generator=g)
        logits = m(x[:, :-1])
        return F.cross_entropy(logits.float().view(-1, VF_V), x[:, 1:].reshape(-1))
    f = facts if record else {}
    return lambda: train_steps(f, opt, loss_at, steps=VF_STEPS, phases=record)


def s_varlen_sweep_probe(out, facts):
    """Calibration child of varlen_train_fragmentation_oom (not a corpus run): the same training, no history, the
    allocator settings the parent gave; first uncapped, then under each cap of H27_VF_FACTORS x the uncapped peak
    allocated (or the caps H27_VF_CAPS), a fresh model, optimizer and an emptied cache for each try."""
    torch = R._torch()
    facts["alloc_conf"] = os.environ.get("PYTORCH_CUDA_ALLOC_CONF")
    total = torch.cuda.get_device_properties(0).total_memory

    def attempt(capb):
        torch.cuda.set_per_process_memory_fraction(min(1.0, capb / total) if capb else 1.0)
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.reset_accumulated_memory_stats()
        rec = dict(cap=capb)
        try:
            _varlen_train(facts, False)()
            rec["fits"] = True
        except torch.OutOfMemoryError as e:
            rec["fits"] = False
            rec["msg"] = str(e).split("\n")[0][:400]
        gc.collect()
        torch.cuda.synchronize()
        rec.update(peaks())
        torch.cuda.empty_cache()
        return rec
    rows = []
    caps = os.environ.get("H27_VF_CAPS")
    if caps:
        rows = [attempt(int(c)) for c in json.loads(caps)]
    else:
        base = attempt(0)
        rows.append(base)
        for f in json.loads(os.environ.get("H27_VF_FACTORS", json.dumps(VF_FACTORS))):
            r = attempt((int(base["peak_allocated"] * f) // (2 * MiB)) * 2 * MiB)
            r["factor"] = f
            rows.append(r)
    facts["sweep"] = rows


def s_varlen_train_fragmentation_oom(out, facts):
    """Variable-length language-model training: a 4-layer SDPA GPT (width 1024, vocab 32000, ~116 M params fp32),
    bf16 autocast, AdamW, 16 steps whose (batch, length) are drawn (seeded) from 2-16 x 256-2048 with at most
    16384 tokens a batch (the logits and their float32 copy for the loss change size every step: 16-1000 MiB
    blocks). The cap is calibrated in child processes: the uncapped native run's peak allocated times VF_FACTORS,
    each tried natively and with expandable_segments:True; the run uses the largest cap at which the native
    allocator OOMs and the expandable one fits; a last child re-runs that cap with expandable_segments:True."""
    torch = R._torch()
    nat = run_child(out, "varlen_sweep_probe", {}, timeout=200, tag="_probe_native")
    rows_n = nat.get("sweep") or []
    caps = [r["cap"] for r in rows_n if r.get("cap")]
    exp = run_child(out, "varlen_sweep_probe", {"H27_VF_CAPS": json.dumps(caps),
                                                "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
                    timeout=200, tag="_probe_expandable")
    rows_e = {r["cap"]: r for r in (exp.get("sweep") or [])}
    cal = []
    for r in rows_n:
        if not r.get("cap"):
            continue
        e = rows_e.get(r["cap"], {})
        cal.append(dict(factor=r.get("factor"), cap=r["cap"], native_fits=r.get("fits"), expandable_fits=e.get("fits"),
                        native_peak_reserved=r.get("peak_reserved"), expandable_peak_reserved=e.get("peak_reserved"),
                        native_retries=r.get("num_alloc_retries"), native_msg=r.get("msg")))
    facts["calibration"] = dict(uncapped_native=rows_n[0] if rows_n else None, rows=cal,
                                native_rc=nat.get("child_rc"), expandable_rc=exp.get("child_rc"))
    # the sweep's native tries share one process (an uncapped try first), which lays memory out worse than a
    # fresh process does (a first recording: the sweep OOMed at 1.12 x, the fresh run fitted): the native side
    # is decided by fresh children, one cap each, from the largest cap that expandable fits downwards
    fresh = []
    pick = None
    for c in sorted([c for c in cal if c["expandable_fits"] is True], key=lambda c: -c["cap"])[:5]:
        ch = run_child(out, "varlen_sweep_probe", {"H27_VF_CAPS": json.dumps([c["cap"]])}, timeout=90,
                       tag="_probe_native_fresh_%d" % len(fresh))
        r = (ch.get("sweep") or [{}])[0]
        fresh.append(dict(factor=c["factor"], cap=c["cap"], fits=r.get("fits"), peak_reserved=r.get("peak_reserved"),
                          retries=r.get("num_alloc_retries"), msg=r.get("msg")))
        if r.get("fits") is False:
            pick = c
            break
    facts["calibration"]["native_fresh"] = fresh
    if pick:
        rule = "largest cap that the expandable sweep fits and a fresh native process does not"
    else:
        pick = min(cal, key=lambda c: c["cap"]) if cal else dict(cap=4 * GiB)
        rule = "no cap separated them: the smallest tried"
    capb = int(pick["cap"])
    facts["cap_rule"] = rule
    facts["cap_factor"] = pick.get("factor")
    ver = run_child(out, "varlen_sweep_probe", {"H27_VF_CAPS": json.dumps([capb]),
                                                "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
                    timeout=120, tag="_probe_verify")
    vr = (ver.get("sweep") or [{}])[0]
    facts["expandable_verify"] = vr
    ok = vr.get("fits")
    cap(capb / GiB, facts)
    start_history(max_entries=60000, facts=facts)
    up = facts["calibration"]["uncapped_native"] or {}
    facts["shapes"] = _varlen_shapes()
    facts["settings"] = dict(
        kind="training (variable-length LM)", framework="plain PyTorch", amp="bf16 autocast",
        optimizer="torch.optim.AdamW", steps=VF_STEPS, batch_range=[2, 16], seq_range=[256, 2048],
        max_tokens=16384, vocab=VF_V, alloc_conf=None, cap_bytes=capb, cap_factor_of_uncapped_peak_allocated=
        pick.get("factor"), uncapped_peak_allocated=up.get("peak_allocated"),
        uncapped_peak_reserved=up.get("peak_reserved"), expandable_segments_fits_at_this_cap=ok,
        right_advice=("fragmentation: the step's live tensors fit the cap, but the logits and activations change "
                      "size every step, so the cached segments are cut into pieces that do not serve the next "
                      "large block; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (a re-run at the same cap with "
                      "it FIT), or bucketing the lengths / padding to a few fixed shapes")
        if ok else
        ("expandable_segments:True did NOT fit at this cap either: mixed evidence, fragmentation plus tight "
         "capacity"),
        report_must_not_say="a leak or growth (memory is bounded by the largest batch); a smaller batch or "
                            "checkpointing as the FIRST fix" + ("" if ok else " (expandable did not fit: acceptable)")
                            + "; no_grad; FSDP / offload; mixed precision (autocast is on)")
    run_oom(out, facts, _varlen_train(facts, True))


# ---------------------------------------------------------------- 8. CuPy's memory pool keeps what the preprocessing freed

CP_B, CP_LEAVE, CP_CAP = 240, 8 * GiB, 12


def s_cupy_pool_cached_outside_oom(out, facts):
    """One process: the user's CuPy stage computes per-channel statistics of a dataset loaded onto the GPU at
    once (one float32 CuPy array of all but 8 GiB of the device's free memory, filled, reduced, then `del`'d);
    CuPy's default memory pool keeps the freed block cached (pool.used_bytes() 0, pool.total_bytes() ~130 GB),
    invisible to PyTorch. Then torchvision resnet50 trains (bf16 autocast, SGD momentum 0.9, 240 images of
    224 x 224) under torch.cuda.set_per_process_memory_fraction(12 GiB): the training alone needs ~10.5 GiB
    (near its allowed 12 GiB, it would fit), but the device has only ~8 GiB free: it dies in the first step.
    Probes: the same with cupy.get_default_memory_pool().free_all_blocks() after the stage (__free_pool) and
    with the pool kept and half the batch (__b120)."""
    torch = R._torch()
    import cupy as cp
    import torchvision
    import torch.nn.functional as F
    start_history(max_entries=60000, facts=facts)  # before the first CUDA tensor: the trace starts empty
    torch.empty(1, device="cuda")
    cap(CP_CAP, facts)
    B = int(VARIANT[1:]) if VARIANT.startswith("b") else CP_B
    facts["variant"] = VARIANT or None
    free0, total = cp.cuda.runtime.memGetInfo()
    n = (free0 - CP_LEAVE) // 4
    a = cp.empty(int(n), dtype=cp.float32)
    a.fill(0.5)
    mean = float(a.mean())
    del a
    pool = cp.get_default_memory_pool()
    if VARIANT == "free_pool":
        pool.free_all_blocks()
    facts["cupy"] = dict(version=cp.__version__, array_bytes=int(n) * 4, mean=mean, pool_used_bytes=pool.used_bytes(),
                         pool_total_bytes=pool.total_bytes(), free_before=free0)
    free1, _ = torch.cuda.mem_get_info()
    facts["mem_get_info_after_cupy"] = dict(free=free1, total=total)
    R.log(f"cupy stats pass done (mean {mean:.3f}); cupy pool holds {pool.total_bytes() / GiB:.2f} GiB "
          f"({pool.used_bytes() / GiB:.2f} GiB used); GPU free {free1 / GiB:.2f} GiB")
    torch.manual_seed(0)
    m = torchvision.models.resnet50().cuda().train()
    model_facts(m, facts)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    facts["settings"] = dict(
        kind="training (vision) after a CuPy preprocessing stage in the same process",
        framework="torchvision + CuPy (default memory pool)", amp="bf16 autocast",
        optimizer="torch.optim.SGD(momentum=0.9)", microbatch=B, image=[3, 224, 224], memory_fraction_gib=CP_CAP,
        cupy_pool_total_bytes=pool.total_bytes(), cupy_pool_used_bytes=pool.used_bytes(), free_after_cupy=free1,
        right_advice="memory outside PyTorch's allocator in this process: CuPy's default memory pool still caches "
                     "the ~130 GB the statistics pass freed (pool.used_bytes() is 0); call "
                     "cupy.get_default_memory_pool().free_all_blocks() after the CuPy stage (or pool.set_limit, or "
                     "route CuPy through PyTorch's allocator); measured: with free_all_blocks the same batch fits "
                     "under the 12 GiB cap (fix_probes). Halving the batch also fits beside the pool but leaves "
                     "the ~130 GB wasted: not the first fix",
        report_must_not_say="other processes as the cause (this process holds it); fragmentation / expandable "
                            "segments; a leak; a smaller batch, checkpointing or accumulation FIRST; mixed precision "
                            "(autocast is on); FSDP")

    def loss_at(s):
        x = torch.randn(B, 3, 224, 224, device="cuda")
        y = torch.randint(1000, (B,), device="cuda")
        return F.cross_entropy(m(x), y)
    run_oom(out, facts, lambda: train_steps(facts, opt, loss_at, B=B))


# ---------------------------------------------------------------- collecting the fix probes

def collect(root):
    """Write each corpus run's <run>__<variant> results into its facts.json as fix_probes."""
    R.collect_fix_probes(root, CORPUS_RUNS, "tools/record_heldout27.py", counts=("steps", "images"), cap_bytes=False, retries=False,
                         note_what="the variant or allocator setting named")


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "hf_generate_server_varlen_healthy": dict(fn=s_hf_generate_server_varlen_healthy, group="solo", timeout=150),
    "esm_matmul_attn_nolog_oom": dict(fn=s_esm_matmul_attn_nolog_oom, group="solo", timeout=90),
    "sliding_window_seg_tta_oom": dict(fn=s_sliding_window_seg_tta_oom, group="solo", timeout=90),
    "eval_before_backward_graph_held_oom": dict(fn=s_eval_before_backward_graph_held_oom, group="solo", timeout=300),
    "evalorder_probe": dict(fn=s_evalorder_probe, group="solo", timeout=120),
    "hf_vit_gpt2_caption_accum_oom": dict(fn=s_hf_vit_gpt2_caption_accum_oom, group="solo", timeout=120),
    "lightning_batch_size_finder_healthy": dict(fn=s_lightning_batch_size_finder_healthy, group="solo", timeout=200),
    "varlen_train_fragmentation_oom": dict(fn=s_varlen_train_fragmentation_oom, group="solo", timeout=450),
    "varlen_sweep_probe": dict(fn=s_varlen_sweep_probe, group="solo", timeout=200),
    "cupy_pool_cached_outside_oom": dict(fn=s_cupy_pool_cached_outside_oom, group="solo", timeout=120),
})
for _n, _v in [("esm_matmul_attn_nolog_oom", "sdpa"), ("esm_matmul_attn_nolog_oom", "b4"),
               ("sliding_window_seg_tta_oom", "chunk16"),
               ("hf_vit_gpt2_caption_accum_oom", "gc"), ("hf_vit_gpt2_caption_accum_oom", "gcenc"),
               ("hf_vit_gpt2_caption_accum_oom", "b12"),
               ("cupy_pool_cached_outside_oom", "free_pool"), ("cupy_pool_cached_outside_oom", "b120")]:
    R.SCENARIOS[_n + "__" + _v] = dict(R.SCENARIOS[_n], env={"H27_VARIANT": _v})
CORPUS_RUNS = ["hf_generate_server_varlen_healthy", "esm_matmul_attn_nolog_oom", "sliding_window_seg_tta_oom",
               "eval_before_backward_graph_held_oom", "hf_vit_gpt2_caption_accum_oom",
               "lightning_batch_size_finder_healthy", "varlen_train_fragmentation_oom",
               "cupy_pool_cached_outside_oom"]
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--collect":
        collect(sys.argv[2])
        sys.exit(0)
    if len(sys.argv) == 2 and sys.argv[1] != "--one":
        sys.argv += CORPUS_RUNS + [n for n in R.SCENARIOS if "__" in n]
    R.main()
