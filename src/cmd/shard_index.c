/* shard_index.c: shard keys, and the shard index written and read strictly. */
#include "cmd/shard_index.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/escape.h"
#include "base/hash128.h"
#include "base/mem.h"
#include "base/version.h"
#include "cmd/options.h"

/* ---- keys ----------------------------------------------------------------------------------- */

char *sx_key(const ar_run *run)
{
	return mr_format("%zu:%s", run->input_no, run->group ? run->group : "");
}

unsigned sx_shard_of(const char *key, unsigned count)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (const unsigned char *p = (const unsigned char *)key; *p; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	return count ? (unsigned)(h % count) : 0;
}

void sx_runs_digest(const ar_set *set, char out[33])
{
	h128_state h;
	h128_digest d;
	h128_init(&h, 0x7368617264ull);
	h128_u64(&h, set->count);
	for (size_t i = 0; i < set->count; i++) {
		const ar_run *r = &set->runs[i];
		h128_str(&h, r->name ? r->name : "");
		h128_str(&h, r->group ? r->group : "");
		h128_str(&h, r->slug ? r->slug : "");
		h128_u64(&h, r->input_no);
		h128_u64(&h, r->member_count);
		for (size_t k = 0; k < r->member_count; k++)
			h128_str(&h, r->members[k].name);
	}
	h128_final(&h, &d);
	h128_hex(&d, out);
}

/* ---- writing -------------------------------------------------------------------------------- */

static void put_opt_long(mr_buf *b, long v)
{
	if (v >= 0)
		mr_buf_printf(b, "%ld", v);
	else
		mr_buf_puts(b, "null");
}

static void put_shape(mr_buf *b, const sx_shape *s)
{
	mr_buf_puts(b, "{\"inputs\": [");
	for (size_t i = 0; i < s->input_count; i++) {
		mr_buf_puts(b, i ? ", " : "");
		mr_json_str(b, s->inputs[i]);
	}
	mr_buf_puts(b, "], \"device\": ");
	put_opt_long(b, s->device);
	mr_buf_printf(
	    b, ", \"redact_paths\": %s, \"templates\": ", s->redact_paths ? "true" : "false");
	mr_json_str(b, s->templates);
	mr_buf_puts(b, "}");
}

static void put_row(mr_buf *b, const ix_row *e)
{
	/* Only a finite fraction is one: anything else is shown as unknown, as the index does. */
	double frag = isfinite(e->fragmentation) && e->fragmentation >= 0 ? e->fragmentation : -1.0;
	mr_buf_puts(b, "{\"settings\": ");
	mr_json_str(b, e->settings ? e->settings : "");
	mr_buf_printf(b,
	              ", \"has_snapshot\": %s, \"has_peaks\": %s, \"peak_reserved\": %" PRIu64
	              ", \"peak_allocated\": %" PRIu64 ", \"fragmentation\": %.17g, "
	              "\"device_count\": %" PRIu64 ", \"oom_cause\": ",
	              e->has_snapshot ? "true" : "false", e->has_peaks ? "true" : "false",
	              e->peak_reserved, e->peak_allocated, frag, e->device_count);
	mr_json_str(b, e->oom_cause);
	mr_buf_puts(b, ", \"rec_id\": ");
	mr_json_str(b, e->rec_id);
	mr_buf_puts(b, ", \"rec_title\": ");
	mr_json_str(b, e->rec_title);
	mr_buf_puts(b, ", \"verdict\": ");
	mr_json_str(b, e->verdict);
	mr_buf_puts(b, "}");
}

static void put_run(mr_buf *b, size_t position, const ar_run *r, const ix_line *x, int status,
                    const char *key)
{
	mr_buf_printf(b, "{\"position\": %zu, \"key\": ", position);
	mr_json_str(b, key);
	mr_buf_puts(b, ", \"name\": ");
	mr_json_str(b, r->name);
	mr_buf_puts(b, ", \"group\": ");
	mr_json_str(b, r->group);
	mr_buf_puts(b, ", \"rank\": ");
	put_opt_long(b, r->rank);
	mr_buf_puts(b, ", \"iteration\": ");
	put_opt_long(b, r->iteration);
	mr_buf_puts(b, ", \"slug\": ");
	mr_json_str(b, r->slug);
	mr_buf_puts(b, ", \"inputs\": [");
	for (size_t k = 0; k < r->member_count; k++) {
		mr_buf_puts(b, k ? ", " : "");
		mr_json_str(b, r->members[k].name);
	}
	mr_buf_printf(b, "], \"status\": %d, \"error\": ", x->done ? 0 : status == 1 ? 1 : 2);
	mr_json_str(b, x->done ? NULL : x->error ? x->error : "not processed");
	mr_buf_puts(b, ",\n \"row\": ");
	if (x->done)
		put_row(b, x->row);
	else
		mr_buf_puts(b, "null");
	mr_buf_puts(b, ",\n \"result\": ");
	ix_put_document(b, x->json, x->done ? x->json_len : 0);
	mr_buf_puts(b, "}");
}

mr_status sx_write(mr_buf *b, unsigned index, unsigned count, const sx_shape *shape,
                   const ar_set *set, const unsigned char *take, const ix_line *lines,
                   const int *status, mr_error *err)
{
	char digest[33];
	sx_runs_digest(set, digest);
	mr_buf_printf(b,
	              "{\"schema\": \"memreport-shard/1\", \"memreport\": \"" MEMREPORT_VERSION
	              "\", \"shard\": %u, \"of\": %u,\n\"shape\": ",
	              index, count);
	put_shape(b, shape);
	mr_buf_printf(b, ",\n\"runs_total\": %zu, \"runs_digest\": \"%s\",\n\"runs\": [",
	              set->count, digest);
	int first = 1;
	for (size_t i = 0; i < set->count; i++) {
		if (!take[i])
			continue;
		char *key = sx_key(&set->runs[i]);
		if (!key)
			return mr_oom(err);
		mr_buf_puts(b, first ? "\n" : ",\n");
		first = 0;
		put_run(b, i, &set->runs[i], &lines[i], status[i], key);
		free(key);
	}
	mr_buf_puts(b, "\n]}\n");
	return b->failed ? mr_oom(err) : MR_OK;
}

/* ---- reading -------------------------------------------------------------------------------- */

typedef struct {
	const char *file;
	const char *p;
	size_t len, pos;
	mr_error *err;
	int failed;
} cursor;

static int fail_at(cursor *c, const char *what)
{
	if (!c->failed)
		mr_fail(c->err, MR_EINPUT,
		        "%s: byte %zu: expected %s (not a shard index of this memreport?)", c->file,
		        c->pos, what);
	c->failed = 1;
	return -1;
}

static void skip_ws(cursor *c)
{
	while (c->pos < c->len && (c->p[c->pos] == ' ' || c->p[c->pos] == '\n' ||
	                           c->p[c->pos] == '\t' || c->p[c->pos] == '\r'))
		c->pos++;
}

static int peek(cursor *c)
{
	skip_ws(c);
	return c->pos < c->len ? (unsigned char)c->p[c->pos] : -1;
}

static int expect(cursor *c, char ch)
{
	char what[8] = {'\'', ch, '\'', 0};
	if (c->failed || peek(c) != (unsigned char)ch)
		return fail_at(c, what);
	c->pos++;
	return 0;
}

static int literal(cursor *c, const char *word)
{
	size_t n = strlen(word);
	if (c->failed || peek(c) < 0 || c->len - c->pos < n || memcmp(c->p + c->pos, word, n) != 0)
		return -1;
	c->pos += n;
	return 0;
}

/* Takes null when it is next: 1 when it was, 0 when not. */
static int null_next(cursor *c)
{
	return literal(c, "null") == 0;
}

static int hex4(const char *s, unsigned *out)
{
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		char ch = s[i];
		int d = ch >= '0' && ch <= '9'   ? ch - '0'
		        : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
		        : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
		                                 : -1;
		if (d < 0)
			return -1;
		v = v << 4 | (unsigned)d;
	}
	*out = v;
	return 0;
}

static void put_utf8(mr_buf *b, unsigned cp)
{
	if (cp < 0x80) {
		mr_buf_putc(b, (char)cp);
	} else if (cp < 0x800) {
		mr_buf_putc(b, (char)(0xC0 | cp >> 6));
		mr_buf_putc(b, (char)(0x80 | (cp & 0x3F)));
	} else if (cp < 0x10000) {
		mr_buf_putc(b, (char)(0xE0 | cp >> 12));
		mr_buf_putc(b, (char)(0x80 | ((cp >> 6) & 0x3F)));
		mr_buf_putc(b, (char)(0x80 | (cp & 0x3F)));
	} else {
		mr_buf_putc(b, (char)(0xF0 | cp >> 18));
		mr_buf_putc(b, (char)(0x80 | ((cp >> 12) & 0x3F)));
		mr_buf_putc(b, (char)(0x80 | ((cp >> 6) & 0x3F)));
		mr_buf_putc(b, (char)(0x80 | (cp & 0x3F)));
	}
}

/* One escape after the backslash at c->pos; appends its character. */
static int unescape(cursor *c, mr_buf *b)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	const char *e = c->pos + 1 < c->len ? strchr(from, c->p[c->pos + 1]) : NULL;
	if (e && *e) {
		mr_buf_putc(b, to[e - from]);
		c->pos += 2;
		return 0;
	}
	unsigned cp, lo;
	if (c->len - c->pos < 6 || c->p[c->pos + 1] != 'u' || hex4(c->p + c->pos + 2, &cp) ||
	    cp == 0 || (cp >= 0xDC00 && cp <= 0xDFFF))
		return fail_at(c, "a JSON escape (no \\u0000 or lone surrogate)");
	c->pos += 6;
	if (cp >= 0xD800 && cp <= 0xDBFF) {
		if (c->len - c->pos < 6 || c->p[c->pos] != '\\' || c->p[c->pos + 1] != 'u' ||
		    hex4(c->p + c->pos + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
			return fail_at(c, "the second half of a surrogate pair");
		c->pos += 6;
		cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
	}
	put_utf8(b, cp);
	return 0;
}

/* A JSON string into a fresh C string (*out); null too when nullable (*out = NULL). */
static int str(cursor *c, char **out, int nullable)
{
	*out = NULL;
	if (nullable && null_next(c))
		return 0;
	if (c->failed || peek(c) != '"')
		return fail_at(c, nullable ? "a string or null" : "a string");
	c->pos++;
	mr_buf b = {0};
	while (c->pos < c->len && c->p[c->pos] != '"') {
		unsigned char ch = (unsigned char)c->p[c->pos];
		if (ch < 0x20) {
			fail_at(c, "no control character inside a string");
			break;
		}
		if (ch == '\\') {
			if (unescape(c, &b))
				break;
			continue;
		}
		mr_buf_putc(&b, (char)ch);
		c->pos++;
	}
	if (!c->failed && c->pos >= c->len)
		fail_at(c, "the end of the string");
	if (c->failed || b.failed) {
		if (!c->failed)
			c->failed = mr_oom(c->err) != MR_OK;
		mr_buf_free(&b);
		return -1;
	}
	c->pos++;
	*out = b.data ? b.data : mr_strndup("", 0);
	if (!*out) {
		mr_oom(c->err);
		c->failed = 1;
		return -1;
	}
	return 0;
}

static int key(cursor *c, const char *name)
{
	char *k = NULL;
	char what[64];
	snprintf(what, sizeof what, "the key \"%s\"", name);
	if (c->failed)
		return -1;
	size_t at = c->pos;
	if (str(c, &k, 0) || strcmp(k, name) != 0) {
		free(k);
		memset(c->err, 0, sizeof *c->err); /* say which key was expected instead */
		c->failed = 0;
		c->pos = at;
		skip_ws(c);
		return fail_at(c, what);
	}
	free(k);
	return expect(c, ':');
}

/* The length of the JSON number at s (0: none), by the grammar. */
static size_t number_len(const char *s, size_t left)
{
	size_t i = 0;
	if (i < left && s[i] == '-')
		i++;
	if (i < left && s[i] == '0')
		i++;
	else if (i < left && s[i] >= '1' && s[i] <= '9')
		while (i < left && s[i] >= '0' && s[i] <= '9')
			i++;
	else
		return 0;
	if (i < left && s[i] == '.') {
		size_t d = ++i;
		while (i < left && s[i] >= '0' && s[i] <= '9')
			i++;
		if (i == d)
			return 0;
	}
	if (i < left && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < left && (s[i] == '+' || s[i] == '-'))
			i++;
		size_t d = i;
		while (i < left && s[i] >= '0' && s[i] <= '9')
			i++;
		if (i == d)
			return 0;
	}
	return i;
}

/* The integer token next (digits, an optional '-'; the JSON grammar) into tmp; -1 if none. */
static int int_token(cursor *c, char tmp[32])
{
	peek(c);
	size_t n = c->failed ? 0 : number_len(c->p + c->pos, c->len - c->pos);
	if (!n || n >= 32 || memchr(c->p + c->pos, '.', n) || memchr(c->p + c->pos, 'e', n) ||
	    memchr(c->p + c->pos, 'E', n))
		return -1;
	memcpy(tmp, c->p + c->pos, n);
	tmp[n] = 0;
	c->pos += n;
	return 0;
}

/* An integer in [lo, hi]; null gives `none` when nullable. */
static int integer(cursor *c, long long lo, long long hi, int nullable, long long none,
                   long long *out)
{
	char tmp[32];
	if (nullable && null_next(c)) {
		*out = none;
		return 0;
	}
	size_t at = c->pos;
	if (int_token(c, tmp))
		return fail_at(c, nullable ? "an integer or null" : "an integer");
	errno = 0;
	long long v = strtoll(tmp, NULL, 10);
	if (errno || v < lo || v > hi) {
		c->pos = at;
		return fail_at(c, "an integer in range");
	}
	*out = v;
	return 0;
}

static int u64(cursor *c, uint64_t *out)
{
	char tmp[32];
	size_t at = c->pos;
	if (int_token(c, tmp) || tmp[0] == '-')
		return fail_at(c, "a non-negative integer");
	errno = 0;
	unsigned long long v = strtoull(tmp, NULL, 10);
	if (errno) {
		c->pos = at;
		return fail_at(c, "a non-negative integer that fits 64 bits");
	}
	*out = v;
	return 0;
}

static int boolean(cursor *c, int *out)
{
	if (literal(c, "true") == 0)
		*out = 1;
	else if (literal(c, "false") == 0)
		*out = 0;
	else
		return fail_at(c, "true or false");
	return 0;
}

static int number(cursor *c, double *out)
{
	peek(c);
	size_t n = c->failed ? 0 : number_len(c->p + c->pos, c->len - c->pos);
	char tmp[64];
	if (!n || n >= sizeof tmp)
		return fail_at(c, "a number");
	memcpy(tmp, c->p + c->pos, n);
	tmp[n] = 0;
	*out = strtod(tmp, NULL);
	c->pos += n;
	return 0;
}

/* Any one JSON value, checked by the grammar without recursion (a stack of open brackets);
 * *start and *len span it. */
static int any_value(cursor *c, const char **start, size_t *len)
{
	mr_buf open = {0}; /* '{' or '[' per level */
	int want_value = 1;
	peek(c);
	size_t from = c->pos;
	while (!c->failed) {
		int ch = peek(c);
		if (want_value) {
			char *s = NULL;
			double d;
			if (ch == '{' || ch == '[') {
				mr_buf_putc(&open, (char)ch);
				c->pos++;
				if (peek(c) == (ch == '{' ? '}' : ']')) {
					open.len--;
					c->pos++;
					want_value = 0;
				} else if (ch == '{') {
					str(c, &s, 0);
					expect(c, ':');
				}
				free(s);
				if (open.failed)
					c->failed = mr_oom(c->err) != MR_OK;
				continue;
			}
			if (ch == '"')
				str(c, &s, 0);
			else if (literal(c, "true") && literal(c, "false") && literal(c, "null"))
				number(c, &d);
			free(s);
			want_value = 0;
			continue;
		}
		if (!open.len)
			break;
		char top = open.data[open.len - 1];
		if (ch == (top == '{' ? '}' : ']')) {
			open.len--;
			c->pos++;
		} else if (ch == ',') {
			c->pos++;
			char *s = NULL;
			if (top == '{') {
				str(c, &s, 0);
				expect(c, ':');
			}
			free(s);
			want_value = 1;
		} else {
			fail_at(c, top == '{' ? "',' or '}'" : "',' or ']'");
		}
	}
	mr_buf_free(&open);
	*start = c->p + from;
	*len = c->pos - from;
	return c->failed ? -1 : 0;
}

static void free_list(char **list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(list[i]);
	free(list);
}

/* A JSON array: item(c, ctx) reads each element. Returns 0, or -1 with c->failed set. */
static int array_of(cursor *c, int (*item)(cursor *c, void *ctx), void *ctx)
{
	if (expect(c, '['))
		return -1;
	if (peek(c) == ']') {
		c->pos++;
		return 0;
	}
	for (;;) {
		if (item(c, ctx))
			return c->failed ? -1 : fail_at(c, "an element of the list");
		if (peek(c) != ',')
			return expect(c, ']');
		c->pos++;
	}
}

typedef struct {
	char **list;
	size_t count, cap;
} str_acc;

static int str_item(cursor *c, void *ctx)
{
	str_acc *a = ctx;
	char *s;
	if (str(c, &s, 0))
		return -1;
	if (MR_GROW(a->list, a->cap, a->count + 1)) {
		free(s);
		c->failed = mr_oom(c->err) != MR_OK;
		return -1;
	}
	a->list[a->count++] = s;
	return 0;
}

/* A list of strings: ["a", "b"]. Nothing half-read is kept. */
static int str_list(cursor *c, char ***out, size_t *count)
{
	str_acc a = {NULL, 0, 0};
	int rc = array_of(c, str_item, &a);
	if (rc) {
		free_list(a.list, a.count);
		a.list = NULL;
		a.count = 0;
	}
	*out = a.list;
	*count = a.count;
	return rc;
}

static int shape(cursor *c, sx_doc *d)
{
	long long device;
	int redact;
	peek(c);
	size_t from = c->pos;
	if (expect(c, '{') || key(c, "inputs") || str_list(c, &d->inputs, &d->input_count) ||
	    expect(c, ',') || key(c, "device") || integer(c, 0, 1024, 1, -1, &device) ||
	    expect(c, ',') || key(c, "redact_paths") || boolean(c, &redact) || expect(c, ',') ||
	    key(c, "templates") || str(c, &d->templates, 1) || expect(c, '}'))
		return -1;
	d->shape = c->p + from;
	d->shape_len = c->pos - from;
	return 0;
}

static int row_facts(cursor *c, ix_row *e)
{
	int hs, hp;
	if (expect(c, '{') || key(c, "settings") || str(c, &e->settings, 0) || expect(c, ',') ||
	    key(c, "has_snapshot") || boolean(c, &hs) || expect(c, ',') || key(c, "has_peaks") ||
	    boolean(c, &hp) || expect(c, ',') || key(c, "peak_reserved") ||
	    u64(c, &e->peak_reserved) || expect(c, ',') || key(c, "peak_allocated") ||
	    u64(c, &e->peak_allocated) || expect(c, ',') || key(c, "fragmentation") ||
	    number(c, &e->fragmentation) || expect(c, ',') || key(c, "device_count") ||
	    u64(c, &e->device_count) || expect(c, ',') || key(c, "oom_cause") ||
	    str(c, &e->oom_cause, 1) || expect(c, ',') || key(c, "rec_id") ||
	    str(c, &e->rec_id, 1) || expect(c, ',') || key(c, "rec_title") ||
	    str(c, &e->rec_title, 1) || expect(c, ',') || key(c, "verdict") ||
	    str(c, &e->verdict, 1) || expect(c, '}'))
		return -1;
	e->has_snapshot = hs;
	e->has_peaks = hp;
	return 0;
}

static void row_free(sx_row *r)
{
	free(r->key);
	free(r->run.name);
	free(r->run.group);
	free(r->run.slug);
	for (size_t k = 0; k < r->run.member_count; k++)
		free(r->run.members[k].name);
	free(r->run.members);
	free(r->error);
	ix_row_free(&r->row);
	memset(r, 0, sizeof *r);
}

/* The run's members from a list of names. */
static int members(cursor *c, ar_run *run)
{
	char **names;
	size_t n;
	if (str_list(c, &names, &n))
		return -1;
	run->members = mr_alloc_array(n ? n : 1, sizeof *run->members);
	if (!run->members) {
		free_list(names, n);
		c->failed = mr_oom(c->err) != MR_OK;
		return -1;
	}
	for (size_t k = 0; k < n; k++)
		run->members[k] = (sr_member){.name = names[k], .zip_index = -1};
	run->member_count = n;
	free(names);
	return 0;
}

static int one_row(cursor *c, sx_row *r)
{
	long long rank, iteration, status;
	memset(r, 0, sizeof *r);
	if (expect(c, '{') || key(c, "position") || u64(c, &r->position) || expect(c, ',') ||
	    key(c, "key") || str(c, &r->key, 0) || expect(c, ',') || key(c, "name") ||
	    str(c, &r->run.name, 0) || expect(c, ',') || key(c, "group") ||
	    str(c, &r->run.group, 0) || expect(c, ',') || key(c, "rank") ||
	    integer(c, 0, INT32_MAX, 1, -1, &rank) || expect(c, ',') || key(c, "iteration") ||
	    integer(c, 0, INT32_MAX, 1, -1, &iteration) || expect(c, ',') || key(c, "slug") ||
	    str(c, &r->run.slug, 0) || expect(c, ',') || key(c, "inputs") || members(c, &r->run) ||
	    expect(c, ',') || key(c, "status") || integer(c, 0, 2, 0, 0, &status) ||
	    expect(c, ',') || key(c, "error") || str(c, &r->error, 1) || expect(c, ',') ||
	    key(c, "row"))
		return -1;
	r->run.rank = (int)rank;
	r->run.iteration = (long)iteration;
	r->status = (int)status;
	r->done = !null_next(c);
	if (r->done && row_facts(c, &r->row))
		return -1;
	if (expect(c, ',') || key(c, "result"))
		return -1;
	if (!r->done && !null_next(c))
		return fail_at(c, "null (a run without a report has no result)");
	if (r->done && !null_next(c) && peek(c) != '{')
		return fail_at(c, "the run's memreport/1 document");
	if (r->done && peek(c) == '{' && any_value(c, &r->json, &r->json_len))
		return -1;
	if (expect(c, '}'))
		return -1;
	/* a report and its error, or neither, contradict each other */
	if (r->done != (status == 0) || r->done != !r->error)
		return fail_at(c, "a status, error and row that agree");
	return 0;
}

typedef struct {
	sx_doc *d;
	size_t cap;
} run_acc;

static int run_item(cursor *c, void *ctx)
{
	run_acc *a = ctx;
	sx_doc *d = a->d;
	if (MR_GROW(d->rows, a->cap, d->row_count + 1)) {
		c->failed = mr_oom(c->err) != MR_OK;
		return -1;
	}
	sx_row *r = &d->rows[d->row_count];
	int bad = one_row(c, r);
	d->row_count++; /* a partial row is freed with the doc */
	if (bad)
		return -1;
	if (r->position >= d->runs_total ||
	    (d->row_count > 1 && r->position <= d->rows[d->row_count - 2].position))
		return fail_at(c, "runs in increasing position below runs_total");
	if (sx_shard_of(r->key, d->count) != d->index)
		return fail_at(c, "a run whose key belongs to this shard");
	char *colon;
	errno = 0;
	unsigned long long input_no = strtoull(r->key, &colon, 10);
	if (errno || r->key[0] < '0' || r->key[0] > '9' || *colon != ':' ||
	    input_no >= d->input_count || strcmp(colon + 1, r->run.group) != 0)
		return fail_at(c, "a key that is the run's input number and group");
	r->run.input_no = (size_t)input_no;
	return 0;
}

static int runs(cursor *c, sx_doc *d)
{
	run_acc a = {d, 0};
	return array_of(c, run_item, &a);
}

mr_status sx_parse(const char *file, const char *data, size_t len, sx_doc *d, mr_error *err)
{
	cursor c = {file, data, len, 0, err, 0};
	long long index, count;
	char *schema = NULL, *digest = NULL;
	memset(d, 0, sizeof *d);
	if (expect(&c, '{') || key(&c, "schema") || str(&c, &schema, 0))
		goto done;
	if (strcmp(schema, "memreport-shard/1") != 0) {
		c.pos = 0;
		fail_at(&c, "the schema memreport-shard/1");
		goto done;
	}
	if (expect(&c, ',') || key(&c, "memreport") || str(&c, &d->version, 0) || expect(&c, ',') ||
	    key(&c, "shard") || integer(&c, 0, CMD_MAX_SHARDS - 1, 0, 0, &index) ||
	    expect(&c, ',') || key(&c, "of") || integer(&c, 1, CMD_MAX_SHARDS, 0, 0, &count) ||
	    expect(&c, ','))
		goto done;
	if (index >= count) {
		fail_at(&c, "a shard I below N");
		goto done;
	}
	d->index = (unsigned)index;
	d->count = (unsigned)count;
	if (key(&c, "shape") || shape(&c, d) || expect(&c, ',') || key(&c, "runs_total") ||
	    u64(&c, &d->runs_total) || expect(&c, ',') || key(&c, "runs_digest") ||
	    str(&c, &digest, 0))
		goto done;
	if (strlen(digest) != 32 || strspn(digest, "0123456789abcdef") != 32) {
		fail_at(&c, "a runs_digest of 32 hex digits");
		goto done;
	}
	memcpy(d->runs_digest, digest, 33);
	if (expect(&c, ',') || key(&c, "runs") || runs(&c, d) || expect(&c, '}'))
		goto done;
	if (peek(&c) >= 0)
		fail_at(&c, "the end of the file");
done:
	free(schema);
	free(digest);
	if (c.failed)
		sx_doc_free(d);
	return c.failed ? err->status : MR_OK;
}

void sx_doc_free(sx_doc *d)
{
	free(d->version);
	free_list(d->inputs, d->input_count);
	free(d->templates);
	for (size_t i = 0; i < d->row_count; i++)
		row_free(&d->rows[i]);
	free(d->rows);
	memset(d, 0, sizeof *d);
}

mr_status sx_index_view(const sx_row *const *rows, size_t n, ar_set *set, ix_line **lines,
                        mr_error *err)
{
	set->runs = mr_alloc_array(n ? n : 1, sizeof *set->runs);
	*lines = mr_alloc_array(n ? n : 1, sizeof **lines);
	set->count = n;
	if (!set->runs || !*lines) {
		free(set->runs);
		free(*lines);
		set->runs = NULL;
		*lines = NULL;
		set->count = 0;
		return mr_oom(err);
	}
	for (size_t i = 0; i < n; i++) {
		set->runs[i] = rows[i]->run;
		(*lines)[i] = (ix_line){rows[i]->done, rows[i]->error, &rows[i]->row, rows[i]->json,
		                        rows[i]->json_len};
	}
	return MR_OK;
}
