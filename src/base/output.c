/* output.c: atomic report writing, devices and links, and the guard over the inputs. */
#include "base/output.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/mem.h"

static mr_status write_fd(int fd, const char *data, size_t len, mr_error *err)
{
	while (len) {
		ssize_t n = write(fd, data, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return mr_fail(err, MR_EFAIL, "write failed: %s", strerror(errno));
		data += n;
		len -= (size_t)n;
	}
	return MR_OK;
}

/* The temporary file beside path, then the rename; mode is the permission bits it gets. */
static mr_status write_atomic(const char *path, mode_t mode, const char *data, size_t len,
                              mr_error *err)
{
	size_t plen = strlen(path);
	char *tmp = malloc(plen + 16);
	if (!tmp)
		return mr_oom(err);
	snprintf(tmp, plen + 16, "%s.tmpXXXXXX", path);
	int fd = mkstemp(tmp);
	if (fd < 0) {
		mr_status st = mr_fail(err, MR_EFAIL, "cannot create %s: %s", tmp, strerror(errno));
		free(tmp);
		return st;
	}
	mr_status st = write_fd(fd, data, len, err);
	if (!st && fchmod(fd, mode) != 0)
		st = mr_fail(err, MR_EFAIL, "cannot set permissions: %s", strerror(errno));
	if (close(fd) != 0 && !st)
		st = mr_fail(err, MR_EFAIL, "cannot close %s: %s", tmp, strerror(errno));
	if (!st && rename(tmp, path) != 0)
		st = mr_fail(err, MR_EFAIL, "cannot rename %s to %s: %s", tmp, path,
		             strerror(errno));
	if (st)
		unlink(tmp);
	free(tmp);
	return st;
}

/* A device, FIFO or socket, written in place: opened without creating or truncating. */
static mr_status write_direct(const char *path, const char *data, size_t len, mr_error *err)
{
	int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return mr_fail(err, MR_EFAIL, "cannot open: %s", strerror(errno));
	mr_status st = write_fd(fd, data, len, err);
	if (close(fd) != 0 && !st)
		st = mr_fail(err, MR_EFAIL, "cannot close: %s", strerror(errno));
	return st;
}

/* The path at the end of a chain of symbolic links (path itself when it is none), whether it
 * exists or not. NULL with err set on a loop or when memory runs out. */
static char *follow_links(const char *path, mr_error *err)
{
	char *p = mr_strdup(path);
	for (int hops = 0; p; hops++) {
		struct stat st;
		if (lstat(p, &st) != 0 || !S_ISLNK(st.st_mode))
			return p;
		char target[PATH_MAX];
		ssize_t n = hops < 40 ? readlink(p, target, sizeof target - 1) : -1;
		if (n < 0) {
			mr_fail(err, MR_EFAIL, "cannot follow the link: %s",
			        strerror(hops < 40 ? errno : ELOOP));
			free(p);
			return NULL;
		}
		target[n] = '\0';
		const char *slash = strrchr(p, '/');
		char *next = target[0] == '/' || !slash
		                 ? mr_strdup(target)
		                 : mr_format("%.*s/%s", (int)(slash - p), p, target);
		free(p);
		p = next;
	}
	mr_oom(err);
	return NULL;
}

mr_status out_write(const char *path, const char *data, size_t len, mr_error *err)
{
	if (strcmp(path, "-") == 0)
		return write_fd(STDOUT_FILENO, data, len, err);
	char *target = follow_links(path, err);
	if (!target)
		return err->status;
	struct stat st;
	mr_status rc;
	if (stat(target, &st) != 0)
		rc = write_atomic(target, 0644, data, len, err);
	else if (S_ISDIR(st.st_mode))
		rc = mr_fail(err, MR_EFAIL, "is a folder, not a file");
	else if (!S_ISREG(st.st_mode))
		rc = write_direct(target, data, len, err);
	else
		rc = write_atomic(target, st.st_mode & 07777, data, len, err);
	free(target);
	return rc;
}

mr_status out_replace(const char *path, const char *data, size_t len, mr_error *err)
{
	return write_atomic(path, 0644, data, len, err);
}

char *out_default_path(const char *input, const char *ext)
{
	mr_buf b = {0};
	if (strcmp(input, "-") == 0) {
		mr_buf_printf(&b, "memreport.%s", ext);
		return b.failed ? (mr_buf_free(&b), NULL) : b.data;
	}
	size_t n = strlen(input);
	while (n > 1 && input[n - 1] == '/') /* "runs/" is the folder "runs" */
		n--;
	char *name = mr_strndup(input, n);
	if (!name)
		return NULL;
	const char *slash = strrchr(name, '/');
	char *dir = slash ? mr_strndup(name, (size_t)(slash - name + (slash == name))) : NULL;
	int writable = access(dir ? dir : ".", W_OK) == 0;
	free(dir);
	if (writable)
		mr_buf_printf(&b, "%s.%s", name, ext);
	else
		mr_buf_printf(&b, "%s.%s", slash ? slash + 1 : name, ext);
	free(name);
	if (b.failed) {
		mr_buf_free(&b);
		return NULL;
	}
	return b.data;
}

/* ---- the guard over the inputs ---------------------------------------------------------- */

mr_status out_guard_add(out_guard *g, const char *path, mr_error *err)
{
	struct stat st;
	if (strcmp(path, "-") == 0 || stat(path, &st) != 0)
		return MR_OK;
	if (MR_GROW(g->inputs, g->cap, g->count + 1))
		return mr_oom(err);
	struct out_input *in = &g->inputs[g->count];
	if (!(in->path = mr_strdup(path)))
		return mr_oom(err);
	in->dev = (uint64_t)st.st_dev;
	in->ino = (uint64_t)st.st_ino;
	g->count++;
	return MR_OK;
}

mr_status out_guard_check(const out_guard *g, const char *output, mr_error *err)
{
	struct stat st;
	if (strcmp(output, "-") == 0 || stat(output, &st) != 0)
		return MR_OK;
	for (size_t i = 0; i < g->count; i++) {
		const struct out_input *in = &g->inputs[i];
		if (in->dev != (uint64_t)st.st_dev || in->ino != (uint64_t)st.st_ino)
			continue;
		int same_name = strcmp(output, in->path) == 0;
		return mr_fail(err, MR_EINPUT,
		               "%s is %s%s: the report would overwrite its own evidence (choose "
		               "another output)",
		               output, same_name ? "an input" : "the input ",
		               same_name ? "" : in->path);
	}
	return MR_OK;
}

void out_guard_free(out_guard *g)
{
	for (size_t i = 0; i < g->count; i++)
		free(g->inputs[i].path);
	free(g->inputs);
	memset(g, 0, sizeof *g);
}

mr_status out_check_inputs(const char *output, const char *const *inputs, size_t n, mr_error *err)
{
	out_guard g = {0};
	mr_status st = MR_OK;
	for (size_t i = 0; i < n && !st; i++)
		st = out_guard_add(&g, inputs[i], err);
	if (!st)
		st = out_guard_check(&g, output, err);
	out_guard_free(&g);
	return st;
}
