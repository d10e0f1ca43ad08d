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
#include "base/pool.h"
#include "cmd/options.h"
#include "decode/sniff.h"
#include "load/discover.h"
#include "render/render_diff.h"
#include "render/templates.h"
#include "report/diff.h"
#include "report/report.h"

static const char diff_usage[] =
    "usage: memreport diff BEFORE AFTER [-o FILE] [--format html|json] [--device N]\n"
    "                      [--redact-paths] [-q]\n"
    "BEFORE, AFTER: a snapshot, or a run folder or zip archive holding one run.\n";

static int diff_usage_error(const char *msg)
{
	fprintf(stderr, "memreport diff: %s\n%s", msg, diff_usage);
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
	return st ? st : rp_build(run, &ev, &(rp_params){device, 0}, err);
}

typedef struct {
	const char *path;
	int device;
	rp_report *run; /* built in place: the analysis points into it */
	mr_error err;
	mr_status st;
} side_job;

static void side_task(void *ctx, void *worker, size_t i)
{
	(void)worker;
	side_job *j = &((side_job *)ctx)[i];
	j->st = load_side(j->path, j->device, j->run, &j->err);
}

/* Both runs, loaded in parallel (one after the other when either is standard input). Returns
 * the first side's error, as a sequential load would; *loaded: which sides need rp_free. */
static mr_status load_both(const char *const *paths, int device, rp_report runs[2], int loaded[2],
                           mr_error *err)
{
	side_job jobs[2] = {{paths[0], device, &runs[0], {0}, MR_OK},
	                    {paths[1], device, &runs[1], {0}, MR_OK}};
	int stdin_side = strcmp(paths[0], "-") == 0 || strcmp(paths[1], "-") == 0;
	mr_pool_run(2, stdin_side ? 1 : 2, side_task, jobs, NULL, NULL);
	mr_status st = MR_OK;
	for (int i = 0; i < 2; i++) {
		loaded[i] = !jobs[i].st;
		if (jobs[i].st && !st) {
			st = jobs[i].st;
			*err = jobs[i].err;
		}
	}
	return st;
}

/* Loads both runs, compares them and writes the result. Returns the exit status. */
static int write_diff(const cmd_options *opt)
{
	const char *out_path = opt->output, *const *paths = opt->args;
	int json = opt->format == CMD_JSON, loaded[2] = {0, 0};
	rp_report runs[2];
	df_result d = {0};
	mr_buf buf = {0};
	char *default_path = NULL;
	mr_error err = {0};
	mr_status st = MR_OK;
	/* ld_load names the file; discovery errors name it too */
	st = load_both(paths, opt->device, runs, loaded, &err);
	if (!st)
		st = df_compute(&runs[0], &runs[1], opt->device, &d, &err);
	rd_options ropt = {opt->device, opt->redact_paths};
	if (!st)
		st = json ? rd_diff_json(&d, &runs[0], &runs[1], &ropt, 1000, &buf, &err)
		          : rd_diff_html(&d, &runs[0], &runs[1], &ropt, 200, &buf, &err);
	if (!st && !out_path) {
		default_path = out_default_path(paths[1], json ? "diff.json" : "diff.html");
		if (!default_path)
			st = mr_oom(&err);
		out_path = default_path;
	}
	if (st) {
		fprintf(stderr, "memreport: %s\n", err.msg);
	} else if ((st = out_write(out_path, buf.data ? buf.data : "", buf.len, &err))) {
		fprintf(stderr, "memreport: %s: %s\n", out_path, err.msg);
	} else if (default_path && !opt->quiet) {
		fprintf(stderr, "memreport: wrote %s\n", default_path);
	}
	for (int i = 0; i < 2; i++)
		if (loaded[i])
			rp_free(&runs[i]);
	df_free(&d);
	mr_buf_free(&buf);
	free(default_path);
	return (int)st;
}

int cmd_diff(int argc, char **argv)
{
	cmd_options opt;
	mr_error err = {0};
	int rc = 0;
	if (cmd_parse(CMD_DIFF, argc, argv, &opt, &err)) {
		rc = err.status == MR_EINPUT ? diff_usage_error(err.msg) : MR_EFAIL;
		if (rc == MR_EFAIL)
			fprintf(stderr, "memreport: %s\n", err.msg);
	} else if (opt.help) {
		fputs(diff_usage, stdout);
	} else if (opt.arg_count != 2) {
		rc = diff_usage_error("give exactly two runs: BEFORE and AFTER");
	} else {
		if (opt.templates)
			tp_set_dir(opt.templates);
		rc = write_diff(&opt);
	}
	cmd_options_free(&opt);
	return rc;
}
