#!/usr/bin/env python3
"""A thirtieth held-out set (python3 record_heldout30.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Structure as set 29 (tools/record_heldout29.py): every corpus run is "solo"
(alone on the GPU); the <run>__<variant> scenarios are the same run with the fix a report proposes
(H30_VARIANT), whose results `--collect OUTDIR` writes into each run's facts.json as fix_probes. The OOM
observer dumps at every out-of-memory failure (the same path each time): the snapshot is the last failure's,
the one raised. facts["settings"] says, beside the run's settings and key byte counts, the right first advice
("right_advice") and what a report must not say ("report_must_not_say"), decided from how the run is built."""
import contextlib, json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log


R.attach_oom = R.attach_oom_every  # run_oom attaches this one
VARIANT = os.environ.get("H30_VARIANT", "")


# ---------------------------------------------------------------- 1. an fp32 Llama moved to the GPU whole

FL_CAP = 6


def s_hf_fp32_from_config_load_oom(out, facts):
    """Inference set-up: a Llama-architecture causal LM built from a config with transformers
    (`AutoModelForCausalLM.from_config(LlamaConfig(hidden 2560, intermediate 6912, 26 layers, 20 heads / 4 KV
    heads, vocab 32000, untied))`, ~1.96 B params), left in the default float32 (7.8 GB of weights), then
    `model.to("cuda")` to generate; 6 GiB allowed. It dies moving the weights, before any forward. Probe: the
    same config built with torch_dtype=torch.bfloat16 (3.9 GB), moved, and a greedy generate of 16 tokens for a
    batch of 4 prompts of 64 tokens (__bf16)."""
    torch = R._torch()
    from transformers import AutoModelForCausalLM, LlamaConfig
    cap(FL_CAP, facts)
    torch.manual_seed(0)
    facts["variant"] = VARIANT or None
    cfg = LlamaConfig(hidden_size=2560, intermediate_size=6912, num_hidden_layers=26, num_attention_heads=20,
                      num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048,
                      tie_word_embeddings=False)
    dt = torch.bfloat16 if VARIANT == "bf16" else torch.float32
    model = AutoModelForCausalLM.from_config(cfg, torch_dtype=dt)
    model.eval()
    model_facts(model, facts)
    R.hf_cfg_facts(model, facts)
    start_history(max_entries=40000, facts=facts)
    facts["settings"] = dict(
        kind="inference set-up (loading a causal LM onto the GPU to generate)",
        framework="transformers (from_config, model.to('cuda'), generate)", amp=None, dtype=str(dt),
        params=facts.get("model_params"), param_bytes=facts.get("model_param_bytes"), cap_bytes=FL_CAP * GiB,
        right_advice="capacity of the model weights alone: the float32 weights (7.8 GB, ~1.96 B params) are more "
                     "than the 6 GiB allowed, and nothing else is on the GPU when it dies (no forward has run, "
                     "no optimizer, no activations); load the model in bf16 / fp16 (torch_dtype=torch.bfloat16 "
                     "halves it to 3.9 GB: fix_probes __bf16 fits and generates) or quantize, or offload part of "
                     "the layers (device_map) / use a GPU with more memory",
        report_must_not_say="a smaller batch, gradient accumulation or activation checkpointing (no forward ran); "
                            "optimizer-state advice; no_grad as the fix; a leak or growth; fragmentation / "
                            "expandable segments")

    def body():
        m = model.to("cuda")
        steplog(facts, key="phases", phase="model on the GPU")
        ids = torch.randint(32000, (4, 64), device="cuda")
        with torch.inference_mode():
            gen = m.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=16, do_sample=False,
                             pad_token_id=0)
        facts["generated_shape"] = list(gen.shape)
        steplog(facts, key="phases", phase="generated")
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 2. RNN-T: the joint tensor

RT_B, RT_TIN, RT_U, RT_V, RT_H, RT_CAP = 16, 2000, 100, 1024, 512, 8


def _rnnt_loss(logits, y):
    """RNN-T loss of full-length utterances: the forward variable over t (logcumsumexp along u). Not
    torchaudio.functional.rnnt_loss: with PyTorch 2.11 its stable-ABI op turns the out-of-memory failure into a
    plain RuntimeError ("torch_call_dispatcher( aten::empty_like ...) API call failed"), which the recorder
    cannot tell from a bug."""
    torch = R._torch()
    B, T, U1, V = logits.shape
    lp = logits.log_softmax(-1)
    blank = lp[..., 0]
    emit = lp[:, :, :-1].gather(-1, y[:, None, :, None].expand(B, T, U1 - 1, 1)).squeeze(-1)
    zero = torch.zeros(B, 1, device=lp.device, dtype=lp.dtype)
    alpha = torch.cat([zero, emit[:, 0].cumsum(-1)], -1)
    for t in range(1, T):
        a = alpha + blank[:, t - 1]
        c = torch.cat([zero, emit[:, t].cumsum(-1)], -1)
        alpha = c + torch.logcumsumexp(a - c, -1)
    return -(alpha[:, -1] + blank[:, -1, -1]).mean(), "manual (logcumsumexp over u)"


def s_rnnt_joint_tensor_oom(out, facts):
    """A speech recogniser trained with the RNN-T (transducer) loss, plain PyTorch: an encoder (two stride-2
    Conv1d over 80 log-mel features, 4-layer LSTM of 512: 2000 frames -> 500), a prediction network (Embedding
    1024 x 512 + 1-layer LSTM over the 100 labels with a start symbol) and the joint network `Linear(512, 1024)
    (tanh(enc[:, :, None] + pred[:, None]))`: a [16, 500, 101, 1024] float32 tensor (3.3 GB) from two [16, 500,
    101, 512] ones (1.65 GB each), fed to the loss (the forward variable in plain PyTorch). Adam,
    batch 16, fp32; 8 GiB allowed. It dies in the first step around the joint. Probes: the joint and loss
    computed over chunks of 4 utterances, each backward through the shared encoder (__joint_chunks), and batch 8
    (__half_batch)."""
    torch = R._torch()
    import torch.nn as nn
    cap(RT_CAP, facts)
    start_history(max_entries=40000, facts=facts)
    torch.manual_seed(0)
    facts["variant"] = VARIANT or None
    B = RT_B // 2 if VARIANT == "half_batch" else RT_B

    class Transducer(nn.Module):
        def __init__(s):
            super().__init__()
            s.sub = nn.Sequential(nn.Conv1d(80, RT_H, 3, stride=2, padding=1), nn.ReLU(),
                                  nn.Conv1d(RT_H, RT_H, 3, stride=2, padding=1), nn.ReLU())
            s.enc = nn.LSTM(RT_H, RT_H, num_layers=4, batch_first=True)
            s.emb = nn.Embedding(RT_V, RT_H)
            s.pred = nn.LSTM(RT_H, RT_H, batch_first=True)
            s.enc_proj = nn.Linear(RT_H, RT_H)
            s.pred_proj = nn.Linear(RT_H, RT_H)
            s.out = nn.Linear(RT_H, RT_V)

        def encode(s, feats, y):
            e, _ = s.enc(s.sub(feats).transpose(1, 2))
            yin = torch.cat([torch.zeros_like(y[:, :1]), y], 1)
            p, _ = s.pred(s.emb(yin))
            return s.enc_proj(e), s.pred_proj(p)

        def joint(s, e, p):
            return s.out(torch.tanh(e[:, :, None] + p[:, None]))

    net = Transducer().cuda()
    model_facts(net, facts)
    opt = torch.optim.Adam(net.parameters(), lr=1e-4)
    T = RT_TIN // 4
    facts["settings"] = dict(
        kind="training (speech recognition, RNN-T / transducer loss)", framework="plain PyTorch", amp=None,
        weights="fp32", optimizer="torch.optim.Adam", batch=B, frames=RT_TIN, encoder_frames=T, labels=RT_U,
        vocab=RT_V, joint_dim=RT_H, joint_logits_bytes=B * T * (RT_U + 1) * RT_V * 4,
        joint_hidden_bytes=B * T * (RT_U + 1) * RT_H * 4, cap_bytes=RT_CAP * GiB,
        right_advice="capacity of the transducer joint: the joint network materialises B x T x (U+1) x V logits "
                     "(16 x 500 x 101 x 1024 float32, 3.3 GB) from two B x T x (U+1) x 512 hidden tensors "
                     "(1.65 GB each), and the loss needs the logits' gradient as big; the model is 13 M params. "
                     "Compute the joint and loss over chunks of the batch (fix_probes __joint_chunks fits), a "
                     "pruned / fused transducer loss, or a smaller joint dim / vocabulary; halving the batch "
                     "alone is not enough (__half_batch still runs out of memory in its second step)",
        report_must_not_say="a leak or growth; fragmentation / expandable segments; optimizer state, FSDP / "
                            "offload (13 M params); no_grad; mixed precision as the first fix")
    g = torch.Generator(device="cuda").manual_seed(0)

    def body():
        for s in range(2):
            feats = torch.randn(B, 80, RT_TIN, device="cuda", generator=g)
            y = torch.randint(1, RT_V, (B, RT_U), device="cuda", generator=g)
            e, p = net.encode(feats, y)
            steplog(facts, key="phases", step=s, phase="encoded")
            if VARIANT == "joint_chunks":
                tot = 0.0
                for i in range(0, B, 4):
                    loss, how = _rnnt_loss(net.joint(e[i:i + 4], p[i:i + 4]), y[i:i + 4])
                    (loss * 4 / B).backward(retain_graph=i + 4 < B)
                    tot += float(loss) * 4 / B
                    del loss
                loss_v = tot
            else:
                logits = net.joint(e, p)
                steplog(facts, key="phases", step=s, phase="joint done")
                loss, how = _rnnt_loss(logits, y)
                facts["loss_impl"] = how
                steplog(facts, key="phases", step=s, phase="loss done")
                loss.backward()
                loss_v = float(loss)
                del loss, logits
            facts["loss_impl"] = how
            opt.step()
            opt.zero_grad(set_to_none=True)
            del e, p
            steplog(facts, step=s, loss=loss_v)
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 3. Lightning callback caching GPU features

LK_B, LK_T, LK_D, LK_CAP, LK_STEPS = 64, 256, 512, 3, 150


def s_lightning_callback_feature_cache_leak_oom(out, facts):
    """A LightningModule (lightning.pytorch) training a text classifier (Embedding 16384 x 512, a 4-layer
    nn.TransformerEncoder of width 512, mean pool, 20 classes; ~17 M params), Trainer(precision="bf16-mixed",
    max_steps=150), AdamW, batches of 64 x 256. training_step keeps `self.last_hidden = h.detach().float()` (the
    encoder output, 64 x 256 x 512 float32, 32 MiB) and a user Callback (`EmbeddingProjectorCache`) stores it in
    a dict keyed by global step in on_train_batch_end, for a projector plot at the end of the epoch: still on
    the GPU. 3 GiB allowed. Memory between steps grows by 32 MiB a step until it dies. Probe: the callback
    stores `.cpu()` copies (__to_cpu)."""
    torch = R._torch()
    import lightning as L
    import torch.nn as nn
    import torch.nn.functional as F
    cap(LK_CAP, facts)
    start_history(max_entries=30000, facts=facts)
    torch.manual_seed(0)
    facts["variant"] = VARIANT or None

    class LitCls(L.LightningModule):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(16384, LK_D)
            s.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(LK_D, 8, 2048, batch_first=True,
                                                                     norm_first=True), 4)
            s.head = nn.Linear(LK_D, 20)
            s.last_hidden = None

        def training_step(s, batch, i):
            x, y = batch
            h = s.enc(s.emb(x))
            s.last_hidden = h.detach().float()
            return F.cross_entropy(s.head(h.mean(1)).float(), y)

        def configure_optimizers(s):
            return torch.optim.AdamW(s.parameters(), lr=3e-4)

    class EmbeddingProjectorCache(L.Callback):
        def __init__(s):
            s.store = {}

        def on_train_batch_end(s, trainer, pl_module, outputs, batch, batch_idx):
            h = pl_module.last_hidden
            s.store[trainer.global_step] = h.cpu() if VARIANT == "to_cpu" else h
            loss = outputs["loss"] if isinstance(outputs, dict) else outputs
            steplog(facts, step=trainer.global_step, loss=float(loss), cached=len(s.store))

    n = LK_B * LK_STEPS
    data = torch.utils.data.TensorDataset(torch.randint(16384, (n, LK_T)), torch.randint(20, (n,)))
    loader = torch.utils.data.DataLoader(data, batch_size=LK_B)
    tr = L.Trainer(accelerator="gpu", devices=1, max_steps=LK_STEPS, precision="bf16-mixed", logger=False,
                   enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                   callbacks=[EmbeddingProjectorCache()])
    model = LitCls()
    model_facts(model, facts)
    facts["settings"] = dict(
        kind="training", framework="lightning Trainer", amp="bf16-mixed", optimizer="torch.optim.AdamW",
        microbatch=LK_B, seq_len=LK_T, width=LK_D, steps=LK_STEPS, cached_bytes_per_step=LK_B * LK_T * LK_D * 4,
        cap_bytes=LK_CAP * GiB,
        right_advice="a leak: a Lightning Callback keeps each step's detached encoder output (64 x 256 x 512 "
                     "float32, 32 MiB) in a dict keyed by global step, on the GPU; memory between steps grows by "
                     "32 MiB a step until the cap. Store `.cpu()` copies (fix_probes __to_cpu runs all 150 "
                     "steps), keep only the last few, or store a reduced summary",
        report_must_not_say="capacity advice first (a smaller batch, activation checkpointing, FSDP / offload); "
                            "fragmentation / expandable segments; no_grad (it is training); the growth as "
                            "autograd graph kept (the tensors are detached)")

    def body():
        tr.fit(model, loader)
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 4. Mask R-CNN at large images

MR_B, MR_S, MR_N, MR_CAP = 4, 1344, 40, 12


def s_maskrcnn_large_images_oom(out, facts):
    """torchvision Mask R-CNN (maskrcnn_resnet50_fpn, weights=None, weights_backbone=None: 44 M params fp32)
    trained on 4 images of 1344 x 1344 with 40 boxes and masks each, min_size=max_size=1344 (no downscale),
    rpn_post_nms_top_n_train=4000, box_batch_size_per_image=1024 (many proposals and sampled ROIs), SGD
    momentum 0.9, fp32; 12 GiB allowed. It dies in the first step. Probes: 2 images a step (__batch2), and the
    torchvision default sizes (min_size=800, max_size=1333) and proposal counts (__defaults)."""
    torch = R._torch()
    from torchvision.models.detection import maskrcnn_resnet50_fpn
    cap(MR_CAP, facts)
    start_history(max_entries=40000, facts=facts)
    torch.manual_seed(0)
    facts["variant"] = VARIANT or None
    B = 2 if VARIANT == "batch2" else MR_B
    kw = dict(min_size=MR_S, max_size=MR_S, rpn_post_nms_top_n_train=4000, box_batch_size_per_image=1024)
    if VARIANT == "defaults":
        kw = {}
    model = maskrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_classes=91, **kw).cuda().train()
    model_facts(model, facts)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.01, momentum=0.9)
    facts["settings"] = dict(
        kind="training (instance segmentation, Mask R-CNN)", framework="torchvision detection", amp=None,
        weights="fp32", optimizer="torch.optim.SGD momentum 0.9", batch=B, image=MR_S, boxes_per_image=MR_N,
        model_kwargs=kw, cap_bytes=MR_CAP * GiB,
        right_advice="capacity of the activations: a ResNet-50-FPN backbone over 4 images of 1344 x 1344 "
                     "without downscaling, plus ROI heads over 1024 sampled ROIs per image, holds far more "
                     "activations than the 44 M-param model's weights and SGD state; fewer images a step (with "
                     "gradient accumulation: fix_probes __batch2) or smaller images / the default sizes "
                     "(__defaults), or mixed precision",
        report_must_not_say="a leak or growth; fragmentation / expandable segments; FSDP / offload or "
                            "optimizer-state advice (44 M params); no_grad")
    g = torch.Generator(device="cuda").manual_seed(0)

    def targets():
        ts = []
        for _ in range(B):
            xy = torch.rand(MR_N, 2, device="cuda", generator=g) * (MR_S * 0.7)
            wh = 32 + torch.rand(MR_N, 2, device="cuda", generator=g) * (MR_S * 0.25)
            boxes = torch.cat([xy, xy + wh], 1).round()
            masks = torch.zeros(MR_N, MR_S, MR_S, dtype=torch.uint8, device="cuda")
            for k in range(MR_N):
                x0, y0, x1, y1 = boxes[k].int().tolist()
                masks[k, y0:y1, x0:x1] = 1
            ts.append(dict(boxes=boxes, labels=torch.randint(1, 91, (MR_N,), device="cuda", generator=g),
                           masks=masks))
        return ts

    def body():
        for s in range(2):
            imgs = [torch.rand(3, MR_S, MR_S, device="cuda", generator=g) for _ in range(B)]
            losses = model(imgs, targets())
            loss = sum(losses.values())
            steplog(facts, key="phases", step=s, phase="forward done")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steplog(facts, step=s, loss=float(loss))
            del losses, loss, imgs
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 5. retrieval then generation, healthy

RG_NP, RG_PT, RG_Q, RG_K = 16384, 128, 16, 4


def s_rag_embed_then_generate_healthy(out, facts):
    """Retrieval-augmented generation in one process, inference only (transformers, both from configs, fp16 on
    the GPU): a BERT encoder (6 layers, hidden 768) embeds 16384 passages of 128 tokens in batches of 256 under
    torch.inference_mode into a GPU index (mean pooled, normalised, [16384, 768] fp16, 24 MiB); 16 queries are
    embedded, the top 4 passages of each retrieved by a matmul, and a GPT-2 (12 layers, 768) generates 48 tokens
    greedily from the 512 retrieved tokens (batch 16). No cap. The snapshot is dumped after generation with
    both models resident: healthy."""
    torch = R._torch()
    from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel
    start_history(max_entries=40000, facts=facts)
    torch.manual_seed(0)
    enc = BertModel(BertConfig(hidden_size=768, num_hidden_layers=6, num_attention_heads=12,
                               intermediate_size=3072, vocab_size=30522)).half().cuda().eval()
    gen = GPT2LMHeadModel(GPT2Config(n_layer=12, n_embd=768, n_head=12, vocab_size=50257,
                                     n_positions=1024)).half().cuda().eval()
    model_facts(enc, facts, key="encoder")
    model_facts(gen, facts, key="generator")
    facts["settings"] = dict(
        kind="inference (retrieval-augmented generation: embed, retrieve, generate)", framework="transformers",
        amp=None, dtype="float16 weights", grad="torch.inference_mode", passages=RG_NP, passage_len=RG_PT,
        embed_batch=256, queries=RG_Q, top_k=RG_K, max_new_tokens=48, memory_fraction=None, alloc_conf=None,
        right_advice="healthy: nothing urgent; inference under inference_mode with two fp16 models resident "
                     "(~0.4 GB) and a 24 MiB passage index; the peak is the GPT-2 prefill / KV cache of 16 x "
                     "560 tokens",
        report_must_not_say="an OOM or OOM advice; a leak or growth; no_grad (inference_mode is on); training "
                            "advice (activation checkpointing, gradient accumulation, optimizer state); "
                            "warning-level fragmentation")
    g = torch.Generator(device="cuda").manual_seed(0)
    with torch.inference_mode():
        passages = torch.randint(1000, 30000, (RG_NP, RG_PT), device="cuda", generator=g)
        index = torch.empty(RG_NP, 768, dtype=torch.float16, device="cuda")
        for i in range(0, RG_NP, 256):
            h = enc(input_ids=passages[i:i + 256]).last_hidden_state.mean(1)
            index[i:i + 256] = torch.nn.functional.normalize(h, dim=-1)
        steplog(facts, key="phases", phase="index built", passages=RG_NP)
        q = torch.randint(1000, 30000, (RG_Q, 32), device="cuda", generator=g)
        qe = torch.nn.functional.normalize(enc(input_ids=q).last_hidden_state.mean(1), dim=-1)
        top = (qe @ index.T).topk(RG_K, dim=-1).indices
        ctx = passages[top].reshape(RG_Q, RG_K * RG_PT) % 50257
        steplog(facts, key="phases", phase="retrieved")
        out_ids = gen.generate(ctx, attention_mask=torch.ones_like(ctx), max_new_tokens=48, do_sample=False,
                               pad_token_id=0)
        facts["generated_shape"] = list(out_ids.shape)
        steplog(facts, key="phases", phase="generated")
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


# ---------------------------------------------------------------- 6. DDP with no_sync accumulation, healthy

DN_B, DN_T, DN_V, DN_ACC, DN_STEPS = 8, 512, 16384, 4, 3


def s_ddp_no_sync_accum_healthy(out, facts):
    """DDP (nccl, world size 1, as `torchrun --nproc_per_node 1` would start it) around record_runs.tiny_gpt (6
    SDPA blocks of width 1024, vocab 16384, ~110 M params fp32), bf16 autocast, AdamW, gradient accumulation of
    4 microbatches of 8 x 512 with `ddp.no_sync()` on the first 3 (gradients all-reduced once per optimizer
    step), 3 optimizer steps; no cap. The snapshot is dumped after the last step: healthy."""
    torch = R._torch()
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29543", RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    torch.cuda.set_device(0)
    start_history(max_entries=40000, facts=facts)
    dist.init_process_group("nccl", device_id=torch.device("cuda:0"))
    try:
        torch.manual_seed(0)
        model = R.tiny_gpt(vocab=DN_V, d=1024, h=16, L=6).cuda()
        model_facts(model, facts)
        ddp = DDP(model, device_ids=[0])
        opt = torch.optim.AdamW(ddp.parameters(), lr=3e-4)
        facts["settings"] = dict(
            kind="training", framework="DDP (one rank)", ddp=dict(backend="nccl", world_size=1,
                                                                  bucket_cap_mb=25, no_sync=True),
            amp="bf16 autocast", optimizer="torch.optim.AdamW", microbatch=DN_B, seq_len=DN_T,
            accumulation=DN_ACC, steps=DN_STEPS, memory_fraction=None, alloc_conf=None,
            right_advice="healthy: nothing urgent; between steps allocated is the weights, DDP's gradient "
                         "buckets and AdamW state; the peak is a microbatch's activations and logits; gradient "
                         "accumulation with no_sync is already on",
            report_must_not_say="an OOM or OOM advice; a leak or growth across microbatches; gradient "
                                "accumulation as advice (it is on); FSDP / offload / a smaller batch as needed; "
                                "warning-level fragmentation")
        g = torch.Generator(device="cuda").manual_seed(0)
        for s in range(DN_STEPS):
            for k in range(DN_ACC):
                ctx = ddp.no_sync() if k < DN_ACC - 1 else contextlib.nullcontext()
                x = torch.randint(DN_V, (DN_B, DN_T + 1), device="cuda", generator=g)
                with ctx:
                    with torch.autocast("cuda", dtype=torch.bfloat16):
                        logits = ddp(x[:, :-1])
                    loss = F.cross_entropy(logits.float().view(-1, DN_V), x[:, 1:].reshape(-1)) / DN_ACC
                    loss.backward()
                steplog(facts, key="phases", step=s, micro=k, loss=float(loss))
                del logits, loss, x
            opt.step()
            opt.zero_grad(set_to_none=True)
            steplog(facts, step=s)
        facts["optimizer_state_bytes"] = R.opt_state_bytes(opt)
        facts["oom"] = False
        dump(out, facts)
        write_log(out)
    finally:
        dist.destroy_process_group()


# ---------------------------------------------------------------- collecting the fix probes

def collect(root):
    """Write each corpus run's <run>__<variant> results into its facts.json as fix_probes."""
    R.collect_fix_probes(root, CORPUS_RUNS, "tools/record_heldout30.py", counts=("steps", "phases"), cap_bytes=True, retries=False,
                         note_what="the variant named")


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "hf_fp32_from_config_load_oom": dict(fn=s_hf_fp32_from_config_load_oom, group="solo", timeout=120),
    "rnnt_joint_tensor_oom": dict(fn=s_rnnt_joint_tensor_oom, group="solo", timeout=90),
    "lightning_callback_feature_cache_leak_oom": dict(fn=s_lightning_callback_feature_cache_leak_oom,
                                                      group="solo", timeout=120),
    "maskrcnn_large_images_oom": dict(fn=s_maskrcnn_large_images_oom, group="solo", timeout=90),
    "rag_embed_then_generate_healthy": dict(fn=s_rag_embed_then_generate_healthy, group="solo", timeout=90),
    "ddp_no_sync_accum_healthy": dict(fn=s_ddp_no_sync_accum_healthy, group="solo", timeout=90),
})
CORPUS_RUNS = list(R.SCENARIOS)
VARIANTS = [("hf_fp32_from_config_load_oom", "bf16"), ("rnnt_joint_tensor_oom", "joint_chunks"),
            ("rnnt_joint_tensor_oom", "half_batch"), ("lightning_callback_feature_cache_leak_oom", "to_cpu"),
            ("maskrcnn_large_images_oom", "batch2"), ("maskrcnn_large_images_oom", "defaults")]
for _n, _v in VARIANTS:
    R.SCENARIOS[_n + "__" + _v] = dict(R.SCENARIOS[_n], env={"H30_VARIANT": _v})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--collect":
        collect(sys.argv[2])
        sys.exit(0)
    if len(sys.argv) == 2 and sys.argv[1] != "--one":
        sys.argv += CORPUS_RUNS + [n for n in R.SCENARIOS if "__" in n]
    R.main()
