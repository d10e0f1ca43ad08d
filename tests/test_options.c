/* test_options.c: the one option parser of every command (cmd/options.c). */
#include "testutil.h"

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
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_spellings),
	    cmocka_unit_test(test_commands),
	    cmocka_unit_test(test_mistakes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
