/*
 * watch.c - the agent (tend watch): catch up, then follow the sources.
 *
 * One thread, one epoll loop: inotify (this file and wtree.c are the only
 * users of <sys/inotify.h>), a signalfd, a timerfd for the debounce, the
 * control socket and its clients. Nothing polls: an idle agent sleeps in
 * epoll_wait.
 *
 * A pass's settling commit is deferred (tend_store_defer_settles): the
 * next pass's durable commit carries it, so passes that follow each other
 * pay one disk flush fewer. When no pass is due SETTLE_MS after one, when
 * a command comes, and at exit, it is committed on its own.
 *
 * This file is struct agent's life: the lock, the set-up, reloading
 * tend.conf and plugins, the main loop and the tear-down. The rest of the
 * agent works on the same struct agent (agent_int.h):
 *   wtree.c   the inotify watches of the sources
 *   server.c  the control socket, and its client side
 */
#define _GNU_SOURCE
#include "agent_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "inspect.h"
#include "json.h"
#include "tend/buf.h"
#include "tend/status.h"

uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void
tend_pass_json(struct tend_buf *b, const struct tend_pass *p)
{
	tend_buf_printf(b,
	    "\"time\": %lld, \"ms\": %llu, \"status\": %d, "
	    "\"created\": %llu, \"updated\": %llu, \"deleted\": %llu, "
	    "\"failed\": %llu, \"errors\": %llu, \"held_deletes\": %llu, "
	    "\"files\": %llu, \"read\": %llu",
	    p->time, (unsigned long long)p->ms, p->status,
	    (unsigned long long)p->created, (unsigned long long)p->updated,
	    (unsigned long long)p->deleted, (unsigned long long)p->failed,
	    (unsigned long long)p->errors,
	    (unsigned long long)p->held_deletes,
	    (unsigned long long)p->files, (unsigned long long)p->read);
	if (p->links_skipped)
		tend_buf_printf(b, ", \"symlinks_skipped\": %llu",
		    (unsigned long long)p->links_skipped);
	if (p->error) {
		tend_buf_puts(b, ", \"error\": ");
		tend_buf_json(b, p->error);
	}
}

void
tend_pass_text(struct tend_buf *b, const struct tend_pass *p)
{
	tend_buf_printf(b, "%llu created, %llu updated, %llu deleted",
	    (unsigned long long)p->created, (unsigned long long)p->updated,
	    (unsigned long long)p->deleted);
	if (p->failed)
		tend_buf_printf(b, ", %llu failed",
		    (unsigned long long)p->failed);
	if (p->errors)
		tend_buf_printf(b, ", %llu error%s",
		    (unsigned long long)p->errors, p->errors == 1 ? "" : "s");
	if (p->held_deletes)
		tend_buf_printf(b, ", %llu delete%s held",
		    (unsigned long long)p->held_deletes,
		    p->held_deletes == 1 ? "" : "s");
	if (p->links_skipped)
		tend_buf_printf(b, ", %llu symlink%s skipped",
		    (unsigned long long)p->links_skipped,
		    p->links_skipped == 1 ? "" : "s");
	tend_buf_printf(b, "; %llu file%s (%llu read) in %.2fs",
	    (unsigned long long)p->files, p->files == 1 ? "" : "s",
	    (unsigned long long)p->read, (double)p->ms / 1000);
}

void
tend_pass_from_json(struct tend_pass *p, const struct tend_json *j)
{
#define N(k) (uint64_t)tend_json_int(j, k, 0, TEND_JSON_INT_MAX, 0)
	*p = (struct tend_pass){
	    .time = tend_json_int(j, "time", 0, TEND_JSON_INT_MAX, 0),
	    .ms = N("ms"),
	    .status = (int)tend_json_int(j, "status", 0, 1, 0),
	    .created = N("created"), .updated = N("updated"),
	    .deleted = N("deleted"), .failed = N("failed"),
	    .errors = N("errors"), .held_deletes = N("held_deletes"),
	    .files = N("files"), .read = N("read"),
	    .links_skipped = N("symlinks_skipped"),
	    .error = tend_json_str(j, "error", NULL)};
#undef N
	/* a record of an older tend: seconds, no status */
	if (!tend_json_get(j, "ms"))
		p->ms = (uint64_t)(tend_json_num(j, "seconds", 0) * 1000);
	if (!tend_json_get(j, "status"))
		p->status = p->failed || p->errors || p->held_deletes;
}

/* How long a deferred settle waits for the next pass to carry it
 * (TEND_SETTLE_MS overrides it: the tests hold one open). */
#define SETTLE_MS 2

void
logf_(struct agent *a, int level, const char *fmt, ...)
{
	va_list ap;

	if (level > a->o->verbose)
		return;
	fputs("tend watch: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Commit the deferred settle of the last pass, if one is open. A failure
 * leaves its records pending: the next pass re-applies them. */
void
settle(struct agent *a)
{
	struct tend_store *st = tend_engine_store(a->ws->eng);

	a->settle_ms = 0;
	if (tend_store_settle_pending(st) && tend_store_settle_flush(st) != 0)
		logf_(a, 0, "%s", tend_error_last());
}

void
poke(struct agent *a)
{
	uint64_t now = now_ms();

	if (!a->first_ms)
		a->first_ms = now;
	a->last_ms = now;
}

void
arm_timer(struct agent *a)
{
	struct itimerspec it = {0};

	if (a->first_ms) {
		uint64_t due = a->last_ms + a->ws->cfg.debounce_ms;
		uint64_t cap = a->first_ms + a->ws->cfg.max_delay_ms;
		uint64_t now = now_ms();

		if (cap < due)
			due = cap;
		uint64_t wait = due > now ? due - now : 0;
		/* 0 would disarm: at least 1 ns */
		it.it_value.tv_sec = (time_t)(wait / 1000);
		it.it_value.tv_nsec = (long)(wait % 1000) * 1000000 + 1;
	}
	timerfd_settime(a->tmr, 0, &it, NULL);
}

void
due_now(struct agent *a)
{
	poke(a);
	a->first_ms = a->last_ms = 1;
}

/* ---- passes ---- */

struct pass_ctx {
	struct agent *a;
	uint64_t created, updated, deleted, failed, errors;
	char *last_err; /* the log says why, once per reason in a row */
	bool preview;		/* collecting a plan */
	/* the plan's actions: JSON members, and whether each is a delete */
	char **plan;
	bool *plan_del;
	size_t nplan;
};

/* The fields every action event has: what, where, who declared it and
 * why - the dashboard's provenance. */
static void
action_fields(struct tend_buf *b, const struct tend_event *ev)
{
	struct tend_buf t = TEND_BUF_INIT;

	tend_buf_puts(b, "\"app\": ");
	tend_buf_json(b, ev->app);
	if (ev->provider) {
		tend_buf_printf(b, ", \"op\": \"%c\", \"provider\": ",
		    (char)ev->op);
		tend_buf_json(b, ev->provider);
		tend_buf_puts(b, ", \"key\": ");
		tend_buf_json(b, ev->key);
		tend_display_path(&t, ev->provider, ev->key);
		tend_buf_puts(b, ", \"path\": ");
		tend_buf_json(b, t.ptr);
		tend_buf_reset(&t);
		tend_buf_printf(b, ", \"nprev\": %u, \"missing\": %s, "
				   "\"container\": %s",
		    ev->nprev, ev->prev_may_be_missing ? "true" : "false",
		    ev->container ? "true" : "false");
		if (ev->invalidation)
			tend_buf_printf(b, ", \"invalidation\": \"%s\"",
			    ev->invalidation == 1 ? "lossy" : "destructive");
	}
	if (ev->component) {
		tend_buf_puts(b, ", \"component\": ");
		tend_buf_json(b, ev->component);
		if (ev->invalidation)
			tend_buf_printf(&t, "container invalidated (%s)",
			    ev->invalidation == 1 ? "lossy" : "destructive");
		else if (tend_app_why(ev->component, &t) != 0)
			tend_buf_puts(&t, "");
		tend_buf_puts(b, ", \"why\": ");
		tend_buf_json(b, t.ptr ? t.ptr : "");
	}
	tend_buf_release(&t);
}

/* The log says what failed and why (not only how many): a reason shared
 * by many entries (a refused commit) once. */
static void
pass_failure(struct pass_ctx *pc, const struct tend_event *ev)
{
	struct tend_buf path = TEND_BUF_INIT;
	const char *err = ev->error && *ev->error ? ev->error : "failed";

	if (pc->preview || (pc->last_err && strcmp(pc->last_err, err) == 0))
		return;
	free(pc->last_err);
	pc->last_err = tend_xstrdup(err);
	if (ev->kind == TEND_EV_ACTION_FAILED) {
		tend_display_path(&path, ev->provider, ev->key);
		logf_(pc->a, 0, "%s: %s: %s", ev->app, path.ptr, err);
	} else
		logf_(pc->a, 0, "%s: %s", ev->app, err);
	tend_buf_release(&path);
}

static void
on_engine_event(const struct tend_event *ev, void *arg)
{
	struct pass_ctx *pc = arg;
	struct tend_buf line = TEND_BUF_INIT;
	const char *name;

	if (!pc)
		return;
	switch (ev->kind) {
	case TEND_EV_ACTION_PLANNED:
		if (tend_event_is_refresh(ev) || ev->preview != pc->preview)
			return;
		if (pc->preview) {
			/* whether a delete is held is known after the pass */
			action_fields(&line, ev);
			pc->plan = tend_xrealloc(pc->plan,
			    (pc->nplan + 1) * sizeof *pc->plan);
			pc->plan_del = tend_xrealloc(pc->plan_del,
			    (pc->nplan + 1) * sizeof *pc->plan_del);
			pc->plan_del[pc->nplan] = ev->op == TEND_OP_DELETE;
			pc->plan[pc->nplan++] = tend_buf_detach(&line, NULL);
			return;
		}
		name = "action_pending";
		break;
	case TEND_EV_ACTION_APPLIED:
		if (tend_event_is_refresh(ev) || pc->preview)
			return;
		if (tend_event_counts(ev)) {
			if (ev->op == TEND_OP_CREATE)
				pc->created++;
			else if (ev->op == TEND_OP_UPDATE)
				pc->updated++;
			else
				pc->deleted++;
		}
		name = "action_applied";
		break;
	case TEND_EV_ACTION_FAILED:
		pc->failed++;
		pass_failure(pc, ev);
		name = "action_failed";
		break;
	case TEND_EV_COMPONENT_ERROR:
		pc->errors++;
		pass_failure(pc, ev);
		name = "error";
		break;
	default:
		return;
	}
	if (!anyone_listens(pc->a))
		return; /* counted; nobody to tell */
	tend_buf_printf(&line, "{\"event\": \"%s\", ", name);
	action_fields(&line, ev);
	if (ev->kind == TEND_EV_ACTION_FAILED ||
	    ev->kind == TEND_EV_COMPONENT_ERROR) {
		tend_buf_puts(&line, ", \"error\": ");
		tend_buf_json(&line, ev->error ? ev->error : "");
	}
	tend_buf_puts(&line, "}\n");
	/* per-action lines are what a lagging client loses first */
	broadcast_ex(pc->a, line.ptr, ev->kind == TEND_EV_ACTION_APPLIED ||
	    ev->kind == TEND_EV_ACTION_PLANNED);
	tend_buf_release(&line);
}

static struct pass_ctx *current_pass;

static void
engine_event(const struct tend_event *ev, void *arg)
{
	(void)arg;
	on_engine_event(ev, current_pass);
}

static void
plan_set(struct agent *a, size_t i, const char *actions, size_t n)
{
	struct appstate *s = &a->apps[i];
	struct tend_buf line = TEND_BUF_INIT;

	/* the queue goes with the plan: a dashboard shows both at once */
	size_t queued = s->ndirty + s->full;

	if (!n && !s->nplan && s->plan && queued == s->plan_queued)
		return; /* still nothing */
	tend_buf_puts(&line, "{\"event\": \"plan\", \"app\": ");
	tend_buf_json(&line, a->ws->cfg.apps[i].name);
	tend_buf_printf(&line, ", \"held\": %llu, \"queued\": %zu, "
			       "\"actions\": [%s]}\n",
	    (unsigned long long)s->held, queued, actions ? actions : "");
	free(s->plan);
	s->plan = tend_buf_detach(&line, NULL);
	s->nplan = n;
	s->plan_queued = queued;
	broadcast(a, s->plan);
}

/*
 * What the next pass of app i would do, without doing it: the queued
 * changes of a paused agent, or the deletes the brake holds back. A
 * preview pass (one write transaction, aborted) of the same paths, with
 * deletes allowed so the held ones are listed too, marked held.
 */
static void
plan_preview(struct agent *a, size_t i)
{
	struct appstate *s = &a->apps[i];
	struct tend_app_config *app = &a->ws->cfg.apps[i];
	struct pass_ctx pc = {.a = a, .preview = true};
	struct walk_watch ww = {a, i};
	struct tend_sync_opts o = {.preview = true, .allow_delete = true,
	    .on_dir = on_walk_dir, .dir_arg = &ww};
	struct tend_app_result res;
	struct tend_buf all = TEND_BUF_INIT;

	current_pass = &pc;
	if (s->full || s->polled || s->held)
		tend_app_sync(a->ws, app, &o, &res);
	else
		tend_app_sync_paths(a->ws, app, s->dirty, s->ndirty, &o, &res);
	current_pass = NULL;
	bool hold = res.brake && !a->o->allow_delete && !s->approved;
	for (size_t k = 0; k < pc.nplan; k++) {
		tend_buf_printf(&all, "%s{%s, \"held\": %s}", k ? ", " : "",
		    pc.plan[k], hold && pc.plan_del[k] ? "true" : "false");
		free(pc.plan[k]);
	}
	free(pc.plan);
	free(pc.plan_del);
	tend_app_result_finish(&res);
	plan_set(a, i, all.ptr, pc.nplan);
	tend_buf_release(&all);
}

static int load_apps(struct agent *a);

static void
reload_config(struct agent *a)
{
	struct tend_buf err = TEND_BUF_INIT;

	a->reload = false;
	if (a->plugins_changed && a->o->restart) {
		/* a connector's code lives in the engine's handlers: the
		 * agent starts again on the new file */
		struct tend_buf notes = TEND_BUF_INIT;

		if (tend_ws_connectors_changed(a->ws, &notes)) {
			logf_(a, 0, "a connector plugin changed: the agent "
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
			logf_(a, 1, "%d plugin(s) changed: loading them again", n);
		if (notes.len) {
			struct tend_buf line = TEND_BUF_INIT;

			logf_(a, 0, "%.*s", (int)notes.len - 1, notes.ptr);
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
	if (tend_ws_reload(a->ws, &err) != 0)
		logf_(a, 0, "tend.conf: keeping the previous config:\n%s",
		    err.ptr);
	/* an app gone from the config is not dropped behind the user's
	 * back: say so */
	for (size_t i = 0; i < nold; i++) {
		if (!tend_ws_app(a->ws, old[i])) {
			struct tend_buf line = TEND_BUF_INIT;

			logf_(a, 0, "app %s is no longer in tend.conf: its "
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

static void
run_passes(struct agent *a, bool all)
{
	a->first_ms = a->last_ms = 0;
	if (a->reload || a->plugins_changed) {
		reload_config(a);
		if (a->stop)
			return; /* restarting on a new connector plugin */
		all = true;
	}
	for (size_t i = 0; i < a->napps; i++) {
		struct appstate *s = &a->apps[i];
		struct tend_app_config *app = &a->ws->cfg.apps[i];
		struct pass_ctx pc = {.a = a};
		struct tend_app_result res;
		struct walk_watch ww = {a, i};
		struct tend_sync_opts o = {
		    .allow_delete = a->o->allow_delete || s->approved,
		    .on_dir = on_walk_dir, .dir_arg = &ww};
		struct tend_buf line = TEND_BUF_INIT;
		uint64_t t0 = now_ms();
		int rc;

		if (!all && !s->full && !s->ndirty)
			continue;
		tend_buf_puts(&line, "{\"event\": \"pass_started\", \"app\": ");
		tend_buf_json(&line, app->name);
		tend_buf_puts(&line, "}\n");
		broadcast(a, line.ptr);
		tend_buf_reset(&line);
		bool full = all || s->full || s->polled || s->approved ||
		    s->components < 0;
		current_pass = &pc;
		if (!full)
			/* held deletes stay held, and counted, in a pass about
			 * other paths (or apply, or go if they came back) */
			for (size_t k = 0; k < s->nheld_src; k++)
				mark_dirty(a, i, s->held_src[k]);
		full |= s->full;
		if (full)
			rc = tend_app_sync(a->ws, app, &o, &res);
		else
			rc = tend_app_sync_paths(a->ws, app, s->dirty, s->ndirty,
			    &o, &res);
		for (size_t k = 0; k < s->nheld_src; k++)
			free(s->held_src[k]);
		free(s->held_src);
		s->held_src = res.held_sources;
		s->nheld_src = res.nheld_sources;
		res.held_sources = NULL;
		res.nheld_sources = 0;
		current_pass = NULL;
		free(pc.last_err);
		a->passes++;
		a->applied += pc.created + pc.updated + pc.deleted;
		a->last_pass_ms = now_ms() - t0;
		for (size_t k = 0; k < s->ndirty; k++)
			free(s->dirty[k]);
		free(s->dirty);
		s->dirty = NULL;
		s->ndirty = 0;
		s->full = false;
		s->approved = false;
		s->held = res.held_deletes;
		s->errors = pc.failed + pc.errors;
		if (full) {
			/* counted when a status asks (a cursor over every
			 * state: not on the catch-up's path) */
			s->states = -1;
			/* the root, and one per source file (an aggregate
			 * is one for all of them) */
			s->components = 1 + (app->target == TEND_TARGET_FILE
				? 1 : (int64_t)res.files);
		} else if (s->states >= 0) {
			s->states += (int64_t)pc.created - (int64_t)pc.deleted;
			s->components += (int64_t)res.new_items -
			    (int64_t)res.gone_items;
		}
		if (rc)
			logf_(a, 0, "%s: %s", app->name, tend_error_last());
		struct tend_pass ps = {.time = (long long)time(NULL),
		    .ms = a->last_pass_ms, .status = rc ? 1 : 0,
		    .created = pc.created, .updated = pc.updated,
		    .deleted = pc.deleted, .failed = pc.failed,
		    .errors = pc.errors, .held_deletes = res.held_deletes,
		    .files = res.files, .read = res.hashed,
		    /* failed and errors count what the pass's own
		     * messages said; an error of the app is news */
		    .error = rc && (res.error || res.held_deletes ||
				       (!pc.failed && !pc.errors))
			? tend_error_last() : NULL};
		struct tend_buf pj = TEND_BUF_INIT;
		tend_pass_json(&pj, &ps);
		free(s->last);
		s->last = tend_xmalloc(pj.len + 3);
		snprintf(s->last, pj.len + 3, "{%s}", pj.ptr);
		tend_buf_puts(&line, "{\"event\": \"pass_finished\", \"app\": ");
		tend_buf_json(&line, app->name);
		tend_buf_printf(&line, ", \"seq\": %llu, %s}\n",
		    (unsigned long long)a->passes, pj.ptr);
		tend_buf_release(&pj);
		/* whole: cut short, it would not be JSON */
		tend_buf_reset(&a->last_summary);
		tend_buf_put(&a->last_summary, line.ptr, line.len - 1);
		if (a->o->verbose >= 1) {
			/* the foreground's one line per pass (logged before
			 * the event: who sees the event finds the line) */
			struct tend_buf text = TEND_BUF_INIT;
			char hms[16];
			time_t now = (time_t)ps.time;
			struct tm tm;

			localtime_r(&now, &tm);
			strftime(hms, sizeof hms, "%H:%M:%S", &tm);
			tend_pass_text(&text, &ps);
			logf_(a, 1, "%s %s: %s", hms, app->name, text.ptr);
			tend_buf_release(&text);
		}
		broadcast(a, line.ptr);
		tend_buf_release(&line);
		tend_app_result_finish(&res);
		/* what is left to do: the deletes held back, or nothing */
		if (s->held)
			plan_preview(a, i);
		else
			plan_set(a, i, NULL, 0);
	}
	if (tend_store_settle_pending(tend_engine_store(a->ws->eng)))
		a->settle_ms = now_ms() + a->settle_wait;
}

/* Paused: keep the plan of each app's queued changes up to date. */
static void
plan_paused(struct agent *a)
{
	if (a->reload || a->plugins_changed)
		reload_config(a);
	for (size_t i = 0; i < a->napps && !a->stop; i++) {
		struct appstate *s = &a->apps[i];

		if (s->full || s->ndirty)
			plan_preview(a, i);
	}
	a->first_ms = a->last_ms = 0;
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

/* `tend status` without an agent shows each app's last pass: the agent's
 * are kept when it stops (with its last settle: no flush of their own). */
static void
keep_last_passes(struct agent *a)
{
	for (size_t i = 0; i < a->napps; i++) {
		struct last_pass lp = {a->ws->cfg.apps[i].name, a->apps[i].last};

		if (lp.text && tend_store_write_settle(
				   tend_engine_store(a->ws->eng), put_last, &lp))
			logf_(a, 0, "%s: keeping its last pass: %s", lp.app,
			    tend_error_last());
	}
}

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
	logf_(&a, 1, "watching %zu directories for %zu apps", a.ndirs,
	    a.napps);
	if (o->ready_fd >= 0) {
		if (write(o->ready_fd, "ready\n", 6) < 0)
			logf_(&a, 1, "ready pipe: %s", strerror(errno));
		close(o->ready_fd);
	}
	while (!a.stop) {
		struct epoll_event evs[16];
		bool polled = false;

		for (size_t i = 0; i < a.napps; i++)
			polled |= a.apps[i].polled;
		int wait = polled ? 2000 : -1;
		if (a.settle_ms) {
			uint64_t now = now_ms();
			uint64_t left = a.settle_ms > now ? a.settle_ms - now : 0;

			if (wait < 0 || left < (uint64_t)wait)
				wait = left > 3600000 ? 3600000 : (int)left;
		}
		int n = epoll_wait(a.ep, evs, 16, wait);
		if (n < 0 && errno != EINTR)
			break;
		/* a pass due soon carries the settle; else commit it now */
		if (a.settle_ms && now_ms() >= a.settle_ms) {
			if (a.first_ms)
				a.settle_ms = 0; /* and sleep until that pass */
			else
				settle(&a);
		}
		if (n == 0 && polled) {
			for (size_t i = 0; i < a.napps; i++)
				a.apps[i].full |= a.apps[i].polled;
			run_passes(&a, false);
			continue;
		}
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
					a.forced = false;
					run_passes(&a, false);
					for (int k = 0; k < MAX_CLIENTS; k++) {
						struct client *c = &a.clients[k];

						if (c->fd >= 0 && c->want_done) {
							/* a `tend sync`: it
							 * reads the store next */
							settle(&a);
							c->want_done = false;
							client_send(&a, c,
							    "{\"event\": "
							    "\"sync_done\"}\n");
						}
					}
				}
				arm_timer(&a);
			} else if (evs[i].data.fd == a.lst) {
				on_accept(&a);
			} else if (evs[i].data.fd == o->stop_fd) {
				a.stop = true;
			} else {
				on_client(&a, evs[i].data.ptr, evs[i].events);
			}
		}
	}
	logf_(&a, 1, "stopping");
	keep_last_passes(&a);
	settle(&a);
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
			logf_(&a, 1, "lock: %s", strerror(errno));
		close(a.lockfd);
	}
	free(a.sock_path);
	tend_buf_release(&a.last_summary);
	return rc;
}
