/* growth.c: live memory still held at the snapshot, by the iteration that allocated it. */
#include "analyze/growth.h"

#include <stdlib.h>
#include <string.h>

#include "analyze/frames.h"
#include "base/addrmap.h"
#include "base/error.h"
#include "base/mem.h"

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

mr_status an_growth_of(const md_snapshot *s, const md_device *md, an_device *dv, mr_error *err)
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
