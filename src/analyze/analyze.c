/* analyze.c: per-device numbers, layout, trace replay and live sites. */
#include "analyze/analyze.h"

#include <stdlib.h>
#include <string.h>

#include "base/addrmap.h"
#include "base/error.h"
#include "base/mem.h"
#include "base/units.h"
#include "sim/config.h"

/* ---- allocator rules ---- */

int an_frame_hidden(const md_snapshot *s, const md_frame *f)
{
	static const char *const names[] = {"unwind::unwind",    "CapturedTraceback::gather",
	                                    "gather_with_cpp",   "_start",
	                                    "__libc_start_main", "PyEval_",
	                                    "PyObject_",         "PyFunction_"};
	static const char *const files[] = {"core/boxing",
	                                    "/Register",
	                                    "/Redispatch",
	                                    "pythonrun.c",
	                                    "Modules/main.c",
	                                    "Objects/call.c",
	                                    "Objects/methodobject.c",
	                                    "pycore_ceval.h",
	                                    "ceval.c",
	                                    "cpython/abstract.h"};
	const char *name = md_str(s, f->name), *file = md_str(s, f->filename);
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (strstr(name, names[i]))
			return 1;
	for (size_t i = 0; i < sizeof files / sizeof *files; i++)
		if (strstr(file, files[i]))
			return 1;
	return 0;
}

int an_torch_internal(const char *f)
{
	return strstr(f, "/torch/") || strstr(f, "\\torch\\") || strncmp(f, "torch/", 6) == 0 ||
	       strstr(f, "/functorch/") || strstr(f, "/triton/");
}

static int python_file(const char *f)
{
	size_t n = strlen(f);
	return n > 3 && strcmp(f + n - 3, ".py") == 0;
}

const md_frame *an_user_frame(const md_snapshot *s, uint32_t stack)
{
	if (stack >= s->stack_count)
		return NULL;
	const md_stack *st = &s->stacks[stack];
	const md_frame *first_shown = NULL, *first_python = NULL;
	for (uint32_t k = 0; k < st->count; k++) {
		const md_frame *f = &s->frames[st->first + k];
		const char *file = md_str(s, f->filename);
		if (an_frame_hidden(s, f))
			continue;
		if (!first_shown)
			first_shown = f;
		if (!python_file(file))
			continue;
		if (!first_python)
			first_python = f;
		if (!an_torch_internal(file))
			return f;
	}
	return first_python ? first_python : first_shown;
}

const md_frame *an_site_frame(const md_snapshot *s, uint32_t stack)
{
	if (stack >= s->stack_count)
		return NULL;
	const md_stack *st = &s->stacks[stack];
	const md_frame *first = NULL;
	for (uint32_t i = 0; i < st->count; i++) {
		const md_frame *f = &s->frames[st->first + i];
		if (an_frame_hidden(s, f))
			continue;
		if (python_file(md_str(s, f->filename)))
			return f;
		if (!first)
			first = f;
	}
	return first;
}

/* ---- layout ---- */

static int is_private(const md_segment *seg)
{
	return seg->pool_id[0] || seg->pool_id[1];
}

static void add_segment(an_pool *p, const md_snapshot *s, const md_segment *seg)
{
	/* s->blocks is NULL in a snapshot without blocks: no arithmetic on it then */
	const md_block *b = seg->block_count ? s->blocks + seg->first_block : NULL;
	int split = seg->block_count > 1 && !seg->is_expandable;
	int any_active = 0;
	p->reserved += seg->total_size;
	p->segments++;
	for (size_t i = 0; i < seg->block_count; i++) {
		switch (b[i].state) {
		case MD_BLOCK_ACTIVE_ALLOCATED:
			p->allocated += b[i].size;
			/* fallthrough */
		case MD_BLOCK_ACTIVE_PENDING_FREE:
			p->active += b[i].size;
			p->requested += b[i].requested_size;
			p->active_blocks++;
			any_active = 1;
			if (b[i].size > b[i].requested_size)
				p->rounding_waste += b[i].size - b[i].requested_size;
			if (b[i].state == MD_BLOCK_ACTIVE_PENDING_FREE) {
				p->pending_free += b[i].size;
				p->pending_free_blocks++;
			}
			break;
		default:
			p->free_cached += b[i].size;
			p->free_blocks++;
			if (b[i].size > p->largest_free)
				p->largest_free = b[i].size;
			if (seg->block_count > 1 && b[i].size > p->largest_hole)
				p->largest_hole = b[i].size;
			if (split) {
				p->inactive_split += b[i].size;
				p->inactive_split_blocks++;
			}
		}
	}
	if (!any_active)
		p->whole_free += seg->total_size;
}

/* ---- trace replay ---- */

/* Estimated block size of a request whose block is gone (exact sizes need the allocator
 * replay of simulate.c): rounded the way the allocator rounds. */
static uint64_t block_estimate(const md_settings *cfg, uint64_t requested)
{
	return sim_round_divisions(cfg ? cfg->roundup_divisions : NULL, requested);
}

static void bucket_add(an_point *p, int first_visit, size_t i, const md_event *e, uint64_t alloc,
                       uint64_t reserved)
{
	if (first_visit) {
		p->allocated_min = p->allocated_max = alloc;
		p->reserved_min = p->reserved_max = reserved;
	} else {
		p->allocated_min = MR_MIN(p->allocated_min, alloc);
		p->allocated_max = MR_MAX(p->allocated_max, alloc);
		p->reserved_min = MR_MIN(p->reserved_min, reserved);
		p->reserved_max = MR_MAX(p->reserved_max, reserved);
	}
	p->first_event = i;
	p->time_us = e->time_us;
}

/* Walks the trace backwards from the snapshot, whose state is exact: blocks live at the end
 * keep their real sizes, blocks freed inside the window are estimated at their free, and
 * whatever is left when the walk reaches the first event was there before the window. */
static mr_status replay(const md_snapshot *s, const an_pool *all, an_device *dv,
                        const md_device *md, size_t max_points, mr_error *err)
{
	const md_event *ev = md->events;
	size_t n = md->event_count;
	am_map live = {0};
	mr_status st = MR_OK;
	for (size_t i = dv->segment_first; i < dv->segment_first + dv->segment_count; i++) {
		const md_segment *seg = &s->segments[i];
		for (size_t j = 0; j < seg->block_count; j++) {
			const md_block *b = &s->blocks[seg->first_block + j];
			if (b->state == MD_BLOCK_ACTIVE_ALLOCATED &&
			    am_put(&live, b->address, b->size))
				goto oom;
		}
	}
	size_t buckets = n < max_points ? n : max_points;
	dv->timeline = mr_alloc_array(buckets, sizeof *dv->timeline);
	if (!dv->timeline)
		goto oom;
	dv->timeline_count = buckets;
	uint64_t alloc = all->allocated, reserved = all->reserved, size;
	dv->peak_allocated = alloc;
	dv->peak_reserved = reserved;
	dv->peak_allocated_event = dv->peak_reserved_event = n - 1;
	size_t bucket = (size_t)-1;
	for (size_t i = n; i-- > 0;) {
		const md_event *e = &ev[i];
		/* Levels after event i. */
		if (alloc >= dv->peak_allocated) {
			dv->peak_allocated = alloc;
			dv->peak_allocated_event = i;
		}
		if (reserved >= dv->peak_reserved) {
			dv->peak_reserved = reserved;
			dv->peak_reserved_event = i;
		}
		size_t b = (size_t)((unsigned __int128)i * buckets / n);
		bucket_add(&dv->timeline[b], b != bucket, i, e, alloc, reserved);
		bucket = b;
		/* Undo event i. */
		switch (e->action) {
		case MD_ACT_ALLOC:
			if (!am_take(&live, e->addr, &size))
				size = block_estimate(&s->settings, e->size);
			alloc = alloc > size ? alloc - size : 0;
			break;
		case MD_ACT_FREE_REQUESTED:
			/* A block freed twice with no alloc between (a spliced or repeated trace)
			 * is counted once. */
			if (am_take(&live, e->addr, &size)) {
				if (am_put(&live, e->addr, size))
					goto oom;
				break;
			}
			size = block_estimate(&s->settings, e->size);
			if (am_put(&live, e->addr, size))
				goto oom;
			alloc += size;
			break;
		case MD_ACT_SEGMENT_ALLOC:
		case MD_ACT_SEGMENT_MAP:
			reserved = reserved > e->size ? reserved - e->size : 0;
			break;
		case MD_ACT_SEGMENT_FREE:
		case MD_ACT_SEGMENT_UNMAP: reserved += e->size; break;
		case MD_ACT_OOM:
			if (!dv->oom_events++)
				dv->last_oom_event = i;
			break;
		default: break;
		}
	}
	dv->initial_allocated = alloc;
	dv->initial_reserved = reserved;
	dv->blocks_before_window = live.count;
	if (alloc > dv->peak_allocated)
		dv->peak_allocated = alloc;
	if (reserved > dv->peak_reserved)
		dv->peak_reserved = reserved;
	/* The window starts with an empty allocator only when the recording began with the run. */
	dv->truncated = alloc > 0 || reserved > 0;
	goto done;
oom:
	st = mr_oom(err);
done:
	am_free(&live);
	return st;
}

/* ---- live sites ---- */

static int site_cmp(const void *a, const void *b)
{
	const an_site *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	return (x->stack > y->stack) - (x->stack < y->stack);
}

static mr_status live_sites(const md_snapshot *s, an_device *dv, mr_error *err)
{
	size_t nb = 0;
	for (size_t i = dv->segment_first; i < dv->segment_first + dv->segment_count; i++)
		nb += s->segments[i].block_count;
	an_site *sites = mr_alloc_array(nb, sizeof *sites);
	uint32_t *slot_of = mr_alloc_array(s->stack_count, sizeof *slot_of); /* site index + 1 */
	if (!sites || !slot_of) {
		free(sites);
		free(slot_of);
		return mr_oom(err);
	}
	size_t count = 0;
	for (size_t i = dv->segment_first; i < dv->segment_first + dv->segment_count; i++) {
		const md_segment *seg = &s->segments[i];
		for (size_t j = 0; j < seg->block_count; j++) {
			const md_block *b = &s->blocks[seg->first_block + j];
			if (b->state == MD_BLOCK_INACTIVE)
				continue;
			uint32_t k = b->stack < s->stack_count ? b->stack : 0;
			if (!slot_of[k]) {
				sites[count].stack = k;
				slot_of[k] = (uint32_t)++count;
			}
			an_site *site = &sites[slot_of[k] - 1];
			site->bytes += b->size;
			site->requested += b->requested_size;
			site->count++;
		}
	}
	free(slot_of);
	qsort(sites, count, sizeof *sites, site_cmp);
	dv->sites = sites;
	dv->site_count = count;
	return MR_OK;
}

/* ---- categories ---- */

const char *an_category_name(int cat)
{
	static const char *const names[AN_CAT_COUNT] = {"parameters", "gradients",
	                                                "optimizer_state", "activations", "other"};
	return cat >= 0 && cat < AN_CAT_COUNT ? names[cat] : "other";
}

static int path_has(const char *file, const char *dir)
{
	/* matches "torch/optim/" and its Windows spelling "torch\optim\" */
	size_t n = strlen(dir);
	for (const char *p = file; *p; p++) {
		size_t i = 0;
		while (i < n && p[i] && (p[i] == dir[i] || (dir[i] == '/' && p[i] == '\\')))
			i++;
		if (i == n)
			return 1;
	}
	return 0;
}

int an_category(const md_snapshot *s, uint32_t stack, int stacks_recorded)
{
	if (stack >= s->stack_count)
		return AN_CAT_OTHER;
	const md_stack *st = &s->stacks[stack];
	int params = 0, grads = 0, acts = 0, visible = 0;
	for (size_t i = 0; i < st->count; i++) {
		const md_frame *f = &s->frames[st->first + i];
		const char *name = md_str(s, f->name), *file = md_str(s, f->filename);
		if (an_frame_hidden(s, f))
			continue;
		visible++;
		if (path_has(file, "torch/optim/"))
			return AN_CAT_OPTIMIZER;
		if (strcmp(name, "_apply") == 0 || strcmp(name, "load_state_dict") == 0 ||
		    strcmp(name, "_load_from_state_dict") == 0 ||
		    strcmp(name, "reset_parameters") == 0 ||
		    path_has(file, "torch/nn/parameter.py") ||
		    (strcmp(name, "__init__") == 0 && path_has(file, "torch/nn/modules/")))
			params = 1;
		else if (path_has(file, "torch/autograd/") || strstr(name, "AccumulateGrad") ||
		         strcmp(name, "_engine_run_backward") == 0 ||
		         (strcmp(name, "backward") == 0 && path_has(file, "torch/_tensor.py")))
			grads = 1;
		else if (strcmp(name, "forward") == 0 || strstr(name, "::forward"))
			acts = 1;
	}
	if (params)
		return AN_CAT_PARAMETERS;
	if (grads)
		return AN_CAT_GRADIENTS;
	/* No Python frame in a snapshot that records them: allocated by the autograd engine's
	 * C++ threads during backward. */
	if (visible == 0 && stacks_recorded)
		return AN_CAT_GRADIENTS;
	if (acts)
		return AN_CAT_ACTIVATIONS;
	return AN_CAT_OTHER;
}

static void snapshot_categories(const md_snapshot *s, an_device *dv)
{
	for (size_t i = 0; i < dv->site_count; i++)
		dv->categories[an_category(s, dv->sites[i].stack, s->has_history)] +=
		    dv->sites[i].bytes;
}

/* ---- the OOM moment ---- */

static uint64_t segment_size_for(uint64_t size)
{
	if (size <= MR_MIB)
		return 2 * MR_MIB;
	if (size < 10 * MR_MIB)
		return 20 * MR_MIB;
	return (size + 2 * MR_MIB - 1) / (2 * MR_MIB) * (2 * MR_MIB);
}

static void oom_layout(const md_snapshot *s, const md_device *md, an_device *dv)
{
	if (!dv->oom_events)
		return;
	/* The last OOM of the trace is the one analysed. */
	size_t at = md->event_count;
	while (at-- > 0)
		if (md->events[at].action == MD_ACT_OOM)
			break;
	const md_event *e = &md->events[at];
	an_oom *o = &dv->oom;
	o->present = 1;
	o->event = at;
	o->requested = e->size;
	o->alloc_size = segment_size_for(e->size);
	o->device_free = e->addr;
	o->events_after = md->event_count - at - 1;
	int small = e->size <= MR_MIB;
	uint64_t stream = s->streams[e->stream];
	for (size_t i = dv->segment_first; i < dv->segment_first + dv->segment_count; i++) {
		const md_segment *seg = &s->segments[i];
		if ((seg->pool == MD_POOL_SMALL) != small || seg->stream != stream ||
		    seg->pool_id[0] || seg->pool_id[1] ||
		    (seg->is_expandable && !s->settings.expandable_segments))
			continue;
		for (size_t j = 0; j < seg->block_count; j++) {
			const md_block *b = &s->blocks[seg->first_block + j];
			if (b->state != MD_BLOCK_INACTIVE)
				continue;
			o->usable_free += b->size;
			o->usable_pieces++;
			o->usable_largest = MR_MAX(o->usable_largest, b->size);
		}
	}
}

/* ---- live memory at the peak: a forward pass to the peak event ---- */

typedef struct {
	uint64_t size;
	uint32_t stack;
} peak_block;

static mr_status peak_live(const md_snapshot *s, const md_device *md, an_device *dv, mr_error *err)
{
	am_map live = {0}; /* address -> index into blocks */
	peak_block *blocks = NULL;
	size_t nblocks = 0, cap = 0;
	uint32_t *slot_of = NULL; /* stack -> site index + 1 */
	mr_status st = MR_OK;
	uint64_t before = dv->initial_allocated, idx;
	int stacks_recorded = 0;
	for (size_t i = 0; i < md->event_count && !stacks_recorded; i++)
		stacks_recorded = md->events[i].stack != MD_NO_STACK;
	for (size_t i = 0; i <= dv->peak_allocated_event && i < md->event_count; i++) {
		const md_event *e = &md->events[i];
		if (e->action == MD_ACT_ALLOC) {
			if (MR_GROW(blocks, cap, nblocks + 1) || am_put(&live, e->addr, nblocks))
				goto oom;
			blocks[nblocks].size = block_estimate(&s->settings, e->size);
			blocks[nblocks].stack = e->stack < s->stack_count ? e->stack : 0;
			nblocks++;
		} else if (e->action == MD_ACT_FREE_REQUESTED && !am_take(&live, e->addr, &idx)) {
			uint64_t size = block_estimate(&s->settings, e->size);
			before =
			    before > size ? before - size : 0; /* allocated before the window */
		}
	}
	dv->peak_sites = mr_alloc_array(live.count ? live.count : 1, sizeof *dv->peak_sites);
	slot_of = mr_alloc_array(s->stack_count, sizeof *slot_of);
	if (!dv->peak_sites || !slot_of)
		goto oom;
	for (size_t i = 0; i < live.cap; i++) {
		if (!live.keys[i])
			continue;
		const peak_block *pb = &blocks[live.vals[i]];
		if (!slot_of[pb->stack]) {
			dv->peak_sites[dv->peak_site_count].stack = pb->stack;
			slot_of[pb->stack] = (uint32_t)++dv->peak_site_count;
		}
		an_site *site = &dv->peak_sites[slot_of[pb->stack] - 1];
		site->bytes += pb->size;
		site->count++;
	}
	qsort(dv->peak_sites, dv->peak_site_count, sizeof *dv->peak_sites, site_cmp);
	for (size_t i = 0; i < dv->peak_site_count; i++)
		dv->peak_categories[an_category(s, dv->peak_sites[i].stack, stacks_recorded)] +=
		    dv->peak_sites[i].bytes;
	dv->peak_categories[AN_CAT_OTHER] += before;
	dv->peak_categories_known = 1;
	goto done;
oom:
	st = mr_oom(err);
done:
	am_free(&live);
	free(blocks);
	free(slot_of);
	return st;
}

/* ---- growth ---- */

typedef struct {
	uint32_t stack;
	uint32_t count;
	size_t first, last; /* alloc indices (among allocs) */
	uint64_t min_gap, max_gap;
	int regular;
} site_rhythm;

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static int growth_site_cmp(const void *a, const void *b)
{
	const an_growth_site *x = a, *y = b;
	if (x->total_bytes != y->total_bytes)
		return x->total_bytes < y->total_bytes ? 1 : -1;
	return (x->stack > y->stack) - (x->stack < y->stack);
}

/* Iteration boundaries from the START of the annotation (torch.profiler.record_function) that
 * repeats most often on this device, at least 5 times: optimizer steps, usually. */
static size_t annotation_marks(const md_snapshot *s, const md_device *md, size_t **out,
                               mr_error *err, mr_status *st)
{
	uint32_t best = 0;
	size_t best_count = 0;
	if (md->event_count == 0 || md->events[0].time_us == MD_TIME_NONE)
		return 0;
	for (size_t i = 0; i < s->annotation_count; i++) {
		const md_annotation *a = &s->annotations[i];
		if (a->is_end || a->device != md->id || a->time_us == MD_TIME_NONE)
			continue;
		size_t c = 0;
		for (size_t j = 0; j < s->annotation_count; j++)
			c += !s->annotations[j].is_end && s->annotations[j].name == a->name &&
			     s->annotations[j].device == md->id;
		if (c > best_count || (c == best_count && a->name < best)) {
			best = a->name;
			best_count = c;
		}
		if (s->annotation_count > 4096)
			break; /* enough to find the common name; keep this quadratic scan bounded
			        */
	}
	if (best_count < 5)
		return 0;
	size_t *marks = mr_alloc_array(best_count, sizeof *marks), count = 0, e = 0;
	if (!marks) {
		*st = mr_oom(err);
		return 0;
	}
	for (size_t i = 0; i < s->annotation_count; i++) {
		const md_annotation *a = &s->annotations[i];
		if (a->is_end || a->name != best || a->device != md->id)
			continue;
		while (e < md->event_count && md->events[e].time_us < a->time_us)
			e++;
		if (e < md->event_count && (count == 0 || marks[count - 1] < e))
			marks[count++] = e;
	}
	*out = marks;
	return count;
}

/* Iteration boundaries (event indices, ascending) from optimizer-step annotations when the
 * trace has times, else from the most frequent allocation site whose occurrences are evenly
 * spaced. Returns the count, or 0. *out is malloc'd. */
static size_t iteration_marks(const md_snapshot *s, const md_device *md, uint32_t *anchor,
                              size_t **out, mr_error *err, mr_status *st)
{
	size_t n = md->event_count, count = 0;
	*anchor = 0;
	*out = NULL;
	count = annotation_marks(s, md, out, err, st);
	if (count || *st)
		return count;
	site_rhythm *r = mr_alloc_array(s->stack_count, sizeof *r);
	if (!r) {
		*st = mr_oom(err);
		return 0;
	}
	size_t allocs = 0;
	for (size_t i = 0; i < n; i++) {
		const md_event *e = &md->events[i];
		if (e->action != MD_ACT_ALLOC)
			continue;
		site_rhythm *x = &r[e->stack < s->stack_count ? e->stack : 0];
		if (x->count) {
			uint64_t gap = allocs - x->last;
			if (x->count == 1 || gap < x->min_gap)
				x->min_gap = gap;
			if (gap > x->max_gap)
				x->max_gap = gap;
		} else {
			x->first = allocs;
		}
		x->last = allocs;
		x->count++;
		allocs++;
	}
	/* The anchor: evenly spaced (every gap within 25% of each other), at least 4 times, and
	 * of those the one that repeats most often, so an iteration is as short as it can be. */
	uint32_t best = 0, best_count = 0;
	for (uint32_t k = 1; k < s->stack_count; k++) {
		const site_rhythm *x = &r[k];
		if (x->count < 4 || x->min_gap == 0)
			continue;
		if (x->max_gap * 4 > x->min_gap * 5)
			continue;
		/* A loop spans the run; setup (model creation, parameter copies) does not. */
		if ((x->last - x->first) * 2 < allocs || an_category(s, k, 0) == AN_CAT_PARAMETERS)
			continue;
		if (x->count > best_count) {
			best = k;
			best_count = x->count;
		}
	}
	free(r);
	if (!best)
		return 0;
	size_t *marks = mr_alloc_array(best_count, sizeof *marks);
	if (!marks) {
		*st = mr_oom(err);
		return 0;
	}
	for (size_t i = 0; i < n && count < best_count; i++)
		if (md->events[i].action == MD_ACT_ALLOC && md->events[i].stack == best)
			marks[count++] = i;
	*anchor = best;
	*out = marks;
	return count;
}

static mr_status growth(const md_snapshot *s, const md_device *md, an_device *dv, mr_error *err)
{
	an_growth *g = &dv->growth;
	mr_status st = MR_OK;
	size_t *marks = NULL;
	uint64_t *per_iter = NULL;
	am_map alive = {0}; /* live-at-end block address -> size */
	uint64_t *site_bytes = NULL;
	size_t k = iteration_marks(s, md, &g->anchor_stack, &marks, err, &st);
	if (st || k < 5)
		goto done;
	g->found = 1;
	g->iterations = k;
	/* Did any allocation come from backward? Each stack is classified once. */
	uint8_t *tested = mr_alloc_array(s->stack_count, 1);
	if (!tested)
		goto oom;
	for (size_t i = 0; i < md->event_count && !g->backward_seen; i++) {
		uint32_t stack = md->events[i].stack;
		if (md->events[i].action != MD_ACT_ALLOC || stack == MD_NO_STACK ||
		    stack >= s->stack_count || tested[stack])
			continue;
		tested[stack] = 1;
		g->backward_seen = an_category(s, stack, 0) == AN_CAT_GRADIENTS;
	}
	free(tested);
	for (size_t i = dv->segment_first; i < dv->segment_first + dv->segment_count; i++) {
		const md_segment *seg = &s->segments[i];
		for (size_t j = 0; j < seg->block_count; j++) {
			const md_block *b = &s->blocks[seg->first_block + j];
			if (b->state == MD_BLOCK_ACTIVE_ALLOCATED &&
			    am_put(&alive, b->address, b->size))
				goto oom;
		}
	}
	/* Iteration j spans [marks[j], marks[j+1]); the middle ones are 1 .. k-2 (the first
	 * holds warm-up, the last is still running at the snapshot). */
	per_iter = mr_alloc_array(k, sizeof *per_iter);
	site_bytes = mr_alloc_array(s->stack_count, sizeof *site_bytes);
	if (!per_iter || !site_bytes)
		goto oom;
	size_t it = k; /* iteration of the event being scanned, walking backwards */
	for (size_t i = md->event_count; i-- > marks[0];) {
		while (it > 0 && marks[it - 1] > i)
			it--;
		const md_event *e = &md->events[i];
		uint64_t size;
		if (e->action != MD_ACT_ALLOC || !am_take(&alive, e->addr, &size))
			continue;
		size_t iter = it - 1;
		if (iter >= 1 && iter + 1 < k) {
			per_iter[iter] += size;
			site_bytes[e->stack < s->stack_count ? e->stack : 0] += size;
		}
	}
	g->middle_iterations = k - 2;
	uint64_t *mid = per_iter + 1;
	for (size_t j = 0; j < g->middle_iterations; j++)
		if (mid[j] > 0)
			g->growing_iterations++;
	qsort(mid, g->middle_iterations, sizeof *mid, u64_cmp);
	g->per_iteration = mid[g->middle_iterations / 2];
	size_t nsites = 0;
	for (uint32_t j = 0; j < s->stack_count; j++)
		nsites += site_bytes[j] > 0;
	g->sites = mr_alloc_array(nsites, sizeof *g->sites);
	if (!g->sites)
		goto oom;
	for (uint32_t j = 0; j < s->stack_count; j++) {
		if (!site_bytes[j])
			continue;
		an_growth_site *gs = &g->sites[g->site_count++];
		gs->stack = j;
		gs->total_bytes = site_bytes[j];
		gs->bytes_per_iteration = site_bytes[j] / g->middle_iterations;
	}
	qsort(g->sites, g->site_count, sizeof *g->sites, growth_site_cmp);
	goto done;
oom:
	st = mr_oom(err);
done:
	free(marks);
	free(per_iter);
	free(site_bytes);
	am_free(&alive);
	return st;
}

mr_status an_analyze(const md_snapshot *s, size_t max_points, an_result *out, mr_error *err)
{
	memset(out, 0, sizeof *out);
	if (!max_points)
		max_points = 2000;
	mr_status st = MR_OK;
	out->devices = mr_alloc_array(s->device_count, sizeof *out->devices);
	if (!out->devices)
		return mr_oom(err);
	out->device_count = s->device_count;
	size_t seg = 0;
	for (size_t d = 0; d < s->device_count; d++) {
		an_device *dv = &out->devices[d];
		const md_device *md = &s->devices[d];
		dv->device = md->id;
		while (seg < s->segment_count && s->segments[seg].device < md->id)
			seg++;
		dv->segment_first = seg;
		while (seg < s->segment_count && s->segments[seg].device == md->id) {
			const md_segment *sg = &s->segments[seg];
			add_segment(&dv->pool[AN_POOL_ALL], s, sg);
			add_segment(
			    &dv->pool[sg->pool == MD_POOL_SMALL ? AN_POOL_SMALL : AN_POOL_LARGE], s,
			    sg);
			if (is_private(sg))
				add_segment(&dv->pool[AN_POOL_PRIVATE], s, sg);
			if (sg->is_expandable)
				dv->expandable = 1;
			seg++;
		}
		dv->segment_count = seg - dv->segment_first;
		if (s->settings.expandable_segments)
			dv->expandable = 1;
		const an_pool *all = &dv->pool[AN_POOL_ALL];
		dv->fragmentation = all->free_cached
		                        ? 1.0 - (double)all->largest_free / (double)all->free_cached
		                        : 0.0;
		dv->trace_events = md->event_count;
		dv->has_trace = md->event_count > 0;
		if (dv->has_trace && (st = replay(s, all, dv, md, max_points, err)))
			break;
		if ((st = live_sites(s, dv, err)))
			break;
		snapshot_categories(s, dv);
		if (!dv->has_trace)
			continue;
		oom_layout(s, md, dv);
		if ((st = peak_live(s, md, dv, err)) || (st = growth(s, md, dv, err)))
			break;
	}
	if (st)
		an_free(out);
	return st;
}

void an_free(an_result *r)
{
	for (size_t i = 0; i < r->device_count; i++) {
		free(r->devices[i].timeline);
		free(r->devices[i].sites);
		free(r->devices[i].growth.sites);
		free(r->devices[i].peak_sites);
	}
	free(r->devices);
	memset(r, 0, sizeof *r);
}
