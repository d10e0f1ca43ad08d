/* input.c: mapping and reading inputs. */
#include "source/input.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"

/* Seconds without a byte on a pipe before standard input counts as stalled. */
static int stall_seconds(void)
{
	const char *e = getenv("MEMREPORT_STDIN_TIMEOUT");
	int v = e ? atoi(e) : 0;
	return v > 0 ? v : 300;
}

static mr_status read_all(int fd, in_data *out, mr_error *err)
{
	size_t cap = 1 << 16, len = 0;
	struct stat st;
	int is_pipe = fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
	int timeout_ms = stall_seconds() * 1000;
	uint8_t *buf = malloc(cap);
	if (!buf)
		return mr_oom(err);
	for (;;) {
		if (len == cap) {
			if (cap > SIZE_MAX / 2) {
				free(buf);
				return mr_oom(err);
			}
			uint8_t *nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				return mr_fail(err, MR_EFAIL,
				               "out of memory after reading %zu bytes", len);
			}
			buf = nb;
			cap *= 2;
		}
		if (is_pipe) {
			struct pollfd p = {.fd = fd, .events = POLLIN};
			int r = poll(&p, 1, timeout_ms);
			if (r == 0) {
				free(buf);
				return mr_fail(err, MR_EINPUT,
				               "no data for %d s after %zu bytes: the pipe stalled "
				               "(MEMREPORT_STDIN_TIMEOUT sets the limit)",
				               timeout_ms / 1000, len);
			}
			if (r < 0 && errno != EINTR) {
				int e = errno;
				free(buf);
				return mr_fail(err, MR_EFAIL, "poll failed: %s", strerror(e));
			}
			if (r < 0)
				continue;
		}
		ssize_t got = read(fd, buf + len, cap - len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			int e = errno;
			free(buf);
			return mr_fail(err, MR_EFAIL, "read failed: %s", strerror(e));
		}
		if (got == 0)
			break;
		len += (size_t)got;
	}
	in_adopt(out, buf, len);
	return MR_OK;
}

void in_adopt(in_data *out, uint8_t *heap, size_t len)
{
	memset(out, 0, sizeof *out);
	out->heap = heap;
	out->data = heap;
	out->len = len;
}

mr_status in_read(const char *path, in_data *out, mr_error *err)
{
	memset(out, 0, sizeof *out);
	if (strcmp(path, "-") == 0) {
		if (isatty(STDIN_FILENO))
			fprintf(stderr, "memreport: reading standard input (a snapshot, log or "
			                "memory_stats() dump); end it with Ctrl-D\n");
		return read_all(STDIN_FILENO, out, err);
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return mr_fail(err, MR_EINPUT, "cannot open: %s", strerror(errno));
	struct stat st;
	mr_status rc = MR_OK;
	if (fstat(fd, &st) != 0) {
		rc = mr_fail(err, MR_EFAIL, "cannot stat: %s", strerror(errno));
	} else if (S_ISDIR(st.st_mode)) {
		rc = mr_fail(err, MR_EINPUT,
		             "is a folder, not a file (use `memreport batch` for folders)");
	} else if (S_ISREG(st.st_mode) && st.st_size > 0) {
		size_t len = (size_t)st.st_size;
		void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map == MAP_FAILED) {
			rc = read_all(fd, out, err);
		} else {
			madvise(map, len, MADV_SEQUENTIAL);
			out->map = map;
			out->map_len = len;
			out->data = map;
			out->len = len;
		}
	} else {
		rc = read_all(fd, out, err);
	}
	close(fd);
	return rc;
}

void in_drop_before(in_data *in, size_t upto)
{
	if (!in->map)
		return;
	long page = sysconf(_SC_PAGESIZE);
	size_t p = page > 0 ? (size_t)page : 4096;
	size_t len = upto / p * p;
	if (len)
		madvise(in->map, len, MADV_DONTNEED);
}

void in_release(in_data *in)
{
	if (in->map)
		munmap(in->map, in->map_len);
	free(in->heap);
	memset(in, 0, sizeof *in);
}
