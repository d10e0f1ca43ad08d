/* cmd_diff.c: `memreport diff BEFORE AFTER [-o FILE] [--format html|json] [--device N]
 * [--redact-paths] [-q]`.
 *
 * BEFORE and AFTER are each one run: a snapshot (or any single input the report command takes),
 * or a run folder or zip archive holding exactly one run. */
#include "cmd/cmd_diff.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/output.h"
#include "cmd/options.h"
#include "decode/sniff.h"
#include "load/discover.h"
#include "render/render_diff.h"
#include "report/diff.h"
#include "report/report.h"

static const char diff_usage[] =
    "usage: memreport diff BEFORE AFTER [-o FILE] [--format html|json] [--device N]\n"
    "                      [--redact-paths] [-q]\n"
    "BEFORE, AFTER: a snapshot, or a run folder or zip archive holding one run.\n";

static int diff_usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "memreport diff: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n%s", diff_usage);
	return MR_EINPUT;
}

/* Folders and archives go through discovery; anything else is a plain input. */
static int needs_discovery(const char *path)
{
	if (strcmp(path, "-") == 0)
		return 0;
	struct stat st;
	if (stat(path, &st) != 0)
		return 0; /* ld_load reports the error */
	if (S_ISDIR(st.st_mode))
		return 1;
	FILE *f = fopen(path, "rb");
	if (!f)
		return 0;
	uint8_t head[4] = {0};
	size_t n = fread(head, 1, sizeof head, f);
	fclose(f);
	return dc_sniff(head, n) == DC_ZIP;
}

/* One side's evidence: a plain input, or the only run of a folder or an archive. */
static mr_status load_evidence(const char *path, ld_evidence *ev, mr_error *err)
{
	if (!needs_discovery(path)) {
		const char *paths[] = {path};
		return ld_load(ev, paths, 1, NULL, NULL, err);
	}
	sr_limits lim;
	sr_default_limits(&lim);
	ar_set set;
	const char *inputs[] = {path};
	mr_status st = ar_discover(inputs, 1, &lim, &set, err);
	if (st)
		return st;
	if (set.count != 1) {
		mr_buf names = {0};
		for (size_t i = 0; i < set.count && i < 5; i++)
			mr_buf_printf(&names, "%s\"%s\"", i ? ", " : "", set.runs[i].name);
		st = mr_fail(err, MR_EINPUT,
		             "%s holds %zu runs%s%s%s; give one of them (a folder or a snapshot)",
		             path, set.count, set.count ? " (" : "", names.data ? names.data : "",
		             set.count > 5 ? ", ...)"
		             : set.count   ? ")"
		                           : "");
		mr_buf_free(&names);
	} else {
		st = ar_load(NULL, &set.runs[0], &lim, ev, err);
	}
	ar_set_free(&set);
	return st;
}

static mr_status load_side(const char *path, int device, rp_report *run, mr_error *err)
{
	ld_evidence ev;
	mr_status st = load_evidence(path, &ev, err);
	return st ? st : rp_build(run, &ev, device, err);
}

int cmd_diff(int argc, char **argv)
{
	cmd_shared opt = {.device = -1};
	const char *out_path = NULL, *paths[2] = {NULL, NULL};
	int json = 0, n_paths = 0, rc = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		mr_error oerr = {0};
		int used = cmd_parse_shared(&opt, argc, argv, &i, &oerr);
		if (used < 0)
			return diff_usage_error("%s", oerr.msg);
		if (used)
			continue;
		if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
			if (!val)
				return diff_usage_error("%s needs a file name", a);
			out_path = val;
			i++;
		} else if (strcmp(a, "--format") == 0 || strncmp(a, "--format=", 9) == 0) {
			const char *f = a[8] == '=' ? a + 9 : val;
			if (a[8] != '=')
				i++;
			if (f && strcmp(f, "json") == 0)
				json = 1;
			else if (f && strcmp(f, "html") == 0)
				json = 0;
			else
				return diff_usage_error("--format needs html or json, got '%s'",
				                        f ? f : "");
		} else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			fputs(diff_usage, stdout);
			return 0;
		} else if (a[0] == '-' && a[1] != '\0') {
			return diff_usage_error("unknown option '%s'", a);
		} else if (n_paths < 2) {
			paths[n_paths++] = a;
		} else {
			return diff_usage_error("%s", "give exactly two runs: BEFORE and AFTER");
		}
	}
	if (n_paths != 2)
		return diff_usage_error("%s", "give exactly two runs: BEFORE and AFTER");

	rp_report runs[2];
	int loaded = 0;
	df_result d = {0};
	mr_buf buf = {0};
	char *default_path = NULL;
	mr_error err = {0};
	mr_status st = MR_OK;
	for (; loaded < 2; loaded++) {
		mr_error local = {0};
		if ((st = load_side(paths[loaded], opt.device, &runs[loaded], &local))) {
			/* ld_load names the file; discovery errors name it too */
			fprintf(stderr, "memreport: %s\n", local.msg);
			rc = (int)st;
			goto done;
		}
	}
	if ((st = df_compute(&runs[0], &runs[1], opt.device, &d, &err)))
		goto fail;
	rd_options ropt = {opt.device, opt.redact_paths};
	st = json ? rd_diff_json(&d, &runs[0], &runs[1], &ropt, 1000, &buf, &err)
	          : rd_diff_html(&d, &runs[0], &runs[1], &ropt, 200, &buf, &err);
	if (st)
		goto fail;
	if (!out_path) {
		default_path = out_default_path(paths[1], json ? "diff.json" : "diff.html");
		if (!default_path) {
			st = mr_oom(&err);
			goto fail;
		}
		out_path = default_path;
	}
	if ((st = out_write(out_path, buf.data ? buf.data : "", buf.len, &err))) {
		fprintf(stderr, "memreport: %s: %s\n", out_path, err.msg);
		rc = (int)st;
		goto done;
	}
	if (default_path && !opt.quiet)
		fprintf(stderr, "memreport: wrote %s\n", default_path);
	goto done;
fail:
	fprintf(stderr, "memreport: %s\n", err.msg);
	rc = (int)st;
done:
	for (int i = 0; i < loaded; i++)
		rp_free(&runs[i]);
	df_free(&d);
	mr_buf_free(&buf);
	free(default_path);
	return rc;
}
