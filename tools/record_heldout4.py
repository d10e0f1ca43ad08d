#!/usr/bin/env python3
"""A fourth held-out set (python3 record_heldout4.py OUTDIR [names...]; same outputs as
record_runs.py, each scenario in its own process). Recorded as /workspace/train.py beside
record_runs.py."""
import os, sys, traceback
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, cap, start_history, run_oom, steplog, model_facts, hf_cfg_facts, dump, write_log, log


def _llama_1b(dtype=None, attn=None):
    from transformers import LlamaConfig, LlamaForCausalLM
    kw = dict(attn_implementation=attn) if attn else {}
    cfg = LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=16, num_attention_heads=16,
                      num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048, **kw)
    return cfg, LlamaForCausalLM


def s_bf16_adamw_state_oom(out, facts):
    """HF Llama of 852.6 M parameters created directly in bfloat16 on the GPU (as from_pretrained(dtype=
    torch.bfloat16) would), no autocast, AdamW (its state bf16 too), microbatch 2 x 512 under 5 GiB: the
    forward and backward fit, the first optimizer.step() creating AdamW's state does not."""
    torch = R._torch()
    cap(5, facts)
    start_history(facts=facts)
    cfg, cls = _llama_1b()
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        m = cls(cfg)
    torch.set_default_dtype(torch.float32)
    if next(m.parameters()).dtype != torch.bfloat16:
        m.to(torch.bfloat16)
    m.train()
    model_facts(m, facts)
    hf_cfg_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    facts["settings"] = dict(kind="training", framework="transformers (own loop)", amp=None,
                             param_dtype="bfloat16 (weights, gradients and AdamW state all bf16)",
                             optimizer="torch.optim.AdamW", microbatch=2, seq_len=512)
    run_oom(out, facts, lambda: R.hf_lm_steps(m, opt, 2, 2, 512, 32000, facts, amp=False))


def s_trainer_eval_logits_oom(out, facts):
    """HF Trainer on a small Qwen2-style LM: per_device_train_batch_size=4, gradient_accumulation_steps=4,
    bf16=True, eval every 2 steps with per_device_eval_batch_size=16 and a compute_metrics (so the
    Trainer gathers every eval batch's logits on the GPU: no eval_accumulation_steps), under 8 GiB."""
    torch = R._torch()
    from transformers import Qwen2Config, Qwen2ForCausalLM, Trainer, TrainingArguments
    cap(8, facts)
    start_history(facts=facts)
    cfg = Qwen2Config(hidden_size=512, intermediate_size=1408, num_hidden_layers=4, num_attention_heads=8,
                      num_key_value_heads=2, vocab_size=32000, max_position_embeddings=1024,
                      tie_word_embeddings=False)
    model = Qwen2ForCausalLM(cfg)
    model_facts(model, facts)
    hf_cfg_facts(model, facts)
    T = 512

    class DS(torch.utils.data.Dataset):
        def __init__(s, n):
            s.n = n

        def __len__(s):
            return s.n

        def __getitem__(s, i):
            g = torch.Generator().manual_seed(i)
            ids = torch.randint(32000, (T,), generator=g)
            return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}

    def metrics(p):
        import numpy as np
        preds = np.argmax(p.predictions, -1)
        return {"acc": float((preds[:, :-1] == p.label_ids[:, 1:]).mean())}

    args = TrainingArguments(output_dir="/tmp/trainer_eval", per_device_train_batch_size=4,
                             gradient_accumulation_steps=4, per_device_eval_batch_size=16, max_steps=4,
                             eval_strategy="steps", eval_steps=2, bf16=True, report_to=[], save_strategy="no",
                             logging_steps=1, disable_tqdm=True, dataloader_num_workers=0, learning_rate=1e-4)
    tr = Trainer(model=model, args=args, train_dataset=DS(256), eval_dataset=DS(1024), compute_metrics=metrics)
    facts["settings"] = dict(kind="training with evaluation", framework="transformers Trainer",
                             amp="bf16 (Trainer bf16=True)", optimizer=str(args.optim), microbatch=4, seq_len=T,
                             accumulation_steps=4, eval_batch=16, eval_steps=2, eval_samples=1024,
                             eval_accumulation_steps=args.eval_accumulation_steps,
                             compute_metrics=True, grad_checkpointing=False,
                             eval_logits_bytes_per_batch=16 * T * 32000 * 2)
    run_oom(out, facts, tr.train)


def manual_gpt(vocab=32000, d=768, h=12, L=6, T=1024, p=0.1):
    """nanoGPT's explicit attention (no flash): (q @ k^T) * scale, masked_fill, F.softmax, dropout, @ v."""
    torch = R._torch()
    import math
    import torch.nn as nn
    import torch.nn.functional as F

    class Attn(nn.Module):
        def __init__(s):
            super().__init__()
            s.c_attn = nn.Linear(d, 3 * d)
            s.c_proj = nn.Linear(d, d)
            s.attn_dropout = nn.Dropout(p)
            s.register_buffer("bias", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

        def forward(s, x):
            B, T_, C = x.shape
            q, k, v = s.c_attn(x).split(d, dim=2)
            q = q.view(B, T_, h, C // h).transpose(1, 2)
            k = k.view(B, T_, h, C // h).transpose(1, 2)
            v = v.view(B, T_, h, C // h).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(s.bias[:, :, :T_, :T_] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = s.attn_dropout(att)
            y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T_, C)
            return s.c_proj(y)

    class Block(nn.Module):
        def __init__(s):
            super().__init__()
            s.ln_1, s.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
            s.attn = Attn()
            s.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(p))

        def forward(s, x):
            x = x + s.attn(s.ln_1(x))
            return x + s.mlp(s.ln_2(x))

    class GPT(nn.Module):
        def __init__(s):
            super().__init__()
            s.wte, s.wpe = nn.Embedding(vocab, d), nn.Embedding(T, d)
            s.drop = nn.Dropout(p)
            s.h = nn.ModuleList([Block() for _ in range(L)])
            s.ln_f = nn.LayerNorm(d)
            s.lm_head = nn.Linear(d, vocab, bias=False)

        def forward(s, idx):
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = s.drop(s.wte(idx) + s.wpe(pos))
            for b in s.h:
                x = b(x)
            return s.lm_head(s.ln_f(x))
    return GPT()


def s_manual_attn_expandable_oom(out, facts):
    """nanoGPT-style GPT (6 layers, width 768, 12 heads, explicit softmax attention, dropout 0.1), bf16
    autocast, AdamW, microbatch 12 x 1024, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True already set,
    under 6 GiB: dies in the forward of its first step."""
    torch = R._torch()
    import torch.nn.functional as F
    cap(6, facts)
    start_history(facts=facts)
    torch.manual_seed(0)
    m = manual_gpt().cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=3e-4)
    B, T = 12, 1024
    facts["settings"] = dict(kind="training", framework="plain PyTorch (nanoGPT-style)", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", microbatch=B, seq_len=T, heads=12,
                             attention="explicit: q @ k^T, masked_fill, F.softmax, dropout(0.1), @ v",
                             alloc_conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
                             scores_bytes_per_layer_bf16=B * 12 * T * T * 2)

    def body():
        for s in range(2):
            idx = torch.randint(32000, (B, T + 1), device="cuda")
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                logits = m(idx[:, :-1])
                loss = F.cross_entropy(logits.reshape(-1, 32000).float(), idx[:, 1:].reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(loss))
    run_oom(out, facts, body)


def s_hf_eager_attn_oom(out, facts):
    """HF Llama (4 layers, width 1024, 16/4 heads) with attn_implementation="eager", bf16 autocast, AdamW,
    microbatch 4 x 2048 under 8 GiB: the attention probabilities of every layer are kept for backward."""
    torch = R._torch()
    from transformers import LlamaConfig, LlamaForCausalLM
    cap(8, facts)
    start_history(facts=facts)
    cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=4, num_attention_heads=16,
                      num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048,
                      attn_implementation="eager")
    m = LlamaForCausalLM(cfg).cuda().train()
    model_facts(m, facts)
    hf_cfg_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B, T = 4, 2048
    facts["settings"] = dict(kind="training", framework="transformers (own loop)", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", microbatch=B, seq_len=T, attn_implementation="eager",
                             scores_bytes_per_layer_fp32=B * 16 * T * T * 4)
    run_oom(out, facts, lambda: R.hf_lm_steps(m, opt, 2, B, T, 32000, facts))


def s_lora_frozen_oom(out, facts):
    """LoRA fine-tuning by hand: HF Llama of 852.6 M parameters in bfloat16, frozen; rank-16 float32
    adapters on q_proj and v_proj of every layer (the only trainable parameters, AdamW), bf16 autocast,
    microbatch 8 x 2048 under 6 GiB: dies in the forward of its first step."""
    torch = R._torch()
    import torch.nn as nn
    cap(6, facts)
    start_history(facts=facts)
    cfg, cls = _llama_1b()
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        m = cls(cfg)
    torch.set_default_dtype(torch.float32)
    if next(m.parameters()).dtype != torch.bfloat16:
        m.to(torch.bfloat16)
    m.requires_grad_(False)

    class LoRA(nn.Module):
        def __init__(s, base, r=16, alpha=32):
            super().__init__()
            s.base = base
            s.A = nn.Parameter(torch.randn(r, base.in_features, device="cuda") * 0.01)
            s.B = nn.Parameter(torch.zeros(base.out_features, r, device="cuda"))
            s.scale = alpha / r

        def forward(s, x):
            return s.base(x) + (x @ s.A.t() @ s.B.t()) * s.scale

    for layer in m.model.layers:
        layer.self_attn.q_proj = LoRA(layer.self_attn.q_proj)
        layer.self_attn.v_proj = LoRA(layer.self_attn.v_proj)
    m.train()
    model_facts(m, facts)
    hf_cfg_facts(m, facts)
    trainable = [p for p in m.parameters() if p.requires_grad]
    facts["trainable_params"] = sum(p.numel() for p in trainable)
    facts["trainable_param_bytes"] = sum(p.numel() * p.element_size() for p in trainable)
    opt = torch.optim.AdamW(trainable, lr=1e-4)
    B, T = 8, 2048
    facts["settings"] = dict(kind="training", framework="transformers model, own LoRA, own loop",
                             amp="bf16 autocast", base_dtype="bfloat16 (frozen)", adapters="rank 16, float32",
                             optimizer="torch.optim.AdamW (adapters only)", microbatch=B, seq_len=T,
                             grad_checkpointing=False)
    run_oom(out, facts, lambda: R.hf_lm_steps(m, opt, 2, B, T, 32000, facts))


def s_oom_retry_in_except(out, facts):
    """The 8-layer GPT of gen_samples (bf16 autocast, AdamW) at microbatch 16 x 2048 under 6 GiB, in a loop
    that catches torch.OutOfMemoryError and retries with half the microbatch *inside the except block*:
    the exception's traceback keeps the failed attempt's activations alive, so the retry dies too. The
    snapshot is the one at the second OOM (the observer dumps at every OOM, the last one stays)."""
    torch = R._torch()
    cap(6, facts)
    start_history(facts=facts)
    torch.manual_seed(0)
    model = R.gpt()
    model_facts(model, facts)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    T = 2048
    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", seq_len=T, microbatch_first=16, microbatch_retry=8,
                             retry="inside `except torch.OutOfMemoryError:` (the exception still referenced)")
    facts["ooms"] = []

    def obs(device, alloc, device_alloc, device_free):
        torch.cuda.memory._dump_snapshot(os.path.join(out, "oom_snapshot.pickle"))
        facts["oom_observer"] = dict(device=device, alloc=alloc, device_alloc=device_alloc,
                                     device_free=device_free)
        facts["oom_observer_stats"] = R.stats_subset(torch.cuda.memory_stats())
        facts["ooms"].append(dict(alloc=alloc, allocated=torch.cuda.memory_allocated()))
    torch._C._cuda_attach_out_of_memory_observer(obs)

    def train(B):
        for s in range(2):
            loss = R.gpt_step(model, opt, B, T)
            steplog(facts, step=s, B=B, loss=float(loss))

    B = 16
    try:
        try:
            train(B)
        except torch.OutOfMemoryError:
            B //= 2
            log(f"out of memory; retrying with microbatch {B}")
            train(B)
        facts["oom"] = False
        dump(out, facts)
        write_log(out)
    except torch.OutOfMemoryError as e:
        facts["oom"] = True
        facts["oom_message"] = str(e)
        write_log(out, traceback.format_exc())
        with open(os.path.join(out, "oom_message.txt"), "w") as f:
            f.write(str(e) + "\n")
        R.save_state(out, facts)


def s_convnext_resize_oom(out, facts):
    """torchvision convnext_tiny, channels_last, bf16 autocast, SGD momentum 0.9, microbatch 128, progressive
    resizing: 3 steps at 128 x 128, then 224 x 224, under 6 GiB: the first 224 step dies."""
    torch = R._torch()
    import torchvision
    import torch.nn.functional as F
    cap(6, facts)
    start_history(facts=facts)
    torch.manual_seed(0)
    m = torchvision.models.convnext_tiny().cuda().to(memory_format=torch.channels_last).train()
    model_facts(m, facts)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    B = 128
    sizes = [128, 128, 128, 224, 224]
    facts["settings"] = dict(kind="training", framework="torchvision", amp="bf16 autocast", channels_last=True,
                             optimizer="torch.optim.SGD(momentum=0.9)", microbatch=B, image_sizes=sizes)

    def body():
        for s, px in enumerate(sizes):
            x = torch.randn(B, 3, px, px, device="cuda").to(memory_format=torch.channels_last)
            y = torch.randint(1000, (B,), device="cuda")
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, image=px, loss=float(loss))
    run_oom(out, facts, body)


# checks of the rules the set above led to, recorded after them
def s_oom_retry_outside_except(out, facts):
    """oom_retry_in_except done right: the except block only sets a flag; outside it the gradients are
    dropped, gc.collect() runs, and the step is retried with half the microbatch (8 x 2048 under 6 GiB).
    The snapshot is taken at the end (or at a second OOM)."""
    torch = R._torch()
    import gc
    cap(6, facts)
    start_history(facts=facts)
    torch.manual_seed(0)
    model = R.gpt()
    model_facts(model, facts)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    T = 2048
    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", seq_len=T, microbatch_first=16, microbatch_retry=8,
                             retry="after the except block, gc.collect() first")
    facts["ooms"] = []

    def obs(device, alloc, device_alloc, device_free):
        torch.cuda.memory._dump_snapshot(os.path.join(out, "oom_snapshot.pickle"))
        facts["oom_observer"] = dict(device=device, alloc=alloc, device_alloc=device_alloc,
                                     device_free=device_free)
        facts["oom_observer_stats"] = R.stats_subset(torch.cuda.memory_stats())
        facts["ooms"].append(dict(alloc=alloc, allocated=torch.cuda.memory_allocated()))
    torch._C._cuda_attach_out_of_memory_observer(obs)

    def train(B):
        for s in range(2):
            loss = R.gpt_step(model, opt, B, T)
            steplog(facts, step=s, B=B, loss=float(loss))

    B = 16
    try:
        failed = False
        try:
            train(B)
        except torch.OutOfMemoryError:
            failed = True
        if failed:
            B //= 2
            log(f"out of memory; retrying with microbatch {B}")
            opt.zero_grad(set_to_none=True)
            gc.collect()
            train(B)
        facts["oom"] = False
        if os.path.exists(os.path.join(out, "oom_snapshot.pickle")):
            os.rename(os.path.join(out, "oom_snapshot.pickle"), os.path.join(out, "first_oom_snapshot.pickle"))
        dump(out, facts)
        write_log(out)
    except torch.OutOfMemoryError as e:
        facts["oom"] = True
        facts["oom_message"] = str(e)
        write_log(out, traceback.format_exc())
        with open(os.path.join(out, "oom_message.txt"), "w") as f:
            f.write(str(e) + "\n")
        R.save_state(out, facts)


def s_bert_eager_attn_oom(out, facts):
    """HF BERT (8 layers, width 768) sequence classifier with attn_implementation="eager", float32 (no
    autocast), AdamW, microbatch 16 x 512 under 6 GiB."""
    torch = R._torch()
    from transformers import BertConfig, BertForSequenceClassification
    cap(6, facts)
    start_history(facts=facts)
    cfg = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=8, num_attention_heads=12,
                     intermediate_size=3072, max_position_embeddings=512, num_labels=2, attn_implementation="eager")
    m = BertForSequenceClassification(cfg).cuda().train()
    model_facts(m, facts)
    hf_cfg_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=2e-5)
    B, T = 16, 512
    facts["settings"] = dict(kind="training", framework="transformers (own loop)", amp=None,
                             optimizer="torch.optim.AdamW", microbatch=B, seq_len=T, attn_implementation="eager")

    def body():
        for s in range(2):
            x = torch.randint(30522, (B, T), device="cuda")
            y = torch.randint(2, (B,), device="cuda")
            loss = m(input_ids=x, attention_mask=torch.ones_like(x), labels=y).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(loss))
    run_oom(out, facts, body)


def s_peft_lora_oom(out, facts):
    """PEFT LoRA (r=16 on q_proj, v_proj) on HF Llama of 852.6 M params in bfloat16, bf16 autocast,
    AdamW, microbatch 8 x 2048 under 6 GiB (falls back to nothing if peft is missing)."""
    torch = R._torch()
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        facts["skipped"] = "peft not installed"
        return
    cap(6, facts)
    start_history(facts=facts)
    cfg, cls = _llama_1b()
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        m = cls(cfg)
    torch.set_default_dtype(torch.float32)
    m = get_peft_model(m, LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "v_proj"],
                                     lora_dropout=0.05, task_type="CAUSAL_LM"))
    for n, p in m.named_parameters():
        if p.requires_grad:
            p.data = p.data.float()
    m.train()
    model_facts(m, facts)
    trainable = [p for p in m.parameters() if p.requires_grad]
    facts["trainable_params"] = sum(p.numel() for p in trainable)
    opt = torch.optim.AdamW(trainable, lr=1e-4)
    B, T = 8, 2048
    facts["settings"] = dict(kind="training", framework="peft LoRA on transformers, own loop",
                             amp="bf16 autocast", base_dtype="bfloat16 (frozen)", adapters="rank 16, float32",
                             optimizer="torch.optim.AdamW (adapters only)", microbatch=B, seq_len=T)
    run_oom(out, facts, lambda: R.hf_lm_steps(m, opt, 2, B, T, 32000, facts))


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "bf16_adamw_state_oom": dict(fn=s_bf16_adamw_state_oom, group="solo"),
    "trainer_eval_logits_oom": dict(fn=s_trainer_eval_logits_oom, group="solo"),
    "manual_attn_expandable_oom": dict(fn=s_manual_attn_expandable_oom, group="solo",
                                       env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
    "hf_eager_attn_oom": dict(fn=s_hf_eager_attn_oom, group="solo"),
    "lora_frozen_oom": dict(fn=s_lora_frozen_oom, group="solo"),
    "oom_retry_in_except": dict(fn=s_oom_retry_in_except, group="solo"),
    "convnext_resize_oom": dict(fn=s_convnext_resize_oom, group="solo"),
    "oom_retry_outside_except": dict(fn=s_oom_retry_outside_except, group="solo"),
    "bert_eager_attn_oom": dict(fn=s_bert_eager_attn_oom, group="solo"),
    "peft_lora_oom": dict(fn=s_peft_lora_oom, group="solo"),
})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    R.main()
