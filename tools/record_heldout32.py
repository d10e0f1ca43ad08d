#!/usr/bin/env python3
"""A thirty-second held-out set (python3 record_heldout32.py OUTDIR [names...]; same outputs as record_runs.py,
each scenario in its own process). Structure as set 31 (tools/record_heldout31.py): every corpus run is "solo"
(alone on the GPU); the <run>__<variant> scenarios are the same run with the fix a report proposes
(H32_VARIANT), whose results `--collect OUTDIR` writes into each run's facts.json as fix_probes
(record_runs.collect_fix_probes). The OOM observer dumps at every out-of-memory failure (the same path each
time): the snapshot is the last failure's, the one raised. facts["settings"] says, beside the run's settings and
key byte counts, the right first advice ("right_advice") and what a report must not say ("report_must_not_say"),
decided from how the run is built."""
import collections, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log


R.attach_oom = R.attach_oom_every  # run_oom attaches this one
VARIANT = os.environ.get("H32_VARIANT", "")


# ---------------------------------------------------------------- 1. resnet50 inference over variable resolutions

VR_B, VR_CAP, VR_CHUNK, VR_MAXRES = 32, 4, 8, 512
VR_RES = [224, 224, 224, 224, 320, 320, 384, 384, 448, 512, 512, 1024]


def s_resnet_variable_resolution_infer_oom(out, facts):
    """Batch inference over a folder of images bucketed by size: torchvision resnet50 (random weights, 25.6 M
    params fp32), eval(), torch.inference_mode(), fp32 (no autocast); 12 batches of 32 images whose side is
    224 x4, 320 x2, 384 x2, 448, 512 x2 and last 1024 (the few high-resolution images, sorted last). 4 GiB
    allowed: every batch up to 512 fits (the stem output at 512 is 32 x 64 x 256 x 256 fp32 = 512 MiB); the
    last batch at 1024 needs four times that (its stem output alone 2 GiB, layer1's output and its downsample
    branch 2 GiB each) and dies. Probes: resize inputs to at most 512 per side before the forward (__max512),
    or run the 1024 batch as chunks of 8 images (__chunk8)."""
    torch = R._torch()
    import torchvision
    import torch.nn.functional as F
    cap(VR_CAP, facts)
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    facts["variant"] = VARIANT or None
    m = torchvision.models.resnet50().cuda().eval()
    model_facts(m, facts)
    facts["settings"] = dict(
        kind="inference (batched, variable input resolution)", framework="torchvision resnet50 (own loop)",
        amp=None, dtype="float32", grad="torch.inference_mode", batch=VR_B, resolutions=VR_RES, cap_bytes=VR_CAP * GiB,
        input_bytes_largest=VR_B * 3 * 1024 * 1024 * 4, stem_output_bytes_largest=VR_B * 64 * 512 * 512 * 4,
        stem_output_bytes_512=VR_B * 64 * 256 * 256 * 4,
        preprocessing="resize to <= %d" % VR_MAXRES if VARIANT == "max512" else None,
        largest_batch_chunk=VR_CHUNK if VARIANT == "chunk8" else None,
        right_advice="capacity of the largest input: the last batch is 32 images of 1024 x 1024 (4 times the "
                     "pixels of the 512 batches that fitted; its stem output alone is 2 GiB fp32); resize "
                     "high-resolution inputs (fix_probes __max512 runs all 12 batches) or run the largest "
                     "bucket in smaller chunks (__chunk8), or bf16 / channels_last",
        report_must_not_say="a leak or growth (nothing is kept between batches); fragmentation / expandable "
                            "segments; no_grad (inference_mode is on); training advice (checkpointing, "
                            "accumulation, optimizer state, FSDP / offload)")
    g = torch.Generator(device="cuda").manual_seed(0)

    def body():
        preds = []
        for i, r in enumerate(VR_RES):
            with torch.inference_mode():
                x = torch.randn(VR_B, 3, r, r, device="cuda", generator=g)
                if VARIANT == "max512" and r > VR_MAXRES:
                    x = F.interpolate(x, size=(VR_MAXRES, VR_MAXRES), mode="bilinear", antialias=True)
                if VARIANT == "chunk8" and r > VR_MAXRES:
                    p = torch.cat([m(c).argmax(-1) for c in x.split(VR_CHUNK)])
                else:
                    p = m(x).argmax(-1)
                preds.append(p.cpu())
                del x, p
            steplog(facts, key="batches", batch=i, res=r, batch_size=VR_B)
        facts["predictions"] = sum(int(p.numel()) for p in preds)
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 2. a rolling window of detached embeddings

XB_B, XB_D, XB_K, XB_STEPS, XB_IMG = 256, 8192, 24, 48, 64


def s_xbm_rolling_embeddings_healthy(out, facts):
    """Metric learning with a cross-batch memory (XBM): torchvision resnet18 (random weights) with fc replaced by
    Linear(512, 8192), AdamW, bf16 autocast, batches of 256 random 64 x 64 images; each step's L2-normalised
    embeddings are detached, cast to float32 and appended to a collections.deque(maxlen=24) (256 x 8192 x 4 B =
    8 MiB an item, 192 MiB when full); the loss is InfoNCE of the batch against torch.cat of the window (read
    every step). 48 steps, no cap: allocated between steps rises by 8 MiB a step for the first 24 steps, then
    stays flat (the oldest item is dropped as the newest arrives). Snapshot after the last step. Healthy."""
    torch = R._torch()
    import torchvision
    import torch.nn.functional as F
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    m = torchvision.models.resnet18()
    m.fc = torch.nn.Linear(512, XB_D)
    m = m.cuda().train()
    model_facts(m, facts)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    item = XB_B * XB_D * 4
    facts["settings"] = dict(
        kind="training (metric learning with a bounded cross-batch memory)", framework="torchvision resnet18 "
        "(own loop)", amp="bf16 autocast", optimizer="torch.optim.AdamW", batch=XB_B, image=XB_IMG, embed_dim=XB_D,
        window=XB_K, steps=XB_STEPS, bytes_per_kept_item=item, window_bytes_full=item * XB_K, memory_fraction=None,
        right_advice="healthy: nothing urgent; allocated between steps rises by one 8 MiB embedding batch a step "
                     "for the first 24 steps (a deque(maxlen=24) of detached embeddings filling up) and is flat "
                     "after: a bounded window, not a leak",
        report_must_not_say="an OOM or OOM advice; a leak or unbounded growth (the window is bounded at 24 "
                            "detached items); a kept autograd graph; warning-level fragmentation; a smaller batch, "
                            "checkpointing or FSDP as needed")
    g = torch.Generator(device="cuda").manual_seed(0)
    window = collections.deque(maxlen=XB_K)
    for s in range(XB_STEPS):
        x = torch.randn(XB_B, 3, XB_IMG, XB_IMG, device="cuda", generator=g)
        with torch.amp.autocast("cuda", dtype=torch.bfloat16):
            z = F.normalize(m(x).float(), dim=-1)
        bank = torch.cat([z.detach()] + list(window)) if window else z.detach()
        logits = z @ bank.t() / 0.07
        loss = F.cross_entropy(logits, torch.arange(XB_B, device="cuda"))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        window.append(z.detach().float())
        steplog(facts, step=s, loss=float(loss), window=len(window),
                window_bytes=sum(t.numel() * t.element_size() for t in window))
        del x, z, bank, logits, loss
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


# ---------------------------------------------------------------- 3. Lightning: validation outputs never cleared

LO_V, LO_TB, LO_VB, LO_T, LO_TRAIN, LO_VAL, LO_EPOCHS, LO_CAP = 8192, 8, 16, 256, 4, 4, 12, 2


def s_lightning_val_outputs_never_cleared_oom(out, facts):
    """A LightningModule causal LM (record_runs.tiny_gpt: 4 SDPA blocks of width 512, 8 heads, vocab 8192, ~21 M
    params fp32), Trainer(precision="bf16-mixed", max_epochs=12, limit_train_batches=4, limit_val_batches=4,
    num_sanity_val_steps=0), AdamW, training batches of 8 x 256, validation batches of 16 x 256; validation_step
    appends dict(logits=..., labels=...) (16 x 256 x 8192 bf16 logits = 64 MiB, no graph: Lightning validates
    under inference_mode) to self.val_outputs, and on_validation_epoch_end computes an accuracy from them but
    never clears the list: 256 MiB more after every validation epoch. 2 GiB allowed: it dies during a later
    epoch's validation. Probe: self.val_outputs.clear() at the end of on_validation_epoch_end (__clear)."""
    torch = R._torch()
    import lightning as L
    import torch.nn.functional as F
    cap(LO_CAP, facts)
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    facts["variant"] = VARIANT or None

    class LitLM(L.LightningModule):
        def __init__(s):
            super().__init__()
            s.net = R.tiny_gpt(vocab=LO_V, d=512, h=8, L=4)
            s.val_outputs = []

        def training_step(s, batch, i):
            x = batch[0]
            logits = s.net(x[:, :-1])
            return F.cross_entropy(logits.float().reshape(-1, LO_V), x[:, 1:].reshape(-1))

        def validation_step(s, batch, i):
            x = batch[0]
            logits = s.net(x[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, LO_V), x[:, 1:].reshape(-1))
            s.log("val_loss", loss)
            s.val_outputs.append(dict(logits=logits, labels=x[:, 1:]))
            steplog(facts, key="eval_batches", epoch=s.current_epoch, batch=i, kept=len(s.val_outputs))
            return loss

        def on_validation_epoch_end(s):
            acc = torch.stack([(o["logits"].argmax(-1) == o["labels"]).float().mean() for o in s.val_outputs])
            s.log("val_acc", acc.mean())
            steplog(facts, key="phases", phase="validation epoch end", epoch=s.current_epoch,
                    kept=len(s.val_outputs))
            if VARIANT == "clear":
                s.val_outputs.clear()

        def configure_optimizers(s):
            return torch.optim.AdamW(s.parameters(), lr=3e-4)

    class Rec(L.Callback):
        def on_train_batch_end(s, trainer, pl_module, outputs, batch, batch_idx):
            loss = outputs["loss"] if isinstance(outputs, dict) else outputs
            steplog(facts, step=trainer.global_step, epoch=trainer.current_epoch, batch_idx=batch_idx,
                    loss=float(loss))

    gen = torch.Generator().manual_seed(0)
    tl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(
        torch.randint(LO_V, (LO_TB * LO_TRAIN, LO_T + 1), generator=gen)), batch_size=LO_TB)
    vl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(
        torch.randint(LO_V, (LO_VB * LO_VAL, LO_T + 1), generator=gen)), batch_size=LO_VB)
    tr = L.Trainer(accelerator="gpu", devices=1, max_epochs=LO_EPOCHS, precision="bf16-mixed",
                   limit_train_batches=LO_TRAIN, limit_val_batches=LO_VAL, num_sanity_val_steps=0, logger=False,
                   enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                   callbacks=[Rec()])
    model = LitLM()
    model_facts(model, facts)
    per_batch = LO_VB * LO_T * LO_V * 2
    facts["settings"] = dict(
        kind="training with a validation every epoch", framework="lightning Trainer", amp="bf16-mixed",
        optimizer="torch.optim.AdamW", microbatch=LO_TB, val_batch=LO_VB, seq_len=LO_T, vocab=LO_V,
        max_epochs=LO_EPOCHS, train_batches_per_epoch=LO_TRAIN, val_batches_per_epoch=LO_VAL,
        kept_bytes_per_val_batch_bf16=per_batch, kept_bytes_per_val_epoch_bf16=per_batch * LO_VAL,
        val_outputs_cleared=VARIANT == "clear", cap_bytes=LO_CAP * GiB,
        right_advice="a leak of kept validation outputs across epochs: validation_step appends every batch's "
                     "logits (16 x 256 x 8192 bf16, 64 MiB; no graph, Lightning validates under inference_mode) "
                     "to self.val_outputs and on_validation_epoch_end never clears it, so memory grows by 256 MiB "
                     "every validation until the cap; clear the list at the end of on_validation_epoch_end "
                     "(fix_probes __clear runs all 12 epochs) or keep only the per-batch metric / move outputs "
                     "to the CPU",
        report_must_not_say="no_grad / inference_mode as the fix (validation already runs under inference_mode; "
                            "the kept logits have no graph); capacity advice first (a smaller batch, checkpointing, "
                            "accumulation, FSDP / offload, optimizer state); fragmentation / expandable segments; "
                            "the growth as autograd graphs")

    def body():
        tr.fit(model, train_dataloaders=tl, val_dataloaders=vl)
        facts["after_fit"] = R.mem()
    run_oom(out, facts, body)


# ---------------------------------------------------------------- 4. a frozen ViT backbone, linear probe, healthy

LP_B, LP_STEPS, LP_CLASSES = 128, 6, 100


def s_vit_frozen_backbone_linear_probe_healthy(out, facts):
    """Linear probing: torchvision vit_b_16 (random weights, 86 M params fp32) with every parameter
    requires_grad_(False) and heads replaced by a trainable Linear(768, 100); the backbone forward is NOT under
    torch.no_grad() (not needed: no input or parameter of it requires grad, so autograd saves nothing for it);
    AdamW over the head only, bf16 autocast, batches of 128 x 3 x 224 x 224, 6 steps, no cap. Snapshot after the
    last step. Healthy: the backbone's activations are transient (freed layer by layer), the optimizer state is
    the head's (2 x 77 K floats)."""
    torch = R._torch()
    import torchvision
    import torch.nn.functional as F
    start_history(max_entries=100000, facts=facts)
    torch.manual_seed(0)
    m = torchvision.models.vit_b_16()
    for p in m.parameters():
        p.requires_grad_(False)
    m.heads = torch.nn.Linear(768, LP_CLASSES)
    m = m.cuda().train()
    model_facts(m, facts)
    trainable = [p for p in m.parameters() if p.requires_grad]
    facts["trainable_params"] = sum(p.numel() for p in trainable)
    opt = torch.optim.AdamW(trainable, lr=1e-3)
    facts["settings"] = dict(
        kind="training (linear probe on a frozen backbone)", framework="torchvision vit_b_16 (own loop)",
        amp="bf16 autocast", optimizer="torch.optim.AdamW (head only)", batch=LP_B, image=224, steps=LP_STEPS,
        frozen="all backbone parameters requires_grad=False", backbone_no_grad=False, memory_fraction=None,
        right_advice="healthy: nothing urgent; the backbone is frozen (requires_grad False everywhere), so even "
                     "without torch.no_grad() autograd saves nothing for it and its activations are freed as the "
                     "forward goes; only the head trains. Memory is the fp32 weights plus one forward's "
                     "transients, flat between steps",
        report_must_not_say="an OOM or OOM advice; a leak or growth; a kept autograd graph or no_grad as a fix "
                            "(nothing of the backbone is saved for backward); optimizer-state advice; "
                            "checkpointing / FSDP; warning-level fragmentation")
    g = torch.Generator(device="cuda").manual_seed(0)
    for s in range(LP_STEPS):
        x = torch.randn(LP_B, 3, 224, 224, device="cuda", generator=g)
        y = torch.randint(LP_CLASSES, (LP_B,), device="cuda", generator=g)
        with torch.amp.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(m(x).float(), y)
        steplog(facts, key="phases", step=s, phase="forward done")
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        steplog(facts, step=s, loss=float(loss))
        del x, y, loss
    facts["optimizer_state_bytes"] = R.opt_state_bytes(opt)
    facts["oom"] = False
    dump(out, facts)
    write_log(out)


# ---------------------------------------------------------------- collecting the fix probes

def collect(root):
    """Write each corpus run's <run>__<variant> results into its facts.json as fix_probes."""
    R.collect_fix_probes(root, CORPUS_RUNS, "tools/record_heldout32.py",
                         counts=("steps", "phases", "batches", "eval_batches"), cap_bytes=True, retries=True)


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "resnet_variable_resolution_infer_oom": dict(fn=s_resnet_variable_resolution_infer_oom, group="solo",
                                                 timeout=60),
    "xbm_rolling_embeddings_healthy": dict(fn=s_xbm_rolling_embeddings_healthy, group="solo", timeout=90),
    "lightning_val_outputs_never_cleared_oom": dict(fn=s_lightning_val_outputs_never_cleared_oom, group="solo",
                                                    timeout=90),
    "vit_frozen_backbone_linear_probe_healthy": dict(fn=s_vit_frozen_backbone_linear_probe_healthy, group="solo",
                                                     timeout=90),
})
CORPUS_RUNS = list(R.SCENARIOS)
VARIANTS = [("resnet_variable_resolution_infer_oom", "max512"), ("resnet_variable_resolution_infer_oom", "chunk8"),
            ("lightning_val_outputs_never_cleared_oom", "clear")]
for _n, _v in VARIANTS:
    R.SCENARIOS[_n + "__" + _v] = dict(R.SCENARIOS[_n], env={"H32_VARIANT": _v})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--collect":
        collect(sys.argv[2])
        sys.exit(0)
    if len(sys.argv) == 2 and sys.argv[1] != "--one":
        sys.argv += CORPUS_RUNS + [n for n in R.SCENARIOS if "__" in n]
    R.main()
