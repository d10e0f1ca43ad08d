/* fuzz_zip.c: batch input discovery and reading on an arbitrary zip archive: the central
 * directory, member names (absolute, "..", odd bytes), sizes, compression ratios, and every run
 * found loaded through ld_load_buffers and the pipeline. The archive is handed over as an in-memory
 * file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/error.h"
#include "load/discover.h"
#include "report/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_zip: check failed: %s (line %d)\n", #cond,           \
			        __LINE__);                                                         \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	if (fd < 0)
		fd = memfd_create("fuzz_zip_input", 0);
	CHECK(fd >= 0);
	CHECK(ftruncate(fd, 0) == 0);
	CHECK(pwrite(fd, data, size, 0) == (ssize_t)size);
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);

	sr_limits lim;
	sr_default_limits(&lim);
	/* small caps so the fuzzer explores the limits instead of inflating gigabytes */
	lim.max_member_bytes = 1 << 20;
	lim.max_total_bytes = 4 << 20;
	lim.max_members = 256;
	const char *inputs[] = {path};
	ar_set set;
	mr_error err = {0};
	if (ar_discover(inputs, 1, &lim, &set, &err) != MR_OK) {
		CHECK(err.status == MR_EFAIL);
		return 0;
	}
	sr_reader *rd = sr_reader_new();
	CHECK(rd != NULL);
	for (size_t i = 0; i < set.count; i++) {
		const ar_run *run = &set.runs[i];
		CHECK(run->slug && run->slug[0] && strcmp(run->slug, "index") != 0);
		for (const char *p = run->slug; *p; p++)
			CHECK((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			      (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-');
		if (run->error)
			continue;
		ld_evidence ev;
		rp_report loaded;
		mr_error lerr = {0};
		if (ar_load(rd, run, &lim, &ev, &lerr) == MR_OK &&
		    rp_build(&loaded, &ev, &(rp_params){-1, 0}, &lerr) == MR_OK)
			rp_free(&loaded);
		else
			CHECK(lerr.msg[0] != '\0' && strchr(lerr.msg, '\n') == NULL);
	}
	sr_reader_free(rd);
	ar_set_free(&set);
	return 0;
}
