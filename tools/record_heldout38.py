#!/usr/bin/env python3
"""A thirty-eighth held-out set (python3 record_heldout38.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Structure as set 36 (tools/record_heldout36.py): every corpus run is "solo"
(alone on the GPU); the <run>__<variant> scenarios are the same run with the fix a report proposes, or for the
healthy run the alternative its settings compare with (H38_VARIANT), whose results `--collect OUTDIR` writes
into each run's facts.json as fix_probes (record_runs.collect_fix_probes). The OOM observer dumps at every
out-of-memory failure (the same path each time): the snapshot is the last failure's, the one raised.
facts["settings"] says, beside the run's settings and key byte counts, the right first advice ("right_advice")
and what a report must not say ("report_must_not_say"), decided from how the run is built. Written without a
GPU at hand (not yet run): every byte count in the docstrings is computed from the shapes, the activation
totals and timelines are estimates that the recorded facts (steps, phases, batches, requests, stats) settle."""
import math, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log


R.attach_oom = R.attach_oom_every  # run_oom attaches this one
VARIANT = os.environ.get("H38_VARIANT", "")


# ---------------------------------------------------------------- 1. DETR: the matcher's batch-wide cost matrix

DT_B, DT_Q, DT_T, DT_IMG, DT_D, DT_NH, DT_ENC, DT_DEC, DT_FF = 16, 900, 500, 256, 256, 8, 2, 2, 1024
DT_CLS, DT_STEPS, DT_CAP = 91, 4, 4.0
DT_COST_CLASS, DT_COST_BBOX, DT_COST_GIOU = 1.0, 5.0, 2.0


def box_cxcywh_to_xyxy(x):
    """DETR's util/box_ops.py."""
    torch = R._torch()
    x_c, y_c, w, h = x.unbind(-1)
    return torch.stack([(x_c - 0.5 * w), (y_c - 0.5 * h), (x_c + 0.5 * w), (y_c + 0.5 * h)], dim=-1)


def box_area(boxes):
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def box_iou(boxes1, boxes2):
    """DETR's util/box_ops.box_iou: pairwise, [N, M] (the corners [N, M, 2])."""
    torch = R._torch()
    area1 = box_area(boxes1)
    area2 = box_area(boxes2)
    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])  # [N,M,2]
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])  # [N,M,2]
    wh = (rb - lt).clamp(min=0)  # [N,M,2]
    inter = wh[:, :, 0] * wh[:, :, 1]  # [N,M]
    union = area1[:, None] + area2 - inter
    iou = inter / union
    return iou, union


def generalized_box_iou(boxes1, boxes2):
    """DETR's util/box_ops.generalized_box_iou (Rezatofighi et al.), pairwise: [N, M]."""
    torch = R._torch()
    assert (boxes1[:, 2:] >= boxes1[:, :2]).all()
    assert (boxes2[:, 2:] >= boxes2[:, :2]).all()
    iou, union = box_iou(boxes1, boxes2)
    lt = torch.min(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.max(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)  # [N,M,2]
    area = wh[:, :, 0] * wh[:, :, 1]
    return iou - (area - union) / area


def _assignment():
    """scipy's linear_sum_assignment as DETR uses it; a greedy CPU matching where scipy is missing (facts say
    which). Either way the matching runs on the CPU copy of the cost matrix."""
    try:
        from scipy.optimize import linear_sum_assignment
        return linear_sum_assignment, "scipy.optimize.linear_sum_assignment"
    except Exception:  # noqa: BLE001  (missing, or broken against the installed numpy)
        torch = R._torch()

        def greedy(c):
            c = torch.as_tensor(c).clone()
            rows, cols = [], []
            for j in range(c.shape[1]):
                i = int(c[:, j].argmin())
                rows.append(i)
                cols.append(j)
                c[i, :] = float("inf")
            order = sorted(range(len(rows)), key=lambda k: rows[k])
            return [rows[k] for k in order], [cols[k] for k in order]
        return greedy, "greedy (scipy missing)"


class HungarianMatcher:
    """DETR's models/matcher.py HungarianMatcher.forward, as written there: the whole batch at once, queries
    flattened over the batch ([bs * num_queries]) against all targets concatenated, then C.view(bs, nq, -1)
    .cpu() and each image's block picked out by C.split(sizes, -1)[i][i]. per_image=True: the same costs
    computed image by image, each image's queries against only its own targets (the __per_image fix)."""

    def __init__(s, cost_class, cost_bbox, cost_giou, per_image=False):
        s.cost_class, s.cost_bbox, s.cost_giou, s.per_image = cost_class, cost_bbox, cost_giou, per_image
        s.lsa, s.lsa_name = _assignment()

    def _cost(s, out_prob, out_bbox, tgt_ids, tgt_bbox):
        torch = R._torch()
        cost_class = -out_prob[:, tgt_ids]
        cost_bbox = torch.cdist(out_bbox, tgt_bbox, p=1)
        cost_giou = -generalized_box_iou(box_cxcywh_to_xyxy(out_bbox), box_cxcywh_to_xyxy(tgt_bbox))
        return s.cost_bbox * cost_bbox + s.cost_class * cost_class + s.cost_giou * cost_giou

    def __call__(s, outputs, targets):
        torch = R._torch()
        with torch.no_grad():
            bs, num_queries = outputs["pred_logits"].shape[:2]
            if s.per_image:
                indices = []
                for i, t in enumerate(targets):
                    c = s._cost(outputs["pred_logits"][i].softmax(-1), outputs["pred_boxes"][i], t["labels"],
                                t["boxes"])
                    indices.append(s.lsa(c.cpu()))
            else:
                out_prob = outputs["pred_logits"].flatten(0, 1).softmax(-1)  # [batch_size * num_queries, classes]
                out_bbox = outputs["pred_boxes"].flatten(0, 1)  # [batch_size * num_queries, 4]
                tgt_ids = torch.cat([v["labels"] for v in targets])
                tgt_bbox = torch.cat([v["boxes"] for v in targets])
                C = s._cost(out_prob, out_bbox, tgt_ids, tgt_bbox)
                C = C.view(bs, num_queries, -1).cpu()
                sizes = [len(v["boxes"]) for v in targets]
                indices = [s.lsa(c[i]) for i, c in enumerate(C.split(sizes, -1))]
            return [(torch.as_tensor(i, dtype=torch.int64), torch.as_tensor(j, dtype=torch.int64))
                    for i, j in indices]


def s_detr_matcher_cost_matrix_oom(out, facts):
    """A DETR-style detector trained on dense scenes, written as the DETR paper's "DETR in 50 lines" demo (plain
    PyTorch, fp32, no autocast): a torchvision resnet18 trunk (random weights, up to layer4, stride 32), a 1x1
    conv 512 -> 256, learned row / column position embeddings, nn.Transformer(256, 8 heads, 2 encoder and 2
    decoder layers, feed-forward 1024, dropout 0.1; SDPA inside nn.MultiheadAttention), 900 learned queries as
    DINO / Deformable-DETR use, a class head (91 + no-object) and a 3-layer box MLP with sigmoid; ~15.4 M params
    (~59 MiB fp32); AdamW 1e-4, grad clip 0.1; batches of 16 images 3 x 256 x 256 (8 x 8 = 64 tokens), each with
    500 ground-truth boxes (cxcywh) and labels; 4 steps planned; 4 GiB allowed. The loss is DETR's SetCriterion
    (weighted cross-entropy with eos_coef 0.1, L1 and GIoU on the matched pairs, the GIoU element-wise via
    torchvision.ops.generalized_box_iou_loss) after DETR's HungarianMatcher.forward (above), verbatim: under
    no_grad, out_prob and out_bbox flattened over batch x queries (N = 16 x 900 = 14400 rows) against all 16 x
    500 = 8000 targets concatenated (M = 8000 columns), so every [N, M] fp32 cost is 439.45 MiB and every
    pairwise corner tensor [N, M, 2] of box_iou / generalized_box_iou 878.9 MiB, while only the 16 diagonal
    blocks (900 x 500 each, 15/16 of the pairs are cross-image pairs that C.split(sizes, -1)[i][i] throws away)
    are used. At the matcher, step 0's forward graph is alive for the backward (estimated ~1.5 GiB: weights 59
    MiB, the resnet18 activations ~0.45 GiB, the 14400-token decoder ~0.5 GiB a layer); cost_class (439 MiB)
    and cost_bbox = cdist(p=1) (439 MiB) bring it to ~2.4 GiB, box_iou's lt (879 MiB) to ~3.3 GiB, and its rb
    (879 MiB) cannot fit: it dies in step 0's matcher asking 878.9 MiB in box_iou with ~3.3 GiB allocated (with
    a lighter graph, at rb - lt or the clamp, 879 MiB each: box_iou alone needs 4 x 879 MiB + the two costs,
    4.3 GiB, over the graph; only a graph above ~2.5 GiB would move the failure earlier, to cdist). Probe: the
    same costs computed per image (__per_image: 900 x 500 pairs an image, 1.7 MiB per [n, m] cost, the matcher
    negligible; the step peaks ~1.8-2.2 GiB in the backward, AdamW's 117 MiB of state from step 1, all 4
    steps)."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    import torchvision
    from torchvision.ops import generalized_box_iou_loss
    cap(DT_CAP, facts)
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    facts["variant"] = VARIANT or None
    per_image = VARIANT == "per_image"

    class MLP(nn.Module):
        def __init__(s, i, h, o, n):
            super().__init__()
            dims = [i] + [h] * (n - 1)
            s.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:] + [o]))

        def forward(s, x):
            for k, l in enumerate(s.layers):
                x = F.relu(l(x)) if k < len(s.layers) - 1 else l(x)
            return x

    class DETR(nn.Module):
        def __init__(s):
            super().__init__()
            backbone = torchvision.models.resnet18(weights=None)
            s.backbone = nn.Sequential(*list(backbone.children())[:-2])
            s.conv = nn.Conv2d(512, DT_D, 1)
            s.transformer = nn.Transformer(DT_D, DT_NH, DT_ENC, DT_DEC, dim_feedforward=DT_FF, dropout=0.1)
            s.class_embed = nn.Linear(DT_D, DT_CLS + 1)
            s.bbox_embed = MLP(DT_D, DT_D, 4, 3)
            s.query_pos = nn.Parameter(torch.rand(DT_Q, DT_D))
            s.row_embed = nn.Parameter(torch.rand(50, DT_D // 2))
            s.col_embed = nn.Parameter(torch.rand(50, DT_D // 2))

        def forward(s, inputs):
            h = s.conv(s.backbone(inputs))
            B, _, H, W = h.shape
            pos = torch.cat([s.col_embed[:W].unsqueeze(0).repeat(H, 1, 1),
                             s.row_embed[:H].unsqueeze(1).repeat(1, W, 1)], dim=-1).flatten(0, 1).unsqueeze(1)
            h = s.transformer(pos + 0.1 * h.flatten(2).permute(2, 0, 1),
                              s.query_pos.unsqueeze(1).repeat(1, B, 1)).transpose(0, 1)
            return {"pred_logits": s.class_embed(h), "pred_boxes": s.bbox_embed(h).sigmoid()}

    m = DETR().cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=1e-4)
    matcher = HungarianMatcher(DT_COST_CLASS, DT_COST_BBOX, DT_COST_GIOU, per_image=per_image)
    empty_weight = torch.ones(DT_CLS + 1, device="cuda")
    empty_weight[-1] = 0.1
    N, M = DT_B * DT_Q, DT_B * DT_T
    facts["settings"] = dict(
        kind="training (DETR-style detector, Hungarian matching)", framework="plain PyTorch (DETR demo model, "
        "DETR's HungarianMatcher and box_ops)", amp=None, dtype="float32", optimizer="torch.optim.AdamW",
        backbone="torchvision resnet18 (random weights)", d_model=DT_D, heads=DT_NH, encoder_layers=DT_ENC,
        decoder_layers=DT_DEC, dim_feedforward=DT_FF, num_queries=DT_Q, num_classes=DT_CLS, batch=DT_B,
        image=[DT_IMG, DT_IMG], targets_per_image=DT_T, steps_planned=DT_STEPS, assignment=matcher.lsa_name,
        matcher="per image (each image's queries vs its own targets)" if per_image else
        "batch-wide (DETR's HungarianMatcher: bs*num_queries x all targets concatenated)",
        cost_rows=DT_Q if per_image else N, cost_cols=DT_T if per_image else M,
        batch_cost_bytes=N * M * 4, batch_pairwise_corner_bytes=N * M * 2 * 4,
        per_image_cost_bytes=DT_Q * DT_T * 4, used_fraction_of_batch_pairs=1.0 / DT_B,
        cap_bytes=int(DT_CAP * GiB),
        right_advice="capacity at one operation: the Hungarian matcher's batch-wide pairwise cost (DETR's "
                     "HungarianMatcher flattens 16 x 900 queries against all 16 x 500 targets: [14400, 8000] "
                     "costs of 439 MiB each and box_iou's [14400, 8000, 2] corner tensors of 879 MiB each), where "
                     "15/16 of the pairs are cross-image pairs thrown away by C.split(sizes, -1)[i][i]; it dies "
                     "in step 0 under no_grad in generalized_box_iou / box_iou. First: compute the costs per "
                     "image (each image's queries against only its own targets: fix_probes __per_image runs all "
                     "4 steps), or chunk the matcher; fewer queries or targets only if that is not enough",
        report_must_not_say="a leak or growth (it dies in step 0); gradient checkpointing or a smaller batch as "
                            "the first fix; optimizer-state advice (no AdamW state exists yet, weights 59 MiB); "
                            "fragmentation / expandable segments; no_grad (the matcher runs under no_grad)")
    g = torch.Generator(device="cuda").manual_seed(0)

    def make_targets():
        ts = []
        for _ in range(DT_B):
            c = 0.05 + 0.9 * torch.rand(DT_T, 2, device="cuda", generator=g)
            wh = 0.01 + 0.05 * torch.rand(DT_T, 2, device="cuda", generator=g)
            ts.append(dict(labels=torch.randint(DT_CLS, (DT_T,), device="cuda", generator=g),
                           boxes=torch.cat([c, wh], -1)))
        return ts

    def set_criterion(outputs, targets, indices):
        """DETR's SetCriterion (labels, boxes), the GIoU term element-wise on the matched pairs."""
        batch_idx = torch.cat([torch.full_like(src, i) for i, (src, _) in enumerate(indices)]).cuda()
        src_idx = torch.cat([src for (src, _) in indices]).cuda()
        logits = outputs["pred_logits"]
        target_classes_o = torch.cat([t["labels"][J.cuda()] for t, (_, J) in zip(targets, indices)])
        target_classes = torch.full(logits.shape[:2], DT_CLS, dtype=torch.int64, device="cuda")
        target_classes[batch_idx, src_idx] = target_classes_o
        loss_ce = F.cross_entropy(logits.transpose(1, 2), target_classes, empty_weight)
        src_boxes = outputs["pred_boxes"][batch_idx, src_idx]
        target_boxes = torch.cat([t["boxes"][J.cuda()] for t, (_, J) in zip(targets, indices)], dim=0)
        num_boxes = float(target_boxes.shape[0])
        loss_bbox = F.l1_loss(src_boxes, target_boxes, reduction="none").sum() / num_boxes
        loss_giou = generalized_box_iou_loss(box_cxcywh_to_xyxy(src_boxes), box_cxcywh_to_xyxy(target_boxes),
                                             reduction="sum") / num_boxes
        return loss_ce + DT_COST_BBOX * loss_bbox + DT_COST_GIOU * loss_giou

    def body():
        for s in range(DT_STEPS):
            imgs = torch.randn(DT_B, 3, DT_IMG, DT_IMG, device="cuda", generator=g)
            targets = make_targets()
            outputs = m(imgs)
            steplog(facts, key="phases", step=s, phase="forward")
            indices = matcher(outputs, targets)
            steplog(facts, key="phases", step=s, phase="matcher")
            loss = set_criterion(outputs, targets, indices)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 0.1)
            opt.step()
            lv = float(loss)
            del imgs, targets, outputs, indices, loss
            steplog(facts, step=s, loss=lv, optimizer_state_bytes=R.opt_state_bytes(opt))
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 2. HF generate: a batch padded to its longest prompt

GP_L, GP_D, GP_I, GP_H, GP_V = 4, 1024, 2816, 16, 32000
GP_N, GP_B, GP_NEW, GP_LONG, GP_LONG_IDX, GP_MIN, GP_MAX, GP_CAP = 32, 8, 32, 3072, 13, 64, 256, 4.0
GP_TOKEN_BUDGET = 4096      # __bucketed: batch x longest prompt at most this many tokens


def s_hf_generate_padded_longest_prompt_oom(out, facts):
    """Offline batched generation with Hugging Face transformers: a LlamaForCausalLM built from a LlamaConfig
    (4 layers, hidden 1024, 16 heads with 16 KV heads, intermediate 2816, vocab 32000, untied head; 116.9 M
    params, 223 MiB in bf16) with attn_implementation="eager", cast to bf16, eval(), under torch.inference_mode()
    (generate is no_grad already). 32 prompts of random token ids (no tokenizer): 31 of 64-256 tokens and one
    (prompt 13) of 3072 tokens (a pasted document); batches of 8 in dataset order, each left-padded to its
    longest prompt with an attention_mask as tokenizer(padding=True, padding_side="left") does, then greedy
    generate(max_new_tokens = min_new_tokens = 32). 4 GiB allowed. Batch 0 (<= 256 tokens) is small. Batch 1
    holds prompt 13, so all 8 rows are padded to 3072 and the prefill's eager attention materialises per layer
    the scores 8 x 16 heads x 3072 x 3072: 2.25 GiB in bf16 (the softmax's fp32 copy 4.5 GiB), with the 4-D
    additive mask 8 x 1 x 3072 x 3072 bf16 (144 MiB); before layer 0's QK^T ~0.6 GiB is allocated (weights 223
    MiB, the mask, the 48 MiB hidden states, q / k / v, layer 0's 96 MiB of K, V); the matmul's 2.25 GiB fits
    (~2.85 GiB), the `* scaling` product (another 2.25 GiB) cannot: it dies in batch 1's prefill, layer 0's
    eager attention, asking 2.25 GiB with ~2.85 GiB allocated (the KV cache of the padded batch would be only
    388 MiB: 4 layers x K, V x 8 x 3103 x 1024 bf16). Probe: the prompts sorted by length and batched under a
    token budget of 4096 (batch x longest prompt; __bucketed: the 31 short prompts in batches of 8, the 3072-
    token prompt alone: its scores 1 x 16 x 3072^2 = 288 MiB bf16, 576 MiB as fp32 softmax, the prefill peaks
    ~1.5 GiB; all 32 prompts answered)."""
    torch = R._torch()
    from transformers import AutoModelForCausalLM, LlamaConfig
    cap(GP_CAP, facts)
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    facts["variant"] = VARIANT or None
    bucketed = VARIANT == "bucketed"
    cfg = LlamaConfig(hidden_size=GP_D, intermediate_size=GP_I, num_hidden_layers=GP_L, num_attention_heads=GP_H,
                      num_key_value_heads=GP_H, vocab_size=GP_V, max_position_embeddings=4096,
                      tie_word_embeddings=False, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    try:
        m = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    except (TypeError, ValueError):  # a transformers without the keyword: set it on the model below
        m = AutoModelForCausalLM.from_config(cfg)
    if getattr(m.config, "_attn_implementation", None) != "eager" and hasattr(m, "set_attn_implementation"):
        m.set_attn_implementation("eager")
    m = m.to(torch.bfloat16).cuda().eval()
    m.generation_config.pad_token_id = 0
    model_facts(m, facts)
    R.hf_cfg_facts(m, facts)
    gen = torch.Generator().manual_seed(0)
    lens = torch.randint(GP_MIN, GP_MAX + 1, (GP_N,), generator=gen).tolist()
    lens[GP_LONG_IDX] = GP_LONG
    prompts = [torch.randint(3, GP_V, (n,), generator=gen) for n in lens]
    if bucketed:
        order = sorted(range(GP_N), key=lambda i: lens[i])
        batches, cur = [], []
        for i in order:
            if cur and (len(cur) + 1 > GP_B or (len(cur) + 1) * lens[i] > GP_TOKEN_BUDGET):
                batches.append(cur)
                cur = []
            cur.append(i)
        batches.append(cur)
    else:
        batches = [list(range(a, min(a + GP_B, GP_N))) for a in range(0, GP_N, GP_B)]
    padded = [len(b) * max(lens[i] for i in b) for b in batches]
    facts["settings"] = dict(
        kind="inference (batched generate over prompts of mixed length)", framework="transformers generate() "
        "(LlamaForCausalLM from a config)", amp=None, dtype="bfloat16", grad="torch.inference_mode",
        attention="eager", layers=GP_L, hidden=GP_D, heads=GP_H, kv_heads=GP_H, vocab=GP_V, prompts=GP_N,
        prompt_lengths=lens, long_prompt_index=GP_LONG_IDX, long_prompt_len=GP_LONG, max_new_tokens=GP_NEW,
        padding="left, to the batch's longest prompt, attention_mask",
        batching="sorted by length, token budget %d (batch x longest)" % GP_TOKEN_BUDGET if bucketed
        else "dataset order, %d prompts a batch" % GP_B,
        batches=batches, padded_tokens_per_batch=padded, real_tokens=sum(lens),
        padded_batch_scores_bytes=GP_B * GP_H * GP_LONG * GP_LONG * 2,
        padded_batch_mask_bytes=GP_B * GP_LONG * GP_LONG * 2,
        long_alone_scores_bytes=GP_H * GP_LONG * GP_LONG * 2,
        padded_batch_kv_bytes=GP_L * 2 * GP_B * (GP_LONG + GP_NEW - 1) * GP_D * 2,
        cap_bytes=int(GP_CAP * GiB),
        right_advice="capacity in the generate prefill, driven by padding to the longest prompt: batch 1 holds "
                     "one 3072-token prompt among 64-256-token ones, so all 8 rows are left-padded to 3072 and "
                     "the eager prefill attention makes 8 x 16 x 3072 x 3072 scores (2.25 GiB bf16 a tensor) "
                     "in layer 0; the other prompts pay for the long one. First: sort / bucket prompts by "
                     "length (a token budget per batch) or generate the long prompt separately (fix_probes "
                     "__bucketed answers all 32); an SDPA / flash attention implementation also avoids the "
                     "L x L scores",
        report_must_not_say="a leak or growth; training advice (gradient checkpointing, accumulation, optimizer "
                            "state, FSDP); no_grad or inference_mode missing (generate runs without grad); "
                            "fragmentation / expandable segments first; the KV cache or max_new_tokens as the "
                            "cause (it dies in the prefill)")

    def collate(b):
        """Left padding with an attention mask, as a tokenizer with padding_side="left" returns them."""
        L = max(lens[i] for i in b)
        ids = torch.zeros(len(b), L, dtype=torch.long)
        mask = torch.zeros(len(b), L, dtype=torch.long)
        for r, i in enumerate(b):
            ids[r, L - lens[i]:] = prompts[i]
            mask[r, L - lens[i]:] = 1
        return ids.cuda(), mask.cuda()

    def body():
        answers = {}
        for k, b in enumerate(batches):
            with torch.inference_mode():
                ids, mask = collate(b)
                steplog(facts, key="phases", batch=k, phase="generate", rows=len(b), padded_len=ids.shape[1])
                o = m.generate(input_ids=ids, attention_mask=mask, max_new_tokens=GP_NEW, min_new_tokens=GP_NEW,
                               do_sample=False, pad_token_id=0)
                for r, i in enumerate(b):
                    answers[i] = o[r, ids.shape[1]:].cpu()
                del ids, mask, o
            steplog(facts, key="batches", batch=k, prompts=b, rows=len(b), padded_tokens=padded[k],
                    answered=len(answers))
        facts["answered"] = len(answers)
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 3. a custom autograd.Function's global cache

CA_V, CA_D, CA_H, CA_L, CA_B, CA_T, CA_STEPS, CA_CAP = 8192, 512, 8, 4, 8, 512, 30, 3.0
GELU_C = math.sqrt(2.0 / math.pi)
_ACT_DEBUG = {}   # (step, layer) -> the pre-activation FusedGELU saw: "dump them when the loss goes NaN"
_DEBUG_STEP = [0]


def fused_gelu_fn():
    """A hand-written tanh-GELU as an autograd.Function (forward and backward written out, as users do to save
    the intermediate of the composite op). Unless H38_VARIANT=no_cache, its forward also stores its input in
    the module-level _ACT_DEBUG dict keyed by (step, layer) "for NaN debugging"; nothing ever clears it."""
    torch = R._torch()
    keep = VARIANT != "no_cache"

    class FusedGELU(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, layer):
            ctx.save_for_backward(x)
            if keep:
                _ACT_DEBUG[(_DEBUG_STEP[0], layer)] = x
            return 0.5 * x * (1.0 + torch.tanh(GELU_C * (x + 0.044715 * x * x * x)))

        @staticmethod
        def backward(ctx, grad_out):
            x, = ctx.saved_tensors
            x2 = x * x
            t = torch.tanh(GELU_C * (x + 0.044715 * x2 * x))
            d = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3 * 0.044715 * x2)
            return grad_out * d, None
    return FusedGELU


def s_custom_autograd_ctx_global_cache_leak_oom(out, facts):
    """Training a small GPT whose MLP uses a hand-written torch.autograd.Function (FusedGELU above: tanh-GELU
    with its own backward, ctx.save_for_backward(x)), plain PyTorch, fp32, no autocast: 4 pre-LN blocks of width
    512 (8 heads, F.scaled_dot_product_attention causal, MLP 512 -> 2048 -> 512), learned positions, vocab 8192,
    untied head; 21.3 M params (81 MiB fp32); AdamW, batches of 8 x 512 tokens, 30 steps planned; 3 GiB
    allowed. The Function's forward also puts its input x into a module-level dict _ACT_DEBUG[(step, layer)]
    "to dump the activations when the loss goes NaN", never cleared: each step keeps its 4 MLP
    pre-activations, 4 x (4096 tokens x 2048) fp32 = 4 x 32 MiB = 128 MiB, after the step's backward has freed
    the rest of its graph. A step itself peaks ~1.4-1.6 GiB (weights 81 MiB, grads 81 MiB, AdamW state 162 MiB
    from step 0's update on, ~0.7 GiB saved by the 4 blocks, logits and log-softmax 128 MiB each and their
    gradients); allocated between steps is ~0.24 GiB (weights + AdamW state) + 128 MiB x (steps done), so the
    cap is reached after ~12 steps (a step needs ~1.2 GiB over what is kept; 0.24 + 1.2 + 0.125 x 12 = 2.94
    GiB): it dies in a step's forward or backward around step 12 (10-14 given these estimates), on an ordinary
    activation-sized request (8-128 MiB). Probe: the same Function with only ctx.save_for_backward (__no_cache:
    flat ~0.24 GiB between steps, all 30 steps, peak ~1.5 GiB)."""
    torch = R._torch()
    import torch.nn as nn
    import torch.nn.functional as F
    cap(CA_CAP, facts)
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    facts["variant"] = VARIANT or None
    FusedGELU = fused_gelu_fn()

    class Block(nn.Module):
        def __init__(s, idx):
            super().__init__()
            s.idx = idx
            s.ln1, s.ln2 = nn.LayerNorm(CA_D), nn.LayerNorm(CA_D)
            s.qkv = nn.Linear(CA_D, 3 * CA_D)
            s.proj = nn.Linear(CA_D, CA_D)
            s.fc = nn.Linear(CA_D, 4 * CA_D)
            s.fc2 = nn.Linear(4 * CA_D, CA_D)

        def forward(s, x):
            B, T, C = x.shape
            q, k, v = s.qkv(s.ln1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, CA_H, C // CA_H).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + s.proj(y.transpose(1, 2).contiguous().view(B, T, C))
            return x + s.fc2(FusedGELU.apply(s.fc(s.ln2(x)), s.idx))

    class GPT(nn.Module):
        def __init__(s):
            super().__init__()
            s.wte = nn.Embedding(CA_V, CA_D)
            s.wpe = nn.Embedding(CA_T, CA_D)
            s.blocks = nn.ModuleList(Block(i) for i in range(CA_L))
            s.ln_f = nn.LayerNorm(CA_D)
            s.head = nn.Linear(CA_D, CA_V, bias=False)

        def forward(s, idx):
            x = s.wte(idx) + s.wpe(torch.arange(idx.shape[1], device=idx.device))
            for b in s.blocks:
                x = b(x)
            return s.head(s.ln_f(x))

    m = GPT().cuda().train()
    model_facts(m, facts)
    P = sum(p.numel() for p in m.parameters())
    opt = torch.optim.AdamW(m.parameters(), lr=3e-4)
    per_step = CA_L * CA_B * CA_T * 4 * CA_D * 4
    facts["settings"] = dict(
        kind="training (GPT with a custom autograd.Function activation)", framework="plain PyTorch "
        "(torch.autograd.Function)", amp=None, dtype="float32", optimizer="torch.optim.AdamW", layers=CA_L,
        d_model=CA_D, heads=CA_H, mlp_hidden=4 * CA_D, vocab=CA_V, batch=CA_B, seq_len=CA_T,
        steps_planned=CA_STEPS, params=P, param_bytes=P * 4, adam_state_bytes=2 * P * 4,
        custom_function="FusedGELU (tanh GELU, ctx.save_for_backward(x))",
        global_cache="none (only ctx.save_for_backward)" if VARIANT == "no_cache" else
        "module-level dict _ACT_DEBUG[(step, layer)] = x in forward, never cleared",
        kept_per_step_bytes=0 if VARIANT == "no_cache" else per_step, kept_per_call_bytes=per_step // CA_L,
        cap_bytes=int(CA_CAP * GiB),
        right_advice="a leak / growth across steps: the custom autograd.Function's forward stores its input in "
                     "a module-level dict keyed by (step, layer), so every step's 4 MLP pre-activations (128 MiB "
                     "a step) stay referenced after the backward; allocated between steps rises by ~128 MiB a "
                     "step until the cap, around step 12. First: release the references (keep only "
                     "ctx.save_for_backward, or store detached CPU copies / statistics, or clear the dict each "
                     "step: fix_probes __no_cache runs all 30 steps flat)",
        report_must_not_say="a smaller batch, gradient checkpointing or accumulation as the fix (one step fits "
                            "with room: ~1.5 GiB of 3); fragmentation / expandable segments; optimizer-state "
                            "advice (AdamW state is 162 MiB and constant); no_grad (this is training); capacity "
                            "of one step as the cause")
    g = torch.Generator(device="cuda").manual_seed(0)

    def body():
        for s in range(CA_STEPS):
            _DEBUG_STEP[0] = s
            x = torch.randint(CA_V, (CA_B, CA_T + 1), device="cuda", generator=g)
            logits = m(x[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, CA_V), x[:, 1:].reshape(-1))
            del logits
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            lv = float(loss)
            del x, loss
            kept = sum(t.numel() * t.element_size() for t in _ACT_DEBUG.values())
            steplog(facts, step=s, loss=lv, debug_entries=len(_ACT_DEBUG), debug_bytes=kept,
                    optimizer_state_bytes=R.opt_state_bytes(opt))
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 4. an inference server after one big batch, healthy

RS_REQ, RS_BIG_AT, RS_BIG, RS_SMALL_MAX, RS_RES = 120, 3, 256, 8, 224


def s_reserved_high_after_one_big_batch_healthy(out, facts):
    """An image-classification inference server loop: torchvision resnet50 (random weights, 25.6 M params, 48.8
    MiB in fp16), .half(), eval(), torch.inference_mode(); 120 requests, each a batch of 3 x 224 x 224 images
    made on the CPU, moved with .to("cuda", torch.float16), answered with the top-5 classes (.cpu()). Requests
    carry 1-8 images, except request 3, a client's bulk request of 256 images. That one forward peaks ~1.2-1.6
    GiB (the stem's conv output 256 x 64 x 112 x 112 fp16 = 392 MiB and its BatchNorm output, then in layer1's
    first block the 392 MiB conv3 / bn3 outputs beside the downsample branch's 392 MiB conv and bn outputs);
    the caching allocator keeps those segments when the tensors are freed, so reserved stays ~1.3-2 GiB (with
    cuDNN workspaces) for the other 116 requests while allocated goes back to its steady ~50-90 MiB between
    requests (the 49 MiB of weights and the cuBLAS workspace) and a small request's transients (a batch of 8:
    the stem's output is 12.25 MiB) are carved from the cached segments. No cap, no OOM, no growth. The
    snapshot is dumped after the last request. Healthy. Probe (a comparison): torch.cuda.empty_cache() right
    after the big request (__empty_cache_after_big: reserved drops back to the small requests' own ~0.1-0.2
    GiB; allocated the same)."""
    torch = R._torch()
    import torchvision
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    facts["variant"] = VARIANT or None
    m = torchvision.models.resnet50(weights=None).half().cuda().eval()
    model_facts(m, facts)
    gen = torch.Generator().manual_seed(0)
    sizes = [RS_BIG if i == RS_BIG_AT else int(torch.randint(1, RS_SMALL_MAX + 1, (1,), generator=gen))
             for i in range(RS_REQ)]
    facts["settings"] = dict(
        kind="inference (image-classification server loop)", framework="plain PyTorch + torchvision resnet50",
        amp=None, dtype="float16 weights", grad="torch.inference_mode", requests=RS_REQ, image=[RS_RES, RS_RES],
        request_sizes=sizes, big_request_index=RS_BIG_AT, big_batch=RS_BIG, small_batch_max=RS_SMALL_MAX,
        empty_cache_after_big=VARIANT == "empty_cache_after_big",
        big_stem_output_bytes=RS_BIG * 64 * (RS_RES // 2) ** 2 * 2,
        small_stem_output_bytes=RS_SMALL_MAX * 64 * (RS_RES // 2) ** 2 * 2,
        memory_fraction=None, alloc_conf=None,
        right_advice="healthy: nothing urgent; reserved stays at the big request's level (~1.3-2 GiB) after "
                     "request 3's 256 images while allocated returns to ~50-90 MiB (the fp16 weights) between "
                     "requests: that is the caching allocator keeping the freed segments for reuse, not a leak "
                     "(allocated is flat over the 116 later requests). torch.cuda.empty_cache() only if another "
                     "process needs the memory (fix_probes __empty_cache_after_big: reserved drops, allocated "
                     "the same)",
        report_must_not_say="an OOM or OOM advice; a leak or growth (allocated is flat); fragmentation as a "
                            "warning (the inactive cached memory is reusable); expandable segments or "
                            "empty_cache as a fix for a problem; training advice; no_grad (inference_mode is on)")

    for i, B in enumerate(sizes):
        batch = torch.randn(B, 3, RS_RES, RS_RES, generator=gen)
        with torch.inference_mode():
            x = batch.to("cuda", torch.float16)
            logits = m(x)
            top5 = logits.float().softmax(-1).topk(5, dim=-1).indices.cpu()
            del x, logits
        if i == RS_BIG_AT and VARIANT == "empty_cache_after_big":
            torch.cuda.empty_cache()
        steplog(facts, key="requests", request=i, batch=B, answered=int(top5.shape[0]))
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


# ---------------------------------------------------------------- collecting the fix probes

def collect(root):
    """Write each corpus run's <run>__<variant> results into its facts.json as fix_probes."""
    R.collect_fix_probes(root, CORPUS_RUNS, "tools/record_heldout38.py",
                         counts=("steps", "phases", "batches", "requests"), cap_bytes=True, retries=True)


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "detr_matcher_cost_matrix_oom": dict(fn=s_detr_matcher_cost_matrix_oom, group="solo", timeout=120),
    "hf_generate_padded_longest_prompt_oom": dict(fn=s_hf_generate_padded_longest_prompt_oom, group="solo",
                                                  timeout=120),
    "custom_autograd_ctx_global_cache_leak_oom": dict(fn=s_custom_autograd_ctx_global_cache_leak_oom, group="solo",
                                                      timeout=120),
    "reserved_high_after_one_big_batch_healthy": dict(fn=s_reserved_high_after_one_big_batch_healthy, group="solo",
                                                      timeout=120),
})
CORPUS_RUNS = list(R.SCENARIOS)
VARIANTS = [("detr_matcher_cost_matrix_oom", "per_image"), ("hf_generate_padded_longest_prompt_oom", "bucketed"),
            ("custom_autograd_ctx_global_cache_leak_oom", "no_cache"),
            ("reserved_high_after_one_big_batch_healthy", "empty_cache_after_big")]
for _n, _v in VARIANTS:
    R.SCENARIOS[_n + "__" + _v] = dict(R.SCENARIOS[_n], env={"H38_VARIANT": _v})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--collect":
        collect(sys.argv[2])
        sys.exit(0)
    if len(sys.argv) == 2 and sys.argv[1] != "--one":
        sys.argv += CORPUS_RUNS + [n for n in R.SCENARIOS if "__" in n]
    R.main()
