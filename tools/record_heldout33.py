#!/usr/bin/env python3
"""A thirty-third held-out set (python3 record_heldout33.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Structure as set 32 (tools/record_heldout32.py): every corpus run is "solo"
(alone on the GPU); the <run>__<variant> scenarios are the same run with the fix a report proposes
(H33_VARIANT), whose results `--collect OUTDIR` writes into each run's facts.json as fix_probes
(record_runs.collect_fix_probes). The OOM observer dumps at every out-of-memory failure (the same path each
time): the snapshot is the last failure's, the one raised. facts["settings"] says, beside the run's settings and
key byte counts, the right first advice ("right_advice") and what a report must not say ("report_must_not_say"),
decided from how the run is built."""
import collections, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log


R.attach_oom = R.attach_oom_every  # run_oom attaches this one
VARIANT = os.environ.get("H33_VARIANT", "")


def tiny_gpt_params(vocab, d, L):
    """record_runs.tiny_gpt's parameter count (embedding, L SDPA blocks, final LayerNorm, untied head)."""
    block = (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d) + 4 * d
    return 2 * vocab * d + L * block + 2 * d


# ---------------------------------------------------------------- 1. a bounded prefix cache, then one long request

PC_V, PC_D, PC_H, PC_L = 8192, 1024, 16, 4
PC_B, PC_P, PC_S, PC_LONG, PC_KEEP, PC_CHUNKS, PC_CAP = 32, 512, 512, 4096, 16, 8, 1.25
# prefix of each request: 16 new ones (the cache fills), then 8 new ones (each evicts the oldest) alternating with
# 8 hits on recent ones (the cache stays at 16 entries), then the long request (a hit on prefix 23)
PC_PREFIXES = list(range(16)) + [x for k in range(8) for x in (16 + k, 15 - k)]
PC_LONG_PREFIX = 23


def s_prefix_cache_bounded_then_long_request_oom(out, facts):
    """A small LM server with prefix caching: record_runs.tiny_gpt (4 SDPA blocks of width 1024, 16 heads, vocab
    8192, 67.2 M params, 128 MiB in bf16), eval(), torch.inference_mode(), bf16 weights (no autocast). Each request
    is a shared 512-token prefix (a system prompt, one of many) plus a batch of 32 suffixes; the prefix's keys and
    values of every layer are kept on the GPU in an LRU collections.OrderedDict bounded at 16 entries (the oldest
    evicted; one entry 4 layers x K,V x 512 x 1024 x 2 B = 8 MiB, 128 MiB full) and the suffixes attend to them
    (causal_lower_right); the server returns the next token of each suffix. Requests 0-15 bring 16 new prefixes
    (the cache fills, +8 MiB a request); requests 16-31 alternate a new prefix (evicting the oldest) and a hit on
    a recent one: the cache stays at 16 entries, allocated between requests flat. A normal request is 32 x 512
    suffix tokens: hidden 32 MiB, qkv 96 MiB, keys / values with the prefix 64 MiB each, MLP hidden (fc1 output
    and GELU output) 128 MiB each: ~320 MiB transient, ~576 MiB in all with the weights and the full cache.
    Request 32 (a hit on prefix 23) has suffixes 8 times longer, 32 x 4096: hidden 256 MiB, qkv 768 MiB, keys /
    values 288 MiB each, MLP hidden 1 GiB each: ~2.3 GiB transient, ~2.5 GiB in all. 1.25 GiB allowed (2.2 x a
    normal request's peak, half of the long one's): it dies at the first block's qkv projection (768 MiB asked
    with ~0.75 GiB held). Probes: the long request as 8 chunks of 4 sequences along the batch (__chunk, ~0.55
    GiB), or its suffixes truncated to their last 512 tokens, the usual length (__truncate)."""
    torch = R._torch()
    import torch.nn.functional as F
    try:
        from torch.nn.attention.bias import causal_lower_right
    except ImportError:
        causal_lower_right = None
    cap(PC_CAP, facts)
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    facts["variant"] = VARIANT or None
    m = R.tiny_gpt(vocab=PC_V, d=PC_D, h=PC_H, L=PC_L).to(torch.bfloat16).cuda().eval()
    model_facts(m, facts)
    dh = PC_D // PC_H
    entry = PC_L * 2 * PC_P * PC_D * 2
    hid = PC_B * PC_S * PC_D * 2
    hid_long = PC_B * PC_LONG * PC_D * 2
    facts["settings"] = dict(
        kind="inference (LM serving with a bounded prefix cache)", framework="own loop (record_runs.tiny_gpt "
        "blocks, per-layer K/V of the prefix cached)", amp=None, dtype="bfloat16", grad="torch.inference_mode",
        d_model=PC_D, heads=PC_H, layers=PC_L, vocab=PC_V, weight_bytes=tiny_gpt_params(PC_V, PC_D, PC_L) * 2,
        batch=PC_B, prefix_len=PC_P, suffix_len=PC_S, long_suffix_len=PC_LONG, normal_requests=len(PC_PREFIXES),
        long_request_index=len(PC_PREFIXES), prefixes=PC_PREFIXES + [PC_LONG_PREFIX],
        cache="collections.OrderedDict LRU, max %d entries, oldest evicted" % PC_KEEP,
        cache_entry_bytes=entry, cache_bytes_full=entry * PC_KEEP,
        hidden_bytes_normal=hid, qkv_bytes_normal=3 * hid, mlp_hidden_bytes_normal=4 * hid,
        kv_with_prefix_bytes_normal=PC_B * (PC_P + PC_S) * PC_D * 2,
        hidden_bytes_long=hid_long, qkv_bytes_long=3 * hid_long, mlp_hidden_bytes_long=4 * hid_long,
        kv_with_prefix_bytes_long=PC_B * (PC_P + PC_LONG) * PC_D * 2, cap_bytes=int(PC_CAP * GiB),
        long_request_chunks=PC_CHUNKS if VARIANT == "chunk" else None,
        long_request_truncated_to=PC_S if VARIANT == "truncate" else None,
        right_advice="capacity of one request: the last request's suffixes are 8 times longer than any before "
                     "(32 x 4096 tokens; its qkv alone is 768 MiB and its MLP hidden 1 GiB, ~2.3 GiB of "
                     "activations under a 1.25 GiB cap) while every normal request peaked near 0.56 GiB; split "
                     "the long request into smaller batches (fix_probes __chunk: 8 chunks of 4 sequences fit) "
                     "or cap the request length (__truncate). The prefix cache (16 entries of 8 MiB, 128 MiB) "
                     "is bounded: it fills over the first 16 requests and stays flat, not a leak",
        report_must_not_say="a leak or growth as the cause, or clearing / shrinking the prefix cache as the fix "
                            "(it is an LRU bounded at 16 entries, flat for the 16 requests before the OOM); "
                            "fragmentation / expandable segments first; no_grad (inference_mode is on); "
                            "training advice (checkpointing, accumulation, optimizer state)")
    facts["attn_bias"] = "causal_lower_right" if causal_lower_right else "bool mask (tril)"

    def bias(tq, tk):
        if causal_lower_right is not None:
            return causal_lower_right(tq, tk)
        return torch.ones(tq, tk, dtype=torch.bool, device="cuda").tril(tk - tq)

    def encode_prefix(ids):
        """ids (1, P) -> the prefix's keys and values of every layer, one (L, 2, 1, heads, P, dh) tensor."""
        x = m.emb(ids)
        B, T, D = x.shape
        kvs = []
        for b in m.blocks:
            q, k, v = b.qkv(b.ln1(x)).view(B, T, 3, b.h, dh).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            kvs.append(torch.stack([k, v]))
            del q, k, v
            x = x + b.proj(a.transpose(1, 2).reshape(B, T, D))
            del a
            x = x + b.fc2(F.gelu(b.fc1(b.ln2(x))))
        return torch.stack(kvs)

    def answer(ids, kv):
        """ids (B, S) after the cached prefix kv -> the next token of each sequence (B,)."""
        x = m.emb(ids)
        B, T, D = x.shape
        mask = bias(T, PC_P + T)
        for l, b in enumerate(m.blocks):
            q, k, v = b.qkv(b.ln1(x)).view(B, T, 3, b.h, dh).permute(2, 0, 3, 1, 4)
            k = torch.cat([kv[l, 0].expand(B, -1, -1, -1), k], 2)
            v = torch.cat([kv[l, 1].expand(B, -1, -1, -1), v], 2)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            del q, k, v
            x = x + b.proj(a.transpose(1, 2).reshape(B, T, D))
            del a
            x = x + b.fc2(F.gelu(b.fc1(b.ln2(x))))
        return m.head(m.ln(x[:, -1])).argmax(-1)

    g = torch.Generator(device="cuda").manual_seed(0)
    cache = collections.OrderedDict()
    replies = []

    def serve(i, pid, S):
        with torch.inference_mode():
            hit = pid in cache
            if hit:
                cache.move_to_end(pid)
            else:
                pg = torch.Generator(device="cuda").manual_seed(1000 + pid)
                cache[pid] = encode_prefix(torch.randint(PC_V, (1, PC_P), device="cuda", generator=pg))
                if len(cache) > PC_KEEP:
                    cache.popitem(last=False)
            kv = cache[pid]
            ids = torch.randint(PC_V, (PC_B, S), device="cuda", generator=g)
            if S > PC_S and VARIANT == "truncate":
                ids = ids[:, -PC_S:]
            if S > PC_S and VARIANT == "chunk":
                nxt = torch.cat([answer(c, kv) for c in ids.chunk(PC_CHUNKS)])
            else:
                nxt = answer(ids, kv)
            replies.append(nxt.cpu())
            del kv, ids, nxt
        steplog(facts, key="requests", request=i, prefix=pid, hit=hit, batch=PC_B, suffix_len=S, cached=len(cache),
                cache_bytes=sum(t.numel() * t.element_size() for t in cache.values()))

    def body():
        for i, pid in enumerate(PC_PREFIXES):
            serve(i, pid, PC_S)
        serve(len(PC_PREFIXES), PC_LONG_PREFIX, PC_LONG)
        facts["replies"] = sum(int(r.numel()) for r in replies)
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 2. a GPU copy of the weights every 6 steps, kept

SD_V, SD_D, SD_H, SD_L = 8192, 512, 8, 4
SD_B, SD_T, SD_STEPS, SD_EVERY, SD_AT = 16, 256, 40, 6, 4   # copies after steps 4, 10, 16, 22, 28, 34


def s_stepped_state_dict_gpu_leak_healthy(out, facts):
    """Training with "best checkpoint" candidates kept on the GPU: record_runs.tiny_gpt (4 SDPA blocks of width
    512, 8 heads, vocab 8192, 21.0 M params fp32, 80 MiB), AdamW, bf16 autocast, batches of 16 x 256 random
    tokens, 40 steps, no cap. Every 6 steps (after steps 4, 10, 16, 22, 28, 34) it evaluates a held-out batch
    under torch.no_grad() and appends {k: v.clone() for k, v in model.state_dict().items()} (a full GPU copy of
    the weights, 80 MiB) with its validation loss to a list that is never trimmed (the best is to be picked from
    it at the end): allocated between steps rises in steps of 80 MiB every 6 steps, 6 copies (480 MiB) at the
    end, on top of ~240 MiB of weights and AdamW state. The snapshot is taken after step 39, 5 steps after the
    last copy (a flat stretch shorter than the spacing). No OOM: a leak nonetheless."""
    torch = R._torch()
    import torch.nn.functional as F
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    m = R.tiny_gpt(vocab=SD_V, d=SD_D, h=SD_H, L=SD_L).cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=3e-4)
    copy_bytes = sum(v.numel() * v.element_size() for v in m.state_dict().values())
    copy_steps = [s for s in range(SD_STEPS) if s % SD_EVERY == SD_AT]
    facts["settings"] = dict(
        kind="training (GPU copies of the weights kept as checkpoint candidates)", framework="own loop "
        "(record_runs.tiny_gpt)", amp="bf16 autocast", optimizer="torch.optim.AdamW", batch=SD_B, seq_len=SD_T,
        vocab=SD_V, steps=SD_STEPS, copy_every_steps=SD_EVERY, copy_after_steps=copy_steps,
        bytes_per_copy=copy_bytes, copies_at_snapshot=len(copy_steps), kept_bytes_at_snapshot=copy_bytes *
        len(copy_steps), steps_after_last_copy=SD_STEPS - 1 - copy_steps[-1], memory_fraction=None,
        right_advice="a leak of kept weight copies: every 6 steps a full GPU copy of the state_dict (80 MiB, "
                     "{k: v.clone()}) is appended to a list that is never trimmed, so allocated between steps "
                     "grows in steps of one parameter copy every 6 steps (6 copies, 480 MiB, at the snapshot) "
                     "and would keep growing with training; keep the copies on the CPU (v.detach().cpu() / "
                     "torch.save) or keep only the best one. No OOM yet",
        report_must_not_say="an OOM or OOM advice; healthy / bounded / plateau without naming the growth (the "
                            "last 5 steps are flat only because the next copy is due at step 40); capacity "
                            "advice (a smaller batch, checkpointing, FSDP, optimizer state as the problem); a "
                            "kept autograd graph (the copies are detached state_dict tensors)")
    g = torch.Generator(device="cuda").manual_seed(0)
    val = torch.randint(SD_V, (SD_B, SD_T + 1), device="cuda", generator=g)
    kept = []
    for s in range(SD_STEPS):
        x = torch.randint(SD_V, (SD_B, SD_T + 1), device="cuda", generator=g)
        with torch.amp.autocast("cuda", dtype=torch.bfloat16):
            logits = m(x[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, SD_V), x[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        lv = float(loss)
        del x, logits, loss
        if s % SD_EVERY == SD_AT:
            with torch.no_grad(), torch.amp.autocast("cuda", dtype=torch.bfloat16):
                vl = float(F.cross_entropy(m(val[:, :-1]).float().reshape(-1, SD_V), val[:, 1:].reshape(-1)))
            kept.append(dict(step=s, val_loss=vl, state={k: v.clone() for k, v in m.state_dict().items()}))
            steplog(facts, key="phases", step=s, phase="weights copy kept", val_loss=vl, kept=len(kept))
        steplog(facts, step=s, loss=lv, kept=len(kept), kept_bytes=copy_bytes * len(kept))
    facts["optimizer_state_bytes"] = R.opt_state_bytes(opt)
    facts["oom"] = False
    dump(out, facts)
    write_log(out)
    facts["best_copy_step"] = min(kept, key=lambda c: c["val_loss"])["step"]


# ---------------------------------------------------------------- 3. Lightning: test_step keeps every batch's logits

LT_V, LT_B, LT_T, LT_BATCHES, LT_CAP = 8192, 16, 256, 64, 2


def s_lightning_test_step_outputs_oom(out, facts):
    """Evaluation only with Lightning: a LightningModule causal LM (record_runs.tiny_gpt: 4 SDPA blocks of width
    512, 8 heads, vocab 8192, 21.0 M params fp32, 80 MiB), trainer.test(model, dataloaders=...) and no fit,
    Trainer(precision="bf16-mixed"), 64 test batches of 16 x 256 tokens; test_step computes and logs the loss
    (fp32 logits and log-softmax, 128 MiB each, transient) and appends its full logits (16 x 256 x 8192 bf16 =
    64 MiB, no graph: Lightning tests under inference_mode) with the labels to self.test_outputs, used only in
    on_test_epoch_end (an accuracy over all batches). 2 GiB allowed: the kept logits reach the cap after ~25
    batches (~1.6 GiB kept + weights + one batch's ~0.3 GiB of transients) and it dies partway through the test
    epoch; all 64 batches would keep 4 GiB. Probe: append logits.argmax(-1) (16 x 256 int64, 32 KiB) instead
    (__argmax)."""
    torch = R._torch()
    import lightning as L
    import torch.nn.functional as F
    cap(LT_CAP, facts)
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    facts["variant"] = VARIANT or None

    class LitLM(L.LightningModule):
        def __init__(s):
            super().__init__()
            s.net = R.tiny_gpt(vocab=LT_V, d=512, h=8, L=4)
            s.test_outputs = []

        def test_step(s, batch, i):
            x = batch[0]
            logits = s.net(x[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, LT_V), x[:, 1:].reshape(-1))
            s.log("test_loss", loss)
            s.test_outputs.append((logits.argmax(-1) if VARIANT == "argmax" else logits, x[:, 1:]))
            steplog(facts, key="eval_batches", batch=i, kept=len(s.test_outputs),
                    kept_bytes=sum(o.numel() * o.element_size() for o, _ in s.test_outputs))
            return loss

        def on_test_epoch_end(s):
            preds = torch.cat([(o.argmax(-1) if o.dim() == 3 else o).reshape(-1) for o, _ in s.test_outputs])
            labels = torch.cat([y.reshape(-1) for _, y in s.test_outputs])
            s.log("test_acc", (preds == labels).float().mean())
            steplog(facts, key="phases", phase="test epoch end", kept=len(s.test_outputs))

    gen = torch.Generator().manual_seed(0)
    dl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(
        torch.randint(LT_V, (LT_B * LT_BATCHES, LT_T + 1), generator=gen)), batch_size=LT_B)
    tr = L.Trainer(accelerator="gpu", devices=1, precision="bf16-mixed", logger=False, enable_checkpointing=False,
                   enable_progress_bar=False, enable_model_summary=False)
    model = LitLM()
    model_facts(model, facts)
    per_batch = LT_B * LT_T * LT_V * 2
    facts["settings"] = dict(
        kind="evaluation only (trainer.test, no fit)", framework="lightning Trainer", amp="bf16-mixed",
        grad="inference_mode (Lightning's test loop)", test_batch=LT_B, seq_len=LT_T, vocab=LT_V,
        test_batches=LT_BATCHES, kept_bytes_per_test_batch_bf16=per_batch,
        kept_bytes_all_batches_bf16=per_batch * LT_BATCHES, loss_transient_bytes_fp32=2 * 2 * per_batch,
        kept="logits.argmax(-1)" if VARIANT == "argmax" else "full logits", cap_bytes=LT_CAP * GiB,
        right_advice="the kept test outputs: test_step appends every batch's full logits (16 x 256 x 8192 bf16, "
                     "64 MiB; no graph, Lightning tests under inference_mode) to self.test_outputs for "
                     "on_test_epoch_end, so memory grows by 64 MiB a batch until the 2 GiB cap partway through "
                     "the test epoch; keep only what the epoch end needs per batch (the argmax, fix_probes "
                     "__argmax runs all 64 batches, or the per-batch metric) or move the outputs to the CPU",
        report_must_not_say="training advice (gradient accumulation, activation checkpointing, optimizer state, "
                            "a smaller training batch: nothing trains); no_grad / inference_mode as the fix "
                            "(Lightning's test already runs under inference_mode, the kept logits have no "
                            "graph); fragmentation / expandable segments; the growth as autograd graphs")

    def body():
        tr.test(model, dataloaders=dl, verbose=False)
        facts["after_test"] = R.mem()
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 4. batches sorted by length, rising peaks, healthy

SL_V, SL_B, SL_N = 30522, 32, 20
SL_LENS = [32 * round((64 + i * (1024 - 64) / (SL_N - 1)) / 32) for i in range(SL_N)]   # 64, 128, ..., 1024


def s_sorted_by_length_infer_healthy(out, facts):
    """Embedding extraction over a dataset sorted by length (less padding): HF BertModel from a config (6 layers,
    hidden 768, 12 heads, intermediate 3072, max positions 1024, ~67 M params, 128 MiB in fp16), .half(), eval(),
    torch.inference_mode(); 20 batches of 32 sequences whose length rises 64, 128, 160, ... 1024 (no padding in a
    batch); each batch's last_hidden_state is mean-pooled and the 32 x 768 vector moved to the CPU. No cap. The
    peak is reset before each batch (torch.cuda.reset_peak_memory_stats) and logged after it: each batch's peak
    is higher than the last (its activations scale with the length: hidden 3 MiB at 64, 48 MiB at 1024,
    intermediate 4 times that), allocated between batches flat (the weights). Snapshot after the last batch.
    Healthy."""
    torch = R._torch()
    from transformers import BertConfig, BertModel
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    m = BertModel(BertConfig(hidden_size=768, num_hidden_layers=6, num_attention_heads=12, intermediate_size=3072,
                             vocab_size=SL_V, max_position_embeddings=1024)).half().cuda().eval()
    model_facts(m, facts)
    R.hf_cfg_facts(m, facts)
    facts["settings"] = dict(
        kind="inference (embedding extraction, batches sorted by ascending length)", framework="transformers "
        "BertModel (own loop)", amp=None, dtype="float16", grad="torch.inference_mode", batch=SL_B,
        seq_lens=SL_LENS, hidden_bytes_first=SL_B * SL_LENS[0] * 768 * 2,
        hidden_bytes_last=SL_B * SL_LENS[-1] * 768 * 2,
        outputs="mean-pooled 32 x 768 per batch, .cpu()", peak_reset_each_batch=True, memory_fraction=None,
        right_advice="healthy: nothing urgent; each batch's peak is higher than the last because the batches "
                     "are sorted by ascending length (64 up to 1024 tokens), and allocated between batches stays "
                     "flat at the weights (the pooled outputs go to the CPU): rising peaks that follow the "
                     "input lengths, not a leak",
        report_must_not_say="a leak or growth (live memory between batches is flat); an OOM or OOM advice; "
                            "warning-level fragmentation (cached blocks of the earlier, smaller batches are the "
                            "allocator's cache); no_grad (inference_mode is on); training advice")
    g = torch.Generator(device="cuda").manual_seed(0)
    pooled = []
    for i, t in enumerate(SL_LENS):
        torch.cuda.reset_peak_memory_stats()
        with torch.inference_mode():
            ids = torch.randint(1000, SL_V, (SL_B, t), device="cuda", generator=g)
            mask = torch.ones_like(ids)
            h = m(input_ids=ids, attention_mask=mask).last_hidden_state
            v = (h.float() * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
            pooled.append(v.cpu())
            del ids, mask, h, v
        steplog(facts, key="batches", batch=i, seq_len=t, batch_size=SL_B,
                batch_peak=torch.cuda.max_memory_allocated())
    facts["pooled_rows"] = sum(int(p.shape[0]) for p in pooled)
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


# ---------------------------------------------------------------- collecting the fix probes

def collect(root):
    """Write each corpus run's <run>__<variant> results into its facts.json as fix_probes."""
    R.collect_fix_probes(root, CORPUS_RUNS, "tools/record_heldout33.py",
                         counts=("steps", "phases", "batches", "eval_batches", "requests"), cap_bytes=True,
                         retries=True)


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "prefix_cache_bounded_then_long_request_oom": dict(fn=s_prefix_cache_bounded_then_long_request_oom,
                                                       group="solo", timeout=90),
    "stepped_state_dict_gpu_leak_healthy": dict(fn=s_stepped_state_dict_gpu_leak_healthy, group="solo",
                                                timeout=90),
    "lightning_test_step_outputs_oom": dict(fn=s_lightning_test_step_outputs_oom, group="solo", timeout=90),
    "sorted_by_length_infer_healthy": dict(fn=s_sorted_by_length_infer_healthy, group="solo", timeout=90),
})
CORPUS_RUNS = list(R.SCENARIOS)
VARIANTS = [("prefix_cache_bounded_then_long_request_oom", "chunk"),
            ("prefix_cache_bounded_then_long_request_oom", "truncate"),
            ("lightning_test_step_outputs_oom", "argmax")]
for _n, _v in VARIANTS:
    R.SCENARIOS[_n + "__" + _v] = dict(R.SCENARIOS[_n], env={"H33_VARIANT": _v})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--collect":
        collect(sys.argv[2])
        sys.exit(0)
    if len(sys.argv) == 2 and sys.argv[1] != "--one":
        sys.argv += CORPUS_RUNS + [n for n in R.SCENARIOS if "__" in n]
    R.main()
