#!/usr/bin/env python3
"""An eighteenth held-out set (python3 record_heldout18.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Recorded beside record_runs.py as build/h18/record_heldout18.py."""
import gc, os, random, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log, mem


def _cap_bytes(capb, facts, why):
    torch = R._torch()
    capb = (int(capb) // (2 * MiB)) * 2 * MiB
    torch.cuda.set_per_process_memory_fraction(capb / torch.cuda.get_device_properties(0).total_memory)
    facts["cap_bytes"] = capb
    facts["cap_gib"] = round(capb / GiB, 3)
    facts["cap_set"] = why
    R.log(f"memory fraction set: {capb / GiB:.2f} GiB allowed ({why})")


def s_forward_hook_cache_oom(out, facts):
    """The 8-layer GPT of record_runs.gpt (width 1024, vocab 32000, 166 M params fp32), AdamW, bf16
    autocast, microbatch 8 x 1024. Setup (history off, no hooks): 2 training steps uncapped; the budget is
    their peak reserved + 5 % (the run fits without hooks). Then a fresh model and optimizer, history on,
    and the classic visualisation pattern: a forward hook on every module (model.named_modules()) that
    stores the module's output in a dict, features[name] = out, not detached; every step overwrites the
    entries, so all of the previous step's outputs stay alive into the next step."""
    torch = R._torch()
    B, T = 8, 1024

    def build():
        torch.manual_seed(0)
        m = R.gpt(L=8).train()
        return m, torch.optim.AdamW(m.parameters(), lr=1e-4)
    m, opt = build()
    model_facts(m, facts)
    for s in range(2):
        R.gpt_step(m, opt, B, T)
        steplog(facts, key="setup_steps", step=s)
    facts["setup_peak_allocated"] = torch.cuda.max_memory_allocated()
    facts["setup_peak_reserved"] = torch.cuda.max_memory_reserved()
    del m, opt
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    _cap_bytes(facts["setup_peak_reserved"] * 1.05, facts,
               "after the setup's 2 training steps without hooks (uncapped): their peak reserved + 5 %")
    start_history(max_entries=20000, facts=facts)
    m, opt = build()
    features = {}

    def save_output(name):
        def hook(mod, inp, o):
            features[name] = o  # not detached: keeps the tensor (and its grad_fn) until overwritten
        return hook
    handles = [mod.register_forward_hook(save_output(name)) for name, mod in m.named_modules()]
    facts["hooks"] = len(handles)
    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", microbatch=B, seq_len=T,
                             hooks="register_forward_hook on every module: features[name] = out (not detached)")

    def body():
        for s in range(4):
            R.gpt_step(m, opt, B, T)
            held = 0
            seen = set()
            for v in features.values():
                for t in (v if isinstance(v, tuple) else (v,)):
                    if torch.is_tensor(t) and t.data_ptr() not in seen:
                        seen.add(t.data_ptr())
                        held += t.numel() * t.element_size()
            steplog(facts, step=s, features_bytes=held)
    run_oom(out, facts, body)


def s_fp32_master_weights_oom(out, facts):
    """Manual mixed precision as older codebases do it (apex O2 style): a 12-layer GPT (record_runs.gpt,
    width 1536, 16 heads, vocab 32000, ~0.44 B params) converted to bf16 on the GPU, an fp32 master copy of
    every parameter, torch.optim.AdamW over the fp32 masters (its state fp32); each step: bf16 forward and
    backward (no autocast), master.grad = p.grad.float(), opt.step(), copy the masters back into the bf16
    weights. Microbatch 4 x 512; 7 GiB allowed: dies in the first opt.step (state allocation)."""
    torch = R._torch()
    import torch.nn.functional as F
    cap(7, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    m = R.gpt(d=1536, h=16, L=12).to(torch.bfloat16).train()
    model_facts(m, facts)
    params = list(m.parameters())
    master = [p.detach().clone().float().requires_grad_(True) for p in params]
    facts["master_bytes"] = sum(p.numel() * 4 for p in master)
    opt = torch.optim.AdamW(master, lr=1e-4)
    facts["adam_state_bytes_expected"] = 2 * facts["master_bytes"]
    B, T, V = 4, 512, 32000
    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp="manual: bf16 model + fp32 master weights",
                             optimizer="torch.optim.AdamW over fp32 master copies", microbatch=B, seq_len=T)

    def body():
        for s in range(3):
            idx = torch.randint(V, (B, T + 1), device="cuda")
            logits = m(idx[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, V).float(), idx[:, 1:].reshape(-1))
            loss.backward()
            steplog(facts, step=s, phase="after backward")
            for mp, p in zip(master, params):
                mp.grad = p.grad.float()
            opt.step()
            with torch.no_grad():
                for mp, p in zip(master, params):
                    p.copy_(mp)
            m.zero_grad(set_to_none=True)
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(loss), opt_state_bytes=R.opt_state_bytes(opt))
    run_oom(out, facts, body)


def s_tbptt_detach_healthy(out, facts):
    """Truncated backprop through time on an LSTM language model: Embedding(32000, 512), 2-layer
    nn.LSTM(512 -> 1024), Linear(1024 -> 32000), fp32, AdamW, clip_grad_norm 0.25; batch 32 streams, bptt 70,
    60 segments over one long token stream; the hidden state is detached at every segment
    (h = tuple(x.detach() for x in h)). No cap; snapshot after the last segment."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    V, E, H, NL = 32000, 512, 1024, 2

    class LM(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(V, E)
            s.rnn = nn.LSTM(E, H, NL, batch_first=True, dropout=0.1)
            s.head = nn.Linear(H, V)

        def forward(s, x, h):
            y, h = s.rnn(s.emb(x), h)
            return s.head(y), h
    m = LM().cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    Bs, bptt, NSEG = 32, 70, 60
    data = torch.randint(V, (Bs, bptt * NSEG + 1), device="cuda")
    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp=None, optimizer="torch.optim.AdamW",
                             model="LSTM LM", batch=Bs, bptt=bptt, segments=NSEG, hidden_detached=True)
    h = None
    for s in range(NSEG):
        x = data[:, s * bptt:(s + 1) * bptt]
        y = data[:, s * bptt + 1:(s + 1) * bptt + 1]
        if h is not None:
            h = tuple(t.detach() for t in h)
        logits, h = m(x, h)
        loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 0.25)
        opt.step()
        if s % 5 == 0 or s == NSEG - 1:
            steplog(facts, step=s, loss=float(loss))
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


def s_max_autotune_compile(out, facts):
    """torch.compile(mode="max-autotune") of a 4-layer MLP (4096 -> 8192 -> 8192 -> 8192 -> 4096, GELU,
    ~0.2 B params fp32), bf16 autocast, AdamW, batch 8192; max_autotune_gemm_search_space="DEFAULT".
    Setup: 2 eager steps uncapped; the budget is their peak reserved + 10 %; then history on, the compiled
    model trains 3 steps under it (autotuning benchmarks and CUDA graphs happen inside the first one)."""
    torch = R._torch()
    import torch.nn as nn
    import torch._inductor.config as icfg
    icfg.max_autotune_gemm_search_space = "DEFAULT"
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4096, 8192), nn.GELU(), nn.Linear(8192, 8192), nn.GELU(),
                      nn.Linear(8192, 8192), nn.GELU(), nn.Linear(8192, 4096)).cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B = 8192

    def step(f):
        x = torch.randn(B, 4096, device="cuda")
        with torch.amp.autocast("cuda", dtype=torch.bfloat16):
            loss = f(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss
    for s in range(2):
        step(m)
        steplog(facts, key="setup_steps", step=s)
    facts["setup_peak_allocated"] = torch.cuda.max_memory_allocated()
    facts["setup_peak_reserved"] = torch.cuda.max_memory_reserved()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    _cap_bytes(facts["setup_peak_reserved"] * 1.10, facts,
               "after 2 eager steps (uncapped): their peak reserved + 10 %")
    start_history(max_entries=20000, facts=facts)
    cm = torch.compile(m, mode="max-autotune")
    facts["settings"] = dict(kind="training", framework="plain PyTorch + torch.compile(mode='max-autotune')",
                             compile=True, compile_mode="max-autotune", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", batch=B,
                             max_autotune_gemm_search_space="DEFAULT")

    def body():
        for s in range(3):
            t0 = time.time()
            loss = step(cm)
            steplog(facts, step=s, loss=float(loss), seconds=round(time.time() - t0, 2))
    run_oom(out, facts, body)
    facts["note"] = ("if the run did not OOM, any OOM during autotuning was caught by inductor "
                     "(see console.log for 'out of memory' lines)")


def _varsize(out, facts):
    """Segmentation training with images of random size: torchvision fcn_resnet50 (no pretrained weights,
    21 classes, BatchNorm), SGD momentum 0.9, bf16 autocast, batch 8, H and W drawn independently from
    320..1024 (multiples of 32) every step, per-pixel cross entropy. Setup (history off): one forward and
    backward at the largest size 1024 x 1024 uncapped to measure its peak allocated, then
    empty_cache(); the budget is that peak allocated + 15 % (enough for every step if memory were
    never cut into pieces). Then history on and 40 steps of random sizes (seed fixed: both twins see the
    same sizes)."""
    torch = R._torch()
    import torch.nn.functional as F
    import torchvision
    torch.manual_seed(0)
    m = torchvision.models.segmentation.fcn_resnet50(weights=None, weights_backbone=None, num_classes=21,
                                                     aux_loss=False).cuda().train()
    model_facts(m, facts)
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    Bn = 8

    def step(h, w):
        x = torch.randn(Bn, 3, h, w, device="cuda")
        y = torch.randint(21, (Bn, h, w), device="cuda")
        with torch.amp.autocast("cuda", dtype=torch.bfloat16):
            o = m(x)["out"]
        loss = F.cross_entropy(o.float(), y)
        loss.backward()
        return loss
    step(1024, 1024)
    m.zero_grad(set_to_none=True)
    facts["setup_peak_allocated_1024"] = torch.cuda.max_memory_allocated()
    facts["setup_peak_reserved_1024"] = torch.cuda.max_memory_reserved()
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    _cap_bytes(facts["setup_peak_allocated_1024"] * 1.15, facts,
               "peak allocated of one forward+backward at 1024x1024 (uncapped, setup) + 15 %")
    start_history(max_entries=20000, facts=facts)
    rng = random.Random(18)
    sizes = [(32 * rng.randint(10, 32), 32 * rng.randint(10, 32)) for _ in range(40)]
    facts["settings"] = dict(kind="training (semantic segmentation)", framework="torchvision segmentation",
                             amp="bf16 autocast", optimizer="torch.optim.SGD(momentum=0.9)", batch=Bn,
                             sizes=sizes, alloc_conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF"))

    def body():
        for s, (h, w) in enumerate(sizes):
            loss = step(h, w)
            opt.step()
            opt.zero_grad(set_to_none=True)
            st = torch.cuda.memory_stats()
            steplog(facts, step=s, H=h, W=w, loss=float(loss), peak_allocated=st["allocated_bytes.all.peak"],
                    retries=st["num_alloc_retries"])
        dump(out, facts)
    run_oom(out, facts, body)


def s_varsize_images_fragmentation_oom(out, facts):
    _varsize(out, facts)


def s_varsize_images_expandable(out, facts):
    _varsize(out, facts)


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "forward_hook_cache_oom": dict(fn=s_forward_hook_cache_oom, group="solo"),
    "fp32_master_weights_oom": dict(fn=s_fp32_master_weights_oom, group="solo"),
    "tbptt_detach_healthy": dict(fn=s_tbptt_detach_healthy, group="solo"),
    "max_autotune_compile": dict(fn=s_max_autotune_compile, group="solo", timeout=100),
    "varsize_images_fragmentation_oom": dict(fn=s_varsize_images_fragmentation_oom, group="solo",
                                             doc=_varsize.__doc__),
    "varsize_images_expandable": dict(fn=s_varsize_images_expandable, group="solo", doc=_varsize.__doc__,
                                      env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    R.main()
