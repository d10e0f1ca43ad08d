/* page.c: the page shell and its Content-Security-Policy. */
#include "render/page.h"

#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/sha256.h"
#include "render/html_util.h"
#include "render/templates.h"

/* The shell when templates/page.html is missing from a --templates folder and the build. */
static const char fallback_page[] =
    "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><meta "
    "http-equiv=Content-Security-Policy content=\"{{csp}}\"><title>{{title}}</title>"
    "{{styles}}</head><body><main>{{body}}</main>{{scripts}}</body></html>\n";

/* Appends each template of names as an element of `tag` to elements, and its hash to hashes
 * ("'sha256-...' " each). A template that is missing is an empty element. */
static void inline_parts(const char *const *names, const char *tag, mr_buf *elements,
                         mr_buf *hashes)
{
	for (size_t i = 0; names && names[i] && i < RD_PAGE_MAX_PARTS; i++) {
		size_t len = 0;
		char *text = tp_get(names[i], &len), hash[45];
		sha256_base64(text ? text : "", len, hash);
		mr_buf_printf(hashes, "%s'sha256-%s'", hashes->len ? " " : "", hash);
		mr_buf_printf(elements, "%s<%s>", i ? "\n" : "", tag);
		mr_buf_append(elements, text ? text : "", len);
		mr_buf_printf(elements, "</%s>", tag);
		free(text);
	}
}

mr_status rd_page(mr_buf *out, const char *title_html, const char *const *css_names,
                  const char *const *js_names, const char *body, size_t body_len, mr_error *err)
{
	size_t page_len = 0;
	char *page = tp_get("page.html", &page_len);
	mr_buf csp = {0}, styles = {0}, scripts = {0}, style_hashes = {0}, script_hashes = {0};
	inline_parts(css_names, "style", &styles, &style_hashes);
	inline_parts(js_names, "script", &scripts, &script_hashes);
	/* no script at all: script-src allows nothing */
	mr_buf_printf(&csp,
	              "default-src 'none'; style-src %s; script-src %s; img-src data:; "
	              "base-uri 'none'; form-action 'none'",
	              style_hashes.len ? style_hashes.data : "'none'",
	              script_hashes.len ? script_hashes.data : "'none'");
	hu_slot slots[] = {
	    {"csp", csp.data ? csp.data : "", csp.len},
	    {"title", title_html, strlen(title_html)},
	    {"styles", styles.data ? styles.data : "", styles.len},
	    {"scripts", scripts.data ? scripts.data : "", scripts.len},
	    {"body", body ? body : "", body_len},
	};
	if (page)
		hu_fill(out, page, page_len, slots, sizeof slots / sizeof *slots);
	else
		hu_fill(out, fallback_page, sizeof fallback_page - 1, slots,
		        sizeof slots / sizeof *slots);
	mr_status st = csp.failed || styles.failed || scripts.failed || style_hashes.failed ||
	                       script_hashes.failed || out->failed
	                   ? mr_oom(err)
	                   : MR_OK;
	free(page);
	mr_buf_free(&csp);
	mr_buf_free(&styles);
	mr_buf_free(&scripts);
	mr_buf_free(&style_hashes);
	mr_buf_free(&script_hashes);
	return st;
}
