/* test_source.c: the source stage where inputs are opened: gzip and xz inflated within the
 * limits of zip members (source/compressed.h), and the reads of files memreport does not trust
 * (in_read_regular, for cache entries). The compressed bytes are made here with zlib and
 * liblzma, so every size is known. */
#include <fcntl.h>
#include <lzma.h>
#include <unistd.h>
#include <zlib.h>

#include "testutil.h"

#include "base/pool.h"
#include "base/units.h"
#include "decode/sniff.h"
#include "source/compressed.h"
#include "source/input.h"
#include "source/limits.h"

/* n bytes of a repeating but not trivial text. Caller frees. */
static uint8_t *make_text(size_t n)
{
	uint8_t *p = malloc(n ? n : 1);
	assert_non_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] =
		    (uint8_t)((size_t)(unsigned char)"allocated reserved segment block "[i % 33] +
		              (i / 4096) % 3);
	return p;
}

/* A gzip member of data[0..n) appended to *out (grown). */
static void gzip_append(const uint8_t *data, size_t n, uint8_t **out, size_t *out_len)
{
	z_stream z;
	memset(&z, 0, sizeof z);
	assert_int_equal(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY), Z_OK);
	size_t bound = deflateBound(&z, (uLong)n) + 64;
	*out = realloc(*out, *out_len + bound);
	assert_non_null(*out);
	z.next_in = (Bytef *)(uintptr_t)data;
	z.avail_in = (uInt)n;
	z.next_out = *out + *out_len;
	z.avail_out = (uInt)bound;
	assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
	*out_len += bound - z.avail_out;
	deflateEnd(&z);
}

static uint8_t *xz_of(const uint8_t *data, size_t n, size_t *out_len)
{
	size_t cap = lzma_stream_buffer_bound(n);
	uint8_t *out = malloc(cap);
	assert_non_null(out);
	*out_len = 0;
	assert_int_equal(
	    lzma_easy_buffer_encode(6, LZMA_CHECK_CRC64, NULL, data, n, out, out_len, cap),
	    LZMA_OK);
	return out;
}

static void test_round_trips(void **state)
{
	(void)state;
	sr_limits lim;
	sr_default_limits(&lim);
	size_t n = 300000, gz_len = 0, xz_len = 0;
	uint8_t *text = make_text(n), *gz = NULL;
	/* two gzip members: read as one, as gzip -d does */
	gzip_append(text, n / 3, &gz, &gz_len);
	gzip_append(text + n / 3, n - n / 3, &gz, &gz_len);
	assert_int_equal(dc_sniff(gz, gz_len), DC_GZIP);
	in_data out;
	mr_error err = {0};
	assert_int_equal(sr_inflate(SR_GZIP, gz, gz_len, &lim, &out, &err), MR_OK);
	assert_int_equal(out.len, n);
	assert_memory_equal(out.data, text, n);
	in_release(&out);
	uint8_t *xz = xz_of(text, n, &xz_len);
	assert_int_equal(dc_sniff(xz, xz_len), DC_XZ);
	assert_int_equal(sr_inflate(SR_XZ, xz, xz_len, &lim, &out, &err), MR_OK);
	assert_int_equal(out.len, n);
	assert_memory_equal(out.data, text, n);
	in_release(&out);
	/* the head of a cut file, for sniffing */
	uint8_t head[100];
	assert_int_equal(sr_inflate_head(SR_GZIP, gz, 200, head, sizeof head), 100);
	assert_memory_equal(head, text, 100);
	assert_int_equal(sr_inflate_head(SR_XZ, xz, xz_len, head, sizeof head), 100);
	assert_memory_equal(head, text, 100);
	free(text);
	free(gz);
	free(xz);
}

/* mr_fail keeps the first message: a fresh error for each call. */
static mr_status inflate_msg(sr_codec c, const uint8_t *p, size_t n, const sr_limits *lim,
                             char *msg, size_t msgsz)
{
	in_data out;
	mr_error err = {0};
	mr_status st = sr_inflate(c, p, n, lim, &out, &err);
	if (!st)
		in_release(&out);
	snprintf(msg, msgsz, "%s", err.msg);
	return st;
}

static void test_hostile(void **state)
{
	(void)state;
	sr_limits lim;
	sr_default_limits(&lim);
	char msg[512];
	size_t n = 4 << 20, gz_len = 0, xz_len = 0;
	uint8_t *zeros = calloc(1, n), *gz = NULL;
	assert_non_null(zeros);
	gzip_append(zeros, n, &gz, &gz_len);
	uint8_t *xz = xz_of(zeros, n, &xz_len);
	/* 4 MiB of zeros: gzip about 1000 times, xz far more; the same ratio limit as zip */
	lim.max_ratio = 100;
	assert_int_equal(inflate_msg(SR_GZIP, gz, gz_len, &lim, msg, sizeof msg), MR_EINPUT);
	assert_non_null(strstr(msg, "compression bomb"));
	assert_int_equal(inflate_msg(SR_XZ, xz, xz_len, &lim, msg, sizeof msg), MR_EINPUT);
	assert_non_null(strstr(msg, "compression bomb"));
	sr_default_limits(&lim);
	lim.max_member_bytes = 1 << 20;
	assert_int_equal(inflate_msg(SR_GZIP, gz, gz_len, &lim, msg, sizeof msg), MR_EINPUT);
	assert_non_null(strstr(msg, "more than 1048576 bytes, over the limit"));
	sr_default_limits(&lim);
	/* cut short at every kind of place, corrupt, trailing garbage (in a text, not a bomb) */
	free(gz);
	free(xz);
	free(zeros);
	zeros = make_text(n);
	gz = NULL;
	gz_len = 0;
	gzip_append(zeros, n, &gz, &gz_len);
	xz = xz_of(zeros, n, &xz_len);
	for (size_t cut = 1; cut < gz_len; cut += gz_len / 7 + 1) {
		assert_int_equal(inflate_msg(SR_GZIP, gz, cut, &lim, msg, sizeof msg), MR_EINPUT);
		assert_non_null(strstr(msg, "gzip data"));
		assert_null(strstr(msg, "bomb"));
	}
	for (size_t cut = 1; cut < xz_len; cut += xz_len / 7 + 1)
		assert_int_equal(inflate_msg(SR_XZ, xz, cut, &lim, msg, sizeof msg), MR_EINPUT);
	uint8_t *bad = malloc(gz_len + 3);
	assert_non_null(bad);
	memcpy(bad, gz, gz_len);
	memcpy(bad + gz_len, "abc", 3);
	assert_int_equal(inflate_msg(SR_GZIP, bad, gz_len + 3, &lim, msg, sizeof msg), MR_EINPUT);
	assert_string_equal(msg, "gzip data: trailing bytes after the gzip data");
	bad[12] ^= 0xff;
	assert_int_equal(inflate_msg(SR_GZIP, bad, gz_len, &lim, msg, sizeof msg), MR_EINPUT);
	xz[xz_len / 2] ^= 0xff;
	assert_int_equal(inflate_msg(SR_XZ, xz, xz_len, &lim, msg, sizeof msg), MR_EINPUT);
	free(bad);
	free(zeros);
	free(gz);
	free(xz);
}

/* Cache entries: a link, a FIFO or a file over the cap is refused, without blocking. */
static void test_read_regular(void **state)
{
	(void)state;
	char dir[] = "/tmp/memreport_test_source_XXXXXX";
	assert_non_null(mkdtemp(dir));
	char file[128], link[128], fifo[128];
	snprintf(file, sizeof file, "%s/file", dir);
	snprintf(link, sizeof link, "%s/link", dir);
	snprintf(fifo, sizeof fifo, "%s/fifo", dir);
	FILE *f = fopen(file, "wb");
	assert_non_null(f);
	fputs("0123456789", f);
	fclose(f);
	assert_int_equal(symlink("file", link), 0);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	in_data in;
	mr_error err = {0};
	assert_int_equal(in_read_regular(file, 10, &in, &err), MR_OK);
	assert_int_equal(in.len, 10);
	assert_int_equal(in_check(&in, &err), MR_OK);
	in_release(&in);
	assert_int_equal(in_read_regular(file, 9, &in, &err), MR_EINPUT);
	assert_int_equal(in_read_regular(link, 100, &in, &err), MR_EINPUT);
	assert_int_equal(in_read_regular(fifo, 100, &in, &err), MR_EINPUT); /* does not block */
	assert_int_equal(in_read_regular("/dev/zero", 100, &in, &err), MR_EINPUT);
	/* a plain read follows the link */
	assert_int_equal(in_read(link, &in, &err), MR_OK);
	assert_int_equal(in.len, 10);
	/* and sees the file shrink */
	assert_int_equal(truncate(file, 4), 0);
	mr_error changed = {0};
	assert_int_equal(in_check(&in, &changed), MR_EINPUT);
	assert_non_null(strstr(changed.msg, "file changed while being read: it had 10 bytes"));
	in_release(&in);
	unlink(file);
	unlink(link);
	unlink(fifo);
	rmdir(dir);
}

/* The resident kilobytes of the mapping that starts at base (/proc/self/smaps), -1 if none. */
static long mapping_rss_kb(const void *base)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	long rss = -1;
	int in_it = 0;
	assert_non_null(f);
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
		    strchr(line, ' ') == line + strcspn(line, " "))
			in_it = lo == (unsigned long)(uintptr_t)base;
		else if (in_it && sscanf(line, "Rss: %ld kB", &rss) == 1)
			break;
	}
	fclose(f);
	return rss;
}

/* Waits up to 5 s for the mapping's resident size to reach at least kb. */
static long wait_rss_kb(const void *base, long kb)
{
	long rss = mapping_rss_kb(base);
	for (int i = 0; i < 500 && rss < kb; i++) {
		usleep(10000);
		rss = mapping_rss_kb(base);
	}
	return rss;
}

/* The thread that reads a mapped input ahead maps the 16 MiB after the reader and follows it;
 * with the thread cap at 1 there is none; a file that shrank ends it, and stopping it does not
 * hang. */
static void test_read_ahead(void **state)
{
	(void)state;
	char dir[] = "/tmp/memreport_test_source_XXXXXX";
	assert_non_null(mkdtemp(dir));
	char file[128];
	snprintf(file, sizeof file, "%s/big", dir);
	enum { MiB = 1 << 20, LEN = 48 * MiB };
	uint8_t *text = make_text(LEN);
	FILE *f = fopen(file, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, LEN, f), LEN);
	fclose(f);
	in_data in;
	mr_error err = {0};
	assert_int_equal(in_read(file, &in, &err), MR_OK);
	assert_non_null(in.map);
	assert_int_equal(mapping_rss_kb(in.map), 0);
	in_read_ahead(&in);
	assert_non_null(in.ahead);
	assert_true(wait_rss_kb(in.map, 16 * 1024) >= 16 * 1024);
	usleep(50000);
	assert_true(mapping_rss_kb(in.map) <= 17 * 1024); /* not past its window */
	in_drop_before(&in, 24 * MiB);
	assert_true(wait_rss_kb(in.map, 16 * 1024) >= 16 * 1024);
	assert_memory_equal(in.data + 24 * MiB, text + 24 * MiB, 16 * MiB);
	in_read_ahead_stop(&in);
	assert_null(in.ahead);
	in_release(&in);
	/* no thread under MEMREPORT_THREADS=1 */
	mr_pool_set_max_threads(1);
	assert_int_equal(in_read(file, &in, &err), MR_OK);
	in_read_ahead(&in);
	assert_null(in.ahead);
	in_release(&in);
	mr_pool_set_max_threads(0);
	/* a file that shrinks under the thread: it stops, and nothing else happens */
	assert_int_equal(in_read(file, &in, &err), MR_OK);
	assert_int_equal(truncate(file, 4 * MiB), 0);
	in_read_ahead(&in);
	usleep(100000);
	in_release(&in); /* stops the thread */
	unlink(file);
	rmdir(dir);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trips),
	    cmocka_unit_test(test_hostile),
	    cmocka_unit_test(test_read_regular),
	    cmocka_unit_test(test_read_ahead),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
