/* summary.c: memory_summary() tables found anywhere in a text.
 *
 * A table is recognised by its top border ("|" followed by "==="), wherever it sits on
 * its line (log prefixes such as "2024-05-01 12:00:00 | INFO | x | " or "Memory summary: " are
 * skipped), or, pasted without its header lines, by its first metric row ("| Allocated memory |
 * ..."). The header row, when there is one, names the value columns. From there the lines that look
 * like table material (they hold a '|', or only
 * '=', '-' and blanks) are fed, concatenated without their line breaks, to a cell tokenizer:
 * cells are the text between two '|', with every blank removed. That makes the reader immune
 * to column widths, to hard wraps (a row broken anywhere, with or without trailing blanks, joins
 * back) and to log prefixes repeated on each line (a prefix becomes a few unknown cells, which
 * are ignored). Row boundaries show up as empty cells ("|" "|"). The table ends at the first
 * all-'=' border after a metric row, or at the first line that is not table material. */
#include "decode/summary.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "decode/amount.h"
#include "decode/chars.h"

#define EV_CELL_MAX 128 /* longer cells are garbage */

int ev_metric_is_bytes(int metric)
{
	return metric >= EV_ALLOCATED && metric <= EV_INACTIVE_SPLIT;
}

const char *ev_metric_stat_key(int metric)
{
	static const char *keys[EV_METRIC_COUNT] = {
	    "allocated_bytes",
	    "active_bytes",
	    "requested_bytes",
	    "reserved_bytes",
	    "inactive_split_bytes",
	    "allocation",
	    "active",
	    "segment",
	    "inactive_split",
	    "oversize_allocations",
	    "oversize_segments",
	};
	return metric >= 0 && metric < EV_METRIC_COUNT ? keys[metric] : "";
}

/* Cell text is blank-free; names compare case-insensitively. Device words ("GPU", "MLU") are
 * allowed in front of "reservedmemory"/"reservedsegments" and inside "oversize...segments". */
static int ev_metric_from_name(const char *c, size_t n)
{
	static const struct {
		const char *name;
		int metric;
	} exact[] = {
	    {"allocatedmemory", EV_ALLOCATED},
	    {"activememory", EV_ACTIVE},
	    {"requestedmemory", EV_REQUESTED},
	    {"non-releasablememory", EV_INACTIVE_SPLIT},
	    {"allocations", EV_ALLOCATIONS},
	    {"activeallocs", EV_ACTIVE_ALLOCS},
	    {"non-releasableallocs", EV_INACTIVE_SPLIT_ALLOCS},
	    {"oversizeallocations", EV_OVERSIZE_ALLOCS},
	};
	for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
		if (strlen(exact[i].name) == n && tc_at_ci(c, n, 0, exact[i].name))
			return exact[i].metric;
	static const char rm[] = "reservedmemory", rs[] = "reservedsegments", sg[] = "segments";
	if (n >= sizeof rm - 1 && n <= sizeof rm - 1 + 8 && tc_at_ci(c, n, n - (sizeof rm - 1), rm))
		return EV_RESERVED;
	if (n >= sizeof rs - 1 && n <= sizeof rs - 1 + 8 && tc_at_ci(c, n, n - (sizeof rs - 1), rs))
		return EV_SEGMENTS;
	if (n >= 8 + sizeof sg - 1 && n <= 8 + sizeof sg - 1 + 8 && tc_at_ci(c, n, 0, "oversize") &&
	    tc_at_ci(c, n, n - (sizeof sg - 1), sg))
		return EV_OVERSIZE_SEGMENTS;
	return -1;
}

typedef struct {
	ev_summary s;
	int metric; /* metric of the row being read, -1 none */
	int pool;
	int col;       /* next value column */
	int last_main; /* last main metric row, for "from ... pool" rows */
	int rows;      /* metric rows seen */
	int pool_rows;
	int done;
	/* The header row ("Metric | Cur Usage | Peak Usage | Tot Alloc | Tot Freed") names the
	 * value columns in order: a table printed without one of them (a dropped Peak Usage)
	 * still puts each value in its own column. Without a header the order is the standard
	 * one. */
	int in_header;
	int colmap[EV_COL_COUNT];
	int cols; /* named value columns; 0: no header seen */
	char cell[EV_CELL_MAX];
	size_t cell_len;
	int cell_overflow;
} ev_table;

static void ev_table_init(ev_table *t, size_t line)
{
	memset(t, 0, sizeof *t);
	t->s.line = line;
	t->s.device = -1;
	t->s.num_ooms = -1;
	t->s.num_alloc_retries = -1;
	t->metric = -1;
	t->last_main = -1;
}

static int ev_all_of(const char *c, size_t n, char ch)
{
	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (c[i] != ch)
			return 0;
	return 1;
}

/* The decimal digits at the start of c[0..n) into *v: how many there are, 0 when none or when
 * they overflow 64 bits. */
static size_t read_digits(const char *c, size_t n, uint64_t *v)
{
	size_t p = 0;
	*v = 0;
	while (p < n && tc_isdigit(c[p])) {
		unsigned d = (unsigned)(c[p] - '0');
		if (*v > (UINT64_MAX - d) / 10)
			return 0;
		*v = *v * 10 + d;
		p++;
	}
	return p;
}

/* Parses a value cell ("66560KiB", "0B", "13", "1234K") for the current row. */
static int ev_table_value(ev_table *t, const char *c, size_t n)
{
	ev_cell cell = {1, 0, 1};
	uint64_t v, mult = 1;
	int legacy = 0;
	size_t p = read_digits(c, n, &v);
	if (p == 0)
		return 0;
	if (ev_metric_is_bytes(t->metric)) {
		size_t unit = ev_unit_at(c, n, p, &mult, &legacy);
		if (!unit || p + unit != n)
			return 0;
	} else {
		if (p < n && (c[p] == 'K' || c[p] == 'k'))
			mult = 1000;
		else if (p < n && c[p] == 'M')
			mult = 1000000;
		if (mult > 1)
			p++;
		if (p != n)
			return 0;
	}
	if (v > UINT64_MAX / mult)
		return 0;
	int col = t->col;
	if (t->cols)
		col = t->col < t->cols ? t->colmap[t->col] : -1;
	if (col < 0)
		return 0;
	cell.value = v * mult;
	cell.unit = mult;
	if (legacy)
		t->s.legacy_units = 1;
	t->s.cells[t->metric][t->pool][col] = cell;
	t->col++;
	return 1;
}

/* A cell of the header row: "Metric" starts it, then each value column's name. Returns 1 when
 * the cell belongs to it. */
static int ev_table_header(ev_table *t, const char *c, size_t n)
{
	static const struct {
		const char *name;
		int col;
	} names[] = {{"curusage", EV_CUR},
	             {"peakusage", EV_PEAK},
	             {"totalloc", EV_TOT_ALLOC},
	             {"totfreed", EV_TOT_FREED}};
	if (n == 6 && tc_at_ci(c, n, 0, "metric")) {
		t->in_header = 1;
		t->cols = 0;
		return 1;
	}
	if (!t->in_header)
		return 0;
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (strlen(names[i].name) == n && tc_at_ci(c, n, 0, names[i].name)) {
			if (t->cols < EV_COL_COUNT)
				t->colmap[t->cols++] = names[i].col;
			return 1;
		}
	t->in_header = 0;
	return 0;
}

/* A header cell "CUDA OOMs: 2" / "cudaMalloc retries: 1": 1 when `word` is in it (the count,
 * when readable, goes to *out). */
static int header_count(const char *c, size_t n, const char *word, int *out)
{
	size_t k = tc_find_ci(c, n, word);
	if (k >= n)
		return 0;
	k += strlen(word);
	int v;
	if (tc_read_int(c, n, &k, &v))
		*out = v;
	return 1;
}

static void ev_table_cell(ev_table *t)
{
	const char *c = t->cell;
	size_t n = t->cell_len;
	int metric;
	size_t k;

	if (t->cell_overflow || n == 0 || ev_all_of(c, n, '-')) {
		t->metric = -1;
		return;
	}
	if (ev_table_header(t, c, n)) {
		t->metric = -1;
		return;
	}
	if (ev_all_of(c, n, '=')) {
		t->metric = -1;
		if (t->rows > 0)
			t->done = 1;
		return;
	}
	if ((k = tc_find_ci(c, n, "memorysummary")) < n) {
		/* "PyTorchCUDAmemorysummary,deviceID0" */
		size_t b = tc_find_ci(c, k, "pytorch");
		b = b < k ? b + 7 : 0;
		tc_copy_word(t->s.backend, sizeof t->s.backend, c + b, k - b);
		size_t d = tc_find_ci(c, n, "deviceid");
		if (d < n) {
			d += 8;
			int dev;
			if (tc_read_int(c, n, &d, &dev))
				t->s.device = dev;
		}
		t->metric = -1;
		return;
	}
	if (header_count(c, n, "ooms:", &t->s.num_ooms) ||
	    header_count(c, n, "retries:", &t->s.num_alloc_retries)) {
		t->metric = -1;
		return;
	}
	if ((metric = ev_metric_from_name(c, n)) >= 0) {
		t->metric = metric;
		t->last_main = metric;
		t->pool = EV_POOL_ALL;
		t->col = 0;
		t->rows++;
		return;
	}
	int large = n == 13 && tc_at_ci(c, n, 0, "fromlargepool");
	int small = n == 13 && tc_at_ci(c, n, 0, "fromsmallpool");
	if (large || small) {
		if (t->last_main >= 0 && t->last_main < EV_OVERSIZE_ALLOCS) {
			t->metric = t->last_main;
			t->pool = large ? EV_POOL_LARGE : EV_POOL_SMALL;
			t->col = 0;
			t->pool_rows++;
		} else {
			t->metric = -1;
		}
		return;
	}
	if (t->metric >= 0 && t->col < EV_COL_COUNT && ev_table_value(t, c, n))
		return;
	t->metric = -1; /* a header word ("Metric", "CurUsage"), a log prefix, or garbage */
}

static void ev_table_feed(ev_table *t, const char *s, size_t n)
{
	for (size_t i = 0; i < n && !t->done; i++) {
		char ch = s[i];
		if (ch == '|') {
			ev_table_cell(t);
			t->cell_len = 0;
			t->cell_overflow = 0;
		} else if (!tc_isblank(ch)) {
			if (t->cell_len < EV_CELL_MAX)
				t->cell[t->cell_len++] = ch;
			else
				t->cell_overflow = 1;
		}
	}
}

/* The line starting at `pos`: [pos, *end) without its terminator; returns the next line's start. */
static size_t ev_line(const char *d, size_t len, size_t pos, size_t *end)
{
	size_t e = pos;
	while (e < len && d[e] != '\n' && d[e] != '\r')
		e++;
	*end = e;
	if (e < len && d[e] == '\r')
		e++;
	if (e < len && d[e] == '\n' && (e == *end || d[e - 1] == '\r'))
		e++;
	return e;
}

/* Offset of the top border ("|===") in the line, or n. */
static size_t ev_find_top_border(const char *s, size_t n)
{
	const char *b = memmem(s, n, "|===", 4);
	return b ? (size_t)(b - s) : n;
}

/* A line that can belong to a table: holds a '|', or only '=', '-' and blanks (a hard-wrapped
 * piece of a border). Empty lines do not belong. */
static int ev_table_material(const char *s, size_t n)
{
	if (memchr(s, '|', n))
		return 1;
	int any = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '=' || s[i] == '-')
			any = 1;
		else if (!tc_isblank(s[i]))
			return 0;
	}
	return any;
}

/* A table pasted without its header lines starts at its first metric row: "Allocated memory"
 * as the first or second cell of the line (the text before the first '|' is a cell too), with
 * value cells after it. Returns 1 when the line is one. */
static int ev_fragment_start(const char *s, size_t n)
{
	char cell[32];
	size_t len = 0, cells = 0, bars = 0;
	int named = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '|') {
			bars++;
			if (!named && cells < 2 && ev_metric_from_name(cell, len) == EV_ALLOCATED)
				named = 1;
			else if (!named)
				cells++;
			len = 0;
		} else if (!tc_isblank(s[i]) && len < sizeof cell) {
			cell[len++] = s[i];
		}
	}
	return named && bars >= 3;
}

mr_status ev_find_summaries(const char *d, size_t len, ev_summary **items, size_t *count,
                            mr_error *err)
{
	size_t pos = 0, lineno = 0, cap = *count;
	ev_table *t = malloc(sizeof *t);
	if (!t)
		return mr_oom(err);
	mr_status st = MR_OK;
	while (pos < len) {
		size_t end, next = ev_line(d, len, pos, &end);
		lineno++;
		/* a line without a '|' starts neither a border nor a fragment */
		if (!memchr(d + pos, '|', end - pos)) {
			pos = next;
			continue;
		}
		size_t b = ev_find_top_border(d + pos, end - pos);
		if (b == end - pos && ev_fragment_start(d + pos, end - pos))
			b = 0; /* a table without its header: from the line's start */
		else if (b == end - pos) {
			pos = next;
			continue;
		}
		ev_table_init(t, lineno);
		ev_table_feed(t, d + pos + b, end - pos - b);
		pos = next;
		while (!t->done && pos < len) {
			size_t e2, n2 = ev_line(d, len, pos, &e2);
			if (!ev_table_material(d + pos, e2 - pos))
				break;
			ev_table_feed(t, d + pos, e2 - pos);
			lineno++;
			pos = n2;
		}
		if (t->rows == 0)
			continue;
		t->s.abbreviated = t->pool_rows == 0;
		if (MR_GROW(*items, cap, *count + 1)) {
			st = mr_oom(err);
			break;
		}
		(*items)[(*count)++] = t->s;
	}
	free(t);
	return st;
}
