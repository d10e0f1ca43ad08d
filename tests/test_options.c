/* test_options.c: the one option parser of every command (cmd/options.c). */
#include "testutil.h"

#include "base/escape.h"
#include "cmd/options.h"

static mr_status parse(cmd_id which, char **argv, cmd_options *o, mr_error *err)
{
	int argc = 0;
	while (argv[argc])
		argc++;
	memset(err, 0, sizeof *err);
	return cmd_parse(which, argc, argv, o, err);
}

static void test_spellings(void **state)
{
	(void)state;
	cmd_options o;
	mr_error err;
	char *a[] = {"memreport",   "--output=r.json", "--format=json",
	             "snap.pickle", "--device=3",      "-q",
	             NULL};
	assert_int_equal(parse(CMD_REPORT, a, &o, &err), MR_OK);
	assert_string_equal(o.output, "r.json");
	assert_int_equal(o.format, CMD_JSON);
	assert_int_equal(o.device, 3);
	assert_true(o.quiet);
	assert_int_equal(o.arg_count, 1);
	assert_string_equal(o.args[0], "snap.pickle");
	cmd_options_free(&o);
	/* the old spellings, a short option with its value attached, an abbreviation, "-" */
	char *b[] = {"memreport", "-o",          "-", "--format", "md", "-", "--device", "0",
	             "--redact",  "--templates", "t", "-oout.md", NULL};
	assert_int_equal(parse(CMD_REPORT, b, &o, &err), MR_OK);
	assert_string_equal(o.output, "out.md");
	assert_int_equal(o.format, CMD_MD);
	assert_int_equal(o.device, 0);
	assert_true(o.redact_paths);
	assert_string_equal(o.templates, "t");
	assert_int_equal(o.arg_count, 1);
	assert_string_equal(o.args[0], "-");
	cmd_options_free(&o);
	/* "--" ends the options */
	char *c[] = {"memreport", "--", "--not-an-option", NULL};
	assert_int_equal(parse(CMD_REPORT, c, &o, &err), MR_OK);
	assert_int_equal(o.arg_count, 1);
	assert_string_equal(o.args[0], "--not-an-option");
	cmd_options_free(&o);
}

static void test_commands(void **state)
{
	(void)state;
	cmd_options o;
	mr_error err;
	char *b[] = {"batch", "runs", "-o", "out", "--cache=c", "-j2", "--jobs", "3", NULL};
	assert_int_equal(parse(CMD_BATCH, b, &o, &err), MR_OK);
	assert_string_equal(o.output, "out");
	assert_string_equal(o.cache, "c");
	assert_int_equal(o.jobs, 3);
	cmd_options_free(&o);
	char *s[] = {"simulate", "s.pickle", "--alloc-conf=expandable_segments:True",
	             "--limit",  "4GiB",     "--format",
	             "text",     NULL};
	assert_int_equal(parse(CMD_SIMULATE, s, &o, &err), MR_OK);
	assert_string_equal(o.alloc_conf, "expandable_segments:True");
	assert_int_equal(o.limit, 4ull << 30);
	assert_int_equal(o.format, CMD_TEXT);
	cmd_options_free(&o);
	/* an option of another command is unknown here */
	char *d[] = {"diff", "a", "b", "--cache", "x", NULL};
	assert_int_equal(parse(CMD_DIFF, d, &o, &err), MR_EINPUT);
	assert_string_equal(err.msg, "unknown option '--cache'");
	cmd_options_free(&o);
	char *m[] = {"diff", "a", "--format", "md", NULL};
	assert_int_equal(parse(CMD_DIFF, m, &o, &err), MR_OK);
	assert_int_equal(o.format, CMD_MD);
	cmd_options_free(&o);
	char *w[] = {"diff", "a", "--format", "pdf", NULL};
	assert_int_equal(parse(CMD_DIFF, w, &o, &err), MR_EINPUT);
	assert_string_equal(err.msg, "unknown format 'pdf' (html, json, md or text)");
	cmd_options_free(&o);
}

static void test_mistakes(void **state)
{
	(void)state;
	cmd_options o;
	mr_error err;
	char *a[] = {"memreport", "x", "-o", NULL};
	assert_int_equal(parse(CMD_REPORT, a, &o, &err), MR_EINPUT);
	assert_string_equal(err.msg, "-o needs a file name");
	cmd_options_free(&o);
	char *b[] = {"batch", "x", "--output", NULL};
	assert_int_equal(parse(CMD_BATCH, b, &o, &err), MR_EINPUT);
	assert_string_equal(err.msg, "--output needs a folder");
	cmd_options_free(&o);
	char *c[] = {"memreport", "--device", "-1", "x", "--bogus", NULL};
	assert_int_equal(parse(CMD_REPORT, c, &o, &err), MR_EINPUT);
	assert_string_equal(err.msg, "--device needs a device number, got '-1'");
	assert_int_equal(o.arg_count, 1); /* the parse went on after the first mistake */
	cmd_options_free(&o);
	char *d[] = {"memreport", "-qz", NULL};
	assert_int_equal(parse(CMD_REPORT, d, &o, &err), MR_EINPUT);
	assert_string_equal(err.msg, "unknown option '-z'");
	cmd_options_free(&o);
	char *e[] = {"batch", "-j", "0", NULL};
	assert_int_equal(parse(CMD_BATCH, e, &o, &err), MR_EINPUT);
	assert_string_equal(err.msg, "-j needs a number of threads (1-256), got '0'");
	cmd_options_free(&o);
	char *f[] = {"simulate", "s", "--limit=lots", "-h", NULL};
	assert_int_equal(parse(CMD_SIMULATE, f, &o, &err), MR_EINPUT);
	assert_string_equal(err.msg, "--limit needs a size such as 4GiB, got 'lots'");
	assert_true(o.help);
	cmd_options_free(&o);
	/* strtod reads these, but none is a size; (uint64_t)NaN would be undefined behaviour */
	const char *bad_sizes[] = {"nan",   "NaN",     "inf",  "-inf", "infinity",
	                           "-1",    "-0.5GiB", "1e30", "0x10", "18446744073709551616",
	                           "16EiB", "4GiBs"};
	for (size_t i = 0; i < sizeof bad_sizes / sizeof bad_sizes[0]; i++) {
		char *g[] = {"simulate", "s", "--limit", (char *)bad_sizes[i], NULL};
		assert_int_equal(parse(CMD_SIMULATE, g, &o, &err), MR_EINPUT);
		assert_non_null(strstr(err.msg, "--limit needs a size"));
		cmd_options_free(&o);
	}
	char *h[] = {"simulate", "s", "--limit", "0.5GiB", NULL};
	assert_int_equal(parse(CMD_SIMULATE, h, &o, &err), MR_OK);
	assert_int_equal(o.limit, 512ull << 20);
	cmd_options_free(&o);
}

/* -o's extension chooses the format when --format is not given; they must not disagree. */
static void test_format_of_output(void **state)
{
	(void)state;
	cmd_options o;
	mr_error err;
	static const struct {
		cmd_id cmd;
		const char *output, *format; /* format NULL: not given */
		mr_status want;
		cmd_format format_out;
	} cases[] = {
	    {CMD_REPORT, "r.json", NULL, MR_OK, CMD_JSON},
	    {CMD_REPORT, "dir.v2/R.MD", NULL, MR_OK, CMD_MD},
	    {CMD_REPORT, "r.txt", NULL, MR_OK, CMD_TEXT},
	    {CMD_REPORT, "r.htm", NULL, MR_OK, CMD_HTML},
	    {CMD_REPORT, "r.log", "text", MR_OK, CMD_TEXT}, /* an extension it does not know */
	    {CMD_REPORT, "json", NULL, MR_OK, CMD_HTML},    /* no extension at all */
	    {CMD_REPORT, "r.md", "markdown", MR_OK, CMD_MD},
	    {CMD_REPORT, "r.html", "json", MR_EINPUT, CMD_JSON},
	    {CMD_REPORT, "-", "md", MR_OK, CMD_MD},
	    {CMD_DIFF, "d.json", NULL, MR_OK, CMD_JSON},
	    {CMD_DIFF, "d.md", NULL, MR_OK, CMD_MD}, /* diff writes Markdown and text too */
	    {CMD_DIFF, "d.txt", NULL, MR_OK, CMD_TEXT},
	    {CMD_SIMULATE, "s.txt", NULL, MR_OK, CMD_TEXT},
	    {CMD_SIMULATE, "s.html", NULL, MR_EINPUT, CMD_JSON},
	    {CMD_BATCH, "out.json", NULL, MR_OK, CMD_HTML}, /* a folder: no format */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *argv[] = {"memreport", "x",
		                "-o",        (char *)cases[i].output,
		                "--format",  (char *)cases[i].format,
		                NULL};
		if (!cases[i].format)
			argv[4] = NULL;
		assert_int_equal(parse(cases[i].cmd, argv, &o, &err), cases[i].want);
		if (cases[i].want == MR_OK)
			assert_int_equal(o.format, cases[i].format_out);
		cmd_options_free(&o);
	}
	char *c[] = {"memreport", "x", "--format=json", "-o", "r.html", NULL};
	assert_int_equal(parse(CMD_REPORT, c, &o, &err), MR_EINPUT);
	assert_string_equal(err.msg, "--format json and -o r.html disagree (its extension says "
	                             "html): give one of them, or both the same");
	cmd_options_free(&o);
}

/* Messages quote paths through mr_one_line: nothing a terminal acts on survives, the length
 * stays, and printable UTF-8 is kept. */
static void test_one_line(void **state)
{
	(void)state;
	char s[] = "a\nb\x1b[31mc\x7f\r\t"
	           "\xc2\x9b"             /* C1 CSI, as UTF-8 */
	           "\x9b"                 /* a lone 8-bit CSI: invalid UTF-8 */
	           "\xe2\x80\xae"         /* U+202E right-to-left override */
	           "\xe2\x81\xa6"         /* U+2066 left-to-right isolate */
	           "\xc3\xa9\xe2\x82\xac" /* e-acute and the euro sign stay */
	           "\xc3";                /* cut inside a character */
	mr_one_line(s);
	assert_string_equal(s, "a?b?[31mc????????????\xc3\xa9\xe2\x82\xac?");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_spellings),        cmocka_unit_test(test_commands),
	    cmocka_unit_test(test_mistakes),         cmocka_unit_test(test_one_line),
	    cmocka_unit_test(test_format_of_output),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
