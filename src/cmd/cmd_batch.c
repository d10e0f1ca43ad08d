/* cmd_batch.c: `memreport batch INPUT... -o DIR [--cache DIR] [-j N] [-q]`.
 *
 * Finds the runs (archive.c), reports each one (in parallel, from the cache when it can), and
 * writes DIR/<run>.html for each, DIR/index.html (one sortable row per run or rank, readable
 * without JavaScript) and DIR/index.json (schema memreport-batch/1, embedding each run's
 * memreport/1 document). A broken run is listed with its error and the others go on. */
#include "cmd/cmd_batch.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyze/text_devices.h"
#include "base/buf.h"
#include "base/error.h"
#include "base/escape.h"
#include "base/mem.h"
#include "base/output.h"
#include "base/units.h"
#include "cmd/cache.h"
#include "cmd/options.h"
#include "load/discover.h"
#include "render/render_html.h"
#include "render/render_json.h"
#include "render/templates.h"
#include "report/report.h"
#include "report/view.h"
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
	size_t next, finished;
	size_t cache_write_failures;
	int progress; /* show a counter on a terminal */
} batch_job;

/* ---- one run ------------------------------------------------------------------------------- */

static char *settings_text(const rp_report *run)
{
	if (!run->ev.has_snapshot || !run->ev.snap.settings.present)
		return mr_strndup("", 0);
	const md_settings *cfg = &run->ev.snap.settings;
	const char *conf = md_str(&run->ev.snap, cfg->conf);
	if (conf[0])
		return mr_strndup(conf, strlen(conf));
	mr_buf b = {0};
	if (cfg->expandable_segments)
		mr_buf_puts(&b, "expandable_segments:True");
	if (cfg->max_split_size != UINT64_MAX)
		mr_buf_printf(&b, "%smax_split_size_mb:%" PRIu64, b.len ? "," : "",
		              cfg->max_split_size / MR_MIB);
	if (cfg->gc_threshold > 0)
		mr_buf_printf(&b, "%sgarbage_collection_threshold:%g", b.len ? "," : "",
		              cfg->gc_threshold);
	if (!b.len)
		mr_buf_puts(&b, "defaults");
	if (b.failed) {
		mr_buf_free(&b);
		return NULL;
	}
	return b.data;
}

static char *opt_dup(const char *s)
{
	return s ? mr_strndup(s, strlen(s)) : NULL;
}

/* The index-row facts and both documents of a loaded run. */
static mr_status fill_entry(const rp_report *run, const cmd_options *opt, ca_entry *e,
                            mr_error *err)
{
	memset(e, 0, sizeof *e);
	mr_status st;
	e->settings = settings_text(run);
	if (!e->settings)
		goto oom;
	e->has_snapshot = run->ev.has_snapshot;
	rp_view view;
	if ((st = rp_view_init(&view, run, opt->device, err))) {
		ca_entry_free(e);
		return st;
	}
	const an_device *best = NULL;
	for (size_t i = 0; i < view.device_count; i++) {
		const an_device *dv = view.devices[i];
		e->device_count++;
		if (!best || dv->pool[AN_POOL_ALL].reserved > best->pool[AN_POOL_ALL].reserved)
			best = dv;
	}
	if (best) {
		e->has_peaks = best->has_trace;
		e->peak_reserved =
		    best->has_trace ? best->peak_reserved : best->pool[AN_POOL_ALL].reserved;
		e->peak_allocated =
		    best->has_trace ? best->peak_allocated : best->pool[AN_POOL_ALL].allocated;
		e->fragmentation = best->fragmentation;
	} else if (!run->ev.has_snapshot) {
		/* Text evidence only: memory_stats() is exact, a memory_summary() table close. */
		const an_numbers *top = NULL;
		for (size_t i = 0; i < view.number_count; i++) {
			e->device_count++;
			if (!top || view.numbers[i].reserved > top->reserved)
				top = &view.numbers[i];
		}
		if (top) {
			e->has_peaks = top->has_peaks;
			e->peak_reserved = top->has_peaks ? top->peak_reserved : top->reserved;
			e->peak_allocated = top->has_peaks ? top->peak_allocated : top->allocated;
		}
		e->fragmentation = -1.0; /* needs the blocks of a snapshot */
	}
	rp_view_free(&view);
	const ad_advice *a = &run->advice;
	if (a->oom.present && !(e->oom_cause = opt_dup(ad_cause_name(a->oom.cause))))
		goto oom;
	if (a->rec_count && (!(e->rec_id = opt_dup(a->recs[0].id)) ||
	                     (a->recs[0].title && !(e->rec_title = opt_dup(a->recs[0].title)))))
		goto oom;
	if (a->verdict && !(e->verdict = opt_dup(a->verdict)))
		goto oom;
	mr_buf json = {0}, html = {0};
	rd_options ropt = {opt->device, opt->redact_paths};
	if ((st = rd_render_json(run, &ropt, &json, err)) ||
	    (st = rd_render_html(run, &ropt, &html, err))) {
		mr_buf_free(&json);
		mr_buf_free(&html);
		ca_entry_free(e);
		return st;
	}
	e->json = json.data ? json.data : opt_dup("");
	e->json_len = json.len;
	e->html = html.data ? html.data : opt_dup("");
	e->html_len = html.len;
	if (!e->json || !e->html)
		goto oom;
	return MR_OK;
oom:
	ca_entry_free(e);
	return mr_oom(err);
}

static char *join_path(const char *dir, const char *name)
{
	mr_buf b = {0};
	mr_buf_printf(&b, "%s/%s", dir, name);
	if (b.failed) {
		mr_buf_free(&b);
		return NULL;
	}
	return b.data;
}

/* Writes the file unless it already holds exactly these bytes: a batch re-run over unchanged
 * runs then creates no files (creating them is most of what a cached run costs). */
static mr_status write_if_changed(const char *path, const char *data, size_t len, mr_error *err)
{
	in_data old;
	mr_error ignored = {0};
	if (in_read(path, &old, &ignored) == MR_OK) {
		int same = old.len == len && (len == 0 || memcmp(old.data, data, len) == 0);
		in_release(&old);
		if (same)
			return MR_OK;
	}
	return out_write(path, data, len, err);
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
		ld_evidence ev;
		rp_report loaded;
		if ((st = ar_load(rd, run, job->lim, &ev, &err)) ||
		    (st = rp_build(&loaded, &ev, job->opt->device, &err)))
			goto done;
		st = fill_entry(&loaded, job->opt, &res->entry, &err);
		rp_free(&loaded);
		if (st)
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
	char *path = join_path(job->out_dir, file);
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
		res->error = mr_strndup(err.msg, strlen(err.msg));
		if (!res->error)
			res->status = MR_EFAIL;
	} else {
		res->done = 1;
	}
}

static void *worker(void *arg)
{
	batch_job *job = arg;
	sr_reader *rd = sr_reader_new(); /* NULL is fine: each call then opens its own */
	for (;;) {
		pthread_mutex_lock(&job->lock);
		size_t i = job->next < job->set->count ? job->next++ : SIZE_MAX;
		pthread_mutex_unlock(&job->lock);
		if (i == SIZE_MAX)
			break;
		process_row(job, rd, i);
		pthread_mutex_lock(&job->lock);
		job->finished++;
		if (job->progress)
			fprintf(stderr, "\rmemreport: %zu/%zu runs", job->finished,
			        job->set->count);
		pthread_mutex_unlock(&job->lock);
	}
	sr_reader_free(rd);
	return NULL;
}

/* ---- the index ------------------------------------------------------------------------------ */

static void render_index_json(const ar_set *set, const row_result *res, mr_buf *b)
{
	mr_buf_puts(b, "{\n\"schema\": \"memreport-batch/1\",\n\"runs\": [");
	for (size_t i = 0; i < set->count; i++) {
		const ar_run *r = &set->runs[i];
		const row_result *x = &res[i];
		const ca_entry *e = &x->entry;
		mr_buf_puts(b, i ? ",\n{" : "\n{");
		mr_buf_puts(b, "\"name\": ");
		mr_json_str(b, r->name);
		mr_buf_puts(b, ", \"group\": ");
		mr_json_str(b, r->group);
		if (r->rank >= 0)
			mr_buf_printf(b, ", \"rank\": %d", r->rank);
		else
			mr_buf_puts(b, ", \"rank\": null");
		if (r->iteration >= 0)
			mr_buf_printf(b, ", \"iteration\": %ld", r->iteration);
		else
			mr_buf_puts(b, ", \"iteration\": null");
		mr_buf_puts(b, ", \"inputs\": [");
		for (size_t k = 0; k < r->member_count; k++) {
			mr_buf_puts(b, k ? ", " : "");
			mr_json_str(b, r->members[k].name);
		}
		mr_buf_puts(b, "], \"report\": ");
		if (x->done)
			mr_buf_printf(b, "\"%s.html\"", r->slug); /* slugs need no escaping */
		else
			mr_buf_puts(b, "null");
		mr_buf_puts(b, ", \"error\": ");
		mr_json_str(b, x->done ? NULL : (x->error ? x->error : "not processed"));
		if (!x->done) {
			mr_buf_puts(b, ", \"summary\": null, \"result\": null}");
			continue;
		}
		mr_buf_puts(b, ",\n \"summary\": {\"settings\": ");
		mr_json_str(b, e->settings);
		if (e->device_count) {
			mr_buf_printf(
			    b,
			    ", \"peak_reserved_bytes\": %" PRIu64
			    ", \"peak_allocated_bytes\": %" PRIu64 ", \"peaks_recorded\": %s",
			    e->peak_reserved, e->peak_allocated, e->has_peaks ? "true" : "false");
			if (e->fragmentation >= 0)
				mr_buf_printf(b, ", \"fragmentation\": %.4f", e->fragmentation);
			else
				mr_buf_puts(b, ", \"fragmentation\": null");
		} else
			mr_buf_puts(b, ", \"peak_reserved_bytes\": null, \"peak_allocated_bytes\": "
			               "null, \"peaks_recorded\": false, \"fragmentation\": null");
		mr_buf_puts(b, ", \"oom_cause\": ");
		mr_json_str(b, e->oom_cause);
		mr_buf_puts(b, ", \"first_recommendation\": ");
		mr_json_str(b, e->rec_id);
		mr_buf_puts(b, "},\n \"result\": ");
		/* The run's own memreport/1 document, as written by rd_render_json. */
		size_t n = e->json_len;
		while (n && (e->json[n - 1] == '\n' || e->json[n - 1] == ' '))
			n--;
		if (n)
			mr_buf_append(b, e->json, n);
		else
			mr_buf_puts(b, "null");
		mr_buf_puts(b, "}");
	}
	mr_buf_puts(b, "\n]\n}\n");
}

static void esc(mr_buf *b, const char *s)
{
	mr_buf_html(b, s, strlen(s));
}

static void bytes_cell(mr_buf *b, uint64_t v, int exact)
{
	char s[32];
	mr_format_bytes(s, sizeof s, v);
	mr_buf_printf(b, "<td class=n data-v=%" PRIu64 " title=\"%" PRIu64 " bytes%s\">%s%s</td>",
	              v, v, exact ? "" : " at the snapshot: no peak recorded", s, exact ? "" : "*");
}

static const char index_css[] =
    "body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d232a;background:#fff}"
    "main{max-width:1400px;margin:0 auto;padding:16px 24px}"
    "table{border-collapse:collapse;width:100%}"
    "th,td{border-bottom:1px solid #dde2e7;padding:4px 8px;text-align:left;vertical-align:top}"
    "th{background:#f3f5f7;position:sticky;top:0}"
    "th[data-k]{cursor:pointer}th[data-k]:after{content:' \\2195';color:#99a}"
    ".n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}"
    ".err td{background:#fff4f4}.err .msg{color:#a00}"
    ".muted{color:#667}.oom{color:#a00;font-weight:600}"
    "code{font-size:12px;word-break:break-all}";

/* Sorting without a framework; the table is complete and readable without it. */
static const char index_js[] =
    "(function(){var ths=document.querySelectorAll('th[data-k]');"
    "Array.prototype.forEach.call(ths,function(th){th.tabIndex=0;"
    "function go(){var i=th.cellIndex,tb=th.closest('table').tBodies[0],"
    "rows=Array.prototype.slice.call(tb.rows),num=th.getAttribute('data-k')==='n',"
    "d=th.getAttribute('data-d')==='a'?-1:1;th.setAttribute('data-d',d===1?'a':'d');"
    "rows.sort(function(a,b){var x=a.cells[i],y=b.cells[i];"
    "var u=x.hasAttribute('data-v')?x.getAttribute('data-v'):x.textContent,"
    "v=y.hasAttribute('data-v')?y.getAttribute('data-v'):y.textContent;"
    "if(num){u=parseFloat(u);v=parseFloat(v);if(isNaN(u))u=-1;if(isNaN(v))v=-1;"
    "return (u-v)*d;}return u.localeCompare(v)*d;});"
    "rows.forEach(function(r){tb.appendChild(r);});}"
    "th.addEventListener('click',go);th.addEventListener('keydown',function(e){"
    "if(e.key==='Enter'||e.key===' '){e.preventDefault();go();}});});})();";

static void render_index_html(const ar_set *set, const row_result *res, mr_buf *b)
{
	size_t failed = 0, ooms = 0;
	for (size_t i = 0; i < set->count; i++) {
		failed += !res[i].done;
		ooms += res[i].done && res[i].entry.oom_cause;
	}
	mr_buf_puts(b, "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
	               "<meta name=viewport content=\"width=device-width,initial-scale=1\">"
	               "<meta http-equiv=Content-Security-Policy content=\"default-src 'none'; "
	               "style-src 'unsafe-inline'; img-src data:; script-src 'unsafe-inline'\">"
	               "<title>memreport: runs</title><style>");
	mr_buf_puts(b, index_css);
	mr_buf_puts(b, "</style></head><body><main><h1>memreport: runs</h1>");
	mr_buf_printf(b,
	              "<p class=muted>%zu run%s, %zu with an out-of-memory error, %zu that could "
	              "not be read. Click a column title to sort. Sizes marked * are the "
	              "snapshot's own: no trace or memory_stats() recorded the peak.</p>",
	              set->count, set->count == 1 ? "" : "s", ooms, failed);
	mr_buf_puts(
	    b, "<table><thead><tr><th data-k=t>Run</th><th data-k=n>Rank</th>"
	       "<th data-k=t>Allocator settings</th><th data-k=n class=n>Peak reserved</th>"
	       "<th data-k=n class=n>Peak allocated</th><th data-k=n class=n>Fragmentation</th>"
	       "<th data-k=t>OOM cause</th><th data-k=t>First recommendation</th>"
	       "<th data-k=t>Report</th></tr></thead><tbody>\n");
	for (size_t i = 0; i < set->count; i++) {
		const ar_run *r = &set->runs[i];
		const row_result *x = &res[i];
		const ca_entry *e = &x->entry;
		mr_buf_puts(b, x->done ? "<tr><td>" : "<tr class=err><td>");
		esc(b, r->name);
		if (r->iteration >= 0)
			mr_buf_printf(b, " <span class=muted>(iteration %ld)</span>", r->iteration);
		if (r->rank >= 0)
			mr_buf_printf(b, "</td><td class=n data-v=%d>%d</td>", r->rank, r->rank);
		else
			mr_buf_puts(b, "</td><td class=n data-v=-1>&mdash;</td>");
		if (!x->done) {
			mr_buf_puts(
			    b, "<td></td><td class=n data-v=-1></td><td class=n data-v=-1></td>"
			       "<td class=n data-v=-1></td><td></td><td></td><td class=msg>");
			mr_buf_puts(b, "could not be read: ");
			esc(b, x->error ? x->error : "not processed");
			mr_buf_puts(b, "</td></tr>\n");
			continue;
		}
		mr_buf_puts(b, "<td><code>");
		esc(b, e->settings[0] ? e->settings : "(not recorded)");
		mr_buf_puts(b, "</code></td>");
		if (e->device_count) {
			bytes_cell(b, e->peak_reserved, e->has_peaks);
			bytes_cell(b, e->peak_allocated, e->has_peaks);
			if (e->fragmentation >= 0)
				mr_buf_printf(b, "<td class=n data-v=%.4f>%.1f%%</td>",
				              e->fragmentation, e->fragmentation * 100.0);
			else
				mr_buf_puts(b, "<td class=n data-v=-1 title=\"needs a "
				               "snapshot\">&mdash;</td>");
		} else {
			mr_buf_puts(
			    b, "<td class=n data-v=-1>&mdash;</td><td class=n data-v=-1>&mdash;"
			       "</td><td class=n data-v=-1>&mdash;</td>");
		}
		if (e->oom_cause) {
			mr_buf_puts(b, "<td class=oom>");
			esc(b, e->oom_cause);
			mr_buf_puts(b, "</td>");
		} else {
			mr_buf_puts(b, "<td class=muted>no OOM</td>");
		}
		mr_buf_puts(b, "<td>");
		if (e->rec_id) {
			esc(b, e->rec_title && e->rec_title[0] ? e->rec_title : e->rec_id);
			mr_buf_puts(b, " <span class=muted>(");
			esc(b, e->rec_id);
			mr_buf_puts(b, ")</span>");
		} else {
			mr_buf_puts(b, "<span class=muted>none</span>");
		}
		/* slugs are [A-Za-z0-9._-]: safe in an href as they are */
		mr_buf_printf(b, "</td><td><a href=\"%s.html\">report</a></td></tr>\n", r->slug);
	}
	mr_buf_puts(b, "</tbody></table></main><script>");
	mr_buf_puts(b, index_js);
	mr_buf_puts(b, "</script></body></html>\n");
}

/* ---- command line ------------------------------------------------------------------------- */

static int make_dirs(const char *path)
{
	char *copy = mr_strndup(path, strlen(path));
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
	int rc = mkdir(copy, 0755) != 0 && errno != EEXIST ? -1 : 0;
	free(copy);
	struct stat st;
	return rc == 0 && stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
}

static int batch_usage_error(const char *msg)
{
	fprintf(stderr, "memreport batch: %s\n%s", msg, batch_usage);
	return MR_EINPUT;
}

int cmd_batch(int argc, char **argv)
{
	cmd_options opt;
	const char *out_dir = NULL, *cache_dir = NULL;
	long jobs = 0;
	int rc = 0;
	ar_set set = {0};
	row_result *results = NULL;
	pthread_t *threads = NULL;
	mr_buf index = {0};
	mr_error perr = {0};
	if (cmd_parse(CMD_BATCH, argc, argv, &opt, &perr)) {
		rc = perr.status == MR_EINPUT ? batch_usage_error(perr.msg) : MR_EFAIL;
		if (rc == MR_EFAIL)
			fprintf(stderr, "memreport: %s\n", perr.msg);
		goto done;
	}
	if (opt.help) {
		fputs(batch_usage, stdout);
		goto done;
	}
	const char **inputs = opt.args;
	size_t n_inputs = opt.arg_count;
	out_dir = opt.output;
	cache_dir = opt.cache;
	jobs = opt.jobs;
	if (opt.templates)
		tp_set_dir(opt.templates);
	if (!n_inputs) {
		rc = batch_usage_error("no input given");
		goto done;
	}
	if (!out_dir) {
		rc = batch_usage_error("-o DIR is required");
		goto done;
	}
	if (make_dirs(out_dir) != 0) {
		fprintf(stderr, "memreport: cannot create folder %s: %s\n", out_dir,
		        strerror(errno));
		rc = MR_EFAIL;
		goto done;
	}
	mr_error err = {0};
	if (cache_dir && opt.templates) {
		/* Reports then depend on files the cache key does not cover. */
		if (!opt.quiet)
			fprintf(stderr, "memreport: --templates given: not using the cache\n");
		cache_dir = NULL;
	}
	if (cache_dir && (make_dirs(cache_dir) != 0 || ca_prepare_dir(cache_dir, &err))) {
		fprintf(stderr, "memreport: cache %s: %s\n", cache_dir,
		        err.msg[0] ? err.msg : strerror(errno));
		rc = MR_EFAIL;
		goto done;
	}
	sr_limits lim;
	sr_default_limits(&lim);
	/* A batch written inside its own input folder must not find its reports next time. */
	sr_skip_folder(&lim, out_dir);
	if (cache_dir)
		sr_skip_folder(&lim, cache_dir);
	if (ar_discover(inputs, n_inputs, &lim, &set, &err)) {
		fprintf(stderr, "memreport: %s\n", err.msg);
		rc = MR_EFAIL;
		goto done;
	}
	results = mr_alloc_array(set.count ? set.count : 1, sizeof *results);
	if (!results) {
		fprintf(stderr, "memreport: out of memory\n");
		rc = MR_EFAIL;
		goto done;
	}
	memset(results, 0, (set.count ? set.count : 1) * sizeof *results);
	if (!jobs) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		jobs = cpus > 0 ? MR_MIN(cpus, 64) : 1;
	}
	size_t n_threads = (size_t)jobs < set.count ? (size_t)jobs : set.count;
	batch_job job = {.set = &set,
	                 .lim = &lim,
	                 .opt = &opt,
	                 .out_dir = out_dir,
	                 .cache_dir = cache_dir,
	                 .results = results,
	                 .progress = !opt.quiet && isatty(STDERR_FILENO) && set.count > 1};
	pthread_mutex_init(&job.lock, NULL);
	threads = mr_alloc_array(n_threads ? n_threads : 1, sizeof *threads);
	size_t started = 0;
	/* n_threads workers in all: the main thread is one of them. */
	for (; threads && started + 1 < n_threads; started++)
		if (pthread_create(&threads[started], NULL, worker, &job) != 0)
			break;
	worker(&job); /* also covers threads that could not start */
	for (size_t t = 0; t < started; t++)
		pthread_join(threads[t], NULL);
	pthread_mutex_destroy(&job.lock);
	if (job.progress)
		fputc('\n', stderr);

	int any_input = 0, any_fail = 0;
	for (size_t i = 0; i < set.count; i++) {
		if (results[i].done)
			continue;
		const char *name = set.runs[i].name;
		const char *why = results[i].error ? results[i].error : "not processed";
		size_t nl = strlen(name);
		if (strncmp(why, name, nl) == 0 &&
		    why[nl] == ':') /* the message names it already */
			fprintf(stderr, "memreport: %s\n", why);
		else
			fprintf(stderr, "memreport: %s: %s\n", name, why);
		if (results[i].status == MR_EINPUT)
			any_input = 1;
		else
			any_fail = 1;
	}
	if (set.count == 0) {
		fprintf(stderr, "memreport: no runs found in the inputs\n");
		any_input = 1;
	}
	if (job.cache_write_failures)
		fprintf(stderr, "memreport: warning: %zu cache entr%s could not be written to %s\n",
		        job.cache_write_failures, job.cache_write_failures == 1 ? "y" : "ies",
		        cache_dir);

	const char *names[] = {"index.json", "index.html"};
	for (int k = 0; k < 2; k++) {
		index.len = 0;
		if (k == 0)
			render_index_json(&set, results, &index);
		else
			render_index_html(&set, results, &index);
		char *path = join_path(out_dir, names[k]);
		mr_error werr = {0};
		if (index.failed || !path) {
			fprintf(stderr, "memreport: out of memory\n");
			any_fail = 1;
		} else if (write_if_changed(path, index.data ? index.data : "", index.len, &werr)) {
			fprintf(stderr, "memreport: %s\n", werr.msg);
			any_fail = 1;
		}
		free(path);
	}
	if (!opt.quiet) {
		size_t cached = 0, done_count = 0;
		for (size_t i = 0; i < set.count; i++) {
			cached += (size_t)results[i].cached;
			done_count += (size_t)results[i].done;
		}
		fprintf(stderr, "memreport: wrote %s/index.html: %zu of %zu runs reported", out_dir,
		        done_count, set.count);
		if (cache_dir)
			fprintf(stderr, " (%zu from the cache)", cached);
		fputc('\n', stderr);
	}
	rc = any_fail ? MR_EFAIL : any_input ? MR_EINPUT : 0;
done:
	for (size_t i = 0; results && i < set.count; i++) {
		ca_entry_free(&results[i].entry);
		free(results[i].error);
	}
	free(results);
	free(threads);
	mr_buf_free(&index);
	ar_set_free(&set);
	cmd_options_free(&opt);
	return rc;
}
