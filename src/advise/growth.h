/* growth.h: what changes from one iteration to the next. Memory that grows at the same phase of
 * every iteration (a leak of tensors or graphs, or a generation's cache); segments handed back
 * to CUDA and asked for again: the allocator's retries after a failed cudaMalloc (the run lives
 * at the edge of its memory) and empty_cache() inside the loop (a cost for nothing).
 *
 * Ownership: writes into the ctx's advice (rule_ctx.h). */
#ifndef MR_GROWTH_H
#define MR_GROWTH_H

#include "advise/rule_ctx.h"

void ad_rule_growth(ad_ctx *c);
/* The growth the trace shows (not a generation's cache) accounts for at least half of what is
 * allocated: a leak, which no smaller batch fixes. */
int ad_leak_explains(const ad_ctx *c);
/* Measures, once before the rules run, the bytes the growth has left alive (ad_advice
 * growth_alive): its increments over the trace's iterations; of a truncated trace, at least
 * what the growing stacks hold at the snapshot (the iterations before its window grew too).
 * 0 without growth. ad_leak_grown returns it. */
void ad_measure_growth(ad_ctx *c);
uint64_t ad_leak_grown(const ad_ctx *c);
/* A leak that grew at nearly every iteration (three of four at least, over three or more) by
 * at least free_bytes so far: packing free_bytes buys fewer iterations than the leak has
 * already run, so the leak, not the allocator's layout, is what the run fails on, whatever
 * share of live memory the iteration's own tensors hold. Not the KV cache of generation. */
int ad_leak_outgrows(const ad_ctx *c, uint64_t free_bytes);
/* How fast a leak the trace shows eats free memory, per iteration: the live floor's growth, or
 * each iteration's peak's rise when that is faster (tensors the iteration computes against
 * what leaks, such as logits over a growing bank, grow with it); 0 without a leak. */
uint64_t ad_leak_rate(const ad_ctx *c);
/* Of a truncated trace of training with no growth found: activations its window's iterations
 * carried, at carried_rate bytes an iteration (0 when none), whose stacks also hold at least as
 * much from before the window (earlier iterations kept too), with all of it at least
 * free_bytes: what is kept across steps outgrows the free pieces, as a leak does. */
uint64_t ad_carried_rate(const ad_ctx *c);
int ad_carried_outgrows(const ad_ctx *c, uint64_t free_bytes);
void ad_rule_releases(ad_ctx *c);
/* Whether the allocator flushed its cache to retry a failed cudaMalloc, by the trace's releases
 * or the allocator's counter (memory_stats() or memory_summary()): either, when set, may also
 * be the reclaiming of garbage_collection_threshold or max_split_size_mb. */
int ad_retried(const ad_ctx *c);
/* An OOM in training, with no growth found, where a quarter or more of live memory is
 * activations that an earlier iteration's forward allocated and its backward did not free
 * (an_structure.carried_activations): the previous step's graph or outputs are still held
 * (loss.backward(retain_graph=True), a loss or output kept across steps), so the batch is not
 * what fills the memory. Says so and advises releasing them; returns whether it did: 2 when
 * they are half of live memory or more and the trace never gave such a build-up back
 * (an_structure.growth_released: an outer step's, which needs them), so that released the step
 * fits and the batch's levers would count them; 1 else. */
int ad_rule_carried(ad_ctx *c);
/* An OOM in training, no growth, ad_rule_carried silent: when a later iteration began, an
 * earlier one's forward still held activation bytes (an_structure.held_activations) of at
 * least what the failing request lacked and a tenth of live memory. Outputs kept past their
 * step (forward hooks storing module outputs, a stored output or loss): the references are
 * the lever before the batch. Says so and advises releasing them; returns whether it did. */
int ad_rule_held(ad_ctx *c);
/* An OOM in training, no growth, the two rules above silent: the pass that failed saved
 * nothing for a backward (an evaluation inside the step) while a training forward's graph,
 * whose backward had not run, still held at least what the request lacked and a tenth of live
 * memory (an_structure.graph_held_at_oom). The evaluation's place in the loop is the lever
 * before any batch. Says so and advises moving it; returns whether it did. */
int ad_rule_graph_in_eval(ad_ctx *c);
/* An OOM in training, no growth: an occasional pass that saved nothing for a backward (an
 * evaluation under no_grad after two training forwards or more, not a teacher every step
 * runs) finished, a training forward ran after it, and what it allocated still holds at least
 * what the request lacked and a tenth of live memory at the OOM (an_structure.
 * nograd_held_at_oom): its outputs kept by a variable. Says so (nograd_outputs_held) and
 * advises deleting them (release_references); returns whether it did. */
int ad_rule_nograd_held(ad_ctx *c);
/* An OOM in training where the failing forward (or the last one before the OOM) called the
 * forward that earlier ran under torch.utils.checkpoint and checkpointed nothing
 * (an_structure.checkpoint_skipped): checkpointing is enabled but stopped running, most often
 * a Hugging Face model left in eval() after an evaluation. Says so (checkpointing_inactive)
 * and advises restoring it (restore_checkpointing); returns whether it did. */
int ad_rule_checkpoint_skipped(ad_ctx *c);
/* Live tensors made by copy.deepcopy (Parameter's or Tensor's __deepcopy__) holding twice the
 * model's own parameters or more, and a quarter of live memory: copies of the model kept
 * (model_copies_kept), with release_references to keep one. Seen at the snapshot, so in a
 * truncated trace too; not when growth was found (it says so). 1 when it advised, 2 when the
 * copies hold half of live memory or more (the batch's levers are not the fix). */
int ad_rule_model_copies(ad_ctx *c);
/* Forwards that keep their graphs and compute a loss with no backward (AN_KIND_GRAPH_LOSSES)
 * may be the microbatches of one training step whose losses are added up: the alternative to
 * no_grad, ranked right after it. per_forward: what each forward keeps. */
void ad_rule_summed_losses(ad_ctx *c, uint64_t per_forward);

#endif
