/* capacity.h: live tensors fill the memory. What can shrink them depends on the kind of run
 * (a smaller microbatch helps everything; accumulation and checkpointing need a backward;
 * no_grad is for a forward that keeps graphs it never uses), on what is already on (FSDP,
 * checkpointing, accumulation) and on the framework the advice is phrased for (Hugging Face,
 * Lightning). One tensor can decide it all: the loss's logits.
 *
 * Ownership: writes into the ctx's advice (rule_ctx.h). */
#ifndef MR_CAPACITY_H
#define MR_CAPACITY_H

#include <stdint.h>

#include "advise/rule_ctx.h"

/* The failed request's frames make it optimizer state or a parameter (Adam creating its state,
 * a weight being moved): it does not scale with the batch. */
int ad_request_is_state(const an_oom *o);

/* Parameters, gradients and optimizer state hold most of live memory (by category cat), and
 * activations with the failing request (o: NULL or none when there is no OOM; counted with
 * the state when ad_request_is_state) are under a quarter of it: a smaller batch cannot make
 * room. */
int ad_state_bound(const uint64_t *cat, const an_oom *o);

/* Gradient bytes beyond twice the parameters' (fp32 gradients of bf16 weights are twice them)
 * are not one .grad per parameter but what the backward makes for every sample: per-sample
 * gradients (torch.func.vmap(grad)) or gradients of activations (a jacobian's backward). They
 * scale with the batch, not with the model: sharding or offloading the model state does not
 * touch them, nor does recomputing activations. Returns the bytes beyond one gradient per
 * parameter, else 0 (also in a run that grows: there they may be earlier steps' kept). */
uint64_t ad_batch_gradients(const an_structure *run, const uint64_t *cat);
/* cat (AN_CAT_COUNT values) into out with the batch's gradients counted as activations, as the
 * advice and the verdict weigh them; returns those bytes. */
uint64_t ad_batch_categories(const an_structure *run, const uint64_t *cat, uint64_t *out);

/* What the forward that failed tells of its input: a larger one than the earlier forwards fed
 * the same operations (finding larger_input), or a pass that saved nothing for a backward
 * inside a training run (eval_pass_oom: an evaluation or inference forward). */
void ad_rule_failing_pass(ad_ctx *c);

/* The advice for live memory by category cat (AN_CAT_COUNT values), at an OOM or not. */
void ad_rule_capacity(ad_ctx *c, const uint64_t *cat, int oom);
/* After ad_rule_capacity: an evaluation pass that failed on a larger input than the training
 * forwards (eval_pass_oom, larger_input), or an inference forward on a larger input than the
 * earlier ones, has its batch as the first lever. */
void ad_rule_larger_eval_pass(ad_ctx *c);

/* The failing request, or the largest live tensor, is the loss's logits (a loss function's
 * frame, the model's output projection, or a float32 copy of the model's output made for the
 * loss): recommends computing the loss in chunks. Returns 1 when it fired. */
int ad_rule_logits(ad_ctx *c);

/* Live activations made by F.softmax inside the model (not a loss), or by Hugging Face's
 * eager_attention_forward, hold a large share of live memory: attention computed explicitly
 * keeps its B x heads x T x T probabilities for the backward, which a fused kernel
 * (scaled_dot_product_attention) never stores. Returns 1 when it fired. */
int ad_rule_attention(ad_ctx *c);
/* In a forward without a graph (inference), explicit attention's live probabilities three
 * times its largest block or more and a fifth of live memory: the caller keeps every layer's
 * (output_attentions=True, a hook): release_references, first. Also notes, for the advice
 * after it, whether one of them is twice another (a float32 softmax cast down: the model
 * computes in 16 bits). Returns 1 when it fired. */
int ad_rule_kept_attention(ad_ctx *c);
/* Without a frame or a log line that says attention (after the rules that can say so, and
 * only when none did): under autocast, live activations made by the model's own code inside a
 * module, each at least 4x the largest output of its Linear, norm or convolution layers, in
 * one function that holds a pair of them at twice the other's size (a float32 softmax of
 * half-precision scores), a fifth of live memory or more: attention written out by hand.
 * Recommends fused attention, hedged. Returns 1 when it fired. */
int ad_rule_attention_shape(ad_ctx *c);
/* One operation of torch's called outside the model (torch.cdist, torch.einsum: its innermost
 * frame torch's own, no module call, no loss) holds a quarter of live memory and 8x the model's
 * activations or more: split_operation, first, in chunks of rows. Not after fused_attention.
 * Returns 1 when it fired. */
int ad_rule_big_operation(ad_ctx *c);
/* A forward that died on a larger input, at a request its operation grew by the square of what
 * the input grew (a T x T tensor: attention scores, or an attention mask or bias materialised
 * for them): finding quadratic_input, and fused_attention, first when that operation's live
 * blocks with the request are a quarter of the budget. Returns 1 when it said so. */
int ad_rule_quadratic(ad_ctx *c);

/* The Trainer's evaluation loop concatenates every eval batch's predictions on the device
 * (no eval_accumulation_steps), and they with the failing request are a quarter of the budget:
 * move them to the CPU as it goes. Returns 1 when it fired. */
int ad_rule_gathered_predictions(ad_ctx *c);

#endif
