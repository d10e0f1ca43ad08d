/* capacity.c: what shrinks live memory, for this kind of run. */
#include "advise/capacity.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "advise/growth.h"
#include "base/mem.h"
#include "base/units.h"

static int cat_of(const ad_ctx *c, uint32_t stack)
{
	return an_stack_category(c->info, stack < c->s->stack_count ? stack : 0, AN_CAT_GRADIENTS);
}

/* The module forward outside torch and the training frameworks (whose forwards wrap the model)
 * whose frames hold the most activation bytes: where to checkpoint. NULL when there is none;
 * *bytes_out is what it holds. */
static const md_frame *checkpoint_target(const ad_ctx *c, uint64_t *bytes_out)
{
	const md_snapshot *s = c->s;
	const an_device *dv = c->dv;
	uint64_t best_bytes = 0;
	const md_frame *best = NULL;
	for (size_t i = 0; i < dv->site_count; i++) {
		const an_site *site = &dv->sites[i];
		if (site->stack >= s->stack_count || cat_of(c, site->stack) != AN_CAT_ACTIVATIONS)
			continue;
		const md_stack *st = &s->stacks[site->stack];
		for (size_t k = 0; k < st->count; k++) {
			const md_frame *f = &s->frames[st->first + k];
			if (strcmp(md_str(s, f->name), "forward") != 0 ||
			    an_torch_internal(md_str(s, f->filename)) ||
			    an_framework_file(md_str(s, f->filename)))
				continue;
			/* every site sharing this frame's function and file */
			uint64_t bytes = 0;
			for (size_t j = 0; j < dv->site_count; j++) {
				if (dv->sites[j].stack >= s->stack_count)
					continue;
				const md_stack *sj = &s->stacks[dv->sites[j].stack];
				for (size_t m = 0; m < sj->count; m++) {
					const md_frame *g = &s->frames[sj->first + m];
					if (g->name == f->name && g->filename == f->filename) {
						bytes += dv->sites[j].bytes;
						break;
					}
				}
			}
			if (bytes > best_bytes) {
				best_bytes = bytes;
				best = f;
			}
			break;
		}
	}
	*bytes_out = best_bytes;
	return best;
}

/* Live bytes whose stack carries marker flag. */
static uint64_t live_with(const ad_ctx *c, uint32_t flag)
{
	uint64_t b = 0;
	for (size_t i = 0; i < c->dv->site_count; i++) {
		uint32_t st = c->dv->sites[i].stack;
		if (st < c->s->stack_count && (c->info[st].flags & flag))
			b += c->dv->sites[i].bytes;
	}
	return b;
}

/* Saved activations offloaded to the host: torch.autograd.graph.save_on_cpu's hooks (or
 * another saved_tensors_hooks pair of that file) packing in the forward and unpacking in the
 * backward. What stays on the GPU is what a forward is making or a backward brought back,
 * which checkpointing does not remove. */
static int activations_offloaded(const ad_ctx *c)
{
	return ad_any_frame(c->s, "unpack_from_cpu", "torch/autograd/graph.py") ||
	       ad_any_frame(c->s, "pack_to_cpu", "torch/autograd/graph.py");
}

/* The ratio at which the failing forward's input counts as larger than the earlier ones'. */
#define LARGER_INPUT 1.5

/* The kind of the pass the capacity advice is for: a training run's OOM in a forward that saved
 * nothing for a backward (an evaluation or inference pass) is advised as inference is. */
static int failed_no_graph(const ad_ctx *c)
{
	/* offloaded activations leave the forward as saved tensors do under no_grad */
	return c->dv->oom.present && c->run->oom_forward_graph < 0 && !activations_offloaded(c);
}

static an_run_kind pass_kind(const ad_ctx *c)
{
	an_run_kind kind = ad_run_kind(c);
	int no_graph = failed_no_graph(c);
	/* a larger forward, from a line of its own after the training forwards, is not the
	 * training microbatch, whatever it saved */
	int own_call = c->dv->oom.present && c->run->oom_input_other_call &&
	               c->run->oom_input_ratio >= LARGER_INPUT;
	return kind == AN_RUN_TRAINING && (no_graph || own_call) ? AN_RUN_INFERENCE : kind;
}

/* The microbatch advice in the words of the run's framework. */
static void advise_microbatch(ad_ctx *c, int priority, const char *why)
{
	/* a Hugging Face text model's batch is as long as its padding: a collator padding to
	 * max_length pays for the padding in every layer */
	char full[1024];
	int tokens = !(c->run->flags_seen & AN_SF_GENERATE) && ad_embeds_tokens(c->s);
	if (tokens && ad_framework(c, AN_FW_HF)) {
		snprintf(full, sizeof full,
		         "%s Activations scale with the padded length too: where the texts are "
		         "shorter, padding each batch only to its own longest text "
		         "(padding=\"longest\", DataCollatorWithPadding) instead of to "
		         "max_length shrinks them in proportion; at one sequence per "
		         "microbatch, a shorter sequence is the lever.",
		         why);
		why = full;
	}
	const char *change = "batch_size //= 2; accumulate gradients over 2 microbatches before "
	                     "optimizer.step()";
	const char *title =
	    "Use a smaller microbatch, with gradient accumulation to keep the batch";
	an_run_kind kind = pass_kind(c);
	if (kind == AN_RUN_INFERENCE || kind == AN_RUN_EVALUATION) {
		title = "Put fewer samples through the model at once";
		change = "batch_size //= 2  # fewer sequences (or images) per forward";
		if ((c->run->flags_seen & AN_SF_GENERATE) && c->run->start_count <= 1)
			/* it died in generate()'s first forward, over every prompt token at once */
			change = "a shorter prompt or fewer prompts per generate() call: the first "
			         "forward (the prefill) runs over all their tokens at once; or "
			         "prefill in chunks of the prompt";
		else if (c->run->flags_seen & AN_SF_GENERATE)
			change =
			    "generate() fewer sequences at once, or fewer max_new_tokens: the KV "
			    "cache grows with both";
	} else if (kind == AN_RUN_UNKNOWN) {
		title = "Put fewer samples through the model at once";
		change = "batch_size //= 2  # in training, accumulate gradients to keep the batch";
	} else if (ad_framework(c, AN_FW_HF_TRAINER)) {
		change = "TrainingArguments(per_device_train_batch_size=N // 2, "
		         "gradient_accumulation_steps=2 * K)";
	} else if (ad_framework(c, AN_FW_ACCELERATE)) {
		change =
		    "DataLoader(..., batch_size=N // 2); Accelerator(gradient_accumulation_steps=2 "
		    "* K), the step inside: with accelerator.accumulate(model):";
	} else if (ad_framework(c, AN_FW_LIGHTNING)) {
		change =
		    "DataLoader(..., batch_size=N // 2); Trainer(accumulate_grad_batches=2 * K)";
	} else if (c->run->accumulating) {
		title = "Halve the microbatch and double the accumulation steps";
		change = "batch_size //= 2; accum_steps *= 2";
	} else if (c->run->maybe_accumulating) {
		change =
		    "batch_size //= 2; accumulate gradients over twice the microbatches (twice "
		    "as many as now, if they are accumulated already)";
	}
	ad_suggest(c, "reduce_microbatch", priority, title, change, "%s", why);
}

/* hidden_layer_line: the outputs a line makes before it can be told */
#define HIDDEN_MIN_OUTPUTS 4

void ad_rule_failing_pass(ad_ctx *c)
{
	const an_structure *r = c->run;
	if (!c->dv->oom.present)
		return;
	if (ad_run_kind(c) == AN_RUN_TRAINING && failed_no_graph(c))
		ad_note(c, "eval_pass_oom", AD_WARNING,
		        "The forward that failed saved nothing for a backward (its finished layers "
		        "freed their tensors as it went: no_grad), after %zu backward passes: an "
		        "evaluation or inference pass inside the training run. %s, not the "
		        "training microbatch: accumulation and checkpointing do nothing for it.",
		        r->backward_phases,
		        r->growth_in_tail ? "What it keeps from every batch is the lever"
		                          : "Its batch is the lever");
	if (r->oom_input_ratio < LARGER_INPUT)
		return;
	ad_note(c, "larger_input", AD_WARNING,
	        "The forward that failed asked for %.1fx what the same operations asked for in "
	        "the earlier forwards (the median over %zu of them): its input was larger than "
	        "any before it (more samples, longer sequences or larger images), and the "
	        "earlier ones fit. Size the batch for the largest input the run will see, or cap "
	        "or bucket the input size (sort by length, crop, resize).",
	        r->oom_input_ratio, r->oom_input_sites);
}

/* An evaluation or inference pass inside training that failed on an input larger than the
 * training forwards', which fit while saving their layers for a backward: that pass's own batch,
 * back at their size, fits for certain, where the other levers only may. */
void ad_rule_larger_eval_pass(ad_ctx *c)
{
	const an_structure *r = c->run;
	int eval = ad_has_finding(c, "eval_pass_oom"), own = !eval && r->oom_input_other_call;
	/* inference: the earlier forwards fit beside the same weights and state */
	int infer = !r->backward_phases && ad_run_kind(c) != AN_RUN_TRAINING;
	if ((!eval && !infer && !own) || r->oom_input_ratio < LARGER_INPUT)
		return;
	double parts = ceil(r->oom_input_ratio);
	for (size_t i = 0; i < c->a->rec_count; i++) {
		ad_recommendation *rec = &c->a->recs[i];
		if (strcmp(rec->id, "reduce_microbatch") != 0)
			continue;
		char more[256], change[160];
		if (own)
			snprintf(
			    more, sizeof more,
			    " This forward, called from a line of its own after the training "
			    "forwards, asked for %.1fx what their operations did, and they fit: "
			    "at their input's size (this input in %.0f parts), it fits too.",
			    r->oom_input_ratio, parts);
		else if (eval)
			snprintf(
			    more, sizeof more,
			    " This pass asked for %.1fx what the training forwards did, and they "
			    "fit saving their layers for a backward: at their batch, this pass "
			    "fits too.",
			    r->oom_input_ratio);
		else
			snprintf(
			    more, sizeof more,
			    " This forward asked for %.1fx what the earlier forwards did, and they "
			    "fit: at their input's size (a cap on it, or this batch in %.0f "
			    "parts), "
			    "it fits too.",
			    r->oom_input_ratio, parts);
		/* the pass's own batch, in its framework's words */
		const char *fmt =
		    own     ? "for part in x.chunk(%.0f): out.append(model(part))  # this pass's "
		              "own input, in parts the training forwards' size"
		    : !eval ? "for part in x.chunk(%.0f): out.append(model(part))  # or cap the "
		              "input's size: resize, crop, truncate"
		    : ad_framework(c, AN_FW_HF_TRAINER)
		        ? "TrainingArguments(per_device_eval_batch_size=N // %.0f)  # the training "
		          "batch's size"
		    : ad_framework(c, AN_FW_LIGHTNING)
		        ? "DataLoader(val_set, batch_size=N // %.0f)  # in val_dataloader(): the "
		          "training batch's size"
		        : "batch_size //= %.0f  # this pass's own (its DataLoader's): the training "
		          "forwards' size";
		snprintf(change, sizeof change, fmt, parts);
		char *dup = strdup(change);
		if (!dup || ad_append_reason(rec, more)) {
			free(dup);
			return;
		}
		free(rec->change);
		rec->change = dup;
		c->rec_priority[i] = AD_PRIO_TARGETED - 1;
	}
}

static const md_block *largest_live(const ad_ctx *c);
static int logits_stack(const ad_ctx *c, uint32_t stack);

/* acts: the live activation bytes. */
static void advise_checkpointing(ad_ctx *c, int priority, uint64_t acts)
{
	char b1[32];
	if (ad_technique_on(c, AN_TECH_CHECKPOINT) || activations_offloaded(c))
		return; /* already on: the microbatch is the lever left */
	/* the model's output logits are kept whatever is recomputed: when they are nearly all
	 * the activations (a forward that saved nothing for backward), there is nothing to
	 * checkpoint */
	const md_block *big = largest_live(c);
	if (big && logits_stack(c, big->stack) && big->size <= acts &&
	    (acts - big->size) * 8 < acts)
		return;
	uint64_t held = 0;
	const md_frame *target = checkpoint_target(c, &held);
	ad_text t = {0};
	ad_text_printf(&t, "Checkpointing keeps only block inputs and recomputes the rest in "
	                   "backward (about a third more compute); the largest holder is ");
	if (target) {
		ad_text_printf(&t, "the module whose forward is in ");
		ad_text_path(&t, md_str(c->s, target->filename));
		ad_text_printf(&t, " (it holds %s of activations).", ad_sz(b1, held));
	} else {
		ad_text_printf(&t, "the module forward that allocates the most.");
	}
	const char *change =
	    "out = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)";
	if (ad_framework(c, AN_FW_HF_TRAINER))
		change = "TrainingArguments(gradient_checkpointing=True)";
	else if (ad_framework(c, AN_FW_HF))
		change = "model.gradient_checkpointing_enable()";
	ad_suggest_text(c, "activation_checkpointing", priority,
	                "Checkpoint activations of the largest blocks", change, &t);
}

/* The least gradient advise_one_trainable names: below it, freezing saves little. */
#define FREEZE_MIN_GRADIENT (64 * MR_MIB)

/* The largest live block of the diagnosed device whose frames say `category` (a block with
 * no frame shown counts as `no_frames`), NULL when none. */
static const md_block *largest_in_category(const ad_ctx *c, int category, int no_frames)
{
	const md_block *best = NULL;
	const an_device *dv = c->dv;
	for (size_t i = dv->segment_first; i < dv->segment_first + dv->segment_count; i++) {
		const md_segment *seg = &c->s->segments[i];
		for (size_t j = 0; j < seg->block_count; j++) {
			const md_block *bl = &c->s->blocks[seg->first_block + j];
			if (bl->state != MD_BLOCK_ACTIVE_ALLOCATED ||
			    (best && bl->size <= best->size))
				continue;
			uint32_t stack = bl->stack < c->s->stack_count ? bl->stack : 0;
			if (an_stack_category(c->info, stack, no_frames) == category)
				best = bl;
		}
	}
	return best;
}

/* A live parameter block of exactly `size` bytes, NULL when none. */
static const md_block *parameter_of_size(const ad_ctx *c, uint64_t size)
{
	const an_device *dv = c->dv;
	for (size_t i = dv->segment_first; i < dv->segment_first + dv->segment_count; i++) {
		const md_segment *seg = &c->s->segments[i];
		for (size_t j = 0; j < seg->block_count; j++) {
			const md_block *bl = &c->s->blocks[seg->first_block + j];
			uint32_t stack = bl->stack < c->s->stack_count ? bl->stack : 0;
			if (bl->state == MD_BLOCK_ACTIVE_ALLOCATED && bl->size == size &&
			    an_stack_category(c->info, stack, AN_CAT_UNKNOWN) == AN_CAT_PARAMETERS)
				return bl;
		}
	}
	return NULL;
}

/* Most of the model is frozen (its gradients are at most half its parameters), yet one gradient
 * holds most of them: one large tensor trains, an embedding or an output head made trainable by
 * one line, and with it its optimizer state. Whether it should train decides first. 1 when
 * advised. */
static int advise_one_trainable(ad_ctx *c, const uint64_t *cat, uint64_t asked)
{
	char b1[32], b2[32], b3[32], b4[32];
	uint64_t params = cat[AN_CAT_PARAMETERS], grads = cat[AN_CAT_GRADIENTS];
	if (!params || !grads || grads * 2 > params)
		return 0;
	/* the few gradients must be the run's own: not memory older than the trace hiding the
	 * rest (a wrapped trace), nor an optimizer whose state (Adam's two per value) covers
	 * more parameters than the gradients do (they were freed, set_to_none) */
	if (cat[AN_CAT_UNKNOWN] * 4 > grads || cat[AN_CAT_OPTIMIZER] * 2 > grads * 5)
		return 0;
	const md_block *g = largest_in_category(c, AN_CAT_GRADIENTS, AN_CAT_GRADIENTS);
	if (!g || g->size * 2 < grads || g->size < FREEZE_MIN_GRADIENT)
		return 0;
	/* a parameter of its size: a backward's gradient of an activation (the logits') is
	 * counted with the gradients too, and is no parameter's */
	const md_block *p = parameter_of_size(c, g->size);
	if (!p)
		return 0;
	ad_text t = {0};
	ad_text_printf(&t,
	               "Gradients are %s, %d%% of the parameters' %s: most of the model is "
	               "frozen, yet one gradient of %s holds %d%% of them. Its parameter, made in ",
	               ad_sz(b1, grads), ad_pct(grads, params), ad_sz(b2, params),
	               ad_sz(b3, g->size), ad_pct(g->size, grads));
	if (!ad_user_site(&t, c->s, p->stack))
		ad_text_printf(&t, "a line the trace does not show");
	ad_text_printf(&t,
	               ", trains, and Adam keeps two more tensors its size: %s with its "
	               "gradient.",
	               ad_sz(b4, 3 * g->size));
	if (asked)
		ad_text_printf(&t, " The request that failed (%s) is the optimizer's own.",
		               ad_sz(b1, asked));
	ad_text_printf(&t, " If one line made it trainable (requires_grad_(True) on an embedding "
	                   "so that checkpointing sees an input that requires grad, a large head "
	                   "in modules_to_save), freeze it again: for checkpointing, "
	                   "enable_input_require_grads() makes the embedding's output require grad "
	                   "without training the embedding.");
	ad_suggest_text(c, "freeze_parameters", AD_PRIO_TARGETED,
	                "Freeze the one large tensor that trains, if it need not",
	                "model.get_input_embeddings().weight.requires_grad_(False); "
	                "model.enable_input_require_grads()  # or leave it out of the optimizer",
	                &t);
	return 1;
}

/* The failing request is the optimizer's (asked: its bytes, else 0): the state's levers say so. */
static void say_optimizer_asked(ad_ctx *c, const char *id, uint64_t asked)
{
	char b1[32], more[160];
	ad_recommendation *r = ad_find_rec(c, id);
	if (!asked || !r)
		return;
	snprintf(more, sizeof more,
	         " The %s request that failed is the optimizer's own, made for its state or its "
	         "update.",
	         ad_sz(b1, asked));
	if (ad_append_reason(r, more))
		c->failed = 1;
}

/* Parameters, gradients and optimizer state hold most of it: shard or offload them. asked is
 * the failing request when the optimizer made it (0: none or another's). */
static void advise_state(ad_ctx *c, const uint64_t *cat, uint64_t asked)
{
	char b1[32], b2[32], b3[32], b4[32], b5[32];
	uint64_t live = ad_live_total(cat);
	uint64_t state = cat[AN_CAT_PARAMETERS] + cat[AN_CAT_GRADIENTS] + cat[AN_CAT_OPTIMIZER];
	uint64_t acts = cat[AN_CAT_ACTIVATIONS];
	/* a run on one GPU (no DDP, no FSDP) fixes it on that GPU first; sharding needs more */
	int one_gpu = !ad_technique_on(c, AN_TECH_DDP) && !ad_technique_on(c, AN_TECH_FSDP);
	advise_one_trainable(c, cat, asked);
	if (ad_technique_on(c, AN_TECH_FSDP))
		ad_note(c, "fsdp_on", AD_INFO,
		        "FSDP is already on. Parameters, gradients and optimizer state (%s) "
		        "divide by the number of ranks they are sharded over: twice the ranks, "
		        "half of it per GPU; activations (%s) are not sharded.",
		        ad_sz(b1, state), ad_sz(b2, acts));
	else
		ad_suggest(c, "fsdp", one_gpu ? AD_PRIO_CAPACITY + 20 : AD_PRIO_CAPACITY,
		           one_gpu ? "With more GPUs: shard parameters, gradients and optimizer "
		                     "state (FSDP)"
		                   : "Shard parameters, gradients and optimizer state (FSDP)",
		           "model = torch.distributed.fsdp.FullyShardedDataParallel(model)  # or "
		           "fully_shard(model) in torch>=2.4",
		           "Parameters (%s), gradients (%s) and optimizer state (%s) are %d%% of "
		           "live memory; each GPU holds all of it. Sharded over 4 GPUs each keeps "
		           "about %s (%s saved per GPU).",
		           ad_sz(b1, cat[AN_CAT_PARAMETERS]), ad_sz(b2, cat[AN_CAT_GRADIENTS]),
		           ad_sz(b3, cat[AN_CAT_OPTIMIZER]), ad_pct(state, live),
		           ad_sz(b4, state / 4), ad_sz(b5, state - state / 4));
	if (cat[AN_CAT_OPTIMIZER])
		ad_suggest(
		    c, "cpu_offload", AD_PRIO_CAPACITY + 10,
		    "Offload optimizer state (and parameters) to the CPU",
		    "FullyShardedDataParallel(model, "
		    "cpu_offload=CPUOffload(offload_params=True))",
		    "Optimizer state alone is %s. Keeping it (and the parameters) in host "
		    "memory frees that much on the GPU, at the cost of transfers every step.",
		    ad_sz(b1, cat[AN_CAT_OPTIMIZER]));
	else if (asked)
		ad_suggest(c, "cpu_offload", AD_PRIO_CAPACITY + 10,
		           "Offload optimizer state (and parameters) to the CPU",
		           "FullyShardedDataParallel(model, "
		           "cpu_offload=CPUOffload(offload_params=True))",
		           "No optimizer state is live yet: the optimizer was making it. Kept in "
		           "host memory (with the parameters), it never needs room on the GPU, at "
		           "the cost of transfers every step.");
	/* autocast's copies show float32 weights; without them the trace cannot tell float32
	 * weights from half-precision ones (a model loaded in bf16 is never copied) */
	if (ad_technique_on(c, AN_TECH_MIXED))
		ad_suggest(
		    c, "mixed_precision", one_gpu ? AD_PRIO_CAPACITY : AD_PRIO_CAPACITY + 20,
		    "Keep weights, gradients or optimizer state in lower precision",
		    "bf16 parameters/gradients, or an 8-bit optimizer (e.g. "
		    "bitsandbytes.optim.Adam8bit)",
		    "fp32 parameters and gradients take 4 bytes per value and Adam keeps two "
		    "more fp32 values: bf16 weights and gradients halve %s, an 8-bit "
		    "optimizer quarters %s.",
		    ad_sz(b1, cat[AN_CAT_PARAMETERS] + cat[AN_CAT_GRADIENTS]),
		    ad_sz(b2, cat[AN_CAT_OPTIMIZER]));
	else
		ad_suggest(
		    c, "mixed_precision", one_gpu ? AD_PRIO_CAPACITY : AD_PRIO_CAPACITY + 20,
		    "Keep optimizer state in 8 bits (and weights in bf16, if they are "
		    "float32)",
		    "an 8-bit optimizer (e.g. bitsandbytes.optim.AdamW8bit); bf16 "
		    "parameters/gradients if they are float32",
		    "An 8-bit optimizer keeps a quarter of float32 state, half of bf16 state "
		    "(%s%s). The trace does not show the weights' dtype (no autocast "
		    "copies of them were seen): if they are float32, bf16 weights and "
		    "gradients halve %s; if they are bf16 already, only the optimizer's "
		    "state and offloading are left.",
		    cat[AN_CAT_OPTIMIZER] ? ad_sz(b2, cat[AN_CAT_OPTIMIZER]) : "none",
		    cat[AN_CAT_OPTIMIZER] ? " now" : " live yet",
		    ad_sz(b1, cat[AN_CAT_PARAMETERS] + cat[AN_CAT_GRADIENTS]));
	if (cat[AN_CAT_OPTIMIZER])
		say_optimizer_asked(c, "cpu_offload", asked);
	say_optimizer_asked(c, "mixed_precision", asked);
	ad_suggest(c, "reduce_microbatch", AD_PRIO_CAPACITY + 30,
	           "A smaller batch will not help much here", NULL,
	           "Activations are only %s of %s live (%d%%): halving the batch frees at most "
	           "about %s.",
	           ad_sz(b1, acts), ad_sz(b2, live), ad_pct(acts, live), ad_sz(b3, acts / 2));
}

/* The failed request when it alone is larger than all the process may use (the limit is
 * known), else 0. */
static uint64_t request_over_limit(const ad_ctx *c)
{
	uint64_t req = c->dv->oom.present ? c->dv->oom.requested : 0, limit = c->a->oom.limit;
	return limit && req > limit ? req : 0;
}

/* Whether the failed request cannot fit whatever is freed beside it: larger than all the
 * process may use, or, without the limit, at least 1 GiB and twice all live memory (freeing
 * everything beside it would make room for less than half of it). */
static int request_oversized(const ad_ctx *c)
{
	const an_device *dv = c->dv;
	uint64_t live = dv->pool[AN_POOL_ALL].allocated, asked = dv->oom.requested;
	if (request_over_limit(c))
		return 1;
	return !c->a->oom.limit && dv->oom.present && asked >= MR_GIB && live && asked / 2 >= live;
}

/* When the failing request alone cannot fit (request_oversized), what is live does not decide:
 * nothing freed beside it lets it fit, and a smaller batch helps only if that one tensor scales
 * with the batch. The reason, into why; 0 when the request could fit. */
static int request_alone_too_large(const ad_ctx *c, char *why, size_t n)
{
	char b1[32], b2[32];
	uint64_t req = request_over_limit(c), limit = c->a->oom.limit;
	uint64_t asked = c->dv->oom.requested, live = c->dv->pool[AN_POOL_ALL].allocated;
	int k;
	if (!request_oversized(c))
		return 0;
	if (req)
		k = snprintf(why, n,
		             "The failing %s request alone is larger than the %s allowed: freeing "
		             "what else is live cannot make it fit.",
		             ad_sz(b1, req), ad_sz(b2, limit));
	else
		k = snprintf(why, n,
		             "The failing %s request is %.1fx all live memory (%s): freeing what "
		             "else is live would make room for less than half of it.",
		             ad_sz(b1, asked), (double)asked / (double)live, ad_sz(b2, live));
	if (k > 0 && (size_t)k < n)
		snprintf(
		    why + k, n - (size_t)k,
		    " Fewer samples per call shrink it if it scales with them; if one sample's "
		    "tensor is this large (a positions x positions attention matrix, a "
		    "high-resolution feature map), split each call over fewer positions "
		    "(tiles, chunks) or use a kernel that never materialises it.");
	return 1;
}

uint64_t ad_batch_gradients(const an_structure *run, const uint64_t *cat)
{
	uint64_t p = cat[AN_CAT_PARAMETERS], g = cat[AN_CAT_GRADIENTS];
	/* in a run that grows, the extra gradients may be earlier steps' kept (a hook's list) */
	if (run->growth_found)
		return 0;
	return p && g > 2 * p ? g - p : 0;
}

uint64_t ad_batch_categories(const an_structure *run, const uint64_t *cat, uint64_t *out)
{
	uint64_t bg = ad_batch_gradients(run, cat);
	memcpy(out, cat, AN_CAT_COUNT * sizeof *out);
	out[AN_CAT_GRADIENTS] -= bg;
	out[AN_CAT_ACTIVATIONS] += bg;
	return bg;
}

/* Whether the trace computes a jacobian: torch.autograd.functional's jacobian or hessian, or
 * torch.func's jacrev or jacfwd, is on one of its stacks. */
static int computes_jacobian(const ad_ctx *c)
{
	static const char *const fa = "torch/autograd/functional.py";
	static const char *const ft = "torch/_functorch/eager_transforms.py";
	return ad_any_frame(c->s, "jacobian", fa) || ad_any_frame(c->s, "hessian", fa) ||
	       ad_any_frame(c->s, "jacrev", ft) || ad_any_frame(c->s, "jacfwd", ft);
}

/* The batch's gradients (bg) hold half of live memory or more in a run that computes a
 * jacobian: a batch's jacobian is (batch x outputs) x (batch x inputs), its vectorized backward
 * runs over every output of every sample, and its memory grows with the square of the batch;
 * independent samples need only the diagonal blocks. split_operation, targeted. */
static void advise_jacobian(ad_ctx *c, uint64_t bg, uint64_t live)
{
	char b1[32], b2[32];
	if (bg * 2 < live || !computes_jacobian(c))
		return;
	ad_suggest(
	    c, "split_operation", AD_PRIO_TARGETED,
	    "Compute the per-sample jacobian, not the whole batch's",
	    "J = torch.autograd.functional.jacobian(lambda z: f(z).sum(0), x, "
	    "create_graph=True)  # [out, B, in]; or torch.func.vmap(torch.func.jacrev(f))(x)",
	    "%s of the %s live are gradients the backward made beyond one per parameter, in "
	    "a run that computes a jacobian (torch.autograd.functional.jacobian or "
	    "torch.func.jacrev/jacfwd is in the trace). The jacobian of a batch's outputs "
	    "with respect to the batch's inputs is (batch x outputs) x (batch x inputs), and "
	    "its vectorized backward runs over every output of every sample: its memory grows "
	    "with the square of the batch. If the samples are independent (a per-point "
	    "jacobian, as a divergence or a PDE residual needs), only its diagonal blocks are "
	    "not zero: the jacobian of the sum over the batch, or torch.func.vmap of "
	    "torch.func.jacrev per sample, computes just those; otherwise jacrev's chunk_size "
	    "or fewer samples per call bound it.",
	    ad_sz(b1, bg), ad_sz(b2, live));
}

/* Training whose activations (cat's, with the batch's gradients bg among them) fill the memory. */
static void advise_training(ad_ctx *c, const uint64_t *cat, uint64_t bg)
{
	char why[640], b1[32], b2[32], b3[32], b4[32], b5[32];
	uint64_t live = ad_live_total(cat), scaled = cat[AN_CAT_ACTIVATIONS], acts = scaled - bg;
	advise_jacobian(c, bg, live);
	int oversized = request_oversized(c);
	if (!request_alone_too_large(c, why, sizeof why)) {
		if (bg)
			snprintf(
			    why, sizeof why,
			    "Activations (%s) and gradients the size of the batch, not of the "
			    "model (%s beyond one per parameter: per-sample gradients, or the "
			    "backward's gradients of activations), hold %s of %s live memory "
			    "(%d%%) and scale with the batch: halving the microbatch frees about "
			    "%s.",
			    ad_sz(b1, acts), ad_sz(b4, bg), ad_sz(b2, scaled), ad_sz(b3, live),
			    ad_pct(scaled, live), ad_sz(b5, scaled / 2));
		else
			snprintf(why, sizeof why,
			         "Activations hold %s of %s live memory (%d%%) and scale with the "
			         "batch: halving the microbatch frees about %s.",
			         ad_sz(b1, acts), ad_sz(b2, live), ad_pct(acts, live),
			         ad_sz(b3, acts / 2));
	}
	advise_microbatch(c, AD_PRIO_CAPACITY, why);
	/* recomputation does not remove gradients, nor shrink the one result that cannot fit */
	if (acts * 4 >= bg && !oversized)
		advise_checkpointing(c, AD_PRIO_CAPACITY + 10, acts);
	if (!c->run->accumulating && !c->run->maybe_accumulating &&
	    !ad_framework(c, AN_FW_HF_TRAINER | AN_FW_LIGHTNING))
		ad_suggest(c, "gradient_accumulation", AD_PRIO_CAPACITY + 20,
		           "Accumulate gradients to keep the effective batch size",
		           "loss = loss / accum_steps; loss.backward(); step the optimizer every "
		           "accum_steps microbatches",
		           "With a smaller microbatch, accumulating over N microbatches keeps the "
		           "optimizer's effective batch and the training dynamics unchanged.");
	uint64_t kv = live_with(c, AN_SF_KV_CACHE);
	if (kv && (kv * 100 >= live || kv >= 64 * MR_MIB))
		ad_suggest(c, "disable_kv_cache", AD_PRIO_CAPACITY + 25,
		           "Turn the KV cache off in training",
		           "model(input_ids, labels=labels, use_cache=False)  # or "
		           "model.config.use_cache = False",
		           "The generation cache (transformers cache_utils.py) holds %s during a "
		           "training step, where nothing reads it.",
		           ad_sz(b1, kv));
	if (ad_technique_on(c, AN_TECH_MIXED)) /* the activations are in bf16 already */
		return;
	ad_text t = {0};
	if (oversized)
		ad_text_printf(&t,
		               "bf16 halves the failing %s request if it is a float32 result "
		               "autocast computes in 16 bits (a matmul, a convolution); an integer "
		               "or index tensor keeps its size.",
		               ad_sz(b1, c->dv->oom.requested));
	else
		ad_text_printf(&t, "bf16 activations take half the bytes of fp32 ones (%s now).",
		               ad_sz(b1, acts));
	/* autocast keeps a softmax and what is made from it in float32 */
	if (c->attention_bytes * 2 >= acts)
		ad_text_printf(
		    &t,
		    " Not the fix here: autocast runs a softmax in float32, so explicit "
		    "attention's %s stays as it is; only the other %s halves.",
		    ad_sz(b2, c->attention_bytes),
		    ad_sz(b3, acts > c->attention_bytes ? acts - c->attention_bytes : 0));
	ad_text_printf(&t,
	               " The trace shows no autocast copies of the weights, but not their dtype "
	               "either: a model whose weights are bf16 already, or whose float32 "
	               "weights are few (adapters on a half-precision model), gains nothing "
	               "from this.");
	ad_suggest_text(
	    c, "mixed_precision", AD_PRIO_CAPACITY + 30,
	    "If the model runs in float32: run the forward pass in bf16 autocast",
	    ad_framework(c, AN_FW_LIGHTNING)
	        ? "Trainer(precision=\"bf16-mixed\")"
	        : "with torch.autocast(\"cuda\", dtype=torch.bfloat16): loss = model(x)",
	    &t);
}

/* Activations fill it in a run without backward: inference (no_grad), a forward that keeps its
 * graphs for nothing (evaluation), or a run the trace cannot place (either way). */
static void advise_forward_only(ad_ctx *c, const uint64_t *cat)
{
	char why[640], b1[32], b2[32], b3[32];
	uint64_t live = ad_live_total(cat), acts = cat[AN_CAT_ACTIVATIONS];
	an_run_kind kind = pass_kind(c);
	if (kind == AN_RUN_EVALUATION)
		ad_suggest(
		    c, "no_grad_eval", AD_PRIO_TARGETED, "Evaluate under torch.no_grad()",
		    "with torch.no_grad():  # or @torch.inference_mode()\n    out = model(x)",
		    "No backward ever runs, yet each forward keeps its autograd graph: %s of "
		    "activations that no_grad would free layer by layer.",
		    ad_sz(b1, acts));
	if (kind == AN_RUN_EVALUATION)
		ad_rule_summed_losses(c,
		                      c->run->forward_spans ? acts / c->run->forward_spans : acts);
	uint64_t kv = live_with(c, AN_SF_KV_CACHE);
	if (kind == AN_RUN_INFERENCE && kv * 2 >= live)
		snprintf(
		    why, sizeof why,
		    "The KV cache holds %s of %s live and grows with every generated token and "
		    "every sequence in the batch: fewer sequences at once, a shorter generation, "
		    "or a static, quantized or offloaded cache.",
		    ad_sz(b1, kv), ad_sz(b2, live));
	else if (!request_alone_too_large(c, why, sizeof why))
		snprintf(
		    why, sizeof why,
		    "Activations hold %s of %s live memory (%d%%) and scale with the number of "
		    "samples per forward: half as many frees about %s.",
		    ad_sz(b1, acts), ad_sz(b2, live), ad_pct(acts, live), ad_sz(b3, acts / 2));
	advise_microbatch(c, AD_PRIO_CAPACITY, why);
	if (kind == AN_RUN_UNKNOWN)
		/* a forward that died before the trace could tell: inference without no_grad (a
		 * common mistake) looks the same as inference with it, or a first training forward
		 */
		ad_suggest(
		    c, "no_grad_eval", AD_PRIO_CAPACITY + 20,
		    "If no backward follows: run the forward under torch.inference_mode()",
		    "with torch.inference_mode():  # or torch.no_grad()\n    out = model(x)",
		    "The trace cannot tell whether this forward records an autograd graph. "
		    "Without no_grad every layer keeps its activations (%s now) for a backward; "
		    "under inference_mode they are freed as the forward goes. If it is on "
		    "already, or a backward follows, this does not apply.",
		    ad_sz(b1, acts));
	/* a float32 softmax cast down to the model's dtype: it computes in 16 bits already */
	if (ad_technique_on(c, AN_TECH_MIXED) || c->attention_half)
		return;
	ad_text t = {0};
	if (request_oversized(c))
		ad_text_printf(&t,
		               "bf16 halves the failing %s request if it is a float32 result (a "
		               "matmul's, a convolution's); an integer or index tensor keeps its "
		               "size.",
		               ad_sz(b1, c->dv->oom.requested));
	else
		ad_text_printf(&t,
		               "bf16 weights and activations take half the bytes of fp32 ones (%s "
		               "of activations now).",
		               ad_sz(b1, acts));
	ad_text_printf(&t, " The trace shows no autocast copies of the weights, but not their "
	                   "dtype: if they are bf16 already, this does not apply.");
	ad_suggest_text(c, "mixed_precision", AD_PRIO_CAPACITY + 30,
	                "If the model runs in float32: run it in bf16",
	                "model.to(torch.bfloat16)  # or with torch.autocast(\"cuda\", "
	                "dtype=torch.bfloat16)",
	                &t);
}

int ad_request_is_state(const an_oom *o)
{
	return o && o->present &&
	       (o->category == AN_CAT_OPTIMIZER || o->category == AN_CAT_PARAMETERS);
}

int ad_state_bound(const uint64_t *cat, const an_oom *o)
{
	uint64_t live = ad_live_total(cat);
	uint64_t state = cat[AN_CAT_PARAMETERS] + cat[AN_CAT_GRADIENTS] + cat[AN_CAT_OPTIMIZER];
	uint64_t acts = cat[AN_CAT_ACTIVATIONS];
	uint64_t request = o && o->present ? o->requested : 0;
	if (ad_request_is_state(o)) {
		state += request;
		live += request;
		request = 0;
	}
	return live && ad_pct(state, live) >= AD_DOMINANT_PERCENT &&
	       (acts + request) * 4 < live + request;
}

/* Weights fill a run without backward: smaller weights are the lever, then fewer of them on
 * the device at once. */
static void advise_weights_only(ad_ctx *c, const uint64_t *cat, uint64_t live)
{
	char b1[32], b2[32];
	ad_suggest(c, "mixed_precision", AD_PRIO_CAPACITY, "Load the weights in lower precision",
	           "model.to(torch.bfloat16)  # or 8-bit/4-bit weights",
	           "Parameters hold %s of %s live memory: in bf16 (if they are float32 "
	           "now) they take half.",
	           ad_sz(b1, cat[AN_CAT_PARAMETERS]), ad_sz(b2, live));
	ad_suggest(c, "cpu_offload", AD_PRIO_CAPACITY + 10,
	           "Keep only the weights a forward needs on the GPU",
	           "model = AutoModel.from_pretrained(name, device_map=\"auto\", "
	           "max_memory={0: \"20GiB\", \"cpu\": \"64GiB\"})  # or, for several "
	           "models, m.cuda() before its forward and m.cpu() after",
	           "Where no backward runs, the weights of layers (or of models) not "
	           "running can wait in host memory and be moved in when they run "
	           "(accelerate's device_map=\"auto\" does it per layer), at the cost of "
	           "the transfers.");
}

/* A failed request larger than all the process may use: freeing, packing or an allocator
 * setting cannot make it fit, only the operation that asks for it working in pieces. Returns 1
 * when it said so. */
static int split_oversized(ad_ctx *c)
{
	char b1[32], b2[32];
	const an_device *dv = c->dv;
	const md_device *md = md_find_device(c->s, dv->device);
	uint64_t limit = c->a->oom.limit, req = request_over_limit(c);
	uint64_t asked = dv->oom.requested, live = dv->pool[AN_POOL_ALL].allocated;
	if (!md || !request_oversized(c) || dv->oom.event >= md->event_count)
		return 0;
	ad_text t = {0};
	if (req)
		ad_text_printf(
		    &t,
		    "The %s request that failed is more than the %s this process may use, "
		    "so nothing freed beside it would make it fit; ",
		    ad_sz(b1, req), ad_sz(b2, limit));
	else
		ad_text_printf(&t,
		               "The %s request that failed is %.1fx all live memory (%s): freeing "
		               "everything beside it would make room for less than half of it, "
		               "whatever the limit (not in the evidence); ",
		               ad_sz(b1, asked), (double)asked / (double)live, ad_sz(b2, live));
	if (!ad_user_site(&t, c->s, md->events[dv->oom.event].stack))
		ad_text_printf(&t, "the call that asked for it");
	ad_text_printf(&t, " must make it in pieces, reducing each piece (a top-k, a sum) before "
	                   "the next.");
	ad_suggest_text(
	    c, "split_operation", AD_PRIO_TARGETED, "Compute the oversized result in chunks",
	    "for i in range(0, n, k): out.append(f(x[i:i+k]).topk(100))  # or a smaller "
	    "batch",
	    &t);
	return 1;
}

/* Memory older than the trace with no stack (recording began after it was allocated) that
 * outweighs the model state the trace shows, its activations and the other tensors it shows
 * allocated: something from before the window holds most of the budget, and the trace cannot
 * say what. None of it (a run whose memory is all tensors the trace saw made) is no such
 * case. 1 when advised. */
static int advise_older(ad_ctx *c, const uint64_t *cat)
{
	char b1[32], b2[32];
	uint64_t live = ad_live_total(cat);
	uint64_t older = cat[AN_CAT_UNKNOWN];
	uint64_t state = cat[AN_CAT_PARAMETERS] + cat[AN_CAT_GRADIENTS] + cat[AN_CAT_OPTIMIZER];
	if (!older || older < state || older < cat[AN_CAT_ACTIVATIONS] || older < cat[AN_CAT_OTHER])
		return 0;
	if (!cat[AN_CAT_PARAMETERS] && c->run && c->run->forward_spans) {
		/* the trace runs forwards of a model whose weights it never saw allocated: they are
		 * older than it, so what is older is, first of all, the model itself */
		ad_note(c, "older_memory_weights", AD_INFO,
		        "Live memory is %s, and %s of it (%d%%) was allocated before the trace "
		        "began. The trace runs forwards of a model but never allocates its "
		        "weights: they are in that older memory (recording began after the model "
		        "was built), with whatever else an earlier phase left; record the history "
		        "from the start to tell them apart.",
		        ad_sz(b1, live), ad_sz(b2, older), ad_pct(older, live));
		return 1; /* the trace cannot tell what else in it could go */
	}
	ad_suggest(
	    c, "release_references", AD_PRIO_CAPACITY, "Free the memory held from before the trace",
	    "del old_model, old_optimizer; gc.collect()  # or record the history from the start",
	    "Live memory is %s, and %s of it (%d%%) was allocated before the trace began and is "
	    "never touched by it: no step the trace shows holds it. It may be an earlier model, "
	    "its optimizer or tensors a notebook or an earlier phase still references, or "
	    "recording began late; the trace cannot tell which. Free what an earlier phase left, "
	    "or record the history from the start to name it.",
	    ad_sz(b1, live), ad_sz(b2, older), ad_pct(older, live));
	return 1;
}

/* Whether the user's line that allocated stack is the one whose request failed: the same
 * file and line of the innermost own frame. */
static int same_line_as_oom(const ad_ctx *c, uint32_t stack)
{
	const md_device *md = md_find_device(c->s, c->dv->device);
	if (!md || c->dv->oom.event >= md->event_count)
		return 0;
	const md_frame *a = an_own_frame(c->s, stack);
	const md_frame *b = an_own_frame(c->s, md->events[c->dv->oom.event].stack);
	return a && b && a->line == b->line &&
	       strcmp(md_str(c->s, a->filename), md_str(c->s, b->filename)) == 0;
}

/* Whether the trace allocates with stack only before its first iteration starts (at least
 * once): a tensor made once, ahead of the loop, not one each step makes or keeps. */
static int allocated_before_loop(const ad_ctx *c, uint32_t stack)
{
	const md_device *md = md_find_device(c->s, c->dv->device);
	if (!md || !c->run || !c->run->start_count)
		return 0;
	size_t first = c->run->starts[0], seen = 0;
	for (size_t i = 0; i < md->event_count; i++) {
		const md_event *e = &md->events[i];
		if (e->action != MD_ACT_ALLOC || e->stack != stack)
			continue;
		if (i >= first)
			return 0;
		seen++;
	}
	return seen > 0;
}

/* Whether every allocation with stack comes before the first allocation of a model's forward
 * (a module call's, not a parameter's), at least once: made before the work, not by it. */
static int allocated_before_work(const ad_ctx *c, uint32_t stack)
{
	const md_device *md = md_find_device(c->s, c->dv->device);
	size_t seen = 0;
	for (size_t i = 0; md && i < md->event_count; i++) {
		const md_event *e = &md->events[i];
		if (e->action != MD_ACT_ALLOC || e->stack >= c->s->stack_count)
			continue;
		if (e->stack == stack) {
			seen++;
			continue;
		}
		const an_stack_info *si = &c->info[e->stack];
		if ((si->flags & AN_SF_MODULE_CALL) && si->category != AN_CAT_PARAMETERS)
			return seen > 0;
	}
	return 0;
}

/* A buffer the code sized itself is one tensor, or at most this many (one per layer), each of
 * at least SIZED_MIN_TENSOR bytes. */
#define SIZED_MAX_TENSORS 256
#define SIZED_MIN_TENSOR (16 * MR_MIB)

/* Beside the batch's levers: the largest site of tensors that are neither model state nor
 * activations and that the trace shows made once before the loop (a dataset moved to the GPU
 * whole, a table the code made), when it holds a quarter of live memory or more and at least
 * what halving the activations frees. The trace cannot tell whether they must be on the GPU at
 * once: said as a choice, after the first lever, and never over another release advice. */
static void advise_resident(ad_ctx *c, const uint64_t *cat, uint64_t live)
{
	char b1[32], b2[32];
	const an_site *top = NULL;
	if (ad_find_rec(c, "release_references"))
		return;
	for (size_t i = 0; i < c->dv->site_count && !top; i++) {
		const an_site *st = &c->dv->sites[i];
		if (an_stack_category(c->info, st->stack, AN_CAT_UNKNOWN) == AN_CAT_OTHER)
			top = st;
	}
	if (!top || top->bytes * 4 < live || top->bytes * 2 < cat[AN_CAT_ACTIVATIONS] ||
	    !allocated_before_loop(c, top->stack))
		return;
	ad_text t = {0};
	ad_text_printf(&t,
	               "%s of the %s live is neither parameters, gradients, optimizer state nor "
	               "activations: the site ",
	               ad_sz(b1, top->bytes), ad_sz(b2, live));
	if (!ad_user_site(&t, c->s, top->stack))
		ad_text_printf(&t, "with no stack recorded");
	ad_text_printf(&t,
	               " holds it in %llu block%s, tensors the code itself put on the GPU (a "
	               "dataset moved there whole, a table). If a step needs only part of "
	               "them, keeping them on the CPU and moving what each step uses frees "
	               "that much without a smaller batch.",
	               (unsigned long long)top->count, top->count == 1 ? "" : "s");
	ad_suggest_text(
	    c, "release_references", AD_PRIO_CAPACITY + 5,
	    "Keep the large tensors the code made outside the model on the CPU",
	    "X = X.pin_memory()  # on the CPU; per step: xb = X[idx].cuda(non_blocking=True)", &t);
}

/* Whether a stack passes through torch.load's deserialisation (torch/serialization.py): a
 * tensor of a checkpoint put back on the device it was saved from. */
static int from_torch_load(const md_snapshot *s, uint32_t stack)
{
	if (stack >= s->stack_count)
		return 0;
	const md_stack *st = &s->stacks[stack];
	for (size_t k = 0; k < st->count; k++) {
		const char *file = md_str(s, s->frames[st->first + k].filename);
		size_t n = strlen(file), m = strlen("torch/serialization.py");
		if (n >= m && strcmp(file + n - m, "torch/serialization.py") == 0)
			return 1;
	}
	return 0;
}

/* Live memory that torch.load put on the GPU: a checkpoint loaded without map_location comes
 * back to the device its tensors were saved from, beside the model already built there. When
 * it holds a quarter of live memory at the OOM, loading to the CPU is the fix; a smaller batch
 * or checkpointing is not (no step ran on it). Returns whether it advised. */
static int advise_checkpoint_load(ad_ctx *c, uint64_t live)
{
	char b1[32], b2[32];
	uint64_t bytes = 0, blocks = 0;
	const an_site *top = NULL;
	for (size_t i = 0; i < c->dv->site_count; i++) {
		const an_site *st = &c->dv->sites[i];
		if (!from_torch_load(c->s, st->stack))
			continue;
		bytes += st->bytes;
		blocks += st->count;
		if (!top)
			top = st;
	}
	const md_device *md = md_find_device(c->s, c->dv->device);
	int fails_there = md && c->dv->oom.present && c->dv->oom.event < md->event_count &&
	                  from_torch_load(c->s, md->events[c->dv->oom.event].stack);
	if (!top || bytes * 4 < live)
		return 0;
	ad_text t = {0};
	ad_text_printf(&t, "%s of the %s live (%llu blocks) was put on the GPU by torch.load, ",
	               ad_sz(b1, bytes), ad_sz(b2, live), (unsigned long long)blocks);
	if (!ad_user_site(&t, c->s, top->stack))
		ad_text_printf(&t, "with no caller recorded");
	ad_text_printf(&t,
	               "%s: the checkpoint's tensors were saved from the GPU and torch.load "
	               "puts them back there, beside the model already built. Loaded with "
	               "map_location=\"cpu\" they stay in host memory; load_state_dict copies "
	               "them into the parameters, the optimizer's moves its state to the "
	               "parameters' device, and the loaded dict can be deleted after.",
	               fails_there ? ", and the failing request is one of them" : "");
	ad_suggest_text(c, "release_references", AD_PRIO_TARGETED,
	                "Load the checkpoint to the CPU, then into the model",
	                "ckpt = torch.load(path, map_location=\"cpu\")\n"
	                "model.load_state_dict(ckpt[\"model\"])\n"
	                "optimizer.load_state_dict(ckpt[\"optimizer\"])\n"
	                "del ckpt",
	                &t);
	return 1;
}

static const md_frame *innermost_python(const ad_ctx *c, uint32_t stack);

/* The largest site is generate()'s own (its innermost Python frame in transformers/generation/,
 * not the model's nor its KV cache's), about one block per decoding step: the per-step scores
 * or logits it returns when asked to (output_scores, output_logits), which it otherwise frees
 * each step. Returns 1 when it advised. */
static int advise_generate_outputs(ad_ctx *c, const an_site *top, uint64_t live)
{
	char b1[32], b2[32], b3[32];
	const an_structure *r = c->run;
	if (!(r->flags_seen & AN_SF_GENERATE) || top->stack >= c->s->stack_count ||
	    (c->info[top->stack].flags & (AN_SF_KV_CACHE | AN_SF_MODULE_CALL)) || top->count < 8 ||
	    top->count * 2 < r->start_count || top->count > r->start_count + 1 ||
	    top->bytes * 2 < live)
		return 0;
	const md_frame *fr = innermost_python(c, top->stack);
	if (!fr || !an_path_has(md_str(c->s, fr->filename), "transformers/generation/"))
		return 0;
	ad_text t = {0};
	ad_text_printf(&t,
	               "Live memory is %s; %s of it is %llu blocks of about %s made by generate() "
	               "itself (",
	               ad_sz(b1, live), ad_sz(b2, top->bytes), (unsigned long long)top->count,
	               ad_sz(b3, top->bytes / top->count));
	ad_text_path(&t, md_str(c->s, fr->filename));
	ad_text_printf(&t,
	               "), not by the model nor its KV cache, one for each of the %zu decoding "
	               "steps: the per-step scores or logits it returns when asked "
	               "(return_dict_in_generate with output_scores or output_logits), each the "
	               "batch times the vocabulary in float32. Not asked for, each is freed at its "
	               "step; if they are needed, read them per step (a LogitsProcessor moving "
	               "what it needs to the CPU) or generate fewer sequences per call.",
	               r->start_count);
	ad_suggest_text(c, "release_references", AD_PRIO_TARGETED,
	                "Do not keep every step's scores in generate()",
	                "model.generate(..., output_scores=False, output_logits=False)  # or "
	                "fewer sequences per call",
	                &t);
	return 1;
}

/* Whether stack is the user's code outside any module and loss, not the model state's. */
static int plain_user_code(const ad_ctx *c, uint32_t stack)
{
	if (stack >= c->s->stack_count ||
	    (c->info[stack].flags & (AN_SF_MODULE_CALL | AN_SF_LOSS)) ||
	    !an_user_frame(c->s, stack))
		return 0;
	int cat = cat_of(c, stack);
	return cat != AN_CAT_PARAMETERS && cat != AN_CAT_GRADIENTS && cat != AN_CAT_OPTIMIZER;
}

/* A failed request of a quarter of the budget or more, within 1% of one live tensor's size,
 * both made by the user's code outside any model: the failing operation makes a whole new copy
 * of a tensor it still holds (an elementwise result, a cast, a clone). In place, or over chunks
 * of rows, it never holds two. split_operation, targeted; 1 when advised. */
static int advise_whole_copy(ad_ctx *c, uint64_t live)
{
	char b1[32], b2[32];
	const an_device *dv = c->dv;
	const md_device *md = md_find_device(c->s, dv->device);
	uint64_t req = dv->oom.requested, budget = c->a->oom.limit ? c->a->oom.limit : live + req;
	if (!md || dv->oom.event >= md->event_count || req < 64 * MR_MIB || req * 4 < budget ||
	    !plain_user_code(c, md->events[dv->oom.event].stack))
		return 0;
	const an_site *copy = NULL;
	for (size_t i = 0; i < dv->site_count && !copy; i++) {
		const an_site *si = &dv->sites[i];
		uint64_t d = si->bytes > req ? si->bytes - req : req - si->bytes;
		if (si->count == 1 && d * 100 <= req && plain_user_code(c, si->stack))
			copy = si;
	}
	if (!copy)
		return 0;
	ad_text t = {0};
	ad_text_printf(&t,
	               "The %s request that failed is the size of one tensor still live, made by ",
	               ad_sz(b1, req));
	ad_user_site(&t, c->s, copy->stack);
	ad_text_printf(&t, " (%s): ", ad_sz(b2, copy->bytes));
	ad_user_site(&t, c->s, md->events[dv->oom.event].stack);
	ad_text_printf(&t,
	               " makes a whole new copy of data of that size (an elementwise result, a "
	               "cast, a clone) while it is held, and no model runs beside them. Done in "
	               "place (x.sub_(m), x.mul_(s), out=), without a wider dtype, or over "
	               "chunks of rows, each reduced before the next (a sum; X_i^T X_i for a "
	               "covariance), it never holds a second whole copy.");
	ad_suggest_text(c, "split_operation", AD_PRIO_TARGETED,
	                "Make the copy in place, or the computation in chunks of rows",
	                "x.sub_(x.mean(0))  # in place; or: for i in range(0, n, k): acc += "
	                "f(x[i:i+k])",
	                &t);
	return 1;
}

void ad_rule_capacity(ad_ctx *c, const uint64_t *cat_in, int oom)
{
	char b1[32], b2[32];
	/* the batch's gradients count with what scales with the batch, not with the model state */
	uint64_t cat[AN_CAT_COUNT], bg = ad_batch_categories(c->run, cat_in, cat);
	uint64_t live = ad_live_total(cat);
	uint64_t state = cat[AN_CAT_PARAMETERS] + cat[AN_CAT_GRADIENTS] + cat[AN_CAT_OPTIMIZER];
	uint64_t acts = cat[AN_CAT_ACTIVATIONS];
	if (!live)
		return;
	an_run_kind kind = pass_kind(c);
	int state_big = ad_pct(state, live) >= AD_DOMINANT_PERCENT && kind == AN_RUN_TRAINING;
	if (oom && advise_older(c, cat))
		return;
	if (oom && advise_checkpoint_load(c, live))
		return;
	const an_oom *o = oom ? &c->dv->oom : NULL;
	uint64_t asked =
	    o && ad_request_is_state(o) && o->category == AN_CAT_OPTIMIZER ? o->requested : 0;
	if (state_big && ad_state_bound(cat, o)) {
		advise_state(c, cat, asked);
		return;
	}
	if (ad_pct(acts, live) >= AD_DOMINANT_PERCENT || (oom && ad_pct(acts, live) >= 25) ||
	    state_big) {
		if (kind == AN_RUN_TRAINING)
			advise_training(c, cat, bg);
		else
			advise_forward_only(c, cat);
		/* a request larger than all the process may use: nothing freed beside it helps,
		 * and when the activations do not hold the memory either, it is one operation's
		 * result, to be made in pieces */
		if (oom && request_oversized(c)) {
			if (ad_pct(acts, live) < 25)
				split_oversized(c);
			return;
		}
		/* the state is large too: its levers come after the batch's */
		size_t before = c->a->rec_count;
		if (state_big)
			advise_state(c, cat, asked);
		ad_rank_later(c, before, 5);
		if (oom)
			advise_resident(c, cat, live);
		return;
	}
	if (ad_pct(state, live) >= AD_DOMINANT_PERCENT) {
		advise_weights_only(c, cat, live);
		return;
	}
	if (oom && split_oversized(c))
		return;
	if (oom && !acts && !state)
		advise_whole_copy(c, live);
	if (oom && c->dv->site_count && advise_generate_outputs(c, &c->dv->sites[0], live))
		return;
	if (oom && c->dv->site_count) {
		/* Neither the model state nor activations: name what holds the memory. */
		const an_site *top = &c->dv->sites[0];
		ad_text t = {0};
		ad_text_printf(&t,
		               "Live memory is %s, and most of it is not parameters, gradients, "
		               "optimizer state or activations; the largest site, ",
		               ad_sz(b1, live));
		if (!ad_user_site(&t, c->s, top->stack))
			ad_text_printf(&t, "with no stack recorded");
		ad_text_printf(&t, ", holds %s in %llu blocks.", ad_sz(b2, top->bytes),
		               (unsigned long long)top->count);
		/* one tensor or a few large ones (a cache's per layer), made once before the loop,
		 * of half the live memory or more: a buffer the code sizes itself (a preallocated
		 * cache or pool, a replay buffer) */
		int sized =
		    top->count <= SIZED_MAX_TENSORS &&
		    top->bytes / top->count >= SIZED_MIN_TENSOR && top->bytes * 2 >= live &&
		    (allocated_before_loop(c, top->stack) || allocated_before_work(c, top->stack));
		if (sized && top->count > 1)
			ad_text_printf(&t,
			               " They are %llu tensors made at one line once before the "
			               "work, which runs beside them: a buffer the code sized "
			               "itself (a preallocated cache or pool, one tensor per "
			               "layer; data moved whole). Kept smaller (fewer blocks or "
			               "tokens for a cache, a lower memory fraction, half "
			               "precision) or on the CPU with pieces moved in as needed, "
			               "the work has the difference.",
			               (unsigned long long)top->count);
		else if (sized)
			ad_text_printf(&t,
			               " It is one tensor made once before the work, which runs "
			               "beside it: a buffer or data the code sized itself (a "
			               "preallocated cache or pool, an index, a dataset moved "
			               "whole). Kept smaller (fewer blocks or tokens for a cache, "
			               "a lower memory fraction, half precision) or on the CPU "
			               "with pieces moved in as needed, the work has the "
			               "difference.");
		else if (same_line_as_oom(c, top->stack))
			ad_text_printf(&t,
			               " The failing request comes from the same line: one "
			               "operation's outputs and temporaries make this memory, so "
			               "that operation on smaller pieces of its input (or on the "
			               "CPU) is the lever.");
		ad_suggest_text(
		    c, "release_references", AD_PRIO_CAPACITY,
		    sized ? "Make the buffer made before the work smaller, or keep it off the GPU"
		          : "Free the tensors that hold the memory, or make them smaller",
		    sized
		        ? "pool = torch.empty(num_blocks * 3 // 4, *block_shape, "
		          "device=\"cuda\")  # a cache: fewer blocks; data: .half(), or on the CPU"
		        : "del big_tensor  # or keep it on the CPU until it is needed",
		    &t);
	}
}

/* ---- the loss's logits ---- */

/* Which live blocks a scan takes: any (LIVE_ANY), those the loss or the output projection made
 * of size a or b (LIVE_LOGITS), those F.interpolate made of at least a bytes (LIVE_RESIZED). */
enum live_kind { LIVE_ANY, LIVE_LOGITS, LIVE_RESIZED };
static int logits_stack(const ad_ctx *c, uint32_t stack);

/* The largest live block of the diagnosed device that `kind` takes, NULL when none. */
static const md_block *largest_of(const ad_ctx *c, enum live_kind kind, uint64_t a, uint64_t b)
{
	const md_block *best = NULL;
	const an_device *dv = c->dv;
	for (size_t i = dv->segment_first; i < dv->segment_first + dv->segment_count; i++) {
		const md_segment *seg = &c->s->segments[i];
		for (size_t j = 0; j < seg->block_count; j++) {
			const md_block *bl = &c->s->blocks[seg->first_block + j];
			if (bl->state != MD_BLOCK_ACTIVE_ALLOCATED ||
			    (best && bl->size <= best->size))
				continue;
			if (kind == LIVE_LOGITS &&
			    ((bl->size != a && bl->size != b) || !logits_stack(c, bl->stack)))
				continue;
			if (kind == LIVE_RESIZED &&
			    (bl->size < a || bl->stack >= c->s->stack_count ||
			     !(c->info[bl->stack].flags & AN_SF_RESIZE)))
				continue;
			best = bl;
		}
	}
	return best;
}

/* The largest live block of the diagnosed device, with its stack. */
static const md_block *largest_live(const ad_ctx *c)
{
	return largest_of(c, LIVE_ANY, 0, 0);
}

/* The innermost shown Python frame of a stack, NULL when it has none. */
static const md_frame *innermost_python(const ad_ctx *c, uint32_t stack)
{
	const md_snapshot *s = c->s;
	const md_stack *st = &s->stacks[stack];
	for (size_t k = 0; k < st->count; k++) {
		const md_frame *fr = &s->frames[st->first + k];
		const char *file = md_str(s, fr->filename);
		size_t n = strlen(file);
		if (an_frame_hidden(s, fr) || n < 3 || strcmp(file + n - 3, ".py") != 0)
			continue;
		return fr;
	}
	return NULL;
}

/* Whether that frame is user code: an operation the model's own module writes out (attention,
 * a reshape), not the torch.nn layer it calls. */
static int innermost_python_is_user(const ad_ctx *c, uint32_t stack)
{
	const md_frame *fr = innermost_python(c, stack);
	return fr && !an_library_file(md_str(c->s, fr->filename));
}

/* The innermost Python frame is one of torch.nn.functional's other than F.linear: an
 * activation, a norm or a pooling a module called, whose output is no projection. */
static int innermost_functional_not_linear(const ad_ctx *c, uint32_t stack)
{
	const md_frame *fr = innermost_python(c, stack);
	return fr && an_path_has(md_str(c->s, fr->filename), "torch/nn/functional.py") &&
	       strcmp(md_str(c->s, fr->name), "linear") != 0;
}

/* The line that called the operation that made a block: the shown Python frame after the
 * innermost one, past torch.nn's call wrappers (module.py): the model's line that calls a layer
 * or an F.* function (a layer inside torch's own modules: their line). NULL when there is none. */
static const md_frame *caller_line(const ad_ctx *c, uint32_t stack)
{
	const md_snapshot *s = c->s;
	const md_stack *st = &s->stacks[stack];
	int inner = 0;
	for (size_t k = 0; k < st->count; k++) {
		const md_frame *fr = &s->frames[st->first + k];
		const char *file = md_str(s, fr->filename);
		size_t n = strlen(file);
		if (an_frame_hidden(s, fr) || n < 3 || strcmp(file + n - 3, ".py") != 0 ||
		    (inner && an_path_has(file, "torch/nn/modules/module.py")))
			continue;
		if (inner++)
			return fr;
	}
	return NULL;
}

static int same_frame(const md_frame *a, const md_frame *b)
{
	return a->line == b->line && a->filename == b->filename && a->name == b->name;
}

/* Whether the line that made a block, by the same operation (the innermost frame: a layer's
 * forward), is a hidden layer's: most of the tensors it makes in the trace are read by another
 * of torch's operations inside the model (the next allocation not its own is a torch frame's,
 * in a module call, no loss), as in a loop over layers (`for l in self.layers: h =
 * F.relu(l(h))`). An output projection's logits go to the loss, to the caller or to the model's
 * own code (a float32 copy). 0 when it cannot be told. */
static int hidden_layer_line(const ad_ctx *c, const md_device *md, uint32_t stack)
{
	const md_frame *at = stack < c->s->stack_count ? caller_line(c, stack) : NULL;
	const md_frame *op = at ? innermost_python(c, stack) : NULL;
	if (!op || (c->info[stack].flags & AN_SF_LOSS))
		return 0;
	uint8_t *same = calloc(c->s->stack_count, 1);
	if (!same)
		return 0;
	for (uint32_t k = 0; k < c->s->stack_count; k++) {
		const md_frame *fr = caller_line(c, k), *in = fr ? innermost_python(c, k) : NULL;
		same[k] = fr && same_frame(fr, at) && in && same_frame(in, op);
	}
	size_t made = 0, read = 0;
	int open = 0;
	for (size_t i = 0; i < md->event_count; i++) {
		const md_event *e = &md->events[i];
		if (e->action != MD_ACT_ALLOC || e->stack >= c->s->stack_count)
			continue;
		if (same[e->stack]) {
			made += !open;
			open = 1;
			continue;
		}
		if (open) {
			const md_frame *in = innermost_python(c, e->stack);
			uint32_t f = c->info[e->stack].flags;
			read += in && an_torch_internal(md_str(c->s, in->filename)) &&
			        (f & AN_SF_MODULE_CALL) && !(f & AN_SF_LOSS);
		}
		open = 0;
	}
	free(same);
	return made >= HIDDEN_MIN_OUTPUTS && read * 2 > made;
}

/* A stack that makes logits: a loss function, or the model's output projection (a module the
 * model calls directly: two nested module calls), unless that module is a torch.nn layer
 * other than Linear (an LSTM's, a convolution's or an embedding's output is no logits), an
 * F.* function other than F.linear (F.silu in a block of a UNet's), or the
 * allocation is the user's own line inside it (a decoder's attention block, also called
 * directly, computes its scores there). */
static int logits_stack(const ad_ctx *c, uint32_t stack)
{
	if (stack >= c->s->stack_count)
		return 0;
	const an_stack_info *si = &c->info[stack];
	return (si->flags & AN_SF_LOSS) ||
	       ((si->flags & AN_SF_MODULE_CALL) && si->model_calls == 2 &&
	        !(si->flags & AN_SF_NN_LAYER) && !innermost_python_is_user(c, stack) &&
	        !innermost_functional_not_linear(c, stack));
}

/* The largest live block made by the loss or the output projection whose size is a or b:
 * the logits a failing request copies need not be the largest tensor (an attention bias or a
 * cache can be larger). */
static const md_block *live_logits_sized(const ad_ctx *c, uint64_t a, uint64_t b)
{
	return largest_of(c, LIVE_LOGITS, a, b);
}

/* The largest live block of at least `min` bytes that F.interpolate made (AN_SF_RESIZE). */
static const md_block *live_resized(const ad_ctx *c, uint64_t min)
{
	return largest_of(c, LIVE_RESIZED, min, 0);
}

/* What the logits are, in words, into t. */
static void logits_words(ad_text *t, int copy, int req_logits, uint64_t req, uint64_t live_logits)
{
	char b1[32], b2[32];
	if (copy == 2)
		ad_text_printf(t,
		               "the failing %s request, in the backward, is the gradient of the "
		               "logits (%s live)",
		               ad_sz(b1, req), ad_sz(b2, live_logits));
	else if (copy && req != live_logits * 2)
		/* as many bytes as the logits: a copy in their own dtype (the loss's log-softmax),
		 * no upcast */
		ad_text_printf(
		    t,
		    "the failing %s request is a copy of the logits as large as they are "
		    "(%s live), made for the loss",
		    ad_sz(b1, req), ad_sz(b2, live_logits));
	else if (copy)
		ad_text_printf(t,
		               "the failing %s request is a float32 copy of the logits (%s live)",
		               ad_sz(b1, req), ad_sz(b2, live_logits));
	else if (req_logits)
		ad_text_printf(t,
		               "the failing %s request is the logits (the loss or the output "
		               "projection allocates it)",
		               ad_sz(b1, req));
	else
		ad_text_printf(t, "the largest live tensor, %s, is the logits",
		               ad_sz(b1, live_logits));
}

/* chunked_loss for logits F.interpolate upsampled (`resized` bytes) to the labels' resolution:
 * the loss at the logits' own resolution, or a few images at a time (for inference: the class
 * map upsampled, not the logits). */
static void advise_upsampled(ad_ctx *c, int copy, int req_logits, uint64_t req,
                             uint64_t live_logits, uint64_t resized, uint64_t total,
                             uint64_t budget)
{
	char b1[32], b2[32], b3[32];
	ad_text t = {0};
	int infer = ad_run_kind(c) == AN_RUN_INFERENCE;
	ad_text_printf(&t, "The loss's logits are the largest tensors here: ");
	logits_words(&t, copy, req_logits, req, live_logits);
	ad_text_printf(
	    &t,
	    ", and the %s tensor it reads was made by F.interpolate: the predictions "
	    "upsampled to the labels' resolution, %s together (%d%% of %s). %s",
	    ad_sz(b1, resized), ad_sz(b2, total), ad_pct(total, budget), ad_sz(b3, budget),
	    infer ? "Take the class map at the model's own resolution and upsample that "
	            "(nearest), or upsample a few images at a time."
	          : "Computed at the logits' own resolution (the labels downsampled with "
	            "mode=\"nearest\"), or upsampled and scored a few images at a time, "
	            "the full-resolution logits of the whole batch never exist.");
	ad_suggest_text(
	    c, "chunked_loss", total * 4 >= budget ? AD_PRIO_TARGETED : AD_PRIO_CAPACITY + 15,
	    infer ? "Upsample the class map, not the logits"
	          : "Compute the loss at the logits' resolution, or a few images at a time",
	    infer ? "pred = F.interpolate(logits.argmax(1, keepdim=True).float(), "
	            "size=out_size, mode=\"nearest\")"
	          : "y_small = F.interpolate(y[:, None].float(), size=logits.shape[-2:], "
	            "mode=\"nearest\")[:, 0].long(); loss = F.cross_entropy(logits, y_small)",
	    &t);
}

int ad_rule_logits(ad_ctx *c)
{
	char b1[32], b2[32];
	const an_device *dv = c->dv;
	const md_device *md = dv ? md_find_device(c->s, dv->device) : NULL;
	if (!md || !dv->oom.present || dv->oom.event >= md->event_count)
		return 0;
	const md_event *e = &md->events[dv->oom.event];
	const md_block *big = largest_live(c);
	uint64_t req = dv->oom.requested;
	uint64_t budget = c->a->oom.limit ? c->a->oom.limit : dv->pool[AN_POOL_ALL].reserved;
	/* a hidden layer's output, made by a line that runs once a layer, is no logits */
	int big_is = big && logits_stack(c, big->stack) && !hidden_layer_line(c, md, big->stack);
	/* the request is the logits (a loss frame, the output projection), or a copy of the
	 * largest live logits made outside the model for the loss (float32: twice their bf16
	 * bytes; or the same bytes) */
	int req_logits = logits_stack(c, e->stack) && !hidden_layer_line(c, md, e->stack);
	int outside_model = e->stack < c->s->stack_count &&
	                    !(c->info[e->stack].flags & AN_SF_MODULE_CALL) &&
	                    (c->info[e->stack].flags & AN_SF_PYTHON);
	int copy = big_is && outside_model && (req == big->size * 2 || req == big->size);
	int not_largest = 0;
	/* in the backward: the gradient of the logits (of their float32 copy: twice their bf16
	 * bytes), which the autograd engine allocates with no frame of the loss */
	int in_backward = e->stack >= c->s->stack_count ||
	                  (c->info[e->stack].flags & (AN_SF_BACKWARD | AN_SF_ENGINE_THREAD)) ||
	                  !(c->info[e->stack].flags & AN_SF_PYTHON);
	if (!copy && in_backward && !req_logits) {
		const md_block *lg = live_logits_sized(c, req / 2, req);
		if (lg && !hidden_layer_line(c, md, lg->stack)) {
			not_largest = lg != big;
			big = lg;
			big_is = 1;
			copy = 2;
		}
	}
	if (!copy && outside_model && !req_logits) {
		/* the logits it copies, when another tensor is the largest */
		const md_block *lg = live_logits_sized(c, req / 2, req);
		if (lg && !hidden_layer_line(c, md, lg->stack)) {
			big = lg;
			big_is = copy = not_largest = 1;
		}
	}
	int fires =
	    ((req_logits || copy) && req * 10 >= budget) || (big_is && big->size * 10 >= budget);
	if (!fires)
		return 0;
	uint64_t live_logits = big_is ? big->size : 0;
	uint64_t total = (req_logits || copy ? req : 0) + live_logits;
	/* the loss reads a tensor F.interpolate made, at least half the request: logits upsampled
	 * to the labels' resolution (a dense prediction: segmentation, depth), not a sequence's */
	const md_block *resized = req_logits && !copy ? live_resized(c, req / 2) : NULL;
	if (resized && !(big_is && resized == big))
		total += resized->size;
	ad_text t = {0};
	logits_words(&t, copy, req_logits, req, live_logits); /* the verdict's words */
	snprintf(c->a->oom.logits, sizeof c->a->oom.logits, "%s", t.b.data ? t.b.data : "");
	ad_text_free(&t);
	if (resized) {
		advise_upsampled(c, copy, req_logits, req, live_logits, resized->size, total,
		                 budget);
		return 1;
	}
	if (ad_run_kind(c) == AN_RUN_INFERENCE) {
		ad_text_printf(&t, "The logits are the largest tensors here: ");
		logits_words(&t, copy, req_logits, req, live_logits);
		ad_text_printf(&t, "; every position of every sequence times the vocabulary, "
		                   "where generation needs only the last.");
		ad_suggest_text(c, "chunked_loss", AD_PRIO_TARGETED,
		                "Compute logits only for the positions you need",
		                "model(input_ids, logits_to_keep=1)  # Hugging Face; or slice the "
		                "hidden states before the output projection",
		                &t);
		return 1;
	}
	/* first when they are a large share of the budget; else one lever among others */
	int priority = total * 4 >= budget ? AD_PRIO_TARGETED : AD_PRIO_CAPACITY + 15;
	/* the logits' gradient in the backward: first only when the logits outweigh the other
	 * activations still held for it (else the batch's levers shrink more) */
	uint64_t acts = dv->categories[AN_CAT_ACTIVATIONS];
	if (copy == 2 && acts > live_logits && acts - live_logits > live_logits)
		priority = AD_PRIO_CAPACITY + 15;
	ad_text_printf(&t, "The loss's logits %s: ",
	               priority == AD_PRIO_TARGETED ? "decide this run"
	               : not_largest                ? "are among the large tensors"
	                                            : "are the largest tensors");
	logits_words(&t, copy, req_logits, req, live_logits);
	ad_text_printf(&t,
	               ", %s together, %d%% of %s. Computed over chunks of the sequence (or by a "
	               "fused linear cross-entropy) they never exist whole%s",
	               ad_sz(b1, total), ad_pct(total, budget), ad_sz(b2, budget),
	               copy == 1 && req != live_logits * 2
	                   ? "."
	                   : "; kept in bf16 the copy is half the size.");
	ad_suggest_text(c, "chunked_loss", priority,
	                "Compute the loss in chunks, or keep the logits in bf16",
	                "for i in range(0, T, k): loss += F.cross_entropy(head(h[:, i:i+k])"
	                ".flatten(0, 1).float(), y[:, i:i+k].flatten(), reduction=\"sum\")",
	                &t);
	return 1;
}

/* ---- attention computed explicitly ---- */

/* Whether stack's user frame is the line the log's traceback shows failing (the same line, and
 * the same file, or one path the tail of the other at a folder boundary). */
static int at_failing_line(const ad_ctx *c, uint32_t stack)
{
	const ev_oom *m = c->msg;
	if (!m || !m->user.line)
		return 0;
	const md_frame *f = an_user_frame(c->s, stack);
	if (!f || f->line != m->user.line)
		return 0;
	/* the same file, or one path the tail of the other at a folder boundary */
	const char *a = md_str(c->s, f->filename), *b = m->user.file;
	if (strlen(a) < strlen(b)) {
		const char *t = a;
		a = b;
		b = t;
	}
	size_t n = strlen(a), k = strlen(b);
	return k && strcmp(a + n - k, b) == 0 && (n == k || a[n - k - 1] == '/');
}

/* Whether stack's innermost Python frame is the line the log's traceback shows failing: the
 * allocation was made by that line's own code, not inside a function or module it calls. */
static int made_at_failing_line(const ad_ctx *c, uint32_t stack)
{
	const md_frame *f = innermost_python(c, stack);
	return f && f == an_user_frame(c->s, stack) && at_failing_line(c, stack);
}

/* How attention's probabilities were computed explicitly: by F.dropout of a tensor shaped like
 * scores, with what its user line made (below), by a softmax at the line that failed
 * (the log's traceback shows its code; Tensor.softmax leaves no Python frame), by F.softmax in
 * the model's own code, by nn.MultiheadAttention's unfused path (F.softmax under
 * multi_head_attention_forward, which materialises them only when its weights are asked for:
 * need_weights defaults to True), or by Hugging Face's eager attention. */
enum { ATT_NONE, ATT_DROPOUT, ATT_LINE, ATT_SOFTMAX, ATT_MHA, ATT_EAGER };

/* How many times a hidden state's size the model's own tensors must be, block for block, to
 * have attention scores' shape: B x heads x T x T against a layer's B x T x 4d at most is
 * T / (4 x head size), 4 at T = 1024 with heads of 64, and a float32 softmax doubles it. */
#define SHAPE_RATIO 4

/* Calls fn for every live block of the diagnosed device. */
static void each_live_block(const ad_ctx *c, void (*fn)(const ad_ctx *, const md_block *, void *),
                            void *arg)
{
	const an_device *dv = c->dv;
	for (size_t i = dv->segment_first; i < dv->segment_first + dv->segment_count; i++) {
		const md_segment *seg = &c->s->segments[i];
		for (size_t j = 0; j < seg->block_count; j++) {
			const md_block *bl = &c->s->blocks[seg->first_block + j];
			if (bl->state == MD_BLOCK_ACTIVE_ALLOCATED && bl->stack < c->s->stack_count)
				fn(c, bl, arg);
		}
	}
}

/* Keeps in *arg the largest block that a torch.nn Linear, norm or convolution made. */
static void layer_output(const ad_ctx *c, const md_block *bl, void *arg)
{
	static const char *const layers[] = {
	    "torch/nn/modules/linear.py", "torch/nn/modules/normalization.py",
	    "torch/nn/modules/batchnorm.py", "torch/nn/modules/conv.py"};
	uint64_t *best = arg;
	const md_frame *fr = bl->size > *best ? innermost_python(c, bl->stack) : NULL;
	for (size_t k = 0; fr && k < sizeof layers / sizeof *layers; k++)
		if (an_path_has(md_str(c->s, fr->filename), layers[k]))
			*best = bl->size;
}

/* A live block the model's own code made (operators leave no frame), inside a module call and
 * outside a loss, not the logits, SHAPE_RATIO times the largest layer output or more: by its
 * user function. */
typedef struct {
	uint32_t file, name;
	uint64_t size;
} shaped_block;

typedef struct {
	uint64_t hidden;
	shaped_block *v;
	size_t n, cap;
	int nomem;
} shaped_set;

static void shaped_like_scores(const ad_ctx *c, const md_block *bl, void *arg)
{
	shaped_set *set = arg;
	uint32_t f = c->info[bl->stack].flags;
	const md_frame *user = an_user_frame(c->s, bl->stack);
	if (bl->size < SHAPE_RATIO * set->hidden || !(f & AN_SF_MODULE_CALL) || (f & AN_SF_LOSS) ||
	    !user || cat_of(c, bl->stack) != AN_CAT_ACTIVATIONS ||
	    !innermost_python_is_user(c, bl->stack) || logits_stack(c, bl->stack))
		return;
	if (MR_GROW(set->v, set->cap, set->n + 1)) {
		set->nomem = 1;
		return;
	}
	set->v[set->n++] = (shaped_block){user->filename, user->name, bl->size};
}

static int shaped_cmp(const void *pa, const void *pb)
{
	const shaped_block *a = pa, *b = pb;
	if (a->file != b->file)
		return a->file < b->file ? -1 : 1;
	if (a->name != b->name)
		return a->name < b->name ? -1 : 1;
	return a->size < b->size ? -1 : a->size > b->size;
}

/* Whether the sorted set holds a block of that function and size. */
static int shaped_has(const shaped_set *set, uint32_t file, uint32_t name, uint64_t size)
{
	shaped_block key = {file, name, size};
	return bsearch(&key, set->v, set->n, sizeof key, shaped_cmp) != NULL;
}

/* Which of those a stack's allocation is (ATT_NONE: none), inside a module call and outside a
 * loss: made at the failing line when its code calls a softmax, by F.softmax itself, or
 * anywhere inside Hugging Face's eager attention. */
static int explicit_attention(const ad_ctx *c, uint32_t stack)
{
	const md_snapshot *s = c->s;
	if (stack >= s->stack_count)
		return ATT_NONE;
	uint32_t f = c->info[stack].flags;
	if (!(f & AN_SF_MODULE_CALL) || (f & AN_SF_LOSS))
		return ATT_NONE;
	const md_stack *st = &s->stacks[stack];
	int how = c->msg && strstr(c->msg->user.code, "softmax(") && made_at_failing_line(c, stack)
	              ? ATT_LINE
	              : ATT_NONE;
	for (size_t k = 0; k < st->count; k++) {
		const md_frame *fr = &s->frames[st->first + k];
		const char *name = md_str(s, fr->name), *file = md_str(s, fr->filename);
		int torch_fn = an_path_has(file, "torch/nn/functional.py");
		if (k == 0 && strcmp(name, "softmax") == 0 && torch_fn)
			how = ATT_SOFTMAX;
		else if (how == ATT_SOFTMAX && torch_fn &&
		         strcmp(name, "multi_head_attention_forward") == 0)
			return ATT_MHA;
		if (strcmp(name, "eager_attention_forward") == 0 &&
		    an_path_has(file, "transformers/"))
			return ATT_EAGER;
	}
	return how;
}

/* The user lines where F.dropout, inside a module call and outside a loss, made activations
 * SHAPE_RATIO times the largest layer output or more: a dropout of attention's probabilities (a
 * layer's own dropout acts on tensors of its outputs' size). */
#define DROPOUT_LINES 64

typedef struct {
	uint64_t hidden, bytes;
	struct {
		uint32_t file, name;
		int32_t line;
	} at[DROPOUT_LINES];
	size_t n;
} dropout_scan;

static int is_dropout(const ad_ctx *c, uint32_t stack)
{
	const md_frame *fr = innermost_python(c, stack);
	return fr && strcmp(md_str(c->s, fr->name), "dropout") == 0 &&
	       an_path_has(md_str(c->s, fr->filename), "torch/nn/functional.py");
}

/* Whether a block is activations of a module call, outside a loss, with a user frame. */
static const md_frame *model_activation(const ad_ctx *c, const md_block *bl)
{
	uint32_t f = c->info[bl->stack].flags;
	if (!(f & AN_SF_MODULE_CALL) || (f & AN_SF_LOSS) ||
	    cat_of(c, bl->stack) != AN_CAT_ACTIVATIONS)
		return NULL;
	return an_user_frame(c->s, bl->stack);
}

/* Whether user is in one of the scan's functions (line < 0) or at one of its lines. */
static int dropout_at(const dropout_scan *d, const md_frame *user, int line)
{
	for (size_t i = 0; i < d->n; i++)
		if (d->at[i].file == user->filename && d->at[i].name == user->name &&
		    (line < 0 || d->at[i].line == user->line))
			return 1;
	return 0;
}

static void dropout_lines(const ad_ctx *c, const md_block *bl, void *arg)
{
	dropout_scan *d = arg;
	const md_frame *user = bl->size >= SHAPE_RATIO * d->hidden && is_dropout(c, bl->stack)
	                           ? model_activation(c, bl)
	                           : NULL;
	if (user && d->n < DROPOUT_LINES && !dropout_at(d, user, user->line)) {
		d->at[d->n].file = user->filename;
		d->at[d->n].name = user->name;
		d->at[d->n++].line = user->line;
	}
}

/* What they keep: those lines' dropout outputs and masks, and what their functions' own code
 * made at the same scale (scores and softmax: an operator leaves no frame), less what
 * explicit_attention names by a frame. */
static int explicit_attention(const ad_ctx *c, uint32_t stack);

static void dropout_bytes(const ad_ctx *c, const md_block *bl, void *arg)
{
	dropout_scan *d = arg;
	const md_frame *user = model_activation(c, bl);
	if (!user || explicit_attention(c, bl->stack) != ATT_NONE)
		return;
	if (is_dropout(c, bl->stack)
	        ? dropout_at(d, user, user->line)
	        : bl->size >= SHAPE_RATIO * d->hidden && innermost_python_is_user(c, bl->stack) &&
	              dropout_at(d, user, -1))
		d->bytes += bl->size;
}

int ad_rule_attention(ad_ctx *c)
{
	static const char *const made_by[] = {
	    "",
	    "F.dropout inside the model, of tensors at least 4x the largest output of its "
	    "Linear, norm or convolution layers, and by its functions' own code at that scale "
	    "(a softmax or a matmul leaves no frame of its own); if these are attention scores "
	    "and probabilities, that",
	    "the softmax of the line that failed (the log's traceback); if these are attention "
	    "probabilities, that",
	    "F.softmax inside the model; if these are attention probabilities, that",
	    "nn.MultiheadAttention's unfused path (F.softmax in multi_head_attention_forward, "
	    "taken when the attention weights are asked for: need_weights defaults to True)",
	    "Hugging Face's eager attention (eager_attention_forward)"};
	static const char sdpa[] = "y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, "
	                           "dropout_p=p if self.training else 0.0)  # is_causal=True for "
	                           "a causal mask";
	static const char *const change[] = {
	    "",
	    sdpa,
	    sdpa,
	    sdpa,
	    "y, _ = self.attn(q, k, v, need_weights=False)  # its fused (SDPA) path",
	    "from_pretrained(..., attn_implementation=\"sdpa\")  # or "
	    "\"flash_attention_2\"; config._attn_implementation = \"sdpa\""};
	const an_device *dv = c->dv;
	uint64_t live = ad_live_total(dv->categories), bytes = 0;
	int how = ATT_NONE;
	char b1[32], b2[32];
	if (!live || pass_kind(c) == AN_RUN_INFERENCE)
		return 0; /* without a graph, the probabilities of one layer at a time */
	for (size_t i = 0; i < dv->site_count; i++) {
		int h = cat_of(c, dv->sites[i].stack) == AN_CAT_ACTIVATIONS
		            ? explicit_attention(c, dv->sites[i].stack)
		            : ATT_NONE;
		if (h != ATT_NONE)
			bytes += dv->sites[i].bytes;
		how = h > how ? h : how; /* the most specific library signature names the lever */
	}
	dropout_scan d = {0};
	each_live_block(c, layer_output, &d.hidden);
	if (d.hidden)
		each_live_block(c, dropout_lines, &d);
	if (d.n)
		each_live_block(c, dropout_bytes, &d);
	if (d.bytes && how == ATT_NONE)
		how = ATT_DROPOUT;
	bytes += d.bytes;
	c->attention_bytes = bytes;
	if (bytes < 64 * MR_MIB || bytes * 5 < live)
		return 0;
	ad_text t = {0};
	ad_text_printf(&t,
	               "%s of the %s live (%d%%) was made by %s: attention computed explicitly "
	               "keeps each layer's batch x heads x T x T probabilities for the backward. "
	               "A fused kernel (flash or memory-efficient attention) recomputes them "
	               "instead and its memory grows with T, not T squared.",
	               ad_sz(b1, bytes), ad_sz(b2, live), ad_pct(bytes, live), made_by[how]);
	ad_suggest_text(c, "fused_attention",
	                bytes * 4 >= live ? AD_PRIO_TARGETED : AD_PRIO_CAPACITY + 5,
	                "Use fused attention instead of softmax(q @ k^T) @ v", change[how], &t);
	return 1;
}

/* Explicit attention's live blocks in a forward without a graph: their bytes, the largest, and
 * whether one is twice another (a float32 softmax cast down to the model's 16-bit dtype). */
typedef struct {
	uint64_t bytes, largest;
	uint64_t *sizes;
	size_t n, cap;
	int how, nomem;
} kept_scan;

static void kept_attention(const ad_ctx *c, const md_block *bl, void *arg)
{
	kept_scan *k = arg;
	int how = cat_of(c, bl->stack) == AN_CAT_ACTIVATIONS ? explicit_attention(c, bl->stack)
	                                                     : ATT_NONE;
	if (how == ATT_NONE)
		return;
	if (MR_GROW(k->sizes, k->cap, k->n + 1)) {
		k->nomem = 1;
		return;
	}
	k->sizes[k->n++] = bl->size;
	k->bytes += bl->size;
	k->largest = bl->size > k->largest ? bl->size : k->largest;
	k->how = how > k->how ? how : k->how;
}

static int size_cmp(const void *pa, const void *pb)
{
	uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
	return a < b ? -1 : a > b;
}

static int has_doubled_size(const kept_scan *k)
{
	for (size_t i = 0; i < k->n; i++) {
		uint64_t twice = 2 * k->sizes[i];
		if (bsearch(&twice, k->sizes, k->n, sizeof twice, size_cmp))
			return 1;
	}
	return 0;
}

int ad_rule_kept_attention(ad_ctx *c)
{
	const an_device *dv = c->dv;
	uint64_t live = ad_live_total(dv->categories);
	kept_scan k = {0};
	char b1[32], b2[32], b3[32];
	int fired = 0;
	if (!live || pass_kind(c) != AN_RUN_INFERENCE)
		return 0;
	each_live_block(c, kept_attention, &k);
	if (k.nomem) {
		c->failed = 1;
		goto done;
	}
	if (k.n)
		qsort(k.sizes, k.n, sizeof *k.sizes, size_cmp);
	c->attention_half = has_doubled_size(&k);
	/* without a graph a layer's probabilities die with it: three layers' worth or more live
	 * at once are kept by the caller */
	if (k.bytes < 64 * MR_MIB || k.bytes < 3 * k.largest || k.bytes * 5 < live)
		goto done;
	ad_text t = {0};
	ad_text_printf(&t,
	               "%s of the %s live (%d%%) is attention probabilities (%s), the largest "
	               "%s: in a forward without a graph each layer's die with it, so several "
	               "layers' at once are kept by the caller. ",
	               ad_sz(b1, k.bytes), ad_sz(b2, live), ad_pct(k.bytes, live),
	               k.how == ATT_EAGER ? "Hugging Face's eager_attention_forward"
	                                  : "an explicit softmax inside the model",
	               ad_sz(b3, k.largest));
	ad_text_printf(&t, k.how == ATT_EAGER
	                       ? "output_attentions=True returns every layer's (and makes the "
	                         "model compute them eagerly); without it only one layer's is "
	                         "live at a time, and SDPA or flash attention never makes them."
	                       : "Returning or storing them (need_weights=True, a hook, a "
	                         "list) keeps every layer's; keep the one layer wanted, or none.");
	ad_suggest_text(c, "release_references", AD_PRIO_TARGETED,
	                "Do not keep every layer's attention probabilities",
	                k.how == ATT_EAGER
	                    ? "out = model(**batch, output_attentions=False)  # or a forward hook "
	                      "that copies the one layer wanted to the CPU"
	                    : "keep only the layer wanted, e.g. attn.detach().cpu() in a forward "
	                      "hook",
	                &t);
	fired = 1;
done:
	free(k.sizes);
	return fired;
}

int ad_rule_attention_shape(ad_ctx *c)
{
	static const char change[] = "y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, "
	                             "dropout_p=p if self.training else 0.0)  # not another N x N "
	                             "product (distances, similarities): that, in chunks of rows";
	const an_device *dv = c->dv;
	uint64_t live = ad_live_total(dv->categories), bytes = 0;
	shaped_set set = {0};
	char b1[32], b2[32];
	if (!live || pass_kind(c) == AN_RUN_INFERENCE || !ad_technique_on(c, AN_TECH_AUTOCAST) ||
	    ad_find_rec(c, "fused_attention"))
		return 0;
	each_live_block(c, layer_output, &set.hidden);
	if (set.hidden)
		each_live_block(c, shaped_like_scores, &set);
	if (set.nomem) {
		free(set.v);
		c->failed = 1;
		return 0;
	}
	if (set.n)
		qsort(set.v, set.n, sizeof *set.v, shaped_cmp);
	/* a float32 softmax of half-precision scores, as autocast computes it: a block of its
	 * function at twice or half its size */
	for (size_t i = 0; i < set.n; i++) {
		const shaped_block *x = &set.v[i];
		if (shaped_has(&set, x->file, x->name, 2 * x->size) ||
		    (x->size % 2 == 0 && shaped_has(&set, x->file, x->name, x->size / 2)))
			bytes += x->size;
	}
	free(set.v);
	if (bytes < 64 * MR_MIB || bytes * 5 < live)
		return 0;
	ad_text t = {0};
	ad_text_printf(&t,
	               "%s of the %s live (%d%%) is tensors the model's own code made (an "
	               "operator such as q @ k.transpose(-2, -1), a softmax or a mask leaves no "
	               "frame of its own), each at least %dx the largest output of its Linear, "
	               "norm or convolution layers, in pairs of one size and twice it within a "
	               "function: the shape of attention's batch x heads x T x T scores and their "
	               "float32 softmax under autocast. If that is what they are, attention "
	               "computed explicitly keeps them for the backward; a fused kernel (flash or "
	               "memory-efficient attention) recomputes them instead, and its memory grows "
	               "with T, not T squared. Another N x N product (pairwise distances or "
	               "similarities) shrinks the same way, computed in chunks of rows.",
	               ad_sz(b1, bytes), ad_sz(b2, live), ad_pct(bytes, live), SHAPE_RATIO);
	ad_suggest_text(c, "fused_attention",
	                bytes * 4 >= live ? AD_PRIO_TARGETED : AD_PRIO_CAPACITY + 5,
	                "Use fused attention instead of softmax(q @ k^T) @ v", change, &t);
	return 1;
}

/* ---- a tensor that grows with the square of the input ---- */

/* How close to the square of the input's growth the failing request's growth must be: a T x T
 * tensor where T doubled grew 4x; allocator rounding and a ratio measured on one request (not a
 * median) ask for slack, and it must stay clearly above linear growth. */
#define QUADRATIC_SLACK 0.75

/* Whether code (one line) is a whole call of scaled_dot_product_attention with no mask: no
 * attn_mask keyword, no fourth positional argument, no **kwargs, its closing parenthesis on the
 * line (a call cut by the line, or by the log, cannot tell). */
static int sdpa_call_without_mask(const char *code)
{
	const char *p = strstr(code, "scaled_dot_product_attention(");
	if (!p || strstr(p, "attn_mask") || strstr(p, "**"))
		return 0;
	int depth = 0, keyword = 0;
	size_t positional = 0;
	for (p = strchr(p, '(') + 1; *p; p++) {
		if (*p == '(' || *p == '[' || *p == '{')
			depth++;
		else if ((*p == ')' || *p == ']' || *p == '}') && depth)
			depth--;
		else if (*p == '=' && !depth)
			keyword = 1;
		else if ((*p == ',' || *p == ')') && !depth) {
			positional += !keyword;
			keyword = 0;
			if (*p == ')')
				return positional <= 3;
		}
	}
	return 0;
}

/* Whether the log's traceback shows the failing call to be F.scaled_dot_product_attention with
 * no mask: its user frame is the failing stack's own (same file and line) and its code makes
 * that call. */
static int failed_in_sdpa(const ad_ctx *c, uint32_t stack)
{
	return c->msg && sdpa_call_without_mask(c->msg->user.code) && at_failing_line(c, stack);
}

/* The T x T tensor made by scaled_dot_product_attention itself, given no mask to materialise:
 * its math kernel ran. */
static void advise_sdpa_math(ad_ctx *c, uint64_t req, uint64_t held, uint64_t budget)
{
	char b1[32], b2[32], b3[32];
	ad_text t = {0};
	ad_text_printf(
	    &t,
	    "The call that failed is F.scaled_dot_product_attention (the log's traceback), and it "
	    "made a tensor that grows with the square of the input's length: %s asked, %s live "
	    "from the same call (%d%% of %s together). Its flash and memory-efficient kernels "
	    "never make one, so it ran its math kernel, which materialises batch x heads x T x T "
	    "scores and keeps them for the backward. It falls back to it when the fused kernels "
	    "are turned off (torch.nn.attention.sdpa_kernel([SDPBackend.MATH]), "
	    "torch.backends.cuda.enable_flash_sdp(False) and enable_mem_efficient_sdp(False)) or "
	    "cannot take the inputs (float32 q/k/v for flash, a head size they do not support, "
	    "an unusual mask); it warns why when asked for a fused kernel only.",
	    ad_sz(b1, req), ad_sz(b2, held), ad_pct(held + req, budget), ad_sz(b3, budget));
	ad_suggest_text(c, "fused_attention",
	                (held + req) * 4 >= budget ? AD_PRIO_TARGETED : AD_PRIO_CAPACITY + 5,
	                "Let scaled_dot_product_attention use a fused kernel",
	                "with sdpa_kernel([SDPBackend.FLASH_ATTENTION, "
	                "SDPBackend.EFFICIENT_ATTENTION]):  # from torch.nn.attention; not MATH\n"
	                "    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)",
	                &t);
}

/* How many times the model's own activations one operation outside it must hold to bound the
 * run: a layer's output is a small multiple of its input, a pairwise result grows with the
 * square of the batch. */
#define OPERATION_RATIO 8

/* Whether a stack is an operation of torch's (its innermost Python frame torch's own, as
 * torch.cdist or torch.einsum) called outside any module and outside a loss. */
static int operation_outside_model(const ad_ctx *c, uint32_t stack)
{
	if (stack >= c->s->stack_count ||
	    (c->info[stack].flags & (AN_SF_MODULE_CALL | AN_SF_LOSS)) ||
	    !an_user_frame(c->s, stack))
		return 0;
	int cat = cat_of(c, stack);
	const md_frame *fr = innermost_python(c, stack);
	return (cat == AN_CAT_ACTIVATIONS || cat == AN_CAT_OTHER) && fr &&
	       an_torch_internal(md_str(c->s, fr->filename));
}

int ad_rule_big_operation(ad_ctx *c)
{
	const an_device *dv = c->dv;
	const uint64_t *cat = dv->categories;
	uint64_t live = ad_live_total(cat), acts = cat[AN_CAT_ACTIVATIONS];
	const an_site *best = NULL;
	char b1[32], b2[32], b3[32];
	/* no activations: no model ran (a checkpoint loaded, a dataset moved) */
	if (!live || acts < MR_MIB || ad_find_rec(c, "fused_attention"))
		return 0;
	for (size_t i = 0; i < dv->site_count; i++)
		if ((!best || dv->sites[i].bytes > best->bytes) &&
		    operation_outside_model(c, dv->sites[i].stack))
			best = &dv->sites[i];
	if (!best || best->bytes < 64 * MR_MIB || best->bytes * 4 < live ||
	    best->bytes < OPERATION_RATIO * acts)
		return 0;
	const md_frame *op = innermost_python(c, best->stack);
	ad_text t = {0};
	ad_text_printf(&t,
	               "%s of the %s live (%d%%) is the output of one operation, %s, called by ",
	               ad_sz(b1, best->bytes), ad_sz(b2, live), ad_pct(best->bytes, live),
	               md_str(c->s, op->name));
	ad_user_site(&t, c->s, best->stack);
	ad_text_printf(&t,
	               " outside the model: %.0fx the model's own activations (%s), so that "
	               "operation, not the model, sets how large a batch fits, and its backward "
	               "makes a gradient of its size. Computed in chunks of rows, each reduced (a "
	               "min, a top-k) before the next and under torch.no_grad() where only the "
	               "chosen entries need a gradient (recompute those with it), it never holds "
	               "the whole. A pairwise (N x N) result shrinks with the square of the "
	               "batch: half the batch, a quarter of it.",
	               (double)best->bytes / (double)acts, ad_sz(b3, acts));
	ad_suggest_text(c, "split_operation", AD_PRIO_TARGETED,
	                "Compute the large operation in chunks of rows",
	                "with torch.no_grad():\n    for i in range(0, n, k): pick from "
	                "f(x[i:i+k], y) (its min or top-k)\nthen recompute only the picked "
	                "entries with grad",
	                &t);
	return 1;
}

int ad_rule_quadratic(ad_ctx *c)
{
	const an_structure *r = c->run;
	const an_device *dv = c->dv;
	const md_device *md = md_find_device(c->s, dv->device);
	double in = r->oom_input_ratio, req_ratio = r->oom_request_ratio;
	char b1[32], b2[32], b3[32];
	if (!dv->oom.present || !md || dv->oom.event >= md->event_count || in < LARGER_INPUT ||
	    req_ratio < QUADRATIC_SLACK * in * in || req_ratio < 2.0 * in)
		return 0;
	uint32_t st = md->events[dv->oom.event].stack;
	uint64_t held = 0, req = dv->oom.requested;
	uint64_t budget = c->a->oom.limit ? c->a->oom.limit : dv->pool[AN_POOL_ALL].reserved;
	for (size_t i = 0; i < dv->site_count; i++)
		if (dv->sites[i].stack == st)
			held += dv->sites[i].bytes;
	ad_note(c, "quadratic_input", AD_WARNING,
	        "The failing %s request's operation asked %.1fx what it asked in the earlier "
	        "forwards, about the square of the %.1fx the input grew by: it grows with the "
	        "square of the input's length, as a T x T tensor does (attention scores, or an "
	        "attention mask or bias materialised for every head; pairwise distances). Live "
	        "blocks of that same call hold %s more.",
	        ad_sz(b1, req), req_ratio, in, ad_sz(b2, held));
	if (!budget)
		return 1;
	if (failed_in_sdpa(c, st)) {
		advise_sdpa_math(c, req, held, budget);
		return 1;
	}
	ad_text t = {0};
	ad_text_printf(&t,
	               "The call that failed makes a tensor that grows with the square of the "
	               "input's length: %s asked, %s live from the same call (%d%% of %s "
	               "together). If it is attention: F.scaled_dot_product_attention with "
	               "is_causal=True, or with a boolean mask broadcast over the heads, runs a "
	               "fused kernel whose memory grows with T; a float mask expanded to batch x "
	               "heads x T x T is materialised whole (by the call, or by autocast casting "
	               "it) for every call that gets it. Otherwise, or as well, cap or bucket the "
	               "input length: "
	               "this tensor shrinks with its square.",
	               ad_sz(b1, req), ad_sz(b2, held), ad_pct(held + req, budget),
	               ad_sz(b3, budget));
	ad_suggest_text(c, "fused_attention",
	                (held + req) * 4 >= budget ? AD_PRIO_TARGETED : AD_PRIO_CAPACITY + 5,
	                "Keep the T x T tensor from being materialised: fused attention, or "
	                "shorter inputs",
	                "F.scaled_dot_product_attention(q, k, v, is_causal=True)  # or "
	                "attn_mask=bool_mask[:, None] (broadcast over heads), not a float mask "
	                ".expand(B, H, T, T)",
	                &t);
	return 1;
}

/* ---- predictions gathered on the device ---- */

int ad_rule_gathered_predictions(ad_ctx *c)
{
	const an_device *dv = c->dv;
	const md_device *md = md_find_device(c->s, dv->device);
	uint64_t held = 0, blocks = 0, req = 0;
	uint64_t budget = c->a->oom.limit ? c->a->oom.limit : dv->pool[AN_POOL_ALL].reserved;
	char b1[32], b2[32], b3[32];
	for (size_t i = 0; i < dv->site_count; i++) {
		uint32_t st = dv->sites[i].stack;
		if (st < c->s->stack_count && (c->info[st].flags & AN_SF_GATHER_PREDS)) {
			held += dv->sites[i].bytes;
			blocks += dv->sites[i].count;
		}
	}
	if (md && dv->oom.present && dv->oom.event < md->event_count) {
		uint32_t st = md->events[dv->oom.event].stack;
		if (st < c->s->stack_count && (c->info[st].flags & AN_SF_GATHER_PREDS))
			req = dv->oom.requested;
	}
	if (!budget || (held + req) * 4 < budget)
		return 0;
	ad_text t = {0};
	ad_text_printf(&t,
	               "The Trainer's evaluation loop keeps every eval batch's predictions (the "
	               "model's logits) on the GPU and concatenates them until the loop ends: %s "
	               "in %llu blocks",
	               ad_sz(b1, held), (unsigned long long)blocks);
	if (req)
		ad_text_printf(&t, ", and the failing %s request is their next concatenation",
		               ad_sz(b2, req));
	ad_text_printf(&t,
	               " (%d%% of %s). They grow with the eval set, not the batch: a smaller "
	               "per_device_eval_batch_size does not help. eval_accumulation_steps moves "
	               "them to the CPU every k steps; preprocess_logits_for_metrics keeps only "
	               "what the metric needs.",
	               ad_pct(held + req, budget), ad_sz(b3, budget));
	ad_suggest_text(c, "release_references", AD_PRIO_TARGETED,
	                "Move the gathered eval predictions off the GPU",
	                "TrainingArguments(eval_accumulation_steps=4)  # and/or "
	                "Trainer(preprocess_logits_for_metrics=lambda logits, labels: "
	                "logits.argmax(-1))",
	                &t);
	return 1;
}
