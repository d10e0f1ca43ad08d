#!/usr/bin/env python3
"""A fifteenth held-out set (python3 record_heldout15.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Recorded beside record_runs.py as build/h15/record_heldout15.py."""
import os, sys, random
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log, mem


def s_maml_create_graph_oom(out, facts):
    """MAML on a 4-block conv net (64 channels, 3x3 conv + BatchNorm + ReLU + 2x2 max-pool, 84 x 84 RGB,
    5-way head; ~113 K params fp32), functional parameters through torch.func.functional_call, inner-loop
    SGD with torch.autograd.grad(..., create_graph=True) (second order), 5-way 5-shot with 15 queries
    (25 support + 75 query images a task), 4 tasks a meta-batch, each task's query loss backpropagated
    on its own (meta-gradients accumulate), Adam on the meta-parameters; the number of inner steps
    raised 1, 2, 4, 8, 16, 32 (2 meta-steps each); 3 GiB allowed."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.func import functional_call
    cap(3, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    C, N, K, Q, TASKS = 64, 5, 5, 15, 4

    def block(cin):
        return nn.Sequential(nn.Conv2d(cin, C, 3, padding=1), nn.BatchNorm2d(C), nn.ReLU(), nn.MaxPool2d(2))

    class ConvNet(nn.Module):
        def __init__(s):
            super().__init__()
            s.f = nn.Sequential(block(3), block(C), block(C), block(C))
            s.head = nn.Linear(C * 5 * 5, N)

        def forward(s, x):
            return s.head(s.f(x).flatten(1))
    m = ConvNet().cuda().train()
    model_facts(m, facts)
    meta_opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    ladder = [1, 2, 4, 8, 16, 32]
    inner_lr = 0.01
    facts["settings"] = dict(kind="training (meta-learning, MAML second order)", framework="plain PyTorch + torch.func",
                             amp=None, optimizer="torch.optim.Adam (outer), SGD (inner, functional)",
                             ways=N, shots=K, queries=Q, tasks_per_meta_batch=TASKS, image=[3, 84, 84],
                             inner_steps_ladder=ladder, meta_steps_per_rung=2, create_graph=True,
                             first_block_activation_bytes_per_task=(N * K) * C * 84 * 84 * 4)

    def body():
        it = 0
        for inner in ladder:
            for _ in range(2):
                meta_opt.zero_grad(set_to_none=True)
                total = 0.0
                for t in range(TASKS):
                    xs = torch.randn(N * K, 3, 84, 84, device="cuda")
                    ys = torch.arange(N, device="cuda").repeat_interleave(K)
                    xq = torch.randn(N * Q, 3, 84, 84, device="cuda")
                    yq = torch.arange(N, device="cuda").repeat_interleave(Q)
                    params = dict(m.named_parameters())
                    for k in range(inner):
                        loss = F.cross_entropy(functional_call(m, params, (xs,)), ys)
                        grads = torch.autograd.grad(loss, list(params.values()), create_graph=True)
                        params = {n: p - inner_lr * g for (n, p), g in zip(params.items(), grads)}
                        steplog(facts, key="inner", meta_step=it, inner_steps=inner, task=t, k=k)
                    qloss = F.cross_entropy(functional_call(m, params, (xq,)), yq) / TASKS
                    qloss.backward()
                    total += float(qloss)
                meta_opt.step()
                steplog(facts, meta_step=it, inner_steps=inner, meta_loss=total)
                it += 1
    run_oom(out, facts, body)


def s_cudagraph_many_shapes(out, facts):
    """Inference of a 4-layer SDPA GPT (width 1024, 16 heads, vocab 32000, ~116 M params) in bf16 under
    torch.compile(mode="reduce-overhead", dynamic=False) (inductor + CUDA graph trees) and
    torch.inference_mode(), batch 8, a new sequence length each request (256, 384, 512, ... up to 2048),
    the all-position bf16 logits returned and reduced to the next-token argmax at the last position;
    recompile limit raised to 64 so every length is compiled and graphed; 3 GiB allowed."""
    torch = R._torch()
    import torch._dynamo
    cap(3, facts)
    torch._dynamo.config.cache_size_limit = 64
    if hasattr(torch._dynamo.config, "recompile_limit"):
        torch._dynamo.config.recompile_limit = 64
    torch.manual_seed(0)
    m = R.tiny_gpt(vocab=32000, L=4).cuda().to(torch.bfloat16).eval()
    model_facts(m, facts)
    cm = torch.compile(m, mode="reduce-overhead", dynamic=False)
    B = 8
    lens = list(range(256, 2049, 128))
    facts["settings"] = dict(kind="inference (compiled, CUDA graphs)", framework="plain PyTorch + torch.compile",
                             amp=None, dtype="bf16", batch=B, seq_lens=lens, compile_mode="reduce-overhead",
                             dynamic=False, recompile_limit=64,
                             logits_bytes={T: B * T * 32000 * 2 for T in lens})
    start_history(max_entries=20000, facts=facts)

    def body():
        for i, T in enumerate(lens):
            idx = torch.randint(32000, (B, T), device="cuda")
            with torch.inference_mode():
                for rep in range(2):  # the first call of a shape warms up, the second records the graph
                    logits = cm(idx)
                    nxt = logits[:, -1].argmax(-1).cpu()
            steplog(facts, request=i, T=T, next0=int(nxt[0]))
        pools = {}
        for seg in torch.cuda.memory_snapshot():
            pid = str(seg.get("segment_pool_id"))
            pools[pid] = pools.get(pid, 0) + seg["total_size"]
        facts["pools_at_end"] = pools
    run_oom(out, facts, body)
    try:
        pools = {}
        for seg in torch.cuda.memory_snapshot():
            pid = str(seg.get("segment_pool_id"))
            pools[pid] = pools.get(pid, 0) + seg["total_size"]
        facts["pools_after"] = pools
    except Exception as e:
        facts["pools_after"] = repr(e)


def s_ensemble_infer_weights_oom(out, facts):
    """An ensemble of 6 identical Llama-architecture causal LMs built from one config (24 layers, hidden
    1024, 16/4 heads, intermediate 2816, vocab 32000; ~333 M params each, fp32, 1.33 GB a member), each
    member a copy of a CPU-built model moved to the GPU with .cuda() (as loading 6 checkpoints would),
    then torch.inference_mode() forwards of batch 8 x 512 tokens averaging the members' logits; the
    allowed memory (set before anything is loaded) is the six members' weights + 192 MiB, so all
    members load and the first forward dies."""
    torch = R._torch()
    import copy
    torch.manual_seed(0)
    base = R.hf_llama(L=24).eval()
    R.hf_cfg_facts(base, facts)
    pbytes = sum(p.numel() * p.element_size() for p in base.parameters())
    M, B, T = 6, 8, 512
    capb = ((M * pbytes + 192 * MiB) // (2 * MiB)) * 2 * MiB
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(capb / total)
    facts["cap_bytes"] = capb
    facts["cap_rule"] = "6 members' fp32 weights + 192 MiB, set before loading"
    start_history(max_entries=20000, facts=facts)
    facts["settings"] = dict(kind="inference (ensemble)", framework="transformers (LlamaForCausalLM)", amp=None,
                             dtype="float32", members=M, batch=B, seq_len=T, member_param_bytes=pbytes,
                             member_params=sum(p.numel() for p in base.parameters()),
                             logits_bytes_fp32=B * T * 32000 * 4, inference_mode=True)

    def body():
        members = []
        for i in range(M):
            mm = copy.deepcopy(base).cuda()
            members.append(mm)
            steplog(facts, key="load", member=i)
        if True:
            model_facts(members[0], facts)
        idx = torch.randint(32000, (B, T), device="cuda")
        with torch.inference_mode():
            acc = None
            for i, mm in enumerate(members):
                lg = mm(input_ids=idx).logits
                acc = lg if acc is None else acc + lg
                steplog(facts, key="forward", member=i)
            pred = (acc / M).argmax(-1)
        steplog(facts, done=True, pred0=int(pred[0, 0]))
    run_oom(out, facts, body)


def s_loss_list_tiny_growth_healthy(out, facts):
    """A 4-layer SDPA GPT (width 1024, vocab 8192, ~67 M params) trained with bf16 autocast, AdamW,
    batch 8 x 512, 40 steps, the loss TENSOR (not loss.item()) appended to a Python list every step
    for logging (averaged at the end): each kept loss is a 0-dim fp32 CUDA tensor (one 512 B block)
    whose graph's saved tensors were freed by backward; healthy, no cap beyond the card; snapshot at the end."""
    torch = R._torch()
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    m = R.tiny_gpt(vocab=8192, L=4).cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B, T, S = 8, 512, 40
    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", batch=B, seq_len=T, steps=S,
                             losses_kept_as="CUDA tensors in a Python list", bytes_per_kept_loss=512)
    losses = []
    import torch.nn.functional as F
    for s in range(S):
        idx = torch.randint(8192, (B, T), device="cuda")
        with torch.amp.autocast("cuda", dtype=torch.bfloat16):
            logits = m(idx)
            loss = F.cross_entropy(logits.float().view(-1, 8192), idx.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss)  # the tensor, not loss.item()
        steplog(facts, step=s, kept_losses=len(losses))
    R.log(f"[train] mean loss {float(torch.stack(losses).mean()):.4f}")
    facts["oom"] = False
    facts["kept_losses"] = len(losses)
    dump(out, facts)
    write_log(out)


def s_gc_threshold_varlen_healthy(out, facts):
    """PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.6,max_split_size_mb:128 set in the
    process's environment before CUDA init; a 4-layer SDPA GPT (width 1024, vocab 32000, ~116 M params)
    trained with bf16 autocast, AdamW, (batch, seq) drawn every step from 1-8 x 128-1024 (at most 4096
    tokens), 24 steps; 5 GiB allowed (the threshold acts on the fraction); healthy; snapshot at the end."""
    torch = R._torch()
    cap(5, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    rng = random.Random(15)
    m = R.tiny_gpt(vocab=32000, L=4).cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    shapes = []
    while len(shapes) < 24:
        B, T = rng.randint(1, 8), rng.choice([128, 256, 384, 512, 640, 768, 896, 1024])
        if B * T <= 4096:
            shapes.append((B, T))
    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", shapes=shapes, vocab=32000,
                             alloc_conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF"))
    for s, (B, T) in enumerate(shapes):
        loss = R.gpt_step(m, opt, B, T, vocab=32000)
        steplog(facts, step=s, B=B, T=T, loss=float(loss))
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "maml_create_graph_oom": dict(fn=s_maml_create_graph_oom, group="solo", timeout=120),
    "cudagraph_many_shapes": dict(fn=s_cudagraph_many_shapes, group="solo", timeout=200),
    "ensemble_infer_weights_oom": dict(fn=s_ensemble_infer_weights_oom, group="solo", timeout=150),
    "loss_list_tiny_growth_healthy": dict(fn=s_loss_list_tiny_growth_healthy, group="solo", timeout=100),
    "gc_threshold_varlen_healthy": dict(fn=s_gc_threshold_varlen_healthy, group="solo", timeout=100,
                                        env={"PYTORCH_CUDA_ALLOC_CONF":
                                             "garbage_collection_threshold:0.6,max_split_size_mb:128"}),
})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    R.main()
