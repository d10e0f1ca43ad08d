#!/usr/bin/env python3
"""A twenty-fourth held-out set (python3 record_heldout24.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Recorded beside record_runs.py as build/h24/record_heldout24.py.
Every OOM run is "solo" (alone on the GPU, so that the OOM message's free memory and process list are its own
story); the probe scenario is a calibration child, not a corpus run. The OOM observer dumps at every
out-of-memory failure, as the README's observer does (the same path each time): the snapshot is the last
failure's, the one raised. facts["settings"] says, beside the run's
settings and key byte counts, the right first advice ("right_advice") and what a report must not say
("report_must_not_say")."""
import copy, json, math, os, random, subprocess, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log, mem


R.attach_oom = R.attach_oom_every  # run_oom attaches this one


# ---------------------------------------------------------------- 1. generate(output_scores=True)

def s_hf_generate_output_scores_oom(out, facts):
    """HF GPT2LMHeadModel from a config (4 layers, n_embd 768, 12 heads, vocab 50257, n_positions 1024, tied
    embeddings, ~67.7 M params) cast to bf16, eval(); one greedy call `model.generate(input_ids,
    attention_mask, max_new_tokens=900, do_sample=False, return_dict_in_generate=True, output_scores=True)`
    on 128 prompts of 32 tokens (to read per-token log-probs afterwards with compute_transition_scores), no
    EOS (generation_config.eos_token_id=None): generate keeps every step's processed scores, a float32
    128 x 50257 tensor (25.7 MB) per new token, in the output tuple until the call returns, beside the
    DynamicCache (K/V grow 1.57 MB a token); a LogitsProcessor that returns the scores unchanged counts the
    steps; 3 GiB allowed."""
    torch = R._torch()
    from transformers import GPT2Config, GPT2LMHeadModel, LogitsProcessor, LogitsProcessorList
    cap(3, facts)
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=4, n_head=12,
                     bos_token_id=50256, eos_token_id=50256)
    m = GPT2LMHeadModel(cfg).to(torch.bfloat16).cuda().eval()
    m.generation_config.eos_token_id = None
    m.generation_config.pad_token_id = 50256
    model_facts(m, facts)
    R.hf_cfg_facts(m, facts)
    B, P, N, V = 128, 32, 900, 50257
    score_bytes = B * V * 4
    kv_tok = B * cfg.n_layer * 2 * cfg.n_embd * 2
    facts["settings"] = dict(
        kind="inference (generate, greedy)", framework="transformers generate()", amp=None, weights="bf16",
        batch=B, prompt_len=P, max_new_tokens=N, do_sample=False, return_dict_in_generate=True,
        output_scores=True, output_logits=False, cache="DynamicCache (default)",
        score_bytes_per_step=score_bytes, score_dtype="float32", kv_bytes_per_token_all_seqs=kv_tok,
        scores_bytes_if_finished=score_bytes * N,
        right_advice="the per-step scores that generate() keeps for return_dict_in_generate/output_scores "
                     "(float32 batch x vocab every step) fill the memory within this one call: do not keep them "
                     "all (output_scores=False; gather the chosen tokens' log-probs per step with a "
                     "LogitsProcessor / a custom loop, or keep them on the CPU), or generate fewer sequences / "
                     "fewer new tokens per call",
        report_must_not_say="a leak across iterations or requests (the growth is inside one generate() call); "
                            "training advice (gradient checkpointing, accumulation, optimizer, FSDP); no_grad "
                            "(generate runs without gradients); fragmentation / expandable segments as the fix; "
                            "the KV cache as the main consumer (it is ~6% of the score bytes per token)")
    ids = torch.randint(0, 50000, (B, P), device="cuda")
    am = torch.ones_like(ids)
    facts["score_steps"] = 0

    class CountSteps(LogitsProcessor):
        def __call__(s, input_ids, scores):
            facts["score_steps"] += 1
            n = facts["score_steps"]
            if n == 1 or n % 20 == 0:
                steplog(facts, key="generate", step=n, kept_scores=n - 1,
                        kept_score_bytes=(n - 1) * score_bytes)
            return scores

    def body():
        steplog(facts, key="generate", phase="model built")
        o = m.generate(input_ids=ids, attention_mask=am, max_new_tokens=N, do_sample=False,
                       return_dict_in_generate=True, output_scores=True,
                       logits_processor=LogitsProcessorList([CountSteps()]))
        steplog(facts, key="generate", tokens=int(o.sequences.shape[1]), scores=len(o.scores))
    try:
        run_oom(out, facts, body)
    finally:
        n = facts.get("score_steps", 0)
        facts["steps_started"] = n
        facts["scores_kept_at_end"] = max(n - 1, 0)
        facts["scores_bytes_kept_at_end"] = max(n - 1, 0) * score_bytes


# ---------------------------------------------------------------- 2. deepcopy(state_dict()) every epoch

def s_keep_all_checkpoints_leak_oom(out, facts):
    """Plain PyTorch training: a 6-layer SDPA GPT (width 1024, 16 heads, vocab 8192, ~92.4 M params, 370 MB
    fp32), AdamW, bf16 autocast, microbatch 8 x 512, "epochs" of 3 steps; after every epoch the loop appends
    `copy.deepcopy(model.state_dict())` to a list `checkpoints` ("keep every epoch's weights, pick the best by
    validation loss at the end"): the copies are GPU tensors, so every epoch adds one more full set of
    parameters (370 MB) to the GPU; 5 GiB allowed."""
    torch = R._torch()
    cap(5, facts)
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    m = R.tiny_gpt(vocab=8192, d=1024, h=16, L=6).cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B, T, SPE = 8, 512, 3
    pbytes = facts["model_param_bytes"]
    facts["settings"] = dict(
        kind="training", framework="plain PyTorch (own loop)", amp="bf16 autocast", optimizer="torch.optim.AdamW",
        microbatch=B, seq_len=T, vocab=8192, steps_per_epoch=SPE,
        kept="checkpoints.append(copy.deepcopy(model.state_dict())) after every epoch (GPU tensors)",
        copy_bytes_each=pbytes, growth_per_epoch_bytes=pbytes,
        right_advice="the kept state_dict copies grow by the parameter bytes every epoch (a leak): save each "
                     "checkpoint to the CPU or to disk ({k: v.detach().cpu() for k, v in sd.items()} or "
                     "torch.save), or keep only the best one",
        report_must_not_say="a capacity problem fixed by a smaller batch, gradient checkpointing or accumulation; "
                            "optimizer-state offload / 8-bit optimizers or FSDP as the fix; fragmentation; "
                            "no_grad; that memory is flat")
    checkpoints = []
    facts["copies_kept"] = 0

    def body():
        for epoch in range(40):
            for s in range(SPE):
                loss = R.gpt_step(m, opt, B, T, vocab=8192)
                steplog(facts, epoch=epoch, step=epoch * SPE + s, loss=float(loss))
            checkpoints.append(copy.deepcopy(m.state_dict()))
            facts["copies_kept"] = len(checkpoints)
            steplog(facts, key="epochs", epoch=epoch, checkpoints=len(checkpoints),
                    checkpoint_bytes=len(checkpoints) * pbytes)
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 3. BERT padded to max_length

def s_hf_bert_pad_max_length_oom(out, facts):
    """Fine-tuning HF BertForSequenceClassification from a config (12 layers, hidden 768, 12 heads, inter
    3072, vocab 30522, max_position_embeddings 2048, 2 labels, ~110 M params fp32, sdpa), AdamW lr 2e-5,
    bf16 autocast, batches of 8 examples encoded as a tokenizer with padding="max_length", max_length=2048,
    truncation=True would (CLS ... SEP, then [PAD] id 0 up to 2048, attention_mask 1 on the real tokens;
    built on the CPU and sent with .cuda()), while the real lengths are ~100 tokens (seeded gauss(100, 30),
    clamped to 24..256): ~5% of each batch is real tokens, and the model runs on all 16384 positions;
    4 GiB allowed."""
    torch = R._torch()
    from transformers import BertConfig, BertForSequenceClassification
    cap(4, facts)
    start_history(max_entries=60000, facts=facts)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                     intermediate_size=3072, max_position_embeddings=2048, num_labels=2)
    m = BertForSequenceClassification(cfg).cuda().train()
    model_facts(m, facts)
    R.hf_cfg_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=2e-5)
    B, MAXLEN, STEPS = 8, 2048, 4
    rng = random.Random(0)
    g = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(STEPS):
        lens = [min(256, max(24, int(rng.gauss(100, 30)))) for _ in range(B)]
        ids = torch.zeros(B, MAXLEN, dtype=torch.long)
        am = torch.zeros(B, MAXLEN, dtype=torch.long)
        for i, n in enumerate(lens):
            ids[i, 0] = 101
            ids[i, 1:n - 1] = torch.randint(1000, 30000, (n - 2,), generator=g)
            ids[i, n - 1] = 102
            am[i, :n] = 1
        batches.append(dict(input_ids=ids, attention_mask=am, token_type_ids=torch.zeros_like(ids),
                            labels=torch.randint(2, (B,), generator=g), lens=lens))
    real = [sum(b["lens"]) / (B * MAXLEN) for b in batches]
    hd = cfg.hidden_size
    facts["settings"] = dict(
        kind="training (fine-tuning)", framework="transformers (own loop)", amp="bf16 autocast",
        optimizer="torch.optim.AdamW", microbatch=B, padding="max_length", max_length=MAXLEN,
        padded_tokens_per_batch=B * MAXLEN, real_lengths=[b["lens"] for b in batches],
        real_token_fraction=[round(r, 4) for r in real], mean_real_length=sum(sum(b["lens"]) for b in batches) / (B * STEPS),
        grad_checkpointing=False, hidden_state_bytes_fp32=B * MAXLEN * hd * 4,
        ffn_intermediate_bytes_bf16=B * MAXLEN * cfg.intermediate_size * 2,
        right_advice="activations of 16384 positions per batch dominate (capacity), but ~95% of them are padding: "
                     "pad each batch only to its longest example (padding='longest' / DataCollatorWithPadding, "
                     "length bucketing) instead of padding='max_length' to 2048; then, if still needed, a smaller "
                     "batch with accumulation or gradient checkpointing",
        report_must_not_say="a leak or growth; fragmentation / expandable segments as the fix; optimizer-state "
                            "offload, 8-bit optimizers or FSDP (the weights and state are small); no_grad")

    def body():
        for s, b in enumerate(batches):
            x = {k: v.cuda() for k, v in b.items() if k != "lens"}
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                loss = m(**x).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(loss), real_token_fraction=round(real[s], 4))
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 4. Lightning: val batch 8x train batch

def s_lightning_val_bigger_batch_oom(out, facts):
    """A Lightning (lightning.pytorch) LightningModule: a causal LM (token embedding 32000 x 512, 4 pre-LN SDPA
    blocks of width 512 / 8 heads, untied 512 x 32000 head, ~45 M params fp32), AdamW via
    configure_optimizers, Trainer(precision="bf16-mixed", max_epochs=1, limit_train_batches=6,
    limit_val_batches=4, num_sanity_val_steps=0, logger=False, enable_checkpointing=False,
    enable_progress_bar=False); train_dataloader batch_size=16, val_dataloader batch_size=128 ("no gradients
    in validation, so 8x the batch"), sequences of 256 tokens; the loss is F.cross_entropy over all positions'
    logits (upcast to float32 by autocast). Training fits; the first validation run (end of the epoch; inside
    fit() Lightning runs it under torch.no_grad(), with the parameters and the AdamW state resident; the
    gradients were set to None by zero_grad) needs the 128 x 256 x 32000 logits; 6 GiB allowed."""
    torch = R._torch()
    import lightning as L
    import torch.nn as nn
    import torch.nn.functional as F
    cap(6, facts)
    start_history(max_entries=60000, facts=facts)
    torch.manual_seed(0)
    V, D, H, NL, T, BT, BV = 32000, 512, 8, 4, 256, 16, 128
    Block = R.sdpa_block_cls(True)

    class LitLM(L.LightningModule):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(V, D)
            s.blocks = nn.ModuleList([Block(D, H) for _ in range(NL)])
            s.ln = nn.LayerNorm(D)
            s.head = nn.Linear(D, V, bias=False)

        def forward(s, idx):
            x = s.emb(idx)
            for b in s.blocks:
                x = b(x)
            return s.head(s.ln(x))

        def _loss(s, batch):
            (x,) = batch
            logits = s(x[:, :-1])
            return F.cross_entropy(logits.reshape(-1, V), x[:, 1:].reshape(-1))

        def training_step(s, batch, i):
            return s._loss(batch)

        def validation_step(s, batch, i):
            loss = s._loss(batch)
            s.log("val_loss", loss)
            return loss

        def configure_optimizers(s):
            return torch.optim.AdamW(s.parameters(), lr=3e-4)

    class Rec(L.Callback):
        def on_train_batch_end(s, trainer, pl_module, outputs, batch, batch_idx):
            loss = outputs["loss"] if isinstance(outputs, dict) else outputs
            steplog(facts, step=trainer.global_step, batch_idx=batch_idx, B=int(batch[0].shape[0]), loss=float(loss))

        def on_validation_start(s, trainer, pl_module):
            opt = trainer.optimizers[0]
            facts["optimizer_state_bytes_at_validation"] = R.opt_state_bytes(opt)
            facts["grads_resident_at_validation"] = sum(p.grad.numel() * p.grad.element_size()
                                                        for p in pl_module.parameters() if p.grad is not None)
            steplog(facts, key="validation", phase="validation starts")

        def on_validation_batch_start(s, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
            steplog(facts, key="validation", batch_idx=batch_idx, B=int(batch[0].shape[0]),
                    inference_mode=torch.is_inference_mode_enabled(), grad_enabled=torch.is_grad_enabled())

    g = torch.Generator().manual_seed(0)
    train = torch.utils.data.TensorDataset(torch.randint(V, (BT * 6, T + 1), generator=g))
    val = torch.utils.data.TensorDataset(torch.randint(V, (BV * 4, T + 1), generator=g))
    tl = torch.utils.data.DataLoader(train, batch_size=BT, shuffle=True)
    vl = torch.utils.data.DataLoader(val, batch_size=BV)
    model = LitLM()
    model_facts(model, facts)
    pb = facts["model_param_bytes"]
    facts["settings"] = dict(
        kind="training with validation (dies in validation)", framework="lightning Trainer (lightning.pytorch)",
        amp="bf16-mixed", optimizer="torch.optim.AdamW (configure_optimizers)", train_batch=BT, val_batch=BV,
        seq_len=T, vocab=V, limit_train_batches=6, limit_val_batches=4, num_sanity_val_steps=0,
        validation="Lightning's evaluation loop inside fit(): torch.no_grad() (grad disabled, not inference_mode)",
        val_logits_bytes_bf16=BV * T * V * 2, val_logits_bytes_fp32=BV * T * V * 4,
        train_logits_bytes_fp32=BT * T * V * 4, resident_training_state_bytes=pb * 3,
        right_advice="OOM in the validation loop (inference, no backward) with the training state resident "
                     "(parameters and AdamW state): the val_dataloader's batch (128, 8x the training "
                     "batch) makes the all-position logits too big; use a smaller validation batch size (e.g. "
                     "the training one), or compute the validation loss in chunks",
        report_must_not_say="a leak or growth; training-side advice as the fix (gradient checkpointing, "
                            "accumulation, smaller training batch, optimizer offload, FSDP); no_grad (the "
                            "validation already runs without gradients); fragmentation")
    tr = L.Trainer(accelerator="gpu", devices=1, max_epochs=1, limit_train_batches=6, limit_val_batches=4,
                   num_sanity_val_steps=0, precision="bf16-mixed", logger=False, enable_checkpointing=False,
                   enable_progress_bar=False, enable_model_summary=False, callbacks=[Rec()])
    run_oom(out, facts, lambda: tr.fit(model, tl, vl))


# ---------------------------------------------------------------- 5. two models serving, near the cap

def _two_models_serve(facts, rec, out=None):
    """The workload of two_models_infer_near_cap_healthy; returns nothing, logs when rec."""
    torch = R._torch()
    from transformers import BertConfig, BertModel, BertForSequenceClassification
    torch.manual_seed(0)
    ecfg = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                      intermediate_size=3072, max_position_embeddings=512)
    enc = BertModel(ecfg, add_pooling_layer=False).to(torch.bfloat16).cuda().eval()
    rcfg = BertConfig(vocab_size=30522, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                      intermediate_size=4096, max_position_embeddings=512, num_labels=1)
    rr = BertForSequenceClassification(rcfg).to(torch.bfloat16).cuda().eval()
    if rec:
        model_facts(enc, facts, key="encoder")
        model_facts(rr, facts, key="reranker")
        steplog(facts, key="requests", phase="both models loaded")
    rng = random.Random(1)
    g = torch.Generator().manual_seed(1)
    K, QL = 16, 32
    reqs = [(rng.choice([8, 16, 24, 32]), rng.choice([128, 192, 256, 320, 384, 448, 512])) for _ in range(30)]
    if rec:
        facts["requests"] = [dict(queries=q, pair_len=t, pairs=q * K) for q, t in reqs]
    with torch.inference_mode():
        for i, (nq, tp) in enumerate(reqs):
            q = torch.randint(1000, 30000, (nq, QL), generator=g)
            qe = enc(input_ids=q.cuda(), attention_mask=torch.ones(nq, QL, dtype=torch.long).cuda()).last_hidden_state
            qe = torch.nn.functional.normalize(qe.mean(1).float(), dim=-1)
            n = nq * K
            pairs = torch.randint(1000, 30000, (n, tp), generator=g)
            lens = torch.randint(tp // 2, tp + 1, (n,), generator=g)
            am = (torch.arange(tp)[None] < lens[:, None]).long()
            scores = rr(input_ids=pairs.cuda(), attention_mask=am.cuda()).logits.view(nq, K).float()
            top = scores.topk(4, dim=1).indices.cpu()
            qn = qe.norm(dim=-1).cpu()
            del qe, scores
            if rec:
                steplog(facts, key="requests", request=i, queries=nq, pairs=n, pair_len=tp, top0=int(top[0, 0]),
                        qnorm=round(float(qn[0]), 3))
    if out is not None:         # the snapshot of the service after its last request, both models resident
        facts["oom"] = False
        dump(out, facts)


def s_two_models_infer_probe(out, facts):
    """Calibration child of two_models_infer_near_cap_healthy (not a corpus run): the same workload, no cap, no
    history; writes the peaks to facts.json."""
    _two_models_serve(facts, rec=False)
    R._torch().cuda.synchronize()
    facts["probe_peak"] = mem()


def s_two_models_infer_near_cap_healthy(out, facts):
    """An inference service holding two HF models at once, both built from configs and cast to bf16, eval(),
    under torch.inference_mode(): a BertModel query encoder (12 layers, hidden 768, no pooler, ~109 M params)
    and a BERT-large-shaped cross-encoder reranker (BertForSequenceClassification, 24 layers, hidden 1024,
    16 heads, num_labels=1, ~335 M params); 30 requests (seeded): each embeds 8-32 queries of 32 tokens
    (mean-pooled, normalised) and reranks 16 candidates per query, all query x candidate pairs of one request
    (128-512 pairs of 128-512 tokens, dynamically padded to the request's length) in one reranker forward,
    top-4 to the CPU. The cap is the same workload's peak reserved (measured first in a child process, no cap,
    no history) times 1.05: the run's peak is close to but under it; the snapshot is dumped after the last
    request, both models still resident; healthy."""
    torch = R._torch()
    probe = os.path.join(out, "_probe")
    os.makedirs(probe, exist_ok=True)
    with open(os.path.join(probe, "console.log"), "w") as con:
        subprocess.run([sys.executable, os.path.abspath(__file__), "--one", "two_models_infer_probe", probe],
                       check=True, stdout=con, stderr=subprocess.STDOUT, timeout=150)
    with open(os.path.join(probe, "facts.json")) as f:
        pk = json.load(f)["probe_peak"]
    cap_bytes = int(pk["max_reserved"] * 1.05)
    cap(cap_bytes / GiB, facts)
    facts["probe_peak"] = pk
    start_history(max_entries=100000, facts=facts)
    facts["settings"] = dict(
        kind="inference (retrieval service: embedding + reranking)", framework="transformers (two models) forward",
        amp=None, weights="bf16", inference_mode=True, models=["BertModel encoder (12 x 768)",
                                                               "BertForSequenceClassification reranker (24 x 1024)"],
        requests=30, candidates_per_query=16, query_len=32, padding="dynamic (per request)",
        cap_rule="probe peak reserved (child, no cap) x 1.05", probe_peak_reserved=pk["max_reserved"],
        probe_peak_allocated=pk["max_allocated"],
        right_advice="healthy: nothing urgent; the peak reserved is close to the allowed memory (the largest "
                     "reranker forwards over all pairs of a request; the requests' varying shapes leave the cache "
                     "well above the peak allocated, so expandable segments is a fair secondary remark); if "
                     "headroom mattered, rerank the pairs in chunks",
        report_must_not_say="an OOM or OOM advice; a leak or growth (allocated returns to the two models' weights "
                            "after every request); no_grad (inference_mode is on); training advice "
                            "(checkpointing, accumulation, optimizer, FSDP)")
    _two_models_serve(facts, rec=True, out=out)
    facts["weights_bytes_both"] = facts.get("encoder_param_bytes", 0) + facts.get("reranker_param_bytes", 0)
    facts["settings"]["weights_bytes_both"] = facts["weights_bytes_both"]
    write_log(out)


# ---------------------------------------------------------------- 6. repeated (materialised) attention mask

def s_mask_repeat_materialized_oom(out, facts):
    """Training a custom 4-layer transformer encoder classifier (width 512, 8 heads, vocab 8192, 4096 positions, ~18.9 M params)
    with manual attention: the padding mask (attention_mask B x T, int64 as a tokenizer returns it) is built
    once per forward as `ext = attention_mask[:, None, None, :].repeat(1, H, T, 1).float()` then
    `ext = (1.0 - ext) * torch.finfo(torch.float32).min` (a B x H x T x T float32 tensor, 1.07 GB at B=2, T=4096;
    the int64 repeat is 2.15 GB on the way), and every layer does `scores = q @ k.transpose(-2, -1) /
    sqrt(64) + mask4; p = scores.softmax(-1); a = p @ v` under bf16 autocast; AdamW, batches of 2 documents
    padded to 4096 tokens; 4 GiB allowed."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    cap(4, facts)
    start_history(max_entries=40000, facts=facts)
    torch.manual_seed(0)
    V, D, H, NL, B, T = 8192, 512, 8, 4, 2, 4096
    hd = D // H

    class Layer(nn.Module):
        def __init__(s):
            super().__init__()
            s.ln1, s.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
            s.qkv = nn.Linear(D, 3 * D)
            s.o = nn.Linear(D, D)
            s.fc1, s.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

        def forward(s, x, mask4):
            b, t, _ = x.shape
            q, k, v = s.qkv(s.ln1(x)).view(b, t, 3, H, hd).permute(2, 0, 3, 1, 4)
            scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
            scores = scores + mask4
            p = scores.softmax(-1)
            a = (p @ v).transpose(1, 2).reshape(b, t, D)
            x = x + s.o(a)
            return x + s.fc2(F.gelu(s.fc1(s.ln2(x))))

    class Encoder(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(V, D)
            s.pos = nn.Embedding(T, D)
            s.layers = nn.ModuleList([Layer() for _ in range(NL)])
            s.ln = nn.LayerNorm(D)
            s.cls = nn.Linear(D, 4)

        def forward(s, ids, attention_mask):
            t = ids.shape[1]
            ext = attention_mask[:, None, None, :].repeat(1, H, t, 1).float()
            ext = (1.0 - ext) * torch.finfo(torch.float32).min
            mask4 = ext
            x = s.emb(ids) + s.pos(torch.arange(t, device=ids.device))
            for layer in s.layers:
                x = layer(x, mask4)
            m = attention_mask[..., None].to(x.dtype)
            return s.cls((s.ln(x) * m).sum(1) / m.sum(1))

    model = Encoder().cuda().train()
    model_facts(model, facts)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(0)
    n4 = B * H * T * T
    facts["settings"] = dict(
        kind="training", framework="plain PyTorch (manual attention)", amp="bf16 autocast",
        optimizer="torch.optim.AdamW", microbatch=B, seq_len=T, heads=H, layers=NL,
        mask_code="ext = attention_mask[:, None, None, :].repeat(1, H, T, 1).float(); "
                  "ext = (1.0 - ext) * torch.finfo(torch.float32).min",
        attention_mask_dtype="int64", materialized_mask_bytes_fp32=n4 * 4, repeat_int64_bytes=n4 * 8,
        scores_bytes_bf16_per_layer=n4 * 2, scores_plus_mask_bytes_fp32_per_layer=n4 * 4,
        softmax_bytes_fp32_per_layer=n4 * 4, sdpa=False,
        forward_needs_at_least_bytes=n4 * 4 + NL * (n4 * 4 + n4 * 2),
        expandable_segments="expandable_segments:True" in os.environ.get("PYTORCH_ALLOC_CONF", ""),
        right_advice="capacity of the attention's B x H x T x T tensors: the materialised, repeated float32 mask "
                     "(1.07 GB, made through a 2.15 GB int64 repeat and two 1.07 GB temporaries) and each layer's "
                     "T x T scores/softmax (1.61 GB kept per layer for the backward); keep the mask broadcastable "
                     "([B, 1, 1, T] bool, or expand() instead of repeat()) and use F.scaled_dot_product_attention "
                     "with that bool mask (a fused kernel: no T x T scores). Without expandable segments part of "
                     "the cache is free in pieces at the OOM (the split segments of the mask's temporaries), but "
                     "the forward needs over 7 GB under a 4 GiB cap: packing cannot save it",
        report_must_not_say="a leak or growth; fragmentation / expandable segments as the fix; optimizer-state "
                            "or FSDP advice (the model is 18.9 M params); no_grad; that the batch is the only lever")

    def body():
        for s in range(3):
            lens = torch.randint(T // 2, T + 1, (B,), generator=g)
            ids = torch.randint(1, V, (B, T), generator=g) * (torch.arange(T)[None] < lens[:, None])
            am = (torch.arange(T)[None] < lens[:, None]).long()
            y = torch.randint(4, (B,), generator=g)
            ids, am, y = ids.cuda(), am.cuda(), y.cuda()
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(ids, am), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(loss), lens=[int(v) for v in lens])
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 7. diffusion sampling keeping every step

def s_diffusion_keep_intermediates_oom(out, facts):
    """Inference: DDPM ancestral sampling (1000 steps, linear betas 1e-4..0.02) with a small pixel-space UNet
    written here (channels 64/128/256, two ResBlocks with GroupNorm/SiLU and a sinusoidal timestep embedding
    per level, stride-2 conv down, nearest-upsample + skip concatenation up, ~10.3 M params fp32), eval(),
    torch.no_grad() + bf16 autocast, 4 images of 3 x 512 x 512 (x in float32); for a progress GIF the loop
    keeps `intermediates.append(x.clone())` at every step: 12.58 MB per step on the GPU; 5 GiB allowed (the
    first step's forward alone peaks near 3.3 GB: its 192-channel GroupNorm at 512 x 512 is 805 MB)."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    cap(5, facts)
    start_history(max_entries=200000, facts=facts)
    torch.manual_seed(0)
    TE = 256

    def temb(t, dim=TE):
        half = dim // 2
        f = torch.exp(-math.log(10000) * torch.arange(half, device=t.device) / half)
        a = t.float()[:, None] * f[None]
        return torch.cat([a.sin(), a.cos()], 1)

    class Res(nn.Module):
        def __init__(s, ci, co):
            super().__init__()
            s.n1, s.c1 = nn.GroupNorm(8, ci), nn.Conv2d(ci, co, 3, padding=1)
            s.t = nn.Linear(TE, co)
            s.n2, s.c2 = nn.GroupNorm(8, co), nn.Conv2d(co, co, 3, padding=1)
            s.skip = nn.Conv2d(ci, co, 1) if ci != co else nn.Identity()

        def forward(s, x, e):
            h = s.c1(F.silu(s.n1(x)))
            h = h + s.t(e)[:, :, None, None]
            h = s.c2(F.silu(s.n2(h)))
            return h + s.skip(x)

    class UNet(nn.Module):
        def __init__(s, ch=(64, 128, 256)):
            super().__init__()
            s.temb = nn.Sequential(nn.Linear(TE, TE), nn.SiLU(), nn.Linear(TE, TE))
            s.stem = nn.Conv2d(3, ch[0], 3, padding=1)
            s.down = nn.ModuleList()
            s.pool = nn.ModuleList()
            c = ch[0]
            for i, co in enumerate(ch):
                s.down.append(nn.ModuleList([Res(c, co), Res(co, co)]))
                c = co
                s.pool.append(nn.Conv2d(c, c, 3, stride=2, padding=1) if i < len(ch) - 1 else nn.Identity())
            s.mid = nn.ModuleList([Res(c, c), Res(c, c)])
            s.up = nn.ModuleList()
            for i, co in reversed(list(enumerate(ch))):
                s.up.append(nn.ModuleList([Res(c + co, co), Res(co, co)]))
                c = co
            s.out = nn.Sequential(nn.GroupNorm(8, c), nn.SiLU(), nn.Conv2d(c, 3, 3, padding=1))

        def forward(s, x, t):
            e = s.temb(temb(t))
            h = s.stem(x)
            skips = []
            for blocks, pool in zip(s.down, s.pool):
                for b in blocks:
                    h = b(h, e)
                skips.append(h)
                h = pool(h)
            for b in s.mid:
                h = b(h, e)
            for blocks in s.up:
                sk = skips.pop()
                if h.shape[-1] != sk.shape[-1]:
                    h = F.interpolate(h, size=sk.shape[-2:], mode="nearest")
                h = blocks[0](torch.cat([h, sk], 1), e)
                h = blocks[1](h, e)
            return s.out(h)

    net = UNet().cuda().eval()
    model_facts(net, facts)
    NS, B, HW = 1000, 4, 512
    betas = torch.linspace(1e-4, 0.02, NS, device="cuda")
    alphas = 1 - betas
    abar = torch.cumprod(alphas, 0)
    latent_bytes = B * 3 * HW * HW * 4
    facts["settings"] = dict(
        kind="inference (diffusion sampling)", framework="plain PyTorch (own UNet, DDPM loop)",
        amp="bf16 autocast", no_grad=True, batch=B, image=HW, channels=3, sampling_steps=NS,
        kept="intermediates.append(x.clone()) every step (GPU, float32)", kept_bytes_per_step=latent_bytes,
        kept_bytes_if_finished=latent_bytes * NS,
        right_advice="the kept per-step images grow by 12.58 MB every sampling step until OOM (a leak within the "
                     "sampling loop): keep them on the CPU (x.cpu() / to a pinned buffer) or keep only every "
                     "k-th step (or write the GIF frames as they come)",
        report_must_not_say="a capacity problem fixed by a smaller batch or lower resolution first; training "
                            "advice (gradient checkpointing, accumulation, optimizer, FSDP); no_grad (it is on); "
                            "fragmentation / expandable segments as the fix")
    intermediates = []
    facts["steps_done"] = 0

    def body():
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            x = torch.randn(B, 3, HW, HW, device="cuda")
            for i, t in enumerate(reversed(range(NS))):
                tt = torch.full((B,), t, device="cuda", dtype=torch.long)
                eps = net(x, tt).float()
                x = (x - betas[t] / torch.sqrt(1 - abar[t]) * eps) / torch.sqrt(alphas[t])
                if t > 0:
                    x = x + torch.sqrt(betas[t]) * torch.randn_like(x)
                intermediates.append(x.clone())
                facts["steps_done"] = i + 1
                if i % 25 == 0:
                    steplog(facts, step=i, t=t, kept=len(intermediates), kept_bytes=len(intermediates) * latent_bytes)
        return x
    try:
        run_oom(out, facts, body)
    finally:
        facts["kept_at_end"] = len(intermediates)
        facts["kept_bytes_at_end"] = len(intermediates) * latent_bytes


# ---------------------------------------------------------------- 8. another process takes the GPU mid-run

OTHER_PROC = r"""
import json, os, sys, time, torch
keep, ready, stop, parent = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
torch.empty(1, device="cuda")
torch.cuda.synchronize()
free, total = torch.cuda.mem_get_info()
n = ((free - keep) // (2 << 20)) * (2 << 20)
x = torch.empty(n, dtype=torch.uint8, device="cuda")
x[: 1 << 20].fill_(1)
torch.cuda.synchronize()
free2, _ = torch.cuda.mem_get_info()
with open(ready + ".tmp", "w") as f:
    json.dump(dict(pid=os.getpid(), free_before=free, total=total, took=n, free_after=free2,
                   reserved=torch.cuda.memory_reserved()), f)
os.rename(ready + ".tmp", ready)
t0 = time.time()
while not os.path.exists(stop) and time.time() - t0 < 240 and os.getppid() == parent:
    time.sleep(0.1)
"""


def s_other_process_grows_midrun_oom(out, facts):
    """Plain PyTorch training with no memory cap: a 6-layer SDPA GPT (width 1024, 16 heads, vocab 8192,
    ~92.4 M params), AdamW, bf16 autocast, microbatch 8 x 1024, calling torch.cuda.empty_cache() at the end
    of every step (as many scripts do "to keep memory tidy"): its own footprint is the same every step (the
    same peak reserved, back to the same reserved after each step). After its 3rd step (steps 0-2 done) a
    SECOND process (another user's job, python -c with torch, started with subprocess) allocates one tensor of
    all the GPU's free memory (torch.cuda.mem_get_info) except 60% of what one step of this run needs on top
    of its weights and AdamW state; the run waits until it holds that memory, then step 3 dies although this
    run's own reserved memory did not grow. The second process is stopped after the OOM."""
    torch = R._torch()
    start_history(max_entries=60000, facts=facts)
    torch.manual_seed(0)
    m = R.tiny_gpt(vocab=8192, d=1024, h=16, L=6).cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B, T, START_AFTER = 8, 1024, 3
    facts["settings"] = dict(
        kind="training", framework="plain PyTorch (own loop)", amp="bf16 autocast", optimizer="torch.optim.AdamW",
        microbatch=B, seq_len=T, vocab=8192, memory_fraction=None, empty_cache_each_step=True,
        other_process="a second python/torch process on the same GPU, started after step index 2, holding one "
                      "tensor of (free memory - 0.6 x this run's per-step need)",
        right_advice="the memory is held outside this process (another process on the same GPU took it "
                     "mid-run); this run's own footprint did not grow: find and stop (or move) the other process "
                     "(nvidia-smi), or give each job its own GPU; not a smaller batch",
        report_must_not_say="a capacity problem of this run fixed by a smaller batch, gradient checkpointing or "
                            "accumulation; a leak or growth of this process; fragmentation / expandable segments "
                            "as the fix; optimizer offload / FSDP")
    ready = os.path.join(out, "_other.ready")
    stop = os.path.join(out, "_other.stop")
    child = {}

    def body():
        for s in range(10):
            loss = R.gpt_step(m, opt, B, T, vocab=8192)
            peak = torch.cuda.max_memory_reserved()
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            steplog(facts, step=s, loss=float(loss), reserved_after_empty_cache=torch.cuda.memory_reserved(),
                    free=torch.cuda.mem_get_info()[0])
            facts.setdefault("max_reserved_so_far", []).append(peak)
            if s == START_AFTER - 1:
                base = torch.cuda.memory_reserved()
                need = peak - base
                keep = int(0.6 * need)
                free_before = torch.cuda.mem_get_info()[0]
                env = {k: v for k, v in os.environ.items() if k not in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")}
                p = subprocess.Popen([sys.executable, "-c", OTHER_PROC, str(keep), ready, stop, str(os.getpid())],
                                     env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                child["p"] = p
                t0 = time.time()
                while not os.path.exists(ready) and p.poll() is None and time.time() - t0 < 90:
                    time.sleep(0.1)
                info = json.load(open(ready)) if os.path.exists(ready) else dict(error=f"child rc={p.poll()}")
                facts["other_process"] = dict(started_after_step=s, keep_free_target=keep, **info)
                facts["main_before_other"] = dict(reserved_after_empty_cache=base, step_peak_reserved=peak,
                                                  per_step_need=need, free_before_other=free_before,
                                                  free_after_other=torch.cuda.mem_get_info()[0],
                                                  allocated=torch.cuda.memory_allocated())
                R.log(f"[monitor] another process (pid {info.get('pid')}) now holds "
                      f"{info.get('took', 0) / GiB:.2f} GiB on this GPU; free {torch.cuda.mem_get_info()[0] / GiB:.2f} GiB")
    try:
        run_oom(out, facts, body)
    finally:
        p = child.get("p")
        if p is not None:
            open(stop, "w").close()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            facts["other_process_rc"] = p.returncode
        for f in (ready, stop):
            if os.path.exists(f):
                os.remove(f)


# ---------------------------------------------------------------- 9. Llama, gradient checkpointing on, 16k

def s_hf_llama_gradckpt_longseq_oom(out, facts):
    """HF LlamaForCausalLM from a config (4 layers, hidden 2048, inter 5632, 16 heads / 4 KV heads, vocab 32000,
    max_position_embeddings 16384, sdpa, ~311 M params) cast to bf16 (model.to(torch.bfloat16), no autocast),
    `model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})` ON and
    use_cache=False, AdamW, one sequence of 16384 tokens per step, `loss = model(input_ids=ids,
    labels=ids).loss` (transformers' loss upcasts the logits to float32); 5 GiB allowed."""
    torch = R._torch()
    cap(5, facts)
    start_history(max_entries=60000, facts=facts)
    torch.manual_seed(0)
    m = R.hf_llama(L=4, d=2048, inter=5632, heads=16, kv=4, vocab=32000, maxpos=16384)
    m.config.use_cache = False
    m = m.to(torch.bfloat16).cuda().train()
    m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model_facts(m, facts)
    R.hf_cfg_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-5)
    B, T, V = 1, 16384, 32000
    facts["settings"] = dict(
        kind="training", framework="transformers (own loop)", amp=None, weights="bf16 (model.to(torch.bfloat16))",
        optimizer="torch.optim.AdamW", microbatch=B, seq_len=T, grad_checkpointing=True,
        gradient_checkpointing_kwargs={"use_reentrant": False}, use_cache=False,
        attn_implementation=getattr(m.config, "_attn_implementation", None),
        logits_bytes_bf16=B * T * V * 2, logits_bytes_fp32=B * T * V * 4,
        checkpoint_boundary_bytes_per_layer=B * T * 2048 * 2,
        right_advice="capacity at a long sequence with gradient checkpointing already on: the vocabulary "
                     "projection dominates (logits 16384 x 32000: 1.05 GB bf16, 2.10 GB as float32, and the "
                     "float32 log-softmax of the loss); compute the loss in chunks / a fused linear cross-entropy "
                     "(no full float32 logits), or shorter sequences",
        report_must_not_say="enable gradient/activation checkpointing (it is on); a leak or growth; "
                            "fragmentation / expandable segments as the fix; optimizer-state advice as the first "
                            "lever (it dies in the first step, before AdamW has state); no_grad; FSDP")

    def body():
        for s in range(3):
            ids = torch.randint(V, (B, T), device="cuda")
            loss = m(input_ids=ids, labels=ids).loss
            steplog(facts, key="phases", step=s, phase="forward done")
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(loss))
    run_oom(out, facts, body)


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "two_models_infer_near_cap_healthy": dict(fn=s_two_models_infer_near_cap_healthy, group="solo", timeout=240),
    "two_models_infer_probe": dict(fn=s_two_models_infer_probe, group="solo", timeout=150),
    "hf_generate_output_scores_oom": dict(fn=s_hf_generate_output_scores_oom, group="solo", timeout=150),
    "keep_all_checkpoints_leak_oom": dict(fn=s_keep_all_checkpoints_leak_oom, group="solo", timeout=150),
    "hf_bert_pad_max_length_oom": dict(fn=s_hf_bert_pad_max_length_oom, group="solo", timeout=120),
    "lightning_val_bigger_batch_oom": dict(fn=s_lightning_val_bigger_batch_oom, group="solo", timeout=150),
    "mask_repeat_materialized_oom": dict(fn=s_mask_repeat_materialized_oom, group="solo", timeout=120),
    "mask_repeat_materialized_expandable_oom": dict(fn=s_mask_repeat_materialized_oom, group="solo", timeout=120,
                                                    env={"PYTORCH_ALLOC_CONF": "expandable_segments:True"},
                                                    doc=s_mask_repeat_materialized_oom.__doc__.rstrip()[:-1] +
                                                    ", PYTORCH_ALLOC_CONF=expandable_segments:True."),
    "diffusion_keep_intermediates_oom": dict(fn=s_diffusion_keep_intermediates_oom, group="solo", timeout=150),
    "other_process_grows_midrun_oom": dict(fn=s_other_process_grows_midrun_oom, group="solo", timeout=180),
    "hf_llama_gradckpt_longseq_oom": dict(fn=s_hf_llama_gradckpt_longseq_oom, group="solo", timeout=120),
})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    R.main()
