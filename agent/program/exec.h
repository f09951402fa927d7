/*
 * exec.h - running an exec declaration function: /bin/sh -c CMD with the
 * source on stdin, stdout into a file, stderr captured, a time limit.
 */
#ifndef TEND_EXEC_H
#define TEND_EXEC_H

#include <stddef.h>
#include <stdint.h>

struct tend_buf;

struct tend_exec {
	const char *cmd;
	const char *cwd;
	char *const *env;  /* extra "KEY=VALUE" entries, NULL-terminated */
	char *const *args; /* extra "$1".. arguments, NULL-terminated */
	int stdin_fd;	   /* -1: /dev/null */
	int stdout_fd;
	uint64_t timeout_ms; /* 0: none */
};

/*
 * Run it. Returns 0 if the command exited 0; otherwise TEND_ERROR with a
 * message naming the exit status, the signal or the timeout and the
 * captured stderr (also appended to `err` if not NULL).
 */
int tend_exec_run(const struct tend_exec *e, struct tend_buf *err);

/*
 * Run `n` commands, at most `max` at once (0: one per CPU). rcs[i] is 0 or
 * TEND_ERROR; msgs[i] (heap, caller frees) says why a command failed, as
 * tend_exec_run's message would.
 */
void tend_exec_batch(const struct tend_exec *e, size_t n, unsigned max,
    int *rcs, char **msgs);

#endif
