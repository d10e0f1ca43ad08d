#!/usr/bin/env python3
"""A twenty-third held-out set (python3 record_heldout23.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Recorded beside record_runs.py as build/h23/record_heldout23.py."""
import json, os, subprocess, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log, mem

RO = dict(V=8192, D=2048, H=16, L=4, B=4, T=512)   # the model and batch of compile_reduce_overhead_oom


def _ro_setup():
    """The reduce-overhead run's model (a 4-layer SDPA GPT, width 2048, vocab 8192), its AdamW and its loss."""
    torch = R._torch()
    import torch.nn.functional as F
    torch.manual_seed(0)
    m = R.tiny_gpt(vocab=RO["V"], d=RO["D"], h=RO["H"], L=RO["L"]).cuda().train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)

    def train_loss(model, idx):
        with torch.amp.autocast("cuda", dtype=torch.bfloat16):
            logits = model(idx[:, :-1])
            return F.cross_entropy(logits.reshape(-1, RO["V"]).float(), idx[:, 1:].reshape(-1))
    return m, opt, train_loss


def s_compile_reduce_overhead_eager_probe(out, facts):
    """Calibration child of compile_reduce_overhead_oom (not a corpus run): the same model, optimizer and
    batch in eager mode, 3 steps, no cap, no history; writes the peaks to facts.json."""
    torch = R._torch()
    m, opt, train_loss = _ro_setup()
    for s in range(3):
        idx = torch.randint(RO["V"], (RO["B"], RO["T"] + 1), device="cuda")
        loss = train_loss(m, idx)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        steplog(facts, step=s, loss=float(loss))
    facts["eager_peak"] = mem()


def s_compile_reduce_overhead_oom(out, facts):
    """torch.compile(model, mode="reduce-overhead") (inductor + CUDA graph trees) of a 4-layer SDPA GPT
    (width 2048, 16 heads, vocab 8192, ~235 M params fp32) under bf16 autocast, the cross-entropy in eager
    outside it; AdamW (foreach, eager, outside the graph), microbatch 4 x 512, zero_grad(set_to_none=True),
    cudagraph_mark_step_begin() every step. The cap is the same run's eager peak reserved (measured first in a
    child process, no cap) plus 64 MiB: eager fits under it; the compiled run keeps its forward/backward
    memory (and the gradients, outputs of the backward graph) in the CUDA graph private pool, which the
    eager optimizer step cannot use."""
    torch = R._torch()
    probe = os.path.join(out, "_eager_probe")
    os.makedirs(probe, exist_ok=True)
    with open(os.path.join(probe, "console.log"), "w") as con:
        subprocess.run([sys.executable, os.path.abspath(__file__), "--one", "compile_reduce_overhead_eager_probe",
                        probe], check=True, stdout=con, stderr=subprocess.STDOUT, timeout=120)
    with open(os.path.join(probe, "facts.json")) as f:
        eager = json.load(f)
    facts["eager_probe"] = dict(steps=eager.get("steps"), peak=eager.get("eager_peak"))
    cap_bytes = eager["eager_peak"]["max_reserved"] + 64 * MiB
    cap(cap_bytes / GiB, facts)
    start_history(max_entries=20000, facts=facts)
    m, opt, train_loss = _ro_setup()
    model_facts(m, facts)
    cm = torch.compile(m, mode="reduce-overhead")
    B, T = RO["B"], RO["T"]
    facts["settings"] = dict(kind="training", framework="plain PyTorch + torch.compile(mode='reduce-overhead')",
                             compile="reduce-overhead (inductor + CUDA graph trees) of the model; loss eager",
                             amp="bf16 autocast", optimizer="torch.optim.AdamW (foreach, eager)", microbatch=B,
                             seq_len=T, vocab=RO["V"], width=RO["D"], layers=RO["L"],
                             cap_rule="eager peak reserved (child process, no cap) + 64 MiB",
                             eager_peak_reserved=eager["eager_peak"]["max_reserved"],
                             eager_peak_allocated=eager["eager_peak"]["max_allocated"])

    def body():
        for s in range(4):
            t0 = time.time()
            torch.compiler.cudagraph_mark_step_begin()
            idx = torch.randint(RO["V"], (B, T + 1), device="cuda")
            loss = train_loss(cm, idx)
            loss.backward()
            steplog(facts, key="phases", step=s, phase="after backward")
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(loss), seconds=round(time.time() - t0, 2))
    run_oom(out, facts, body)


def s_kv_pool_prealloc_infer_oom(out, facts):
    """A vLLM-style engine: a 4-layer bf16 decoder (width 1024, 16 heads, vocab 32000, ~116 M params); at
    start-up a profile forward of max_num_batched_tokens=2048 (4 x 512) measures the peak, empty_cache(), then
    one KV tensor per layer (2 x num_blocks x 16 tokens x 16 heads x 64, bf16, torch.zeros) sized as
    gpu_memory_utilization=0.9 of the 4 GiB allowed minus that peak; then serving under torch.inference_mode():
    8 requests of 512 prompt tokens (prefill writes K/V into the pool by slot mapping), 24 decode steps that
    gather the context from the pool, then a burst of 16 requests of 2048 prompt tokens prefilled at once
    (32768 tokens, no chunked prefill): its activations no longer fit beside the pool."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    cap(4, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    V, D, H, L, BS = 32000, 1024, 16, 4, 16
    hd = D // H

    class Layer(nn.Module):
        def __init__(s):
            super().__init__()
            s.ln1, s.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
            s.qkv = nn.Linear(D, 3 * D, bias=False)
            s.o = nn.Linear(D, D, bias=False)
            s.up = nn.Linear(D, 4 * D, bias=False)
            s.down = nn.Linear(4 * D, D, bias=False)

        def forward(s, x, kv, wslots, cslots):
            B, T, _ = x.shape
            q, k, v = s.qkv(s.ln1(x)).view(B, T, 3, H, hd).unbind(2)
            if kv is not None:
                kc, vc = kv[0].view(-1, H, hd), kv[1].view(-1, H, hd)
                kc.index_copy_(0, wslots.reshape(-1), k.reshape(-1, H, hd))
                vc.index_copy_(0, wslots.reshape(-1), v.reshape(-1, H, hd))
            if cslots is None:      # prefill: attend within the prompt
                a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                   is_causal=True)
            else:                   # decode: attend to the cached context
                kk, vv = kc[cslots], vc[cslots]
                a = F.scaled_dot_product_attention(q.transpose(1, 2), kk.transpose(1, 2), vv.transpose(1, 2))
            x = x + s.o(a.transpose(1, 2).reshape(B, T, D))
            return x + s.down(F.gelu(s.up(s.ln2(x))))

    class Decoder(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(V, D)
            s.layers = nn.ModuleList([Layer() for _ in range(L)])
            s.ln = nn.LayerNorm(D)
            s.lm_head = nn.Linear(D, V, bias=False)

        def forward(s, ids, kv_caches, wslots, cslots=None):
            x = s.emb(ids)
            for i, layer in enumerate(s.layers):
                x = layer(x, kv_caches[i] if kv_caches else None, wslots, cslots)
            return s.lm_head(s.ln(x[:, -1]))          # logits of the last position only

    m = Decoder().to(device="cuda", dtype=torch.bfloat16).eval()
    model_facts(m, facts)
    util, max_batched = 0.9, 2048
    with torch.inference_mode():
        torch.cuda.reset_peak_memory_stats()
        ids = torch.randint(V, (4, max_batched // 4), device="cuda")
        m(ids, None, None)                            # profile run
        del ids
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
        torch.cuda.empty_cache()
        block_bytes = 2 * BS * H * hd * 2             # one layer's K and V for one block of 16 tokens
        num_blocks = int((util * facts["cap_bytes"] - peak) // (L * block_bytes))
        kv_caches = [torch.zeros(2, num_blocks, BS, H, hd, device="cuda", dtype=torch.bfloat16) for _ in range(L)]
    facts["kv_pool"] = dict(gpu_memory_utilization=util, max_num_batched_tokens=max_batched, profile_peak=peak,
                            num_blocks=num_blocks, block_tokens=BS, tensors=L,
                            bytes=sum(t.numel() * 2 for t in kv_caches),
                            left_after_pool=facts["cap_bytes"] - torch.cuda.memory_allocated())
    R.log(f"[engine] profile peak {peak / GiB:.2f} GiB; KV cache: {num_blocks} blocks of {BS} tokens x {L} layers, "
          f"{facts['kv_pool']['bytes'] / GiB:.2f} GiB (gpu_memory_utilization={util})")
    NR1, T1, DEC, NR2, T2 = 8, 512, 24, 16, 2048
    facts["settings"] = dict(kind="inference (LLM serving)", framework="plain PyTorch (vLLM-style engine)",
                             amp=None, dtype="bfloat16", inference_mode=True,
                             phases=[dict(requests=NR1, prompt_len=T1, decode_steps=DEC),
                                     dict(requests=NR2, prompt_len=T2, decode_steps=0, chunked_prefill=False)],
                             burst_tokens=NR2 * T2, burst_mlp_up_bytes=NR2 * T2 * 4 * D * 2)

    def body():
        steplog(facts, phase="after pool")
        nxt = 0
        with torch.inference_mode():
            ids = torch.randint(V, (NR1, T1), device="cuda")
            base = torch.arange(NR1, device="cuda")[:, None] * (T1 + DEC) * 1
            slots = base + torch.arange(T1, device="cuda")[None]
            logits = m(ids, kv_caches, slots)
            steplog(facts, phase="prefill", requests=NR1, tokens=NR1 * T1)
            tok = logits.argmax(-1, keepdim=True)
            for t in range(DEC):
                w = base + T1 + t
                ctx = base + torch.arange(T1 + t + 1, device="cuda")[None]
                logits = m(tok, kv_caches, w, ctx)
                tok = logits.argmax(-1, keepdim=True)
                if t % 8 == 7:
                    steplog(facts, phase="decode", step=t)
            nxt = NR1 * (T1 + DEC)
            ids = torch.randint(V, (NR2, T2), device="cuda")
            slots = nxt + torch.arange(NR2 * T2, device="cuda").view(NR2, T2)
            steplog(facts, phase="burst arrives", requests=NR2, tokens=NR2 * T2)
            logits = m(ids, kv_caches, slots)
            steplog(facts, phase="burst prefill", requests=NR2)
    run_oom(out, facts, body)


def s_side_stream_event_prefetch_healthy(out, facts):
    """A double-buffered GPU input pipeline on a side torch.cuda.Stream synchronised with events (no
    record_stream): two uint8 staging buffers allocated on the side stream, each batch (64 x 3 x 224 x 224
    uint8, pinned) copied with copy_(non_blocking=True) into one, normalised to fp32 channels_last on the side
    stream; the default stream wait_event()s the batch's `ready` event and records a `done` event after the
    step, which the side stream waits on before it reuses that slot; torchvision mobilenet_v3_large
    (5.5 M params), bf16 autocast, AdamW, 8 steps; no cap."""
    torch = R._torch()
    import torchvision
    import torch.nn.functional as F
    start_history(max_entries=60000, facts=facts)
    torch.manual_seed(0)
    m = torchvision.models.mobilenet_v3_large(num_classes=1000).cuda().to(memory_format=torch.channels_last)
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    B, NSTEP = 64, 8
    cpu = [torch.randint(0, 256, (B, 3, 224, 224), dtype=torch.uint8).pin_memory() for _ in range(3)]
    lab = [torch.randint(1000, (B,)).pin_memory() for _ in range(3)]
    mean = torch.tensor([0.485, 0.456, 0.406], device="cuda").view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225], device="cuda").view(1, 3, 1, 1) * 255
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        staging = [torch.empty(B, 3, 224, 224, dtype=torch.uint8, device="cuda") for _ in range(2)]
    ready = [torch.cuda.Event() for _ in range(2)]
    done = [torch.cuda.Event() for _ in range(2)]
    side.wait_stream(torch.cuda.current_stream())
    facts["settings"] = dict(kind="training (vision)", framework="plain PyTorch + torchvision", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", batch=B, steps=NSTEP,
                             prefetch="side stream, double-buffered uint8 staging, events (no record_stream)",
                             staging_bytes=B * 3 * 224 * 224, normalised_batch_bytes=B * 3 * 224 * 224 * 4)

    def prefetch(i):
        k = i % 2
        with torch.cuda.stream(side):
            side.wait_event(done[k])                       # the step that read slot k has finished
            staging[k].copy_(cpu[i % 3], non_blocking=True)
            x = staging[k].float().sub_(mean).div_(std).contiguous(memory_format=torch.channels_last)
            y = lab[i % 3].cuda(non_blocking=True)
            ready[k].record(side)
        return x, y, k

    nxt = prefetch(0)
    for s in range(NSTEP):
        x, y, k = nxt
        torch.cuda.current_stream().wait_event(ready[k])
        nxt = prefetch(s + 1)
        with torch.amp.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        done[k].record()
        steplog(facts, step=s, loss=float(loss))
    facts["optimizer_state_bytes"] = R.opt_state_bytes(opt)
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


def s_ddp_bucket_view_healthy(out, facts):
    """DistributedDataParallel (nccl, world size 1, one GPU, MASTER_PORT 29623) with
    gradient_as_bucket_view=True and bucket_cap_mb=25 around a 6-layer SDPA GPT (width 1024, vocab 8192,
    ~92 M params fp32), AdamW, bf16 autocast, microbatch 8 x 512, 5 steps, zero_grad(set_to_none=True)."""
    torch = R._torch()
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29623", RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    torch.cuda.set_device(0)
    start_history(max_entries=40000, facts=facts)
    dist.init_process_group("nccl", device_id=torch.device("cuda:0"))
    try:
        torch.manual_seed(0)
        model = R.tiny_gpt(vocab=8192, d=1024, h=16, L=6).cuda()
        model_facts(model, facts)
        steplog(facts, key="phases", phase="model on gpu")
        ddp = DDP(model, device_ids=[0], gradient_as_bucket_view=True, bucket_cap_mb=25)
        steplog(facts, key="phases", phase="after DDP()")
        opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4)
        facts["settings"] = dict(kind="training", framework="DDP", ddp=dict(backend="nccl", world_size=1,
                                 bucket_cap_mb=25, gradient_as_bucket_view=True, static_graph=False),
                                 amp="bf16 autocast", optimizer="torch.optim.AdamW", microbatch=8, seq_len=512,
                                 zero_grad="set_to_none=True")
        for step in range(5):
            loss = R.gpt_step(ddp, opt, 8, 512, vocab=8192)
            steplog(facts, step=step, loss=float(loss))
        p = next(model.parameters())
        facts["optimizer_state_bytes"] = R.opt_state_bytes(opt)
        facts["grad_none_after_zero_grad"] = p.grad is None
        facts["oom"] = False
        dump(out, facts)
        write_log(out)
    finally:
        dist.destroy_process_group()


def s_sdpa_math_fallback_oom(out, facts):
    """A 4-block causal LM on F.scaled_dot_product_attention(is_causal=True) (width 768, 12 heads, head dim
    64, MLP 3072, vocab 8192, ~41 M params), bf16 autocast, AdamW, batch 4, sequence ladder 1024, 2048, 4096
    (2 steps each); the whole training loop runs under torch.nn.attention.sdpa_kernel([SDPBackend.MATH])
    (kept from a reproducibility recipe): the math kernel materialises the B x H x T x T scores and softmax
    and keeps them for the backward; 8 GiB allowed."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel, SDPBackend
    cap(8, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    Dm, NH, L, V, B = 768, 12, 4, 8192, 4
    Block = R.sdpa_block_cls(True)

    class LM(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(V, Dm)
            s.pos = nn.Embedding(4096, Dm)
            s.blocks = nn.ModuleList([Block(Dm, NH) for _ in range(L)])
            s.ln = nn.LayerNorm(Dm)
            s.head = nn.Linear(Dm, V, bias=False)

        def forward(s, idx):
            x = s.emb(idx) + s.pos(torch.arange(idx.shape[1], device=idx.device))
            for b in s.blocks:
                x = b(x)
            return s.head(s.ln(x))
    m = LM().cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    ladder = [1024, 2048, 4096]
    kern = {}
    try:
        q = torch.randn(B, NH, 4096, Dm // NH, device="cuda", dtype=torch.bfloat16)
        p = torch.backends.cuda.SDPAParams(q, q, q, None, 0.0, True, False)
        kern = dict(flash=torch.backends.cuda.can_use_flash_attention(p, False),
                    efficient=torch.backends.cuda.can_use_efficient_attention(p, False),
                    cudnn=torch.backends.cuda.can_use_cudnn_attention(p, False))
        del q, p
    except Exception as e:  # the probe is a fact, not the run
        kern = dict(error=repr(e))
    torch.cuda.empty_cache()
    facts["sdpa_kernels_possible_without_restriction"] = kern
    facts["settings"] = dict(kind="training", framework="plain PyTorch (F.scaled_dot_product_attention)",
                             amp="bf16 autocast", optimizer="torch.optim.AdamW", batch=B, seq_lens=ladder,
                             steps_per_len=2, heads=NH, layers=L, is_causal=True, attn_mask=None,
                             sdpa_backends="sdpa_kernel([SDPBackend.MATH]) around the loop",
                             attn_matrix_bytes_bf16={T: B * NH * T * T * 2 for T in ladder},
                             attn_matrix_bytes_fp32={T: B * NH * T * T * 4 for T in ladder})

    def body():
        with sdpa_kernel([SDPBackend.MATH]):
            for T in ladder:
                for s in range(2):
                    idx = torch.randint(V, (B, T + 1), device="cuda")
                    with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                        logits = m(idx[:, :-1])
                        loss = F.cross_entropy(logits.reshape(-1, V).float(), idx[:, 1:].reshape(-1))
                    loss.backward()
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                    steplog(facts, T=T, step=s, loss=float(loss))
    run_oom(out, facts, body)


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "side_stream_event_prefetch_healthy": dict(fn=s_side_stream_event_prefetch_healthy, group="par", timeout=90),
    "ddp_bucket_view_healthy": dict(fn=s_ddp_bucket_view_healthy, group="par", timeout=90),
    "compile_reduce_overhead_oom": dict(fn=s_compile_reduce_overhead_oom, group="solo", timeout=200),
    "compile_reduce_overhead_eager_probe": dict(fn=s_compile_reduce_overhead_eager_probe, group="solo", timeout=120),
    "kv_pool_prealloc_infer_oom": dict(fn=s_kv_pool_prealloc_infer_oom, group="solo", timeout=90),
    "sdpa_math_fallback_oom": dict(fn=s_sdpa_math_fallback_oom, group="solo", timeout=90),
})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    R.main()
