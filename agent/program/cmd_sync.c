/*
 * cmd_sync.c - tend sync and tend plan: every selected app's pass, by
 * this process or (a plain sync while one runs) by the agent; plan runs
 * the declarations and reconcile and stops before the sinks, then says
 * what the sync would do, what the brake holds and what failed.
 */
#define _GNU_SOURCE
#include "cli.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "git.h"
#include "inspect.h"
#include "pass.h"
#include "json.h"
#include "watch.h"
#include "tend/status.h"

/* plan, after each app: the deletes the brake holds (not actions: the
 * engine never plans them), and what failed */
struct stray_ctx {
	struct cli *c;
	const char *app;
	bool going; /* the sync this plan shows removes them */
	struct tend_buf *out; /* check --json */
	unsigned n;
};

static void
plan_stray(const char *state_path, void *arg)
{
	struct stray_ctx *x = arg;
	struct cli *c = x->c;
	bool col = use_color(c);
	struct tend_buf shown = TEND_BUF_INIT;
	const char *path;

	tend_state_display_path(&shown, state_path, false);
	path = shown.ptr;

	if (c->json) {
		struct tend_buf *b = &c->json_items;

		tend_buf_puts(b, b->len ? ",\n  {" : "\n  {");
		tend_buf_puts(b, "\"op\": \"delete\", \"app\": ");
		tend_buf_json(b, x->app);
		tend_buf_puts(b, ", \"path\": ");
		tend_buf_json(b, path);
		/* a stray goes with this plan's sync, or with sync --full */
		tend_buf_printf(b, ", \"invalidation\": null, \"stray\": true, "
				   "\"needs_full\": %s}",
		    x->going ? "false" : "true");
	} else if (!c->quiet && x->going)
		printf("%s-%s %s %s  (not declared: the target is exclusive)\n",
		    col ? "\033[31m" : "", col ? "\033[0m" : "", x->app, path);
	else if (!c->quiet)
		printf("? %s %s  (not declared in an exclusive target: tend "
		       "sync --full removes it)\n", x->app, path);
	x->n++;
	tend_buf_release(&shown);
}

struct tag_plan {
	struct cli *c;
	const struct tend_app_config *a;
	unsigned n;
	bool commit; /* the plan commits to the app's ref */
};

/* A tag a pass left behind: the next sync moves it to the ref's tip
 * (check says "left behind"), so plan lists it as an update */
static void
plan_tag(const char *tag, const char *at, const char *tip, const char *lock,
    void *arg)
{
	struct tag_plan *t = arg;
	struct cli *c = t->c;
	struct tend_buf path = TEND_BUF_INIT;

	tend_buf_printf(&path, "git(\"%s\", \"%s\", \"%s\"):@tag/%s",
	    t->a->target_path, t->a->ref, t->a->prefix ? t->a->prefix : "",
	    tag);
	if (lock) {
		/* the sync would fail it: said as plan says a failure */
		c->plan_failed++;
		fprintf(stderr, "tend: %s: %s: left behind at %s, and %s "
				"exists: the sync cannot move it (a git command "
				"holds it, or one was killed; delete it if none "
				"runs)\n",
		    t->a->name, path.ptr, at ? at : "(missing)", lock);
		tend_buf_release(&path);
		return;
	}
	t->n++;
	if (c->json) {
		struct tend_buf *b = &c->json_items;

		tend_buf_puts(b, b->len ? ",\n  {" : "\n  {");
		tend_buf_puts(b, "\"op\": \"catch_up\", \"app\": ");
		tend_buf_json(b, t->a->name);
		tend_buf_puts(b, ", \"path\": ");
		tend_buf_json(b, path.ptr);
		tend_buf_puts(b, ", \"invalidation\": "
				 "null}");
	} else if (!c->quiet)
		printf("%s~%s %s %s  (left behind %s%s: the sync moves it to "
		       "%s, where tend keeps it)\n", use_color(c) ? "\033[33m" : "",
		    use_color(c) ? "\033[0m" : "", t->a->name, path.ptr,
		    at ? "at " : "", at ? at : "(missing)", tip);
	tend_buf_release(&path);
}

/* tend_git_tags_in_way: a tag the plan's commit would leave, failed */
static void
plan_tag_way(const char *tag, const char *at, const char *tip,
    const char *lock, void *arg)
{
	struct tag_plan *t = arg;

	(void)tip;
	(void)lock;
	t->c->plan_failed++;
	fprintf(stderr, "tend: %s: git(\"%s\", \"%s\", \"%s\"):@tag/%s: in "
			"the way: it points at %s, where tend did not put it: "
			"the sync %sleaves it (and fails); delete it (git tag "
			"-d %s) for tend to set it again\n",
	    t->a->name, t->a->target_path, t->a->ref,
	    t->a->prefix ? t->a->prefix : "", tag, at,
	    t->commit ? "commits and " : "", tag);
}

static void
plan_app(struct cli *c, struct tend_ws *ws, struct tend_app_config *a,
    const struct tend_app_result *res, int rc)
{
	const char *app = a->name;
	bool col = use_color(c);
	struct stray_ctx x = {c, app, c->full || c->destructive, NULL, 0};
	size_t n;

	/* an exclusive target's undeclared files: the destructive switch
	 * to exclusive, or sync --full, removes them */
	if (res->strays_known &&
	    !tend_app_strays(ws, a, false, &res->declared, plan_stray, &x, &n) &&
	    n) {
		c->pending = true;
		/* sync --full counts what it removes as deletes; the
		 * destructive rebuild removes them with the rest of what
		 * the target held, and says so on its own line */
		if (c->full)
			c->plan_ops[2] += n;
		else if (x.going)
			c->plan_rebuilt += n;
		else
			c->plan_strays += n;
	}
	c->destructive = false;
	/* a commit the sync would refuse: the ref is checked out (a new
	 * user's trial: plan listed it as pending, exit 3) */
	if (a->target == TEND_TARGET_GIT && !a->allow_checked_out &&
	    c->plan_ops[0] + c->plan_ops[1] + c->plan_ops[2] > c->app_ops0) {
		char *repo = path_join(ws->root, a->target_path);
		char *where = tend_git_checked_out(repo, a->ref);

		if (where) {
			c->plan_failed++;
			fprintf(stderr, "tend: %s: %s is checked out in %s: the "
					"sync refuses to write it (its files would "
					"look deleted); set allow-checked-out = "
					"true to do it anyway\n",
			    app, a->ref, where);
		}
		free(where);
		free(repo);
	}
	if (a->target == TEND_TARGET_GIT && a->tags.n) {
		struct tag_plan t = {c, a, 0, false};
		char *repo = path_join(ws->root, a->target_path);

		if (tend_git_tags_behind(repo, ws->state_dir, a->ref,
			a->tags.v, a->tags.n, plan_tag, &t) > 0) {
			c->pending = true;
			c->plan_tags += t.n;
		}
		/* a tag someone moved stays, and the sync fails it (with a
		 * commit or without): said as plan says a failure */
		t.commit = c->plan_ops[0] + c->plan_ops[1] + c->plan_ops[2] >
		    c->app_ops0;
		(void)tend_git_tags_in_way(repo, ws->state_dir, a->ref,
		    a->tags.v, a->tags.n, plan_tag_way, &t);
		free(repo);
	}
	long long when;
	if (!c->json && !c->quiet && drop_interrupted(ws, app, &when)) {
		struct tend_buf t = TEND_BUF_INIT;

		say_drop_interrupted(&t, app, when);
		printf("note: %s: %s\n", app, t.ptr);
		tend_buf_release(&t);
	}

	for (size_t i = 0; i < res->nheld; i++) {
		if (c->json) {
			struct tend_buf *b = &c->json_items;

			tend_buf_puts(b, b->len ? ",\n  {" : "\n  {");
			tend_buf_printf(b, "\"op\": \"%s\", \"app\": ",
			    res->held_update ? "update" : "delete");
			tend_buf_json(b, app);
			tend_buf_puts(b, ", \"path\": ");
			tend_buf_json(b, res->held[i]);
			tend_buf_puts(b, ", \"invalidation\": null, "
					 "\"held\": true}");
		} else if (c->quiet)
			continue;
		else if (res->held_update)
			printf("%s~%s %s %s  (held by the delete brake: %llu "
			       "sources vanished)\n",
			    col ? "\033[33m" : "", col ? "\033[0m" : "", app,
			    res->held[i], (unsigned long long)res->held_deletes);
		else
			printf("%s-%s %s %s  (held by the delete brake)\n",
			    col ? "\033[31m" : "", col ? "\033[0m" : "", app,
			    res->held[i]);
	}
	c->plan_held += res->nheld;
	if (res->held_deletes)
		c->pending = true;
	if (rc && (res->error || c->failed || c->errors))
		c->plan_failed += res->error ? 1 : c->failed + c->errors;
	else if (rc) {
		/* the pass itself stopped (the store): what was listed is
		 * not the whole plan */
		c->plan_failed++;
		c->plan_stopped++;
	}
}

/* plan's last line: a promise, so only what was looked at */
static void
plan_summary(struct cli *c)
{
	const uint64_t *n = c->plan_ops;

	if (c->plan_stopped) {
		printf("Plan incomplete: the pass of %llu app(s) stopped on "
		       "an error (above); before it stopped: %llu to create, "
		       "%llu to update, %llu to delete.\n",
		    (unsigned long long)c->plan_stopped,
		    (unsigned long long)n[0], (unsigned long long)n[1],
		    (unsigned long long)n[2]);
		return;
	}
	if (!c->pending && !c->plan_failed) {
		printf("No changes: every declaration is applied as "
		       "recorded (tend check reads the targets for drift).\n");
		return;
	}
	printf("Plan: %llu to create, %llu to update, %llu to delete",
	    (unsigned long long)n[0], (unsigned long long)n[1],
	    (unsigned long long)n[2]);
	if (n[3])
		printf(", %llu to forget (no longer tracked: left as %s)",
		    (unsigned long long)n[3], n[3] == 1 ? "it is" : "they are");
	if (n[4])
		printf(", %llu to adopt (%s the declared content already)",
		    (unsigned long long)n[4], n[4] == 1 ? "it holds"
							: "they hold");
	if (c->plan_replaces)
		printf(", %llu of the writes over what tend did not write "
		       "(marked above)", (unsigned long long)c->plan_replaces);
	if (c->plan_held)
		printf(", %llu held by the delete brake (tend sync "
		       "--allow-delete applies them)",
		    (unsigned long long)c->plan_held);
	if (c->plan_strays)
		printf(", %llu undeclared in exclusive targets (tend sync "
		       "--full removes them)",
		    (unsigned long long)c->plan_strays);
	if (c->plan_rebuilt)
		printf(", %llu undeclared to go with the rebuild (marked above)",
		    (unsigned long long)c->plan_rebuilt);
	if (c->plan_verify)
		printf(", %llu ref%s reset by hand to verify entry by entry "
		       "(noted above)", (unsigned long long)c->plan_verify,
		    c->plan_verify == 1 ? "" : "s");
	if (c->plan_tags)
		printf(", %llu tag%s left behind to move back",
		    (unsigned long long)c->plan_tags, c->plan_tags == 1 ? ""
		    : "s");
	if (c->plan_failed)
		printf("; %llu failed, nothing planned for %s", (unsigned long
			long)c->plan_failed,
		    c->plan_failed == 1 ? "it" : "them");
	printf(".\n");
}

/* One app's pass in sync --json: {"app", "status", "result": {...}} */
static void
put_app_pass(struct tend_buf *b, size_t k, struct tend_ws *ws,
    const char *app, const struct tend_pass *p)
{
	const struct tend_app_config *a = tend_ws_app(ws, app);
	struct tend_push_status ps = {0};

	tend_buf_puts(b, k ? ",\n  {\"app\": " : "\n  {\"app\": ");
	tend_buf_json(b, app);
	tend_buf_printf(b, ", \"status\": %d, \"result\": {", p->status);
	tend_pass_json(b, p);
	tend_buf_putc(b, '}');
	/* push = REMOTE: where it stands after the sync */
	if (a)
		tend_app_push_status(ws, a, &ps);
	if (ps.configured) {
		tend_buf_puts(b, ", \"push\": ");
		tend_push_status_json(b, &ps);
	}
	tend_push_status_finish(&ps);
	tend_buf_putc(b, '}');
}

void
put_doc(struct tend_buf *b)
{
	fputs(b->ptr, stdout);
	doc_printed = true;
}

struct agent_pass {
	char *app;
	struct tend_json *j;
};

/*
 * tend sync beside a running agent: the agent runs the passes and this
 * reports them as its own would be (the same lines, the same JSON).
 * Returns -1 when no agent answered, else the exit status.
 */
static int
sync_by_agent(struct cli *c, struct tend_ws *ws, const char *cmd)
{
	struct tend_buf reply = TEND_BUF_INIT, out = TEND_BUF_INIT;
	struct agent_pass *v = NULL;
	size_t n = 0;
	int status = 0;

	if (tend_agent_request(ws->state_dir, cmd, &reply, true) != 0) {
		tend_buf_release(&reply);
		return -1;
	}
	/* a pass_finished line per pass; an app's last one is the sync's */
	for (char *line = reply.ptr; *line;) {
		char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		struct tend_json *j = tend_json_parse(line, len, NULL, 0);
		const char *app = tend_json_str(j, "app", NULL);
		size_t k;

		line += len + (nl != NULL);
		if (!app) {
			tend_json_free(j);
			continue;
		}
		for (k = 0; k < n && strcmp(v[k].app, app) != 0; k++)
			;
		if (k == n) {
			v = tend_xrealloc(v, (n + 1) * sizeof *v);
			v[n++] = (struct agent_pass){tend_xstrdup(app), NULL};
		}
		tend_json_free(v[k].j);
		v[k].j = j;
	}
	tend_buf_release(&reply);
	int pid = tend_ws_agent_pid(ws);
	if (c->json)
		tend_buf_puts(&out, "{\"agent\": true, \"apps\": [");
	else if (!c->quiet) {
		if (pid > 0)
			printf("applied by the running agent (pid %d):\n", pid);
		else
			printf("applied by the running agent:\n");
	}
	for (size_t k = 0; k < n; k++) {
		struct tend_pass p;
		size_t al = strlen(v[k].app);

		tend_pass_from_json(&p, v[k].j);
		if (p.status)
			status = EXIT_FAIL;
		/* what the sinks said beside it (a tag caught up) */
		const struct tend_json *notes = tend_json_get(v[k].j, "notes");
		for (const struct tend_json *m = notes && notes->type ==
			 TEND_JSON_ARR ? notes->child : NULL;
		     m && !c->quiet; m = m->next)
			if (m->type == TEND_JSON_STR)
				fprintf(stderr, "tend: %s: %s\n", v[k].app,
				    m->s);
		if (p.error) /* (its messages name the app, or not) */
			fprintf(stderr, "tend: %s%s%s\n",
			    strncmp(p.error, v[k].app, al) == 0 &&
				p.error[al] == ':' ? "" : v[k].app,
			    strncmp(p.error, v[k].app, al) == 0 &&
				p.error[al] == ':' ? "" : ": ",
			    p.error);
		if (c->json)
			put_app_pass(&out, k, ws, v[k].app, &p);
		else if (!c->quiet) {
			struct tend_buf t = TEND_BUF_INIT;

			tend_pass_text(&t, &p);
			printf("%s: %s\n", v[k].app, t.ptr);
			tend_buf_release(&t);
		}
	}
	/* the agent pushed (or tried) before it answered */
	for (size_t i = 0; i < ws->cfg.napps; i++) {
		struct tend_push_status ps;

		tend_app_push_status(ws, &ws->cfg.apps[i], &ps);
		if (ps.configured && ps.error && (!ps.known || ps.ahead)) {
			fprintf(stderr, "tend: %s: %s (the local commit is "
					"kept: the agent pushes it when it "
					"can)\n",
			    ws->cfg.apps[i].name, ps.error);
			status = EXIT_FAIL;
		}
		tend_push_status_finish(&ps);
	}
	if (c->json) {
		tend_buf_puts(&out, n ? "\n]}\n" : "]}\n");
		put_doc(&out);
	}
	for (size_t k = 0; k < n; k++) {
		free(v[k].app);
		tend_json_free(v[k].j);
	}
	free(v);
	tend_buf_release(&out);
	return status;
}

static int
recount_body(struct tend_txn *txn, void *arg)
{
	(void)arg;
	return tend_store_counts_invalidate(txn);
}

int
cmd_sync(struct cli *c, struct tend_ws *ws, bool preview)
{
	struct tend_buf out = TEND_BUF_INIT;
	int status = 0, rc;
	size_t shown = 0;

	if ((rc = check_app_names(c, ws, false)))
		return rc;
	if (!preview && !c->full && !c->napps) {
		/* an agent runs: it does the pass, we report it; with
		 * --allow-delete, it approves what its brake held first, in
		 * the same request, so that its pass does both (plan beside
		 * an agent says to run this: it was refused; then a pass of
		 * the approval ran before the sync's, which said 0 deleted) */
		if ((rc = sync_by_agent(c, ws, c->allow_delete
			     ? "approve\nsync" : "sync")) >= 0)
			return rc;
		if (tend_ws_agent_pid(ws) > 0) {
			/* it runs, and did not answer */
			say_error("an agent (pid %d) runs for this workspace "
				  "but did not answer the sync: %s (its log: "
				  "%s/agent.log)", tend_ws_agent_pid(ws),
			    tend_error_last(), ws->state_dir);
			return EXIT_FAIL;
		}
	}
	if (!preview && (rc = writer_open(ws, c->full ? "tend sync --full"
			     : c->napps ? "tend sync APP..." : "tend sync")))
		return rc;
	ws->readonly = preview;
	uint64_t rows_before = preview ? 0
	    : tend_store_rows(tend_engine_store(ws->eng), TEND_T_ITEM);
	/* --full reads everything: the store's counters too, recounted
	 * from its rows (what tend check says when they disagree) */
	if (!preview && c->full &&
	    tend_store_write(tend_engine_store(ws->eng), recount_body, NULL)) {
		say_error("%s", tend_error_last());
		return EXIT_FAIL;
	}
	if (preview && (rc = tend_ws_open(ws))) {
		say_error("%s", tend_error_last());
		return EXIT_FAIL;
	}
	c->ws = preview ? ws : NULL;
	tend_engine_subscribe(ws->eng, ~0u, on_event, c);
	if (c->json)
		tend_buf_puts(&out, preview ? "{\"actions\": ["
					    : "{\"agent\": false, \"apps\": [");
	for (size_t i = 0; i < ws->cfg.napps; i++) {
		struct tend_app_config *app = &ws->cfg.apps[i];
		struct tend_app_result res;
		struct tend_sync_opts o = {
			.full = c->full,
			.preview = preview,
			.allow_delete = c->allow_delete,
			.progress = progress,
			.arg = c,
		};
		double t0 = now_s();

		if (!selected(c, app->name))
			continue;
		c->created = c->updated = c->deleted = c->failed = 0;
		c->forgotten = c->adopted = c->verified = 0;
		c->errors = c->invalidations = c->shown = c->rebuilt = 0;
		c->cur_app = app->name;
		c->app_ops0 = c->plan_ops[0] + c->plan_ops[1] + c->plan_ops[2];
		char was[13];
		if (!c->full && tend_app_ref_rewritten(ws, app, was)) {
			/* (a new user's trial: after a reset by hand, sync
			 * and plan said all was applied; only check saw it) */
			if (!c->quiet && !c->json)
				fprintf(stderr, "tend: %s: note: %s no longer "
						"holds %s, tend's last commit on "
						"it (reset or rewritten by hand?): "
						"the %s verifies every entry\n",
				    app->name, app->ref, was,
				    preview ? "sync" : "pass");
			if (preview) {
				c->pending = true;
				c->plan_verify++;
			} else
				o.verify = true;
		}
		rc = tend_app_sync(ws, app, &o, &res);
		flush_same_errors(c);
		double dt = now_s() - t0;
		if (c->tty)
			fputs("\r\033[K", stderr);
		c->deleted += res.strays;
		if (preview)
			plan_app(c, ws, app, &res, rc);
		/* an error of the app itself (the entries' failures have
		 * been said, and are counted) */
		bool app_error = rc && (res.error || res.held_deletes ||
					   (!c->failed && !c->errors));
		if (rc)
			status = EXIT_FAIL;
		if (app_error)
			fprintf(stderr, "tend: %s\n", tend_error_last());
		/* push = REMOTE: whatever the pass committed, and what an
		 * earlier run could not push; a failure keeps the commit */
		if (!preview && app->push && tend_app_push(ws, app) != 0) {
			fprintf(stderr, "tend: %s: %s (the local commit is "
					"kept: the next sync or the agent pushes "
					"it)\n",
			    app->name, tend_error_last());
			status = EXIT_FAIL;
		}
		if (!preview) {
			struct last_pass lp = {TEND_BUF_INIT, app->name};
			struct tend_pass p = {.time = (long long)time(NULL),
			    .ms = (uint64_t)(dt * 1000 + 0.5),
			    .status = rc ? 1 : 0, .created = c->created,
			    .updated = c->updated, .deleted = c->deleted,
			    .forgotten = c->forgotten, .adopted = c->adopted,
			    .verified = c->verified, .failed = c->failed, .errors = c->errors,
			    .held_deletes = res.held_deletes,
			    .files = res.files, .read = res.hashed,
			    .links_skipped = res.links_skipped,
			    .error = app_error ? tend_error_last()
					       : c->first_err};

			tend_buf_putc(&lp.text, '{');
			tend_pass_json(&lp.text, &p);
			tend_buf_putc(&lp.text, '}');
			tend_store_write_settle(tend_engine_store(ws->eng), put_last,
			    &lp);
			if (c->json) {
				put_app_pass(&out, shown, ws, app->name, &p);
				/* put_app_pass closed the app's object: the
				 * rebuilt containers go inside it */
				if (c->rebuilt) {
					out.len--;
					tend_buf_printf(&out, ", \"rebuilt\": "
							      "%llu}",
					    (unsigned long long)c->rebuilt);
				}
			}
			else if (!c->quiet) {
				struct tend_buf t = TEND_BUF_INIT;

				tend_pass_text(&t, &p);
				printf("%s: %s\n", app->name, t.ptr);
				tend_buf_release(&t);
			}
			tend_buf_release(&lp.text);
		}
		shown++;
		free(c->first_err);
		c->first_err = NULL;
		tend_app_result_finish(&res);
	}
	uint64_t b0, b1;
	if (!preview && tend_ws_repack(ws, rows_before, c->full, &b0, &b1) < 0)
		fprintf(stderr, "tend: %s\n", tend_error_last());
	if (preview) {
		if (c->json) {
			tend_buf_puts(&out, c->json_items.ptr);
			tend_buf_printf(&out, "%s], \"pending\": %s, "
					      "\"create\": %llu, \"update\": %llu, "
					      "\"delete\": %llu, \"forget\": %llu, "
					      "\"adopt\": %llu, \"replaces\": %llu, "
					      "\"held\": %llu, \"tags_behind\": %llu, "
					      "\"rebuilt_away\": %llu, "
					      "\"refs_reset\": %llu, "
					      "\"failed\": %llu}\n",
			    c->json_items.len ? "\n" : "",
			    c->pending ? "true" : "false",
			    (unsigned long long)c->plan_ops[0],
			    (unsigned long long)c->plan_ops[1],
			    (unsigned long long)c->plan_ops[2],
			    (unsigned long long)c->plan_ops[3],
			    (unsigned long long)c->plan_ops[4],
			    (unsigned long long)c->plan_replaces,
			    (unsigned long long)c->plan_held,
			    (unsigned long long)c->plan_tags,
			    (unsigned long long)c->plan_rebuilt,
			    (unsigned long long)c->plan_verify,
			    (unsigned long long)c->plan_failed);
		} else if (!c->quiet)
			plan_summary(c);
		/* (a failure the passes did not see: a tag's lock) */
		if (status == 0 && c->plan_failed)
			status = EXIT_FAIL;
		if (status == 0 && c->pending)
			status = EXIT_PENDING;
	} else if (c->json)
		tend_buf_puts(&out, shown ? "\n]}\n" : "]}\n");
	if (c->json)
		put_doc(&out);
	tend_buf_release(&out);
	return status;
}

