/* test_shard.c: shard keys and the shard index (cmd/shard_index.c): written and read back
 * exactly, the index made from the rows read back equal to the one made from the rows
 * themselves, strict reading of hostile files, and --shard's values. */
#include "testutil.h"

#include "base/buf.h"
#include "base/mem.h"
#include "cmd/options.h"
#include "cmd/shard_index.h"
#include "render/batch_index.h"

/* ---- a batch of three runs, with strings that need every kind of escape --------------------- */

static sr_member members_a[] = {{"exp/a \"q\"\\b/snapshot.pickle", "/x", -1, 1},
                                {"exp/a/train.log", "/y", -1, 1}};
static sr_member members_b[] = {{"exp/\xf0\x9f\x98\x80/rank3/s.pickle", "/z", 2, 1}};

static ar_run runs[] = {
    {.name = "exp/a \"q\"\\b",
     .group = "exp/a \"q\"\\b",
     .input_no = 0,
     .rank = -1,
     .iteration = -1,
     .slug = "exp_a",
     .members = members_a,
     .member_count = 2},
    {.name = "exp/\xf0\x9f\x98\x80 rank 3",
     .group = "exp/\xf0\x9f\x98\x80",
     .input_no = 1,
     .rank = 3,
     .iteration = 7,
     .slug = "exp_u_rank3",
     .members = members_b,
     .member_count = 1},
    {.name = "missing.pickle",
     .group = "missing.pickle",
     .input_no = 2,
     .rank = -1,
     .iteration = -1,
     .slug = "missing.pickle"},
};

static ix_row row_a = {.settings = "expandable_segments:True\n\t<x>\x01",
                       .has_snapshot = 1,
                       .has_peaks = 1,
                       .peak_reserved = UINT64_MAX,
                       .peak_allocated = 123456789,
                       .fragmentation = 0.12345678901234567,
                       .device_count = 2,
                       .oom_cause = "fragmentation",
                       .rec_id = "expandable_segments",
                       .rec_title = "Turn on \xc3\xa9xpandable segments </script>",
                       .verdict = "OOM: \"big\""};
static ix_row row_b = {.settings = "", .fragmentation = -1.0};

static const char doc_a[] =
    "{\"schema\": \"memreport/1\", \"x\": [1, 2.5e-3, \"\\u00e9\", {}, []]}\n";
static const char doc_b[] = "{\"schema\": \"memreport/1\"}";

static const char *const inputs[] = {"exp", "other/\xf0\x9f\x98\x80", "missing.pickle"};

static void write_doc(mr_buf *out, unsigned index, unsigned count, const unsigned char *take)
{
	ar_set set = {runs, 3};
	ix_line lines[3] = {{1, NULL, &row_a, doc_a, sizeof doc_a - 1},
	                    {1, NULL, &row_b, doc_b, sizeof doc_b - 1},
	                    {0, "missing.pickle: cannot open: No such file", NULL, NULL, 0}};
	int status[3] = {0, 0, 2};
	sx_shape shape = {inputs, 3, -1, 1, NULL};
	mr_error err = {0};
	assert_int_equal(sx_write(out, index, count, &shape, &set, take, lines, status, &err),
	                 MR_OK);
}

static void test_keys(void **state)
{
	(void)state;
	/* FNV-1a 64: the published values of "" and "a" */
	assert_int_equal(sx_shard_of("", 1u << 16), 0xcbf29ce484222325ull % 65536);
	assert_int_equal(sx_shard_of("a", 1u << 16), 0xaf63dc4c8601ec8cull % 65536);
	assert_int_equal(sx_shard_of("anything", 1), 0);
	char *k = sx_key(&runs[1]);
	assert_string_equal(k, "1:exp/\xf0\x9f\x98\x80");
	free(k);
	/* the digest of the runs changes with any of them */
	ar_set set = {runs, 3};
	char d1[33], d2[33];
	sx_runs_digest(&set, d1);
	runs[2].slug = "other";
	sx_runs_digest(&set, d2);
	runs[2].slug = "missing.pickle";
	assert_string_not_equal(d1, d2);
}

static void test_round_trip(void **state)
{
	(void)state;
	unsigned char all[3] = {1, 1, 1};
	mr_buf b = {0};
	write_doc(&b, 0, 1, all);
	sx_doc d;
	mr_error err = {0};
	assert_int_equal(sx_parse("t.json", b.data, b.len, &d, &err), MR_OK);
	assert_int_equal(d.row_count, 3);
	assert_int_equal(d.runs_total, 3);
	assert_int_equal(d.input_count, 3);
	assert_string_equal(d.inputs[1], inputs[1]);
	assert_null(d.templates);
	for (size_t i = 0; i < 3; i++) {
		const sx_row *r = &d.rows[i];
		assert_int_equal(r->position, i);
		assert_string_equal(r->run.name, runs[i].name);
		assert_string_equal(r->run.group, runs[i].group);
		assert_string_equal(r->run.slug, runs[i].slug);
		assert_int_equal(r->run.input_no, runs[i].input_no);
		assert_int_equal(r->run.rank, runs[i].rank);
		assert_int_equal(r->run.iteration, runs[i].iteration);
		assert_int_equal(r->run.member_count, runs[i].member_count);
		for (size_t k = 0; k < runs[i].member_count; k++)
			assert_string_equal(r->run.members[k].name, runs[i].members[k].name);
	}
	const ix_row *a = &d.rows[0].row;
	assert_string_equal(a->settings, row_a.settings);
	assert_true(a->peak_reserved == UINT64_MAX);
	assert_true(a->fragmentation == row_a.fragmentation); /* exactly */
	assert_string_equal(a->rec_title, row_a.rec_title);
	assert_string_equal(a->verdict, row_a.verdict);
	assert_null(d.rows[1].row.oom_cause);
	assert_true(d.rows[1].row.fragmentation == -1.0);
	assert_int_equal(d.rows[0].json_len, sizeof doc_a - 2); /* the newline trimmed */
	assert_memory_equal(d.rows[0].json, doc_a, sizeof doc_a - 2);
	assert_false(d.rows[2].done);
	assert_int_equal(d.rows[2].status, 2);
	assert_null(d.rows[2].json);

	/* the index from the rows read back is the index from the rows */
	ar_set set = {runs, 3}, view;
	ix_line lines[3] = {{1, NULL, &row_a, doc_a, sizeof doc_a - 1},
	                    {1, NULL, &row_b, doc_b, sizeof doc_b - 1},
	                    {0, "missing.pickle: cannot open: No such file", NULL, NULL, 0}};
	ix_line *vlines;
	const sx_row *rows[3] = {&d.rows[0], &d.rows[1], &d.rows[2]};
	assert_int_equal(sx_index_view(rows, 3, &view, &vlines, &err), MR_OK);
	for (int html = 0; html < 2; html++) {
		mr_buf x = {0}, y = {0};
		assert_int_equal(html ? rd_index_html(&set, lines, &x, &err)
		                      : rd_index_json(&set, lines, &x, &err),
		                 MR_OK);
		assert_int_equal(html ? rd_index_html(&view, vlines, &y, &err)
		                      : rd_index_json(&view, vlines, &y, &err),
		                 MR_OK);
		assert_int_equal(x.len, y.len);
		assert_memory_equal(x.data, y.data, x.len);
		mr_buf_free(&x);
		mr_buf_free(&y);
	}
	free(view.runs);
	free(vlines);
	sx_doc_free(&d);
	mr_buf_free(&b);
}

/* Parses text (a shard index of one shard of 1) and expects a failure whose message holds
 * `says`. */
static void refused(const char *text, size_t len, const char *says)
{
	sx_doc d;
	mr_error err = {0};
	assert_int_equal(sx_parse("bad.json", text, len, &d, &err), MR_EINPUT);
	if (!strstr(err.msg, says))
		fail_msg("message '%s' lacks '%s'", err.msg, says);
	assert_non_null(strstr(err.msg, "bad.json: byte "));
	assert_null(strchr(err.msg, '\n'));
	assert_int_equal(d.row_count, 0);
}

/* The document with `from` replaced by `to` (once; it must be there). */
static char *edited(const mr_buf *b, const char *from, const char *to, size_t *len)
{
	const char *at = strstr(b->data, from);
	assert_non_null(at);
	char *s = mr_format("%.*s%s%s", (int)(at - b->data), b->data, to, at + strlen(from));
	assert_non_null(s);
	*len = strlen(s);
	return s;
}

static void test_strict(void **state)
{
	(void)state;
	unsigned char all[3] = {1, 1, 1};
	mr_buf b = {0};
	write_doc(&b, 0, 1, all);
	static const struct {
		const char *from, *to, *says;
	} edits[] = {
	    {"\"shard\": 0, \"of\": 1", "\"of\": 1, \"shard\": 0", "the key \"shard\""},
	    {"\"shard\": 0, \"of\": 1", "\"shard\": 1, \"of\": 1", "a shard I below N"},
	    {"\"of\": 1", "\"of\": 65537", "an integer in range"},
	    {"\"of\": 1", "\"of\": 01", "integer"},
	    {"\"peak_reserved\": 18446744073709551615", "\"peak_reserved\": 18446744073709551616",
	     "fits 64 bits"},
	    {"\"position\": 1,", "\"position\": 0,", "increasing position"},
	    {"\"position\": 2,", "\"position\": 3,", "increasing position below runs_total"},
	    {"\"key\": \"1:", "\"key\": \"9:", "a key that is the run's input number"},
	    {"\"status\": 2", "\"status\": 0", "agree"},
	    {"\"rank\": 3", "\"rank\": 3.5", "integer"},
	    {"\"schema\": \"memreport/1\", \"x\"", "\"schema\" \"memreport/1\", \"x\"", "':'"},
	    {"2.5e-3", "2.5e-", "a number"},
	    {"missing.pickle: cannot", "missing\\ud800", "surrogate"},
	    {"missing.pickle: cannot", "missing\\u0000", "\\u0000"},
	    {"missing.pickle: cannot", "missing\x01", "control character"},
	    {"\n]}\n", "\n]}\n{}", "the end of the file"},
	};
	for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
		size_t len;
		char *s = edited(&b, edits[i].from, edits[i].to, &len);
		refused(s, len, edits[i].says);
		free(s);
	}
	/* cut anywhere, it is refused (and never read past its end: ASan) */
	for (size_t cut = 0; cut < b.len - 1; cut += 7) {
		char *s = malloc(cut ? cut : 1);
		memcpy(s, b.data, cut);
		sx_doc d;
		mr_error err = {0};
		assert_int_equal(sx_parse("cut.json", s, cut, &d, &err), MR_EINPUT);
		free(s);
	}
	mr_buf_free(&b);
}

/* A report document nested a million levels deep is read without recursion. */
static void test_deep_document(void **state)
{
	(void)state;
	unsigned char all[3] = {1, 1, 1};
	mr_buf b = {0}, deep = {0};
	write_doc(&b, 0, 1, all);
	enum { DEPTH = 1000000 };
	mr_buf_puts(&deep, "{\"a\": ");
	for (int i = 0; i < DEPTH; i++)
		mr_buf_putc(&deep, '[');
	for (int i = 0; i < DEPTH; i++)
		mr_buf_putc(&deep, ']');
	mr_buf_puts(&deep, "}");
	assert_false(deep.failed);
	size_t len;
	char *s = edited(&b, "{\"schema\": \"memreport/1\"}", deep.data, &len);
	sx_doc d;
	mr_error err = {0};
	assert_int_equal(sx_parse("deep.json", s, len, &d, &err), MR_OK);
	assert_int_equal(d.rows[1].json_len, deep.len);
	sx_doc_free(&d);
	free(s);
	/* a result that is not an object: refused */
	s = edited(&b, "{\"schema\": \"memreport/1\"}", deep.data + 1, &len);
	assert_int_equal(sx_parse("deep.json", s, len, &d, &err), MR_EINPUT);
	free(s);
	mr_buf_free(&deep);
	mr_buf_free(&b);
}

/* A shard holds the runs whose key hashes to it, and only those. */
static void test_shard_rows(void **state)
{
	(void)state;
	size_t seen = 0;
	for (unsigned i = 0; i < 4; i++) {
		unsigned char take[3];
		for (size_t r = 0; r < 3; r++) {
			char *k = sx_key(&runs[r]);
			take[r] = sx_shard_of(k, 4) == i;
			free(k);
		}
		mr_buf b = {0};
		write_doc(&b, i, 4, take);
		sx_doc d;
		mr_error err = {0};
		assert_int_equal(sx_parse("s.json", b.data, b.len, &d, &err), MR_OK);
		assert_int_equal(d.index, i);
		assert_int_equal(d.count, 4);
		seen += d.row_count;
		sx_doc_free(&d);
		mr_buf_free(&b);
	}
	assert_int_equal(seen, 3);
}

static void test_shard_option(void **state)
{
	(void)state;
	static const struct {
		const char *value;
		unsigned index, count; /* count 0: refused */
	} cases[] = {{"0/1", 0, 1},
	             {"3/4", 3, 4},
	             {"65535/65536", 65535, 65536},
	             {"007/8", 7, 8},
	             {"4/4", 0, 0},
	             {"0/0", 0, 0},
	             {"1/65537", 0, 0},
	             {"-1/4", 0, 0},
	             {"+1/4", 0, 0},
	             {" 1/4", 0, 0},
	             {"1/4 ", 0, 0},
	             {"1/", 0, 0},
	             {"/4", 0, 0},
	             {"1", 0, 0},
	             {"1/2/3", 0, 0},
	             {"1/0x10", 0, 0},
	             {"18446744073709551617/4", 0, 0}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *argv[] = {"batch", "runs", "-o", "out", "--shard", (char *)cases[i].value,
		                NULL};
		cmd_options o;
		mr_error err = {0};
		mr_status st = cmd_parse(CMD_BATCH, 6, argv, &o, &err);
		if (cases[i].count) {
			assert_int_equal(st, MR_OK);
			assert_int_equal(o.shard_index, cases[i].index);
			assert_int_equal(o.shard_count, cases[i].count);
		} else {
			if (st != MR_EINPUT)
				fail_msg("--shard '%s' accepted", cases[i].value);
			assert_non_null(strstr(err.msg, "--shard needs I/N"));
		}
		cmd_options_free(&o);
	}
	/* merge takes -q and --templates, nothing of batch's */
	char *argv[] = {"merge", "out", "--shard", "0/2", NULL};
	cmd_options o;
	mr_error err = {0};
	assert_int_equal(cmd_parse(CMD_MERGE, 4, argv, &o, &err), MR_EINPUT);
	cmd_options_free(&o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_keys),       cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_strict),     cmocka_unit_test(test_deep_document),
	    cmocka_unit_test(test_shard_rows), cmocka_unit_test(test_shard_option),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
