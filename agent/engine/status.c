/*
 * status.c - the thread-local last-error slot (libgit2's git_error_last).
 */
#include "tend/status.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_msg[1024];
static _Thread_local int last_code;

int
tend_error_set(int code, const char *fmt, ...)
{
	va_list ap;
	char tmp[sizeof last_msg];

	/* fmt may format last_msg itself ("%s: ...", tend_error_last()) */
	va_start(ap, fmt);
	vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	snprintf(last_msg, sizeof last_msg, "%s", tmp);
	last_code = code;
	return code;
}

const char *
tend_error_last(void)
{
	return last_msg;
}

int
tend_error_code(void)
{
	return last_code;
}

void
tend_error_clear(void)
{
	last_msg[0] = '\0';
	last_code = TEND_OK;
}

const char *
tend_status_name(int code)
{
	switch (code) {
	case TEND_OK:
		return "OK";
	case TEND_ERROR:
		return "ERROR";
	case TEND_ENOTFOUND:
		return "ENOTFOUND";
	case TEND_EEXISTS:
		return "EEXISTS";
	case TEND_ERETRY:
		return "ERETRY";
	case TEND_ECONFLICT:
		return "ECONFLICT";
	case TEND_EINVALID:
		return "EINVALID";
	}
	return "UNKNOWN";
}
