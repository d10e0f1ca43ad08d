#!/usr/bin/env python3
"""A nineteenth held-out set (python3 record_heldout19.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Recorded beside record_runs.py as build/h19/record_heldout19.py."""
import os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log, mem


def offline_tokenizer(vocab=30000, max_len=512):
    """A word-level fast tokenizer built in memory (no download): words w0..w{vocab-1}, BERT specials."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    v = {t: i for i, t in enumerate(specials)}
    for i in range(vocab - len(specials)):
        v[f"w{i}"] = len(v)
    tk = Tokenizer(models.WordLevel(v, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", model_max_length=max_len)


def s_hf_pipeline_batch_oom(out, facts):
    """transformers pipeline("feature-extraction") on a BERT-base encoder built from a config (12 layers,
    hidden 768, 110 M params, fp32) with an in-memory word-level tokenizer (model_max_length 512);
    1024 documents of ~700 words, pipe(docs, batch_size=256, truncation=True): every batch is 256 x 512
    tokens; 3 GiB allowed; dies in the first batch's forward (the pipeline runs it under no_grad)."""
    torch = R._torch()
    from transformers import BertConfig, BertModel, pipeline
    cap(3, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30000, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                     intermediate_size=3072, max_position_embeddings=512)
    model = BertModel(cfg).eval()
    tok = offline_tokenizer(30000, 512)
    pipe = pipeline("feature-extraction", model=model, tokenizer=tok, device=0, framework="pt")
    model_facts(model, facts)
    R.hf_cfg_facts(model, facts)
    import random
    rnd = random.Random(0)
    docs = [" ".join(f"w{rnd.randrange(29000)}" for _ in range(700)) for _ in range(1024)]
    BS, T = 256, 512
    facts["settings"] = dict(kind="inference (feature extraction)", framework="transformers pipeline",
                             task="feature-extraction", amp=None, dtype="float32", batch_size=BS, max_length=T,
                             truncation=True, documents=len(docs), words_per_doc=700,
                             ffn_activation_bytes_per_batch=BS * T * 3072 * 4)

    def body():
        steplog(facts, phase="pipeline built")
        n = 0
        for o in pipe(docs, batch_size=BS, truncation=True):
            n += 1
            if n % BS == 0:
                steplog(facts, docs_done=n)
    run_oom(out, facts, body)


def s_hf_trainer_eval_accumulation_healthy(out, facts):
    """HF Trainer.evaluate() on a Qwen2-style LM from a config (4 layers, width 512, vocab 8192), bf16=True,
    per_device_eval_batch_size=16, 384 eval samples of 256 tokens, a compute_metrics (token accuracy), and
    eval_accumulation_steps=3: every 3 eval batches the gathered logits (16 x 256 x 8192 a batch) go to the
    CPU; snapshot dumped by a TrainerCallback at the prediction step before the last; healthy."""
    torch = R._torch()
    from transformers import Qwen2Config, Qwen2ForCausalLM, Trainer, TrainingArguments, TrainerCallback
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    V, T, EB, N, ACC = 8192, 256, 16, 384, 3
    cfg = Qwen2Config(hidden_size=512, intermediate_size=1408, num_hidden_layers=4, num_attention_heads=8,
                      num_key_value_heads=2, vocab_size=V, max_position_embeddings=1024, tie_word_embeddings=False)
    model = Qwen2ForCausalLM(cfg)
    model_facts(model, facts)
    R.hf_cfg_facts(model, facts)

    class DS(torch.utils.data.Dataset):
        def __len__(s):
            return N

        def __getitem__(s, i):
            g = torch.Generator().manual_seed(i)
            ids = torch.randint(V, (T,), generator=g)
            return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}

    def metrics(p):
        import numpy as np
        preds = np.argmax(p.predictions, -1)
        return {"acc": float((preds[:, :-1] == p.label_ids[:, 1:]).mean())}

    nsteps = N // EB

    class Rec(TrainerCallback):
        n = 0

        def on_prediction_step(s, args, state, control, **kw):
            s.n += 1
            if s.n % 4 == 0 or s.n == nsteps - 1:
                steplog(facts, eval_step=s.n)
            if s.n == nsteps - 1:
                dump(out, facts)

    args = TrainingArguments(output_dir="/tmp/h19_eval", per_device_eval_batch_size=EB, eval_accumulation_steps=ACC,
                             bf16=True, report_to=[], save_strategy="no", disable_tqdm=True,
                             dataloader_num_workers=0)
    tr = Trainer(model=model, args=args, eval_dataset=DS(), compute_metrics=metrics, callbacks=[Rec()])
    facts["settings"] = dict(kind="evaluation", framework="transformers Trainer (evaluate)",
                             amp="bf16 (Trainer bf16=True)", eval_batch=EB, seq_len=T, eval_samples=N,
                             eval_accumulation_steps=ACC, compute_metrics=True,
                             eval_logits_bytes_per_batch_fp32=EB * T * V * 4)
    res = tr.evaluate()
    facts["eval_result"] = res
    facts["after_evaluate"] = mem()
    facts["oom"] = False
    write_log(out)


def s_accelerate_grad_accum_healthy(out, facts):
    """HF accelerate: Accelerator(gradient_accumulation_steps=4, mixed_precision="bf16"), a plain loop with
    `with accelerator.accumulate(model):`, HF Llama from a config (4 layers, width 1024, 110.6 M params),
    AdamW, microbatch 4 x 512, 12 microbatches (3 optimizer steps); snapshot after the last; no cap."""
    torch = R._torch()
    from accelerate import Accelerator
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    acc = Accelerator(mixed_precision="bf16", gradient_accumulation_steps=4)
    m = R.hf_llama(L=4)
    model_facts(m, facts)
    R.hf_cfg_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B, T, NMB = 4, 512, 12
    data = [torch.randint(32000, (B, T)) for _ in range(NMB)]
    dl = torch.utils.data.DataLoader(data, batch_size=None)
    m, opt, dl = acc.prepare(m, opt, dl)
    facts["settings"] = dict(kind="training", framework="accelerate (own loop, accelerator.accumulate)",
                             amp="bf16 (Accelerator mixed_precision)", optimizer="torch.optim.AdamW",
                             microbatch=B, seq_len=T, accumulation_steps=4, grad_checkpointing=False,
                             microbatches=NMB)
    for i, idx in enumerate(dl):
        with acc.accumulate(m):
            loss = m(input_ids=idx, labels=idx).loss
            acc.backward(loss)
            opt.step()
            opt.zero_grad(set_to_none=True)
        steplog(facts, microbatch=i, sync=bool(acc.sync_gradients), loss=float(loss))
    facts["optimizer_state_bytes"] = R.opt_state_bytes(opt)
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


def _lm_module(L, facts, V=32000, D=512, H=8, NL=4, keep=False, fsdp=False):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    Block = R.sdpa_block_cls(True)

    class LM(L.LightningModule):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(V, D)
            s.blocks = nn.ModuleList([Block(D, H) for _ in range(NL)])
            s.ln = nn.LayerNorm(D)
            s.head = nn.Linear(D, V, bias=False)
            s.step_outputs = []

        def forward(s, x):
            h = s.emb(x)
            for b in s.blocks:
                h = b(h)
            return s.head(s.ln(h))

        def training_step(s, batch, i):
            x = batch[0]
            logits = s(x[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, V).float(), x[:, 1:].reshape(-1))
            if keep:
                s.step_outputs.append(logits)  # for an epoch-end perplexity / accuracy: kept undetached on the GPU
            return loss

        def on_train_epoch_end(s):
            if s.step_outputs:
                s.log("kept", float(len(s.step_outputs)))
                s.step_outputs.clear()

        def configure_optimizers(s):
            return torch.optim.AdamW(s.parameters(), lr=1e-4)
    return LM, Block


def s_lightning_kept_outputs_leak_oom(out, facts):
    """Lightning Trainer (bf16-mixed, AdamW) on a 4-layer SDPA transformer LM (width 512, vocab 32000);
    training_step appends each step's logits (8 x 512 x 32000, bf16, undetached) to self.step_outputs for an
    epoch-end metric (the list is cleared in on_train_epoch_end, never reached); 6 GiB allowed; 200 batches
    an epoch: memory grows by one logits tensor a step until OOM."""
    torch = R._torch()
    import lightning as L
    cap(6, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    LM, _ = _lm_module(L, facts, keep=True)
    B, T = 8, 512

    class Rec(L.Callback):
        def on_train_batch_end(s, trainer, pl_module, outputs, batch, batch_idx):
            steplog(facts, step=trainer.global_step, batch_idx=batch_idx, kept=len(pl_module.step_outputs))

    data = torch.utils.data.TensorDataset(torch.randint(32000, (200 * B, T + 1)))
    loader = torch.utils.data.DataLoader(data, batch_size=B)
    tr = L.Trainer(accelerator="gpu", devices=1, max_epochs=1, precision="bf16-mixed", logger=False,
                   enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                   callbacks=[Rec()])
    model = LM()
    model_facts(model, facts)
    facts["settings"] = dict(kind="training", framework="lightning Trainer", amp="bf16-mixed",
                             optimizer="torch.optim.AdamW (via optimizer.step(closure))", microbatch=B, seq_len=T,
                             kept="self.step_outputs.append(logits) in training_step (undetached)",
                             logits_bytes_bf16=B * T * 32000 * 2)
    run_oom(out, facts, lambda: tr.fit(model, loader))
    facts["kept_outputs"] = len(model.step_outputs)


def s_lightning_fsdp_one_gpu_oom(out, facts):
    """Lightning Trainer(strategy=FSDPStrategy(auto_wrap_policy={Block}), devices=1, precision bf16-mixed)
    on an 8-layer SDPA transformer LM (width 1024, vocab 32000, ~167 M params), AdamW, microbatch 16 x 1024;
    one process (world size 1, NCCL on localhost); 6 GiB allowed: activations at this microbatch do not fit."""
    torch = R._torch()
    import lightning as L
    from lightning.pytorch.strategies import FSDPStrategy
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29519")
    cap(6, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    LM, Block = _lm_module(L, facts, D=1024, H=16, NL=8)
    B, T = 16, 1024

    class Rec(L.Callback):
        def on_train_batch_end(s, trainer, pl_module, outputs, batch, batch_idx):
            steplog(facts, step=trainer.global_step, batch_idx=batch_idx)

    data = torch.utils.data.TensorDataset(torch.randint(32000, (8 * B, T + 1)))
    loader = torch.utils.data.DataLoader(data, batch_size=B)
    strat = FSDPStrategy(auto_wrap_policy={Block})
    tr = L.Trainer(accelerator="gpu", devices=1, strategy=strat, max_steps=3, precision="bf16-mixed", logger=False,
                   enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                   callbacks=[Rec()])
    model = LM()
    model_facts(model, facts)
    facts["settings"] = dict(kind="training", framework="lightning Trainer", strategy="FSDPStrategy (FSDP1), devices=1",
                             amp="bf16-mixed", optimizer="torch.optim.AdamW", microbatch=B, seq_len=T,
                             world_size=1, grad_checkpointing=False, logits_bytes_bf16=B * T * 32000 * 2)
    run_oom(out, facts, lambda: tr.fit(model, loader))


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "hf_pipeline_batch_oom": dict(fn=s_hf_pipeline_batch_oom, group="solo", timeout=120),
    "hf_trainer_eval_accumulation_healthy": dict(fn=s_hf_trainer_eval_accumulation_healthy, group="solo", timeout=120),
    "accelerate_grad_accum_healthy": dict(fn=s_accelerate_grad_accum_healthy, group="solo", timeout=120),
    "lightning_kept_outputs_leak_oom": dict(fn=s_lightning_kept_outputs_leak_oom, group="solo", timeout=120),
    "lightning_fsdp_one_gpu_oom": dict(fn=s_lightning_fsdp_one_gpu_oom, group="solo", timeout=120),
})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    R.main()
