/* archive.c: discovery of runs in folders, files and zip archives; reading their members. */
#include "load/archive.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/mem.h"
#include "base/units.h"
#include "decode/sniff.h"
#include "load/load.h"
#include "source/input.h"

void ar_default_limits(ar_limits *lim)
{
	lim->max_member_bytes = 2 * MR_GIB;
	lim->max_total_bytes = 64 * MR_GIB;
	lim->max_ratio = 1000;
	lim->max_members = 100000;
	lim->max_depth = 32;
	lim->skip_count = 0;
}

void ar_skip_folder(ar_limits *lim, const char *path)
{
	struct stat st;
	if (lim->skip_count >= 2 || stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
		return;
	lim->skip_dev[lim->skip_count] = (uint64_t)st.st_dev;
	lim->skip_ino[lim->skip_count] = (uint64_t)st.st_ino;
	lim->skip_count++;
}

static int skipped(const ar_limits *lim, const struct stat *st)
{
	for (size_t i = 0; i < lim->skip_count; i++)
		if (lim->skip_dev[i] == (uint64_t)st->st_dev &&
		    lim->skip_ino[i] == (uint64_t)st->st_ino)
			return 1;
	return 0;
}

static int is_digits(const char *s, size_t n)
{
	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	return 1;
}

static long parse_digits(const char *s, size_t n)
{
	long v = 0;
	for (size_t i = 0; i < n && v < 100000000; i++)
		v = v * 10 + (s[i] - '0');
	return v;
}

/* Length of the name without its extensions (".pickle", ".pkl", ".log", ".txt", ".json"...). */
static size_t stem_len(const char *name)
{
	const char *dot = strchr(name, '.');
	return dot ? (size_t)(dot - name) : strlen(name);
}

int ar_rank_of(const char *name)
{
	size_t n = stem_len(name);
	/* "rank3", "rank_3", "rank-3", "oom_rank3", "snapshot_rank3", "train_rank3" */
	for (size_t i = 0; i + 4 <= n; i++) {
		if (strncasecmp(name + i, "rank", 4) != 0)
			continue;
		if (i > 0 && name[i - 1] != '_' && name[i - 1] != '-' && name[i - 1] != '.')
			continue;
		size_t j = i + 4;
		if (j < n && (name[j] == '_' || name[j] == '-'))
			j++;
		size_t k = j;
		while (k < n && name[k] >= '0' && name[k] <= '9')
			k++;
		if (k > j && k - j <= 6 && (k == n || name[k] == '_' || name[k] == '-'))
			return (int)parse_digits(name + j, k - j);
	}
	/* "snapshot_3", "oom_snapshot_3", "memory_snapshot-3" */
	static const char *const stems[] = {"snapshot", "oom_snapshot", "memory_snapshot"};
	for (size_t s = 0; s < sizeof stems / sizeof *stems; s++) {
		size_t l = strlen(stems[s]);
		if (n > l + 1 && strncasecmp(name, stems[s], l) == 0 &&
		    (name[l] == '_' || name[l] == '-') && n - l - 1 <= 6 &&
		    is_digits(name + l + 1, n - l - 1))
			return (int)parse_digits(name + l + 1, n - l - 1);
	}
	return -1;
}

/* "iteration_100", "iteration-100", "iter_100", "step_100": the number, or -1. */
static long iteration_of(const char *comp, size_t n)
{
	static const char *const words[] = {"iteration", "iter", "step"};
	for (size_t w = 0; w < sizeof words / sizeof *words; w++) {
		size_t l = strlen(words[w]);
		if (n > l && strncasecmp(comp, words[w], l) == 0) {
			size_t j = l + (comp[l] == '_' || comp[l] == '-');
			if (n - j <= 9 && is_digits(comp + j, n - j))
				return parse_digits(comp + j, n - j);
		}
	}
	return -1;
}

int ar_name_unsafe(const char *name)
{
	if (name[0] == '/' || name[0] == '\\')
		return 1;
	if (((name[0] >= 'A' && name[0] <= 'Z') || (name[0] >= 'a' && name[0] <= 'z')) &&
	    name[1] == ':')
		return 1;
	const char *p = name;
	while (*p) {
		size_t n = strcspn(p, "/\\");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return 1;
		p += n;
		if (*p)
			p++;
	}
	return 0;
}

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
	const ar_limits *lim;
} finder;

static void found_free(found_file *f)
{
	free(f->container);
	free(f->label);
	free(f->rel);
	free(f->path);
	free(f->error);
}

static char *dup_str(const char *s)
{
	return mr_strndup(s, strlen(s));
}

static char *str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *str_printf(const char *fmt, ...)
{
	mr_buf b = {0};
	va_list ap;
	va_start(ap, fmt);
	mr_buf_vprintf(&b, fmt, ap);
	va_end(ap);
	if (b.failed) {
		mr_buf_free(&b);
		return NULL;
	}
	if (!b.data)
		return dup_str("");
	return b.data;
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
	r->name = dup_str(name);
	r->group = dup_str(name);
	r->error = dup_str(msg);
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
	f->container = dup_str(container);
	f->label = dup_str(label);
	f->rel = dup_str(rel);
	f->path = dup_str(path);
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

/* Reads up to DC_SNIFF_BYTES of a plain file. Returns the count, or -1 with errno set. */
static ssize_t read_head(const char *path, uint8_t *buf)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t got = 0;
	while (got < DC_SNIFF_BYTES) {
		ssize_t n = read(fd, buf + got, DC_SNIFF_BYTES - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	return (ssize_t)got;
}

/* An archive opened from a mapping of its bytes: libzip reading a file by path stats it again
 * and again (once per entry), which made cached batches of zips slow. */
typedef struct {
	zip_t *za;
	in_data map;
} zip_handle;

static void zh_close(zip_handle *h)
{
	if (h->za)
		zip_discard(h->za);
	in_release(&h->map);
	memset(h, 0, sizeof *h);
}

static mr_status zh_open(zip_handle *h, const char *path, mr_error *err)
{
	memset(h, 0, sizeof *h);
	mr_status st = in_read(path, &h->map, err);
	if (st)
		return st;
	zip_error_t ze;
	zip_error_init(&ze);
	zip_source_t *src = zip_source_buffer_create(h->map.data, h->map.len, 0, &ze);
	if (src) {
		h->za = zip_open_from_source(src, ZIP_RDONLY, &ze);
		if (!h->za)
			zip_source_free(src);
	}
	if (!h->za) {
		st = mr_fail(err, MR_EINPUT, "%s", zip_error_strerror(&ze));
		zip_error_fini(&ze);
		zh_close(h);
		return st;
	}
	zip_error_fini(&ze);
	return MR_OK;
}

/* "runs/exp.zip" -> "exp" */
static char *zip_stem(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	size_t n = strlen(base);
	if (n > 4 && strcasecmp(base + n - 4, ".zip") == 0)
		n -= 4;
	return mr_strndup(base, n);
}

/* Lists the members of the archive at `path`. rel_prefix places them inside the input (the
 * zip's own path without ".zip" when it was found inside a folder). */
static mr_status scan_zip(finder *fd, size_t input_no, const char *path, const char *label,
                          const char *rel_prefix, const char *display, mr_error *err)
{
	const ar_limits *lim = fd->lim;
	char msg[512];
	zip_handle zh;
	mr_error zerr = {0};
	if (zh_open(&zh, path, &zerr))
		return add_error_row(fd, display, zerr.status ? zerr.status : MR_EINPUT, zerr.msg,
		                     err);
	zip_t *za = zh.za;
	mr_status st = MR_OK;
	zip_int64_t n = zip_get_num_entries(za, 0);
	if (n < 0 || (uint64_t)n > lim->max_members) {
		snprintf(msg, sizeof msg, "archive has %lld entries, over the limit of %zu",
		         (long long)n, lim->max_members);
		st = add_error_row(fd, display, MR_EINPUT, msg, err);
		goto done;
	}
	/* The declared sizes first: an archive over the total limit is not read at all. */
	uint64_t total = 0;
	for (zip_int64_t i = 0; i < n; i++) {
		zip_stat_t zs;
		if (zip_stat_index(za, (zip_uint64_t)i, 0, &zs) == 0 && (zs.valid & ZIP_STAT_SIZE))
			total = total > UINT64_MAX - zs.size ? UINT64_MAX : total + zs.size;
	}
	if (total > lim->max_total_bytes) {
		snprintf(msg, sizeof msg, "archive inflates to %llu bytes, over the limit of %llu",
		         (unsigned long long)total, (unsigned long long)lim->max_total_bytes);
		st = add_error_row(fd, display, MR_EINPUT, msg, err);
		goto done;
	}
	for (zip_int64_t i = 0; i < n; i++) {
		zip_stat_t zs;
		if (zip_stat_index(za, (zip_uint64_t)i, 0, &zs) != 0 || !(zs.valid & ZIP_STAT_NAME))
			continue;
		const char *name = zs.name;
		size_t nl = strlen(name);
		if (nl == 0 || name[nl - 1] == '/' || name[nl - 1] == '\\')
			continue; /* a folder entry */
		if (ar_name_unsafe(name)) {
			mr_buf shown = {0};
			mr_buf_printf(&shown,
			              "unsafe member name \"%s\" (absolute or with \"..\"): "
			              "not read",
			              name);
			if (shown.failed) {
				mr_buf_free(&shown);
				st = mr_oom(err);
				goto done;
			}
			snprintf(msg, sizeof msg, "%s", shown.data);
			mr_buf_free(&shown);
			if ((st = add_error_row(fd, display, MR_EINPUT, msg, err)))
				goto done;
			continue;
		}
		/* macOS resource forks and hidden files are not evidence. */
		if (strncmp(name, "__MACOSX/", 9) == 0 || name[0] == '.' || strstr(name, "/."))
			continue;
		uint64_t size = (zs.valid & ZIP_STAT_SIZE) ? zs.size : 0;
		uint64_t comp = (zs.valid & ZIP_STAT_COMP_SIZE) ? zs.comp_size : 0;
		char *rel = rel_prefix[0] ? str_printf("%s/%s", rel_prefix, name) : dup_str(name);
		if (!rel) {
			st = mr_oom(err);
			goto done;
		}
		for (char *c = rel; *c; c++)
			if (*c == '\\')
				*c = '/';
		mr_one_line(rel); /* a name shows in reports and one-line errors */
		const char *problem = NULL;
		char problem_buf[256];
		dc_kind kind = DC_BINARY;
		if ((zs.valid & ZIP_STAT_ENCRYPTION_METHOD) &&
		    zs.encryption_method != ZIP_EM_NONE) {
			problem = "encrypted member: not read";
		} else if (size > lim->max_member_bytes) {
			snprintf(problem_buf, sizeof problem_buf,
			         "member inflates to %llu bytes, over the limit of %llu",
			         (unsigned long long)size,
			         (unsigned long long)lim->max_member_bytes);
			problem = problem_buf;
		} else if (size > MR_MIB && size / (comp ? comp : 1) > lim->max_ratio) {
			snprintf(problem_buf, sizeof problem_buf,
			         "member inflates %llu times (%llu to %llu bytes): refused as a "
			         "zip bomb",
			         (unsigned long long)(size / (comp ? comp : 1)),
			         (unsigned long long)comp, (unsigned long long)size);
			problem = problem_buf;
		} else {
			uint8_t head[DC_SNIFF_BYTES];
			zip_file_t *zf = zip_fopen_index(za, (zip_uint64_t)i, 0);
			zip_int64_t got = zf ? zip_fread(zf, head, sizeof head) : -1;
			if (zf)
				zip_fclose(zf);
			if (got < 0)
				problem = "member cannot be read (corrupt archive?)";
			else
				kind = dc_sniff(head, (size_t)got);
		}
		if (!problem && (kind == DC_BINARY || kind == DC_ZIP)) {
			free(rel); /* not evidence; archives inside archives are not opened */
			continue;
		}
		st = add_found(fd, input_no, path, label, rel, path, (int64_t)i, size, kind, err);
		free(rel);
		if (st)
			goto done;
		if (problem) {
			found_file *f = &fd->items[fd->count - 1];
			f->error = str_printf("%s: %s", f->rel, problem);
			f->error_status = MR_EINPUT;
			if (!f->error) {
				st = mr_oom(err);
				goto done;
			}
		}
	}
done:
	zh_close(&zh);
	return st;
}

/* One plain file met on a walk (or given alone). */
static mr_status scan_file(finder *fd, size_t input_no, const char *path, const char *label,
                           const char *rel, int single, mr_error *err)
{
	uint8_t head[DC_SNIFF_BYTES];
	ssize_t got = read_head(path, head);
	if (got < 0) {
		char msg[512];
		snprintf(msg, sizeof msg, "cannot read: %s", strerror(errno));
		return add_error_row(fd, single ? path : rel, MR_EINPUT, msg, err);
	}
	dc_kind kind = dc_sniff(head, (size_t)got);
	if (kind == DC_ZIP) {
		char *stem = single ? dup_str("") : mr_strndup(rel, strlen(rel));
		if (!stem)
			return mr_oom(err);
		size_t n = strlen(stem);
		if (n > 4 && strcasecmp(stem + n - 4, ".zip") == 0)
			stem[n - 4] = 0;
		char *display = single ? dup_str(path) : str_printf("%s/%s", label, rel);
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

typedef struct {
	char *rel;
	size_t depth;
} walk_item;

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Walks a folder with an explicit stack: depth is bounded and never reaches the C stack. */
static mr_status scan_folder(finder *fd, size_t input_no, const char *root, const char *label,
                             mr_error *err)
{
	walk_item *stack = NULL;
	size_t depth_count = 0, cap = 0;
	mr_status st = MR_OK;
	char **names = NULL;
	size_t name_count = 0, name_cap = 0;
	if (MR_GROW(stack, cap, 1))
		return mr_oom(err);
	stack[depth_count].rel = dup_str("");
	stack[depth_count].depth = 0;
	if (!stack[depth_count].rel) {
		free(stack);
		return mr_oom(err);
	}
	depth_count++;
	while (depth_count && !st) {
		walk_item item = stack[--depth_count];
		char *dir = item.rel[0] ? str_printf("%s/%s", root, item.rel) : dup_str(root);
		DIR *d = dir ? opendir(dir) : NULL;
		if (!dir) {
			st = mr_oom(err);
		} else if (!d) {
			char msg[512];
			snprintf(msg, sizeof msg, "cannot open folder: %s", strerror(errno));
			char *shown =
			    item.rel[0] ? str_printf("%s/%s", label, item.rel) : dup_str(label);
			st = shown ? add_error_row(fd, shown, MR_EINPUT, msg, err) : mr_oom(err);
			free(shown);
		} else {
			struct dirent *e;
			name_count = 0;
			while ((e = readdir(d))) {
				if (e->d_name[0] == '.')
					continue; /* ".", "..", hidden files */
				if (MR_GROW(names, name_cap, name_count + 1) ||
				    !(names[name_count] = dup_str(e->d_name))) {
					st = mr_oom(err);
					break;
				}
				name_count++;
			}
			closedir(d);
			qsort(names, name_count, sizeof *names, cmp_str);
			/* Folders are pushed in reverse so that they pop in name order. */
			for (size_t k = name_count; k-- > 0 && !st;) {
				char *full = str_printf("%s/%s", dir, names[k]);
				char *rel = item.rel[0] ? str_printf("%s/%s", item.rel, names[k])
				                        : dup_str(names[k]);
				struct stat lst, sst;
				if (!full || !rel) {
					st = mr_oom(err);
				} else if (lstat(full, &lst) != 0) {
					/* vanished meanwhile */
				} else if (S_ISDIR(lst.st_mode)) {
					if (item.depth + 1 < fd->lim->max_depth &&
					    !skipped(fd->lim, &lst)) {
						if (MR_GROW(stack, cap, depth_count + 1)) {
							st = mr_oom(err);
						} else {
							stack[depth_count].rel = rel;
							stack[depth_count].depth = item.depth + 1;
							depth_count++;
							rel = NULL;
						}
					}
				} else if (stat(full, &sst) == 0 && S_ISREG(sst.st_mode)) {
					/* links to files are followed; links to folders are not */
					st = scan_file(fd, input_no, full, label, rel, 0, err);
				}
				free(full);
				free(rel);
			}
			for (size_t k = 0; k < name_count; k++)
				free(names[k]);
		}
		free(dir);
		free(item.rel);
	}
	while (depth_count)
		free(stack[--depth_count].rel);
	free(stack);
	free(names);
	return st;
}

/* The folder's display label: its last component ("runs/exp/" -> "exp", "." -> the current
 * folder's name). */
static char *folder_label(const char *path)
{
	char *copy = dup_str(path);
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
		out = dup_str(rb && rb[1] ? rb + 1 : "run");
		free(real);
	} else {
		out = dup_str(base);
	}
	free(copy);
	return out;
}

static mr_status read_member(zip_t *za, const ar_member *m, const ar_limits *lim, in_data *out,
                             mr_error *err);

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
	long it = dn > ls ? iteration_of(p->dir + ls, dn - ls) : -1;
	if (it >= 0) {
		p->iteration = it;
		p->group_len = ls ? ls - 1 : 0;
	}
	return MR_OK;
}

static char *join_name(const char *label, const char *dir, size_t dir_len)
{
	if (!dir_len)
		return dup_str(label);
	if (!label[0])
		return mr_strndup(dir, dir_len);
	return str_printf("%s/%.*s", label, (int)dir_len, dir);
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
		r->group = dup_str(f0->path);
		r->name = dup_str(f0->path);
	} else {
		if (!label[0] && !p[0].dir[0]) /* files at the root of a zip given alone */
			label = zipless = zip_stem(f0->container);
		r->group = join_name(label ? label : "", p[0].dir, p[0].group_len);
		char *base = join_name(label ? label : "", p[0].dir, strlen(p[0].dir));
		if (!base)
			r->name = NULL;
		else if (rank >= 0 && file_suffix)
			r->name = str_printf("%s rank %d %s", base, rank, file_suffix);
		else if (rank >= 0)
			r->name = str_printf("%s rank %d", base, rank);
		else if (file_suffix)
			r->name = str_printf("%s %s", base, file_suffix);
		else
			r->name = dup_str(base);
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
		ar_member *m = &r->members[r->member_count];
		memset(m, 0, sizeof *m);
		m->name = f->single ? dup_str(f->path)
		                    : (f->label[0] ? str_printf("%s/%s", f->label, f->rel)
		                                   : dup_str(f->rel));
		m->path = dup_str(f->path);
		m->zip_index = f->zip_index;
		m->size = f->size;
		r->member_count++;
		if (!m->name || !m->path)
			return mr_oom(err);
		if (f->error && !r->error) {
			r->error = dup_str(f->error);
			r->error_status = f->error_status;
			if (!r->error)
				return mr_oom(err);
		}
	}
	return MR_OK;
}

/* Whether a text member of a folder without a snapshot is evidence at all (a README, a config
 * or a notes file is not): the loader's own test, on the first 64 MiB. */
static int found_is_evidence(const found_file *f, const ar_limits *lim)
{
	ar_member m = {.name = f->rel, .path = f->path, .zip_index = f->zip_index, .size = f->size};
	in_data in;
	mr_error ignored = {0};
	mr_status st;
	if (f->error)
		return 1; /* listed with its error */
	if (f->size > 64 * MR_MIB)
		return 1; /* too large to peek at: the loader decides */
	if (f->zip_index < 0) {
		st = in_read(f->path, &in, &ignored);
	} else {
		zip_handle zh;
		if (zh_open(&zh, f->path, &ignored))
			return 1;
		st = read_member(zh.za, &m, lim, &in, &ignored);
		zh_close(&zh);
	}
	if (st)
		return 1; /* unreadable: listed with the loader's error */
	ld_kind kind;
	int yes = ld_buffer_kind(in.data, in.len, &kind);
	in_release(&in);
	return yes;
}

/* One bucket (same input, container and folder): rows by rank; pickles sharing a rank get a
 * row each; text evidence goes to the row of its rank, or to the only row. */
static mr_status group_bucket(ar_set *set, size_t *cap, const found_file *items, placed *p,
                              size_t n, const ar_limits *lim, mr_error *err)
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
			any = found_is_evidence(&items[p[i].index], lim);
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
			 * join the only pickle of the folder */
			for (size_t t = 0; t < n; t++) {
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
				suffix = owned = str_printf("(%s)", b ? b + 1 : rel);
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

/* ---- names for output ----------------------------------------------------------------------- */

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c >= 'A' && c <= 'Z')
			c = (unsigned char)(c - 'A' + 'a');
		h = (h ^ c) * 0x100000001b3ull;
	}
	return h;
}

typedef struct {
	char **slots;
	size_t cap;
} str_set;

/* Inserts s (case-insensitively) unless present. Returns 1 inserted, 0 present, -1 OOM. */
static int set_insert(str_set *set, char *s)
{
	for (size_t i = fnv1a(s) & (set->cap - 1);; i = (i + 1) & (set->cap - 1)) {
		if (!set->slots[i]) {
			set->slots[i] = s;
			return 1;
		}
		if (strcasecmp(set->slots[i], s) == 0)
			return 0;
	}
}

static char *slug_of(const char *name)
{
	mr_buf b = {0};
	int last_sep = 1;
	for (const char *c = name; *c && b.len < 80; c++) {
		char ch = *c;
		int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		         (ch >= '0' && ch <= '9') || ch == '.' || ch == '-';
		if (ok && !(ch == '.' && last_sep)) {
			mr_buf_putc(&b, ch);
			last_sep = 0;
		} else if (!last_sep) {
			mr_buf_putc(&b, '_');
			last_sep = 1;
		}
	}
	while (b.len && (b.data[b.len - 1] == '_' || b.data[b.len - 1] == '.'))
		b.data[--b.len] = 0;
	if (b.failed) {
		mr_buf_free(&b);
		return NULL;
	}
	if (!b.len || strcasecmp(b.data, "index") == 0) {
		mr_buf_puts(&b, b.len ? "-run" : "run");
		if (b.failed) {
			mr_buf_free(&b);
			return NULL;
		}
	}
	return b.data;
}

static mr_status name_rows(ar_set *set, mr_error *err)
{
	str_set names = {0}, slugs = {0};
	names.cap = slugs.cap = 16;
	while (names.cap < set->count * 4)
		names.cap *= 2;
	slugs.cap = names.cap;
	names.slots = calloc(names.cap, sizeof *names.slots);
	slugs.slots = calloc(slugs.cap, sizeof *slugs.slots);
	mr_status st = MR_OK;
	if (!names.slots || !slugs.slots) {
		st = mr_oom(err);
		goto done;
	}
	for (size_t i = 0; i < set->count; i++) {
		ar_run *r = &set->runs[i];
		/* Row names are unique (" (2)" ...), so index rows can be told apart. */
		for (unsigned k = 2; set_insert(&names, r->name) == 0; k++) {
			char *base = r->name;
			size_t bl = strlen(base);
			if (k > 2) /* drop the previous " (k-1)" */
				bl = (size_t)(strrchr(base, '(') - base - 1);
			char *next = str_printf("%.*s (%u)", (int)bl, base, k);
			if (!next) {
				st = mr_oom(err);
				goto done;
			}
			free(r->name);
			r->name = next;
		}
		r->slug = slug_of(r->name);
		if (!r->slug) {
			st = mr_oom(err);
			goto done;
		}
		for (unsigned k = 2; set_insert(&slugs, r->slug) == 0; k++) {
			char *base = r->slug;
			size_t bl = strlen(base);
			if (k > 2)
				bl = (size_t)(strrchr(base, '-') - base);
			char *next = str_printf("%.*s-%u", (int)bl, base, k);
			if (!next) {
				st = mr_oom(err);
				goto done;
			}
			free(r->slug);
			r->slug = next;
		}
	}
done:
	free(names.slots);
	free(slugs.slots);
	return st;
}

/* ---- discovery ------------------------------------------------------------------------------ */

mr_status ar_discover(const char *const *inputs, size_t count, const ar_limits *lim, ar_set *out,
                      mr_error *err)
{
	memset(out, 0, sizeof *out);
	finder fd = {0};
	fd.lim = lim;
	placed *pl = NULL;
	size_t run_cap = 0;
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
		st = group_bucket(out, &run_cap, fd.items, pl + i, j - i, lim, err);
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
		st = name_rows(out, err);
done:
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

/* ---- reading -------------------------------------------------------------------------------- */

typedef struct {
	in_data *in;
	size_t count;
} owned_data;

/* Inflates one member, never past its declared size nor the member limit. */
static mr_status read_member(zip_t *za, const ar_member *m, const ar_limits *lim, in_data *out,
                             mr_error *err)
{
	if (m->size > lim->max_member_bytes)
		return mr_fail(
		    err, MR_EINPUT, "member inflates to %llu bytes, over the limit of %llu",
		    (unsigned long long)m->size, (unsigned long long)lim->max_member_bytes);
	zip_file_t *zf = zip_fopen_index(za, (zip_uint64_t)m->zip_index, 0);
	if (!zf)
		return mr_fail(err, MR_EINPUT, "cannot open member: %s", zip_strerror(za));
	size_t want = (size_t)m->size;
	uint8_t *buf = malloc(want + 1);
	mr_status st = MR_OK;
	if (!buf) {
		st = mr_oom(err);
		goto done;
	}
	size_t got = 0;
	while (got <= want) {
		zip_int64_t n = zip_fread(zf, buf + got, want + 1 - got);
		if (n < 0) {
			st = mr_fail(err, MR_EINPUT, "corrupt member: %s", zip_file_strerror(zf));
			goto done;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (got != want) {
		st = mr_fail(
		    err, MR_EINPUT,
		    "member holds %s bytes than its declared %llu (corrupt or hostile archive)",
		    got > want ? "more" : "fewer", (unsigned long long)m->size);
		goto done;
	}
	in_adopt(out, buf, got);
	buf = NULL;
done:
	free(buf);
	zip_fclose(zf);
	return st;
}

static void owned_free(owned_data *o)
{
	if (!o)
		return;
	for (size_t i = 0; i < o->count; i++)
		in_release(&o->in[i]);
	free(o->in);
	free(o);
}

void ar_contents_free(ar_contents *c)
{
	owned_free(c->owned);
	free(c->names);
	free(c->data);
	free(c->lens);
	memset(c, 0, sizeof *c);
}

/* Opens the archive at path unless *za already is it. */
struct ar_reader {
	zip_handle zh;
	char *path; /* of the open archive */
};

ar_reader *ar_reader_new(void)
{
	return calloc(1, sizeof(ar_reader));
}

void ar_reader_free(ar_reader *rd)
{
	if (!rd)
		return;
	zh_close(&rd->zh);
	free(rd->path);
	free(rd);
}

/* The archive at path, opened once per reader. */
static mr_status zip_for(ar_reader *rd, const char *path, zip_t **za, mr_error *err)
{
	if (!(rd->zh.za && rd->path && strcmp(rd->path, path) == 0)) {
		zh_close(&rd->zh);
		free(rd->path);
		rd->path = NULL;
		mr_status st = zh_open(&rd->zh, path, err);
		if (st)
			return st;
		if (!(rd->path = mr_strndup(path, strlen(path)))) {
			zh_close(&rd->zh);
			return mr_oom(err);
		}
	}
	*za = rd->zh.za;
	return MR_OK;
}

mr_status ar_read(ar_reader *rd, const ar_run *run, const ar_limits *lim, ar_contents *out,
                  mr_error *err)
{
	memset(out, 0, sizeof *out);
	if (run->error)
		return mr_fail(err, run->error_status ? run->error_status : MR_EINPUT, "%s",
		               run->error);
	size_t n = run->member_count;
	owned_data *o = calloc(1, sizeof *o);
	out->names = mr_alloc_array(n ? n : 1, sizeof *out->names);
	out->data = mr_alloc_array(n ? n : 1, sizeof *out->data);
	out->lens = mr_alloc_array(n ? n : 1, sizeof *out->lens);
	out->owned = o;
	if (o)
		o->in = mr_alloc_array(n ? n : 1, sizeof *o->in);
	if (!o || !o->in || !out->names || !out->data || !out->lens) {
		ar_contents_free(out);
		return mr_oom(err);
	}
	ar_reader *own = rd ? NULL : (rd = ar_reader_new());
	mr_status st = rd ? MR_OK : mr_oom(err);
	for (size_t i = 0; i < n && !st; i++) {
		const ar_member *m = &run->members[i];
		mr_error local = {0};
		in_data *slot = &o->in[o->count];
		if (m->zip_index < 0) {
			st = in_read(m->path, slot, &local);
		} else {
			zip_t *za = NULL;
			st = zip_for(rd, m->path, &za, &local);
			if (!st)
				st = read_member(za, m, lim, slot, &local);
		}
		if (st) {
			mr_fail(err, st, "%s: %s", m->name, local.msg);
			break;
		}
		o->count++;
		out->names[i] = m->name;
		out->data[i] = slot->data ? slot->data : (const uint8_t *)"";
		out->lens[i] = slot->len;
		out->count++;
	}
	ar_reader_free(own);
	if (st)
		ar_contents_free(out);
	return st;
}

mr_status ar_digest(ar_reader *rd, const ar_run *run, const ar_limits *lim, h128_state *h,
                    mr_error *err)
{
	if (run->error)
		return mr_fail(err, run->error_status ? run->error_status : MR_EINPUT, "%s",
		               run->error);
	ar_reader *own = rd ? NULL : (rd = ar_reader_new());
	mr_status st = rd ? MR_OK : mr_oom(err);
	zip_t *za = NULL;
	h128_u64(h, run->member_count);
	for (size_t i = 0; i < run->member_count && !st; i++) {
		const ar_member *m = &run->members[i];
		mr_error local = {0};
		h128_str(h, m->name);
		if (m->zip_index < 0) {
			in_data in;
			st = in_read(m->path, &in, &local);
			if (!st) {
				h128_str(h, "file");
				h128_u64(h, in.len);
				h128_update(h, in.data, in.len);
				in_release(&in);
			}
		} else if (!(st = zip_for(rd, m->path, &za, &local))) {
			zip_stat_t zs;
			zip_file_t *zf = NULL;
			if (zip_stat_index(za, (zip_uint64_t)m->zip_index, 0, &zs) != 0 ||
			    !(zf = zip_fopen_index(za, (zip_uint64_t)m->zip_index,
			                           ZIP_FL_COMPRESSED))) {
				st = mr_fail(&local, MR_EINPUT, "cannot open member: %s",
				             zip_strerror(za));
			} else {
				/* The stored bytes and how to inflate them determine the content.
				 */
				h128_str(h, "zip");
				h128_u64(h, zs.comp_method);
				h128_u64(h, zs.crc);
				h128_u64(h, zs.size);
				h128_u64(h, zs.comp_size);
				uint8_t buf[1 << 16];
				uint64_t total = 0;
				zip_int64_t got;
				while ((got = zip_fread(zf, buf, sizeof buf)) > 0) {
					h128_update(h, buf, (size_t)got);
					total += (uint64_t)got;
					if (total > lim->max_member_bytes)
						break;
				}
				if (got < 0)
					st = mr_fail(&local, MR_EINPUT, "corrupt member: %s",
					             zip_file_strerror(zf));
			}
			if (zf)
				zip_fclose(zf);
		}
		if (st)
			mr_fail(err, st, "%s: %s", m->name, local.msg);
	}
	ar_reader_free(own);
	return st;
}

mr_status ar_load(ar_reader *rd, const ar_run *run, const ar_limits *lim, ld_evidence *out,
                  mr_error *err)
{
	ar_contents c;
	memset(out, 0, sizeof *out);
	mr_status st = ar_read(rd, run, lim, &c, err);
	if (st) {
		mr_one_line(err->msg);
		return st;
	}
	st = ld_load_buffers(out, c.names, c.data, c.lens, c.count, err);
	ar_contents_free(&c);
	mr_one_line(err->msg); /* member names come from the archive */
	return st;
}
