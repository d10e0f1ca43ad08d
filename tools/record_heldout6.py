#!/usr/bin/env python3
"""A sixth held-out set (python3 record_heldout6.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Recorded beside record_runs.py."""
import os, sys, time, random
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log, log


def s_clip_contrastive_oom(out, facts):
    """CLIP-shaped two-tower model: image tower = MLP over 1024-d pooled backbone features (cached),
    text tower = embedding + 4-layer nn.TransformerEncoder (width 512, 32 tokens) mean-pooled, both
    projected to 512-d, symmetric InfoNCE over the in-batch B x B similarity matrix, bf16 autocast,
    AdamW, batch 32768 (large in-batch negatives), 10 GiB allowed."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    cap(10, facts)
    start_history(facts=facts)
    torch.manual_seed(0)

    class Text(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(49408, 512)
            s.pos = nn.Parameter(torch.zeros(1, 32, 512))
            s.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True,
                                                                     norm_first=True), 4)
            s.proj = nn.Linear(512, 512, bias=False)

        def forward(s, t):
            return s.proj(s.enc(s.emb(t) + s.pos).mean(1))

    class CLIP(nn.Module):
        def __init__(s):
            super().__init__()
            s.img = nn.Sequential(nn.Linear(1024, 2048), nn.GELU(), nn.Linear(2048, 512, bias=False))
            s.txt = Text()
            s.logit_scale = nn.Parameter(torch.tensor(2.659))

        def forward(s, f, t):
            a = F.normalize(s.img(f), dim=-1)
            b = F.normalize(s.txt(t), dim=-1)
            return s.logit_scale.exp() * a @ b.t()
    m = CLIP().cuda()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B = 32768
    facts["settings"] = dict(kind="training (contrastive)", framework="plain PyTorch", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", batch=B, text_len=32, embed=512,
                             similarity_bytes_bf16=B * B * 2, similarity_bytes_fp32=B * B * 4)

    def body():
        for s in range(2):
            f = torch.randn(B, 1024, device="cuda")
            t = torch.randint(49408, (B, 32), device="cuda")
            lab = torch.arange(B, device="cuda")
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                logits = m(f, t)
                loss = (F.cross_entropy(logits.float(), lab) + F.cross_entropy(logits.t().float(), lab)) / 2
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(loss))
    run_oom(out, facts, body)


def s_ckpt_adam_step_oom(out, facts):
    """The nn.MultiheadAttention GPT at width 2048, 12 layers (~0.74 B params fp32), every block under
    torch.utils.checkpoint(use_reentrant=False), bf16 autocast, AdamW(fused=True), microbatch 2 x 1024,
    10 GiB allowed: the forward/backward fit, the first optimizer step creating AdamW state does not."""
    torch = R._torch()
    cap(10, facts)
    start_history(facts=facts)
    torch.manual_seed(0)
    m = R.gpt(d=2048, h=16, L=12, ckpt=True)
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
    B, T = 2, 1024
    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW(fused=True)", microbatch=B, seq_len=T,
                             grad_checkpointing=True, checkpoint="torch.utils.checkpoint(use_reentrant=False) per block")

    def body():
        for s in range(2):
            loss = R.gpt_step(m, opt, B, T)
            steplog(facts, step=s, loss=float(loss))
    run_oom(out, facts, body)


def s_maxsplit_set_varlen_oom(out, facts):
    """PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:64 already set; 4-layer SDPA GPT (width 1024, vocab
    32000), bf16 autocast, AdamW, (batch, seq) drawn every step from 2-16 x 256-2048 (seeded), 4 GiB
    allowed, up to 12 steps."""
    torch = R._torch()
    import torch.nn.functional as F
    cap(4, facts)
    start_history(max_entries=60000, facts=facts)
    torch.manual_seed(0)
    rng = random.Random(6)
    m = R.tiny_gpt(vocab=32000, L=4).cuda()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    shapes = [(rng.randint(2, 16), rng.choice([256, 512, 768, 1024, 1536, 2048])) for _ in range(12)]
    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", shapes=shapes, vocab=32000,
                             alloc_conf="max_split_size_mb:64")

    def body():
        for s, (B, T) in enumerate(shapes):
            loss = R.gpt_step(m, opt, B, T, vocab=32000)
            steplog(facts, step=s, B=B, T=T, loss=float(loss))
    run_oom(out, facts, body)


def s_frcnn_varsize_oom(out, facts):
    """torchvision fasterrcnn_resnet50_fpn (no pretrained weights, 41.3 M params), training mode, SGD
    momentum 0.9, fp32, 4 images a step of random sizes and aspect ratios with the transform's min_size
    drawn from (480..1024) each step, 3-12 boxes per image; steps 0-1 uncapped, then the cap is set to
    their peak reserved + 64 MiB and training goes on (up to 20 steps)."""
    torch = R._torch()
    import torchvision
    start_history(max_entries=30000, facts=facts)
    torch.manual_seed(0)
    rng = random.Random(3)
    m = torchvision.models.detection.fasterrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_classes=21,
                                                             min_size=(480, 576, 672, 768, 864, 960, 1024),
                                                             max_size=1700).cuda().train()
    model_facts(m, facts)
    opt = torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.01, momentum=0.9)
    facts["settings"] = dict(kind="training (object detection)", framework="torchvision detection",
                             amp=None, optimizer="torch.optim.SGD(momentum=0.9)", images_per_step=4,
                             min_size=[480, 576, 672, 768, 864, 960, 1024], max_size=1700)

    def batch():
        imgs, tg = [], []
        for _ in range(4):
            h, w = rng.randint(320, 1000), rng.randint(320, 1400)
            imgs.append(torch.rand(3, h, w, device="cuda"))
            n = rng.randint(3, 12)
            x0 = torch.rand(n, device="cuda") * (w - 64)
            y0 = torch.rand(n, device="cuda") * (h - 64)
            bw = 16 + torch.rand(n, device="cuda") * 48
            bh = 16 + torch.rand(n, device="cuda") * 48
            tg.append(dict(boxes=torch.stack([x0, y0, x0 + bw, y0 + bh], 1),
                           labels=torch.randint(1, 21, (n,), device="cuda")))
        return imgs, tg

    def body():
        for s in range(20):
            imgs, tg = batch()
            losses = m(imgs, tg)
            loss = sum(losses.values())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, sizes=[tuple(i.shape[1:]) for i in imgs], loss=float(loss))
            if s == 1:
                capb = torch.cuda.max_memory_reserved() + 64 * MiB
                total = torch.cuda.get_device_properties(0).total_memory
                torch.cuda.set_per_process_memory_fraction(capb / total)
                facts["cap_bytes"] = capb
                facts["cap_gib"] = round(capb / GiB, 3)
                facts["cap_set_after"] = "step 1, at steps 0-1's peak reserved + 64 MiB"
                log(f"memory fraction set: {capb / GiB:.2f} GiB allowed")
    run_oom(out, facts, body)


def s_whisper_long_audio_oom(out, facts):
    """Whisper-shaped encoder-decoder: conv front end (Conv1d 80->768 k3, Conv1d 768->768 k3 stride 2,
    GELU), 6-layer nn.TransformerEncoder + 6-layer nn.TransformerDecoder (width 768, 12 heads), vocab
    51865, bf16 autocast, AdamW, 8 clips of 5 minutes (30000 mel frames -> 15000 encoder positions),
    224 target tokens, 8 GiB allowed."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    cap(8, facts)
    start_history(facts=facts)
    torch.manual_seed(0)
    d, V = 768, 51865

    class W(nn.Module):
        def __init__(s):
            super().__init__()
            s.c1 = nn.Conv1d(80, d, 3, padding=1)
            s.c2 = nn.Conv1d(d, d, 3, stride=2, padding=1)
            s.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, 12, 4 * d, batch_first=True,
                                                                     norm_first=True, activation="gelu"), 6)
            s.tok = nn.Embedding(V, d)
            s.dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(d, 12, 4 * d, batch_first=True,
                                                                     norm_first=True, activation="gelu"), 6)
            s.out = nn.Linear(d, V, bias=False)

        def forward(s, mel, y):
            x = F.gelu(s.c2(F.gelu(s.c1(mel)))).transpose(1, 2)
            pos = torch.arange(x.shape[1], device=x.device)[None, :, None]
            x = x + torch.sin(pos / 10000 ** (torch.arange(d, device=x.device) / d))
            mem = s.enc(x)
            T = y.shape[1]
            mask = nn.Transformer.generate_square_subsequent_mask(T, device=y.device)
            h = s.dec(s.tok(y), mem, tgt_mask=mask, tgt_is_causal=True)
            return s.out(h)
    m = W().cuda()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B, F_, T = 8, 30000, 224
    facts["settings"] = dict(kind="training (speech, encoder-decoder)", framework="plain PyTorch (nn.Transformer*)",
                             amp="bf16 autocast", optimizer="torch.optim.AdamW", batch=B, mel_frames=F_,
                             encoder_positions=F_ // 2, target_tokens=T, vocab=V)

    def body():
        for s in range(2):
            mel = torch.randn(B, 80, F_, device="cuda")
            y = torch.randint(V, (B, T + 1), device="cuda")
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                logits = m(mel, y[:, :-1])
                loss = F.cross_entropy(logits.reshape(-1, V).float(), y[:, 1:].reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(loss))
    run_oom(out, facts, body)


def s_fp16_relbias_longseq_oom(out, facts):
    """6-layer SDPA decoder (width 1024, 16 heads, vocab 32000) with a learned T5-style relative
    position bias computed per layer as a (1, H, T, T) float attn_mask (plus causal -inf), fp16 autocast
    with torch.amp.GradScaler, AdamW, microbatch 2 x 4096, 8 GiB allowed: the additive mask keeps SDPA off
    the flash kernel and its gradient is a (H, T, T) tensor per layer."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    cap(8, facts)
    start_history(facts=facts)
    torch.manual_seed(0)
    d, H, V, L = 1024, 16, 32000, 6

    class Block(nn.Module):
        def __init__(s):
            super().__init__()
            s.ln1, s.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            s.qkv = nn.Linear(d, 3 * d)
            s.proj = nn.Linear(d, d)
            s.fc1, s.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            s.rel = nn.Embedding(64, H)

        def forward(s, x):
            B, T, D = x.shape
            i = torch.arange(T, device=x.device)
            rp = (i[None, :] - i[:, None]).clamp(-32, 31) + 32
            bias = s.rel(rp).permute(2, 0, 1)[None]
            bias = bias.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
            q, k, v = s.qkv(s.ln1(x)).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype))
            x = x + s.proj(a.transpose(1, 2).reshape(B, T, D))
            return x + s.fc2(F.gelu(s.fc1(s.ln2(x))))

    class M(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(V, d)
            s.blocks = nn.ModuleList([Block() for _ in range(L)])
            s.ln = nn.LayerNorm(d)
            s.head = nn.Linear(d, V, bias=False)

        def forward(s, idx):
            x = s.emb(idx)
            for b in s.blocks:
                x = b(x)
            return s.head(s.ln(x))
    m = M().cuda()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler("cuda")
    B, T = 2, 4096
    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp="fp16 autocast + GradScaler",
                             optimizer="torch.optim.AdamW", microbatch=B, seq_len=T, heads=H,
                             attention="SDPA with a float (1,H,T,T) relative-position bias mask",
                             bias_bytes_fp16_per_layer=H * T * T * 2)

    def body():
        for s in range(2):
            idx = torch.randint(V, (B, T + 1), device="cuda")
            with torch.amp.autocast("cuda", dtype=torch.float16):
                logits = m(idx[:, :-1])
                loss = F.cross_entropy(logits.reshape(-1, V).float(), idx[:, 1:].reshape(-1))
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(loss))
    run_oom(out, facts, body)


def s_moe_dynamic_healthy(out, facts):
    """A 4-layer decoder whose MLP is a top-2 mixture of 8 experts (width 768, expert hidden 3072,
    token-choice routing with index_select/index_add: every expert's token count changes every step),
    bf16 autocast, AdamW, microbatch 8 x 1024, 6 steps; no cap."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    start_history(facts=facts)
    torch.manual_seed(0)
    d, E, V, L, H = 768, 8, 32000, 4, 12

    class MoE(nn.Module):
        def __init__(s):
            super().__init__()
            s.gate = nn.Linear(d, E, bias=False)
            s.w1 = nn.ModuleList([nn.Linear(d, 4 * d) for _ in range(E)])
            s.w2 = nn.ModuleList([nn.Linear(4 * d, d) for _ in range(E)])

        def forward(s, x):
            B, T, D = x.shape
            x = x.reshape(-1, D)
            p = F.softmax(s.gate(x).float(), -1)
            w, ix = p.topk(2, -1)
            out = torch.zeros_like(x)
            for e in range(E):
                tok, slot = (ix == e).nonzero(as_tuple=True)
                if tok.numel() == 0:
                    continue
                h = s.w2[e](F.gelu(s.w1[e](x.index_select(0, tok))))
                out = out.index_add(0, tok, (h * w[tok, slot, None]).to(out.dtype))
            return out.view(B, T, D)

    class Block(nn.Module):
        def __init__(s):
            super().__init__()
            s.ln1, s.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            s.qkv, s.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            s.moe = MoE()

        def forward(s, x):
            B, T, D = x.shape
            q, k, v = s.qkv(s.ln1(x)).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + s.proj(a.transpose(1, 2).reshape(B, T, D))
            return x + s.moe(s.ln2(x))

    class M(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(V, d)
            s.blocks = nn.ModuleList([Block() for _ in range(L)])
            s.ln = nn.LayerNorm(d)
            s.head = nn.Linear(d, V, bias=False)

        def forward(s, idx):
            x = s.emb(idx)
            for b in s.blocks:
                x = b(x)
            return s.head(s.ln(x))
    m = M().cuda()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B, T = 8, 1024
    facts["settings"] = dict(kind="training (mixture of experts)", framework="plain PyTorch", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", microbatch=B, seq_len=T, experts=E, top_k=2, steps=6)
    for s in range(6):
        loss = R.gpt_step(m, opt, B, T, vocab=V)
        steplog(facts, step=s, loss=float(loss))
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "moe_dynamic_healthy": dict(fn=s_moe_dynamic_healthy, group="par"),
    "clip_contrastive_oom": dict(fn=s_clip_contrastive_oom, group="solo"),
    "ckpt_adam_step_oom": dict(fn=s_ckpt_adam_step_oom, group="solo"),
    "maxsplit_set_varlen_oom": dict(fn=s_maxsplit_set_varlen_oom, group="solo",
                                    env={"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64"}),
    "frcnn_varsize_oom": dict(fn=s_frcnn_varsize_oom, group="solo", timeout=240),
    "whisper_long_audio_oom": dict(fn=s_whisper_long_audio_oom, group="solo"),
    "fp16_relbias_longseq_oom": dict(fn=s_fp16_relbias_longseq_oom, group="solo"),
})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    R.main()
