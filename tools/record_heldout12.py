#!/usr/bin/env python3
"""A twelfth held-out set (python3 record_heldout12.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Recorded beside record_runs.py as build/h12/train.py."""
import os, sys, random
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log

ENTRIES = 20000


def s_wgan_gp_double_backward_oom(out, facts):
    """WGAN-GP at 128x128: a DCGAN-style generator and a 5-conv critic (LeakyReLU, no BatchNorm), fp32,
    Adam(lr=1e-4, betas=(0.0, 0.9)) for both, batch 512, n_critic=5. Each critic step does the real pass
    and its backward, the fake pass (on G(z) under no_grad) and its backward, then the gradient penalty:
    the critic on interpolates, torch.autograd.grad(d.sum(), xi, create_graph=True) (the double-backward
    graph), ((|g| - 1)^2).mean() * 10 and its backward. 4 GiB allowed."""
    torch = R._torch()
    import torch.nn as nn
    cap(4, facts)
    start_history(max_entries=ENTRIES, facts=facts)
    torch.manual_seed(0)
    Z, B, LAM = 128, 512, 10.0
    G = nn.Sequential(
        nn.Unflatten(1, (Z, 1, 1)),
        nn.ConvTranspose2d(Z, 1024, 4, 1, 0), nn.BatchNorm2d(1024), nn.ReLU(True),
        nn.ConvTranspose2d(1024, 512, 4, 2, 1), nn.BatchNorm2d(512), nn.ReLU(True),
        nn.ConvTranspose2d(512, 256, 4, 2, 1), nn.BatchNorm2d(256), nn.ReLU(True),
        nn.ConvTranspose2d(256, 128, 4, 2, 1), nn.BatchNorm2d(128), nn.ReLU(True),
        nn.ConvTranspose2d(128, 64, 4, 2, 1), nn.BatchNorm2d(64), nn.ReLU(True),
        nn.ConvTranspose2d(64, 3, 4, 2, 1), nn.Tanh()).cuda()
    D = nn.Sequential(
        nn.Conv2d(3, 64, 4, 2, 1), nn.LeakyReLU(0.2),
        nn.Conv2d(64, 128, 4, 2, 1), nn.LeakyReLU(0.2),
        nn.Conv2d(128, 256, 4, 2, 1), nn.LeakyReLU(0.2),
        nn.Conv2d(256, 512, 4, 2, 1), nn.LeakyReLU(0.2),
        nn.Conv2d(512, 1024, 4, 2, 1), nn.LeakyReLU(0.2),
        nn.Flatten(), nn.Linear(1024 * 4 * 4, 1)).cuda()
    model_facts(G, facts, key="generator")
    model_facts(D, facts, key="critic")
    og = torch.optim.Adam(G.parameters(), lr=1e-4, betas=(0.0, 0.9))
    od = torch.optim.Adam(D.parameters(), lr=1e-4, betas=(0.0, 0.9))
    facts["settings"] = dict(kind="training (GAN, WGAN-GP)", framework="plain PyTorch", amp="none (fp32)",
                             optimizer="torch.optim.Adam(betas=(0.0, 0.9)) x2", batch=B, image=[3, 128, 128],
                             n_critic=5, gp_lambda=LAM,
                             gradient_penalty="torch.autograd.grad(d.sum(), xi, create_graph=True)",
                             image_batch_bytes=B * 3 * 128 * 128 * 4)

    def penalty(real, fake):
        a = torch.rand(B, 1, 1, 1, device="cuda")
        xi = (a * real + (1 - a) * fake).requires_grad_(True)
        d = D(xi)
        g, = torch.autograd.grad(d.sum(), xi, create_graph=True)
        return LAM * ((g.flatten(1).norm(2, dim=1) - 1) ** 2).mean()

    def body():
        for it in range(3):
            for c in range(5):
                real = torch.rand(B, 3, 128, 128, device="cuda") * 2 - 1
                with torch.no_grad():
                    fake = G(torch.randn(B, Z, device="cuda"))
                od.zero_grad(set_to_none=True)
                d_real = D(real).mean()
                (-d_real).backward()
                d_fake = D(fake).mean()
                d_fake.backward()
                gp = penalty(real, fake)
                gp.backward()
                od.step()
                steplog(facts, step=it * 5 + c, phase="critic", w_dist=float(d_real - d_fake), gp=float(gp))
                del real, fake, gp
            og.zero_grad(set_to_none=True)
            g_loss = -D(G(torch.randn(B, Z, device="cuda"))).mean()
            g_loss.backward()
            og.step()
            steplog(facts, step=it, phase="generator", loss=float(g_loss))
    run_oom(out, facts, body)


def s_dpsgd_vmap_pergrad_oom(out, facts):
    """DP-SGD by hand with torch.func: an MLP classifier on flattened 32x32x3 images (3072-2048-2048-10,
    10.5 M params, fp32), per-sample gradients by vmap(grad(loss)) over functional_call, each sample's
    gradient clipped to norm 1.0 (the clip factors applied with einsum), summed, Gaussian noise
    (sigma 1.0) added, SGD(momentum=0.9). Poisson sampling: the batch size of each step is drawn around
    an expected 96 (seeded). 4 GiB allowed, up to 30 steps."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.func import functional_call, vmap, grad
    cap(4, facts)
    start_history(max_entries=ENTRIES, facts=facts)
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3072, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                      nn.Linear(2048, 10)).cuda()
    model_facts(m, facts)
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    rng = random.Random(12)
    sizes = [max(1, round(rng.gauss(96, 9.8))) for _ in range(30)]
    per_sample = facts["model_param_bytes"]
    facts["settings"] = dict(kind="training (DP-SGD, per-sample gradients)", framework="plain PyTorch + torch.func",
                             amp="none (fp32)", optimizer="torch.optim.SGD(momentum=0.9)",
                             per_sample_grads="vmap(grad(loss_fn), in_dims=(None, 0, 0))",
                             expected_batch=96, batch_sizes=sizes, clip_norm=1.0, noise_multiplier=1.0,
                             per_sample_grad_bytes_per_sample=per_sample)

    def loss_fn(p, x, y):
        return F.cross_entropy(functional_call(m, p, (x.unsqueeze(0),)), y.unsqueeze(0))

    ps_grad = vmap(grad(loss_fn), in_dims=(None, 0, 0))

    def body():
        for s, b in enumerate(sizes):
            x = torch.randn(b, 3072, device="cuda")
            y = torch.randint(10, (b,), device="cuda")
            params = {k: v.detach() for k, v in m.named_parameters()}
            g = ps_grad(params, x, y)
            norms = torch.stack([v.flatten(1).norm(dim=1) for v in g.values()], 1).norm(dim=1)
            factor = (1.0 / (norms + 1e-6)).clamp(max=1.0)
            for k, p in m.named_parameters():
                summed = torch.einsum("b,b...->...", factor, g[k])
                p.grad = (summed + torch.randn_like(summed)) / b
            del g
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, batch=b, mean_norm=float(norms.mean()))
    run_oom(out, facts, body)


def s_gpu_augment_photos_oom(out, facts):
    """Training torchvision resnet50 (25.6 M params) on phone photos augmented on the GPU: each batch of
    16 uint8 images (all one size per batch, sizes from 1920x1080 to 4032x3024) is moved to the GPU,
    converted to float32 / 255, brightness-jittered, normalized (mean/std), then resized to 256x256
    (bilinear, antialias) and center-cropped to 224 before the model; bf16 autocast, SGD momentum 0.9,
    channels_last. 4 GiB allowed."""
    torch = R._torch()
    import torchvision
    import torch.nn.functional as F
    cap(4, facts)
    start_history(max_entries=ENTRIES, facts=facts)
    torch.manual_seed(0)
    m = torchvision.models.resnet50(num_classes=1000).cuda().to(memory_format=torch.channels_last)
    model_facts(m, facts)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    B = 16
    shapes = [(1080, 1920), (1440, 2560), (2448, 3264), (1080, 1920), (1440, 2560), (3024, 4032)]
    mean = torch.tensor([0.485, 0.456, 0.406], device="cuda").view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225], device="cuda").view(1, 3, 1, 1)
    facts["settings"] = dict(kind="training (vision, GPU augmentation)", framework="plain PyTorch + torchvision",
                             amp="bf16 autocast", optimizer="torch.optim.SGD(momentum=0.9)", batch=B,
                             photo_sizes_hw=shapes, model_input=[3, 224, 224],
                             float_batch_bytes={f"{h}x{w}": B * 3 * h * w * 4 for h, w in shapes},
                             uint8_batch_bytes={f"{h}x{w}": B * 3 * h * w for h, w in shapes})

    def augment(u8):
        x = u8.float().div_(255)
        x = x * torch.empty(B, 1, 1, 1, device="cuda").uniform_(0.8, 1.2)
        x = x.clamp_(0, 1)
        x = (x - mean) / std
        x = F.interpolate(x, size=(256, 256), mode="bilinear", antialias=True, align_corners=False)
        return x[:, :, 16:240, 16:240].contiguous(memory_format=torch.channels_last)

    def body():
        for s, (h, w) in enumerate(shapes):
            u8 = torch.randint(0, 256, (B, 3, h, w), dtype=torch.uint8).pin_memory().cuda(non_blocking=True)
            y = torch.randint(1000, (B,), device="cuda")
            x = augment(u8)
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, photo=f"{w}x{h}", loss=float(loss))
            del u8, x
    run_oom(out, facts, body)


def s_int8_dequant_infer_healthy(out, facts):
    """Weight-only int8 inference: a 12-layer SDPA decoder (width 2048, 16 heads, MLP 8192, vocab 32000)
    whose linear layers keep int8 weights with per-row fp16 scales as buffers (no parameters) and
    dequantize each weight to fp16 in forward (qweight.to(fp16) * scale) before F.linear; fp16
    embedding; scoring 10 batches of 8 x 1024 tokens under torch.inference_mode(); no cap."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    start_history(max_entries=ENTRIES, facts=facts)
    torch.manual_seed(0)
    H = torch.float16

    class QLinear(nn.Module):
        def __init__(s, i, o):
            super().__init__()
            s.register_buffer("qweight", torch.randint(-127, 128, (o, i), dtype=torch.int8))
            s.register_buffer("scale", torch.rand(o, dtype=H) * 0.002)
            s.register_buffer("bias", torch.zeros(o, dtype=H))

        def forward(s, x):
            w = s.qweight.to(x.dtype) * s.scale[:, None]
            return F.linear(x, w, s.bias)

    class Block(nn.Module):
        def __init__(s, d, h):
            super().__init__()
            s.h = h
            s.ln1, s.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            s.qkv, s.proj = QLinear(d, 3 * d), QLinear(d, d)
            s.fc1, s.fc2 = QLinear(d, 4 * d), QLinear(4 * d, d)

        def forward(s, x):
            B, T, D = x.shape
            q, k, v = s.qkv(s.ln1(x)).view(B, T, 3, s.h, D // s.h).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + s.proj(a.transpose(1, 2).reshape(B, T, D))
            return x + s.fc2(F.gelu(s.fc1(s.ln2(x))))

    class QLM(nn.Module):
        def __init__(s, V=32000, d=2048, h=16, L=12):
            super().__init__()
            s.emb = nn.Embedding(V, d)
            s.blocks = nn.ModuleList([Block(d, h) for _ in range(L)])
            s.ln = nn.LayerNorm(d)
            s.head = QLinear(d, V)

        def forward(s, idx):
            x = s.emb(idx)
            for b in s.blocks:
                x = b(x)
            return s.head(s.ln(x))

    m = QLM().cuda().half().eval()
    model_facts(m, facts)
    B, T, V = 8, 1024, 32000
    facts["settings"] = dict(kind="inference (weight-only int8, scoring)", framework="plain PyTorch",
                             dtype="int8 weights, fp16 compute", grad_mode="torch.inference_mode()",
                             batch=B, seq_len=T, vocab=V, batches=10,
                             int8_weight_bytes=sum(b.numel() for n, b in m.named_buffers() if n.endswith("qweight")),
                             largest_dequant_fp16_bytes=4 * 2048 * 2048 * 2, logits_fp16_bytes=B * T * V * 2)
    with torch.inference_mode():
        for s in range(10):
            idx = torch.randint(V, (B, T + 1), device="cuda")
            logits = m(idx[:, :-1])
            nll = F.cross_entropy(logits.float().reshape(-1, V), idx[:, 1:].reshape(-1))
            steplog(facts, step=s, nll=float(nll))
            del logits
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


def s_jit_frozen_resnet_infer_healthy(out, facts):
    """Deployment-style TorchScript inference: torchvision resnet50 in eval(), fp16, channels_last,
    torch.jit.freeze(torch.jit.script(model)) (conv-bn folded into frozen constants), 16 batches of
    64 x 3 x 224 x 224 under torch.no_grad() (the profiling executor optimizes after the first runs),
    top-5 kept on the CPU; no cap."""
    torch = R._torch()
    import torchvision
    start_history(max_entries=ENTRIES, facts=facts)
    torch.manual_seed(0)
    m = torchvision.models.resnet50(num_classes=1000).cuda().half().eval().to(memory_format=torch.channels_last)
    model_facts(m, facts)
    sm = torch.jit.freeze(torch.jit.script(m))
    del m
    B = 64
    facts["settings"] = dict(kind="inference (TorchScript, frozen)", framework="plain PyTorch + torchvision",
                             dtype="fp16", grad_mode="torch.no_grad()", batch=B, batches=16,
                             script="torch.jit.freeze(torch.jit.script(model))",
                             input_bytes=B * 3 * 224 * 224 * 2)
    tops = []
    with torch.no_grad():
        for s in range(16):
            x = torch.randn(B, 3, 224, 224, device="cuda", dtype=torch.float16).to(memory_format=torch.channels_last)
            top = sm(x).topk(5, dim=1).indices.cpu()
            tops.append(top)
            steplog(facts, step=s, top5=tuple(top.shape))
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "int8_dequant_infer_healthy": dict(fn=s_int8_dequant_infer_healthy, group="par"),
    "jit_frozen_resnet_infer_healthy": dict(fn=s_jit_frozen_resnet_infer_healthy, group="par"),
    "wgan_gp_double_backward_oom": dict(fn=s_wgan_gp_double_backward_oom, group="solo"),
    "dpsgd_vmap_pergrad_oom": dict(fn=s_dpsgd_vmap_pergrad_oom, group="solo"),
    "gpu_augment_photos_oom": dict(fn=s_gpu_augment_photos_oom, group="solo"),
})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    R.main()
