/* options.c: one table of options, filtered by command, read with getopt_long. */
#include "cmd/options.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "advise/advice.h"
#include "base/error.h"
#include "base/mem.h"
#include "base/units.h"

enum { C_REPORT = 1, C_BATCH = 2, C_DIFF = 4, C_SIMULATE = 8, C_ALL = 15 };
enum {
	OPT_FORMAT = 256,
	OPT_DEVICE,
	OPT_REDACT,
	OPT_TEMPLATES,
	OPT_CACHE,
	OPT_CONF,
	OPT_LIMIT,
	OPT_FAIL_ON,
	OPT_BUDGET
};

static const struct {
	const char *name;
	int has_arg;
	int val;           /* the short option's letter, or an OPT_ id */
	unsigned commands; /* the commands that take it */
} table[] = {
    {"output", required_argument, 'o', C_ALL},
    {"format", required_argument, OPT_FORMAT, C_REPORT | C_DIFF | C_SIMULATE},
    {"device", required_argument, OPT_DEVICE, C_ALL},
    {"redact-paths", no_argument, OPT_REDACT, C_REPORT | C_BATCH | C_DIFF},
    {"quiet", no_argument, 'q', C_REPORT | C_BATCH | C_DIFF},
    {"templates", required_argument, OPT_TEMPLATES, C_REPORT | C_BATCH | C_DIFF},
    {"cache", required_argument, OPT_CACHE, C_BATCH},
    {"jobs", required_argument, 'j', C_BATCH},
    {"alloc-conf", required_argument, OPT_CONF, C_SIMULATE},
    {"limit", required_argument, OPT_LIMIT, C_SIMULATE},
    {"fail-on", required_argument, OPT_FAIL_ON, C_REPORT},
    {"budget", required_argument, OPT_BUDGET, C_REPORT},
    {"help", no_argument, 'h', C_ALL},
};
enum { OPTION_COUNT = sizeof table / sizeof table[0] };

/* The formats each command writes, with their spellings. */
static const struct {
	const char *word;
	cmd_format format;
	unsigned commands;
} formats[] = {
    {"html", CMD_HTML, C_REPORT | C_DIFF},
    {"json", CMD_JSON, C_REPORT | C_DIFF | C_SIMULATE},
    {"md", CMD_MD, C_REPORT | C_DIFF},
    {"markdown", CMD_MD, C_REPORT | C_DIFF},
    {"text", CMD_TEXT, C_REPORT | C_DIFF | C_SIMULATE},
    {"txt", CMD_TEXT, C_REPORT | C_DIFF | C_SIMULATE},
};

/* The formats -o's extension names (compared without case). */
static const struct {
	const char *ext;
	cmd_format format;
	const char *word; /* for messages */
} extensions[] = {
    {"html", CMD_HTML, "html"}, {"htm", CMD_HTML, "html"},  {"json", CMD_JSON, "json"},
    {"md", CMD_MD, "md"},       {"markdown", CMD_MD, "md"}, {"txt", CMD_TEXT, "text"},
    {"text", CMD_TEXT, "text"},
};

static unsigned bit_of(cmd_id which)
{
	return which == CMD_BATCH      ? C_BATCH
	       : which == CMD_DIFF     ? C_DIFF
	       : which == CMD_SIMULATE ? C_SIMULATE
	                               : C_REPORT;
}

/* "html, json, md or text": the formats a command writes, for its messages. */
static const char *format_list(unsigned cmd)
{
	return cmd == C_REPORT || cmd == C_DIFF ? "html, json, md or text" : "json or text";
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/* What a value-taking option needs, for "X needs ..." when it is missing. */
static const char *needs(int val, unsigned cmd)
{
	switch (val) {
	case 'o': return cmd == C_BATCH ? "a folder" : "a file name";
	case OPT_FORMAT: return format_list(cmd);
	case OPT_DEVICE: return "a device number";
	case OPT_TEMPLATES:
	case OPT_CACHE: return "a folder";
	case 'j': return "a number of threads (1-256)";
	case OPT_CONF: return "a PYTORCH_CUDA_ALLOC_CONF string";
	case OPT_FAIL_ON: return "warning or critical";
	default: return "a size such as 4GiB";
	}
}

/* One option and its value (arg, NULL when it takes none) into *o; a bad value is recorded in
 * err (the first mistake only). */
static void take(cmd_options *o, unsigned cmd, int val, const char *spelled, const char *arg,
                 mr_error *err)
{
	long v;
	switch (val) {
	case 'h': o->help = 1; break;
	case 'o': o->output = arg; break;
	case 'q': o->quiet = 1; break;
	case OPT_REDACT: o->redact_paths = 1; break;
	case OPT_TEMPLATES: o->templates = arg; break;
	case OPT_CACHE: o->cache = arg; break;
	case OPT_CONF: o->alloc_conf = arg; break;
	case OPT_FORMAT:
		for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
			if ((formats[i].commands & cmd) && strcmp(formats[i].word, arg) == 0) {
				o->format = formats[i].format;
				return;
			}
		mr_fail(err, MR_EINPUT, "unknown format '%s' (%s)", arg, format_list(cmd));
		break;
	case OPT_DEVICE:
		if (parse_long(arg, 0, 1024, &v))
			mr_fail(err, MR_EINPUT, "%s needs a device number, got '%s'", spelled, arg);
		else
			o->device = (int)v;
		break;
	case OPT_FAIL_ON:
		if (strcmp(arg, "warning") == 0)
			o->fail_on = AD_WARNING;
		else if (strcmp(arg, "critical") == 0)
			o->fail_on = AD_CRITICAL;
		else
			mr_fail(err, MR_EINPUT, "%s needs warning or critical, got '%s'", spelled,
			        arg);
		break;
	case 'j':
		if (parse_long(arg, 1, 256, &v))
			mr_fail(err, MR_EINPUT, "%s needs a number of threads (1-256), got '%s'",
			        spelled, arg);
		else
			o->jobs = v;
		break;
	case OPT_BUDGET:
		if (mr_parse_size(arg, &o->budget) || !o->budget)
			mr_fail(err, MR_EINPUT, "%s needs a size such as 24GiB, got '%s'", spelled,
			        arg);
		break;
	default:
		if (mr_parse_size(arg, &o->limit) || !o->limit)
			mr_fail(err, MR_EINPUT, "%s needs a size such as 4GiB, got '%s'", spelled,
			        arg);
	}
}

static int command_writes(unsigned cmd, cmd_format f)
{
	for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
		if ((formats[i].commands & cmd) && formats[i].format == f)
			return 1;
	return 0;
}

/* -o report.json without --format means JSON; with a --format that says otherwise, or an
 * extension of a format the command does not write, it is a mistake. Other extensions (or
 * none) leave the format alone. */
static void format_of_output(cmd_options *o, unsigned cmd, int format_given, mr_error *err)
{
	if (cmd == C_BATCH || !o->output || strcmp(o->output, "-") == 0)
		return;
	const char *base = strrchr(o->output, '/');
	const char *dot = strrchr(base ? base + 1 : o->output, '.');
	if (!dot || dot[1] == '\0')
		return;
	for (size_t i = 0; i < sizeof extensions / sizeof extensions[0]; i++) {
		if (strcasecmp(dot + 1, extensions[i].ext) != 0)
			continue;
		cmd_format f = extensions[i].format;
		if (!command_writes(cmd, f))
			mr_fail(err, MR_EINPUT, "-o %s: this command writes %s, not %s", o->output,
			        format_list(cmd), extensions[i].word);
		else if (format_given && o->format != f)
			mr_fail(err, MR_EINPUT,
			        "--format %s and -o %s disagree (its extension says %s): give one "
			        "of them, or both the same",
			        o->format == CMD_HTML   ? "html"
			        : o->format == CMD_JSON ? "json"
			        : o->format == CMD_MD   ? "md"
			                                : "text",
			        o->output, extensions[i].word);
		else
			o->format = f;
		return;
	}
}

/* How the option just read was written ("--out=x" -> "--out"; "-qz" -> "-z"): its word is
 * argv[optind - 1], or the one before when its value was a word of its own. */
static void spelling(char **argv, int optopt_val, char *buf, size_t bufsz)
{
	const char *a = argv[optind - 1];
	if (optarg && optarg == a && optind >= 2)
		a = argv[optind - 2];
	if (optopt_val > 0 && optopt_val < 256 && strncmp(a, "--", 2) != 0) {
		buf[0] = '-';
		buf[1] = (char)optopt_val;
		buf[2] = '\0';
		return;
	}
	size_t n = strcspn(a, "=");
	if (n >= bufsz)
		n = bufsz - 1;
	memcpy(buf, a, n);
	buf[n] = '\0';
}

mr_status cmd_parse(cmd_id which, int argc, char **argv, cmd_options *out, mr_error *err)
{
	unsigned cmd = bit_of(which);
	struct option longs[OPTION_COUNT + 1];
	char shorts[32] = "-:"; /* arguments in order; ':' for a missing value */
	size_t nl = 0, ns = 2;
	memset(out, 0, sizeof *out);
	out->device = -1;
	out->fail_on = -1;
	out->format = which == CMD_SIMULATE ? CMD_JSON : CMD_HTML;
	out->args = mr_alloc_array((size_t)(argc > 0 ? argc : 1), sizeof *out->args);
	if (!out->args)
		return mr_oom(err);
	for (size_t i = 0; i < OPTION_COUNT; i++) {
		if (!(table[i].commands & cmd))
			continue;
		longs[nl++] = (struct option){table[i].name, table[i].has_arg, NULL, table[i].val};
		if (table[i].val < 256) {
			shorts[ns++] = (char)table[i].val;
			if (table[i].has_arg)
				shorts[ns++] = ':';
		}
	}
	longs[nl] = (struct option){NULL, 0, NULL, 0};
	shorts[ns] = '\0';
	mr_error first = {0}; /* the first mistake; the parse goes on */
	int format_given = 0;
	opterr = 0;
	optind = 0; /* glibc: start afresh (a process may parse more than once) */
	int c;
	while ((c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
		char spelled[64];
		spelling(argv, c == '?' || c == ':' ? optopt : c, spelled, sizeof spelled);
		if (c == 1)
			out->args[out->arg_count++] = optarg;
		else if (c == '?')
			mr_fail(&first, MR_EINPUT, "unknown option '%s'", spelled);
		else if (c == ':')
			mr_fail(&first, MR_EINPUT, "%s needs %s", spelled, needs(optopt, cmd));
		else
			take(out, cmd, c, spelled, optarg, &first);
		format_given |= c == OPT_FORMAT;
	}
	while (optind < argc) /* after "--" */
		out->args[out->arg_count++] = argv[optind++];
	format_of_output(out, cmd, format_given, &first);
	return first.status ? mr_fail(err, first.status, "%s", first.msg) : MR_OK;
}

void cmd_options_free(cmd_options *o)
{
	free(o->args);
	memset(o, 0, sizeof *o);
}
