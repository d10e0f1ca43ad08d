#!/usr/bin/env python3
"""A twentieth held-out set (python3 record_heldout20.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Recorded beside record_runs.py as build/h20/record_heldout20.py."""
import gc, os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log, mem, log


def _lm_steps(m, opt, B, T, V, steps, facts, amp=True):
    """The plain loop: forward, float32 cross-entropy, backward, AdamW step."""
    torch = R._torch()
    import torch.nn.functional as F
    for step in range(steps):
        idx = torch.randint(V, (B, T + 1), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            logits = m(idx[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, V).float(), idx[:, 1:].reshape(-1))
        log(f"step {step}: forward done, backward")
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        steplog(facts, step=step, loss=float(loss))


def s_fsdp2_fully_shard_bf16_oom(out, facts):
    """FSDP2 on one GPU: torch.distributed.fsdp.fully_shard with MixedPrecisionPolicy(param_dtype=bf16,
    reduce_dtype=fp32) on each of the 8 SDPA blocks, then on the root, of a GPT (width 1024, 16 heads,
    vocab 32000, 166 M params fp32); nccl process group of world size 1 (MASTER_PORT 29520); AdamW; no
    autocast (FSDP casts the parameters to bf16); microbatch 16 x 1024, float32 cross-entropy; 6 GiB
    allowed: the first forward's activations do not fit."""
    torch = R._torch()
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29520", RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", device_id=torch.device("cuda:0"))
    try:
        cap(6, facts)
        start_history(max_entries=20000, facts=facts)
        torch.manual_seed(0)
        V, B, T = 32000, 16, 1024
        m = R.tiny_gpt(vocab=V, d=1024, h=16, L=8).cuda()
        model_facts(m, facts)
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for b in m.blocks:
            fully_shard(b, mp_policy=mp)
        fully_shard(m, mp_policy=mp)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
        facts["settings"] = dict(kind="training", framework="plain PyTorch + FSDP2 (fully_shard)",
                                 fsdp=dict(version=2, world_size=1, backend="nccl", per_block=True,
                                           mp_policy="param_dtype=bf16, reduce_dtype=fp32",
                                           reshard_after_forward=True),
                                 amp="FSDP2 MixedPrecisionPolicy bf16 params (no autocast)",
                                 optimizer="torch.optim.AdamW", microbatch=B, seq_len=T, grad_checkpointing=False,
                                 logits_bytes_bf16=B * T * V * 2)
        steplog(facts, key="phases", phase="sharded, optimizer built")
        run_oom(out, facts, lambda: _lm_steps(m, opt, B, T, V, 3, facts, amp=False))
    finally:
        dist.destroy_process_group()


def s_lightning_accum_16mixed_healthy(out, facts):
    """Lightning Trainer(precision="16-mixed" (GradScaler), accumulate_grad_batches=4, max_steps=3) on a
    4-layer SDPA transformer LM (width 512, vocab 32000, 45 M params), AdamW, microbatch 8 x 512:
    12 microbatches, 3 optimizer steps; snapshot dumped by a Callback at the end of the 12th batch
    (after the third optimizer step); no cap."""
    torch = R._torch()
    import lightning as L
    import torch.nn as nn
    import torch.nn.functional as F
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    V, D, H, NL, B, T, ACC, STEPS = 32000, 512, 8, 4, 8, 512, 4, 3
    Block = R.sdpa_block_cls(True)

    class LM(L.LightningModule):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(V, D)
            s.blocks = nn.ModuleList([Block(D, H) for _ in range(NL)])
            s.ln = nn.LayerNorm(D)
            s.head = nn.Linear(D, V, bias=False)

        def forward(s, x):
            h = s.emb(x)
            for b in s.blocks:
                h = b(h)
            return s.head(s.ln(h))

        def training_step(s, batch, i):
            x = batch[0]
            logits = s(x[:, :-1])
            return F.cross_entropy(logits.reshape(-1, V).float(), x[:, 1:].reshape(-1))

        def configure_optimizers(s):
            return torch.optim.AdamW(s.parameters(), lr=1e-4)

    class Rec(L.Callback):
        def on_train_batch_end(s, trainer, pl_module, outputs, batch, batch_idx):
            loss = outputs["loss"] if isinstance(outputs, dict) else outputs
            scale = None
            try:
                scale = float(trainer.precision_plugin.scaler.get_scale())
            except Exception:
                pass
            steplog(facts, step=trainer.global_step, batch_idx=batch_idx, loss=float(loss), grad_scale=scale)
            if trainer.global_step >= trainer.max_steps and not os.path.exists(os.path.join(out, "snapshot.pickle")):
                dump(out, facts)

    data = torch.utils.data.TensorDataset(torch.randint(V, (ACC * STEPS * B + 4 * B, T + 1)))
    loader = torch.utils.data.DataLoader(data, batch_size=B)
    tr = L.Trainer(accelerator="gpu", devices=1, max_steps=STEPS, precision="16-mixed", accumulate_grad_batches=ACC,
                   logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                   callbacks=[Rec()])
    model = LM()
    model_facts(model, facts)
    facts["settings"] = dict(kind="training", framework="lightning Trainer", amp="16-mixed (fp16 autocast + GradScaler)",
                             optimizer="torch.optim.AdamW (via optimizer.step(closure))", microbatch=B, seq_len=T,
                             accumulation_steps=ACC, optimizer_steps=STEPS, grad_checkpointing=False,
                             logits_bytes_fp16=B * T * V * 2)
    tr.fit(model, loader)
    facts["after_fit"] = mem()
    facts["oom"] = False
    if not os.path.exists(os.path.join(out, "snapshot.pickle")):
        facts["dumped_after_fit"] = True
        dump(out, facts)
    write_log(out)


def s_hf_trainer_adafactor_gradckpt_oom(out, facts):
    """HF Trainer on a Qwen2-style causal LM from a config (4 layers, hidden 768, 12/2 heads, inter 2048,
    vocab 32000, untied head, 74 M params), TrainingArguments(optim="adafactor", gradient_checkpointing=True
    (the Trainer's default checkpoint kwargs), bf16=True, per_device_train_batch_size=16), seq 1024;
    4 GiB allowed: dies in the first step."""
    torch = R._torch()
    from transformers import Qwen2Config, Qwen2ForCausalLM, Trainer, TrainingArguments
    cap(4, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    V, T, B = 32000, 1024, 16
    cfg = Qwen2Config(hidden_size=768, intermediate_size=2048, num_hidden_layers=4, num_attention_heads=12,
                      num_key_value_heads=2, vocab_size=V, max_position_embeddings=2048, tie_word_embeddings=False)
    model = Qwen2ForCausalLM(cfg)
    model_facts(model, facts)
    R.hf_cfg_facts(model, facts)

    class DS(torch.utils.data.Dataset):
        def __len__(s):
            return 256

        def __getitem__(s, i):
            g = torch.Generator().manual_seed(i)
            ids = torch.randint(V, (T,), generator=g)
            return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}

    args = TrainingArguments(output_dir="/tmp/h20_trainer", per_device_train_batch_size=B, max_steps=3, bf16=True,
                             optim="adafactor", gradient_checkpointing=True, report_to=[], save_strategy="no",
                             logging_steps=1, disable_tqdm=True, dataloader_num_workers=0, learning_rate=1e-4)
    tr = Trainer(model=model, args=args, train_dataset=DS())
    facts["settings"] = dict(kind="training", framework="transformers Trainer", amp="bf16 (Trainer bf16=True)",
                             optimizer=str(args.optim), microbatch=B, seq_len=T,
                             grad_checkpointing=bool(args.gradient_checkpointing),
                             gradient_checkpointing_kwargs=args.gradient_checkpointing_kwargs,
                             accumulation_steps=args.gradient_accumulation_steps,
                             logits_bytes_bf16=B * T * V * 2, logits_bytes_fp32=B * T * V * 4)
    run_oom(out, facts, tr.train)
    facts["use_cache_after"] = getattr(model.config, "use_cache", None)


def _byte_lm(V, D, H, NL):
    """A byte-level LM of SDPA blocks, each block under torch.utils.checkpoint(use_reentrant=False)."""
    import torch.nn as nn
    from torch.utils.checkpoint import checkpoint
    Block = R.sdpa_block_cls(True)

    class ByteLM(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(V, D)
            s.blocks = nn.ModuleList([Block(D, H) for _ in range(NL)])
            s.ln = nn.LayerNorm(D)
            s.head = nn.Linear(D, V, bias=False)

        def forward(s, idx):
            x = s.emb(idx)
            for b in s.blocks:
                x = checkpoint(b, x, use_reentrant=False)
            return s.head(s.ln(x))
    return ByteLM()


def _calibrate_recompute(V, D, H, NL, B, T):
    """One forward + backward with history off and no cap: the peak reserved in the forward, and the
    allocated / reserved bytes when each block's fc2 is about to run (a forward pre-hook: checkpoint's early
    stop ends a recomputation inside fc2, so no hook after the block would fire), in the forward and in the
    backward's recomputations."""
    torch = R._torch()
    import torch.nn.functional as F
    torch.manual_seed(0)
    m = _byte_lm(V, D, H, NL).cuda()
    phase = ["forward"]
    seen = {"forward": [], "backward": []}
    hooks = [b.fc2.register_forward_pre_hook(lambda mod, i: seen[phase[0]].append(
        (torch.cuda.memory_allocated(), torch.cuda.memory_reserved()))) for b in m.blocks]
    torch.cuda.reset_peak_memory_stats()
    idx = torch.randint(V, (B, T + 1), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = m(idx[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, V).float(), idx[:, 1:].reshape(-1))
    torch.cuda.synchronize()
    res = dict(forward_peak_reserved=torch.cuda.max_memory_reserved(),
               forward_peak_allocated=torch.cuda.max_memory_allocated())
    phase[0] = "backward"
    loss.backward()
    torch.cuda.synchronize()
    res.update(backward_peak_reserved=torch.cuda.max_memory_reserved(),
               backward_peak_allocated=torch.cuda.max_memory_allocated(),
               recompute_fc2_start=seen["backward"], forward_fc2_start=seen["forward"])
    for h in hooks:
        h.remove()
    del m, idx, logits, loss, hooks
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    try:
        torch._C._cuda_clearCublasWorkspaces()
    except Exception as e:
        res["clear_cublas"] = str(e)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    res["reserved_after_cleanup"] = torch.cuda.memory_reserved()
    return res


def s_ckpt_nonreentrant_recompute_oom(out, facts):
    """Own loop: a byte-level LM (vocab 256, 6 SDPA blocks of width 768, 12 heads, 43 M params), every block
    under torch.utils.checkpoint(use_reentrant=False), bf16 autocast, AdamW, microbatch 16 x 4096. The cap
    is calibrated first in the same process with history off (one forward + backward, then every block
    freed, the cuBLAS workspaces cleared and the cache emptied: nothing older than the trace): halfway
    between the forward's peak reserved and the allocated bytes when the last block's recomputation reaches
    its fc2, so the forward fits and the backward dies recomputing a checkpointed block."""
    torch = R._torch()
    V, D, H, NL, B, T = 256, 768, 12, 6, 16, 4096
    calib = _calibrate_recompute(V, D, H, NL, B, T)
    fwd = calib["forward_peak_reserved"]
    rec = calib["recompute_fc2_start"][0][0] if calib["recompute_fc2_start"] else 0
    if rec > fwd + 64 * MiB:
        limit, how = (fwd + rec) // 2, "halfway between forward peak reserved and the first recomputation at fc2"
    else:
        limit, how = (fwd + calib["backward_peak_reserved"]) // 2, "halfway between forward and backward peaks"
    calib["how"] = how
    facts["calibration"] = calib
    cap(limit / GiB, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    m = _byte_lm(V, D, H, NL).cuda()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", microbatch=B, seq_len=T, vocab=V,
                             activation_checkpointing="torch.utils.checkpoint per block, use_reentrant=False",
                             grad_checkpointing=True, residual_stream_dtype="float32 (embedding output)",
                             boundary_bytes_each=B * T * D * 4)
    run_oom(out, facts, lambda: _lm_steps(m, opt, B, T, V, 3, facts))


def s_eval_while_train_graph_held_healthy(out, facts):
    """Own training loop: a 4-layer SDPA GPT (width 512, vocab 32000, 45 M params), bf16 autocast, AdamW,
    microbatch 8 x 512, 6 steps; after steps 3 and 6 an evaluation pass under torch.no_grad() (model.eval(),
    4 validation batches of 8 x 512) runs while the step's `logits` (bf16, B x T x V, requires_grad, its
    graph's saved tensors freed by backward) and `loss` (kept for a log line printed after the evaluation,
    no .item()) are still referenced; snapshot dumped at the last validation batch of the second
    evaluation; no cap; healthy."""
    torch = R._torch()
    import torch.nn.functional as F
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    V, B, T, STEPS, EVERY = 32000, 8, 512, 6, 3
    m = R.tiny_gpt(vocab=V, d=512, h=8, L=4).cuda()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    val = [torch.randint(V, (B, T + 1), generator=torch.Generator().manual_seed(100 + i)) for i in range(4)]
    facts["settings"] = dict(kind="training with periodic evaluation", framework="plain PyTorch (own loop)",
                             amp="bf16 autocast", optimizer="torch.optim.AdamW", microbatch=B, seq_len=T,
                             eval_every=EVERY, eval_batches=len(val), eval_no_grad=True,
                             held_into_eval="logits (train forward output) and loss (no .item())",
                             logits_bytes_bf16=B * T * V * 2)

    def evaluate(last):
        m.eval()
        total = 0.0
        with torch.no_grad():
            for i, v in enumerate(val):
                v = v.cuda()
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    lg = m(v[:, :-1])
                    vl = F.cross_entropy(lg.reshape(-1, V).float(), v[:, 1:].reshape(-1))
                total += vl.item()
                if last and i == len(val) - 1:
                    facts["held_at_dump"] = dict(logits_requires_grad=bool(logits.requires_grad),
                                                 logits_bytes=logits.numel() * logits.element_size())
                    dump(out, facts)
        m.train()
        return total / len(val)

    for step in range(STEPS):
        idx = torch.randint(V, (B, T + 1), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = m(idx[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, V).float(), idx[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if (step + 1) % EVERY == 0:
            vloss = evaluate(last=step + 1 == STEPS)
            log(f"step {step}: train loss {loss} val loss {vloss:.4f}")
        steplog(facts, step=step, loss=float(loss))
    facts["optimizer_state_bytes"] = R.opt_state_bytes(opt)
    facts["oom"] = False
    write_log(out)


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "fsdp2_fully_shard_bf16_oom": dict(fn=s_fsdp2_fully_shard_bf16_oom, group="solo", timeout=120),
    "lightning_accum_16mixed_healthy": dict(fn=s_lightning_accum_16mixed_healthy, group="solo", timeout=120),
    "hf_trainer_adafactor_gradckpt_oom": dict(fn=s_hf_trainer_adafactor_gradckpt_oom, group="solo", timeout=120),
    "ckpt_nonreentrant_recompute_oom": dict(fn=s_ckpt_nonreentrant_recompute_oom, group="solo", timeout=120),
    "eval_while_train_graph_held_healthy": dict(fn=s_eval_while_train_graph_held_healthy, group="solo",
                                                timeout=120),
})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    R.main()
