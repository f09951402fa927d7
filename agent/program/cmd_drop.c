/*
 * cmd_drop.c - tend drop: an app's entries deleted as if it declared
 * nothing, then its tracking forgotten (its SIG rows first, so a drop
 * killed halfway is finished by the next one).
 */
#define _GNU_SOURCE
#include "cli.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "inspect.h"
#include "pass.h"
#include "tend/status.h"

struct forget {
	const char *app;
	/* what status says of the app's last pass: that a drop began, then
	 * how it ended (NULL: nothing, the app left tend.conf) */
	const char *dropped;
};

static int
forget_body(struct tend_txn *txn, void *arg)
{
	struct forget *f = arg;
	struct tend_buf p = TEND_BUF_INIT;
	char key[300];
	int rc;

	tend_buf_puts(&p, f->app);
	tend_buf_putc(&p, 0);
	rc = tend_store_del_prefix(txn, TEND_T_SIG, p.ptr, p.len);
	tend_buf_release(&p);
	snprintf(key, sizeof key, "last/%s", f->app);
	if (rc == 0 && f->dropped)
		rc = tend_store_put(txn, TEND_T_META, key, strlen(key),
		    f->dropped, strlen(f->dropped));
	else if (rc == 0)
		rc = tend_store_del(txn, TEND_T_META, key, strlen(key));
	return rc;
}

/* A tracked state of a target type no loaded connector provides (its
 * [plugin] left tend.conf): a drop could only forget it, not delete it */
struct unknown_root {
	struct tend_engine *eng;
	char *path;
};

static void
find_unknown_root(const struct tend_state_info *si, void *arg)
{
	struct unknown_root *u = arg;
	const char *p = si->path;

	if (u->path || strncmp(p, "/@", 2) != 0)
		return;
	/* the root's name is some '/'-prefix of what follows "/@" */
	for (const char *q = p + 2; *q; q++) {
		if (*q != '/')
			continue;
		char *name = strndup(p + 2, (size_t)(q - (p + 2)));
		bool known = name && tend_engine_root(u->eng, name);

		free(name);
		if (known)
			return;
	}
	if (tend_engine_root(u->eng, p + 2))
		return;
	u->path = tend_xstrdup(p + 1);
}

int
cmd_drop(struct cli *c, struct tend_ws *ws)
{
	struct tend_buf out = TEND_BUF_INIT;
	int status = 0, rc;

	if (!c->napps)
		die_usage("drop needs the name of an app");
	if ((rc = check_app_names(c, ws, true)))
		return rc;
	if ((rc = writer_open(ws, "tend drop")))
		return rc;
	tend_engine_subscribe(ws->eng, ~0u, on_event, c);
	if (c->json)
		tend_buf_puts(&out, "{\"apps\": [");
	for (size_t i = 0; i < c->napps; i++) {
		struct tend_stats st;
		/* status, check and plan say a drop was cut short until the
		 * record of its end replaces this one */
		char began[64];
		snprintf(began, sizeof began,
		    "{\"time\": %lld, \"dropping\": true}",
		    (long long)time(NULL));
		struct forget f = {c->apps[i], began};

		c->deleted = c->failed = c->forgotten = 0;
		free(c->first_err);
		c->first_err = NULL;
		c->cur_app = c->apps[i];
		struct unknown_root u = {ws->eng, NULL};
		tend_engine_list(ws->eng, c->apps[i], find_unknown_root, &u);
		if (u.path) {
			rc = tend_error_set(TEND_EINVALID, "%s is a target of a "
			    "type no loaded plugin provides (is its [plugin] "
			    "section gone from tend.conf?): nothing dropped; put "
			    "the section back", u.path);
			free(u.path);
		} else
			/* the app's source rows go first: a drop killed
			 * halfway leaves nothing that lets the next sync skip
			 * a source (its entries may be half deleted) */
			rc = tend_store_write(tend_engine_store(ws->eng),
			    forget_body, &f);
		/* a git target's deletes are one commit, as a sync's
		 * changes are: each batch amends the pass's commit */
		struct tend_app_config *a = tend_ws_app(ws, c->apps[i]);
		tend_engine_set_batch(ws->eng, a ? app_batch(a) : 0);
		if (rc == 0)
			rc = tend_engine_drop(ws->eng, c->apps[i], &st);
		flush_same_errors(c);
		/* status then says "dropped", not "never synced"; a drop
		 * that failed says so too (it said "not recorded (its
		 * process was killed)") */
		struct tend_buf rec = TEND_BUF_INIT;
		tend_buf_printf(&rec, "{\"time\": %lld, \"dropped\": true, "
		    "\"status\": %d, \"deleted\": %llu, \"forgotten\": %llu, "
		    "\"failed\": %llu", (long long)time(NULL), rc ? 1 : 0,
		    (unsigned long long)c->deleted,
		    (unsigned long long)c->forgotten,
		    (unsigned long long)c->failed);
		if (rc) {
			/* the first entry that failed, else the pass's */
			tend_buf_puts(&rec, ", \"error\": ");
			tend_buf_json(&rec, c->first_err ? c->first_err
							 : tend_error_last());
		}
		tend_buf_putc(&rec, '}');
		/* (an app that left tend.conf leaves status with it) */
		f.dropped = a ? rec.ptr : NULL;
		if (rc == 0)
			rc = tend_store_write(tend_engine_store(ws->eng),
			    forget_body, &f);
		else if (rc != TEND_EINVALID && a) {
			/* (keeps the engine's message for below) */
			char *msg = tend_xstrdup(tend_error_last());

			tend_store_write(tend_engine_store(ws->eng),
			    forget_body, &f);
			tend_error_set(rc, "%s", msg);
			free(msg);
		}
		tend_buf_release(&rec);
		if (rc == TEND_EINVALID) {
			fprintf(stderr, "tend: drop %s: %s\n", c->apps[i],
			    tend_error_last());
			status = EXIT_FAIL;
		} else if (rc) {
			fprintf(stderr, "tend: drop %s: %s (what could not be "
					"reverted is still tracked; run drop "
					"again)\n",
			    c->apps[i], tend_error_last());
			status = EXIT_FAIL;
		} else if (!c->quiet && !c->json && c->forgotten)
			printf("%s: dropped, %llu target states reverted, %llu "
			       "forgotten (no longer tracked: left as %s)\n",
			    c->apps[i], (unsigned long long)c->deleted,
			    (unsigned long long)c->forgotten,
			    c->forgotten == 1 ? "it was" : "they were");
		else if (!c->quiet && !c->json)
			printf("%s: dropped, %llu target states reverted\n",
			    c->apps[i], (unsigned long long)c->deleted);
		if (c->json) {
			tend_buf_puts(&out, i ? ",\n  {\"app\": " : "\n  {\"app\": ");
			tend_buf_json(&out, c->apps[i]);
			tend_buf_printf(&out, ", \"status\": %d, \"deleted\": %llu, "
					      "\"forgotten\": %llu, \"failed\": %llu",
			    rc ? 1 : 0, (unsigned long long)c->deleted,
			    (unsigned long long)c->forgotten,
			    (unsigned long long)c->failed);
			if (rc) {
				tend_buf_puts(&out, ", \"error\": ");
				tend_buf_json(&out, tend_error_last());
			}
			tend_buf_putc(&out, '}');
		}
	}
	free(c->first_err);
	c->first_err = NULL;
	if (c->json) {
		tend_buf_puts(&out, "\n]}\n");
		put_doc(&out);
	}
	tend_buf_release(&out);
	return status;
}
