/* test_html.c: the HTML and Markdown reports, on real snapshots and on a hostile one.
 *
 * For the corpus samples of issue 9: a PNG map that decodes to a PNG, an inline SVG timeline
 * when there is a trace, nothing that a browser would fetch, identical bytes from two loads,
 * at most 3 MB; the Markdown summary at most 60 lines. tests/fixtures/html/hostile_snapshot.pickle
 * (tests/fixtures/gen_hostile_snapshot.py) puts script tags and attribute breakers in every
 * string a snapshot author controls: no report may contain them live. With --redact-paths no
 * report names a home folder or the recording machine's workspace. */
#include <inttypes.h>
#include <sys/stat.h>

#include "testutil.h"

#include "base/base64.h"
#include "base/escape.h"
#include "base/sha256.h"
#include "render/html_util.h"
#include "render/page_data.h"
#include "render/png_map.h"
#include "analyze/frames.h"
#include "render/redact.h"
#include "render/render_html.h"
#include "render/render_json.h"
#include "render/render_md.h"
#include "render/render_text.h"
#include "report/report.h"
#include "report/view.h"
#include "base/error.h"
#include "base/buf.h"

/* The samples of issue 9 in the project's corpus, then the large ones of the shared corpus. */
static const char *const samples[] = {"oom_fragmentation", "mlp_healthy", "no_history",
                                      "cuda_graph", "hf_llama_oom"};
static const char *const shared_samples[] = {"gpt_varlen", "gpt_large_trace"};

static const char hostile[] = "tests/fixtures/html/hostile_snapshot.pickle";

typedef enum { F_HTML, F_MD, F_JSON, F_TEXT } fmt;

/* Loads path and renders it; returns the report (caller frees with mr_buf_free). */
static mr_buf render(const char *path, fmt f, int redact, rp_report *keep)
{
	rd_options opt = {.device = -1, .redact_paths = redact};
	mr_error err = {0};
	rp_report run;
	mr_buf out = {0};
	const char *paths[] = {path};
	mr_status st = (mr_status)tu_load(paths, 1, &run);
	assert_int_equal(st, MR_OK);
	switch (f) {
	case F_HTML: st = rd_render_html(&run, &opt, &out, &err); break;
	case F_MD: st = rd_render_md(&run, &opt, &out, &err); break;
	case F_JSON: st = rd_render_json(&run, &opt, &out, &err); break;
	default: st = rd_render_text(&run, &opt, &out, &err);
	}
	if (st)
		print_error("%s: %s\n", path, err.msg);
	assert_int_equal(st, MR_OK);
	assert_false(out.failed);
	assert_non_null(out.data);
	if (keep)
		*keep = run;
	else
		rp_free(&run);
	return out;
}

static const char *find_ci(const char *hay, const char *needle)
{
	size_t n = strlen(needle);
	for (const char *p = hay; *p; p++)
		if (strncasecmp(p, needle, n) == 0)
			return p;
	return NULL;
}

/* Anything a browser would fetch from elsewhere. */
static void assert_offline(const char *html)
{
	static const char *const bad[] = {
	    "src=\"http", "src=http",   "src='http", "src=\"//", "src=//",  "href=\"http",
	    "href=http",  "href='http", "href=\"//", "href=//",  "@import", "url(",
	    "srcset=",    "<link",      "<iframe",   "<object",  "<embed",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		const char *p = find_ci(html, bad[i]);
		if (p)
			print_error("found %s: %.80s\n", bad[i], p);
		assert_null(p);
	}
	assert_non_null(strstr(html, "Content-Security-Policy"));
	assert_non_null(strstr(html, "default-src 'none'"));
}

/* Every data: image decodes to a PNG; returns how many there are. */
static size_t check_pngs(const char *html)
{
	static const char prefix[] = "data:image/png;base64,";
	static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
	size_t count = 0;
	for (const char *p = strstr(html, prefix); p; p = strstr(p, prefix)) {
		p += sizeof prefix - 1;
		const char *end = strchr(p, '"');
		assert_non_null(end);
		mr_buf png = {0};
		assert_int_equal(b64_decode(&png, p, (size_t)(end - p)), 0);
		assert_true(png.len > 8);
		assert_memory_equal(png.data, sig, 8);
		/* IEND closes every image. */
		assert_memory_equal(png.data + png.len - 8, "IEND", 4);
		mr_buf_free(&png);
		count++;
		p = end;
	}
	return count;
}

static size_t count_lines(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* One sample's HTML and Markdown reports: deterministic, offline, bounded. */
static void check_html(const char *name)
{
	char path[2048];
	tu_snapshot(name, path, sizeof path);
	rp_report run;
	mr_buf a = render(path, F_HTML, 0, &run);
	int has_trace = 0;
	for (size_t d = 0; d < run.an.device_count; d++)
		has_trace |= run.an.devices[d].has_trace;
	rp_free(&run);
	mr_buf b = render(path, F_HTML, 0, NULL);
	print_message("%s: %zu bytes\n", name, a.len);
	assert_int_equal(a.len, b.len);
	assert_memory_equal(a.data, b.data, a.len);
	assert_true(a.len <= 3000000);
	assert_non_null(strstr(a.data, "<!DOCTYPE html>"));
	assert_non_null(strstr(a.data, "</html>"));
	assert_non_null(strstr(a.data, "id=verdict"));
	assert_true(check_pngs(a.data) >= 1);
	if (has_trace)
		assert_non_null(strstr(a.data, "<svg class=timeline"));
	else
		assert_null(strstr(a.data, "<svg class=timeline"));
	assert_offline(a.data);
	mr_buf_free(&a);
	mr_buf_free(&b);

	mr_buf md = render(path, F_MD, 0, NULL);
	assert_true(count_lines(md.data) <= 60);
	assert_non_null(strstr(md.data, "| 0 |"));
	mr_buf_free(&md);
}

static void test_corpus_html(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof samples / sizeof *samples; i++)
		check_html(samples[i]);
}

static void test_corpus_html_shared(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof shared_samples / sizeof *shared_samples; i++)
		check_html(shared_samples[i]);
}

static void test_many_segments(void **state)
{
	(void)state;
	char path[2048];
	snprintf(path, sizeof path,
	         "%s/third_party/snapshots/notHanmin__assignment2-systems__memory_snapshot.pickle",
	         tu_shared());
	if (!tu_exists(path))
		tu_skip("%s is absent", path);
	mr_buf a = render(path, F_HTML, 0, NULL);
	size_t pngs = check_pngs(a.data);
	/* 999 segments: the largest drawn one by one, the rest aggregated in a few rows. */
	assert_true(pngs >= 40 && pngs <= 100);
	assert_non_null(strstr(a.data, "aggregated by pool and size"));
	assert_true(a.len <= 3000000);
	mr_buf_free(&a);
}

static size_t count_of(const char *text, const char *what)
{
	size_t n = 0;
	for (const char *p = strstr(text, what); p; p = strstr(p + 1, what))
		n++;
	return n;
}

/* The largest "moment":N of the marks, -1 when none has one; *marks gets how many there are. */
static long long largest_mark_moment(const char *block, size_t *marks)
{
	long long top = -1;
	*marks = 0;
	for (const char *p = strstr(block, "{\"kind\":"); p; p = strstr(p + 1, "{\"kind\":")) {
		const char *m = strstr(p, "\"moment\":");
		assert_non_null(m);
		long long v = strtoll(m + 9, NULL, 10);
		top = v > top ? v : top;
		(*marks)++;
	}
	return top;
}

/* The sizes of the bands of a data block's first device (start, end, bytes, stack each), in
 * the order written; returns how many. */
static size_t band_sizes(const char *block, unsigned long long *out, size_t cap)
{
	const char *p = strstr(block, "\"bands\":[");
	size_t n = 0;
	assert_non_null(p);
	p += strlen("\"bands\":[");
	for (size_t field = 0; *p != ']'; field++) {
		char *end;
		long long v = strtoll(p, &end, 10);
		assert_true(end > p);
		if (field % 4 == 2 && n < cap)
			out[n++] = (unsigned long long)v;
		p = *end == ',' ? end + 1 : end;
	}
	return n;
}

static int by_size_down(const void *a, const void *b)
{
	unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
	return (x < y) - (x > y);
}

/* The page's data block under a smaller limit: fewer moments at iteration ends first, then
 * fewer iteration marks and bands, every mark and the focus still pointing at a moment the
 * block holds; under a tiny one, nothing. */
static void test_page_data_fits(void **state)
{
	(void)state;
	char path[2048];
	const char *paths[] = {tu_snapshot("leak_val_fixed", path, sizeof path)};
	rp_report run;
	rp_view view;
	rd_options opt = {.device = -1};
	mr_error err = {0};
	mr_buf all = {0}, part = {0}, none = {0};
	pd_fit fit;
	assert_int_equal(tu_load(paths, 1, &run), 0);
	assert_int_equal(rp_view_init(&view, &run, -1, &err), MR_OK);
	assert_int_equal(rd_page_data(&run, &view, &opt, SIZE_MAX, &fit, &all, &err), MR_OK);
	/* the sample has 12 moments at iteration ends and fits whole */
	assert_int_equal(fit.iteration_moments, 12);
	assert_int_equal(fit.iteration_moments_all, 12);
	assert_int_equal(fit.band_budget, PD_BAND_BUDGET);
	size_t all_bands = fit.bands, marks_all, marks_part;
	assert_int_equal(count_of(all.data, "\"kinds\":[\"iteration\"]"), 12);
	assert_int_equal(largest_mark_moment(all.data, &marks_all) + 1,
	                 (long long)count_of(all.data, "{\"event\":"));

	/* the least it can write: no iteration moments, no bands; too large for 100 bytes */
	assert_int_equal(rd_page_data(&run, &view, &opt, 100, &fit, &none, &err), MR_OK);
	assert_int_equal(none.len, 0);
	size_t least = fit.left_out_bytes;
	assert_true(least > 100 && least < all.len);

	size_t max = least + (all.len - least) / 2;
	assert_int_equal(rd_page_data(&run, &view, &opt, max, &fit, &part, &err), MR_OK);
	assert_true(part.len > 0 && part.len <= max);
	assert_true(fit.iteration_moments < 12);
	assert_int_equal(fit.iteration_moments_all, 12);
	assert_true(fit.bands <= all_bands && fit.bands <= fit.band_budget);
	assert_int_equal(count_of(part.data, "\"kinds\":[\"iteration\"]"), fit.iteration_moments);
	/* the same marks but iteration ends left without a moment (thinned, and said), pointing
	 * only at moments that are written */
	long long top = largest_mark_moment(part.data, &marks_part);
	size_t moments = count_of(part.data, "{\"event\":");
	assert_true(fit.iteration_marks <= fit.iteration_marks_all);
	assert_int_equal(marks_part, marks_all - (fit.iteration_marks_all - fit.iteration_marks));
	assert_true(top < (long long)moments);
	long long focus = -1;
	assert_int_equal(tu_json_int(strstr(part.data, "\"focus\":"), "moment", &focus), 1);
	assert_true(focus >= 0 && focus < (long long)moments);

	/* closer to the least, fewer bands: the largest of the first try's */
	static unsigned long long every[4096], kept[4096];
	mr_buf few = {0};
	size_t tight = least + (all.len - least) / 8;
	assert_int_equal(rd_page_data(&run, &view, &opt, tight, &fit, &few, &err), MR_OK);
	size_t ne = band_sizes(all.data, every, 4096), nk = band_sizes(few.data, kept, 4096);
	assert_true(ne == all_bands && ne < 4096 && nk == fit.bands && nk < ne && nk > 0);
	qsort(every, ne, sizeof *every, by_size_down);
	qsort(kept, nk, sizeof *kept, by_size_down);
	for (size_t i = 0; i < nk; i++)
		assert_int_equal(kept[i], every[i]);
	mr_buf_free(&few);
	mr_buf_free(&all);
	mr_buf_free(&part);
	mr_buf_free(&none);
	rp_view_free(&view);
	rp_free(&run);
}

static void assert_not_live(const char *report, const char *what)
{
	static const char *const live[] = {"<script>alert", "<img src=x", "</style><script>"};
	for (size_t i = 0; i < sizeof live / sizeof *live; i++) {
		const char *p = strstr(report, live[i]);
		if (p)
			print_error("%s report holds %s live: %.80s\n", what, live[i], p);
		assert_null(p);
	}
}

static void test_hostile_strings(void **state)
{
	(void)state;
	assert_true(tu_exists(hostile));
	mr_buf html = render(hostile, F_HTML, 0, NULL);
	assert_not_live(html.data, "HTML");
	/* The strings are shown, escaped: the test would see them if escaping failed. */
	assert_non_null(strstr(html.data, "&lt;script&gt;alert(1)&lt;/script&gt;"));
	assert_non_null(strstr(html.data, "&quot;&gt;&lt;img src=x onerror=alert(2)&gt;"));
	assert_non_null(strstr(html.data, "&lt;/style&gt;&lt;script&gt;alert(3)"));
	/* The page's own elements only: report.js, the data block and timeline.js; report.css
	 * and timeline.css. */
	assert_int_equal(count_of(html.data, "<script"), 3);
	assert_int_equal(count_of(html.data, "<script type=\"application/json\""), 1);
	assert_int_equal(count_of(html.data, "<style"), 2);
	assert_int_equal(check_pngs(html.data) >= 1, 1);
	assert_offline(html.data);
	mr_buf_free(&html);

	mr_buf md = render(hostile, F_MD, 0, NULL);
	assert_not_live(md.data, "Markdown");
	assert_non_null(strstr(md.data, "&lt;script&gt;alert(1)&lt;/script&gt;"));
	assert_true(count_lines(md.data) <= 60);
	/* Nothing GitHub would link or ping, no right-to-left override; the words are shown. */
	static const char *const linked[] = {"@octocat", "#12",       "GH-7",        "https://",
	                                     "www.evil", "mail@evil", "\xe2\x80\xae"};
	for (size_t i = 0; i < sizeof linked / sizeof *linked; i++)
		assert_null(strstr(md.data, linked[i]));
	assert_non_null(strstr(md.data, "@&#x2060;octocat #&#x2060;12 GH&#x2060;-7 "
	                                "https:&#x2060;//evil.example/x www&#x2060;.evil.example"));
	mr_buf_free(&md);

	mr_buf text = render(hostile, F_TEXT, 0, NULL);
	assert_non_null(strstr(text.data, "@octocat #12"));
	assert_null(strstr(text.data, "\xe2\x80\xae"));
	assert_non_null(strstr(text.data, "\xef\xbf\xbdgnp.exe"));
	mr_buf_free(&text);

	mr_buf json = render(hostile, F_JSON, 0, NULL);
	assert_not_live(json.data, "JSON");
	mr_buf_free(&json);
}

static const char *const secret[] = {"/workspace/", "/opt/torch",   "/home/",
                                     "/root/",      "/work/shared", "mallory"};

/* The first machine path a report names, or NULL. */
static const char *names_path(const char *report, size_t *which)
{
	for (size_t i = 0; i < sizeof secret / sizeof *secret; i++) {
		const char *p = strstr(report, secret[i]);
		if (p) {
			*which = i;
			return p;
		}
	}
	return NULL;
}

/* Every report of every path in every format: with --redact-paths none names a machine path;
 * without it some do (so the check can fail). */
static void check_redacted(char (*paths)[2048], size_t n, const char *const *names)
{
	int saw_paths = 0;
	size_t which;
	for (size_t i = 0; i < n; i++) {
		for (int f = F_HTML; f <= F_TEXT; f++) {
			mr_buf plain = render(paths[i], (fmt)f, 0, NULL);
			saw_paths |= names_path(plain.data, &which) != NULL;
			mr_buf_free(&plain);
			mr_buf r = render(paths[i], (fmt)f, 1, NULL);
			const char *p = names_path(r.data, &which);
			if (p)
				fail_msg("%s %s report holds %s: %.80s", paths[i], names[f],
				         secret[which], p);
			mr_buf_free(&r);
		}
	}
	assert_true(saw_paths);
}

static void test_redact_paths(void **state)
{
	(void)state;
	static const char *const names[] = {"html", "md", "json", "text"};
	char paths[sizeof samples / sizeof *samples + 2][2048];
	size_t n = 0;
	for (size_t i = 0; i < sizeof samples / sizeof *samples; i++)
		tu_snapshot(samples[i], paths[n++], sizeof paths[0]);
	tu_snapshot("stacks_all", paths[n++], sizeof paths[0]);
	snprintf(paths[n++], sizeof paths[0], "%s", hostile);
	check_redacted(paths, n, names);
}

/* Other people's snapshots: their home folders and machines' paths. */
static void test_redact_paths_third_party(void **state)
{
	(void)state;
	static const char *const names[] = {"html", "md", "json", "text"};
	static const char *const files[] = {
	    "Yiyi-philosophy__LLM-inference__oom_snapshot.pickle",
	    "LfieLike__SketchKV2__my_snapshot.pickle",
	};
	char paths[2][2048];
	for (size_t i = 0; i < 2; i++) {
		snprintf(paths[i], sizeof paths[i], "%s/third_party/snapshots/%s", tu_shared(),
		         files[i]);
		if (!tu_exists(paths[i]))
			tu_skip("%s is not in %s/third_party/snapshots", files[i], tu_shared());
	}
	check_redacted(paths, 2, names);
}

static void test_rp_path_rules(void **state)
{
	(void)state;
	rd_options on = {.device = -1, .redact_paths = 1}, off = {.device = -1};
	char buf[512];
	assert_string_equal(rd_path(&off, "/home/alice/x.py", buf, sizeof buf), "/home/alice/x.py");
	const char *r = rd_path(&on, "/home/alice/proj/alice_utils/train.py", buf, sizeof buf);
	assert_null(strstr(r, "alice"));
	assert_non_null(strstr(r, "train.py"));
	r = rd_path(&on, "/opt/torch/.venv/lib/python3.12/site-packages/torch/nn/functional.py",
	            buf, sizeof buf);
	assert_string_equal(r, "<site-packages>/torch/nn/functional.py");
	r = rd_path(&on, "C:\\Users\\bob\\proj\\train.py", buf, sizeof buf);
	assert_null(strstr(r, "bob"));
	assert_non_null(strstr(r, "train.py"));
	r = rd_path(&on, "/Users/carol/code/model.py", buf, sizeof buf);
	assert_null(strstr(r, "carol"));
	r = rd_path(&on, "/workspace/train.py", buf, sizeof buf);
	assert_null(strstr(r, "workspace"));
	assert_non_null(strstr(r, "train.py"));
	/* Python's standard library keeps its path inside lib/pythonX.Y, as does the library
	 * test of the sites (an_library_file); a folder that only starts like it is the user's. */
	r = rd_path(&on, "/home/alice/.pyenv/lib/python3.12/threading.py", buf, sizeof buf);
	assert_string_equal(r, "<python>/threading.py");
	assert_true(an_library_file("/usr/lib/python3.12/threading.py"));
	r = rd_path(&on, "/home/alice/lib/pythonic/train.py", buf, sizeof buf);
	assert_null(strstr(r, "alice"));
	assert_null(strstr(r, "<python>"));
	assert_false(an_library_file("/home/alice/lib/pythonic/train.py"));
	assert_false(an_library_file("/home/alice/lib/python3x/train.py"));
	/* Relative and synthetic names are not paths on a machine: kept. */
	assert_string_equal(rd_path(&on, "<frozen runpy>", buf, sizeof buf), "<frozen runpy>");
	assert_string_equal(rd_path(&on, "CUDACachingAllocator.cpp", buf, sizeof buf),
	                    "CUDACachingAllocator.cpp");
}

/* One device view for every renderer: --device N on a table of another device shows no device
 * (and no empty Markdown table), the same in every format. */
static void test_device_view(void **state)
{
	(void)state;
	char path[1024];
	tu_sample("mlp_healthy", "memory_summary.txt", path, sizeof path);
	rp_report run;
	const char *paths[] = {path};
	assert_int_equal(tu_load(paths, 1, &run), 0);
	rd_options all = {.device = -1}, other = {.device = 7};
	mr_buf b = {0};
	mr_error err = {0};
	assert_int_equal(rd_render_md(&run, &all, &b, &err), MR_OK);
	assert_non_null(strstr(b.data, "| device | reserved |"));
	mr_buf_free(&b);
	assert_int_equal(rd_render_md(&run, &other, &b, &err), MR_OK);
	assert_null(strstr(b.data, "| device |"));
	mr_buf_free(&b);
	assert_int_equal(rd_render_json(&run, &other, &b, &err), MR_OK);
	assert_non_null(strstr(b.data, "\"devices\": []"));
	mr_buf_free(&b);
	assert_int_equal(rd_render_text(&run, &other, &b, &err), MR_OK);
	assert_null(strstr(b.data, "Device "));
	mr_buf_free(&b);
	rp_free(&run);
}

static void test_helpers(void **state)
{
	(void)state;
	char h[45];
	sha256_base64("abc", 3, h);
	assert_string_equal(h, "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=");
	sha256_base64("", 0, h);
	assert_string_equal(h, "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
	/* 56 bytes: the padding spills into a second block. */
	sha256_base64("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, h);
	assert_string_equal(h, "JI1qYdIGOLjlwCaTDD5gOaM85Flk/yFn9uzt1BnbBsE=");

	mr_buf b = {0}, d = {0};
	const unsigned char raw[] = {0, 1, 2, 250, 251, 252, 253};
	for (size_t n = 0; n <= sizeof raw; n++) {
		b.len = 0;
		d.len = 0;
		b64_encode(&b, raw, n);
		assert_int_equal(b.len, (n + 2) / 3 * 4);
		assert_int_equal(b64_decode(&d, b.data ? b.data : "", b.len), 0);
		assert_int_equal(d.len, n);
		if (n)
			assert_memory_equal(d.data, raw, n);
	}
	assert_int_equal(b64_decode(&d, "ab$=", 4), -1);
	mr_buf_free(&b);
	mr_buf_free(&d);

	hu_slot slots[] = {{"a", "{{b}}", 5}, {"b", "B", 1}};
	mr_buf f = {0};
	hu_fill(&f, "x{{a}}y{{b}}z{{c}}{{", 20, slots, 2);
	assert_string_equal(f.data, "x{{b}}yBz{{");
	mr_buf_free(&f);

	mr_buf m = {0};
	hu_md_text(&m, "a|b <i>_x_</i> `c`\n[l](u)", 100);
	assert_string_equal(m.data, "a\\|b &lt;i&gt;\\_x\\_&lt;/i&gt; \\`c\\` \\[l\\](u)");
	mr_buf_free(&m);

	/* GitHub's links and pings get a word joiner; bidirectional controls become U+FFFD;
	 * what is not a pattern stays as it is. */
	static const char *const md_cases[][2] = {
	    {"see https://a.io/x", "see https:&#x2060;//a.io/x"},
	    {"WWW.a.io", "WWW&#x2060;.a.io"},
	    {"@bob, a@b.io", "@&#x2060;bob, a@&#x2060;b.io"},
	    {"x#12 #a gh-3 GH-x", "x#&#x2060;12 #a gh&#x2060;-3 GH-x"},
	    {"a\xe2\x80\xae"
	     "b\xe2\x81\xa6"
	     "c\xd8\x9c"
	     "d\xe2\x80\x8f"
	     "e",
	     "a\xef\xbf\xbd"
	     "b\xef\xbf\xbd"
	     "c\xef\xbf\xbd"
	     "d\xef\xbf\xbd"
	     "e"},
	    {"a: b:/c @ # www", "a: b:/c @ # www"},
	    /* quotes are text in Markdown (no attribute to end): they stay, < & > do not */
	    {"the loss's \"x\" <b a='1'>&", "the loss's \"x\" &lt;b a='1'&gt;&amp;"},
	};
	for (size_t i = 0; i < sizeof md_cases / sizeof *md_cases; i++) {
		m.len = 0;
		hu_md_text(&m, md_cases[i][0], 100);
		assert_string_equal(m.data, md_cases[i][1]);
	}
	mr_buf_free(&m);
	mr_buf_plain(&m,
	             "a\xe2\x80\xae"
	             "b\xe2\x80\x8e"
	             "c",
	             9);
	assert_string_equal(m.data, "a\xef\xbf\xbd"
	                            "b\xef\xbf\xbd"
	                            "c");
	mr_buf_free(&m);

	mr_buf t = {0};
	hu_text(&t, "\xc3\xa9\xc3\xa9\xc3\xa9", 3); /* cut inside the second character */
	assert_string_equal(t.data, "\xc3\xa9\xe2\x80\xa6");
	mr_buf_free(&t);
}

/* The text report's lines: at most the width in characters, broken at spaces (inside a word
 * only when it is longer than a line), continued two columns deeper; short lines untouched. */
static void test_wrap(void **state)
{
	(void)state;
	static const struct {
		const char *in, *want;
		size_t columns;
	} cases[] = {
	    {"short line\n\n  also short\n", "short line\n\n  also short\n", 20},
	    {"one two three four five six", "one two three four\n  five six", 20},
	    {"  [warning] id: aaa bbb ccc ddd", "  [warning] id: aaa\n    bbb ccc ddd", 20},
	    {"x /a/very/long/path/that/has/no/space.py y",
	     "x\n  /a/very/long/path/\n  that/has/no/space.\n  py y", 20},
	    /* twenty characters of two bytes each fit twenty columns */
	    {"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
	     "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9",
	     "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
	     "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9",
	     20},
	    {"exactly twenty chars", "exactly twenty chars", 20},
	    {"exactly twenty chars and more", "exactly twenty chars\n  and more", 20},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		mr_buf b = {0};
		rd_wrap(&b, cases[i].in, strlen(cases[i].in), cases[i].columns);
		assert_string_equal(b.data ? b.data : "", cases[i].want);
		mr_buf_free(&b);
	}
}

/* The number appenders print what printf prints: every tie and sign case, and half a million values
 * from a fixed generator over the ranges the timeline and the page use. */
static void check_fixed1(double v)
{
	char want[400];
	snprintf(want, sizeof want, "%.1f", v);
	mr_buf b = {0};
	mr_buf_fixed1(&b, v);
	assert_non_null(b.data);
	if (strcmp(b.data, want))
		fail_msg("%.17g: \"%s\", printf \"%s\"", v, b.data, want);
	mr_buf_free(&b);
}

static void test_number_appenders(void **state)
{
	(void)state;
	const double edges[] = {0.0,
	                        -0.0,
	                        0.05,
	                        0.15,
	                        0.25,
	                        0.35,
	                        -0.25,
	                        0.75,
	                        1.25,
	                        2.5,
	                        -0.04,
	                        -0.05,
	                        0.95,
	                        9.95,
	                        99.95,
	                        1e14,
	                        9.99999999999999e14,
	                        1e15,
	                        -1e300,
	                        1e300,
	                        4503599627370495.5,
	                        1.0 / 3,
	                        12345.65};
	for (size_t i = 0; i < sizeof edges / sizeof *edges; i++)
		check_fixed1(edges[i]);
	uint64_t x = 88172645463325252ull;
	for (int i = 0; i < 250000; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		double scale = (double)(1u << (x % 24)) / 8;
		check_fixed1(((double)(x >> 11) / 9007199254740992.0 - 0.1) * scale);
		check_fixed1((double)(x % 200000) /
		             20); /* exact ties at .x5 are not doubles; .25 are */
	}
	const uint64_t us[] = {0, 1, 9, 10, 99, 1000, UINT32_MAX, (uint64_t)INT64_MAX, UINT64_MAX};
	const int64_t is[] = {0, -1, 7, -10, INT64_MIN, INT64_MAX, -9223372036854775807ll};
	for (size_t i = 0; i < sizeof us / sizeof *us; i++) {
		char want[32];
		snprintf(want, sizeof want, "%" PRIu64, us[i]);
		mr_buf b = {0};
		mr_buf_u64(&b, us[i]);
		assert_string_equal(b.data, want);
		mr_buf_free(&b);
	}
	for (size_t i = 0; i < sizeof is / sizeof *is; i++) {
		char want[32];
		snprintf(want, sizeof want, "%" PRId64, is[i]);
		mr_buf b = {0};
		mr_buf_i64(&b, is[i]);
		assert_string_equal(b.data, want);
		mr_buf_free(&b);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_helpers),
	    cmocka_unit_test(test_number_appenders),
	    cmocka_unit_test(test_rp_path_rules),
	    cmocka_unit_test(test_device_view),
	    cmocka_unit_test(test_corpus_html),
	    cmocka_unit_test(test_corpus_html_shared),
	    cmocka_unit_test(test_many_segments),
	    cmocka_unit_test(test_page_data_fits),
	    cmocka_unit_test(test_hostile_strings),
	    cmocka_unit_test(test_redact_paths),
	    cmocka_unit_test(test_redact_paths_third_party),
	    cmocka_unit_test(test_wrap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
