#!/usr/bin/env python3
"""A twenty-first held-out set, inference-heavy (python3 record_heldout21.py OUTDIR [names...]; same outputs
as record_runs.py, each scenario in its own process). Recorded beside record_runs.py as
build/h21/record_heldout21.py. The OOM observer of this set dumps at every out-of-memory failure, as the
README's observer does (the same path each time): the snapshot is the last failure's, the one raised."""
import json, os, random, re, subprocess, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record_runs as R
from record_runs import GiB, MiB, cap, start_history, run_oom, steplog, model_facts, dump, write_log


R.attach_oom = R.attach_oom_every  # run_oom attaches this one


def llama_bf16(L, d=1024, heads=16, kv=16, inter=2816):
    torch = R._torch()
    m = R.hf_llama(L=L, d=d, inter=inter, heads=heads, kv=kv, vocab=32000, maxpos=2048)
    m = m.to(torch.bfloat16).cuda().eval()
    m.generation_config.eos_token_id = None
    m.generation_config.pad_token_id = 0
    return m


def s_hf_generate_num_return_sequences_oom(out, facts):
    """HF LlamaForCausalLM from a config (4 layers, hidden 1024, 16 heads and 16 KV heads: full multi-head
    K/V, 64 dims, inter 2816, vocab 32000) cast to bf16, generate(do_sample=True, top_k=50,
    num_return_sequences=32) on 16 prompts of 64 tokens, max_new_tokens = min_new_tokens = 1024 (no EOS):
    generate expands the batch to 512 sequences before the prefill, and the DynamicCache grows by
    512 x 16 KiB = 8 MiB a token (torch.cat per layer, K and V); 3 GiB allowed; 25000-entry ring buffer
    (it wraps: a decode step records ~400 events)."""
    torch = R._torch()
    cap(3, facts)
    start_history(max_entries=25000, facts=facts)
    torch.manual_seed(0)
    m = llama_bf16(L=4)
    model_facts(m, facts)
    R.hf_cfg_facts(m, facts)
    B, NRS, P, N = 16, 32, 64, 1024
    facts["settings"] = dict(kind="inference (generate, sampling)", framework="transformers generate()", amp=None,
                             weights="bf16", prompts=B, num_return_sequences=NRS, sequences=B * NRS, prompt_len=P,
                             max_new_tokens=N, do_sample=True, top_k=50, cache="DynamicCache (default)",
                             kv_bytes_per_token_per_seq=4 * 2 * 16 * 64 * 2,
                             kv_bytes_per_token_all_seqs=B * NRS * 4 * 2 * 16 * 64 * 2)
    ids = torch.randint(1, 32000, (B, P), device="cuda")

    def body():
        steplog(facts, key="generate", phase="model built")
        o = m.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True, top_k=50,
                       num_return_sequences=NRS, max_new_tokens=N, min_new_tokens=N)
        steplog(facts, key="generate", tokens=int(o.shape[1]))
    run_oom(out, facts, body)


def s_hf_static_cache_generate_healthy(out, facts):
    """HF LlamaForCausalLM from a config (4 layers, hidden 1024, 16/16 heads, vocab 32000) in bf16, greedy
    generate(cache_implementation="static", disable_compile=True) on 64 prompts of 448 tokens, twice: first
    max_new_tokens=32, then 48. Each call preallocates a StaticCache (K and V of every layer for
    prompt + new tokens, 64 x 16 x len x 64 bf16: ~0.5 GiB in all) before the prefill; the snapshot is
    dumped by a StoppingCriteria at the 40th token of the second call; no cap; healthy."""
    torch = R._torch()
    from transformers import StoppingCriteria, StoppingCriteriaList
    start_history(max_entries=40000, facts=facts)
    torch.manual_seed(0)
    m = llama_bf16(L=4)
    model_facts(m, facts)
    R.hf_cfg_facts(m, facts)
    B, P, N1, N2, AT = 64, 448, 32, 48, 40
    facts["settings"] = dict(kind="inference (generate, greedy)", framework="transformers generate()", amp=None,
                             weights="bf16", batch=B, prompt_len=P, calls=[N1, N2], cache_implementation="static",
                             disable_compile=True, snapshot_at_token=AT,
                             static_cache_bytes_call2=2 * 4 * B * 16 * (P + N2) * 64 * 2)
    ids = torch.randint(1, 32000, (B, P), device="cuda")

    class DumpAt(StoppingCriteria):
        def __init__(s, at):
            s.n, s.at = 0, at

        def __call__(s, input_ids, scores, **kw):
            s.n += 1
            if s.n == s.at:
                steplog(facts, key="generate", call=2, token=s.n)
                dump(out, facts)
            return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)

    o = m.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=N1,
                   min_new_tokens=N1, cache_implementation="static", disable_compile=True)
    steplog(facts, key="generate", call=1, tokens=int(o.shape[1]))
    del o
    o = m.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=N2,
                   min_new_tokens=N2, cache_implementation="static", disable_compile=True,
                   stopping_criteria=StoppingCriteriaList([DumpAt(AT)]))
    steplog(facts, key="generate", call=2, tokens=int(o.shape[1]))
    facts["model_has_cache_attr"] = hasattr(m, "_cache")
    facts["oom"] = False
    write_log(out)


def s_embedding_extract_fp32_oom(out, facts):
    """Embedding extraction with HF BertModel from a config (12 layers, hidden 768, 12 heads, inter 3072,
    vocab 30522, ~109 M params) in float32, eval(), torch.inference_mode(), batches of 128 x 256 token ids;
    each batch's last_hidden_state (128 x 256 x 768 fp32, 96 MiB) is appended to a list on the GPU (to be
    concatenated at the end); 4 GiB allowed: the kept outputs grow until OOM."""
    torch = R._torch()
    from transformers import BertConfig, BertModel
    cap(4, facts)
    start_history(max_entries=40000, facts=facts)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                     intermediate_size=3072, max_position_embeddings=512)
    m = BertModel(cfg).cuda().eval()
    model_facts(m, facts)
    R.hf_cfg_facts(m, facts)
    B, T = 128, 256
    facts["settings"] = dict(kind="inference (embedding extraction)", framework="transformers BertModel forward",
                             amp=None, dtype="float32", inference_mode=True, batch=B, seq_len=T,
                             kept_per_batch="out.last_hidden_state on the GPU (embs.append)",
                             kept_bytes_per_batch=B * T * 768 * 4)

    def body():
        embs = []
        with torch.inference_mode():
            for i in range(400):
                ids = torch.randint(1000, 30522, (B, T), device="cuda")
                o = m(input_ids=ids, attention_mask=torch.ones_like(ids))
                embs.append(o.last_hidden_state)
                steplog(facts, key="batches", batch=i, kept=len(embs))
        return torch.cat(embs)
    run_oom(out, facts, body)


def s_vision_tta_infer_oom(out, facts):
    """Test-time augmentation: torchvision resnet50 (random weights, 25.6 M params fp32), eval(), torch.no_grad(),
    batches of 32 images 3 x 256 x 256 (fp32, sent with x.cuda()); 5 views (the whole image resized to 224,
    the centre crop, two corner crops, a 1.15x upscale centre-cropped) and their horizontal flips are
    concatenated into one 320-image batch, one forward, softmax averaged over the 10 views; 3 GiB allowed."""
    torch = R._torch()
    import torch.nn.functional as F
    import torchvision
    cap(3, facts)
    start_history(max_entries=40000, facts=facts)
    torch.manual_seed(0)
    m = torchvision.models.resnet50(weights=None).cuda().eval()
    model_facts(m, facts)
    B, S, C = 32, 256, 224
    facts["settings"] = dict(kind="inference (test-time augmentation)", framework="torchvision", amp=None,
                             dtype="float32", no_grad=True, batch=B, image=S, crop=C, views=10,
                             forward_batch=B * 10, stem_conv_output_bytes=B * 10 * 64 * 112 * 112 * 4)
    batches = [torch.rand(B, 3, S, S) for _ in range(3)]

    def tta(x):
        views = [F.interpolate(x, size=(C, C), mode="bilinear", align_corners=False),
                 x[..., 16:16 + C, 16:16 + C], x[..., :C, :C], x[..., S - C:, S - C:]]
        up = F.interpolate(x, scale_factor=1.15, mode="bilinear", align_corners=False)
        o = (up.shape[-1] - C) // 2
        views.append(up[..., o:o + C, o:o + C])
        views += [v.flip(-1) for v in views]
        return torch.cat(views)

    def body():
        preds = []
        with torch.no_grad():
            for i, x in enumerate(batches):
                x = x.cuda()
                probs = m(tta(x)).softmax(-1).view(10, B, -1).mean(0)
                preds.append(probs.argmax(-1).cpu())
                steplog(facts, key="batches", batch=i)
        return preds
    run_oom(out, facts, body)


# ---------------------------------------------------------------- infer_varbatch_fragmentation

FRAG_REQUESTS, FRAG_KEEP, FRAG_SEED = 40, 6, 3


def frag_model():
    """HF BertModel from a config: 8 layers, hidden 1024, 16 heads, inter 4096, vocab 30522, float32."""
    torch = R._torch()
    from transformers import BertConfig, BertModel
    torch.backends.cuda.matmul.allow_tf32 = True
    cfg = BertConfig(vocab_size=30522, hidden_size=1024, num_hidden_layers=8, num_attention_heads=16,
                     intermediate_size=4096, max_position_embeddings=512)
    return BertModel(cfg).cuda().eval()


def frag_shapes():
    rng = random.Random(FRAG_SEED)
    return [(rng.choice([4, 8, 16, 24, 32, 48, 64]), 32 * rng.randint(2, 16)) for _ in range(FRAG_REQUESTS)]


def frag_warmup(m):
    """One tiny forward (the cuBLAS workspace), then an empty cache: the state every try starts from."""
    torch = R._torch()
    with torch.inference_mode():
        m(input_ids=torch.ones(1, 8, dtype=torch.long, device="cuda"))
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def frag_serve(m, shapes, facts=None):
    """The scoring server: each request's last_hidden_state stays on the GPU until it is sent, FRAG_KEEP
    requests later (a bounded queue of pending results, sent with .cpu())."""
    torch = R._torch()
    from collections import deque
    pending, sent = deque(), 0
    with torch.inference_mode():
        for i, (B, T) in enumerate(shapes):
            ids = torch.randint(1000, 30522, (B, T), device="cuda")
            h = m(input_ids=ids).last_hidden_state
            pending.append(h)
            if len(pending) > FRAG_KEEP:
                sent += int(pending.popleft().cpu().shape[0])
            if facts is not None:
                steplog(facts, key="requests", request=i, B=B, T=T, pending=len(pending))
    return sent


UNITS = {"GiB": GiB, "MiB": MiB, "KiB": 1024, "bytes": 1, "B": 1}


def _size(text, pat):
    mm = re.search(pat, text)
    return int(float(mm.group(1)) * UNITS[mm.group(2)]) if mm else None


def frag_try(m, shapes, cap_bytes, total):
    """One run of the request list under cap_bytes (history off): the OOM's request and the reserved but
    unallocated memory its message reports, or None when the run fits."""
    torch = R._torch()
    import gc
    torch.cuda.set_per_process_memory_fraction(cap_bytes / total)
    torch.cuda.reset_peak_memory_stats()
    res = dict(cap=cap_bytes)
    try:
        frag_serve(m, shapes)
        res["oom"] = False
        res["retries"] = torch.cuda.memory_stats()["num_alloc_retries"]
    except torch.OutOfMemoryError as e:
        msg = str(e)
        res.update(oom=True, request=_size(msg, r"Tried to allocate ([\d.]+) (GiB|MiB|KiB|bytes)"),
                   unallocated=_size(msg, r"([\d.]+) (GiB|MiB|KiB|bytes|B) is reserved by PyTorch but unallocated"))
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return res


def frag_calibrate():
    """Run in its own process (history off): the uncapped peaks of the request list, then caps from just
    under the uncapped peak reserved downwards; prints the tries and the chosen cap as JSON: the highest
    cap that OOMs with at least twice the request reserved but unallocated (else the best ratio)."""
    torch = R._torch()
    torch.manual_seed(0)
    m = frag_model()
    frag_warmup(m)
    shapes = frag_shapes()
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.reset_peak_memory_stats()
    frag_serve(m, shapes)
    p_alloc, p_res = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    tries, chosen = [], None
    for f in [0.97, 0.9, 0.82, 0.74, 0.66, 0.58, 0.5, 0.42, 0.34, 0.26]:
        c = int(p_alloc + f * (p_res - p_alloc)) // MiB * MiB
        t = frag_try(m, shapes, c, total)
        tries.append(t)
        if t["oom"] and t["request"] and t["unallocated"] and t["unallocated"] >= 2 * t["request"]:
            chosen = c
            break
    if chosen is None:
        ooms = [t for t in tries if t["oom"] and t["request"] and t["unallocated"]]
        if ooms:
            chosen = max(ooms, key=lambda t: t["unallocated"] / t["request"])["cap"]
    print("FRAGCAL " + json.dumps(dict(peak_allocated=p_alloc, peak_reserved=p_res, tries=tries, chosen=chosen)),
          flush=True)


def s_infer_varbatch_fragmentation(out, facts):
    """A scoring server: HF BertModel from a config (8 layers, hidden 1024, 16 heads, inter 4096, ~132 M
    params fp32, TF32 matmuls), torch.inference_mode(), 40 requests whose (batch, length) are drawn (seeded)
    from {4..64} x {64..512}; each request's last_hidden_state stays on the GPU until it is sent (.cpu())
    6 requests later: live memory is bounded. The cap is chosen by a calibration in its own process with
    history off (the same model and requests: uncapped peaks, then caps between peak allocated and peak
    reserved from the top until one OOMs with at least twice its request reserved but unallocated;
    facts.calibration); this run builds the same model and serves the same requests under that cap."""
    torch = R._torch()
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--frag-calibrate"], capture_output=True,
                       text=True, timeout=200)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("FRAGCAL ")]
    if not line:
        facts["calibration_error"] = (p.stdout + p.stderr)[-3000:]
        raise RuntimeError("calibration failed")
    calib = json.loads(line[-1][len("FRAGCAL "):])
    facts["calibration"] = calib
    R.log(f"[calibration] uncapped peak allocated {calib['peak_allocated']} reserved {calib['peak_reserved']}; "
          f"cap {calib['chosen']}")
    cap_bytes = calib["chosen"] or calib["peak_allocated"] + (calib["peak_reserved"] - calib["peak_allocated"]) // 2
    cap(cap_bytes / GiB, facts)
    start_history(max_entries=40000, facts=facts)
    torch.manual_seed(0)
    m = frag_model()
    model_facts(m, facts)
    R.hf_cfg_facts(m, facts)
    frag_warmup(m)
    shapes = frag_shapes()
    facts["settings"] = dict(kind="inference (scoring server)", framework="transformers BertModel forward",
                             amp=None, dtype="float32 (TF32 matmuls)", inference_mode=True, shapes=shapes,
                             pending_results_kept=FRAG_KEEP, cap_from_calibration=cap_bytes)
    run_oom(out, facts, lambda: steplog(facts, key="served", sent=frag_serve(m, shapes, facts)))


R.SCENARIOS.clear()
R.SCENARIOS.update({
    "hf_generate_num_return_sequences_oom": dict(fn=s_hf_generate_num_return_sequences_oom, group="solo",
                                                 timeout=120),
    "hf_static_cache_generate_healthy": dict(fn=s_hf_static_cache_generate_healthy, group="solo", timeout=120),
    "embedding_extract_fp32_oom": dict(fn=s_embedding_extract_fp32_oom, group="solo", timeout=120),
    "vision_tta_infer_oom": dict(fn=s_vision_tta_infer_oom, group="solo", timeout=120),
    "infer_varbatch_fragmentation": dict(fn=s_infer_varbatch_fragmentation, group="solo", timeout=240),
})
R.__file__ = os.path.abspath(__file__)

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--frag-calibrate":
        frag_calibrate()
    else:
        R.main()
