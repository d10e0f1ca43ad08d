/* page.h: the one shell of every HTML page memreport writes (the report, the batch index, the
 * diff): templates/page.html with the page's own styles and scripts inlined, and one
 * Content-Security-Policy for all of them. It allows nothing but those styles and scripts, by
 * hash (a page without a script allows none), and data: images: a page loads nothing from the
 * network, and a string that escaped escaping could neither load anything nor run. No page has
 * inline style attributes or event handlers. A <script type="application/json"> data block in
 * the body is not run, so it needs no hash.
 *
 * Ownership: appends to a caller-owned mr_buf; the templates it reads are freed before it
 * returns. */
#ifndef MR_PAGE_H
#define MR_PAGE_H

#include <stddef.h>

#include "base/buf.h"
#include "base/error.h"

enum { RD_PAGE_MAX_PARTS = 4 };

/* Appends the page: title_html (already escaped), the templates named in css_names and
 * js_names (NULL-terminated lists of at most RD_PAGE_MAX_PARTS; js_names NULL or empty: no
 * script), each inlined as an element of its own, and body (HTML) in the shell. */
mr_status rd_page(mr_buf *out, const char *title_html, const char *const *css_names,
                  const char *const *js_names, const char *body, size_t body_len, mr_error *err);

#endif
