/* diff.c: allocation-site comparison of two runs. */
#include "report/diff.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/mem.h"
#include "report/view.h"

static const char *const metric_keys[DF_METRIC_COUNT] = {
    "reserved_bytes",       "allocated_bytes",     "active_bytes",        "requested_bytes",
    "inactive_split_bytes", "peak_reserved_bytes", "peak_allocated_bytes"};

const char *df_peak_key(int metric)
{
	static const char *const keys[DF_PK_COUNT] = {
	    "reserved_bytes", "allocated_bytes", "free_cached_bytes", "largest_free_block_bytes"};
	return metric >= 0 && metric < DF_PK_COUNT ? keys[metric] : "";
}

double df_peak_fragmentation(const df_result *d, int side)
{
	const uint64_t *v = d->peak_value[side];
	return v[DF_PK_FREE_CACHED]
	           ? 1.0 - (double)v[DF_PK_LARGEST_FREE] / (double)v[DF_PK_FREE_CACHED]
	           : 0.0;
}

const char *df_metric_key(int metric)
{
	return metric >= 0 && metric < DF_METRIC_COUNT ? metric_keys[metric] : "";
}

static int is_python(const char *f)
{
	size_t n = strlen(f);
	return n > 3 && strcmp(f + n - 3, ".py") == 0;
}

/* ---- sites ------------------------------------------------------------------------------- */

typedef struct {
	char *key; /* "file\x1fline\x1fname", or "" for blocks without a usable frame */
	uint64_t bytes[2], count[2];
	/* The stack holding the most of the site's bytes, preferring the after run. */
	int ex_side; /* -1: none yet */
	uint32_t ex_stack;
	uint64_t ex_bytes;
	uint32_t ex_frame; /* index of the site frame in md_snapshot.frames, UINT32_MAX: none */
} site;

typedef struct {
	site *items;
	size_t count, cap;
	uint32_t *slots; /* index + 1 */
	size_t slot_cap;
} site_table;

static uint64_t hash_str(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

static int table_rehash(site_table *t)
{
	size_t cap = t->slot_cap ? t->slot_cap * 2 : 256;
	uint32_t *slots = calloc(cap, sizeof *slots);
	if (!slots)
		return -1;
	for (size_t i = 0; i < t->count; i++) {
		size_t j = hash_str(t->items[i].key) & (cap - 1);
		while (slots[j])
			j = (j + 1) & (cap - 1);
		slots[j] = (uint32_t)i + 1;
	}
	free(t->slots);
	t->slots = slots;
	t->slot_cap = cap;
	return 0;
}

/* Finds or adds the site of key (which the table takes over when it adds). NULL on OOM. */
static site *table_get(site_table *t, char *key, int *took)
{
	*took = 0;
	if ((t->count + 1) * 2 > t->slot_cap && table_rehash(t))
		return NULL;
	size_t j = hash_str(key) & (t->slot_cap - 1);
	while (t->slots[j]) {
		site *s = &t->items[t->slots[j] - 1];
		if (strcmp(s->key, key) == 0)
			return s;
		j = (j + 1) & (t->slot_cap - 1);
	}
	if (t->count >= UINT32_MAX - 1 || MR_GROW(t->items, t->cap, t->count + 1))
		return NULL;
	site *s = &t->items[t->count];
	memset(s, 0, sizeof *s);
	s->key = key;
	s->ex_side = -1;
	s->ex_frame = UINT32_MAX;
	t->slots[j] = (uint32_t)++t->count;
	*took = 1;
	return s;
}

/* The site frame of a stack (an_user_frame), as an index into s->frames or UINT32_MAX. */
static uint32_t site_frame(const md_snapshot *s, uint32_t stack)
{
	const md_frame *f = an_user_frame(s, stack);
	return f ? (uint32_t)(f - s->frames) : UINT32_MAX;
}

static char *frame_key(const md_snapshot *s, uint32_t fi)
{
	if (fi == UINT32_MAX)
		return mr_strndup("", 0);
	const md_frame *f = &s->frames[fi];
	mr_buf b = {0};
	mr_buf_printf(&b, "%s\x1f%d\x1f%s", md_str(s, f->filename), (int)f->line,
	              md_str(s, f->name));
	if (b.failed) {
		mr_buf_free(&b);
		return NULL;
	}
	return b.data;
}

/* The site of the autograd engine's blocks that no backward() call owns. */
#define AUTOGRAD_KEY "\x1f\x1f(autograd backward)"

/* Finds or adds the site of frame fi of s (UINT32_MAX: none; autograd: the engine's without a
 * call). NULL when memory runs out. */
static site *site_of_frame(site_table *t, const md_snapshot *s, uint32_t fi, int autograd)
{
	char *key = autograd && fi == UINT32_MAX ? mr_strdup(AUTOGRAD_KEY) : frame_key(s, fi);
	int took = 0;
	site *x = key ? table_get(t, key, &took) : NULL;
	if (!took)
		free(key);
	return x;
}

/* The moment of one device that a comparison reads: its peak, or its snapshot (the end). */
static const an_moment *moment_at(const rp_report *run, const an_device *dv, int at_peak)
{
	const an_moments *m = rp_moments(run, dv);
	size_t k = !m ? AN_NO_MOMENT : at_peak ? m->peak : m->snapshot;
	return k == AN_NO_MOMENT ? NULL : &m->moments[k];
}

/* Adds one run's allocated blocks at the moment to the table: each block by the user frame
 * of its stack, the autograd engine's by that of its backward() call. */
static mr_status add_run(site_table *t, const rp_view *view, int side, int at_peak, mr_error *err)
{
	const rp_report *run = view->report;
	if (!run->ev.has_snapshot)
		return MR_OK;
	const md_snapshot *s = &run->ev.snap;
	/* site index + 1 per stack and per backward() call, so each is resolved once; bytes
	 * per stack (for the example stack) */
	size_t ns = s->stack_count ? s->stack_count : 1;
	uint32_t *site_of = calloc(ns, sizeof *site_of), *call_site = calloc(ns, sizeof *site_of);
	uint64_t *stack_bytes = calloc(ns, sizeof *stack_bytes);
	mr_status st = MR_OK;
	if (!site_of || !call_site || !stack_bytes)
		goto oom;
	for (size_t d = 0; d < view->device_count; d++) {
		const an_moment *mo = moment_at(run, view->devices[d], at_peak);
		for (size_t j = 0; mo && j < mo->block_count; j++) {
			const md_block *b = &mo->blocks[j];
			if (b->state != MD_BLOCK_ACTIVE_ALLOCATED)
				continue;
			uint32_t owner = mo->owners[j];
			int autograd = owner != AN_OWNER_NONE;
			uint32_t stack = autograd ? (owner < s->stack_count ? owner : MD_NO_STACK)
			                 : b->stack < s->stack_count ? b->stack
			                                             : 0;
			uint32_t *slot = autograd ? &call_site[stack] : &site_of[stack];
			if (!*slot) {
				uint32_t fi = stack == MD_NO_STACK && autograd
				                  ? UINT32_MAX
				                  : site_frame(s, stack);
				site *x = site_of_frame(t, s, fi, autograd);
				if (!x)
					goto oom;
				*slot = (uint32_t)(x - t->items) + 1;
			}
			site *x = &t->items[*slot - 1];
			x->bytes[side] += b->size;
			x->count[side]++;
			stack_bytes[stack] += b->size;
		}
	}
	for (size_t k = 0; k < ns; k++) {
		uint32_t slots[2] = {site_of[k], call_site[k]};
		for (int i = 0; i < 2; i++) {
			if (!slots[i])
				continue;
			site *x = &t->items[slots[i] - 1];
			if (side > x->ex_side ||
			    (side == x->ex_side && stack_bytes[k] > x->ex_bytes)) {
				x->ex_side = side;
				x->ex_stack = (uint32_t)k;
				x->ex_bytes = stack_bytes[k];
				x->ex_frame = site_frame(s, (uint32_t)k);
			}
		}
	}
	goto done;
oom:
	st = mr_oom(err);
done:
	free(site_of);
	free(call_site);
	free(stack_bytes);
	return st;
}

static int change_cmp(const void *a, const void *b)
{
	const df_change *x = a, *y = b;
	if (x->bytes_delta != y->bytes_delta)
		return x->bytes_delta > y->bytes_delta ? -1 : 1;
	if (x->count_delta != y->count_delta)
		return x->count_delta > y->count_delta ? -1 : 1;
	return strcmp(x->site, y->site);
}

static mr_status copy_frame(const md_snapshot *s, const md_frame *f, df_frame *out, mr_error *err)
{
	const char *file = md_str(s, f->filename), *name = md_str(s, f->name);
	out->filename = mr_strdup(file);
	out->name = mr_strdup(name);
	out->line = f->line;
	return out->filename && out->name ? MR_OK : mr_oom(err);
}

/* Fills the change's strings from the site's example stack. */
static mr_status describe(const site *x, const rp_report *const runs[2], size_t max_frames,
                          df_change *c, mr_error *err)
{
	const md_snapshot *s = &runs[x->ex_side]->ev.snap;
	mr_status st;
	if (x->ex_frame == UINT32_MAX) {
		c->where.filename = mr_strndup("", 0);
		c->where.name = mr_strndup("", 0);
		c->site = mr_strdup(strcmp(x->key, AUTOGRAD_KEY) == 0 ? "autograd (backward)"
		                                                      : "(no stack recorded)");
		if (!c->where.filename || !c->where.name || !c->site)
			return mr_oom(err);
	} else {
		const md_frame *f = &s->frames[x->ex_frame];
		if ((st = copy_frame(s, f, &c->where, err)))
			return st;
		mr_buf b = {0};
		mr_buf_printf(&b, "%s:%d in %s", c->where.filename, (int)f->line, c->where.name);
		if (b.failed) {
			mr_buf_free(&b);
			return mr_oom(err);
		}
		c->site = b.data;
	}
	if (x->ex_stack >= s->stack_count)
		return MR_OK;
	const md_stack *stk = &s->stacks[x->ex_stack];
	/* Python frames when the stack has any (C++ frames of stacks="all" are noise here). */
	int any_python = 0;
	for (uint32_t k = 0; k < stk->count && !any_python; k++)
		any_python = is_python(md_str(s, s->frames[stk->first + k].filename));
	c->frames = mr_alloc_array(MR_MIN((size_t)stk->count, max_frames) + 1, sizeof *c->frames);
	if (!c->frames)
		return mr_oom(err);
	for (uint32_t k = 0; k < stk->count && c->frame_count < max_frames; k++) {
		const md_frame *f = &s->frames[stk->first + k];
		if (an_frame_hidden(s, f) || (any_python && !is_python(md_str(s, f->filename))))
			continue;
		if ((st = copy_frame(s, f, &c->frames[c->frame_count], err))) {
			free(c->frames[c->frame_count].filename);
			free(c->frames[c->frame_count].name);
			return st;
		}
		c->frame_count++;
	}
	return MR_OK;
}

static void side_totals(const rp_view *view, uint64_t *v, int *known)
{
	for (int m = 0; m < DF_METRIC_COUNT; m++) {
		v[m] = 0;
		known[m] = 1;
	}
	for (size_t i = 0; i < view->device_count; i++) {
		const an_device *dv = view->devices[i];
		const an_pool *p = &dv->pool[AN_POOL_ALL];
		v[DF_RESERVED] += p->reserved;
		v[DF_ALLOCATED] += p->allocated;
		v[DF_ACTIVE] += p->active;
		v[DF_REQUESTED] += p->requested;
		v[DF_INACTIVE_SPLIT] += p->inactive_split;
		if (dv->has_trace) {
			v[DF_PEAK_RESERVED] += dv->peak_reserved;
			v[DF_PEAK_ALLOCATED] += dv->peak_allocated;
		} else {
			known[DF_PEAK_RESERVED] = known[DF_PEAK_ALLOCATED] = 0;
		}
	}
	if (!view->device_count)
		for (int m = 0; m < DF_METRIC_COUNT; m++)
			known[m] = view->report->ev.has_snapshot && m < DF_PEAK_RESERVED;
}

/* The layout at each device's peak, summed: known when every device shown has one. */
static void peak_totals(const rp_view *view, df_result *out, int side)
{
	uint64_t *v = out->peak_value[side];
	out->peak_known[side] = view->device_count > 0;
	for (size_t i = 0; i < view->device_count; i++) {
		const an_moment *mo = moment_at(view->report, view->devices[i], 1);
		if (!mo) {
			out->peak_known[side] = 0;
			continue;
		}
		v[DF_PK_RESERVED] += mo->totals.reserved;
		v[DF_PK_ALLOCATED] += mo->totals.allocated;
		v[DF_PK_FREE_CACHED] += mo->totals.free_cached;
		v[DF_PK_LARGEST_FREE] = MR_MAX(v[DF_PK_LARGEST_FREE], mo->totals.largest_free);
	}
}

/* The sites whose bytes or blocks differ between the two sides of t. */
static mr_status changes_of(const site_table *t, const rp_report *const runs[2], size_t max_frames,
                            df_change **out, size_t *count, mr_error *err)
{
	*out = mr_alloc_array(t->count ? t->count : 1, sizeof **out);
	*count = 0;
	if (!*out)
		return mr_oom(err);
	for (size_t i = 0; i < t->count; i++) {
		const site *x = &t->items[i];
		if (x->bytes[0] == x->bytes[1] && x->count[0] == x->count[1])
			continue;
		df_change *c = &(*out)[(*count)++];
		memset(c, 0, sizeof *c);
		c->bytes_before = x->bytes[0];
		c->bytes_after = x->bytes[1];
		c->count_before = x->count[0];
		c->count_after = x->count[1];
		c->bytes_delta = (int64_t)(x->bytes[1] - x->bytes[0]);
		c->count_delta = (int64_t)(x->count[1] - x->count[0]);
		mr_status st = describe(x, runs, max_frames, c, err);
		if (st)
			return st;
	}
	qsort(*out, *count, sizeof **out, change_cmp);
	return MR_OK;
}

static void table_free(site_table *t)
{
	for (size_t i = 0; i < t->count; i++)
		free(t->items[i].key);
	free(t->items);
	free(t->slots);
	memset(t, 0, sizeof *t);
}

/* ---- allocator settings ---- */

static const char *setting_of(const rp_report *run, const char *key)
{
	const md_snapshot *s = &run->ev.snap;
	if (!run->ev.has_snapshot || !s->settings.present)
		return NULL;
	for (size_t i = 0; i < s->settings.raw_count; i++)
		if (strcmp(md_str(s, s->settings.raw[i].key), key) == 0)
			return md_str(s, s->settings.raw[i].value);
	return NULL;
}

/* Adds key when the two runs record it differently. Returns 0, -1 when memory runs out. */
static int add_setting(df_result *out, const rp_report *const runs[2], const char *key)
{
	const char *a = setting_of(runs[0], key), *b = setting_of(runs[1], key);
	for (size_t i = 0; i < out->setting_count; i++)
		if (strcmp(out->settings[i].key, key) == 0)
			return 0;
	if ((!a && !b) || (a && b && strcmp(a, b) == 0))
		return 0;
	if (MR_GROW(out->settings, out->setting_cap, out->setting_count + 1))
		return -1;
	df_setting *d = &out->settings[out->setting_count++];
	d->key = mr_strdup(key);
	d->before = a ? mr_strdup(a) : NULL;
	d->after = b ? mr_strdup(b) : NULL;
	return d->key && (!a || d->before) && (!b || d->after) ? 0 : -1;
}

/* Every recorded allocator setting that differs, in the order the runs record them. */
static mr_status settings_changes(df_result *out, const rp_report *const runs[2], mr_error *err)
{
	for (int side = 0; side < 2; side++) {
		const md_snapshot *s = &runs[side]->ev.snap;
		if (!runs[side]->ev.has_snapshot || !s->settings.present)
			continue;
		for (size_t i = 0; i < s->settings.raw_count; i++)
			if (add_setting(out, runs, md_str(s, s->settings.raw[i].key)))
				return mr_oom(err);
	}
	return MR_OK;
}

mr_status df_compute(const rp_report *before, const rp_report *after, int device, df_result *out,
                     mr_error *err)
{
	memset(out, 0, sizeof *out);
	out->max_frames = 32;
	const rp_report *const runs[2] = {before, after};
	rp_view views[2] = {{0}, {0}};
	site_table end = {0}, peak = {0};
	mr_status st = MR_OK;
	for (int side = 0; side < 2; side++) {
		if ((st = rp_view_init(&views[side], runs[side], device, err)))
			goto done;
		side_totals(&views[side], out->value[side], out->known[side]);
		peak_totals(&views[side], out, side);
		if ((st = add_run(&end, &views[side], side, 0, err)) ||
		    (st = add_run(&peak, &views[side], side, 1, err)))
			goto done;
	}
	if ((st =
	         changes_of(&end, runs, out->max_frames, &out->changes, &out->change_count, err)) ||
	    (st = changes_of(&peak, runs, out->max_frames, &out->peak_changes,
	                     &out->peak_change_count, err)))
		goto done;
	st = settings_changes(out, runs, err);
done:
	rp_view_free(&views[0]);
	rp_view_free(&views[1]);
	table_free(&end);
	table_free(&peak);
	if (st)
		df_free(out);
	return st;
}

static void changes_free(df_change *changes, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		df_change *c = &changes[i];
		free(c->site);
		free(c->where.filename);
		free(c->where.name);
		for (size_t k = 0; k < c->frame_count; k++) {
			free(c->frames[k].filename);
			free(c->frames[k].name);
		}
		free(c->frames);
	}
	free(changes);
}

void df_free(df_result *d)
{
	changes_free(d->changes, d->change_count);
	changes_free(d->peak_changes, d->peak_change_count);
	for (size_t i = 0; i < d->setting_count; i++) {
		free(d->settings[i].key);
		free(d->settings[i].before);
		free(d->settings[i].after);
	}
	free(d->settings);
	memset(d, 0, sizeof *d);
}
