/* discover.c: the runs of batch inputs: their files found, sniffed and grouped. */
#include "load/discover.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/escape.h"
#include "base/mem.h"
#include "base/units.h"
#include "decode/sniff.h"
#include "load/load.h"
#include "load/names.h"
#include "source/compressed.h"
#include "source/input.h"
#include "source/walk.h"
#include "source/zip.h"

/* ---- found files ---------------------------------------------------------------------------- */

typedef struct {
	size_t input_no;
	char *container; /* zip path, or "" for a plain file */
	char *label;     /* display prefix of the input ("" for a zip's members in folders) */
	char *rel;       /* path inside the input, '/'-separated */
	char *path;      /* file on disk (the zip for members) */
	int64_t zip_index;
	uint64_t size;
	dc_kind kind;
	char *error; /* this file makes its row unusable */
	mr_status error_status;
	int single; /* the input was this one file */
} found_file;

typedef struct {
	found_file *items;
	size_t count, cap;
	ar_run *errors; /* rows known bad before grouping */
	size_t error_count, error_cap;
	const sr_limits *lim;
} finder;

static void found_free(found_file *f)
{
	free(f->container);
	free(f->label);
	free(f->rel);
	free(f->path);
	free(f->error);
}

static mr_status add_error_row(finder *fd, const char *name, mr_status status, const char *msg,
                               mr_error *err)
{
	if (MR_GROW(fd->errors, fd->error_cap, fd->error_count + 1))
		return mr_oom(err);
	ar_run *r = &fd->errors[fd->error_count];
	memset(r, 0, sizeof *r);
	r->rank = -1;
	r->iteration = -1;
	r->name = mr_strdup(name);
	r->group = mr_strdup(name);
	r->error = mr_strdup(msg);
	r->error_status = status;
	if (!r->name || !r->group || !r->error) {
		free(r->name);
		free(r->group);
		free(r->error);
		return mr_oom(err);
	}
	mr_one_line(r->name);
	mr_one_line(r->group);
	mr_one_line(r->error);
	fd->error_count++;
	return MR_OK;
}

static mr_status add_found(finder *fd, size_t input_no, const char *container, const char *label,
                           const char *rel, const char *path, int64_t zip_index, uint64_t size,
                           dc_kind kind, mr_error *err)
{
	if (MR_GROW(fd->items, fd->cap, fd->count + 1))
		return mr_oom(err);
	found_file *f = &fd->items[fd->count];
	memset(f, 0, sizeof *f);
	f->input_no = input_no;
	f->container = mr_strdup(container);
	f->label = mr_strdup(label);
	f->rel = mr_strdup(rel);
	f->path = mr_strdup(path);
	f->zip_index = zip_index;
	f->size = size;
	f->kind = kind;
	if (!f->container || !f->label || !f->rel || !f->path) {
		found_free(f);
		return mr_oom(err);
	}
	fd->count++;
	return MR_OK;
}

static char *zip_stem(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	size_t n = strlen(base);
	if (n > 4 && strcasecmp(base + n - 4, ".zip") == 0)
		n -= 4;
	return mr_strndup(base, n);
}

/* The kind of what a compressed head inflates to (head[0..got) are the first bytes of a gzip
 * or xz file, up to COMPRESSED_HEAD of them): a compressed archive, or a file compressed twice,
 * is not evidence. */
enum { COMPRESSED_HEAD = 64 * 1024 };

static dc_kind inner_kind(dc_kind outer, const uint8_t *head, size_t got)
{
	uint8_t plain[DC_SNIFF_BYTES];
	int64_t n =
	    sr_inflate_head(outer == DC_GZIP ? SR_GZIP : SR_XZ, head, got, plain, sizeof plain);
	dc_kind k = n > 0 ? dc_sniff(plain, (size_t)n) : DC_BINARY;
	return k == DC_ZIP || k == DC_GZIP || k == DC_XZ ? DC_BINARY : k;
}

/* One member of an archive: found (with its problem, when it must not be read), or passed
 * over when it is not evidence. */
static mr_status zip_member(finder *fd, size_t input_no, const char *path, const zp_archive *zip,
                            int64_t i, const zp_entry *e, const char *label, const char *rel_prefix,
                            mr_error *err)
{
	mr_status st = MR_OK;
	char *rel = rel_prefix[0] ? mr_format("%s/%s", rel_prefix, e->name) : mr_strdup(e->name);
	if (!rel)
		return mr_oom(err);
	for (char *c = rel; *c; c++)
		if (*c == '\\')
			*c = '/';
	mr_one_line(rel); /* a name shows in reports and one-line errors */
	char problem_buf[256];
	dc_kind kind = DC_BINARY;
	const char *problem = zp_problem(e, fd->lim, problem_buf, sizeof problem_buf);
	uint8_t *head = problem ? NULL : malloc(COMPRESSED_HEAD);
	if (!problem && !head) {
		free(rel);
		return mr_oom(err);
	}
	if (!problem) {
		int64_t got = zp_read_head(zip, i, head, DC_SNIFF_BYTES);
		if (got < 0)
			problem = "member cannot be read (corrupt archive?)";
		else
			kind = dc_sniff(head, (size_t)got);
		if (kind == DC_GZIP || kind == DC_XZ) {
			got = zp_read_head(zip, i, head, COMPRESSED_HEAD);
			kind = got > 0 ? inner_kind(kind, head, (size_t)got) : DC_BINARY;
		}
	}
	free(head);
	/* Found, unless it is not evidence or is an archive inside the archive (never opened). */
	if (problem || (kind != DC_BINARY && kind != DC_ZIP))
		st = add_found(fd, input_no, path, label, rel, path, i, e->size, kind, err);
	if (!st && problem) {
		found_file *f = &fd->items[fd->count - 1];
		f->error = mr_format("%s: %s", f->rel, problem);
		f->error_status = MR_EINPUT;
		if (!f->error)
			st = mr_oom(err);
	}
	free(rel);
	return st;
}

/* Lists the members of the archive at `path`. rel_prefix places them inside the input (the
 * zip's own path without ".zip" when it was found inside a folder). */
static mr_status scan_zip(finder *fd, size_t input_no, const char *path, const char *label,
                          const char *rel_prefix, const char *display, mr_error *err)
{
	char msg[512];
	zp_archive zip;
	mr_error zerr = {0};
	if (zp_open(&zip, path, &zerr))
		return add_error_row(fd, display, zerr.status ? zerr.status : MR_EINPUT, zerr.msg,
		                     err);
	mr_status st = MR_OK;
	int64_t n = zp_entries(&zip, fd->lim, msg, sizeof msg);
	if (n < 0)
		st = add_error_row(fd, display, MR_EINPUT, msg, err);
	for (int64_t i = 0; i < n && !st; i++) {
		zp_entry e;
		if (zp_entry_at(&zip, i, &e))
			continue;
		const char *name = e.name;
		size_t nl = strlen(name);
		if (nl == 0 || name[nl - 1] == '/' || name[nl - 1] == '\\')
			continue; /* a folder entry */
		if (zp_name_unsafe(name)) {
			mr_buf shown = {0};
			mr_buf_printf(&shown,
			              "unsafe member name \"%s\" (absolute or with \"..\"): "
			              "not read",
			              name);
			if (!shown.failed)
				snprintf(msg, sizeof msg, "%s", shown.data);
			st = shown.failed ? mr_oom(err)
			                  : add_error_row(fd, display, MR_EINPUT, msg, err);
			mr_buf_free(&shown);
			continue;
		}
		/* macOS resource forks and hidden files are not evidence. */
		if (strncmp(name, "__MACOSX/", 9) == 0 || name[0] == '.' || strstr(name, "/."))
			continue;
		st = zip_member(fd, input_no, path, &zip, i, &e, label, rel_prefix, err);
	}
	zp_close(&zip);
	return st;
}

static mr_status scan_file(finder *fd, size_t input_no, const char *path, const char *label,
                           const char *rel, int single, mr_error *err)
{
	uint8_t head[DC_SNIFF_BYTES];
	ssize_t got = wk_read_head(path, head, sizeof head);
	if (got < 0) {
		char msg[512];
		snprintf(msg, sizeof msg, "cannot read: %s", strerror(errno));
		return add_error_row(fd, single ? path : rel, MR_EINPUT, msg, err);
	}
	dc_kind kind = dc_sniff(head, (size_t)got);
	if (kind == DC_GZIP || kind == DC_XZ) {
		uint8_t *more = malloc(COMPRESSED_HEAD);
		if (!more)
			return mr_oom(err);
		got = wk_read_head(path, more, COMPRESSED_HEAD);
		kind = got > 0 ? inner_kind(kind, more, (size_t)got) : DC_BINARY;
		free(more);
	}
	if (kind == DC_ZIP) {
		char *stem = single ? mr_strdup("") : mr_strdup(rel);
		if (!stem)
			return mr_oom(err);
		size_t n = strlen(stem);
		if (n > 4 && strcasecmp(stem + n - 4, ".zip") == 0)
			stem[n - 4] = 0;
		char *display = single ? mr_strdup(path) : mr_format("%s/%s", label, rel);
		mr_status st =
		    display ? scan_zip(fd, input_no, path, label, stem, display, err) : mr_oom(err);
		free(display);
		free(stem);
		return st;
	}
	if (kind == DC_BINARY && !single)
		return MR_OK;
	struct stat st;
	uint64_t size = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
	mr_status s = add_found(fd, input_no, "", label, rel, path, -1, size, kind, err);
	if (!s && single)
		fd->items[fd->count - 1].single = 1;
	return s;
}

/* The files of a folder input, through the walk. */
typedef struct {
	finder *fd;
	size_t input_no;
	const char *label;
} folder_walk;

static mr_status walk_file(void *ctx, const char *path, const char *rel, mr_error *err)
{
	folder_walk *w = ctx;
	return scan_file(w->fd, w->input_no, path, w->label, rel, 0, err);
}

static mr_status walk_unreadable(void *ctx, const char *rel, const char *why, mr_error *err)
{
	folder_walk *w = ctx;
	char *shown = rel[0] ? mr_format("%s/%s", w->label, rel) : mr_strdup(w->label);
	mr_status st = shown ? add_error_row(w->fd, shown, MR_EINPUT, why, err) : mr_oom(err);
	free(shown);
	return st;
}

static mr_status scan_folder(finder *fd, size_t input_no, const char *root, const char *label,
                             mr_error *err)
{
	folder_walk w = {fd, input_no, label};
	wk_visitor v = {walk_file, walk_unreadable, &w};
	return wk_walk(root, fd->lim, &v, err);
}

static char *folder_label(const char *path)
{
	char *copy = mr_strdup(path);
	if (!copy)
		return NULL;
	size_t n = strlen(copy);
	while (n > 1 && copy[n - 1] == '/')
		copy[--n] = 0;
	const char *base = strrchr(copy, '/');
	base = base ? base + 1 : copy;
	char *out;
	if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0 || base[0] == 0) {
		char *real = realpath(copy, NULL);
		const char *rb = real ? strrchr(real, '/') : NULL;
		out = mr_strdup(rb && rb[1] ? rb + 1 : "run");
		free(real);
	} else {
		out = mr_strdup(base);
	}
	free(copy);
	return out;
}

/* ---- grouping ----------------------------------------------------------------------------- */

typedef struct {
	size_t index; /* into finder.items */
	char *dir;    /* bucket folder: rel's folder without a rank component */
	int rank;
	long iteration;
	size_t group_len; /* dir prefix naming the run (without the iteration component) */
} placed;

static int cmp_placed(const void *a, const void *b, void *ctx)
{
	const placed *x = a, *y = b;
	const found_file *items = ctx;
	const found_file *fx = &items[x->index], *fy = &items[y->index];
	if (fx->input_no != fy->input_no)
		return fx->input_no < fy->input_no ? -1 : 1;
	int c = strcmp(fx->container, fy->container);
	if (c)
		return c;
	c = strcmp(x->dir, y->dir);
	if (c)
		return c;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return strcmp(fx->rel, fy->rel);
}

static mr_status place(const found_file *f, placed *p)
{
	const char *slash = strrchr(f->rel, '/');
	size_t dn = slash ? (size_t)(slash - f->rel) : 0;
	const char *base = slash ? slash + 1 : f->rel;
	p->rank = f->single ? ar_rank_of(base) : -1;
	if (!f->single) {
		p->rank = ar_rank_of(base);
		/* a rank folder: "exp/rank3/snapshot.pickle" */
		const char *last = dn ? memrchr(f->rel, '/', dn) : NULL;
		size_t ls = last ? (size_t)(last - f->rel) + 1 : 0;
		if (dn > ls) {
			char comp[64];
			size_t cl = dn - ls;
			if (cl < sizeof comp) {
				memcpy(comp, f->rel + ls, cl);
				comp[cl] = 0;
				int r = strncasecmp(comp, "rank", 4) == 0 ? ar_rank_of(comp) : -1;
				if (r >= 0) {
					if (p->rank < 0)
						p->rank = r;
					dn = ls ? ls - 1 : 0;
				}
			}
		}
	}
	p->dir = mr_strndup(f->rel, dn);
	if (!p->dir)
		return MR_EFAIL;
	p->iteration = -1;
	p->group_len = dn;
	const char *last = memrchr(p->dir, '/', dn);
	size_t ls = last ? (size_t)(last - p->dir) + 1 : 0;
	long it = dn > ls ? ar_iteration_of(p->dir + ls, dn - ls) : -1;
	if (it >= 0) {
		p->iteration = it;
		p->group_len = ls ? ls - 1 : 0;
	}
	return MR_OK;
}

static char *join_name(const char *label, const char *dir, size_t dir_len)
{
	if (!dir_len)
		return mr_strdup(label);
	if (!label[0])
		return mr_strndup(dir, dir_len);
	return mr_format("%s/%.*s", label, (int)dir_len, dir);
}

/* Appends one row made of the placed files p[0..n) (all of one bucket). */
static mr_status add_row(ar_set *set, size_t *cap, const found_file *items, const placed *p,
                         size_t n, int rank, const char *file_suffix, mr_error *err)
{
	if (MR_GROW(set->runs, *cap, set->count + 1))
		return mr_oom(err);
	ar_run *r = &set->runs[set->count];
	memset(r, 0, sizeof *r);
	const found_file *f0 = &items[p[0].index];
	char *zipless = NULL;
	const char *label = f0->label;
	if (f0->single) {
		r->group = mr_strdup(f0->path);
		r->name = mr_strdup(f0->path);
	} else {
		if (!label[0] && !p[0].dir[0]) /* files at the root of a zip given alone */
			label = zipless = zip_stem(f0->container);
		r->group = join_name(label ? label : "", p[0].dir, p[0].group_len);
		char *base = join_name(label ? label : "", p[0].dir, strlen(p[0].dir));
		if (!base)
			r->name = NULL;
		else if (rank >= 0 && file_suffix)
			r->name = mr_format("%s rank %d %s", base, rank, file_suffix);
		else if (rank >= 0)
			r->name = mr_format("%s rank %d", base, rank);
		else if (file_suffix)
			r->name = mr_format("%s %s", base, file_suffix);
		else
			r->name = mr_strdup(base);
		free(base);
	}
	free(zipless);
	r->rank = rank;
	r->iteration = p[0].iteration;
	r->members = mr_alloc_array(n, sizeof *r->members);
	set->count++; /* from here on ar_set_free releases the partial row */
	if (!r->group || !r->name || !r->members)
		return mr_oom(err);
	for (size_t i = 0; i < n; i++) {
		const found_file *f = &items[p[i].index];
		sr_member *m = &r->members[r->member_count];
		memset(m, 0, sizeof *m);
		m->name = f->single ? mr_strdup(f->path)
		                    : (f->label[0] ? mr_format("%s/%s", f->label, f->rel)
		                                   : mr_strdup(f->rel));
		m->path = mr_strdup(f->path);
		m->zip_index = f->zip_index;
		m->size = f->size;
		r->member_count++;
		if (!m->name || !m->path)
			return mr_oom(err);
		if (f->error && !r->error) {
			r->error = mr_strdup(f->error);
			r->error_status = f->error_status;
			if (!r->error)
				return mr_oom(err);
		}
	}
	return MR_OK;
}

/* Whether a text member of a folder without a snapshot is evidence at all (a README, a config
 * or a notes file is not): the loader's own test, on the first 64 MiB. The reader keeps the
 * archive open from one member to the next: a zip of 20 000 notes is opened once, not once per
 * note (each open parses the whole central directory). */
static int found_is_evidence(sr_reader *rd, const found_file *f, const sr_limits *lim)
{
	sr_contents c;
	mr_error ignored = {0};
	if (f->error)
		return 1; /* listed with its error */
	if (f->size > 64 * MR_MIB)
		return 1; /* too large to peek at: the loader decides */
	sr_member m = {f->rel, f->path, f->zip_index, f->size};
	if (sr_read(rd, &m, 1, lim, &c, &ignored))
		return 1; /* unreadable: listed with the loader's error */
	ld_kind kind;
	int yes = ld_buffer_kind(c.data[0], c.lens[0], &kind);
	sr_contents_free(&c);
	return yes;
}

/* One bucket (same input, container and folder): rows by rank; pickles sharing a rank get a
 * row each; text evidence goes to the row of its rank, or to the only row. */
static mr_status group_bucket(ar_set *set, size_t *cap, const found_file *items, placed *p,
                              size_t n, sr_reader *rd, const sr_limits *lim, mr_error *err)
{
	size_t pickles = 0;
	for (size_t i = 0; i < n; i++)
		pickles += items[p[i].index].kind == DC_PICKLE;
	placed *pick = mr_alloc_array(n, sizeof *pick);
	if (!pick)
		return mr_oom(err);
	mr_status st = MR_OK;
	if (pickles == 0 && !items[p[0].index].single) {
		int any = 0;
		for (size_t i = 0; i < n && !any; i++)
			any = found_is_evidence(rd, &items[p[i].index], lim);
		if (!any) {
			free(pick);
			return MR_OK; /* a folder of notes, not a run */
		}
	}
	if (pickles == 0) {
		/* Text-only run(s): one row per rank. */
		for (size_t i = 0; i < n && !st;) {
			size_t j = i;
			while (j < n && p[j].rank == p[i].rank)
				j++;
			st = add_row(set, cap, items, p + i, j - i, p[i].rank, NULL, err);
			i = j;
		}
		free(pick);
		return st;
	}
	/* Distinct pickle ranks, and how many pickles each has. */
	for (size_t i = 0; i < n && !st;) {
		size_t j = i, rank_pickles = 0;
		while (j < n && p[j].rank == p[i].rank)
			rank_pickles += items[p[j++].index].kind == DC_PICKLE;
		for (size_t k = i; k < j && !st; k++) {
			if (items[p[k].index].kind != DC_PICKLE)
				continue;
			size_t m = 0;
			pick[m++] = p[k];
			/* texts of the same rank join a lone pickle of that rank; rank-less texts
			 * join the only pickle of the folder. Only then is the whole bucket looked
			 * at: ranks are sorted, so a rank's texts lie in [i, j) (a bucket of many
			 * pickles must not cost pickles x members). */
			size_t from = pickles == 1 ? 0 : i, to = pickles == 1 ? n : j;
			if (pickles > 1 && rank_pickles > 1)
				to = from;
			for (size_t t = from; t < to; t++) {
				const found_file *tf = &items[p[t].index];
				if (tf->kind == DC_PICKLE)
					continue;
				int same_rank =
				    p[t].rank >= 0 && p[t].rank == p[k].rank && rank_pickles == 1;
				int only = p[t].rank < 0 && pickles == 1;
				if (same_rank || only)
					pick[m++] = p[t];
			}
			const char *suffix = NULL;
			char *owned = NULL;
			if (rank_pickles > 1) {
				const char *rel = items[p[k].index].rel;
				const char *b = strrchr(rel, '/');
				suffix = owned = mr_format("(%s)", b ? b + 1 : rel);
				if (!owned) {
					st = mr_oom(err);
					break;
				}
			}
			st = add_row(set, cap, items, pick, m, p[k].rank, suffix, err);
			free(owned);
		}
		i = j;
	}
	free(pick);
	return st;
}

/* ---- discovery ------------------------------------------------------------------------------ */

mr_status ar_discover(const char *const *inputs, size_t count, const sr_limits *lim, ar_set *out,
                      mr_error *err)
{
	memset(out, 0, sizeof *out);
	finder fd = {0};
	fd.lim = lim;
	placed *pl = NULL;
	size_t run_cap = 0;
	sr_reader *rd = sr_reader_new(); /* NULL is fine: each read then opens its archive */
	mr_status st = MR_OK;
	for (size_t i = 0; i < count && !st; i++) {
		const char *in = inputs[i];
		struct stat sb;
		if (stat(in, &sb) != 0) {
			char msg[512];
			snprintf(msg, sizeof msg, "cannot open: %s", strerror(errno));
			st = add_error_row(&fd, in, MR_EINPUT, msg, err);
		} else if (S_ISDIR(sb.st_mode)) {
			char *label = folder_label(in);
			st = label ? scan_folder(&fd, i, in, label, err) : mr_oom(err);
			free(label);
		} else {
			st = scan_file(&fd, i, in, "", in, 1, err);
		}
	}
	if (st)
		goto done;
	pl = mr_alloc_array(fd.count ? fd.count : 1, sizeof *pl);
	if (!pl) {
		st = mr_oom(err);
		goto done;
	}
	for (size_t i = 0; i < fd.count; i++) {
		pl[i].index = i;
		if (place(&fd.items[i], &pl[i])) {
			for (size_t k = 0; k < i; k++)
				free(pl[k].dir);
			free(pl);
			pl = NULL;
			st = mr_oom(err);
			goto done;
		}
	}
	qsort_r(pl, fd.count, sizeof *pl, cmp_placed, fd.items);
	/* Error rows first keep their input order among themselves; runs follow in input order. */
	for (size_t i = 0; i < fd.count && !st;) {
		size_t j = i + 1;
		const found_file *a = &fd.items[pl[i].index];
		while (j < fd.count) {
			const found_file *b = &fd.items[pl[j].index];
			if (a->input_no != b->input_no || strcmp(a->container, b->container) ||
			    strcmp(pl[i].dir, pl[j].dir) || a->single || b->single)
				break;
			j++;
		}
		st = group_bucket(out, &run_cap, fd.items, pl + i, j - i, rd, lim, err);
		i = j;
	}
	for (size_t i = 0; i < fd.error_count && !st; i++) {
		if (MR_GROW(out->runs, run_cap, out->count + 1)) {
			st = mr_oom(err);
			break;
		}
		out->runs[out->count++] = fd.errors[i];
		memset(&fd.errors[i], 0, sizeof fd.errors[i]);
	}
	if (!st)
		st = ar_name_rows(out, err);
done:
	sr_reader_free(rd);
	if (pl)
		for (size_t i = 0; i < fd.count; i++)
			free(pl[i].dir);
	free(pl);
	for (size_t i = 0; i < fd.count; i++)
		found_free(&fd.items[i]);
	free(fd.items);
	for (size_t i = 0; i < fd.error_count; i++) {
		free(fd.errors[i].name);
		free(fd.errors[i].group);
		free(fd.errors[i].error);
	}
	free(fd.errors);
	if (st)
		ar_set_free(out);
	return st;
}

void ar_set_free(ar_set *set)
{
	for (size_t i = 0; i < set->count; i++) {
		ar_run *r = &set->runs[i];
		for (size_t k = 0; k < r->member_count; k++) {
			free(r->members[k].name);
			free(r->members[k].path);
		}
		free(r->members);
		free(r->name);
		free(r->group);
		free(r->slug);
		free(r->error);
	}
	free(set->runs);
	memset(set, 0, sizeof *set);
}

mr_status ar_load(sr_reader *rd, const ar_run *run, const sr_limits *lim, ld_evidence *out,
                  mr_error *err)
{
	sr_contents c;
	memset(out, 0, sizeof *out);
	if (run->error)
		return mr_fail(err, run->error_status ? run->error_status : MR_EINPUT, "%s",
		               run->error);
	mr_status st = sr_read(rd, run->members, run->member_count, lim, &c, err);
	if (st) {
		mr_one_line(err->msg);
		return st;
	}
	mr_error changed = {0};
	st = ld_load_buffers(out, c.names, c.data, c.lens, c.count, err);
	if (sr_contents_check(&c, &changed)) { /* what the loader said does not matter then */
		if (!st)
			ld_free(out);
		st = changed.status;
		*err = changed;
	}
	sr_contents_free(&c);
	mr_one_line(err->msg); /* member names come from the archive */
	return st;
}
