/*
 * agent_int.h - what the agent's files share: struct agent and the
 * functions one file calls in another. Not installed; nothing here is
 * part of libtend's interface.
 *
 * The agent (tend watch) is one struct agent, one thread and one epoll
 * loop, in files of one concern each:
 *   watch.c   struct agent's life: set-up, reloading tend.conf and plugins,
 *             the main loop, the tear-down
 *   wtree.c   the inotify watches of the sources, whose events become
 *             dirty paths and full passes
 *   sched.c   when passes run: the debounce, run_passes and the engine's
 *             events during a pass, plan previews, deferred settles
 *   server.c  the control socket, both ends
 *
 * Every function declared here is TEND_HIDDEN: libtend.so exports what
 * watch.h declares, and none of these.
 */
#ifndef TEND_AGENT_INT_H
#define TEND_AGENT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "tend/buf.h"
#include "watch.h"

/* (another internal header may define it too, identically) */
#ifndef TEND_HIDDEN
#define TEND_HIDDEN __attribute__((visibility("hidden")))
#endif

#define MAX_CLIENTS 32

/* How long a deferred settle waits for the next pass to carry it
 * (TEND_SETTLE_MS overrides it: the tests hold one open). */
#define SETTLE_MS 2

/* ---- the agent ---- */

/* A watched directory (struct wdir, wtree.c): one inotify watch, and a
 * struct wref for each app whose source has the directory, with its path
 * there. a->dirs is sorted by wd. */
struct wref {
	size_t app;
	char *rel; /* the directory, relative to the app's source ("" = root) */
};

struct wdir {
	int wd;
	struct wref *refs;
	size_t nrefs;
};

/* Each app's queue, held deletes, plan and counts. */
struct appstate {
	char **dirty;
	size_t ndirty;
	bool full;
	bool polled; /* watch limit hit: rescanned periodically */
	/* its source directory is missing (deleted, unmounted): nothing
	 * watches it, so a full pass looks for it every 2 s until it is
	 * back (that pass's walk watches it again) */
	bool missing;
	uint64_t held;	/* source items whose deletes the brake holds */
	char **held_src; /* ...their paths: part of every partial pass */
	size_t nheld_src;
	bool approved;	/* `approve`: the next pass may delete them */
	char *plan;	/* the last "plan" event line, NULL if none */
	size_t nplan;
	size_t plan_queued; /* the "queued" it said */
	/* for the dashboard: counted on full passes, kept up to date by
	 * the incremental ones; -1 until known */
	int64_t components, states;
	uint64_t errors; /* failed actions and components in the last pass */
	/* after a pass with errors, a full pass again then (0: none), and
	 * the backoff that led there: 2 s, doubling to 5 min; 0 after a
	 * pass without */
	uint64_t retry_ms, retry_backoff;
	bool retrying; /* the pass under way is a retry (its failure backs
			* off further; an event's pass keeps the backoff) */
	char *last;	 /* its last pass_finished line (no newline), or NULL */
	/* push = REMOTE (sched.c): the child pushing now (0: none) and its
	 * pipe; the next try after a failure, and the backoff that led
	 * there (0 after a success) */
	int push_pid, push_fd;
	uint64_t push_started, push_due, push_backoff;
	bool push_again; /* a pass committed while it pushed */
};

/* A connection to the control socket (server.c). */
struct client {
	int fd;
	uint64_t shed; /* action events skipped while it lagged */
	bool subscribed;
	bool want_done; /* asked for a sync: told when it is over */
	bool passed;	/* ...its passes ran (its pushes may still run) */
	uint64_t seen; /* a->ticks when it connected or last sent */
	struct tend_buf in, out;
};

struct agent {
	struct tend_ws *ws;
	const struct tend_agent_opts *o;
	int ep, ino, sig, tmr, lst, lockfd;
	char *sock_path;
	struct wdir *dirs;
	size_t ndirs, cdirs;
	struct appstate *apps;
	size_t napps;
	struct client clients[MAX_CLIENTS];
	uint64_t ticks; /* orders client activity */
	uint64_t first_ms, last_ms; /* debounce window */
	uint64_t settle_ms;	    /* commit a deferred settle then */
	uint64_t poll_ms;	    /* next rescan of polled/missing apps */
	uint64_t settle_wait;	    /* SETTLE_MS */
	bool paused, stop, reload;
	bool forced; /* `sync` while paused: one round of passes anyway */
	uint64_t passes, overflows, start_ms, last_pass_ms;
	uint64_t repack_rows; /* target states at the last repack or start */
	char *config_error; /* why tend.conf was not loaded last, or NULL */
	time_t started; /* start_ms on the wall clock */
	uint64_t applied; /* actions applied since the start */
	bool limit_reported;
	struct tend_buf last_summary; /* the last pass_finished, no newline */
	int wd_conf;
	/* plugin files: the watch of each one's directory, and its name */
	int *pwd;
	char **pname;
	size_t npw;
	bool plugins_changed;
};

/* The walk of a full pass: each directory is watched just before it is
 * read, so the agent's start reads the tree once, not twice. */
struct walk_watch {
	struct agent *a;
	size_t app;
};

/* ---- watch.c: the agent's log, reloading tend.conf and plugins ---- */

/* The agent's log levels. Errors, warnings and notices are shown even
 * with -q; info (a line per pass) unless -q; debug with -v. */
enum log_level { ALOG_ERR, ALOG_WARN, ALOG_NOTICE, ALOG_INFO, ALOG_DEBUG };
/* A line on stderr: "tend watch: error: ..." (warning: ...; info and
 * notices plain); under systemd (stderr is the journal: JOURNAL_STREAM)
 * the level is the line's priority prefix instead ("<3>...") */
TEND_HIDDEN void logf_(struct agent *a, enum log_level level,
    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* tend.conf or a plugin changed: load them again (or restart), then
 * every watch anew (load_apps). */
TEND_HIDDEN void reload_config(struct agent *a);

/* ---- wtree.c: the inotify watches of the sources ---- */

TEND_HIDDEN size_t nwatches(struct agent *a);
/* The on_dir of a pass's walk (struct walk_watch). */
TEND_HIDDEN void on_walk_dir(void *arg, const char *rel);
/* Queue `rel` (a file, or "dir/" for a subtree) for app's next pass. */
TEND_HIDDEN void mark_dirty(struct agent *a, size_t app, const char *rel);
TEND_HIDDEN void unwatch_tree(struct agent *a, size_t app, const char *rel);
/* Read the inotify fd dry; then arm the debounce timer. */
TEND_HIDDEN void on_inotify(struct agent *a);

/* ---- sched.c: when passes run ---- */

TEND_HIDDEN uint64_t now_ms(void); /* CLOCK_MONOTONIC */
/* Something changed: open or extend the debounce window... */
TEND_HIDDEN void poke(struct agent *a);
/* ...and set the timerfd to its end (disarm it if none is open). */
TEND_HIDDEN void arm_timer(struct agent *a);
/* A window already over: passes as soon as the timer is armed. */
TEND_HIDDEN void due_now(struct agent *a);
TEND_HIDDEN void settle(struct agent *a);
TEND_HIDDEN int64_t app_unsettled(struct agent *a, size_t i);
TEND_HIDDEN void retry_plan(struct agent *a, size_t i, uint64_t failed);
TEND_HIDDEN bool retry_due(struct agent *a);
TEND_HIDDEN int retry_wait(const struct agent *a);
/* Store app i's last pass for tend status (in the deferred settle) */
TEND_HIDDEN void keep_last_pass(struct agent *a, size_t i);
/* The engine's event callback (tend_engine_subscribe). */
TEND_HIDDEN void engine_event(const struct tend_event *ev, void *arg);
/* A pass of each app with something queued (of every app if `all`). */
TEND_HIDDEN void run_passes(struct agent *a, bool all);
TEND_HIDDEN void plan_paused(struct agent *a);
/* push = REMOTE: pushes run in a child (a remote that does not answer
 * never holds the loop); a failed one is tried again with a capped
 * backoff. push_kick after app i's pass (or a sync: `now`), push_tick
 * when the loop wakes (due retries, overlong pushes), push_wait is how
 * long the loop may sleep for them (-1: no limit), push_fd_app the app
 * whose child's pipe `fd` is (-1: none), push_reap once it is readable,
 * push_stop_all before the apps go. */
TEND_HIDDEN void push_kick(struct agent *a, size_t i, bool now);
TEND_HIDDEN void push_tick(struct agent *a);
TEND_HIDDEN int push_wait(struct agent *a);
TEND_HIDDEN long push_fd_app(struct agent *a, int fd);
TEND_HIDDEN void push_reap(struct agent *a, size_t i);
TEND_HIDDEN void push_stop_all(struct agent *a);
/* A `tend sync`'s answer, once no push of it is under way. */
TEND_HIDDEN void sync_done_maybe(struct agent *a);

/* ---- server.c: the control socket ---- */

TEND_HIDDEN void client_drop(struct agent *a, struct client *c);
TEND_HIDDEN void client_send(struct agent *a, struct client *c,
    const char *line);
/* A line to every subscriber; `sheddable`: one a lagging client may
 * miss. */
TEND_HIDDEN void broadcast_ex(struct agent *a, const char *line,
    bool sheddable);
TEND_HIDDEN void broadcast(struct agent *a, const char *line);
TEND_HIDDEN bool anyone_listens(struct agent *a);
TEND_HIDDEN int listen_socket(struct agent *a);
TEND_HIDDEN void on_accept(struct agent *a);
TEND_HIDDEN void on_client(struct agent *a, struct client *c,
    uint32_t events);

#endif
