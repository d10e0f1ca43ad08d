#!/usr/bin/env python3
"""A ninth held-out set (python3 record_heldout9.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Recorded beside record_runs.py."""
import copy, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import cap, start_history, run_oom, steplog, model_facts, dump, write_log


def s_distill_teacher_graph_oom(out, facts):
    """Knowledge distillation: a frozen-in-intent teacher (HF Llama from config, 8 layers, width 1024,
    vocab 32000) in eval() mode but run WITHOUT torch.no_grad() and with requires_grad left on, beside a
    student (HF GPT-2 from config, 4 layers, width 512, same vocab) in training; loss = KL(student/T,
    teacher/T) * T^2 + CE with the teacher logits not detached, so the teacher's activations are kept
    for backward. bf16 autocast, AdamW over the student only, batch 16 x 512, 8 GiB allowed."""
    torch = R._torch()
    import torch.nn.functional as F
    from transformers import GPT2Config, GPT2LMHeadModel
    cap(8, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    V = 32000
    teacher = R.hf_llama(L=8, d=1024, inter=2816, heads=16, kv=4, vocab=V).cuda().eval()
    student = GPT2LMHeadModel(GPT2Config(vocab_size=V, n_positions=1024, n_embd=512, n_layer=4,
                                         n_head=8)).cuda().train()
    model_facts(teacher, facts, "teacher")
    model_facts(student, facts, "student")
    opt = torch.optim.AdamW(student.parameters(), lr=1e-4)
    B, T, tau = 16, 512, 2.0
    facts["settings"] = dict(kind="training (knowledge distillation)", framework="plain PyTorch + HF models",
                             amp="bf16 autocast", optimizer="torch.optim.AdamW (student only)", batch=B,
                             seq_len=T, teacher_no_grad=False, teacher_requires_grad=True,
                             teacher_logits_detached=False, temperature=tau)

    def body():
        for s in range(3):
            idx = torch.randint(V, (B, T), device="cuda")
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                t_logits = teacher(input_ids=idx).logits
                s_out = student(input_ids=idx, labels=idx)
                kl = F.kl_div(F.log_softmax(s_out.logits.float() / tau, -1),
                              F.log_softmax(t_logits.float() / tau, -1), log_target=True,
                              reduction="batchmean") * tau * tau
                loss = kl + s_out.loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(loss))
    run_oom(out, facts, body)


def s_ppo_rlhf_train_oom(out, facts):
    """A PPO/RLHF-shaped step: policy = HF Llama from config (6 layers, width 1024, vocab 32000) does
    generate() (32 prompts of 256 tokens, 256 new tokens sampled, no_grad, KV cache); then a frozen
    reference copy and a value model (LlamaModel + Linear head) score the 512-token sequences under
    no_grad; then the training half: policy and value forwards with grad on the same 32 x 512 batch, a
    clipped PPO loss + value loss, backward. bf16 autocast, AdamW over policy + value, 10 GiB allowed:
    it dies in the training half."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    from transformers import LlamaModel
    cap(10, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    V, P, N, B = 32000, 256, 256, 32
    policy = R.hf_llama(L=6, d=1024, inter=2816, heads=16, kv=4, vocab=V).cuda()
    ref = copy.deepcopy(policy).eval().requires_grad_(False)

    class Value(nn.Module):
        def __init__(s):
            super().__init__()
            s.body = LlamaModel(policy.config)
            s.head = nn.Linear(policy.config.hidden_size, 1)

        def forward(s, ids):
            return s.head(s.body(input_ids=ids).last_hidden_state).squeeze(-1)
    value = Value().cuda()
    model_facts(policy, facts, "policy")
    model_facts(value, facts, "value")
    opt = torch.optim.AdamW(list(policy.parameters()) + list(value.parameters()), lr=1e-5)
    facts["settings"] = dict(kind="training (PPO / RLHF)", framework="plain PyTorch + HF generate()",
                             amp="bf16 autocast", optimizer="torch.optim.AdamW (policy + value)", prompts=B,
                             prompt_len=P, new_tokens=N, models="policy, frozen reference copy, value model")

    def logprobs(logits, ids):
        lp = F.log_softmax(logits[:, P - 1:-1].float(), -1)
        return lp.gather(-1, ids[:, P:, None]).squeeze(-1)

    def body():
        for s in range(2):
            prompts = torch.randint(3, V, (B, P), device="cuda")
            with torch.no_grad(), torch.amp.autocast("cuda", dtype=torch.bfloat16):
                seqs = policy.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts),
                                       do_sample=True, max_new_tokens=N, min_new_tokens=N, pad_token_id=0)
                R.log(f"[rollout] step={s} generated {tuple(seqs.shape)}")
                old_lp = logprobs(policy(input_ids=seqs).logits, seqs)
                ref_lp = logprobs(ref(input_ids=seqs).logits, seqs)
                old_v = value(seqs)[:, P - 1:-1]
                reward = torch.randn(B, device="cuda")
                adv = (reward[:, None] - 0.1 * (old_lp - ref_lp)) - old_v
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                lp = logprobs(policy(input_ids=seqs).logits, seqs)
                v = value(seqs)[:, P - 1:-1]
                ratio = (lp - old_lp).exp()
                pg = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
                loss = pg + 0.5 * (v.float() - (adv + old_v)).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(loss))
    run_oom(out, facts, body)


def vae_decoder(ch=(512, 512, 256, 128), z=4, heads=8):
    """A Stable-Diffusion-shaped VAE decoder (conv_in, mid resnet/attention/resnet, 4 up blocks of 3
    resnets with nearest x2 upsampling after the first three, GroupNorm/SiLU/conv_out)."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F

    class Res(nn.Module):
        def __init__(s, i, o):
            super().__init__()
            s.n1, s.c1 = nn.GroupNorm(32, i), nn.Conv2d(i, o, 3, padding=1)
            s.n2, s.c2 = nn.GroupNorm(32, o), nn.Conv2d(o, o, 3, padding=1)
            s.skip = nn.Conv2d(i, o, 1) if i != o else nn.Identity()

        def forward(s, x):
            h = s.c1(F.silu(s.n1(x)))
            return s.skip(x) + s.c2(F.silu(s.n2(h)))

    class Attn(nn.Module):
        def __init__(s, c):
            super().__init__()
            s.n, s.qkv, s.proj = nn.GroupNorm(32, c), nn.Conv2d(c, 3 * c, 1), nn.Conv2d(c, c, 1)

        def forward(s, x):
            B, C, H, W = x.shape
            q, k, v = s.qkv(s.n(x)).view(B, 3, heads, C // heads, H * W).transpose(-1, -2).unbind(1)
            a = F.scaled_dot_product_attention(q, k, v)
            return x + s.proj(a.transpose(-1, -2).reshape(B, C, H, W))

    class Up(nn.Module):
        def __init__(s, i, o, up):
            super().__init__()
            s.res = nn.ModuleList([Res(i, o), Res(o, o), Res(o, o)])
            s.up = nn.Conv2d(o, o, 3, padding=1) if up else None

        def forward(s, x):
            for r in s.res:
                x = r(x)
            if s.up is not None:
                x = s.up(F.interpolate(x, scale_factor=2.0, mode="nearest"))
            return x

    class Decoder(nn.Module):
        def __init__(s):
            super().__init__()
            s.conv_in = nn.Conv2d(z, ch[0], 3, padding=1)
            s.mid = nn.ModuleList([Res(ch[0], ch[0]), Attn(ch[0]), Res(ch[0], ch[0])])
            s.ups = nn.ModuleList([Up(ch[max(i - 1, 0)], ch[i], i < len(ch) - 1) for i in range(len(ch))])
            s.norm, s.conv_out = nn.GroupNorm(32, ch[-1]), nn.Conv2d(ch[-1], 3, 3, padding=1)

        def forward(s, lat):
            x = s.conv_in(lat)
            for m in s.mid:
                x = m(x)
            for u in s.ups:
                x = u(x)
            return s.conv_out(F.silu(s.norm(x)))
    return Decoder()


def s_vae_decode_highres_oom(out, facts):
    """Inference: a Stable-Diffusion-shaped VAE decoder (49 M params, weights cast to bf16, eval,
    torch.no_grad()) decoding 4 x 128 x 128 latents to 1024 x 1024 images; one latent decoded first
    (fits), then a batch of 4; 6 GiB allowed."""
    torch = R._torch()
    cap(6, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    dec = vae_decoder().cuda().to(torch.bfloat16).eval()
    model_facts(dec, facts)
    facts["settings"] = dict(kind="inference (VAE decode)", framework="plain PyTorch", amp="bf16 weights",
                             no_grad=True, latent=(4, 128, 128), image=(3, 1024, 1024), batches=[1, 4])

    def body():
        with torch.no_grad():
            for s, b in enumerate([1, 4]):
                lat = torch.randn(b, 4, 128, 128, device="cuda", dtype=torch.bfloat16)
                img = dec(lat).clamp(-1, 1)
                steplog(facts, step=s, batch=b, image=str(tuple(img.shape)))
                del img
    run_oom(out, facts, body)


def contrastive_bank_run(facts, bounded, steps, B=4096, dim=1024, K=65536):
    """MoCo-shaped: a query MLP encoder (2048 -> 2048 -> 1024) trained with AdamW, a momentum key
    encoder (EMA, no_grad), InfoNCE of each query against its key and a bank of detached keys."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    torch.manual_seed(0)
    q_enc = nn.Sequential(nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, dim)).cuda()
    k_enc = copy.deepcopy(q_enc).requires_grad_(False)
    model_facts(q_enc, facts)
    opt = torch.optim.AdamW(q_enc.parameters(), lr=1e-4)
    bank = F.normalize(torch.randn(K if bounded else B, dim, device="cuda"), dim=1)
    ptr = 0
    for s in range(steps):
        x = torch.randn(B, 2048, device="cuda")
        q = F.normalize(q_enc(x), dim=1)
        with torch.no_grad():
            for pk, pq in zip(k_enc.parameters(), q_enc.parameters()):
                pk.mul_(0.999).add_(pq, alpha=0.001)
            k = F.normalize(k_enc(x + 0.1 * torch.randn_like(x)), dim=1)
        logits = torch.cat([(q * k).sum(1, keepdim=True), q @ bank.t()], 1) / 0.07
        loss = F.cross_entropy(logits, torch.zeros(B, dtype=torch.long, device="cuda"))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if bounded:
            bank[ptr:ptr + B] = k
            ptr = (ptr + B) % K
        else:
            bank = torch.cat([bank, k.detach()])
        steplog(facts, step=s, bank_rows=bank.shape[0], loss=float(loss))


def s_moco_queue_healthy(out, facts):
    """Contrastive training with a bounded memory bank: a fixed 65536 x 1024 fp32 queue of detached
    momentum-encoder keys overwritten in place (ring pointer), batch 4096, fp32, 12 steps; no cap."""
    start_history(max_entries=20000, facts=facts)
    facts["settings"] = dict(kind="training (contrastive, MoCo queue)", framework="plain PyTorch", amp=None,
                             optimizer="torch.optim.AdamW", batch=4096, bank="fixed 65536 x 1024 fp32 ring",
                             bank_bytes=65536 * 1024 * 4, steps=12)
    contrastive_bank_run(facts, True, 12)
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


def s_memory_bank_grows_oom(out, facts):
    """The same contrastive training with an unbounded memory bank: every step
    bank = torch.cat([bank, k.detach()]) (4096 x 1024 fp32 = 16 MiB more per step) and the B x N
    similarity logits grow with it; 3 GiB allowed, up to 40 steps."""
    cap(3, facts)
    start_history(max_entries=20000, facts=facts)
    facts["settings"] = dict(kind="training (contrastive, unbounded bank)", framework="plain PyTorch", amp=None,
                             optimizer="torch.optim.AdamW", batch=4096,
                             bank="torch.cat of detached keys every step (unbounded)",
                             bank_growth_bytes_per_step=4096 * 1024 * 4)
    run_oom(out, facts, lambda: contrastive_bank_run(facts, False, 40))


def s_save_on_cpu_bigvocab_oom(out, facts):
    """Activation offloading already on: every forward under torch.autograd.graph.save_on_cpu(
    pin_memory=True); 8-layer SDPA GPT (width 1024) with a 128256-token vocabulary (363 M params),
    bf16 autocast, AdamW, batches of 8 x 512, 8 x 512, then 8 x 1024 tokens; 16 GiB allowed."""
    torch = R._torch()
    import torch.nn.functional as F
    cap(16, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    V = 128256
    m = R.tiny_gpt(vocab=V, d=1024, h=16, L=8).cuda()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    shapes = [(8, 512), (8, 512), (8, 1024)]
    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", shapes=shapes, vocab=V,
                             activation_offload="torch.autograd.graph.save_on_cpu(pin_memory=True)",
                             logits_bytes_bf16_last=8 * 1024 * V * 2)

    def body():
        for s, (B, T) in enumerate(shapes):
            idx = torch.randint(V, (B, T + 1), device="cuda")
            with torch.autograd.graph.save_on_cpu(pin_memory=True):
                with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                    logits = m(idx[:, :-1])
                    loss = F.cross_entropy(logits.reshape(-1, V).float(), idx[:, 1:].reshape(-1))
                loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            del logits
            steplog(facts, step=s, B=B, T=T, loss=float(loss))
    run_oom(out, facts, body)


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "moco_queue_healthy": dict(fn=s_moco_queue_healthy, group="par"),
    "distill_teacher_graph_oom": dict(fn=s_distill_teacher_graph_oom, group="solo"),
    "ppo_rlhf_train_oom": dict(fn=s_ppo_rlhf_train_oom, group="solo"),
    "vae_decode_highres_oom": dict(fn=s_vae_decode_highres_oom, group="solo"),
    "memory_bank_grows_oom": dict(fn=s_memory_bank_grows_oom, group="solo"),
    "save_on_cpu_bigvocab_oom": dict(fn=s_save_on_cpu_bigvocab_oom, group="solo"),
})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    R.main()
