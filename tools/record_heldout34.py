#!/usr/bin/env python3
"""A thirty-fourth held-out set (python3 record_heldout34.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Structure as set 33 (tools/record_heldout33.py): every corpus run is "solo"
(alone on the GPU); the <run>__<variant> scenarios are the same run with the fix a report proposes
(H34_VARIANT), whose results `--collect OUTDIR` writes into each run's facts.json as fix_probes
(record_runs.collect_fix_probes). The OOM observer dumps at every out-of-memory failure (the same path each
time): the snapshot is the last failure's, the one raised. facts["settings"] says, beside the run's settings and
key byte counts, the right first advice ("right_advice") and what a report must not say ("report_must_not_say"),
decided from how the run is built."""
import collections, copy, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log


R.attach_oom = R.attach_oom_every  # run_oom attaches this one
VARIANT = os.environ.get("H34_VARIANT", "")


def tiny_gpt_params(vocab, d, L):
    """record_runs.tiny_gpt's parameter count (embedding, L SDPA blocks, final LayerNorm, untied head)."""
    block = (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d) + 4 * d
    return 2 * vocab * d + L * block + 2 * d


# ---------------------------------------------------------------- 1. an ensemble of 4 deepcopies trained at once

EN_V, EN_D, EN_H, EN_L = 8192, 768, 12, 4
EN_B, EN_T, EN_STEPS, EN_CAP = 4, 256, 6, 2.5
EN_MEMBERS = 2 if VARIANT == "two" else 4


def s_ensemble_deepcopy_train_capacity_oom(out, facts):
    """A deep ensemble trained in one loop: a base record_runs.tiny_gpt (4 SDPA blocks of width 768, 12 heads,
    vocab 8192, 40.9 M params, 156 MiB fp32) kept as the common init (not trained) and
    members = [copy.deepcopy(base) for _ in range(4)], each with its own torch.optim.AdamW; every step feeds the
    same batch of 4 x 256 random tokens to every member under bf16 autocast, the loss is the mean of the 4
    members' cross-entropies, one backward, then every member's optimizer steps. 6 steps planned, 2.5 GiB
    allowed. Bytes: 5 fp32 copies of the weights 781 MiB (0.76 GiB), the 4 members' fp32 grads 625 MiB (0.61
    GiB), their AdamW exp_avg + exp_avg_sq 1249 MiB (1.22 GiB): 2.59 GiB for weights + grads + state alone,
    more than the cap before any activation. Activations per member (1024 tokens: ~115 MiB saved by the 4
    blocks, ~85 MiB of bf16 / fp32 logits and log-softmax, ~69 MiB of bf16 weight copies autocast keeps for
    the backward) ~0.27 GiB, ~1.05 GiB for 4: the step-0 forward peaks near 1.8 GiB and the backward near 2.1
    GiB (it fits), then the first optimizer step dies when the 3rd or 4th member's AdamW state is created
    (1.37 GiB of weights and grads + 0.31 GiB of state per member + foreach temporaries). Were step 0 to pass,
    step 1 (2.59 GiB + 1.05 GiB of activations) could not. Probe: 2 members instead of 4 (__two: 3 copies of
    the weights 0.46 GiB + grads 0.30 + state 0.61 + activations ~0.53, peak ~1.9 GiB, all 6 steps)."""
    torch = R._torch()
    import torch.nn.functional as F
    cap(EN_CAP, facts)
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    facts["variant"] = VARIANT or None
    base = R.tiny_gpt(vocab=EN_V, d=EN_D, h=EN_H, L=EN_L).cuda()
    model_facts(base, facts)
    members = [copy.deepcopy(base) for _ in range(EN_MEMBERS)]
    for k, m in enumerate(members):      # different members: perturb each copy a little (a deep-ensemble init)
        with torch.no_grad():
            g = torch.Generator(device="cuda").manual_seed(100 + k)
            for p in m.parameters():
                p.add_(torch.randn(p.shape, device="cuda", generator=g), alpha=1e-3)
        m.train()
    opts = [torch.optim.AdamW(m.parameters(), lr=3e-4) for m in members]
    wb = tiny_gpt_params(EN_V, EN_D, EN_L) * 4
    facts["settings"] = dict(
        kind="training (a deep ensemble: deepcopies of a base model trained together)", framework="own loop "
        "(record_runs.tiny_gpt, copy.deepcopy)", amp="bf16 autocast", optimizer="torch.optim.AdamW per member",
        d_model=EN_D, heads=EN_H, layers=EN_L, vocab=EN_V, batch=EN_B, seq_len=EN_T, steps_planned=EN_STEPS,
        members=EN_MEMBERS, base_trained=False, model_copies_on_gpu=EN_MEMBERS + 1, weight_bytes_per_copy=wb,
        weight_bytes_all_copies=wb * (EN_MEMBERS + 1), grad_bytes_members=wb * EN_MEMBERS,
        adam_state_bytes_members=2 * wb * EN_MEMBERS,
        weights_grads_state_bytes=wb * (EN_MEMBERS + 1) + 3 * wb * EN_MEMBERS,
        loss="mean of the members' cross-entropies, one backward", cap_bytes=int(EN_CAP * GiB),
        right_advice="capacity of training 4 ensemble members at once: 5 fp32 copies of a 40.9 M-param model "
                     "(the base init and 4 deepcopied members, 0.76 GiB), the 4 members' grads (0.61 GiB) and "
                     "their AdamW state (1.22 GiB) are 2.59 GiB before activations, more than the 2.5 GiB "
                     "allowed, so the first optimizer step (or the next step) runs out; train fewer members per "
                     "step (fix_probes __two: 2 members fit), drop the base copy from the GPU, use a smaller "
                     "batch, or bf16 / 8-bit optimizer state. The deepcopies are the ensemble's members, each "
                     "trained, not leaked or forgotten copies",
        report_must_not_say="copies of the model kept / a leak / stale references as the cause (the deepcopies "
                            "are the members being trained); releasing references first; fragmentation / "
                            "expandable segments first; no_grad (this is training)")
    g = torch.Generator(device="cuda").manual_seed(0)

    def body():
        steplog(facts, key="phases", step=-1, phase="members built", members=len(members))
        for s in range(EN_STEPS):
            x = torch.randint(EN_V, (EN_B, EN_T + 1), device="cuda", generator=g)
            losses = []
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                for m in members:
                    logits = m(x[:, :-1])
                    losses.append(F.cross_entropy(logits.float().reshape(-1, EN_V), x[:, 1:].reshape(-1)))
                    del logits
            loss = torch.stack(losses).mean()
            steplog(facts, key="phases", step=s, phase="forward")
            loss.backward()
            steplog(facts, key="phases", step=s, phase="backward")
            for k, o in enumerate(opts):
                o.step()
                steplog(facts, key="phases", step=s, phase="optimizer step", member=k)
            for o in opts:
                o.zero_grad(set_to_none=True)
            lv = [float(v) for v in losses]
            del x, losses, loss
            steplog(facts, step=s, loss=sum(lv) / len(lv), member_losses=lv,
                    optimizer_state_bytes=sum(R.opt_state_bytes(o) for o in opts))
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 2. a chat server keeping 4 sessions' KV caches

LC_L, LC_D, LC_H, LC_I, LC_V = 4, 512, 8, 1376, 8192
LC_P, LC_N, LC_KEEP, LC_SESSIONS, LC_REQUESTS = 1024, 16, 4, 8, 24


def cache_bytes(c):
    """Bytes of a transformers Cache's tensors (DynamicCache.layers[i].keys/.values, or the older
    key_cache / value_cache lists, or a legacy tuple of (k, v) per layer)."""
    torch = R._torch()
    ts = []
    if getattr(c, "layers", None) is not None:
        for l in c.layers:
            ts += [getattr(l, "keys", None), getattr(l, "values", None)]
    elif hasattr(c, "key_cache"):
        ts = list(c.key_cache) + list(c.value_cache)
    elif isinstance(c, (tuple, list)):
        ts = [t for kv in c for t in kv]
    return sum(t.numel() * t.element_size() for t in ts if torch.is_tensor(t))


def s_hf_chat_lru_sessions_healthy(out, facts):
    """A chat server that keeps each session's KV cache for its next turn: HF LlamaForCausalLM from a config (4
    layers, hidden 512, 8 heads and 8 KV heads, inter 1376, vocab 8192, 21.0 M params, 40 MiB in bf16), bf16,
    eval(), torch.inference_mode(). 24 requests cycle over 8 session ids (0-7, three rounds); each is a prompt
    of 1024 random tokens, greedy generate(max_new_tokens = min_new_tokens = 16, return_dict_in_generate=True,
    use_cache=True) and the returned out.past_key_values (a DynamicCache, 4 layers x K,V x 1039 positions x 512
    x 2 B = 8.1 MiB) is stored as the session's cache in an LRU collections.OrderedDict bounded at 4 sessions
    (the oldest evicted). Allocated between requests rises by ~8 MiB for each of the first 4 requests and stays
    flat at 4 caches (~32 MiB) over the weights for the 20 after (with 8 sessions cycling through 4 slots, each
    request evicts the oldest). No cap. Snapshot after the last request. Healthy."""
    torch = R._torch()
    from transformers import LlamaConfig, LlamaForCausalLM
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=LC_D, intermediate_size=LC_I, num_hidden_layers=LC_L, num_attention_heads=LC_H,
                      num_key_value_heads=LC_H, vocab_size=LC_V, max_position_embeddings=2048)
    m = LlamaForCausalLM(cfg).to(torch.bfloat16).cuda().eval()
    m.generation_config.pad_token_id = 0
    model_facts(m, facts)
    R.hf_cfg_facts(m, facts)
    per_session = LC_L * 2 * (LC_P + LC_N - 1) * LC_D * 2
    facts["settings"] = dict(
        kind="inference (chat serving, per-session KV caches kept in an LRU)", framework="transformers "
        "generate() (own server loop)", amp=None, dtype="bfloat16", grad="torch.inference_mode",
        layers=LC_L, hidden=LC_D, heads=LC_H, kv_heads=LC_H, vocab=LC_V, prompt_len=LC_P, max_new_tokens=LC_N,
        sessions=LC_SESSIONS, requests=LC_REQUESTS, batch=1,
        cache="collections.OrderedDict LRU of out.past_key_values, max %d sessions, oldest evicted" % LC_KEEP,
        cache_bytes_per_session=per_session, cache_bytes_full=per_session * LC_KEEP, memory_fraction=None,
        right_advice="healthy: nothing urgent; the kept KV caches are bounded: an LRU of at most 4 sessions "
                     "(~8 MiB each, ~32 MiB), so allocated between requests rises over the first 4 requests "
                     "and stays flat for the other 20 (each new session evicts the oldest); not a leak",
        report_must_not_say="a leak or growth (live memory is flat after the LRU fills); an OOM or OOM advice; "
                            "warning-level fragmentation; training advice (nothing trains); no_grad "
                            "(inference_mode is on)")
    g = torch.Generator(device="cuda").manual_seed(0)
    sessions = collections.OrderedDict()
    replies = []
    for i in range(LC_REQUESTS):
        sid = i % LC_SESSIONS
        with torch.inference_mode():
            ids = torch.randint(3, LC_V, (1, LC_P), device="cuda", generator=g)
            o = m.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                           max_new_tokens=LC_N, min_new_tokens=LC_N, return_dict_in_generate=True, use_cache=True)
            hit = sid in sessions
            sessions[sid] = o.past_key_values
            sessions.move_to_end(sid)
            evicted = None
            if len(sessions) > LC_KEEP:
                evicted = sessions.popitem(last=False)[0]
            replies.append(o.sequences[:, LC_P:].cpu())
            del ids, o
        steplog(facts, key="requests", request=i, session=sid, had_cache=hit, evicted=evicted,
                kept_sessions=len(sessions), kept_cache_bytes=sum(cache_bytes(c) for c in sessions.values()))
    facts["reply_tokens"] = sum(int(r.numel()) for r in replies)
    facts["cache_class"] = type(next(iter(sessions.values()))).__name__
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


# ---------------------------------------------------------------- 3. a 3-batch GPU prefetch queue, healthy

PQ_B, PQ_RES, PQ_DEPTH, PQ_STEPS, PQ_CLASSES = 128, 112, 3, 30, 1000


def s_gpu_prefetch_queue_healthy(out, facts):
    """Image classification with a GPU prefetch queue: torchvision resnet18 (random weights, 11.7 M params, 45 MiB
    fp32), AdamW, bf16 autocast, batches of 128 x 3 x 112 x 112 fp32 (18.4 MiB) with 128 int64 labels, 30
    steps, no cap. A prefetcher keeps a collections.deque of the next 3 batches already on the GPU: it fills
    the queue in the first iteration, then each step pops one and pushes a fresh one (torch.randn in pinned CPU
    memory, .cuda(non_blocking=True) on the default stream), so 4 batches (~74 MiB) are on the GPU during a
    step and 3 between steps. Allocated between steps flat from step 0 on (weights + grads + AdamW state ~180
    MiB, the queue ~55 MiB). Snapshot after the last step. Healthy."""
    torch = R._torch()
    import torch.nn.functional as F
    import torchvision
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    m = torchvision.models.resnet18(num_classes=PQ_CLASSES).cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    batch_bytes = PQ_B * 3 * PQ_RES * PQ_RES * 4 + PQ_B * 8
    facts["settings"] = dict(
        kind="training (image classification, GPU prefetch queue)", framework="torchvision resnet18 (own loop)",
        amp="bf16 autocast", optimizer="torch.optim.AdamW", batch=PQ_B, resolution=PQ_RES, steps=PQ_STEPS,
        prefetch_depth=PQ_DEPTH, prefetch="collections.deque of GPU batches, pinned CPU -> cuda(non_blocking)",
        batch_bytes=batch_bytes, queue_bytes=batch_bytes * PQ_DEPTH, memory_fraction=None,
        right_advice="healthy: nothing urgent; the prefetch queue is a bounded buffer of the next 3 batches on "
                     "the GPU (~55 MiB, one more in use during a step), filled in the first iteration and flat "
                     "after; allocated between steps stays flat for all 30 steps",
        report_must_not_say="a leak or growth; an OOM or OOM advice; a smaller batch as needed; warning-level "
                            "fragmentation; the prefetched batches as leaked tensors")
    cg = torch.Generator().manual_seed(0)

    def make():
        x = torch.randn(PQ_B, 3, PQ_RES, PQ_RES, generator=cg).pin_memory()
        y = torch.randint(PQ_CLASSES, (PQ_B,), generator=cg).pin_memory()
        return x.cuda(non_blocking=True), y.cuda(non_blocking=True)

    queue = collections.deque()
    for s in range(PQ_STEPS):
        while len(queue) < PQ_DEPTH:
            queue.append(make())
        x, y = queue.popleft()
        queue.append(make())
        with torch.amp.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        lv = float(loss)
        del x, y, loss
        steplog(facts, step=s, loss=lv, queued=len(queue),
                queue_bytes=sum(a.numel() * a.element_size() + b.numel() * b.element_size() for a, b in queue))
    facts["optimizer_state_bytes"] = R.opt_state_bytes(opt)
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


# ---------------------------------------------------------------- collecting the fix probes

def collect(root):
    """Write each corpus run's <run>__<variant> results into its facts.json as fix_probes."""
    R.collect_fix_probes(root, CORPUS_RUNS, "tools/record_heldout34.py",
                         counts=("steps", "phases", "batches", "requests"), cap_bytes=True, retries=True)


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "ensemble_deepcopy_train_capacity_oom": dict(fn=s_ensemble_deepcopy_train_capacity_oom, group="solo",
                                                 timeout=90),
    "hf_chat_lru_sessions_healthy": dict(fn=s_hf_chat_lru_sessions_healthy, group="solo", timeout=90),
    "gpu_prefetch_queue_healthy": dict(fn=s_gpu_prefetch_queue_healthy, group="solo", timeout=90),
})
CORPUS_RUNS = list(R.SCENARIOS)
VARIANTS = [("ensemble_deepcopy_train_capacity_oom", "two")]
for _n, _v in VARIANTS:
    R.SCENARIOS[_n + "__" + _v] = dict(R.SCENARIOS[_n], env={"H34_VARIANT": _v})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--collect":
        collect(sys.argv[2])
        sys.exit(0)
    if len(sys.argv) == 2 and sys.argv[1] != "--one":
        sys.argv += CORPUS_RUNS + [n for n in R.SCENARIOS if "__" in n]
    R.main()
