#!/usr/bin/env python3
"""A thirty-first held-out set (python3 record_heldout31.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Structure as set 30 (tools/record_heldout30.py): every corpus run is "solo"
(alone on the GPU); the <run>__<variant> scenarios are the same run with the fix a report proposes
(H31_VARIANT, and for __expandable PYTORCH_CUDA_ALLOC_CONF too), whose results `--collect OUTDIR` writes into
each run's facts.json as fix_probes; frag_probe is a calibration child started by its parent with --one (not a
corpus run). The OOM observer dumps at every out-of-memory failure (the same path each time): the snapshot is the
last failure's, the one raised. facts["settings"] says, beside the run's settings and key byte counts, the right
first advice ("right_advice") and what a report must not say ("report_must_not_say"), decided from how the run is
built (for the fragmentation run, finalised by --collect from its calibration and its fix probe)."""
import collections, json, math, os, random, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log
from record_runs import run_child


R.attach_oom = R.attach_oom_every  # run_oom attaches this one
VARIANT = os.environ.get("H31_VARIANT", "")


def peaks():
    torch = R._torch()
    st = torch.cuda.memory_stats()
    return dict(peak_allocated=torch.cuda.max_memory_allocated(), peak_reserved=torch.cuda.max_memory_reserved(),
                num_alloc_retries=st.get("num_alloc_retries"), num_ooms=st.get("num_ooms"))


# ---------------------------------------------------------------- 1. an embedding server keeping its last responses

FR_REQS, FR_KEEP, FR_V = 60, 8, 30522
FR_FACTORS = [1.3, 1.18, 1.1, 1.05]   # of the uncapped native peak allocated, tried from the largest down
FR_RUN = "bert_server_kept_outputs_fragmentation_oom"


def _fr_shapes():
    rng = random.Random(0)
    return [(rng.randint(1, 96), rng.choice(range(64, 513, 32))) for _ in range(FR_REQS)]


def _fr_server(facts, record):
    """HF BertModel from a config (8 layers, hidden 1024, 16 heads, inter 4096, ~134 M params) in fp16, eval(),
    each request under torch.inference_mode(); requests of (batch 1-96) x (length 64-512) drawn (seeded); each
    response's last_hidden_state (batch x length x 1024 fp16, up to 96 MiB) is kept in a
    collections.deque(maxlen=8) of the last 8 responses (a bounded cache: the oldest is dropped)."""
    torch = R._torch()
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    m = BertModel(BertConfig(hidden_size=1024, num_hidden_layers=8, num_attention_heads=16, intermediate_size=4096,
                             vocab_size=FR_V, max_position_embeddings=512)).half().cuda().eval()
    if record:
        model_facts(m, facts)
        R.hf_cfg_facts(m, facts)
    g = torch.Generator(device="cuda").manual_seed(0)
    shapes = _fr_shapes()

    def body():
        kept = collections.deque(maxlen=FR_KEEP)
        for i, (b, t) in enumerate(shapes):
            with torch.inference_mode():
                ids = torch.randint(1000, FR_V, (b, t), device="cuda", generator=g)
                h = m(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state
                kept.append(h)
                del ids, h
            if record:
                steplog(facts, key="requests", request=i, batch=b, seq_len=t, kept=len(kept),
                        kept_bytes=sum(x.numel() * x.element_size() for x in kept))
    return body


def s_frag_probe(out, facts):
    """Calibration child of bert_server_kept_outputs_fragmentation_oom (not a corpus run): the same server loop,
    no history, under H31_CAP_BYTES (0: uncapped), the allocator settings the parent gave."""
    torch = R._torch()
    capb = int(os.environ.get("H31_CAP_BYTES", "0"))
    if capb:
        cap(capb / GiB, facts)
    facts["alloc_conf"] = os.environ.get("PYTORCH_CUDA_ALLOC_CONF")
    body = _fr_server(facts, False)
    try:
        body()
        facts["fits"] = True
    except torch.OutOfMemoryError as e:
        facts["fits"] = False
        facts["msg"] = str(e)[:400]
    facts.update(peaks())


def s_bert_server_kept_outputs_fragmentation_oom(out, facts):
    """An embedding server: HF BertModel from a config (8 layers, hidden 1024, 16 heads, inter 4096, ~134 M
    params, fp16, eval(), torch.inference_mode()), 60 requests of drawn (batch 1-96) x (length 64-512) tokens
    (seeded), each response's last_hidden_state (fp16, up to 96 MiB) kept in a deque of the last 8 (bounded) for
    follow-up requests: long-lived blocks of varying size interleaved with each request's varying transients. The
    cap is calibrated in fresh child processes (frag_probe): the uncapped native run's peak allocated times
    1.3, 1.18, 1.1, 1.05 (from the largest down); the run uses the first (largest) at which a fresh native
    process runs out, else the smallest. Probe: the same cap with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
    (__expandable). The right advice is decided by the probe (--collect writes it)."""
    torch = R._torch()
    facts["variant"] = VARIANT or None
    capfile = os.path.join(os.path.dirname(out), "frag_cap.txt")
    if not VARIANT:
        u = run_child(out, "frag_probe", {}, timeout=60, tag="_probe_uncapped")
        P = u.get("peak_allocated") or 2 * GiB
        fresh, pick = [], None
        for f in FR_FACTORS:
            capb = (int(P * f) // (2 * MiB)) * 2 * MiB
            ch = run_child(out, "frag_probe", {"H31_CAP_BYTES": str(capb)}, timeout=60,
                           tag="_probe_native_%d" % round(f * 100))
            fresh.append(dict(factor=f, cap=capb, fits=ch.get("fits"), peak_reserved=ch.get("peak_reserved"),
                              peak_allocated=ch.get("peak_allocated"), retries=ch.get("num_alloc_retries"),
                              msg=ch.get("msg"), rc=ch.get("child_rc")))
            if ch.get("fits") is False:
                pick = dict(factor=f, cap=capb, rule="largest factor at which a fresh native process runs out")
                break
        if pick is None:
            f = FR_FACTORS[-1]
            pick = dict(factor=f, cap=(int(P * f) // (2 * MiB)) * 2 * MiB,
                        rule="no factor made a fresh native process run out: the smallest")
        facts["calibration"] = dict(uncapped=dict((k, u.get(k)) for k in ("fits", "peak_allocated", "peak_reserved",
                                                                          "num_alloc_retries", "child_rc")),
                                    native_fresh=fresh, pick=pick)
        capb = int(pick["cap"])
        with open(capfile, "w") as fh:
            fh.write(str(capb))
    else:
        try:
            with open(capfile) as fh:
                capb = int(fh.read())
        except OSError:
            capb = 2 * GiB
    cap(capb / GiB, facts)
    start_history(max_entries=100000, facts=facts)
    cal = facts.get("calibration") or {}
    facts["shapes"] = _fr_shapes()
    facts["settings"] = dict(
        kind="inference (an embedding server: variable-size requests, a bounded cache of the last 8 responses)",
        framework="transformers BertModel (own loop)", amp=None, dtype="float16 weights",
        grad="torch.inference_mode", requests=FR_REQS, batch_range=[1, 96], seq_range=[64, 512], kept_responses=FR_KEEP,
        largest_response_bytes=96 * 512 * 1024 * 2, cap_bytes=capb,
        alloc_conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
        uncapped_peak_allocated=(cal.get("uncapped") or {}).get("peak_allocated"),
        uncapped_peak_reserved=(cal.get("uncapped") or {}).get("peak_reserved"),
        cap_factor_of_uncapped_peak_allocated=(cal.get("pick") or {}).get("factor"),
        right_advice="decided by fix_probes (--collect writes it): fragmentation if this run runs out and "
                     "__expandable (the same cap with expandable_segments:True) fits",
        report_must_not_say="a leak or growth (the kept responses are a deque of 8: bounded); no_grad "
                            "(inference_mode is on); training advice (checkpointing, accumulation, optimizer "
                            "state); FSDP / offload")
    run_oom(out, facts, _fr_server(facts, True))


def _finalize_frag(facts, rows):
    st = facts.setdefault("settings", {})
    exp = [r for r in rows if r.get("probe", "").endswith("__expandable")]
    e = exp[0] if exp else {}
    native_oom = facts.get("oom")
    exp_fits = e.get("oom") is False
    if native_oom and exp_fits:
        adv = ("fragmentation: the server's live tensors (weights, the 8 kept responses and one request's "
               "transients) fit the cap, but responses of varying size kept between requests pin cached segments "
               "whose free remainder is cut into pieces too small for the next large request; "
               "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (fix_probes __expandable fits at the same cap), "
               "or bucketing request shapes / moving kept responses to the CPU")
    elif native_oom:
        adv = ("capacity near the cap: expandable_segments:True did NOT fit at this cap either "
               "(fix_probes __expandable ran out): fragmentation is not the whole story; smaller requests (cap the "
               "batch x length) or fewer kept responses / keep them on the CPU")
    else:
        adv = ("healthy: nothing urgent; the server finished under the calibrated cap (no fresh native process ran "
               "out at any factor tried, or this one did not)")
    st["right_advice"] = adv
    st["right_advice_decided_by"] = dict(native_oom=native_oom, expandable_probe_oom=e.get("oom"),
                                         rule="fix_probes __expandable")
    if not native_oom:
        st["report_must_not_say"] = ("an OOM or OOM advice; a leak or growth (the kept responses are bounded); "
                                     "no_grad; training advice; warning-level fragmentation")


# ---------------------------------------------------------------- 2. accelerate evaluation gathering full logits

AE_B, AE_T, AE_V, AE_TRAIN, AE_EVAL, AE_CAP = 4, 256, 50257, 3, 48, 4


def s_accelerate_eval_gather_logits_oom(out, facts):
    """HF accelerate (Accelerator(mixed_precision="bf16"); model, optimizer and both DataLoaders through
    accelerator.prepare), a GPT-2 from a config (6 layers, n_embd 768, vocab 50257, ~82 M params fp32), AdamW,
    3 training steps of 4 x 256, then an evaluation loop as the accelerate examples write it (model.eval(),
    torch.no_grad()) over 48 batches of 4 x 256 that keeps, for metrics at the end, every batch's
    `accelerator.gather_for_metrics(outputs.logits)` in a Python list on the GPU: 4 x 256 x 50257 logits a batch
    (196 MiB in float32; accelerate converts a mixed-precision model's outputs to float32: facts
    eval_logits_dtype and settings.kept_bytes_per_batch say what was kept). 4 GiB allowed. It dies part-way through
    the evaluation. Probe: gather the argmax token ids instead (__argmax, 8 KiB a batch)."""
    torch = R._torch()
    from accelerate import Accelerator
    from transformers import GPT2Config, GPT2LMHeadModel
    from torch.utils.data import DataLoader, TensorDataset
    cap(AE_CAP, facts)
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    facts["variant"] = VARIANT or None
    acc = Accelerator(mixed_precision="bf16")
    model = GPT2LMHeadModel(GPT2Config(n_layer=6, n_embd=768, n_head=12, vocab_size=AE_V, n_positions=1024))
    model_facts(model, facts)
    R.hf_cfg_facts(model, facts)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    gen = torch.Generator().manual_seed(0)
    tr_dl = DataLoader(TensorDataset(torch.randint(AE_V, (AE_B * AE_TRAIN, AE_T), generator=gen)), batch_size=AE_B)
    ev_dl = DataLoader(TensorDataset(torch.randint(AE_V, (AE_B * AE_EVAL, AE_T), generator=gen)), batch_size=AE_B)
    model, opt, tr_dl, ev_dl = acc.prepare(model, opt, tr_dl, ev_dl)
    facts["settings"] = dict(
        kind="training then evaluation (the evaluation is where it dies)",
        framework="HF accelerate (own loop, accelerator.gather_for_metrics)", amp="bf16 (Accelerator mixed_precision)",
        optimizer="torch.optim.AdamW", microbatch=AE_B, seq_len=AE_T, vocab=AE_V, train_steps=AE_TRAIN,
        eval_batches=AE_EVAL, eval_grad="torch.no_grad + model.eval()",
        kept_per_eval_batch="argmax ids" if VARIANT == "argmax" else "gather_for_metrics(outputs.logits)",
        kept_bytes_per_batch_fp32=AE_B * AE_T * AE_V * 4, cap_bytes=AE_CAP * GiB,
        right_advice="growth of kept evaluation outputs (no graph: no_grad is on): every eval batch's gathered "
                     "logits (4 x 256 x 50257: 196 MiB in float32, as accelerate's mixed precision returns them; 98 "
                     "MiB if bf16: settings.kept_dtype says which) stay in a Python list on the GPU until the "
                     "metrics at the end; reduce them per batch before gathering (argmax / the per-token loss: "
                     "fix_probes __argmax runs all 48 batches) or move each gathered batch to the CPU",
        report_must_not_say="no_grad / inference_mode as the fix (no_grad is on; the kept tensors have no graph); "
                            "capacity advice first (a smaller batch, checkpointing, accumulation, FSDP / offload, "
                            "optimizer state); fragmentation / expandable segments; the growth as autograd graphs")

    def body():
        model.train()
        for s, (x,) in enumerate(tr_dl):
            o = model(input_ids=x, labels=x)
            acc.backward(o.loss)
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(o.loss))
            del o
        model.eval()
        kept, losses = [], []
        with torch.no_grad():
            for i, (x,) in enumerate(ev_dl):
                o = model(input_ids=x, labels=x)
                lg = o.logits.argmax(-1) if VARIANT == "argmax" else o.logits
                kept.append(acc.gather_for_metrics(lg))
                losses.append(acc.gather_for_metrics(o.loss.reshape(1).repeat(x.shape[0])))
                if i == 0:
                    facts["eval_logits_dtype"] = str(o.logits.dtype)
                    facts["settings"]["kept_bytes_per_batch"] = kept[-1].numel() * kept[-1].element_size()
                    facts["settings"]["kept_dtype"] = str(kept[-1].dtype)
                steplog(facts, key="eval_batches", batch=i, kept=len(kept))
                del o, lg
            ids = torch.cat(kept) if VARIANT == "argmax" else torch.cat([k.argmax(-1) for k in kept])
            facts["eval_ppl"] = math.exp(min(50.0, float(torch.cat(losses).float().mean())))
            facts["eval_tokens"] = int(ids.numel())
        steplog(facts, key="phases", phase="metrics done")
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 3. Lightning: a big validation batch, healthy

LV_V, LV_TB, LV_VB, LV_T, LV_STEPS = 8192, 8, 64, 512, 8


def s_lightning_val_big_batch_cache_healthy(out, facts):
    """A LightningModule causal LM (record_runs.tiny_gpt: 4 SDPA blocks of width 768, 12 heads, vocab 8192, ~41 M
    params fp32), Trainer(precision="bf16-mixed", max_steps=8, val_check_interval=4, limit_val_batches=2,
    num_sanity_val_steps=0), AdamW, training batches of 8 x 512 and validation batches of 64 x 512 (8 times the
    tokens: the validation's logits and their float32 copy for the loss are 0.5 + 1 GiB); validation runs after
    training batch 4; no cap. A Callback dumps the snapshot at the end of the last training batch (batch 8, four
    steps after the validation): the cache the validation left is still reserved, mostly unallocated, and
    training reuses pieces of it. Healthy."""
    torch = R._torch()
    import lightning as L
    import torch.nn.functional as F
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)

    class LitLM(L.LightningModule):
        def __init__(s):
            super().__init__()
            s.net = R.tiny_gpt(vocab=LV_V, d=768, h=12, L=4)

        def _loss(s, batch):
            x = batch[0]
            logits = s.net(x[:, :-1])
            return F.cross_entropy(logits.float().reshape(-1, LV_V), x[:, 1:].reshape(-1))

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
            steplog(facts, step=trainer.global_step, batch_idx=batch_idx, loss=float(loss))
            if trainer.global_step >= trainer.max_steps and not os.path.exists(os.path.join(out, "snapshot.pickle")):
                dump(out, facts)

        def on_validation_end(s, trainer, pl_module):
            steplog(facts, key="phases", phase="validation end", step=trainer.global_step)

    gen = torch.Generator().manual_seed(0)
    tl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(
        torch.randint(LV_V, (LV_TB * LV_STEPS, LV_T + 1), generator=gen)), batch_size=LV_TB)
    vl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(
        torch.randint(LV_V, (LV_VB * 2, LV_T + 1), generator=gen)), batch_size=LV_VB)
    tr = L.Trainer(accelerator="gpu", devices=1, max_steps=LV_STEPS, precision="bf16-mixed", val_check_interval=4,
                   limit_val_batches=2, num_sanity_val_steps=0, logger=False, enable_checkpointing=False,
                   enable_progress_bar=False, enable_model_summary=False, callbacks=[Rec()])
    model = LitLM()
    model_facts(model, facts)
    facts["settings"] = dict(
        kind="training with a validation pass", framework="lightning Trainer", amp="bf16-mixed",
        optimizer="torch.optim.AdamW", microbatch=LV_TB, val_batch=LV_VB, seq_len=LV_T, vocab=LV_V,
        max_steps=LV_STEPS, val_check_interval=4, limit_val_batches=2, memory_fraction=None, alloc_conf=None,
        val_logits_bytes_bf16=LV_VB * LV_T * LV_V * 2, val_logits_bytes_fp32=LV_VB * LV_T * LV_V * 4,
        right_advice="healthy: nothing urgent; the reserved-but-unallocated memory at the snapshot is the cache "
                     "the validation pass (64 x 512, 8 times the training tokens: bf16 logits 0.5 GiB and their "
                     "float32 copy 1 GiB) left behind, reused by training and by the next validation; allocated "
                     "between steps is flat (weights and AdamW state)",
        report_must_not_say="an OOM or OOM advice; a leak or growth; warning-level fragmentation or expandable "
                            "segments / empty_cache as needed; no_grad (validation runs under Lightning's "
                            "inference_mode); a smaller batch, checkpointing or FSDP")
    tr.fit(model, train_dataloaders=tl, val_dataloaders=vl)
    facts["after_fit"] = R.mem()
    if not os.path.exists(os.path.join(out, "snapshot.pickle")):
        facts["dumped_after_fit"] = True
        dump(out, facts)
    facts["oom"] = False
    write_log(out)


# ---------------------------------------------------------------- 4. a chat server keeping every session's KV cache

KV_REQ, KV_B, KV_T, KV_NEW, KV_CAP, KV_LRU, KV_V = 16, 8, 2048, 16, 3, 2, 32000


def _cache_bytes(c):
    torch = R._torch()
    try:
        n = 0
        for layer in getattr(c, "layers", None) or []:
            for t in (getattr(layer, "keys", None), getattr(layer, "values", None)):
                if torch.is_tensor(t):
                    n += t.numel() * t.element_size()
        if not n:
            for lst in (getattr(c, "key_cache", None) or [], getattr(c, "value_cache", None) or []):
                n += sum(t.numel() * t.element_size() for t in lst if torch.is_tensor(t))
        return n
    except Exception:  # noqa: BLE001
        return None


def s_hf_chat_session_kv_cache_leak_oom(out, facts):
    """A chat server: HF LlamaForCausalLM from a config (4 layers, hidden 1024, 16 heads with 16 KV heads, inter
    2816, vocab 32000, untied, ~117 M params) cast to bf16, eval(), torch.inference_mode(); each request is a new
    session of 8 prompts of 2048 tokens answered by greedy generate(max_new_tokens=16, return_dict_in_generate=
    True), and the server keeps `sessions[sid] = out.past_key_values` (the DynamicCache, 2 x 4 layers x 8 x 16
    heads x 2063 positions x 64 x 2 B = 258 MiB a session) for the session's next turn, never evicting. 16
    requests, 3 GiB allowed: memory between requests grows by one cache a request until it dies part-way
    through the 16. Probe: keep only the 2 most recent sessions (__lru)."""
    torch = R._torch()
    from transformers import LlamaConfig, LlamaForCausalLM
    cap(KV_CAP, facts)
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    facts["variant"] = VARIANT or None
    cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=4, num_attention_heads=16,
                      num_key_value_heads=16, vocab_size=KV_V, max_position_embeddings=4096,
                      tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).to(torch.bfloat16).cuda().eval()
    model_facts(model, facts)
    R.hf_cfg_facts(model, facts)
    per_session = 2 * 4 * KV_B * 16 * (KV_T + KV_NEW - 1) * 64 * 2
    facts["settings"] = dict(
        kind="inference (a multi-session chat server: generate, then keep the session's KV cache)",
        framework="transformers generate() (DynamicCache)", amp=None, dtype="bf16 weights",
        grad="torch.inference_mode", requests=KV_REQ, batch=KV_B, prompt_len=KV_T, max_new_tokens=KV_NEW,
        kept="every session's past_key_values" if VARIANT != "lru" else "the %d most recent sessions" % KV_LRU,
        kv_bytes_per_session=per_session, cap_bytes=KV_CAP * GiB,
        right_advice="a leak of kept KV caches: the server stores every session's past_key_values (a DynamicCache "
                     "of 258 MiB: 8 x 2063 positions x 4 layers x K and V of 16 x 64 bf16) in a dict and never "
                     "evicts, so memory between requests grows by one cache a request until the cap; bound it "
                     "(an LRU of a few sessions: fix_probes __lru serves all 16 requests), offload idle caches to "
                     "the CPU, or re-prefill on the next turn",
        report_must_not_say="no_grad (inference_mode is on); training advice (checkpointing, accumulation, "
                            "optimizer state, FSDP); fragmentation / expandable segments; a smaller batch or "
                            "fewer new tokens as the first fix (one request fits easily)")
    g = torch.Generator(device="cuda").manual_seed(0)

    def body():
        sessions = collections.OrderedDict()
        for i in range(KV_REQ):
            with torch.inference_mode():
                ids = torch.randint(3, KV_V, (KV_B, KV_T), device="cuda", generator=g)
                o = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=KV_NEW,
                                   min_new_tokens=KV_NEW, do_sample=False, pad_token_id=0,
                                   return_dict_in_generate=True)
                c = getattr(o, "past_key_values", None)
                if c is None:   # not returned: build the session's cache as a server would, from the base model
                    facts["cache_from"] = "model.model(sequences, use_cache=True)"
                    c = model.model(input_ids=o.sequences, use_cache=True).past_key_values
                sessions["session%d" % i] = dict(cache=c, tokens=o.sequences[:, KV_T:])
                if VARIANT == "lru":
                    while len(sessions) > KV_LRU:
                        sessions.popitem(last=False)
                del ids, o, c
            if i == 0:
                facts["cache_type"] = type(sessions["session0"]["cache"]).__name__
                facts["kv_bytes_first_session"] = _cache_bytes(sessions["session0"]["cache"])
            steplog(facts, key="requests", request=i, sessions=len(sessions))
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 5. HF gradient checkpointing off after eval()

GE_L, GE_B, GE_T, GE_STEPS, GE_EVAL_AT = 12, 8, 1024, 5, 2
GE_MARGIN = 1 * GiB


def s_hf_gradckpt_eval_mode_left_oom(out, facts):
    """Own training loop on HF LlamaForCausalLM from a config (12 layers, hidden 1024, inter 2816, 16/4 heads,
    vocab 32000, ~200 M params fp32) with model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=
    {"use_reentrant": False}), use_cache=False, bf16 autocast, AdamW, microbatch 8 x 1024. Steps 0 and 1 run
    uncapped; then the cap is set to the peak reserved so far + 1 GiB (rounded down to 64 MiB). Before step 2 an
    evaluation (model.eval(), torch.no_grad(), 2 batches, .item()) runs, and the loop never calls model.train()
    again: HF's GradientCheckpointingLayer checkpoints only `if self.gradient_checkpointing and self.training`, so
    from step 2 every layer saves its activations (checkpointing still enabled, silently inactive) and the step
    dies. Probe: model.train() after the evaluation (__train_mode), the same cap rule."""
    torch = R._torch()
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    facts["variant"] = VARIANT or None
    m = R.hf_llama(L=GE_L).cuda()
    m.config.use_cache = False
    m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    m.train()
    model_facts(m, facts)
    R.hf_cfg_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    facts["settings"] = dict(
        kind="training (with an evaluation between steps 1 and 2)", framework="transformers (own loop)",
        amp="bf16 autocast", optimizer="torch.optim.AdamW", microbatch=GE_B, seq_len=GE_T, steps=GE_STEPS,
        grad_checkpointing="model.gradient_checkpointing_enable(use_reentrant=False)", eval_before_step=GE_EVAL_AT,
        train_called_after_eval=VARIANT == "train_mode", cap_rule="peak reserved after step 1 + 1 GiB",
        right_advice="gradient checkpointing silently off: it is enabled, and steps 0-1 ran checkpointed, but "
                     "the evaluation before step 2 left the model in eval() mode and the loop never calls "
                     "model.train() again; HF decoder layers checkpoint only while self.training, so step 2 "
                     "keeps every layer's activations and needs far more than steps 0-1 did at the same batch. "
                     "Call model.train() after the evaluation (fix_probes __train_mode runs all 5 steps under "
                     "the same cap rule)",
        report_must_not_say="a leak or growth across steps (it is one step's activations); fragmentation / "
                            "expandable segments; no_grad (it is training); FSDP / offload / optimizer-state "
                            "advice; a smaller batch as the first fix (the same batch fitted in steps 0-1); "
                            "mixed precision (autocast is on)")
    g = torch.Generator(device="cuda").manual_seed(0)

    def ckpt_active():
        return bool(getattr(m.model.layers[0], "gradient_checkpointing", False) and m.training)

    def step(s):
        x = torch.randint(32000, (GE_B, GE_T), device="cuda", generator=g)
        with torch.amp.autocast("cuda", dtype=torch.bfloat16):
            loss = m(input_ids=x, labels=x, use_cache=False).loss
        steplog(facts, key="phases", step=s, phase="forward done", training=m.training, ckpt_active=ckpt_active())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        steplog(facts, step=s, loss=float(loss), training=m.training, ckpt_active=ckpt_active())

    def evaluate():
        m.eval()
        vals = []
        with torch.no_grad():
            for j in range(2):
                x = torch.randint(32000, (GE_B, GE_T), device="cuda", generator=g)
                with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                    vals.append(m(input_ids=x, labels=x, use_cache=False).loss.item())
                steplog(facts, key="eval_batches", batch=j, loss=vals[-1])
        facts["eval_loss"] = sum(vals) / len(vals)
        if VARIANT == "train_mode":
            m.train()

    def body():
        for s in range(GE_STEPS):
            if s == GE_EVAL_AT:
                capb = ((torch.cuda.max_memory_reserved() + GE_MARGIN) // (64 * MiB)) * 64 * MiB
                cap(capb / GiB, facts)
                facts["settings"]["cap_bytes"] = capb
                facts["settings"]["peak_reserved_steps_0_1"] = torch.cuda.max_memory_reserved()
                facts["settings"]["peak_allocated_steps_0_1"] = torch.cuda.max_memory_allocated()
                steplog(facts, key="phases", step=s, phase="cap set", cap_bytes=capb)
                evaluate()
            step(s)
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 6. accelerate CPU offload for generation, healthy

OF_L, OF_GPU_LAYERS, OF_B, OF_T, OF_NEW = 8, 4, 4, 256, 32


def s_accelerate_offload_generate_healthy(out, facts):
    """Big-model inference with HF accelerate's dispatch: a LlamaForCausalLM from a config (8 layers, hidden 2048,
    inter 5632, 16/4 heads, vocab 32000, untied, ~492 M params) in bf16, dispatched with
    accelerate.dispatch_model and an explicit device_map: embeddings, layers 0-3, the final norm, the rotary
    embedding and lm_head on GPU 0, layers 4-7 on "cpu" (offloaded: accelerate's AlignDevicesHook copies each
    offloaded layer's weights, ~90 MB, to the GPU before its forward and drops them after). Greedy
    generate(max_new_tokens=32) on 4 prompts of 256 tokens under torch.inference_mode(); no cap. The snapshot is
    dumped after generation: healthy (the repeated weight-sized allocations are the offload hooks)."""
    torch = R._torch()
    from accelerate import dispatch_model
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=OF_L, num_attention_heads=16,
                      num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048,
                      tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    model_facts(model, facts)
    R.hf_cfg_facts(model, facts)
    dm = {}
    for name, _ in model.model.named_children():
        if name == "layers":
            for i in range(OF_L):
                dm["model.layers.%d" % i] = 0 if i < OF_GPU_LAYERS else "cpu"
        else:
            dm["model." + name] = 0
    for name, _ in model.named_children():
        if name != "model":
            dm[name] = 0
    layer_bytes = sum(p.numel() * p.element_size() for p in model.model.layers[0].parameters())
    facts["device_map"] = dm
    start_history(max_entries=100000, facts=facts)
    torch.cuda.init()
    model = dispatch_model(model, device_map=dm)
    rot = getattr(model.model, "rotary_emb", None)
    if rot is not None and any(not b.is_cuda for b in rot.buffers()):
        rot.to("cuda")   # its inv_freq is a non-persistent buffer: make sure it sits with the inputs
        facts["rotary_moved_by_script"] = True
    steplog(facts, key="phases", phase="dispatched")
    facts["settings"] = dict(
        kind="inference (generate with part of the model offloaded to the CPU)",
        framework="transformers generate() + accelerate.dispatch_model (CPU offload)", amp=None,
        dtype="bf16 weights", grad="torch.inference_mode", batch=OF_B, prompt_len=OF_T, max_new_tokens=OF_NEW,
        gpu_layers=OF_GPU_LAYERS, cpu_layers=OF_L - OF_GPU_LAYERS, offloaded_layer_bytes=layer_bytes,
        memory_fraction=None, alloc_conf=None,
        right_advice="healthy: nothing urgent; half the decoder layers are offloaded to the CPU by accelerate, and "
                     "each forward copies an offloaded layer's weights (~90 MB) to the GPU and frees them after "
                     "(the repeated weight-sized allocations in accelerate/hooks.py); memory returns to the "
                     "resident weights and the KV cache after each token. Offloading costs speed, not memory: with "
                     "the GPU this empty, more layers could stay on it",
        report_must_not_say="an OOM or OOM advice; a leak or growth (the uploads are freed every layer); no_grad "
                            "(inference_mode is on); training advice; warning-level fragmentation")
    g = torch.Generator(device="cuda").manual_seed(0)
    with torch.inference_mode():
        ids = torch.randint(3, 32000, (OF_B, OF_T), device="cuda", generator=g)
        o = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=OF_NEW, min_new_tokens=OF_NEW,
                           do_sample=False, pad_token_id=0)
        facts["generated_shape"] = list(o.shape)
        steplog(facts, key="phases", phase="generated")
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


# ---------------------------------------------------------------- collecting the fix probes

def collect(root):
    """Write each corpus run's <run>__<variant> results into its facts.json as fix_probes (and the fragmentation
    run's right advice, decided by its probe)."""
    R.collect_fix_probes(root, CORPUS_RUNS, "tools/record_heldout31.py", counts=("steps", "phases", "requests", "eval_batches"), cap_bytes=True, retries=True,
                         note_what="the variant or allocator setting named", finalize={FR_RUN: _finalize_frag})


R.SCENARIOS.clear()
R.SCENARIOS.update({
    FR_RUN: dict(fn=s_bert_server_kept_outputs_fragmentation_oom, group="solo", timeout=300),
    "accelerate_eval_gather_logits_oom": dict(fn=s_accelerate_eval_gather_logits_oom, group="solo", timeout=90),
    "lightning_val_big_batch_cache_healthy": dict(fn=s_lightning_val_big_batch_cache_healthy, group="solo",
                                                  timeout=90),
    "hf_chat_session_kv_cache_leak_oom": dict(fn=s_hf_chat_session_kv_cache_leak_oom, group="solo", timeout=90),
    "hf_gradckpt_eval_mode_left_oom": dict(fn=s_hf_gradckpt_eval_mode_left_oom, group="solo", timeout=90),
    "accelerate_offload_generate_healthy": dict(fn=s_accelerate_offload_generate_healthy, group="solo", timeout=120),
})
CORPUS_RUNS = list(R.SCENARIOS)
R.SCENARIOS["frag_probe"] = dict(fn=s_frag_probe, group="solo", timeout=60)
VARIANTS = [("accelerate_eval_gather_logits_oom", "argmax"), ("hf_chat_session_kv_cache_leak_oom", "lru"),
            ("hf_gradckpt_eval_mode_left_oom", "train_mode")]
for _n, _v in VARIANTS:
    R.SCENARIOS[_n + "__" + _v] = dict(R.SCENARIOS[_n], env={"H31_VARIANT": _v})
R.SCENARIOS[FR_RUN + "__expandable"] = dict(R.SCENARIOS[FR_RUN], timeout=90,
                                            env={"H31_VARIANT": "expandable",
                                                 "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--collect":
        collect(sys.argv[2])
        sys.exit(0)
    if len(sys.argv) == 2 and sys.argv[1] != "--one":
        sys.argv += CORPUS_RUNS + [n for n in R.SCENARIOS if "__" in n]
    R.main()
