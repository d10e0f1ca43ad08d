/* evidence.c: memory_summary() tables, out-of-memory messages and memory_stats() dumps.
 *
 * Tables. A table is recognised by its top border ("|" followed by "==="), wherever it sits on
 * its line (log prefixes such as "2024-05-01 12:00:00 | INFO | x | " or "Memory summary: " are
 * skipped). From there the lines that look like table material (they hold a '|', or only
 * '=', '-' and blanks) are fed, concatenated without their line breaks, to a cell tokenizer:
 * cells are the text between two '|', with every blank removed. That makes the reader immune
 * to column widths, to hard wraps (a row broken anywhere, with or without trailing blanks, joins
 * back) and to log prefixes repeated on each line (a prefix becomes a few unknown cells, which
 * are ignored). Row boundaries show up as empty cells ("|" "|"). The table ends at the first
 * all-'=' border after a metric row, or at the first line that is not table material.
 *
 * OOM messages. The whole input is "squeezed": every blank and line break is removed, so that
 * a message hard-wrapped anywhere (even inside a word) reads as one string, e.g.
 * "CUDAoutofmemory.Triedtoallocate192.00MiB.GPU0hasatotalcapacityof...". Messages are found by
 * anchors in that string ("Triedtoallocate", "error:outofmemory", "wouldexceedallowedmemory",
 * "<WORD>outofmemory.") and parsed field by field; a message that stops matching keeps the
 * fields read so far. A table of line starts maps positions back to line numbers.
 *
 * No recursion: nested stats objects use an explicit, bounded stack. */
#include "decode/evidence.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/mem.h"

#define EV_CELL_MAX 128       /* longer cells are garbage */
#define EV_STATS_MAX_DEPTH 32 /* nested memory_stats objects */
#define EV_MAX_PROCESSES 4096 /* "Process N has ..." sentences kept per message */

/* ---- small character helpers (locale-free, safe on any byte) ---------------------------- */

static int ev_isdigit(char c)
{
	return c >= '0' && c <= '9';
}

static int ev_isupper(char c)
{
	return c >= 'A' && c <= 'Z';
}

static int ev_isalpha(char c)
{
	return (c >= 'a' && c <= 'z') || ev_isupper(c);
}

static int ev_isblank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

static char ev_lower(char c)
{
	return ev_isupper(c) ? (char)(c - 'A' + 'a') : c;
}

/* Does s[pos..n) start with lit (case-sensitive)? */
static int ev_at(const char *s, size_t n, size_t pos, const char *lit)
{
	size_t l = strlen(lit);
	return pos <= n && n - pos >= l && memcmp(s + pos, lit, l) == 0;
}

/* Same, ASCII case-insensitive. */
static int ev_at_ci(const char *s, size_t n, size_t pos, const char *lit)
{
	size_t l = strlen(lit);
	if (pos > n || n - pos < l)
		return 0;
	for (size_t i = 0; i < l; i++)
		if (ev_lower(s[pos + i]) != ev_lower(lit[i]))
			return 0;
	return 1;
}

/* Case-insensitive search of lit in s[0..n); returns its offset or n. */
static size_t ev_find_ci(const char *s, size_t n, const char *lit)
{
	size_t l = strlen(lit);
	for (size_t i = 0; l <= n && i <= n - l; i++)
		if (ev_at_ci(s, n, i, lit))
			return i;
	return n;
}

/* Reads decimal digits at s[*pos..n) into an int (saturating at 1e9). Returns 0 if none. */
static int ev_read_int(const char *s, size_t n, size_t *pos, int *out)
{
	size_t p = *pos;
	long v = 0;
	while (p < n && ev_isdigit(s[p])) {
		if (v < 1000000000L)
			v = v * 10 + (s[p] - '0');
		p++;
	}
	if (p == *pos)
		return 0;
	*out = (int)(v > 1000000000L ? 1000000000L : v);
	*pos = p;
	return 1;
}

static void ev_copy_word(char *dst, size_t dstsz, const char *s, size_t n)
{
	size_t k = n < dstsz - 1 ? n : dstsz - 1;
	memcpy(dst, s, k);
	dst[k] = '\0';
}

/* ---- amounts ------------------------------------------------------------------------------ */

typedef struct {
	const char *name;
	uint64_t mult;
	int legacy;
} ev_unit;

/* Longest spellings first where one is a prefix of another ("bytes" before "B"). */
static const ev_unit ev_units[] = {
    {"bytes", 1, 0},
    {"KiB", (uint64_t)1 << 10, 0},
    {"MiB", (uint64_t)1 << 20, 0},
    {"GiB", (uint64_t)1 << 30, 0},
    {"TiB", (uint64_t)1 << 40, 0},
    {"PiB", (uint64_t)1 << 50, 0},
    {"EiB", (uint64_t)1 << 60, 0},
    {"KB", (uint64_t)1 << 10, 1},
    {"MB", (uint64_t)1 << 20, 1},
    {"GB", (uint64_t)1 << 30, 1},
    {"TB", (uint64_t)1 << 40, 1},
    {"PB", (uint64_t)1 << 50, 1},
    {"EB", (uint64_t)1 << 60, 1},
    {"B", 1, 0},
};

/* Matches a unit at s[pos..n); returns its index in ev_units or -1. */
static int ev_match_unit(const char *s, size_t n, size_t pos)
{
	for (size_t i = 0; i < sizeof ev_units / sizeof ev_units[0]; i++)
		if (ev_at(s, n, pos, ev_units[i].name))
			return (int)i;
	return -1;
}

size_t ev_parse_amount(const char *s, size_t len, uint64_t *out, int *overflow)
{
	size_t p = 0;
	uint64_t ip = 0, frac = 0, p10 = 1;
	int ovf = 0;
	while (p < len && ev_isdigit(s[p])) {
		unsigned d = (unsigned)(s[p] - '0');
		if (ip > (UINT64_MAX - d) / 10)
			ovf = 1;
		else
			ip = ip * 10 + d;
		p++;
	}
	if (p == 0)
		return 0;
	if (p < len && s[p] == '.') {
		p++;
		while (p < len && ev_isdigit(s[p])) {
			if (p10 < 1000000) { /* six decimals are plenty; the rest is ignored */
				frac = frac * 10 + (uint64_t)(s[p] - '0');
				p10 *= 10;
			}
			p++;
		}
	}
	while (p < len && (s[p] == ' ' || s[p] == '\t'))
		p++;
	int u = ev_match_unit(s, len, p);
	if (u < 0)
		return 0;
	p += strlen(ev_units[u].name);
	uint64_t mult = ev_units[u].mult, bytes = 0;
	if (!ovf && ip > UINT64_MAX / mult)
		ovf = 1;
	if (!ovf) {
		bytes = ip * mult;
		uint64_t fb;
		if (mult <= ((uint64_t)1 << 40)) /* frac < 1e6 < 2^20: the product fits */
			fb = (frac * mult + p10 / 2) / p10;
		else
			fb = (uint64_t)((double)frac / (double)p10 * (double)mult + 0.5);
		if (bytes > UINT64_MAX - fb)
			ovf = 1;
		else
			bytes += fb;
	}
	*out = ovf ? UINT64_MAX : bytes;
	if (overflow)
		*overflow = ovf;
	return p;
}

/* ---- metric names ------------------------------------------------------------------------- */

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
		if (strlen(exact[i].name) == n && ev_at_ci(c, n, 0, exact[i].name))
			return exact[i].metric;
	static const char rm[] = "reservedmemory", rs[] = "reservedsegments", sg[] = "segments";
	if (n >= sizeof rm - 1 && n <= sizeof rm - 1 + 8 && ev_at_ci(c, n, n - (sizeof rm - 1), rm))
		return EV_RESERVED;
	if (n >= sizeof rs - 1 && n <= sizeof rs - 1 + 8 && ev_at_ci(c, n, n - (sizeof rs - 1), rs))
		return EV_SEGMENTS;
	if (n >= 8 + sizeof sg - 1 && n <= 8 + sizeof sg - 1 + 8 && ev_at_ci(c, n, 0, "oversize") &&
	    ev_at_ci(c, n, n - (sizeof sg - 1), sg))
		return EV_OVERSIZE_SEGMENTS;
	return -1;
}

/* ---- table tokenizer ---------------------------------------------------------------------- */

typedef struct {
	ev_summary s;
	int metric; /* metric of the row being read, -1 none */
	int pool;
	int col;       /* next value column */
	int last_main; /* last main metric row, for "from ... pool" rows */
	int rows;      /* metric rows seen */
	int pool_rows;
	int done;
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

/* Parses a value cell ("66560KiB", "0B", "13", "1234K") for the current row. */
static int ev_table_value(ev_table *t, const char *c, size_t n)
{
	ev_cell cell = {1, 0, 1};
	if (ev_metric_is_bytes(t->metric)) {
		size_t p = 0;
		uint64_t v = 0;
		while (p < n && ev_isdigit(c[p])) {
			unsigned d = (unsigned)(c[p] - '0');
			if (v > (UINT64_MAX - d) / 10)
				return 0;
			v = v * 10 + d;
			p++;
		}
		if (p == 0)
			return 0;
		int u = ev_match_unit(c, n, p);
		if (u < 0 || p + strlen(ev_units[u].name) != n)
			return 0;
		uint64_t mult = ev_units[u].mult;
		if (v > UINT64_MAX / mult)
			return 0;
		cell.value = v * mult;
		cell.unit = mult;
		if (ev_units[u].legacy)
			t->s.legacy_units = 1;
	} else {
		size_t p = 0;
		uint64_t v = 0;
		while (p < n && ev_isdigit(c[p])) {
			unsigned d = (unsigned)(c[p] - '0');
			if (v > (UINT64_MAX - d) / 10)
				return 0;
			v = v * 10 + d;
			p++;
		}
		if (p == 0)
			return 0;
		uint64_t mult = 1;
		if (p < n && (c[p] == 'K' || c[p] == 'k'))
			mult = 1000;
		else if (p < n && c[p] == 'M')
			mult = 1000000;
		if (mult > 1)
			p++;
		if (p != n || v > UINT64_MAX / mult)
			return 0;
		cell.value = v * mult;
		cell.unit = mult;
	}
	t->s.cells[t->metric][t->pool][t->col] = cell;
	t->col++;
	return 1;
}

/* A header cell "CUDA OOMs: 2" / "cudaMalloc retries: 1": 1 when `word` is in it (the count,
 * when readable, goes to *out). */
static int header_count(const char *c, size_t n, const char *word, int *out)
{
	size_t k = ev_find_ci(c, n, word);
	if (k >= n)
		return 0;
	k += strlen(word);
	int v;
	if (ev_read_int(c, n, &k, &v))
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
	if (ev_all_of(c, n, '=')) {
		t->metric = -1;
		if (t->rows > 0)
			t->done = 1;
		return;
	}
	if ((k = ev_find_ci(c, n, "memorysummary")) < n) {
		/* "PyTorchCUDAmemorysummary,deviceID0" */
		size_t b = ev_find_ci(c, k, "pytorch");
		b = b < k ? b + 7 : 0;
		ev_copy_word(t->s.backend, sizeof t->s.backend, c + b, k - b);
		size_t d = ev_find_ci(c, n, "deviceid");
		if (d < n) {
			d += 8;
			int dev;
			if (ev_read_int(c, n, &d, &dev))
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
	int large = n == 13 && ev_at_ci(c, n, 0, "fromlargepool");
	int small = n == 13 && ev_at_ci(c, n, 0, "fromsmallpool");
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
		} else if (!ev_isblank(ch)) {
			if (t->cell_len < EV_CELL_MAX)
				t->cell[t->cell_len++] = ch;
			else
				t->cell_overflow = 1;
		}
	}
}

/* ---- lines -------------------------------------------------------------------------------- */

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
	for (size_t i = 0; i + 3 < n; i++)
		if (s[i] == '|' && s[i + 1] == '=' && s[i + 2] == '=' && s[i + 3] == '=')
			return i;
	return n;
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
		else if (!ev_isblank(s[i]))
			return 0;
	}
	return any;
}

static mr_status ev_find_tables(const char *d, size_t len, ev_text *out, size_t *cap, mr_error *err)
{
	size_t pos = 0, lineno = 0;
	ev_table *t = malloc(sizeof *t);
	if (!t)
		return mr_oom(err);
	mr_status st = MR_OK;
	while (pos < len) {
		size_t end, next = ev_line(d, len, pos, &end);
		lineno++;
		size_t b = ev_find_top_border(d + pos, end - pos);
		if (b == end - pos) {
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
		if (MR_GROW(out->summaries, *cap, out->summary_count + 1)) {
			st = mr_oom(err);
			break;
		}
		out->summaries[out->summary_count++] = t->s;
	}
	free(t);
	return st;
}

/* ---- OOM messages --------------------------------------------------------------------------- */

const char *ev_oom_era_name(int era)
{
	switch (era) {
	case EV_OOM_ERA_LEGACY_CACHED: return "legacy_cached";
	case EV_OOM_ERA_LEGACY_RESERVED: return "legacy_reserved";
	case EV_OOM_ERA_LEGACY_HINT: return "legacy_hint";
	case EV_OOM_ERA_V21_SENTENCE: return "v21_sentence";
	case EV_OOM_ERA_CURRENT: return "current";
	case EV_OOM_ERA_ASYNC_ALLOCATOR: return "async_allocator";
	case EV_OOM_ERA_DRIVER_ERROR: return "driver_error";
	case EV_OOM_ERA_GENERIC: return "generic";
	default: return "unknown";
	}
}

/* The squeezed input: no blanks, and the squeezed offset at which each line starts. */
typedef struct {
	char *s;
	size_t n;
	size_t *line_at; /* line_at[i]: squeezed offset of the start of line i+1 */
	size_t lines;
} ev_squeezed;

static mr_status ev_squeeze(const char *d, size_t len, ev_squeezed *q, mr_error *err)
{
	size_t lines = 1;
	for (size_t i = 0; i < len; i++)
		if (d[i] == '\n' || (d[i] == '\r' && (i + 1 >= len || d[i + 1] != '\n')))
			lines++;
	q->s = malloc(len + 1);
	q->line_at = mr_alloc_array(lines, sizeof *q->line_at);
	if (!q->s || !q->line_at)
		return mr_oom(err);
	size_t n = 0, l = 0;
	q->line_at[l++] = 0;
	for (size_t i = 0; i < len; i++) {
		char c = d[i];
		if (c == '\n' || (c == '\r' && (i + 1 >= len || d[i + 1] != '\n'))) {
			if (l < lines)
				q->line_at[l++] = n;
		} else if (!ev_isblank(c)) {
			q->s[n++] = c;
		}
	}
	q->s[n] = '\0';
	q->n = n;
	q->lines = l;
	return MR_OK;
}

static size_t ev_squeezed_line(const ev_squeezed *q, size_t pos)
{
	size_t lo = 0, hi = q->lines; /* largest i with line_at[i] <= pos */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (q->line_at[mid] <= pos)
			lo = mid;
		else
			hi = mid;
	}
	return lo + 1;
}

/* An amount at s[*p]; advances *p. Overflowing amounts (NVML nonsense) parse but are reported
 * through *bad so the caller can leave the field unknown. */
static int ev_amt(const char *s, size_t n, size_t *p, uint64_t *v, int *bad)
{
	if (*p > n)
		return 0;
	int ovf = 0;
	size_t used = ev_parse_amount(s + *p, n - *p, v, &ovf);
	if (!used)
		return 0;
	*p += used;
	*bad = ovf;
	return 1;
}

/* Matches a literal (case-insensitively) at *p and advances. */
static int ev_lit(const char *s, size_t n, size_t *p, const char *lit)
{
	if (!ev_at_ci(s, n, *p, lit))
		return 0;
	*p += strlen(lit);
	return 1;
}

/* Reads "WORD<digits>" (e.g. "GPU0") at *p: the device word into word[], the number into *dev. */
static int ev_dev_word(const char *s, size_t n, size_t *p, char *word, size_t wsz, int *dev)
{
	size_t q = *p;
	while (q < n && q - *p < 15 && ev_isalpha(s[q]))
		q++;
	if (q == *p)
		return 0;
	size_t w = q;
	if (!ev_read_int(s, n, &q, dev))
		return 0;
	ev_copy_word(word, wsz, s + *p, w - *p);
	*p = q;
	return 1;
}

static void ev_oom_init(ev_oom *o)
{
	memset(o, 0, sizeof *o);
	o->device = -1;
}

/* Stores an amount in a field unless it overflowed. */
#define EV_SET(o, field, flag, v, bad)                                                             \
	do {                                                                                       \
		if (!(bad)) {                                                                      \
			(o)->field = (v);                                                          \
			(o)->flag = 1;                                                             \
		}                                                                                  \
	} while (0)

/* Legacy tail "(GPU 0; T total capacity; A already allocated; F free; [X allowed;] R reserved in
 * total by PyTorch)" or "...; C cached)", in any order; p is just after '('. */
static size_t ev_oom_legacy_tail(const char *s, size_t n, size_t p, ev_oom *o, char *word,
                                 size_t wsz)
{
	int dev, cached = 0, reserved = 0, closed = 0;
	uint64_t cached_v = 0;
	if (ev_dev_word(s, n, &p, word, wsz, &dev)) {
		o->device = dev;
		if (p < n && s[p] == ';')
			p++;
	}
	for (int guard = 0; guard < 16 && p < n; guard++) {
		uint64_t v;
		int bad;
		if (!ev_amt(s, n, &p, &v, &bad))
			break;
		if (ev_lit(s, n, &p, "totalcapacity"))
			EV_SET(o, total_capacity, has_total_capacity, v, bad);
		else if (ev_lit(s, n, &p, "alreadyallocated"))
			EV_SET(o, allocated_by_pytorch, has_allocated, v, bad);
		else if (ev_lit(s, n, &p, "free"))
			EV_SET(o, device_free, has_device_free, v, bad);
		else if (ev_lit(s, n, &p, "allowed"))
			EV_SET(o, allowed, has_allowed, v, bad);
		else if (ev_lit(s, n, &p, "reservedintotalbyPyTorch")) {
			EV_SET(o, reserved_total, has_reserved_total, v, bad);
			reserved = 1;
		} else if (ev_lit(s, n, &p, "cached")) {
			cached = !bad;
			cached_v = v;
		} else {
			/* an item forks add ("57.10 GiB current active"): skip to its end */
			size_t lim = p + 64 < n ? p + 64 : n;
			while (p < lim && s[p] != ';' && s[p] != ')')
				p++;
		}
		if (p < n && s[p] == ';') {
			p++;
		} else {
			if (p < n && s[p] == ')') {
				p++;
				closed = 1;
			}
			break;
		}
	}
	if (cached) {
		/* <= 1.4 printed cached - allocated: the reserved-but-unallocated bytes */
		o->reserved_unallocated = cached_v;
		o->has_reserved_unallocated = 1;
		if (o->has_allocated && cached_v <= UINT64_MAX - o->allocated_by_pytorch) {
			o->reserved_total = o->allocated_by_pytorch + cached_v;
			o->has_reserved_total = 1;
		}
		o->era = EV_OOM_ERA_LEGACY_CACHED;
	} else if (reserved) {
		if (o->has_allocated) {
			o->reserved_unallocated = o->reserved_total > o->allocated_by_pytorch
			                              ? o->reserved_total - o->allocated_by_pytorch
			                              : 0;
			o->has_reserved_unallocated = 1;
		}
		o->era = EV_OOM_ERA_LEGACY_RESERVED;
		if (closed && ev_at_ci(s, n, p, "Ifreservedmemoryis>>allocatedmemory")) {
			o->era = EV_OOM_ERA_LEGACY_HINT;
			p += strlen("Ifreservedmemoryis>>allocatedmemory");
		}
	} else {
		o->era = EV_OOM_ERA_GENERIC;
	}
	return p;
}

/* Sentence tail (2.1+); p is just after "Tried to allocate X.". */
static size_t ev_oom_sentence_tail(const char *s, size_t n, size_t p, ev_oom *o, char *word,
                                   size_t wsz, mr_status *st, mr_error *err)
{
	uint64_t v, f;
	int bad, badf, dev;
	size_t q = p;
	if (!ev_dev_word(s, n, &q, word, wsz, &dev) || !ev_lit(s, n, &q, "hasatotalcapac")) {
		o->era = EV_OOM_ERA_GENERIC;
		return p;
	}
	o->device = dev;
	int typo = 0;
	if (ev_lit(s, n, &q, "ty"))
		typo = 1;
	else if (!ev_lit(s, n, &q, "ity")) {
		o->era = EV_OOM_ERA_GENERIC;
		return q;
	}
	o->era = typo ? EV_OOM_ERA_V21_SENTENCE : EV_OOM_ERA_CURRENT;
	if (!ev_lit(s, n, &q, "of") || !ev_amt(s, n, &q, &v, &bad))
		return q;
	EV_SET(o, total_capacity, has_total_capacity, v, bad);
	if (ev_lit(s, n, &q, "ofwhich")) {
		if (!ev_amt(s, n, &q, &f, &badf) || !ev_lit(s, n, &q, "isfree."))
			return q;
		EV_SET(o, device_free, has_device_free, f, badf);
	} else if (ev_lit(s, n, &q, ".")) {
		o->era = EV_OOM_ERA_GENERIC; /* XPU: "GPU 0 has a total capacity of T." */
	} else {
		return q;
	}
	size_t cap = 0;
	for (int guard = 0; guard < EV_MAX_PROCESSES + 8 && q < n; guard++) {
		size_t r = q;
		int pid;
		if (ev_lit(s, n, &r, "Process") && ev_read_int(s, n, &r, &pid) &&
		    ev_lit(s, n, &r, "has") && ev_amt(s, n, &r, &v, &bad) &&
		    ev_lit(s, n, &r, "memoryinuse.")) {
			if (!bad && o->other_process_count < EV_MAX_PROCESSES) {
				if (MR_GROW(o->other_processes, cap, o->other_process_count + 1)) {
					*st = mr_oom(err);
					return r;
				}
				o->other_processes[o->other_process_count].pid = pid;
				o->other_processes[o->other_process_count].bytes = v;
				o->other_process_count++;
			}
			q = r;
			continue;
		}
		r = q;
		if (ev_lit(s, n, &r, "Includingnon-PyTorchmemory,thisprocesshas") &&
		    ev_amt(s, n, &r, &v, &bad) && ev_lit(s, n, &r, "memoryinuse.")) {
			EV_SET(o, this_process_in_use, has_this_process, v, bad);
			q = r;
			continue;
		}
		r = q;
		if (ev_amt(s, n, &r, &v, &bad) && ev_lit(s, n, &r, "allowed;")) {
			EV_SET(o, allowed, has_allowed, v, bad);
			q = r;
			continue;
		}
		break;
	}
	if (!ev_lit(s, n, &q, "Oftheallocatedmemory") || !ev_amt(s, n, &q, &v, &bad) ||
	    !ev_lit(s, n, &q, "isallocatedbyPyTorch,"))
		return q;
	EV_SET(o, allocated_by_pytorch, has_allocated, v, bad);
	size_t r = q;
	if (ev_lit(s, n, &r, "with") && ev_amt(s, n, &r, &f, &badf) &&
	    ev_lit(s, n, &r, "allocatedinprivatepools")) {
		EV_SET(o, private_pools, has_private_pools, f, badf);
		/* skip "(e.g.,CUDAGraphs)," up to the "and" that follows it */
		size_t lim = r + 64 < n ? r + 64 : n;
		size_t a = ev_find_ci(s + r, lim - r, "),and");
		q = a < lim - r ? r + a + 2 : r;
	}
	if (ev_lit(s, n, &q, "and") && ev_amt(s, n, &q, &v, &bad) &&
	    ev_lit(s, n, &q, "isreservedbyPyTorchbutunallocated."))
		EV_SET(o, reserved_unallocated, has_reserved_unallocated, v, bad);
	return q;
}

/* Uppercase word (2..15 characters) ending at s[end); returns its start or end if none. */
static size_t ev_upper_word_before(const char *s, size_t end)
{
	size_t j = end;
	while (j > 0 && end - j < 15 && (ev_isupper(s[j - 1]) || ev_isdigit(s[j - 1])))
		j--;
	while (j < end && ev_isdigit(s[j])) /* a word starts with a letter */
		j++;
	return end - j >= 2 ? j : end;
}

/* "Tried to allocate" at i. Returns the offset after the message. */
static size_t ev_oom_tried(const ev_squeezed *q, size_t i, ev_oom *o, mr_status *st, mr_error *err)
{
	const char *s = q->s;
	size_t n = q->n, start = i, p = i + strlen("Triedtoallocate");
	char word[16] = "";
	int generic_lead = 0;
	static const char lead[] = "outofmemory.";
	if (i >= sizeof lead - 1 && ev_at_ci(s, n, i - (sizeof lead - 1), lead)) {
		size_t ls = i - (sizeof lead - 1);
		size_t w = ev_upper_word_before(s, ls);
		start = w < ls ? w : ls;
		ev_copy_word(o->backend, sizeof o->backend, s + w, ls - w);
		generic_lead =
		    w == ls && s[ls] == 'O'; /* "Out of memory." of the generic allocator */
	}
	o->line = ev_squeezed_line(q, start);
	uint64_t v;
	int bad;
	if (ev_lit(s, n, &p, "morethan1EBmemory")) {
		o->requested_more_than_1eb = 1;
		o->requested_bytes = (uint64_t)1 << 60;
		o->has_requested = 1;
		o->era = EV_OOM_ERA_GENERIC;
		return p;
	}
	if (!ev_amt(s, n, &p, &v, &bad)) {
		o->era = EV_OOM_ERA_GENERIC;
		return p;
	}
	EV_SET(o, requested_bytes, has_requested, v, bad);
	if (p < n && s[p] == '(')
		p = ev_oom_legacy_tail(s, n, p + 1, o, word, sizeof word);
	else if (p < n && s[p] == '.')
		p = ev_oom_sentence_tail(s, n, p + 1, o, word, sizeof word, st, err);
	else
		o->era = EV_OOM_ERA_GENERIC;
	if (generic_lead && o->era == EV_OOM_ERA_CURRENT)
		o->era = EV_OOM_ERA_GENERIC;
	if (!o->backend[0] && word[0] && strcmp(word, "GPU") != 0)
		ev_copy_word(o->backend, sizeof o->backend, word, strlen(word));
	return p;
}

/* cudaMallocAsync: "Allocation on device D would exceed allowed memory. (out of memory)" followed
 * by "Label : amount" lines; i is at "wouldexceedallowedmemory". */
static size_t ev_oom_async(const ev_squeezed *q, size_t i, ev_oom *o)
{
	const char *s = q->s;
	size_t n = q->n, p = i + strlen("wouldexceedallowedmemory"), start = i;
	static const char alloc[] = "Allocationondevice";
	size_t d = i;
	while (d > 0 && i - d < 10 && ev_isdigit(s[d - 1]))
		d--;
	if (d < i && d >= sizeof alloc - 1 && ev_at_ci(s, n, d - (sizeof alloc - 1), alloc)) {
		size_t dp = d;
		int dev;
		if (ev_read_int(s, n, &dp, &dev))
			o->device = dev;
		start = d - (sizeof alloc - 1);
	}
	o->line = ev_squeezed_line(q, start);
	o->era = EV_OOM_ERA_ASYNC_ALLOCATOR;
	ev_copy_word(o->backend, sizeof o->backend, "CUDA", 4);
	(void)ev_lit(s, n, &p, ".");
	(void)ev_lit(s, n, &p, "(outofmemory)");
	for (int guard = 0; guard < 8 && p < n; guard++) {
		int which;
		if (ev_lit(s, n, &p, "Currentlyallocated"))
			which = 0;
		else if (ev_lit(s, n, &p, "Requested"))
			which = 1;
		else if (ev_lit(s, n, &p, "Devicelimit"))
			which = 2;
		else if (ev_lit(s, n, &p, "Free"))
			which = 3;
		else if (ev_lit(s, n, &p, "PyTorchlimit"))
			which = 4;
		else
			break;
		size_t lim = p + 64 < n ? p + 64 : n; /* skip "(according to CUDA)" etc. to ':' */
		while (p < lim && s[p] != ':')
			p++;
		if (p >= lim)
			break;
		p++;
		uint64_t v;
		int bad;
		if (!ev_amt(s, n, &p, &v, &bad))
			break;
		switch (which) {
		case 0: EV_SET(o, allocated_by_pytorch, has_allocated, v, bad); break;
		case 1: EV_SET(o, requested_bytes, has_requested, v, bad); break;
		case 2: EV_SET(o, total_capacity, has_total_capacity, v, bad); break;
		case 3: EV_SET(o, device_free, has_device_free, v, bad); break;
		default: EV_SET(o, allowed, has_allowed, v, bad); break;
		}
	}
	return p;
}

static mr_status ev_find_ooms(const char *d, size_t len, ev_text *out, size_t *cap, mr_error *err)
{
	ev_squeezed q = {0};
	mr_status st = ev_squeeze(d, len, &q, err);
	const char *s = q.s;
	size_t n = q.n;
	for (size_t i = 0; st == MR_OK && i < n;) {
		char c = s[i];
		ev_oom o;
		ev_oom_init(&o);
		size_t next = i + 1;
		int found = 0;
		if (c == 'T' && ev_at(s, n, i, "Triedtoallocate")) {
			next = ev_oom_tried(&q, i, &o, &st, err);
			found = 1;
		} else if (c == 'w' && ev_at(s, n, i, "wouldexceedallowedmemory")) {
			next = ev_oom_async(&q, i, &o);
			found = 1;
		} else if (c == 'e' && ev_at(s, n, i, "error:outofmemory")) {
			/* driver/runtime error: "CUDA error: out of memory" (lower-case, unlike
			 * "OutOfMemoryError: Out of memory.") */
			size_t w = ev_upper_word_before(s, i);
			if (w < i) {
				ev_copy_word(o.backend, sizeof o.backend, s + w, i - w);
				o.era = EV_OOM_ERA_DRIVER_ERROR;
				o.line = ev_squeezed_line(&q, w);
				next = i + strlen("error:outofmemory");
				found = 1;
			}
		} else if ((c == 'o' || c == 'O') && ev_at_ci(s, n, i, "outofmemory.") &&
		           !ev_at(s, n, i + 12, "Triedtoallocate")) {
			/* "XPU out of memory." with no recognisable tail */
			size_t w = ev_upper_word_before(s, i);
			if (w < i) {
				ev_copy_word(o.backend, sizeof o.backend, s + w, i - w);
				o.era = EV_OOM_ERA_GENERIC;
				o.line = ev_squeezed_line(&q, w);
				next = i + 12;
				found = 1;
			}
		}
		if (found && st == MR_OK && MR_GROW(out->ooms, *cap, out->oom_count + 1))
			st = mr_oom(err);
		if (found && st == MR_OK) {
			out->ooms[out->oom_count++] = o;
		} else {
			free(o.other_processes);
		}
		i = next > i ? next : i + 1;
	}
	free(q.s);
	free(q.line_at);
	return st;
}

/* ---- entry points ------------------------------------------------------------------------- */

void ev_text_free(ev_text *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->oom_count; i++)
		free(t->ooms[i].other_processes);
	free(t->ooms);
	free(t->summaries);
	memset(t, 0, sizeof *t);
}

mr_status ev_parse_text(const char *data, size_t len, ev_text *out, mr_error *err)
{
	size_t scap = 0, ocap = 0;
	memset(out, 0, sizeof *out);
	mr_status st = ev_find_tables(data, len, out, &scap, err);
	if (st == MR_OK)
		st = ev_find_ooms(data, len, out, &ocap, err);
	if (st == MR_OK && out->summary_count == 0 && out->oom_count == 0)
		st = mr_fail(err, MR_EINPUT,
		             "no memory_summary() table or CUDA out-of-memory message found");
	if (st != MR_OK)
		ev_text_free(out);
	return st;
}

/* ---- cause -------------------------------------------------------------------------------- */

const char *ev_cause_name(ev_cause c)
{
	switch (c) {
	case EV_CAUSE_FRAGMENTATION: return "fragmentation";
	case EV_CAUSE_CAPACITY: return "capacity";
	case EV_CAUSE_OTHER_PROCESSES: return "other_processes";
	default: return "unknown";
	}
}

uint64_t ev_oom_limit(const ev_oom *o)
{
	if (o->has_allowed && o->allowed > 0 &&
	    (!o->has_total_capacity || o->allowed <= o->total_capacity))
		return o->allowed;
	if (o->has_total_capacity)
		return o->total_capacity;
	return 0;
}

/* What this PyTorch allocator holds (reserved), when the message tells. */
static int ev_oom_reserved(const ev_oom *o, uint64_t *out)
{
	if (o->has_reserved_total) {
		*out = o->reserved_total;
		return 1;
	}
	if (o->has_allocated && o->has_reserved_unallocated) {
		*out = o->allocated_by_pytorch + o->reserved_unallocated;
		return 1;
	}
	if (o->has_allocated && o->era == EV_OOM_ERA_ASYNC_ALLOCATOR) {
		*out = o->allocated_by_pytorch;
		return 1;
	}
	return 0;
}

ev_cause ev_oom_cause(const ev_oom *o)
{
	uint64_t limit = ev_oom_limit(o);
	if (!o->has_requested || limit == 0)
		return EV_CAUSE_UNKNOWN;
	uint64_t req = o->requested_bytes, reserved = 0;
	int has_reserved = ev_oom_reserved(o, &reserved);

	/* Fragmentation: the cache held at least the request, in pieces, and that cache is at
	 * least 10% of the limit (a few MiB of slack next to a full GPU is not fragmentation). */
	if (o->has_reserved_unallocated && o->reserved_unallocated >= req &&
	    o->reserved_unallocated >= limit / 10)
		return EV_CAUSE_FRAGMENTATION;

	/* Other processes: skipped when the limit hit was a memory fraction (reserved + request
	 * went over `allowed`: PyTorch refused before asking the device). */
	uint64_t total = o->has_total_capacity ? o->total_capacity : limit;
	int fraction_hit =
	    o->has_allowed && o->allowed < total && has_reserved && reserved + req > o->allowed;
	if (!fraction_hit) {
		uint64_t outside = 0;
		int has_outside = 0;
		if (o->has_total_capacity && o->has_device_free && has_reserved) {
			uint64_t used = o->total_capacity > o->device_free
			                    ? o->total_capacity - o->device_free
			                    : 0;
			outside = used > reserved ? used - reserved : 0;
			has_outside = 1;
		} else if (o->other_process_count || o->has_this_process) {
			for (size_t i = 0; i < o->other_process_count; i++)
				outside += o->other_processes[i].bytes;
			if (o->has_this_process && has_reserved &&
			    o->this_process_in_use > reserved)
				outside += o->this_process_in_use - reserved;
			has_outside = 1;
		}
		if (has_outside && outside > total / 2)
			return EV_CAUSE_OTHER_PROCESSES;
	}

	/* Capacity: live tensors plus the request fill (>= 90% of) the limit; or the device itself
	 * ran dry (free < request) while live tensors hold at least half of it (the rest being the
	 * CUDA context and small slack, neither fragmentation nor other processes per the above).
	 */
	if (o->has_allocated && o->allocated_by_pytorch + req >= limit - limit / 10)
		return EV_CAUSE_CAPACITY;
	if (o->has_allocated && !fraction_hit && o->has_device_free && o->device_free < req &&
	    o->allocated_by_pytorch >= limit / 2)
		return EV_CAUSE_CAPACITY;
	return EV_CAUSE_UNKNOWN;
}

/* ---- memory_stats() JSON ------------------------------------------------------------------ */

void ev_stats_free(ev_stats *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->count; i++)
		free(s->items[i].key);
	free(s->items);
	s->items = NULL;
	s->count = 0;
}

int ev_stats_get(const ev_stats *s, const char *key, uint64_t *out)
{
	for (size_t i = 0; i < s->count; i++) {
		if (strcmp(s->items[i].key, key) != 0)
			continue;
		const ev_stat *it = &s->items[i];
		if (it->is_uint) {
			*out = it->uvalue;
			return 1;
		}
		if (it->value >= 0 && it->value < 18446744073709551615.0 &&
		    it->value == (double)(uint64_t)it->value) {
			*out = (uint64_t)it->value;
			return 1;
		}
		return 0;
	}
	return 0;
}

static size_t ev_skip_ws(const char *d, size_t len, size_t p)
{
	while (p < len && ev_isblank(d[p]))
		p++;
	return p;
}

/* Reads a quoted string at d[*p] (quote " or ') into b (unescaped; \uXXXX becomes '?'). */
static int ev_json_string(const char *d, size_t len, size_t *p, mr_buf *b)
{
	char quote = d[*p];
	size_t i = *p + 1;
	while (i < len && d[i] != quote) {
		char c = d[i];
		if (c == '\\') {
			if (i + 1 >= len)
				return 0;
			char e = d[i + 1];
			i += 2;
			switch (e) {
			case 'n': c = '\n'; break;
			case 't': c = '\t'; break;
			case 'r': c = '\r'; break;
			case 'b': c = '\b'; break;
			case 'f': c = '\f'; break;
			case 'u':
				for (int k = 0; k < 4 && i < len; k++)
					i++;
				c = '?';
				break;
			default: c = e; break;
			}
			if (b)
				mr_buf_putc(b, c);
			continue;
		}
		if (b)
			mr_buf_putc(b, c);
		i++;
	}
	if (i >= len)
		return 0;
	*p = i + 1;
	return 1;
}

/* Parses a number at d[*p]: fills *dv, and *uv and *is_uint for a non-negative integer literal. */
static int ev_json_number(const char *d, size_t len, size_t *p, double *dv, uint64_t *uv,
                          int *is_uint)
{
	char tmp[80];
	size_t i = *p, k = 0;
	while (i < len && k < sizeof tmp - 1 &&
	       (ev_isdigit(d[i]) || d[i] == '-' || d[i] == '+' || d[i] == '.' || d[i] == 'e' ||
	        d[i] == 'E'))
		tmp[k++] = d[i++];
	tmp[k] = '\0';
	if (k == 0 || k == sizeof tmp - 1)
		return 0;
	char *end;
	errno = 0;
	double v = strtod(tmp, &end);
	if ((size_t)(end - tmp) != k)
		return 0;
	*dv = v;
	*is_uint = 0;
	uint64_t u = 0;
	size_t j = 0;
	int ok = 1;
	for (; j < k; j++) {
		if (!ev_isdigit(tmp[j])) {
			ok = 0;
			break;
		}
		unsigned dg = (unsigned)(tmp[j] - '0');
		if (u > (UINT64_MAX - dg) / 10) {
			ok = 0;
			break;
		}
		u = u * 10 + dg;
	}
	if (ok) {
		*uv = u;
		*is_uint = 1;
	}
	*p = i;
	return 1;
}

/* Skips an array value, counting brackets (no recursion); strings inside are skipped whole. */
static int ev_json_skip_array(const char *d, size_t len, size_t *p)
{
	size_t i = *p, depth = 0;
	while (i < len) {
		char c = d[i];
		if (c == '"' || c == '\'') {
			if (!ev_json_string(d, len, &i, NULL))
				return 0;
			continue;
		}
		if (c == '[' || c == '{')
			depth++;
		else if (c == ']' || c == '}') {
			if (depth == 0)
				return 0;
			if (--depth == 0) {
				*p = i + 1;
				return 1;
			}
		}
		i++;
	}
	return 0;
}

mr_status ev_parse_stats_json(const char *data, size_t len, ev_stats *out, mr_error *err)
{
	size_t cap = 0, depth = 0, plen[EV_STATS_MAX_DEPTH + 1];
	mr_buf path = {0}, key = {0};
	mr_status st = MR_OK;
	memset(out, 0, sizeof *out);

	size_t p = ev_skip_ws(data, len, 0);
	if (p + 3 <= len && memcmp(data + p, "\xEF\xBB\xBF", 3) == 0) /* UTF-8 BOM */
		p = ev_skip_ws(data, len, p + 3);
	if (p >= len || data[p] != '{') {
		st = mr_fail(err, MR_EINPUT, "memory_stats: expected '{' at byte %zu", p);
		goto done;
	}
	p++;
	depth = 1;
	plen[0] = 0;
	plen[1] = 0;
	while (depth > 0) {
		p = ev_skip_ws(data, len, p);
		if (p >= len) {
			st = mr_fail(err, MR_EINPUT,
			             "memory_stats: unexpected end of input at byte %zu", p);
			goto done;
		}
		if (data[p] == '}') {
			p++;
			depth--;
			path.len = plen[depth];
			if (path.data)
				path.data[path.len] = '\0';
			if (depth > 0) {
				p = ev_skip_ws(data, len, p);
				if (p < len && data[p] == ',')
					p++;
			}
			continue;
		}
		if (data[p] != '"' && data[p] != '\'') {
			st = mr_fail(err, MR_EINPUT, "memory_stats: expected a key at byte %zu", p);
			goto done;
		}
		key.len = 0;
		mr_buf_append(&key, path.data ? path.data : "", path.len);
		if (!ev_json_string(data, len, &p, &key)) {
			st = mr_fail(err, MR_EINPUT,
			             "memory_stats: unterminated string at byte %zu", p);
			goto done;
		}
		mr_buf_putc(&key, '\0');
		if (key.failed) {
			st = mr_oom(err);
			goto done;
		}
		key.len--; /* keep the NUL out of the length */
		p = ev_skip_ws(data, len, p);
		if (p >= len || data[p] != ':') {
			st = mr_fail(err, MR_EINPUT, "memory_stats: expected ':' at byte %zu", p);
			goto done;
		}
		p = ev_skip_ws(data, len, p + 1);
		if (p >= len) {
			st = mr_fail(err, MR_EINPUT,
			             "memory_stats: unexpected end of input at byte %zu", p);
			goto done;
		}
		char c = data[p];
		if (c == '{') {
			if (depth >= EV_STATS_MAX_DEPTH) {
				st = mr_fail(err, MR_EINPUT,
				             "memory_stats: objects nested too deeply at byte %zu",
				             p);
				goto done;
			}
			p++;
			path.len = 0;
			mr_buf_append(&path, key.data, key.len);
			mr_buf_putc(&path, '.');
			if (path.failed) {
				st = mr_oom(err);
				goto done;
			}
			plen[depth + 1] = path.len;
			depth++;
			continue;
		}
		if (c == '"' || c == '\'') {
			if (!ev_json_string(data, len, &p, NULL)) {
				st = mr_fail(err, MR_EINPUT,
				             "memory_stats: unterminated string at byte %zu", p);
				goto done;
			}
		} else if (c == '[') {
			if (!ev_json_skip_array(data, len, &p)) {
				st = mr_fail(err, MR_EINPUT,
				             "memory_stats: unterminated array at byte %zu", p);
				goto done;
			}
		} else if (ev_isalpha(c)) {
			static const char *lits[] = {"true", "false", "null",
			                             "True", "False", "None"};
			size_t k = 0;
			for (; k < sizeof lits / sizeof lits[0]; k++)
				if (ev_at(data, len, p, lits[k]))
					break;
			if (k == sizeof lits / sizeof lits[0]) {
				st = mr_fail(err, MR_EINPUT,
				             "memory_stats: unexpected value at byte %zu", p);
				goto done;
			}
			p += strlen(lits[k]);
		} else {
			double dv;
			uint64_t uv = 0;
			int is_uint = 0;
			size_t at = p;
			if (!ev_json_number(data, len, &p, &dv, &uv, &is_uint)) {
				st = mr_fail(err, MR_EINPUT,
				             "memory_stats: expected a number at byte %zu", at);
				goto done;
			}
			if (MR_GROW(out->items, cap, out->count + 1)) {
				st = mr_oom(err);
				goto done;
			}
			ev_stat *it = &out->items[out->count];
			it->key = mr_strndup(key.data, key.len);
			if (!it->key) {
				st = mr_oom(err);
				goto done;
			}
			it->value = dv;
			it->uvalue = uv;
			it->is_uint = is_uint;
			out->count++;
		}
		p = ev_skip_ws(data, len, p);
		if (p >= len) {
			st = mr_fail(err, MR_EINPUT,
			             "memory_stats: unexpected end of input at byte %zu", p);
			goto done;
		}
		if (data[p] == ',')
			p++;
		else if (data[p] != '}') {
			st = mr_fail(err, MR_EINPUT,
			             "memory_stats: expected ',' or '}' at byte %zu", p);
			goto done;
		}
	}
	if (out->count == 0)
		st = mr_fail(err, MR_EINPUT, "memory_stats: the object holds no numeric value");
done:
	mr_buf_free(&path);
	mr_buf_free(&key);
	if (st != MR_OK)
		ev_stats_free(out);
	return st;
}
