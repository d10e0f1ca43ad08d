#!/usr/bin/env python3
"""A thirty-sixth held-out set (python3 record_heldout36.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Structure as set 34 (tools/record_heldout34.py): every corpus run is "solo"
(alone on the GPU); the <run>__<variant> scenarios are the same run with the fix a report proposes, or for the
healthy run the alternative its settings compare with (H36_VARIANT), whose results `--collect OUTDIR` writes
into each run's facts.json as fix_probes (record_runs.collect_fix_probes). The OOM observer dumps at every
out-of-memory failure (the same path each time): the snapshot is the last failure's, the one raised.
facts["settings"] says, beside the run's settings and key byte counts, the right first advice ("right_advice")
and what a report must not say ("report_must_not_say"), decided from how the run is built."""
import copy, math, os, random, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log


R.attach_oom = R.attach_oom_every  # run_oom attaches this one
VARIANT = os.environ.get("H36_VARIANT", "")


def tiny_gpt_params(vocab, d, L):
    """record_runs.tiny_gpt's parameter count (embedding, L SDPA blocks, final LayerNorm, untied head)."""
    block = (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d) + 4 * d
    return 2 * vocab * d + L * block + 2 * d


# ---------------------------------------------------------------- 1. NeRF: the validation render in one forward

NR_W, NR_D, NR_SKIP, NR_FP, NR_FD, NR_S = 256, 8, 4, 10, 4, 64
NR_RAYS, NR_STEPS, NR_HW, NR_CAP = 1024, 20, 160, 3.0
NR_CHUNK = 4096 if VARIANT == "chunk" else NR_HW * NR_HW       # rays per render forward


def nerf_encode(x, freqs):
    """NeRF's positional encoding: [x, sin(2^k x), cos(2^k x) for k < freqs] concatenated (3 + 6 freqs dims)."""
    torch = R._torch()
    out = [x]
    for k in range(freqs):
        out += [torch.sin(x * 2.0 ** k), torch.cos(x * 2.0 ** k)]
    return torch.cat(out, -1)


def s_nerf_full_image_render_oom(out, facts):
    """NeRF, written as nerf-pytorch does it (plain PyTorch, fp32, no autocast): an 8-layer MLP of width 256 with a
    skip concatenation of the encoded point at layer 4, a sigma output and a view-dependent RGB branch (feature
    256 + encoded direction 27 -> 128 -> 3); 0.60 M params (2.27 MiB). Points are encoded with 10 frequencies (63
    dims), directions with 4 (27 dims), the two concatenated (90 dims) as nerf-pytorch's run_network does; 64
    stratified samples per ray between near 2 and far 6; Adam 5e-4; 20 training steps of 1024 random rays
    (65536 points: each hidden layer's output 64 MiB fp32, ~0.8 GiB at the training peak). Then, as every
    i_img steps, a validation render of the full 160 x 160 image under torch.no_grad() with model.eval(), all
    25600 rays in one forward (chunk = H * W: the user removed the render chunking "to make validation
    faster"): 1.64 M points, the 90-dim input 562.5 MiB, the direction encoding 168.75 MiB kept beside it, and
    every 256-wide hidden layer 1600 MiB (1.5625 GiB) fp32; layer 0's Linear output (1.56 GiB) fits, its
    ReLU's output (another 1.56 GiB, the Linear's still alive) cannot: 3 GiB allowed, it dies asking 1600 MiB
    in the render's first layer with ~2.3 GiB allocated. Probe: the render in chunks of 4096 rays (__chunk:
    262144 points, 256 MiB per hidden layer, ~0.7 GiB at the render's peak, the whole image rendered)."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    cap(NR_CAP, facts)
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    facts["variant"] = VARIANT or None
    in_p, in_d = 3 + 6 * NR_FP, 3 + 6 * NR_FD

    class NeRF(nn.Module):
        def __init__(s):
            super().__init__()
            s.pts = nn.ModuleList([nn.Linear(in_p, NR_W)] + [
                nn.Linear(NR_W + in_p if i == NR_SKIP else NR_W, NR_W) for i in range(1, NR_D)])
            s.sigma = nn.Linear(NR_W, 1)
            s.feature = nn.Linear(NR_W, NR_W)
            s.views = nn.Linear(NR_W + in_d, NR_W // 2)
            s.rgb = nn.Linear(NR_W // 2, 3)

        def forward(s, x):
            xp, xd = torch.split(x, [in_p, in_d], -1)
            h = xp
            for i, l in enumerate(s.pts):
                if i == NR_SKIP:
                    h = torch.cat([xp, h], -1)
                h = F.relu(l(h))
            sigma = s.sigma(h)
            h = F.relu(s.views(torch.cat([s.feature(h), xd], -1)))
            return torch.cat([s.rgb(h), sigma], -1)

    m = NeRF().cuda()
    model_facts(m, facts)
    opt = torch.optim.Adam(m.parameters(), lr=5e-4)
    near, far = 2.0, 6.0
    g = torch.Generator(device="cuda").manual_seed(0)

    def run_network(o, d, z):
        """nerf-pytorch's run_network: points and view directions encoded, concatenated, through the MLP."""
        pts = (o[:, None] + d[:, None] * z[..., None]).reshape(-1, 3)
        vd = d / d.norm(dim=-1, keepdim=True)
        dirs = vd[:, None].expand(-1, z.shape[1], -1).reshape(-1, 3)
        embedded = nerf_encode(pts, NR_FP)
        embedded_dirs = nerf_encode(dirs, NR_FD)
        embedded = torch.cat([embedded, embedded_dirs], -1)
        return m(embedded).reshape(o.shape[0], z.shape[1], 4)

    def composite(raw, z, d):
        dists = z[..., 1:] - z[..., :-1]
        dists = torch.cat([dists, torch.full_like(dists[..., :1], 1e10)], -1) * d.norm(dim=-1, keepdim=True)
        rgb = torch.sigmoid(raw[..., :3])
        alpha = 1.0 - torch.exp(-F.relu(raw[..., 3]) * dists)
        trans = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1.0 - alpha + 1e-10], -1), -1)[:, :-1]
        return ((alpha * trans)[..., None] * rgb).sum(-2)

    def z_vals(n, stratified):
        t = torch.linspace(0.0, 1.0, NR_S, device="cuda")
        z = (near + (far - near) * t).expand(n, NR_S)
        if stratified:
            mids = 0.5 * (z[:, 1:] + z[:, :-1])
            upper = torch.cat([mids, z[:, -1:]], -1)
            lower = torch.cat([z[:, :1], mids], -1)
            z = lower + (upper - lower) * torch.rand(z.shape, device="cuda", generator=g)
        return z

    focal = 0.5 * NR_HW / math.tan(0.5 * 0.69)
    jj, ii = torch.meshgrid(torch.arange(NR_HW, device="cuda", dtype=torch.float32),
                            torch.arange(NR_HW, device="cuda", dtype=torch.float32), indexing="ij")
    img_d = torch.stack([(ii - NR_HW * 0.5) / focal, -(jj - NR_HW * 0.5) / focal, -torch.ones_like(ii)], -1)
    img_d = img_d.reshape(-1, 3)
    cam_o = torch.tensor([0.0, 0.0, 4.0], device="cuda")
    target = torch.rand(NR_HW * NR_HW, 3, device="cuda", generator=g)      # the "training image"
    npts = NR_HW * NR_HW * NR_S
    facts["settings"] = dict(
        kind="training (NeRF) with a validation render under no_grad", framework="plain PyTorch (nerf-pytorch "
        "style)", amp=None, dtype="float32", optimizer="torch.optim.Adam", mlp_depth=NR_D, mlp_width=NR_W,
        skip_layer=NR_SKIP, pos_freqs=NR_FP, dir_freqs=NR_FD, samples_per_ray=NR_S, train_rays=NR_RAYS,
        train_points=NR_RAYS * NR_S, train_steps=NR_STEPS, image=[NR_HW, NR_HW], render_rays=NR_HW * NR_HW,
        render_points=npts, render_chunk_rays=NR_CHUNK, render_grad="torch.no_grad, model.eval()",
        render_hidden_bytes=npts * NR_W * 4, render_input_bytes=npts * (in_p + in_d) * 4,
        cap_bytes=int(NR_CAP * GiB),
        right_advice="OOM in the validation render (under no_grad, after 20 healthy training steps), capacity of "
                     "one forward over the whole image: 25600 rays x 64 samples = 1.64 M points, so each 256-wide "
                     "hidden layer is 1.56 GiB fp32 and the first layer's Linear output and ReLU output cannot "
                     "both fit in 3 GiB; training (1024 rays a step) peaks near 0.8 GiB. First: render in chunks "
                     "of rays or points (nerf-pytorch's chunk / netchunk; fix_probes __chunk: 4096 rays a forward "
                     "renders the whole image), or bf16 autocast for the render",
        report_must_not_say="training-side advice as the fix (fewer training rays, gradient checkpointing, "
                            "gradient accumulation, optimizer state: Adam's state is 4.5 MiB); no_grad (it is on); "
                            "a leak or growth; fragmentation / expandable segments first; FSDP or offload")

    def render_image():
        m.eval()
        rgbs = []
        with torch.no_grad():
            for a in range(0, NR_HW * NR_HW, NR_CHUNK):
                d = img_d[a:a + NR_CHUNK]
                o = cam_o.expand(d.shape[0], 3)
                z = z_vals(d.shape[0], False)
                rgbs.append(composite(run_network(o, d, z), z, d))
                steplog(facts, key="render_chunks", first_ray=a, rays=d.shape[0])
        m.train()
        return torch.cat(rgbs).reshape(NR_HW, NR_HW, 3)

    def body():
        for s in range(NR_STEPS):
            sel = torch.randint(NR_HW * NR_HW, (NR_RAYS,), device="cuda", generator=g)
            d = img_d[sel] + 0.01 * torch.randn(NR_RAYS, 3, device="cuda", generator=g)
            o = cam_o.expand(NR_RAYS, 3)
            z = z_vals(NR_RAYS, True)
            loss = F.mse_loss(composite(run_network(o, d, z), z, d), target[sel])
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(loss))
            del loss
        steplog(facts, key="phases", phase="validation render", chunk_rays=NR_CHUNK)
        img = render_image()
        psnr = -10.0 * math.log10(float(F.mse_loss(img.reshape(-1, 3), target)))
        steplog(facts, key="phases", phase="render done", psnr=psnr)
        facts["optimizer_state_bytes"] = R.opt_state_bytes(opt)
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 2. PCGrad (multi-task) keeping per-task gradients

PC_IN, PC_W, PC_HID, PC_TASKS, PC_OUT, PC_B, PC_STEPS, PC_CAP = 1024, 2048, 5, 8, 16, 512, 4, 2.0


class PCGrad:
    """PCGrad as the widely used Pytorch-PCGrad wrapper writes it (Yu et al. 2020): for every objective a backward
    with retain_graph, every parameter's grad cloned (zeros where None) with a float has-grad mask of ones /
    zeros, both flattened and kept; the projection works on a deepcopy of the flat gradients, the shared mask is
    torch.stack(masks).prod(0), the shared part is the mean over tasks and the rest the sum (stacked copies)."""

    def __init__(s, optimizer):
        s._optim = optimizer

    def zero_grad(s):
        return s._optim.zero_grad(set_to_none=True)

    def step(s):
        return s._optim.step()

    def pc_backward(s, objectives):
        grads, shapes, has_grads = s._pack_grad(objectives)
        pc_grad = s._project_conflicting(grads, has_grads)
        pc_grad = s._unflatten_grad(pc_grad, shapes[0])
        s._set_grad(pc_grad)

    def _project_conflicting(s, grads, has_grads):
        torch = R._torch()
        shared = torch.stack(has_grads).prod(0).bool()
        pc_grad, num_task = copy.deepcopy(grads), len(grads)
        for g_i in pc_grad:
            random.shuffle(grads)
            for g_j in grads:
                g_i_g_j = torch.dot(g_i, g_j)
                if g_i_g_j < 0:
                    g_i -= g_i_g_j * g_j / (g_j.norm() ** 2)
        merged_grad = torch.zeros_like(grads[0])
        merged_grad[shared] = torch.stack([g[shared] for g in pc_grad]).mean(dim=0)
        merged_grad[~shared] = torch.stack([g[~shared] for g in pc_grad]).sum(dim=0)
        return merged_grad

    def _set_grad(s, grads):
        idx = 0
        for group in s._optim.param_groups:
            for p in group["params"]:
                p.grad = grads[idx]
                idx += 1

    def _pack_grad(s, objectives):
        grads, shapes, has_grads = [], [], []
        for obj in objectives:
            s._optim.zero_grad(set_to_none=True)
            obj.backward(retain_graph=True)
            grad, shape, has_grad = s._retrieve_grad()
            grads.append(s._flatten_grad(grad))
            has_grads.append(s._flatten_grad(has_grad))
            shapes.append(shape)
        return grads, shapes, has_grads

    def _unflatten_grad(s, grads, shapes):
        out, idx = [], 0
        for shape in shapes:
            n = int(math.prod(shape))
            out.append(grads[idx:idx + n].view(shape).clone())
            idx += n
        return out

    def _flatten_grad(s, grads):
        torch = R._torch()
        return torch.cat([g.flatten() for g in grads])

    def _retrieve_grad(s):
        torch = R._torch()
        grad, shape, has_grad = [], [], []
        for group in s._optim.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    shape.append(p.shape)
                    grad.append(torch.zeros_like(p))
                    has_grad.append(torch.zeros_like(p))
                    continue
                shape.append(p.grad.shape)
                grad.append(p.grad.clone())
                has_grad.append(torch.ones_like(p))
        return grad, shape, has_grad


def lean_pc_backward(opt, params, objectives):
    """The same projection keeping only the flat per-task gradients: no float masks, no deepcopy, each task's
    projected gradient built in one clone and added to a running mean (the __lean probe)."""
    torch = R._torch()
    grads = []
    for k, obj in enumerate(objectives):
        opt.zero_grad(set_to_none=True)
        obj.backward(retain_graph=k < len(objectives) - 1)
        grads.append(torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).flatten() for p in params]))
    opt.zero_grad(set_to_none=True)
    sq = [float(g.dot(g)) for g in grads]
    merged = torch.zeros_like(grads[0])
    for i in range(len(grads)):
        g_i = grads[i].clone()
        order = list(range(len(grads)))
        random.shuffle(order)
        for j in order:
            d = float(torch.dot(g_i, grads[j]))
            if d < 0:
                g_i.add_(grads[j], alpha=-d / sq[j])
        merged.add_(g_i, alpha=1.0 / len(grads))
        del g_i
    del grads
    idx = 0
    for p in params:
        n = p.numel()
        p.grad = merged[idx:idx + n].view_as(p).clone()
        idx += n


def s_pcgrad_multitask_grad_copies_oom(out, facts):
    """Multi-task learning with PCGrad (gradient surgery), the Pytorch-PCGrad wrapper's code (class PCGrad above):
    a shared MLP trunk (Linear 1024 -> 2048 then 5 x Linear 2048 -> 2048, ReLU) and 8 task heads (Linear 2048 ->
    16 each), fp32, no autocast, PCGrad(torch.optim.Adam), batches of 512 x 1024 features with 8 regression
    targets, 4 steps planned; 2 GiB allowed. P = 23.34 M params (89.05 MiB fp32), the activations of a batch
    ~30 MiB (512 x 2048 x 4 B = 4 MiB a tensor), the cuBLAS workspaces ~64 MiB. pc_backward's _pack_grad runs 8
    backwards with retain_graph and keeps, per task, the flat gradient (89 MiB: every parameter's grad cloned,
    zeros for the other heads) and a flat float has-grad mask (89 MiB): 8 x 178 MiB = 1.39 GiB (the packing
    peaks near 1.85 GiB, the previous task's per-parameter lists still alive while the next are built); with the
    weights, the last task's p.grad and the retained graph ~1.65 GiB allocated after it. _project_conflicting
    then asks torch.stack(has_grads) (8 x 89 MiB = 712 MiB): ~2.35 GiB > 2, so step 0 dies there (were it to
    pass, the deepcopy of the 8 flat gradients (712
    MiB), the projection's temporaries (2 x 89 MiB) and the stacked masked copies (2 x ~700 MiB) would follow,
    ~3.5 GiB in all), before any optimizer step (no Adam state yet). Probe: the lean projection (__lean: the 8
    flat gradients only, projected clone by clone into a running mean; ~1.2 GiB at the peak with Adam's 178 MiB
    of state, all 4 steps)."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    cap(PC_CAP, facts)
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    random.seed(0)
    facts["variant"] = VARIANT or None

    class MTL(nn.Module):
        def __init__(s):
            super().__init__()
            s.trunk = nn.Sequential(nn.Linear(PC_IN, PC_W), nn.ReLU(),
                                    *[x for _ in range(PC_HID) for x in (nn.Linear(PC_W, PC_W), nn.ReLU())])
            s.heads = nn.ModuleList([nn.Linear(PC_W, PC_OUT) for _ in range(PC_TASKS)])

        def forward(s, x):
            h = s.trunk(x)
            return [hd(h) for hd in s.heads]

    m = MTL().cuda().train()
    model_facts(m, facts)
    params = list(m.parameters())
    P = sum(p.numel() for p in params)
    adam = torch.optim.Adam(params, lr=1e-4)
    opt = PCGrad(adam)
    facts["settings"] = dict(
        kind="training (multi-task, PCGrad gradient surgery)", framework="plain PyTorch + a Pytorch-PCGrad-style "
        "wrapper", amp=None, dtype="float32", optimizer="PCGrad(torch.optim.Adam)",
        pcgrad="lean (flat grads only, running mean)" if VARIANT == "lean" else "Pytorch-PCGrad code",
        tasks=PC_TASKS, trunk_layers=PC_HID + 1, width=PC_W, batch=PC_B, in_features=PC_IN, steps_planned=PC_STEPS,
        params=P, param_bytes=P * 4, flat_grad_bytes_per_task=P * 4, flat_mask_bytes_per_task=P * 4,
        kept_per_task_bytes=2 * P * 4, kept_all_tasks_bytes=2 * P * 4 * PC_TASKS,
        stack_masks_bytes=P * 4 * PC_TASKS, retain_graph=True, cap_bytes=int(PC_CAP * GiB),
        right_advice="capacity of PCGrad's per-task gradient copies, not activations: for 8 tasks it keeps 8 flat "
                     "gradients and 8 float has-grad masks of the whole model (89 MiB each, 1.39 GiB), then "
                     "stacks the masks (712 MiB) and deepcopies the gradients (712 MiB) in _project_conflicting, "
                     "where step 0 dies; the batch's activations and retained graph are ~30 MiB and the weights "
                     "89 MiB. First: fewer full-size copies (boolean masks or none, project in place into a "
                     "running sum: fix_probes __lean runs all steps at ~1.2 GiB), project only the shared trunk's "
                     "gradients, keep the copies in bf16, or fewer tasks per surgery step",
        report_must_not_say="a smaller batch, gradient checkpointing or accumulation as the fix (activations are "
                            "~30 MiB); retain_graph / kept autograd graphs as the cause; a leak or growth (it dies "
                            "in step 0); fragmentation / expandable segments first; FSDP, offload or 8-bit "
                            "optimizer first (no optimizer state exists yet, weights are 89 MiB); no_grad")
    g = torch.Generator(device="cuda").manual_seed(0)
    Wt = torch.randn(PC_TASKS, PC_IN, PC_OUT, device="cuda", generator=g) / math.sqrt(PC_IN)

    def body():
        for s in range(PC_STEPS):
            x = torch.randn(PC_B, PC_IN, device="cuda", generator=g)
            ys = [x @ Wt[t] for t in range(PC_TASKS)]
            outs = m(x)
            losses = [F.mse_loss(o, y) for o, y in zip(outs, ys)]
            steplog(facts, key="phases", step=s, phase="forward")
            if VARIANT == "lean":
                lean_pc_backward(adam, params, losses)
            else:
                opt.zero_grad()
                opt.pc_backward(losses)
            steplog(facts, key="phases", step=s, phase="pc_backward")
            opt.step()
            lv = [float(v) for v in losses]
            del x, ys, outs, losses
            steplog(facts, step=s, loss=sum(lv) / len(lv), task_losses=lv,
                    optimizer_state_bytes=R.opt_state_bytes(adam))
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 3. Mamba with the sequential selective scan

MB_V, MB_D, MB_N, MB_L, MB_B, MB_T, MB_STEPS, MB_CAP = 8192, 512, 16, 6, 8, 512, 3, 4.0
MB_DI = 2 * MB_D
MB_R = math.ceil(MB_D / 16)


def s_mamba_seq_scan_train_oom(out, facts):
    """A Mamba language model in pure PyTorch, as mamba.py's reference path (selective_scan_seq) writes it, no
    fused kernel: 6 residual blocks (RMSNorm, in_proj 512 -> 2 x 1024, depthwise Conv1d k=4, SiLU, x_proj to
    dt_rank 32 + B 16 + C 16, dt_proj with softplus, A = -exp(A_log) of 1024 x 16, D, the SiLU gate, out_proj
    1024 -> 512), vocab 8192 with the head tied to the embedding; 14.37 M params (54.8 MiB fp32), fp32, no
    autocast, AdamW, batches of 8 x 512 tokens, 3 steps planned; 4 GiB allowed. The scan materialises
    (B, L, d_inner, d_state) = 8 x 512 x 1024 x 16 fp32 tensors of 256 MiB each: deltaA = exp(delta * A) (and
    its pre-exp product, transient), deltaB = delta * B, BX = deltaB * x, then a Python loop over the 512
    positions h = deltaA[:, t] * h + BX[:, t] (each h 512 KiB, all 512 kept: the mul saves them for the
    backward, 256 MiB) and hs = torch.stack(hs) (256 MiB) @ C. Saved for the backward per block: deltaA, deltaB,
    the 512 h, hs (4 x 256 MiB) + ~100 MiB of projections: ~1.1 GiB per block against 55 MiB of weights; the
    logits (8 x 512 x 8192 fp32, 128 MiB) are never reached. Step 0's forward holds ~3.5 GiB after three blocks
    and dies in the fourth block's scan (its pre-exp product, deltaA, deltaB or BX, 256 MiB, or one of the loop's
    512 KiB states; at the third block's torch.stack if the small tensors weigh more than estimated). Probe:
    every block under torch.utils.checkpoint(use_reentrant=False) (__ckpt: only the block inputs, 8 MiB each,
    are kept; one block is recomputed at a time in the backward, whose select backwards add two 256 MiB
    gradient buffers: ~2.5-3 GiB at the peak, all 3 steps)."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint
    cap(MB_CAP, facts)
    start_history(max_entries=200000, facts=facts)
    torch.manual_seed(0)
    facts["variant"] = VARIANT or None

    class RMSNorm(nn.Module):
        def __init__(s, d, eps=1e-5):
            super().__init__()
            s.eps = eps
            s.weight = nn.Parameter(torch.ones(d))

        def forward(s, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + s.eps) * s.weight

    class MambaBlock(nn.Module):
        def __init__(s):
            super().__init__()
            s.in_proj = nn.Linear(MB_D, 2 * MB_DI, bias=False)
            s.conv1d = nn.Conv1d(MB_DI, MB_DI, 4, groups=MB_DI, padding=3, bias=True)
            s.x_proj = nn.Linear(MB_DI, MB_R + 2 * MB_N, bias=False)
            s.dt_proj = nn.Linear(MB_R, MB_DI, bias=True)
            s.A_log = nn.Parameter(torch.log(torch.arange(1, MB_N + 1, dtype=torch.float32).repeat(MB_DI, 1)))
            s.D = nn.Parameter(torch.ones(MB_DI))
            s.out_proj = nn.Linear(MB_DI, MB_D, bias=False)

        def forward(s, x):
            _, L, _ = x.shape
            xz = s.in_proj(x)
            x, z = xz.chunk(2, dim=-1)
            x = s.conv1d(x.transpose(1, 2))[:, :, :L].transpose(1, 2)
            x = F.silu(x)
            y = s.ssm(x)
            return s.out_proj(y * F.silu(z))

        def ssm(s, x):
            A = -torch.exp(s.A_log)
            deltaBC = s.x_proj(x)
            delta, B, C = torch.split(deltaBC, [MB_R, MB_N, MB_N], dim=-1)
            delta = F.softplus(s.dt_proj(delta))
            return s.selective_scan_seq(x, delta, A, B, C, s.D)

        def selective_scan_seq(s, x, delta, A, B, C, D):
            _, L, _ = x.shape
            deltaA = torch.exp(delta.unsqueeze(-1) * A)           # (B, L, ED, N)
            deltaB = delta.unsqueeze(-1) * B.unsqueeze(2)         # (B, L, ED, N)
            BX = deltaB * x.unsqueeze(-1)                         # (B, L, ED, N)
            h = torch.zeros(x.size(0), MB_DI, MB_N, device=x.device)
            hs = []
            for t in range(L):
                h = deltaA[:, t] * h + BX[:, t]
                hs.append(h)
            hs = torch.stack(hs, dim=1)                           # (B, L, ED, N)
            y = (hs @ C.unsqueeze(-1)).squeeze(3)                 # (B, L, ED)
            return y + D * x

    class Residual(nn.Module):
        def __init__(s):
            super().__init__()
            s.norm = RMSNorm(MB_D)
            s.mixer = MambaBlock()

        def forward(s, x):
            return x + s.mixer(s.norm(x))

    class MambaLM(nn.Module):
        def __init__(s):
            super().__init__()
            s.embedding = nn.Embedding(MB_V, MB_D)
            s.layers = nn.ModuleList([Residual() for _ in range(MB_L)])
            s.norm_f = RMSNorm(MB_D)
            s.lm_head = nn.Linear(MB_D, MB_V, bias=False)
            s.lm_head.weight = s.embedding.weight

        def forward(s, idx):
            x = s.embedding(idx)
            for l in s.layers:
                x = checkpoint(l, x, use_reentrant=False) if VARIANT == "ckpt" else l(x)
            return s.lm_head(s.norm_f(x))

    m = MambaLM().cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=3e-4)
    expanded = MB_B * MB_T * MB_DI * MB_N * 4
    facts["settings"] = dict(
        kind="training (Mamba LM, sequential selective scan in Python)", framework="plain PyTorch (mamba.py-style "
        "reference scan, no mamba_ssm kernel)", amp=None, dtype="float32", optimizer="torch.optim.AdamW",
        d_model=MB_D, d_inner=MB_DI, d_state=MB_N, dt_rank=MB_R, layers=MB_L, vocab=MB_V, tied_head=True,
        batch=MB_B, seq_len=MB_T, steps_planned=MB_STEPS, attention=None,
        grad_checkpointing="torch.utils.checkpoint per block, use_reentrant=False" if VARIANT == "ckpt" else False,
        expanded_tensor_bytes=expanded, saved_expanded_per_block_bytes=4 * expanded,
        scan_state_bytes=MB_B * MB_DI * MB_N * 4, scan_steps_per_block=MB_T, cap_bytes=int(MB_CAP * GiB),
        right_advice="capacity of activations in the selective scan: each block materialises (batch, length, "
                     "d_inner, d_state) = 8 x 512 x 1024 x 16 fp32 tensors (256 MiB each: deltaA, deltaB, BX, "
                     "the 512 per-position states h kept for the backward, their stack hs), ~1.1 GiB saved per "
                     "block against 55 MiB of weights, so step 0's forward dies in the fourth of six blocks. "
                     "First: a fused or parallel scan that does not keep the expanded states (mamba_ssm's "
                     "selective_scan_fn, a chunked / parallel scan), checkpoint each block (fix_probes __ckpt), "
                     "or fewer tokens per microbatch with gradient accumulation",
        report_must_not_say="attention advice (SDPA, flash attention, attention masks: there is no attention); "
                            "the logits or the vocabulary as the cause; a leak or growth (the 512 per-position "
                            "allocations are one forward's loop, saved for its backward, step 0); fragmentation "
                            "/ expandable segments first; optimizer-state advice, FSDP or offload first (no "
                            "optimizer state yet, weights 55 MiB); no_grad (this is training)")
    g = torch.Generator(device="cuda").manual_seed(0)

    def body():
        for s in range(MB_STEPS):
            x = torch.randint(MB_V, (MB_B, MB_T + 1), device="cuda", generator=g)
            logits = m(x[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, MB_V), x[:, 1:].reshape(-1))
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


# ---------------------------------------------------------------- 4. Lightning manual optimization with accumulation

LM_V, LM_DM, LM_H, LM_L, LM_B, LM_T, LM_ACC, LM_STEPS = 8192, 768, 12, 4, 8, 512, 4, 4


def s_lightning_manual_opt_accum_healthy(out, facts):
    """Lightning manual optimization with gradient accumulation written by hand: a LightningModule holding
    record_runs.tiny_gpt (4 SDPA blocks of width 768, 12 heads, vocab 8192, 40.9 M params, 156 MiB fp32) with
    automatic_optimization = False; training_step calls self.manual_backward(loss / 4) on every batch and, every
    4th batch, self.clip_gradients(opt, 1.0, "norm"), opt.step(), opt.zero_grad(set_to_none=True);
    Trainer(precision="bf16-mixed", max_steps=4) (4 optimizer steps = 16 batches of 8 x 512), AdamW; no cap. A
    Callback dumps the snapshot at the end of the last batch (batch 16, right after the 4th optimizer step).
    Bytes: weights 156 MiB, their fp32 grads 156 MiB live from the first microbatch of each window to its
    optimizer step, AdamW state 312 MiB from the first step on (batch 4); a microbatch's activations (4096
    tokens: ~0.45 GiB saved by the blocks, bf16 logits 64 MiB and their fp32 copy and log-softmax 256 MiB) are
    freed by its backward. Allocated at batch ends: 0.31 GiB (weights + grads) in the first window, then 0.46 GiB
    (weights + state) right after each step and 0.61 GiB (+ grads) inside the windows: a sawtooth that repeats
    every window, peak ~1.5 GiB.
    Healthy. Probe (a comparison, not a fix): the same run with automatic optimization and
    Trainer(accumulate_grad_batches=4, gradient_clip_val=1.0) (__auto), the same memory expected."""
    torch = R._torch()
    import lightning as L
    import torch.nn.functional as F
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    facts["variant"] = VARIANT or None
    auto = VARIANT == "auto"

    class LitLM(L.LightningModule):
        def __init__(s):
            super().__init__()
            s.automatic_optimization = auto
            s.net = R.tiny_gpt(vocab=LM_V, d=LM_DM, h=LM_H, L=LM_L)

        def _loss(s, batch):
            x = batch[0]
            logits = s.net(x[:, :-1])
            return F.cross_entropy(logits.float().reshape(-1, LM_V), x[:, 1:].reshape(-1))

        def training_step(s, batch, i):
            if auto:
                return s._loss(batch)
            opt = s.optimizers()
            loss = s._loss(batch) / LM_ACC
            s.manual_backward(loss)
            if (i + 1) % LM_ACC == 0:
                s.clip_gradients(opt, gradient_clip_val=1.0, gradient_clip_algorithm="norm")
                opt.step()
                opt.zero_grad(set_to_none=True)
            return loss.detach() * LM_ACC

        def configure_optimizers(s):
            return torch.optim.AdamW(s.parameters(), lr=3e-4)

    class Rec(L.Callback):
        def on_train_batch_end(s, trainer, pl_module, outputs, batch, batch_idx):
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            opt = trainer.optimizers[0] if trainer.optimizers else None
            steplog(facts, step=trainer.global_step, batch_idx=batch_idx,
                    loss=float(loss) if loss is not None else None,
                    optimizer_state_bytes=R.opt_state_bytes(opt) if opt is not None else None)
            if trainer.global_step >= trainer.max_steps and not os.path.exists(os.path.join(out, "snapshot.pickle")):
                dump(out, facts)

    gen = torch.Generator().manual_seed(0)
    tl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(
        torch.randint(LM_V, (LM_B * LM_ACC * LM_STEPS * 2, LM_T + 1), generator=gen)), batch_size=LM_B)
    extra = dict(accumulate_grad_batches=LM_ACC, gradient_clip_val=1.0) if auto else {}
    tr = L.Trainer(accelerator="gpu", devices=1, max_steps=LM_STEPS, precision="bf16-mixed", logger=False,
                   enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                   num_sanity_val_steps=0, callbacks=[Rec()], **extra)
    model = LitLM()
    model_facts(model, facts)
    wb = tiny_gpt_params(LM_V, LM_DM, LM_L) * 4
    facts["settings"] = dict(
        kind="training (gradient accumulation)", framework="lightning Trainer, manual optimization"
        if not auto else "lightning Trainer, automatic optimization", amp="bf16-mixed",
        optimizer="torch.optim.AdamW", automatic_optimization=auto, microbatch=LM_B, seq_len=LM_T, vocab=LM_V,
        d_model=LM_DM, layers=LM_L, accumulation_steps=LM_ACC, optimizer_steps=LM_STEPS,
        batches=LM_ACC * LM_STEPS, gradient_clip="norm 1.0 (self.clip_gradients)" if not auto else
        "Trainer(gradient_clip_val=1.0)", weight_bytes=wb, grad_bytes=wb, adam_state_bytes=2 * wb,
        memory_fraction=None, alloc_conf=None,
        right_advice="healthy: nothing urgent; a hand-written accumulation under Lightning manual optimization "
                     "(self.manual_backward every batch, opt.step every 4th): the gradients (156 MiB) stay live "
                     "across each window of 4 microbatches and AdamW's state (312 MiB) exists from the first "
                     "step; allocated at batch ends repeats the same sawtooth every window (flat from window to "
                     "window); peak ~1.5 GiB, no cap. fix_probes __auto (accumulate_grad_batches=4) is the same",
        report_must_not_say="an OOM or OOM advice; a leak or growth (the rise inside a window is the accumulated "
                            "gradients, freed at each step); gradient accumulation as advice (it accumulates); "
                            "the manual_backward activations as optimizer state; no_grad; warning-level "
                            "fragmentation; a smaller batch, checkpointing or FSDP")
    tr.fit(model, train_dataloaders=tl)
    facts["after_fit"] = R.mem()
    if not os.path.exists(os.path.join(out, "snapshot.pickle")):
        facts["dumped_after_fit"] = True
        dump(out, facts)
    facts["oom"] = False
    write_log(out)


# ---------------------------------------------------------------- collecting the fix probes

def collect(root):
    """Write each corpus run's <run>__<variant> results into its facts.json as fix_probes."""
    R.collect_fix_probes(root, CORPUS_RUNS, "tools/record_heldout36.py",
                         counts=("steps", "phases", "render_chunks"), cap_bytes=True, retries=True)


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "nerf_full_image_render_oom": dict(fn=s_nerf_full_image_render_oom, group="solo", timeout=90),
    "pcgrad_multitask_grad_copies_oom": dict(fn=s_pcgrad_multitask_grad_copies_oom, group="solo", timeout=90),
    "mamba_seq_scan_train_oom": dict(fn=s_mamba_seq_scan_train_oom, group="solo", timeout=120),
    "lightning_manual_opt_accum_healthy": dict(fn=s_lightning_manual_opt_accum_healthy, group="solo", timeout=120),
})
CORPUS_RUNS = list(R.SCENARIOS)
VARIANTS = [("nerf_full_image_render_oom", "chunk"), ("pcgrad_multitask_grad_copies_oom", "lean"),
            ("mamba_seq_scan_train_oom", "ckpt"), ("lightning_manual_opt_accum_healthy", "auto")]
for _n, _v in VARIANTS:
    R.SCENARIOS[_n + "__" + _v] = dict(R.SCENARIOS[_n], env={"H36_VARIANT": _v})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--collect":
        collect(sys.argv[2])
        sys.exit(0)
    if len(sys.argv) == 2 and sys.argv[1] != "--one":
        sys.argv += CORPUS_RUNS + [n for n in R.SCENARIOS if "__" in n]
    R.main()
