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
    "<style>{{css}}</style></head><body><main>{{body}}</main><script>{{script}}</script>"
    "</body></html>\n";

mr_status rd_page(mr_buf *out, const char *title_html, const char *css_name, const char *js_name,
                  const char *body, size_t body_len, mr_error *err)
{
	size_t page_len = 0, css_len = 0, js_len = 0;
	char *page = tp_get("page.html", &page_len);
	char *css = tp_get(css_name, &css_len);
	char *js = js_name ? tp_get(js_name, &js_len) : NULL;
	mr_buf csp = {0};
	char css_hash[45], js_hash[45];
	sha256_base64(css ? css : "", css_len, css_hash);
	sha256_base64(js ? js : "", js_len, js_hash);
	mr_buf_printf(&csp,
	              "default-src 'none'; style-src 'sha256-%s'; script-src 'sha256-%s'; "
	              "img-src data:; base-uri 'none'; form-action 'none'",
	              css_hash, js_hash);
	hu_slot slots[] = {
	    {"csp", csp.data ? csp.data : "", csp.len}, {"title", title_html, strlen(title_html)},
	    {"css", css ? css : "", css_len},           {"script", js ? js : "", js_len},
	    {"body", body ? body : "", body_len},
	};
	if (page)
		hu_fill(out, page, page_len, slots, sizeof slots / sizeof *slots);
	else
		hu_fill(out, fallback_page, sizeof fallback_page - 1, slots,
		        sizeof slots / sizeof *slots);
	mr_status st = csp.failed || out->failed ? mr_oom(err) : MR_OK;
	free(page);
	free(css);
	free(js);
	mr_buf_free(&csp);
	return st;
}
