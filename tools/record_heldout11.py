#!/usr/bin/env python3
"""An eleventh held-out set (python3 record_heldout11.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Recorded beside record_runs.py as build/h11/train.py."""
import os, sys, random
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log


def s_notebook_stale_model_oom(out, facts):
    """A notebook session: a first model (4-layer SDPA GPT, width 1536, vocab 32000, ~211 M params) was
    trained for 3 steps (microbatch 2 x 512) with AdamW, and it and its optimizer are still referenced by the notebook's
    variables (model_a, opt_a) when a second model (6-layer SDPA GPT, width 1024, vocab 32000) is built
    and trained, bf16 autocast, AdamW, microbatch 4 x 512; 5 GiB allowed. History starts after the
    first model's cells (the held memory is older than the trace and never touched by it)."""
    torch = R._torch()
    cap(5, facts)
    torch.manual_seed(0)
    V = 32000
    model_a = R.tiny_gpt(vocab=V, d=1536, L=4).cuda()
    model_facts(model_a, facts, key="model_a")
    opt_a = torch.optim.AdamW(model_a.parameters(), lr=1e-4)
    for s in range(3):
        loss = R.gpt_step(model_a, opt_a, 2, 512, vocab=V)
        steplog(facts, key="steps_a", step=s, loss=float(loss))
    facts["model_a_opt_state_bytes"] = R.opt_state_bytes(opt_a)
    start_history(max_entries=20000, facts=facts)
    model_b = R.tiny_gpt(vocab=V, d=1024, L=6).cuda()
    model_facts(model_b, facts)
    opt_b = torch.optim.AdamW(model_b.parameters(), lr=1e-4)
    B, T = 4, 512
    facts["settings"] = dict(kind="training (notebook, second model)", framework="plain PyTorch",
                             amp="bf16 autocast", optimizer="torch.optim.AdamW", microbatch=B, seq_len=T,
                             vocab=V, held_from_before="model_a + opt_a (AdamW state), allocated before "
                             "the trace began", held_bytes=facts["model_a_param_bytes"] +
                             facts["model_a_opt_state_bytes"])

    def body():
        for s in range(8):
            loss = R.gpt_step(model_b, opt_b, B, T, vocab=V)
            steplog(facts, step=s, loss=float(loss))
    run_oom(out, facts, body)


def s_infer_request_cache_leak_oom(out, facts):
    """An inference server: embedding + 2-layer nn.TransformerEncoder (width 1024) in fp16, eval(),
    torch.inference_mode(); requests of 16 sequences x (128..1024) tokens (seeded); each request's
    hidden states (and pooled vector) are stored in a dict keyed by request id for follow-up requests
    and never evicted; the pooled result goes to the CPU; 4 GiB allowed."""
    torch = R._torch()
    import torch.nn as nn
    cap(4, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    V, D, B = 32000, 1024, 16

    class Encoder(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(V, D)
            s.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, 16, 4 * D, batch_first=True), 2,
                                          enable_nested_tensor=False)

        def forward(s, ids):
            return s.enc(s.emb(ids))
    m = Encoder().cuda().half().eval()
    model_facts(m, facts)
    rng = random.Random(11)
    cache = {}
    facts["settings"] = dict(kind="inference (server)", framework="plain PyTorch", dtype="fp16",
                             grad_mode="torch.inference_mode()", batch=B, seq_lens="128..1024 step 64, seeded",
                             cache="dict[request id] = {hidden (B,T,1024) fp16, pooled}, never evicted",
                             cached_bytes_per_token=B * D * 2)

    def body():
        with torch.inference_mode():
            for i in range(1000):
                T = rng.randrange(128, 1025, 64)
                ids = torch.randint(V, (B, T), device="cuda")
                h = m(ids)
                pooled = h.mean(1)
                cache[f"req-{i:05d}"] = dict(hidden=h, pooled=pooled)
                res = pooled.float().cpu()
                if i % 10 == 0:
                    steplog(facts, step=i, T=T, cached=len(cache), norm=float(res.norm()))
    run_oom(out, facts, body)


def s_ema_vit_healthy(out, facts):
    """Vision training with an EMA copy of the weights on the GPU: torchvision vit_b_16 (86.6 M params),
    torch.optim.swa_utils.AveragedModel(m, multi_avg_fn=get_ema_multi_avg_fn(0.999), use_buffers=True)
    updated after every optimizer step, bf16 autocast, AdamW, batch 32 images 224^2, 6 steps; no cap."""
    torch = R._torch()
    import torchvision
    import torch.nn.functional as F
    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
    start_history(facts=facts)
    torch.manual_seed(0)
    m = torchvision.models.vit_b_16(num_classes=1000).cuda()
    model_facts(m, facts)
    ema = AveragedModel(m, multi_avg_fn=get_ema_multi_avg_fn(0.999), use_buffers=True)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B = 32
    facts["settings"] = dict(kind="training (vision) with EMA weights", framework="plain PyTorch + torchvision",
                             amp="bf16 autocast", optimizer="torch.optim.AdamW", batch=B,
                             ema="torch.optim.swa_utils.AveragedModel, get_ema_multi_avg_fn(0.999)",
                             ema_bytes=facts["model_param_bytes"] + facts["model_buffer_bytes"])
    for s in range(6):
        x = torch.randn(B, 3, 224, 224, device="cuda")
        y = torch.randint(1000, (B,), device="cuda")
        with torch.amp.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        ema.update_parameters(m)
        steplog(facts, step=s, loss=float(loss))
    facts["opt_state_bytes"] = R.opt_state_bytes(opt)
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


def s_foreach_step_peak_healthy(out, facts):
    """An MLP of 24 Linear(4096, 4096) + LayerNorm + GELU blocks (403 M params fp32), bf16 autocast,
    batch 256, torch.nn.utils.clip_grad_norm_(max_norm=1.0, foreach=True) and
    torch.optim.AdamW(foreach=True): the optimizer step's foreach temporaries (a full-size sqrt of
    exp_avg_sq) make the peak, not the activations; 4 steps; no cap."""
    torch = R._torch()
    import torch.nn as nn
    start_history(facts=facts)
    torch.manual_seed(0)
    D, L, B = 4096, 24, 256
    layers = []
    for _ in range(L):
        layers += [nn.Linear(D, D), nn.LayerNorm(D), nn.GELU()]
    m = nn.Sequential(*layers, nn.Linear(D, 10)).cuda()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, foreach=True)
    facts["settings"] = dict(kind="training", framework="plain PyTorch", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW(foreach=True)", clip="clip_grad_norm_(1.0, foreach=True)",
                             batch=B, width=D, layers=L)
    for s in range(4):
        x = torch.randn(B, D, device="cuda")
        y = torch.randint(10, (B,), device="cuda")
        with torch.amp.autocast("cuda", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(m(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0, foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=True)
        steplog(facts, step=s, loss=float(loss))
    facts["opt_state_bytes"] = R.opt_state_bytes(opt)
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


def s_wav2vec2_ctc_varlen_oom(out, facts):
    """wav2vec2-shaped CTC training from a config: HF Wav2Vec2ForCTC (6 transformer layers, hidden 768,
    conv feature encoder with group norm, vocab 32), raw 16 kHz audio, batches of 8 utterances padded to
    the batch's longest (seeded durations, the longest per batch from a list up to 30 s), bf16 autocast,
    AdamW, feature encoder not frozen; 4 GiB allowed."""
    torch = R._torch()
    from transformers import Wav2Vec2Config, Wav2Vec2ForCTC
    cap(4, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    cfg = Wav2Vec2Config(hidden_size=768, num_hidden_layers=6, num_attention_heads=12, intermediate_size=3072,
                         vocab_size=32, pad_token_id=0, ctc_loss_reduction="mean")
    m = Wav2Vec2ForCTC(cfg).cuda().train()
    model_facts(m, facts)
    R.hf_cfg_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B, SR = 8, 16000
    longest = [4.2, 9.8, 6.1, 15.5, 11.0, 24.3, 8.0, 30.0]
    rng = random.Random(11)
    facts["settings"] = dict(kind="training (speech, CTC)", framework="HF transformers Wav2Vec2ForCTC",
                             amp="bf16 autocast", optimizer="torch.optim.AdamW", batch=B, sample_rate=SR,
                             longest_seconds=longest, feature_encoder="trainable (not frozen)",
                             conv0_out_bytes_fp32={t: B * int(t * SR) // 5 * 512 * 4 for t in longest})

    def body():
        for s, t in enumerate(longest):
            n = int(t * SR)
            lens = [n] + [int(n * rng.uniform(0.5, 1.0)) for _ in range(B - 1)]
            x = torch.zeros(B, n, device="cuda")
            for i, k in enumerate(lens):
                x[i, :k] = torch.randn(k, device="cuda")
            lab = torch.full((B, max(1, n // 1600)), -100, dtype=torch.long, device="cuda")
            for i, k in enumerate(lens):
                lab[i, :max(1, k // 1600)] = torch.randint(1, 32, (max(1, k // 1600),), device="cuda")
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                loss = m(input_values=x, labels=lab).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, seconds=t, samples=n, loss=float(loss))
    run_oom(out, facts, body)


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "ema_vit_healthy": dict(fn=s_ema_vit_healthy, group="par"),
    "foreach_step_peak_healthy": dict(fn=s_foreach_step_peak_healthy, group="par"),
    "notebook_stale_model_oom": dict(fn=s_notebook_stale_model_oom, group="solo"),
    "infer_request_cache_leak_oom": dict(fn=s_infer_request_cache_leak_oom, group="solo"),
    "wav2vec2_ctc_varlen_oom": dict(fn=s_wav2vec2_ctc_varlen_oom, group="solo"),
})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    R.main()
