/*
 * sched.c - the agent's scheduler: when passes run, and what they say.
 *
 * What changes (wtree.c) and what is asked (server.c) poke a debounce
 * window: the timerfd fires debounce_ms after the last change, or
 * max_delay_ms after the first, and the main loop (watch.c) calls
 * run_passes: a pass of each app with something queued, incremental over
 * its dirty paths or a full one. A paused agent previews them instead
 * (plan_paused): plan events list what they would do. The engine's events
 * during a pass are counted for its pass_finished event and broadcast to
 * the subscribers.
 *
 * A pass's settling commit is deferred (tend_store_defer_settles): the
 * next pass's durable commit carries it, so passes that follow each other
 * pay one disk flush fewer. When no pass is due SETTLE_MS after one, when
 * a command comes, and at exit, it is committed on its own.
 *
 * One pass's report (struct tend_pass, watch.h) as JSON and as text is
 * here too: tend sync and tend status speak the same vocabulary.
 */
#define _GNU_SOURCE
#include "agent_int.h"
#include "pass.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "inspect.h"
#include "json.h"
#include "tend/status.h"

/* ---- one pass's report ---- */

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
	if (p->forgotten)
		tend_buf_printf(b, ", \"forgotten\": %llu",
		    (unsigned long long)p->forgotten);
	if (p->adopted)
		tend_buf_printf(b, ", \"adopted\": %llu",
		    (unsigned long long)p->adopted);
	if (p->verified)
		tend_buf_printf(b, ", \"verified\": %llu",
		    (unsigned long long)p->verified);
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
	if (p->forgotten)
		tend_buf_printf(b, ", %llu forgotten (no longer tracked: left as "
				   "%s)", (unsigned long long)p->forgotten,
		    p->forgotten == 1 ? "it was" : "they were");
	if (p->adopted)
		tend_buf_printf(b, ", %llu adopted (%s the declared content "
				   "already: tend's now)",
		    (unsigned long long)p->adopted,
		    p->adopted == 1 ? "it held" : "they held");
	if (p->verified)
		tend_buf_printf(b, ", %llu verified (as recorded: not "
				   "written)", (unsigned long long)p->verified);
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
	    .forgotten = N("forgotten"), .adopted = N("adopted"),
	    .verified = N("verified"), .error = tend_json_str(j, "error", NULL)};
#undef N
	/* a record of an older tend: seconds, no status */
	if (!tend_json_get(j, "ms"))
		p->ms = (uint64_t)(tend_json_num(j, "seconds", 0) * 1000);
	if (!tend_json_get(j, "status"))
		p->status = p->failed || p->errors || p->held_deletes;
}

/* ---- the debounce window, and the deferred settle ---- */

uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
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

#define RETRY_FIRST_MS 2000
#define RETRY_MAX_MS (5 * 60 * 1000)

/* Commit the deferred settle of the last pass, if one is open. A failure
 * leaves its records pending: the next pass re-applies them. */
void
settle(struct agent *a)
{
	struct tend_store *st = tend_engine_store(a->ws->eng);

	uint64_t b0, b1;
	int rc;

	a->settle_ms = 0;
	if (tend_store_settle_pending(st) && tend_store_settle_flush(st) != 0) {
		logf_(a, ALOG_ERR, "%s", tend_error_last());
		/* the settle is lost: its records are pending again, and
		 * only a pass applies them (retried as a failure is) */
		for (size_t i = 0; i < a->napps; i++) {
			struct appstate *s = &a->apps[i];

			if (!s->retry_backoff)
				s->retry_backoff = RETRY_FIRST_MS;
			if (!s->retry_ms)
				s->retry_ms = now_ms() + s->retry_backoff;
		}
	}
	/* a store that doubled (the first pass of a new workspace) is
	 * rewritten in key order, a third smaller */
	if ((rc = tend_ws_repack(a->ws, a->repack_rows, false, &b0, &b1)) < 0)
		logf_(a, ALOG_ERR, "%s", tend_error_last());
	else if (rc > 0)
		logf_(a, ALOG_INFO, "store rewritten in key order: %.1f MB, "
		    "was %.1f MB", b1 / 1e6, b0 / 1e6);
	if (rc != 0)
		a->repack_rows = tend_store_rows(st, TEND_T_ITEM);
}

/* The app's unsettled states (the store's counters), or -1 if unknown */
int64_t
app_unsettled(struct agent *a, size_t i)
{
	struct tend_txn *txn;
	struct tend_app_counts ac;
	int64_t n = -1;

	if (tend_store_read_begin(tend_engine_store(a->ws->eng), &txn))
		return -1;
	if (tend_store_counts_valid(txn) &&
	    tend_engine_counts(a->ws->eng, txn, a->ws->cfg.apps[i].name,
		&ac) == 0)
		n = (int64_t)ac.pending;
	tend_store_read_end(txn);
	return n;
}

/*
 * After a pass: an app left with failed actions (this pass's, or
 * unsettled states an earlier one left) gets a full pass again later,
 * 2 s after the first failure, then twice as long each time up to 5
 * min: a target that was read-only, full or locked for a while catches
 * up once it is not, without a change of its sources. A declaration's
 * error (an exec that failed on its input) is not retried: its source's
 * next change runs it again.
 */

void
retry_plan(struct agent *a, size_t i, uint64_t failed)
{
	struct appstate *s = &a->apps[i];

	bool retried = s->retrying;

	s->retrying = false;
	if (!failed && app_unsettled(a, i) <= 0) {
		s->retry_ms = s->retry_backoff = 0;
		return;
	}
	/* (a pass an event started keeps the backoff: a burst of events
	 * during a full disk, a pass each, ran it up to 5 min in 3 s) */
	s->retry_backoff = !s->retry_backoff ? RETRY_FIRST_MS
	    : !retried ? s->retry_backoff
	    : s->retry_backoff * 2 > RETRY_MAX_MS ? RETRY_MAX_MS
	    : s->retry_backoff * 2;
	s->retry_ms = now_ms() + s->retry_backoff;
}

/* The apps whose retry is due get a full pass: true if one did */
bool
retry_due(struct agent *a)
{
	uint64_t now = now_ms();
	bool due = false;

	for (size_t i = 0; i < a->napps; i++)
		if (a->apps[i].retry_ms && now >= a->apps[i].retry_ms) {
			a->apps[i].retry_ms = 0;
			a->apps[i].retrying = true;
			a->apps[i].full = true;
			due = true;
		}
	return due;
}

/* ms until the next retry (-1: none) */
int
retry_wait(const struct agent *a)
{
	uint64_t now = now_ms(), first = 0;

	for (size_t i = 0; i < a->napps; i++)
		if (a->apps[i].retry_ms &&
		    (!first || a->apps[i].retry_ms < first))
			first = a->apps[i].retry_ms;
	if (!first)
		return -1;
	return first > now ? (int)(first - now) : 0;
}

/* ---- the engine's events during a pass ---- */

struct pass_ctx {
	struct agent *a;
	uint64_t created, updated, deleted, forgotten, adopted, verified, failed,
	    errors;
	char *last_err; /* the log says why, once per reason in a row */
	char *first_err; /* the pass's first failure, for status */
	/* what sinks said beside applied actions (a tag caught up, a
	 * directory kept): JSON strings for the pass_finished line, which
	 * a tend sync handed to the agent prints */
	struct tend_buf notes;
	unsigned nnotes;
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
		if (ev->forgotten)
			tend_buf_puts(b, ", \"forgotten\": true");
		if (ev->adopted)
			tend_buf_puts(b, ", \"adopted\": true");
		if (ev->unchanged)
			tend_buf_puts(b, ", \"verified\": true");
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
	const char *msg = ev->kind == TEND_EV_ACTION_APPLIED ? ev->note
							    : ev->error;
	const char *err = msg && *msg ? msg : "failed";

	if (pc->preview || (pc->last_err && strcmp(pc->last_err, err) == 0))
		return;
	free(pc->last_err);
	pc->last_err = tend_xstrdup(err);
	if (ev->kind != TEND_EV_COMPONENT_ERROR) {
		tend_display_path(&path, ev->provider, ev->key);
		logf_(pc->a, 0, "%s: %s: %s", ev->app, path.ptr, err);
	} else
		logf_(pc->a, 0, "%s: %s", ev->app, err);
	if (!pc->first_err)
		pc->first_err = tend_event_failure(ev);
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
		if (ev->note && !pc->preview) {
			struct tend_buf p = TEND_BUF_INIT;

			if (ev->warn) {
				/* applied; something beside it failed */
				pc->errors++;
				pass_failure(pc, ev);
			} else {
				tend_display_path(&p, ev->provider, ev->key);
				logf_(pc->a, 0, "%s: %s: note: %s", ev->app,
				    p.ptr, ev->note);
				if (pc->nnotes++ < 16) {
					struct tend_buf m = TEND_BUF_INIT;

					tend_buf_printf(&m, "%s: note: %s", p.ptr,
					    ev->note);
					tend_buf_puts(&pc->notes,
					    pc->notes.len ? ", " : "");
					tend_buf_json(&pc->notes, m.ptr);
					tend_buf_release(&m);
				}
			}
			tend_buf_release(&p);
		}
		/* said as tend sync says it: not an entry, not counted */
		if (ev->container && ev->invalidation == 2 && !pc->preview) {
			struct tend_buf p = TEND_BUF_INIT;

			tend_display_path(&p, ev->provider, ev->key);
			logf_(pc->a, 0, "%s: ! destructive %s (rebuilt from the "
			    "declared entries only: what else was in it is "
			    "removed)", ev->app, p.ptr);
			tend_buf_release(&p);
		}
		if (tend_event_is_refresh(ev) || pc->preview)
			return;
		if (tend_event_counts(ev)) {
			if (ev->unchanged)
				pc->verified++;
			else if (ev->adopted)
				pc->adopted++;
			else if (ev->op == TEND_OP_CREATE)
				pc->created++;
			else if (ev->op == TEND_OP_UPDATE)
				pc->updated++;
			else if (ev->forgotten)
				pc->forgotten++;
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
	} else if (ev->note) {
		tend_buf_printf(&line, ", \"%s\": ", ev->warn ? "error"
							      : "note");
		tend_buf_json(&line, ev->note);
	}
	tend_buf_puts(&line, "}\n");
	/* per-action lines are what a lagging client loses first */
	broadcast_ex(pc->a, line.ptr, ev->kind == TEND_EV_ACTION_APPLIED ||
	    ev->kind == TEND_EV_ACTION_PLANNED);
	tend_buf_release(&line);
}

static struct pass_ctx *current_pass;

void
engine_event(const struct tend_event *ev, void *arg)
{
	(void)arg;
	on_engine_event(ev, current_pass);
}

/* ---- plans ---- */

/* A plan event lists this many actions, and counts the rest: one of
 * 3000 held deletes (450 KB) was past what a client may have unread, and
 * every dashboard and sync that asked was dropped */
#define PLAN_LIST_MAX 500

static void
plan_set(struct agent *a, size_t i, const char *actions, size_t n,
    size_t more, size_t more_held)
{
	struct appstate *s = &a->apps[i];
	struct tend_buf line = TEND_BUF_INIT;

	/* the queue goes with the plan: a dashboard shows both at once */
	size_t queued = s->ndirty + s->full;

	if (!n && !s->nplan && s->plan && queued == s->plan_queued)
		return; /* still nothing */
	tend_buf_puts(&line, "{\"event\": \"plan\", \"app\": ");
	tend_buf_json(&line, a->ws->cfg.apps[i].name);
	tend_buf_printf(&line, ", \"held\": %llu, \"queued\": %zu, ",
	    (unsigned long long)s->held, queued);
	if (more)
		tend_buf_printf(&line, "\"more\": %zu, \"more_held\": %zu, ",
		    more, more_held);
	tend_buf_printf(&line, "\"actions\": [%s]}\n", actions ? actions : "");
	free(s->plan);
	s->plan = tend_buf_detach(&line, NULL);
	s->nplan = n + more;
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
	struct pass_ctx pc = {.a = a, .notes = TEND_BUF_INIT, .preview = true};
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
	size_t more = 0, more_held = 0;
	for (size_t k = 0; k < pc.nplan; k++) {
		bool held = hold && pc.plan_del[k];

		if (k < PLAN_LIST_MAX)
			tend_buf_printf(&all, "%s{%s, \"held\": %s}",
			    k ? ", " : "", pc.plan[k], held ? "true" : "false");
		else {
			more++;
			more_held += held;
		}
		free(pc.plan[k]);
	}
	free(pc.plan);
	free(pc.plan_del);
	tend_app_result_finish(&res);
	plan_set(a, i, all.ptr, pc.nplan - more, more, more_held);
	tend_buf_release(&all);
}

/* ---- passes ---- */

void
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
		struct pass_ctx pc = {.a = a, .notes = TEND_BUF_INIT};
		struct tend_app_result res;
		struct walk_watch ww = {a, i};
		struct tend_sync_opts o = {
		    .allow_delete = a->o->allow_delete || s->approved,
		    .agent = true, .on_dir = on_walk_dir, .dir_arg = &ww};
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
		char was[13];
		if (tend_app_ref_rewritten(a->ws, app, was)) {
			logf_(a, ALOG_WARN, "%s: %s no longer holds %s, tend's "
			    "last commit on it (reset or rewritten by hand?): "
			    "this pass verifies every entry", app->name,
			    app->ref, was);
			o.verify = true;
			full = true;
		}
		current_pass = &pc;
		if (!full)
			/* held deletes stay held, and counted, in a pass about
			 * other paths (or apply, or go if they came back) */
			for (size_t k = 0; k < s->nheld_src; k++)
				mark_dirty(a, i, s->held_src[k]);
		o.held_included = !full;
		full |= s->full;
		if (full)
			rc = tend_app_sync(a->ws, app, &o, &res);
		else
			rc = tend_app_sync_paths(a->ws, app, s->dirty, s->ndirty,
			    &o, &res);
		/* a source still missing: said when it went, not every 2 s
		 * (86,400 lines a day in the journal) */
		bool again = full && res.source_missing && s->missing;
		if (full) {
			/* (a partial pass does not look at the root). Missing
			 * when the pass began counts too: a directory made
			 * since then was not walked, so nothing watches it */
			char *src = path_join(a->ws->root, app->source);
			struct stat st;

			s->missing = res.source_missing || stat(src, &st) != 0 ||
			    !S_ISDIR(st.st_mode);
			free(src);
			/* a source moved away keeps its watches: its
			 * events are not the source's any more */
			if (s->missing)
				unwatch_tree(a, i, "");
		}
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
		/* an error of the app itself (a commit of the store that
		 * failed: a full disk; not held deletes nor a missing source)
		 * is counted and retried too (a new user's trial: the agent
		 * never caught up once the disk had room again) */
		bool app_err = rc && !res.held_deletes && !res.source_missing &&
		    !pc.failed && !pc.errors;
		/* a missing source is not retried (its return is an
		 * event), but it is the pass's error: status, the apps
		 * panel and the Pending panel say so (a new user's trial:
		 * "errors 0 ... targets match the sources") */
		s->errors = pc.failed + pc.errors + app_err +
		    (rc && res.source_missing);
		retry_plan(a, i, pc.failed + app_err);
		if (full && res.source_missing) {
			/* nothing was walked: what is tracked stays */
		} else if (full) {
			/* counted when a status asks (a cursor over every
			 * state: not on the catch-up's path) */
			s->states = -1;
			/* the root, and one per source file (an aggregate
			 * is one for all of them) */
			s->components = 1 + (app->target == TEND_TARGET_FILE
				? 1 : (int64_t)res.files);
		} else if (s->states >= 0) {
			s->states += (int64_t)(pc.created + pc.adopted) -
			    (int64_t)(pc.deleted + pc.forgotten);
			s->components += (int64_t)res.new_items -
			    (int64_t)res.gone_items;
		}
		if (rc && !again) {
			/* most messages name their app already */
			const char *m = tend_error_last();
			size_t an = strlen(app->name);
			bool named = strncmp(m, app->name, an) == 0 &&
			    m[an] == ':';

			logf_(a, ALOG_ERR, "%s%s%s", named ? "" : app->name,
			    named ? "" : ": ", m);
		}
		struct tend_pass ps = {.time = (long long)time(NULL),
		    .ms = a->last_pass_ms, .status = rc ? 1 : 0,
		    .created = pc.created, .updated = pc.updated,
		    .deleted = pc.deleted, .forgotten = pc.forgotten,
		    .adopted = pc.adopted, .verified = pc.verified,
		    .failed = pc.failed,
		    .errors = pc.errors, .held_deletes = res.held_deletes,
		    .files = res.files, .read = res.hashed,
		    .links_skipped = res.links_skipped,
		    /* failed and errors count what the pass's own
		     * messages said; an error of the app is news */
		    .error = rc && (res.error || res.held_deletes ||
				       (!pc.failed && !pc.errors))
			? tend_error_last() : pc.first_err};
		struct tend_buf pj = TEND_BUF_INIT;
		tend_pass_json(&pj, &ps);
		free(s->last);
		s->last = tend_xmalloc(pj.len + 3);
		snprintf(s->last, pj.len + 3, "{%s}", pj.ptr);
		keep_last_pass(a, i);
		tend_buf_puts(&line, "{\"event\": \"pass_finished\", \"app\": ");
		tend_buf_json(&line, app->name);
		tend_buf_printf(&line, ", \"seq\": %llu, %s",
		    (unsigned long long)a->passes, pj.ptr);
		if (pc.notes.len)
			tend_buf_printf(&line, ", \"notes\": [%s]", pc.notes.ptr);
		tend_buf_puts(&line, "}\n");
		tend_buf_release(&pj);
		tend_buf_release(&pc.notes);
		free(pc.first_err);
		/* whole: cut short, it would not be JSON */
		tend_buf_reset(&a->last_summary);
		tend_buf_put(&a->last_summary, line.ptr, line.len - 1);
		if (a->o->verbose >= 1 && !again) {
			/* the foreground's one line per pass (logged before
			 * the event: who sees the event finds the line) */
			struct tend_buf text = TEND_BUF_INIT;
			char hms[16];
			time_t now = (time_t)ps.time;
			struct tm tm;

			localtime_r(&now, &tm);
			strftime(hms, sizeof hms, "%H:%M:%S", &tm);
			tend_pass_text(&text, &ps);
			logf_(a, ALOG_INFO, "%s %s: %s", hms, app->name, text.ptr);
			tend_buf_release(&text);
		}
		broadcast(a, line.ptr);
		tend_buf_release(&line);
		tend_app_result_finish(&res);
		/* what is left to do: the deletes held back, or nothing */
		if (s->held)
			plan_preview(a, i);
		else
			plan_set(a, i, NULL, 0, 0, 0);
		/* push = REMOTE: what this pass committed (at once), or what
		 * an earlier run could not push (on its retry's time) */
		push_kick(a, i, pc.created + pc.updated + pc.deleted > 0);
	}
	if (tend_store_settle_pending(tend_engine_store(a->ws->eng)))
		a->settle_ms = now_ms() + a->settle_wait;
}

/* Paused: keep the plan of each app's queued changes up to date. */
void
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

/* ---- pushes ----
 *
 * A git app's push = REMOTE runs in a forked child, so a remote that
 * does not answer (libgit2 1.5 has no connect timeout) never holds the
 * loop: the child pushes (tend_app_push: fetch, merge and retry on a
 * rejection included), notes the outcome in STATE/push/APP, writes its
 * message down a pipe and exits; the loop reaps it when the pipe is
 * readable. The child closes the agent's own descriptors (its locks
 * among them: a child must never hold one; the socket, epoll...) and
 * dies with the agent (PR_SET_PDEATHSIG). It is forked only between passes,
 * when no other thread runs.
 *
 * A failure is tried again after 1 s, 2 s, 4 s... up to 5 min, each with
 * up to a quarter more of jitter; a success resets it, and a pass that
 * committed tries at once. Whether there is anything to push is git's
 * answer (ahead of the tracking ref), so a push a kill prevented is
 * found by the catch-up pass.
 */

#define PUSH_FIRST_MS 1000
#define PUSH_MAX_BACKOFF_MS (5 * 60 * 1000)
#define PUSH_MAX_MS (120 * 1000) /* a push still running then is killed */

static void
push_start(struct agent *a, size_t i)
{
	struct appstate *s = &a->apps[i];
	struct tend_app_config *app = &a->ws->cfg.apps[i];
	int fds[2];
	pid_t parent = getpid(), pid;

	if (pipe2(fds, O_CLOEXEC) != 0) {
		logf_(a, ALOG_ERR, "%s: push: %s", app->name, strerror(errno));
		return;
	}
	pid = fork();
	if (pid < 0) {
		logf_(a, ALOG_ERR, "%s: push: fork: %s", app->name,
		    strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return;
	}
	if (pid == 0) {
		sigset_t all;
		struct tend_buf out = TEND_BUF_INIT;
		int mine[] = {a->lockfd, a->ws->wlock - 1, a->lst, a->ep,
		    a->ino, a->sig, a->tmr};

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		/* the agent's own descriptors: its locks above all. Not
		 * every one: libgit2 may have pack files open, which a new
		 * file must not take the number of */
		for (size_t k = 0; k < sizeof mine / sizeof *mine; k++)
			if (mine[k] > 2)
				close(mine[k]);
		for (int k = 0; k < MAX_CLIENTS; k++)
			if (a->clients[k].fd > 2)
				close(a->clients[k].fd);
		for (size_t k = 0; k < a->napps; k++)
			if (a->apps[k].push_pid)
				close(a->apps[k].push_fd);
		close(fds[0]);
		sigemptyset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		signal(SIGPIPE, SIG_DFL);
		int rc = tend_app_push(a->ws, app);
		if (rc)
			tend_buf_puts(&out, tend_error_last());
		(void)!write(fds[1], out.ptr, out.len);
		_exit(rc ? 1 : 0);
	}
	close(fds[1]);
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = fds[0]};
	epoll_ctl(a->ep, EPOLL_CTL_ADD, fds[0], &ev);
	s->push_pid = (int)pid;
	s->push_fd = fds[0];
	s->push_started = now_ms();
	s->push_due = 0;
	s->push_again = false;
}

/* Is there anything to push? Asked of the local repository only. */
static bool
push_ahead(struct agent *a, size_t i)
{
	struct tend_push_status ps;
	bool ahead;

	tend_app_push_status(a->ws, &a->ws->cfg.apps[i], &ps);
	ahead = ps.configured && (!ps.known || ps.ahead > 0 || ps.error);
	tend_push_status_finish(&ps);
	return ahead;
}

void
push_kick(struct agent *a, size_t i, bool now)
{
	struct appstate *s = &a->apps[i];
	struct tend_app_config *app = &a->ws->cfg.apps[i];

	if (!app->push || app->target != TEND_TARGET_GIT)
		return;
	if (s->push_pid) {
		s->push_again = true;
		return;
	}
	/* waiting out a backoff: only new work, or a sync, goes first */
	if (s->push_due && !now)
		return;
	s->push_due = 0; /* (nothing left to push: no retry either) */
	if (push_ahead(a, i))
		push_start(a, i);
}

long
push_fd_app(struct agent *a, int fd)
{
	for (size_t i = 0; i < a->napps; i++)
		if (a->apps[i].push_pid && a->apps[i].push_fd == fd)
			return (long)i;
	return -1;
}

/* {"event": "push", "app": ..., "ok": ..., the push's status} */
static void
push_event(struct agent *a, size_t i, bool ok)
{
	struct tend_push_status ps;
	struct tend_buf line = TEND_BUF_INIT;

	tend_app_push_status(a->ws, &a->ws->cfg.apps[i], &ps);
	tend_buf_puts(&line, "{\"event\": \"push\", \"app\": ");
	tend_buf_json(&line, a->ws->cfg.apps[i].name);
	tend_buf_printf(&line, ", \"ok\": %s, \"retry_ms\": %llu, \"push\": ",
	    ok ? "true" : "false",
	    (unsigned long long)(a->apps[i].push_due
		    ? a->apps[i].push_due - now_ms() : 0));
	tend_push_status_json(&line, &ps);
	tend_buf_puts(&line, "}\n");
	broadcast(a, line.ptr);
	tend_buf_release(&line);
	tend_push_status_finish(&ps);
}

void
push_reap(struct agent *a, size_t i)
{
	struct appstate *s = &a->apps[i];
	const char *name = a->ws->cfg.apps[i].name;
	struct tend_buf msg = TEND_BUF_INIT;
	char buf[1024];
	ssize_t n;
	int st = 0;

	/* the child writes once, then exits: read to the end */
	while ((n = read(s->push_fd, buf, sizeof buf)) > 0 ||
	    (n < 0 && errno == EINTR))
		if (n > 0)
			tend_buf_put(&msg, buf, (size_t)n);
	epoll_ctl(a->ep, EPOLL_CTL_DEL, s->push_fd, NULL);
	close(s->push_fd);
	while (waitpid(s->push_pid, &st, 0) < 0 && errno == EINTR)
		;
	s->push_pid = 0;
	s->push_fd = -1;
	bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
	if (ok) {
		if (s->push_backoff)
			logf_(a, ALOG_NOTICE, "%s: pushed (the remote is back)",
			    name);
		s->push_backoff = 0;
		s->push_due = 0;
	} else {
		uint64_t b = s->push_backoff ? s->push_backoff * 2
					     : PUSH_FIRST_MS;

		if (b > PUSH_MAX_BACKOFF_MS)
			b = PUSH_MAX_BACKOFF_MS;
		s->push_backoff = b;
		s->push_due = now_ms() + b + (uint64_t)rand() % (b / 4 + 1);
		if (!msg.len)
			tend_buf_puts(&msg, WIFSIGNALED(st)
				? "push: killed (it ran too long)"
				: "push failed");
		logf_(a, ALOG_WARN, "%s: %s (the local commit is kept; "
				    "trying again in %llu s)",
		    name, msg.ptr,
		    (unsigned long long)((s->push_due - now_ms() + 999) / 1000));
	}
	push_event(a, i, ok);
	tend_buf_release(&msg);
	if (s->push_again) {
		s->push_again = false;
		push_kick(a, i, ok);
	}
	sync_done_maybe(a);
}

void
push_tick(struct agent *a)
{
	uint64_t now = now_ms();

	for (size_t i = 0; i < a->napps; i++) {
		struct appstate *s = &a->apps[i];

		if (s->push_pid && now - s->push_started > PUSH_MAX_MS)
			kill(s->push_pid, SIGKILL); /* reaped via its pipe */
		else if (!s->push_pid && s->push_due && now >= s->push_due)
			push_kick(a, i, true);
	}
}

int
push_wait(struct agent *a)
{
	uint64_t now = now_ms(), best = UINT64_MAX;

	for (size_t i = 0; i < a->napps; i++) {
		struct appstate *s = &a->apps[i];
		uint64_t at = s->push_pid ? s->push_started + PUSH_MAX_MS + 1
					  : s->push_due;

		if (at && at < best)
			best = at;
	}
	if (best == UINT64_MAX)
		return -1;
	return best <= now ? 0 : best - now > 3600000 ? 3600000
						     : (int)(best - now);
}

void
push_stop_all(struct agent *a)
{
	for (size_t i = 0; i < a->napps; i++) {
		struct appstate *s = &a->apps[i];
		int st;

		if (!s->push_pid)
			continue;
		/* refs move atomically: a push cut short is pushed again
		 * by the next run */
		kill(s->push_pid, SIGKILL);
		while (waitpid(s->push_pid, &st, 0) < 0 && errno == EINTR)
			;
		epoll_ctl(a->ep, EPOLL_CTL_DEL, s->push_fd, NULL);
		close(s->push_fd);
		s->push_pid = 0;
		s->push_fd = -1;
	}
}

void
sync_done_maybe(struct agent *a)
{
	for (size_t i = 0; i < a->napps; i++)
		if (a->apps[i].push_pid)
			return; /* its outcome is part of the answer */
	for (int k = 0; k < MAX_CLIENTS; k++) {
		struct client *c = &a->clients[k];

		/* (a push that ends before the sync's passes ran is not
		 * the sync's) */
		if (c->fd >= 0 && c->want_done && c->passed) {
			/* a `tend sync`: it reads the store next */
			settle(a);
			c->want_done = c->passed = false;
			client_send(a, c, "{\"event\": \"sync_done\"}\n");
		}
	}
}
