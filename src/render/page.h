/* page.h: the one shell of every HTML page memreport writes (the report, the batch index, the
 * diff): templates/page.html with the page's own style and script inlined, and one
 * Content-Security-Policy for all of them. It allows nothing but that style and that script,
 * by hash (a page without a script has an empty one), and data: images: a page loads nothing
 * from the network, and a string that escaped escaping could neither load anything nor run.
 * No page has inline style attributes or event handlers.
 *
 * Ownership: appends to a caller-owned mr_buf; the templates it reads are freed before it
 * returns. */
#ifndef MR_PAGE_H
#define MR_PAGE_H

#include <stddef.h>

#include "base/buf.h"
#include "base/error.h"

/* Appends the page: title_html (already escaped), the templates css_name and js_name (js_name
 * NULL: no script) and body (HTML) in the shell. */
mr_status rd_page(mr_buf *out, const char *title_html, const char *css_name, const char *js_name,
                  const char *body, size_t body_len, mr_error *err);

#endif
