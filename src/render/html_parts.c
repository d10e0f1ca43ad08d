/* html_parts.c: the small helpers of the HTML report's sections. */
#include "render/html_parts.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "base/buf.h"
#include "base/units.h"
#include "render/html_util.h"
#include "render/redact.h"

void hr_text(hr_ctx *c, const char *s)
{
	hu_text(c->b, s ? s : "", HR_TEXT_CAP);
}

const char *hr_bytes(char out[32], uint64_t v)
{
	mr_format_bytes(out, 32, v);
	return out;
}

void hr_left_out(hr_ctx *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	mr_buf_puts(&c->left_out, "<li>");
	mr_buf_vprintf(&c->left_out, fmt, ap);
	mr_buf_puts(&c->left_out, "</li>");
	va_end(ap);
}

int hr_over_budget(const hr_ctx *c)
{
	return c->b->len + c->fixed > RP_HTML_BUDGET;
}

void hr_path_text(hr_ctx *c, const char *path)
{
	char buf[4096];
	hr_text(c, rd_path(c->opt, path ? path : "", buf, sizeof buf));
}

void hr_frame_html(hr_ctx *c, const md_frame *f)
{
	mr_buf_puts(c->b, "<code class=fn>");
	hr_text(c, md_str(c->s, f->name));
	mr_buf_puts(c->b, "</code> <span class=loc>");
	hr_path_text(c, md_str(c->s, f->filename));
	mr_buf_printf(c->b, ":%d</span>", f->line);
}

void hr_stream_label(char out[40], uint64_t stream)
{
	if (stream == 0)
		snprintf(out, 40, "default");
	else
		snprintf(out, 40, "0x%" PRIx64, stream);
}
