/* walk.c: the files under a folder. */
#include "source/walk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/mem.h"

typedef struct {
	char *rel;
	size_t depth;
} walk_item;

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

mr_status wk_walk(const char *root, const sr_limits *lim, const wk_visitor *v, mr_error *err)
{
	walk_item *stack = NULL;
	size_t depth_count = 0, cap = 0;
	mr_status st = MR_OK;
	char **names = NULL;
	size_t name_count = 0, name_cap = 0;
	if (MR_GROW(stack, cap, 1))
		return mr_oom(err);
	stack[depth_count].rel = mr_strdup("");
	stack[depth_count].depth = 0;
	if (!stack[depth_count].rel) {
		free(stack);
		return mr_oom(err);
	}
	depth_count++;
	while (depth_count && !st) {
		walk_item item = stack[--depth_count];
		char *dir = item.rel[0] ? mr_format("%s/%s", root, item.rel) : mr_strdup(root);
		DIR *d = dir ? opendir(dir) : NULL;
		if (!dir) {
			st = mr_oom(err);
		} else if (!d) {
			char msg[512];
			snprintf(msg, sizeof msg, "cannot open folder: %s", strerror(errno));
			st = v->unreadable(v->ctx, item.rel, msg, err);
		} else {
			struct dirent *e;
			name_count = 0;
			while ((e = readdir(d))) {
				if (e->d_name[0] == '.')
					continue; /* ".", "..", hidden files */
				if (MR_GROW(names, name_cap, name_count + 1) ||
				    !(names[name_count] = mr_strdup(e->d_name))) {
					st = mr_oom(err);
					break;
				}
				name_count++;
			}
			closedir(d);
			qsort(names, name_count, sizeof *names, cmp_str);
			/* Folders are pushed in reverse so that they pop in name order. */
			for (size_t k = name_count; k-- > 0 && !st;) {
				char *full = mr_format("%s/%s", dir, names[k]);
				char *rel = item.rel[0] ? mr_format("%s/%s", item.rel, names[k])
				                        : mr_strdup(names[k]);
				struct stat lst, sst;
				if (!full || !rel) {
					st = mr_oom(err);
				} else if (lstat(full, &lst) != 0) {
					/* vanished meanwhile */
				} else if (S_ISDIR(lst.st_mode)) {
					if (item.depth + 1 < lim->max_depth &&
					    !sr_skipped(lim, &lst)) {
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
					st = v->file(v->ctx, full, rel, err);
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

ssize_t wk_read_head(const char *path, uint8_t *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	return (ssize_t)got;
}
