#!/usr/bin/env python3
"""A fourteenth held-out set (python3 record_heldout14.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Recorded beside record_runs.py as build/h14/train.py."""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log, mem


def s_gru_eval_carried_hidden_oom(out, facts):
    """Perplexity evaluation of a word-level GRU language model (embedding 10000 x 512, 2-layer nn.GRU
    hidden 1024 cuDNN, linear head, ~19.5 M params, fp32) over one long token stream, 128 streams x 128
    tokens a segment, model.eval() but NO torch.no_grad(), and the hidden state carried to the next
    segment without .detach(): every segment's GRU graph (its saved input, output and hidden) stays
    reachable from the carried hidden state, so memory grows each segment; only the loss (a float) is
    kept; 4 GiB allowed."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    cap(4, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    V, E, H, B, T, S = 10000, 512, 1024, 128, 128, 300

    class RNNLM(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(V, E)
            s.rnn = nn.GRU(E, H, num_layers=2, batch_first=True)
            s.head = nn.Linear(H, V)

        def forward(s, x, h):
            y, h = s.rnn(s.emb(x), h)
            return s.head(y), h
    m = RNNLM().cuda().eval()
    model_facts(m, facts)
    stream = torch.randint(V, (B, S * T + 1), device="cuda")
    facts["settings"] = dict(kind="evaluation (RNN LM perplexity)", framework="plain PyTorch", amp=None,
                             grad_enabled=True, eval_mode=True, streams=B, segment=T, hidden_detached=False,
                             segments=S, stream_bytes=stream.numel() * stream.element_size())

    def body():
        h = torch.zeros(2, B, H, device="cuda")
        total = 0.0
        for s in range(S):
            x = stream[:, s * T:(s + 1) * T]
            y = stream[:, s * T + 1:(s + 1) * T + 1]
            logits, h = m(x, h)  # h is not detached and grad is on: the graph chains through every segment
            loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
            total += float(loss)
            steplog(facts, segment=s, loss=float(loss))
        R.log(f"[eval] ppl {2.718281828 ** (total / S):.2f}")
    run_oom(out, facts, body)


def s_mha_need_weights_longseq_oom(out, facts):
    """A 4-block pre-norm encoder written by hand around nn.MultiheadAttention (width 512, 8 heads,
    MLP 2048, 12.6 M params) called as self.attn(y, y, y) with the default need_weights=True (no fused
    kernel: the per-head attention probabilities are materialised and kept for backward, the
    head-averaged weights returned and dropped), bf16 autocast, AdamW, batch 4, a sequence-length
    ladder 1024, 2048, 4096, 8192 (2 steps each) for a regression head; 6 GiB allowed."""
    torch = R._torch()
    import torch.nn as nn
    cap(6, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    D, NH, L, B = 512, 8, 4, 4

    class Block(nn.Module):
        def __init__(s):
            super().__init__()
            s.ln1, s.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
            s.attn = nn.MultiheadAttention(D, NH, batch_first=True)
            s.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

        def forward(s, x):
            y = s.ln1(x)
            a, _ = s.attn(y, y, y)  # need_weights defaults to True
            x = x + a
            return x + s.mlp(s.ln2(x))

    class Enc(nn.Module):
        def __init__(s):
            super().__init__()
            s.inp = nn.Linear(64, D)
            s.blocks = nn.ModuleList([Block() for _ in range(L)])
            s.out = nn.Linear(D, 1)

        def forward(s, x):
            x = s.inp(x)
            for b in s.blocks:
                x = b(x)
            return s.out(x).squeeze(-1)
    m = Enc().cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    ladder = [1024, 2048, 4096, 8192]
    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", batch=B, seq_lens=ladder, steps_per_len=2,
                             need_weights=True, heads=NH, layers=L,
                             attn_probs_bytes_per_layer={T: B * NH * T * T * 2 for T in ladder})

    def body():
        for T in ladder:
            for s in range(2):
                x = torch.randn(B, T, 64, device="cuda")
                y = torch.randn(B, T, device="cuda")
                with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                    loss = (m(x).float() - y).pow(2).mean()
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                steplog(facts, T=T, step=s, loss=float(loss))
    run_oom(out, facts, body)


def s_vit_near_cap_healthy(out, facts):
    """torchvision vit_b_16 (86.6 M params, 100 classes) trained with bf16 autocast, AdamW, batch 48 at
    224 x 224, 6 steps; steps 0-1 uncapped (step 1 is the first with Adam state), then the cap set to the
    peak reserved so far + 3 % (so the run peaks within a few percent of its limit and finishes); snapshot
    at the end."""
    torch = R._torch()
    import torchvision
    import torch.nn.functional as F
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    m = torchvision.models.vit_b_16(num_classes=100).cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B = 48
    facts["settings"] = dict(kind="training (vision)", framework="plain PyTorch + torchvision", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", batch=B, image=[3, 224, 224], steps=6)
    for s in range(6):
        x = torch.randn(B, 3, 224, 224, device="cuda")
        y = torch.randint(100, (B,), device="cuda")
        with torch.amp.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        steplog(facts, step=s, loss=float(loss))
        if s == 1:
            peak = torch.cuda.max_memory_reserved()
            capb = (int(peak * 1.03) // (2 * MiB)) * 2 * MiB
            total = torch.cuda.get_device_properties(0).total_memory
            torch.cuda.set_per_process_memory_fraction(capb / total)
            facts["cap_bytes"] = capb
            facts["cap_set_after"] = "step 1, at the peak reserved so far + 3 %"
            facts["step1_peak_reserved"] = peak
    facts["opt_state_bytes"] = R.opt_state_bytes(opt)
    facts["oom"] = False
    facts["headroom_bytes"] = facts["cap_bytes"] - torch.cuda.max_memory_reserved()
    dump(out, facts)
    write_log(out)


def s_hf_trainer_compile_oom(out, facts):
    """HF Trainer on a Llama causal LM from a config (4 layers, hidden 1024, 16/4 heads, vocab 32000,
    ~0.1 B params), TrainingArguments(torch_compile=True, bf16=True, per_device_train_batch_size=16),
    seq 1024; a batch that does not fit: dies in its first compiled step; 6 GiB allowed."""
    torch = R._torch()
    from transformers import Trainer, TrainingArguments, TrainerCallback
    cap(6, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    model = R.hf_llama(L=4)
    model_facts(model, facts)
    R.hf_cfg_facts(model, facts)
    T, B = 1024, 16

    class DS(torch.utils.data.Dataset):
        def __len__(s):
            return 256

        def __getitem__(s, i):
            g = torch.Generator().manual_seed(i)
            ids = torch.randint(32000, (T,), generator=g)
            return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}

    class Rec(TrainerCallback):
        def on_step_end(s, args, state, control, **kw):
            steplog(facts, step=state.global_step)

    args = TrainingArguments(output_dir="/tmp/trainer_compile_out", per_device_train_batch_size=B, max_steps=4,
                             bf16=True, torch_compile=True, report_to=[], save_strategy="no", logging_steps=1,
                             disable_tqdm=True, dataloader_num_workers=0, learning_rate=1e-4)
    tr = Trainer(model=model, args=args, train_dataset=DS(), callbacks=[Rec()])
    facts["settings"] = dict(kind="training", framework="transformers Trainer", amp="bf16 (Trainer bf16=True)",
                             optimizer=str(args.optim), microbatch=B, seq_len=T, torch_compile=True,
                             logits_bytes_fp32=B * T * 32000 * 4)
    run_oom(out, facts, tr.train)


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "vit_near_cap_healthy": dict(fn=s_vit_near_cap_healthy, group="solo"),
    "gru_eval_carried_hidden_oom": dict(fn=s_gru_eval_carried_hidden_oom, group="solo"),
    "mha_need_weights_longseq_oom": dict(fn=s_mha_need_weights_longseq_oom, group="solo"),
    "hf_trainer_compile_oom": dict(fn=s_hf_trainer_compile_oom, group="solo", timeout=200),
})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    R.main()
