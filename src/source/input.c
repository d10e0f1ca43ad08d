/* input.c: mapping and reading inputs. */
#include "source/input.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "base/mem.h"
#include "base/pool.h"

/* ---- the SIGBUS guard ------------------------------------------------------------------- */

/* The mappings of inputs in use, for the handler: a slot is free when base is 0, being filled
 * when it is 1. Plain atomics, no locks: the handler may run on any thread at any time. */
enum { GUARD_SLOTS = 1024 };
static struct {
	_Atomic uintptr_t base;
	_Atomic size_t len;
	atomic_int hit; /* a read past the end was caught: the file shrank */
} guards[GUARD_SLOTS];
static uintptr_t page_size = 4096;
static int guard_installed; /* the handler is in place (set once, before any slot is used) */
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;

/* A read in an input's mapping past the end of its file: zero pages from the faulting page to
 * the end of the mapping (one mmap, a system call that takes no lock), so the reader goes on
 * and sees zeros, and the slot remembers it. Any other SIGBUS gets the default action back and
 * is raised again by the same instruction. */
static void on_sigbus(int sig, siginfo_t *si, void *context)
{
	(void)context;
	uintptr_t addr = (uintptr_t)si->si_addr;
	for (size_t i = 0; i < GUARD_SLOTS; i++) {
		uintptr_t base = atomic_load(&guards[i].base);
		size_t len = atomic_load(&guards[i].len);
		if (base <= 1 || addr < base || addr - base >= len)
			continue;
		uintptr_t page = addr & ~(page_size - 1);
		if (mmap((void *)page, base + len - page, PROT_READ,
		         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
			atomic_store(&guards[i].hit, 1);
			return;
		}
		break;
	}
	signal(sig, SIG_DFL);
}

static void install_guard(void)
{
	long page = sysconf(_SC_PAGESIZE);
	if (page > 0)
		page_size = (uintptr_t)page;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	guard_installed = sigaction(SIGBUS, &sa, NULL) == 0;
}

/* A slot for the mapping, or -1 when none is free (the caller then reads the file instead). */
static int guard_add(void *map, size_t len)
{
	pthread_once(&guard_once, install_guard);
	if (!guard_installed)
		return -1;
	for (int i = 0; i < GUARD_SLOTS; i++) {
		uintptr_t free_slot = 0;
		if (!atomic_compare_exchange_strong(&guards[i].base, &free_slot, 1))
			continue;
		atomic_store(&guards[i].len, len);
		atomic_store(&guards[i].hit, 0);
		atomic_store(&guards[i].base, (uintptr_t)map);
		return i;
	}
	return -1;
}

static void guard_remove(int slot)
{
	atomic_store(&guards[slot].base, 0);
}

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

/* Opens and reads path. With regular_only the last component is not followed when it is a
 * link, a FIFO does not block the open, and anything but a regular file of at most max_bytes
 * is refused. */
static mr_status read_path(const char *path, int regular_only, uint64_t max_bytes, in_data *out,
                           mr_error *err)
{
	int flags = O_RDONLY | O_CLOEXEC | (regular_only ? O_NOFOLLOW | O_NONBLOCK : 0);
	int fd = open(path, flags);
	if (fd < 0)
		return mr_fail(err, MR_EINPUT, "cannot open: %s", strerror(errno));
	struct stat st;
	mr_status rc = MR_OK;
	if (fstat(fd, &st) != 0) {
		rc = mr_fail(err, MR_EFAIL, "cannot stat: %s", strerror(errno));
	} else if (regular_only && !S_ISREG(st.st_mode)) {
		rc = mr_fail(err, MR_EINPUT, "not a regular file");
	} else if (regular_only && (uint64_t)st.st_size > max_bytes) {
		rc = mr_fail(err, MR_EINPUT, "%lld bytes, over the limit of %llu",
		             (long long)st.st_size, (unsigned long long)max_bytes);
	} else if (S_ISDIR(st.st_mode)) {
		rc = mr_fail(err, MR_EINPUT,
		             "is a folder, not a file (use `memreport batch` for folders)");
	} else if (S_ISREG(st.st_mode) && st.st_size > 0) {
		size_t len = (size_t)st.st_size;
		void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
		int slot = map == MAP_FAILED ? -1 : guard_add(map, len);
		if (slot < 0) {
			if (map != MAP_FAILED)
				munmap(map, len);
			rc = read_all(fd, out, err);
		} else {
			madvise(map, len, MADV_SEQUENTIAL);
			out->map = map;
			out->map_len = len;
			out->fd = fd;
			out->guard = slot;
			out->data = map;
			out->len = len;
			const char *stop = getenv("MEMREPORT_TEST_STOP_AT_MAP");
			if (stop && strcmp(stop, path) == 0)
				raise(SIGSTOP);
			return MR_OK; /* the file stays open until in_release */
		}
	} else {
		rc = read_all(fd, out, err);
	}
	close(fd);
	return rc;
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
	return read_path(path, 0, 0, out, err);
}

mr_status in_read_regular(const char *path, uint64_t max_bytes, in_data *out, mr_error *err)
{
	memset(out, 0, sizeof *out);
	return read_path(path, 1, max_bytes, out, err);
}

mr_status in_check(const in_data *in, mr_error *err)
{
	if (!in->map)
		return MR_OK;
	struct stat st;
	long long now = fstat(in->fd, &st) == 0 ? (long long)st.st_size : -1;
	if (now >= 0 && (uint64_t)now >= (uint64_t)in->map_len &&
	    !atomic_load(&guards[in->guard].hit))
		return MR_OK;
	return mr_fail(err, MR_EINPUT,
	               "file changed while being read: it had %zu bytes and now has %lld "
	               "(truncated meanwhile, as by logrotate's copytruncate?)",
	               in->map_len, now);
}

/* ---- reading ahead ------------------------------------------------------------------- */

enum { AHEAD_MIN = 32 << 20, AHEAD_WINDOW = 16 << 20, AHEAD_STEP = 2 << 20 };

struct in_ahead {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t moved;
	const uint8_t *base;
	size_t len;
	size_t reader; /* where in_drop_before last said the reader was */
	int stop;
};

/* Maps the window after the reader, a step at a time, and waits while it is mapped. Any error
 * (a kernel before 5.14, a file that shrank: the SIGBUS guard's case) ends it: the reader then
 * takes its faults as it would without. */
static void *ahead_run(void *arg)
{
	struct in_ahead *a = arg;
	size_t done = 0;
	pthread_mutex_lock(&a->lock);
	while (!a->stop) {
		size_t from = MR_MAX(done, a->reader);
		size_t want = a->len - MR_MIN(a->reader, a->len) > AHEAD_WINDOW
		                  ? a->reader + AHEAD_WINDOW
		                  : a->len;
		if (from >= want) {
			pthread_cond_wait(&a->moved, &a->lock);
			continue;
		}
		size_t at = from / page_size * page_size; /* a start must be on a page */
		size_t n = MR_MIN(want - at, (size_t)AHEAD_STEP);
		pthread_mutex_unlock(&a->lock);
		int failed = 1;
#ifdef MADV_POPULATE_READ
		failed = madvise((void *)(a->base + at), n, MADV_POPULATE_READ) != 0;
#endif
		pthread_mutex_lock(&a->lock);
		if (failed)
			break;
		done = at + n;
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

void in_read_ahead(in_data *in)
{
	if (!in->map || in->ahead || in->map_len < AHEAD_MIN || mr_pool_max_threads() == 1)
		return;
	struct in_ahead *a = calloc(1, sizeof *a);
	if (!a)
		return;
	a->base = in->map;
	a->len = in->map_len;
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->moved, NULL);
	if (pthread_create(&a->thread, NULL, ahead_run, a) != 0) {
		pthread_cond_destroy(&a->moved);
		pthread_mutex_destroy(&a->lock);
		free(a);
		return;
	}
	in->ahead = a;
}

void in_read_ahead_stop(in_data *in)
{
	struct in_ahead *a = in->ahead;
	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	a->stop = 1;
	pthread_cond_signal(&a->moved);
	pthread_mutex_unlock(&a->lock);
	pthread_join(a->thread, NULL);
	pthread_cond_destroy(&a->moved);
	pthread_mutex_destroy(&a->lock);
	free(a);
	in->ahead = NULL;
}

void in_drop_before(in_data *in, size_t upto)
{
	if (!in->map)
		return;
	if (in->ahead) {
		pthread_mutex_lock(&in->ahead->lock);
		in->ahead->reader = upto;
		pthread_cond_signal(&in->ahead->moved);
		pthread_mutex_unlock(&in->ahead->lock);
	}
	long page = sysconf(_SC_PAGESIZE);
	size_t p = page > 0 ? (size_t)page : 4096;
	size_t len = upto / p * p;
	if (len)
		madvise(in->map, len, MADV_DONTNEED);
}

void in_release(in_data *in)
{
	in_read_ahead_stop(in);
	if (in->map) {
		guard_remove(in->guard);
		munmap(in->map, in->map_len);
		close(in->fd);
	}
	free(in->heap);
	memset(in, 0, sizeof *in);
}
