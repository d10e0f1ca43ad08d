/* error.c: recording failures in an mr_error. */
#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>

mr_status mr_fail(mr_error *err, mr_status status, const char *fmt, ...)
{
	if (err && err->status == MR_OK) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof err->msg, fmt, ap);
		va_end(ap);
		err->status = status;
	}
	return status;
}

mr_status mr_oom(mr_error *err)
{
	return mr_fail(err, MR_EFAIL, "out of memory");
}
