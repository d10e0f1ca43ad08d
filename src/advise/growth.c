/* growth.c: growth across real iterations, and segments released and taken again. */
#include "advise/growth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/units.h"

/* Growth that a generation's KV cache makes, one token at a time: expected. Iterations of a loop
 * around generate() are whole generations, each freeing its cache when it returns: what grows
 * from one to the next is what the caller keeps of them (a session's past_key_values). */
static int generation_growth(const ad_ctx *c, const an_growth_site *site)
{
	const an_structure *r = c->run;
	uint32_t flags = site && site->stack < c->s->stack_count ? c->info[site->stack].flags : 0;
	if ((r->flags_seen & AN_SF_GENERATE) && r->iter_source == AN_ITER_LOOP && !r->loop_decodes)
		return 0;
	return ad_run_kind(c) == AN_RUN_INFERENCE &&
	       ((flags & AN_SF_KV_CACHE) || (r->flags_seen & AN_SF_GENERATE));
}

/* What the growing stacks hold at the snapshot: of a truncated trace, the iterations before
 * its window too. An activation's stack is every forward's, the current one's too: of those,
 * what the window's iterations kept, and what the stack holds from before the window (the
 * window's whole iterations ran their backwards after it was made). 0 when it cannot be
 * counted. */
static uint64_t growing_stacks_live(const ad_ctx *c)
{
	const an_structure *r = c->run;
	uint64_t live = 0;
	uint8_t *grows = calloc(c->s->stack_count ? c->s->stack_count : 1, 1);
	if (!grows)
		return 0;
	for (size_t j = 0; j < r->growth_site_count; j++) {
		const an_growth_site *g = &r->growth_sites[j];
		if (g->stack >= c->s->stack_count ||
		    an_stack_category(c->info, g->stack, AN_CAT_GRADIENTS) == AN_CAT_ACTIVATIONS)
			live += g->total_bytes + g->before_window;
		else
			grows[g->stack] = 1;
	}
	for (size_t i = 0; i < c->dv->site_count; i++) {
		uint32_t st = c->dv->sites[i].stack;
		if (st != MD_NO_STACK && st < c->s->stack_count && grows[st])
			live += c->dv->sites[i].bytes;
	}
	free(grows);
	return live;
}

void ad_measure_growth(ad_ctx *c)
{
	const an_structure *r = c->run;
	uint64_t grown = r && r->growth_found ? r->growth_per_iteration * r->growth_increments : 0;
	if (grown && c->dv->truncated)
		grown = MR_MAX(grown, growing_stacks_live(c));
	c->a->growth_alive = grown;
}

uint64_t ad_leak_grown(const ad_ctx *c)
{
	return c->a->growth_alive;
}

int ad_leak_explains(const ad_ctx *c)
{
	const an_structure *r = c->run;
	if (!r || !r->growth_found ||
	    generation_growth(c, r->growth_site_count ? &r->growth_sites[0] : NULL))
		return 0;
	return ad_leak_grown(c) * 2 >= c->dv->pool[AN_POOL_ALL].allocated;
}

uint64_t ad_leak_rate(const ad_ctx *c)
{
	const an_structure *r = c->run;
	if (!r || !r->growth_found)
		return 0;
	return MR_MAX(r->peak_rise, r->growth_per_iteration);
}

/* What the growing sites hold from before a truncated trace's window (0 for a whole trace). */
static uint64_t before_window(const an_structure *r)
{
	uint64_t before = 0;
	for (size_t i = 0; i < r->growth_site_count; i++)
		before += r->growth_sites[i].before_window;
	return before;
}

/* The increments a leak has run: the window's, and of a truncated trace as many more as its
 * growing sites hold from before the window at its rate (that much had grown already). */
static size_t leak_increments(const ad_ctx *c)
{
	const an_structure *r = c->run;
	uint64_t before = before_window(r), rate = ad_leak_rate(c);
	return r->growth_increments + (rate ? (size_t)MR_MIN(before / rate, 1000) : 0);
}

int ad_leak_outgrows(const ad_ctx *c, uint64_t free_bytes)
{
	const an_structure *r = c->run;
	/* one increment is enough only beside what a truncated trace's sites hold from before */
	if (!r || !r->growth_found || r->growth_increments < (c->dv->truncated ? 1u : 2u) ||
	    leak_increments(c) < 3 || r->growth_positive * 4 < r->growth_increments * 3 ||
	    generation_growth(c, r->growth_site_count ? &r->growth_sites[0] : NULL))
		return 0;
	/* of a truncated trace, the window's increments are only the leak's last ones: what its
	 * growing stacks hold at the snapshot (ad_leak_grown) counts the earlier ones too */
	return free_bytes <= MR_MAX(ad_leak_rate(c) * r->growth_increments, ad_leak_grown(c));
}

uint64_t ad_carried_rate(const ad_ctx *c)
{
	const an_structure *r = c->run;
	if (!r || r->growth_found || !c->dv->truncated || r->start_count < 2 ||
	    ad_run_kind(c) != AN_RUN_TRAINING || r->carried_activations <= r->carried_before_window)
		return 0;
	uint64_t rate = (r->carried_activations - r->carried_before_window) / (r->start_count - 1);
	return r->carried_before_window >= rate ? rate : 0;
}

int ad_carried_outgrows(const ad_ctx *c, uint64_t free_bytes)
{
	return ad_carried_rate(c) && free_bytes <= c->run->carried_activations;
}

/* The bytes per iteration of the growing sites, of all of them and of those that are
 * parameters and optimizer state. */
typedef struct {
	uint64_t all, params, optimizer;
} state_split;

/* Whether a stack copies a tensor through copy.deepcopy (torch/_tensor.py's __deepcopy__). */
static int tensor_deepcopy(const ad_ctx *c, uint32_t stack)
{
	return ad_stack_has_frame(c->s, stack, "__deepcopy__", "torch/_tensor.py");
}

static state_split state_growth(const ad_ctx *c)
{
	const an_structure *r = c->run;
	state_split sp = {0};
	/* a deepcopy of tensors as large as the parameters, each iteration: copy.deepcopy of the
	 * model's state_dict(), the weights copied as plain tensors */
	uint64_t params = c->dv->categories[AN_CAT_PARAMETERS];
	/* growth in steps, each the parameters' size: a copy of the weights every few
	 * iterations, whatever made it ({k: v.clone() ...} of the state_dict, a deepcopy) */
	uint64_t step = r->growth_stepped ? r->growth_step_bytes : 0;
	int weight_steps = params && step * 10 >= params * 9 && step * 10 <= params * 11;
	for (size_t i = 0; i < r->growth_site_count; i++) {
		const an_growth_site *g = &r->growth_sites[i];
		uint32_t st = g->stack < c->s->stack_count ? g->stack : 0;
		int cat = an_stack_category(c->info, st, AN_CAT_GRADIENTS);
		uint64_t b = g->bytes_per_iteration;
		if (cat != AN_CAT_PARAMETERS && cat != AN_CAT_OPTIMIZER && params &&
		    ((b * 10 >= params * 9 && b * 10 <= params * 11 && tensor_deepcopy(c, st)) ||
		     weight_steps))
			cat = AN_CAT_PARAMETERS;
		sp.all += g->bytes_per_iteration;
		if (cat == AN_CAT_PARAMETERS)
			sp.params += g->bytes_per_iteration;
		else if (cat == AN_CAT_OPTIMIZER)
			sp.optimizer += g->bytes_per_iteration;
	}
	return sp;
}

/* " in steps of S about every k iterations" of stepped growth, else "". */
static const char *step_words(const an_structure *r, char *buf, size_t size)
{
	char b1[32];
	buf[0] = 0;
	if (r->growth_stepped)
		snprintf(buf, size, ", in steps of %s about every %zu iterations",
		         ad_sz(b1, r->growth_step_bytes), r->growth_step_every);
	return buf;
}

/* The change for copies of the model kept. */
#define ONE_COPY                                                                                   \
	"keep one copy and update it in place (an EMA: torch.optim.swa_utils.AveragedModel, or "   \
	"ema_p.lerp_(p, 1 - decay)); or keep the weights on the CPU: {k: v.detach().cpu() for k, " \
	"v in model.state_dict().items()}"

/* Most of the growth is parameters or optimizer state: new optimizers kept beside the old
 * (a list, a learning-rate scheduler holding its optimizer), copies of the model kept (a
 * deepcopy per evaluation), or modules built in the loop and kept by an optimizer
 * (add_param_group) with their state. A kind counts as the only one when the other grows
 * by less than an eighth of the whole. */
static int suggest_state_growth(ad_ctx *c)
{
	char b1[32], b2[32], steps[96];
	state_split sp = state_growth(c);
	uint64_t state = sp.params + sp.optimizer;
	if (!sp.all || state * 2 < sp.all)
		return 0;
	step_words(c->run, steps, sizeof steps);
	if (sp.params * 8 < sp.all)
		ad_suggest(
		    c, "release_references", AD_PRIO_TARGETED, "Keep one optimizer",
		    "build the optimizer once, before the loop; to restart it, clear its "
		    "state in place (opt.state.clear()) and make a new scheduler for the "
		    "same optimizer; or drop every reference to the old ones "
		    "(del old_opt, old_scheduler)",
		    "What grows is optimizer state (%s of the %s per iteration that stays "
		    "alive%s), not parameters: new optimizers are made for the same "
		    "parameters and the old ones stay referenced (a list, a learning-rate "
		    "scheduler that keeps its optimizer, a closure), each with its own state.",
		    ad_sz(b1, sp.optimizer), ad_sz(b2, sp.all), steps);
	else if (sp.optimizer * 8 < sp.all)
		ad_suggest(
		    c, "release_references", AD_PRIO_TARGETED, "Keep one copy of the model",
		    ONE_COPY,
		    "What grows is parameters with no optimizer state (%s of the %s per "
		    "iteration that stays alive%s): copies of the weights (copy.deepcopy(model) "
		    "or of its state_dict(), a new module) are made and kept, each the size of "
		    "the parameters.",
		    ad_sz(b1, sp.params), ad_sz(b2, sp.all), steps);
	else
		ad_suggest(
		    c, "release_references", AD_PRIO_TARGETED,
		    "Stop creating parameters every iteration",
		    "build the module once and reset it in place (module.reset_parameters()); "
		    "or drop the old ones from the optimizer: for p in old.parameters(): "
		    "opt.state.pop(p, None), and remove their param group",
		    "What grows is parameters and optimizer state (%s of the %s per iteration "
		    "that stays alive): each iteration makes new parameters, and the optimizer "
		    "keeps them and the old ones, with state for each.",
		    ad_sz(b1, state), ad_sz(b2, sp.all));
	return 1;
}

/* Whether a stack runs through a recurrent module's forward (nn.RNN, nn.LSTM, nn.GRU). */
static int in_recurrent_module(const ad_ctx *c, uint32_t stack)
{
	return ad_stack_has_frame(c->s, stack, "forward", "torch/nn/modules/rnn.py");
}

/* Whether the growing site's single block is made anew each iteration: the trace allocates at
 * that site, in most iterations, a block larger than any before it (the old one is freed once
 * the new one holds its contents), not pieces of the iteration's size that are kept. */
static int rebuilt_each_iteration(const ad_ctx *c, const an_growth_site *site)
{
	const md_device *md = md_find_device(c->s, c->dv->device);
	const an_structure *r = c->run;
	if (!md || r->start_count < 4)
		return 0;
	uint64_t largest = 0;
	size_t rises = 0;
	for (size_t i = 0; i < md->event_count; i++) {
		const md_event *e = &md->events[i];
		if (e->action != MD_ACT_ALLOC || e->stack != site->stack)
			continue;
		if (e->size > largest) {
			rises += largest != 0;
			largest = e->size;
		}
	}
	return rises * 2 >= r->start_count;
}

/* "S per iteration in N blocks now, is made at <the user's line>" of the largest growing site
 * (or "... made where no stack shows the user's line"). */
static void grower_words(ad_text *t, const ad_ctx *c, const an_growth_site *site)
{
	char b1[32];
	ad_text_printf(t, "%s per iteration in %zu blocks now, is made ",
	               ad_sz(b1, site->bytes_per_iteration), site->blocks);
	if (!an_user_frame(c->s, site->stack)) {
		ad_text_printf(t, "where no stack shows the user's line");
		return;
	}
	ad_text_printf(t, "at ");
	ad_user_site(t, c->s, site->stack);
}

/* Whether 1/den or more of what grows is at stacks with a frame of that name (any, when NULL)
 * in that path. */
static int grows_under(const ad_ctx *c, const char *name, const char *path, uint64_t den)
{
	const an_structure *r = c->run;
	uint64_t under = 0, all = 0;
	for (size_t i = 0; i < r->growth_site_count; i++) {
		all += r->growth_sites[i].total_bytes;
		if (ad_stack_has_frame(c->s, r->growth_sites[i].stack, name, path))
			under += r->growth_sites[i].total_bytes;
	}
	return under && under * den >= all;
}

/* Of a Lightning run, the evaluation hook (validation_step, test_step, predict_step, called
 * by the strategy) that made most of what grows: its outputs, kept by the module. NULL: none. */
static const char *lightning_hook_grows(const ad_ctx *c)
{
	static const char *const hooks[] = {"validation_step", "test_step", "predict_step"};
	if (!ad_framework(c, AN_FW_LIGHTNING))
		return NULL;
	for (size_t i = 0; i < sizeof hooks / sizeof *hooks; i++)
		if (grows_under(c, hooks[i], "strategies/strategy.py", 2))
			return hooks[i];
	return NULL;
}

/* What grows at a transformers KV cache's stack (cache_utils), in bytes per iteration. */
static uint64_t kv_cache_growth(const ad_ctx *c)
{
	const an_structure *r = c->run;
	uint64_t bytes = 0;
	for (size_t i = 0; i < r->growth_site_count; i++) {
		uint32_t st = r->growth_sites[i].stack;
		if (st < c->s->stack_count && (c->info[st].flags & AN_SF_KV_CACHE))
			bytes += r->growth_sites[i].bytes_per_iteration;
	}
	return bytes;
}

/* What the caller keeps of whole passes: an evaluation after training keeping every batch's
 * outputs, or generate()'s KV caches kept after it returns. 1 when it suggested. */
static int suggest_kept_outputs(ad_ctx *c, const an_growth_site *site)
{
	char b1[32], b2[32];
	uint64_t rate = c->run->growth_per_iteration;
	if (c->run->growth_in_tail && site) {
		ad_text t = {0};
		ad_text_printf(&t,
		               "The evaluation after training keeps %s from every batch until it "
		               "ends; the most, ",
		               ad_sz(b1, rate));
		grower_words(&t, c, site);
		ad_text_printf(&t, ". Reduced to what the metric needs as each batch ends (the "
		                   "predicted ids, the per-sample loss) or moved to the CPU, "
		                   "they leave the GPU to the next batch.");
		ad_suggest_text(c, "release_references", AD_PRIO_TARGETED + 1,
		                "Reduce each evaluation batch's outputs before keeping them",
		                "preds.append(logits.argmax(-1))  # not: preds.append(logits)\n"
		                "losses.append(loss.item())  # or .cpu() what must stay whole",
		                &t);
		return 1;
	}
	uint64_t kv = kv_cache_growth(c);
	if (kv * 2 >= rate && !generation_growth(c, site)) {
		/* a generation frees its cache when generate() returns, unless the caller keeps
		 * it: past_key_values stored for a session's next turn */
		ad_suggest(c, "release_references", AD_PRIO_TARGETED + 1,
		           "Bound the KV caches kept after generate() returns",
		           "sessions[sid] = out.past_key_values  # kept for the next turn\n"
		           "if len(sessions) > MAX_SESSIONS: sessions.pop(next(iter(sessions)))",
		           "Each iteration is a whole generate() call, and %s of the %s that "
		           "stays alive from one to the next is KV cache (transformers' "
		           "cache_utils): the caller keeps each generation's past_key_values "
		           "after it returns. Evict old ones (an LRU of a few sessions), move "
		           "idle ones to the CPU, or prefill again on the next turn.",
		           ad_sz(b1, kv), ad_sz(b2, rate));
		return 1;
	}
	return 0;
}

/* Of a Lightning run whose growth was made in an evaluation hook (lightning_hook_grows): clear
 * what the module keeps of its outputs. 1 when it suggested. */
static int suggest_hook_outputs(ad_ctx *c, const an_growth_site *site, uint64_t rate)
{
	char b1[32], change[160];
	const char *hook = lightning_hook_grows(c);
	if (!hook)
		return 0;
	/* validation_step's epoch ends in on_validation_epoch_end, test_step's in on_test_... */
	size_t stem = strlen(hook) - strlen("_step");
	snprintf(change, sizeof change,
	         "self.outputs.append(logits.argmax(-1).cpu())  # not: logits\n"
	         "self.outputs.clear()  # at the end of on_%.*s_epoch_end",
	         (int)stem, hook);
	ad_text t = {0};
	ad_text_printf(&t,
	               "Memory allocated in each iteration is still referenced later (%s per "
	               "iteration), and most of it was made in %s: the module keeps its outputs (a "
	               "list such as self.%s_outputs that the epoch-end hook reads) and never lets "
	               "them go. ",
	               ad_sz(b1, rate), hook, hook);
	if (site) {
		ad_text_printf(&t, "The most, ");
		grower_words(&t, c, site);
		ad_text_printf(&t, ". ");
	}
	ad_text_printf(&t, "Keep of each batch what the epoch-end hook needs (the argmax, a "
	                   "loss.item(), a detached CPU copy), not the logits, and clear the list "
	                   "when the epoch ends: what is kept then grows neither within an epoch "
	                   "nor across them.");
	ad_suggest_text(c, "release_references", AD_PRIO_TARGETED + 1,
	                "Keep less of each evaluation batch, and clear it at the epoch's end",
	                change, &t);
	return 1;
}

/* What keeps each iteration's memory: a recurrent state carried on with its graph, where the
 * largest grower is a recurrent module's output; otherwise tensors the loop keeps. */
static void suggest_kept(ad_ctx *c, const an_growth_site *site)
{
	char b1[32], b2[32];
	uint64_t rate = c->run->growth_per_iteration;
	if (site && in_recurrent_module(c, site->stack)) {
		ad_suggest(c, "release_references", AD_PRIO_TARGETED + 1,
		           "Detach the recurrent state carried to the next iteration",
		           "out, h = rnn(x, h)\nh = h.detach()  # an LSTM's (h, c): "
		           "h = tuple(t.detach() for t in h)",
		           "What grows most (%s of the %s per iteration) is made by a recurrent "
		           "module's forward (torch/nn/modules/rnn.py). If the loop passes its "
		           "hidden state on, that state keeps the graph that made it, and through "
		           "it every earlier iteration's; detached, only its values carry over.",
		           ad_sz(b1, site->bytes_per_iteration), ad_sz(b2, rate));
		return;
	}
	if (site && site->blocks == 1 && site->total_bytes >= 4 * site->bytes_per_iteration &&
	    rebuilt_each_iteration(c, site)) {
		ad_text t = {0};
		ad_text_printf(&t, "What grows is one tensor, made at ");
		if (!ad_user_site(&t, c->s, site->stack))
			ad_text_printf(&t, "a site with no stack recorded");
		ad_text_printf(
		    &t,
		    ": it is %s now in a single block, %s larger each iteration, so each "
		    "iteration makes it anew from the old one and a new piece "
		    "(torch.cat([buf, new]) or similar), and needs the old and the new "
		    "copy at once: the peak is twice what is kept. Appending the pieces to "
		    "a list and concatenating once at the end (or moving each piece to the "
		    "CPU, or writing into a buffer preallocated at the final size) holds "
		    "each piece once, with no copy of the whole per iteration.",
		    ad_sz(b1, site->total_bytes), ad_sz(b2, site->bytes_per_iteration));
		c->a->oom.rebuilt = 1;
		ad_suggest_text(
		    c, "release_references", AD_PRIO_TARGETED + 1,
		    "Collect the pieces in a list, not one tensor rebuilt each iteration",
		    "parts.append(f)  # or f.cpu(); not: buf = torch.cat([buf, f])\n"
		    "buf = torch.cat(parts)  # once, after the loop",
		    &t);
		return;
	}
	if (suggest_kept_outputs(c, site) || suggest_hook_outputs(c, site, rate))
		return;
	if (ad_run_kind(c) == AN_RUN_INFERENCE && site) {
		/* no graph to keep (an evaluation keeps its forwards' graphs): what each step
		 * keeps is its outputs, copied or stored */
		ad_text t = {0};
		ad_text_printf(&t,
		               "Memory allocated in each iteration is still referenced later (%s "
		               "per iteration); the most, ",
		               ad_sz(b1, rate));
		grower_words(&t, c, site);
		ad_text_printf(&t, ": a list (or a concatenation) of GPU tensors keeps every "
		                   "iteration's. Moved to the CPU as they are made, or kept for "
		                   "fewer iterations, they leave the GPU's memory to the work.");
		ad_suggest_text(c, "release_references", AD_PRIO_TARGETED + 1,
		                "Keep each iteration's outputs on the CPU, or fewer of them",
		                "kept.append(x.cpu())  # not: kept.append(x); or keep every k-th",
		                &t);
		return;
	}
	/* torchmetrics on the stacks of a real part of what grows: a metric's list state (the
	 * tensors passed to update() are made by the caller, so not all of it); a logged
	 * scalar's few bytes, as Lightning's self.log keeps in a torchmetrics state, are not */
	int metric = grows_under(c, NULL, "torchmetrics/", 8);
	ad_text t = {0};
	ad_text_printf(&t,
	               "Memory allocated in each iteration is still referenced later (%s per "
	               "iteration)",
	               ad_sz(b1, rate));
	ad_text_printf(&t, metric ? ", and torchmetrics is on the stacks of what grows: a metric "
	                            "whose state is a list of every update's inputs (the curve "
	                            "metrics such as AUROC, ROC or AveragePrecision with "
	                            "thresholds=None, CatMetric, the retrieval metrics) keeps them "
	                            "all on the GPU until reset(), the tensors passed to update() "
	                            "included."
	                          : ": a list or a sum of GPU tensors keeps them, and their "
	                            "autograd graphs when they require grad.");
	if (site && an_user_frame(c->s, site->stack)) {
		ad_text_printf(&t, " The most, ");
		grower_words(&t, c, site);
		ad_text_printf(&t, ".");
	}
	if (metric)
		ad_suggest_text(c, "release_references", AD_PRIO_TARGETED + 1,
		                "Give the metric a fixed-size state, or keep it off the GPU",
		                "BinaryAUROC(thresholds=200)  # binned: constant memory\n"
		                "metric = MyMetric(compute_on_cpu=True)  # or metric.reset() "
		                "after each compute()",
		                &t);
	else
		ad_suggest_text(
		    c, "release_references", AD_PRIO_TARGETED + 1,
		    "Keep numbers, not tensors, from each iteration",
		    "total += loss.item()   # not: total += loss\n"
		    "history.append(logits.detach().cpu())  # not: history.append(logits)",
		    &t);
}

void ad_rule_growth(ad_ctx *c)
{
	const an_structure *r = c->run;
	char b1[32], b2[32], b3[32];
	if (r && !r->growth_found && r->growth_bounded)
		ad_note(c, "bounded_growth", AD_INFO,
		        "Live memory at the iterations' starts rose %s over the first %zu of %zu "
		        "iterations, then stayed flat for the last %zu: something filled up to a "
		        "bound (a deque with a maxlen, a fixed-size buffer or cache) and stopped "
		        "there. It is not a leak: a leak keeps adding to the end.",
		        ad_sz(b1, r->growth_bounded_bytes),
		        r->growth_increments - r->growth_bounded, r->growth_increments,
		        r->growth_bounded);
	if (!r || !r->growth_found)
		return;
	const an_growth_site *site = r->growth_site_count ? &r->growth_sites[0] : NULL;
	uint64_t total = r->growth_per_iteration * r->growth_increments;
	ad_text t = {0};
	if (generation_growth(c, site)) {
		ad_text_printf(
		    &t,
		    "While generating, live memory grows %s per step (%s over %zu step%s): "
		    "the KV cache keeps every token of every sequence",
		    ad_sz(b1, r->growth_per_iteration), ad_sz(b2, total), r->growth_increments,
		    r->growth_increments == 1 ? "" : "s");
		if (site) {
			ad_text_printf(&t, ", allocated in ");
			ad_user_site(&t, c->s, site->stack);
		}
		ad_text_printf(&t, ". It is expected, not a leak: it is what fills the memory.");
		ad_note_text(c, "memory_growth", AD_INFO, &t);
		return;
	}
	uint64_t allocated = c->dv->pool[AN_POOL_ALL].allocated;
	if (r->growth_in_tail)
		ad_text_printf(&t,
		               "After the training's last backward and optimizer step, a loop "
		               "over %zu batches (an evaluation) grows live memory %s a batch and "
		               "does not release it: at the start of %zu of %zu batches it was "
		               "higher than the one before (%s in all).",
		               r->growth_tail_batches, ad_sz(b1, r->growth_per_iteration),
		               r->growth_positive, r->growth_increments, ad_sz(b2, total));
	else if (r->growth_stepped)
		ad_text_printf(
		    &t,
		    "Live memory grows in steps of %s, about every %zu iterations, and is "
		    "not released: it rose at the start of %zu of %zu iterations and "
		    "stayed (%s in all, %s per iteration on average).",
		    ad_sz(b1, r->growth_step_bytes), r->growth_step_every, r->growth_positive,
		    r->growth_increments, ad_sz(b2, total), ad_sz(b3, r->growth_per_iteration));
	else if (r->growth_increments == 1) /* of a truncated trace (read_growth_short) */
		ad_text_printf(&t,
		               "Live memory grows %s per iteration and is not released: the "
		               "trace's one whole iteration ended with that much more live than it "
		               "began, on lines that hold %s more from before the trace, still "
		               "alive.",
		               ad_sz(b1, r->growth_per_iteration), ad_sz(b2, before_window(r)));
	else
		ad_text_printf(&t,
		               "Live memory grows %s per iteration and is not released: at the "
		               "start of %zu of %zu iterations it was higher than the one before "
		               "(%s in all).",
		               ad_sz(b1, r->growth_per_iteration), r->growth_positive,
		               r->growth_increments, ad_sz(b2, total));
	uint64_t grown = ad_leak_grown(c);
	if (grown > total && r->growth_increments > 1)
		ad_text_printf(&t,
		               " The trace holds only the last iterations: what the growing sites "
		               "allocated is %s at the snapshot, earlier iterations' included.",
		               ad_sz(b1, grown));
	if (site && an_user_frame(c->s, site->stack)) {
		ad_text_printf(&t, " The largest grower is ");
		ad_user_site(&t, c->s, site->stack);
		ad_text_printf(&t, ", %s per iteration still alive.",
		               ad_sz(b3, site->bytes_per_iteration));
	}
	ad_note_text(c, "memory_growth", grown * 4 >= allocated ? AD_CRITICAL : AD_WARNING, &t);
	if (ad_run_kind(c) == AN_RUN_EVALUATION)
		ad_suggest(
		    c, "no_grad_eval", AD_PRIO_TARGETED, "Evaluate under torch.no_grad()",
		    "with torch.no_grad():  # or @torch.inference_mode()\n    out = model(x)",
		    "No backward runs, yet every iteration's forward keeps its autograd graph "
		    "alive through the tensors the loop keeps: %s per iteration.",
		    ad_sz(b1, r->growth_per_iteration));
	ad_rule_summed_losses(c, r->growth_per_iteration);
	if (!suggest_state_growth(c))
		suggest_kept(c, site);
}

void ad_rule_summed_losses(ad_ctx *c, uint64_t per_forward)
{
	char b1[32];
	if (!c->run || c->run->evidence != AN_KIND_GRAPH_LOSSES)
		return;
	ad_suggest(c, "backward_per_microbatch", AD_PRIO_TARGETED,
	           "If these are a training step's microbatches: a backward for each one",
	           "(model(x, labels=y).loss / accum_steps).backward()\n"
	           "# not: total = total + loss, then total.backward() once",
	           "Each forward keeps its autograd graph (%s) until a backward uses it. Adding "
	           "up the losses of several microbatches and calling backward once keeps all "
	           "their graphs alive together; a backward per microbatch frees each graph as "
	           "it goes and accumulates the same gradients.",
	           ad_sz(b1, per_forward));
}

int ad_rule_carried(ad_ctx *c)
{
	const an_structure *r = c->run;
	uint64_t live = c->dv->pool[AN_POOL_ALL].allocated;
	char b1[32], b2[32];
	if (!r || ad_run_kind(c) != AN_RUN_TRAINING || r->growth_found || !live ||
	    r->carried_activations * 4 < live)
		return 0;
	ad_text t = {0};
	ad_text_printf(&t,
	               "%s of the %s live (%d%%) are activations that an earlier iteration's "
	               "forward allocated and that its backward did not free",
	               ad_sz(b1, r->carried_activations), ad_sz(b2, live),
	               ad_pct(r->carried_activations, live));
	if (an_user_frame(c->s, r->carried_stack)) {
		ad_text_printf(&t, ", the most from ");
		ad_user_site(&t, c->s, r->carried_stack);
	}
	ad_text_printf(&t,
	               ". A backward frees what its forward saved, so something still holds the "
	               "previous step's graph or outputs: loss.backward(retain_graph=True), "
	               "torch.autograd.grad(..., create_graph=True) (higher-order gradients "
	               "keep each pass's graph until the outer backward), a loss or output "
	               "tensor kept across steps, or a cache. The step itself needs less than "
	               "the memory it failed in.");
	ad_note_text(c, "activations_carried", AD_CRITICAL, &t);
	ad_suggest(c, "release_references", AD_PRIO_TARGETED,
	           "Free the previous step's graph before the next forward",
	           "loss.backward()  # not retain_graph=True, unless a second backward needs it\n"
	           "del loss, logits  # or keep loss.item(), before the next step's forward\n"
	           "# higher-order (create_graph=True): fewer inner passes, or first-order",
	           "%s of activations from earlier iterations are still alive when this one "
	           "runs out of memory; released, the step has that much more room.",
	           ad_sz(b1, r->carried_activations));
	/* given back within the trace by an outer step (higher-order passes): what it needs */
	return r->carried_activations * 2 >= live && !r->growth_released ? 2 : 1;
}

/* Whether, at a training run's OOM with no growth found, bytes still held (by something the
 * step no longer needs) are at least what the failing request lacked (*lacked) and a tenth of
 * live memory. */
static int holds_what_lacked(const ad_ctx *c, uint64_t bytes, uint64_t *lacked)
{
	const an_oom *o = &c->dv->oom;
	uint64_t live = c->dv->pool[AN_POOL_ALL].allocated;
	if (!c->run || !o->present || ad_run_kind(c) != AN_RUN_TRAINING || c->run->growth_found ||
	    !live || !bytes)
		return 0;
	*lacked = o->requested > o->usable_free ? o->requested - o->usable_free : 0;
	return bytes >= *lacked && bytes * 10 >= live;
}

int ad_rule_held(ad_ctx *c)
{
	const an_structure *r = c->run;
	uint64_t live = c->dv->pool[AN_POOL_ALL].allocated, lacked;
	char b1[32], b2[32], b3[32];
	if (!r || !holds_what_lacked(c, r->held_activations, &lacked))
		return 0;
	ad_note(c, "activations_held_over", AD_WARNING,
	        "When iteration %zu of the trace began, %s of activations that the previous "
	        "iteration's forward allocated were still alive (the OOM lacked %s, with %s "
	        "live): the backward and the optimizer step had run, so something outside "
	        "autograd held them: forward hooks that store module outputs (features[name] = "
	        "out), an output, logits or loss tensor kept in a variable or attribute until "
	        "the next step replaces it. The next forward replaces them only as it goes, "
	        "and the same references keep this step's outputs alive beyond what the "
	        "backward needs.",
	        r->held_iteration + 1, ad_sz(b1, r->held_activations), ad_sz(b2, lacked),
	        ad_sz(b3, live));
	ad_suggest(c, "release_references", AD_PRIO_TARGETED,
	           "Keep the step's outputs detached, or drop them before the next step",
	           "features[name] = out.detach()  # in a forward hook; or .cpu(), or "
	           "handle.remove() when not needed\n"
	           "loss_value = loss.item(); del out, loss  # before the next forward",
	           "%s of the previous step's forward outputs were still alive when the next "
	           "step began, more than the %s the failing request lacked. Detached (or "
	           "moved to the CPU), kept outputs hold no autograd graph and free the "
	           "memory autograd would have freed; a smaller batch only comes after.",
	           ad_sz(b1, r->held_activations), ad_sz(b2, lacked));
	return 1;
}

/* Appends ", whose first allocation was in <user site>," when the stack has a user frame. */
static void first_allocation_at(ad_text *t, const md_snapshot *s, uint32_t stack)
{
	if (!an_user_frame(s, stack))
		return;
	ad_text_printf(t, ", whose first allocation was in ");
	ad_user_site(t, s, stack);
	ad_text_printf(t, ",");
}

int ad_rule_graph_in_eval(ad_ctx *c)
{
	const an_structure *r = c->run;
	uint64_t live = c->dv->pool[AN_POOL_ALL].allocated, lacked;
	char b1[32], b2[32], b3[32];
	if (!r || !holds_what_lacked(c, r->graph_held_at_oom, &lacked))
		return 0;
	ad_text t = {0};
	ad_text_printf(&t,
	               "The pass that failed saved nothing for a backward (an evaluation, or a "
	               "no_grad model the loss needs: a teacher, a reference model), and it ran "
	               "while a training forward's graph was alive: that forward");
	first_allocation_at(&t, c->s, r->graph_held_stack);
	ad_text_printf(&t,
	               " kept its layers' tensors for a backward that had not run yet, and %s "
	               "of them were still live at the OOM (the request lacked %s, with %s "
	               "live). The pass pays for the training step's graph on top of its own "
	               "batch.",
	               ad_sz(b1, r->graph_held_at_oom), ad_sz(b2, lacked), ad_sz(b3, live));
	ad_note_text(c, "graph_held_in_eval", AD_WARNING, &t);
	ad_suggest(c, "release_references", AD_PRIO_TARGETED,
	           "Run the no_grad pass outside the training step's graph",
	           "loss.backward(); optimizer.step(); optimizer.zero_grad()\n"
	           "loss_value = loss.item(); del loss, logits\n"
	           "evaluate(model)  # an evaluation: after the step, nothing of it is left\n"
	           "# a pass the loss needs (teacher, reference model): before the training "
	           "forward",
	           "%s of the training forward's graph were alive during this pass, more than "
	           "the %s the failing request lacked. After the backward (or before the "
	           "training forward) they are not there, and the pass has that much more room; "
	           "a smaller batch only comes after.",
	           ad_sz(b1, r->graph_held_at_oom), ad_sz(b2, lacked));
	return 1;
}

int ad_rule_model_copies(ad_ctx *c)
{
	char b1[32], b2[32], b3[32];
	const md_snapshot *s = c->s;
	uint64_t copies = 0, live = c->dv->pool[AN_POOL_ALL].allocated;
	uint64_t params = c->dv->categories[AN_CAT_PARAMETERS];
	if (c->run && c->run->growth_found)
		return 0; /* the growth says what is kept */
	for (size_t i = 0; i < s->segment_count; i++) {
		const md_segment *seg = &s->segments[i];
		for (size_t j = 0; seg->device == c->dv->device && j < seg->block_count; j++) {
			const md_block *b = &s->blocks[seg->first_block + j];
			if (b->state == MD_BLOCK_ACTIVE_ALLOCATED && b->stack != MD_NO_STACK &&
			    (ad_stack_has_frame(s, b->stack, "__deepcopy__",
			                        "torch/nn/parameter.py") ||
			     tensor_deepcopy(c, b->stack)))
				copies += b->size;
		}
	}
	/* the model itself: the parameters no deepcopy made (a copy may be counted among the
	 * parameters or not, by its stack) */
	uint64_t model = params > copies ? params - copies : 0;
	/* copies trained beside the model (an ensemble made by deepcopy) have gradients and
	 * optimizer state of their own: as much as all the weights, or more */
	uint64_t trained =
	    c->dv->categories[AN_CAT_GRADIENTS] + c->dv->categories[AN_CAT_OPTIMIZER];
	if (!model || copies < 2 * model || copies * 4 < live || trained >= copies + model)
		return 0;
	ad_note(c, "model_copies_kept", AD_CRITICAL,
	        "%s of the %s live is tensors made by copy.deepcopy, %.1f times the model's own "
	        "parameters (%s): copies of the model (or of its state_dict) are kept, one more "
	        "with each deepcopy (a list of copies per evaluation, checkpoints held in memory, "
	        "an EMA made anew).",
	        ad_sz(b1, copies), ad_sz(b2, live), (double)copies / (double)model,
	        ad_sz(b3, model));
	ad_suggest(c, "release_references", AD_PRIO_TARGETED, "Keep one copy of the model",
	           ONE_COPY,
	           "The copies hold %s, more than the model (%s) itself: with one copy kept, or "
	           "the kept weights on the CPU, that memory is the work's.",
	           ad_sz(b1, copies), ad_sz(b2, model));
	return copies * 2 >= live ? 2 : 1;
}

int ad_rule_checkpoint_skipped(ad_ctx *c)
{
	const an_structure *r = c->run;
	if (!r || !r->checkpoint_skipped || ad_run_kind(c) != AN_RUN_TRAINING)
		return 0;
	ad_note(c, "checkpointing_inactive", AD_CRITICAL,
	        "The forward at the OOM checkpointed nothing, though its layers ran under "
	        "torch.utils.checkpoint earlier in the trace (in earlier forwards of this model "
	        "call, or recomputed in a backward): it is saving every layer's activations. "
	        "Checkpointing is enabled and not running; the batch that fitted with it no "
	        "longer fits without it.");
	ad_suggest(c, "restore_checkpointing", AD_PRIO_TARGETED,
	           "Put the model back in training mode after evaluating",
	           "model.eval(); evaluate(model)\n"
	           "model.train()  # Hugging Face layers checkpoint only while training",
	           "The forward that ran out of memory ran without the checkpointing its layers "
	           "had before. Hugging Face models (GradientCheckpointingLayer) "
	           "checkpoint only while self.training: a model.eval() for an evaluation, "
	           "with no model.train() after it, silently turns checkpointing off (so does "
	           "gradient_checkpointing_disable(), or a code path that calls the layers "
	           "directly). Restored, the step needs what the earlier steps did.");
	return 1;
}

int ad_rule_nograd_held(ad_ctx *c)
{
	const an_structure *r = c->run;
	uint64_t live = c->dv->pool[AN_POOL_ALL].allocated, lacked;
	char b1[32], b2[32], b3[32];
	if (!r || !holds_what_lacked(c, r->nograd_held_at_oom, &lacked))
		return 0;
	ad_text t = {0};
	ad_text_printf(&t, "An occasional pass that saved nothing for a backward (an evaluation "
	                   "under no_grad, run after several training steps)");
	first_allocation_at(&t, c->s, r->nograd_held_stack);
	ad_text_printf(&t,
	               " finished before the training step that failed, yet %s of what it "
	               "allocated was still live at the OOM (the request lacked %s, with %s "
	               "live): its outputs, kept by a variable that outlived the pass (outputs, "
	               "logits or predictions of its last batch), which training now pays for "
	               "on top of its own step.",
	               ad_sz(b1, r->nograd_held_at_oom), ad_sz(b2, lacked), ad_sz(b3, live));
	ad_note_text(c, "nograd_outputs_held", AD_WARNING, &t);
	ad_suggest(c, "release_references", AD_PRIO_TARGETED,
	           "Drop the evaluation's outputs before training resumes",
	           "outputs = model(batch); metric.update(outputs.logits.argmax(-1))\n"
	           "del outputs  # after the evaluation loop; or run it in a function of its "
	           "own, whose locals go when it returns",
	           "%s of the evaluation's last outputs were still alive in the training step "
	           "that failed, more than the %s the failing request lacked. Deleted after the "
	           "evaluation (or kept as Python numbers, or on the CPU), they leave training "
	           "the room it had before; a smaller batch only comes after.",
	           ad_sz(b1, r->nograd_held_at_oom), ad_sz(b2, lacked));
	return 1;
}

/* cudaMalloc retries from a memory_stats() dump or the last memory_summary() table, the one
 * retry each OOM makes taken out; -1 when neither says. */
static long text_retries(const ad_ctx *c)
{
	uint64_t retries, ooms = 0;
	if (c->ev->has_stats && ev_stats_get(&c->ev->stats, "num_alloc_retries", &retries)) {
		ev_stats_get(&c->ev->stats, "num_ooms", &ooms);
		return retries > ooms ? (long)(retries - ooms) : 0;
	}
	for (size_t i = c->ev->text.summary_count; i-- > 0;) {
		const ev_summary *sm = &c->ev->text.summaries[i];
		if (sm->num_alloc_retries >= 0) {
			int oom_retries = sm->num_ooms > 0 ? sm->num_ooms : 0;
			return sm->num_alloc_retries > oom_retries
			           ? sm->num_alloc_retries - oom_retries
			           : 0;
		}
	}
	return -1;
}

int ad_retried(const ad_ctx *c)
{
	return (c->run && c->run->retry_releases) || text_retries(c) > 0;
}

/* Whether the call of torch.cuda.empty_cache() in stack is a library's (a framework's
 * teardown between fits, a package's helper): the Python frame that calls it is in an installed
 * package, so there is no line of the user's to delete. */
static int empty_cache_by_library(const md_snapshot *s, uint32_t stack)
{
	if (stack >= s->stack_count)
		return 0;
	const md_stack *st = &s->stacks[stack];
	int below = 0; /* the empty_cache frame itself was passed */
	for (uint32_t k = 0; k < st->count; k++) {
		const md_frame *f = &s->frames[st->first + k];
		const char *file = md_str(s, f->filename);
		size_t n = strlen(file);
		if (an_frame_hidden(s, f) || n < 3 || strcmp(file + n - 3, ".py") != 0)
			continue;
		if (below)
			return an_library_file(file) && !an_torch_internal(file);
		below = strcmp(md_str(s, f->name), "empty_cache") == 0 && an_torch_internal(file);
	}
	return 0;
}

void ad_rule_releases(ad_ctx *c)
{
	const an_structure *r = c->run;
	char b1[32];
	long from_text = text_retries(c);
	size_t retries = r ? r->retry_releases : 0;
	const md_settings *cfg = &c->s->settings;
	int reclaims = cfg->gc_threshold > 0 ||
	               (cfg->max_split_size != UINT64_MAX && cfg->max_split_size != 0);
	/* garbage_collection_threshold frees cached blocks before cudaMalloc whenever reserved
	 * memory passes its share of the fraction, and max_split_size_mb frees cached oversize
	 * blocks to fit a request: neither is the full flush of a failed cudaMalloc, which the
	 * allocator's own counter (num_alloc_retries) counts. With one of them set and the
	 * counter known, the trace's releases beyond it are that reclaiming, not retries. */
	int reclaimed = reclaims && from_text >= 0 && (size_t)from_text < retries;
	if (reclaimed) {
		if (r)
			ad_note(c, "allocator_reclaim", AD_INFO,
			        "The trace shows %zu releases of cached segments (%s) that the "
			        "allocator's cudaMalloc-retry counter does not count (%ld): %s "
			        "reclaiming cached blocks as the settings ask, not failed "
			        "allocations.",
			        retries, ad_sz(b1, r->retry_bytes), from_text,
			        cfg->gc_threshold > 0 ? "garbage_collection_threshold"
			                              : "max_split_size_mb");
		retries = (size_t)from_text;
	} else if (cfg->gc_threshold > 0 && from_text < 0 && retries) {
		/* without the counter the trace cannot tell the threshold's reclaiming from the
		 * flush of a failed cudaMalloc: both release cached segments before an allocation
		 */
		ad_note(
		    c, "allocator_reclaim", AD_INFO,
		    "The trace shows %zu releases of cached segments (%s) that no "
		    "empty_cache() made. With garbage_collection_threshold set they may be its "
		    "reclaiming of cached blocks as reserved memory passes the threshold rather "
		    "than retries of failed cudaMallocs; the trace cannot tell them apart, and "
		    "memory_stats()'s num_alloc_retries would.",
		    retries, ad_sz(b1, r->retry_bytes));
		retries = 0;
		reclaimed = 1;
	}
	if (from_text > (long)retries)
		retries = (size_t)from_text;
	/* what was freed is known only from the trace's own flushes; the counters of
	 * memory_stats() or memory_summary() cover the whole process */
	char seen[96];
	if (r && r->retry_releases && !reclaimed)
		snprintf(seen, sizeof seen, "%s seen in the trace", ad_sz(b1, r->retry_bytes));
	else
		snprintf(seen, sizeof seen, "from the allocator's statistics; %s",
		         r && reclaimed ? "the trace does not tell these flushes apart"
		         : r            ? "the trace holds none of these flushes"
		                        : "with no trace, how much is not known");
	if (retries)
		ad_note(c, "allocator_retries", AD_WARNING,
		        "cudaMalloc failed %zu time%s and the allocator freed its cached segments "
		        "(%s) to retry: the run lives at the edge of its memory, and each flush "
		        "synchronises the device. What it gave back were blocks cached for sizes "
		        "this request could not use (varying shapes, or memory an earlier phase "
		        "cached).",
		        retries, retries == 1 ? "" : "s", seen);
	/* a release the trace ends after, of the same call, counts toward the loop's pattern */
	size_t calls = r ? r->empty_cache_releases + (size_t)r->empty_cache_last : 0;
	if (!r || calls < 2 || (r->start_count && calls * 2 < r->start_count) ||
	    empty_cache_by_library(c->s, r->empty_cache_stack))
		return;
	ad_text t = {0};
	ad_text_printf(&t,
	               "torch.cuda.empty_cache() gave segments back to CUDA %zu time%s inside the "
	               "loop (%s, about %zu per iteration) and the allocator asked for them again: "
	               "every cudaFree and cudaMalloc synchronises the device, and the next "
	               "iteration needs the memory anyway.",
	               r->empty_cache_releases, r->empty_cache_releases == 1 ? "" : "s",
	               ad_sz(b1, r->empty_cache_bytes),
	               r->start_count
	                   ? (r->empty_cache_releases + r->start_count / 2) / r->start_count
	                   : r->empty_cache_releases);
	ad_note_text(c, "empty_cache_churn", AD_WARNING, &t);
	ad_text w = {0};
	ad_text_printf(&w, "It frees nothing the next iteration does not allocate again");
	if (an_user_frame(c->s, r->empty_cache_stack)) {
		ad_text_printf(&w, "; it is called from ");
		ad_user_site(&w, c->s, r->empty_cache_stack);
	}
	ad_text_printf(&w, ". The allocator reuses its cache by itself; empty_cache() only helps "
	                   "another process that needs the memory.");
	ad_suggest_text(c, "remove_empty_cache", AD_PRIO_TARGETED,
	                "Remove torch.cuda.empty_cache() from the loop",
	                "# delete: torch.cuda.empty_cache()", &w);
}
