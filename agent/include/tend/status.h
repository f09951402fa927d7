/*
 * tend/status.h - status codes and the per-thread last-error message.
 *
 * A fallible tend function returns 0 (TEND_OK) or a negative enum
 * tend_status. The message describing the failure is set once, where the
 * failure happens, with tend_error_set(), and read with tend_error_last().
 * The slot is thread-local, as libgit2's is.
 */
#ifndef TEND_STATUS_H
#define TEND_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

enum tend_status {
	TEND_OK = 0,
	TEND_ERROR = -1,     /* see tend_error_last() */
	TEND_ENOTFOUND = -2, /* the named thing does not exist */
	TEND_EEXISTS = -3,   /* it exists already */
	TEND_ERETRY = -4,    /* transient: try again later */
	TEND_ECONFLICT = -5, /* the target changed under us */
	TEND_EINVALID = -6,  /* bad input: a name, a key, a config value */
};

/*
 * Record the message of the current failure and return `code`, so that
 * `return tend_error_set(TEND_ERROR, "...")` reads naturally.
 */
int tend_error_set(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The last message set on this thread; "" when none. Valid until the next
 * tend_error_set() or tend_error_clear() on this thread. */
const char *tend_error_last(void);

/* The code passed with the last message, or TEND_OK. */
int tend_error_code(void);

void tend_error_clear(void);

/* A short name for a status code ("ENOTFOUND"). Never NULL. */
const char *tend_status_name(int code);

#ifdef __cplusplus
}
#endif

#endif
