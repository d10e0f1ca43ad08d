#!/usr/bin/env python3
"""A twenty-fifth held-out set (python3 record_heldout25.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Recorded beside record_runs.py as build/h25/record_heldout25.py.
Structure as set 24 (tools/record_heldout24.py): every corpus run is "solo" (alone on the GPU, so that the OOM
message's free memory and process list are its own story); the *_probe scenarios are calibration children, not
corpus runs (their parents start them with --one). The OOM observer dumps at every out-of-memory failure (the
same path each time): the snapshot is the last failure's, the one raised. facts["settings"] says, beside the
run's settings and key byte counts, the right first advice ("right_advice") and what a report must not say
("report_must_not_say")."""
import collections, copy, json, math, os, random, subprocess, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log, mem


R.attach_oom = R.attach_oom_every  # run_oom attaches this one


def run_probe(out, name, timeout=150):
    """Run the calibration child `name` (no cap, no history) in out/_probe; return its facts."""
    probe = os.path.join(out, "_probe")
    os.makedirs(probe, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")}
    with open(os.path.join(probe, "console.log"), "w") as con:
        subprocess.run([sys.executable, os.path.abspath(__file__), "--one", name, probe], check=True, env=env,
                       stdout=con, stderr=subprocess.STDOUT, timeout=timeout)
    with open(os.path.join(probe, "facts.json")) as f:
        return json.load(f)


# ---------------------------------------------------------------- 1. HF Trainer: eval batch 8x the train batch

def s_hf_trainer_eval_bigger_batch_oom(out, facts):
    """HF Trainer fine-tuning a GPT2LMHeadModel built from a config (6 layers, n_embd 768, 12 heads, vocab 50257,
    n_positions 1024, tied embeddings, ~81.9 M params fp32, sdpa): TrainingArguments(per_device_train_batch_size=4,
    per_device_eval_batch_size=32 ("no gradients in evaluation, so 8x the batch"), eval_strategy="steps",
    eval_steps=2, max_steps=6, bf16=True, report_to=[], save_strategy="no", logging_steps=1), no compute_metrics
    (so evaluate() keeps only the loss: prediction_loss_only), no eval_accumulation_steps; a tiny in-memory
    dataset of random token sequences of 512 (input_ids = labels; 64 train, 128 eval samples). Training steps
    fit; the first evaluation (after step 2, inside train(): Trainer.evaluate -> evaluation_loop ->
    prediction_step under torch.no_grad(), the parameters and AdamW state resident) needs the 32 x 512 x 50257
    logits (1.65 GB bf16; upcast to float32 by the loss: 3.29 GB, and its log-softmax); 5 GiB allowed."""
    torch = R._torch()
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments, TrainerCallback
    cap(5, facts)
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    V, T, BT, BE = 50257, 512, 4, 32
    cfg = GPT2Config(vocab_size=V, n_positions=1024, n_embd=768, n_layer=6, n_head=12, bos_token_id=50256,
                     eos_token_id=50256)
    model = GPT2LMHeadModel(cfg)
    model_facts(model, facts)
    R.hf_cfg_facts(model, facts)

    class DS(torch.utils.data.Dataset):
        def __init__(s, n, seed):
            s.n, s.seed = n, seed

        def __len__(s):
            return s.n

        def __getitem__(s, i):
            g = torch.Generator().manual_seed(s.seed + i)
            ids = torch.randint(V - 1, (T,), generator=g)
            return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}

    class Rec(TrainerCallback):
        def on_step_end(s, args, state, control, **kw):
            steplog(facts, step=state.global_step, B=BT, T=T)

    facts["eval_forwards"] = 0

    def pre_hook(mod, args, kwargs):
        if not mod.training:
            ids = kwargs.get("input_ids")
            facts["eval_forwards"] += 1
            steplog(facts, key="evaluation", eval_batch_idx=facts["eval_forwards"] - 1,
                    B=int(ids.shape[0]) if ids is not None else None, grad_enabled=torch.is_grad_enabled(),
                    inference_mode=torch.is_inference_mode_enabled())
    model.register_forward_pre_hook(pre_hook, with_kwargs=True)
    args = TrainingArguments(output_dir="/tmp/h25_trainer_eval", per_device_train_batch_size=BT,
                             per_device_eval_batch_size=BE, eval_strategy="steps", eval_steps=2, max_steps=6,
                             bf16=True, report_to=[], save_strategy="no", logging_steps=1, disable_tqdm=True,
                             dataloader_num_workers=0, learning_rate=5e-5)
    tr = Trainer(model=model, args=args, train_dataset=DS(64, 0), eval_dataset=DS(128, 100000),
                 callbacks=[Rec()])
    pb = facts["model_param_bytes"]
    facts["settings"] = dict(
        kind="training with evaluation (dies in evaluation)", framework="transformers Trainer",
        amp="bf16 (Trainer bf16=True)", optimizer=str(args.optim), microbatch=BT, eval_batch=BE, seq_len=T,
        vocab=V, eval_strategy="steps", eval_steps=2, max_steps=6, eval_samples=128, train_samples=64,
        accumulation_steps=args.gradient_accumulation_steps, eval_accumulation_steps=args.eval_accumulation_steps,
        compute_metrics=False, prediction_loss_only="True (no compute_metrics)", grad_checkpointing=False,
        eval_logits_bytes_bf16=BE * T * V * 2, eval_logits_bytes_fp32=BE * T * V * 4,
        train_logits_bytes_bf16=BT * T * V * 2, train_logits_bytes_fp32=BT * T * V * 4,
        resident_training_state_bytes=pb * 3,
        right_advice="OOM in the evaluation pass (Trainer.evaluate -> prediction_step, under no_grad, no backward) "
                     "while the training steps fit: per_device_eval_batch_size=32 (8x the training batch of 4) makes "
                     "the all-position logits of one eval batch (1.65 GB bf16, 3.29 GB as float32 in the loss) too "
                     "big beside the resident parameters and AdamW state; lower per_device_eval_batch_size (e.g. to "
                     "the training batch)",
        report_must_not_say="gradient accumulation, gradient checkpointing or a smaller training batch as the fix "
                            "(training fits; the eval batch is the lever); eval_accumulation_steps as the fix (no "
                            "logits are gathered: prediction_loss_only); a leak or growth; fragmentation / "
                            "expandable segments as the fix; no_grad (evaluation already runs without gradients); "
                            "optimizer offload / FSDP")
    run_oom(out, facts, tr.train)


# ---------------------------------------------------------------- 2. DQN replay buffer on the GPU

def s_replay_buffer_gpu_oom(out, facts):
    """RL (DQN-style) training: a Nature-DQN conv Q-network (conv 32x8x8/4, 64x4x4/2, 64x3x3/1, fc 3136->512->6,
    ~1.69 M params fp32) and a target copy, Adam lr 1e-4, on a GPU-vectorised environment of 32 envs whose
    observations are float32 stacks of 4 preprocessed 84 x 84 frames in [0, 1] (one observation batch
    32 x 4 x 84 x 84 float32 = 3.61 MB), produced on the GPU. Every environment step appends the transition
    `(obs.clone(), action, reward, next_obs.clone(), done)` to a Python `collections.deque(maxlen=1_000_000)`
    replay buffer: all GPU tensors, 7.23 MB per step, never evicted (capacity 1e6 steps = 7.2 TB); every 4 env
    steps (after 8 warm-up steps) it samples 4 stored steps (a minibatch of 128 transitions, torch.cat), does
    one plain DQN Huber TD update (target net, no double-Q), and syncs the target net every 100 steps;
    epsilon-greedy actions from the online net under torch.no_grad(). 3 GiB allowed: the buffer grows until it fills the memory."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    cap(3, facts)
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    N, A, CAPACITY, TRAIN_EVERY, WARMUP, K, GAMMA = 32, 6, 1_000_000, 4, 8, 4, 0.99

    class QNet(nn.Module):
        def __init__(s):
            super().__init__()
            s.c1, s.c2, s.c3 = nn.Conv2d(4, 32, 8, 4), nn.Conv2d(32, 64, 4, 2), nn.Conv2d(64, 64, 3, 1)
            s.fc, s.out = nn.Linear(3136, 512), nn.Linear(512, A)

        def forward(s, x):
            x = F.relu(s.c3(F.relu(s.c2(F.relu(s.c1(x))))))
            return s.out(F.relu(s.fc(x.flatten(1))))

    q = QNet().cuda()
    tgt = copy.deepcopy(q).eval()
    model_facts(q, facts)
    opt = torch.optim.Adam(q.parameters(), lr=1e-4)
    obs_bytes = N * 4 * 84 * 84 * 4
    small = 3 * 512          # action int64 (256 B), reward float32 (128 B), done bool (32 B): 512 B blocks each
    per_step = 2 * obs_bytes + small
    facts["settings"] = dict(
        kind="training (reinforcement learning, DQN-style)", framework="plain PyTorch (own loop, GPU vector env)",
        amp=None, optimizer="torch.optim.Adam", envs=N, obs_shape=[4, 84, 84], obs_dtype="float32",
        obs_batch_bytes=obs_bytes, replay_capacity=CAPACITY, replay_storage="collections.deque of GPU tensors",
        kept_per_env_step="(obs.clone(), action, reward, next_obs.clone(), done)",
        growth_per_step_bytes=per_step, growth_per_step_requested_bytes=2 * obs_bytes + 32 * 8 + 32 * 4 + 32,
        train_every=TRAIN_EVERY, minibatch_transitions=K * N, minibatch_obs_bytes=K * obs_bytes,
        capacity_bytes_if_filled=CAPACITY * 2 * obs_bytes,
        right_advice="the replay buffer grows by one transition (obs + next_obs: 7.23 MB) every environment step and "
                     "is never evicted (capacity 1e6, far beyond the memory): keep the replay buffer on the CPU "
                     "(pinned memory, copy each sampled minibatch to the GPU) or preallocate a uint8 ring buffer "
                     "of a capacity that fits (store frames once, as uint8, not both obs and next_obs as float32)",
        report_must_not_say="a capacity problem fixed by a smaller batch (the minibatch is 14 MB), gradient "
                            "checkpointing or accumulation; fragmentation / expandable segments as the fix; "
                            "optimizer offload / FSDP; no_grad as the fix")
    buffer = collections.deque(maxlen=CAPACITY)
    g = torch.Generator(device="cuda").manual_seed(0)
    rng = random.Random(0)
    facts["env_steps"] = 0
    facts["updates"] = 0

    def env_step(o, a):
        frame = torch.rand(N, 1, 84, 84, device="cuda", generator=g)
        nxt = torch.cat([o[:, 1:], frame], 1)
        r = (a == 2).float() - 0.01
        d = torch.rand(N, device="cuda", generator=g) < 0.01
        return nxt, r, d

    def body():
        obs = torch.rand(N, 4, 84, 84, device="cuda", generator=g)
        for t in range(1_000_000):
            eps = max(0.1, 1.0 - t / 1000)
            with torch.no_grad():
                greedy = q(obs).argmax(1)
            rand_a = torch.randint(A, (N,), device="cuda", generator=g)
            a = torch.where(torch.rand(N, device="cuda", generator=g) < eps, rand_a, greedy)
            nxt, r, d = env_step(obs, a)
            buffer.append((obs.clone(), a, r, nxt.clone(), d))
            obs = nxt
            facts["env_steps"] = t + 1
            if t >= WARMUP and t % TRAIN_EVERY == 0:
                idx = [rng.randrange(len(buffer)) for _ in range(K)]
                o = torch.cat([buffer[i][0] for i in idx])
                ac = torch.cat([buffer[i][1] for i in idx])
                rw = torch.cat([buffer[i][2] for i in idx])
                no = torch.cat([buffer[i][3] for i in idx])
                dn = torch.cat([buffer[i][4] for i in idx]).float()
                with torch.no_grad():
                    target = rw + GAMMA * (1 - dn) * tgt(no).max(1).values
                qa = q(o).gather(1, ac[:, None]).squeeze(1)
                loss = F.smooth_l1_loss(qa, target)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                facts["updates"] += 1
            if t % 100 == 0:
                tgt.load_state_dict(q.state_dict())
            if t % 25 == 0:
                steplog(facts, step=t, buffer=len(buffer), buffer_bytes=len(buffer) * per_step,
                        updates=facts["updates"])
    try:
        run_oom(out, facts, body)
    finally:
        facts["buffer_len_at_end"] = len(buffer)
        facts["buffer_bytes_at_end"] = len(buffer) * per_step
        st = facts.get("oom_observer_stats") or {}
        if st:
            gap = st["reserved_bytes.all.current"] - st["allocated_bytes.all.current"]
            facts["free_in_cache_at_oom"] = gap
            facts["steps_that_packing_would_buy"] = gap // per_step


# ---------------------------------------------------------------- 3. another process holds 40% + the run is too big

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
while not os.path.exists(stop) and time.time() - t0 < 300 and os.getppid() == parent:
    time.sleep(0.1)
"""

OP_BUDGET = 6 * GiB
OP_T, OP_V = 1024, 8192
OP_TRIES = [4, 6, 10, 11, 12, 13]


def s_other_process_plus_capacity_probe(out, facts):
    """Calibration child of other_process_plus_capacity_oom (not a corpus run): the same 6-layer SDPA GPT and
    AdamW, no cap, no history, no other process; 2 steps at each microbatch of OP_TRIES (seq 1024), fresh
    AdamW per try, peaks reset between tries; writes the peaks to facts.json."""
    torch = R._torch()
    import gc
    torch.manual_seed(0)
    m = R.tiny_gpt(vocab=OP_V, d=1024, h=16, L=6).cuda().train()
    rows = []
    for B in OP_TRIES:
        m.zero_grad(set_to_none=True)
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
        for _ in range(2):
            R.gpt_step(m, opt, B, OP_T, vocab=OP_V)
        torch.cuda.synchronize()
        rows.append(dict(microbatch=B, peak_reserved=torch.cuda.max_memory_reserved(),
                         peak_allocated=torch.cuda.max_memory_allocated()))
        opt = None
    facts["probe"] = rows


def s_other_process_plus_capacity_oom(out, facts):
    """Plain PyTorch training with no memory cap: a 6-layer SDPA GPT (width 1024, 16 heads, vocab 8192, ~92.4 M
    params), AdamW, bf16 autocast, microbatch B x 1024. The budget is BUDGET = 6 GiB, simulated without a memory
    fraction: right after this process initialised CUDA (history on, nothing allocated yet) a SECOND process
    (another user's job, python -c with torch, started with subprocess) allocates one tensor of all the GPU's
    free memory except 0.6 x BUDGET, that is (free - BUDGET) + 0.4 x BUDGET: it holds 40% of the budget for the
    whole run, and this process has 0.6 x BUDGET (3.6 GiB) left. B is chosen from a probe child (same run, no
    other process, no cap) as the microbatch whose peak reserved is closest to 0.8 x BUDGET (within 0.7-0.87):
    the run would fit in the whole budget, not in its 60%; it dies in its first step. The second process is
    stopped after the OOM."""
    torch = R._torch()
    pf = run_probe(out, "other_process_plus_capacity_probe")
    rows = pf["probe"]
    inside = [r for r in rows if 0.7 * OP_BUDGET <= r["peak_reserved"] <= 0.87 * OP_BUDGET]
    pick = min(inside or rows, key=lambda r: abs(r["peak_reserved"] - 0.8 * OP_BUDGET))
    B = pick["microbatch"]
    fits_60 = [r["microbatch"] for r in rows if r["peak_reserved"] <= 0.6 * OP_BUDGET - 256 * MiB]
    facts["probe"] = rows
    facts["probe_pick"] = pick
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    free0, total = torch.cuda.mem_get_info()      # initialises CUDA (the context), allocates nothing
    keep = int(0.6 * OP_BUDGET)
    facts["settings"] = dict(
        kind="training", framework="plain PyTorch (own loop)", amp="bf16 autocast", optimizer="torch.optim.AdamW",
        microbatch=B, seq_len=OP_T, vocab=OP_V, memory_fraction=None, budget_bytes=OP_BUDGET,
        other_process="a second python/torch process on the same GPU, started before this run allocated anything, "
                      "holding one tensor of (free memory - 0.6 x budget) = (free - budget) + 0.4 x budget",
        other_process_share_of_budget_bytes=int(0.4 * OP_BUDGET), left_for_this_run_bytes=keep,
        run_needs_peak_reserved=pick["peak_reserved"], run_needs_peak_allocated=pick["peak_allocated"],
        run_needs_fraction_of_budget=round(pick["peak_reserved"] / OP_BUDGET, 3),
        probed_microbatches_fitting_in_60pct=fits_60,
        right_advice="both: another process on the same GPU holds 40% of the budget (0.4 x 6 GiB) from the start, "
                     "and this run needs ~0.8 x the budget (more than the 60% it is left): stopping/moving the other "
                     "process (nvidia-smi) lets it fit; a smaller microbatch (with accumulation) also fits in what "
                     "is left",
        report_must_not_say="that the other process is the only cause (this run alone needs more than what is "
                            "left) or that it is irrelevant; a leak or growth of this process; fragmentation / "
                            "expandable segments as the fix; optimizer offload / FSDP")
    ready = os.path.join(out, "_other.ready")
    stop = os.path.join(out, "_other.stop")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")}
    p = subprocess.Popen([sys.executable, "-c", OTHER_PROC, str(keep), ready, stop, str(os.getpid())],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        t0 = time.time()
        while not os.path.exists(ready) and p.poll() is None and time.time() - t0 < 90:
            time.sleep(0.1)
        info = json.load(open(ready)) if os.path.exists(ready) else dict(error=f"child rc={p.poll()}")
        free1 = torch.cuda.mem_get_info()[0]
        took = info.get("took", 0)
        facts["other_process"] = dict(keep_free_target=keep, **info,
                                      share_of_budget=took - (info.get("free_before", 0) - OP_BUDGET))
        facts["settings"]["other_process_bytes"] = took
        facts["main_before_other"] = dict(free_before_other=free0, free_after_other=free1, total=total)
        R.log(f"[monitor] another process (pid {info.get('pid')}) holds {took / GiB:.2f} GiB on this GPU; "
              f"free {free1 / GiB:.2f} GiB")
        m = R.tiny_gpt(vocab=OP_V, d=1024, h=16, L=6).cuda().train()
        model_facts(m, facts)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4)

        def body():
            for s in range(4):
                loss = R.gpt_step(m, opt, B, OP_T, vocab=OP_V)
                steplog(facts, step=s, loss=float(loss), free=torch.cuda.mem_get_info()[0])
        run_oom(out, facts, body)
    finally:
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


# ---------------------------------------------------------------- 4. Llama generate() on 32k-token prompts

def s_hf_llama_long_prompt_prefill_oom(out, facts):
    """Inference: HF LlamaForCausalLM from a config (4 layers, hidden 2048, intermediate 5632, 16 heads / 4 KV
    heads, vocab 32000, max_position_embeddings 32832, sdpa, ~311 M params) cast to bf16, eval();
    `model.generate(input_ids, attention_mask, max_new_tokens=16, do_sample=False)` on 4 prompts of 32768 tokens
    each (long-document question answering; no padding): it dies in the prefill, the first forward over the
    whole prompts (generate asks for the last position's logits only: logits_to_keep), in the first decoder
    layer: its RMSNorm upcasts the 4 x 32768 x 2048 hidden states to float32 (1.07 GB per temporary, beside the
    537 MB bf16 embeddings); the layer's MLP intermediates would be 4 x 32768 x 5632 bf16 = 1.48 GB each;
    2.5 GiB allowed. (A first recording with 2 prompts under the same cap died in layer 0's second RMSNorm with
    642 MiB of the cache free in pieces, a request that packing would have served: replaced by this one, whose
    request cannot fit at all.)"""
    torch = R._torch()
    cap(2.5, facts)
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    B, P, N, V, D, I = 4, 32768, 16, 32000, 2048, 5632
    m = R.hf_llama(L=4, d=D, inter=I, heads=16, kv=4, vocab=V, maxpos=P + 64)
    m = m.to(torch.bfloat16).cuda().eval()
    m.generation_config.pad_token_id = 0
    model_facts(m, facts)
    R.hf_cfg_facts(m, facts)
    kv_tok = B * 4 * 2 * 4 * 128 * 2
    facts["settings"] = dict(
        kind="inference (generate, greedy)", framework="transformers generate()", amp=None, weights="bf16",
        batch=B, prompt_len=P, max_new_tokens=N, do_sample=False, padding=False, cache="DynamicCache (default)",
        attn_implementation=getattr(m.config, "_attn_implementation", None),
        hidden_state_bytes=B * P * D * 2, mlp_intermediate_bytes_each=B * P * I * 2,
        rmsnorm_fp32_bytes=B * P * D * 4, kv_cache_bytes_per_layer=B * P * 2 * 4 * 128 * 2,
        kv_cache_bytes_prompt_all_layers=kv_tok * P, all_position_logits_bytes_bf16=B * P * V * 2,
        right_advice="capacity in the prefill (the first forward over the 4 x 32768-token prompts), inference: the "
                     "hidden states (float32 in RMSNorm: 1.07 GB each) and the MLP intermediates (1.48 GB each) scale "
                     "with the prompt tokens; use "
                     "shorter prompts (truncate/retrieve), fewer sequences per call, or a chunked prefill "
                     "(feed the prompt in pieces into the cache)",
        report_must_not_say="training advice (gradient checkpointing, accumulation, optimizer, FSDP); a leak or "
                            "growth; no_grad (generate runs without gradients); fragmentation / expandable segments "
                            "as the fix; the KV cache as the main consumer")
    ids = torch.randint(3, V, (B, P), device="cuda")
    am = torch.ones_like(ids)
    facts["forward_calls"] = 0

    def pre_hook(mod, args, kwargs):
        x = kwargs.get("input_ids")
        if x is None:
            x = kwargs.get("inputs_embeds")
        facts["forward_calls"] += 1
        n = facts["forward_calls"]
        steplog(facts, key="forwards", call=n, tokens=int(x.shape[1]) if x is not None else None,
                phase="prefill" if n == 1 else "decode")
    m.model.register_forward_pre_hook(pre_hook, with_kwargs=True)

    def body():
        steplog(facts, key="forwards", phase="model built")
        o = m.generate(input_ids=ids, attention_mask=am, max_new_tokens=N, do_sample=False)
        steplog(facts, key="forwards", tokens_out=int(o.shape[1]))
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 5. T5 seq2seq fine-tuning, long sources

def s_hf_t5_seq2seq_train_oom(out, facts):
    """Fine-tuning HF T5ForConditionalGeneration from a config (t5-base shape: 12 + 12 layers, d_model 768, d_kv
    64, d_ff 3072, 12 heads, vocab 32128, tied embeddings, dropout 0.1, ~223 M params fp32; transformers 5's
    default attention, sdpa, with T5's relative position bias passed as a float attn_mask), AdamW lr 1e-4, bf16
    autocast, microbatch 4 (document summarisation): sources of 2048 tokens, targets of 512 (labels; decoder
    inputs shifted by the model), `loss = model(input_ids, attention_mask, labels).loss`; 10 GiB allowed. Each
    encoder layer's self-attention scores are 4 x 12 x 2048 x 2048 (201 M elements: 805 MB in float32; with the
    float position-bias mask, which needs its gradient, SDPA materialises them)."""
    torch = R._torch()
    from transformers import T5Config, T5ForConditionalGeneration
    cap(10, facts)
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    cfg = T5Config(vocab_size=32128, d_model=768, d_kv=64, d_ff=3072, num_layers=12, num_decoder_layers=12,
                   num_heads=12, dropout_rate=0.1, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    m = T5ForConditionalGeneration(cfg).cuda().train()
    model_facts(m, facts)
    R.hf_cfg_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B, S, TG, H = 4, 2048, 512, 12
    facts["settings"] = dict(
        kind="training (seq2seq fine-tuning)", framework="transformers (own loop)", amp="bf16 autocast",
        optimizer="torch.optim.AdamW", microbatch=B, source_len=S, target_len=TG, grad_checkpointing=False,
        attn_implementation=getattr(m.config, "_attn_implementation", None),
        encoder_self_attn_scores_elements_per_layer=B * H * S * S,
        encoder_self_attn_scores_bytes_fp32_per_layer=B * H * S * S * 4,
        cross_attn_scores_bytes_fp32_per_layer=B * H * TG * S * 4,
        decoder_self_attn_scores_bytes_fp32_per_layer=B * H * TG * TG * 4,
        position_bias="relative position bias (a learned parameter) added as a float attn_mask to "
                      "F.scaled_dot_product_attention",
        right_advice="capacity, activations: the encoder's T x T self-attention tensors (4 x 12 x 2048 x 2048 per "
                     "layer, float32 softmax) and the decoder's cross-attention over the 2048 source tokens "
                     "dominate; a smaller microbatch with gradient accumulation, shorter sources (truncate / "
                     "chunk the documents), or model.gradient_checkpointing_enable()",
        report_must_not_say="a leak or growth; fragmentation / expandable segments as the fix; optimizer-state "
                            "offload, 8-bit optimizers or FSDP as the first fix; no_grad")

    def body():
        for s in range(3):
            src = torch.randint(2, 32128, (B, S), device="cuda")
            lab = torch.randint(2, 32128, (B, TG), device="cuda")
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                loss = m(input_ids=src, attention_mask=torch.ones_like(src), labels=lab).loss
            steplog(facts, key="phases", step=s, phase="forward done")
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(loss))
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 6. torchvision vit_b_16 at a big batch

def s_torchvision_vit_b16_train_oom(out, facts):
    """torchvision vit_b_16 (86.6 M params fp32, 1000 classes, nn.MultiheadAttention on SDPA) trained from
    scratch: AdamW lr 3e-4, bf16 autocast, batches of 160 random 3 x 224 x 224 images (197 tokens each) with
    random labels, F.cross_entropy; no checkpointing; 8 GiB allowed (an earlier recording of the same model
    needed ~69 MB of activations per image: ~11 GB at 160)."""
    torch = R._torch()
    import torchvision
    import torch.nn.functional as F
    cap(8, facts)
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    m = torchvision.models.vit_b_16(num_classes=1000).cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=3e-4)
    B = 160
    pb = facts["model_param_bytes"]
    facts["settings"] = dict(
        kind="training (vision)", framework="plain PyTorch + torchvision", amp="bf16 autocast",
        optimizer="torch.optim.AdamW", microbatch=B, image=[3, 224, 224], tokens=197, grad_checkpointing=False,
        input_bytes=B * 3 * 224 * 224 * 4, token_tensor_bytes_fp32=B * 197 * 768 * 4,
        training_state_bytes=pb * 4, activation_bytes_per_image_earlier_measurement=69 * 10 ** 6,
        right_advice="capacity, activations (they scale with the batch of 160 images; parameters, gradients and "
                     "AdamW state are ~1.4 GB): a smaller batch (e.g. 64) with gradient accumulation to keep the "
                     "effective batch, or activation checkpointing of the encoder blocks",
        report_must_not_say="fragmentation / expandable segments as the fix; a leak or growth; no_grad; "
                            "optimizer offload / 8-bit optimizer / FSDP as the first fix; autocast/bf16 as new "
                            "advice (it is on)")

    def body():
        for s in range(3):
            x = torch.randn(B, 3, 224, 224, device="cuda")
            y = torch.randint(1000, (B,), device="cuda")
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(m(x), y)
            steplog(facts, key="phases", step=s, phase="forward done")
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(loss))
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 7. Accelerate fp16 + GradScaler, OOM in backward

AC_B, AC_T, AC_V = 8, 1024, 32000


def _accel_setup(facts=None):
    torch = R._torch()
    from accelerate import Accelerator
    torch.manual_seed(0)
    acc = Accelerator(mixed_precision="fp16")
    m = R.hf_llama(L=4)
    if facts is not None:
        model_facts(m, facts)
        R.hf_cfg_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(0)
    data = [torch.randint(AC_V, (AC_B, AC_T), generator=g) for _ in range(4)]
    dl = torch.utils.data.DataLoader(data, batch_size=None)
    m, opt, dl = acc.prepare(m, opt, dl)
    m.train()
    return acc, m, opt, dl


def s_accelerate_fp16_probe(out, facts):
    """Calibration child of accelerate_fp16_gradscaler_oom (not a corpus run): the same setup and first step, no
    cap, no history; the peaks after the forward and after the backward to facts.json."""
    torch = R._torch()
    acc, m, opt, dl = _accel_setup()
    idx = next(iter(dl))
    torch.cuda.synchronize()
    base = mem()
    loss = m(input_ids=idx, labels=idx).loss
    torch.cuda.synchronize()
    fwd = mem()
    acc.backward(loss)
    torch.cuda.synchronize()
    bwd = mem()
    facts["probe"] = dict(base=base, after_forward=fwd, after_backward=bwd)


def s_accelerate_fp16_gradscaler_oom(out, facts):
    """HF Accelerate: `Accelerator(mixed_precision="fp16")` (autocast fp16 around the model's forward, outputs
    converted to fp32, and a GradScaler: accelerator.scaler), a plain loop `loss = model(input_ids=idx,
    labels=idx).loss; accelerator.backward(loss); optimizer.step(); optimizer.zero_grad()` on an HF Llama from a
    config (4 layers, width 1024, intermediate 2816, 16 / 4 heads, vocab 32000, ~110.6 M params fp32), AdamW,
    microbatch 8 x 1024 from a prepared DataLoader. The cap is placed between the first step's forward and
    backward needs, measured first in a child process (same run, no cap, no history): the probe's peak reserved
    after the forward + 35% of the way to its peak allocated after the backward (or the midpoint of the two
    peaks allocated if those are closer than 256 MiB); the forward fits, it dies in the first backward
    (the float32 logits' gradients of the loss)."""
    torch = R._torch()
    try:
        import accelerate  # noqa: F401
    except ImportError:
        facts["skipped"] = "accelerate not installed"
        return
    pf = run_probe(out, "accelerate_fp16_probe")["probe"]
    fr = pf["after_forward"]["max_reserved"]
    fa = pf["after_forward"]["max_allocated"]
    ba = pf["after_backward"]["max_allocated"]
    if ba - fr > 256 * MiB:
        capb = fr + 0.35 * (ba - fr)
        rule = "probe forward peak reserved + 35% of (backward peak allocated - forward peak reserved)"
    else:
        capb = (fa + ba) / 2
        rule = "midpoint of the probe's forward and backward peaks allocated"
    capb = (int(capb) // (2 * MiB)) * 2 * MiB
    cap(capb / GiB, facts)
    facts["probe"] = pf
    facts["cap_rule"] = rule
    start_history(max_entries=100000, facts=facts)
    acc, m, opt, dl = _accel_setup(facts)
    sc = getattr(acc, "scaler", None)
    facts["settings"] = dict(
        kind="training", framework="accelerate (own loop, accelerator.backward)",
        amp="fp16 (Accelerator mixed_precision='fp16', autocast + GradScaler)",
        grad_scaler=type(sc).__module__ + "." + type(sc).__name__ if sc is not None else None,
        optimizer="torch.optim.AdamW (AcceleratedOptimizer)", microbatch=AC_B, seq_len=AC_T, vocab=AC_V,
        accumulation_steps=acc.gradient_accumulation_steps, grad_checkpointing=False, cap_rule=rule,
        probe_forward_peak_allocated=fa, probe_forward_peak_reserved=fr, probe_backward_peak_allocated=ba,
        logits_bytes_fp16=AC_B * AC_T * AC_V * 2, logits_bytes_fp32=AC_B * AC_T * AC_V * 4,
        right_advice="capacity in the first backward (mixed precision fp16 with a GradScaler is already on): a "
                     "smaller microbatch with Accelerator(gradient_accumulation_steps=...) and "
                     "`with accelerator.accumulate(model):` to keep the effective batch, or gradient checkpointing "
                     "(model.gradient_checkpointing_enable()); the float32 logits/loss over 32000 classes are a "
                     "large part (a chunked loss helps)",
        report_must_not_say="autocast / bf16 / fp16 mixed precision as new advice (fp16 is on); a leak or growth; "
                            "fragmentation / expandable segments as the fix; optimizer-state advice first (no "
                            "optimizer step has run: no AdamW state yet); FSDP; no_grad")

    def body():
        for s, idx in enumerate(dl):
            loss = m(input_ids=idx, labels=idx).loss
            steplog(facts, key="phases", step=s, phase="forward done", loss=float(loss))
            acc.backward(loss)
            steplog(facts, key="phases", step=s, phase="backward done")
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(loss), scale=float(sc.get_scale()) if sc is not None else None)
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 8. inference server, steady, healthy

def s_infer_server_steady_healthy(out, facts):
    """An inference (embedding) server loop: HF BertModel from a config (12 layers, hidden 768, 12 heads, inter
    3072, vocab 30522, max_position_embeddings 512, with pooler, ~109.5 M params) cast to bf16, eval(), every
    request under torch.inference_mode(): 60 requests (seeded) of 1-32 texts padded to the request's longest
    (16-512 tokens; per-text lengths from half of that up, attention_mask), the CLS embeddings L2-normalised,
    sent to the CPU (.float().cpu()) and returned; nothing is kept on the GPU between requests; no memory cap,
    PYTORCH_CUDA_ALLOC_CONF unset. The snapshot is dumped after the last request; healthy."""
    torch = R._torch()
    from transformers import BertConfig, BertModel
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                     intermediate_size=3072, max_position_embeddings=512)
    m = BertModel(cfg).to(torch.bfloat16).cuda().eval()
    model_facts(m, facts)
    R.hf_cfg_facts(m, facts)
    rng = random.Random(0)
    g = torch.Generator().manual_seed(0)
    reqs = [(rng.randint(1, 32), rng.randint(16, 512)) for _ in range(60)]
    big = max(reqs, key=lambda r: r[0] * r[1])
    facts["requests"] = [dict(batch=b, seq_len=t) for b, t in reqs]
    facts["settings"] = dict(
        kind="inference (embedding server)", framework="transformers forward", amp=None, weights="bf16",
        inference_mode=True, requests=60, batch_range=[1, 32], seq_len_range=[16, 512],
        padding="dynamic (per request)", memory_fraction=None, alloc_conf=None,
        largest_request=dict(batch=big[0], seq_len=big[1]),
        right_advice="healthy: nothing urgent; memory is flat between requests (allocated returns to the weights "
                     "after every request), the peak is the largest request's forward; the varying shapes leave "
                     "the cache above the peak allocated (expandable segments is at most a secondary remark)",
        report_must_not_say="an OOM or OOM advice; a leak or growth; no_grad (inference_mode is on); training "
                            "advice (checkpointing, accumulation, optimizer, FSDP)")
    steplog(facts, key="serve", phase="model loaded")
    outs = []
    with torch.inference_mode():
        for i, (b, t) in enumerate(reqs):
            lens = torch.randint(max(1, t // 2), t + 1, (b,), generator=g)
            lens[0] = t
            ids = torch.randint(1000, 30000, (b, t), generator=g)
            am = (torch.arange(t)[None] < lens[:, None]).long()
            ids = ids * am
            h = m(input_ids=ids.cuda(), attention_mask=am.cuda()).last_hidden_state[:, 0]
            emb = torch.nn.functional.normalize(h.float(), dim=-1).cpu()
            del h
            outs.append(emb.shape[0])
            steplog(facts, key="serve", request=i, batch=b, seq_len=t)
    facts["embeddings_returned"] = sum(outs)
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "replay_buffer_gpu_oom": dict(fn=s_replay_buffer_gpu_oom, group="solo", timeout=90),
    "torchvision_vit_b16_train_oom": dict(fn=s_torchvision_vit_b16_train_oom, group="solo", timeout=90),
    "hf_t5_seq2seq_train_oom": dict(fn=s_hf_t5_seq2seq_train_oom, group="solo", timeout=120),
    "hf_llama_long_prompt_prefill_oom": dict(fn=s_hf_llama_long_prompt_prefill_oom, group="solo", timeout=120),
    "infer_server_steady_healthy": dict(fn=s_infer_server_steady_healthy, group="solo", timeout=90),
    "hf_trainer_eval_bigger_batch_oom": dict(fn=s_hf_trainer_eval_bigger_batch_oom, group="solo", timeout=120),
    "accelerate_fp16_gradscaler_oom": dict(fn=s_accelerate_fp16_gradscaler_oom, group="solo", timeout=150),
    "accelerate_fp16_probe": dict(fn=s_accelerate_fp16_probe, group="solo", timeout=120),
    "other_process_plus_capacity_oom": dict(fn=s_other_process_plus_capacity_oom, group="solo", timeout=150),
    "other_process_plus_capacity_probe": dict(fn=s_other_process_plus_capacity_probe, group="solo", timeout=120),
})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    R.main()
