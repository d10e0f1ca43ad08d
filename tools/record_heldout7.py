#!/usr/bin/env python3
"""A seventh held-out set (python3 record_heldout7.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Recorded beside record_runs.py."""
import ctypes, os, sys, random
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log, log


def s_bf16cast_gc_backward_oom(out, facts):
    """HF Llama (16 layers, hidden 2048, inter 5632, 16/4 heads, vocab 32000, ~0.85 B params) cast with
    model.to(torch.bfloat16) (no autocast), model.gradient_checkpointing_enable(), use_cache=False,
    AdamW (bf16 state), microbatch 4 x 2048. Steps 0-1 run uncapped; step 1's forward and backward peaks
    are measured, then the cap is set 128 MiB under the backward's peak allocated (the budget a shared
    GPU leaves): the forward fits, the backward cannot."""
    torch = R._torch()
    start_history(max_entries=60000, facts=facts)
    torch.manual_seed(0)
    m = R.hf_llama(L=16, d=2048, inter=5632, heads=16, kv=4, vocab=32000, maxpos=4096)
    m = m.to(torch.bfloat16).cuda().train()
    m.config.use_cache = False
    m.gradient_checkpointing_enable()
    model_facts(m, facts)
    R.hf_cfg_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-5)
    B, T = 4, 2048
    facts["settings"] = dict(kind="training", framework="transformers (own loop)", amp=None,
                             weights="model.to(torch.bfloat16)", optimizer="torch.optim.AdamW (bf16 state)",
                             microbatch=B, seq_len=T, grad_checkpointing=True, use_cache=False)
    peaks = {}

    def step(s, measure=False):
        idx = torch.randint(32000, (B, T), device="cuda")
        if measure:
            torch.cuda.reset_peak_memory_stats()
        loss = m(input_ids=idx, labels=idx).loss
        if measure:
            peaks["forward"] = torch.cuda.max_memory_reserved()
            peaks["forward_alloc"] = torch.cuda.max_memory_allocated()
        loss.backward()
        if measure:
            peaks["backward"] = torch.cuda.max_memory_reserved()
            peaks["backward_alloc"] = torch.cuda.max_memory_allocated()
        opt.step()
        opt.zero_grad(set_to_none=True)
        steplog(facts, step=s, loss=float(loss))

    step(0)
    step(1, measure=True)
    capb = peaks["backward_alloc"] - 128 * MiB
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(capb / total)
    facts["step1_peaks"] = peaks
    facts["cap_bytes"] = capb
    facts["cap_gib"] = round(capb / GiB, 3)
    facts["cap_set_after"] = "step 1, 128 MiB under its backward peak allocated"
    log(f"memory fraction set: {capb / GiB:.2f} GiB allowed")

    def body():
        for s in range(2, 4):
            step(s)
    run_oom(out, facts, body)


def s_hf_generate_kv_oom(out, facts):
    """HF Llama (8 layers, hidden 1024, 16/16 heads: full multi-head K/V, vocab 32000) in bf16
    (model.to(torch.bfloat16)), greedy generate() on 32 prompts of 1024 tokens, max_new_tokens=3000
    (no EOS), under torch.inference_mode(), 4.5 GiB allowed: the DynamicCache grows 1 MiB a token."""
    torch = R._torch()
    cap(4.5, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    m = R.hf_llama(L=8, d=1024, inter=2816, heads=16, kv=16, vocab=32000, maxpos=4096)
    m = m.to(torch.bfloat16).cuda().eval()
    m.generation_config.eos_token_id = None
    m.generation_config.pad_token_id = 0
    model_facts(m, facts)
    R.hf_cfg_facts(m, facts)
    B, P, N = 32, 1024, 3000
    facts["settings"] = dict(kind="inference (generate)", framework="transformers generate()", amp=None,
                             weights="bf16", batch=B, prompt_len=P, max_new_tokens=N, decoding="greedy",
                             inference_mode=True, kv_bytes_per_token_per_seq=8 * 2 * 16 * 64 * 2)
    ids = torch.randint(1, 32000, (B, P), device="cuda")

    def body():
        with torch.inference_mode():
            o = m.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=N,
                           min_new_tokens=N, do_sample=False)
        steplog(facts, key="generate", tokens=int(o.shape[1]))
    run_oom(out, facts, body)


def s_cudamalloc_outside_oom(out, facts):
    """One process: after a warm-up, a raw driver allocation (cuMemAlloc_v2 through ctypes, as a custom
    extension or a non-PyTorch library would make) takes all but 4 GiB of the GPU; then torchvision
    resnet50 trains (bf16 autocast, SGD momentum, 96 images of 224^2), no memory fraction."""
    torch = R._torch()
    import torchvision
    torch.cuda.init()
    a = torch.randn(256, 256, device="cuda", requires_grad=True)
    with torch.amp.autocast("cuda", dtype=torch.bfloat16):
        (a @ a).float().sum().backward()
    (a @ a).sum().backward()
    torch.cuda.synchronize()
    del a
    cuda = ctypes.CDLL("libcuda.so.1")
    free, total = torch.cuda.mem_get_info()
    hold = free - 4 * GiB
    ptr = ctypes.c_uint64(0)
    rc = cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(hold))
    facts["outside"] = dict(api="cuMemAlloc_v2 via ctypes", requested=hold, rc=rc, free_before=free,
                            free_after=torch.cuda.mem_get_info()[0])
    log(f"native buffer: {hold / GiB:.2f} GiB (rc={rc})")
    start_history(facts=facts)
    torch.manual_seed(0)
    m = torchvision.models.resnet50().cuda().train()
    model_facts(m, facts)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    B = 96
    facts["settings"] = dict(kind="training (image classification)", framework="torchvision + raw cuMemAlloc",
                             amp="bf16 autocast", optimizer="torch.optim.SGD(momentum=0.9)", batch=B, image=224,
                             memory_fraction=None)

    def body():
        for s in range(4):
            x = torch.randn(B, 3, 224, 224, device="cuda")
            y = torch.randint(1000, (B,), device="cuda")
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(loss))
    run_oom(out, facts, body)
    cuda.cuMemFree_v2(ptr)


def s_trainer_kept_outputs_leak_oom(out, facts):
    """HF Trainer (bf16=True, default adamw_torch_fused, per_device_train_batch_size=8, seq 512,
    report_to=[]) on HF Llama (4 layers, hidden 768, 12/4 heads, vocab 32000); a Trainer subclass's
    compute_loss keeps every step's ModelOutput (logits and the training-mode KV cache) in a list "for
    per-token metrics later"; 8 GiB allowed."""
    torch = R._torch()
    from transformers import Trainer, TrainingArguments
    cap(8, facts)
    start_history(max_entries=40000, facts=facts)
    torch.manual_seed(0)
    m = R.hf_llama(L=4, d=768, inter=2048, heads=12, kv=4, vocab=32000, maxpos=2048)
    model_facts(m, facts)
    R.hf_cfg_facts(m, facts)
    B, T = 8, 512

    class DS(torch.utils.data.Dataset):
        def __len__(s):
            return 100000

        def __getitem__(s, i):
            g = torch.Generator().manual_seed(i)
            ids = torch.randint(32000, (T,), generator=g)
            return dict(input_ids=ids, labels=ids.clone())

    class KeepTrainer(Trainer):
        kept = []

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            loss, outputs = super().compute_loss(model, inputs, return_outputs=True,
                                                 num_items_in_batch=num_items_in_batch)
            self.kept.append(outputs)
            return (loss, outputs) if return_outputs else loss

    args = TrainingArguments(output_dir="/tmp/h7_trainer", per_device_train_batch_size=B, max_steps=60,
                             bf16=True, report_to=[], logging_steps=1, save_strategy="no",
                             dataloader_num_workers=0, disable_tqdm=True)
    facts["settings"] = dict(kind="training", framework="transformers Trainer", amp="bf16=True",
                             optimizer=str(args.optim), microbatch=B, seq_len=T,
                             kept="every step's ModelOutput in a list (compute_loss override)",
                             logits_bytes_bf16=B * T * 32000 * 2)
    tr = KeepTrainer(model=m, args=args, train_dataset=DS())
    run_oom(out, facts, tr.train)
    facts["kept_outputs"] = len(KeepTrainer.kept)


def s_deeplab_cudnn_benchmark_healthy(out, facts):
    """torchvision deeplabv3_resnet50 (no pretrained weights, aux head, 21 classes), training,
    torch.backends.cudnn.benchmark=True, bf16 autocast, SGD momentum, 12 images of 512^2 with per-pixel
    labels, 4 steps; no cap."""
    torch = R._torch()
    import torchvision
    import torch.nn.functional as F
    torch.backends.cudnn.benchmark = True
    start_history(max_entries=40000, facts=facts)
    torch.manual_seed(0)
    m = torchvision.models.segmentation.deeplabv3_resnet50(weights=None, weights_backbone=None, num_classes=21,
                                                           aux_loss=True).cuda().train()
    model_facts(m, facts)
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    B = 12
    facts["settings"] = dict(kind="training (semantic segmentation)", framework="torchvision segmentation",
                             amp="bf16 autocast", optimizer="torch.optim.SGD(momentum=0.9)", batch=B, image=512,
                             cudnn_benchmark=True)

    def body():
        for s in range(4):
            x = torch.randn(B, 3, 512, 512, device="cuda")
            y = torch.randint(21, (B, 512, 512), device="cuda")
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                o = m(x)
                loss = F.cross_entropy(o["out"], y) + 0.4 * F.cross_entropy(o["aux"], y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(loss))
    run_oom(out, facts, body)


def s_infer_server_varshape_healthy(out, facts):
    """A scoring server's loop: HF Llama (6 layers, hidden 1024, 16/4 heads, vocab 32000) in bf16 under
    torch.inference_mode(), use_cache=False, 48 requests whose (batch, length) are drawn from
    1-64 x 16-1024 (seeded), each returns the last position's argmax to the CPU; no cap."""
    torch = R._torch()
    start_history(max_entries=15000, facts=facts)
    torch.manual_seed(0)
    rng = random.Random(7)
    m = R.hf_llama(L=6, d=1024, inter=2816, heads=16, kv=4, vocab=32000).to(torch.bfloat16).cuda().eval()
    model_facts(m, facts)
    R.hf_cfg_facts(m, facts)
    shapes = [(rng.choice([1, 2, 4, 8, 16, 24, 32, 48, 64]), rng.randint(16, 1024)) for _ in range(48)]
    facts["settings"] = dict(kind="inference (scoring server)", framework="transformers forward", amp=None,
                             weights="bf16", inference_mode=True, use_cache=False, shapes=shapes)
    with torch.inference_mode():
        for i, (B, T) in enumerate(shapes):
            ids = torch.randint(32000, (B, T), device="cuda")
            logits = m(input_ids=ids, use_cache=False).logits
            pred = logits[:, -1].float().argmax(-1).cpu()
            del logits
            steplog(facts, key="requests", request=i, B=B, T=T, first=int(pred[0]))
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


def s_embedding_recsys_adam_oom(out, facts):
    """Recommender: a 12 M x 128 item embedding (fp32, 5.7 GiB, dense gradients) + a user embedding
    1 M x 128 + a 3-layer MLP tower, torch.optim.Adam, batch 4096 (user, item) pairs with BCE loss,
    16 GiB allowed: parameters + dense embedding gradients + Adam state do not fit."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    cap(16, facts)
    start_history(facts=facts)
    torch.manual_seed(0)

    class Rec(nn.Module):
        def __init__(s):
            super().__init__()
            s.item = nn.Embedding(12_000_000, 128)
            s.user = nn.Embedding(1_000_000, 128)
            s.mlp = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 512), nn.ReLU(),
                                  nn.Linear(512, 1))

        def forward(s, u, i):
            return s.mlp(torch.cat([s.user(u), s.item(i)], -1)).squeeze(-1)
    m = Rec().cuda()
    model_facts(m, facts)
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    B = 4096
    facts["settings"] = dict(kind="training (recommender)", framework="plain PyTorch", amp=None,
                             optimizer="torch.optim.Adam", batch=B, sparse_embeddings=False)

    def body():
        for s in range(3):
            u = torch.randint(1_000_000, (B,), device="cuda")
            i = torch.randint(12_000_000, (B,), device="cuda")
            y = torch.rand(B, device="cuda").round()
            loss = F.binary_cross_entropy_with_logits(m(u, i), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(loss))
    run_oom(out, facts, body)


def s_empty_cache_each_step_healthy(out, facts):
    """The 4-layer nn.MultiheadAttention GPT (width 1024), bf16 autocast, AdamW, microbatch 8 x 512,
    8 steps, torch.cuda.empty_cache() after every step (a habit copied from a forum answer); no cap."""
    torch = R._torch()
    start_history(facts=facts)
    torch.manual_seed(0)
    m = R.gpt(L=4)
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", microbatch=8, seq_len=512, empty_cache_every_step=True)
    for s in range(8):
        loss = R.gpt_step(m, opt, 8, 512)
        torch.cuda.empty_cache()
        steplog(facts, step=s, loss=float(loss))
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "infer_server_varshape_healthy": dict(fn=s_infer_server_varshape_healthy, group="par"),
    "empty_cache_each_step_healthy": dict(fn=s_empty_cache_each_step_healthy, group="par"),
    "bf16cast_gc_backward_oom": dict(fn=s_bf16cast_gc_backward_oom, group="solo"),
    "hf_generate_kv_oom": dict(fn=s_hf_generate_kv_oom, group="solo", timeout=240),
    "cudamalloc_outside_oom": dict(fn=s_cudamalloc_outside_oom, group="solo"),
    "trainer_kept_outputs_leak_oom": dict(fn=s_trainer_kept_outputs_leak_oom, group="solo"),
    "deeplab_cudnn_benchmark_healthy": dict(fn=s_deeplab_cudnn_benchmark_healthy, group="par"),
    "embedding_recsys_adam_oom": dict(fn=s_embedding_recsys_adam_oom, group="solo"),
})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    R.main()
