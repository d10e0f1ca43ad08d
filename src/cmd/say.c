/* say.c: messages on standard error, one line each. */
#include "cmd/say.h"

#include <stdarg.h>
#include <stdio.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/escape.h"

static void say_line(const char *who, const char *fmt, va_list ap)
{
	mr_buf line = {0};
	mr_buf_vprintf(&line, fmt, ap);
	if (line.failed || !line.data) {
		fprintf(stderr, "%s: %s\n", who, line.failed ? "out of memory" : "");
	} else {
		mr_one_line(line.data);
		fprintf(stderr, "%s: %s\n", who, line.data);
	}
	mr_buf_free(&line);
}

void cmd_say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	say_line("memreport", fmt, ap);
	va_end(ap);
}

static void say_as(const char *who, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	say_line(who, fmt, ap);
	va_end(ap);
}

int cmd_usage_error(const char *who, const char *msg, const char *usage)
{
	say_as(who, "%s", msg);
	fputs(usage, stderr);
	return MR_EINPUT;
}
