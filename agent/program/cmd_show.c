/*
 * cmd_show.c - tend ls, tend check and tend status: what the store
 * tracks, the targets compared with it (drift, strays), and each app's
 * counts and last pass, with the agent's view when one runs.
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

/* Text for a terminal: control characters and bytes that are not UTF-8
 * as plan escapes them, \t \n \xNN (an owner's component path, a drift
 * message: text to read, not names to parse) */
static void
put_readable(struct tend_buf *b, const char *s)
{
	size_t n = strlen(s);

	for (size_t i = 0; i < n;) {
		unsigned char ch = (unsigned char)s[i];
		size_t l = tend_utf8_len(s + i, n - i);

		if (ch == '\n' || ch == '\t') {
			tend_buf_puts(b, ch == '\n' ? "\\n" : "\\t");
			i++;
		} else if (ch < 0x20 || ch == 0x7f || l == 0) {
			tend_buf_printf(b, "\\x%02x", ch);
			i++;
		} else {
			tend_buf_put(b, s + i, l);
			i += l;
		}
	}
}

/*
 * ls and check print each app's states sorted by path, so they are kept
 * until its scan ends: packed one after another in one buffer (a million
 * states held 380 MiB as two strings and a struct each, and JSON kept
 * every line again until the end), formatted as they are printed.
 * A row: path NUL, flags, the record's length and bytes, owner NUL, and
 * with ROW_DRIFT the drift NUL.
 */
#define ROW_CONTAINER 1
#define ROW_PENDING 2
#define ROW_RECORD 4
#define ROW_DRIFT 8

struct ls_ctx {
	struct cli *c;
	struct tend_buf rows;
	uint64_t *v; /* each row's offset in rows */
	size_t n, cap;
	const char *prefix; /* ls APP PATH-PREFIX: the rows kept */
	unsigned in_the_way; /* check: drift a sync will not repair */
	unsigned retried;    /* check: an interrupted apply a sync retries */
	unsigned behind;     /* check: left behind, a sync catches it up */
	unsigned reset;      /* check: of a git ref reset by hand */
	bool verify;         /* check: this app's ref was reset by hand */
};

static void
on_state(const struct tend_state_info *si, void *arg)
{
	struct ls_ctx *l = arg;
	struct tend_buf path = TEND_BUF_INIT;
	size_t rlen = si->record ? (si->len > 17 ? 17 : si->len) : 0;

	size_t root = tend_state_display_path(&path, si->path, si->container);
	/* a prefix of the whole path, or of what follows a git target's
	 * git("repo", "ref", "prefix"): (ls big docs/) */
	const char *in = path.ptr + root + (path.ptr[root] == ':');
	if (l->prefix && strncmp(path.ptr, l->prefix, strlen(l->prefix)) &&
	    (!root || strncmp(in, l->prefix, strlen(l->prefix)))) {
		tend_buf_release(&path);
		return;
	}
	if (si->drift && strncmp(si->drift, TEND_CHECK_IN_THE_WAY,
	    strlen(TEND_CHECK_IN_THE_WAY)) == 0)
		l->in_the_way++;
	else if (si->drift && strncmp(si->drift, TEND_CHECK_BEHIND,
		 strlen(TEND_CHECK_BEHIND)) == 0)
		l->behind++; /* the next sync catches it up */
	else if (si->drift && l->verify)
		l->reset++; /* the next sync verifies every entry */
	else if (si->drift && si->pending)
		l->retried++; /* check's reason: the next sync retries it */
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 1024;
		l->v = tend_xrealloc(l->v, l->cap * sizeof *l->v);
	}
	l->v[l->n++] = l->rows.len;
	unsigned char fl[2] = {(unsigned char)((si->container ? ROW_CONTAINER
	    : 0) | (si->pending ? ROW_PENDING : 0) |
	    (si->record ? ROW_RECORD : 0) | (si->drift ? ROW_DRIFT : 0)),
	    (unsigned char)rlen};
	tend_buf_put(&l->rows, path.ptr, path.len + 1);
	tend_buf_put(&l->rows, fl, 2);
	tend_buf_put(&l->rows, si->record, rlen);
	const char *owner = si->component ? si->component : "";
	tend_buf_put(&l->rows, owner, strlen(owner) + 1);
	if (si->drift)
		tend_buf_put(&l->rows, si->drift, strlen(si->drift) + 1);
	tend_buf_release(&path);
}

/* Row `off`, as ls or check prints it, onto b. */
static void
put_row(struct tend_buf *b, const struct ls_ctx *l, uint64_t off)
{
	const char *path = l->rows.ptr + off;
	const unsigned char *fl = (const unsigned char *)path + strlen(path) + 1;
	const char *owner = (const char *)fl + 2 + fl[1];
	const char *drift = fl[0] & ROW_DRIFT ? owner + strlen(owner) + 1
					      : NULL;

	if (l->c->json) {
		tend_buf_puts(b, "{\"path\": ");
		tend_buf_json(b, path);
		if (strchr(path, '\\'))
			tend_buf_puts(b, ", \"path_escaped\": true");
		tend_buf_puts(b, ", \"owner\": ");
		tend_buf_json(b, owner);
		tend_buf_puts(b, ", \"record\": \"");
		tend_buf_puthex(b, fl + 2, fl[1]);
		tend_buf_printf(b, "\", \"container\": %s, \"pending\": %s",
		    fl[0] & ROW_CONTAINER ? "true" : "false",
		    fl[0] & ROW_PENDING ? "true" : "false");
		if (drift) {
			tend_buf_puts(b, ", \"drift\": ");
			tend_buf_json(b, drift);
		}
		tend_buf_putc(b, '}');
	} else if (drift) {
		tend_buf_printf(b, "drift %s: ", path);
		put_readable(b, drift);
		tend_buf_putc(b, '\n');
	} else {
		tend_buf_printf(b, "%s  ", path);
		if (fl[0] & ROW_RECORD)
			tend_buf_puthex(b, fl + 2, fl[1]);
		else
			tend_buf_putc(b, '-');
		tend_buf_puts(b, "  ");
		put_readable(b, owner);
		tend_buf_puts(b, fl[0] & ROW_PENDING ? "  (pending)\n" : "\n");
	}
}

static void
check_stray(const char *path, void *arg)
{
	struct tend_state_info si = {.component = "", .path = path,
	    .drift = "not declared at the last sync: the target is exclusive "
		     "(tend sync --full removes it, unless a source declares it "
		     "now)"};

	on_state(&si, arg);
}

static const char *sort_rows; /* cmp_row's buffer (qsort has no context) */

static int
cmp_row(const void *x, const void *y)
{
	return strcmp(sort_rows + *(const uint64_t *)x,
	    sort_rows + *(const uint64_t *)y);
}

/* --json: the document goes out as it is made; `out` is flushed past
 * 64 KiB and at the end */
static void
flush_out(struct tend_buf *out, bool all)
{
	if (out->len && (all || out->len > 65536)) {
		fwrite(out->ptr, 1, out->len, stdout);
		tend_buf_reset(out);
	}
}

/* An app's counters against a scan of its rows: 1 (and said) if they
 * disagree, -1 if the store could not be read */
static int
check_counts(struct cli *c, struct tend_ws *ws, const char *name,
    struct tend_buf *out, size_t *shown)
{
	struct tend_buf why = TEND_BUF_INIT;
	int rc = tend_engine_counts_check(ws->eng, name, &why);

	if (rc == TEND_ECONFLICT && c->json) {
		tend_buf_puts(out, (*shown)++ ? ",\n  " : "\n  ");
		tend_buf_puts(out, "{\"app\": ");
		tend_buf_json(out, name);
		tend_buf_puts(out, ", \"counters\": true, \"drift\": ");
		tend_buf_json(out, why.ptr);
		tend_buf_putc(out, '}');
	} else if (rc == TEND_ECONFLICT)
		printf("counters of %s: %s\n", name, why.ptr);
	else if (rc)
		say_error("%s", tend_error_last());
	tend_buf_release(&why);
	return rc == TEND_ECONFLICT ? 1 : rc ? -1 : 0;
}

/*
 * check's summary: which command mends what drifted. A state an
 * interrupted apply left is retried by a plain sync; one in the way of
 * something not tend's needs the user first; the rest sync --full
 * rewrites.
 */
static void
say_drift(unsigned drift, unsigned retried, unsigned behind, unsigned way,
    unsigned reset)
{
	unsigned full = drift - retried - behind - way - reset;
	const char *sep = "";

	printf("%u target state(s) drifted: ", drift);
	if (way == drift) {
		printf("something is in their way (above): move it (or "
		       "rename a source that collides), then tend sync\n");
		return;
	}
	if (full == drift) {
		printf("tend sync --full repairs them\n");
		return;
	}
	if (retried == drift) {
		printf("interrupted applies: the next tend sync retries "
		       "them\n");
		return;
	}
	if (behind == drift) {
		printf("left behind (above): the next tend sync catches them "
		       "up\n");
		return;
	}
	if (reset == drift) {
		/* a new user's trial: check sent these to --full */
		printf("their git ref was reset by hand: the next tend sync "
		       "verifies every entry and writes them again\n");
		return;
	}
	if (full) {
		printf("tend sync --full repairs %u", full);
		sep = "; ";
	}
	if (retried) {
		printf("%sthe next tend sync retries %u (interrupted)", sep,
		    retried);
		sep = "; ";
	}
	if (behind) {
		printf("%sthe next tend sync catches up %u (left behind)",
		    sep, behind);
		sep = "; ";
	}
	if (reset) {
		printf("%sthe next tend sync writes %u again (their ref was "
		       "reset by hand)", sep, reset);
		sep = "; ";
	}
	if (way)
		printf("%sin the way of %u is something (above): move it (or "
		       "rename a source that collides), then tend sync", sep,
		    way);
	putchar('\n');
}

/* A failed ls or check: a JSON document begun is ended, with the error
 * (as a document that failed before it began would be) */
static void
ls_end(struct cli *c, struct ls_ctx *l, struct tend_buf *out, size_t shown)
{
	if (c->json && (shown || out->len)) {
		tend_buf_printf(out, "%s], \"error\": ", shown ? "\n" : "");
		tend_buf_json(out, tend_error_last());
		tend_buf_printf(out, ", \"exit\": %d}\n", EXIT_FAIL);
		put_doc(out);
	}
	free(l->v);
	tend_buf_release(&l->rows);
	tend_buf_release(out);
}

int
cmd_ls_check(struct cli *c, struct tend_ws *ws, bool check)
{
	struct tend_buf out = TEND_BUF_INIT;
	struct ls_ctx l = {.c = c, .rows = TEND_BUF_INIT};
	unsigned drift = 0, bad_counts = 0;
	size_t shown = 0;
	int rc;

	if (!check && c->napps == 2) {
		l.prefix = c->apps[1];
		c->napps = 1;
	}
	if (c->napps > 1)
		die_usage("%s takes at most one app", c->cmd);
	if ((rc = check_app_names(c, ws, !check)))
		return rc;
	/* a running agent commits what it settled before we read it */
	tend_agent_settle(ws->state_dir);
	ws->readonly = true;
	if ((rc = tend_ws_open(ws))) {
		say_error("%s", tend_error_last());
		return EXIT_FAIL;
	}
	if (c->json)
		tend_buf_puts(&out, check ? "{\"drift\": [" : "{\"states\": [");
	for (size_t i = 0; i < ws->cfg.napps || (c->napps && i == 0); i++) {
		const char *name = c->napps ? c->apps[0] : ws->cfg.apps[i].name;
		unsigned d = 0;

		l.n = 0;
		char was[13];
		struct tend_app_config *ca = check ? tend_ws_app(ws, name) : NULL;
		l.verify = ca && tend_app_ref_rewritten(ws, ca, was);
		if (check)
			rc = tend_engine_check(ws->eng, name, on_state, &l, &d);
		else
			rc = tend_engine_list(ws->eng, name, on_state, &l);
		/* an exclusive target holds only what is declared */
		struct tend_app_config *a = check && !rc ? tend_ws_app(ws, name)
							: NULL;
		size_t ns;
		if (a && tend_app_strays(ws, a, false, NULL, check_stray, &l,
			     &ns) == 0)
			d += (unsigned)ns;
		/* each app's states in the order of their paths */
		sort_rows = l.rows.ptr;
		if (l.n > 1 && !rc)
			qsort(l.v, l.n, sizeof *l.v, cmp_row);
		for (size_t k = 0; k < l.n && !rc; k++) {
			if (c->json)
				tend_buf_puts(&out, shown++ ? ",\n  " : "\n  ");
			put_row(&out, &l, l.v[k]);
			flush_out(&out, false);
		}
		tend_buf_reset(&l.rows);
		if (!c->json)
			flush_out(&out, true); /* before check's own lines */
		long long when;
		if (check && !rc && drop_interrupted(ws, name, &when)) {
			struct tend_buf t = TEND_BUF_INIT;

			if (c->json) {
				tend_buf_puts(&out, shown++ ? ",\n  " : "\n  ");
				tend_buf_puts(&out, "{\"app\": ");
				tend_buf_json(&out, name);
				tend_buf_printf(&out, ", \"drop_interrupted\": "
						      "true, \"since\": %lld}",
				    when);
			} else if (!c->quiet) {
				say_drop_interrupted(&t, name, when);
				printf("%s: %s\n", name, t.ptr);
			}
			tend_buf_release(&t);
		}
		if (rc) {
			say_error("%s", tend_error_last());
			ls_end(c, &l, &out, shown);
			return EXIT_FAIL;
		}
		drift += d;
		/* the counters status reads, against the rows: a bug in
		 * keeping them cannot hide */
		if (check && (rc = check_counts(c, ws, name, &out, &shown)) < 0) {
			ls_end(c, &l, &out, shown);
			return EXIT_FAIL;
		}
		bad_counts += check && rc > 0;
		if (c->napps)
			break;
	}
	free(l.v);
	l.v = NULL;
	tend_buf_release(&l.rows);
	/* and those of the apps tracked from before */
	char **tracked = NULL;
	size_t ntracked = 0;
	if (check && !c->napps &&
	    tend_ws_tracked_apps(ws, &tracked, &ntracked) == 0)
		for (size_t i = 0; i < ntracked; i++) {
			if (!tend_ws_app(ws, tracked[i]) &&
			    (rc = check_counts(c, ws, tracked[i], &out,
				 &shown)) > 0)
				bad_counts++;
			free(tracked[i]);
		}
	free(tracked);
	if (c->json) {
		tend_buf_printf(&out, "%s]}\n", shown ? "\n" : "");
		put_doc(&out);
	} else if (check && !c->quiet) {
		if (drift)
			say_drift(drift, l.retried, l.behind, l.in_the_way,
			    l.reset);
		else if (!bad_counts)
			printf("no drift\n");
		if (bad_counts)
			printf("the store's counters of %u app(s) disagree "
			       "with its rows (a bug in tend): tend sync "
			       "--full recounts them\n", bad_counts);
	}
	tend_buf_release(&out);
	return check && (drift || bad_counts) ? EXIT_FAIL : 0;
}

/* "12:03:04, 5 s ago" (with the date when it is not today's) */
void
put_when(struct tend_buf *b, long long t)
{
	time_t now = time(NULL), tt = (time_t)t;
	long long age = (long long)now - t;
	struct tm tm, today;
	char s[32];

	localtime_r(&tt, &tm);
	localtime_r(&now, &today);
	strftime(s, sizeof s,
	    tm.tm_year == today.tm_year && tm.tm_yday == today.tm_yday
		? "%H:%M:%S" : "%Y-%m-%d %H:%M:%S", &tm);
	tend_buf_printf(b, "%s, ", s);
	if (age < 0)
		tend_buf_puts(b, "in the future (is the clock right?)");
	else if (age < 60)
		tend_buf_printf(b, "%lld s ago", age);
	else if (age < 3600)
		tend_buf_printf(b, "%lld min ago", age / 60);
	else if (age < 2 * 86400)
		tend_buf_printf(b, "%lld h %lld min ago", age / 3600,
		    age % 3600 / 60);
	else
		tend_buf_printf(b, "%lld days ago", age / 86400);
}

bool
drop_interrupted(struct tend_ws *ws, const char *app, long long *when)
{
	struct tend_txn *txn;
	struct tend_bytes v;
	char key[300];
	bool yes = false;

	if (tend_store_read_begin(tend_engine_store(ws->eng), &txn))
		return false;
	snprintf(key, sizeof key, "last/%s", app);
	if (tend_store_get(txn, TEND_T_META, key, strlen(key), &v) == 0) {
		struct tend_json *j = tend_json_parse((const char *)v.data,
		    v.len, NULL, 0);

		yes = j && tend_json_bool(j, "dropping", false);
		if (yes && when)
			*when = tend_json_int(j, "time", 0, TEND_JSON_INT_MAX,
			    0);
		tend_json_free(j);
	}
	tend_store_read_end(txn);
	return yes;
}

void
say_drop_interrupted(struct tend_buf *b, const char *app, long long when)
{
	tend_buf_puts(b, "a drop began ");
	put_when(b, when);
	tend_buf_printf(b, ", and did not finish (killed): tend drop %s "
			   "finishes it (tend sync declares the app again)",
	    app);
}

static void
count_tag(const char *tag, const char *at, const char *tip, const char *lock,
    void *arg)
{
	(void)tag;
	(void)at;
	(void)tip;
	(void)lock;
	(*(int *)arg)++;
}

/* How many of a git app's tags a pass left behind its ref's tip */
static int
tags_behind(struct tend_ws *ws, const struct tend_app_config *a)
{
	int n = 0;
	char *repo;

	if (!a || a->target != TEND_TARGET_GIT || !a->tags.n)
		return 0;
	repo = path_join(ws->root, a->target_path);
	(void)tend_git_tags_behind(repo, ws->state_dir, a->ref, a->tags.v,
	    a->tags.n, count_tag, &n);
	free(repo);
	return n;
}

/* "  push origin refs/heads/pages: 1 ahead, 0 behind; last pushed ...;
 * error: ..." */
static void
put_push(struct tend_buf *t, const struct tend_push_status *ps)
{
	tend_buf_printf(t, "\n  push %s %s: ", ps->remote, ps->remote_ref);
	if (ps->known)
		tend_buf_printf(t, "%zu ahead, %zu behind", ps->ahead,
		    ps->behind);
	else
		tend_buf_puts(t, "ahead and behind not known");
	tend_buf_puts(t, "; last pushed ");
	if (ps->pushed)
		put_when(t, ps->pushed);
	else
		tend_buf_puts(t, "never");
	if (ps->error) {
		tend_buf_puts(t, "\n  push error");
		if (ps->tried) {
			tend_buf_puts(t, " (");
			put_when(t, ps->tried);
			tend_buf_putc(t, ')');
		}
		tend_buf_puts(t, ": ");
		put_readable(t, ps->error);
	}
}

/* The agent's entry for `name` in its status answer, or NULL */
static const struct tend_json *
agent_app(const struct tend_json *agent, const char *name)
{
	const struct tend_json *apps = tend_json_get(agent, "apps");

	for (const struct tend_json *a = apps ? apps->child : NULL; a;
	     a = a->next)
		if (strcmp(tend_json_str(a, "name", ""), name) == 0)
			return a;
	return NULL;
}

/*
 * tend status: the agent, then each app, in tend.conf's order and then
 * those tracked from before. Text says it with local times and ages; the
 * JSON has the same facts under the same names as sync's.
 */
#define STATUS_WAIT_MS 3000

int
cmd_status(struct cli *c, struct tend_ws *ws)
{
	char **tracked = NULL;
	size_t ntracked = 0, shown = 0;
	struct tend_buf out = TEND_BUF_INIT, reply = TEND_BUF_INIT;
	struct tend_txn *txn = NULL;
	struct tend_json *agent = NULL;
	int rc;

	/* an agent in a long pass answers only after it (a new user's
	 * trial: status hung 9 s behind a slow exec): 3 s, then the
	 * store's own word */
	int busy = 0;
	int arc = tend_agent_request_wait(ws->state_dir, "status", &reply,
	    STATUS_WAIT_MS);
	if (arc == 0)
		agent = tend_json_parse(reply.ptr, reply.len, NULL, 0);
	else if (arc == TEND_ERETRY)
		busy = tend_ws_agent_pid(ws);
	tend_buf_release(&reply);
	ws->readonly = true;
	if ((rc = tend_ws_open(ws)) ||
	    (rc = tend_ws_tracked_apps(ws, &tracked, &ntracked))) {
		say_error("%s", tend_error_last());
		tend_json_free(agent);
		return EXIT_FAIL;
	}
	if (c->json) {
		tend_buf_printf(&out, "{\"workspace\": ");
		tend_buf_json(&out, ws->root);
		tend_buf_puts(&out, ", \"agent\": ");
		if (agent) {
			/* its status answer, but for "event", and its apps
			 * are under "apps" below */
			tend_buf_putc(&out, '{');
			for (const struct tend_json *m = agent->child; m;
			     m = m->next) {
				if (strcmp(m->key, "event") == 0 ||
				    strcmp(m->key, "apps") == 0)
					continue;
				tend_buf_puts(&out, out.ptr[out.len - 1] == '{'
						  ? "" : ", ");
				tend_buf_json(&out, m->key);
				tend_buf_puts(&out, ": ");
				tend_json_write(&out, m);
			}
			tend_buf_putc(&out, '}');
		} else if (busy > 0)
			tend_buf_printf(&out, "{\"pid\": %d, \"busy\": true}",
			    busy);
		else
			tend_buf_puts(&out, "null");
		tend_buf_puts(&out, ", \"apps\": [");
	} else if (!c->quiet) {
		printf("workspace %s (state %s)\n", ws->root, ws->cfg.state);
		if (agent) {
			struct tend_buf t = TEND_BUF_INIT;
			long long started = tend_json_int(agent, "started", 0,
			    TEND_JSON_INT_MAX, 0);

			if (started)
				put_when(&t, started);
			else
				tend_buf_puts(&t, "?");
			printf("agent: pid %lld, %s, started %s; %lld passes, "
			       "%lld watches, %lld overflows, %lld queued, "
			       "%lld applied\n",
			    tend_json_int(agent, "pid", 0, INT32_MAX, 0),
			    tend_json_str(agent, "state", "?"), t.ptr,
			    tend_json_int(agent, "passes", 0, TEND_JSON_INT_MAX, 0),
			    tend_json_int(agent, "watches", 0, TEND_JSON_INT_MAX, 0),
			    tend_json_int(agent, "overflows", 0, TEND_JSON_INT_MAX, 0),
			    tend_json_int(agent, "queue", 0, TEND_JSON_INT_MAX, 0),
			    tend_json_int(agent, "applied", 0, TEND_JSON_INT_MAX, 0));
			tend_buf_release(&t);
		} else if (busy > 0)
			printf("agent: pid %d, busy: no answer within %d s (a "
			       "pass runs; tend top follows it); the counts below "
			       "are the store's\n", busy, STATUS_WAIT_MS / 1000);
		else
			printf("agent: not running\n");
		if (!ws->cfg.napps)
			printf("%s defines no apps: add an [app \"NAME\"] "
			       "section with a source and a target (see "
			       "tend(1))\n", ws->conf_path);
	}
	tend_store_read_begin(tend_engine_store(ws->eng), &txn);
	size_t nall = ws->cfg.napps + ntracked;
	for (size_t i = 0; i < nall; i++) {
		const char *name = i < ws->cfg.napps ? ws->cfg.apps[i].name
						     : tracked[i - ws->cfg.napps];
		bool in_conf = tend_ws_app(ws, name) != NULL;
		struct tend_app_counts cc = {0};
		struct tend_bytes stored = {NULL, 0};
		const struct tend_json *aa = agent ? agent_app(agent, name) : NULL;
		const struct tend_json *al = tend_json_get(aa, "last");
		struct tend_json *sl = NULL;
		const struct tend_json *last = NULL;
		char key[300];

		struct tend_push_status ps = {0};

		if (i >= ws->cfg.napps && in_conf)
			continue;
		/* the store's counters: O(1) in the workspace's size (a
		 * store an older tend wrote last is scanned) */
		if (in_conf)
			tend_app_push_status(ws, tend_ws_app(ws, name), &ps);
		if (txn)
			tend_engine_counts(ws->eng, txn, name, &cc);
		snprintf(key, sizeof key, "last/%s", name);
		if (tend_store_get(txn, TEND_T_META, key, strlen(key),
			&stored) == 0)
			sl = tend_json_parse((const char *)stored.data,
			    stored.len, NULL, 0);
		/* the agent's pass, if it made one since it started; else
		 * the one kept in the store */
		last = al && al->type == TEND_JSON_OBJ ? al : sl;
		/* the stored pass finished cleanly, yet states are
		 * unsettled: a later pass began and did not finish (it was
		 * killed, or it runs now) and is not the one shown */
		bool unfinished = false;
		if (last && last == sl && !aa && cc.pending) {
			struct tend_pass lp;

			tend_pass_from_json(&lp, last);
			unfinished = lp.status == 0 && !lp.failed &&
			    !lp.errors && !lp.held_deletes;
		}
		/* tags a pass left behind their ref's tip: not unsettled
		 * states, but the next sync moves them */
		int behind = in_conf ? tags_behind(ws, tend_ws_app(ws, name))
				     : 0;
		/* a git ref reset by hand: the records say applied, the ref
		 * lost it (the next pass verifies every entry) */
		char was[13];
		bool reset = in_conf &&
		    tend_app_ref_rewritten(ws, tend_ws_app(ws, name), was);
		long long queued = tend_json_int(aa, "queued", 0,
		    TEND_JSON_INT_MAX, 0);
		long long held = tend_json_int(aa, "held", 0,
		    TEND_JSON_INT_MAX, 0);
		if (c->json) {
			tend_buf_puts(&out, shown++ ? ",\n  {" : "\n  {");
			tend_buf_puts(&out, "\"app\": ");
			tend_buf_json(&out, name);
			tend_buf_printf(&out,
			    ", \"configured\": %s, \"states\": %llu, "
			    "\"pending\": %llu",
			    in_conf ? "true" : "false",
			    (unsigned long long)cc.states,
			    (unsigned long long)cc.pending);
			if (aa)
				tend_buf_printf(&out, ", \"queued\": %lld, "
						      "\"held_deletes\": %lld",
				    queued, held);
			if (behind > 0)
				tend_buf_printf(&out, ", \"tags_behind\": %d",
				    behind);
			if (reset)
				tend_buf_printf(&out, ", \"ref_reset_from\": "
						      "\"%s\"", was);
			tend_buf_puts(&out, ", \"last\": ");
			if (last) {
				struct tend_pass p;

				tend_pass_from_json(&p, last);
				tend_buf_putc(&out, '{');
				tend_pass_json(&out, &p);
				if (tend_json_bool(last, "dropped", false))
					tend_buf_puts(&out, ", \"dropped\": true");
				if (tend_json_bool(last, "dropping", false))
					tend_buf_puts(&out, ", \"dropping\": true");
				tend_buf_printf(&out, ", \"by\": \"%s\"}",
				    last == al ? "agent" : "store");
				tend_buf_printf(&out, ", \"later_pass_unfinished\": "
						      "%s",
				    unfinished ? "true" : "false");
			} else
				tend_buf_puts(&out, "null");
			if (ps.configured) {
				tend_buf_puts(&out, ", \"push\": ");
				tend_push_status_json(&out, &ps);
				/* the agent's: a push under way now */
				if (tend_json_get(aa, "pushing"))
					tend_buf_printf(&out,
					    ", \"pushing\": %s",
					    tend_json_bool(aa, "pushing", false)
						? "true" : "false");
			}
			tend_buf_putc(&out, '}');
		} else if (!c->quiet) {
			struct tend_buf t = TEND_BUF_INIT;

			tend_buf_puts(&t, name);
			if (!in_conf)
				tend_buf_printf(&t, " (not in tend.conf: tend "
						    "drop %s removes it)", name);
			tend_buf_printf(&t, ": %llu target states, %llu unsettled",
			    (unsigned long long)cc.states,
			    (unsigned long long)cc.pending);
			if (behind > 0)
				tend_buf_printf(&t, ", %d tag%s left behind (tend "
						    "sync moves %s)", behind,
				    behind == 1 ? "" : "s",
				    behind == 1 ? "it" : "them");
			if (reset)
				tend_buf_printf(&t, "; its ref no longer holds "
						    "%s, tend's last commit (reset "
						    "by hand?): tend sync verifies "
						    "every entry", was);
			if (queued)
				tend_buf_printf(&t, ", %lld queued", queued);
			long long retry = tend_json_int(aa, "retry_in_ms", -1,
			    TEND_JSON_INT_MAX, -1);
			if (retry >= 0)
				tend_buf_printf(&t, ", the agent retries its "
						    "failures in %llds",
				    (retry + 999) / 1000);
			if (held)
				tend_buf_printf(&t, ", %lld delete%s held", held,
				    held == 1 ? "" : "s");
			if (last && tend_json_bool(last, "dropping", false)) {
				tend_buf_puts(&t, "; ");
				say_drop_interrupted(&t, name,
				    tend_json_int(last, "time", 0,
					TEND_JSON_INT_MAX, 0));
			} else if (last && tend_json_bool(last, "dropped", false)) {
				struct tend_pass p;

				/* tend drop's record: the app's states went */
				tend_pass_from_json(&p, last);
				tend_buf_puts(&t, p.status ? "; drop failed "
							   : "; dropped ");
				put_when(&t, p.time);
				tend_buf_printf(&t, " (%llu target states "
						    "reverted", (unsigned long
							long)p.deleted);
				if (p.forgotten)
					tend_buf_printf(&t, ", %llu forgotten",
					    (unsigned long long)p.forgotten);
				if (p.failed)
					tend_buf_printf(&t, ", %llu failed",
					    (unsigned long long)p.failed);
				tend_buf_puts(&t, p.status
				    ? "): tend drop again retries what is "
				      "left, tend sync declares it again"
				    : "): tend sync declares it again");
				if (p.status && p.error) {
					tend_buf_puts(&t, "\n  error: ");
					put_readable(&t, p.error);
				}
			} else if (last) {
				struct tend_pass p;

				tend_pass_from_json(&p, last);
				if (unfinished)
					tend_buf_puts(&t, "; a later pass did not "
							  "finish (killed, or "
							  "running now): the "
							  "next sync settles "
							  "it");
				tend_buf_puts(&t, unfinished ? "; last finished "
							       "pass "
							     : "; last pass ");
				if (p.time)
					put_when(&t, p.time);
				tend_buf_puts(&t, ": ");
				tend_pass_text(&t, &p);
				if (p.error) {
					tend_buf_puts(&t, "\n  error: ");
					put_readable(&t, p.error);
					/* check names what is in the way of an
					 * entry, not a declaration's error (a
					 * conflict: check said "no drift") */
					if (p.failed + p.errors > 1)
						tend_buf_printf(&t, "\n  (the "
						    "first of %llu failures: "
						    "%s names each)",
						    (unsigned long long)(
							p.failed + p.errors),
						    p.failed ? "tend check, or "
						    "tend sync," : "tend sync");
				}
			} else if (cc.states)
				/* an agent keeps its passes until it exits, a
				 * sync or drop writes its own at the end: a
				 * kill loses them, not what they applied */
				tend_buf_puts(&t, "; last pass not recorded "
						  "(its process was killed)");
			else
				tend_buf_puts(&t, "; never synced");
			if (ps.configured)
				put_push(&t, &ps);
			printf("%s\n", t.ptr);
			tend_buf_release(&t);
		}
		tend_json_free(sl);
		tend_push_status_finish(&ps);
	}
	tend_store_read_end(txn);
	if (c->json) {
		tend_buf_puts(&out, shown ? "\n]}\n" : "]}\n");
		put_doc(&out);
	}
	for (size_t i = 0; i < ntracked; i++)
		free(tracked[i]);
	free(tracked);
	tend_json_free(agent);
	tend_buf_release(&out);
	return 0;
}
