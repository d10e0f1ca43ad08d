/* output.c: atomic report writing. */
#include "base/output.h"

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

mr_status out_write(const char *path, const char *data, size_t len, mr_error *err)
{
	if (strcmp(path, "-") == 0) {
		mr_status st = write_fd(STDOUT_FILENO, data, len, err);
		return st;
	}
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
	if (!st && fchmod(fd, 0644) != 0)
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

char *out_default_path(const char *input, const char *ext)
{
	mr_buf b = {0};
	if (strcmp(input, "-") == 0) {
		mr_buf_printf(&b, "memreport.%s", ext);
		return b.failed ? (mr_buf_free(&b), NULL) : b.data;
	}
	const char *slash = strrchr(input, '/');
	char *dir = slash ? mr_strndup(input, (size_t)(slash - input + (slash == input))) : NULL;
	int writable = access(dir ? dir : ".", W_OK) == 0;
	free(dir);
	if (writable)
		mr_buf_printf(&b, "%s.%s", input, ext);
	else
		mr_buf_printf(&b, "%s.%s", slash ? slash + 1 : input, ext);
	if (b.failed) {
		mr_buf_free(&b);
		return NULL;
	}
	return b.data;
}
