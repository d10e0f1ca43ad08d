/* test_pickle.c: the safe pickle decoder, opcode by opcode, protocols 2 to 5, hostile inputs.
 *
 * Fixtures live in tests/fixtures/pickle/ and are written by tests/fixtures/gen_pickle_fixtures.py:
 * NAME.pickle with NAME.expect (canonical dump of the decoded value, see that script for the
 * format) or NAME.fail (one substring per line that the error message must contain), and
 * NAME.gets (memo look-ups the decoder must count). */
#include "testutil.h"

#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <unistd.h>

#include "decode/pickle.h"
#include "base/error.h"
#include "base/mem.h"
#include "base/buf.h"

#define FIXDIR "tests/fixtures/pickle"

/* ---- canonical printer (iterative; memo cycles print as <cycle>) ---- */

static void put_escaped(mr_buf *b, const char *s, size_t n)
{
	mr_buf_putc(b, '\'');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c <= 0x7e && c != '\'' && c != '\\')
			mr_buf_putc(b, (char)c);
		else
			mr_buf_printf(b, "\\x%02x", c);
	}
	mr_buf_putc(b, '\'');
}

typedef struct {
	pk_val v;
	size_t i, n; /* next word, words */
	char close;
} frame;

/* Prints a scalar, or opens a container and pushes its frame. */
static void emit(const pk_decoder *d, pk_val v, mr_buf *b, frame **st, size_t *sp, size_t *cap,
                 unsigned char *open)
{
	pk_type t = pk_typeof(d, v);
	int64_t i;
	uint64_t u;
	double f;
	const char *s;
	size_t n;
	switch (t) {
	case PK_T_NONE: mr_buf_puts(b, "None"); return;
	case PK_T_BOOL: {
		int bv = 0;
		assert_true(pk_bool(d, v, &bv));
		mr_buf_puts(b, bv ? "True" : "False");
		return;
	}
	case PK_T_INT:
		assert_true(pk_int(d, v, &i));
		mr_buf_printf(b, "%" PRId64, i);
		return;
	case PK_T_UINT64:
		assert_true(pk_uint(d, v, &u));
		mr_buf_printf(b, "%" PRIu64, u);
		return;
	case PK_T_BIGINT:
		assert_true(pk_int(d, v, &i));
		assert_true(i == INT64_MAX || i == INT64_MIN);
		mr_buf_puts(b, i > 0 ? "bigint(+)" : "bigint(-)");
		return;
	case PK_T_FLOAT:
		assert_true(pk_float(d, v, &f));
		if (isnan(f))
			mr_buf_puts(b, "float(nan)");
		else if (isinf(f))
			mr_buf_puts(b, f > 0 ? "float(inf)" : "float(-inf)");
		else
			mr_buf_printf(b, "float(%.17g)", f);
		return;
	case PK_T_STR:
	case PK_T_BYTES:
		assert_true(pk_str(d, v, &s, &n));
		if (t == PK_T_BYTES)
			mr_buf_putc(b, 'b');
		put_escaped(b, s, n);
		return;
	case PK_T_RECORD: mr_buf_printf(b, "record(%" PRIu64 ")", pk_record(d, v)); return;
	case PK_T_LIST:
	case PK_T_TUPLE:
	case PK_T_SET:
	case PK_T_DICT: break;
	}
	uint32_t id = pk_node_id(v);
	assert_true(id < pk_node_count(d));
	if (open[id]) {
		mr_buf_puts(b, "<cycle>");
		return;
	}
	open[id] = 1;
	if (*sp == *cap)
		assert_int_equal(MR_GROW(*st, *cap, *sp + 1), 0);
	frame *fr = &(*st)[(*sp)++];
	fr->v = v;
	fr->i = 0;
	fr->n = t == PK_T_DICT ? 2 * pk_len(d, v) : pk_len(d, v);
	fr->close = t == PK_T_LIST ? ']' : t == PK_T_TUPLE ? ')' : '}';
	mr_buf_puts(b, t == PK_T_LIST ? "[" : t == PK_T_TUPLE ? "(" : t == PK_T_SET ? "set{" : "{");
	if (fr->n)
		assert_non_null(pk_items(d, v));
}

static char *canon(const pk_decoder *d, pk_val root)
{
	mr_buf b = {0};
	frame *st = NULL;
	size_t sp = 0, cap = 0;
	unsigned char *open = calloc(pk_node_count(d) + 1, 1);
	assert_non_null(open);
	emit(d, root, &b, &st, &sp, &cap, open);
	while (sp) {
		frame *fr = &st[sp - 1];
		if (fr->i == fr->n) {
			mr_buf_putc(&b, fr->close);
			open[pk_node_id(fr->v)] = 0;
			sp--;
			continue;
		}
		int is_dict = pk_typeof(d, fr->v) == PK_T_DICT;
		if (fr->i)
			mr_buf_puts(&b, is_dict && fr->i % 2 ? ": " : ", ");
		pk_val item = pk_items(d, fr->v)[fr->i++];
		emit(d, item, &b, &st, &sp, &cap, open); /* may move st */
	}
	free(st);
	free(open);
	assert_false(b.failed);
	if (!b.data)
		mr_buf_puts(&b, "");
	return b.data;
}

/* ---- helpers ---- */

static char *read_text(const char *path)
{
	size_t n;
	char *s = (char *)tu_read(path, &n);
	if (s && n && s[n - 1] == '\n')
		s[n - 1] = '\0';
	return s;
}

static mr_status decode(pk_decoder *d, const unsigned char *data, size_t len, mr_error *err)
{
	memset(err, 0, sizeof *err);
	mr_status st = pk_run(d, data, len, err);
	if (st == MR_OK)
		assert_int_equal(err->status, MR_OK);
	else
		assert_int_equal(err->status, st);
	return st;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted fixture stems (NAME for NAME.pickle). */
static char **list_fixtures(size_t *count)
{
	DIR *dir = opendir(FIXDIR);
	assert_non_null(dir);
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(dir))) {
		size_t l = strlen(e->d_name);
		if (l > 7 && strcmp(e->d_name + l - 7, ".pickle") == 0) {
			assert_int_equal(MR_GROW(names, cap, n + 1), 0);
			names[n++] = mr_strndup(e->d_name, l - 7);
		}
	}
	closedir(dir);
	qsort(names, n, sizeof *names, name_cmp);
	*count = n;
	return names;
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static unsigned char *read_fixture(const char *stem, const char *ext, size_t *len)
{
	char path[512];
	snprintf(path, sizeof path, FIXDIR "/%s%s", stem, ext);
	return tu_read(path, len);
}

/* Checks every line of the .fail file is in the message. Returns the number of mismatches. */
static int check_fail(const char *stem, const mr_error *err)
{
	size_t n;
	char *want = (char *)read_fixture(stem, ".fail", &n);
	assert_non_null(want);
	int bad = 0;
	for (char *line = strtok(want, "\n"); line; line = strtok(NULL, "\n")) {
		if (!strstr(err->msg, line)) {
			print_error("%s: message \"%s\" lacks \"%s\"\n", stem, err->msg, line);
			bad++;
		}
	}
	free(want);
	return bad;
}

/* ---- fixture walk ---- */

static void test_fixtures(void **state)
{
	(void)state;
	size_t count, ok = 0, failed_as_expected = 0;
	char **names = list_fixtures(&count);
	assert_true(count > 200);
	int problems = 0;
	for (size_t k = 0; k < count; k++) {
		const char *stem = names[k];
		size_t len = 0, elen = 0;
		unsigned char *data = read_fixture(stem, ".pickle", &len);
		assert_non_null(data);
		char path[512];
		snprintf(path, sizeof path, FIXDIR "/%s.expect", stem);
		char *expect = read_text(path);
		pk_decoder *d = pk_new(NULL);
		assert_non_null(d);
		mr_error err;
		mr_status st = decode(d, data, len, &err);
		if (expect) {
			if (st != MR_OK) {
				print_error("%s: expected success, got %d: %s\n", stem, st,
				            err.msg);
				problems++;
			} else {
				char *got = canon(d, pk_result(d));
				if (strcmp(got, expect) != 0) {
					print_error("%s:\n  got    %s\n  expect %s\n", stem, got,
					            expect);
					problems++;
				}
				free(got);
				unsigned char *gets = read_fixture(stem, ".gets", &elen);
				if (gets) {
					size_t want = (size_t)strtoul((char *)gets, NULL, 10);
					if (pk_memo_gets(d) != want) {
						print_error("%s: memo gets %zu, expected %zu\n",
						            stem, pk_memo_gets(d), want);
						problems++;
					}
					free(gets);
				}
				ok++;
			}
		} else {
			if (st != MR_EINPUT) {
				print_error("%s: expected MR_EINPUT, got %d (%s)\n", stem, st,
				            err.msg);
				problems++;
			} else {
				problems += check_fail(stem, &err);
				failed_as_expected++;
			}
		}
		free(expect);
		free(data);
		pk_free(d);
	}
	free_names(names, count);
	print_message("fixtures: %zu decoded, %zu refused as expected\n", ok, failed_as_expected);
	assert_int_equal(problems, 0);
	/* Nothing a hostile fixture asked for ever ran. */
	assert_int_not_equal(access("/tmp/memreport_pwned", F_OK), 0);
}

/* Every proper prefix of every small valid fixture fails cleanly with MR_EINPUT. */
static void test_prefixes(void **state)
{
	(void)state;
	size_t count, tried = 0;
	char **names = list_fixtures(&count);
	for (size_t k = 0; k < count; k++) {
		const char *stem = names[k];
		size_t len = 0, elen = 0;
		unsigned char *exp = read_fixture(stem, ".expect", &elen);
		if (!exp)
			continue;
		free(exp);
		if (strstr(stem, "padding") || strstr(stem, "trailing"))
			continue; /* the prefix up to STOP is a whole pickle */
		unsigned char *data = read_fixture(stem, ".pickle", &len);
		assert_non_null(data);
		if (len > 4096) {
			free(data);
			continue;
		}
		pk_decoder *d = pk_new(NULL);
		for (size_t cut = 0; cut < len; cut++) {
			/* A fresh copy of exactly `cut` bytes so ASan sees any read past the end.
			 */
			unsigned char *pre = malloc(cut ? cut : 1);
			memcpy(pre, data, cut);
			mr_error err;
			mr_status st = decode(d, pre, cut, &err);
			if (st != MR_EINPUT)
				fail_msg("%s: prefix of %zu bytes gave %d (%s)", stem, cut, st,
				         err.msg);
			free(pre);
			tried++;
		}
		pk_free(d);
		free(data);
	}
	free_names(names, count);
	print_message("prefixes: %zu truncated inputs refused\n", tried);
}

/* ---- dict hook ---- */

typedef struct {
	uint64_t next;
	int calls;
	int fail_at; /* return -1 on this call (1-based), 0 never */
} hook_ctx;

static int action_hook(void *vctx, pk_decoder *d, const pk_val *items, size_t n, uint64_t *record,
                       mr_error *err)
{
	hook_ctx *ctx = vctx;
	assert_int_equal(n % 2, 0);
	ctx->calls++;
	if (ctx->fail_at && ctx->calls == ctx->fail_at)
		return -1 - (int)(mr_fail(err, MR_EINPUT, "hook says no") != MR_EINPUT);
	for (size_t i = 0; i < n; i += 2) {
		if (pk_str_eq(d, items[i], "action")) {
			*record = ++ctx->next;
			return 1;
		}
	}
	return 0;
}

static void test_dict_hook(void **state)
{
	(void)state;
	size_t len = 0;
	unsigned char *data = read_fixture("hook_traces", ".pickle", &len);
	assert_non_null(data);
	char *expect = read_text(FIXDIR "/hook_traces.expect_hook");
	assert_non_null(expect);
	pk_decoder *d = pk_new(NULL);
	hook_ctx ctx = {0};
	pk_set_dict_hook(d, action_hook, &ctx);
	mr_error err;
	assert_int_equal(decode(d, data, len, &err), MR_OK);
	char *got = canon(d, pk_result(d));
	assert_string_equal(got, expect);
	assert_int_equal(ctx.next, 3);
	free(got);
	/* A record looked up as a dict is not a dict. */
	pk_val traces, first;
	assert_true(pk_dict_get(d, pk_result(d), "device_traces", &traces));
	first = pk_items(d, pk_items(d, traces)[0])[0];
	assert_int_equal(pk_typeof(d, first), PK_T_RECORD);
	assert_int_equal(pk_record(d, first), 1);
	assert_int_equal(pk_len(d, first), 0);
	assert_null(pk_items(d, first));
	pk_val dummy;
	assert_false(pk_dict_get(d, first, "action", &dummy));
	pk_free(d);

	/* A hook that fails stops the decode with its own message. */
	d = pk_new(NULL);
	hook_ctx fctx = {.fail_at = 2};
	pk_set_dict_hook(d, action_hook, &fctx);
	assert_int_equal(decode(d, data, len, &err), MR_EINPUT);
	assert_non_null(strstr(err.msg, "hook says no"));
	pk_free(d);

	/* A record dict that later receives more items is refused (SETITEMS after the hook). */
	static const unsigned char more[] = "\x80\x02}(X\x06\x00\x00\x00"
	                                    "actionK\x01u(K\x02K\x03u.";
	d = pk_new(NULL);
	hook_ctx c2 = {0};
	pk_set_dict_hook(d, action_hook, &c2);
	assert_int_equal(decode(d, more, sizeof more - 1, &err), MR_EINPUT);
	assert_non_null(strstr(err.msg, "SETITEMS"));
	pk_free(d);
	free(expect);
	free(data);
}

/* ---- limits ---- */

static void expect_limit(const pk_limits *lim, const unsigned char *data, size_t len,
                         const char *what)
{
	pk_decoder *d = pk_new(lim);
	assert_non_null(d);
	mr_error err;
	mr_status st = decode(d, data, len, &err);
	if (st != MR_EINPUT || !strstr(err.msg, what) || !strstr(err.msg, "byte "))
		fail_msg("limit %s: got %d \"%s\"", what, st, err.msg);
	pk_free(d);
}

/* n trace entries as CPython's pickler writes them ({"action": 1, "frames": []}, each dict
 * and list memoized), appended to one list in batches, then entry 0 again through the memo and
 * a DUP'd entry. */
static unsigned char *entries_pickle(size_t n, size_t *len)
{
	mr_buf b = {0};
	mr_buf_puts(&b, "\x80\x04]\x94("); /* memo 0: the list */
	for (size_t i = 0; i < n; i++) {
		if (i && i % 1000 == 0)
			mr_buf_puts(&b, "e(");
		mr_buf_puts(&b, "}\x94("); /* memo: the entry */
		if (i == 0)
			mr_buf_puts(&b, "\x8c\x06"
			                "action\x94K\x01\x8c\x06"
			                "frames\x94]\x94u");
		else
			mr_buf_puts(&b, "h\x02K\x01h\x03]\x94u"); /* the keys are memo 2 and 3 */
	}
	/* entry 0 (memo 1) once more through the memo, and a new entry pushed twice (DUP) */
	mr_buf_puts(&b, "eh\x01"
	                "a(}\x94\x32(h\x02K\x02ue.");
	*len = b.len;
	return (unsigned char *)b.data;
}

/* action_hook, and each entry's list becomes a record too, as the snapshot builder does with
 * its frames list. */
static int entry_hook(void *vctx, pk_decoder *d, const pk_val *items, size_t n, uint64_t *record,
                      mr_error *err)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		if (pk_typeof(d, items[i + 1]) == PK_T_LIST)
			pk_convert(d, items[i + 1], (uint64_t)1 << 40);
	return action_hook(vctx, d, items, n, record, err);
}

/* Trace entries turned into records give their nodes back (pickle.h): the node count does not
 * grow with the entries, and every reference to an entry, through the memo or a DUP, reads its
 * record. */
static void test_retired_records(void **state)
{
	(void)state;
	size_t nodes[2];
	for (int k = 0; k < 2; k++) {
		size_t n = k ? 4000 : 1000, len = 0;
		unsigned char *data = entries_pickle(n, &len);
		assert_non_null(data);
		pk_decoder *d = pk_new(NULL);
		hook_ctx ctx = {0};
		pk_set_dict_hook(d, entry_hook, &ctx);
		mr_error err;
		assert_int_equal(decode(d, data, len, &err), MR_OK);
		pk_val list = pk_result(d);
		const pk_val *it = pk_items(d, list);
		assert_int_equal(pk_len(d, list), n + 3);
		for (size_t i = 0; i < n; i++) {
			assert_int_equal(pk_typeof(d, it[i]), PK_T_RECORD);
			assert_int_equal(pk_record(d, it[i]), i + 1);
		}
		assert_int_equal(pk_record(d, it[n]), 1);         /* entry 0 through the memo */
		assert_int_equal(pk_record(d, it[n + 1]), n + 1); /* the DUP'd entry, twice */
		assert_int_equal(pk_record(d, it[n + 2]), n + 1);
		nodes[k] = pk_node_count(d);
		pk_free(d);
		free(data);
	}
	assert_int_equal(nodes[0], nodes[1]);
	assert_true(nodes[0] < 10);
}

static void test_limits(void **state)
{
	(void)state;
	const pk_limits roomy = {.max_stack = 1000,
	                         .max_memo = 1000,
	                         .max_nodes = 1000,
	                         .max_items = 1000,
	                         .max_string = 1000};
	pk_limits lim;
	size_t len = 0;
	unsigned char *nested = read_fixture("p4_nested", ".pickle", &len);
	assert_non_null(nested);
	/* Everything fits with room to spare. */
	pk_decoder *d = pk_new(&roomy);
	mr_error err;
	assert_int_equal(decode(d, nested, len, &err), MR_OK);
	pk_free(d);

	lim = roomy;
	lim.max_stack = 3;
	expect_limit(&lim, nested, len, "nesting limit");
	lim = roomy;
	lim.max_nodes = 5;
	expect_limit(&lim, nested, len, "object limit");
	lim = roomy;
	lim.max_items = 4;
	expect_limit(&lim, nested, len, "item limit");
	lim = roomy;
	lim.max_string = 0;
	expect_limit(&lim, nested, len, "string limit");
	lim = roomy;
	lim.max_memo = 2;
	expect_limit(&lim, nested, len, "memo limit");
	free(nested);

	unsigned char *big = read_fixture("p4_list_big", ".pickle", &len);
	lim = roomy;
	lim.max_stack = 2000; /* 1000 items wait on the stack for APPENDS */
	expect_limit(&lim, big, len, "item limit");
	free(big);
	unsigned char *s = read_fixture("p4_str_long", ".pickle", &len);
	lim = roomy;
	lim.max_string = 299;
	expect_limit(&lim, s, len, "string limit");
	lim.max_string = 300;
	d = pk_new(&lim);
	assert_int_equal(decode(d, s, len, &err), MR_OK);
	pk_free(d);
	free(s);
	unsigned char *l4 = read_fixture("p4_int_long4", ".pickle", &len);
	lim = roomy;
	lim.max_string = 100;
	expect_limit(&lim, l4, len, "LONG4");
	free(l4);
	/* MARKs count against the nesting limit too. */
	static const unsigned char marks[] = "\x80\x02(((((((((((N.";
	lim = roomy;
	lim.max_stack = 4;
	expect_limit(&lim, marks, sizeof marks - 1, "MARK");
	/* All-zero limits refuse at the first value, never crash. */
	memset(&lim, 0, sizeof lim);
	expect_limit(&lim, (const unsigned char *)"\x80\x02N.", 4, "nesting limit");
}

/* ---- 1,000,000 nested lists, built here rather than committed ---- */

static unsigned char *deep_lists(size_t depth, size_t *len)
{
	size_t n = 2 + depth + (depth - 1) + 1;
	unsigned char *p = malloc(n), *q = p;
	*q++ = 0x80;
	*q++ = 4;
	memset(q, ']', depth);
	q += depth;
	memset(q, 'a', depth - 1);
	q += depth - 1;
	*q++ = '.';
	*len = n;
	return p;
}

static void test_deep_nesting(void **state)
{
	(void)state;
	size_t len, depth = 1000000;
	unsigned char *data = deep_lists(depth, &len);
	pk_decoder *d = pk_new(NULL);
	mr_error err;
	assert_int_equal(decode(d, data, len, &err), MR_EINPUT);
	assert_non_null(strstr(err.msg, "EMPTY_LIST"));
	assert_non_null(strstr(err.msg, "nesting limit"));
	assert_non_null(strstr(err.msg, "byte "));
	pk_free(d);

	/* With the limit raised, it decodes without recursion and frees without recursion. */
	pk_limits lim = {.max_stack = 2 * depth,
	                 .max_memo = 16,
	                 .max_nodes = 2 * depth,
	                 .max_items = 8 * depth,
	                 .max_string = 16};
	d = pk_new(&lim);
	assert_int_equal(decode(d, data, len, &err), MR_OK);
	char *got = canon(d, pk_result(d));
	assert_int_equal(strlen(got), 2 * depth);
	assert_int_equal(got[depth - 1], '[');
	assert_int_equal(got[depth], ']');
	free(got);
	pk_free(d);
	free(data);
}

/* ---- accessors on decoded values ---- */

static void test_accessors(void **state)
{
	(void)state;
	size_t len = 0;
	unsigned char *data = read_fixture("p4_ints", ".pickle", &len);
	pk_decoder *d = pk_new(NULL);
	mr_error err;
	assert_int_equal(decode(d, data, len, &err), MR_OK);
	pk_val r = pk_result(d);
	assert_int_equal(pk_typeof(d, r), PK_T_LIST);
	const pk_val *it = pk_items(d, r);
	assert_int_equal(pk_len(d, r), 27);
	int64_t i;
	uint64_t u;
	double f;
	/* 2^47 (an address) is a plain int */
	assert_true(pk_int(d, it[11], &i));
	assert_true(i == (int64_t)1 << 47);
	/* 2^60: outside the inline range, still PK_T_INT */
	assert_int_equal(pk_typeof(d, it[15]), PK_T_INT);
	assert_true(pk_int(d, it[15], &i) && i == (int64_t)1 << 60);
	assert_true(pk_int(d, it[17], &i) && i == -((int64_t)1 << 60) - 1);
	/* 2^63-1, 2^63, 2^64-1, -2^63 */
	assert_true(pk_int(d, it[19], &i) && i == INT64_MAX);
	assert_int_equal(pk_typeof(d, it[20]), PK_T_UINT64);
	assert_true(pk_uint(d, it[20], &u) && u == (uint64_t)1 << 63);
	assert_true(pk_int(d, it[20], &i) && i == INT64_MAX);
	assert_true(pk_uint(d, it[21], &u) && u == UINT64_MAX);
	assert_true(pk_float(d, it[21], &f) && f == 18446744073709551616.0);
	assert_true(pk_int(d, it[22], &i) && i == INT64_MIN);
	assert_false(pk_uint(d, it[22], &u));
	assert_false(pk_uint(d, it[2], &u)); /* -1 */
	/* 2^100 and -2^100 saturate */
	assert_int_equal(pk_typeof(d, it[25]), PK_T_BIGINT);
	assert_true(pk_int(d, it[25], &i) && i == INT64_MAX);
	assert_true(pk_int(d, it[26], &i) && i == INT64_MIN);
	assert_true(pk_float(d, it[5], &f) && f == 65535.0);
	/* wrong-type answers are neutral */
	const char *s;
	size_t n;
	assert_false(pk_str(d, it[0], &s, &n));
	assert_false(pk_str_eq(d, r, "x"));
	assert_int_equal(pk_len(d, it[0]), 0);
	assert_null(pk_items(d, it[0]));
	assert_int_equal(pk_node_id(it[0]), UINT32_MAX);
	assert_false(pk_dict_get(d, r, "a", &r));
	assert_int_equal(pk_record(d, r), 0);
	pk_free(d);
	free(data);

	data = read_fixture("p4_consts", ".pickle", &len);
	d = pk_new(NULL);
	assert_int_equal(decode(d, data, len, &err), MR_OK);
	it = pk_items(d, pk_result(d));
	int bv;
	assert_true(pk_bool(d, it[0], &bv) && bv == 1);
	assert_true(pk_bool(d, it[1], &bv) && bv == 0);
	assert_false(pk_bool(d, it[2], &bv));
	assert_true(pk_is_none(it[2]));
	assert_false(pk_is_none(it[1]));
	assert_false(pk_int(d, it[2], &i));
	assert_false(pk_float(d, it[2], &f));
	pk_free(d);
	free(data);

	/* An empty dict: lookups and items work without any slot storage allocated. */
	static const unsigned char empty_dict[] = "\x80\x04}.";
	d = pk_new(NULL);
	assert_int_equal(decode(d, empty_dict, 4, &err), MR_OK);
	assert_int_equal(pk_typeof(d, pk_result(d)), PK_T_DICT);
	assert_int_equal(pk_len(d, pk_result(d)), 0);
	assert_null(pk_items(d, pk_result(d)));
	pk_val out;
	assert_false(pk_dict_get(d, pk_result(d), "segments", &out));
	pk_free(d);

	/* Strings are copied: the input can go away after pk_run. */
	unsigned char *copy = read_fixture("p4_dict_small", ".pickle", &len);
	d = pk_new(NULL);
	assert_int_equal(decode(d, copy, len, &err), MR_OK);
	memset(copy, 0, len);
	free(copy);
	assert_true(pk_dict_get(d, pk_result(d), "b", &out));
	assert_true(pk_str_eq(d, out, "two"));
	assert_true(pk_str(d, out, &s, &n) && n == 3 && s[3] == '\0');
	pk_free(d);
	pk_free(NULL);
}

/* Memo entries are 4 bytes; values that do not fit (negative or large ints, here) are kept aside
 * and come back exactly, also on a second run of the same decoder. */
static void test_memo_wide(void **state)
{
	(void)state;
	static const unsigned char p[] = "\x80\x04"
	                                 "J\xff\xff\xff\xff\x94"
	                                 "0" /* -1 */
	                                 "\x8a\x06\x00\x00\x00\x00\x00\x01\x94"
	                                 "0" /* 2^40 */
	                                 "\x8a\x04\xff\xff\xff\x1f\x94"
	                                 "0" /* 2^29 - 1 */
	                                 "\x8a\x04\x00\x00\x00\x20\x94"
	                                 "0" /* 2^29 */
	                                 "(h\x00h\x01h\x02h\x03h\x00h\x01t.";
	pk_decoder *d = pk_new(NULL);
	mr_error err;
	for (int run = 0; run < 2; run++) {
		assert_int_equal(decode(d, p, sizeof p - 1, &err), MR_OK);
		char *got = canon(d, pk_result(d));
		assert_string_equal(got, "(-1, 1099511627776, 536870911, 536870912, -1, "
		                         "1099511627776)");
		free(got);
		assert_int_equal(pk_memo_gets(d), 6);
	}
	pk_free(d);
}

/* The opcodes the decoder runs in its fast loop (memo reads, MEMOIZE, MARK, small integers) give
 * what the general machine gives, also at the cases the loop hands back to it. Each body is
 * followed by 40 bytes of "N0" so every opcode in it lies before the last 16 bytes, where the
 * fast loop runs; the expected answers are CPython's (pickle.loads). */
static void test_fast_loop_edges(void **state)
{
	(void)state;
#define BODY(s) s, sizeof s - 1
	static const struct {
		const char *body; /* after PROTO 4, leaving one value or failing */
		size_t len;
		const char *want; /* canonical value, or a piece of the error */
		size_t gets;
	} cases[] = {
	    /* LONG1: empty, 8 bytes with the top bit, above the inline range, negative, 2^64 (which
	     * the decoder keeps as a big integer) */
	    {BODY("(\x8a\x00\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80"
	          "\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x10\x8a\x02\xff\xff"
	          "\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01t"),
	     "(0, -9223372036854775808, 1152921504606846976, -1, bigint(+))", 0},
	    /* BININT negative, BININT2 (its bytes in order, and at its top), BININT1 at its top */
	    {BODY("(J\xfe\xff\xff\xffM\x01\x02K\xffM\xff\xfft"), "(-2, 513, 255, 65535)", 0},
	    /* MEMOIZE after a sparse BINPUT numbers by entries stored (len(memo)), as CPython */
	    {BODY("(K\x01q\x05K\x02\x94h\x01h\x05j\x01\x00\x00\x00t"), "(1, 2, 2, 1, 2)", 3},
	    /* a value the memo keeps wide, through MEMOIZE and both reads */
	    {BODY("(J\xff\xff\xff\xff\x94h\x00j\x00\x00\x00\x00t"), "(-1, -1, -1)", 2},
	    /* a short string twice (the second from the decoder's table), two that share a slot of
	     * the table ("asl", "bea"), an empty dict and list */
	    {BODY("(\x8c\x02"
	          "ab\x8c\x02"
	          "ab\x8c\x02"
	          "ac\x8c\x03"
	          "asl\x8c\x03"
	          "bea\x8c\x03"
	          "asl}]t"),
	     "('ab', 'ab', 'ac', 'asl', 'bea', 'asl', {}, [])", 0},
	    /* reads of an index never stored, in both widths */
	    {BODY("K\x01\x94h\x03"), "byte 5: BINGET: memo index 3 was never stored", 0},
	    {BODY("K\x01\x94j\x00\x01\x00\x00"),
	     "byte 5: LONG_BINGET: memo index 256 was never stored", 0},
	};
#undef BODY
	enum { PAD = 40 };
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		size_t len = 2 + cases[k].len + PAD + 1;
		unsigned char *p = malloc(len);
		memcpy(p, "\x80\x04", 2);
		memcpy(p + 2, cases[k].body, cases[k].len);
		for (size_t i = 0; i < PAD; i += 2)
			memcpy(p + 2 + cases[k].len + i, "N0", 2);
		p[len - 1] = '.';
		pk_decoder *d = pk_new(NULL);
		mr_error err;
		mr_status st = decode(d, p, len, &err);
		if (st == MR_OK) {
			char *got = canon(d, pk_result(d));
			assert_string_equal(got, cases[k].want);
			assert_int_equal(pk_memo_gets(d), cases[k].gets);
			free(got);
		} else if (!strstr(err.msg, cases[k].want)) {
			fail_msg("case %zu: \"%s\", expected \"%s\"", k, err.msg, cases[k].want);
		}
		pk_free(d);
		free(p);
	}
	/* The memo and MARK limits hold inside the loop too. */
	static const unsigned char memos[] = "\x80\x04K\x01\x94K\x02\x94K\x03\x94"
	                                     "0000N0N0N0N0N0N0N0N0N0N0N0N0.";
	pk_limits lim = {
	    .max_stack = 100, .max_memo = 2, .max_nodes = 100, .max_items = 100, .max_string = 100};
	expect_limit(&lim, memos, sizeof memos - 1, "memo limit");
	static const unsigned char marks[] = "\x80\x04(((((N0N0N0N0N0N0N0N0N0N0N0N0N0.";
	lim.max_stack = 4;
	expect_limit(&lim, marks, sizeof marks - 1, "MARK");
	/* ... and the object limit */
	static const unsigned char dicts[] = "\x80\x04}0]0}0N0N0N0N0N0N0N0N0N0N0N0N0.";
	lim.max_stack = 100;
	lim.max_nodes = 2;
	expect_limit(&lim, dicts, sizeof dicts - 1, "object limit");
}

/* One decoder, several runs: the memo and the counters start afresh. */
static void test_reuse(void **state)
{
	(void)state;
	static const unsigned char put[] = "\x80\x02K\x07q\x00h\x00\x86.";
	static const unsigned char get[] = "\x80\x02h\x00.";
	static const unsigned char bad[] = "\x80\x02\xff";
	pk_decoder *d = pk_new(NULL);
	mr_error err;
	assert_int_equal(decode(d, put, sizeof put - 1, &err), MR_OK);
	assert_int_equal(pk_memo_gets(d), 1);
	assert_int_equal(decode(d, put, sizeof put - 1, &err), MR_OK);
	assert_int_equal(pk_memo_gets(d), 1);
	char *got = canon(d, pk_result(d));
	assert_string_equal(got, "(7, 7)");
	free(got);
	/* The memo of the previous run is gone. */
	assert_int_equal(decode(d, get, sizeof get - 1, &err), MR_EINPUT);
	assert_non_null(strstr(err.msg, "BINGET"));
	/* A failed run leaves no stale result behind. */
	assert_int_equal(decode(d, bad, sizeof bad - 1, &err), MR_EINPUT);
	assert_true(pk_is_none(pk_result(d)));
	pk_free(d);
}

/* A pickle of 9 MiB, a string that long, then 7 stored at memo index `idx` and read back. */
static unsigned char *memo_at_pickle(uint32_t idx, size_t *len)
{
	enum { PAD = 9 << 20 };
	size_t n = 2 + 5 + PAD + 1 + 2 + 5 + 1 + 5 + 1;
	unsigned char *p = malloc(n), *q = p;
	assert_non_null(p);
	*q++ = 0x80, *q++ = 4;
	*q++ = 'X'; /* BINUNICODE of PAD bytes, then POP */
	for (int i = 0; i < 4; i++)
		*q++ = (unsigned char)((uint32_t)PAD >> (8 * i));
	memset(q, 'a', PAD);
	q += PAD;
	*q++ = '0';
	*q++ = 'K', *q++ = 7;
	*q++ = 'r'; /* LONG_BINPUT idx, POP, LONG_BINGET idx, STOP */
	for (int i = 0; i < 4; i++)
		*q++ = (unsigned char)(idx >> (8 * i));
	*q++ = '0';
	*q++ = 'j';
	for (int i = 0; i < 4; i++)
		*q++ = (unsigned char)(idx >> (8 * i));
	*q++ = '.';
	*len = (size_t)(q - p);
	assert_int_equal(*len, n);
	return p;
}

/* A large input's memo lives in a room of fixed size (mem.h): every index the input may use,
 * up to one below its length, fits; the next is refused as before; a later small run on the
 * same decoder keeps the room and still forgets the earlier memo. */
static void test_memo_room(void **state)
{
	(void)state;
	size_t len = 0;
	unsigned char *data = memo_at_pickle(0, &len);
	free(data);
	pk_decoder *d = pk_new(NULL);
	mr_error err;
	int64_t v = 0;
	data = memo_at_pickle((uint32_t)(len - 1), &len);
	assert_int_equal(decode(d, data, len, &err), MR_OK);
	assert_true(pk_memo_room(d) >= len * 4);
	assert_true(pk_int(d, pk_result(d), &v));
	assert_int_equal(v, 7);
	free(data);
	data = memo_at_pickle((uint32_t)len, &len);
	assert_int_equal(decode(d, data, len, &err), MR_EINPUT);
	assert_non_null(strstr(err.msg, "larger than a"));
	free(data);
	static const unsigned char get[] = "\x80\x02h\x00.";
	assert_int_equal(decode(d, get, sizeof get - 1, &err), MR_EINPUT);
	assert_true(pk_memo_room(d) >= len * 4);
	pk_free(d);
}

/* The progress callback ends with done == total. */
typedef struct {
	size_t calls, last_done, last_total;
} progress_ctx;

static void on_progress(void *vctx, size_t done, size_t total)
{
	progress_ctx *p = vctx;
	assert_true(done <= total);
	assert_true(done >= p->last_done);
	p->calls++;
	p->last_done = done;
	p->last_total = total;
}

static void test_progress(void **state)
{
	(void)state;
	size_t len = 0;
	unsigned char *data = read_fixture("p4_dict_big", ".pickle", &len);
	assert_non_null(data);
	pk_decoder *d = pk_new(NULL);
	progress_ctx p = {0};
	pk_set_progress(d, on_progress, &p);
	mr_error err;
	assert_int_equal(decode(d, data, len, &err), MR_OK);
	assert_true(p.calls >= 1);
	assert_int_equal(p.last_done, len);
	assert_int_equal(p.last_total, len);
	pk_free(d);
	free(data);
}

/* ---- the real corpus, read in place ---- */

static void check_snapshot_top(const char *path, const unsigned char *data, size_t len)
{
	pk_decoder *d = pk_new(NULL);
	mr_error err;
	mr_status st = decode(d, data, len, &err);
	if (st != MR_OK)
		fail_msg("%s: %s", path, err.msg);
	pk_val top = pk_result(d), v;
	assert_int_equal(pk_typeof(d, top), PK_T_DICT);
	assert_true(pk_dict_get(d, top, "segments", &v));
	assert_int_equal(pk_typeof(d, v), PK_T_LIST);
	assert_true(pk_dict_get(d, top, "device_traces", &v));
	assert_int_equal(pk_typeof(d, v), PK_T_LIST);
	assert_true(pk_memo_gets(d) > 0);
	pk_free(d);
}

/* Whether a run folder has no snapshot by design: its facts.json says _dump_snapshot failed (the
 * cudaMallocAsync backend cannot dump one). */
static int snapshot_impossible(const char *dir)
{
	char path[2100];
	size_t len = 0;
	snprintf(path, sizeof path, "%s/facts.json", dir);
	char *facts = (char *)tu_read(path, &len);
	int none = facts && strstr(facts, "\"dump_snapshot\": \"failed") != NULL;
	free(facts);
	return none;
}

typedef struct {
	size_t files, without; /* snapshots decoded; folders that cannot have one */
} decoded;

static void decode_sample(const char *dir, const char *name, void *ctx)
{
	decoded *t = ctx;
	size_t *files = &t->files;
	static const char *const names[] = {"snapshot.pickle", "oom_snapshot.pickle"};
	t->without += (size_t)snapshot_impossible(dir);
	for (size_t i = 0; i < 2; i++) {
		char path[2100];
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		size_t len = 0;
		unsigned char *data = tu_read(path, &len);
		if (!data)
			continue;
		check_snapshot_top(path, data, len);
		free(data);
		(*files)++;
	}
	(void)name;
}

/* Every snapshot of both corpora (testutil.h; the large one is test_sim's). */
static void test_corpus(void **state)
{
	(void)state;
	decoded t = {0, 0};
	size_t samples = tu_each_sample(decode_sample, &t);
	size_t files = t.files;
	print_message("corpus: %zu snapshots decoded\n", files);
	/* every sample has one, but the shared large one whose pickle is xz-compressed there and
	 * the runs that could not dump one */
	assert_true(files + 1 + t.without >= samples);
	assert_true(files + t.without >= tu_project_samples());
}

/* ---- random byte flips in real snapshots (fixed seed) ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15u;
static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void flip_corpus_file(const char *name, int rounds)
{
	char path[1024];
	size_t len = 0;
	unsigned char *orig = tu_read(tu_snapshot(name, path, sizeof path), &len);
	assert_non_null(orig);
	unsigned char *buf = malloc(len);
	size_t ok = 0, refused = 0;
	pk_decoder *d = pk_new(NULL);
	for (int round = 0; round < rounds; round++) {
		memcpy(buf, orig, len);
		int flips = 1 + (int)(rng() % 8);
		for (int k = 0; k < flips; k++) {
			size_t at = (size_t)(rng() % len);
			/* Half the time a random byte, else a "dangerous" opcode or length byte. */
			static const unsigned char spicy[] = {0x00, 0xff, 0x7f, 0x80, '(', 'u',
			                                      'e',  'a',  's',  'j',  'r', 'h',
			                                      'q',  0x8d, 'X',  0x95};
			buf[at] = rng() % 2 ? (unsigned char)rng() : spicy[rng() % sizeof spicy];
		}
		if (round % 64 == 0) { /* a fresh decoder now and then, reuse otherwise */
			pk_free(d);
			d = pk_new(NULL);
		}
		mr_error err;
		mr_status st = decode(d, buf, len, &err);
		if (st == MR_OK) {
			ok++;
			char *got =
			    canon(d, pk_result(d)); /* walking the result must be safe too */
			free(got);
		} else {
			assert_int_equal(st, MR_EINPUT);
			assert_non_null(strstr(err.msg, "byte ") ? err.msg : NULL);
			refused++;
		}
	}
	pk_free(d);
	print_message("flip %s: %zu decoded, %zu refused\n", name, ok, refused);
	free(buf);
	free(orig);
}

static void test_flips(void **state)
{
	(void)state;
	const char *env = getenv("MR_FLIP_ROUNDS");
	int rounds = env ? atoi(env) : 3000;
	flip_corpus_file("no_history", rounds);
	flip_corpus_file("cuda_graph", rounds / 3);
	flip_corpus_file("state_only", rounds / 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fixtures),  cmocka_unit_test(test_prefixes),
	    cmocka_unit_test(test_dict_hook), cmocka_unit_test(test_retired_records),
	    cmocka_unit_test(test_limits),    cmocka_unit_test(test_deep_nesting),
	    cmocka_unit_test(test_accessors), cmocka_unit_test(test_reuse),
	    cmocka_unit_test(test_memo_room), cmocka_unit_test(test_memo_wide),
	    cmocka_unit_test(test_progress),  cmocka_unit_test(test_corpus),
	    cmocka_unit_test(test_flips),     cmocka_unit_test(test_fast_loop_edges),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
