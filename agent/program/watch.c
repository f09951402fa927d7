/*
 * watch.c - the agent (tend watch): catch up, then follow the sources.
 *
 * One thread, one epoll loop: inotify (this file and wtree.c are the only
 * users of <sys/inotify.h>), a signalfd, a timerfd for the debounce, the
 * control socket and its clients. Nothing polls: an idle agent sleeps in
 * epoll_wait.
 *
 * This file is struct agent's life: the lock, the set-up, reloading
 * tend.conf and plugins, the main loop and the tear-down. The rest of the
 * agent works on the same struct agent (agent_int.h):
 *   wtree.c   the inotify watches of the sources
 *   sched.c   the debounce, the passes, plans, deferred settles
 *   server.c  the control socket, and its client side
 */
#define _GNU_SOURCE
#include "agent_int.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "inspect.h"
#include "tend/buf.h"
#include "tend/status.h"

/* Is stderr the journal? systemd sets JOURNAL_STREAM to its device and
 * inode when it connects a service's stderr to journald. */
static bool
stderr_is_journal(void)
{
	static int known = -1;
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (known < 0)
		known = js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 &&
		    fstat(2, &st) == 0 && (unsigned long long)st.st_dev == dev &&
		    (unsigned long long)st.st_ino == ino;
	return known;
}

void
logf_(struct agent *a, enum log_level level, const char *fmt, ...)
{
	/* syslog priorities: err 3, warning 4, notice 5, info 6, debug 7 */
	static const int prio[] = {3, 4, 5, 6, 7};
	static const int verbosity[] = {0, 0, 0, 1, 2};
	va_list ap;

	if (verbosity[level] > a->o->verbose)
		return;
	if (stderr_is_journal())
		fprintf(stderr, "<%d>tend watch: ", prio[level]);
	else
		fprintf(stderr, "tend watch: %s", level == ALOG_ERR ? "error: "
		    : level == ALOG_WARN ? "warning: " : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* ---- reloading tend.conf and plugins ---- */

static int load_apps(struct agent *a);

void
reload_config(struct agent *a)
{
	struct tend_buf err = TEND_BUF_INIT;

	a->reload = false;
	if (a->plugins_changed && a->o->restart) {
		/* a connector's code lives in the engine's handlers: the
		 * agent starts again on the new file */
		struct tend_buf notes = TEND_BUF_INIT;

		if (tend_ws_connectors_changed(a->ws, &notes)) {
			logf_(a, ALOG_NOTICE, "a connector plugin changed: the agent "
				    "restarts to load it");
			*a->o->restart = true;
			a->stop = true;
			tend_buf_release(&notes);
			return;
		}
		tend_buf_release(&notes);
	}
	if (a->plugins_changed) {
		struct tend_buf notes = TEND_BUF_INIT;

		a->plugins_changed = false;
		int n = tend_ws_refresh_plugins(a->ws, &notes);
		if (n)
			logf_(a, ALOG_INFO, "%d plugin(s) changed: loading them again", n);
		if (notes.len) {
			struct tend_buf line = TEND_BUF_INIT;

			logf_(a, ALOG_ERR, "%.*s", (int)notes.len - 1, notes.ptr);
			tend_buf_puts(&line, "{\"event\": \"error\", \"error\": ");
			tend_buf_json(&line, notes.ptr);
			tend_buf_puts(&line, "}\n");
			broadcast(a, line.ptr);
			tend_buf_release(&line);
		}
		tend_buf_release(&notes);
	}
	size_t nold = a->ws->cfg.napps;
	char **old = tend_xcalloc(nold + 1, sizeof *old);
	for (size_t i = 0; i < nold; i++)
		old[i] = tend_xstrdup(a->ws->cfg.apps[i].name);
	free(a->config_error);
	a->config_error = NULL;
	if (tend_ws_reload(a->ws, &err) != 0) {
		/* one line: the log's, the status's (the dashboard shows it) */
		struct tend_buf one = TEND_BUF_INIT;

		for (size_t k = 0; k < err.len; k++) {
			if (err.ptr[k] != '\n')
				tend_buf_putc(&one, err.ptr[k]);
			else if (k + 1 < err.len)
				tend_buf_puts(&one, "; ");
		}
		a->config_error = tend_xstrdup(one.len ? one.ptr : "?");
		tend_buf_release(&one);
		logf_(a, ALOG_ERR, "tend.conf: keeping the previous config: %s",
		    a->config_error);
	}
	/* an app gone from the config is not dropped behind the user's
	 * back: say so */
	for (size_t i = 0; i < nold; i++) {
		if (!tend_ws_app(a->ws, old[i])) {
			struct tend_buf line = TEND_BUF_INIT;

			logf_(a, ALOG_WARN, "app %s is no longer in tend.conf: its "
				    "targets stay; tend drop %s removes them",
			    old[i], old[i]);
			tend_buf_puts(&line, "{\"event\": \"app_gone\", "
					     "\"app\": ");
			tend_buf_json(&line, old[i]);
			tend_buf_puts(&line, "}\n");
			broadcast(a, line.ptr);
			tend_buf_release(&line);
		}
		free(old[i]);
	}
	free(old);
	tend_buf_release(&err);
	load_apps(a);
}

/* ---- set-up ---- */

static int
take_lock(struct agent *a)
{
	char pid[32], held[64];
	int rc;

	/* flock goes with the process: a dead agent's lock is free, once
	 * what it left in transit has gone (tend_ws_agent_pid) */
	for (int tries = 0;; tries++) {
		rc = tend_ws_flock(a->ws, "agent.pid", false, held,
		    sizeof held, &a->lockfd);
		if (rc != TEND_EEXISTS || tries == 200 || atoi(held) <= 0 ||
		    kill(atoi(held), 0) == 0 || errno != ESRCH)
			break;
		usleep(10 * 1000);
	}
	if (rc == TEND_EEXISTS)
		return tend_error_set(TEND_EEXISTS,
		    "another agent (pid %d) runs for this workspace",
		    atoi(held));
	if (rc)
		return rc;
	snprintf(pid, sizeof pid, "%d\n", (int)getpid());
	if (ftruncate(a->lockfd, 0) != 0 ||
	    pwrite(a->lockfd, pid, strlen(pid), 0) < 0)
		return tend_error_set(TEND_ERROR, "lock: %s", strerror(errno));
	return 0;
}

static void
plugins_unwatch(struct agent *a)
{
	/* the kernel watches stay: a plugin's directory may be a source's
	 * too; events of a directory no longer listed are ignored */
	for (size_t i = 0; i < a->npw; i++)
		free(a->pname[i]);
	free(a->pwd);
	free(a->pname);
	a->pwd = NULL;
	a->pname = NULL;
	a->npw = 0;
}

/* Watch the directory of every plugin file: a rebuilt plugin is new
 * logic, loaded again and re-run like a config edit. */
static void
watch_plugins(struct agent *a)
{
	size_t n;
	char **files = tend_ws_plugin_files(a->ws, &n);

	plugins_unwatch(a);
	a->pwd = tend_xcalloc(n + 1, sizeof *a->pwd);
	a->pname = tend_xcalloc(n + 1, sizeof *a->pname);
	for (size_t i = 0; i < n; i++) {
		char *slash = strrchr(files[i], '/');

		*slash = '\0';
		int wd = inotify_add_watch(a->ino, files[i], IN_CLOSE_WRITE |
			IN_MOVED_TO | IN_ONLYDIR | IN_MASK_ADD);
		if (wd >= 0) {
			a->pwd[a->npw] = wd;
			a->pname[a->npw++] = tend_xstrdup(slash + 1);
		}
		free(files[i]);
	}
	free(files);
}

static void
apps_free(struct agent *a)
{
	push_stop_all(a);
	for (size_t i = 0; i < a->napps; i++) {
		for (size_t k = 0; k < a->apps[i].ndirty; k++)
			free(a->apps[i].dirty[k]);
		free(a->apps[i].dirty);
		for (size_t k = 0; k < a->apps[i].nheld_src; k++)
			free(a->apps[i].held_src[k]);
		free(a->apps[i].held_src);
		free(a->apps[i].plan);
		free(a->apps[i].last);
	}
	free(a->apps);
	a->apps = NULL;
	a->napps = 0;
}

static int
load_apps(struct agent *a)
{
	/* forget every watch and start again: simple and always right */
	for (size_t i = 0; i < a->ndirs; i++) {
		inotify_rm_watch(a->ino, a->dirs[i].wd);
		for (size_t k = 0; k < a->dirs[i].nrefs; k++)
			free(a->dirs[i].refs[k].rel);
		free(a->dirs[i].refs);
	}
	a->ndirs = 0;
	apps_free(a);
	a->napps = a->ws->cfg.napps;
	a->apps = tend_xcalloc(a->napps + 1, sizeof *a->apps);
	/* every app's next pass is a full one, whose walk watches each
	 * directory before reading it */
	for (size_t i = 0; i < a->napps; i++) {
		a->apps[i].full = true;
		a->apps[i].components = a->apps[i].states = -1;
	}
	/* IN_MASK_ADD: the root may be a source directory too, whose
	 * watch must keep its own events */
	a->wd_conf = inotify_add_watch(a->ino, a->ws->root,
	    IN_CLOSE_WRITE | IN_MOVED_TO | IN_ONLYDIR | IN_MASK_ADD);
	watch_plugins(a);
	return 0;
}

struct last_pass {
	const char *app, *text;
};

static int
put_last(struct tend_txn *txn, void *arg)
{
	const struct last_pass *lp = arg;
	char key[300];

	snprintf(key, sizeof key, "last/%s", lp->app);
	return tend_store_put(txn, TEND_T_META, key, strlen(key), lp->text,
	    strlen(lp->text));
}

/* `tend status` without an agent shows each app's last pass: the agent
 * keeps each in the store as the pass ends, with the pass's deferred
 * settle (no flush of its own), so that even after a kill -9 status shows
 * the agent's last settled pass, not an older one-shot sync's. */
void
keep_last_pass(struct agent *a, size_t i)
{
	struct last_pass lp = {a->ws->cfg.apps[i].name, a->apps[i].last};

	if (lp.text && tend_store_write_settle(tend_engine_store(a->ws->eng),
			   put_last, &lp))
		logf_(a, ALOG_WARN, "%s: keeping its last pass: %s", lp.app,
		    tend_error_last());
}

/* ---- the main loop ---- */

int
tend_agent_run(struct tend_ws *ws, const struct tend_agent_opts *o)
{
	struct agent a = {.ws = ws, .o = o, .lockfd = -1, .lst = -1,
	    .last_summary = TEND_BUF_INIT};
	sigset_t mask;
	int rc;

	for (int i = 0; i < MAX_CLIENTS; i++)
		a.clients[i].fd = -1;
	a.start_ms = now_ms();
	a.started = time(NULL);
	if ((rc = tend_ws_open(ws)) || (rc = take_lock(&a)) ||
	    (rc = tend_ws_lock(ws, "tend watch")) || (rc = listen_socket(&a)))
		goto out;
	a.repack_rows = tend_store_rows(tend_engine_store(ws->eng), TEND_T_ITEM);
	tend_store_defer_settles(tend_engine_store(ws->eng), true);
	const char *sw = getenv("TEND_SETTLE_MS");
	a.settle_wait = sw && *sw ? strtoull(sw, NULL, 10) : SETTLE_MS;
	tend_engine_subscribe(ws->eng,
	    TEND_EV_MASK(TEND_EV_ACTION_PLANNED) |
		TEND_EV_MASK(TEND_EV_ACTION_APPLIED) |
		TEND_EV_MASK(TEND_EV_ACTION_FAILED) |
		TEND_EV_MASK(TEND_EV_COMPONENT_ERROR),
	    engine_event, NULL);
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	a.sig = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	a.ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	a.tmr = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	a.ep = epoll_create1(EPOLL_CLOEXEC);
	if (a.sig < 0 || a.ino < 0 || a.tmr < 0 || a.ep < 0) {
		rc = tend_error_set(TEND_ERROR, "agent: %s", strerror(errno));
		goto out;
	}
	int fds[] = {a.sig, a.ino, a.tmr, a.lst, o->stop_fd};
	for (size_t i = 0; i < 5; i++) {
		struct epoll_event ev = {.events = EPOLLIN, .data.fd = fds[i]};
		if (fds[i] >= 0)
			epoll_ctl(a.ep, EPOLL_CTL_ADD, fds[i], &ev);
	}
	/* the catch-up pass's walk watches each directory just before it
	 * reads it: nothing falls between */
	load_apps(&a);
	run_passes(&a, true);
	logf_(&a, ALOG_INFO, "watching %zu director%s for %zu app%s", a.ndirs,
	    a.ndirs == 1 ? "y" : "ies", a.napps, a.napps == 1 ? "" : "s");
	if (o->ready_fd >= 0) {
		if (write(o->ready_fd, "ready\n", 6) < 0)
			logf_(&a, ALOG_WARN, "ready pipe: %s", strerror(errno));
		close(o->ready_fd);
	}
	while (!a.stop) {
		struct epoll_event evs[16];
		bool polled = false;

		for (size_t i = 0; i < a.napps; i++)
			polled |= a.apps[i].polled || a.apps[i].missing;
		/* a rescan every 2 s, whatever else wakes the loop (a
		 * settle, a push, events) */
		if (!polled)
			a.poll_ms = 0;
		else if (!a.poll_ms)
			a.poll_ms = now_ms() + 2000;
		int wait = -1;
		if (polled) {
			uint64_t now = now_ms();
			wait = a.poll_ms > now ? (int)(a.poll_ms - now) : 0;
		}
		if (a.settle_ms) {
			uint64_t now = now_ms();
			uint64_t left = a.settle_ms > now ? a.settle_ms - now : 0;

			if (wait < 0 || left < (uint64_t)wait)
				wait = left > 3600000 ? 3600000 : (int)left;
		}
		int pw = push_wait(&a);
		if (pw >= 0 && (wait < 0 || pw < wait))
			wait = pw;
		int rw = a.paused ? -1 : retry_wait(&a);
		if (rw >= 0 && (wait < 0 || rw < wait))
			wait = rw;
		int n = epoll_wait(a.ep, evs, 16, wait);
		if (n < 0 && errno != EINTR)
			break;
		push_tick(&a);
		/* a pass due soon carries the settle; else commit it now */
		if (a.settle_ms && now_ms() >= a.settle_ms) {
			if (a.first_ms)
				a.settle_ms = 0; /* and sleep until that pass */
			else
				settle(&a);
		}
		if (polled && now_ms() >= a.poll_ms) {
			for (size_t i = 0; i < a.napps; i++)
				a.apps[i].full |= a.apps[i].polled ||
				    a.apps[i].missing;
			run_passes(&a, false);
			a.poll_ms = now_ms() + 2000;
		}
		/* apps left with failures: their retry */
		if (!a.paused && retry_due(&a))
			run_passes(&a, false);
		for (int i = 0; i < n; i++) {
			if (evs[i].data.fd == a.sig) {
				struct signalfd_siginfo si;

				while (read(a.sig, &si, sizeof si) == sizeof si) {
					if (si.ssi_signo == SIGHUP) {
						a.reload = true;
						poke(&a);
						a.first_ms = a.last_ms = 1;
						arm_timer(&a);
					} else
						a.stop = true;
				}
			} else if (evs[i].data.fd == a.ino) {
				on_inotify(&a);
			} else if (evs[i].data.fd == a.tmr) {
				uint64_t x;

				if (read(a.tmr, &x, sizeof x) < 0 && errno != EAGAIN)
					break;
				if (a.paused && !a.forced && !a.stop)
					plan_paused(&a);
				else if (!a.stop) {
					bool asked = false;

					a.forced = false;
					run_passes(&a, false);
					/* a `tend sync` pushes what waits,
					 * and hears once that is over too */
					for (int k = 0; k < MAX_CLIENTS; k++) {
						struct client *c = &a.clients[k];

						c->passed = c->fd >= 0 &&
						    c->want_done;
						asked |= c->passed;
					}
					for (size_t k = 0; asked && k < a.napps;
					     k++)
						if (!a.apps[k].push_pid)
							push_kick(&a, k, true);
					sync_done_maybe(&a);
				}
				arm_timer(&a);
			} else if (evs[i].data.fd == a.lst) {
				on_accept(&a);
			} else if (evs[i].data.fd == o->stop_fd) {
				a.stop = true;
			} else if (push_fd_app(&a, evs[i].data.fd) >= 0) {
				push_reap(&a,
				    (size_t)push_fd_app(&a, evs[i].data.fd));
			} else {
				on_client(&a, evs[i].data.ptr, evs[i].events);
			}
		}
	}
	logf_(&a, ALOG_INFO, "stopping");
	settle(&a); /* (each app's last pass with it) */
	rc = 0;
out:
	for (int i = 0; i < MAX_CLIENTS; i++)
		if (a.clients[i].fd >= 0)
			client_drop(&a, &a.clients[i]);
	if (a.sock_path)
		unlink(a.sock_path);
	for (size_t i = 0; i < a.ndirs; i++) {
		for (size_t k = 0; k < a.dirs[i].nrefs; k++)
			free(a.dirs[i].refs[k].rel);
		free(a.dirs[i].refs);
	}
	free(a.dirs);
	apps_free(&a);
	plugins_unwatch(&a);
	int fds2[] = {a.sig, a.ino, a.tmr, a.ep, a.lst};
	for (size_t i = 0; i < 5; i++)
		if (fds2[i] > 0)
			close(fds2[i]);
	if (a.lockfd >= 0) {
		if (rc != TEND_EEXISTS && ftruncate(a.lockfd, 0) != 0)
			logf_(&a, ALOG_ERR, "lock: %s", strerror(errno));
		close(a.lockfd);
	}
	free(a.sock_path);
	free(a.config_error);
	tend_buf_release(&a.last_summary);
	return rc;
}
