/*
 * exec.c - child processes for exec declarations.
 *
 * The child runs in its own process group so that a timeout kills the
 * whole pipeline the shell started, not just the shell.
 */
#define _GNU_SOURCE
#include "exec.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tend/buf.h"
#include "tend/status.h"

#define STDERR_MAX (64 * 1024)

extern char **environ;

static uint64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int
tend_exec_run(const struct tend_exec *e, struct tend_buf *err)
{
	int pipefd[2];
	pid_t pid;
	struct tend_buf cap = TEND_BUF_INIT;
	bool timed_out = false;
	int status = 0, rc;

	if (pipe2(pipefd, O_CLOEXEC) != 0)
		return tend_error_set(TEND_ERROR, "pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return tend_error_set(TEND_ERROR, "fork: %s", strerror(errno));
	}
	if (pid == 0) {
		int in = e->stdin_fd >= 0 ? e->stdin_fd
					  : open("/dev/null", O_RDONLY);
		size_t nargs = 0;

		setpgid(0, 0);
		if (in < 0 || dup2(in, 0) < 0 || dup2(e->stdout_fd, 1) < 0 ||
		    dup2(pipefd[1], 2) < 0)
			_exit(127);
		if (e->cwd && chdir(e->cwd) != 0) {
			dprintf(2, "cannot chdir to %s: %s\n", e->cwd,
			    strerror(errno));
			_exit(127);
		}
		for (char *const *p = e->env; p && *p; p++)
			putenv(*p);
		for (char *const *p = e->args; p && *p; p++)
			nargs++;
		char **argv = calloc(nargs + 5, sizeof *argv);
		if (!argv)
			_exit(127);
		argv[0] = (char *)"sh";
		argv[1] = (char *)"-c";
		argv[2] = (char *)e->cmd;
		argv[3] = (char *)"tend";
		for (size_t i = 0; i < nargs; i++)
			argv[4 + i] = e->args[i];
		signal(SIGPIPE, SIG_DFL);
		execve("/bin/sh", argv, environ);
		dprintf(2, "exec /bin/sh: %s\n", strerror(errno));
		_exit(127);
	}
	close(pipefd[1]);
	uint64_t deadline = e->timeout_ms ? mono_ms() + e->timeout_ms : 0;
	for (;;) {
		struct pollfd p = {.fd = pipefd[0], .events = POLLIN};
		int wait = -1;

		if (deadline) {
			uint64_t now = mono_ms();
			if (now >= deadline) {
				timed_out = true;
				kill(-pid, SIGKILL);
				kill(pid, SIGKILL);
				break;
			}
			wait = (int)(deadline - now);
		}
		int r = poll(&p, 1, wait);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			continue; /* the deadline check kills it */
		char buf[4096];
		ssize_t n = read(pipefd[0], buf, sizeof buf);
		if (n <= 0)
			break;
		if (cap.len < STDERR_MAX)
			tend_buf_put(&cap, buf,
			    (size_t)n < STDERR_MAX - cap.len ? (size_t)n
							     : STDERR_MAX - cap.len);
	}
	close(pipefd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	/* the shell may be gone while its children hold on: end them */
	kill(-pid, SIGKILL);
	while (cap.len && (cap.ptr[cap.len - 1] == '\n'))
		cap.ptr[--cap.len] = '\0';
	if (timed_out)
		rc = tend_error_set(TEND_ERROR, "timed out after %llu ms%s%s",
		    (unsigned long long)e->timeout_ms, cap.len ? ": " : "",
		    cap.ptr);
	else if (WIFSIGNALED(status))
		rc = tend_error_set(TEND_ERROR, "killed by signal %d%s%s",
		    WTERMSIG(status), cap.len ? ": " : "", cap.ptr);
	else if (WEXITSTATUS(status) != 0)
		rc = tend_error_set(TEND_ERROR, "exit status %d%s%s",
		    WEXITSTATUS(status), cap.len ? ": " : "", cap.ptr);
	else
		rc = 0;
	if (err)
		tend_buf_put(err, cap.ptr, cap.len);
	tend_buf_release(&cap);
	return rc;
}
