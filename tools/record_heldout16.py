#!/usr/bin/env python3
"""A sixteenth held-out set (python3 record_heldout16.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Recorded beside record_runs.py as build/h16/train.py."""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log, mem


def s_hf_hidden_states_kept_infer_oom(out, facts):
    """Feature extraction for layer-wise probing: an HF BertModel built from a config (24 layers, hidden
    1024, 16 heads, inter 4096, ~334 M params, fp32), model.eval() under torch.no_grad(), batches of
    16 x 512 tokens with output_hidden_states=True; every batch the user appends outputs.hidden_states
    (the embeddings + all 24 layers' outputs, on the GPU) to a list for probing later: memory grows by
    25 x 32 MiB per batch until the cap; 6 GiB allowed."""
    torch = R._torch()
    from transformers import BertConfig, BertModel
    cap(6, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    cfg = BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096,
                     vocab_size=30522, max_position_embeddings=512)
    m = BertModel(cfg).cuda().eval()
    model_facts(m, facts)
    R.hf_cfg_facts(m, facts)
    B, T, N = 16, 512, 40
    facts["settings"] = dict(kind="inference (feature extraction)", framework="transformers (own loop)", amp=None,
                             no_grad=True, eval_mode=True, batch=B, seq_len=T, batches=N,
                             output_hidden_states=True, kept="outputs.hidden_states (tuple of 25, on the GPU)",
                             hidden_state_bytes=B * T * 1024 * 4, kept_bytes_per_batch=25 * B * T * 1024 * 4)

    def body():
        feats = []
        with torch.no_grad():
            for i in range(N):
                ids = torch.randint(30522, (B, T), device="cuda")
                outs = m(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True)
                feats.append(outs.hidden_states)   # all 25 layers, still on the GPU
                steplog(facts, batch=i, kept_batches=len(feats))
    run_oom(out, facts, body)


def s_seg_fullres_logits_oom(out, facts):
    """Semantic segmentation training, 150 classes (ADE-style) on 1024 x 2048 crops: a resnet18 trunk
    (torchvision, no weights) with a stride-8 head (layer2 + upsampled layer4, conv 3x3 256, 1x1 to 150
    classes), the stride-8 logits F.interpolate'd (bilinear) to the full 1024 x 2048 before
    F.cross_entropy(logits.float(), target, ignore_index=255); bf16 autocast, AdamW, batch 4; dies at
    the full-resolution logits / loss of the first step; 8 GiB allowed."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    import torchvision
    cap(8, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    C, B, H, W = 150, 4, 1024, 2048

    class Seg(nn.Module):
        def __init__(s):
            super().__init__()
            r = torchvision.models.resnet18(weights=None)
            s.stem = nn.Sequential(r.conv1, r.bn1, r.relu, r.maxpool, r.layer1, r.layer2)
            s.l3, s.l4 = r.layer3, r.layer4
            s.fuse = nn.Sequential(nn.Conv2d(128 + 512, 256, 3, padding=1, bias=False), nn.BatchNorm2d(256),
                                   nn.ReLU(inplace=True))
            s.cls = nn.Conv2d(256, C, 1)

        def forward(s, x):
            f8 = s.stem(x)
            f32 = s.l4(s.l3(f8))
            f = torch.cat([f8, F.interpolate(f32, size=f8.shape[-2:], mode="bilinear", align_corners=False)], 1)
            return s.cls(s.fuse(f))
    m = Seg().cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    facts["settings"] = dict(kind="training (semantic segmentation)", framework="plain PyTorch + torchvision",
                             amp="bf16 autocast", optimizer="torch.optim.AdamW", batch=B, crop=[H, W], classes=C,
                             logits_stride=8, upsampled_to_full_res=True, loss="F.cross_entropy(logits.float())",
                             fullres_logits_bytes_bf16=B * C * H * W * 2, fullres_logits_bytes_fp32=B * C * H * W * 4)

    def body():
        for s in range(3):
            x = torch.randn(B, 3, H, W, device="cuda")
            y = torch.randint(C, (B, H, W), device="cuda")
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                logits = m(x)
                logits = F.interpolate(logits, size=(H, W), mode="bilinear", align_corners=False)
                loss = F.cross_entropy(logits.float(), y, ignore_index=255)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(loss))
    run_oom(out, facts, body)


def s_gnn_fullbatch_edges_oom(out, facts):
    """Full-batch node classification on a synthetic ogbn-products-sized graph (2.4 M nodes, 25 M directed
    edges, 100 features, 47 classes): a hand-written 3-layer GCN (x W, then per-edge messages
    h.index_select(0, src) * norm[:, None], summed with out.index_add_(0, dst, msg)), hidden 64, fp32,
    Adam; each layer makes E x 64 fp32 message tensors (5.96 GiB each); dies at a message tensor of the
    first forward; 14 GiB allowed."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    cap(14, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    N, E, FIN, D, C = 2_400_000, 25_000_000, 100, 64, 47
    src = torch.randint(N, (E,), device="cuda")
    dst = torch.randint(N, (E,), device="cuda")
    deg = torch.zeros(N, device="cuda").index_add_(0, dst, torch.ones(E, device="cuda")).clamp_(min=1)
    dinv = deg.rsqrt()
    norm = dinv[src] * dinv[dst]
    x = torch.randn(N, FIN, device="cuda")
    y = torch.randint(C, (N,), device="cuda")

    class GCN(nn.Module):
        def __init__(s):
            super().__init__()
            s.lins = nn.ModuleList([nn.Linear(FIN, D), nn.Linear(D, D), nn.Linear(D, C)])

        def prop(s, h):
            msg = h.index_select(0, src) * norm[:, None]          # E x D
            return torch.zeros_like(h).index_add_(0, dst, msg)

        def forward(s, h):
            for i, lin in enumerate(s.lins):
                h = s.prop(lin(h))
                if i < len(s.lins) - 1:
                    h = F.relu(h)
            return h
    m = GCN().cuda().train()
    model_facts(m, facts)
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    facts["settings"] = dict(kind="training (full-batch GNN)", framework="plain PyTorch (index_select/index_add_)",
                             amp=None, optimizer="torch.optim.Adam", nodes=N, edges=E, in_features=FIN, hidden=D,
                             classes=C, layers=3, message_bytes=E * D * 4, features_bytes=N * FIN * 4,
                             edge_index_bytes=2 * E * 8, epochs=3)

    def body():
        for ep in range(3):
            loss = F.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, epoch=ep, loss=float(loss))
    run_oom(out, facts, body)


def s_sdpa_float_mask_math_oom(out, facts):
    """A 6-block decoder (width 1024, 16 heads, head dim 64, MLP 4096, 8192 vocab, ~84 M params) on
    F.scaled_dot_product_attention with an explicit additive float mask: causal + key padding built as
    a (B, 1, T, T) fp32 tensor (0 / -inf, HF style) and passed as attn_mask=mask.expand(B, H, T, T);
    bf16 autocast casts the expanded fp32 mask to bf16 inside every call, materialising B x H x T x T;
    AdamW, batch 2, a sequence ladder 1024, 2048, 4096, 8192 (2 steps each); 12 GiB allowed."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    cap(12, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    Dm, NH, L, V, B = 1024, 16, 6, 8192, 2

    class Block(nn.Module):
        def __init__(s):
            super().__init__()
            s.ln1, s.ln2 = nn.LayerNorm(Dm), nn.LayerNorm(Dm)
            s.qkv = nn.Linear(Dm, 3 * Dm)
            s.proj = nn.Linear(Dm, Dm)
            s.fc1, s.fc2 = nn.Linear(Dm, 4 * Dm), nn.Linear(4 * Dm, Dm)

        def forward(s, x, mask):
            Bq, T, _ = x.shape
            q, k, v = s.qkv(s.ln1(x)).view(Bq, T, 3, NH, Dm // NH).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.expand(Bq, NH, T, T))
            x = x + s.proj(a.transpose(1, 2).reshape(Bq, T, Dm))
            return x + s.fc2(F.gelu(s.fc1(s.ln2(x))))

    class LM(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(V, Dm)
            s.blocks = nn.ModuleList([Block() for _ in range(L)])
            s.ln = nn.LayerNorm(Dm)
            s.head = nn.Linear(Dm, V, bias=False)

        def forward(s, idx, pad):
            T = idx.shape[1]
            keep = torch.ones(T, T, dtype=torch.bool, device=idx.device).tril()[None] & pad[:, None, :]
            mask = torch.zeros(idx.shape[0], 1, T, T, device=idx.device).masked_fill(~keep[:, None], float("-inf"))
            x = s.emb(idx)
            for b in s.blocks:
                x = b(x, mask)
            return s.head(s.ln(x))
    m = LM().cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    ladder = [1024, 2048, 4096, 8192]
    facts["settings"] = dict(kind="training", framework="plain PyTorch (F.scaled_dot_product_attention)",
                             amp="bf16 autocast", optimizer="torch.optim.AdamW", batch=B, seq_lens=ladder,
                             steps_per_len=2, heads=NH, layers=L, attn_mask="additive float (B,1,T,T) fp32, expanded to H",
                             is_causal=False,
                             mask_bytes_fp32={T: B * T * T * 4 for T in ladder},
                             mask_bf16_materialised_bytes={T: B * NH * T * T * 2 for T in ladder})
    # which SDPA kernels could run for the bf16 call autocast makes (q/k/v and the mask cast to bf16)
    kern = {}
    for T in (1024, 8192):
        q = torch.randn(B, NH, T, 64, device="cuda", dtype=torch.bfloat16)
        mk = torch.zeros(B, NH, T, T, device="cuda", dtype=torch.bfloat16) if T == 1024 else None
        p = torch.backends.cuda.SDPAParams(q, q, q, mk if mk is not None else
                                           torch.zeros(B, 1, 1, 1, device="cuda", dtype=torch.bfloat16).expand(B, NH, T, T),
                                           0.0, False, False)
        kern[T] = dict(flash=torch.backends.cuda.can_use_flash_attention(p, False),
                       efficient=torch.backends.cuda.can_use_efficient_attention(p, False),
                       cudnn=torch.backends.cuda.can_use_cudnn_attention(p, False))
        del q, mk, p
    facts["sdpa_kernels_possible_with_mask"] = kern
    torch.cuda.empty_cache()

    def body():
        for T in ladder:
            for s in range(2):
                idx = torch.randint(V, (B, T + 1), device="cuda")
                pad = torch.ones(B, T, dtype=torch.bool, device="cuda")
                pad[1, T - T // 8:] = False                       # the second sequence is padded
                with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                    logits = m(idx[:, :-1], pad)
                    loss = F.cross_entropy(logits.reshape(-1, V).float(), idx[:, 1:].reshape(-1))
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                steplog(facts, T=T, step=s, loss=float(loss))
    run_oom(out, facts, body)


def s_expandable_on_capacity_oom(out, facts):
    """An HF GPT2LMHeadModel from a config (12 layers, n_embd 768, 12 heads, vocab 50257, 124 M params,
    fp32 weights, eager-free sdpa attention), own loop, AdamW, bf16 autocast, microbatch 24 x 1024, with
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True set in the environment before the process started
    (so before CUDA init); the batch is simply too big for the 10 GiB allowed: capacity, not
    fragmentation."""
    torch = R._torch()
    from transformers import GPT2Config, GPT2LMHeadModel
    cap(10, facts)
    start_history(max_entries=20000, facts=facts)
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024)
    m = GPT2LMHeadModel(cfg).cuda().train()
    model_facts(m, facts)
    R.hf_cfg_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    B, T = 24, 1024
    facts["settings"] = dict(kind="training", framework="transformers (own loop)", amp="bf16 autocast",
                             optimizer="torch.optim.AdamW", microbatch=B, seq_len=T, grad_checkpointing=False,
                             accumulation_steps=1, alloc_conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
                             logits_bytes_bf16=B * T * 50257 * 2)
    seg = torch.cuda.memory._snapshot()["segments"]
    facts["expandable_segments_seen"] = any(s.get("is_expandable") for s in seg)

    def body():
        for s in range(3):
            idx = torch.randint(50257, (B, T), device="cuda")
            with torch.amp.autocast("cuda", dtype=torch.bfloat16):
                loss = m(input_ids=idx, labels=idx).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s, loss=float(loss))
    run_oom(out, facts, body)


def s_import_check(out, facts):
    """Smoke test: imports only."""
    torch = R._torch()
    import transformers, torchvision
    facts["ok"] = [torch.__version__, transformers.__version__, torchvision.__version__]
    facts["sdpa_params"] = hasattr(torch.backends.cuda, "SDPAParams")


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "import_check": dict(fn=s_import_check, group="solo"),
    "hf_hidden_states_kept_infer_oom": dict(fn=s_hf_hidden_states_kept_infer_oom, group="solo"),
    "seg_fullres_logits_oom": dict(fn=s_seg_fullres_logits_oom, group="solo"),
    "gnn_fullbatch_edges_oom": dict(fn=s_gnn_fullbatch_edges_oom, group="solo"),
    "sdpa_float_mask_math_oom": dict(fn=s_sdpa_float_mask_math_oom, group="solo"),
    "expandable_on_capacity_oom": dict(fn=s_expandable_on_capacity_oom, group="solo",
                                       env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    R.main()
