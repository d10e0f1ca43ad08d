/* advise.c: findings and ranked recommendations.
 *
 * The order follows the guides users learn from: measure first; when live tensors fill the
 * card shrink the working set (microbatch with accumulation, checkpointing, mixed precision)
 * or shard and offload when the model state itself does not fit; touch the allocator
 * (expandable_segments, then max_split_size_mb) only when the numbers show fragmentation;
 * empty_cache() is never the fix. Every rule reads numbers; none reads a file name. */
#include "advise/advise.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/mem.h"
#include "base/units.h"
#include "decode/oom_message.h"
#include "decode/text.h"
#include "report/report.h"
#include "sim/config.h"
#include "sim/replay.h"

const char *ad_severity_name(ad_severity s)
{
	return s == AD_CRITICAL ? "critical" : s == AD_WARNING ? "warning" : "info";
}

const char *ad_category_name(int cat)
{
	return an_category_name(cat);
}

void ad_free(ad_advice *a)
{
	free(a->verdict);
	for (size_t i = 0; i < a->finding_count; i++)
		free(a->findings[i].message);
	free(a->findings);
	for (size_t i = 0; i < a->rec_count; i++) {
		free(a->recs[i].title);
		free(a->recs[i].reason);
		free(a->recs[i].change);
	}
	free(a->recs);
	memset(a, 0, sizeof *a);
}

/* Thresholds, with why. */
enum {
	/* Free cached memory is a "real share" of the budget when it is at least 10% of it: below
	 * that, fixing fragmentation would only delay an OOM that capacity makes inevitable. */
	FRAG_SHARE_PERCENT = 10,
	/* Reserved above allocated at the peak, as a share of peak reserved, that is worth an
	 * allocator change; and the least absolute amount. */
	HIGH_FRAG_PERCENT = 15,
	/* A category "dominates" live memory from half of it. */
	DOMINANT_PERCENT = 50,
};
#define HIGH_FRAG_MIN_BYTES (256 * MR_MIB)
#define GROWTH_MIN_BYTES (1 * MR_MIB)

typedef struct {
	ad_advice *a;
	const rp_run *run;
	const rp_options *opt; /* --redact-paths applies to paths quoted in prose too */
	const md_snapshot *s;
	const an_device *dv;
	size_t fcap, rcap;
	int failed;
	int *rec_priority; /* parallel to a->recs while collecting */
	size_t prio_cap;
} ctx;

static char *vfmt(const char *fmt, va_list ap)
{
	mr_buf b = {0};
	mr_buf_vprintf(&b, fmt, ap);
	if (b.failed) {
		mr_buf_free(&b);
		return NULL;
	}
	return b.data;
}

static void finding(ctx *c, const char *id, ad_severity sev, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void finding(ctx *c, const char *id, ad_severity sev, const char *fmt, ...)
{
	ad_advice *a = c->a;
	va_list ap;
	va_start(ap, fmt);
	char *msg = vfmt(fmt, ap);
	va_end(ap);
	if (!msg || MR_GROW(a->findings, c->fcap, a->finding_count + 1)) {
		free(msg);
		c->failed = 1;
		return;
	}
	ad_finding *f = &a->findings[a->finding_count++];
	memset(f, 0, sizeof *f);
	snprintf(f->id, sizeof f->id, "%s", id);
	f->severity = sev;
	f->message = msg;
}

/* Adds a recommendation; a lower priority ranks first. An id already present keeps the better
 * priority and its first reason. */
static void recommend(ctx *c, const char *id, int priority, const char *title, const char *change,
                      const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void recommend(ctx *c, const char *id, int priority, const char *title, const char *change,
                      const char *fmt, ...)
{
	ad_advice *a = c->a;
	for (size_t i = 0; i < a->rec_count; i++)
		if (strcmp(a->recs[i].id, id) == 0) {
			if (priority < c->rec_priority[i])
				c->rec_priority[i] = priority;
			return;
		}
	va_list ap;
	va_start(ap, fmt);
	char *reason = vfmt(fmt, ap);
	va_end(ap);
	char *t = mr_strndup(title, strlen(title));
	char *ch = change ? mr_strndup(change, strlen(change)) : NULL;
	if (!reason || !t || (change && !ch) || MR_GROW(a->recs, c->rcap, a->rec_count + 1) ||
	    MR_GROW(c->rec_priority, c->prio_cap, a->rec_count + 1)) {
		free(reason);
		free(t);
		free(ch);
		c->failed = 1;
		return;
	}
	ad_recommendation *r = &a->recs[a->rec_count];
	memset(r, 0, sizeof *r);
	snprintf(r->id, sizeof r->id, "%s", id);
	r->title = t;
	r->reason = reason;
	r->change = ch;
	c->rec_priority[a->rec_count++] = priority;
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

static int pct(uint64_t part, uint64_t whole)
{
	return whole ? (int)((double)part * 100.0 / (double)whole + 0.5) : 0;
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

/* The user-code function whose forward holds the most activation bytes: where to checkpoint. */
static void checkpoint_target(const ctx *c, char *out, size_t outsz)
{
	const md_snapshot *s = c->s;
	const an_device *dv = c->dv;
	uint64_t best_bytes = 0;
	const md_frame *best = NULL;
	out[0] = '\0';
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
	if (best) {
		char b[32];
		char pbuf[1024];
		snprintf(out, outsz,
		         "the module whose forward is in %s (it holds %s of activations)",
		         rp_path(c->opt, md_str(s, best->filename), pbuf, sizeof pbuf),
		         sz(b, best_bytes));
	}
}

/* "name (file:line)" of the user's own line that allocated a stack's memory. */
static void top_site_text(const ctx *c, uint32_t stack, char *out, size_t outsz)
{
	const md_frame *f = an_user_frame(c->s, stack);
	char pbuf[1024];
	out[0] = '\0';
	if (f)
		snprintf(out, outsz, "%s (%s:%d)", md_str(c->s, f->name),
		         rp_path(c->opt, md_str(c->s, f->filename), pbuf, sizeof pbuf), f->line);
}

static uint64_t live_total(const uint64_t *cat)
{
	uint64_t t = 0;
	for (int i = 0; i < AN_CAT_COUNT; i++)
		t += cat[i];
	return t;
}

static void advise_capacity(ctx *c, const uint64_t *cat, int oom)
{
	char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32], where[1200];
	uint64_t live = live_total(cat);
	uint64_t state = cat[AN_CAT_PARAMETERS] + cat[AN_CAT_GRADIENTS] + cat[AN_CAT_OPTIMIZER];
	uint64_t acts = cat[AN_CAT_ACTIVATIONS];
	if (!live)
		return;
	if (pct(state, live) >= DOMINANT_PERCENT) {
		recommend(
		    c, "fsdp", 10, "Shard parameters, gradients and optimizer state (FSDP)",
		    "model = torch.distributed.fsdp.FullyShardedDataParallel(model)  # or "
		    "fully_shard(model) in torch>=2.4",
		    "Parameters (%s), gradients (%s) and optimizer state (%s) are %d%% of live "
		    "memory; each GPU holds all of it. Sharded over 4 GPUs each keeps about %s "
		    "(%s saved per GPU); over 8, %s.",
		    sz(b1, cat[AN_CAT_PARAMETERS]), sz(b2, cat[AN_CAT_GRADIENTS]),
		    sz(b3, cat[AN_CAT_OPTIMIZER]), pct(state, live), sz(b4, state / 4),
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
		    sz(b1, acts), sz(b2, live), pct(acts, live), sz(b3, acts / 2));
		return;
	}
	if (pct(acts, live) >= DOMINANT_PERCENT || (oom && pct(acts, live) >= 25)) {
		recommend(c, "reduce_microbatch", 10,
		          "Use a smaller microbatch, with gradient accumulation to keep the batch",
		          "batch_size //= 2; accumulate gradients over 2 microbatches before "
		          "optimizer.step()",
		          "Activations hold %s of %s live memory (%d%%) and scale with the batch: "
		          "halving the microbatch frees about %s.",
		          sz(b1, acts), sz(b2, live), pct(acts, live), sz(b3, acts / 2));
		checkpoint_target(c, where, sizeof where);
		recommend(
		    c, "activation_checkpointing", 20,
		    "Checkpoint activations of the largest blocks",
		    "out = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)",
		    "Checkpointing keeps only block inputs and recomputes the rest in backward "
		    "(about a third more compute); the largest holder is %s.",
		    where[0] ? where : "the module forward that allocates the most");
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
		char site[1200] = "";
		top_site_text(c, c->dv->sites[0].stack, site, sizeof site);
		recommend(
		    c, "release_references", 10,
		    "Free the tensors that hold the memory, or make them smaller",
		    "del big_tensor  # or keep it on the CPU until it is needed",
		    "Live memory is %s, and most of it is not parameters, gradients, optimizer "
		    "state or activations; the largest site, %s, holds %s in %llu blocks.",
		    sz(b1, live), site[0] ? site : "with no stack recorded",
		    sz(b2, c->dv->sites[0].bytes), (unsigned long long)c->dv->sites[0].count);
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
	const ev_text *t = &c->run->text;
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
		uint64_t live = live_total(cat);
		char freebuf[160] = "nothing was cached but free";
		if (o->usable_free)
			snprintf(freebuf, sizeof freebuf,
			         "only %s was cached but free (largest piece %s)",
			         sz(b2, o->usable_free), sz(b3, o->usable_largest));
		finding(c, "oom_capacity", AD_CRITICAL,
		        "Out of memory from capacity: live tensors hold %s and %s for a request of "
		        "%s.%s",
		        sz(b1, all->allocated), freebuf, sz(b4, o->requested),
		        could_serve
		            ? " The scattered free memory is too small a share of the budget to "
		              "matter: fixing fragmentation would only make it fail a little "
		              "later."
		            : "");
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

/* Only a log: the message's own figures, and what it cannot tell. */
static void advise_message(ctx *c, const ev_oom *msg)
{
	ad_oom *out = &c->a->oom;
	char b1[32], b2[32], b3[32], b4[32];
	out->present = 1;
	out->device = msg->device < 0 ? 0 : msg->device;
	out->requested = msg->requested_bytes;
	out->free_cached = msg->reserved_unallocated;
	out->limit = ev_oom_limit(msg);
	out->allocated = msg->allocated_by_pytorch;
	out->reserved = msg->has_reserved_total
	                    ? msg->reserved_total
	                    : msg->allocated_by_pytorch + msg->reserved_unallocated;
	out->cause = ad_message_cause(msg);
	out->largest_unknown = 1;
	if (msg->era == EV_OOM_ERA_DRIVER_ERROR) {
		finding(c, "driver_oom", AD_CRITICAL,
		        "The CUDA driver itself ran out of memory (\"CUDA error: out of memory\"), "
		        "outside the caching allocator: the message carries no allocator numbers. "
		        "Other processes, a CUDA context on a full card, or a library allocating "
		        "directly are the usual causes.");
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
		finding(c, "oom_capacity", AD_CRITICAL,
		        "Out of memory from capacity: PyTorch had %s allocated within a limit of "
		        "%s, and "
		        "only %s reserved but unallocated for a request of %s.",
		        sz(b1, msg->allocated_by_pytorch), sz(b2, out->limit),
		        sz(b3, msg->reserved_unallocated), sz(b4, msg->requested_bytes));
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
	recommend(c, "record_history", 50, "Record a snapshot at the OOM to see what holds memory",
	          "torch.cuda.memory._record_memory_history(max_entries=100000)\n"
	          "# ... then, in an except torch.OutOfMemoryError block:\n"
	          "torch.cuda.memory._dump_snapshot(\"oom_snapshot.pickle\")",
	          "A snapshot shows the free blocks, live memory by category and the allocation "
	          "sites; a log only has totals.");
}

static void list_messages(ctx *c)
{
	const ev_text *t = &c->run->text;
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
	char b1[32], b2[32], b3[32], site[1200] = "";
	if (!g->found || g->middle_iterations < 3 || g->per_iteration < GROWTH_MIN_BYTES ||
	    g->growing_iterations * 4 < g->middle_iterations * 3)
		return;
	uint64_t total = g->per_iteration * g->middle_iterations;
	int activations = 0;
	if (g->site_count) {
		char where[1100];
		activations =
		    an_category(s, g->sites[0].stack, s->has_history) == AN_CAT_ACTIVATIONS;
		top_site_text(c, g->sites[0].stack, where, sizeof where);
		if (where[0])
			snprintf(site, sizeof site, " The largest grower is %s, %s per iteration.",
			         where, sz(b3, g->sites[0].bytes_per_iteration));
	}
	uint64_t allocated = c->dv->pool[AN_POOL_ALL].allocated;
	finding(c, "memory_growth", total * 4 >= allocated ? AD_CRITICAL : AD_WARNING,
	        "Live memory grows %s per iteration and is not released: %zu of %zu iterations "
	        "left memory behind (%s in all).%s",
	        sz(b1, g->per_iteration), g->growing_iterations, g->middle_iterations,
	        sz(b2, total), site);
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
	if (pct(over, dv->peak_reserved) < HIGH_FRAG_PERCENT || over < HIGH_FRAG_MIN_BYTES)
		return;
	finding(c, "high_fragmentation", AD_WARNING,
	        "At the peak, %s was reserved for %s allocated: %s (%d%% of reserved) was lost to "
	        "fragmentation and caching of differently sized blocks.",
	        sz(b1, dv->peak_reserved), sz(b2, dv->peak_allocated), sz(b3, over),
	        pct(over, dv->peak_reserved));
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

static void verdict(ctx *c)
{
	const an_device *dv = c->dv;
	const an_pool *all = dv ? &dv->pool[AN_POOL_ALL] : NULL;
	const ad_oom *o = &c->a->oom;
	char b1[32], b2[32], b3[32], b4[32];
	mr_buf b = {0};
	static const uint64_t none[AN_CAT_COUNT];
	const uint64_t *cat = dv ? dv->categories : none;
	uint64_t live = live_total(cat);
	if (!c->dv) {
		if (o->present && o->cause == AD_CAUSE_FRAGMENTATION)
			mr_buf_printf(
			    &b,
			    "Out of memory from fragmentation: %s reserved but unallocated, more "
			    "than the %s asked for, within %s.",
			    sz(b1, o->free_cached), sz(b2, o->requested), sz(b3, o->limit));
		else if (o->present && o->cause == AD_CAUSE_CAPACITY)
			mr_buf_printf(
			    &b,
			    "Out of memory from capacity: %s allocated by PyTorch within %s; only "
			    "%s was reserved but unallocated for a %s request.",
			    sz(b1, o->allocated), sz(b2, o->limit), sz(b3, o->free_cached),
			    sz(b4, o->requested));
		else if (o->present && o->cause == AD_CAUSE_OTHER_PROCESSES)
			mr_buf_printf(
			    &b,
			    "Out of memory because other processes hold most of the card; "
			    "PyTorch had only %s allocated.",
			    sz(b1, o->allocated));
		else if (o->present)
			mr_buf_printf(&b, "Out of memory; the evidence does not say why.");
		else
			mr_buf_printf(&b, "No out-of-memory error in the evidence.");
	} else if (o->present && o->cause == AD_CAUSE_FRAGMENTATION) {
		mr_buf_printf(
		    &b,
		    "Out of memory from fragmentation: %s free in %llu pieces, none as large "
		    "as the %s asked for.",
		    sz(b1, o->free_cached), (unsigned long long)o->free_pieces,
		    sz(b2, o->requested));
	} else if (o->present) {
		uint64_t state =
		    cat[AN_CAT_PARAMETERS] + cat[AN_CAT_GRADIENTS] + cat[AN_CAT_OPTIMIZER];
		if (live && pct(state, live) >= DOMINANT_PERCENT)
			mr_buf_printf(
			    &b,
			    "Out of memory from capacity: parameters, gradients and optimizer "
			    "state hold %s of %s live; activations are only %s, so a smaller "
			    "batch cannot help.",
			    sz(b1, state), sz(b2, live), sz(b3, cat[AN_CAT_ACTIVATIONS]));
		else
			mr_buf_printf(&b,
			              "Out of memory from capacity: live tensors hold %s (%d%% "
			              "activations); only %s was free for a %s request.",
			              sz(b1, all->allocated), pct(cat[AN_CAT_ACTIVATIONS], live),
			              sz(b2, o->free_cached), sz(b3, o->requested));
	} else {
		const ad_finding *growth = NULL, *frag = NULL;
		for (size_t i = 0; i < c->a->finding_count; i++) {
			if (strcmp(c->a->findings[i].id, "memory_growth") == 0)
				growth = &c->a->findings[i];
			if (strcmp(c->a->findings[i].id, "high_fragmentation") == 0)
				frag = &c->a->findings[i];
		}
		if (growth) {
			const an_growth *g = &dv->growth;
			mr_buf_printf(
			    &b,
			    "Memory grows %s per iteration and is never released: %s over "
			    "%zu iterations.",
			    sz(b1, g->per_iteration),
			    sz(b2, g->per_iteration * g->middle_iterations), g->middle_iterations);
		} else if (frag) {
			mr_buf_printf(
			    &b,
			    "%d%% of reserved memory is lost to fragmentation at the peak: %s "
			    "reserved for %s allocated.",
			    pct(dv->peak_reserved - dv->peak_allocated, dv->peak_reserved),
			    sz(b1, dv->peak_reserved), sz(b2, dv->peak_allocated));
		} else if (dv->has_trace) {
			mr_buf_printf(
			    &b,
			    "Healthy: peak %s allocated in %s reserved (%d%% overhead); nothing "
			    "urgent to change.",
			    sz(b1, dv->peak_allocated), sz(b2, dv->peak_reserved),
			    pct(dv->peak_reserved - MR_MIN(dv->peak_allocated, dv->peak_reserved),
			        dv->peak_reserved));
		} else {
			mr_buf_printf(
			    &b,
			    "No out-of-memory error: %s reserved, %s allocated, largest free "
			    "block %s. No allocation history was recorded.",
			    sz(b1, all->reserved), sz(b2, all->allocated),
			    sz(b3, all->largest_free));
		}
	}
	if (b.failed) {
		mr_buf_free(&b);
		c->failed = 1;
		return;
	}
	c->a->verdict = b.data;
}

mr_status ad_advise(const rp_run *run, const rp_options *opt, ad_advice *out, mr_error *err)
{
	memset(out, 0, sizeof *out);
	ctx c = {.a = out, .run = run, .opt = opt, .s = &run->snap};
	if (run->has_snapshot)
		c.dv = primary_device(&run->an, opt ? opt->device : -1);
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
	} else if (run->text.oom_count) {
		advise_message(&c, last_message(&c));
	}
	list_messages(&c);
	verdict(&c);
	if (!out->verdict && !c.failed)
		out->verdict = mr_strndup("", 0);
	rank(&c);
	free(c.rec_priority);
	if (c.failed || !out->verdict) {
		ad_free(out);
		return mr_oom(err);
	}
	return MR_OK;
}

/* ---- replays of recommended settings ---- */

typedef struct {
	const md_snapshot *s;
	int32_t device;
	sim_config cfg;
	uint64_t limit;
	sim_result res;
	mr_error err;
	mr_status st;
} replay_job;

static void *replay_thread(void *arg)
{
	replay_job *j = arg;
	j->st = sim_replay(j->s, j->device, &j->cfg, j->limit, &j->res, &j->err);
	return NULL;
}

/* Runs the jobs on both cores. */
static void run_jobs(replay_job *jobs, size_t n)
{
	pthread_t th[4];
	int started[4] = {0};
	for (size_t i = 1; i < n; i++)
		started[i] = pthread_create(&th[i], NULL, replay_thread, &jobs[i]) == 0;
	if (n)
		replay_thread(&jobs[0]);
	for (size_t i = 1; i < n; i++) {
		if (started[i])
			pthread_join(th[i], NULL);
		else
			replay_thread(&jobs[i]);
	}
}

static int is_allocator_rec(const ad_recommendation *r)
{
	return strcmp(r->id, "expandable_segments") == 0 || strcmp(r->id, "max_split_size_mb") == 0;
}

static char *append_text(char *s, const char *more)
{
	size_t a = strlen(s), b = strlen(more);
	char *n = realloc(s, a + b + 1);
	if (!n)
		return NULL;
	memcpy(n + a, more, b + 1);
	return n;
}

/* The cap for replays of a device's trace: the log's "allowed" figure (or total capacity),
 * else for an OOM under a memory fraction the reserved bytes at the failure, the tightest cap
 * the recording allows (*guessed is then set); else none. */
static uint64_t replay_limit(const rp_run *run, const an_device *dv, int *guessed)
{
	const ev_text *t = &run->text;
	*guessed = 0;
	if (t->oom_count) {
		uint64_t l = ev_oom_limit(&t->ooms[t->oom_count - 1]);
		if (l)
			return l;
	}
	if (dv->oom.present && dv->oom.device_free > dv->oom.alloc_size) {
		*guessed = 1;
		return dv->pool[AN_POOL_ALL].reserved;
	}
	/* The device itself ran out (no cap, or memory outside PyTorch): this process could have
	 * had what it reserved plus what the device still had free at the OOM. */
	if (dv->oom.present)
		return dv->pool[AN_POOL_ALL].reserved + dv->oom.device_free;
	return 0;
}

static void fill_replay(ad_replay *rp, const char *conf, const sim_result *r, uint64_t limit)
{
	snprintf(rp->conf, sizeof rp->conf, "%s", conf);
	rp->matches = r->matches_recording;
	rp->oom = r->oom_count > 0;
	rp->limit = limit;
	rp->peak_reserved = r->peak_reserved;
	rp->peak_allocated = r->peak_allocated;
	rp->divergence_event = r->first_divergence.event_index;
	snprintf(rp->divergence, sizeof rp->divergence, "%s", r->first_divergence.what);
}

mr_status ad_replay_recorded(rp_run *run, mr_error *err)
{
	mr_status st = MR_OK;
	if (!run->has_snapshot || !run->an.device_count)
		return MR_OK;
	run->recorded = mr_alloc_array(run->an.device_count, sizeof *run->recorded);
	if (!run->recorded)
		return mr_oom(err);
	sim_config base;
	sim_config_from_settings(&run->snap, &base);
	for (size_t d0 = 0; d0 < run->an.device_count && !st; d0 += 4) {
		replay_job jobs[4];
		size_t idx[4], n = 0;
		memset(jobs, 0, sizeof jobs);
		int guessed[4] = {0};
		for (size_t d = d0; d < run->an.device_count && d < d0 + 4; d++) {
			const an_device *dv = &run->an.devices[d];
			if (!dv->has_trace || dv->trace_events > AD_EXACT_REPLAY_EVENTS)
				continue;
			uint64_t limit = replay_limit(run, dv, &guessed[n]);
			jobs[n] =
			    (replay_job){&run->snap, dv->device, base, limit, {0}, {0}, MR_OK};
			idx[n++] = d;
		}
		run_jobs(jobs, n);
		/* A guessed cap (the reserved bytes at the OOM) is the lowest the recording allows;
		 * when the replay parts from the recording under it, try the highest (just short of
		 * reserved plus the failed segment), the other cap the recording allows. */
		for (size_t i = 0; i < n; i++) {
			const an_device *dv = &run->an.devices[idx[i]];
			if (!guessed[i] || jobs[i].st || jobs[i].res.matches_recording)
				continue;
			sim_result_free(&jobs[i].res);
			jobs[i].limit = dv->pool[AN_POOL_ALL].reserved + dv->oom.alloc_size - 1;
			replay_thread(&jobs[i]);
		}
		for (size_t i = 0; i < n; i++) {
			an_device *dv = &run->an.devices[idx[i]];
			const sim_result *r = &jobs[i].res;
			if (jobs[i].st && !st)
				st = mr_fail(err, jobs[i].st, "replay: %s", jobs[i].err.msg);
			if (!jobs[i].st) {
				fill_replay(&run->recorded[idx[i]], "recorded", r, jobs[i].limit);
				/* A replay that reproduced a complete trace knows the block sizes
				 * the backward walk could only estimate. */
				if (r->matches_recording && !r->approximate && !dv->truncated) {
					dv->peak_allocated = r->peak_allocated;
					dv->peak_reserved = r->peak_reserved;
					dv->peak_exact = 1;
				}
			}
			sim_result_free(&jobs[i].res);
		}
	}
	return st;
}

mr_status ad_replay_settings(const rp_run *run, ad_advice *a, mr_error *err)
{
	replay_job jobs[4];
	size_t n = 0, rec_of[4] = {SIZE_MAX, SIZE_MAX, SIZE_MAX, SIZE_MAX};
	mr_status st = MR_OK;
	if (!run->has_snapshot)
		return MR_OK;
	const an_device *dv = NULL;
	for (size_t i = 0; i < run->an.device_count && a->device >= 0; i++)
		if (run->an.devices[i].device == a->device)
			dv = &run->an.devices[i];
	if (!dv || !dv->has_trace)
		return MR_OK;
	int wanted = 0;
	for (size_t i = 0; i < a->rec_count; i++)
		wanted |= is_allocator_rec(&a->recs[i]) && a->recs[i].change;
	if (!wanted)
		return MR_OK;
	int guessed;
	uint64_t limit = replay_limit(run, dv, &guessed);
	/* The recorded settings' replay, unless ad_replay_recorded already ran it (perhaps with
	 * the other cap the recording allows). */
	const ad_replay *done = run->recorded ? &run->recorded[dv - run->an.devices] : NULL;
	if (done && !done->conf[0])
		done = NULL;
	if (done)
		limit = done->limit;
	if (guessed)
		snprintf(a->replay_note, sizeof a->replay_note,
		         "The cap is not in the snapshot; the replays use %llu bytes, a cap the "
		         "recording allows (between the reserved memory at the OOM and that plus "
		         "the failed segment).",
		         (unsigned long long)limit);
	memset(jobs, 0, sizeof jobs);
	sim_config base;
	sim_config_from_settings(&run->snap, &base);
	if (!done) {
		jobs[n] = (replay_job){&run->snap, dv->device, base, limit, {0}, {0}, MR_OK};
		n++;
	}
	for (size_t i = 0; i < a->rec_count && n < 4; i++) {
		const ad_recommendation *r = &a->recs[i];
		const char *eq = r->change ? strchr(r->change, '=') : NULL;
		if (!is_allocator_rec(r) || !eq)
			continue;
		mr_error perr = {0};
		if (sim_parse_conf(eq + 1, &base, &jobs[n].cfg, &perr))
			continue;
		jobs[n].s = &run->snap;
		jobs[n].device = dv->device;
		jobs[n].limit = limit;
		rec_of[n] = i;
		n++;
	}
	run_jobs(jobs, n);
	for (size_t i = 0; i < n; i++)
		if (jobs[i].st) {
			st = mr_fail(err, jobs[i].st, "replay: %s", jobs[i].err.msg);
			goto done;
		}
	/* replays[0] is the recorded settings'; rec_at[r] is the recommendation replays[r] tests */
	size_t rec_at[4] = {SIZE_MAX, SIZE_MAX, SIZE_MAX, SIZE_MAX};
	if (done)
		a->replays[a->replay_count++] = *done;
	for (size_t i = 0; i < n; i++) {
		const char *eq =
		    rec_of[i] != SIZE_MAX ? strchr(a->recs[rec_of[i]].change, '=') : NULL;
		rec_at[a->replay_count] = rec_of[i];
		fill_replay(&a->replays[a->replay_count++], eq ? eq + 1 : "recorded", &jobs[i].res,
		            limit);
	}
	if (!a->replays[0].matches) {
		snprintf(
		    a->replay_note, sizeof a->replay_note,
		    "The replay of the recorded settings parted from the recording at event %zu "
		    "(%s), so no prediction for other settings is shown.",
		    a->replays[0].divergence_event, a->replays[0].divergence);
		a->replay_count = 1;
		goto done;
	}
	for (size_t i = 1; i < a->replay_count; i++) {
		ad_recommendation *rec = &a->recs[rec_at[i]];
		const ad_replay *rp = &a->replays[i];
		char quote[256], b1[32], b2[32];
		snprintf(quote, sizeof quote,
		         " Replayed with %s: %s, peak reserved %s (recorded: %s%s).", rp->conf,
		         rp->oom ? "still out of memory" : "no OOM", sz(b1, rp->peak_reserved),
		         a->replays[0].oom ? "out of memory at " : "",
		         sz(b2, a->replays[0].peak_reserved));
		char *reason = append_text(rec->reason, quote);
		if (!reason) {
			st = mr_oom(err);
			goto done;
		}
		rec->reason = reason;
	}
	/* A setting the replay shows to fail or to need more memory is not advice. */
	for (size_t i = a->replay_count; i-- > 1;) {
		const ad_replay *rp = &a->replays[i];
		/* Against a run that ran out of memory, surviving is the test; against one that
		 * did not, needing more memory is worse. */
		int worse = rp->oom ||
		            (!a->replays[0].oom && rp->peak_reserved > a->replays[0].peak_reserved);
		if (!worse)
			continue;
		size_t k = rec_at[i];
		char b1[32], b2[32];
		/* findings grow from their current count: a capacity at least that large */
		ctx fc = {.a = a, .fcap = a->finding_count};
		finding(&fc, "setting_replayed_worse", AD_INFO,
		        "Replayed with %s the run would %s (peak reserved %s against %s recorded), "
		        "so it is not recommended here.",
		        rp->conf, rp->oom ? "still run out of memory" : "need more memory",
		        sz(b1, rp->peak_reserved), sz(b2, a->replays[0].peak_reserved));
		if (fc.failed) {
			st = mr_oom(err);
			goto done;
		}
		free(a->recs[k].title);
		free(a->recs[k].reason);
		free(a->recs[k].change);
		memmove(&a->recs[k], &a->recs[k + 1], (a->rec_count - k - 1) * sizeof *a->recs);
		a->rec_count--;
	}
	for (size_t i = 0; i < a->rec_count; i++)
		a->recs[i].rank = (int)i + 1;
done:
	for (size_t i = 0; i < n; i++)
		sim_result_free(&jobs[i].res);
	return st;
}
