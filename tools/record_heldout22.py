#!/usr/bin/env python3
"""A twenty-second held-out set: leaks that grow in steps, and two healthy runs
(python3 record_heldout22.py OUTDIR [names...]; same outputs as record_runs.py, each scenario in its own
process). Recorded beside record_runs.py as build/h22/record_heldout22.py."""
import copy, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log, mem


def _lm_step(model, opt, B, T, V, facts=None):
    """One bf16-autocast LM step written out in this script (so the stacks name it): returns (loss, logits)."""
    torch = R._torch()
    import torch.nn.functional as F
    idx = torch.randint(V, (B, T + 1), device="cuda")
    with torch.amp.autocast("cuda", dtype=torch.bfloat16):
        logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, V).float(), idx[:, 1:].reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss, logits


def s_optimizer_recreated_leak_oom(out, facts):
    """Cyclic restarts done by hand: a 4-layer SDPA GPT (width 1024, vocab 8192, 67.2 M params, 256 MiB fp32),
    bf16 autocast, microbatch 8 x 512; every 4 iterations (a "cycle") the loop builds a fresh
    torch.optim.AdamW(model.parameters()) and a CosineAnnealingLR(opt, T_max=4) for it, and appends the
    scheduler to a list (kept to log each cycle's learning rates): every scheduler keeps its optimizer, so
    each cycle's first opt.step() adds another 512 MiB of AdamW moments that are never freed; 4 GiB allowed."""
    torch = R._torch()
    cap(4, facts)
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    V, B, T, K = 8192, 8, 512, 4
    model = R.tiny_gpt(vocab=V, d=1024, h=16, L=4).cuda()
    model_facts(model, facts)
    facts["settings"] = dict(kind="training", framework="plain PyTorch (own loop)", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW, a new one every cycle", microbatch=B, seq_len=T,
                             cycle_iterations=K, kept="schedulers.append(CosineAnnealingLR(opt, T_max=4)): "
                             "each scheduler references its optimizer",
                             adamw_state_bytes_each=2 * facts["model_param_bytes"])
    schedulers = []

    def body():
        opt = sched = None
        for it in range(200):
            if it % K == 0:
                opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
                sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=K)
                schedulers.append(sched)
            loss, _ = _lm_step(model, opt, B, T, V)
            sched.step()
            steplog(facts, step=it, cycle=it // K, optimizers_alive=len(schedulers),
                    opt_state=R.opt_state_bytes(opt), loss=float(loss))
    run_oom(out, facts, body)
    facts["optimizers_alive"] = len(schedulers)


def s_ema_deepcopy_each_eval_leak_oom(out, facts):
    """Checkpoint copies kept on the GPU: a 6-layer SDPA GPT (width 1024, vocab 32000, 141.1 M params,
    538 MiB fp32), bf16 autocast, AdamW, microbatch 4 x 512; every 3 iterations a short evaluation
    (model.eval(), torch.no_grad(), 2 batches) and then `kept.append(copy.deepcopy(model))` ("keep every
    evaluated model, average the best at the end"): each copy is another full set of parameters on the
    GPU; 8 GiB allowed; 20000-entry ring buffer (it wraps: the first copies are older than the trace)."""
    torch = R._torch()
    import torch.nn.functional as F
    cap(8, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    V, B, T, K = 32000, 4, 512, 3
    model = R.tiny_gpt(vocab=V, d=1024, h=16, L=6).cuda()
    model_facts(model, facts)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    facts["settings"] = dict(kind="training with evaluation", framework="plain PyTorch (own loop)",
                             amp="bf16 autocast", optimizer="torch.optim.AdamW", microbatch=B, seq_len=T,
                             eval_every=K, eval_batches=2,
                             kept="kept.append(copy.deepcopy(model)) after every evaluation",
                             copy_bytes_each=facts["model_param_bytes"] + facts["model_buffer_bytes"])
    kept = []

    def evaluate():
        model.eval()
        tot = 0.0
        with torch.no_grad():
            for _ in range(2):
                idx = torch.randint(V, (B, T + 1), device="cuda")
                with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                    logits = model(idx[:, :-1])
                tot += float(F.cross_entropy(logits.reshape(-1, V).float(), idx[:, 1:].reshape(-1)))
        model.train()
        return tot / 2

    def body():
        for it in range(300):
            loss, _ = _lm_step(model, opt, B, T, V)
            if (it + 1) % K == 0:
                val = evaluate()
                kept.append(copy.deepcopy(model))   # every evaluated model, for an average at the end
                steplog(facts, key="evals", step=it, val_loss=val, copies=len(kept))
            steplog(facts, step=it, copies=len(kept), loss=float(loss))
    run_oom(out, facts, body)
    facts["copies_kept"] = len(kept)


def s_periodic_log_tensors_leak_oom(out, facts):
    """Metrics logged as tensors: a 4-layer SDPA GPT (width 768, 12 heads, vocab 32000, 77.5 M params), bf16
    autocast, AdamW, microbatch 4 x 512; every 5 iterations the loop computes a confidence metric from the
    logits without detaching them, conf = logits.float().softmax(-1).max(-1).values.mean(), and appends
    {"step", "loss": loss, "conf": conf} (tensors, no .item()) to a history list: each kept conf holds its
    autograd graph, whose softmax output (4 x 512 x 32000 fp32, 250 MiB) stays alive; 4 GiB allowed."""
    torch = R._torch()
    cap(4, facts)
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    V, B, T, K = 32000, 4, 512, 5
    model = R.tiny_gpt(vocab=V, d=768, h=12, L=4).cuda()
    model_facts(model, facts)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    facts["settings"] = dict(kind="training", framework="plain PyTorch (own loop)", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", microbatch=B, seq_len=T, log_every=K,
                             kept="history.append({'loss': loss, 'conf': logits.float().softmax(-1)"
                                  ".max(-1).values.mean()}) (not detached)",
                             softmax_bytes_each=B * T * V * 4)
    history = []

    def body():
        for it in range(400):
            loss, logits = _lm_step(model, opt, B, T, V)
            if it % K == 0:
                conf = logits.float().softmax(-1).max(-1).values.mean()   # mean top-1 probability
                history.append({"step": it, "loss": loss, "conf": conf})
            del logits
            steplog(facts, step=it, logged=len(history), loss=float(loss))
    run_oom(out, facts, body)
    facts["history_entries"] = len(history)


def s_expandable_varlen_healthy(out, facts):
    """Variable-length LM training with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: a 4-layer SDPA GPT
    (width 1024, vocab 32000, 115.9 M params), bf16 autocast, AdamW, microbatch 8 with the sequence length
    drawn every step from 128..1024 (seeded), 12 steps; no cap; snapshot after the last step."""
    torch = R._torch()
    import random
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    rnd = random.Random(22)
    V, B = 32000, 8
    lens = [rnd.randrange(128, 1025) for _ in range(12)]
    model = R.tiny_gpt(vocab=V, d=1024, h=16, L=4).cuda()
    model_facts(model, facts)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    facts["settings"] = dict(kind="training", framework="plain PyTorch (own loop)", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", microbatch=B, seq_lens=lens,
                             alloc_conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF"))
    for it, T in enumerate(lens):
        loss, _ = _lm_step(model, opt, B, T, V)
        steplog(facts, step=it, T=T, loss=float(loss))
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


def s_sparse_embedding_sparseadam_healthy(out, facts):
    """A recommender-style model with a sparse embedding: nn.Embedding(1_000_000, 128, sparse=True) (488 MiB
    fp32) looked up with 32 skewed ids per sample and mean-pooled, then an MLP 128 -> 1024 -> 1024 -> 1 (1.2 M
    params), BCE-with-logits loss, fp32; torch.optim.SparseAdam on the embedding (its moments are dense:
    2 x 488 MiB) and torch.optim.Adam on the MLP; batch 8192, 12 steps; no cap; snapshot after the last."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    N, D, BAG, B = 1_000_000, 128, 32, 8192

    class Rec(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(N, D, sparse=True)
            s.mlp = nn.Sequential(nn.Linear(D, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                                  nn.Linear(1024, 1))

        def forward(s, ids):
            return s.mlp(s.emb(ids).mean(1)).squeeze(-1)

    model = Rec().cuda()
    model_facts(model, facts)
    facts["embedding_bytes"] = N * D * 4
    sparse_opt = torch.optim.SparseAdam(list(model.emb.parameters()), lr=1e-3)
    dense_opt = torch.optim.Adam(model.mlp.parameters(), lr=1e-3)
    facts["settings"] = dict(kind="training", framework="plain PyTorch (own loop)", amp=None, dtype="float32",
                             optimizer="SparseAdam (embedding) + Adam (MLP)", batch=B, ids_per_sample=BAG,
                             embedding=f"nn.Embedding({N}, {D}, sparse=True)")
    for it in range(12):
        ids = (torch.rand(B, BAG, device="cuda") ** 3 * N).long()   # skewed: popular ids repeat
        y = (torch.rand(B, device="cuda") < 0.2).float()
        loss = F.binary_cross_entropy_with_logits(model(ids), y)
        loss.backward()
        sparse_opt.step()
        dense_opt.step()
        sparse_opt.zero_grad(set_to_none=True)
        dense_opt.zero_grad(set_to_none=True)
        steplog(facts, step=it, unique_ids=int(ids.unique().numel()), loss=float(loss))
    facts["optimizer_state_bytes"] = R.opt_state_bytes(sparse_opt) + R.opt_state_bytes(dense_opt)
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "optimizer_recreated_leak_oom": dict(fn=s_optimizer_recreated_leak_oom, group="solo", timeout=90),
    "ema_deepcopy_each_eval_leak_oom": dict(fn=s_ema_deepcopy_each_eval_leak_oom, group="solo", timeout=90),
    "periodic_log_tensors_leak_oom": dict(fn=s_periodic_log_tensors_leak_oom, group="solo", timeout=90),
    "expandable_varlen_healthy": dict(fn=s_expandable_varlen_healthy, group="solo", timeout=90,
                                      env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
    "sparse_embedding_sparseadam_healthy": dict(fn=s_sparse_embedding_sparseadam_healthy, group="solo",
                                                timeout=90),
})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    R.main()
