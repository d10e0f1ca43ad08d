/* stats_json.c: memory_stats() dumps. No recursion: nested objects use an explicit, bounded
 * stack. */
#include "decode/stats_json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/mem.h"
#include "decode/chars.h"

#define EV_STATS_MAX_DEPTH 32 /* nested memory_stats objects */

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
	while (p < len && tc_isblank(d[p]))
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
	       (tc_isdigit(d[i]) || d[i] == '-' || d[i] == '+' || d[i] == '.' || d[i] == 'e' ||
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
		if (!tc_isdigit(tmp[j])) {
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

/* The parser's state: where it is, the key path of the objects it is inside ("a.b."), and the
 * path length at each depth, so that closing an object drops its part of the path. */
typedef struct {
	const char *d;
	size_t len, p;
	size_t depth, plen[EV_STATS_MAX_DEPTH + 1];
	mr_buf path, key;
	ev_stats *out;
	size_t cap;
	mr_error *err;
} sj_parser;

static mr_status sj_fail(sj_parser *j, const char *what, size_t at)
{
	return mr_fail(j->err, MR_EINPUT, "memory_stats: %s at byte %zu", what, at);
}

/* Skips blanks; fails at the end of the input. */
static mr_status sj_more(sj_parser *j)
{
	j->p = ev_skip_ws(j->d, j->len, j->p);
	return j->p < j->len ? MR_OK : sj_fail(j, "unexpected end of input", j->p);
}

/* '}' at p: leaves the object, and the ',' after it when it was nested. */
static void sj_close(sj_parser *j)
{
	j->p++;
	j->depth--;
	j->path.len = j->plen[j->depth];
	if (j->path.data)
		j->path.data[j->path.len] = '\0';
	if (j->depth > 0) {
		j->p = ev_skip_ws(j->d, j->len, j->p);
		if (j->p < j->len && j->d[j->p] == ',')
			j->p++;
	}
}

/* A key at p: its full dotted path goes to j->key; p ends up at the value. */
static mr_status sj_key(sj_parser *j)
{
	char c = j->d[j->p];
	if (c != '"' && c != '\'')
		return sj_fail(j, "expected a key", j->p);
	j->key.len = 0;
	mr_buf_append(&j->key, j->path.data ? j->path.data : "", j->path.len);
	if (!ev_json_string(j->d, j->len, &j->p, &j->key))
		return sj_fail(j, "unterminated string", j->p);
	mr_buf_putc(&j->key, '\0');
	if (j->key.failed)
		return mr_oom(j->err);
	j->key.len--; /* keep the NUL out of the length */
	j->p = ev_skip_ws(j->d, j->len, j->p);
	if (j->p >= j->len || j->d[j->p] != ':')
		return sj_fail(j, "expected ':'", j->p);
	j->p++;
	return sj_more(j);
}

/* '{' at p: the object's keys are prefixed with "<key>.". */
static mr_status sj_open(sj_parser *j)
{
	if (j->depth >= EV_STATS_MAX_DEPTH)
		return sj_fail(j, "objects nested too deeply", j->p);
	j->p++;
	j->path.len = 0;
	mr_buf_append(&j->path, j->key.data, j->key.len);
	mr_buf_putc(&j->path, '.');
	if (j->path.failed)
		return mr_oom(j->err);
	j->plen[j->depth + 1] = j->path.len;
	j->depth++;
	return MR_OK;
}

/* A number at p, recorded under the current key. */
static mr_status sj_number(sj_parser *j)
{
	double dv;
	uint64_t uv = 0;
	int is_uint = 0;
	size_t at = j->p;
	if (!ev_json_number(j->d, j->len, &j->p, &dv, &uv, &is_uint))
		return sj_fail(j, "expected a number", at);
	if (MR_GROW(j->out->items, j->cap, j->out->count + 1))
		return mr_oom(j->err);
	ev_stat *it = &j->out->items[j->out->count];
	it->key = mr_strndup(j->key.data, j->key.len);
	if (!it->key)
		return mr_oom(j->err);
	it->value = dv;
	it->uvalue = uv;
	it->is_uint = is_uint;
	j->out->count++;
	return MR_OK;
}

/* A value that is not a number or an object: skipped. */
static mr_status sj_skip(sj_parser *j)
{
	static const char *lits[] = {"true", "false", "null", "True", "False", "None"};
	char c = j->d[j->p];
	if (c == '"' || c == '\'')
		return ev_json_string(j->d, j->len, &j->p, NULL)
		           ? MR_OK
		           : sj_fail(j, "unterminated string", j->p);
	if (c == '[')
		return ev_json_skip_array(j->d, j->len, &j->p)
		           ? MR_OK
		           : sj_fail(j, "unterminated array", j->p);
	for (size_t k = 0; k < sizeof lits / sizeof lits[0]; k++) {
		if (tc_at(j->d, j->len, j->p, lits[k])) {
			j->p += strlen(lits[k]);
			return MR_OK;
		}
	}
	return sj_fail(j, "unexpected value", j->p);
}

/* One "key": value member and the ',' (or the '}' it stops before) that follows. */
static mr_status sj_member(sj_parser *j)
{
	mr_status st = sj_key(j);
	if (st)
		return st;
	char c = j->d[j->p];
	if (c == '{')
		return sj_open(j);
	if (c == '"' || c == '\'' || c == '[' || tc_isalpha(c))
		st = sj_skip(j);
	else
		st = sj_number(j);
	if (st || (st = sj_more(j)))
		return st;
	if (j->d[j->p] == ',')
		j->p++;
	else if (j->d[j->p] != '}')
		return sj_fail(j, "expected ',' or '}'", j->p);
	return MR_OK;
}

mr_status ev_parse_stats_json(const char *data, size_t len, ev_stats *out, mr_error *err)
{
	sj_parser j = {.d = data, .len = len, .out = out, .err = err};
	mr_status st = MR_OK;
	memset(out, 0, sizeof *out);
	j.p = ev_skip_ws(data, len, 0);
	if (j.p + 3 <= len && memcmp(data + j.p, "\xEF\xBB\xBF", 3) == 0) /* UTF-8 BOM */
		j.p = ev_skip_ws(data, len, j.p + 3);
	if (j.p >= len || data[j.p] != '{') {
		st = mr_fail(err, MR_EINPUT, "memory_stats: expected '{' at byte %zu", j.p);
		goto done;
	}
	j.p++;
	j.depth = 1;
	while (j.depth > 0 && !st) {
		if ((st = sj_more(&j)))
			break;
		if (data[j.p] == '}')
			sj_close(&j);
		else
			st = sj_member(&j);
	}
	if (!st && out->count == 0)
		st = mr_fail(err, MR_EINPUT, "memory_stats: the object holds no numeric value");
done:
	mr_buf_free(&j.path);
	mr_buf_free(&j.key);
	if (st != MR_OK)
		ev_stats_free(out);
	return st;
}
