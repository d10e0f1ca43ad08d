/* page_data.c: the memreport-page/1 data block of the interactive page. */
#include "render/page_data.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/frames.h"
#include "base/buf.h"
#include "base/error.h"
#include "base/escape.h"
#include "base/mem.h"
#include "render/redact.h"

/* ---- the shared tables: strings, frames, stacks, in order of first reference ---- */

/* `tab` is a scratch model used only for its interning: its string table holds the page's
 * strings (after --redact-paths), and its stacks are the page's frames (one-frame stacks) and
 * stacks, whose frames carry the run's own string ids. Each tab id maps to a page id + 1 in
 * order of first reference. */
typedef struct {
	const md_snapshot *s;
	const uint8_t *kinds; /* per frame of s: AN_FK_* */
	const rd_options *opt;
	md_snapshot tab;
	uint32_t *of_stack; /* per run stack: 0 unread, 1 no kept frame, else page stack id + 2 */
	uint32_t *of_name, *of_path; /* per run string, as a name / a path: page id + 1, 0 unread */
	uint32_t *str_id, *frame_id, *stack_id; /* per tab string / tab stack: page id + 1 */
	size_t str_cap, frame_cap, stack_cap;
	size_t strings, frames, stacks; /* page ids given */
	mr_buf str_json, frame_json, stack_json;
	int failed;
} pd_tables;

/* Grows a tab id -> page id map to hold id. */
static int map_fit(uint32_t **map, size_t *cap, size_t id)
{
	if (id < *cap)
		return 0;
	size_t old = *cap;
	if (MR_GROW(*map, *cap, id + 1))
		return -1;
	memset(*map + old, 0, (*cap - old) * sizeof **map);
	return 0;
}

static long long page_string(pd_tables *t, const char *text)
{
	uint32_t id = md_intern(&t->tab, text, strlen(text));
	if (id == UINT32_MAX || map_fit(&t->str_id, &t->str_cap, id)) {
		t->failed = 1;
		return 0;
	}
	if (!t->str_id[id]) {
		t->str_id[id] = (uint32_t)++t->strings;
		mr_buf_puts(&t->str_json, t->strings > 1 ? "," : "");
		mr_json_str(&t->str_json, text);
	}
	return t->str_id[id] - 1;
}

/* The page string of run string `id`, a name or (path) a file as --redact-paths writes it;
 * each run string is read once, however many frames share it. */
static long long run_string(pd_tables *t, uint32_t id, int path)
{
	uint32_t *memo = path ? t->of_path : t->of_name;
	if (id < t->s->strings.count && memo[id])
		return (long long)memo[id] - 1;
	char pbuf[4096];
	const char *text = md_str(t->s, id);
	long long v = page_string(t, path ? rd_path(t->opt, text, pbuf, sizeof pbuf) : text);
	if (id < t->s->strings.count)
		memo[id] = (uint32_t)v + 1;
	return v;
}

static long long page_frame(pd_tables *t, const md_frame *f)
{
	uint32_t id = md_intern_stack(&t->tab, f, 1);
	if (id == UINT32_MAX || map_fit(&t->frame_id, &t->frame_cap, id)) {
		t->failed = 1;
		return 0;
	}
	if (!t->frame_id[id]) {
		t->frame_id[id] = (uint32_t)++t->frames;
		long long name = run_string(t, f->name, 0);
		long long file = run_string(t, f->filename, 1);
		if (t->frames > 1)
			mr_buf_putc(&t->frame_json, ',');
		mr_buf_i64(&t->frame_json, name);
		mr_buf_putc(&t->frame_json, ',');
		mr_buf_i64(&t->frame_json, file);
		mr_buf_putc(&t->frame_json, ',');
		mr_buf_i64(&t->frame_json, f->line);
	}
	return t->frame_id[id] - 1;
}

/* Frames the page drops: the viewer's hidden ones and the caching allocator's own. */
static int dropped(uint8_t kind)
{
	return !(kind & AN_FK_SHOWN) || (kind & AN_FK_ALLOCATOR);
}

/* Writes a new page stack: [user, lib, frames...]. */
static void write_stack(pd_tables *t, const md_frame *kept, const uint8_t *kind, size_t count)
{
	long long user = -1, lib = -1;
	for (size_t i = 0; i < count; i++) {
		if (!(kind[i] & AN_FK_PYTHON))
			continue;
		if (kind[i] & AN_FK_LIBRARY) {
			if (lib < 0)
				lib = (long long)i;
		} else if (user < 0) {
			user = (long long)i;
		}
	}
	mr_buf_puts(&t->stack_json, t->stacks > 1 ? ",[" : "[");
	mr_buf_i64(&t->stack_json, user);
	mr_buf_putc(&t->stack_json, ',');
	mr_buf_i64(&t->stack_json, lib);
	for (size_t i = 0; i < count; i++) {
		mr_buf_putc(&t->stack_json, ',');
		mr_buf_i64(&t->stack_json, page_frame(t, &kept[i]));
	}
	mr_buf_puts(&t->stack_json, "]");
}

/* The page stack id of run stack `stack`, -1 when it keeps no frame. */
static long long page_stack(pd_tables *t, uint32_t stack)
{
	const md_snapshot *s = t->s;
	if (stack >= s->stack_count)
		return -1;
	if (t->of_stack[stack])
		return (long long)t->of_stack[stack] - 2;
	md_frame kept[PD_MAX_FRAMES];
	uint8_t kind[PD_MAX_FRAMES];
	size_t count = 0;
	const md_stack *st = &s->stacks[stack];
	for (uint32_t k = 0; k < st->count && count < PD_MAX_FRAMES; k++)
		if (!dropped(t->kinds[st->first + k])) {
			kind[count] = t->kinds[st->first + k];
			kept[count++] = s->frames[st->first + k];
		}
	if (!count) {
		t->of_stack[stack] = 1;
		return -1;
	}
	uint32_t id = md_intern_stack(&t->tab, kept, count);
	if (id == UINT32_MAX || map_fit(&t->stack_id, &t->stack_cap, id)) {
		t->failed = 1;
		return -1;
	}
	if (!t->stack_id[id]) {
		t->stack_id[id] = (uint32_t)++t->stacks;
		write_stack(t, kept, kind, count);
	}
	t->of_stack[stack] = t->stack_id[id] + 1;
	return (long long)t->stack_id[id] - 1;
}

static void tables_free(pd_tables *t)
{
	md_free(&t->tab);
	free(t->of_stack);
	free(t->of_name);
	free(t->of_path);
	free(t->str_id);
	free(t->frame_id);
	free(t->stack_id);
	mr_buf_free(&t->str_json);
	mr_buf_free(&t->frame_json);
	mr_buf_free(&t->stack_json);
}

/* ---- bands: the largest allocations ---- */

/* The allocations a device's bands are chosen from: the `want` largest (ties: earlier in
 * stacking order), in stacking order, with their sizes. */
typedef struct {
	size_t *index;
	uint64_t *bytes;
	size_t count, want;
} pd_candidates;

/* Whether candidate (bytes a, allocation i) ranks below (b, j). */
static int ranks_below(uint64_t a, size_t i, uint64_t b, size_t j)
{
	return a < b || (a == b && i > j);
}

/* Whether the x-th kept candidate ranks below the y-th. */
static int kept_below(const pd_candidates *c, size_t x, size_t y)
{
	return ranks_below(c->bytes[x], c->index[x], c->bytes[y], c->index[y]);
}

static void sift_down(pd_candidates *c, size_t at)
{
	for (;;) {
		size_t low = at, l = 2 * at + 1, r = l + 1;
		if (l < c->count && kept_below(c, l, low))
			low = l;
		if (r < c->count && kept_below(c, r, low))
			low = r;
		if (low == at)
			return;
		size_t i = c->index[at];
		uint64_t v = c->bytes[at];
		c->index[at] = c->index[low];
		c->bytes[at] = c->bytes[low];
		c->index[low] = i;
		c->bytes[low] = v;
		at = low;
	}
}

static int by_index(const void *a, const void *b)
{
	const size_t *x = a, *y = b;
	return (*x > *y) - (*x < *y);
}

static void candidates_free(pd_candidates *c)
{
	free(c->index);
	free(c->bytes);
	memset(c, 0, sizeof *c);
}

/* Fills c with the `want` largest allocations of al: one pass with a heap whose root is the
 * least of those kept so far (a later allocation of its size ranks below it), then sorted into
 * stacking order. Returns 0, -1 on OOM. */
static int find_candidates(const an_allocs *al, size_t want, pd_candidates *c)
{
	candidates_free(c);
	c->index = mr_realloc_array(NULL, want ? want : 1, sizeof *c->index); /* written first */
	c->bytes = mr_realloc_array(NULL, want ? want : 1, sizeof *c->bytes);
	if (!c->index || !c->bytes)
		return -1;
	c->want = want;
	for (size_t i = 0; i < al->count && want; i++) {
		uint64_t bytes = an_alloc_bytes(al, &al->items[i]);
		if (c->count < want) { /* a new leaf, sifted up */
			size_t at = c->count++;
			while (at) {
				size_t up = (at - 1) / 2;
				if (!ranks_below(bytes, i, c->bytes[up], c->index[up]))
					break;
				c->bytes[at] = c->bytes[up];
				c->index[at] = c->index[up];
				at = up;
			}
			c->bytes[at] = bytes;
			c->index[at] = i;
		} else if (bytes > c->bytes[0]) {
			c->bytes[0] = bytes;
			c->index[0] = i;
			sift_down(c, 0);
		}
	}
	qsort(c->index, c->count, sizeof *c->index, by_index); /* into stacking order */
	for (size_t i = 0; i < c->count; i++) /* the sizes read again in that order */
		c->bytes[i] = an_alloc_bytes(al, &al->items[c->index[i]]);
	return 0;
}

/* Marks the `want` largest of n sizes (ties: the earlier ones) in chosen[], which is zeroed.
 * The want-th largest size is selected a byte at a time from the top (a count of the next byte
 * of the sizes that share the bytes chosen so far: eight passes at most), then every size above
 * it is marked, and the earliest ones at it until there are want. */
static void choose_bands(const uint64_t *bytes, size_t n, size_t want, uint8_t *chosen)
{
	uint64_t any = 0, at = 0, mask = 0; /* the size's bytes chosen so far, and which they are */
	size_t k = want;
	if (!want)
		return;
	for (size_t i = 0; i < n; i++)
		any |= bytes[i];
	int top = 0; /* the highest byte where the sizes can differ */
	while (top < 56 && any >> (top + 8))
		top += 8;
	for (int shift = top; shift >= 0; shift -= 8) {
		size_t count[256] = {0};
		unsigned bin = 255;
		for (size_t i = 0; i < n; i++)
			if ((bytes[i] & mask) == at)
				count[(bytes[i] >> shift) & 255]++;
		while (count[bin] < k) /* the bins hold k or more: it stops at 0 at worst */
			k -= count[bin--];
		at |= (uint64_t)bin << shift;
		mask |= (uint64_t)255 << shift;
	}
	for (size_t i = 0; i < n; i++) /* k of the sizes equal to `at` are taken */
		if (bytes[i] > at || (bytes[i] == at && k && k--))
			chosen[i] = 1;
}

/* ---- series ---- */

/* What every try at the block shares of one device: computed on the first, freed with the
 * block's last. */
typedef struct {
	pd_candidates cand;
	size_t k, points;
	int64_t *reserved; /* per point: the largest value after its events; NULL until prepared */
	int truncated, timed;
} pd_device;

/* The series a try writes: per point, the largest value after its events. */
typedef struct {
	int64_t *active, *small;
} pd_series;

/* An allocation whose free falls in a later window of events than its alloc: kept in that
 * window's list until the walk reaches it. */
typedef struct {
	uint64_t bytes;
	uint32_t end, next; /* next: the list's next node + 1, 0 at the end */
	uint32_t chosen;    /* drawn as a band: not in the small series */
} later_free;

enum { SERIES_WINDOW = 1 << 16 }; /* events whose changes are held at once */

/* Per point (k of the n events each), the largest bytes live after one of its events: of all
 * allocations (active), and of those not drawn as bands (small; the bands are the candidates
 * `chosen` marks). An allocation is live after its alloc event (the first event when it is
 * older) up to its free event. The walk takes the events a window at a time, with each event's
 * change in bytes: allocations come in stacking order, so by alloc event; a free in the same
 * window is a change there, a later one waits in its window's list. No work per event beyond
 * its change, and the lists hold only allocations live across a window's end. Returns 0, -1 on
 * OOM. */
static int live_series(const an_allocs *al, const pd_candidates *cand, const uint8_t *chosen,
                       size_t n, size_t k, int64_t *active, int64_t *small)
{
	size_t windows = n / SERIES_WINDOW + 1, next = 0, c = 0, pool_len = 0, pool_cap = 0,
	       free_node = 0; /* free list of pool nodes, + 1 */
	int64_t *dv = mr_realloc_array(NULL, 2 * (size_t)SERIES_WINDOW, sizeof *dv),
	        *dw = dv ? dv + SERIES_WINDOW : NULL;
	uint32_t *head = mr_alloc_array(windows, sizeof *head); /* node + 1, 0: empty */
	later_free *pool = NULL;
	int64_t v = 0, w = 0;
	int rc = -1;
	if (!dv || !head)
		goto done;
	for (size_t win = 0; win < windows; win++) {
		size_t lo = win * SERIES_WINDOW, hi = MR_MIN(n, lo + SERIES_WINDOW);
		if (lo >= hi)
			break;
		memset(dv, 0, (hi - lo) * sizeof *dv);
		memset(dw, 0, (hi - lo) * sizeof *dw);
		for (uint32_t x = head[win]; x;) {
			later_free *f = &pool[x - 1];
			dv[f->end - lo] -= (int64_t)f->bytes;
			dw[f->end - lo] -= f->chosen ? 0 : (int64_t)f->bytes;
			uint32_t after = f->next;
			f->next = (uint32_t)free_node;
			free_node = x;
			x = after;
		}
		for (; next < al->count; next++) {
			const an_alloc *a = &al->items[next];
			size_t at = a->start == AN_NO_EVENT ? 0 : a->start;
			if (at >= hi)
				break;
			int band = c < cand->count && cand->index[c] == next && chosen[c++];
			int64_t bytes = (int64_t)an_alloc_bytes(al, a);
			int64_t small_bytes = band ? 0 : bytes;
			dv[at - lo] += bytes;
			dw[at - lo] += small_bytes;
			if (a->end == AN_NO_EVENT || a->end >= n)
				continue;
			if (a->end < hi) {
				dv[a->end - lo] -= bytes;
				dw[a->end - lo] -= small_bytes;
				continue;
			}
			size_t x = free_node;
			if (x) {
				free_node = pool[x - 1].next;
			} else {
				if (pool_len >= UINT32_MAX || MR_GROW(pool, pool_cap, pool_len + 1))
					goto done;
				x = ++pool_len;
			}
			size_t later = a->end / SERIES_WINDOW;
			pool[x - 1] =
			    (later_free){(uint64_t)bytes, a->end, head[later], (uint32_t)band};
			head[later] = (uint32_t)x;
		}
		size_t p = lo / k, r = lo % k; /* the point of event i, and i's place in it */
		for (size_t i = lo; i < hi; i++) {
			v += dv[i - lo];
			w += dw[i - lo];
			if (r == 0 || v > active[p])
				active[p] = v;
			if (r == 0 || w > small[p])
				small[p] = w;
			if (++r == k) {
				r = 0;
				p++;
			}
		}
	}
	rc = 0;
done:
	free(dv);
	free(head);
	free(pool);
	return rc;
}

static int is_segment_change(const md_event *e, int64_t *delta)
{
	int add = e->action == MD_ACT_SEGMENT_ALLOC || e->action == MD_ACT_SEGMENT_MAP;
	int sub = e->action == MD_ACT_SEGMENT_FREE || e->action == MD_ACT_SEGMENT_UNMAP;
	*delta = add ? (int64_t)e->size : sub ? -(int64_t)e->size : 0;
	return add || sub;
}

/* The reserved series: what the segments hold at the end, less every change the trace made. */
static void reserved_series(const md_snapshot *s, const md_device *md, const an_device *dv,
                            const an_allocs *al, pd_device *pd)
{
	size_t n = md->event_count;
	int64_t reserved = 0, change = 0, d;
	for (size_t i = dv->segment_first; i < dv->segment_first + dv->segment_count; i++)
		reserved += (int64_t)s->segments[i].total_size;
	for (size_t i = 0; i < n; i++)
		if (is_segment_change(&md->events[i], &d))
			change += d;
	int64_t v = reserved - change;
	for (size_t i = 0, p = 0; i < n; p++) {
		size_t stop = MR_MIN(n, i + pd->k);
		int64_t top = INT64_MIN;
		for (; i < stop; i++) {
			if (is_segment_change(&md->events[i], &d))
				v += d;
			top = v > top ? v : top;
		}
		pd->reserved[p] = top;
	}
	pd->truncated = al->older > 0 || reserved - change > 0;
}

static void series_free(pd_series *ps)
{
	free(ps->active);
	free(ps->small);
}

static void device_free(pd_device *pd)
{
	candidates_free(&pd->cand);
	free(pd->reserved);
	memset(pd, 0, sizeof *pd);
}

/* Every event has a time and they never go back (and the last is later than the first). */
static int uses_time(const md_device *md)
{
	size_t n = md->event_count;
	int64_t prev = INT64_MIN;
	for (size_t i = 0; i < n; i++) {
		int64_t t = md_event_time(md, i);
		if (t == MD_TIME_NONE || t < prev)
			return 0;
		prev = t;
	}
	return n && md_event_time(md, n - 1) > md_event_time(md, 0);
}

/* The first try's work for a device with a trace, kept for the later ones. */
static int device_prepare(const md_snapshot *s, const md_device *md, const an_device *dv,
                          const an_allocs *al, pd_device *pd)
{
	size_t n = md->event_count;
	pd->k = (n + PD_SERIES_POINTS - 1) / PD_SERIES_POINTS;
	pd->points = (n + pd->k - 1) / pd->k;
	pd->reserved = mr_realloc_array(NULL, pd->points, sizeof *pd->reserved); /* all written */
	if (!pd->reserved)
		return -1;
	reserved_series(s, md, dv, al, pd);
	pd->timed = uses_time(md);
	return 0;
}

static void int_array(mr_buf *b, const int64_t *v, size_t n)
{
	mr_buf_putc(b, '[');
	for (size_t i = 0; i < n; i++) {
		if (i)
			mr_buf_putc(b, ',');
		mr_buf_i64(b, v[i]);
	}
	mr_buf_putc(b, ']');
}

static void series_json(mr_buf *b, const md_device *md, const pd_device *pd, const pd_series *ps)
{
	mr_buf_printf(b, ",\"series\":{\"events_per_point\":%zu,\"x\":[", pd->k);
	for (size_t i = 0; i < pd->points; i++) {
		if (i)
			mr_buf_putc(b, ',');
		mr_buf_u64(b, i * pd->k);
	}
	mr_buf_puts(b, "],\"t_us\":");
	if (pd->timed) {
		mr_buf_putc(b, '[');
		for (size_t i = 0; i < pd->points; i++) {
			if (i)
				mr_buf_putc(b, ',');
			/* times never go back here: the difference fits 64 bits unsigned */
			mr_buf_u64(b, (uint64_t)md_event_time(md, i * pd->k) -
			                  (uint64_t)md_event_time(md, 0));
		}
		mr_buf_putc(b, ']');
	} else {
		mr_buf_puts(b, "null");
	}
	mr_buf_puts(b, ",\"active\":");
	int_array(b, ps->active, pd->points);
	mr_buf_puts(b, ",\"reserved\":");
	int_array(b, pd->reserved, pd->points);
	mr_buf_puts(b, ",\"small\":");
	int_array(b, ps->small, pd->points);
	mr_buf_putc(b, '}');
}

/* ---- marks and moments ---- */

static long long event_x(size_t event)
{
	return event == AN_NO_MOMENT ? -1 : (long long)event;
}

/* What the block holds of what it can leave out to fit its limit (SIZE_MAX: all). */
typedef struct {
	size_t band_budget;       /* bands per page */
	size_t iteration_moments; /* moments marking only an iteration end */
	size_t iteration_marks;   /* iteration marks without a moment in the block */
} pd_limits;

/* The written count and bytes of one thing the limits bound, and how many there were. */
typedef struct {
	size_t count, bytes, all;
} pd_part;

typedef struct {
	pd_part bands, moments, marks;
} pd_sizes;

static int iteration_only(const an_moment *mo)
{
	return mo->kinds == 1u << AN_MARK_ITERATION;
}

/* Whether the r-th (from 0) of n iteration-only moments is written when `keep` of them are:
 * evenly spaced, the last and then the first kept longest. */
static int kept_iteration(size_t r, size_t n, size_t keep)
{
	typedef unsigned __int128 u128;
	if (keep >= n)
		return 1;
	if (keep <= 1)
		return keep && r == n - 1;
	/* the j-th kept is (2j(n-1) + keep-1) div 2(keep-1), rising by more than 1 a step: the
	 * j that could give r is within one of r(keep-1)/(n-1) */
	size_t j0 = (size_t)((u128)r * (keep - 1) / (n - 1));
	for (size_t j = j0 ? j0 - 1 : 0; j <= j0 + 1 && j < keep; j++)
		if ((2 * (u128)j * (n - 1) + keep - 1) / (2 * (u128)(keep - 1)) == r)
			return 1;
	return 0;
}

/* The block's index of moment id: AN_NO_MOMENT when it is not written (or id is none). */
static size_t page_moment(const an_moments *m, size_t keep, size_t id)
{
	size_t n = 0, page = 0, r = 0;
	if (id >= m->moment_count)
		return AN_NO_MOMENT;
	for (size_t i = 0; i < m->moment_count; i++)
		n += (size_t)iteration_only(&m->moments[i]);
	for (size_t i = 0;; i++) {
		int in = !iteration_only(&m->moments[i]) || kept_iteration(r++, n, keep);
		if (i == id)
			return in ? page : AN_NO_MOMENT;
		page += (size_t)in;
	}
}

/* Marks: the iteration ends without a moment in the block are what lim can thin. */
static void marks_json(mr_buf *b, const an_moments *m, const pd_limits *lim, pd_sizes *sz)
{
	size_t all = 0;
	for (size_t i = 0; i < m->mark_count; i++)
		all += m->marks[i].kind == AN_MARK_ITERATION &&
		       page_moment(m, lim->iteration_moments, m->marks[i].moment) == AN_NO_MOMENT;
	sz->marks.all += all;
	mr_buf_puts(b, ",\"marks\":[");
	for (size_t i = 0, r = 0, w = 0; i < m->mark_count; i++) {
		const an_mark *mk = &m->marks[i];
		size_t moment = page_moment(m, lim->iteration_moments, mk->moment), at = b->len;
		int thin = mk->kind == AN_MARK_ITERATION && moment == AN_NO_MOMENT;
		if (thin && !kept_iteration(r++, all, lim->iteration_marks))
			continue;
		mr_buf_printf(b, "%s{\"kind\":\"%s\",\"event\":%zu,\"x\":%zu,\"moment\":%lld",
		              w++ ? "," : "", an_mark_name(mk->kind), mk->event, mk->event,
		              event_x(moment));
		if (mk->kind == AN_MARK_PEAK || mk->kind == AN_MARK_OOM)
			mr_buf_printf(b, ",\"bytes\":%" PRIu64, mk->bytes);
		if (mk->kind == AN_MARK_ITERATION)
			mr_buf_printf(b, ",\"n\":%zu", mk->n);
		mr_buf_putc(b, '}');
		if (thin) {
			sz->marks.count++;
			sz->marks.bytes += b->len - at;
		}
	}
	mr_buf_putc(b, ']');
}

static int page_pool(const md_segment *g)
{
	return g->pool_id[0] || g->pool_id[1] ? 2 : g->pool == MD_POOL_SMALL ? 1 : 0;
}

static void segments_json(mr_buf *b, pd_tables *t, const an_moment *mo)
{
	mr_buf_puts(b, ",\"segments\":[");
	for (size_t i = 0; i < mo->segment_count; i++) {
		const md_segment *g = &mo->segments[i];
		mr_buf_puts(b, i ? ",[" : "[");
		const uint64_t head[] = {g->address, g->total_size, (uint64_t)page_pool(g),
		                         (uint64_t)g->is_expandable, g->stream};
		for (size_t h = 0; h < 5; h++) {
			mr_buf_u64(b, head[h]);
			mr_buf_putc(b, ',');
		}
		mr_buf_putc(b, '[');
		for (size_t j = 0; j < g->block_count; j++) {
			const md_block *k = &mo->blocks[g->first_block + j];
			int active = k->state != MD_BLOCK_INACTIVE;
			if (j)
				mr_buf_putc(b, ',');
			mr_buf_u64(b, k->address - g->address);
			mr_buf_putc(b, ',');
			mr_buf_u64(b, k->size);
			mr_buf_putc(b, ',');
			mr_buf_u64(b, active ? k->requested_size : 0);
			mr_buf_putc(b, ',');
			mr_buf_i64(b, (int)k->state);
			mr_buf_putc(b, ',');
			mr_buf_i64(b, active ? page_stack(t, k->stack) : -1);
		}
		mr_buf_puts(b, "]]");
	}
	mr_buf_putc(b, ']');
}

static void moments_json(mr_buf *b, pd_tables *t, const an_moments *m, size_t keep, pd_sizes *sz)
{
	size_t all = 0;
	for (size_t i = 0; i < m->moment_count; i++)
		all += (size_t)iteration_only(&m->moments[i]);
	sz->moments.all += all;
	mr_buf_puts(b, ",\"moments\":[");
	for (size_t i = 0, r = 0, w = 0; i < m->moment_count; i++) {
		const an_moment *mo = &m->moments[i];
		size_t at = b->len;
		int iter = iteration_only(mo);
		if (iter && !kept_iteration(r++, all, keep))
			continue;
		mr_buf_printf(b, "%s{\"event\":%lld,\"x\":%lld,\"kinds\":[", w++ ? "," : "",
		              event_x(mo->event),
		              mo->event == AN_NO_MOMENT ? 0 : event_x(mo->event));
		for (int k = 0, n = 0; k <= AN_MARK_SNAPSHOT; k++)
			if (mo->kinds & (1u << k))
				mr_buf_printf(b, "%s\"%s\"", n++ ? "," : "",
				              an_mark_name((an_mark_kind)k));
		mr_buf_printf(b, "],\"source\":\"%s\"", mo->from_snapshot ? "snapshot" : "trace");
		segments_json(b, t, mo);
		mr_buf_putc(b, '}');
		if (iter) {
			sz->moments.count++;
			sz->moments.bytes += b->len - at;
		}
	}
	mr_buf_putc(b, ']');
}

/* ---- a device ---- */

static void bands_json(mr_buf *b, pd_tables *t, const an_allocs *al, const pd_candidates *cand,
                       const uint8_t *chosen, uint64_t *min_bytes, size_t *count)
{
	mr_buf_puts(b, ",\"bands\":[");
	*count = 0;
	for (size_t i = 0; i < cand->count; i++) {
		const an_alloc *a = &al->items[cand->index[i]];
		if (!chosen[i])
			continue;
		uint64_t bytes = cand->bytes[i];
		if ((*count)++)
			mr_buf_putc(b, ',');
		mr_buf_i64(b, a->start == AN_NO_EVENT ? -1 : (long long)a->start);
		mr_buf_putc(b, ',');
		mr_buf_i64(b, a->end == AN_NO_EVENT ? -1 : (long long)a->end);
		mr_buf_putc(b, ',');
		mr_buf_u64(b, bytes);
		mr_buf_putc(b, ',');
		mr_buf_i64(b, page_stack(t, a->stack));
		if (bytes < *min_bytes)
			*min_bytes = bytes;
	}
	mr_buf_putc(b, ']');
}

/* One device's object; pd keeps what the next try can reuse. */
static mr_status device_json(mr_buf *b, pd_tables *t, const rp_report *run, const an_device *dv,
                             const pd_limits *lim, size_t budget, pd_device *pd, pd_sizes *sz,
                             mr_error *err)
{
	const md_snapshot *s = &run->ev.snap;
	const md_device *md = md_find_device(s, dv->device);
	const an_allocs *al = rp_allocs(run, dv);
	const an_moments *m = rp_moments(run, dv);
	size_t n = md ? md->event_count : 0, nb = 0, want = MR_MIN(budget, al->count);
	uint8_t *chosen = NULL; /* per candidate */
	pd_series ps = {0};
	mr_status st = MR_OK;
	if (n && !pd->reserved && device_prepare(s, md, dv, al, pd))
		goto oom;
	if (n && want > pd->cand.want && find_candidates(al, want, &pd->cand))
		goto oom; /* the first try, or a later one allowed more bands */
	if (n) {
		chosen = mr_alloc_array(pd->cand.count ? pd->cand.count : 1, 1);
		ps.active = mr_alloc_array(pd->points, sizeof *ps.active);
		ps.small = mr_alloc_array(pd->points, sizeof *ps.small);
		if (!chosen || !ps.active || !ps.small)
			goto oom;
		choose_bands(pd->cand.bytes, pd->cand.count, want, chosen);
		if (live_series(al, &pd->cand, chosen, n, pd->k, ps.active, ps.small))
			goto oom;
	}
	mr_buf_printf(b, "{\"device\":%d,\"x_unit\":\"event\",\"t0_us\":", dv->device);
	if (pd->timed)
		mr_buf_printf(b, "%" PRId64, md_event_time(md, 0));
	else
		mr_buf_puts(b, "null");
	mr_buf_printf(b, ",\"events\":%zu,\"x_end\":%zu,\"truncated\":%s,\"allocations\":%zu", n,
	              n ? n - 1 : 0, pd->truncated ? "true" : "false", al->count);
	uint64_t min_bytes = UINT64_MAX;
	if (n) {
		series_json(b, md, pd, &ps);
		size_t at = b->len;
		bands_json(b, t, al, &pd->cand, chosen, &min_bytes, &nb);
		sz->bands.bytes += b->len - at;
	} else {
		mr_buf_puts(b, ",\"series\":null,\"bands\":[]");
	}
	if (nb)
		mr_buf_printf(b, ",\"band_min_bytes\":%" PRIu64, min_bytes);
	else
		mr_buf_puts(b, ",\"band_min_bytes\":null");
	marks_json(b, m, lim, sz);
	moments_json(b, t, m, lim->iteration_moments, sz);
	mr_buf_putc(b, '}');
	sz->bands.count += nb;
	goto done;
oom:
	st = mr_oom(err);
done:
	free(chosen);
	series_free(&ps);
	return st;
}

/* ---- the block ---- */

static int on_page(const rp_report *run, const an_device *dv)
{
	return rp_moments(run, dv) && (dv->segment_count || dv->has_trace);
}

/* The moment the verdict speaks of, on the diagnosed device (else the first one shown). */
static void focus_json(mr_buf *b, const rp_report *run, const rp_view *view, size_t keep)
{
	const an_device *dv = NULL;
	for (size_t i = 0; i < view->device_count; i++) {
		const an_device *d = view->devices[i];
		if (!on_page(run, d))
			continue;
		if (!dv)
			dv = d;
		if (d->device == run->advice.device) {
			dv = d;
			break;
		}
	}
	if (!dv) {
		mr_buf_puts(b, ",\"focus\":null");
		return;
	}
	mr_buf_printf(b, ",\"focus\":{\"device\":%d,\"moment\":%lld}", dv->device,
	              event_x(page_moment(rp_moments(run, dv), keep, rp_verdict_moment(run, dv))));
}

/* One block under lim; *sz gets the sizes of what lim can leave out. */
static mr_status write_block(const rp_report *run, const rp_view *view, const rd_options *opt,
                             const pd_limits *lim, pd_device *devices, pd_sizes *sz, mr_buf *out,
                             mr_error *err)
{
	const md_snapshot *s = &run->ev.snap;
	pd_tables t = {.s = s, .kinds = run->an.frame_kinds, .opt = opt};
	mr_status st = MR_OK;
	size_t traced = 0;
	memset(sz, 0, sizeof *sz);
	md_init(&t.tab);
	t.of_stack = mr_alloc_array(s->stack_count ? s->stack_count : 1, sizeof *t.of_stack);
	t.of_name = mr_alloc_array(s->strings.count ? s->strings.count : 1, sizeof *t.of_name);
	t.of_path = mr_alloc_array(s->strings.count ? s->strings.count : 1, sizeof *t.of_path);
	if (!t.of_stack || !t.of_name || !t.of_path) {
		tables_free(&t);
		return mr_oom(err);
	}
	for (size_t i = 0; i < view->device_count; i++)
		traced += on_page(run, view->devices[i]) && view->devices[i]->has_trace;
	size_t budget = lim->band_budget / MR_MAX(traced, 1);
	mr_buf_puts(out, "<script type=\"application/json\" id=\"memreport-data\">"
	                 "{\"schema\":\"memreport-page/1\"");
	focus_json(out, run, view, lim->iteration_moments);
	mr_buf_puts(out, ",\"devices\":[");
	for (size_t i = 0, k = 0; i < view->device_count && !st; i++) {
		if (!on_page(run, view->devices[i]))
			continue;
		mr_buf_puts(out, k++ ? "," : "");
		st = device_json(out, &t, run, view->devices[i], lim, budget, &devices[i], sz, err);
	}
	mr_buf_puts(out, "],\"strings\":[");
	mr_buf_append(out, t.str_json.data, t.str_json.len);
	mr_buf_puts(out, "],\"frames\":[");
	mr_buf_append(out, t.frame_json.data, t.frame_json.len);
	mr_buf_puts(out, "],\"stacks\":[");
	mr_buf_append(out, t.stack_json.data, t.stack_json.len);
	mr_buf_puts(out, "]}</script>\n");
	if (!st && (t.failed || t.str_json.failed || t.frame_json.failed || t.stack_json.failed ||
	            out->failed))
		st = mr_oom(err);
	tables_free(&t);
	return st;
}

/* Lowers the limit of part p so that about `over` of its bytes go, keeping at least `least`. */
static void leave_out(size_t *limit, const pd_part *p, size_t least, size_t *over)
{
	if (!*over || p->count <= least)
		return;
	size_t each = MR_MAX(p->bytes / p->count, 1);
	size_t drop = MR_MIN(*over / each + 1, p->count - least);
	*limit = p->count - drop;
	*over -= MR_MIN(drop * each, *over);
}

/* The next, smaller limits for a block of len bytes written under lim (sizes sz). The first
 * time: iteration moments, then iteration marks without one (PD_MIN_MARKS of them stay),
 * until what bands do not take is under half of max; then the bands that fit the rest, from their
 * bytes each. Later: fewer bands in proportion; once there are none, half the marks, then half the
 * moments. Returns 0 when nothing is left to leave out. */
static int smaller(pd_limits *lim, const pd_sizes *sz, size_t len, size_t max, int first)
{
	if (!sz->bands.count && !sz->marks.count && !sz->moments.count)
		return 0;
	if (!first) {
		if (sz->bands.count)
			lim->band_budget =
			    (size_t)((double)lim->band_budget * 0.9 * (double)max / (double)len);
		else if (sz->marks.count)
			lim->iteration_marks = sz->marks.count / 2;
		else
			lim->iteration_moments = sz->moments.count / 2;
		return 1;
	}
	size_t rest = len - MR_MIN(sz->bands.bytes, len); /* what fewer bands do not shrink */
	size_t over = rest > max / 2 ? rest - max / 2 : 0, want = over;
	leave_out(&lim->iteration_moments, &sz->moments, 0, &over);
	leave_out(&lim->iteration_marks, &sz->marks, PD_MIN_MARKS, &over);
	rest -= want - over;
	size_t room = max - max / 20,
	       each = MR_MAX(sz->bands.bytes / MR_MAX(sz->bands.count, 1), 1);
	room = room > rest ? room - rest : 0;
	lim->band_budget = MR_MIN(lim->band_budget, room / each);
	return 1;
}

mr_status rd_page_data(const rp_report *run, const rp_view *view, const rd_options *opt,
                       size_t max_bytes, pd_fit *fit, mr_buf *out, mr_error *err)
{
	pd_limits lim = {PD_BAND_BUDGET, SIZE_MAX, SIZE_MAX};
	pd_sizes sz = {{0}, {0}, {0}};
	pd_fit f = {0};
	size_t start = out->len, nd = view->device_count;
	pd_device *devices = NULL;
	mr_status st = MR_OK;
	f.band_budget = PD_BAND_BUDGET;
	if (!run->ev.has_snapshot || !run->moments)
		goto done;
	if (!(devices = mr_alloc_array(nd ? nd : 1, sizeof *devices))) {
		st = mr_oom(err);
		goto done;
	}
	for (int tries = 0;; tries++) {
		out->len = start;
		if ((st = write_block(run, view, opt, &lim, devices, &sz, out, err)))
			break;
		size_t len = out->len - start;
		if (len <= max_bytes)
			break;
		if (tries == 12 || !smaller(&lim, &sz, len, max_bytes, !tries)) {
			f.left_out_bytes = len;
			out->len = start;
			break;
		}
	}
	f.bands = sz.bands.count;
	f.band_budget = lim.band_budget;
	f.iteration_moments = sz.moments.count;
	f.iteration_moments_all = sz.moments.all;
	f.iteration_marks = sz.marks.count;
	f.iteration_marks_all = sz.marks.all;
	for (size_t i = 0; i < nd; i++)
		device_free(&devices[i]);
	free(devices);
done:
	if (fit)
		*fit = f;
	return st;
}
