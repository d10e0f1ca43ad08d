#!/usr/bin/env python3
"""A tenth held-out set (python3 record_heldout10.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Recorded beside record_runs.py as build/h10/train.py."""
import os, sys, random
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log


def s_grad_hook_leak_oom(out, facts):
    """Training with a gradient hook that keeps every gradient: p.register_hook(lambda g: kept.append(g))
    on every parameter of a 4-layer SDPA GPT (width 1024, vocab 8192, ~67 M params), meant for a later
    gradient-noise estimate; bf16 autocast, AdamW, zero_grad(set_to_none=True), microbatch 8 x 512,
    4 GiB allowed, up to 40 steps. Each step keeps one more full set of fp32 gradients."""
    torch = R._torch()
    cap(4, facts)
    start_history(facts=facts)
    torch.manual_seed(0)
    V = 8192
    m = R.tiny_gpt(vocab=V, L=4).cuda()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    kept = []
    for p in m.parameters():
        p.register_hook(lambda g: kept.append(g))
    B, T = 8, 512
    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", microbatch=B, seq_len=T, vocab=V,
                             hook="p.register_hook(lambda g: kept.append(g)) on every parameter",
                             kept_bytes_per_step=facts["model_param_bytes"])

    def body():
        for s in range(40):
            loss = R.gpt_step(m, opt, B, T, vocab=V)
            steplog(facts, step=s, kept=len(kept), loss=float(loss))
    run_oom(out, facts, body)


def s_retrieval_scores_oom(out, facts):
    """Dense retrieval inference: a 2,000,000 x 768 fp16 passage-embedding index on the GPU (2.86 GiB),
    queries encoded by a 2-layer MLP encoder in eval() under torch.inference_mode(), scores = q @ index.T
    (fp16) then scores.topk(100); query batches of 512, 1024, then the whole 4096-query set at once;
    12 GiB allowed."""
    torch = R._torch()
    import torch.nn as nn
    cap(12, facts)
    start_history(facts=facts)
    torch.manual_seed(0)
    N, D = 2_000_000, 768
    enc = nn.Sequential(nn.Linear(1024, 2048), nn.GELU(), nn.Linear(2048, D)).cuda().half().eval()
    model_facts(enc, facts)
    with torch.inference_mode():
        index = torch.randn(N, D, device="cuda", dtype=torch.float16)
    batches = [512, 1024, 4096]
    facts["settings"] = dict(kind="inference (dense retrieval)", framework="plain PyTorch", dtype="fp16",
                             grad_mode="torch.inference_mode()", index_shape=[N, D],
                             index_bytes=N * D * 2, query_batches=batches, k=100,
                             scores_bytes={b: b * N * 2 for b in batches})

    def body():
        with torch.inference_mode():
            for s, b in enumerate(batches):
                q = enc(torch.randn(b, 1024, device="cuda", dtype=torch.float16))
                scores = q @ index.T
                top = scores.topk(100, dim=1)
                steplog(facts, step=s, queries=b, top=tuple(top.indices.shape))
                del scores, top, q
    run_oom(out, facts, body)


def s_eval_bigger_batch_oom(out, facts):
    """Training with evaluation every 4 steps: 4-layer SDPA GPT (width 1024, vocab 32000), bf16
    autocast, AdamW, train microbatch 8 x 512; evaluation under torch.no_grad() with model.eval() at
    batch 64 x 512 (eval batch 8x the train batch, as many configs set), loss from logits.float();
    6 GiB allowed. Training steps fit; the first evaluation dies."""
    torch = R._torch()
    import torch.nn.functional as F
    cap(6, facts)
    start_history(facts=facts)
    torch.manual_seed(0)
    V = 32000
    m = R.tiny_gpt(vocab=V, L=4).cuda()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B, T, EB = 8, 512, 64
    facts["settings"] = dict(kind="training with periodic evaluation", framework="plain PyTorch",
                             amp="bf16 autocast", optimizer="torch.optim.AdamW", microbatch=B, seq_len=T,
                             vocab=V, eval_every=4, eval_batch=EB, eval_grad_mode="torch.no_grad()",
                             eval_logits_fp32_bytes=EB * T * V * 4)

    def evaluate():
        m.eval()
        with torch.no_grad():
            idx = torch.randint(V, (EB, T + 1), device="cuda")
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                logits = m(idx[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, V), idx[:, 1:].reshape(-1))
        m.train()
        return loss

    def body():
        for s in range(12):
            loss = R.gpt_step(m, opt, B, T, vocab=V)
            steplog(facts, step=s, phase="train", loss=float(loss))
            if (s + 1) % 4 == 0:
                R.log(f"evaluating at step {s}")
                vl = evaluate()
                steplog(facts, step=s, phase="eval", loss=float(vl))
    run_oom(out, facts, body)


def s_compile_dynamic_healthy(out, facts):
    """torch.compile(model, dynamic=True) of a 2-layer SDPA GPT (width 1024, vocab 8192), bf16 autocast,
    AdamW, 4096 tokens a step as B x T with T from 128..1024 (varying every step), 10 steps; no cap."""
    torch = R._torch()
    start_history(max_entries=200000, facts=facts)
    torch.manual_seed(0)
    V = 8192
    m = R.tiny_gpt(vocab=V, L=2).cuda()
    model_facts(m, facts)
    cm = torch.compile(m, dynamic=True)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    rng = random.Random(10)
    lens = [rng.choice([128, 256, 384, 512, 768, 1024]) for _ in range(10)]
    facts["settings"] = dict(kind="training", framework="plain PyTorch + torch.compile(dynamic=True)",
                             amp="bf16 autocast", optimizer="torch.optim.AdamW", tokens_per_step=4096,
                             seq_lens=lens, vocab=V)
    for s, T in enumerate(lens):
        loss = R.gpt_step(cm, opt, 4096 // T, T, vocab=V)
        steplog(facts, step=s, B=4096 // T, T=T, loss=float(loss))
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


def s_side_stream_prefetch_healthy(out, facts):
    """An apex-style data prefetcher: pinned CPU batches (32 x 3 x 224 x 224 fp32) copied to the GPU with
    non_blocking=True on a side torch.cuda.Stream, the default stream waits (wait_stream) and the batch
    calls record_stream(current_stream); torchvision resnet18, channels_last, fp16 autocast with
    GradScaler, SGD momentum, 8 steps; no cap."""
    torch = R._torch()
    import torchvision
    import torch.nn.functional as F
    start_history(facts=facts)
    torch.manual_seed(0)
    m = torchvision.models.resnet18(num_classes=1000).cuda().to(memory_format=torch.channels_last)
    model_facts(m, facts)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")
    B = 32
    cpu = [(torch.randn(B, 3, 224, 224).pin_memory(), torch.randint(1000, (B,)).pin_memory()) for _ in range(3)]
    side = torch.cuda.Stream()
    facts["settings"] = dict(kind="training (vision)", framework="plain PyTorch + torchvision", amp="fp16 autocast",
                             optimizer="torch.optim.SGD(momentum=0.9)", batch=B, prefetch="side stream, record_stream",
                             batch_bytes=B * 3 * 224 * 224 * 4)

    def load(i):
        x, y = cpu[i % len(cpu)]
        with torch.cuda.stream(side):
            xg = x.cuda(non_blocking=True).to(memory_format=torch.channels_last)
            yg = y.cuda(non_blocking=True)
        return xg, yg

    nxt = load(0)
    for s in range(8):
        torch.cuda.current_stream().wait_stream(side)
        x, y = nxt
        x.record_stream(torch.cuda.current_stream())
        y.record_stream(torch.cuda.current_stream())
        nxt = load(s + 1)
        with torch.amp.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(m(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        steplog(facts, step=s, loss=float(loss))
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "compile_dynamic_healthy": dict(fn=s_compile_dynamic_healthy, group="par", timeout=240),
    "side_stream_prefetch_healthy": dict(fn=s_side_stream_prefetch_healthy, group="par"),
    "grad_hook_leak_oom": dict(fn=s_grad_hook_leak_oom, group="solo"),
    "retrieval_scores_oom": dict(fn=s_retrieval_scores_oom, group="solo"),
    "eval_bigger_batch_oom": dict(fn=s_eval_bigger_batch_oom, group="solo"),
})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    R.main()
