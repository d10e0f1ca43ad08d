#!/usr/bin/env python3
"""diagnosis.py BINARY: what memreport concludes about every real run, against what a person who
knows how the run was made concludes (the corpus READMEs' "what a good report says").

For every sample of the table: the OOM cause, the kind of run, the techniques already on, the
first recommendation, recommendations that must not appear (or not first), findings that must
or must not appear. Samples come from tests/corpus (recorded for this project; read from
build/corpus, where tests/unpack_corpus.sh decompresses them) and, when present,
$MEMREPORT_SHARED/corpus and third_party/snapshots. Prints "ok N - ..." / "not ok N - ..." lines;
a shared sample that is absent is reported as skipped ("ok N - ... # SKIP ..."), a project one
as a failure.
"""
import json
import os
import re
import subprocess
import sys

BIN = os.path.abspath(sys.argv[1])
SHARED = os.environ.get("MEMREPORT_SHARED", "../shared")
# the project's own samples first, as tests/testutil.h and tests/samples.sh find them
ROOTS = ["build/corpus", os.path.join(SHARED, "corpus")]
UNPACKED = subprocess.run(["sh", "tests/unpack_corpus.sh"]).returncode == 0

# Each row: sample, then what must hold. Keys:
#   cause: oom.cause (None: no OOM)      kind: run.kind
#   first: the rank-1 recommendation id, or a tuple of acceptable ids ("" : none at all)
#   never: ids that must not be recommended at all; has: ids that must be recommended
#   not_first: ids that must not come first
#   finds / no_finds: finding ids that must / must not appear
#   calm: no finding above info (a healthy run with nothing that costs it anything)
#   (every row: an OOM report has something to change)
#   techniques: ids that must be in run.techniques; no_techniques: must not
#   iterations: run.iterations (the real iterations the trace shows; None: no boundaries)
#   log: also give the sample's train.log (the evidence a user has)
#   folder: a run with no snapshot: give memreport its folder (log, stats, summary)
#   reason_lacks: {id: text} that recommendation's reason must not contain
CAPACITY_ACTS = ("reduce_microbatch", "activation_checkpointing")
TABLE = [
    ("mlp_healthy", dict(cause=None, kind="training", no_finds=["memory_growth"],
                         never=["expandable_segments", "no_grad_eval"])),
    ("gpt_varlen", dict(cause=None, kind="training", first="expandable_segments",
                        finds=["high_fragmentation"], no_finds=["memory_growth"])),
    ("gpt_varlen_expandable", dict(cause=None, kind="training", never=["expandable_segments"],
                                   no_finds=["memory_growth"])),
    ("resnet_amp", dict(cause=None, kind="training", no_finds=["memory_growth"])),
    ("oom_capacity", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                          never=["no_grad_eval", "fsdp", "cpu_offload"],
                          no_finds=["memory_growth"], log=True)),
    ("oom_fragmentation", dict(cause="fragmentation", first="expandable_segments", log=True)),
    ("oom_fragmentation_expandable", dict(cause=None, never=["expandable_segments"],
                                          finds=["allocator_retries"])),
    ("oom_fragmentation_maxsplit", dict(cause=None, not_first=["max_split_size_mb"])),
    ("oom_capacity_params", dict(cause="capacity", kind="training",
                                 first=("fsdp", "cpu_offload", "mixed_precision"),
                                 not_first=["reduce_microbatch"], never=["no_grad_eval"],
                                 no_finds=["memory_growth"], log=True)),
    ("leak_val_graph", dict(cause=None, kind="evaluation", first="no_grad_eval",
                            finds=["memory_growth"],
                            never=["activation_checkpointing", "gradient_accumulation"])),
    ("leak_val_fixed", dict(cause=None, kind="inference", no_finds=["memory_growth"],
                            never=["no_grad_eval"])),
    ("multi_stream", dict(cause=None, finds=["pending_free_blocks"])),
    ("cuda_graph", dict(cause=None, finds=["private_pools"], techniques=["cuda_graphs"])),
    ("no_history", dict(cause=None, kind="unknown", first="record_history", finds=["no_history"])),
    ("stacks_all", dict(cause=None, kind="training")),
    ("gpt_large_trace", dict(cause=None, kind="training", finds=["trace_truncated"],
                             no_finds=["memory_growth"])),
    ("hf_gpt2_oom", dict(techniques=["autocast"],
                         cause="capacity", kind="training", first=CAPACITY_ACTS,
                         never=["mixed_precision", "no_grad_eval", "release_references", "fsdp",
                                "cpu_offload"],
                         no_finds=["memory_growth"], log=True)),
    ("hf_gpt2_b4", dict(cause=None, kind="training", no_finds=["memory_growth"],
                        never=["no_grad_eval"])),
    ("oom_loss_logits", dict(techniques=["autocast"],
                             cause="capacity", kind="training", first="chunked_loss",
                             never=["mixed_precision", "no_grad_eval", "release_references"],
                             no_finds=["memory_growth"], log=True)),
    ("fsdp_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS, never=["fsdp"],
                      techniques=["fsdp"], no_finds=["memory_growth"], log=True)),
    ("lightning_oom", dict(techniques=["autocast"],
                           cause="capacity", kind="training", first=CAPACITY_ACTS,
                           never=["mixed_precision", "fsdp", "cpu_offload", "no_grad_eval"],
                           no_finds=["memory_growth"], log=True)),
    ("infer_kv_oom", dict(cause="capacity", kind="inference", first="reduce_microbatch",
                          never=["gradient_accumulation", "activation_checkpointing",
                                 "no_grad_eval", "fsdp", "cpu_offload"], log=True)),
    ("other_process", dict(cause="other_processes", first="free_device_memory",
                           never=["reduce_microbatch", "activation_checkpointing",
                                  "gradient_accumulation", "expandable_segments"],
                           no_finds=["memory_growth"], log=True)),
    # the snapshot alone shows a full device but not who holds it: say so, advise both ways
    ("other_process", dict(cause="unknown", finds=["device_full"], has=["free_device_memory"],
                           no_finds=["memory_growth"], log=False)),
    ("gpt_varlen7_expandable_maxsplit", dict(cause=None, kind="training",
                                             first="remove_max_split_size_mb",
                                             change="PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
                                             never=["expandable_segments"])),
    ("gpt_varlen7_expandable", dict(cause=None, kind="training", never=["expandable_segments"],
                                    no_finds=["memory_growth", "high_fragmentation"])),
    ("hf_gpt2_empty_cache", dict(cause=None, kind="training", first="remove_empty_cache",
                                 finds=["empty_cache_churn"], no_finds=["memory_growth"])),
]

# Recorded for this project (tests/corpus/README.md says how, and what a good report says).
FORWARD_ONLY_NEVER = ["activation_checkpointing", "gradient_accumulation", "fsdp", "cpu_offload"]
TABLE += [
    ("hf_llama_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                          never=["fsdp", "cpu_offload", "no_grad_eval"], has=["disable_kv_cache"],
                          no_finds=["memory_growth"], log=True)),
    ("hf_trainer_oom", dict(techniques=["autocast"],
                            cause="capacity", kind="training", first=CAPACITY_ACTS,
                            never=["mixed_precision", "fsdp", "cpu_offload", "no_grad_eval"],
                            change_has={"reduce_microbatch": "TrainingArguments",
                                        "activation_checkpointing": "gradient_checkpointing"},
                            no_finds=["memory_growth"], log=True)),
    ("lbfgs_closure", dict(cause=None, kind="training", no_finds=["memory_growth"],
                           never=["fsdp", "cpu_offload"])),
    ("lightning_healthy", dict(cause=None, kind="training", no_finds=["memory_growth"],
                               never=["fsdp", "cpu_offload", "no_grad_eval"])),
    ("compile_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                         techniques=["torch_compile"],
                         never=["mixed_precision", "fsdp", "no_grad_eval"],
                         no_finds=["memory_growth"], log=True)),
    ("ckpt_on_oom", dict(cause="capacity", kind="training", first="reduce_microbatch",
                         techniques=["activation_checkpointing"], no_finds=["eval_pass_oom"],
                         never=["mixed_precision", "activation_checkpointing", "fsdp"], log=True)),
    ("ddp_one_rank", dict(cause=None, kind="training", techniques=["ddp"],
                          no_finds=["memory_growth"], never=["fsdp"])),
    # it dies in its first layer: inference_mode cannot be seen there, so no_grad may be offered,
    # hedged and never first (infer_no_nograd_oom is the same trace without it)
    ("infer_mode_oom", dict(cause="capacity", kind_in=("inference", "unknown"),
                            first="reduce_microbatch", never=FORWARD_ONLY_NEVER,
                            not_first=["no_grad_eval"], log=True)),
    ("cupy_non_pytorch", dict(cause="non_pytorch_memory", first="free_device_memory",
                              never=["reduce_microbatch", "activation_checkpointing"], log=True)),
    ("train_leak", dict(cause=None, kind="training", first="release_references",
                        finds=["memory_growth"],
                        never=["activation_checkpointing", "reduce_microbatch"])),
    ("eval_no_grad_missing_oom", dict(kind="evaluation", first="no_grad_eval",
                                      finds=["memory_growth"],
                                      never=FORWARD_ONLY_NEVER + ["reduce_microbatch"], log=True)),
    ("retries_survived", dict(cause=None, kind="training", finds=["allocator_retries"],
                              no_finds=["memory_growth"])),
    ("gen_small_oom_b96", dict(cause="capacity", kind="inference", first="reduce_microbatch",
                               never=FORWARD_ONLY_NEVER + ["no_grad_eval", "release_references"],
                               log=True)),
    # the attention op grew 16x where the input grew 4x: its T x T tensors are the lever too
    ("t5_accum_oom_l4", dict(cause="capacity", kind="training", first=CAPACITY_ACTS + ("fused_attention",),
                             has=["reduce_microbatch"], finds=["larger_input", "quadratic_input"], no_finds=["eval_pass_oom"], never=["gradient_accumulation", "fsdp", "cpu_offload"], log=True)),
    # recorded by tools/record_heldout.py after the rules above were written
    ("roberta_fp32_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                              has=["mixed_precision"], no_techniques=["autocast"],
                              never=["fsdp", "cpu_offload", "no_grad_eval"],
                              no_finds=["memory_growth"], log=True)),
    ("nograd_collect_oom", dict(cause="capacity", kind="inference", first="release_references",
                                finds=["memory_growth"], no_finds=["oom_fragmentation"],
                                never=FORWARD_ONLY_NEVER + ["no_grad_eval", "reduce_microbatch",
                                                            "max_split_size_mb"], log=True)),
    ("hf_varlen", dict(cause="capacity", kind="training", first="chunked_loss",
                       techniques=["autocast"], never=["mixed_precision", "no_grad_eval"],
                       log=True)),
    ("sum_loss_accum_oom", dict(cause="capacity", first=("no_grad_eval", "backward_per_microbatch"),
                                has=["no_grad_eval", "backward_per_microbatch"],
                                never=["reduce_microbatch", "activation_checkpointing"], log=True)),
    ("lightning_ckpt_accum_oom", dict(cause="capacity", kind="training",
                                      first=("chunked_loss", "reduce_microbatch"),
                                      techniques=["activation_checkpointing", "autocast"],
                                      never=["activation_checkpointing", "mixed_precision",
                                             "gradient_accumulation", "fsdp", "no_grad_eval"],
                                      # checkpointed blocks free their layers: not an eval pass
                                      no_finds=["eval_pass_oom"], log=True)),
    ("adam_state_oom", dict(cause="capacity", kind="training",
                            first=("mixed_precision", "cpu_offload"),
                            not_first=["reduce_microbatch", "fsdp"], never=["no_grad_eval"],
                            no_finds=["memory_growth"], log=True)),
    ("gpt2_beam_oom", dict(cause="fragmentation", kind="inference", first="expandable_segments",
                           never=FORWARD_ONLY_NEVER + ["no_grad_eval", "release_references"],
                           log=True)),
    ("varlen_tight", dict(cause="capacity", kind="training", first=CAPACITY_ACTS + ("chunked_loss",),
                          has=["mixed_precision"], log=True)),
    # a third held-out set
    ("infer_no_nograd_oom", dict(cause="capacity", first="reduce_microbatch", has=["no_grad_eval"],
                                 never=FORWARD_ONLY_NEVER, log=True)),
    ("lightning_predict_oom", dict(cause="capacity", kind="inference", first="reduce_microbatch",
                                   never=FORWARD_ONLY_NEVER + ["no_grad_eval"], log=True)),
    # a fourth held-out set (tools/record_heldout4.py)
    ("bf16_adamw_state_oom", dict(cause="capacity", kind="training",
                                  first=("mixed_precision", "cpu_offload"),
                                  change_has={"mixed_precision": "8-bit"},
                                  no_techniques=["autocast"],
                                  not_first=["reduce_microbatch", "fsdp"], never=["no_grad_eval"],
                                  no_finds=["memory_growth"], log=True)),
    ("trainer_eval_logits_oom", dict(cause="capacity", first="release_references",
                                     change_has={"release_references": "eval_accumulation_steps"},
                                     techniques=["autocast"], finds=["eval_pass_oom"],
                                     never=["activation_checkpointing", "gradient_accumulation",
                                            "mixed_precision", "expandable_segments"], log=True)),
    ("manual_attn_expandable_oom", dict(cause="capacity", kind="training",
                                        first=("fused_attention",) + CAPACITY_ACTS,
                                        has=["fused_attention"], techniques=["autocast"],
                                        change_has={"fused_attention": "scaled_dot_product"},
                                        never=["expandable_segments", "mixed_precision", "fsdp",
                                               "no_grad_eval"], log=True)),
    ("hf_eager_attn_oom", dict(cause="capacity", kind="training",
                               first=("fused_attention",) + CAPACITY_ACTS,
                               has=["fused_attention"], techniques=["autocast"],
                               change_has={"fused_attention": "attn_implementation"},
                               never=["mixed_precision", "fsdp", "no_grad_eval"],
                               no_finds=["oom_fragmentation"], log=True)),
    ("lora_frozen_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                             has=["disable_kv_cache"],
                             never=["fsdp", "cpu_offload", "no_grad_eval"], log=True)),
    ("oom_retry_in_except", dict(cause="capacity", kind="training", first="release_failed_attempt",
                                 finds=["oom_attempt_held"],
                                 never=["no_grad_eval", "expandable_segments"], log=True)),
    ("convnext_resize_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                                 techniques=["autocast"], never=["mixed_precision"],
                                 finds=["larger_input"],
                                 no_finds=["memory_growth", "evidence_disagrees",
                                           "eval_pass_oom"], log=True)),
    # checks of the rules above, recorded after them
    ("oom_retry_outside_except", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                                      no_finds=["oom_attempt_held"],
                                      never=["release_failed_attempt", "no_grad_eval"], log=True)),
    ("bert_eager_attn_oom", dict(cause="capacity", kind="training", first="fused_attention",
                                 change_has={"fused_attention": "attn_implementation"},
                                 no_techniques=["autocast"], never=["fsdp", "no_grad_eval"],
                                 log=True)),
    ("peft_lora_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                           has=["disable_kv_cache"],
                           never=["fsdp", "cpu_offload", "no_grad_eval"], log=True)),
    # a fifth held-out set
    ("lstm_long_seq_oom", dict(cause="capacity", first="reduce_microbatch",
                               never=["chunked_loss", "fused_attention", "disable_kv_cache",
                                      "expandable_segments", "fsdp"], log=True)),
    ("gan_two_opt_healthy", dict(cause=None, kind="training", no_finds=["memory_growth"],
                                 never=["no_grad_eval", "reduce_microbatch"])),
    ("compile_cudagraphs_healthy", dict(cause=None, kind="training",
                                        techniques=["torch_compile", "cuda_graphs"],
                                        finds=["private_pools"],
                                        no_finds=["memory_growth", "empty_cache_churn",
                                                  "allocator_retries"],
                                        never=["remove_empty_cache"])),
    ("big_vocab_oom", dict(cause="capacity", kind="training",
                           first=("mixed_precision", "cpu_offload"), not_first=["fsdp"],
                           never=["activation_checkpointing", "no_grad_eval"], log=True)),
    ("unet_amp_highres_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                                  techniques=["autocast"],
                                  never=["mixed_precision", "fused_attention", "disable_kv_cache",
                                         "fsdp", "no_grad_eval"], log=True)),
    ("global_feature_leak_oom", dict(cause="capacity", kind="training", first="release_references",
                                     finds=["memory_growth"], no_finds=["oom_fragmentation"],
                                     not_first=["expandable_segments", "reduce_microbatch"])),
    ("t5_beam_generate_oom", dict(cause="fragmentation", kind="inference",
                                  never=["activation_checkpointing", "gradient_accumulation",
                                         "no_grad_eval", "release_references"])),
    # with its log the cap is known; the settings' replays under it still run out of memory, but
    # its ring buffer wrapped: they start from the layout the recorded settings made before the
    # window, so they withdraw nothing, and expandable segments stay first
    ("t5_beam_generate_oom", dict(cause="fragmentation", kind="inference",
                                  first="expandable_segments",
                                  never=["activation_checkpointing", "gradient_accumulation",
                                         "no_grad_eval", "release_references"], log=True)),
    ("accelerate_accum_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                                  techniques=["autocast"],
                                  change_has={"reduce_microbatch": "accum"},
                                  never=["gradient_accumulation", "mixed_precision", "fsdp",
                                         "no_grad_eval"],
                                  no_finds=["memory_growth"], log=True)),
    # a sixth held-out set (tools/record_heldout6.py)
    ("ckpt_adam_step_oom", dict(cause="capacity", kind="training",
                                first=("mixed_precision", "cpu_offload", "fsdp"),
                                techniques=["activation_checkpointing", "autocast"],
                                not_first=["reduce_microbatch"],
                                never=["activation_checkpointing", "gradient_accumulation",
                                       "no_grad_eval"],
                                no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("clip_contrastive_oom", dict(cause="capacity", first=CAPACITY_ACTS,
                                  never=["chunked_loss", "fsdp", "cpu_offload"],
                                  no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("fp16_relbias_longseq_oom", dict(cause="capacity", has=["chunked_loss"],
                                      techniques=["autocast"],
                                      not_first=["expandable_segments", "max_split_size_mb"],
                                      never=["mixed_precision", "max_split_size_mb"],
                                      no_finds=["oom_fragmentation", "memory_growth"], log=True)),
    ("frcnn_varsize_healthy", dict(cause=None, kind="training", first="",
                                   finds=["peak_before_trace", "trace_truncated"],
                                   no_finds=["high_fragmentation", "memory_growth"],
                                   never=["expandable_segments", "max_split_size_mb"])),
    ("maxsplit_set_varlen_oom", dict(cause="capacity", kind="training",
                                     first=("chunked_loss",) + CAPACITY_ACTS,
                                     techniques=["autocast"],
                                     never=["max_split_size_mb", "expandable_segments",
                                            "mixed_precision", "no_grad_eval"],
                                     no_finds=["oom_fragmentation"], log=True)),
    ("moe_dynamic_healthy", dict(cause=None, kind="training", first="",
                                 no_finds=["memory_growth", "high_fragmentation"])),
    ("whisper_long_audio_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                                    techniques=["autocast"],
                                    never=["chunked_loss", "fsdp", "cpu_offload", "mixed_precision",
                                           "no_grad_eval"],
                                    no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    # an eighth held-out set (tools/record_heldout8.py)
    ("infer_cat_preds_oom", dict(cause="capacity", kind="inference", first="release_references",
                                 finds=["memory_growth"],
                                 never=FORWARD_ONLY_NEVER + ["no_grad_eval", "chunked_loss"],
                                 log=True)),
    ("retain_graph_step_oom", dict(cause="capacity", kind="training", first="release_references",
                                   finds=["activations_carried"], techniques=["autocast"],
                                   never=["fsdp", "cpu_offload", "no_grad_eval", "chunked_loss"],
                                   no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("head_per_task_oom", dict(cause="capacity", kind="training", first="release_references",
                               finds=["memory_growth"], never=["no_grad_eval"],
                               change_has={"release_references": "reset_parameters"},
                               not_first=["reduce_microbatch", "expandable_segments", "fsdp",
                                          "cpu_offload", "mixed_precision", "chunked_loss"],
                               no_finds=["oom_fragmentation"], log=True)),
    ("conv3d_video_oom", dict(cause="capacity", kind_in=("training", "unknown"),
                              first=CAPACITY_ACTS,
                              never=["chunked_loss", "fsdp", "cpu_offload", "expandable_segments",
                                     "disable_kv_cache"],
                              no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("gnn_scatter_healthy", dict(cause=None, kind="training", finds=["allocator_retries"],
                                 never=["fsdp", "cpu_offload", "chunked_loss", "no_grad_eval"],
                                 no_finds=["memory_growth"])),
    ("alibi_cache_healthy", dict(cause=None, kind="training", techniques=["autocast"],
                                 never=["fsdp", "cpu_offload", "no_grad_eval", "chunked_loss"],
                                 no_finds=["memory_growth"])),
    ("unet_sampling_healthy", dict(cause=None, kind="inference", first="",
                                   never=FORWARD_ONLY_NEVER + ["no_grad_eval"],
                                   no_finds=["memory_growth", "high_fragmentation"])),
    # a seventh held-out set (tools/record_heldout7.py)
    ("bf16cast_gc_capped_healthy", dict(cause=None, kind="training",
                                        techniques=["activation_checkpointing"],
                                        no_techniques=["autocast"], no_finds=["memory_growth"], calm=True,
                                        never=["activation_checkpointing", "mixed_precision",
                                               "no_grad_eval"])),
    ("cudamalloc_outside_oom", dict(cause="non_pytorch_memory", kind="training",
                                    first="free_device_memory",
                                    never=["expandable_segments", "fsdp", "no_grad_eval"],
                                    no_finds=["oom_fragmentation", "oom_other_processes"],
                                    log=True)),
    ("deeplab_cudnn_benchmark_healthy", dict(cause=None, kind="training", first="",
                                             techniques=["autocast"],
                                             no_finds=["allocator_retries", "empty_cache_churn",
                                                       "memory_growth"],
                                             never=["remove_empty_cache", "mixed_precision"])),
    ("embedding_recsys_adam_oom", dict(cause="capacity", kind="training",
                                       first=("mixed_precision", "cpu_offload"),
                                       not_first=["reduce_microbatch", "fsdp"],
                                       never=["activation_checkpointing", "gradient_accumulation",
                                              "chunked_loss", "no_grad_eval"],
                                       no_finds=["memory_growth"], log=True)),
    ("empty_cache_each_step_healthy", dict(cause=None, kind="training", first="remove_empty_cache",
                                           finds=["empty_cache_churn"],
                                           no_finds=["memory_growth", "allocator_retries"])),
    ("hf_generate_kv_oom", dict(cause="capacity", kind="inference", first="reduce_microbatch",
                                change_has={"reduce_microbatch": "max_new_tokens"},
                                never=["activation_checkpointing", "gradient_accumulation",
                                       "no_grad_eval", "release_references", "fsdp"],
                                no_finds=["oom_fragmentation"], log=True)),
    ("infer_server_varshape_healthy", dict(cause=None, kind="inference", first="",
                                           no_finds=["memory_growth", "allocator_retries"],
                                           never=["no_grad_eval", "reduce_microbatch"])),
    ("trainer_kept_outputs_leak_oom", dict(cause="capacity", kind="training",
                                           first="release_references", finds=["memory_growth"],
                                           never=["activation_checkpointing", "fsdp"],
                                           no_finds=["oom_fragmentation"], log=True)),
    # a ninth held-out set (tools/record_heldout9.py)
    ("distill_teacher_graph_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                                       techniques=["autocast"],
                                       never=["fsdp", "cpu_offload", "mixed_precision",
                                              "expandable_segments", "no_grad_eval"],
                                       no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("ppo_rlhf_train_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                                techniques=["autocast"],
                                change_has={"reduce_microbatch": "accumulate gradients"},
                                never=["no_grad_eval", "mixed_precision", "fsdp"],
                                no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("vae_decode_highres_oom", dict(cause="capacity", first="reduce_microbatch",
                                    never=["chunked_loss", "activation_checkpointing",
                                           "gradient_accumulation", "expandable_segments", "fsdp",
                                           "cpu_offload"],
                                    no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("moco_queue_healthy", dict(cause=None, kind="training", first="",
                                no_finds=["memory_growth", "high_fragmentation"],
                                never=["release_references", "expandable_segments"])),
    ("memory_bank_grows_oom", dict(cause="capacity", kind="training", first="release_references",
                                   finds=["memory_growth"], no_finds=["oom_fragmentation"],
                                   not_first=["expandable_segments", "reduce_microbatch"],
                                   never=["no_grad_eval"], log=True)),
    ("save_on_cpu_bigvocab_oom", dict(cause="capacity", kind="training",
                                      first=("chunked_loss", "reduce_microbatch"),
                                      techniques=["autocast"],
                                      never=["activation_checkpointing", "no_grad_eval",
                                             "expandable_segments"],
                                      no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    # a tenth held-out set (tools/record_heldout10.py)
    ("grad_hook_leak_oom", dict(cause="capacity", kind="training", first="release_references",
                                finds=["memory_growth"],
                                not_first=["reduce_microbatch", "expandable_segments",
                                           "activation_checkpointing"],
                                no_finds=["oom_fragmentation"], log=True)),
    ("retrieval_scores_oom", dict(cause="capacity", kind="inference", first="split_operation",
                                  never=FORWARD_ONLY_NEVER + ["no_grad_eval", "release_references",
                                                              "expandable_segments"],
                                  no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    # its snapshot alone: no limit known, but the request is 5x all live memory
    ("retrieval_scores_oom", dict(cause="capacity", first="split_operation",
                                  never=["release_references", "expandable_segments"],
                                  no_finds=["memory_growth", "oom_fragmentation"])),
    ("eval_bigger_batch_oom", dict(cause="capacity", kind="training", first=("reduce_microbatch", "chunked_loss"),
                                   never=["activation_checkpointing", "fsdp", "cpu_offload",
                                          "expandable_segments", "gradient_accumulation"],
                                   finds=["eval_pass_oom", "larger_input"],
                                   no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("compile_dynamic_healthy", dict(cause=None, kind="training", first="",
                                     techniques=["torch_compile", "autocast"],
                                     no_finds=["memory_growth"])),
    ("side_stream_prefetch_healthy", dict(cause=None, kind="training", first="",
                                          techniques=["autocast"],
                                          no_finds=["memory_growth", "high_fragmentation"])),
    # an eleventh held-out set (tools/record_heldout11.py)
    ("notebook_stale_model_oom", dict(cause="capacity", kind="training", first="release_references",
                                      never=["reduce_microbatch", "activation_checkpointing",
                                             "expandable_segments", "no_grad_eval", "fsdp"],
                                      no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("infer_request_cache_leak_oom", dict(cause="capacity", kind="inference",
                                          first="release_references", finds=["memory_growth"],
                                          never=FORWARD_ONLY_NEVER + ["no_grad_eval",
                                                                      "reduce_microbatch"],
                                          no_finds=["oom_fragmentation"], log=True)),
    ("ema_vit_healthy", dict(cause=None, kind="training", first="", techniques=["autocast"],
                             no_finds=["memory_growth", "high_fragmentation"])),
    ("foreach_step_peak_healthy", dict(cause=None, kind="training", first="",
                                       techniques=["autocast"],
                                       no_finds=["memory_growth", "high_fragmentation"])),
    ("wav2vec2_ctc_varlen_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                                     techniques=["autocast"],
                                     never=["fsdp", "cpu_offload", "no_grad_eval",
                                            "expandable_segments", "mixed_precision"],
                                     finds=["larger_input"],
                                     no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    # a twelfth held-out set (tools/record_heldout12.py)
    ("wgan_gp_double_backward_oom", dict(cause="fragmentation", kind="training",
                                         first="expandable_segments",
                                         never=["no_grad_eval", "chunked_loss", "disable_kv_cache",
                                                "fused_attention", "release_references"],
                                         no_finds=["memory_growth"], log=True)),
    ("dpsgd_vmap_pergrad_oom", dict(cause="capacity", kind="training", first="reduce_microbatch",
                                    not_first=["activation_checkpointing", "mixed_precision",
                                               "cpu_offload", "fsdp"],
                                    never=["no_grad_eval", "expandable_segments", "chunked_loss",
                                           "activation_checkpointing", "cpu_offload", "fsdp"],
                                    no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("gpu_augment_photos_oom", dict(cause="capacity", kind="training",
                                    first=("release_references", "reduce_microbatch"),
                                    techniques=["autocast"],
                                    never=["activation_checkpointing", "mixed_precision",
                                           "fused_attention", "expandable_segments", "no_grad_eval"],
                                    no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("int8_dequant_infer_healthy", dict(cause=None, kind="inference",
                                        never=["no_grad_eval", "reduce_microbatch",
                                               "activation_checkpointing", "release_references"],
                                        no_finds=["memory_growth"])),
    ("jit_frozen_resnet_infer_healthy", dict(cause=None, kind="inference", first="",
                                             never=["no_grad_eval"],
                                             no_finds=["memory_growth", "high_fragmentation"])),
    # a thirteenth held-out set
    ("gpu_dataset_resident_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                                      has=["release_references"],
                                      change_has={"release_references": "pin_memory"},
                                      never=["fsdp", "cpu_offload", "no_grad_eval",
                                             "expandable_segments"], finds=["larger_input"],
                                      no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("argsort_scores_oom", dict(cause="capacity", kind="unknown", first="release_references",
                                change_has={"release_references": "del big_tensor"},
                                never=FORWARD_ONLY_NEVER + ["no_grad_eval", "reduce_microbatch",
                                                            "expandable_segments"],
                                no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("buffer_table_train_healthy", dict(cause=None, kind="training", first="",
                                        techniques=["autocast"], no_finds=["memory_growth"])),
    ("hf_trainer_gradckpt_healthy", dict(cause=None, kind="training", first="",
                                         techniques=["activation_checkpointing", "autocast"],
                                         never=["activation_checkpointing"],
                                         no_finds=["memory_growth"])),
    ("lightning_bf16true_ladder_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                                           never=["remove_empty_cache", "fsdp", "cpu_offload",
                                                  "no_grad_eval"],
                                           no_finds=["empty_cache_churn", "memory_growth",
                                                     "oom_fragmentation"], log=True)),
    ("vit_near_cap_healthy", dict(cause=None, kind="training", first="", techniques=["autocast"],
                                  no_finds=["memory_growth", "oom_capacity", "oom_fragmentation"])),
    ("gru_eval_carried_hidden_oom", dict(cause="capacity", kind="evaluation", first="no_grad_eval",
                                         finds=["memory_growth"],
                                         change_has={"release_references": "h.detach()"},
                                         not_first=["expandable_segments", "reduce_microbatch"],
                                         never=["activation_checkpointing", "fsdp", "cpu_offload"],
                                         no_finds=["oom_fragmentation"], log=True)),
    ("mha_need_weights_longseq_oom", dict(cause="capacity", kind="training", first="fused_attention",
                                          finds=["quadratic_input"],
                                          change_has={"fused_attention": "need_weights=False"},
                                          techniques=["autocast"],
                                          never=["mixed_precision", "fsdp", "cpu_offload", "no_grad_eval",
                                                 "expandable_segments"],
                                          no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("hf_trainer_compile_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                                    techniques=["torch_compile", "autocast"],
                                    never=["fsdp", "cpu_offload", "no_grad_eval", "expandable_segments"],
                                    no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("hf_hidden_states_kept_infer_oom", dict(cause="capacity", kind="inference", first="release_references",
                                             finds=["memory_growth"],
                                             never=["activation_checkpointing", "gradient_accumulation",
                                                    "fsdp", "cpu_offload", "no_grad_eval",
                                                    "expandable_segments"],
                                             not_first=["reduce_microbatch"],
                                             no_finds=["oom_fragmentation"], log=True)),
    ("seg_fullres_logits_oom", dict(cause="capacity", kind="training", first="chunked_loss",
                                    has=["chunked_loss"], techniques=["autocast"],
                                    change_has={"chunked_loss": "logits.shape[-2:]"},
                                    never=["fsdp", "cpu_offload", "no_grad_eval", "expandable_segments",
                                           "release_references"],
                                    no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("gnn_fullbatch_edges_oom", dict(cause="capacity", first=CAPACITY_ACTS,
                                     never=["fsdp", "expandable_segments", "release_references"],
                                     not_first=["no_grad_eval", "mixed_precision"],
                                     no_finds=["memory_growth", "oom_fragmentation", "high_fragmentation"],
                                     log=True)),
    ("sdpa_float_mask_math_oom", dict(cause="capacity", kind="training", first="fused_attention",
                                      finds=["quadratic_input", "larger_input"],
                                      change_has={"fused_attention": "is_causal=True"},
                                      techniques=["autocast"],
                                      never=["mixed_precision", "fsdp", "cpu_offload", "no_grad_eval",
                                             "expandable_segments"],
                                      no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("expandable_on_capacity_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                                        techniques=["autocast"],
                                        never=["expandable_segments", "fsdp", "cpu_offload", "no_grad_eval",
                                               "max_split_size_mb"],
                                        no_finds=["memory_growth", "oom_fragmentation", "high_fragmentation"],
                                        log=True)),
    ("gc_threshold_varlen_healthy", dict(cause=None, kind="training", first="", techniques=["autocast"],
                                         never=["garbage_collection_threshold", "max_split_size_mb",
                                                "reduce_microbatch", "activation_checkpointing"],
                                         no_finds=["allocator_retries", "setting_ineffective",
                                                   "memory_growth", "oom_capacity"])),
    ("cudagraph_many_shapes_oom", dict(cause="capacity", kind="unknown",
                                       first="fewer_cuda_graphs", techniques=["torch_compile", "cuda_graphs"],
                                       finds=["oom_graph_pools", "older_memory_weights"],
                                       not_first=["expandable_segments", "reduce_microbatch"],
                                       never=["activation_checkpointing", "gradient_accumulation", "fsdp",
                                              "no_grad_eval", "release_references"],
                                       no_finds=["empty_cache_note", "evidence_disagrees", "memory_growth",
                                                 "oom_fragmentation"], log=True)),
    # the inner passes' graphs are carried, but the outer step needs them and frees them (the
    # trace shows it): fewer images or checkpointing still shrink them, so those levers stay
    ("maml_create_graph_oom", dict(cause="capacity", kind="training",
                                   first=("release_references",) + CAPACITY_ACTS,
                                   has=["reduce_microbatch"],
                                   not_first=["expandable_segments"],
                                   never=["fsdp", "cpu_offload", "no_grad_eval"],
                                   no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("ensemble_infer_weights_oom", dict(cause="capacity", kind="unknown",
                                        first=("mixed_precision", "cpu_offload"),
                                        has=["mixed_precision", "cpu_offload"],
                                        never=["reduce_microbatch", "activation_checkpointing", "fsdp",
                                               "expandable_segments", "no_grad_eval", "release_references"],
                                        no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("loss_list_tiny_growth_healthy", dict(cause=None, kind="training", first="", techniques=["autocast"],
                                           no_finds=["memory_growth", "oom_capacity"],
                                           never=["release_references"])),
    # the seventeenth held-out set (tools/record_heldout17.py)
    ("hf_auto_find_batch_size_healthy", dict(cause=None, kind="training", finds=["oom_survived"],
                                             techniques=["autocast"],
                                             never=["expandable_segments", "max_split_size_mb", "fsdp",
                                                    "cpu_offload"],
                                             no_finds=["oom_fragmentation", "oom_capacity", "memory_growth"])),
    ("cudamallocasync_oom", dict(cause="capacity", folder=True, first="reduce_microbatch",
                                 finds=["async_backend"],
                                 never=["expandable_segments", "max_split_size_mb",
                                        "garbage_collection_threshold"],
                                 no_finds=["oom_fragmentation"])),
    ("cat_grow_loop_oom", dict(cause="capacity", kind="inference", first="release_references",
                               change_has={"release_references": "parts.append"},
                               finds=["memory_growth"],
                               never=["expandable_segments", "no_grad_eval", "activation_checkpointing",
                                      "gradient_accumulation"],
                               no_finds=["oom_fragmentation"], log=True)),
    ("cat_grow_loop_expandable", dict(cause="capacity", kind="inference", first="release_references",
                                      change_has={"release_references": "parts.append"},
                                      finds=["memory_growth"],
                                      never=["expandable_segments", "no_grad_eval", "activation_checkpointing"],
                                      no_finds=["oom_fragmentation"], log=True)),
    ("kv_prealloc_pool_oom", dict(cause="capacity", kind="inference", first="release_references",
                                  change_has={"release_references": "fewer blocks"},
                                  never=["expandable_segments", "no_grad_eval", "activation_checkpointing",
                                         "gradient_accumulation", "fsdp", "cpu_offload"],
                                  no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("ckpt_load_no_map_location_oom", dict(cause="capacity", first="release_references",
                                           change_has={"release_references": "map_location=\"cpu\""},
                                           never=["reduce_microbatch", "activation_checkpointing",
                                                  "gradient_accumulation", "no_grad_eval"],
                                           no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    # the eighteenth held-out set (tools/record_heldout18.py)
    ("forward_hook_cache_oom", dict(cause="capacity", kind="training", first="release_references",
                                    techniques=["autocast"], finds=["activations_held_over"],
                                    change_has={"release_references": "out.detach()"},
                                    not_first=["reduce_microbatch", "expandable_segments"],
                                    never=["fsdp", "cpu_offload", "no_grad_eval", "expandable_segments"],
                                    no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("fp32_master_weights_oom", dict(cause="capacity", kind="training", first=("mixed_precision", "cpu_offload"),
                                     has=["mixed_precision", "cpu_offload", "fsdp"],
                                     not_first=["reduce_microbatch", "expandable_segments"],
                                     never=["activation_checkpointing", "no_grad_eval"],
                                     no_finds=["memory_growth", "oom_fragmentation", "activations_held_over"],
                                     log=True)),
    ("tbptt_detach_healthy", dict(cause=None, kind="training", first="",
                                  never=["reduce_microbatch", "activation_checkpointing", "release_references",
                                         "expandable_segments"],
                                  no_finds=["memory_growth", "oom_capacity", "activations_carried"])),
    ("varsize_images_native_healthy", dict(cause=None, kind="training", techniques=["autocast"],
                                           never=["reduce_microbatch", "activation_checkpointing",
                                                  "release_references"],
                                           no_finds=["memory_growth", "oom_capacity"])),
    ("varsize_images_expandable", dict(cause=None, kind="training", first="", techniques=["autocast"],
                                       never=["expandable_segments", "reduce_microbatch",
                                              "activation_checkpointing", "release_references"],
                                       no_finds=["memory_growth", "oom_capacity", "allocator_retries"])),
    # a nineteenth held-out set (tools/record_heldout19.py)
    # a pipeline's forward runs the model under no_grad: inference, nothing to switch off
    ("hf_pipeline_batch_oom", dict(cause="capacity", kind="inference", first="reduce_microbatch",
                                   never=["activation_checkpointing", "gradient_accumulation", "fsdp",
                                          "cpu_offload", "release_references", "no_grad_eval"],
                                   no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("lightning_kept_outputs_leak_oom", dict(cause="capacity", kind="training", first="release_references",
                                             finds=["memory_growth"], techniques=["autocast"],
                                             never=["activation_checkpointing", "fsdp"],
                                             not_first=["reduce_microbatch"],
                                             no_finds=["oom_fragmentation"], log=True)),
    # FSDP1's per-module record_function annotations (FullyShardedDataParallel.forward, nested in
    # the root's) are not iterations: no growth across the wrapped layers of one forward
    ("lightning_fsdp_one_gpu_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                                        techniques=["fsdp", "fsdp_mixed_precision"], iterations=None,
                                        never=["fsdp", "release_references", "no_grad_eval", "mixed_precision"],
                                        no_finds=["memory_growth"], log=True)),
    ("accelerate_grad_accum_healthy", dict(cause=None, kind="training", first="", techniques=["autocast"],
                                           never=["gradient_accumulation", "mixed_precision"],
                                           no_finds=["memory_growth", "high_fragmentation"])),
    # a twenty-second held-out set (tools/record_heldout22.py): growth that comes in steps
    ("optimizer_recreated_leak_oom", dict(cause="capacity", kind="training", first="release_references",
                                          change_has={"release_references": "opt.state.clear()"},
                                          finds=["memory_growth"], techniques=["autocast"],
                                          never=["no_grad_eval", "activation_checkpointing"],
                                          not_first=["reduce_microbatch", "mixed_precision", "cpu_offload",
                                                     "fsdp", "expandable_segments"],
                                          no_finds=["oom_fragmentation"], log=True)),
    ("ema_deepcopy_each_eval_leak_oom", dict(cause="capacity", kind="training",
                                             first="release_references",
                                             change_has={"release_references": "update it in place"},
                                             finds=["memory_growth", "trace_truncated"],
                                             never=["no_grad_eval", "activation_checkpointing",
                                                    "reduce_microbatch", "mixed_precision",
                                                    "cpu_offload", "fsdp"],
                                             no_finds=["oom_fragmentation"], log=True)),
    ("periodic_log_tensors_leak_oom", dict(cause="capacity", kind="training", first="release_references",
                                           finds=["memory_growth"],
                                           never=["no_grad_eval", "activation_checkpointing"],
                                           not_first=["reduce_microbatch", "expandable_segments"],
                                           no_finds=["oom_fragmentation"], log=True)),
    ("expandable_varlen_healthy", dict(cause=None, kind="training", first="", techniques=["autocast"],
                                       never=["expandable_segments"],
                                       no_finds=["memory_growth", "high_fragmentation"])),
    ("sparse_embedding_sparseadam_healthy", dict(cause=None, kind="training", first="",
                                                 never=["expandable_segments"],
                                                 no_finds=["memory_growth", "high_fragmentation"])),
    # held-out sets 20, 21 and 23 (tools/record_heldout20.py, 21, 23)
    ("fsdp2_fully_shard_bf16_oom", dict(cause="capacity", kind="training",
                                        techniques=["fsdp", "fsdp_mixed_precision"],
                                        iterations=None, first=("chunked_loss",) + CAPACITY_ACTS,
                                        never=["fsdp", "release_references", "no_grad_eval",
                                               "expandable_segments", "mixed_precision"],
                                        no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("lightning_accum_16mixed_healthy", dict(cause=None, kind="training", first="", techniques=["autocast"],
                                             never=["gradient_accumulation", "expandable_segments"],
                                             no_finds=["memory_growth", "high_fragmentation"])),
    ("hf_trainer_adafactor_gradckpt_oom", dict(cause="capacity", kind="training", first="chunked_loss",
                                               techniques=["activation_checkpointing"],
                                               never=["activation_checkpointing", "no_grad_eval", "fsdp",
                                                      "cpu_offload", "expandable_segments"],
                                               no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("ckpt_nonreentrant_recompute_oom", dict(cause="capacity", kind="training", first="reduce_microbatch",
                                             techniques=["activation_checkpointing"],
                                             never=["activation_checkpointing", "no_grad_eval",
                                                    "expandable_segments", "fsdp"],
                                             no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("eval_while_train_graph_held_healthy", dict(cause=None, kind="training",
                                                 never=["no_grad_eval", "activation_checkpointing"],
                                                 no_finds=["memory_growth"])),
    ("hf_generate_num_return_sequences_oom", dict(cause="capacity", kind="inference", first="reduce_microbatch",
                                                  finds=["trace_truncated"],
                                                  never=["no_grad_eval", "activation_checkpointing",
                                                         "gradient_accumulation", "release_references"],
                                                  no_finds=["oom_fragmentation"], log=True)),
    ("hf_static_cache_generate_healthy", dict(cause=None, kind="inference", first="",
                                              never=["no_grad_eval", "expandable_segments"],
                                              no_finds=["memory_growth"])),
    ("embedding_extract_fp32_oom", dict(cause="capacity", kind="inference", first="release_references",
                                        finds=["memory_growth"],
                                        change_has={"release_references": ".cpu()"},
                                        never=["no_grad_eval", "activation_checkpointing",
                                               "gradient_accumulation"],
                                        not_first=["reduce_microbatch", "expandable_segments"],
                                        no_finds=["oom_fragmentation"], log=True)),
    ("vision_tta_infer_oom", dict(cause="capacity", kind_in=("inference", "unknown"), first="reduce_microbatch",
                                  never=["activation_checkpointing", "gradient_accumulation", "fsdp"],
                                  no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("infer_varbatch_fragmentation", dict(cause=None, kind="inference", first="expandable_segments",
                                          finds=["high_fragmentation", "allocator_retries"],
                                          never=["no_grad_eval", "activation_checkpointing"],
                                          no_finds=["memory_growth"])),
    ("compile_reduce_overhead_healthy", dict(cause=None, kind="training", first="",
                                             techniques=["torch_compile", "cuda_graphs"],
                                             finds=["private_pools"], no_finds=["memory_growth"])),
    ("kv_pool_prealloc_infer_oom", dict(cause="capacity", kind="inference", first="release_references",
                                        change_has={"release_references": "fewer blocks"},
                                        finds=["larger_input"],
                                        never=["no_grad_eval", "activation_checkpointing",
                                               "gradient_accumulation", "fsdp", "cpu_offload"],
                                        not_first=["expandable_segments"],
                                        no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("side_stream_event_prefetch_healthy", dict(cause=None, kind="training",
                                                never=["no_grad_eval", "activation_checkpointing"],
                                                no_finds=["memory_growth", "pending_free_blocks"])),
    ("ddp_bucket_view_healthy", dict(cause=None, kind="training", first="", techniques=["ddp"],
                                     never=["expandable_segments", "fsdp"],
                                     no_finds=["memory_growth", "high_fragmentation"])),
    ("sdpa_math_fallback_oom", dict(cause="capacity", kind="training", first="fused_attention",
                                    change_has={"fused_attention": "FLASH_ATTENTION"},
                                    finds=["quadratic_input"],
                                    never=["no_grad_eval", "expandable_segments", "fsdp"],
                                    no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    # held-out set 24 (tools/record_heldout24.py)
    ("hf_generate_output_scores_oom", dict(cause="capacity", kind="inference", first="release_references",
                                           change_has={"release_references": "output_scores=False"},
                                           never=["no_grad_eval", "activation_checkpointing",
                                                  "gradient_accumulation", "expandable_segments"],
                                           no_finds=["oom_fragmentation"], log=True)),
    ("keep_all_checkpoints_leak_oom", dict(cause="capacity", kind="training", first="release_references",
                                           finds=["memory_growth"], not_first=["reduce_microbatch"],
                                           never=["no_grad_eval", "fsdp"], log=True)),
    ("hf_bert_pad_max_length_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                                        never=["no_grad_eval", "expandable_segments", "fsdp"],
                                        no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("lightning_val_bigger_batch_oom", dict(cause="capacity", kind="training", first="reduce_microbatch",
                                            finds=["eval_pass_oom", "larger_input"],
                                            never=["activation_checkpointing", "gradient_accumulation",
                                                   "expandable_segments", "fsdp"],
                                            no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("two_models_infer_near_cap_healthy", dict(cause=None, kind="inference",
                                               never=["no_grad_eval", "activation_checkpointing",
                                                      "gradient_accumulation"],
                                               no_finds=["memory_growth"])),
    ("mask_repeat_materialized_expandable_oom", dict(cause="capacity", first=CAPACITY_ACTS,
                                                     never=["expandable_segments", "fsdp"],
                                                     no_finds=["memory_growth", "oom_fragmentation"],
                                                     log=True)),
    ("diffusion_keep_intermediates_oom", dict(cause="capacity", kind="inference", first="release_references",
                                              finds=["memory_growth"],
                                              never=["chunked_loss", "no_grad_eval", "activation_checkpointing",
                                                     "gradient_accumulation"], log=True)),
    ("other_process_grows_midrun_oom", dict(cause="other_processes", kind="training",
                                            first="free_device_memory",
                                            never=["expandable_segments"],
                                            no_finds=["memory_growth"], log=True)),
    # the snapshot alone: the trace's peak reserved, more than held + free at the OOM
    ("other_process_grows_midrun_oom", dict(cause="unknown", kind="training", first="free_device_memory",
                                            finds=["outside_grew"], no_finds=["memory_growth"])),
    ("hf_llama_gradckpt_longseq_oom", dict(cause="capacity", kind="training", first="chunked_loss",
                                           techniques=["activation_checkpointing"],
                                           never=["activation_checkpointing", "no_grad_eval", "fsdp"],
                                           no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    # held-out set 25 (tools/record_heldout25.py)
    ("hf_trainer_eval_bigger_batch_oom", dict(cause="capacity", kind="training", first="reduce_microbatch",
                                              change_has={"reduce_microbatch": "per_device_eval_batch_size"},
                                              finds=["eval_pass_oom", "larger_input"],
                                              never=["activation_checkpointing", "gradient_accumulation",
                                                     "expandable_segments", "fsdp"],
                                              no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("replay_buffer_gpu_oom", dict(cause="capacity", kind="training", first="release_references",
                                   finds=["memory_growth"], not_first=["expandable_segments"],
                                   never=["fsdp", "no_grad_eval"], no_finds=["oom_fragmentation"], log=True)),
    ("other_process_plus_capacity_oom", dict(cause="other_processes", kind="training",
                                             first="free_device_memory", never=["expandable_segments"],
                                             no_finds=["memory_growth"], log=True)),
    ("hf_llama_long_prompt_prefill_oom", dict(cause="capacity", kind="inference", first="reduce_microbatch",
                                              change_has={"reduce_microbatch": "prefill"},
                                              never=["activation_checkpointing", "gradient_accumulation",
                                                     "no_grad_eval", "fsdp"],
                                              no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("hf_t5_seq2seq_train_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                                     never=["no_grad_eval", "expandable_segments", "fsdp"],
                                     no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("torchvision_vit_b16_train_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                                           not_first=["expandable_segments"], never=["no_grad_eval", "fsdp"],
                                           no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("accelerate_fp16_gradscaler_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                                            techniques=["autocast"],
                                            change_has={"reduce_microbatch": "gradient_accumulation_steps"},
                                            never=["mixed_precision", "no_grad_eval", "fsdp"],
                                            no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("infer_server_steady_healthy", dict(cause=None, kind="inference", never=["no_grad_eval"],
                                         no_finds=["memory_growth"])),
    ("llama_s1024_16g_b2", dict(cause=None, kind="training", no_finds=["memory_growth"])),
    ("gpt8_s256_8g_b4", dict(cause=None, kind="training", no_finds=["memory_growth"])),
    ("resnet50_10g_b16", dict(cause=None, kind="training", no_finds=["memory_growth"])),
    ("llama_infer_s1024_4g_b4", dict(cause=None, kind="inference", no_finds=["memory_growth"],
                                     never=["no_grad_eval"])),
    # a twenty-sixth held-out set (tools/record_heldout26.py; facts.json fix_probes: the fixes measured)
    # loaded in bf16, no autocast: checkpointing alone still died at the float32 logits (probe), so the
    # microbatch first (or checkpointing), and the logits' loss in chunks among the advice
    # The trace ends in the first forward, before the loss: the logits' float32 copy the probe
    # with checkpointing died on is not in it, so no chunked_loss is asked. The weights' dtype is
    # not in a snapshot either: the bf16 tip may stay, hedged ("if the model runs in float32"),
    # never first.
    ("gptneox_bf16_loaded_ft_oom", dict(cause="capacity", kind="training",
                                        first=("reduce_microbatch", "activation_checkpointing"),
                                        no_techniques=["autocast"], not_first=["mixed_precision"],
                                        never=["fsdp", "cpu_offload", "no_grad_eval",
                                               "expandable_segments"],
                                        no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    # einsum attention: expandable_segments measured to die at the same softmax two blocks later; SDPA fits
    # expandable_segments may appear only as the entry that says it would not save the run
    ("einsum_attn_vit_highres_oom", dict(cause="capacity", kind_in=("training", "unknown"),
                                         first="fused_attention", techniques=["autocast"],
                                         change_has={"fused_attention": "scaled_dot_product_attention"},
                                         not_first=["no_grad_eval", "expandable_segments"],
                                         never=["max_split_size_mb", "mixed_precision",
                                                "fsdp", "cpu_offload"],
                                         no_finds=["oom_fragmentation", "memory_growth"], log=True)),
    # the same without its log: the frames alone (a float32 softmax of bf16 scores from the
    # model's own code, 4x and more any layer's output) read as attention written out by hand
    ("einsum_attn_vit_highres_oom", dict(cause="capacity", first="fused_attention",
                                         never=["max_split_size_mb", "mixed_precision", "fsdp",
                                                "cpu_offload"],
                                         no_finds=["oom_fragmentation", "memory_growth"])),
    ("peft_lora_bert_longdoc_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                                        techniques=["autocast"],
                                        never=["mixed_precision", "fsdp", "cpu_offload", "no_grad_eval",
                                               "expandable_segments"],
                                        no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    # 901 MiB of overhead at the peak on a server far from any limit: a remark, no warning
    ("convnext_infer_server_healthy", dict(cause=None, kind="inference", calm=True,
                                           never=["no_grad_eval", "reduce_microbatch", "activation_checkpointing",
                                                  "gradient_accumulation", "mixed_precision"],
                                           no_finds=["memory_growth"])),
    # the metric's state (every pixel's prediction and target) grows; expandable measured to buy 9 steps
    # the metric's list state: binned thresholds measured to fit 160 steps (fix_probes)
    ("torchmetrics_auroc_state_oom", dict(cause="capacity", kind="training", first="release_references",
                                          change_has={"release_references": "thresholds="},
                                          finds=["memory_growth"], techniques=["autocast"],
                                          not_first=["expandable_segments", "reduce_microbatch"],
                                          never=["fsdp", "no_grad_eval", "mixed_precision"],
                                          no_finds=["oom_fragmentation"], log=True)),
    ("jax_prealloc_outside_oom", dict(cause="non_pytorch_memory", kind="training", first="free_device_memory",
                                      change_has={"free_device_memory": "XLA_PYTHON_CLIENT_PREALLOCATE"},
                                      never=["reduce_microbatch", "activation_checkpointing",
                                             "expandable_segments"],
                                      no_finds=["oom_other_processes", "memory_growth"], log=True)),
    # expandable_segments measured to fit at the same cap
    ("naive_kv_server_fragmentation_oom", dict(cause="fragmentation", kind_in=("inference", "unknown"),
                                               first="expandable_segments",
                                               never=FORWARD_ONLY_NEVER + ["no_grad_eval"],
                                               not_first=["reduce_microbatch"],
                                               no_finds=["memory_growth"], log=True)),
    # AOTAutograd partitioned a joint graph (aot_stage2_autograd in the stacks): a training graph
    ("compile_resnet18_bigbatch_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                                           techniques=["torch_compile", "autocast"],
                                           never=["no_grad_eval", "mixed_precision", "expandable_segments",
                                                  "fsdp", "cpu_offload"],
                                           no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    # a twenty-seventh held-out set (tools/record_heldout27.py; facts.json fix_probes: the fixes measured)
    # a generate() server: cached-but-free blocks from the varying shapes are no warning, nothing to change
    ("hf_generate_server_varlen_healthy", dict(cause=None, kind="inference", first="",
                                               never=["no_grad_eval", "reduce_microbatch", "activation_checkpointing",
                                                      "gradient_accumulation", "mixed_precision", "fsdp",
                                                      "cpu_offload", "expandable_segments"],
                                               no_finds=["memory_growth", "high_fragmentation"])),
    # explicit matmul/softmax attention, snapshot only (no log, no OOM message): SDPA measured to fit
    # (peak 3.63 GiB), half the batch measured to OOM still; the frames alone must say attention
    ("esm_matmul_attn_nolog_oom", dict(cause="capacity", kind="training",
                                       first=("fused_attention", "activation_checkpointing"),
                                       has=["fused_attention"], techniques=["autocast"],
                                       not_first=["reduce_microbatch"],
                                       never=["mixed_precision", "expandable_segments", "fsdp", "cpu_offload",
                                              "no_grad_eval"],
                                       no_finds=["memory_growth", "oom_fragmentation"])),
    # 98 tile views in one inference forward: 16 views per forward measured to fit
    ("sliding_window_seg_tta_oom", dict(cause="capacity", kind_in=("inference", "unknown"),
                                        first="reduce_microbatch",
                                        never=["activation_checkpointing", "gradient_accumulation", "fsdp",
                                               "cpu_offload", "no_grad_eval", "expandable_segments"],
                                        no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    # a no_grad validation run between the loss and loss.backward(): the step's graph is alive; the same
    # loop with the validation after optimizer.step() measured to fit under the same cap
    ("eval_before_backward_graph_held_oom", dict(cause="capacity", kind="training", first="release_references",
                                                 finds=["eval_pass_oom"], techniques=["autocast"],
                                                 not_first=["reduce_microbatch", "activation_checkpointing"],
                                                 never=["no_grad_eval", "expandable_segments", "fsdp", "cpu_offload",
                                                        "mixed_precision"],
                                                 no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    # VisionEncoderDecoder, 48 images a microbatch: microbatch 12 (x16 accumulation) and checkpointing of the
    # encoder measured to fit; the accumulation cannot be seen (it dies in the first microbatch)
    ("hf_vit_gpt2_caption_accum_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                                           techniques=["autocast"], not_first=["expandable_segments"],
                                           change_has={"activation_checkpointing": "gradient_checkpointing"},
                                           never=["mixed_precision", "fsdp", "cpu_offload", "no_grad_eval"],
                                           no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    # Lightning's BatchSizeFinder: its trial at 16 OOMed and was caught; the run trained at 8; healthy
    ("lightning_batch_size_finder_healthy", dict(cause=None, kind="training", first="", techniques=["autocast"],
                                                 finds=["oom_survived"],
                                                 never=["no_grad_eval", "fsdp", "cpu_offload", "mixed_precision",
                                                        "expandable_segments"],
                                                 no_finds=["memory_growth", "high_fragmentation"])),
    # variable-length training: expandable_segments:True measured to fit at the same cap (2 retries)
    ("varlen_train_fragmentation_oom", dict(cause="fragmentation", kind="training", first="expandable_segments",
                                            techniques=["autocast"],
                                            never=["no_grad_eval", "fsdp", "cpu_offload", "mixed_precision"],
                                            no_finds=["memory_growth"], log=True)),
    # CuPy's default pool caches ~132 GB the preprocessing freed: free_all_blocks measured to fit
    ("cupy_pool_cached_outside_oom", dict(cause="non_pytorch_memory", kind="training", first="free_device_memory",
                                          change_has={"free_device_memory": "free_all_blocks"},
                                          techniques=["autocast"],
                                          never=["expandable_segments", "mixed_precision", "fsdp", "no_grad_eval"],
                                          no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    # the snapshot alone: the device was full while PyTorch held 7.4 of its 12 GiB, but not who held the rest
    # (the check that tells the two stories apart comes first)
    ("cupy_pool_cached_outside_oom", dict(cause="unknown", kind="training", finds=["device_full"],
                                          first="free_device_memory", no_finds=["memory_growth"], log=False)),
    # held-out set 28 (recorded on an H100). float32 attention written out by hand, F.dropout of its
    # probabilities; no log: SDPA measured to fit (4.21 GiB), bf16 autocast with the same attention to OOM
    ("ast_fp32_matmul_attn_nolog_oom", dict(cause="capacity", kind="training", first="fused_attention",
                                            not_first=["mixed_precision"],
                                            never=["expandable_segments", "fsdp", "cpu_offload", "no_grad_eval"],
                                            no_finds=["memory_growth", "oom_fragmentation"])),
    # output_attentions=True in a no_grad forward: every layer's bf16 probabilities kept; without it eager
    # measured to fit (5.49 GiB), SDPA 0.83 GiB
    ("hf_output_attentions_infer_oom", dict(cause="capacity", kind="inference", first="release_references",
                                            change_has={"release_references": "output_attentions=False"},
                                            never=["mixed_precision", "no_grad_eval", "activation_checkpointing",
                                                   "gradient_accumulation", "fsdp", "cpu_offload"],
                                            no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("hf_output_attentions_infer_oom", dict(cause="capacity", kind="inference", first="release_references",
                                            never=["mixed_precision", "no_grad_eval", "activation_checkpointing"],
                                            no_finds=["memory_growth"])),
    # hard-negative mining over a 32768 x 32768 torch.cdist outside the model: row chunks under no_grad
    # measured to fit (1.92 GiB), a mining batch of 8192 too
    ("triplet_cdist_hardmining_oom", dict(cause="capacity", kind="training", first="split_operation",
                                          has=["reduce_microbatch"], techniques=["autocast"],
                                          never=["fused_attention", "activation_checkpointing", "fsdp",
                                                 "cpu_offload", "mixed_precision", "expandable_segments"],
                                          no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    # a padded MoE dispatch with a collapsed router: capacity factor 1.25 and half the batch measured to fit
    ("moe_router_collapse_padded_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                                            techniques=["autocast"],
                                            never=["fused_attention", "expandable_segments", "fsdp", "cpu_offload",
                                                   "no_grad_eval", "mixed_precision"],
                                            no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    # integrated gradients: a graph to the input, no optimizer; 64 interpolations per forward measured to fit
    ("integrated_gradients_batched_oom", dict(cause="capacity", first="reduce_microbatch",
                                              not_first=["no_grad_eval"],
                                              never=["fsdp", "cpu_offload", "expandable_segments"],
                                              no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    # a teacher under no_grad beside a training student; healthy
    ("distill_teacher_nograd_healthy", dict(cause=None, kind="training", first="",
                                            never=["no_grad_eval", "activation_checkpointing", "fsdp"],
                                            no_finds=["memory_growth", "high_fragmentation"])),
    # assisted generation, two models' weights and per-request caches; healthy
    ("speculative_assisted_generate_healthy", dict(cause=None, kind="inference", first="",
                                                   never=["no_grad_eval", "mixed_precision"],
                                                   no_finds=["memory_growth", "high_fragmentation"])),
    # the evaluation's last outputs (1.96 GiB, no_grad) still referenced in the next training step's backward:
    # del outputs measured to fit under the same cap
    ("eval_outputs_kept_into_train_oom", dict(cause="capacity", kind="training", first="release_references",
                                              finds=["nograd_outputs_held"], techniques=["autocast"],
                                              never=["no_grad_eval", "fsdp", "cpu_offload", "mixed_precision",
                                                     "expandable_segments"],
                                              no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    # held-out set 29 (recorded on an H100). PCA of a resident embedding matrix: two full-size float64 copies, no
    # model; the covariance over row chunks measured to fit (7.02 GiB), the same code in float32 too
    ("pca_float64_covariance_oom", dict(cause="capacity", kind_in=("unknown", "inference"),
                                        first=("split_operation",),
                                        never=["activation_checkpointing", "gradient_accumulation", "reduce_microbatch",
                                               "fsdp", "cpu_offload", "no_grad_eval", "mixed_precision",
                                               "expandable_segments"],
                                        no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    # a sequence-length curriculum at a fixed batch under accelerate: flat between steps (no leak); 16384 tokens a
    # step measured to fit, expandable segments under the same cap measured to OOM
    # where to checkpoint: the model's own forward, not accelerate's autocast wrapper around it
    ("curriculum_seqlen_growth_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS + ("chunked_loss",),
                                          techniques=["autocast"], not_first=["expandable_segments"],
                                          never=["fsdp", "cpu_offload", "no_grad_eval", "mixed_precision"],
                                          finds=["larger_input"], no_finds=["memory_growth", "oom_fragmentation"],
                                          reason_lacks={"activation_checkpointing": "accelerate/"},
                                          log=True)),
    ("curriculum_seqlen_growth_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS + ("chunked_loss",),
                                          techniques=["autocast"], not_first=["expandable_segments"],
                                          never=["fsdp", "cpu_offload", "no_grad_eval", "mixed_precision"],
                                          no_finds=["memory_growth", "oom_fragmentation"])),
    # a whole-batch vectorized jacobian of a 0.13 M-param MLP: the per-sample jacobian (sum trick, vmap(jacrev))
    # measured to fit; fewer points would too (its memory grows with the square of the batch)
    ("pinn_jacobian_vectorize_oom", dict(cause="capacity", kind="training", first=("split_operation",),
                                         has=["reduce_microbatch"], not_first=["mixed_precision"],
                                         never=["fsdp", "cpu_offload", "activation_checkpointing", "no_grad_eval",
                                                "expandable_segments"],
                                         no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("pinn_jacobian_vectorize_oom", dict(cause="capacity", kind="training", first=("split_operation",),
                                         has=["reduce_microbatch"],
                                         never=["fsdp", "cpu_offload", "activation_checkpointing", "no_grad_eval",
                                                "expandable_segments"],
                                         no_finds=["memory_growth", "oom_fragmentation"])),
    # HF Trainer with preprocess_logits_for_metrics and eval_accumulation_steps; healthy
    ("hf_trainer_mlm_eval_accum_healthy", dict(cause=None, kind="training", first="",
                                               never=["no_grad_eval", "activation_checkpointing", "fsdp"],
                                               no_finds=["memory_growth"])),
    # Lightning fitting torch.compile(model); healthy
    ("lightning_compile_healthy", dict(cause=None, kind="training", techniques=["torch_compile"],
                                       never=["reduce_microbatch", "activation_checkpointing", "fsdp", "cpu_offload",
                                              "no_grad_eval"],
                                       no_finds=["memory_growth"])),
    # history recorded after an 8 GiB feature cache was built: capacity, its largest holder unattributable; fp32,
    # no autocast (the cuBLAS workspace of the first matmul is half a 4096 x 4096 float32 weight)
    ("late_history_feature_cache_oom", dict(cause="capacity", kind="training", first=("release_references", "record_history"),
                                            no_techniques=["autocast"], not_first=["expandable_segments"],
                                            never=["fsdp", "cpu_offload", "no_grad_eval"], finds=["trace_truncated"],
                                            no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("late_history_feature_cache_oom", dict(cause="capacity", kind="training", first=("release_references", "record_history"),
                                            no_techniques=["autocast"], not_first=["expandable_segments"],
                                            never=["fsdp", "cpu_offload", "no_grad_eval"],
                                            no_finds=["memory_growth", "oom_fragmentation"])),
    # held-out set 30 (recorded on an H200). A 1.96 B-param Llama built in float32 and moved to the GPU whole:
    # it dies moving the weights, before any forward; bf16 measured to fit and generate
    ("hf_fp32_from_config_load_oom", dict(cause="capacity", kind_in=("unknown", "inference"),
                                          first=("mixed_precision",),
                                          never=["reduce_microbatch", "activation_checkpointing",
                                                 "gradient_accumulation", "no_grad_eval", "expandable_segments",
                                                 "release_references"],
                                          no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    # an RNN-T's B x T x (U+1) x V joint: training that died in its first step's loss, after a forward made of
    # several modules each called once (not an evaluation); the joint over chunks of the batch measured to fit,
    # half the batch measured to OOM
    ("rnnt_joint_tensor_oom", dict(cause="capacity", kind="training",
                                   first=CAPACITY_ACTS + ("chunked_loss", "split_operation"),
                                   never=["no_grad_eval", "fsdp", "cpu_offload", "expandable_segments",
                                          "release_references"],
                                   not_first=["mixed_precision"],
                                   no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("rnnt_joint_tensor_oom", dict(cause="capacity", kind="training",
                                   first=CAPACITY_ACTS + ("chunked_loss", "split_operation"),
                                   never=["no_grad_eval", "fsdp", "cpu_offload", "expandable_segments"],
                                   no_finds=["memory_growth", "oom_fragmentation"])),
    # a Lightning Callback keeping each step's detached encoder output on the GPU: 32 MiB a step; .cpu() copies
    # measured to run all 150 steps
    ("lightning_callback_feature_cache_leak_oom", dict(cause="capacity", kind="training", first="release_references",
                                                       techniques=["autocast"], finds=["memory_growth"],
                                                       not_first=["reduce_microbatch", "expandable_segments"],
                                                       never=["fsdp", "cpu_offload", "no_grad_eval"],
                                                       no_finds=["oom_fragmentation"], log=True)),
    # Mask R-CNN at 1344 x 1344 without downscaling, 4 images, fp32: activations; batch 2 and the default sizes
    # measured to fit
    ("maskrcnn_large_images_oom", dict(cause="capacity", kind="training", first=CAPACITY_ACTS,
                                       not_first=["expandable_segments"],
                                       never=["no_grad_eval", "fsdp", "cpu_offload", "release_references"],
                                       no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    # embed passages, retrieve, generate, under inference_mode; healthy (its 40000 entries wrapped)
    ("rag_embed_then_generate_healthy", dict(cause=None, kind="inference", first="",
                                             never=["no_grad_eval", "activation_checkpointing",
                                                    "gradient_accumulation", "expandable_segments"],
                                             no_finds=["memory_growth", "high_fragmentation"])),
    # DDP with no_sync over 4 microbatches, bf16 autocast; healthy
    ("ddp_no_sync_accum_healthy", dict(cause=None, kind="training", techniques=["ddp", "autocast"], first="",
                                       never=["gradient_accumulation", "reduce_microbatch", "fsdp", "cpu_offload",
                                              "no_grad_eval"],
                                       no_finds=["memory_growth", "high_fragmentation"])),
    # held-out set 31 (recorded on an H100). An embedding server keeping its last 8 responses of varying size:
    # fragmentation; expandable segments measured to serve every request at the same cap
    ("bert_server_kept_outputs_fragmentation_oom", dict(cause="fragmentation", kind="inference",
                                                        first="expandable_segments",
                                                        never=["no_grad_eval", "activation_checkpointing",
                                                               "gradient_accumulation", "fsdp"],
                                                        no_finds=["memory_growth"], log=True)),
    # a Lightning validation batch 8 times the training batch left its cache reserved; healthy
    ("lightning_val_big_batch_cache_healthy", dict(cause=None, kind="training", techniques=["autocast"],
                                                   first=("", "expandable_segments"),
                                                   never=["reduce_microbatch", "fsdp", "cpu_offload",
                                                          "no_grad_eval", "release_references"],
                                                   no_finds=["memory_growth"])),
    # accelerate: after 3 training steps, an evaluation under no_grad keeping every batch's gathered logits
    # (196 MiB) in a list on the GPU; gathering the argmax ids measured to run all 48 batches
    ("accelerate_eval_gather_logits_oom", dict(cause="capacity", kind="training", first="release_references",
                                               finds=["memory_growth"],
                                               change_has={"release_references": "argmax"},
                                               never=["no_grad_eval", "fsdp", "cpu_offload",
                                                      "activation_checkpointing", "gradient_accumulation"],
                                               not_first=["reduce_microbatch", "expandable_segments"],
                                               no_finds=["oom_fragmentation"], log=True)),
    # HF gradient checkpointing silently off from step 2: model.eval() for an evaluation, never model.train()
    # again; model.train() after the evaluation measured to run all 5 steps
    ("hf_gradckpt_eval_mode_left_oom", dict(cause="capacity", kind="training", first="restore_checkpointing",
                                            techniques=["activation_checkpointing"],
                                            finds=["checkpointing_inactive"],
                                            never=["no_grad_eval", "fsdp", "cpu_offload", "activation_checkpointing",
                                                   "expandable_segments"],
                                            no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    ("hf_gradckpt_eval_mode_left_oom", dict(cause="capacity", kind="training", first="restore_checkpointing",
                                            finds=["checkpointing_inactive"])),
    # a chat server keeping every session's past_key_values after generate() returns: a leak, one cache a
    # request; an LRU of 2 sessions measured to serve every request
    ("hf_chat_session_kv_cache_leak_oom", dict(cause="capacity", kind="inference", first="release_references",
                                               finds=["memory_growth"],
                                               change_has={"release_references": "past_key_values"},
                                               never=["no_grad_eval", "activation_checkpointing",
                                                      "gradient_accumulation", "reduce_microbatch"],
                                               not_first=["expandable_segments"],
                                               no_finds=["oom_fragmentation"], log=True)),
    # half the layers offloaded to the CPU by accelerate's hooks, generate under inference_mode; healthy
    ("accelerate_offload_generate_healthy", dict(cause=None, kind="inference", first="",
                                                 never=["no_grad_eval", "activation_checkpointing",
                                                        "gradient_accumulation", "cpu_offload",
                                                        "expandable_segments"],
                                                 no_finds=["memory_growth", "high_fragmentation"])),
    # held-out set 32 (recorded on an H100). Batches bucketed by image size, the last at 1024 x 1024 (4 times
    # the pixels of the 512 batches that fit); resizing to 512 or 4 chunks of the last batch measured to fit
    ("resnet_variable_resolution_infer_oom", dict(cause="capacity", kind="inference", first="reduce_microbatch",
                                                  finds=["larger_input"],
                                                  change_has={"reduce_microbatch": "chunk(4)"},
                                                  never=["no_grad_eval", "activation_checkpointing",
                                                         "gradient_accumulation", "expandable_segments"],
                                                  no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    # a cross-batch memory: a deque(maxlen=24) of detached embeddings fills over 24 steps, then stays flat;
    # healthy, and its filling is no leak
    ("xbm_rolling_embeddings_healthy", dict(cause=None, kind="training", techniques=["autocast"],
                                            first=("", "expandable_segments"), calm=True,
                                            finds=["bounded_growth"],
                                            never=["release_references", "reduce_microbatch",
                                                   "activation_checkpointing", "fsdp"],
                                            no_finds=["memory_growth"])),
    # a LightningModule keeping every validation batch's logits in a list it never clears: 256 MiB more each
    # epoch; clearing it in on_validation_epoch_end measured to run all 12 epochs
    ("lightning_val_outputs_never_cleared_oom", dict(cause="capacity", kind="training", first="release_references",
                                                     finds=["memory_growth"],
                                                     change_has={"release_references": "clear()"},
                                                     never=["fsdp", "cpu_offload", "activation_checkpointing",
                                                            "gradient_accumulation"],
                                                     not_first=["reduce_microbatch", "expandable_segments"],
                                                     no_finds=["oom_fragmentation"], log=True)),
    # a frozen ViT backbone (no no_grad needed: nothing in it requires grad) under a trained linear head
    ("vit_frozen_backbone_linear_probe_healthy", dict(cause=None, kind="training", techniques=["autocast"],
                                                      first=("", "expandable_segments"), calm=True,
                                                      never=["no_grad_eval", "reduce_microbatch",
                                                             "activation_checkpointing", "fsdp", "cpu_offload",
                                                             "release_references"],
                                                      no_finds=["memory_growth"])),
    # held-out set 33 (recorded on an H100). A hand-written LM server whose prefix cache is an LRU of 16 entries,
    # then one request 8 times longer: capacity of that request, the cache bounded; chunks measured to fit
    ("prefix_cache_bounded_then_long_request_oom", dict(cause="capacity", first="reduce_microbatch",
                                                        kind=("inference", "unknown"), finds=["larger_input"],
                                                        change_has={"reduce_microbatch": "chunk("},
                                                        never=["activation_checkpointing", "gradient_accumulation",
                                                               "expandable_segments", "fsdp"],
                                                        no_finds=["memory_growth", "oom_fragmentation"], log=True)),
    # a clone of the state dict every 6 steps kept on the GPU: growth in steps of one weight copy
    ("stepped_state_dict_gpu_leak_healthy", dict(cause=None, kind="training", first="release_references",
                                                 techniques=["autocast"], finds=["memory_growth"],
                                                 change_has={"release_references": "in place"},
                                                 never=["reduce_microbatch", "activation_checkpointing", "fsdp"],
                                                 no_finds=["bounded_growth"])),
    # trainer.test keeping every batch's logits: a leak within the test epoch; the argmax measured to fit
    ("lightning_test_step_outputs_oom", dict(cause="capacity", first="release_references", finds=["memory_growth"],
                                             change_has={"release_references": "argmax"},
                                             never=["activation_checkpointing", "gradient_accumulation",
                                                    "no_grad_eval", "fsdp"],
                                             no_finds=["oom_fragmentation"], log=True)),
    # batches sorted by ascending length: rising peaks, flat between batches; healthy
    ("sorted_by_length_infer_healthy", dict(cause=None, kind="inference", first=("", "expandable_segments"),
                                            calm=True, never=["release_references", "reduce_microbatch",
                                                              "no_grad_eval"],
                                            no_finds=["memory_growth"])),
    # held-out set 34 (recorded on an H100). An ensemble of 4 deepcopied members trained together: capacity of
    # the model state, the copies are trained (gradients, state), not kept; 2 members measured to fit
    ("ensemble_deepcopy_train_capacity_oom", dict(cause="capacity", kind="training", techniques=["autocast"],
                                                  first=("mixed_precision", "cpu_offload", "fsdp"),
                                                  never=["release_references", "activation_checkpointing",
                                                         "no_grad_eval"],
                                                  no_finds=["model_copies_kept", "memory_growth",
                                                            "oom_fragmentation"], log=True)),
    # a chat server keeping the KV caches of its last 4 sessions (an LRU); healthy, the trace wrapped
    ("hf_chat_lru_sessions_healthy", dict(cause=None, kind="inference", first="",
                                          never=["release_references", "no_grad_eval", "reduce_microbatch"],
                                          no_finds=["memory_growth", "high_fragmentation"])),
    # 3 batches prefetched onto the GPU in a deque; healthy, flat
    ("gpu_prefetch_queue_healthy", dict(cause=None, kind="training", techniques=["autocast"], first="", calm=True,
                                        never=["release_references", "reduce_microbatch"],
                                        no_finds=["memory_growth"])),
    # held-out set 35: an embedding made trainable in a LoRA run (its AdamW state fails); the
    # right first advice (freeze it) is not given yet: the state's own levers come first
    ("lora_embedding_requires_grad_adam_oom", dict(cause="capacity", kind="training",
                                                   first="freeze_parameters",
                                                   never=["activation_checkpointing", "no_grad_eval",
                                                          "expandable_segments"],
                                                   no_finds=["memory_growth"])),
    # stored exceptions keep each skipped step's graph alive: a leak of activations
    ("stored_exception_graph_leak_oom", dict(cause="capacity", kind="training", first="release_references",
                                             finds=["activations_carried"], never=["no_grad_eval"])),
    # F.one_hot(hist, 50000) of the longest history: one needless tensor larger than the cap
    ("multihot_one_hot_history_oom", dict(cause="capacity", kind="training", first="split_operation",
                                          has=["reduce_microbatch"],
                                          never=["no_grad_eval", "expandable_segments",
                                                 "activation_checkpointing", "cpu_offload", "fsdp"],
                                          no_finds=["memory_growth", "oom_fragmentation"])),
    # AdamW state moved to the GPU for each step and back: healthy, flat between steps
    ("optimizer_state_cpu_offload_healthy", dict(cause=None, kind="training", first="", calm=True,
                                                 never=["cpu_offload", "fsdp", "reduce_microbatch",
                                                        "release_references"],
                                                 no_finds=["memory_growth"])),
    # held-out set 36: a NeRF's no_grad full-image render after 20 training steps (25x the rays)
    ("nerf_full_image_render_oom", dict(cause="capacity", kind="training", first="reduce_microbatch",
                                        finds=["larger_input"],
                                        never=["chunked_loss", "gradient_accumulation",
                                               "activation_checkpointing", "no_grad_eval"])),
    # PCGrad's per-task gradient copies in step 0: not activations
    ("pcgrad_multitask_grad_copies_oom", dict(cause="capacity", kind="training", first="release_references",
                                              never=["reduce_microbatch", "activation_checkpointing",
                                                     "gradient_accumulation", "fsdp", "cpu_offload",
                                                     "no_grad_eval"])),
    # a Mamba's sequential scan keeps (B, L, D, N) states for its backward; dies in step 0's forward
    ("mamba_seq_scan_train_oom", dict(cause="capacity", kind=("training", "unknown"), first="reduce_microbatch",
                                      never=["fused_attention", "chunked_loss", "fsdp", "cpu_offload"],
                                      no_finds=["memory_growth"])),
    # Lightning manual optimization, a step every 4 batches: healthy
    ("lightning_manual_opt_accum_healthy", dict(cause=None, kind="training", techniques=["autocast"], first="",
                                                calm=True, never=["gradient_accumulation", "reduce_microbatch"],
                                                no_finds=["memory_growth"])),
]

# Other people's snapshots: what can be said about them without their authors.
THIRD_PARTY = [
    # one training step each: memory returns to its level, nothing grows
    ("notHanmin__assignment2-systems__memory_snapshot.pickle",
     dict(kind="training", no_finds=["memory_growth"])),
    ("bcrafton__assignment2-systems__memory_snapshot.pickle",
     dict(kind="training", no_finds=["memory_growth"], techniques=["torch_compile"])),
]

n = 0


def report(ok, what):
    global n
    n += 1
    print("%s %d - %s" % ("ok" if ok else "not ok", n, what))




def sample_files(name):
    for root in ROOTS:
        d = os.path.join(root, name)
        for f in ("snapshot.pickle", "oom_snapshot.pickle"):
            if os.path.isfile(os.path.join(d, f)):
                return d, os.path.join(d, f)
    if name == "gpt_large_trace" and os.path.isfile("build/gpt_large_trace.pickle"):
        return None, "build/gpt_large_trace.pickle"
    return None, None


def absent(label, name):
    """A sample neither corpus has: skipped when it is a shared one, failed when it is ours."""
    if os.path.isdir(os.path.join("tests", "corpus", name)):
        report(False, "%s: tests/corpus/%s is not unpacked into build/corpus%s" % (
            label, name, "" if UNPACKED else " (tests/unpack_corpus.sh failed)"))
    else:
        report(True, "%s # SKIP not in build/corpus nor %s/corpus" % (label, SHARED))


def run(paths):
    p = subprocess.run([BIN, *paths, "--format", "json", "-q", "-o", "-"], capture_output=True)
    if p.returncode != 0:
        return None, p.stderr.decode(errors="replace").strip()
    return json.loads(p.stdout), None


def check(label, doc, want):
    problems = []
    recs = [r["id"] for r in doc.get("recommendations", [])]
    finds = [f["id"] for f in doc.get("findings", [])]
    oom = doc.get("oom")
    cause = oom.get("cause") if oom else None
    if "cause" in want and cause != want["cause"]:
        problems.append("cause %s, want %s" % (cause, want["cause"]))
    kind = (doc.get("run") or {}).get("kind")
    if "kind" in want and kind not in (want["kind"] if isinstance(want["kind"], tuple) else (want["kind"],)):
        problems.append("run.kind %s, want %s" % (kind, want["kind"]))
    if "kind_in" in want and kind not in want["kind_in"]:
        problems.append("run.kind %s, want one of %s" % (kind, "|".join(want["kind_in"])))
    iters = (doc.get("run") or {}).get("iterations")
    if "iterations" in want and iters != want["iterations"]:
        problems.append("run.iterations %s, want %s" % (iters, want["iterations"]))
    for rid, words in want.get("change_has", {}).items():
        ch = [r.get("change") or "" for r in doc.get("recommendations", []) if r["id"] == rid]
        if not ch or words not in ch[0]:
            problems.append("%s change %r lacks %r" % (rid, ch[0] if ch else None, words))
    for rid, words in want.get("reason_lacks", {}).items():
        why = [r.get("reason") or "" for r in doc.get("recommendations", []) if r["id"] == rid]
        if why and words in why[0]:
            problems.append("%s reason has %r" % (rid, words))
    tech = (doc.get("run") or {}).get("techniques") or []
    for t in want.get("techniques", []):
        if t not in tech:
            problems.append("technique %s missing (%s)" % (t, tech))
    for t in want.get("no_techniques", []):
        if t in tech:
            problems.append("technique %s claimed (%s)" % (t, tech))
    first = recs[0] if recs else ""
    if "first" in want:
        ok = want["first"]
        ok = ok if isinstance(ok, tuple) else (ok,)
        if first not in ok:
            problems.append("first advice %s, want %s" % (first or "(none)", "|".join(ok)))
    if "change" in want and recs:
        ch = doc["recommendations"][0].get("change") or ""
        if ch.strip() != want["change"]:
            problems.append("first change %r, want %r" % (ch, want["change"]))
    for r in want.get("never", []):
        if r in recs:
            problems.append("recommends %s" % r)
    for r in want.get("has", []):
        if r not in recs:
            problems.append("does not recommend %s" % r)
    for r in want.get("not_first", []):
        if first == r:
            problems.append("%s first" % r)
    for f in want.get("finds", []):
        if f not in finds:
            problems.append("no %s finding" % f)
    for f in want.get("no_finds", []):
        if f in finds:
            problems.append("%s finding" % f)
    if oom and not recs:
        problems.append("an OOM report with nothing to change")
    if want.get("calm"):
        loud = ["%s (%s)" % (f["id"], f["severity"]) for f in doc.get("findings", [])
                if f.get("severity") != "info"]
        if loud:
            problems.append("above info: %s" % ", ".join(loud))
    report(not problems, "%s: %s" % (label, "; ".join(problems) if problems else
                                      "cause %s, kind %s, first %s" % (cause, kind, first or "-")))


for name, want in TABLE:
    d, snap = sample_files(name)
    if not snap and want.get("folder"):
        # no snapshot could be dumped (cudaMallocAsync): the run folder, as a user gives it
        d = next((os.path.join(r, name) for r in ROOTS if os.path.isdir(os.path.join(r, name))), None)
        snap = d
    label = name + (" with log" if want.get("log") else "")
    if not snap:
        absent(label, name)
        continue
    paths = [snap]
    if want.get("log") and d and os.path.isfile(os.path.join(d, "train.log")):
        paths.append(os.path.join(d, "train.log"))
    doc, err = run(paths)
    if doc is None:
        report(False, "%s: memreport failed: %s" % (label, err))
        continue
    check(label, doc, want)

for name, want in THIRD_PARTY:
    path = os.path.join(SHARED, "third_party", "snapshots", name)
    if not os.path.isfile(path):
        report(True, "%s # SKIP not in %s/third_party/snapshots" % (name, SHARED))
        continue
    doc, err = run([path])
    if doc is None:
        report(False, "%s: memreport failed: %s" % (name, err))
        continue
    check(name, doc, want)


# ---- numbers behind the diagnosis, against PyTorch's own figures ----

def corpus_json(name, f):
    for root in ROOTS:
        path = os.path.join(root, name, f)
        if os.path.isfile(path):
            with open(path) as fh:
                return json.load(fh)
    return None


def close(a, b, rel):
    return a is not None and b is not None and abs(a - b) <= rel * max(abs(b), 1)


def number_check(name, what, fn, log=False):
    d, snap = sample_files(name)
    if not snap:
        absent("%s: %s" % (name, what), name)
        return
    paths = [snap] + ([os.path.join(d, "oom_message.txt")] if log else [])
    doc, err = run(paths)
    if doc is None:
        report(False, "%s: memreport failed: %s" % (name, err))
        return
    ok, detail = fn(doc, d)
    report(ok, "%s: %s (%s)" % (name, what, detail))


def leak_per_step(doc, d):
    # PyTorch's allocated bytes after each step: what each real iteration left behind
    steps = json.load(open(os.path.join(d, "facts.json")))["steps"]
    incs = [b["allocated"] - a["allocated"] for a, b in zip(steps[1:], steps[2:])]
    want = sorted(incs)[len(incs) // 2]
    got = (doc.get("run") or {}).get("growth_per_iteration_bytes")
    return close(got, want, 0.01), "growth %s per iteration, PyTorch %d" % (got, want)


def other_processes(doc, d):
    o = doc["oom"] or {}
    procs = o.get("other_processes") or []
    facts = json.load(open(os.path.join(d, "facts.json")))
    stats = json.load(open(os.path.join(d, "memory_stats.json")))
    limit = stats["reserved_bytes.all.current"] + facts["oom_observer"]["device_free"]
    ok = (procs and close(procs[0]["bytes"], facts["other_process_bytes"], 0.01) and
          o.get("device_free_bytes") == facts["oom_observer"]["device_free"] and
          o.get("limit_bytes") == limit)
    return ok, "processes %s, device_free %s, limit %s (want %d)" % (
        procs, o.get("device_free_bytes"), o.get("limit_bytes"), limit)


def non_pytorch(doc, d):
    o = doc["oom"] or {}
    msg = json.load(open(os.path.join(d, "facts.json")))["oom_message"]
    def amount(pat):
        m = re.search(pat, msg)
        return float(m.group(1)) * {"MiB": 2**20, "GiB": 2**30}[m.group(2)]
    this_process = amount(r"this process has ([0-9.]+) (MiB|GiB) memory in use")
    stats = json.load(open(os.path.join(d, "memory_stats.json")))
    want = this_process - stats["reserved_bytes.all.current"]
    return close(o.get("non_pytorch_bytes"), want, 0.01), "non_pytorch %s, want %.0f" % (
        o.get("non_pytorch_bytes"), want)


number_check("train_leak", "growth per iteration equals PyTorch's per-step allocated", leak_per_step)
def stepped_growth(doc, d):
    # a new optimizer every `cycle_iterations`: one AdamW state (2 x the parameters) each time
    f = json.load(open(os.path.join(d, "facts.json")))
    r = doc.get("run") or {}
    want_step, want_every = 2 * f["model_param_bytes"], f["settings"]["cycle_iterations"]
    ok = close(r.get("growth_step_bytes"), want_step, 0.02) and r.get("growth_every_iterations") == want_every
    return ok, "step %s every %s iterations, want %d every %d" % (
        r.get("growth_step_bytes"), r.get("growth_every_iterations"), want_step, want_every)


number_check("optimizer_recreated_leak_oom", "growth in steps: one optimizer's state every cycle",
             stepped_growth)
number_check("other_process", "the other process, the device's free bytes and the limit",
             other_processes, log=True)
number_check("cupy_non_pytorch", "memory outside PyTorch's allocator in this process",
             non_pytorch, log=True)
