#!/usr/bin/env python3
"""A thirty-seventh held-out set (python3 record_heldout37.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Structure as set 36 (tools/record_heldout36.py): every corpus run is "solo"
(alone on the GPU); the <run>__<variant> scenarios are the same run with the fix a report proposes, or for the
healthy run the alternative its settings compare with (H37_VARIANT), whose results `--collect OUTDIR` writes
into each run's facts.json as fix_probes (record_runs.collect_fix_probes). The OOM observer dumps at every
out-of-memory failure (the same path each time): the snapshot is the last failure's, the one raised.
facts["settings"] says, beside the run's settings and key byte counts, the right first advice ("right_advice")
and what a report must not say ("report_must_not_say"), decided from how the run is built."""
import math, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, cap, start_history, run_oom, steplog, model_facts


R.attach_oom = R.attach_oom_every  # run_oom attaches this one
VARIANT = os.environ.get("H37_VARIANT", "")


# ---------------------------------------------------------------- 1. Transformer-XL memory carried with its graph

TX_V, TX_D, TX_H, TX_L, TX_FF, TX_B, TX_T, TX_M = 8192, 512, 8, 6, 2048, 8, 128, 128
TX_STEPS, TX_LR, TX_CLIP, TX_CAP = 40, 1.0, 0.25, 3.0


def txl_saved_per_layer_bytes():
    """Estimated bytes one layer saves for its backward (fp32): the cat [mem, h], the copies that the 4-D matmuls
    make of q, k^T and v, the softmax output, the attention output's reshape copy, the two residual sums and
    LayerNorm outputs, the ReLU output of the feed-forward."""
    N, K = TX_B * TX_T, TX_M + TX_T
    return 4 * (3 * TX_B * K * TX_D + 6 * N * TX_D + TX_B * TX_H * TX_T * K + N * TX_FF)


def s_transformer_xl_mems_not_detached_leak_oom(out, facts):
    """A Transformer-XL-style language model (segment-level recurrence), plain PyTorch, fp32, no autocast, trained
    as pytorch/examples' word_language_model trains (a token stream batchified into 8 columns, consecutive
    segments of 128 tokens, model.zero_grad(), clip_grad_norm_(0.25), the manual SGD update p.data.add_(p.grad,
    alpha=-lr)): 6 post-LN layers of width 512, 8 heads, feed-forward 2048, ReLU, no dropout, memory length 128
    (each layer attends to [its memory of the previous segment's 128 hidden states, the current 128], ALiBi-style
    relative distance bias with a causal mask), vocab 8192 (untied head); 27.31 M params (104.2 MiB fp32, grads
    104.2 MiB, no optimizer state). The bug: the user's _update_mems builds the next memory as
    torch.cat([mem, h], 1)[:, -128:] without torch.no_grad() / .detach() (Transformer-XL's has it), so every
    memory carries the autograd graph of its segment and, through it, of all earlier ones; the second segment's
    backward raised "Trying to backward through the graph a second time", so the user passed
    loss.backward(retain_graph=True) (the manual .data update bumps no version counter, so no in-place error
    follows). Every backward then walks all previous segments again and keeps their saved tensors: per layer
    ~40 MiB (the cat [mem, h] 4 MiB, q / k^T / v copies 2 + 4 + 4 MiB, the softmax 8 x 8 x 128 x 256 fp32 8 MiB,
    the attention output copy, residual sums and LayerNorm outputs 2 MiB each, the ReLU output 8 MiB), so each
    segment leaves ~5 x 40 + 6 x 4 (the memories' own cats) ~ 0.22 GiB behind (layer 6's and the head's saved
    tensors are only reachable from the loss and go with it). Allocated at step ends grows ~0.22 GiB a step from
    ~0.4 GiB (weights, grads, the cuBLAS workspace, the last step's loss graph); one segment's forward and
    backward add ~0.35 GiB (activations 0.24 GiB, logits 1024 x 8192 fp32 32 MiB and their log-softmax), so
    with 3 GiB allowed it dies near segment 11-12 of 40 (anywhere from segment ~6 to ~23 if the per-segment
    estimate is off by 2x), in a forward or a backward. Probe: the memories detached (__detach: _update_mems's
    new memories .detach()ed and retain_graph dropped: ~0.7 GiB at the peak, flat, all 40 segments)."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    cap(TX_CAP, facts)
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    facts["variant"] = VARIANT or None
    dh = TX_D // TX_H

    class MemAttention(nn.Module):
        def __init__(s):
            super().__init__()
            s.q = nn.Linear(TX_D, TX_D)
            s.kv = nn.Linear(TX_D, 2 * TX_D)
            s.o = nn.Linear(TX_D, TX_D)
            s.scale = 1.0 / math.sqrt(dh)

        def forward(s, h, mem, bias):
            B, T, D = h.shape
            c = torch.cat([mem, h], 1)                                         # (B, M + T, D)
            K = c.shape[1]
            q = s.q(h).view(B, T, TX_H, dh).transpose(1, 2)                   # (B, H, T, dh)
            k, v = s.kv(c).view(B, K, 2, TX_H, dh).permute(2, 0, 3, 1, 4)     # (B, H, K, dh) each
            att = torch.matmul(q, k.transpose(-1, -2)) * s.scale + bias[:, :, :, -K:]
            att = att.softmax(-1)
            o = torch.matmul(att, v).transpose(1, 2).reshape(B, T, D)
            return s.o(o)

    class XLLayer(nn.Module):
        def __init__(s):
            super().__init__()
            s.attn = MemAttention()
            s.ln1, s.ln2 = nn.LayerNorm(TX_D), nn.LayerNorm(TX_D)
            s.ff1, s.ff2 = nn.Linear(TX_D, TX_FF), nn.Linear(TX_FF, TX_D)

        def forward(s, h, mem, bias):
            h = s.ln1(h + s.attn(h, mem, bias))
            return s.ln2(h + s.ff2(F.relu(s.ff1(h))))

    class MemTransformerLM(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(TX_V, TX_D)
            s.layers = nn.ModuleList([XLLayer() for _ in range(TX_L)])
            s.head = nn.Linear(TX_D, TX_V)
            qpos = torch.arange(TX_T)[:, None] + TX_M                          # query positions in [mem, seg]
            kpos = torch.arange(TX_M + TX_T)[None, :]
            slopes = 2.0 ** (-8.0 * torch.arange(1, TX_H + 1, dtype=torch.float32) / TX_H)
            bias = -slopes[:, None, None] * (qpos - kpos).clamp_min(0).float()
            bias = bias.masked_fill(kpos > qpos, float("-inf"))
            s.register_buffer("bias", bias[None], persistent=False)            # (1, H, T, M + T)

        def init_mems(s, B):
            return [torch.empty(B, 0, TX_D, device=s.bias.device) for _ in range(TX_L)]

        def _update_mems(s, hids, mems):
            # Transformer-XL does this under torch.no_grad(); the user's version keeps each segment's graph
            new = [torch.cat([m, h], 1)[:, -TX_M:] for m, h in zip(mems, hids)]
            return [n.detach() for n in new] if VARIANT == "detach" else new

        def forward(s, data, mems):
            h = s.emb(data) * math.sqrt(TX_D)
            hids = []
            for layer, m in zip(s.layers, mems):
                hids.append(h)
                h = layer(h, m, s.bias)
            return s.head(h), s._update_mems(hids, mems)

    model = MemTransformerLM().cuda().train()
    model_facts(model, facts)
    criterion = nn.CrossEntropyLoss()
    g = torch.Generator(device="cuda").manual_seed(0)
    stream = torch.randint(TX_V, (TX_B, TX_STEPS * TX_T + 1), device="cuda", generator=g)   # batchify'd corpus
    per_layer = txl_saved_per_layer_bytes()
    retained = (TX_L - 1) * per_layer + TX_L * TX_B * (TX_M + TX_T) * TX_D * 4 + TX_B * TX_T * TX_D * 4
    P = sum(p.numel() for p in model.parameters())
    facts["settings"] = dict(
        kind="training (Transformer-XL-style LM, segment recurrence)", framework="plain PyTorch (word_language_"
        "model-style loop, manual SGD via p.data.add_)", amp=None, dtype="float32", optimizer="manual SGD "
        "(p.data.add_(p.grad, alpha=-lr)), clip_grad_norm_ 0.25", layers=TX_L, d_model=TX_D, heads=TX_H,
        d_ff=TX_FF, vocab=TX_V, batch=TX_B, segment_len=TX_T, mem_len=TX_M, steps_planned=TX_STEPS,
        mems_detached=VARIANT == "detach", retain_graph=VARIANT != "detach", param_bytes=P * 4, grad_bytes=P * 4,
        saved_per_layer_bytes_est=per_layer, retained_per_segment_bytes_est=retained,
        logits_bytes=TX_B * TX_T * TX_V * 4, cap_bytes=int(TX_CAP * GiB),
        right_advice="a leak / growth across steps: the memories carried to the next segment are not detached "
                     "(_update_mems without torch.no_grad / .detach), so each keeps its segment's autograd graph "
                     "and, chained, every previous segment's; with loss.backward(retain_graph=True) their saved "
                     "activations (~0.22 GiB a segment) are never freed and each backward walks them all: "
                     "allocated at step ends rises ~linearly until the OOM near segment 11-12 of 40. First: "
                     "detach the memory (new_mems under torch.no_grad() or .detach(), like repackage_hidden) and "
                     "drop retain_graph=True (fix_probes __detach: all 40 segments, flat at ~0.7 GiB)",
        report_must_not_say="a smaller batch or shorter segments / memory as the fix; gradient / activation "
                            "checkpointing; fragmentation / expandable segments; optimizer state (there is none: "
                            "manual SGD); the logits or vocabulary as the cause; a one-step capacity problem; "
                            "no_grad for the training forward; FSDP or offload")

    def body():
        mems = model.init_mems(TX_B)
        for s in range(TX_STEPS):
            data = stream[:, s * TX_T:(s + 1) * TX_T]
            targets = stream[:, s * TX_T + 1:(s + 1) * TX_T + 1]
            model.zero_grad()
            output, mems = model(data, mems)
            loss = criterion(output.view(-1, TX_V), targets.reshape(-1))
            steplog(facts, key="phases", step=s, phase="forward")
            loss.backward(retain_graph=VARIANT != "detach")
            torch.nn.utils.clip_grad_norm_(model.parameters(), TX_CLIP)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-TX_LR)
            steplog(facts, step=s, loss=float(loss), mem_requires_grad=bool(mems[0].requires_grad))
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 2. im2col convolution (F.unfold) at high resolution

UF_B, UF_C, UF_HW, UF_K, UF_D, UF_STEPS, UF_CAP = 2, 64, 512, 3, 8, 10, 2.0


def s_unfold_patches_highres_oom(out, facts):
    """A DnCNN-style residual denoiser (plain PyTorch, fp32, no autocast, Adam 1e-4) whose convolutions are the user's
    own Im2colConv2d (a weight (out, in, 3, 3) and bias, forward = F.unfold(x, 3, padding=1), the weight viewed as
    (1, out, in * 9) and expanded over the batch, torch.bmm with the columns, + bias, viewed back to (B, out, H, W):
    convolution as unfold + matrix multiplication, the way torch.nn.Unfold's documentation shows it): 8 layers, 3 ->
    64, 6 x 64 -> 64, 64 -> 3, ReLU between, output = noisy - net(noisy), MSE to the clean image; 0.225 M params
    (0.86 MiB). Training on high-resolution crops, batches of 2 x 3 x 512 x 512 (noisy = clean + 0.1 noise), 10
    steps planned; 2 GiB allowed. A 64-channel feature map is 2 x 64 x 512 x 512 fp32 = 128 MiB; F.unfold makes it
    (2, 576, 262144), 9 x = 1152 MiB (1.125 GiB), and torch.bmm saves it for the weight gradient. Step 0's forward:
    the 3-channel layer's columns 54 MiB and its ReLU output 128 MiB are saved (~0.23 GiB with the images and the
    cuBLAS workspace); the second layer's unfold (1.125 GiB) fits (~1.36 GiB), its bmm output, bias sum and ReLU
    output bring ~1.48 GiB allocated; the third layer's F.unfold asks another 1152 MiB: ~2.6 GiB > 2, so it dies
    there, in step 0's forward, the failing request the unfold's output with the previous unfold's output the
    largest live block. Probe: the same weights through F.conv2d (__conv: cuDNN, no materialised patches; the 7 ReLU
    outputs of 128 MiB saved, ~0.9 GiB after the forward, ~1.3 GiB at the backward's peak, all 10 steps)."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    cap(UF_CAP, facts)
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    facts["variant"] = VARIANT or None

    class Im2colConv2d(nn.Module):
        def __init__(s, cin, cout, k):
            super().__init__()
            s.cin, s.cout, s.k = cin, cout, k
            s.weight = nn.Parameter(torch.empty(cout, cin, k, k))
            s.bias = nn.Parameter(torch.zeros(cout))
            nn.init.kaiming_normal_(s.weight, nonlinearity="relu")

        def forward(s, x):
            if VARIANT == "conv":
                return F.conv2d(x, s.weight, s.bias, padding=s.k // 2)
            B, C, H, W = x.shape
            cols = F.unfold(x, s.k, padding=s.k // 2)                         # (B, C * k * k, H * W)
            y = torch.bmm(s.weight.view(1, s.cout, -1).expand(B, -1, -1), cols)   # (B, out, H * W)
            return (y + s.bias.view(1, -1, 1)).view(B, s.cout, H, W)

    class DnCNN(nn.Module):
        def __init__(s):
            super().__init__()
            layers = [Im2colConv2d(3, UF_C, UF_K), nn.ReLU()]
            for _ in range(UF_D - 2):
                layers += [Im2colConv2d(UF_C, UF_C, UF_K), nn.ReLU()]
            layers.append(Im2colConv2d(UF_C, 3, UF_K))
            s.net = nn.Sequential(*layers)

        def forward(s, x):
            return x - s.net(x)

    m = DnCNN().cuda().train()
    model_facts(m, facts)
    opt = torch.optim.Adam(m.parameters(), lr=1e-4)
    fmap = UF_B * UF_C * UF_HW * UF_HW * 4
    facts["settings"] = dict(
        kind="training (image denoiser, hand-written im2col convolution)", framework="plain PyTorch (F.unfold + "
        "matmul)" if VARIANT != "conv" else "plain PyTorch (F.conv2d, the same weights)", amp=None,
        dtype="float32", optimizer="torch.optim.Adam", conv_impl="F.conv2d" if VARIANT == "conv" else
        "F.unfold + batched matmul", layers=UF_D, channels=UF_C, kernel=UF_K, batch=UF_B,
        image=[3, UF_HW, UF_HW], steps_planned=UF_STEPS, feature_map_bytes=fmap,
        unfold_bytes=fmap * UF_K * UF_K, first_layer_unfold_bytes=UF_B * 3 * UF_K * UF_K * UF_HW * UF_HW * 4,
        cap_bytes=int(UF_CAP * GiB),
        right_advice="capacity at one operation, the hand-written convolution's F.unfold (im2col): a 64-channel "
                     "512 x 512 feature map of the batch is 128 MiB fp32 and its unfolded patches 9 x that, "
                     "1.125 GiB, saved by the matmul for the backward; step 0's forward dies asking the third "
                     "layer's unfold (1.125 GiB) with the second's (1.125 GiB) held, against 0.86 MiB of weights. "
                     "First: use nn.Conv2d / F.conv2d with the same weights (no materialised patches; fix_probes "
                     "__conv runs all 10 steps at ~1.3 GiB), or unfold in tiles / smaller crops",
        report_must_not_say="a leak or growth (it dies in step 0's forward); fragmentation / expandable segments; "
                            "optimizer-state advice (Adam's state is 1.7 MiB) or 8-bit optimizers, FSDP, offload; "
                            "no_grad (this is training); attention advice")
    g = torch.Generator(device="cuda").manual_seed(0)

    def body():
        for s in range(UF_STEPS):
            clean = torch.rand(UF_B, 3, UF_HW, UF_HW, device="cuda", generator=g)
            noisy = clean + 0.1 * torch.randn(clean.shape, device="cuda", generator=g)
            loss = F.mse_loss(m(noisy), clean)
            steplog(facts, key="phases", step=s, phase="forward")
            loss.backward()
            steplog(facts, key="phases", step=s, phase="backward")
            opt.step()
            opt.zero_grad(set_to_none=True)
            lv = float(loss)
            del clean, noisy, loss
            steplog(facts, step=s, loss=lv, optimizer_state_bytes=R.opt_state_bytes(opt))
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 3. a Shampoo optimizer with full preconditioners

SH_V, SH_DM, SH_H, SH_L, SH_B, SH_T, SH_STEPS, SH_FREQ, SH_CAP = 16384, 512, 8, 4, 8, 256, 20, 10, 3.0
SH_BLOCK = 512 if VARIANT == "blocked" else None


def split_dims(n, b):
    """A dimension of n split into blocks of at most b (the whole dimension when b is None)."""
    return [n] if b is None else [min(b, n - i) for i in range(0, n, b)]


def shampoo_state_bytes(shapes, b):
    """Shampoo's state for parameters of these shapes, blocks of at most b: per block, per dimension d, a d x d
    statistic and its d x d inverse root (fp32), plus a momentum buffer the size of the parameter."""
    n = 0
    for sh in shapes:
        blocks = [(a,) for a in split_dims(sh[0], b)] if len(sh) == 1 else \
            [(a, c) for a in split_dims(sh[0], b) for c in split_dims(sh[1], b)]
        n += sum(2 * sum(d * d for d in bl) * 4 for bl in blocks) + math.prod(sh) * 4
    return n


def s_shampoo_preconditioner_state_oom(out, facts):
    """record_runs.tiny_gpt (4 SDPA blocks of width 512, 8 heads, vocab 16384, untied head; 29.4 M params, 112
    MiB fp32, grads 112 MiB) under bf16 autocast, batches of 8 x 256 tokens, 20 steps planned, trained with a
    Shampoo optimizer written in plain PyTorch in the style of torch-optimizer's Shampoo: for every parameter
    and every dimension d of it a d x d fp32 statistic (epsilon * I, plus G G^T / G^T G each step) and its d x d
    inverse root (-1/4 for matrices, -1/2 for vectors) recomputed every 10 steps (step 0 included) with
    torch.linalg.eigh, the update L^-1/4 G R^-1/4 grafted to the gradient's norm, momentum 0.9; 3 GiB allowed.
    The token embedding (16384, 512) is the first parameter: its left statistic and inverse root are 16384 x
    16384 fp32, 1 GiB each (the untied head another 2 GiB; all statistics and roots ~4.7 GiB with the momentum,
    ~43 x the weights). Step 0's backward finishes (~0.25 GiB of weights, grads and workspace left); the
    optimizer's first step creates the embedding's state: epsilon * torch.eye(16384) (the eye and the product,
    2 GiB for a moment, then 1 GiB) and the zero inverse root (1 GiB), ~2.3 GiB allocated; then
    L.add_(G @ G.T) asks 1 GiB for the product: ~3.3 GiB > 3, so it dies there, in step 0's optimizer step
    (the eigh of a 16384 x 16384 matrix and its workspace would come next). Probe: block-diagonal
    preconditioners of at most 512 x 512 as distributed Shampoo's max_preconditioner_dim does (__blocked: every
    dimension split in blocks of 512, each block its own statistics; state ~0.65 GiB, ~6 x the weights, ~1.6 GiB
    at the peak, all 20 steps; 278 eighs of at most 512 x 512 at steps 0 and 10)."""
    torch = R._torch()
    import torch.nn.functional as F
    cap(SH_CAP, facts)
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    facts["variant"] = VARIANT or None

    def blocks(t, b):
        if b is None:
            return [t]
        if t.dim() == 1:
            return list(t.split(b))
        return [c for r in t.split(b, 0) for c in r.split(b, 1)]

    def inv_root_(out_, M, power, eps):
        try:
            vals, vecs = torch.linalg.eigh(M)
        except torch.linalg.LinAlgError:
            return                     # keep the previous root, as distributed Shampoo does
        out_.copy_((vecs * vals.clamp_min(eps).pow(power)) @ vecs.T)

    class Shampoo(torch.optim.Optimizer):
        def __init__(s, params, lr=0.02, momentum=0.9, epsilon=1e-4, update_freq=10, block_size=None):
            super().__init__(params, dict(lr=lr, momentum=momentum, epsilon=epsilon, update_freq=update_freq,
                                          block_size=block_size))

        @torch.no_grad()
        def step(s, closure=None):
            for group in s.param_groups:
                b, eps = group["block_size"], group["epsilon"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad
                    state = s.state[p]
                    if len(state) == 0:
                        state["step"] = 0
                        state["momentum_buffer"] = torch.zeros_like(p)
                        # per block, per dimension d of the block: a d x d statistic and its inverse root
                        state["precond"] = [eps * torch.eye(d, device=p.device) for gb in blocks(grad, b)
                                            for d in gb.shape]
                        state["inv_precond"] = [torch.zeros(d, d, device=p.device) for gb in blocks(grad, b)
                                                for d in gb.shape]
                    pre, inv = state["precond"], state["inv_precond"]
                    update = torch.empty_like(p)
                    root_now = state["step"] % group["update_freq"] == 0
                    i = 0
                    for gb, ub in zip(blocks(grad, b), blocks(update, b)):
                        if gb.dim() == 1:
                            pre[i].add_(torch.outer(gb, gb))
                            if root_now:
                                inv_root_(inv[i], pre[i], -0.5, eps)
                            ub.copy_(inv[i] @ gb)
                            i += 1
                        else:
                            pre[i].add_(gb @ gb.T)
                            pre[i + 1].add_(gb.T @ gb)
                            if root_now:
                                inv_root_(inv[i], pre[i], -0.25, eps)
                                inv_root_(inv[i + 1], pre[i + 1], -0.25, eps)
                            ub.copy_(inv[i] @ gb @ inv[i + 1])
                            i += 2
                    update.mul_(grad.norm() / update.norm().clamp_min(1e-16))     # grafting: SGD's step size
                    state["momentum_buffer"].mul_(group["momentum"]).add_(update)
                    p.add_(state["momentum_buffer"], alpha=-group["lr"])
                    state["step"] += 1

    m = R.tiny_gpt(vocab=SH_V, d=SH_DM, h=SH_H, L=SH_L).cuda().train()
    model_facts(m, facts)
    opt = Shampoo(m.parameters(), lr=0.02, momentum=0.9, epsilon=1e-4, update_freq=SH_FREQ, block_size=SH_BLOCK)
    shapes = [tuple(p.shape) for p in m.parameters()]
    P = sum(p.numel() for p in m.parameters())
    full, blocked = shampoo_state_bytes(shapes, None), shampoo_state_bytes(shapes, 512)
    facts["settings"] = dict(
        kind="training (transformer LM, Shampoo optimizer)", framework="plain PyTorch (a torch-optimizer-style "
        "Shampoo, eigh inverse roots)", amp="bf16 autocast", dtype="float32 weights", optimizer="Shampoo "
        "(full-matrix preconditioners)" if SH_BLOCK is None else "Shampoo (block-diagonal, blocks of 512)",
        max_preconditioner_dim=SH_BLOCK, update_freq=SH_FREQ, momentum=0.9, grafting="SGD norm", vocab=SH_V,
        d_model=SH_DM, layers=SH_L, batch=SH_B, seq_len=SH_T, steps_planned=SH_STEPS, params=P,
        param_bytes=P * 4, grad_bytes=P * 4, embedding_left_precond_bytes=SH_V * SH_V * 4,
        shampoo_state_full_bytes=full, shampoo_state_blocked512_bytes=blocked,
        state_over_weights_full=round(full / (P * 4), 1), state_over_weights_blocked=round(blocked / (P * 4), 1),
        adam_state_bytes_would_be=2 * P * 4, cap_bytes=int(SH_CAP * GiB),
        right_advice="capacity from optimizer state: the full-matrix Shampoo preconditioners, per parameter a d x d "
                     "statistic and inverse root for every dimension d: the (16384, 512) embedding's and the "
                     "head's left ones are 16384 x 16384 fp32 (1 GiB each, 4 GiB for the two), the state ~43 x "
                     "the 112 MiB of weights; step 0's optimizer step dies creating / updating the embedding's "
                     "(G @ G.T, 1 GiB) after a healthy forward and backward. First: block-diagonal "
                     "preconditioners (max_preconditioner_dim 512, as distributed Shampoo: fix_probes __blocked, "
                     "~0.65 GiB of state, all steps), a smaller maximum preconditioner dimension, or Adam / "
                     "diagonal preconditioning for the embedding and head",
        report_must_not_say="8-bit Adam or Adam-state arithmetic as if this were Adam's state; activation / "
                            "gradient checkpointing; a smaller batch or shorter sequences as the first fix "
                            "(activations are ~0.5 GiB and freed before the step); a leak or growth (it dies in "
                            "step 0); fragmentation / expandable segments first; no_grad")
    g = torch.Generator(device="cuda").manual_seed(0)

    def body():
        for s in range(SH_STEPS):
            x = torch.randint(SH_V, (SH_B, SH_T + 1), device="cuda", generator=g)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = m(x[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, SH_V), x[:, 1:].reshape(-1))
            del logits
            steplog(facts, key="phases", step=s, phase="forward")
            loss.backward()
            steplog(facts, key="phases", step=s, phase="backward")
            opt.step()
            opt.zero_grad(set_to_none=True)
            lv = float(loss)
            del x, loss
            steplog(facts, step=s, loss=lv, optimizer_state_bytes=R.opt_state_bytes(opt))
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 4. GPU spectrograms for an audio CNN (healthy)

AU_SR, AU_SEC, AU_B, AU_NFFT, AU_WIN, AU_HOP, AU_MELS, AU_CLASSES, AU_STEPS = 16000, 4, 32, 512, 400, 160, 64, 35, 40
AU_FMASK, AU_TMASK = 8, 40
AU_N = AU_SR * AU_SEC
AU_FRAMES = AU_N // AU_HOP + 1


def mel_filterbank(n_freqs, n_mels, sr, device):
    """HTK-mel triangular filters, (n_freqs, n_mels), as torchaudio.functional.melscale_fbanks computes them."""
    torch = R._torch()
    hz2mel = lambda f: 2595.0 * math.log10(1.0 + f / 700.0)
    mels = torch.linspace(hz2mel(0.0), hz2mel(sr / 2), n_mels + 2, device=device)
    hz = 700.0 * (10.0 ** (mels / 2595.0) - 1.0)
    freqs = torch.linspace(0.0, sr / 2, n_freqs, device=device)
    lower, center, upper = hz[:-2, None], hz[1:-1, None], hz[2:, None]
    up = (freqs[None] - lower) / (center - lower)
    down = (upper - freqs[None]) / (upper - center)
    return torch.clamp(torch.minimum(up, down), min=0.0).T.contiguous()


def s_stft_audio_augment_healthy(out, facts):
    """A keyword-spotting-style audio classifier trained on a fixed batch (an overfit check), plain PyTorch, the
    features computed on the GPU every step under torch.no_grad() (autocast off): 32 clips of 4 s at 16 kHz (64000
    samples, 7.8 MiB fp32), torch.stft(n_fft 512, win_length 400 with a Hann window, hop 160, center, reflect
    padding, return_complex=True) -> (32, 257, 401) complex64 (25.2 MiB; the framed, windowed input 32 x 401 x 512
    fp32 25 MiB inside it), power |X|^2 (12.6 MiB), a 64-band mel matrix (257 x 64) matmul -> (32, 64, 401), log,
    per-clip normalisation, SpecAugment (2 frequency masks of up to 8 bands, 2 time masks of up to 40 frames,
    masked_fill); then a 4-block CNN (two 3x3 conv + BatchNorm + ReLU(inplace) each, max-pool 2; channels 32, 64,
    128, 256), global average pool, dropout, Linear to 35 classes; 1.18 M params (4.5 MiB), AdamW 1e-3, bf16
    autocast for the model, 40 steps, no cap. Bytes: the first block's bf16 maps are 32 x 32 x 64 x 401 x 2 = 50 MiB
    each (conv outputs, BN outputs, the pool's int64 indices 50 MiB), the block ~0.25 GiB, the later ones ~0.13,
    0.07, 0.03 GiB: ~0.5 GiB of activations per step, freed by the backward; the feature buffers (< 0.1 GiB) are
    freed before the forward. Allocated at step ends flat at a few tens of MiB (weights, AdamW's 9 MiB, the fixed
    waves 7.8 MiB) from step 0 on; a sawtooth to ~0.8 GiB each step. Healthy. Probe (a comparison, not a fix): the
    features computed on the CPU and copied to the GPU (__cpu_features: no stft buffers on the GPU, the same CNN
    sawtooth)."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    facts["variant"] = VARIANT or None
    cpu_feats = VARIANT == "cpu_features"
    fdev = "cpu" if cpu_feats else "cuda"

    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                             nn.ReLU(inplace=True), nn.Conv2d(cout, cout, 3, padding=1, bias=False),
                             nn.BatchNorm2d(cout), nn.ReLU(inplace=True), nn.MaxPool2d(2))

    m = nn.Sequential(block(1, 32), block(32, 64), block(64, 128), block(128, 256), nn.AdaptiveAvgPool2d(1),
                      nn.Flatten(), nn.Dropout(0.2), nn.Linear(256, AU_CLASSES)).cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    window = torch.hann_window(AU_WIN, device=fdev)
    fb = mel_filterbank(AU_NFFT // 2 + 1, AU_MELS, AU_SR, fdev)
    gw = torch.Generator(device=fdev).manual_seed(0)
    labels = torch.arange(AU_B) % AU_CLASSES
    t = torch.arange(AU_N, device=fdev) / AU_SR
    f0 = (150.0 + 60.0 * labels.to(fdev).float())[:, None]
    waves = 0.5 * torch.sin(2 * math.pi * f0 * t) + 0.25 * torch.sin(4 * math.pi * f0 * t) \
        + 0.1 * torch.randn(AU_B, AU_N, device=fdev, generator=gw)               # the fixed batch
    labels = labels.cuda()

    def spec_augment(x):
        B, M, T = x.shape
        fr = torch.arange(M, device=x.device).view(1, M, 1)
        tr = torch.arange(T, device=x.device).view(1, 1, T)
        for _ in range(2):
            w = torch.randint(0, AU_FMASK + 1, (B, 1, 1), device=x.device, generator=gw)
            s0 = (torch.rand(B, 1, 1, device=x.device, generator=gw) * (M - w)).long()
            x = x.masked_fill((fr >= s0) & (fr < s0 + w), 0.0)
        for _ in range(2):
            w = torch.randint(0, AU_TMASK + 1, (B, 1, 1), device=x.device, generator=gw)
            s0 = (torch.rand(B, 1, 1, device=x.device, generator=gw) * (T - w)).long()
            x = x.masked_fill((tr >= s0) & (tr < s0 + w), 0.0)
        return x

    @torch.no_grad()
    def features(wave):
        spec = torch.stft(wave, AU_NFFT, hop_length=AU_HOP, win_length=AU_WIN, window=window, center=True,
                          pad_mode="reflect", return_complex=True)               # (B, 257, frames) complex64
        power = spec.abs().pow(2)
        mel = torch.matmul(fb.T, power)                                           # (B, n_mels, frames)
        logmel = torch.log(mel + 1e-6)
        logmel = (logmel - logmel.mean((1, 2), keepdim=True)) / (logmel.std((1, 2), keepdim=True) + 1e-5)
        return spec_augment(logmel)

    nf = AU_NFFT // 2 + 1
    facts["settings"] = dict(
        kind="training (audio classifier, on-the-fly log-mel + SpecAugment)", framework="plain PyTorch",
        amp="bf16 autocast (model only)", dtype="float32 weights", optimizer="torch.optim.AdamW",
        features_on="cpu, copied to the GPU" if cpu_feats else "gpu", sample_rate=AU_SR, clip_seconds=AU_SEC,
        batch=AU_B, n_fft=AU_NFFT, win_length=AU_WIN, hop=AU_HOP, n_mels=AU_MELS, frames=AU_FRAMES,
        classes=AU_CLASSES, steps=AU_STEPS, fixed_batch=True, wave_bytes=AU_B * AU_N * 4,
        stft_complex_bytes=AU_B * nf * AU_FRAMES * 8, power_bytes=AU_B * nf * AU_FRAMES * 4,
        framed_bytes=AU_B * AU_FRAMES * AU_NFFT * 4, logmel_bytes=AU_B * AU_MELS * AU_FRAMES * 4,
        first_block_map_bytes=AU_B * 32 * AU_MELS * AU_FRAMES * 2, memory_fraction=None, alloc_conf=None,
        right_advice="healthy: nothing urgent; the GPU spectrograms (stft complex64 25 MiB, power, log-mel 3 MiB, "
                     "SpecAugment masks) are made under no_grad and freed each step, the CNN's bf16 activations "
                     "(~0.5 GiB) rise and fall with each forward / backward; allocated at step ends flat from "
                     "step 0 (weights, AdamW state 9 MiB, the fixed waves), a steady sawtooth to ~0.8 GiB, no "
                     "cap. fix_probes __cpu_features (features on the CPU) shows the same CNN sawtooth",
        report_must_not_say="an OOM or OOM advice; a leak or growth; warning-level fragmentation; the stft / "
                            "complex tensors as a problem; a smaller batch, checkpointing, offload or FSDP; "
                            "no_grad for the training forward")

    def body():
        for s in range(AU_STEPS):
            x = features(waves)
            if cpu_feats:
                x = x.pin_memory().to("cuda", non_blocking=True)
            steplog(facts, key="phases", step=s, phase="features")
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = m(x.unsqueeze(1))
            loss = F.cross_entropy(logits.float(), labels)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            lv = float(loss)
            del x, logits, loss
            steplog(facts, step=s, loss=lv, optimizer_state_bytes=R.opt_state_bytes(opt))
        facts["optimizer_state_bytes"] = R.opt_state_bytes(opt)
    run_oom(out, facts, body)


# ---------------------------------------------------------------- collecting the fix probes

def collect(root):
    """Write each corpus run's <run>__<variant> results into its facts.json as fix_probes."""
    R.collect_fix_probes(root, CORPUS_RUNS, "tools/record_heldout37.py",
                         counts=("steps", "phases"), cap_bytes=True, retries=True)


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "transformer_xl_mems_not_detached_leak_oom": dict(fn=s_transformer_xl_mems_not_detached_leak_oom, group="solo",
                                                      timeout=120),
    "unfold_patches_highres_oom": dict(fn=s_unfold_patches_highres_oom, group="solo", timeout=90),
    "shampoo_preconditioner_state_oom": dict(fn=s_shampoo_preconditioner_state_oom, group="solo", timeout=120),
    "stft_audio_augment_healthy": dict(fn=s_stft_audio_augment_healthy, group="solo", timeout=90),
})
CORPUS_RUNS = list(R.SCENARIOS)
VARIANTS = [("transformer_xl_mems_not_detached_leak_oom", "detach"), ("unfold_patches_highres_oom", "conv"),
            ("shampoo_preconditioner_state_oom", "blocked"), ("stft_audio_augment_healthy", "cpu_features")]
for _n, _v in VARIANTS:
    R.SCENARIOS[_n + "__" + _v] = dict(R.SCENARIOS[_n], env={"H37_VARIANT": _v})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--collect":
        collect(sys.argv[2])
        sys.exit(0)
    if len(sys.argv) == 2 and sys.argv[1] != "--one":
        sys.argv += CORPUS_RUNS + [n for n in R.SCENARIOS if "__" in n]
    R.main()
