/* input.h: bytes of one input (a file, standard input), mapped or read.
 *
 * Regular files are mapped read-only; pipes and standard input are read into memory. A mapped
 * file that shrinks while it is read (logrotate's copytruncate) would raise SIGBUS at the first
 * page past its new end; a process-wide SIGBUS handler (installed at the first mapping) puts
 * zero pages over the rest of that mapping instead, and in_check then reports "file changed
 * while being read". A SIGBUS outside an input's mapping is left to kill the process, as before.
 * docs/benchmarks.md has the measurement that chose this over reading files into memory.
 *
 * Test hook: with MEMREPORT_TEST_STOP_AT_MAP=PATH in the environment, in_read stops the process
 * (SIGSTOP) right after it maps PATH, before a byte is read, so that a test can truncate the file
 * and continue it (SIGCONT) deterministically (tests/hostile.sh).
 *
 * A mapped input read from start to end (a snapshot being decoded) can have a thread read it
 * ahead of its reader: in_read_ahead. Each page fault of a mapped file maps 64 KiB; the 88 MB
 * snapshot takes 1.3 k of them, the 4 GB one 62 k, each a few microseconds on some virtual
 * machines. The thread maps the next 16 MiB before the reader comes to them
 * (MADV_POPULATE_READ, which also starts the reads of a file not in the page cache), on the
 * core the decoder leaves idle; in_drop_before tells it where the reader is.
 *
 * Ownership: in_read fills an in_data that in_release frees (unmaps, closes, and stops the
 * thread that reads ahead, if one still runs). */
#ifndef MR_INPUT_H
#define MR_INPUT_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef struct {
	const uint8_t *data;
	size_t len;
	void *map; /* mmap base, or NULL; the fields below are valid only with a map */
	size_t map_len;
	int fd;                 /* the mapped file, kept open to see whether it shrank */
	int guard;              /* its slot in the SIGBUS guard */
	uint8_t *heap;          /* malloc'd copy, or NULL */
	struct in_ahead *ahead; /* the thread reading the map ahead, or NULL */
} in_data;

/* Reads `path` ("-" is standard input). Errors name no path: the caller adds it. */
mr_status in_read(const char *path, in_data *out, mr_error *err);
/* The same for a file memreport keeps itself (a cache entry), where a stranger may have put
 * something else: a link is not followed, a FIFO or device is refused without blocking, and so
 * is a file over max_bytes (MR_EINPUT). */
mr_status in_read_regular(const char *path, uint64_t max_bytes, in_data *out, mr_error *err);
/* After the bytes were used: MR_EINPUT "file changed while being read ..." when a mapped file
 * shrank (or a read past its new end was caught), MR_OK otherwise. */
mr_status in_check(const in_data *in, mr_error *err);
/* Takes ownership of a malloc'd buffer (e.g. a decompressed zip member). */
void in_adopt(in_data *out, uint8_t *heap, size_t len);
/* Tells the kernel the mapped bytes before `upto` will not be read again, and the thread that
 * reads ahead that the reader is past them. */
void in_drop_before(in_data *in, size_t upto);
/* Starts the thread that reads a mapped input ahead of its reader; nothing for an input that
 * is not mapped, under 32 MiB, or when the thread cap (MEMREPORT_THREADS=1) leaves no thread,
 * or none starts. in_read_ahead_stop ends it (nothing when none runs). */
void in_read_ahead(in_data *in);
void in_read_ahead_stop(in_data *in);
void in_release(in_data *in);

#endif
