/* fuzz_pipeline.c: the whole pipeline on arbitrary bytes, as the command line runs it:
 * input detection and loading (ld_load: snapshot, text evidence, ...), the pipeline (rp_build:
 * analysis, replays, advice), and every renderer (html, json, md, text), with and without
 * --redact-paths and --device.
 *
 * ld_load reads paths, so the bytes go into an in-memory file (memfd) opened through
 * /proc/self/fd. A loaded run must render in every format; the JSON must parse and every
 * report must be valid UTF-8 whatever the snapshot held. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/error.h"
#include "load/load.h"
#include "render/render_html.h"
#include "render/render_json.h"
#include "render/render_md.h"
#include "render/render_text.h"
#include "report/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_pipeline: check failed: %s (line %d)\n", #cond,      \
			        __LINE__);                                                         \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* ---- a strict JSON checker for the renderer's output (its depth is the renderer's, not the
 * input's, but it is bounded anyway) ---- */

typedef struct {
	const char *p, *end;
	int depth;
} js;

static void js_ws(js *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\t' || *j->p == '\r'))
		j->p++;
}

static int js_lit(js *j, const char *lit)
{
	size_t n = strlen(lit);
	if ((size_t)(j->end - j->p) < n || memcmp(j->p, lit, n) != 0)
		return 0;
	j->p += n;
	return 1;
}

static int js_string(js *j)
{
	if (j->p >= j->end || *j->p != '"')
		return 0;
	j->p++;
	while (j->p < j->end && *j->p != '"') {
		unsigned char c = (unsigned char)*j->p;
		if (c < 0x20)
			return 0;
		if (c == '\\') {
			j->p++;
			if (j->p >= j->end)
				return 0;
			if (*j->p == 'u') {
				for (int i = 1; i <= 4; i++)
					if (j->p + i >= j->end ||
					    !strchr("0123456789abcdefABCDEF", j->p[i]) || !j->p[i])
						return 0;
				j->p += 4;
			} else if (!strchr("\"\\/bfnrt", *j->p) || !*j->p) {
				return 0;
			}
		}
		j->p++;
	}
	if (j->p >= j->end)
		return 0;
	j->p++;
	return 1;
}

static int js_number(js *j)
{
	const char *s = j->p;
	if (j->p < j->end && *j->p == '-')
		j->p++;
	int digits = 0;
	while (j->p < j->end && ((*j->p >= '0' && *j->p <= '9') || *j->p == '.' || *j->p == 'e' ||
	                         *j->p == 'E' || *j->p == '+' || *j->p == '-')) {
		digits += *j->p >= '0' && *j->p <= '9';
		j->p++;
	}
	return j->p > s && digits > 0;
}

static int js_value(js *j)
{
	js_ws(j);
	if (j->p >= j->end || ++j->depth > 64)
		return 0;
	int ok = 1;
	char c = *j->p;
	if (c == '{' || c == '[') {
		char close = c == '{' ? '}' : ']';
		j->p++;
		js_ws(j);
		if (j->p < j->end && *j->p == close) {
			j->p++;
		} else {
			for (;;) {
				if (c == '{') {
					js_ws(j);
					if (!js_string(j))
						return 0;
					js_ws(j);
					if (!js_lit(j, ":"))
						return 0;
				}
				if (!js_value(j))
					return 0;
				js_ws(j);
				if (js_lit(j, ","))
					continue;
				if (j->p < j->end && *j->p == close) {
					j->p++;
					break;
				}
				return 0;
			}
		}
	} else if (c == '"') {
		ok = js_string(j);
	} else if (c == 't' || c == 'f' || c == 'n') {
		ok = js_lit(j, "true") || js_lit(j, "false") || js_lit(j, "null");
	} else {
		ok = js_number(j);
	}
	j->depth--;
	return ok;
}

static int json_valid(const char *s, size_t n)
{
	js j = {s, s + n, 0};
	if (!js_value(&j))
		return 0;
	js_ws(&j);
	return j.p == j.end;
}

static int utf8_valid(const unsigned char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		unsigned c = s[i];
		size_t len;
		unsigned cp, min;
		if (c < 0x80) {
			i++;
			continue;
		} else if (c >= 0xC2 && c <= 0xDF) {
			len = 2, min = 0x80;
		} else if (c >= 0xE0 && c <= 0xEF) {
			len = 3, min = 0x800;
		} else if (c >= 0xF0 && c <= 0xF4) {
			len = 4, min = 0x10000;
		} else {
			return 0;
		}
		if (len > n - i)
			return 0;
		cp = c & (0x7Fu >> len);
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				return 0;
			cp = (cp << 6) | (s[i + k] & 0x3F);
		}
		if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return 0;
		i += len;
	}
	return 1;
}

/* ---- the input file ---- */

static int input_fd = -1;
static char input_path[64];

static int put_input(const uint8_t *data, size_t size)
{
	if (input_fd < 0) {
		input_fd = memfd_create("fuzz_pipeline_input", 0);
		if (input_fd < 0)
			return -1;
		snprintf(input_path, sizeof input_path, "/proc/self/fd/%d", input_fd);
	}
	if (ftruncate(input_fd, 0) != 0)
		return -1;
	size_t done = 0;
	while (done < size) {
		ssize_t n = pwrite(input_fd, data + done, size - done, (off_t)done);
		if (n <= 0)
			return -1;
		done += (size_t)n;
	}
	return 0;
}

typedef mr_status (*renderer)(const rp_report *, const rd_options *, mr_buf *, mr_error *);

static void render(const rp_report *run, renderer fn, const rd_options *opt, int is_json)
{
	mr_buf out = {0};
	mr_error err = {0};
	mr_status st = fn(run, opt, &out, &err);
	/* A loaded run always renders; only memory can run out. */
	CHECK(st == MR_OK || (st == MR_EFAIL && err.msg[0]));
	if (st == MR_OK) {
		CHECK(!out.failed);
		CHECK(utf8_valid((const unsigned char *)out.data, out.len));
		if (is_json)
			CHECK(json_valid(out.data, out.len));
	}
	mr_buf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (put_input(data, size))
		return 0;
	const char *paths[1] = {input_path};
	rd_options opt = {.device = -1, .redact_paths = 0};
	ld_evidence ev;
	rp_report run;
	mr_error err = {0};
	mr_status st = ld_load(&ev, paths, 1, NULL, NULL, &err);
	if (st != MR_OK) {
		CHECK(st == MR_EINPUT || st == MR_EFAIL);
		CHECK(err.status == st && err.msg[0] && !strchr(err.msg, '\n'));
		CHECK(strstr(err.msg, input_path) != NULL); /* the message names the input */
		return 0;
	}
	st = rp_build(&run, &ev, &(rp_params){-1, 0}, &err);
	if (st != MR_OK) {
		CHECK(st == MR_EFAIL && err.msg[0]); /* only memory can run out */
		return 0;
	}
	render(&run, rd_render_html, &opt, 0);
	render(&run, rd_render_json, &opt, 1);
	render(&run, rd_render_md, &opt, 0);
	render(&run, rd_render_text, &opt, 0);
	rd_options other = {.device = 0, .redact_paths = 1};
	render(&run, rd_render_html, &other, 0);
	render(&run, rd_render_json, &other, 1);
	render(&run, rd_render_md, &other, 0);
	render(&run, rd_render_text, &other, 0);
	rp_free(&run);
	return 0;
}
