/* cmd_batch.c: `memreport batch INPUT... -o DIR [--cache DIR] [-j N] [-q]`.
 *
 * Finds the runs (load/discover.h), reports each one (in parallel, from the cache when it can),
 * and writes DIR/<run>.html for each, DIR/index.html and DIR/index.json
 * (render/batch_index.h). A broken run is listed with its error and the others go on. */
#include "cmd/cmd_batch.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/mem.h"
#include "base/output.h"
#include "base/pool.h"
#include "cmd/cache.h"
#include "cmd/options.h"
#include "cmd/run_input.h"
#include "cmd/say.h"
#include "load/discover.h"
#include "render/batch_index.h"
#include "render/render_html.h"
#include "render/render_json.h"
#include "render/templates.h"
#include "report/report.h"
#include "source/input.h"

static const char batch_usage[] =
    "usage: memreport batch INPUT... -o DIR [--cache DIR] [-j N] [--device N]\n"
    "                       [--redact-paths] [-q]\n"
    "INPUT: run folders, single files, zip archives. Writes DIR/index.html,\n"
    "DIR/index.json and one DIR/<run>.html per run or rank.\n";

typedef struct {
	ca_entry entry;
	int done;    /* entry is valid */
	int cached;  /* came from the cache */
	char *error; /* NULL, or why this run has no report */
	mr_status status;
} row_result;

typedef struct {
	const ar_set *set;
	const sr_limits *lim;
	const cmd_options *opt;
	const char *out_dir;
	const char *cache_dir;
	row_result *results;
	pthread_mutex_t lock;
	size_t finished;
	size_t cache_write_failures;
	int progress; /* show a counter on a terminal */
} batch_job;

/* ---- one run ------------------------------------------------------------------------------- */

/* Loads a run, runs the pipeline, and makes its index row and both documents. */
static mr_status report_run(const batch_job *job, sr_reader *rd, const ar_run *run, ca_entry *e,
                            mr_error *err)
{
	ld_evidence ev;
	rp_report rep;
	mr_buf json = {0}, html = {0};
	rd_options ropt = {job->opt->device, job->opt->redact_paths};
	memset(e, 0, sizeof *e);
	mr_status st = ar_load(rd, run, job->lim, &ev, err);
	if (st || (st = rp_build(&rep, &ev, &(rp_params){job->opt->device, 0}, err)))
		return st;
	if ((st = cmd_run_check_device(&rep, job->opt->device, err))) {
		rp_free(&rep);
		return st;
	}
	if (!(st = ix_row_of(&rep, &ropt, &e->row, err)) &&
	    !(st = rd_render_json(&rep, &ropt, &json, err)))
		st = rd_render_html(&rep, &ropt, &html, err);
	rp_free(&rep);
	e->json = json.data;
	e->json_len = json.len;
	e->html = html.data;
	e->html_len = html.len;
	if (!st && (!e->json || !e->html))
		st = mr_oom(err);
	if (st)
		ca_entry_free(e);
	return st;
}

/* Writes the file unless it already holds exactly these bytes: a batch re-run over unchanged
 * runs then creates no files (creating them is most of what a cached run costs). */
static mr_status write_if_changed(const char *path, const char *data, size_t len, mr_error *err)
{
	in_data old;
	mr_error ignored = {0};
	/* Only a regular file of this size can hold these bytes; a FIFO is never waited on. */
	if (in_read_regular(path, len, &old, &ignored) == MR_OK) {
		int same = old.len == len && (len == 0 || memcmp(old.data, data, len) == 0);
		in_release(&old);
		if (same)
			return MR_OK;
	}
	return out_replace(path, data, len, err);
}

static mr_status run_key(const batch_job *job, sr_reader *rd, const ar_run *run, h128_digest *key,
                         mr_error *err)
{
	h128_state h;
	ca_key_begin(&h);
	/* Options that change a report's bytes. */
	h128_u64(&h, (uint64_t)(int64_t)job->opt->device);
	h128_u64(&h, (uint64_t)job->opt->redact_paths);
	mr_status st = sr_digest(rd, run->members, run->member_count, job->lim, &h, err);
	if (!st)
		h128_final(&h, key);
	return st;
}

static void process_row(batch_job *job, sr_reader *rd, size_t i)
{
	const ar_run *run = &job->set->runs[i];
	row_result *res = &job->results[i];
	mr_error err = {0};
	mr_status st = MR_OK;
	h128_digest key;
	int have_key = 0;
	if (run->error) {
		st = mr_fail(&err, run->error_status ? run->error_status : MR_EINPUT, "%s",
		             run->error);
		goto done;
	}
	if (job->cache_dir) {
		if ((st = run_key(job, rd, run, &key, &err)))
			goto done;
		have_key = 1;
		int hit = 0;
		if ((st = ca_get(job->cache_dir, &key, &res->entry, &hit, &err)))
			goto done;
		res->cached = hit;
	}
	if (!res->cached) {
		if ((st = report_run(job, rd, run, &res->entry, &err)))
			goto done;
		if (have_key) {
			mr_error cerr = {0};
			if (ca_put(job->cache_dir, &key, &res->entry, &cerr)) {
				pthread_mutex_lock(&job->lock);
				job->cache_write_failures++;
				pthread_mutex_unlock(&job->lock);
			}
		}
	}
	char file[512];
	snprintf(file, sizeof file, "%s.html", run->slug);
	char *path = mr_format("%s/%s", job->out_dir, file);
	if (!path) {
		st = mr_oom(&err);
		goto done;
	}
	st = write_if_changed(path, res->entry.html, res->entry.html_len, &err);
	free(path);
	/* The HTML is on disk; only the row facts and the JSON stay for the index. */
	free(res->entry.html);
	res->entry.html = NULL;
	res->entry.html_len = 0;
done:
	if (st) {
		ca_entry_free(&res->entry);
		res->status = st;
		res->error = mr_strdup(err.msg);
		if (!res->error)
			res->status = MR_EFAIL;
	} else {
		res->done = 1;
	}
}

static void *worker_new(void)
{
	return sr_reader_new(); /* NULL is fine: each read then opens its own archive */
}

static void worker_free(void *rd)
{
	sr_reader_free(rd);
}

static void batch_task(void *ctx, void *worker, size_t i)
{
	batch_job *job = ctx;
	process_row(job, worker, i);
	pthread_mutex_lock(&job->lock);
	job->finished++;
	if (job->progress)
		fprintf(stderr, "\rmemreport: %zu/%zu runs", job->finished, job->set->count);
	pthread_mutex_unlock(&job->lock);
}

/* ---- the batch ------------------------------------------------------------------------------ */

/* Says why each run without a report has none; returns the exit status they make. */
static int report_failures(const ar_set *set, const row_result *results)
{
	int any_input = 0, any_fail = 0;
	for (size_t i = 0; i < set->count; i++) {
		if (results[i].done)
			continue;
		const char *name = set->runs[i].name;
		const char *why = results[i].error ? results[i].error : "not processed";
		size_t nl = strlen(name);
		if (strncmp(why, name, nl) == 0 && why[nl] == ':') /* the message names it */
			cmd_say("%s", why);
		else
			cmd_say("%s: %s", name, why);
		if (results[i].status == MR_EINPUT)
			any_input = 1;
		else
			any_fail = 1;
	}
	if (set->count == 0) {
		cmd_say("no runs found in the inputs");
		any_input = 1;
	}
	return any_fail ? MR_EFAIL : any_input ? MR_EINPUT : 0;
}

/* Writes DIR/index.json and DIR/index.html. Returns 0, or MR_EFAIL after saying why. */
static int write_indexes(const char *out_dir, const ar_set *set, const row_result *results)
{
	static const char *const names[] = {"index.json", "index.html"};
	ix_line *lines = mr_alloc_array(set->count ? set->count : 1, sizeof *lines);
	mr_buf index = {0};
	int rc = 0;
	for (size_t i = 0; lines && i < set->count; i++) {
		const row_result *x = &results[i];
		lines[i] =
		    (ix_line){x->done, x->error, &x->entry.row, x->entry.json, x->entry.json_len};
	}
	for (int k = 0; k < 2; k++) {
		mr_error werr = {0};
		index.len = 0;
		mr_status st = !lines   ? mr_oom(&werr)
		               : k == 0 ? rd_index_json(set, lines, &index, &werr)
		                        : rd_index_html(set, lines, &index, &werr);
		char *path = st ? NULL : mr_format("%s/%s", out_dir, names[k]);
		if (!st && !path)
			st = mr_oom(&werr);
		if (!st)
			st = write_if_changed(path, index.data ? index.data : "", index.len, &werr);
		if (st) {
			cmd_say("%s", werr.msg);
			rc = MR_EFAIL;
		}
		free(path);
	}
	mr_buf_free(&index);
	free(lines);
	return rc;
}

/* Runs every row on -j threads (the calling thread is one of them). */
static void run_rows(batch_job *job)
{
	long jobs = job->opt->jobs;
	if (!jobs) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		jobs = cpus > 0 ? MR_MIN(cpus, 64) : 1;
	}
	pthread_mutex_init(&job->lock, NULL);
	mr_pool_run(job->set->count, (size_t)jobs, batch_task, job, worker_new, worker_free);
	pthread_mutex_destroy(&job->lock);
	if (job->progress)
		fputc('\n', stderr);
}

/* Creates path and the folders above it (0755); the last one gets leaf_mode. Existing
 * folders keep their permissions. */
static int make_dirs(const char *path, mode_t leaf_mode)
{
	char *copy = mr_strdup(path);
	if (!copy)
		return -1;
	for (char *p = copy + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(copy, 0755) != 0 && errno != EEXIST) {
			free(copy);
			return -1;
		}
		*p = '/';
	}
	int rc = mkdir(copy, leaf_mode) != 0 && errno != EEXIST ? -1 : 0;
	free(copy);
	struct stat st;
	return rc == 0 && stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
}

static int batch_usage_error(const char *msg)
{
	return cmd_usage_error("memreport batch", msg, batch_usage);
}

/* The cache folder to use (NULL: none), ready; *rc is set when it cannot be. */
static const char *prepare_cache(const cmd_options *opt, int *rc)
{
	mr_error err = {0};
	const char *cache_dir = opt->cache;
	if (cache_dir && opt->templates) {
		/* Reports then depend on files the cache key does not cover. */
		if (!opt->quiet)
			cmd_say("--templates given: not using the cache");
		cache_dir = NULL;
	}
	if (cache_dir && (make_dirs(cache_dir, 0700) != 0 || ca_prepare_dir(cache_dir, &err))) {
		cmd_say("cache %s: %s", cache_dir, err.msg[0] ? err.msg : strerror(errno));
		*rc = MR_EFAIL;
	}
	return cache_dir;
}

/* The output folder must not be an input folder (its reports would be read back as runs), and
 * no report or index may land on an input file. Returns 0, or MR_EINPUT after saying why. */
static int check_outputs(const char *out_dir, const cmd_options *opt, const ar_set *set)
{
	out_guard g = {0};
	mr_error err = {0};
	mr_status st = MR_OK;
	struct stat out_st, in_st;
	int out_exists = stat(out_dir, &out_st) == 0;
	for (size_t i = 0; i < opt->arg_count && !st; i++) {
		const char *in = opt->args[i];
		if (out_exists && stat(in, &in_st) == 0 && S_ISDIR(in_st.st_mode) &&
		    in_st.st_dev == out_st.st_dev && in_st.st_ino == out_st.st_ino)
			st = mr_fail(
			    &err, MR_EINPUT,
			    "-o %s is the input folder %s: its reports would be read as runs "
			    "(write them into another folder)",
			    out_dir, in);
		else
			st = out_guard_add(&g, in, &err);
	}
	for (size_t r = 0; r < set->count && !st; r++)
		for (size_t m = 0; m < set->runs[r].member_count && !st; m++)
			st = out_guard_add(&g, set->runs[r].members[m].path, &err);
	for (size_t r = 0; out_exists && r <= set->count + 1 && !st; r++) {
		char *path = r < set->count ? mr_format("%s/%s.html", out_dir, set->runs[r].slug)
		                            : mr_format("%s/index.%s", out_dir,
		                                        r == set->count ? "html" : "json");
		st = path ? out_guard_check(&g, path, &err) : mr_oom(&err);
		free(path);
	}
	out_guard_free(&g);
	if (st)
		cmd_say("%s", err.msg);
	return (int)st;
}

/* The batch's last line: how many runs got a report (and how many from the cache). */
static void summary(const cmd_options *opt, const batch_job *job)
{
	size_t cached = 0, done_count = 0;
	for (size_t i = 0; i < job->set->count; i++) {
		cached += (size_t)job->results[i].cached;
		done_count += (size_t)job->results[i].done;
	}
	if (opt->quiet)
		return;
	char from_cache[64] = "";
	if (job->cache_dir)
		snprintf(from_cache, sizeof from_cache, " (%zu from the cache)", cached);
	cmd_say("wrote %s/index.html: %zu of %zu runs reported%s", job->out_dir, done_count,
	        job->set->count, from_cache);
}

/* Finds the runs, reports them and writes the index. Returns the exit status. */
static int run_batch(const cmd_options *opt)
{
	const char *out_dir = opt->output, *cache_dir = NULL;
	int rc = 0;
	ar_set set = {0};
	row_result *results = NULL;
	mr_error err = {0};
	sr_limits lim;
	sr_default_limits(&lim);
	/* A batch written inside its own input folder must not find its reports next time (the
	 * folders are created after discovery when they do not exist yet: nothing to skip). */
	sr_skip_folder(&lim, out_dir);
	if (opt->cache)
		sr_skip_folder(&lim, opt->cache);
	if (ar_discover(opt->args, opt->arg_count, &lim, &set, &err)) {
		cmd_say("%s", err.msg);
		rc = MR_EFAIL;
		goto done;
	}
	if ((rc = check_outputs(out_dir, opt, &set)))
		goto done;
	if (make_dirs(out_dir, 0755) != 0) {
		cmd_say("cannot create folder %s: %s", out_dir, strerror(errno));
		rc = MR_EFAIL;
		goto done;
	}
	cache_dir = prepare_cache(opt, &rc);
	if (rc)
		goto done;
	if (!(results = mr_alloc_array(set.count ? set.count : 1, sizeof *results))) {
		cmd_say("out of memory");
		rc = MR_EFAIL;
		goto done;
	}
	batch_job job = {.set = &set,
	                 .lim = &lim,
	                 .opt = opt,
	                 .out_dir = out_dir,
	                 .cache_dir = cache_dir,
	                 .results = results,
	                 .progress = !opt->quiet && isatty(STDERR_FILENO) && set.count > 1};
	run_rows(&job);
	rc = report_failures(&set, results);
	if (job.cache_write_failures)
		cmd_say("warning: %zu cache entr%s could not be written to %s",
		        job.cache_write_failures, job.cache_write_failures == 1 ? "y" : "ies",
		        cache_dir);
	if (write_indexes(out_dir, &set, results))
		rc = MR_EFAIL;
	summary(opt, &job);
done:
	for (size_t i = 0; results && i < set.count; i++) {
		ca_entry_free(&results[i].entry);
		free(results[i].error);
	}
	free(results);
	ar_set_free(&set);
	return rc;
}

int cmd_batch(int argc, char **argv)
{
	cmd_options opt;
	mr_error err = {0};
	int rc = 0;
	if (cmd_parse(CMD_BATCH, argc, argv, &opt, &err)) {
		rc = err.status == MR_EINPUT ? batch_usage_error(err.msg) : MR_EFAIL;
		if (rc == MR_EFAIL)
			cmd_say("%s", err.msg);
	} else if (opt.help) {
		fputs(batch_usage, stdout);
	} else if (!opt.arg_count) {
		rc = batch_usage_error("no input given");
	} else if (!opt.output) {
		rc = batch_usage_error("-o DIR is required");
	} else if (strcmp(opt.output, "-") == 0) {
		/* "-" means standard output everywhere else: never a folder named "-" */
		rc = batch_usage_error("-o - is standard output, and batch writes a folder: give "
		                       "its path (./- for a folder named -)");
	} else {
		if (opt.templates)
			tp_set_dir(opt.templates);
		rc = run_batch(&opt);
	}
	cmd_options_free(&opt);
	return rc;
}
