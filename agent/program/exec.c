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
#include <spawn.h>
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

struct job {
	const struct tend_exec *e;
	pid_t pid;
	int errfd;	  /* -1 once stderr is closed */
	uint64_t deadline; /* 0: none */
	struct tend_buf cap;
	bool timed_out, exited;
	int status;
};

/* environ with the job's "KEY=VALUE" entries put over it; the strings
 * are borrowed, the array is the caller's to free */
static char **
job_env(const struct tend_exec *e)
{
	size_t n = 0, extra = 0;

	for (char **p = environ; p && *p; p++)
		n++;
	for (char *const *p = e->env; p && *p; p++)
		extra++;
	char **env = tend_xcalloc(n + extra + 1, sizeof *env);
	size_t m = 0;
	for (char **p = environ; p && *p; p++)
		env[m++] = *p;
	for (char *const *p = e->env; p && *p; p++) {
		size_t klen = strcspn(*p, "=");
		size_t i = 0;

		while (i < m && !(strncmp(env[i], *p, klen) == 0 &&
				    env[i][klen] == '='))
			i++;
		env[i] = *p;
		if (i == m)
			m++;
	}
	return env;
}

/*
 * posix_spawn, not fork: a forked copy of this process (threads walk,
 * pack and read beside the pass) holds every descriptor, the agent's
 * lock among them, until its execve. Killed in that window, tend left a
 * child in transit holding the lock of a dead agent. glibc's posix_spawn
 * runs the child on the parent's memory, blocked, straight to execve.
 */
static int
job_start(struct job *j)
{
	const struct tend_exec *e = j->e;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, def;
	int pipefd[2], rc;

	if (pipe2(pipefd, O_CLOEXEC) != 0)
		return tend_error_set(TEND_ERROR, "pipe: %s", strerror(errno));
	size_t nargs = 0;
	for (char *const *p = e->args; p && *p; p++)
		nargs++;
	char **argv = tend_xcalloc(nargs + 5, sizeof *argv);
	argv[0] = (char *)"sh";
	argv[1] = (char *)"-c";
	argv[2] = (char *)e->cmd;
	argv[3] = (char *)"tend";
	for (size_t i = 0; i < nargs; i++)
		argv[4 + i] = e->args[i];
	char **env = job_env(e);

	posix_spawn_file_actions_init(&fa);
	if (e->stdin_fd >= 0)
		posix_spawn_file_actions_adddup2(&fa, e->stdin_fd, 0);
	else
		posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY,
		    0);
	posix_spawn_file_actions_adddup2(&fa, e->stdout_fd, 1);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
	if (e->cwd)
		posix_spawn_file_actions_addchdir_np(&fa, e->cwd);
	/* its own process group (a timeout kills the whole pipeline), no
	 * blocked signal, SIGPIPE as a shell expects it */
	posix_spawnattr_init(&at);
	sigemptyset(&none);
	sigemptyset(&def);
	sigaddset(&def, SIGPIPE);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &def);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP |
	    POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	rc = posix_spawn(&j->pid, "/bin/sh", &fa, &at, argv, env);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	free(env);
	free(argv);
	close(pipefd[1]);
	if (rc != 0) {
		close(pipefd[0]);
		if (e->cwd && (rc == ENOENT || rc == ENOTDIR || rc == EACCES) &&
		    access(e->cwd, X_OK) != 0)
			return tend_error_set(TEND_ERROR, "cannot chdir to %s: %s",
			    e->cwd, strerror(rc));
		return tend_error_set(TEND_ERROR, "cannot run /bin/sh: %s",
		    strerror(rc));
	}
	j->errfd = pipefd[0];
	j->deadline = e->timeout_ms ? mono_ms() + e->timeout_ms : 0;
	return 0;
}

static void
job_message(struct job *j, int *rc, char **msg)
{
	struct tend_buf m = TEND_BUF_INIT;

	while (j->cap.len && j->cap.ptr[j->cap.len - 1] == '\n')
		j->cap.ptr[--j->cap.len] = '\0';
	const char *sep = j->cap.len ? ": " : "";
	if (j->timed_out)
		tend_buf_printf(&m, "timed out after %llu ms%s%s",
		    (unsigned long long)j->e->timeout_ms, sep, j->cap.ptr);
	else if (WIFSIGNALED(j->status))
		tend_buf_printf(&m, "killed by signal %d%s%s",
		    WTERMSIG(j->status), sep, j->cap.ptr);
	else if (WEXITSTATUS(j->status) != 0)
		tend_buf_printf(&m, "exit status %d%s%s",
		    WEXITSTATUS(j->status), sep, j->cap.ptr);
	*rc = m.len ? TEND_ERROR : 0;
	*msg = m.len ? tend_buf_detach(&m, NULL) : NULL;
	tend_buf_release(&m);
}

/* One step of the driver: read stderr, reap, enforce deadlines. */
static void
drive(struct job **run, size_t nrun)
{
	struct pollfd fds[64];
	size_t nfds = 0;
	uint64_t now = mono_ms();
	int wait = 1000;

	for (size_t i = 0; i < nrun; i++) {
		struct job *j = run[i];

		if (j->deadline && !j->exited && now >= j->deadline) {
			j->timed_out = true;
			kill(-j->pid, SIGKILL);
			kill(j->pid, SIGKILL);
		}
		if (j->deadline && !j->exited) {
			uint64_t left = j->deadline > now ? j->deadline - now : 0;
			if (left < (uint64_t)wait)
				wait = (int)left;
		}
		if (j->errfd >= 0 && nfds < 64)
			fds[nfds++] = (struct pollfd){.fd = j->errfd,
			    .events = POLLIN};
		else if (!j->exited)
			wait = wait > 5 ? 5 : wait; /* stderr closed: poll the pid */
	}
	if (nfds)
		poll(fds, nfds, wait);
	else if (wait > 0)
		poll(NULL, 0, wait);
	for (size_t i = 0; i < nrun; i++) {
		struct job *j = run[i];

		if (j->errfd >= 0) {
			char buf[4096];
			ssize_t n = read(j->errfd, buf, sizeof buf);

			if (n > 0) {
				if (j->cap.len < STDERR_MAX)
					tend_buf_put(&j->cap, buf,
					    (size_t)n < STDERR_MAX - j->cap.len
						? (size_t)n
						: STDERR_MAX - j->cap.len);
			} else if (n == 0 || errno != EAGAIN) {
				close(j->errfd);
				j->errfd = -1;
			}
		}
		if (!j->exited && waitpid(j->pid, &j->status, WNOHANG) == j->pid) {
			j->exited = true;
			/* what the shell left running goes with it */
			kill(-j->pid, SIGKILL);
		}
	}
}

void
tend_exec_batch(const struct tend_exec *e, size_t n, unsigned max, int *rcs,
    char **msgs)
{
	struct job *jobs = tend_xcalloc(n ? n : 1, sizeof *jobs);
	struct job **run = tend_xcalloc(n ? n : 1, sizeof *run);
	size_t next = 0, nrun = 0, done = 0;

	if (max == 0) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		max = cpus > 0 ? (unsigned)cpus : 1;
	}
	if (max > 64)
		max = 64;
	while (done < n) {
		while (nrun < max && next < n) {
			struct job *j = &jobs[next];

			j->e = &e[next];
			j->cap = (struct tend_buf)TEND_BUF_INIT;
			j->errfd = -1;
			if (job_start(j) != 0) {
				rcs[next] = TEND_ERROR;
				msgs[next] = tend_xstrdup(tend_error_last());
				done++;
			} else {
				fcntl(j->errfd, F_SETFL, O_NONBLOCK);
				run[nrun++] = j;
			}
			next++;
		}
		if (!nrun)
			continue;
		drive(run, nrun);
		for (size_t i = 0; i < nrun;) {
			struct job *j = run[i];

			if (j->exited && j->errfd < 0) {
				size_t idx = (size_t)(j - jobs);

				job_message(j, &rcs[idx], &msgs[idx]);
				tend_buf_release(&j->cap);
				run[i] = run[--nrun];
				done++;
			} else
				i++;
		}
	}
	free(run);
	free(jobs);
}

int
tend_exec_run(const struct tend_exec *e, struct tend_buf *err)
{
	int rc;
	char *msg = NULL;

	tend_exec_batch(e, 1, 1, &rc, &msg);
	if (rc)
		tend_error_set(rc, "%s", msg ? msg : "failed");
	if (err && msg)
		tend_buf_puts(err, msg);
	free(msg);
	return rc;
}
