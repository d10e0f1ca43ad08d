/* cmd_merge.c: `memreport merge DIR [--templates DIR] [-q]`.
 *
 * Reads every DIR/index.shard-*.json (sx_parse: untrusted), checks that the shards are of one
 * batch (the same N, memreport, shape and discovered runs), that each shard is there once and
 * every run once, and that each reported run's report is in DIR; then writes DIR/index.json and
 * DIR/index.html from the rows, as an unsharded batch does (cmd_write_index). Anything missing
 * or doubled exits 2 naming it; nothing is written then.
 *
 * Ownership: the shard files stay mapped (the rows' documents point into them) until the index
 * is written; everything is released before returning. */
#include "cmd/cmd_merge.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/mem.h"
#include "base/output.h"
#include "cmd/options.h"
#include "cmd/say.h"
#include "render/batch_index.h"
#include "render/templates.h"
#include "source/input.h"

static const char merge_usage[] =
    "usage: memreport merge DIR [--templates DIR] [-q]\n"
    "Combines DIR/index.shard-I-of-N.json, written by memreport batch --shard I/N,\n"
    "into DIR/index.html and DIR/index.json: the files an unsharded batch writes.\n";

/* A shard index is read whole; none is larger. */
#define MERGE_MAX_SHARD_BYTES ((uint64_t)1 << 40)
/* Missing shards listed by number before "and N more". */
enum { MERGE_LIST_MAX = 16 };

/* ---- the index from the rows ----------------------------------------------------------------- */

int cmd_rows_status(const sx_row *const *rows, size_t n)
{
	int any_input = n == 0, any_fail = 0;
	for (size_t i = 0; i < n; i++) {
		any_fail |= rows[i]->status == MR_EFAIL;
		any_input |= rows[i]->status == MR_EINPUT;
	}
	return any_fail ? MR_EFAIL : any_input ? MR_EINPUT : 0;
}

mr_status cmd_write_if_changed(const char *path, const char *data, size_t len, mr_error *err)
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

int cmd_write_index(const char *out_dir, const sx_row *const *rows, size_t n)
{
	static const char *const names[] = {"index.json", "index.html"};
	ar_set set;
	ix_line *lines = NULL;
	mr_buf index = {0};
	mr_error err = {0};
	int rc = 0;
	if (sx_index_view(rows, n, &set, &lines, &err)) {
		cmd_say("%s", err.msg);
		return MR_EFAIL;
	}
	for (int k = 0; k < 2; k++) {
		mr_error werr = {0};
		index.len = 0;
		mr_status st = k == 0 ? rd_index_json(&set, lines, &index, &werr)
		                      : rd_index_html(&set, lines, &index, &werr);
		char *path = st ? NULL : mr_format("%s/%s", out_dir, names[k]);
		if (!st && !path)
			st = mr_oom(&werr);
		if (!st)
			st = cmd_write_if_changed(path, index.data ? index.data : "", index.len,
			                          &werr);
		if (st) {
			cmd_say("%s", werr.msg);
			rc = MR_EFAIL;
		}
		free(path);
	}
	mr_buf_free(&index);
	free(set.runs);
	free(lines);
	return rc;
}

/* ---- the shard files --------------------------------------------------------------------------
 */

typedef struct {
	char *path;
	in_data bytes;
	sx_doc doc;
} shard_file;

typedef struct {
	shard_file *files;
	size_t count, cap;
} shard_list;

static int by_path(const void *a, const void *b)
{
	return strcmp(((const shard_file *)a)->path, ((const shard_file *)b)->path);
}

static int is_shard_name(const char *name)
{
	size_t n = strlen(name);
	return strncmp(name, "index.shard-", 12) == 0 && n > 17 &&
	       strcmp(name + n - 5, ".json") == 0;
}

/* Lists DIR's shard indexes, sorted by name. Returns 0, or the exit status after saying why. */
static int list_shards(const char *dir, shard_list *l)
{
	DIR *d = opendir(dir);
	if (!d) {
		cmd_say("%s: %s", dir, strerror(errno));
		return errno == ENOENT || errno == ENOTDIR ? MR_EINPUT : MR_EFAIL;
	}
	int rc = 0;
	struct dirent *e;
	while (!rc && (e = readdir(d))) {
		if (!is_shard_name(e->d_name))
			continue;
		if (MR_GROW(l->files, l->cap, l->count + 1)) {
			rc = MR_EFAIL;
			break;
		}
		shard_file *f = &l->files[l->count];
		memset(f, 0, sizeof *f);
		if (!(f->path = mr_format("%s/%s", dir, e->d_name)))
			rc = MR_EFAIL;
		else
			l->count++;
	}
	closedir(d);
	if (rc)
		cmd_say("out of memory");
	else if (!l->count) {
		cmd_say("%s: no shard index (index.shard-I-of-N.json) found: run memreport batch "
		        "--shard I/N -o %s first",
		        dir, dir);
		rc = MR_EINPUT;
	}
	if (l->count)
		qsort(l->files, l->count, sizeof *l->files, by_path);
	return rc;
}

/* Reads and parses every listed shard index. */
static int read_shards(shard_list *l)
{
	for (size_t i = 0; i < l->count; i++) {
		shard_file *f = &l->files[i];
		mr_error err = {0};
		mr_status st = in_read_regular(f->path, MERGE_MAX_SHARD_BYTES, &f->bytes, &err);
		if (st) {
			cmd_say("%s: %s", f->path, err.msg);
			return MR_EINPUT;
		}
		st = sx_parse(f->path, (const char *)f->bytes.data, f->bytes.len, &f->doc, &err);
		if (!st && in_check(&f->bytes, &err))
			st = err.status;
		if (st) {
			cmd_say("%s", err.msg);
			return (int)st;
		}
	}
	return 0;
}

/* Every shard must come from one batch: the first one is the reference. */
static int check_agree(const shard_list *l, const char *templates)
{
	const shard_file *a = &l->files[0];
	for (size_t i = 1; i < l->count; i++) {
		const shard_file *b = &l->files[i];
		const char *what = a->doc.count != b->doc.count             ? "N (--shard I/N)"
		                   : strcmp(a->doc.version, b->doc.version) ? "memreport's version"
		                   : a->doc.shape_len != b->doc.shape_len ||
		                           memcmp(a->doc.shape, b->doc.shape, a->doc.shape_len)
		                       ? "the inputs and options"
		                   : a->doc.runs_total != b->doc.runs_total ||
		                           strcmp(a->doc.runs_digest, b->doc.runs_digest)
		                       ? "the runs found in the inputs"
		                       : NULL;
		if (what) {
			cmd_say("%s and %s disagree on %s: they are not shards of one batch "
			        "(remove the "
			        "stale ones and merge again)",
			        a->path, b->path, what);
			return MR_EINPUT;
		}
	}
	const char *t = a->doc.templates;
	if ((t == NULL) != (templates == NULL) || (t && strcmp(t, templates))) {
		cmd_say("the shards were run %s%s: give merge the same --templates",
		        t ? "with --templates " : "without --templates", t ? t : "");
		return MR_EINPUT;
	}
	return 0;
}

/* Each shard I of N once, none missing. */
static int check_complete(const shard_list *l)
{
	unsigned n = l->files[0].doc.count;
	size_t *owner = mr_alloc_array(n, sizeof *owner); /* file index + 1, 0: none */
	if (!owner) {
		cmd_say("out of memory");
		return MR_EFAIL;
	}
	int rc = 0;
	for (size_t i = 0; i < l->count && !rc; i++) {
		unsigned s = l->files[i].doc.index;
		if (owner[s]) {
			cmd_say("shard %u of %u is there twice: %s and %s (remove one)", s, n,
			        l->files[owner[s] - 1].path, l->files[i].path);
			rc = MR_EINPUT;
		}
		owner[s] = i + 1;
	}
	size_t missing = 0;
	mr_buf list = {0};
	for (unsigned s = 0; s < n && !rc; s++) {
		if (owner[s])
			continue;
		if (missing++ < MERGE_LIST_MAX)
			mr_buf_printf(&list, "%s%u", missing > 1 ? ", " : "", s);
	}
	if (missing > MERGE_LIST_MAX)
		mr_buf_printf(&list, " and %zu more", missing - MERGE_LIST_MAX);
	if (missing) {
		cmd_say("missing %s %s of %u (index.shard-I-of-%u.json): run %s, then merge again",
		        missing == 1 ? "shard" : "shards", list.data ? list.data : "?", n, n,
		        missing == 1 ? "it" : "them");
		rc = MR_EINPUT;
	}
	mr_buf_free(&list);
	free(owner);
	return rc;
}

/* The rows of every shard by position: each run once, every run there, its report in dir. */
static int gather_rows(const shard_list *l, const char *dir, const sx_row ***out, size_t *n)
{
	uint64_t total = l->files[0].doc.runs_total, have = 0;
	for (size_t i = 0; i < l->count; i++)
		have += l->files[i].doc.row_count;
	const sx_row **rows =
	    have >= total ? mr_alloc_array(total ? total : 1, sizeof *rows) : NULL;
	const char **from = rows ? mr_alloc_array(total ? total : 1, sizeof *from) : NULL;
	int rc = 0;
	if (have < total) {
		cmd_say(
		    "the shards of %s list %llu of its %llu runs: a shard index was cut or edited",
		    dir, (unsigned long long)have, (unsigned long long)total);
		rc = MR_EINPUT;
	} else if (!from) {
		cmd_say("out of memory");
		rc = MR_EFAIL;
	}
	for (size_t i = 0; i < l->count && !rc; i++) {
		const sx_doc *d = &l->files[i].doc;
		for (size_t k = 0; k < d->row_count && !rc; k++) {
			const sx_row *r = &d->rows[k];
			if (rows[r->position]) {
				cmd_say("run %s is in two shards: %s and %s", r->run.name,
				        from[r->position], l->files[i].path);
				rc = MR_EINPUT;
			}
			rows[r->position] = r;
			from[r->position] = l->files[i].path;
		}
	}
	for (size_t p = 0; p < total && !rc; p++) {
		struct stat st;
		char *report =
		    rows[p]->done ? mr_format("%s/%s.html", dir, rows[p]->run.slug) : NULL;
		if (rows[p]->done && (!report || stat(report, &st) != 0 || !S_ISREG(st.st_mode))) {
			cmd_say("%s: the report of run %s (%s) is missing: run its shard again",
			        report ? report : dir, rows[p]->run.name, from[p]);
			rc = MR_EINPUT;
		}
		free(report);
	}
	free(from);
	if (rc) {
		free(rows);
		return rc;
	}
	*out = rows;
	*n = (size_t)total;
	return 0;
}

static int run_merge(const char *dir, const cmd_options *opt)
{
	shard_list l = {0};
	const sx_row **rows = NULL;
	size_t n = 0;
	int rc = list_shards(dir, &l);
	if (!rc)
		rc = read_shards(&l);
	if (!rc)
		rc = check_agree(&l, opt->templates);
	if (!rc)
		rc = check_complete(&l);
	if (!rc)
		rc = gather_rows(&l, dir, &rows, &n);
	if (!rc) {
		if (opt->templates)
			tp_set_dir(opt->templates);
		rc = cmd_write_index(dir, rows, n);
	}
	if (!rc) {
		size_t done = 0;
		for (size_t i = 0; i < n; i++)
			done += (size_t)rows[i]->done;
		rc = cmd_rows_status(rows, n);
		if (!opt->quiet || rc)
			cmd_say("wrote %s/index.html from %zu shards: %zu of %zu runs reported%s",
			        dir, l.count, done, n,
			        n == 0     ? " (no runs found in the inputs)"
			        : done < n ? " (the index says why the others were not)"
			                   : "");
	}
	free(rows);
	for (size_t i = 0; i < l.count; i++) {
		sx_doc_free(&l.files[i].doc);
		in_release(&l.files[i].bytes);
		free(l.files[i].path);
	}
	free(l.files);
	return rc;
}

int cmd_merge(int argc, char **argv)
{
	cmd_options opt;
	mr_error err = {0};
	int rc = 0;
	if (cmd_parse(CMD_MERGE, argc, argv, &opt, &err)) {
		rc = err.status == MR_EINPUT
		         ? cmd_usage_error("memreport merge", err.msg, merge_usage)
		         : (cmd_say("%s", err.msg), MR_EFAIL);
	} else if (opt.help) {
		fputs(merge_usage, stdout);
	} else if (opt.arg_count != 1) {
		rc = cmd_usage_error("memreport merge",
		                     opt.arg_count ? "give one folder" : "no folder given",
		                     merge_usage);
	} else {
		rc = run_merge(opt.args[0], &opt);
	}
	cmd_options_free(&opt);
	return rc;
}
