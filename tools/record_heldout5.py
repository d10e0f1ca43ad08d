#!/usr/bin/env python3
"""A fifth held-out set (python3 record_heldout5.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Recorded as /workspace/train.py beside record_runs.py (copied
from build/h5/train.py: the stacks say train.py)."""
import os, sys, time, traceback
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, hf_cfg_facts, dump, write_log, log

FEATURES = []   # a global list kept across steps (s_global_feature_leak_oom)


def s_lstm_long_seq_oom(out, facts):
    """3-layer nn.LSTM (input 512, hidden 1024, cuDNN), bf16 autocast, AdamW, microbatch 64 sequences of
    4096 steps (next-frame regression), under 5 GiB: backprop through the whole sequence."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    cap(5, facts)
    start_history(facts=facts)
    torch.manual_seed(0)

    class Seq(nn.Module):
        def __init__(s):
            super().__init__()
            s.rnn = nn.LSTM(512, 1024, num_layers=3, batch_first=True)
            s.head = nn.Linear(1024, 512)

        def forward(s, x):
            y, _ = s.rnn(x)
            return s.head(y)
    m = Seq().cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    B, T = 64, 4096
    facts["settings"] = dict(kind="training", framework="plain PyTorch (nn.LSTM, cuDNN)", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", microbatch=B, seq_len=T, hidden=1024, layers=3,
                             truncated_bptt=False)

    def body():
        for s in range(2):
            x = torch.randn(B, T + 1, 512, device="cuda")
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                y = m(x[:, :-1])
                loss = F.mse_loss(y.float(), x[:, 1:])
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(loss))
    run_oom(out, facts, body)


def s_gan_two_opt_healthy(out, facts):
    """DCGAN (64x64 images, generator and discriminator of ~3.5 M / 2.8 M params), two Adam optimizers
    (betas 0.5, 0.999), batch 256, fp32, 4 iterations of a D step (on fake.detach()) then a G step; no cap."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    start_history(facts=facts)
    torch.manual_seed(0)
    nz, ngf, ndf = 100, 64, 64
    G = nn.Sequential(
        nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 8), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
        nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh()).cuda()
    D = nn.Sequential(
        nn.Conv2d(3, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, True),
        nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, True),
        nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 4), nn.LeakyReLU(0.2, True),
        nn.Conv2d(ndf * 4, ndf * 8, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 8), nn.LeakyReLU(0.2, True),
        nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False)).cuda()
    model_facts(G, facts, "generator")
    model_facts(D, facts, "discriminator")
    oG = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
    oD = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
    B = 256
    facts["settings"] = dict(kind="training (GAN)", framework="plain PyTorch", amp=None,
                             optimizers="two torch.optim.Adam (generator, discriminator)", microbatch=B,
                             image=64, iterations=4)
    for it in range(4):
        real = torch.randn(B, 3, 64, 64, device="cuda")
        z = torch.randn(B, nz, 1, 1, device="cuda")
        fake = G(z)
        oD.zero_grad(set_to_none=True)
        lossD = F.softplus(-D(real)).mean() + F.softplus(D(fake.detach())).mean()
        lossD.backward()
        oD.step()
        oG.zero_grad(set_to_none=True)
        lossG = F.softplus(-D(fake)).mean()
        lossG.backward()
        oG.step()
        steplog(facts, step=it, lossD=float(lossD), lossG=float(lossG))
    facts["optimizer_state_bytes"] = dict(G=R.opt_state_bytes(oG), D=R.opt_state_bytes(oD))
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


def s_compile_cudagraphs_healthy(out, facts):
    """torch.compile(mode="reduce-overhead") (inductor + CUDA graphs) of a 4-layer SDPA GPT (width 1024,
    vocab 8192), bf16 autocast, AdamW, microbatch 8 x 512, 6 training steps; no cap."""
    torch = R._torch()
    import torch.nn.functional as F
    start_history(facts=facts)
    torch.manual_seed(0)
    m = R.tiny_gpt(L=4).cuda()
    model_facts(m, facts)
    cm = torch.compile(m, mode="reduce-overhead")
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B, T = 8, 512
    facts["settings"] = dict(kind="training", framework="plain PyTorch + torch.compile(mode='reduce-overhead')",
                             compile="reduce-overhead (CUDA graphs)", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", microbatch=B, seq_len=T, vocab=8192, steps=6)
    for step in range(6):
        t0 = time.time()
        torch.compiler.cudagraph_mark_step_begin()
        idx = torch.randint(8192, (B, T + 1), device="cuda")
        with torch.amp.autocast("cuda", dtype=torch.bfloat16):
            logits = cm(idx[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, 8192).float(), idx[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        steplog(facts, step=step, loss=float(loss), seconds=round(time.time() - t0, 2))
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


def s_big_vocab_oom(out, facts):
    """A 4-layer SDPA decoder (width 1024, 16 heads) with a 256000-token vocabulary, untied embedding and
    output layer (the two hold 91% of 574 M params, fp32), bf16 autocast, AdamW, microbatch 4 x 512, under
    11 GiB: the first step fits, the second dies once AdamW's state exists."""
    torch = R._torch()
    cap(11, facts)
    start_history(facts=facts)
    torch.manual_seed(0)
    V = 256000
    m = R.tiny_gpt(vocab=V, d=1024, h=16, L=4).cuda()
    model_facts(m, facts)
    facts["embedding_param_bytes"] = m.emb.weight.numel() * 4
    facts["head_param_bytes"] = m.head.weight.numel() * 4
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B, T = 4, 512
    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", microbatch=B, seq_len=T, vocab=V, tied=False,
                             logits_bytes_bf16=B * T * V * 2)

    def body():
        for s in range(3):
            loss = R.gpt_step(m, opt, B, T, vocab=V)
            steplog(facts, step=s, loss=float(loss))
    run_oom(out, facts, body)


def unet(ch=(64, 128, 256, 512)):
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F

    class Res(nn.Module):
        def __init__(s, cin, cout):
            super().__init__()
            s.n1, s.c1 = nn.GroupNorm(32, cin), nn.Conv2d(cin, cout, 3, padding=1)
            s.n2, s.c2 = nn.GroupNorm(32, cout), nn.Conv2d(cout, cout, 3, padding=1)
            s.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

        def forward(s, x):
            h = s.c1(F.silu(s.n1(x)))
            h = s.c2(F.silu(s.n2(h)))
            return s.skip(x) + h

    class UNet(nn.Module):
        def __init__(s):
            super().__init__()
            s.inp = nn.Conv2d(3, ch[0], 3, padding=1)
            s.down = nn.ModuleList()
            s.up = nn.ModuleList()
            c = ch[0]
            for co in ch:
                s.down.append(nn.ModuleList([Res(c, co), Res(co, co)]))
                c = co
            s.mid = Res(c, c)
            for co in reversed(ch):
                s.up.append(nn.ModuleList([Res(c + co, co), Res(co, co)]))
                c = co
            s.out = nn.Sequential(nn.GroupNorm(32, c), nn.SiLU(), nn.Conv2d(c, 3, 3, padding=1))

        def forward(s, x):
            h = s.inp(x)
            skips = []
            for i, (a, b) in enumerate(s.down):
                h = b(a(h))
                skips.append(h)
                if i < len(s.down) - 1:
                    h = F.avg_pool2d(h, 2)
            h = s.mid(h)
            for i, (a, b) in enumerate(s.up):
                sk = skips.pop()
                if h.shape[-1] != sk.shape[-1]:
                    h = F.interpolate(h, scale_factor=2, mode="nearest")
                h = b(a(torch.cat([h, sk], 1)))
            return s.out(h)
    return UNet()


def s_unet_amp_highres_oom(out, facts):
    """A conv UNet (denoiser-shaped: 4 levels 64-128-256-512, GroupNorm + SiLU residual blocks, skip
    concatenations, 27 M params), bf16 autocast, AdamW, noise-prediction MSE, microbatch 8 images of
    512 x 512, under 8 GiB."""
    torch = R._torch()
    import torch.nn.functional as F
    cap(8, facts)
    start_history(facts=facts)
    torch.manual_seed(0)
    m = unet().cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B, px = 8, 512
    facts["settings"] = dict(kind="training", framework="plain PyTorch (conv UNet, no attention)",
                             amp="bf16 autocast", optimizer="torch.optim.AdamW", microbatch=B, image=px)

    def body():
        for s in range(2):
            x = torch.randn(B, 3, px, px, device="cuda")
            noise = torch.randn_like(x)
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                pred = m(x + noise)
                loss = F.mse_loss(pred.float(), noise)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(loss))
    run_oom(out, facts, body)


def s_global_feature_leak_oom(out, facts):
    """A small conv classifier (4 conv stages, 1.2 M params), SGD momentum, microbatch 256 images 64 x 64,
    fp32, under 3 GiB (set_per_process_memory_fraction); every step appends the detached stage-2
    feature map (256 x 128 x 32 x 32 fp32, 128 MiB) to a module-level list FEATURES "for a later
    t-SNE": memory grows each step until an OOM."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    cap(3, facts)
    start_history(facts=facts)
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.s1 = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU())
            s.s2 = nn.Sequential(nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.BatchNorm2d(128), nn.ReLU())
            s.s3 = nn.Sequential(nn.Conv2d(128, 256, 3, stride=2, padding=1), nn.BatchNorm2d(256), nn.ReLU())
            s.s4 = nn.Sequential(nn.Conv2d(256, 256, 3, stride=2, padding=1), nn.BatchNorm2d(256), nn.ReLU())
            s.fc = nn.Linear(256, 100)

        def forward(s, x):
            f = s.s2(s.s1(x))
            h = s.s4(s.s3(f))
            return s.fc(h.mean((2, 3))), f
    m = Net().cuda().train()
    model_facts(m, facts)
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    B = 256
    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp=None,
                             optimizer="torch.optim.SGD(momentum=0.9)", microbatch=B, image=64,
                             kept_per_step_bytes=B * 128 * 32 * 32 * 4,
                             leak="FEATURES.append(feat.detach()) every step (a module-level list)")

    def body():
        for s in range(40):
            x = torch.randn(B, 3, 64, 64, device="cuda")
            y = torch.randint(100, (B,), device="cuda")
            logits, feat = m(x)
            loss = F.cross_entropy(logits, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            FEATURES.append(feat.detach())
            steplog(facts, step=s, loss=float(loss))
    run_oom(out, facts, body)


def s_t5_beam_generate_oom(out, facts):
    """T5 (t5-base shape: 12 + 12 layers, d_model 768, 12 heads) in bf16 weights, generate(num_beams=6,
    max_new_tokens=800, min_new_tokens=800) on 8 inputs of 512 tokens (summarisation-shaped), under
    2.5 GiB; history with max_entries 30000 (the ring buffer may wrap)."""
    torch = R._torch()
    from transformers import T5Config, T5ForConditionalGeneration
    cap(2.5, facts)
    start_history(max_entries=30000, facts=facts)
    torch.manual_seed(0)
    cfg = T5Config(vocab_size=32128, d_model=768, d_kv=64, d_ff=3072, num_layers=12, num_decoder_layers=12,
                   num_heads=12, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    m = T5ForConditionalGeneration(cfg).to(torch.bfloat16).cuda().eval()
    model_facts(m, facts)
    hf_cfg_facts(m, facts)
    B, T = 8, 512
    facts["settings"] = dict(kind="inference (generate, beam search)", framework="transformers generate()",
                             weights="bfloat16", num_beams=6, batch=B, input_len=T, max_new_tokens=800,
                             min_new_tokens=800)

    def body():
        ids = torch.randint(2, 32128, (B, T), device="cuda")
        outp = m.generate(input_ids=ids, attention_mask=torch.ones_like(ids), num_beams=6, max_new_tokens=800,
                          min_new_tokens=800, do_sample=False)
        steplog(facts, step=0, generated=int(outp.shape[1]))
    run_oom(out, facts, body)


def s_accelerate_accum_oom(out, facts):
    """HF accelerate: Accelerator(mixed_precision="bf16", gradient_accumulation_steps=4) with
    accelerator.accumulate(), HF Llama (4 layers, width 1024, 110.6 M params), AdamW, microbatch 8 x 1024.
    Step 0 (4 microbatches and the first optimizer step) runs uncapped; then the cap is set to step 0's
    peak reserved + 384 MiB (less than the AdamW state step 0 created), and step 1 dies."""
    torch = R._torch()
    try:
        from accelerate import Accelerator
    except ImportError:
        facts["skipped"] = "accelerate not installed"
        return
    start_history(facts=facts)
    torch.manual_seed(0)
    acc = Accelerator(mixed_precision="bf16", gradient_accumulation_steps=4)
    m = R.hf_llama(L=4)
    model_facts(m, facts)
    hf_cfg_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B, T = 8, 1024
    data = [torch.randint(32000, (B, T)) for _ in range(16)]
    dl = torch.utils.data.DataLoader(data, batch_size=None)
    m, opt, dl = acc.prepare(m, opt, dl)
    facts["settings"] = dict(kind="training", framework="accelerate (own loop, accelerator.accumulate)",
                             amp="bf16 (Accelerator mixed_precision)", optimizer="torch.optim.AdamW",
                             microbatch=B, seq_len=T, accumulation_steps=4, grad_checkpointing=False)

    def body():
        for i, idx in enumerate(dl):
            with acc.accumulate(m):
                loss = m(input_ids=idx, labels=idx).loss
                acc.backward(loss)
                opt.step()
                opt.zero_grad(set_to_none=True)
            steplog(facts, microbatch=i, sync=bool(acc.sync_gradients), loss=float(loss))
            if i == 3:
                peak = torch.cuda.max_memory_reserved()
                capb = peak + 384 * MiB
                total = torch.cuda.get_device_properties(0).total_memory
                torch.cuda.set_per_process_memory_fraction(capb / total)
                facts["cap_bytes"] = capb
                facts["cap_gib"] = round(capb / GiB, 3)
                facts["cap_set_after"] = "step 0 (microbatch 3), at step 0's peak reserved + 384 MiB"
                facts["step0_peak_reserved"] = peak
                facts["optimizer_state_bytes_after_step0"] = R.opt_state_bytes(opt)
                log(f"memory fraction set: {capb / GiB:.2f} GiB allowed")
    run_oom(out, facts, body)


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "gan_two_opt_healthy": dict(fn=s_gan_two_opt_healthy, group="par"),
    "compile_cudagraphs_healthy": dict(fn=s_compile_cudagraphs_healthy, group="par", timeout=300),
    "lstm_long_seq_oom": dict(fn=s_lstm_long_seq_oom, group="solo"),
    "big_vocab_oom": dict(fn=s_big_vocab_oom, group="solo"),
    "unet_amp_highres_oom": dict(fn=s_unet_amp_highres_oom, group="solo"),
    "global_feature_leak_oom": dict(fn=s_global_feature_leak_oom, group="solo"),
    "t5_beam_generate_oom": dict(fn=s_t5_beam_generate_oom, group="solo"),
    "accelerate_accum_oom": dict(fn=s_accelerate_accum_oom, group="solo"),
})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    R.main()
