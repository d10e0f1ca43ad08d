#!/usr/bin/env python3
"""A thirteenth held-out set (python3 record_heldout13.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Recorded beside record_runs.py as build/h13/train.py."""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log, mem


def s_gpu_dataset_resident_oom(out, facts):
    """A whole image dataset moved to the GPU up front (X = torch.from_numpy(x).cuda(): 50000 x 3 x 64 x 64
    float32, 2.29 GiB, labels int64), then torchvision resnet18 (100 classes) trains fp32 with SGD momentum,
    batches indexed from the resident tensor, a batch-size sweep 128, 256, 512, 1024, 2048 (2 steps each,
    same model and optimizer); 5 GiB allowed."""
    torch = R._torch()
    import numpy as np
    import torchvision
    import torch.nn.functional as F
    cap(5, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    N = 50000
    rng = np.random.default_rng(13)
    x = rng.random((N, 3, 64, 64), dtype=np.float32)
    y = rng.integers(0, 100, N)
    X = torch.from_numpy(x).cuda()
    Y = torch.from_numpy(y).cuda()
    del x
    m = torchvision.models.resnet18(num_classes=100).cuda().train()
    model_facts(m, facts)
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    ladder = [128, 256, 512, 1024, 2048]
    facts["settings"] = dict(kind="training (vision)", framework="plain PyTorch + torchvision", amp=None,
                             optimizer="torch.optim.SGD(momentum=0.9)", batches=ladder, steps_per_batch=2,
                             dataset="resident on the GPU", dataset_bytes=X.numel() * X.element_size(),
                             labels_bytes=Y.numel() * Y.element_size(), image=[3, 64, 64])

    def body():
        for B in ladder:
            for s in range(2):
                idx = torch.randint(N, (B,), device="cuda")
                loss = F.cross_entropy(m(X[idx]), Y[idx])
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                steplog(facts, B=B, step=s, loss=float(loss))
    run_oom(out, facts, body)


def s_argsort_scores_oom(out, facts):
    """No model: ranking a growing score vector on the GPU, scores = torch.rand(n) float32 and
    order = torch.argsort(scores, descending=True) (int64 indices + the sort's temporaries), the top 1000
    to the CPU, for n = 50 M, 100 M, 200 M, 400 M, 800 M; 6 GiB allowed."""
    torch = R._torch()
    cap(6, facts)
    start_history(facts=facts)
    torch.manual_seed(0)
    sizes = [50_000_000, 100_000_000, 200_000_000, 400_000_000, 800_000_000]
    facts["settings"] = dict(kind="data processing (no model)", framework="plain PyTorch", op="torch.argsort",
                             sizes=sizes, scores_bytes={n: n * 4 for n in sizes},
                             indices_bytes={n: n * 8 for n in sizes})

    def body():
        for n in sizes:
            scores = torch.rand(n, device="cuda")
            order = torch.argsort(scores, descending=True)
            top = order[:1000].cpu()
            steplog(facts, n=n, first=int(top[0]))
            del scores, order
    run_oom(out, facts, body)


def s_buffer_table_train_healthy(out, facts):
    """A model whose memory is one registered buffer: a frozen hashed n-gram feature table
    register_buffer("table", 2 M x 256 float32, 1.91 GiB) looked up by 32 hashed ids per example and
    summed, then a 3-layer MLP (256 -> 1024 -> 1024 -> 10, 1.32 M params); AdamW, bf16 autocast, batch
    4096, 6 steps; no cap."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    start_history(facts=facts)
    torch.manual_seed(0)
    R_, D = 2_000_000, 256

    class HashedBag(nn.Module):
        def __init__(s):
            super().__init__()
            s.register_buffer("table", torch.randn(R_, D) * 0.02)
            s.mlp = nn.Sequential(nn.Linear(D, 1024), nn.GELU(), nn.Linear(1024, 1024), nn.GELU(),
                                  nn.Linear(1024, 10))

        def forward(s, ids):
            return s.mlp(s.table[ids].sum(1))
    m = HashedBag().cuda()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    B = 4096
    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", batch=B, ids_per_example=32,
                             buffer="register_buffer('table', (2000000, 256) float32), not trained",
                             buffer_bytes=facts["model_buffer_bytes"])
    for s in range(6):
        ids = torch.randint(R_, (B, 32), device="cuda")
        y = torch.randint(10, (B,), device="cuda")
        with torch.amp.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(m(ids), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        steplog(facts, step=s, loss=float(loss))
    facts["opt_state_bytes"] = R.opt_state_bytes(opt)
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


def s_hf_trainer_gradckpt_healthy(out, facts):
    """HF Trainer on a Llama causal LM from a config (8 layers, hidden 1024, 16/4 heads, vocab 32000),
    TrainingArguments(gradient_checkpointing=True, use_reentrant False, bf16=True,
    per_device_train_batch_size=8), seq 1024, 4 steps; snapshot dumped by a TrainerCallback at the end
    of step 4; no cap."""
    torch = R._torch()
    from transformers import Trainer, TrainingArguments, TrainerCallback
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    model = R.hf_llama(L=8)
    model_facts(model, facts)
    R.hf_cfg_facts(model, facts)
    T, B = 1024, 8

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
            if state.global_step == args.max_steps:
                dump(out, facts)

    args = TrainingArguments(output_dir="/tmp/trainer_ckpt_out", per_device_train_batch_size=B, max_steps=4,
                             bf16=True, gradient_checkpointing=True,
                             gradient_checkpointing_kwargs={"use_reentrant": False}, report_to=[],
                             save_strategy="no", logging_steps=1, disable_tqdm=True, dataloader_num_workers=0,
                             learning_rate=1e-4)
    tr = Trainer(model=model, args=args, train_dataset=DS(), callbacks=[Rec()])
    facts["settings"] = dict(kind="training", framework="transformers Trainer", amp="bf16 (Trainer bf16=True)",
                             optimizer=str(args.optim), microbatch=B, seq_len=T, grad_checkpointing=True,
                             accumulation_steps=args.gradient_accumulation_steps)
    tr.train()
    facts["after_train"] = mem()
    facts["oom"] = False
    if not os.path.exists(os.path.join(out, "snapshot.pickle")):
        facts["dumped_after_train"] = True
        dump(out, facts)
    write_log(out)


def s_lightning_bf16true_ladder_oom(out, facts):
    """A batch ladder under Lightning: one LightningModule (embedding 32000 x 1024, 6 nn.TransformerEncoder
    layers width 1024 norm_first, LM head, 141 M params), a fresh Trainer(precision="bf16-true") per batch
    size 4, 8, 16, 32, 64 (2 steps each, seq 512, AdamW); bf16 weights and optimizer state, no autocast;
    4 GiB allowed."""
    torch = R._torch()
    import lightning as L
    import torch.nn as nn
    import torch.nn.functional as F
    cap(4, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    V, D, T = 32000, 1024, 512

    class LM(L.LightningModule):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(V, D)
            layer = nn.TransformerEncoderLayer(D, 16, 4 * D, batch_first=True, norm_first=True)
            s.enc = nn.TransformerEncoder(layer, 6, enable_nested_tensor=False)
            s.head = nn.Linear(D, V, bias=False)
            s.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(T), persistent=False)

        def forward(s, x):
            return s.head(s.enc(s.emb(x), mask=s.causal, is_causal=True))

        def training_step(s, batch, i):
            x = batch[0]
            logits = s(x[:, :-1])
            return F.cross_entropy(logits.reshape(-1, V), x[:, 1:].reshape(-1))

        def configure_optimizers(s):
            return torch.optim.AdamW(s.parameters(), lr=1e-4)

    class Rec(L.Callback):
        def on_train_batch_end(s, trainer, pl_module, outputs, batch, batch_idx):
            steplog(facts, B=batch[0].shape[0], step=trainer.global_step)

    model = LM()
    model_facts(model, facts)
    ladder = [4, 8, 16, 32, 64]
    facts["settings"] = dict(kind="training", framework="lightning Trainer", amp="bf16-true (bf16 weights, no autocast)",
                             optimizer="torch.optim.AdamW (via optimizer.step(closure))", batches=ladder, seq_len=T,
                             steps_per_batch=2, ladder="a fresh Trainer per batch size, same module")

    def body():
        for B in ladder:
            data = torch.utils.data.TensorDataset(torch.randint(V, (2 * B, T + 1)))
            loader = torch.utils.data.DataLoader(data, batch_size=B)
            tr = L.Trainer(accelerator="gpu", devices=1, max_steps=2, precision="bf16-true", logger=False,
                           enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                           callbacks=[Rec()])
            tr.fit(model, loader)
            R.log(f"[ladder] batch {B} fits")
            del tr
    run_oom(out, facts, body)


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "buffer_table_train_healthy": dict(fn=s_buffer_table_train_healthy, group="par"),
    "hf_trainer_gradckpt_healthy": dict(fn=s_hf_trainer_gradckpt_healthy, group="par"),
    "gpu_dataset_resident_oom": dict(fn=s_gpu_dataset_resident_oom, group="solo"),
    "argsort_scores_oom": dict(fn=s_argsort_scores_oom, group="solo"),
    "lightning_bf16true_ladder_oom": dict(fn=s_lightning_bf16true_ladder_oom, group="solo"),
})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    R.main()
