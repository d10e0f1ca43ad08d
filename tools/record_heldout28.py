#!/usr/bin/env python3
"""A twenty-eighth held-out set (python3 record_heldout28.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Structure as set 27 (tools/record_heldout27.py): every corpus run is "solo"
(alone on the GPU); the *_probe scenarios are calibration children started by their parents with --one; the
<run>__<variant> scenarios are the same run with the fix a report proposes (H28_VARIANT), whose results
`--collect OUTDIR` writes into each run's facts.json as fix_probes. The OOM observer dumps at every
out-of-memory failure (the same path each time): the snapshot is the last failure's, the one raised.
facts["settings"] says, beside the run's settings and key byte counts, the right first advice ("right_advice")
and what a report must not say ("report_must_not_say")."""
import gc, json, math, os, random, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log
from record_runs import run_child, train_steps


R.attach_oom = R.attach_oom_every  # run_oom attaches this one
VARIANT = os.environ.get("H28_VARIANT", "")


def peaks():
    torch = R._torch()
    st = torch.cuda.memory_stats()
    return dict(peak_allocated=torch.cuda.max_memory_allocated(), peak_reserved=torch.cuda.max_memory_reserved(),
                num_alloc_retries=st.get("num_alloc_retries"), num_ooms=st.get("num_ooms"))


# ---------------------------------------------------------------- 1. fp32 audio transformer, matmul attention, no log

AS_B, AS_T, AS_D, AS_H, AS_L, AS_F, AS_C, AS_CAP = 8, 1536, 768, 12, 6, 256, 527, 10


def s_ast_fp32_matmul_attn_nolog_oom(out, facts):
    """Audio tagging with a hand-written audio-spectrogram transformer in float32, no autocast: the spectrogram
    is cut into 1536 patches of 256 values (given as a float32 tensor), Linear(256, 768) + learned positions,
    6 pre-LN blocks (12 heads, MLP 4x, GELU) whose attention is written out as `scores = (q @ k.transpose(-2,
    -1)) * 64 ** -0.5; attn = F.dropout(scores.softmax(-1), 0.1); o = attn @ v` (no
    F.scaled_dot_product_attention), mean pooling, a 527-way multi-label head, BCEWithLogitsLoss, AdamW, batches
    of 8 clips; 10 GiB allowed. Each block keeps 8 x 12 x 1536 x 1536 float32 probabilities (906 MB), their
    dropout mask and the dropout output: it dies in the first forward. The corpus keeps only the snapshot,
    memory_summary and memory_stats (no log, no OOM message). Probes: the same with F.scaled_dot_product_attention
    (__sdpa), with half the batch (__b4), with bf16 autocast added and the attention unchanged (__amp)."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    cap(AS_CAP, facts)
    start_history(max_entries=60000, facts=facts)
    torch.manual_seed(0)
    B = int(VARIANT[1:]) if VARIANT.startswith("b") else AS_B
    amp = VARIANT == "amp"
    facts["variant"] = VARIANT or None

    class Attention(nn.Module):
        def __init__(s, d, h):
            super().__init__()
            s.h, s.dh = h, d // h
            s.qkv = nn.Linear(d, 3 * d)
            s.proj = nn.Linear(d, d)

        def forward(s, x):
            Bn, T, D = x.shape
            q, k, v = s.qkv(x).view(Bn, T, 3, s.h, s.dh).permute(2, 0, 3, 1, 4)
            if VARIANT == "sdpa":
                o = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1 if s.training else 0.0)
            else:
                scores = (q @ k.transpose(-2, -1)) * s.dh ** -0.5
                attn = F.dropout(scores.softmax(dim=-1), p=0.1, training=s.training)
                o = attn @ v
            return s.proj(o.transpose(1, 2).reshape(Bn, T, D))

    class Block(nn.Module):
        def __init__(s, d, h):
            super().__init__()
            s.n1, s.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
            s.attn = Attention(d, h)
            s.fc1, s.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(s, x):
            x = x + s.attn(s.n1(x))
            return x + s.fc2(F.gelu(s.fc1(s.n2(x))))

    class AudioTransformer(nn.Module):
        def __init__(s):
            super().__init__()
            s.patch = nn.Linear(AS_F, AS_D)
            s.pos = nn.Parameter(torch.zeros(1, AS_T, AS_D))
            s.blocks = nn.ModuleList([Block(AS_D, AS_H) for _ in range(AS_L)])
            s.norm = nn.LayerNorm(AS_D)
            s.head = nn.Linear(AS_D, AS_C)

        def forward(s, x):
            x = s.patch(x) + s.pos
            for b in s.blocks:
                x = b(x)
            return s.head(s.norm(x).mean(1))

    m = AudioTransformer().cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=0.05)
    n = B * AS_H * AS_T * AS_T
    facts["settings"] = dict(
        kind="training (audio tagging, hand-written transformer)", framework="plain PyTorch", amp=None,
        weights="fp32", optimizer="torch.optim.AdamW", microbatch=B, seq_len=AS_T, width=AS_D, heads=AS_H,
        layers=AS_L, attention="(q @ k^T) * d^-0.5 -> softmax -> dropout(0.1) -> @ v (no SDPA), float32",
        grad_checkpointing=False, evidence_kept="snapshot, memory_summary, memory_stats (no train.log, no OOM message)",
        scores_elements_per_layer=n, probs_bytes_fp32_per_layer=n * 4, dropout_mask_bytes_per_layer=n,
        dropout_out_bytes_fp32_per_layer=n * 4,
        right_advice="capacity, the T x T attention tensors of every block (1536 patches: 906 MB of float32 "
                     "probabilities, their dropout mask and the 906 MB dropout output per block, kept for "
                     "backward): replace the matmul/softmax attention with F.scaled_dot_product_attention "
                     "(dropout_p=0.1; the memory-efficient kernel never materialises the scores; see fix_probes); "
                     "a smaller batch or checkpointing of the blocks are the other levers (fix_probes say whether "
                     "half the batch fits). bf16 autocast alone does NOT shrink the probabilities (softmax runs "
                     "in float32 under autocast; fix_probes __amp): mixed precision may be named as a general "
                     "speed/memory lever but not as the fix for this OOM",
        report_must_not_say="a leak or growth; fragmentation / expandable segments as the fix; FSDP / CPU offload; "
                            "no_grad; optimizer-state advice (no step has run); a claim read from a log (there is "
                            "none)")
    g = torch.Generator(device="cuda").manual_seed(0)

    def loss_at(s):
        x = torch.randn(B, AS_T, AS_F, device="cuda", generator=g)
        y = (torch.rand(B, AS_C, device="cuda", generator=g) < 0.02).float()
        return F.binary_cross_entropy_with_logits(m(x).float(), y)
    run_oom(out, facts, lambda: train_steps(facts, opt, loss_at, amp=amp, B=B, T=AS_T))


# ---------------------------------------------------------------- 2. batch-hard triplet mining over a cdist matrix

TR_N, TR_CLASSES, TR_IN, TR_EMB, TR_CAP, TR_CHUNK = 32768, 1024, 2048, 512, 12, 4096


def s_triplet_cdist_hardmining_oom(out, facts):
    """Metric learning with batch-hard triplet mining: an MLP embedding head (2048 -> 1024 -> 512, BatchNorm,
    ReLU, L2-normalised output) over precomputed 2048-d image features, bf16 autocast, AdamW, PK batches of
    32768 samples (1024 identities x 32); the loss is written as `D = torch.cdist(emb, emb)` (float32 N x N),
    `pos = labels[:, None] == labels[None, :]`, hardest positive `(D * pos).max(1)`, hardest negative
    `D.masked_fill(pos, inf).min(1)`, `relu(d_ap - d_an + 0.3).mean()`; 12 GiB allowed. The 32768 x 32768
    matrix is 4.29 GB in float32 and the mining makes several of them: it dies in the first loss. Probes: the
    hardest pairs mined under torch.no_grad() in row chunks of 4096 and only the chosen distances recomputed
    with grad (__mine_nograd), and the full matrix with a mining batch of 8192 (__b8192)."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    cap(TR_CAP, facts)
    start_history(max_entries=60000, facts=facts)
    torch.manual_seed(0)
    N = int(VARIANT[1:]) if VARIANT.startswith("b") else TR_N
    facts["variant"] = VARIANT or None
    m = nn.Sequential(nn.Linear(TR_IN, 1024), nn.BatchNorm1d(1024), nn.ReLU(), nn.Linear(1024, TR_EMB)).cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    facts["settings"] = dict(
        kind="training (metric learning, batch-hard triplet loss)", framework="plain PyTorch", amp="bf16 autocast",
        optimizer="torch.optim.AdamW", mining_batch=N, identities=N // 32, per_identity=32, embedding=TR_EMB,
        distance="torch.cdist(emb, emb) float32 N x N", pairwise_bytes_fp32=N * N * 4, pairwise_mask_bytes=N * N,
        right_advice="capacity of the N x N pairwise computation (32768^2 float32 = 4.29 GB per matrix: the cdist "
                     "result, D * pos, the masked_fill copy and the N x N masks), not of the model (a 3 M-param "
                     "MLP): split the pairwise distance/mining into row chunks, e.g. mine the hardest pairs under "
                     "no_grad chunk by chunk and recompute only the chosen distances with grad, or use a smaller "
                     "mining batch (both measured: fix_probes)",
        report_must_not_say="fused attention / F.scaled_dot_product_attention (there is no attention: the N x N "
                            "matrix is a distance matrix); a leak or growth; fragmentation / expandable segments; "
                            "activation checkpointing of the model or FSDP / offload (the model is tiny); "
                            "optimizer-state advice; mixed precision (autocast is on; cdist runs in float32 under "
                            "it)")
    g = torch.Generator(device="cuda").manual_seed(0)
    labels = torch.arange(N // 32, device="cuda").repeat_interleave(32)

    def loss_at(s):
        x = torch.randn(N, TR_IN, device="cuda", generator=g)
        emb = F.normalize(m(x).float(), dim=1)
        if VARIANT == "mine_nograd":
            with torch.no_grad():
                pi, ni = [], []
                for i in range(0, N, TR_CHUNK):
                    d = torch.cdist(emb[i:i + TR_CHUNK], emb)
                    p = labels[i:i + TR_CHUNK, None] == labels[None, :]
                    pi.append((d * p).argmax(1))
                    ni.append(d.masked_fill(p, float("inf")).argmin(1))
                pi, ni = torch.cat(pi), torch.cat(ni)
            d_ap = (emb - emb[pi]).norm(dim=1)
            d_an = (emb - emb[ni]).norm(dim=1)
        else:
            D = torch.cdist(emb, emb)
            pos = labels[:, None] == labels[None, :]
            d_ap = (D * pos).max(1).values
            d_an = D.masked_fill(pos, float("inf")).min(1).values
        return F.relu(d_ap - d_an + 0.3).mean()
    run_oom(out, facts, lambda: train_steps(facts, opt, loss_at, B=N))


# ---------------------------------------------------------------- 3. the eval's last outputs kept into training

EK_V, EK_B, EK_EB, EK_T, EK_STEPS, EK_AT = 128256, 4, 8, 1024, 5, 2
EK_CONF = "expandable_segments:True"


def _evalkept_loop(facts, fix, record):
    """The own training loop of eval_outputs_kept_into_train_oom: record_runs.tiny_gpt (width 1024, 4 blocks,
    vocab 128256), bf16 autocast, AdamW, microbatch 4 x 1024; after step EK_AT's optimizer step an inline
    evaluation (model.eval(), torch.no_grad(), 4 batches of EK_EB x 1024, `outputs = model(x)`, token accuracy
    from outputs.argmax(-1), .item()) in the same function as the training loop; with fix, `del outputs` after
    the evaluation."""
    torch = R._torch()
    import torch.nn.functional as F
    torch.manual_seed(0)
    m = R.tiny_gpt(vocab=EK_V, d=1024, h=16, L=4).cuda().train()
    if record:
        model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=3e-4)
    g = torch.Generator(device="cuda").manual_seed(0)
    gv = torch.Generator(device="cuda").manual_seed(1)

    def body():
        for s in range(EK_STEPS):
            x = torch.randint(EK_V, (EK_B, EK_T + 1), device="cuda", generator=g)
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                logits = m(x[:, :-1])
                loss = F.cross_entropy(logits.float().view(-1, EK_V), x[:, 1:].reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if record:
                steplog(facts, step=s, loss=float(loss))
            if s == EK_AT:
                m.eval()
                correct = total = 0
                with torch.no_grad(), torch.amp.autocast("cuda", dtype=torch.bfloat16):
                    for k in range(4):
                        xv = torch.randint(EK_V, (EK_EB, EK_T + 1), device="cuda", generator=gv)
                        outputs = m(xv[:, :-1])
                        correct += (outputs.argmax(-1) == xv[:, 1:]).sum().item()
                        total += xv[:, 1:].numel()
                        if record:
                            steplog(facts, key="eval", batch=k)
                m.train()
                if fix:
                    del outputs
                if record:
                    steplog(facts, key="eval", phase="done", token_acc=correct / total)
    return body


def s_evalkept_probe(out, facts):
    """Calibration child of eval_outputs_kept_into_train_oom (not a corpus run): the loop with (H28_FIX=1) or
    without `del outputs` under the cap H28_CAP_BYTES (0: none), no history; says whether it fits and its peaks.
    With H28_BOTH=1 (uncapped) the fixed loop, then the recorded one, in one process (peaks reset between)."""
    torch = R._torch()
    capb = int(os.environ.get("H28_CAP_BYTES", "0"))
    if capb:
        cap(capb / GiB, facts)
    runs = [True, False] if os.environ.get("H28_BOTH") else [os.environ.get("H28_FIX") == "1"]
    facts["rows"] = []
    for fix in runs:
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        rec = dict(fix=fix)
        try:
            _evalkept_loop(facts, fix, False)()
            rec["fits"] = True
        except torch.OutOfMemoryError as e:
            rec["fits"] = False
            rec["msg"] = str(e).split("\n")[0][:300]
        rec.update(peaks())
        facts["rows"].append(rec)
        gc.collect()


def s_eval_outputs_kept_into_train_oom(out, facts):
    """An own training loop (record_runs.tiny_gpt: 4 SDPA blocks of width 1024, vocab 128256 (a Llama-3-sized
    vocabulary), 313 M params fp32, bf16 autocast, AdamW, microbatch 4 x 1024) with an inline evaluation after
    step 2's optimizer step, in the same function as the training loop: model.eval(), torch.no_grad(), 4 batches
    of 8 x 1024, `outputs = model(x)` (8 x 1024 x 128256 bf16 logits, 2.1 GB), token accuracy from
    `outputs.argmax(-1)` with .item(); nothing deletes `outputs`, so the last evaluation batch's logits stay
    referenced through the next training steps. The cap is calibrated in child processes: the same loop with
    `del outputs` after the evaluation (the fix) and as recorded, uncapped; the cap lies between their peaks
    allocated, and a child verifies the fix fits under it. It dies in step 3, the first training step after the
    evaluation. (A first recording with evaluation batches of 16 x 1024, 4.2 GB of logits, died inside the
    evaluation instead: while `outputs = model(x)` makes batch 1's logits, batch 0's are still referenced, and
    its 14.88 GiB cap, calibrated by the same rule, also failed the fixed loop there: 2.82 GiB were reserved but
    unallocated. Batches of 8 make logits the size of the training step's float32 logits. A second recording with
    batches of 8 and the native allocator died in step 1, before any evaluation, of fragmentation (12.88 GiB
    allowed, 9.38 GiB allocated, 2.57 GiB reserved but unallocated, asking 1.96 GiB), and the fixed loop too: this
    run, its children and its cap use PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, so that the cap tests
    capacity only.)"""
    torch = R._torch()
    both = run_child(out, "evalkept_probe", {"H28_BOTH": "1", "PYTORCH_CUDA_ALLOC_CONF": EK_CONF}, timeout=150,
                     tag="_probe_uncapped")
    rows = both.get("rows") or [{}, {}]
    fa = rows[0].get("peak_allocated") or 12 * GiB
    ba = (rows[1].get("peak_allocated") if len(rows) > 1 else None) or 16 * GiB
    tries = []
    ver = {}
    for frac in (0.4, 0.6, 0.8):
        capb = ((fa + int((ba - fa) * frac)) // (64 * MiB)) * 64 * MiB
        ver = run_child(out, "evalkept_probe", {"H28_FIX": "1", "H28_CAP_BYTES": str(capb),
                                                 "PYTORCH_CUDA_ALLOC_CONF": EK_CONF}, timeout=120,
                        tag="_probe_verify_%d" % len(tries))
        vr = (ver.get("rows") or [{}])[0]
        tries.append(dict(frac=frac, cap=capb, fix_fits=vr.get("fits"), peak_reserved=vr.get("peak_reserved")))
        if vr.get("fits"):
            break
    vr = (ver.get("rows") or [{}])[0]
    facts["calibration"] = dict(uncapped=rows, cap_bytes=capb, tries=tries, fix_at_cap=vr,
                                rule="fix's uncapped peak allocated + 40% (then 60%, 80%) of the gap to the recorded "
                                     "loop's peak allocated, rounded down to 64 MiB, the first under which the fix "
                                     "fits")
    cap(capb / GiB, facts)
    start_history(max_entries=60000, facts=facts)
    facts["settings"] = dict(
        kind="training with an inline evaluation", framework="plain PyTorch (own loop)", amp="bf16 autocast",
        optimizer="torch.optim.AdamW", microbatch=EK_B, seq_len=EK_T, vocab=EK_V, eval_batch=EK_EB, eval_batches=4,
        eval_after_step=EK_AT, eval_under="torch.no_grad(), model.eval()", alloc_conf=EK_CONF,
        kept_after_eval="`outputs`, the last eval batch's bf16 logits (8 x 1024 x 128256)",
        kept_bytes=EK_EB * EK_T * EK_V * 2, train_logits_bytes_fp32=EK_B * EK_T * EK_V * 4, cap_bytes=capb,
        fix_fits_at_cap=vr.get("fits"),
        right_advice="a stale reference: the evaluation's last `outputs` (2.1 GB of bf16 logits made under no_grad, "
                     "no graph) is still referenced by the loop's local variable when training resumes; `del "
                     "outputs` after the evaluation (or run the evaluation in its own function so its locals die, "
                     "computing the metric inside the loop); measured: the same loop with `del outputs` " +
                     ("FITS" if vr.get("fits") else "does NOT fit") + " under this cap. A smaller evaluation batch "
                     "shrinks the kept tensor (secondary)",
        report_must_not_say="no_grad (the evaluation is under torch.no_grad() already); a leak or growth across "
                            "steps (one tensor kept, bounded); gradient checkpointing or a smaller TRAINING "
                            "microbatch as the first fix (the training step alone fits); fragmentation / "
                            "expandable segments (already on); FSDP / offload; mixed precision (autocast is on)")
    facts["alloc_conf"] = os.environ.get("PYTORCH_CUDA_ALLOC_CONF")
    run_oom(out, facts, _evalkept_loop(facts, False, True))


# ---------------------------------------------------------------- 4. knowledge distillation done right, healthy

KD_B, KD_T, KD_V, KD_STEPS, KD_TEMP = 16, 512, 32000, 6, 2.0


def s_distill_teacher_nograd_healthy(out, facts):
    """Knowledge distillation done right: the teacher is an HF LlamaForCausalLM from a config (8 layers, hidden
    1536, 12/4 heads, intermediate 4096, vocab 32000, ~300 M params, kept in float32), eval(),
    requires_grad_(False), its forward under torch.no_grad(); the student is an HF GPT2LMHeadModel from a config
    (4 layers, width 512, vocab 32000) in training; loss = KL(student/T || teacher/T) * T^2 * 0.5 + 0.5 * CE,
    T = 2, bf16 autocast, AdamW over the student only, batch 16 x 512, 6 steps; no cap. The snapshot is dumped
    after step 6: healthy, the teacher's weights are the largest live item."""
    torch = R._torch()
    import torch.nn.functional as F
    from transformers import GPT2Config, GPT2LMHeadModel
    start_history(max_entries=60000, facts=facts)
    torch.manual_seed(0)
    teacher = R.hf_llama(L=8, d=1536, inter=4096, heads=12, kv=4, vocab=KD_V).cuda().eval()
    teacher.requires_grad_(False)
    model_facts(teacher, facts, key="teacher")
    student = GPT2LMHeadModel(GPT2Config(vocab_size=KD_V, n_positions=KD_T, n_embd=512, n_layer=4, n_head=8))
    student = student.cuda().train()
    model_facts(student, facts, key="student")
    opt = torch.optim.AdamW(student.parameters(), lr=3e-4)
    facts["settings"] = dict(
        kind="training (knowledge distillation)", framework="transformers models, own loop", amp="bf16 autocast",
        optimizer="torch.optim.AdamW (student only)", batch=KD_B, seq_len=KD_T, vocab=KD_V, temperature=KD_TEMP,
        teacher="LlamaForCausalLM 8 x 1536, float32, eval(), requires_grad_(False), forward under torch.no_grad()",
        student="GPT2LMHeadModel 4 x 512", steps=KD_STEPS, memory_fraction=None, alloc_conf=None,
        right_advice="healthy: nothing urgent; between steps allocated is the teacher's float32 weights (the largest "
                     "live item, ~1.2 GB) plus the student, its gradients and AdamW state; the teacher builds no "
                     "graph (no_grad), its logits live only for the loss; at most an optional remark that the "
                     "frozen teacher could be held in bf16",
        report_must_not_say="an OOM or OOM advice; a held graph / no_grad / detach advice (the teacher already runs "
                            "under torch.no_grad() with requires_grad off); a leak or growth; activation "
                            "checkpointing, FSDP / offload, a smaller batch as needed; warning-level fragmentation")
    g = torch.Generator(device="cuda").manual_seed(0)
    for s in range(KD_STEPS):
        x = torch.randint(KD_V, (KD_B, KD_T + 1), device="cuda", generator=g)
        inp, tgt = x[:, :-1], x[:, 1:]
        with torch.amp.autocast("cuda", dtype=torch.bfloat16):
            with torch.no_grad():
                t_logits = teacher(input_ids=inp).logits
            s_logits = student(input_ids=inp).logits
            kl = F.kl_div(F.log_softmax(s_logits.float() / KD_TEMP, -1), F.log_softmax(t_logits.float() / KD_TEMP, -1),
                          log_target=True, reduction="batchmean") * KD_TEMP ** 2 / KD_T
            ce = F.cross_entropy(s_logits.float().reshape(-1, KD_V), tgt.reshape(-1))
            loss = 0.5 * kl + 0.5 * ce
        del t_logits, s_logits
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        steplog(facts, step=s, loss=float(loss), kl=float(kl), ce=float(ce))
    del loss, kl, ce, x, inp, tgt
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


# ---------------------------------------------------------------- 5. MoE, collapsed router, padded expert buffers

MO_B, MO_T, MO_D, MO_E, MO_L, MO_V, MO_CAP, MO_BIAS = 16, 1024, 1024, 8, 4, 32000, 16, 4.0


def s_moe_router_collapse_padded_oom(out, facts):
    """A 4-layer decoder (width 1024, 16 heads, SDPA causal attention) whose MLP is a top-1 mixture of 8 experts
    (each 1024 -> 4096 -> 1024, GELU), vocab 32000, ~350 M params fp32, bf16 autocast, AdamW, batches of
    16 x 1024 tokens. The expert computation is batched: tokens are scattered into a padded [experts, C, 1024]
    buffer with C = the largest expert's token count (dropless), then `torch.bmm` with the stacked expert
    weights and gathered back, scaled by the gate. There is no load-balancing loss and the router's bias starts
    at +4 on expert 0 (a collapsed router): nearly every token goes to expert 0, so C is ~all 16384 tokens and
    each layer's buffers are 8x what a balanced router needs; 16 GiB allowed. It dies in the first forward.
    Probes: a capacity factor of 1.25 (C = 1.25 x tokens / experts, overflow tokens dropped: __capacity) and the
    dropless padding with half the batch (__b8)."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    cap(MO_CAP, facts)
    start_history(max_entries=60000, facts=facts)
    torch.manual_seed(0)
    B = int(VARIANT[1:]) if VARIANT.startswith("b") else MO_B
    cf = 1.25 if VARIANT == "capacity" else None
    facts["variant"] = VARIANT or None
    loads = []

    class MoE(nn.Module):
        def __init__(s, d, E):
            super().__init__()
            s.E = E
            s.router = nn.Linear(d, E)
            with torch.no_grad():
                s.router.bias.zero_()
                s.router.bias[0] = MO_BIAS
            s.w1 = nn.Parameter(torch.randn(E, d, 4 * d) * d ** -0.5)
            s.w2 = nn.Parameter(torch.randn(E, 4 * d, d) * (4 * d) ** -0.5)

        def forward(s, x):
            shp = x.shape
            x = x.reshape(-1, shp[-1])
            N = x.shape[0]
            p = s.router(x).float().softmax(-1)
            gate, ex = p.max(-1)
            counts = torch.bincount(ex, minlength=s.E)
            order = torch.argsort(ex, stable=True)
            starts = torch.cumsum(counts, 0) - counts
            slot = torch.empty_like(ex)
            slot[order] = torch.arange(N, device=x.device) - starts[ex[order]]
            C = int(math.ceil(cf * N / s.E)) if cf else int(counts.max())
            keep = slot < C
            loads.append(int(counts.max()))
            buf = x.new_zeros(s.E, C, x.shape[1])
            buf = buf.index_put((ex[keep], slot[keep]), x[keep])
            h = F.gelu(torch.bmm(buf, s.w1))
            y = torch.bmm(h, s.w2)
            outp = x.new_zeros(N, x.shape[1]).to(y.dtype)
            outp = outp.index_put((keep.nonzero().squeeze(1),), y[ex[keep], slot[keep]] * gate[keep].unsqueeze(1).to(y.dtype))
            return outp.view(shp)

    class Block(nn.Module):
        def __init__(s, d, h):
            super().__init__()
            s.h = h
            s.n1, s.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
            s.qkv, s.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            s.moe = MoE(d, MO_E)

        def forward(s, x):
            Bn, T, D = x.shape
            q, k, v = s.qkv(s.n1(x)).view(Bn, T, 3, s.h, D // s.h).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + s.proj(a.transpose(1, 2).reshape(Bn, T, D))
            return x + s.moe(s.n2(x))

    class MoELM(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(MO_V, MO_D)
            s.blocks = nn.ModuleList([Block(MO_D, 16) for _ in range(MO_L)])
            s.ln = nn.LayerNorm(MO_D)
            s.head = nn.Linear(MO_D, MO_V, bias=False)

        def forward(s, idx):
            x = s.emb(idx)
            for b in s.blocks:
                x = b(x)
            return s.head(s.ln(x))

    m = MoELM().cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=3e-4)
    N = B * MO_T
    facts["settings"] = dict(
        kind="training (mixture-of-experts LM)", framework="plain PyTorch", amp="bf16 autocast",
        optimizer="torch.optim.AdamW", microbatch=B, seq_len=MO_T, tokens_per_batch=N, experts=MO_E, top_k=1,
        expert_mlp=[MO_D, 4 * MO_D], layers=MO_L, vocab=MO_V, router_bias_expert0=MO_BIAS,
        load_balancing_loss=False, capacity_factor=cf, dispatch="padded [E, C, d] buffer, C = max expert load "
        "(dropless)" if not cf else "padded [E, C, d], C = 1.25 N / E, overflow dropped",
        balanced_hidden_bytes_bf16_per_layer=N * 4 * MO_D * 2, collapsed_hidden_bytes_bf16_per_layer=MO_E * N * 4 * MO_D * 2,
        right_advice="capacity from routing imbalance: the router sends nearly every token to expert 0, and the "
                     "dropless padded dispatch sizes every expert's buffer to that load (C ~ 16384 instead of "
                     "~2048: the [8, C, 4096] expert activations are 8x a balanced router's); cap the expert "
                     "capacity (capacity factor ~1.25 with token dropping) and add a load-balancing auxiliary loss, "
                     "or use a grouped (unpadded) dispatch; measured: capacity factor 1.25 fits (fix_probes). A "
                     "smaller microbatch is the generic secondary lever (fix_probes __b8)",
        report_must_not_say="a leak or growth; fragmentation / expandable segments as the fix; FSDP / offload; "
                            "no_grad; mixed precision (autocast is on); fused attention (attention is SDPA "
                            "already); optimizer-state advice (no step has run)")
    g = torch.Generator(device="cuda").manual_seed(0)

    def loss_at(s):
        x = torch.randint(MO_V, (B, MO_T + 1), device="cuda", generator=g)
        logits = m(x[:, :-1])
        return F.cross_entropy(logits.float().view(-1, MO_V), x[:, 1:].reshape(-1))
    try:
        run_oom(out, facts, lambda: train_steps(facts, opt, loss_at, B=B, T=MO_T))
    finally:
        facts["expert_max_load_per_layer_call"] = loads


# ---------------------------------------------------------------- 6. assisted (speculative) decoding, healthy

SD_REQS = 6


def s_speculative_assisted_generate_healthy(out, facts):
    """Speculative (assisted) decoding in an inference service: target = HF LlamaForCausalLM from a config
    (8 layers, hidden 2048, 16/4 heads, intermediate 5632, vocab 32000, ~490 M params), draft = a 2-layer
    LlamaForCausalLM (hidden 512, 8/4 heads, same vocab), both bf16, eval(), torch.inference_mode(); 6 requests
    (seeded) of one prompt of 128-1536 tokens, `target.generate(input_ids, attention_mask,
    assistant_model=draft, max_new_tokens=32, do_sample=False)` (transformers' assisted generation, the draft
    proposing tokens that the target verifies); if assisted generation raises, facts say so and a hand loop
    (the draft's greedy generate of 4 tokens, the target verifying them in one forward) runs instead
    (facts["decoding_path"]). The new tokens go to the CPU; no cap. The snapshot is dumped after the last
    request: healthy. (A first recording with 10 requests made a 2.9 MB snapshot.xz: 6 keep it smaller.)"""
    torch = R._torch()
    start_history(max_entries=600000, facts=facts)
    torch.manual_seed(0)
    target = R.hf_llama(L=8, d=2048, inter=5632, heads=16, kv=4).to(torch.bfloat16).cuda().eval()
    draft = R.hf_llama(L=2, d=512, inter=1408, heads=8, kv=4).to(torch.bfloat16).cuda().eval()
    model_facts(target, facts, key="target")
    model_facts(draft, facts, key="draft")
    R.hf_cfg_facts(target, facts)
    rng = random.Random(0)
    reqs = [rng.randint(128, 1536) for _ in range(SD_REQS)]
    facts["requests"] = reqs
    facts["settings"] = dict(
        kind="inference (LLM generation, speculative / assisted decoding)", framework="transformers generate()",
        weights="bf16", inference_mode=True, decoding="greedy, assistant_model=draft", requests=SD_REQS,
        batch=1, prompt_range=[128, 1536], max_new_tokens=32, memory_fraction=None, alloc_conf=None,
        right_advice="healthy: nothing urgent; two models resident (target ~0.98 GB + draft bf16 weights), each "
                     "request's KV caches and logits freed after it; the peak is the longest prompt's prefill",
        report_must_not_say="an OOM or OOM advice; training advice (checkpointing, accumulation, optimizer, FSDP, "
                            "mixed precision: weights are bf16); no_grad (inference_mode is on); a leak or growth; "
                            "warning-level fragmentation")
    steplog(facts, key="serve", phase="models loaded")
    g = torch.Generator().manual_seed(0)
    path = "assisted"
    with torch.inference_mode():
        for i, p in enumerate(reqs):
            ids = torch.randint(3, 32000, (1, p), generator=g).cuda()
            am = torch.ones_like(ids)
            o = None
            if path == "assisted":
                try:
                    o = target.generate(input_ids=ids, attention_mask=am, assistant_model=draft, max_new_tokens=32,
                                        do_sample=False, pad_token_id=0)
                except torch.OutOfMemoryError:
                    raise
                except Exception as e:  # noqa: BLE001
                    facts["assisted_error"] = repr(e)[:600]
                    path = "hand loop"
                    R.log(f"assisted generation failed ({e!r:.200}); hand loop from now on")
            if o is None:
                cur = ids
                while cur.shape[1] < p + 32:
                    prop = draft.generate(input_ids=cur, attention_mask=torch.ones_like(cur), max_new_tokens=4,
                                          do_sample=False, pad_token_id=0)
                    tl = target(input_ids=prop).logits[:, cur.shape[1] - 1:].argmax(-1)
                    new = prop[:, cur.shape[1]:]
                    k = 0
                    while k < new.shape[1] and int(new[0, k]) == int(tl[0, k]):
                        k += 1
                    cur = torch.cat([cur, new[:, :k], tl[:, k:k + 1]], 1)
                    del prop, tl, new
                o = cur
            n_new = int(o.shape[1] - p)
            res = o[:, p:].cpu()
            del o, ids, am
            steplog(facts, key="serve", request=i, prompt=p, new_tokens=n_new, path=path)
    facts["decoding_path"] = path
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


# ---------------------------------------------------------------- 7. output_attentions=True for attention maps

OA_B, OA_T, OA_L, OA_CAP = 2, 4096, 8, 12


def s_hf_output_attentions_infer_oom(out, facts):
    """Attention-map extraction for interpretability: HF LlamaForCausalLM from a config (8 layers, hidden 1024,
    16/4 heads, intermediate 2816, vocab 32000, max positions 4096, ~155 M params), bf16, eval(), loaded with
    attn_implementation="eager" (as the docs say, for the attention weights), torch.inference_mode(), one batch
    of 2 documents x 4096 tokens, `model(input_ids, output_attentions=True)`: every layer's 2 x 16 x 4096 x 4096
    attention probabilities (bf16, 1.07 GB each, after a float32 softmax) are kept for the outputs; 12 GiB
    allowed. It dies in the forward, a few layers in. Probes: the same with output_attentions=False and SDPA
    (__sdpa_noattn) and eager without output_attentions (__eager_noattn)."""
    torch = R._torch()
    from transformers import LlamaConfig, LlamaForCausalLM
    cap(OA_CAP, facts)
    start_history(max_entries=60000, facts=facts)
    torch.manual_seed(0)
    impl = "sdpa" if VARIANT == "sdpa_noattn" else "eager"
    want = VARIANT == ""
    facts["variant"] = VARIANT or None
    cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=OA_L, num_attention_heads=16,
                      num_key_value_heads=4, vocab_size=32000, max_position_embeddings=OA_T)
    cfg._attn_implementation = impl
    try:
        m = LlamaForCausalLM._from_config(cfg, attn_implementation=impl)
    except Exception:  # noqa: BLE001
        m = LlamaForCausalLM(cfg)
    m = m.to(torch.bfloat16).cuda().eval()
    model_facts(m, facts)
    R.hf_cfg_facts(m, facts)
    n = OA_B * 16 * OA_T * OA_T
    facts["settings"] = dict(
        kind="inference (attention-map extraction)", framework="transformers forward", weights="bf16",
        inference_mode=True, attn_implementation=facts["hf_config"].get("attn_implementation"),
        output_attentions=want, batch=OA_B, seq_len=OA_T, layers=OA_L, heads=16,
        attn_probs_bytes_bf16_per_layer=n * 2, attn_softmax_fp32_bytes=n * 4,
        right_advice="capacity of the returned attention maps: output_attentions=True keeps every layer's "
                     "2 x 16 x 4096 x 4096 probabilities (1.07 GB each, 8 layers = 8.6 GB) for the outputs; request "
                     "only what is needed (output_attentions off and hook the one layer wanted, or fewer/shorter "
                     "documents per forward; without output_attentions the model may use SDPA again); measured: "
                     "fix_probes",
        report_must_not_say="training advice (checkpointing, accumulation, optimizer, FSDP, mixed precision: "
                            "weights are bf16); no_grad (inference_mode is on); a leak or growth; fragmentation / "
                            "expandable segments as the fix")
    g = torch.Generator(device="cuda").manual_seed(0)

    def body():
        with torch.inference_mode():
            ids = torch.randint(3, 32000, (OA_B, OA_T), device="cuda", generator=g)
            o = m(input_ids=ids, output_attentions=want, use_cache=False)
            att = o.attentions
            facts["attentions_returned"] = len(att) if att else 0
            if att:
                maps = torch.stack([a[:, :, -1].float().mean(1) for a in att]).cpu()
                facts["maps_shape"] = list(maps.shape)
            del o, att
            steplog(facts, key="batches", batch=0)
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 8. integrated gradients, all steps in one batch

IG_IMGS, IG_STEPS, IG_CAP = 8, 64, 16


def s_integrated_gradients_batched_oom(out, facts):
    """Attribution maps with integrated gradients written by hand (as Captum's IntegratedGradients without
    internal_batch_size does): torchvision resnet50 (weights=None, fp32, eval(); its parameters keep
    requires_grad), for each 224 x 224 image the 64 interpolations from a black baseline are one batch
    `x_interp = base + alphas * (x - base)`, `x_interp.requires_grad_()`, `score = model(x_interp)[:, target].sum()`,
    `torch.autograd.grad(score, x_interp)`; all 8 images' 512 interpolations go through one forward/backward;
    no optimizer; 16 GiB allowed. The forward keeps every activation for the backward to the input: it dies in
    the forward. Probe: the interpolations of one image (64) per forward (__chunk64)."""
    torch = R._torch()
    import torchvision
    cap(IG_CAP, facts)
    start_history(max_entries=60000, facts=facts)
    torch.manual_seed(0)
    chunk = int(VARIANT[5:]) if VARIANT.startswith("chunk") else IG_IMGS * IG_STEPS
    facts["variant"] = VARIANT or None
    m = torchvision.models.resnet50().cuda().eval()
    model_facts(m, facts)
    facts["settings"] = dict(
        kind="attribution (integrated gradients: forward + backward to the input, no optimizer)",
        framework="torchvision forward + torch.autograd.grad", amp=None, weights="fp32", images=IG_IMGS,
        steps=IG_STEPS, batch_per_forward=chunk, image=[3, 224, 224], params_requires_grad=True, optimizer=None,
        right_advice="capacity of one forward/backward: all 512 interpolations (8 images x 64 steps) go through "
                     "resnet50 at once and every activation is kept for the gradient to the input; run the "
                     "interpolation steps in chunks (Captum's internal_batch_size, e.g. 64 per forward, summing "
                     "the gradients; measured: fits, fix_probes); fewer steps is the secondary lever",
        report_must_not_say="no_grad / inference_mode (the gradient to the input is the point); optimizer-state "
                            "advice / FSDP / offload (no optimizer); a leak or growth; fragmentation / expandable "
                            "segments")
    g = torch.Generator(device="cuda").manual_seed(0)

    def body():
        imgs = torch.rand(IG_IMGS, 3, 224, 224, device="cuda", generator=g)
        targets = torch.randint(1000, (IG_IMGS,), device="cuda", generator=g)
        base = torch.zeros_like(imgs[0])
        alphas = torch.linspace(1.0 / IG_STEPS, 1.0, IG_STEPS, device="cuda")
        interp = base + alphas[None, :, None, None, None] * (imgs[:, None] - base)  # [8, 64, 3, 224, 224]
        interp = interp.reshape(-1, 3, 224, 224)
        tgt = targets.repeat_interleave(IG_STEPS)
        grads = torch.empty_like(interp)
        for i in range(0, interp.shape[0], chunk):
            xi = interp[i:i + chunk].clone().requires_grad_()
            score = m(xi).gather(1, tgt[i:i + chunk, None]).sum()
            grads[i:i + chunk] = torch.autograd.grad(score, xi)[0]
            del xi, score
            steplog(facts, key="chunks", start=i, size=chunk)
        attr = (imgs - base) * grads.view(IG_IMGS, IG_STEPS, 3, 224, 224).mean(1)
        facts["attr_abs_mean"] = float(attr.abs().mean())
        steplog(facts, key="images", images=IG_IMGS)
    run_oom(out, facts, body)


# ---------------------------------------------------------------- collecting the fix probes

def collect(root):
    """Write each corpus run's <run>__<variant> results into its facts.json as fix_probes."""
    R.collect_fix_probes(root, CORPUS_RUNS, "tools/record_heldout28.py", counts=("steps", "chunks", "batches"), cap_bytes=False, retries=False,
                         note_what="the variant named")


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "ast_fp32_matmul_attn_nolog_oom": dict(fn=s_ast_fp32_matmul_attn_nolog_oom, group="solo", timeout=90),
    "triplet_cdist_hardmining_oom": dict(fn=s_triplet_cdist_hardmining_oom, group="solo", timeout=90),
    "eval_outputs_kept_into_train_oom": dict(fn=s_eval_outputs_kept_into_train_oom, group="solo", timeout=400,
                                             env={"PYTORCH_CUDA_ALLOC_CONF": EK_CONF}),
    "evalkept_probe": dict(fn=s_evalkept_probe, group="solo", timeout=150),
    "distill_teacher_nograd_healthy": dict(fn=s_distill_teacher_nograd_healthy, group="solo", timeout=120),
    "moe_router_collapse_padded_oom": dict(fn=s_moe_router_collapse_padded_oom, group="solo", timeout=90),
    "speculative_assisted_generate_healthy": dict(fn=s_speculative_assisted_generate_healthy, group="solo",
                                                  timeout=150),
    "hf_output_attentions_infer_oom": dict(fn=s_hf_output_attentions_infer_oom, group="solo", timeout=90),
    "integrated_gradients_batched_oom": dict(fn=s_integrated_gradients_batched_oom, group="solo", timeout=90),
})
CORPUS_RUNS = ["ast_fp32_matmul_attn_nolog_oom", "triplet_cdist_hardmining_oom", "eval_outputs_kept_into_train_oom",
               "distill_teacher_nograd_healthy", "moe_router_collapse_padded_oom",
               "speculative_assisted_generate_healthy", "hf_output_attentions_infer_oom",
               "integrated_gradients_batched_oom"]
VARIANTS = [("ast_fp32_matmul_attn_nolog_oom", "sdpa"), ("ast_fp32_matmul_attn_nolog_oom", "b4"),
            ("ast_fp32_matmul_attn_nolog_oom", "amp"),
            ("triplet_cdist_hardmining_oom", "mine_nograd"), ("triplet_cdist_hardmining_oom", "b8192"),
            ("moe_router_collapse_padded_oom", "capacity"), ("moe_router_collapse_padded_oom", "b8"),
            ("hf_output_attentions_infer_oom", "sdpa_noattn"), ("hf_output_attentions_infer_oom", "eager_noattn"),
            ("integrated_gradients_batched_oom", "chunk64")]
for _n, _v in VARIANTS:
    R.SCENARIOS[_n + "__" + _v] = dict(R.SCENARIOS[_n], env={"H28_VARIANT": _v}, timeout=75)
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--collect":
        collect(sys.argv[2])
        sys.exit(0)
    if len(sys.argv) == 2 and sys.argv[1] != "--one":
        sys.argv += CORPUS_RUNS + [n for n in R.SCENARIOS if "__" in n]
    R.main()
