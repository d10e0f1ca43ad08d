#!/usr/bin/env python3
"""Held-out runs: realistic scenarios that memreport's own tests do not use, recorded to check that
its judgement generalises (python3 record_heldout.py OUTDIR [names...]; same outputs as
record_runs.py). Every scenario runs alone (its OOM message must not list the others)."""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, cap, start_history, run_oom, steplog, model_facts, hf_cfg_facts, dump, write_log


def s_roberta_fp32_oom(out, facts):
    """RoBERTa-base-shaped sequence classifier (12 layers, width 768), float32 (no autocast), AdamW,
    microbatch 64 x 512 under 12 GiB: dies in the forward of its first step."""
    torch = R._torch()
    from transformers import RobertaConfig, RobertaForSequenceClassification
    cap(12, facts)
    start_history(facts=facts)
    cfg = RobertaConfig(vocab_size=50265, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                        intermediate_size=3072, max_position_embeddings=514, num_labels=2)
    m = RobertaForSequenceClassification(cfg).cuda().train()
    model_facts(m, facts)
    hf_cfg_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=2e-5)
    B, T = 64, 512
    facts["settings"] = dict(kind="training", framework="transformers (own loop)", amp=None,
                             optimizer="torch.optim.AdamW", microbatch=B, seq_len=T, grad_checkpointing=False)

    def body():
        for s in range(3):
            x = torch.randint(50265, (B, T), device="cuda")
            y = torch.randint(2, (B,), device="cuda")
            loss = m(input_ids=x, attention_mask=torch.ones_like(x), labels=y).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(loss))
    run_oom(out, facts, body)


def s_nograd_collect_oom(out, facts):
    """Embedding extraction under torch.no_grad(): a 4-layer nn.TransformerEncoder (width 1024), batches
    of 256 x 128, every batch's output (B x T x 1024 float32, 128 MiB) kept in a list on the GPU, under
    6 GiB: dies after a few dozen batches."""
    torch = R._torch()
    import torch.nn as nn
    cap(6, facts)
    start_history(facts=facts)
    layer = nn.TransformerEncoderLayer(1024, 16, 4096, batch_first=True)
    m = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False).cuda().eval()
    model_facts(m, facts)
    B, T = 256, 128
    facts["settings"] = dict(kind="inference", framework="plain PyTorch", no_grad=True, amp=None, batch=B,
                             seq_len=T, kept_per_batch="the encoder output on the GPU (embeds.append(out))")

    def body():
        embeds = []
        with torch.no_grad():
            for i in range(200):
                x = torch.randn(B, T, 1024, device="cuda")
                out_ = m(x)
                embeds.append(out_)
                steplog(facts, key="batches", batch=i, kept=len(embeds))
        return embeds
    run_oom(out, facts, body)


def s_hf_varlen(out, facts):
    """HF GPT-2 (6 layers, width 768) training with dynamic padding: microbatch 16, sequence length drawn
    from 64..1024 every step (seeded), bf16 autocast, AdamW, 30 steps under 5 GiB."""
    torch = R._torch()
    import random
    from transformers import GPT2Config, GPT2LMHeadModel
    cap(5, facts)
    start_history(facts=facts)
    cfg = GPT2Config(n_layer=6, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024)
    m = GPT2LMHeadModel(cfg).cuda().train()
    model_facts(m, facts)
    hf_cfg_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    rng = random.Random(7)
    lens = [rng.randint(64, 1024) for _ in range(30)]
    B = 16
    facts["settings"] = dict(kind="training", framework="transformers (own loop)", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", microbatch=B, seq_lens=lens, dynamic_padding=True)

    def body():
        for s, T in enumerate(lens):
            x = torch.randint(50257, (B, T), device="cuda")
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                loss = m(input_ids=x, labels=x).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, T=T, loss=float(loss))
        dump(out, facts)
    run_oom(out, facts, body)


def s_sum_loss_accum_oom(out, facts):
    """Gradient accumulation done by summing losses: HF Llama (4 layers, width 1024), bf16 autocast,
    AdamW, 8 microbatches of 4 x 1024 whose losses are added up and backpropagated once per step, so every
    microbatch's graph stays alive until the backward; under 8 GiB it dies in a forward of the first step."""
    torch = R._torch()
    cap(8, facts)
    start_history(facts=facts)
    m = R.hf_llama(L=4).cuda().train()
    model_facts(m, facts)
    hf_cfg_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    accum, B, T = 8, 4, 1024
    facts["settings"] = dict(kind="training", framework="transformers (own loop)", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", microbatch=B, seq_len=T, accumulation_steps=accum,
                             accumulation="total = total + loss per microbatch, one backward per step")

    def body():
        for s in range(2):
            total = 0
            for k in range(accum):
                x = torch.randint(32000, (B, T), device="cuda")
                with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                    total = total + m(input_ids=x, labels=x).loss / accum
                steplog(facts, key="microbatches", step=s, micro=k)
            total.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(total))
    run_oom(out, facts, body)


def s_lightning_ckpt_accum_oom(out, facts):
    """Lightning Trainer, precision bf16-mixed, accumulate_grad_batches=4, a 6-layer SDPA transformer LM
    (width 1024, vocab 32000) with every block under torch.utils.checkpoint, microbatch 24 x 1024 under
    6 GiB: checkpointing, mixed precision and accumulation are all on already."""
    torch = R._torch()
    import lightning as L
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint
    cap(6, facts)
    start_history(facts=facts)
    Block = R.sdpa_block_cls(True)

    class LM(L.LightningModule):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(32000, 1024)
            s.blocks = nn.ModuleList([Block(1024, 16) for _ in range(6)])
            s.ln = nn.LayerNorm(1024)
            s.head = nn.Linear(1024, 32000, bias=False)

        def forward(s, x):
            h = s.emb(x)
            for b in s.blocks:
                h = checkpoint(b, h, use_reentrant=False)
            return s.head(s.ln(h))

        def training_step(s, batch, i):
            x = batch[0]
            logits = s(x[:, :-1])
            return F.cross_entropy(logits.reshape(-1, 32000).float(), x[:, 1:].reshape(-1))

        def configure_optimizers(s):
            return torch.optim.AdamW(s.parameters(), lr=1e-4)

    class Rec(L.Callback):
        def on_train_batch_end(s, trainer, pl_module, outputs, batch, batch_idx):
            steplog(facts, step=trainer.global_step, batch_idx=batch_idx)

    B, T = 24, 1024
    data = torch.utils.data.TensorDataset(torch.randint(32000, (256, T + 1)))
    loader = torch.utils.data.DataLoader(data, batch_size=B)
    tr = L.Trainer(accelerator="gpu", devices=1, max_steps=3, precision="bf16-mixed", accumulate_grad_batches=4,
                   logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                   callbacks=[Rec()])
    model = LM()
    model_facts(model, facts)
    facts["settings"] = dict(kind="training", framework="lightning Trainer", amp="bf16-mixed",
                             optimizer="torch.optim.AdamW (via optimizer.step(closure))", microbatch=B, seq_len=T,
                             accumulation_steps=4, grad_checkpointing=True)
    run_oom(out, facts, lambda: tr.fit(model, loader))


def s_adam_state_oom(out, facts):
    """HF Llama of 1.0 B parameters (16 layers, width 2048) in float32, AdamW, microbatch 1 x 256 under
    15 GiB: the forward and backward fit, the first optimizer.step() creating AdamW's state does not."""
    torch = R._torch()
    from transformers import LlamaConfig, LlamaForCausalLM
    cap(15, facts)
    start_history(facts=facts)
    cfg = LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=16, num_attention_heads=16,
                      num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048)
    with torch.device("cuda"):
        m = LlamaForCausalLM(cfg)
    m.train()
    model_facts(m, facts)
    hf_cfg_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    facts["settings"] = dict(kind="training", framework="transformers (own loop)", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", microbatch=1, seq_len=256, param_dtype="float32")
    run_oom(out, facts, lambda: R.hf_lm_steps(m, opt, 2, 1, 256, 32000, facts))


# a second set, recorded after the first set's fixes (as build/h2/heldout2.py)
def s_gpt2_beam_oom(out, facts):
    """HF GPT-2 (12 layers, width 768) generate() with 8 beams, 16 prompts of 256 tokens, up to 768
    new tokens, bf16 weights, under 3 GiB."""
    torch = R._torch()
    from transformers import GPT2Config, GPT2LMHeadModel
    cap(3, facts)
    start_history(facts=facts)
    m = GPT2LMHeadModel(GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=1024)).cuda().to(torch.bfloat16).eval()
    model_facts(m, facts)
    facts["settings"] = dict(kind="inference", generate=True, num_beams=8, batch=16, prompt=256, max_new_tokens=768)
    x = torch.randint(50257, (16, 256), device="cuda")
    run_oom(out, facts, lambda: m.generate(x, num_beams=8, max_new_tokens=768, min_new_tokens=768, do_sample=False, pad_token_id=0))


def s_varlen_tight(out, facts):
    """GPT (2 layers, width 1024) training, bf16 autocast, AdamW, (batch, seq) drawn from a wide range
    every step (seeded), under 3 GiB, 40 steps: shapes that vary a lot under a tight cap."""
    torch = R._torch()
    import random
    cap(3, facts)
    start_history(facts=facts)
    torch.manual_seed(0)
    model = R.gpt(L=2)
    model_facts(model, facts)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    rng = random.Random(3)
    sizes = [(rng.choice([1, 2, 3, 4, 6, 8]), rng.choice([128, 256, 384, 512, 768, 1024])) for _ in range(40)]
    facts["settings"] = dict(kind="training", amp="bf16 autocast", sizes=sizes)

    def body():
        for s, (B, T) in enumerate(sizes):
            R.gpt_step(model, opt, B, T)
            steplog(facts, step=s, B=B, T=T)
        R.dump(out, facts)
    run_oom(out, facts, body)


# a third set (as build/h3/heldout3.py)
def s_infer_no_nograd_oom(out, facts):
    """torchvision ViT-B/16 in eval() for inference, but without no_grad/inference_mode: one batch of
    512 images under 6 GiB keeps every activation for a backward that never comes."""
    torch = R._torch()
    import torchvision
    cap(6, facts)
    start_history(facts=facts)
    m = torchvision.models.vit_b_16().cuda().eval()
    model_facts(m, facts)
    facts["settings"] = dict(kind="inference", no_grad=False, batch=512)
    x = torch.randn(512, 3, 224, 224)
    run_oom(out, facts, lambda: m(x.cuda()).argmax(-1))


def s_lightning_predict_oom(out, facts):
    """Lightning Trainer.predict of a 6-layer transformer encoder (width 1024) with batches of 256 x
    512 under 4 GiB (predict runs under inference_mode)."""
    torch = R._torch()
    import lightning as L
    import torch.nn as nn
    cap(4, facts)
    start_history(facts=facts)

    class Enc(L.LightningModule):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(32000, 1024)
            layer = nn.TransformerEncoderLayer(1024, 16, 4096, batch_first=True)
            s.enc = nn.TransformerEncoder(layer, 6, enable_nested_tensor=False)

        def forward(s, x):
            return s.enc(s.emb(x)).mean(1)

        def predict_step(s, batch, i):
            return s(batch[0]).cpu()

    data = torch.utils.data.TensorDataset(torch.randint(32000, (1024, 512)))
    loader = torch.utils.data.DataLoader(data, batch_size=256)
    tr = L.Trainer(accelerator="gpu", devices=1, logger=False, enable_progress_bar=False,
                   enable_model_summary=False)
    model = Enc()
    model_facts(model, facts)
    facts["settings"] = dict(kind="inference", framework="lightning Trainer.predict", batch=256, seq=512)
    run_oom(out, facts, lambda: tr.predict(model, loader))


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "roberta_fp32_oom": dict(fn=s_roberta_fp32_oom, group="solo"),
    "nograd_collect_oom": dict(fn=s_nograd_collect_oom, group="solo"),
    "hf_varlen": dict(fn=s_hf_varlen, group="solo"),
    "sum_loss_accum_oom": dict(fn=s_sum_loss_accum_oom, group="solo"),
    "lightning_ckpt_accum_oom": dict(fn=s_lightning_ckpt_accum_oom, group="solo"),
    "adam_state_oom": dict(fn=s_adam_state_oom, group="solo"),
    "gpt2_beam_oom": dict(fn=s_gpt2_beam_oom, group="solo"),
    "varlen_tight": dict(fn=s_varlen_tight, group="solo"),
    "infer_no_nograd_oom": dict(fn=s_infer_no_nograd_oom, group="solo"),
    "lightning_predict_oom": dict(fn=s_lightning_predict_oom, group="solo"),
})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    R.main()
