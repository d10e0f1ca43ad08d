#!/usr/bin/env python3
"""An eighth held-out set (python3 record_heldout8.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Recorded beside record_runs.py as build/h8/train.py."""
import os, sys, random
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log, log


def s_infer_cat_preds_oom(out, facts):
    """Token classification inference: 4-layer nn.TransformerEncoder (width 768, 12 heads, vocab 30522,
    1000 tags) in eval() under torch.inference_mode() + bf16 autocast, batches of 64 x 512 tokens; every
    batch's per-token scores (64 x 512 x 1000, float32, 125 MiB) are appended to one GPU tensor with
    preds = torch.cat([preds, scores]), 3 GiB allowed."""
    torch = R._torch()
    import torch.nn as nn
    cap(3, facts)
    start_history(facts=facts)
    torch.manual_seed(0)

    class Tagger(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(30522, 768)
            s.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(768, 12, 3072, batch_first=True), 4)
            s.head = nn.Linear(768, 1000)

        def forward(s, t):
            return s.head(s.enc(s.emb(t)))
    m = Tagger().cuda().eval()
    model_facts(m, facts)
    B, T = 64, 512
    facts["settings"] = dict(kind="inference (token classification)", framework="plain PyTorch",
                             amp="bf16 autocast", grad_mode="torch.inference_mode()", batch=B, seq_len=T,
                             tags=1000, kept="preds = torch.cat([preds, scores.float()])",
                             scores_bytes_per_batch=B * T * 1000 * 4)

    def body():
        preds = torch.empty(0, T, 1000, device="cuda")
        with torch.inference_mode():
            for s in range(40):
                t = torch.randint(30522, (B, T), device="cuda")
                with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                    scores = m(t)
                preds = torch.cat([preds, scores.float()])
                steplog(facts, step=s, kept=tuple(preds.shape))
    run_oom(out, facts, body)


def s_retain_graph_step_oom(out, facts):
    """6-layer SDPA GPT (width 1024, vocab 8192), bf16 autocast, AdamW, microbatch 16 x 1024, and
    loss.backward(retain_graph=True) every step (a fresh graph each step: the retained one lives until
    `loss`/`logits` are reassigned, i.e. through the next step's forward). Step 0 uncapped, then the cap
    is set to step 0's peak reserved + 512 MiB."""
    torch = R._torch()
    import torch.nn.functional as F
    start_history(facts=facts)
    torch.manual_seed(0)
    V = 8192
    m = R.tiny_gpt(vocab=V, L=6).cuda()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B, T = 16, 1024
    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", microbatch=B, seq_len=T, vocab=V,
                             backward="loss.backward(retain_graph=True)")

    def body():
        for s in range(4):
            idx = torch.randint(V, (B, T + 1), device="cuda")
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                logits = m(idx[:, :-1])
                loss = F.cross_entropy(logits.reshape(-1, V).float(), idx[:, 1:].reshape(-1))
            loss.backward(retain_graph=True)
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(loss))
            if s == 0:
                capb = torch.cuda.max_memory_reserved() + 512 * MiB
                total = torch.cuda.get_device_properties(0).total_memory
                torch.cuda.set_per_process_memory_fraction(capb / total)
                facts["cap_bytes"] = capb
                facts["cap_gib"] = round(capb / GiB, 3)
                facts["cap_set_after"] = "step 0, at its peak reserved + 512 MiB"
                log(f"memory fraction set: {capb / GiB:.2f} GiB allowed")
    run_oom(out, facts, body)


def s_alibi_cache_healthy(out, facts):
    """4-layer SDPA decoder (width 768, 12 heads, vocab 32000) with ALiBi: a (1, 12, T, T) float32 bias
    (slopes x distance, causal -inf) built once per sequence length and kept in a dict keyed by T, shared
    by the layers; bf16 autocast, AdamW, 8192 tokens a step as B x T with T from 8 lengths 256..2048 (each
    new in the first 8 steps, then repeats), 14 steps; no cap."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    start_history(facts=facts)
    torch.manual_seed(0)
    d, H, V, L = 768, 12, 32000, 4
    cache = {}

    def alibi(T, device):
        if T not in cache:
            slopes = torch.tensor([2 ** (-8 * (i + 1) / H) for i in range(H)], device=device)
            i = torch.arange(T, device=device)
            dist = (i[None, :] - i[:, None]).float()
            b = slopes[:, None, None] * dist[None]
            cache[T] = b.masked_fill(dist > 0, float("-inf"))[None]
        return cache[T]

    class Block(nn.Module):
        def __init__(s):
            super().__init__()
            s.ln1, s.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            s.qkv, s.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            s.fc1, s.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(s, x):
            B, T, D = x.shape
            q, k, v = s.qkv(s.ln1(x)).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=alibi(T, x.device).to(q.dtype))
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
    rng = random.Random(8)
    lens = [256 * k for k in range(1, 9)]
    rng.shuffle(lens)
    lens += [rng.choice(lens) for _ in range(6)]
    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", tokens_per_step=8192, seq_lens=lens,
                             cache="dict T -> (1,12,T,T) float32 ALiBi bias",
                             cache_bytes_total=sum(H * t * t * 4 for t in set(lens)))
    for s, T in enumerate(lens):
        loss = R.gpt_step(m, opt, 8192 // T, T, vocab=V)
        steplog(facts, step=s, B=8192 // T, T=T, cached=len(cache), loss=float(loss))
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


def s_unet_sampling_healthy(out, facts):
    """Latent-diffusion-shaped UNet (channels 128/256/512, 2 residual blocks per level with GroupNorm,
    SiLU and a timestep embedding, stride-2 down, nearest up, skip concatenation; 4 x 64 x 64 latents),
    classifier-free guidance (the batch doubled with torch.cat), DDIM-style update, 20 sampling steps,
    4 images, torch.inference_mode() + fp16 autocast; no cap."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    start_history(facts=facts)
    torch.manual_seed(0)

    class Res(nn.Module):
        def __init__(s, i, o, tdim=512):
            super().__init__()
            s.n1, s.c1 = nn.GroupNorm(32, i), nn.Conv2d(i, o, 3, padding=1)
            s.t = nn.Linear(tdim, o)
            s.n2, s.c2 = nn.GroupNorm(32, o), nn.Conv2d(o, o, 3, padding=1)
            s.skip = nn.Conv2d(i, o, 1) if i != o else nn.Identity()

        def forward(s, x, te):
            h = s.c1(F.silu(s.n1(x))) + s.t(te)[:, :, None, None]
            h = s.c2(F.silu(s.n2(h)))
            return h + s.skip(x)

    class UNet(nn.Module):
        def __init__(s, ch=(128, 256, 512)):
            super().__init__()
            s.temb = nn.Sequential(nn.Linear(128, 512), nn.SiLU(), nn.Linear(512, 512))
            s.inp = nn.Conv2d(4, ch[0], 3, padding=1)
            s.down = nn.ModuleList()
            s.pool = nn.ModuleList()
            c = ch[0]
            for o in ch:
                s.down.append(nn.ModuleList([Res(c, o), Res(o, o)]))
                s.pool.append(nn.Conv2d(o, o, 3, stride=2, padding=1))
                c = o
            s.mid = nn.ModuleList([Res(c, c), Res(c, c)])
            s.up = nn.ModuleList()
            for o in reversed(ch):
                s.up.append(nn.ModuleList([Res(c + o, o), Res(o, o)]))
                c = o
            s.out = nn.Sequential(nn.GroupNorm(32, c), nn.SiLU(), nn.Conv2d(c, 4, 3, padding=1))

        def forward(s, x, t):
            f = torch.exp(-torch.arange(64, device=x.device) * (9.21 / 64))
            te = s.temb(torch.cat([torch.sin(t[:, None] * f), torch.cos(t[:, None] * f)], 1))
            h = s.inp(x)
            skips = []
            for blocks, pool in zip(s.down, s.pool):
                for b in blocks:
                    h = b(h, te)
                skips.append(h)
                h = pool(h)
            for b in s.mid:
                h = b(h, te)
            for blocks in s.up:
                h = F.interpolate(h, scale_factor=2.0, mode="nearest")
                h = torch.cat([h, skips.pop()], 1)
                for b in blocks:
                    h = b(h, te)
            return s.out(h)
    m = UNet().cuda().eval()
    model_facts(m, facts)
    N, steps, g = 4, 20, 7.5
    facts["settings"] = dict(kind="inference (diffusion sampling)", framework="plain PyTorch",
                             amp="fp16 autocast", grad_mode="torch.inference_mode()", images=N,
                             latent=[4, 64, 64], steps=steps, guidance=g)
    abar = torch.linspace(0.9991, 0.0047, 1000, device="cuda")
    ts = torch.linspace(999, 0, steps, device="cuda").long()
    with torch.inference_mode():
        x = torch.randn(N, 4, 64, 64, device="cuda")
        for i, t in enumerate(ts):
            with torch.amp.autocast("cuda", dtype=torch.float16):
                eps = m(torch.cat([x, x]), t.float().expand(2 * N)).float()
            e_u, e_c = eps.chunk(2)
            e = e_u + g * (e_c - e_u)
            a = abar[t]
            a_prev = abar[ts[i + 1]] if i + 1 < steps else torch.tensor(1.0, device="cuda")
            x0 = (x - (1 - a).sqrt() * e) / a.sqrt()
            x = a_prev.sqrt() * x0 + (1 - a_prev).sqrt() * e
            if i % 5 == 4:
                steplog(facts, step=i)
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


def s_conv3d_video_oom(out, facts):
    """C3D-shaped video classifier (Conv3d 3->64->128->256->256->512->512, BatchNorm3d, ReLU(inplace),
    MaxPool3d; 400 classes, 13.7 M params), bf16 autocast, AdamW, 8 clips x 128 frames x 112 x 112,
    6 GiB allowed."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    cap(6, facts)
    start_history(facts=facts)
    torch.manual_seed(0)

    def blk(i, o):
        return [nn.Conv3d(i, o, 3, padding=1, bias=False), nn.BatchNorm3d(o), nn.ReLU(inplace=True)]
    m = nn.Sequential(*blk(3, 64), nn.MaxPool3d((1, 2, 2)), *blk(64, 128), nn.MaxPool3d(2),
                      *blk(128, 256), *blk(256, 256), nn.MaxPool3d(2), *blk(256, 512), *blk(512, 512),
                      nn.MaxPool3d(2), nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(512, 400)).cuda()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B, T = 8, 128
    facts["settings"] = dict(kind="training (video classification)", framework="plain PyTorch",
                             amp="bf16 autocast", optimizer="torch.optim.AdamW", clips=B, frames=T,
                             size=[112, 112], first_conv_output_bytes_bf16=B * 64 * T * 112 * 112 * 2)

    def body():
        for s in range(2):
            x = torch.randn(B, 3, T, 112, 112, device="cuda")
            y = torch.randint(400, (B,), device="cuda")
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(m(x).float(), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(loss))
    run_oom(out, facts, body)


def s_gnn_scatter_healthy(out, facts):
    """6-layer message-passing GNN (width 128; message MLP over cat(x[src], x[dst], edge_attr[16]),
    aggregated with index_add_ into the nodes, update MLP + LayerNorm; 40 classes), fp32, AdamW, one
    random graph a step with nodes 5k-30k and 4-12 edges per node (seeded), 6 GiB allowed, up to 20 steps
    (recorded as gnn_scatter_oom; none of the steps ran out)."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    cap(6, facts)
    start_history(facts=facts)
    torch.manual_seed(0)
    rng = random.Random(11)
    d = 128

    class Layer(nn.Module):
        def __init__(s):
            super().__init__()
            s.msg = nn.Sequential(nn.Linear(2 * d + 16, d), nn.SiLU(), nn.Linear(d, d))
            s.upd = nn.Sequential(nn.Linear(2 * d, d), nn.SiLU(), nn.Linear(d, d))
            s.ln = nn.LayerNorm(d)

        def forward(s, x, src, dst, ea):
            msg = s.msg(torch.cat([x[src], x[dst], ea], -1))
            agg = torch.zeros_like(x).index_add_(0, dst, msg)
            return s.ln(x + s.upd(torch.cat([x, agg], -1)))

    class GNN(nn.Module):
        def __init__(s):
            super().__init__()
            s.inp = nn.Linear(64, d)
            s.layers = nn.ModuleList([Layer() for _ in range(6)])
            s.out = nn.Linear(d, 40)

        def forward(s, x, src, dst, ea):
            h = s.inp(x)
            for lyr in s.layers:
                h = lyr(h, src, dst, ea)
            return s.out(h)
    m = GNN().cuda()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    graphs = [(rng.randint(5000, 30000), rng.randint(4, 12)) for _ in range(20)]
    facts["settings"] = dict(kind="training (graph neural network)", framework="plain PyTorch", amp=None,
                             optimizer="torch.optim.AdamW", graphs=[(n, n * k) for n, k in graphs], width=d,
                             layers=6, aggregation="index_add_")

    def body():
        for s, (n, k) in enumerate(graphs):
            E = n * k
            x = torch.randn(n, 64, device="cuda")
            src = torch.randint(n, (E,), device="cuda")
            dst = torch.randint(n, (E,), device="cuda")
            ea = torch.randn(E, 16, device="cuda")
            y = torch.randint(40, (n,), device="cuda")
            loss = F.cross_entropy(m(x, src, dst, ea), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, nodes=n, edges=E, loss=float(loss))
    run_oom(out, facts, body)


def s_head_per_task_oom(out, facts):
    """Continual learning: a 4-layer SDPA GPT backbone (width 1024, vocab 32000) and, for every new task
    (each step), a fresh output head model.head = nn.Linear(1024, 32000) registered with
    opt.add_param_group(...): the optimizer keeps every old head and its AdamW state. bf16 autocast,
    microbatch 8 x 512, 6 GiB allowed, up to 30 tasks."""
    torch = R._torch()
    import torch.nn as nn
    cap(6, facts)
    start_history(facts=facts)
    torch.manual_seed(0)
    V = 32000
    m = R.tiny_gpt(vocab=V, L=4).cuda()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B, T = 8, 512
    facts["settings"] = dict(kind="training (continual learning, a head per task)", framework="plain PyTorch",
                             amp="bf16 autocast", optimizer="torch.optim.AdamW", microbatch=B, seq_len=T,
                             per_task="model.head = nn.Linear(1024, 32000, bias=False).cuda(); "
                                      "opt.add_param_group({'params': model.head.parameters()})",
                             head_bytes=1024 * V * 4)

    def body():
        for s in range(30):
            if s > 0:
                m.head = nn.Linear(1024, V, bias=False).cuda()
                opt.add_param_group({"params": m.head.parameters()})
            loss = R.gpt_step(m, opt, B, T, vocab=V)
            steplog(facts, step=s, task=s, param_groups=len(opt.param_groups),
                    opt_state=R.opt_state_bytes(opt), loss=float(loss))
    run_oom(out, facts, body)


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "alibi_cache_healthy": dict(fn=s_alibi_cache_healthy, group="par"),
    "unet_sampling_healthy": dict(fn=s_unet_sampling_healthy, group="par"),
    "infer_cat_preds_oom": dict(fn=s_infer_cat_preds_oom, group="solo"),
    "retain_graph_step_oom": dict(fn=s_retain_graph_step_oom, group="solo"),
    "conv3d_video_oom": dict(fn=s_conv3d_video_oom, group="solo"),
    "gnn_scatter_healthy": dict(fn=s_gnn_scatter_healthy, group="solo"),
    "head_per_task_oom": dict(fn=s_head_per_task_oom, group="solo"),
})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    R.main()
