/* rules.c: findings and ranked recommendations.
 *
 * The order follows the guides users learn from: measure first; when live tensors fill the
 * card shrink the working set (microbatch with accumulation, checkpointing, mixed precision)
 * or shard and offload when the model state itself does not fit; touch the allocator
 * (expandable_segments, then max_split_size_mb) only when the numbers show fragmentation;
 * empty_cache() is never the fix. Every rule reads numbers; none reads a file name. */
#include "advise/rules.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "advise/verdict.h"
#include "base/buf.h"
#include "base/mem.h"
#include "base/units.h"
#include "decode/oom_message.h"
#include "decode/text.h"

/* Thresholds, with why. */
enum {
	/* Free cached memory is a "real share" of the budget when it is at least 10% of it: below
	 * that, fixing fragmentation would only delay an OOM that capacity makes inevitable. */
	FRAG_SHARE_PERCENT = 10,
	/* Reserved above allocated at the peak, as a share of peak reserved, that is worth an
	 * allocator change; and the least absolute amount. */
	HIGH_FRAG_PERCENT = 15,
};
#define HIGH_FRAG_MIN_BYTES (256 * MR_MIB)
#define GROWTH_MIN_BYTES (1 * MR_MIB)

typedef struct {
	ad_advice *a;
	const ld_evidence *ev;
	const md_snapshot *s;
	const an_device *dv; /* the device diagnosed; NULL without a snapshot */
	int failed;
	int *rec_priority; /* parallel to a->recs while collecting */
	size_t prio_cap;
} ctx;

static void finding_text(ctx *c, const char *id, ad_severity sev, ad_text *t)
{
	if (ad_add_finding(c->a, id, sev, t))
		c->failed = 1;
}

static void finding(ctx *c, const char *id, ad_severity sev, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void finding(ctx *c, const char *id, ad_severity sev, const char *fmt, ...)
{
	ad_text t = {0};
	va_list ap;
	va_start(ap, fmt);
	mr_buf_vprintf(&t.b, fmt, ap);
	va_end(ap);
	finding_text(c, id, sev, &t);
}

/* Adds a recommendation; a lower priority ranks first. An id already present keeps the better
 * priority and its first reason. */
static void recommend_text(ctx *c, const char *id, int priority, const char *title,
                           const char *change, ad_text *t)
{
	ad_advice *a = c->a;
	for (size_t i = 0; i < a->rec_count; i++)
		if (strcmp(a->recs[i].id, id) == 0) {
			if (priority < c->rec_priority[i])
				c->rec_priority[i] = priority;
			ad_text_free(t);
			return;
		}
	if (MR_GROW(c->rec_priority, c->prio_cap, a->rec_count + 1) ||
	    ad_add_rec(a, id, title, change, t)) {
		ad_text_free(t);
		c->failed = 1;
		return;
	}
	c->rec_priority[a->rec_count - 1] = priority;
}

static void recommend(ctx *c, const char *id, int priority, const char *title, const char *change,
                      const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void recommend(ctx *c, const char *id, int priority, const char *title, const char *change,
                      const char *fmt, ...)
{
	ad_text t = {0};
	va_list ap;
	va_start(ap, fmt);
	mr_buf_vprintf(&t.b, fmt, ap);
	va_end(ap);
	recommend_text(c, id, priority, title, change, &t);
}

static void rank(ctx *c)
{
	ad_advice *a = c->a;
	/* insertion sort: a handful of items, stable */
	for (size_t i = 1; i < a->rec_count; i++) {
		ad_recommendation r = a->recs[i];
		int p = c->rec_priority[i];
		size_t j = i;
		while (j > 0 && c->rec_priority[j - 1] > p) {
			a->recs[j] = a->recs[j - 1];
			c->rec_priority[j] = c->rec_priority[j - 1];
			j--;
		}
		a->recs[j] = r;
		c->rec_priority[j] = p;
	}
	for (size_t i = 0; i < a->rec_count; i++)
		a->recs[i].rank = (int)i + 1;
}

static const char *sz(char *buf, uint64_t v)
{
	mr_format_bytes(buf, 32, v);
	return buf;
}

/* The device to diagnose: the one asked for (--device), else the one that ran out of memory,
 * else the one with most reserved. */
static const an_device *primary_device(const an_result *an, int32_t wanted)
{
	const an_device *best = NULL;
	for (size_t i = 0; i < an->device_count; i++) {
		const an_device *d = &an->devices[i];
		if (wanted >= 0) {
			if (d->device == wanted)
				return d;
			continue;
		}
		if (d->oom.present &&
		    (!best || !best->oom.present || d->oom.event > best->oom.event))
			best = d;
		else if (!best || (!best->oom.present && d->pool[AN_POOL_ALL].reserved >
		                                             best->pool[AN_POOL_ALL].reserved))
			best = d;
	}
	return best;
}

static int settings_expandable(const ctx *c)
{
	return c->s->settings.expandable_segments || (c->dv && c->dv->expandable);
}

static int settings_max_split(const ctx *c)
{
	uint64_t m = c->s->settings.max_split_size;
	return m != UINT64_MAX && m != 0;
}

/* A cap below the card (set_per_process_memory_fraction) shows as an OOM while the device
 * still had room for the segment. */
static int fraction_in_effect(const ctx *c)
{
	const an_oom *o = &c->dv->oom;
	return o->present && o->device_free > o->alloc_size;
}

/* The user-code function whose forward holds the most activation bytes: where to checkpoint.
 * NULL when there is none; *bytes is what it holds. */
static const md_frame *checkpoint_target(const ctx *c, uint64_t *bytes_out)
{
	const md_snapshot *s = c->s;
	const an_device *dv = c->dv;
	uint64_t best_bytes = 0;
	const md_frame *best = NULL;
	for (size_t i = 0; i < dv->site_count; i++) {
		const an_site *site = &dv->sites[i];
		if (an_category(s, site->stack, s->has_history) != AN_CAT_ACTIVATIONS)
			continue;
		const md_stack *st = &s->stacks[site->stack];
		/* innermost forward frame outside torch itself */
		for (size_t k = 0; k < st->count; k++) {
			const md_frame *f = &s->frames[st->first + k];
			const char *file = md_str(s, f->filename);
			if (strcmp(md_str(s, f->name), "forward") != 0 || strstr(file, "torch/") ||
			    strstr(file, "torch\\"))
				continue;
			/* sum every site sharing this frame's function and file */
			uint64_t bytes = 0;
			for (size_t j = 0; j < dv->site_count; j++) {
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

/* Appends "name (file:line)" of the user's own line that allocated a stack's memory, the file
 * marked as a path. Returns 0 (and appends nothing) when the stack has no such frame. */
static int user_site(ad_text *t, const md_snapshot *s, uint32_t stack)
{
	const md_frame *f = an_user_frame(s, stack);
	if (!f)
		return 0;
	ad_text_printf(t, "%s (", md_str(s, f->name));
	ad_text_path(t, md_str(s, f->filename));
	ad_text_printf(t, ":%d)", f->line);
	return 1;
}

static void advise_capacity(ctx *c, const uint64_t *cat, int oom)
{
	char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
	uint64_t live = ad_live_total(cat);
	uint64_t state = cat[AN_CAT_PARAMETERS] + cat[AN_CAT_GRADIENTS] + cat[AN_CAT_OPTIMIZER];
	uint64_t acts = cat[AN_CAT_ACTIVATIONS];
	if (!live)
		return;
	if (ad_pct(state, live) >= AD_DOMINANT_PERCENT) {
		recommend(
		    c, "fsdp", 10, "Shard parameters, gradients and optimizer state (FSDP)",
		    "model = torch.distributed.fsdp.FullyShardedDataParallel(model)  # or "
		    "fully_shard(model) in torch>=2.4",
		    "Parameters (%s), gradients (%s) and optimizer state (%s) are %d%% of live "
		    "memory; each GPU holds all of it. Sharded over 4 GPUs each keeps about %s "
		    "(%s saved per GPU); over 8, %s.",
		    sz(b1, cat[AN_CAT_PARAMETERS]), sz(b2, cat[AN_CAT_GRADIENTS]),
		    sz(b3, cat[AN_CAT_OPTIMIZER]), ad_pct(state, live), sz(b4, state / 4),
		    sz(b5, state - state / 4), sz(b6, state / 8));
		recommend(
		    c, "cpu_offload", 20, "Offload optimizer state (and parameters) to the CPU",
		    "FullyShardedDataParallel(model, cpu_offload=CPUOffload(offload_params=True))",
		    "Optimizer state alone is %s. Keeping it (and the parameters) in host memory "
		    "frees that much on the GPU, at the cost of transfers every step.",
		    sz(b1, cat[AN_CAT_OPTIMIZER]));
		recommend(
		    c, "mixed_precision", 30,
		    "Keep weights, gradients or optimizer state in lower precision",
		    "bf16 parameters/gradients, or an 8-bit optimizer (e.g. "
		    "bitsandbytes.optim.Adam8bit)",
		    "fp32 parameters and gradients take 4 bytes per value and Adam keeps two more "
		    "fp32 values: bf16 weights and gradients halve %s, an 8-bit optimizer quarters "
		    "%s.",
		    sz(b1, cat[AN_CAT_PARAMETERS] + cat[AN_CAT_GRADIENTS]),
		    sz(b2, cat[AN_CAT_OPTIMIZER]));
		recommend(
		    c, "reduce_microbatch", 40, "A smaller batch will not help much here", NULL,
		    "Activations are only %s of %s live (%d%%): halving the batch frees at most "
		    "about %s.",
		    sz(b1, acts), sz(b2, live), ad_pct(acts, live), sz(b3, acts / 2));
		return;
	}
	if (ad_pct(acts, live) >= AD_DOMINANT_PERCENT || (oom && ad_pct(acts, live) >= 25)) {
		recommend(c, "reduce_microbatch", 10,
		          "Use a smaller microbatch, with gradient accumulation to keep the batch",
		          "batch_size //= 2; accumulate gradients over 2 microbatches before "
		          "optimizer.step()",
		          "Activations hold %s of %s live memory (%d%%) and scale with the batch: "
		          "halving the microbatch frees about %s.",
		          sz(b1, acts), sz(b2, live), ad_pct(acts, live), sz(b3, acts / 2));
		uint64_t held = 0;
		const md_frame *target = checkpoint_target(c, &held);
		ad_text t = {0};
		ad_text_printf(&t,
		               "Checkpointing keeps only block inputs and recomputes the rest in "
		               "backward (about a third more compute); the largest holder is ");
		if (target) {
			ad_text_printf(&t, "the module whose forward is in ");
			ad_text_path(&t, md_str(c->s, target->filename));
			ad_text_printf(&t, " (it holds %s of activations).", sz(b4, held));
		} else {
			ad_text_printf(&t, "the module forward that allocates the most.");
		}
		recommend_text(
		    c, "activation_checkpointing", 20,
		    "Checkpoint activations of the largest blocks",
		    "out = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)", &t);
		recommend(c, "gradient_accumulation", 30,
		          "Accumulate gradients to keep the effective batch size",
		          "loss = loss / accum_steps; loss.backward(); step the optimizer every "
		          "accum_steps microbatches",
		          "With a smaller microbatch, accumulating over N microbatches keeps the "
		          "optimizer's effective batch and the training dynamics unchanged.");
		recommend(c, "mixed_precision", 40, "Run the forward pass in bf16 autocast",
		          "with torch.autocast(\"cuda\", dtype=torch.bfloat16): loss = model(x)",
		          "bf16 activations take half the bytes of fp32 ones (%s now), unless the "
		          "model already runs in autocast.",
		          sz(b1, acts));
		return;
	}
	if (oom && c->dv->site_count) {
		/* Neither the model state nor activations: name what holds the memory. */
		const an_site *top = &c->dv->sites[0];
		ad_text t = {0};
		ad_text_printf(&t,
		               "Live memory is %s, and most of it is not parameters, gradients, "
		               "optimizer state or activations; the largest site, ",
		               sz(b1, live));
		if (!user_site(&t, c->s, top->stack))
			ad_text_printf(&t, "with no stack recorded");
		ad_text_printf(&t, ", holds %s in %llu blocks.", sz(b2, top->bytes),
		               (unsigned long long)top->count);
		recommend_text(c, "release_references", 10,
		               "Free the tensors that hold the memory, or make them smaller",
		               "del big_tensor  # or keep it on the CPU until it is needed", &t);
	}
}

static void advise_fragmentation(ctx *c, int priority, uint64_t free_bytes, uint64_t largest,
                                 uint64_t hole)
{
	char b1[32], b2[32], change[96];
	char piece[64] = "";
	if (largest)
		snprintf(piece, sizeof piece, ", and the largest piece is %s", sz(b2, largest));
	if (!settings_expandable(c))
		recommend(
		    c, "expandable_segments", priority, "Turn on expandable segments",
		    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
		    "%s is cached but free%s: expandable segments map memory in pages so freed "
		    "space can be reused for larger tensors instead of staying cut into pieces.",
		    sz(b1, free_bytes), piece);
	if (!settings_max_split(c) && !settings_expandable(c)) {
		/* Blocks at least as large as the largest hole left inside a split segment are then
		 * never split, and requests that size get segments of their own. Without a layout
		 * (a log alone), 128 MiB is the usual first try. */
		uint64_t mib = hole ? (hole + MR_MIB - 1) / MR_MIB : 128;
		mib = (mib + 31) / 32 * 32;
		if (mib < 32)
			mib = 32;
		snprintf(change, sizeof change, "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:%llu",
		         (unsigned long long)mib);
		recommend(c, "max_split_size_mb", priority + 5,
		          "If expandable segments cannot be used: stop splitting large blocks",
		          change,
		          "Blocks of %llu MiB or more would no longer be split into pieces that "
		          "larger requests cannot reuse. It costs speed (more cudaMalloc calls and "
		          "cache flushes when memory is short), so prefer expandable segments.",
		          (unsigned long long)mib);
	}
}

/* The OOM message to analyse: the last one of the logs (each is listed as a finding). */
static const ev_oom *last_message(const ctx *c)
{
	const ev_text *t = &c->ev->text;
	return t->oom_count ? &t->ooms[t->oom_count - 1] : NULL;
}

static int close_enough(uint64_t a, uint64_t b)
{
	/* messages print two decimals of the unit: 1% covers their rounding */
	uint64_t d = a > b ? a - b : b - a;
	return (double)d <= 0.01 * (double)MR_MAX(a, b) + 1024.0;
}

/* Snapshot and log describe one run: say where they disagree instead of hiding it. */
static void check_agreement(ctx *c, const ev_oom *msg)
{
	const an_device *dv = c->dv;
	const an_pool *all = &dv->pool[AN_POOL_ALL];
	char b1[32], b2[32];
	if (msg->has_requested && dv->oom.present &&
	    !close_enough(msg->requested_bytes, dv->oom.requested))
		finding(c, "evidence_disagrees", AD_WARNING,
		        "The log's OOM asked for %s but the snapshot's OOM event for %s: they may "
		        "not be "
		        "the same failure.",
		        sz(b1, msg->requested_bytes), sz(b2, dv->oom.requested));
	if (msg->has_allocated && msg->has_reserved_unallocated) {
		uint64_t reserved = msg->allocated_by_pytorch + msg->reserved_unallocated +
		                    (msg->has_private_pools ? msg->private_pools : 0);
		if (!close_enough(reserved, all->reserved))
			finding(c, "evidence_disagrees", AD_WARNING,
			        "The log says PyTorch held %s (allocated plus reserved but "
			        "unallocated), "
			        "the snapshot %s reserved: they were taken at different moments.",
			        sz(b1, reserved), sz(b2, all->reserved));
	}
}

/* Why a capacity OOM's own figures do not contradict it: the limit a memory fraction (or MPS's
 * watermark) set below the card, or CUDA's free figure that covers the segment it refused. */
static void explain_limit(ad_text *t, const ev_oom *msg)
{
	char b1[32], b2[32], b3[32];
	uint64_t limit = ev_oom_limit(msg);
	if (msg->era == EV_OOM_ERA_MPS && msg->has_allowed) {
		ad_text_printf(t,
		               " The limit is MPS's max allowed (PYTORCH_MPS_HIGH_WATERMARK_RATIO "
		               "sets it), not all of the machine's memory");
		if (msg->has_this_process)
			ad_text_printf(
			    t, "; MPS's own and its other allocations, %s, count against it",
			    sz(b1, msg->this_process_in_use));
		ad_text_printf(t, ".");
	} else if (msg->has_allowed && limit == msg->allowed && msg->has_total_capacity &&
	           msg->allowed < msg->total_capacity) {
		ad_text_printf(t,
		               " The limit is the %s a memory fraction allows this process "
		               "(torch.cuda.set_per_process_memory_fraction), not the card's %s",
		               sz(b1, msg->allowed), sz(b2, msg->total_capacity));
		if (msg->has_device_free)
			ad_text_printf(t, ": CUDA still had %s free that it may not use.",
			               sz(b3, msg->device_free));
		else
			ad_text_printf(t, ".");
	} else if (msg->has_device_free && msg->has_requested &&
	           msg->device_free >= msg->requested_bytes) {
		ad_text_printf(t,
		               " CUDA reported %s free, no less than the %s it refused: that "
		               "figure is read after the failure, once PyTorch had released its "
		               "cached segments, and CUDA's own free memory need not lie in one "
		               "piece that large (or another process freed memory meanwhile).",
		               sz(b1, msg->device_free), sz(b2, msg->requested_bytes));
	}
}

static void advise_oom(ctx *c)
{
	const an_device *dv = c->dv;
	const an_oom *o = &dv->oom;
	const an_pool *all = &dv->pool[AN_POOL_ALL];
	ad_oom *out = &c->a->oom;
	char b1[32], b2[32], b3[32], b4[32], b5[32];
	out->present = 1;
	out->device = dv->device;
	out->requested = o->requested;
	out->free_cached = o->usable_free;
	out->largest_free = o->usable_largest;
	out->free_pieces = o->usable_pieces;
	out->reserved = all->reserved;
	out->allocated = all->allocated;
	/* The snapshot does not record the cap; a log's "allowed" figure does. */
	const ev_oom *msg = last_message(c);
	out->limit = msg ? ev_oom_limit(msg) : 0;
	if (msg)
		check_agreement(c, msg);
	/* Without a log, the cap was reached: the budget is at least what is reserved. */
	uint64_t budget =
	    out->limit ? out->limit : all->reserved + (fraction_in_effect(c) ? 0 : o->device_free);
	int could_serve = o->usable_free >= o->requested;
	int real_share = (double)o->usable_free * 100.0 >= (double)budget * FRAG_SHARE_PERCENT;
	const uint64_t *cat = dv->categories;
	if (could_serve && real_share) {
		out->cause = AD_CAUSE_FRAGMENTATION;
		finding(
		    c, "oom_fragmentation", AD_CRITICAL,
		    "Out of memory from fragmentation: %s was cached but free in %llu pieces, and "
		    "the largest (%s) is smaller than the %s requested. Reserved %s, allocated %s.",
		    sz(b1, o->usable_free), (unsigned long long)o->usable_pieces,
		    sz(b2, o->usable_largest), sz(b3, o->requested), sz(b4, all->reserved),
		    sz(b5, all->allocated));
		advise_fragmentation(c, 1, o->usable_free, o->usable_largest, all->largest_hole);
		advise_capacity(c, cat, 0);
		/* capacity advice ranks after the allocator fix here */
		for (size_t i = 0; i < c->a->rec_count; i++)
			if (strcmp(c->a->recs[i].id, "expandable_segments") != 0 &&
			    strcmp(c->a->recs[i].id, "max_split_size_mb") != 0)
				c->rec_priority[i] += 100;
	} else {
		out->cause = AD_CAUSE_CAPACITY;
		uint64_t live = ad_live_total(cat);
		char freebuf[160] = "nothing was cached but free";
		if (o->usable_free)
			snprintf(freebuf, sizeof freebuf,
			         "only %s was cached but free (largest piece %s)",
			         sz(b2, o->usable_free), sz(b3, o->usable_largest));
		ad_text t = {0};
		ad_text_printf(&t,
		               "Out of memory from capacity: live tensors hold %s and %s for a "
		               "request of %s.%s",
		               sz(b1, all->allocated), freebuf, sz(b4, o->requested),
		               could_serve ? " The scattered free memory is too small a share of "
		                             "the budget to matter: fixing fragmentation would "
		                             "only make it fail a little later."
		                           : "");
		if (msg)
			explain_limit(&t, msg);
		finding_text(c, "oom_capacity", AD_CRITICAL, &t);
		advise_capacity(c, cat, 1);
		if (live && !settings_expandable(c) && o->usable_free > 0)
			recommend(c, "expandable_segments", 90,
			          "Expandable segments would not save this run",
			          "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
			          "Only %s was free in the cache; even perfectly packed it would "
			          "not hold "
			          "the %s request. Worth having, but not the fix.",
			          sz(b1, o->usable_free), sz(b2, o->requested));
	}
	if (o->events_after)
		finding(c, "oom_snapshot_later", AD_INFO,
		        "The snapshot was taken %zu trace events after the OOM, so its layout may "
		        "differ a little from the moment of the failure.",
		        o->events_after);
}

/* A capacity OOM from the message alone: its figures, without the ones it does not give. */
static void message_capacity(ctx *c, const ev_oom *msg)
{
	char b1[32], b2[32], b3[32], b4[32];
	ad_text t = {0};
	uint64_t limit = ev_oom_limit(msg);
	ad_text_printf(&t,
	               "Out of memory from capacity: PyTorch had %s allocated within a limit of %s",
	               sz(b1, msg->allocated_by_pytorch), sz(b2, limit));
	if (!msg->has_reserved_unallocated)
		ad_text_printf(&t, ", for a request of %s.", sz(b4, msg->requested_bytes));
	else if (msg->reserved_unallocated < msg->requested_bytes)
		ad_text_printf(&t, ", and only %s reserved but unallocated for a request of %s.",
		               sz(b3, msg->reserved_unallocated), sz(b4, msg->requested_bytes));
	else
		ad_text_printf(
		    &t,
		    ", for a request of %s. The %s reserved but unallocated is more than "
		    "that, but in pieces none of which could hold it, and at %d%% of "
		    "the limit too small a share to be the cause: fixing fragmentation "
		    "would only make it fail a little later.",
		    sz(b4, msg->requested_bytes), sz(b3, msg->reserved_unallocated),
		    ad_pct(msg->reserved_unallocated, limit));
	explain_limit(&t, msg);
	finding_text(c, "oom_capacity", AD_CRITICAL, &t);
}

/* A message that only says memory ran out: say so, and what usually does it. */
static void message_without_sizes(ctx *c, const ev_oom *msg)
{
	if (msg->era == EV_OOM_ERA_LIBRARY)
		finding(c, "library_oom", AD_CRITICAL,
		        "A CUDA library could not allocate memory for its handle or workspace "
		        "(%s): the card was already full, and the message gives no sizes (neither "
		        "the request nor what PyTorch held). Record a snapshot, or read "
		        "torch.cuda.memory_summary() at that point, to see what filled it.",
		        msg->status);
	else
		finding(
		    c, "driver_oom", AD_CRITICAL,
		    "The CUDA %s ran out of memory (%s), outside the caching allocator: the "
		    "message gives no sizes (neither the request nor what PyTorch held). Other "
		    "processes, a CUDA context on a full card, or a library allocating directly "
		    "are the usual causes.",
		    msg->era == EV_OOM_ERA_LEGACY_RUNTIME ? "runtime" : "driver itself",
		    msg->era == EV_OOM_ERA_LEGACY_RUNTIME ? "PyTorch 0.x: \"cuda runtime error "
		                                            "(2) : out of memory\""
		                                          : "\"CUDA error: out of memory\"");
}

/* Only a log: the message's own figures, and what it cannot tell. */
static void advise_message(ctx *c, const ev_oom *msg)
{
	ad_oom *out = &c->a->oom;
	char b1[32], b2[32], b3[32];
	out->present = 1;
	out->device = msg->device < 0 ? 0 : msg->device;
	out->requested = msg->requested_bytes;
	out->free_cached = msg->reserved_unallocated;
	out->limit = ev_oom_limit(msg);
	out->allocated = msg->allocated_by_pytorch;
	int reserved_known = ad_message_reserved(msg, &out->reserved);
	out->unknown = (msg->has_requested ? 0u : AD_OOM_NO_REQUESTED) |
	               (msg->has_reserved_unallocated ? 0u : AD_OOM_NO_FREE_CACHED) |
	               (reserved_known ? 0u : AD_OOM_NO_RESERVED) |
	               (msg->has_allocated ? 0u : AD_OOM_NO_ALLOCATED);
	out->cause = ad_message_cause(msg);
	out->largest_unknown = 1;
	if (ev_oom_without_sizes(msg)) {
		message_without_sizes(c, msg);
		return;
	}
	switch (out->cause) {
	case AD_CAUSE_FRAGMENTATION:
		finding(
		    c, "oom_fragmentation", AD_CRITICAL,
		    "Out of memory from fragmentation: %s was reserved by PyTorch but unallocated, "
		    "more than the %s requested, within a limit of %s; no free piece was large "
		    "enough.",
		    sz(b1, msg->reserved_unallocated), sz(b2, msg->requested_bytes),
		    sz(b3, out->limit));
		advise_fragmentation(c, 1, msg->reserved_unallocated, 0, 0);
		break;
	case AD_CAUSE_OTHER_PROCESSES:
		finding(
		    c, "oom_other_processes", AD_CRITICAL,
		    "Out of memory because other processes (or memory outside PyTorch) hold most "
		    "of the card: of %s, PyTorch had %s allocated and %s reserved but unallocated.",
		    sz(b1, msg->total_capacity), sz(b2, msg->allocated_by_pytorch),
		    sz(b3, msg->reserved_unallocated));
		recommend(
		    c, "free_other_processes", 1, "Free the card from other processes",
		    "nvidia-smi --query-compute-apps=pid,used_memory --format=csv",
		    "Memory held outside this allocator cannot be reused by it: stop other jobs "
		    "on this GPU, or give each process its own GPU.");
		break;
	case AD_CAUSE_CAPACITY:
		message_capacity(c, msg);
		recommend(c, "reduce_microbatch", 10,
		          "Use a smaller microbatch, with gradient accumulation to keep the batch",
		          "batch_size //= 2; accumulate gradients over 2 microbatches",
		          "Live tensors fill the limit. Without a snapshot the log cannot say what "
		          "they are; activations usually scale with the batch.");
		recommend(
		    c, "activation_checkpointing", 20, "Checkpoint activations",
		    "out = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)",
		    "Recomputing activations in backward trades about a third more compute for "
		    "most of their memory.");
		break;
	default:
		finding(
		    c, "oom_unknown", AD_WARNING,
		    "Out of memory, but the message does not carry enough figures to tell why.");
	}
	if (msg->era == EV_OOM_ERA_MPS)
		return; /* the snapshot below is torch.cuda's: MPS has none */
	recommend(c, "record_history", 50, "Record a snapshot at the OOM to see what holds memory",
	          "torch.cuda.memory._record_memory_history(max_entries=100000)\n"
	          "# ... then, in an except torch.OutOfMemoryError block:\n"
	          "torch.cuda.memory._dump_snapshot(\"oom_snapshot.pickle\")",
	          "A snapshot shows the free blocks, live memory by category and the allocation "
	          "sites; a log only has totals.");
}

static void list_messages(ctx *c)
{
	const ev_text *t = &c->ev->text;
	char b1[32];
	if (t->oom_count > 1)
		finding(
		    c, "several_ooms", AD_INFO,
		    "The logs hold %zu out-of-memory messages; the last (line %zu) is analysed.",
		    t->oom_count, t->ooms[t->oom_count - 1].line);
	for (size_t i = 0; i < t->oom_count; i++)
		finding(c, "oom_message", AD_INFO,
		        "Line %zu: %s out of memory, %s requested (%s era).", t->ooms[i].line,
		        t->ooms[i].backend[0] ? t->ooms[i].backend : "CUDA",
		        t->ooms[i].has_requested ? sz(b1, t->ooms[i].requested_bytes) : "nothing",
		        ev_oom_era_name(t->ooms[i].era));
}

static void advise_growth(ctx *c)
{
	const an_growth *g = &c->dv->growth;
	const md_snapshot *s = c->s;
	char b1[32], b2[32], b3[32];
	if (!g->found || g->middle_iterations < 3 || g->per_iteration < GROWTH_MIN_BYTES ||
	    g->growing_iterations * 4 < g->middle_iterations * 3)
		return;
	uint64_t total = g->per_iteration * g->middle_iterations;
	int activations = 0;
	uint64_t allocated = c->dv->pool[AN_POOL_ALL].allocated;
	ad_text t = {0};
	ad_text_printf(&t,
	               "Live memory grows %s per iteration and is not released: %zu of %zu "
	               "iterations left memory behind (%s in all).",
	               sz(b1, g->per_iteration), g->growing_iterations, g->middle_iterations,
	               sz(b2, total));
	if (g->site_count) {
		activations =
		    an_category(s, g->sites[0].stack, s->has_history) == AN_CAT_ACTIVATIONS;
		if (an_user_frame(s, g->sites[0].stack)) {
			ad_text_printf(&t, " The largest grower is ");
			user_site(&t, s, g->sites[0].stack);
			ad_text_printf(&t, ", %s per iteration.",
			               sz(b3, g->sites[0].bytes_per_iteration));
		}
	}
	finding_text(c, "memory_growth", total * 4 >= allocated ? AD_CRITICAL : AD_WARNING, &t);
	if (activations && !g->backward_seen)
		recommend(
		    c, "no_grad_eval", 5, "Evaluate under torch.no_grad()",
		    "with torch.no_grad():  # or @torch.inference_mode()\n    out = model(x)",
		    "Forward activations survive every iteration and no backward pass ever frees "
		    "them: autograd keeps each iteration's graph alive. %s per iteration.",
		    sz(b1, g->per_iteration));
	recommend(c, "release_references", activations && !g->backward_seen ? 6 : 5,
	          "Drop references that keep tensors (and their graphs) alive",
	          "total += loss.item()   # not: total += loss\nhistory.append(out.detach())",
	          "Memory allocated in each iteration is still referenced at the end of the run "
	          "(%s per iteration): accumulating tensors, not numbers, keeps them and their "
	          "autograd graphs alive.",
	          sz(b1, g->per_iteration));
}

static void advise_peak_overhead(ctx *c)
{
	const an_device *dv = c->dv;
	char b1[32], b2[32], b3[32];
	if (!dv->has_trace || dv->peak_reserved == 0 || dv->peak_allocated >= dv->peak_reserved)
		return;
	uint64_t over = dv->peak_reserved - dv->peak_allocated;
	if (ad_pct(over, dv->peak_reserved) < HIGH_FRAG_PERCENT || over < HIGH_FRAG_MIN_BYTES)
		return;
	finding(c, "high_fragmentation", AD_WARNING,
	        "At the peak, %s was reserved for %s allocated: %s (%d%% of reserved) was lost to "
	        "fragmentation and caching of differently sized blocks.",
	        sz(b1, dv->peak_reserved), sz(b2, dv->peak_allocated), sz(b3, over),
	        ad_pct(over, dv->peak_reserved));
	if (!settings_expandable(c))
		advise_fragmentation(c, 10, over, dv->pool[AN_POOL_ALL].largest_free,
		                     dv->pool[AN_POOL_ALL].largest_hole);
}

static void advise_evidence(ctx *c)
{
	const an_device *dv = c->dv;
	const md_snapshot *s = c->s;
	const an_pool *all = &dv->pool[AN_POOL_ALL];
	const an_pool *priv = &dv->pool[AN_POOL_PRIVATE];
	char b1[32], b2[32];
	if (all->pending_free_blocks)
		finding(c, "pending_free_blocks", AD_WARNING,
		        "%s in %llu blocks was freed by the program but is still in use by another "
		        "stream (record_stream or collective communication): the allocator cannot "
		        "reuse it until that stream's work completes.",
		        sz(b1, all->pending_free), (unsigned long long)all->pending_free_blocks);
	if (priv->segments)
		finding(
		    c, "private_pools", AD_INFO,
		    "%s is reserved in %llu segments of private pools (CUDA graphs or MemPool), "
		    "with %s allocated; it is reported apart and is only released when its graph "
		    "or pool is destroyed.",
		    sz(b1, priv->reserved), (unsigned long long)priv->segments,
		    sz(b2, priv->allocated));
	if (dv->has_trace && dv->truncated)
		finding(
		    c, "trace_truncated", AD_WARNING,
		    "The trace does not reach back to the start of the run (%zu events; %s was "
		    "already reserved when it begins): the ring buffer wrapped or recording began "
		    "late, so peaks from it are lower bounds.",
		    dv->trace_events, sz(b1, dv->initial_reserved));
	if (!dv->has_trace) {
		finding(
		    c, "no_history", AD_INFO,
		    "No allocation history was recorded: the snapshot has segments and blocks but "
		    "no trace%s, so there are no peaks, no timeline and no growth analysis.",
		    s->has_history ? "" : " and no stacks");
		recommend(c, "record_history", 50, "Record allocation history next time",
		          "torch.cuda.memory._record_memory_history(max_entries=100000)\n"
		          "# ... run until the problem shows ...\n"
		          "torch.cuda.memory._dump_snapshot(\"snapshot.pickle\")",
		          "With history, every block carries the stack that allocated it and the "
		          "trace gives peaks, a timeline, OOM details and growth per iteration.");
	}
	const md_settings *cfg = &s->settings;
	if (cfg->gc_threshold > 0 && !fraction_in_effect(c))
		finding(
		    c, "setting_ineffective", AD_WARNING,
		    "garbage_collection_threshold:%g is set, but it only acts when a memory "
		    "fraction "
		    "is set (torch.cuda.set_per_process_memory_fraction); nothing here shows one.",
		    cfg->gc_threshold);
	if (settings_max_split(c) && settings_expandable(c))
		finding(
		    c, "setting_ineffective", AD_INFO,
		    "Both expandable_segments and max_split_size_mb are set: max_split_size_mb "
		    "only "
		    "acts on non-expandable segments, so with expandable segments on it has little "
		    "left to do.");
	if (all->whole_free >= MR_GIB && all->whole_free * 4 >= all->reserved)
		finding(c, "empty_cache_note", AD_INFO,
		        "%s of the %s reserved is in segments with nothing allocated. "
		        "empty_cache() would "
		        "hand them back to the driver for other processes, but it never gives this "
		        "process more room: the allocator reuses them anyway.",
		        sz(b1, all->whole_free), sz(b2, all->reserved));
}

mr_status ad_advise(const ld_evidence *ev, const an_result *an, int device, ad_advice *out,
                    mr_error *err)
{
	memset(out, 0, sizeof *out);
	ctx c = {.a = out, .ev = ev, .s = &ev->snap};
	if (ev->has_snapshot && an)
		c.dv = primary_device(an, device);
	out->device = c.dv ? c.dv->device : -1;
	if (c.dv) {
		out->categories.present = c.s->has_history;
		memcpy(out->categories.bytes, c.dv->categories, sizeof out->categories.bytes);
		out->categories.peak_present = c.dv->peak_categories_known;
		memcpy(out->categories.peak, c.dv->peak_categories, sizeof out->categories.peak);
		out->categories.moment =
		    c.dv->oom.present && !c.dv->oom.events_after ? "oom" : "snapshot";
		if (c.dv->oom.present)
			advise_oom(&c);
		advise_growth(&c);
		if (!c.dv->oom.present)
			advise_peak_overhead(&c);
		advise_evidence(&c);
	} else if (ev->text.oom_count) {
		advise_message(&c, last_message(&c));
	}
	list_messages(&c);
	if (ad_write_verdict(out, c.dv))
		c.failed = 1;
	rank(&c);
	free(c.rec_priority);
	if (c.failed || !out->verdict) {
		ad_free(out);
		return mr_oom(err);
	}
	return MR_OK;
}
