/*
 * model.c - the dashboard's model (see model.h).
 *
 * The pending list is the agent's "plan" of each app (replaced whole)
 * plus the actions of a running pass (action_pending); an applied or
 * failed action leaves it for the activity list, which keeps the newest
 * TM_ACTIVITY_MAX. The tree is loaded a level at a time as the user
 * opens it, and reloaded after a pass of its app.
 */
#include "model.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json.h"

const char *const tm_keys_line =
    "q quit  ? help  Tab panel  / filter  Enter open  s sync  p pause  "
    "r rescan  a approve";

const char *const tm_help_text =
    "tend top: what the agent is about to do, what it did, what it tracks\n"
    "\n"
    "  Tab, Shift-Tab   next, previous panel\n"
    "  j k, arrows      move; PgUp PgDn Home End\n"
    "  Enter            details (why an action happens), open a tree node\n"
    "  /                filter the focused panel (Enter keeps, Esc clears)\n"
    "  s                sync now (a full pass of every app)\n"
    "  p                pause or resume the agent (changes then queue up\n"
    "                   and show as pending)\n"
    "  r                rescan the sources\n"
    "  a                approve the deletes the delete brake holds\n"
    "  ?                this help; Esc or ? closes it\n"
    "  q                quit (the agent keeps running)\n"
    "\n"
    "Pending:  + create  ~ update  - delete  ! container invalidated\n"
    "          HELD: a delete the delete brake keeps back until approved\n"
    "Activity: applied actions and errors, newest first";

static char *
dup_or_null(const char *s)
{
	return s ? tend_xstrdup(s) : NULL;
}

static void
action_free(struct tm_action *a)
{
	free(a->app);
	free(a->path);
	free(a->provider);
	free(a->key);
	free(a->component);
	free(a->why);
	free(a->error);
	free(a->invalidation);
}

static void
node_free(struct tm_node *n)
{
	for (size_t i = 0; i < n->nkids; i++)
		node_free(&n->kids[i]);
	free(n->kids);
	free(n->app);
	free(n->prefix);
	free(n->name);
	free(n->owner);
	free(n->record);
	memset(n, 0, sizeof *n);
}

void
tm_init(struct tm_model *m, const char *workspace)
{
	memset(m, 0, sizeof *m);
	m->workspace = tend_xstrdup(workspace ? workspace : "");
	m->out = (struct tend_buf)TEND_BUF_INIT;
	m->focus = TM_PENDING;
	m->dirty = true;
}

static void
pending_clear(struct tm_model *m)
{
	for (size_t i = 0; i < m->npending; i++)
		action_free(&m->pending[i]);
	free(m->pending);
	m->pending = NULL;
	m->npending = 0;
}

static void
apps_clear(struct tm_model *m)
{
	for (size_t i = 0; i < m->napps; i++) {
		free(m->apps[i].name);
		free(m->apps[i].push_remote);
		free(m->apps[i].push_error);
	}
	free(m->apps);
	m->apps = NULL;
	m->napps = 0;
}

void
tm_free(struct tm_model *m)
{
	pending_clear(m);
	for (size_t i = 0; i < m->nactivity; i++)
		action_free(&m->activity[i]);
	free(m->activity); /* the ring fills from slot 0 */
	apps_clear(m);
	node_free(&m->tree);
	free(m->config_error);
	free(m->workspace);
	tend_buf_release(&m->out);
}

void
tm_connected(struct tm_model *m)
{
	m->conn = TM_LOADING;
	/* a new agent may have another plan: start from its word */
	pending_clear(m);
	node_free(&m->tree);
	tend_buf_puts(&m->out, "subscribe\nstatus\n");
	m->dirty = true;
}

void
tm_disconnected(struct tm_model *m)
{
	m->conn = m->conn == TM_CONNECTING ? TM_CONNECTING : TM_DISCONNECTED;
	m->running[0] = '\0';
	tend_buf_reset(&m->out);
	m->dirty = true;
}

/* ---- the agent's events ---- */

static void
action_from(struct tm_action *a, const struct tend_json *j, double now)
{
	const char *op = tend_json_str(j, "op", "");

	memset(a, 0, sizeof *a);
	a->op = op[0] ? op[0] : 'E';
	a->app = dup_or_null(tend_json_str(j, "app", ""));
	a->path = dup_or_null(tend_json_str(j, "path", NULL));
	a->provider = dup_or_null(tend_json_str(j, "provider", NULL));
	a->key = dup_or_null(tend_json_str(j, "key", NULL));
	a->component = dup_or_null(tend_json_str(j, "component", NULL));
	a->why = dup_or_null(tend_json_str(j, "why", NULL));
	a->error = dup_or_null(tend_json_str(j, "error", NULL));
	a->invalidation = dup_or_null(tend_json_str(j, "invalidation", NULL));
	if (a->invalidation)
		a->op = '!';
	a->held = tend_json_bool(j, "held", false);
	a->nprev = (unsigned)tend_json_int(j, "nprev", 0, UINT32_MAX, 0);
	a->missing = tend_json_bool(j, "missing", false);
	a->time = now;
}

static bool
same_state(const struct tm_action *a, const struct tm_action *b)
{
	return a->app && b->app && a->provider && b->provider && a->key &&
	    b->key && strcmp(a->app, b->app) == 0 &&
	    strcmp(a->provider, b->provider) == 0 &&
	    strcmp(a->key, b->key) == 0;
}

static void
pending_remove_if(struct tm_model *m, const char *app,
    const struct tm_action *like, bool live_only)
{
	size_t k = 0;

	for (size_t i = 0; i < m->npending; i++) {
		struct tm_action *p = &m->pending[i];
		bool drop = like ? same_state(p, like)
				 : strcmp(p->app, app) == 0 &&
			(!live_only || p->live);

		if (drop)
			action_free(p);
		else
			m->pending[k++] = *p;
	}
	m->npending = k;
}

static void
pending_add(struct tm_model *m, struct tm_action *a)
{
	m->pending = tend_xrealloc(m->pending,
	    (m->npending + 1) * sizeof *m->pending);
	m->pending[m->npending++] = *a;
}

/* the i-th newest activity entry */
static struct tm_action *
activity_at(const struct tm_model *m, size_t i)
{
	return &m->activity[(m->act_next + TM_ACTIVITY_MAX - 1 - i) %
	    TM_ACTIVITY_MAX];
}

/* a ring: at 1000 actions a second nothing is moved or reallocated */
static void
activity_add(struct tm_model *m, struct tm_action *a)
{
	time_t tt = (time_t)a->time;
	struct tm tmv;

	if (!m->activity)
		m->activity = tend_xcalloc(TM_ACTIVITY_MAX,
		    sizeof *m->activity);
	if (m->nactivity == TM_ACTIVITY_MAX)
		action_free(&m->activity[m->act_next]);
	else
		m->nactivity++;
	localtime_r(&tt, &tmv);
	strftime(a->clock, sizeof a->clock, "%H:%M:%S ", &tmv);
	m->activity[m->act_next] = *a;
	m->act_next = (m->act_next + 1) % TM_ACTIVITY_MAX;
	/* keep the user's place when they scrolled down */
	if (m->sel[TM_ACTIVITY])
		m->sel[TM_ACTIVITY]++;
}

/* An app's "push" object (status, or a push event) into its row. */
static void
push_from(struct tm_app *t, const struct tend_json *p, bool pushing)
{
	const char *e;

	if (!p || p->type != TEND_JSON_OBJ)
		return;
	t->has_push = true;
	t->pushing = pushing;
	t->ahead = tend_json_int(p, "ahead", -1, TEND_JSON_INT_MAX, -1);
	t->behind = tend_json_int(p, "behind", -1, TEND_JSON_INT_MAX, -1);
	t->pushed = tend_json_int(p, "pushed", 0, TEND_JSON_INT_MAX, 0);
	free(t->push_remote);
	t->push_remote = tend_xstrdup(tend_json_str(p, "remote", "?"));
	free(t->push_error);
	e = tend_json_str(p, "error", NULL);
	t->push_error = e ? tend_xstrdup(e) : NULL;
}

static void
on_push(struct tm_model *m, const struct tend_json *j, const char *app)
{
	for (size_t i = 0; i < m->napps; i++)
		if (strcmp(m->apps[i].name, app) == 0)
			push_from(&m->apps[i], tend_json_get(j, "push"), false);
}

/* "N errors, " when there were any (declarations that failed), else "" */
static const char *
errors_part(double errors)
{
	static char buf[48];

	if (errors <= 0)
		return "";
	snprintf(buf, sizeof buf, "%.0f error%s, ", errors,
	    errors == 1 ? "" : "s");
	return buf;
}

void
tm_pending_empty(const struct tm_model *m, struct tend_buf *b)
{
	long long unsettled = 0, retry = -1;
	unsigned long long errors = 0;
	const char *app = NULL, *eapp = NULL;
	size_t napps = 0, neapps = 0;

	for (size_t i = 0; i < m->napps; i++) {
		const struct tm_app *t = &m->apps[i];
		long long u = t->unsettled > 0 ? t->unsettled : 0;

		if (t->errors) {
			errors += t->errors;
			eapp = t->name;
			neapps++;
		}
		if (!u && t->retry_in_ms < 0)
			continue;
		unsettled += u;
		app = t->name;
		napps++;
		if (t->retry_in_ms >= 0 && (retry < 0 || t->retry_in_ms < retry))
			retry = t->retry_in_ms;
	}
	/* short: the panel may be 40 columns wide */
	if (napps) {
		if (unsettled)
			tend_buf_printf(b, "%lld unsettled in ", unsettled);
		else
			tend_buf_puts(b, "the last pass failed in ");
		if (napps == 1)
			tend_buf_puts(b, app);
		else
			tend_buf_printf(b, "%zu apps", napps);
		tend_buf_puts(b, ": ");
		if (retry >= 0)
			tend_buf_printf(b, "retried in %llds ",
			    (retry + 999) / 1000);
		tend_buf_puts(b, "(s: sync now)");
	} else if (errors) {
		/* a declaration that failed (an exec): its source's next
		 * change runs it again */
		tend_buf_printf(b, "nothing pending, but %llu error%s in ",
		    errors, errors == 1 ? "" : "s");
		if (neapps == 1)
			tend_buf_puts(b, eapp);
		else
			tend_buf_printf(b, "%zu apps", neapps);
		tend_buf_puts(b, " (Activity says which)");
	} else
		tend_buf_puts(b, "nothing pending: targets match the sources");
}

static void
on_status(struct tm_model *m, const struct tend_json *j, double now)
{
	const struct tend_json *apps = tend_json_get(j, "apps");

	m->conn = TM_READY;
	m->status_at = now;
	m->pid = (int)tend_json_int(j, "pid", 0, INT32_MAX, 0);
	m->paused = strcmp(tend_json_str(j, "state", ""), "paused") == 0;
	m->uptime_ms = (uint64_t)tend_json_int(j, "uptime_ms", 0, TEND_JSON_INT_MAX, 0);
	m->passes = (uint64_t)tend_json_int(j, "passes", 0, TEND_JSON_INT_MAX, 0);
	m->watches = (uint64_t)tend_json_int(j, "watches", 0, TEND_JSON_INT_MAX, 0);
	m->overflows = (uint64_t)tend_json_int(j, "overflows", 0, TEND_JSON_INT_MAX, 0);
	m->queue = (uint64_t)tend_json_int(j, "queue", 0, TEND_JSON_INT_MAX, 0);
	apps_clear(m);
	free(m->config_error);
	const char *ce = tend_json_str(j, "config_error", NULL);
	m->config_error = ce ? tend_xstrdup(ce) : NULL;
	if (apps && apps->type == TEND_JSON_ARR) {
		m->apps = tend_xcalloc(apps->len + 1, sizeof *m->apps);
		for (const struct tend_json *a = apps->child; a; a = a->next) {
			struct tm_app *t = &m->apps[m->napps++];

			t->name = tend_xstrdup(a->type == TEND_JSON_STR
				? a->s : tend_json_str(a, "name", "?"));
			t->components = tend_json_int(a, "components", -1,
			    TEND_JSON_INT_MAX, -1);
			t->states = tend_json_int(a, "states", -1,
			    TEND_JSON_INT_MAX, -1);
			t->pending = (unsigned long long)tend_json_int(a,
			    "pending", 0, TEND_JSON_INT_MAX, 0);
			t->errors = (unsigned long long)tend_json_int(a,
			    "errors", 0, TEND_JSON_INT_MAX, 0);
			t->held = (unsigned long long)tend_json_int(a, "held", 0,
			    TEND_JSON_INT_MAX, 0);
			t->queued = (unsigned long long)tend_json_int(a,
			    "queued", 0, TEND_JSON_INT_MAX, 0);
			t->unsettled = tend_json_int(a, "unsettled", -1,
			    TEND_JSON_INT_MAX, -1);
			t->retry_in_ms = tend_json_int(a, "retry_in_ms", -1,
			    TEND_JSON_INT_MAX, -1);
			push_from(t, tend_json_get(a, "push"),
			    tend_json_bool(a, "pushing", false));
		}
	}
	/* the tree's first level: one node per app, kept across updates */
	for (size_t i = 0; i < m->napps; i++) {
		bool have = false;

		for (size_t k = 0; k < m->tree.nkids && !have; k++)
			have = strcmp(m->tree.kids[k].app, m->apps[i].name) == 0;
		if (have)
			continue;
		m->tree.kids = tend_xrealloc(m->tree.kids,
		    (m->tree.nkids + 1) * sizeof *m->tree.kids);
		m->tree.kids[m->tree.nkids++] = (struct tm_node){
		    .app = tend_xstrdup(m->apps[i].name),
		    .prefix = tend_xstrdup(""),
		    .name = tend_xstrdup(m->apps[i].name),
		    .dir = true};
	}
	const struct tend_json *last = tend_json_get(j, "last");
	if (last && last->type == TEND_JSON_OBJ && !m->last[0])
		snprintf(m->last, sizeof m->last, "%s: +%.0f ~%.0f -%.0f, "
		    "%.0f failed, %s%.0f ms",
		    tend_json_str(last, "app", "?"),
		    tend_json_num(last, "created", 0),
		    tend_json_num(last, "updated", 0),
		    tend_json_num(last, "deleted", 0),
		    tend_json_num(last, "failed", 0),
		    errors_part(tend_json_num(last, "errors", 0)),
		    tend_json_num(last, "ms", 0));
}

static void
request_level(struct tm_model *m, struct tm_node *n)
{
	tend_buf_puts(&m->out, "{\"cmd\": \"states\", \"app\": ");
	tend_buf_json(&m->out, n->app);
	tend_buf_puts(&m->out, ", \"prefix\": ");
	tend_buf_json(&m->out, n->prefix);
	tend_buf_puts(&m->out, "}\n");
	n->loading = true;
}

static struct tm_node *
node_find(struct tm_node *n, const char *app, const char *prefix)
{
	if (n->app && strcmp(n->app, app) == 0 &&
	    strcmp(n->prefix, prefix) == 0)
		return n;
	for (size_t i = 0; i < n->nkids; i++) {
		struct tm_node *k = &n->kids[i];

		if (strcmp(k->app, app) != 0)
			continue;
		/* descend only into the node on the path */
		if (strncmp(prefix, k->prefix, strlen(k->prefix)) == 0) {
			struct tm_node *f = node_find(k, app, prefix);

			if (f)
				return f;
		}
	}
	return NULL;
}

static void
on_states(struct tm_model *m, const struct tend_json *j)
{
	struct tm_node *n = node_find(&m->tree, tend_json_str(j, "app", ""),
	    tend_json_str(j, "prefix", ""));
	const struct tend_json *kids = tend_json_get(j, "children");

	if (!n || !kids || kids->type != TEND_JSON_ARR)
		return;
	struct tm_node *old = n->kids;
	size_t nold = n->nkids;
	n->kids = tend_xcalloc(kids->len + 1, sizeof *n->kids);
	n->nkids = 0;
	for (const struct tend_json *c = kids->child; c; c = c->next) {
		struct tm_node *k = &n->kids[n->nkids++];
		const char *name = tend_json_str(c, "name", "?");
		struct tend_buf p = TEND_BUF_INIT;

		tend_buf_printf(&p, "%s%s", n->prefix, name);
		k->app = tend_xstrdup(n->app);
		k->prefix = tend_buf_detach(&p, NULL);
		k->name = tend_xstrdup(name);
		k->dir = tend_json_bool(c, "dir", false);
		k->count = (size_t)tend_json_int(c, "count", 0,
		    TEND_JSON_INT_MAX, 0);
		k->owner = dup_or_null(tend_json_str(c, "owner", NULL));
		k->record = dup_or_null(tend_json_str(c, "record", NULL));
		k->container = tend_json_bool(c, "container", false);
		k->pending = tend_json_bool(c, "pending", false);
		/* what was open stays open, and is brought up to date */
		for (size_t i = 0; i < nold; i++) {
			struct tm_node *o = &old[i];

			if (!o->expanded || strcmp(o->name, k->name) != 0 ||
			    !k->dir)
				continue;
			k->expanded = true;
			k->kids = o->kids;
			k->nkids = o->nkids;
			k->loaded = o->loaded;
			o->kids = NULL;
			o->nkids = 0;
			request_level(m, k);
		}
	}
	for (size_t i = 0; i < nold; i++)
		node_free(&old[i]);
	free(old);
	n->loaded = true;
	n->loading = false;
	n->total = (size_t)tend_json_int(j, "total", 0, TEND_JSON_INT_MAX, 0);
	if (n->total < n->nkids)
		n->total = n->nkids;
	n->truncated = tend_json_bool(j, "truncated", false);
}

/* After a pass of `app`: the open levels of its tree are out of date. */
static void
reload_open(struct tm_model *m, struct tm_node *n, const char *app)
{
	if (n->app && strcmp(n->app, app) != 0)
		return;
	if (n->app && n->expanded && !n->loading) {
		request_level(m, n); /* its open kids follow from the answer */
		return;
	}
	for (size_t i = 0; i < n->nkids; i++)
		reload_open(m, &n->kids[i], app);
}

/* An app's queued changes as an event says; the header's queue is the
 * sum over the apps, as in the agent's status. */
static void
queue_set(struct tm_model *m, const char *app, unsigned long long n)
{
	uint64_t sum = 0;
	bool known = false;

	for (size_t i = 0; i < m->napps; i++) {
		if (strcmp(m->apps[i].name, app) == 0) {
			m->apps[i].queued = n;
			known = true;
		}
		sum += m->apps[i].queued;
	}
	if (known)
		m->queue = sum;
}

static void
pass_line(struct tm_model *m, const struct tend_json *j)
{
	double forgotten = tend_json_num(j, "forgotten", 0);
	/* =N: states forgotten, what was at their names left as it was */
	int n = snprintf(m->last, sizeof m->last,
	    "%s: +%.0f ~%.0f -%.0f", tend_json_str(j, "app", "?"),
	    tend_json_num(j, "created", 0), tend_json_num(j, "updated", 0),
	    tend_json_num(j, "deleted", 0));
	if (n > 0 && forgotten > 0 && (size_t)n < sizeof m->last)
		n += snprintf(m->last + n, sizeof m->last - (size_t)n,
		    " =%.0f", forgotten);
	/* states adopted: their names held the declared content already */
	double adopted = tend_json_num(j, "adopted", 0);
	if (n > 0 && adopted > 0 && (size_t)n < sizeof m->last)
		n += snprintf(m->last + n, sizeof m->last - (size_t)n,
		    " %.0f adopted", adopted);
	/* failed: actions; errors: declarations (a source unreadable) */
	double failed = tend_json_num(j, "failed", 0);
	double held = tend_json_num(j, "held_deletes", 0);

	if (n < 0 || (size_t)n >= sizeof m->last)
		return;
	snprintf(m->last + n, sizeof m->last - (size_t)n,
	    ", %.0f failed, %s%.0f held, %.0f files (%.0f read) in %.0f ms",
	    failed, errors_part(tend_json_num(j, "errors", 0)), held,
	    tend_json_num(j, "files", 0), tend_json_num(j, "read", 0),
	    tend_json_num(j, "ms", 0));
}

static size_t held_count(const struct tm_model *m);

/*
 * The agent approved the deletes of `items` source items (those its
 * last passes held). What the user was shown, and what the next pass
 * deletes, are the held target states of the plans (an item may declare
 * several, or none): the events before this answer brought them, so
 * they are the count to say.
 */
static void
approved(struct tm_model *m, double items)
{
	size_t held = held_count(m);

	if (items > 0 && held)
		snprintf(m->message, sizeof m->message,
		    "approved %zu held delete%s: the next pass applies them",
		    held, held == 1 ? "" : "s");
	else if (items > 0)
		snprintf(m->message, sizeof m->message,
		    "approved the held deletes of %.0f source item%s: the "
		    "next pass applies them", items, items > 1 ? "s" : "");
	else if (held)
		/* paused: a preview shows what the brake will hold */
		snprintf(m->message, sizeof m->message,
		    "nothing approved yet: a pass (s or p) holds these deletes "
		    "first");
	else
		snprintf(m->message, sizeof m->message,
		    "no deletes were held: nothing approved");
}

void
tm_feed(struct tm_model *m, const char *line, double now)
{
	char err[128];
	struct tend_json *j = tend_json_parse(line, strlen(line), err,
	    sizeof err);
	struct tm_action a;

	if (!j)
		return; /* not ours to judge: skip the line */
	const char *ev = tend_json_str(j, "event", "");
	const char *app = tend_json_str(j, "app", "");

	m->dirty = true;
	if (strcmp(ev, "status") == 0) {
		on_status(m, j, now);
	} else if (strcmp(ev, "plan") == 0) {
		const struct tend_json *acts = tend_json_get(j, "actions");

		/* the agent's queue as of this plan, not of the last status */
		if (tend_json_get(j, "queued"))
			queue_set(m, app, (unsigned long long)tend_json_int(j,
			    "queued", 0, TEND_JSON_INT_MAX, 0));
		pending_remove_if(m, app, NULL, false);
		for (const struct tend_json *c = acts ? acts->child : NULL; c;
		     c = c->next) {
			action_from(&a, c, now);
			pending_add(m, &a);
		}

	} else if (strcmp(ev, "action_pending") == 0) {
		action_from(&a, j, now);
		a.live = true;
		pending_remove_if(m, app, &a, false);
		pending_add(m, &a);
	} else if (strcmp(ev, "action_applied") == 0 ||
	    strcmp(ev, "action_failed") == 0) {
		action_from(&a, j, now);
		a.failed = ev[7] == 'f';
		pending_remove_if(m, app, &a, false);
		activity_add(m, &a);
	} else if (strcmp(ev, "error") == 0 && *app) {
		action_from(&a, j, now);
		a.op = 'E';
		a.failed = true;
		activity_add(m, &a);
	} else if (strcmp(ev, "error") == 0) {
		snprintf(m->message, sizeof m->message, "agent: %s",
		    tend_json_str(j, "error", "?"));
	} else if (strcmp(ev, "push") == 0) {
		on_push(m, j, app);
	} else if (strcmp(ev, "pass_started") == 0) {
		snprintf(m->running, sizeof m->running, "%s", app);
	} else if (strcmp(ev, "pass_finished") == 0) {
		m->running[0] = '\0';
		pass_line(m, j);
		pending_remove_if(m, app, NULL, true);
		queue_set(m, app, 0); /* a pass takes all of its app's queue */
		m->passes = (uint64_t)tend_json_int(j, "seq", 0,
		    TEND_JSON_INT_MAX, (long long)m->passes);
		reload_open(m, &m->tree, app);
	} else if (strcmp(ev, "paused") == 0 || strcmp(ev, "resumed") == 0) {
		m->paused = ev[0] == 'p';
	} else if (strcmp(ev, "app_gone") == 0) {
		memset(&a, 0, sizeof a);
		a.op = 'E';
		a.failed = true;
		a.app = tend_xstrdup(app);
		a.error = tend_xstrdup("no longer in tend.conf: its targets "
				       "stay (tend drop removes them)");
		a.time = now;
		activity_add(m, &a);
	} else if (strcmp(ev, "shed") == 0) {
		m->shed += (uint64_t)tend_json_int(j, "events", 0,
		    TEND_JSON_INT_MAX, 0);
	} else if (strcmp(ev, "states") == 0) {
		on_states(m, j);
	} else if (strcmp(ev, "ok") == 0 &&
	    strcmp(tend_json_str(j, "cmd", ""), "approve") == 0) {
		approved(m, tend_json_num(j, "approved", 0));
	}
	tend_json_free(j);
}

/* ---- rows ---- */

static enum tm_class
action_class(const struct tm_action *a)
{
	if (a->failed)
		return TM_C_ERROR;
	if (a->held)
		return TM_C_HELD;
	switch (a->op) {
	case '+': return TM_C_CREATE;
	case '~': return TM_C_UPDATE;
	case '-': return TM_C_DELETE;
	case '!': return TM_C_INVALID;
	default: return TM_C_NORMAL;
	}
}

/* the first line of a message */
static int
first_line(const char *s)
{
	const char *nl = s ? strchr(s, '\n') : NULL;

	return nl ? (int)(nl - s) : s ? (int)strlen(s) : 0;
}

static void
action_text(char *buf, size_t n, const struct tm_action *a, bool with_time)
{
	const char *t = with_time ? a->clock : "";
	const char *what = a->path ? a->path : a->component ? a->component : "";

	if (a->failed)
		snprintf(buf, n, "%s%c %-8s %s  %.*s", t,
		    a->op == 'E' ? 'E' : 'x', a->app, what,
		    first_line(a->error), a->error ? a->error : "");
	else
		snprintf(buf, n, "%s%c %s%-8s %s  %s", t, a->op,
		    a->held ? "HELD " : "", a->app, what, a->why ? a->why : "");
}

struct rowvec {
	struct tm_row *v;
	size_t n, cap;
	const char *filter;
};

static struct tm_row *
row_add(struct rowvec *rv)
{
	if (rv->n == rv->cap) {
		rv->cap = rv->cap ? rv->cap * 2 : 32;
		rv->v = tend_xrealloc(rv->v, rv->cap * sizeof *rv->v);
	}
	memset(&rv->v[rv->n], 0, sizeof *rv->v);
	return &rv->v[rv->n++];
}

/* drop the row just added if it does not match the filter */
static void
row_filter(struct rowvec *rv)
{
	if (rv->filter && *rv->filter && !strstr(rv->v[rv->n - 1].text,
					      rv->filter))
		rv->n--;
}

static void
tree_rows(struct rowvec *rv, struct tm_node *n, int depth)
{
	for (size_t i = 0; i < n->nkids; i++) {
		struct tm_node *k = &n->kids[i];
		struct tm_row *r = row_add(rv);
		const char *mark = !k->dir ? "   " : k->expanded ? "[-]" : "[+]";

		r->node = k;
		if (depth == 0)
			snprintf(r->text, sizeof r->text, "%s app %s%s", mark,
			    k->name, k->loading ? "  (loading...)" : "");
		else if (k->dir)
			snprintf(r->text, sizeof r->text,
			    "%*s%s %s  (%zu)%s%s%s", depth * 2, "", mark, k->name,
			    k->count, k->container ? "  container " : "",
			    k->container && k->record ? k->record : "",
			    k->loading ? "  (loading...)" : "");
		else
			snprintf(r->text, sizeof r->text, "%*s%s %s  %s  %.12s%s",
			    depth * 2, "", mark, k->name,
			    k->owner ? k->owner : "",
			    k->record ? k->record : "",
			    k->pending ? "  (pending)" : "");
		r->cls = k->pending ? TM_C_UPDATE : k->dir ? TM_C_NORMAL
							   : TM_C_DIM;
		row_filter(rv);
		if (k->expanded) {
			tree_rows(rv, k, depth + 1);
			if (k->loaded && !k->nkids) {
				r = row_add(rv);
				snprintf(r->text, sizeof r->text,
				    "%*s(no tracked states)", depth * 2 + 4,
				    "");
				r->cls = TM_C_DIM;
			}
			if (k->truncated) {
				r = row_add(rv);
				snprintf(r->text, sizeof r->text,
				    "%*s... %zu more (use / to filter, or "
				    "tend ls)", depth * 2 + 4, "",
				    k->total - k->nkids);
				r->cls = TM_C_DIM;
			}
		}
	}
}

/* the pending actions of app i, and how many of them are held deletes
 * (the events are newer than the last status) */
static unsigned long long
app_pending(const struct tm_model *m, size_t i, unsigned long long *held)
{
	unsigned long long n = 0;

	*held = 0;
	for (size_t k = 0; k < m->npending; k++)
		if (strcmp(m->pending[k].app, m->apps[i].name) == 0) {
			n++;
			*held += m->pending[k].held;
		}
	/* the agent's plan lists its first actions only (PLAN_LIST_MAX):
	 * past them its status counts them */
	if (m->apps[i].pending > n)
		n = m->apps[i].pending;
	if (m->apps[i].held > *held)
		*held = m->apps[i].held;
	return n;
}

static int
app_rank(const struct tm_model *m, size_t i)
{
	unsigned long long held;

	app_pending(m, i, &held);
	return m->apps[i].errors || m->apps[i].push_error ? 0 : held ? 1 : 2;
}

static void
app_row(const struct tm_model *m, struct rowvec *rv, size_t i)
{
	const struct tm_app *a = &m->apps[i];
	unsigned long long held, pending = app_pending(m, i, &held);
	struct tm_row *r = row_add(rv);

	char push[96] = "";

	r->app = i;
	if (a->has_push && a->ahead >= 0)
		snprintf(push, sizeof push, "  push ahead %lld behind %lld%s",
		    a->ahead, a->behind,
		    a->pushing	       ? " (pushing)"
		    : a->push_error ? " FAILED"
				    : "");
	else if (a->has_push)
		snprintf(push, sizeof push, "  push%s",
		    a->push_error ? " FAILED" : "");
	snprintf(r->text, sizeof r->text,
	    "%-12s components %-6lld states %-7lld pending "
	    "%-5llu errors %-4llu held %llu%s%s",
	    a->name, a->components, a->states, pending, a->errors, held, push,
	    strcmp(m->running, a->name) == 0 ? "  (pass running)" : "");
	r->cls = a->errors || a->push_error ? TM_C_ERROR
	    : held			   ? TM_C_HELD
					   : TM_C_NORMAL;
	row_filter(rv);
}

struct tm_row *
tm_rows(const struct tm_model *m, enum tm_panel p, size_t *n)
{
	struct rowvec rv = {.filter = m->filter[p]};
	struct tm_row *r;

	switch (p) {
	case TM_APPS:
		/* what needs the user first, so no scrolling hides it: apps
		 * with errors, then those with held deletes, then the rest,
		 * each in tend.conf's order */
		for (int rank = 0; rank < 3; rank++)
			for (size_t i = 0; i < m->napps; i++)
				if (app_rank(m, i) == rank)
					app_row(m, &rv, i);
		break;
	case TM_PENDING:
		/* held deletes last: they wait for the user */
		for (int pass = 0; pass < 2; pass++)
			for (size_t i = 0; i < m->npending; i++) {
				const struct tm_action *a = &m->pending[i];

				if (a->held != (pass == 1))
					continue;
				r = row_add(&rv);
				r->action = a;
				action_text(r->text, sizeof r->text, a, false);
				r->cls = action_class(a);
				row_filter(&rv);
			}
		break;
	case TM_ACTIVITY:
		for (size_t i = 0; i < m->nactivity; i++) {
			r = row_add(&rv);
			r->action = activity_at(m, i);
			action_text(r->text, sizeof r->text, r->action, true);
			r->cls = action_class(r->action);
			row_filter(&rv);
		}
		break;
	case TM_TREE:
		tree_rows(&rv, (struct tm_node *)&m->tree, 0);
		break;
	default:
		break;
	}
	*n = rv.n;
	return rv.v;
}

static size_t
held_count(const struct tm_model *m)
{
	size_t n = 0, listed = 0;
	unsigned long long h;

	for (size_t i = 0; i < m->napps; i++) {
		app_pending(m, i, &h);
		n += (size_t)h;
	}
	for (size_t i = 0; i < m->npending; i++)
		listed += m->pending[i].held;
	return n > listed ? n : listed;
}

void
tm_title(const struct tm_model *m, enum tm_panel p, struct tend_buf *b)
{
	static const char *const names[] = {"Apps", "Pending", "Activity",
	    "Tracked states"};
	tend_buf_printf(b, "%s", names[p]);
	if (p == TM_PENDING) {
		size_t held = held_count(m);

		unsigned long long all = 0, h;

		for (size_t i = 0; i < m->napps; i++)
			all += app_pending(m, i, &h);
		if (all > m->npending)
			tend_buf_printf(b, " (%llu, the first %zu listed)", all,
			    m->npending);
		else
			tend_buf_printf(b, " (%zu)", m->npending);
		if (held)
			tend_buf_printf(b, " - %zu deletes HELD by the delete "
					   "brake: a approves", held);
		else if (m->paused && m->npending)
			tend_buf_puts(b, " - paused: s or p applies them");
	} else if (p == TM_ACTIVITY) {
		tend_buf_printf(b, " (%zu)", m->nactivity);
		if (m->shed)
			tend_buf_printf(b, " - %llu events skipped",
			    (unsigned long long)m->shed);
	} else if (p == TM_APPS)
		tend_buf_printf(b, " (%zu)", m->napps);
	if (m->filter[p][0]) {
		size_t n;

		free(tm_rows(m, p, &n));
		tend_buf_printf(b, "  [filter: %s, %zu shown]", m->filter[p], n);
	}
}

static void
duration(char *buf, size_t n, uint64_t ms)
{
	uint64_t s = ms / 1000;

	if (s < 60)
		snprintf(buf, n, "%llus", (unsigned long long)s);
	else if (s < 3600)
		snprintf(buf, n, "%llum%02llus", (unsigned long long)(s / 60),
		    (unsigned long long)(s % 60));
	else
		snprintf(buf, n, "%lluh%02llum", (unsigned long long)(s / 3600),
		    (unsigned long long)(s / 60 % 60));
}

/* the header being laid out: fields joined on a line while they fit */
struct hdr {
	struct tend_buf *b;
	size_t cols, col, lines;
};

static void
hdr_break(struct hdr *h)
{
	if (!h->col)
		return;
	tend_buf_putc(h->b, '\n');
	h->col = 0;
	h->lines++;
}

/* `len` bytes of `s` as a field, after `sep` or on a new line. (Bytes,
 * not columns: a name in UTF-8 wraps early rather than being cut.) */
static void
hdr_field(struct hdr *h, const char *sep, const char *s, size_t len)
{
	if (h->col && h->col + strlen(sep) + len > h->cols)
		hdr_break(h);
	if (h->col) {
		tend_buf_puts(h->b, sep);
		h->col += strlen(sep);
	}
	tend_buf_put(h->b, s, len);
	h->col += len;
}

static void
hdr_fieldf(struct hdr *h, const char *sep, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
hdr_fieldf(struct hdr *h, const char *sep, const char *fmt, ...)
{
	char buf[256];
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	hdr_field(h, sep, buf, (size_t)n < sizeof buf ? (size_t)n
						      : sizeof buf - 1);
}

/* a sentence ("a, b, c") whose parts may go on lines of their own */
static void
hdr_sentence(struct hdr *h, const char *s)
{
	const char *sep = "  ";

	for (;;) {
		const char *comma = strstr(s, ", ");
		size_t len = comma ? (size_t)(comma - s) + 1 : strlen(s);

		hdr_field(h, sep, s, len);
		if (!comma)
			break;
		s = comma + 2;
		sep = " ";
	}
}

size_t
tm_header(const struct tm_model *m, double now, int cols,
    struct tend_buf *out)
{
	struct hdr h = {.b = out, .cols = cols > 20 ? (size_t)cols : 20};
	const char *ws = m->workspace;
	size_t wlen = strlen(ws), room = h.cols - strlen("tend top  ");
	char up[32];

	hdr_field(&h, "", "tend top", 8);
	/* a long workspace keeps its end, where its name is */
	if (wlen > room) {
		ws += wlen - (room - 3);
		while ((*ws & 0xc0) == 0x80)
			ws++;
		struct tend_buf e = TEND_BUF_INIT;
		tend_buf_printf(&e, "...%s", ws);
		hdr_field(&h, "  ", e.ptr, e.len);
		tend_buf_release(&e);
	} else
		hdr_field(&h, "  ", ws, wlen);
	switch (m->conn) {
	case TM_CONNECTING:
		hdr_sentence(&h, "connecting to the agent...");
		hdr_break(&h);
		hdr_sentence(&h, "waiting for the agent's socket");
		break;
	case TM_LOADING:
		hdr_sentence(&h, "loading (the agent is catching up)...");
		hdr_break(&h);
		hdr_sentence(&h, "waiting for the agent's first status");
		break;
	case TM_DISCONNECTED:
		hdr_sentence(&h, "DISCONNECTED: the agent is gone, retrying "
				 "every second");
		hdr_break(&h);
		hdr_sentence(&h, "start it again with: tend watch --daemon");
		break;
	case TM_READY:
		duration(up, sizeof up, m->uptime_ms +
			(uint64_t)((now - m->status_at) * 1000 > 0
				? (now - m->status_at) * 1000 : 0));
		hdr_fieldf(&h, "  ", "agent %d %s", m->pid, m->paused
			? "PAUSED" : m->running[0] ? "syncing" : "watching");
		hdr_fieldf(&h, "  ", "up %s", up);
		hdr_fieldf(&h, "  ", "queue %llu",
		    (unsigned long long)m->queue);
		hdr_fieldf(&h, "  ", "passes %llu",
		    (unsigned long long)m->passes);
		hdr_fieldf(&h, "  ", "watches %llu",
		    (unsigned long long)m->watches);
		hdr_fieldf(&h, "  ", "overflows %llu",
		    (unsigned long long)m->overflows);
		hdr_break(&h);
		if (m->running[0])
			hdr_fieldf(&h, "", "pass running: %s", m->running);
		else if (m->last[0]) {
			hdr_field(&h, "", "last pass", 9);
			hdr_sentence(&h, m->last);
		} else
			hdr_sentence(&h, "no pass yet");
		if (m->config_error) {
			hdr_break(&h);
			hdr_field(&h, "", "tend.conf NOT LOADED (the agent "
			    "runs the previous one):", 55);
			hdr_sentence(&h, m->config_error);
		}
		break;
	}
	hdr_break(&h);
	return h.lines;
}

/* ---- keys ---- */

static size_t
row_count(const struct tm_model *m, enum tm_panel p)
{
	size_t n;

	free(tm_rows(m, p, &n));
	return n;
}

static void
selected(const struct tm_model *m, struct tm_row *out)
{
	size_t n;
	struct tm_row *rows = tm_rows(m, m->focus, &n);

	memset(out, 0, sizeof *out);
	if (n)
		*out = rows[m->sel[m->focus] < n ? m->sel[m->focus] : n - 1];
	else
		out->text[0] = '\0';
	free(rows);
}

static void
send_cmd(struct tm_model *m, const char *cmd, const char *note)
{
	if (m->conn != TM_READY) {
		snprintf(m->message, sizeof m->message,
		    "not connected to the agent");
		return;
	}
	tend_buf_printf(&m->out, "%s\n", cmd);
	snprintf(m->message, sizeof m->message, "%s", note);
}

void
tm_key(struct tm_model *m, int key)
{
	size_t *sel = &m->sel[m->focus];
	size_t n;

	m->dirty = true;
	if (m->help) {
		if (key == '?' || key == TM_KEY_ESC || key == 'q' ||
		    key == TM_KEY_ENTER)
			m->help = false;
		return;
	}
	if (m->detail) {
		if (key == 'j' || key == TM_KEY_DOWN)
			m->detail_scroll++;
		else if ((key == 'k' || key == TM_KEY_UP) && m->detail_scroll)
			m->detail_scroll--;
		else if (key == TM_KEY_ESC || key == TM_KEY_ENTER ||
		    key == 'q')
			m->detail = false;
		return;
	}
	if (m->filtering) {
		char *f = m->filter[m->focus];
		size_t len = strlen(f);

		if (key == TM_KEY_ENTER)
			m->filtering = false;
		else if (key == TM_KEY_ESC) {
			f[0] = '\0';
			m->filtering = false;
		} else if (key == TM_KEY_BACKSPACE && len)
			f[len - 1] = '\0';
		else if (key >= 0x20 && key < 0x7f && len + 1 < sizeof m->filter[0]) {
			f[len] = (char)key;
			f[len + 1] = '\0';
		}
		*sel = 0;
		return;
	}
	m->message[0] = '\0';
	switch (key) {
	case 'q':
		m->quit = true;
		break;
	case '?':
		m->help = true;
		break;
	case '/':
		m->filtering = true;
		break;
	case TM_KEY_ESC:
		m->filter[m->focus][0] = '\0';
		break;
	case '\t':
		m->focus = (m->focus + 1) % TM_NPANELS;
		break;
	case TM_KEY_BTAB:
		m->focus = (m->focus + TM_NPANELS - 1) % TM_NPANELS;
		break;
	case 'j':
	case TM_KEY_DOWN:
		n = row_count(m, m->focus);
		if (*sel + 1 < n)
			(*sel)++;
		break;
	case 'k':
	case TM_KEY_UP:
		if (*sel)
			(*sel)--;
		break;
	case TM_KEY_PGDN:
		n = row_count(m, m->focus);
		*sel = n ? (*sel + 10 < n ? *sel + 10 : n - 1) : 0;
		break;
	case TM_KEY_PGUP:
		*sel = *sel > 10 ? *sel - 10 : 0;
		break;
	case TM_KEY_HOME:
		*sel = 0;
		break;
	case TM_KEY_END:
		n = row_count(m, m->focus);
		*sel = n ? n - 1 : 0;
		break;
	case TM_KEY_ENTER: {
		struct tm_row r;

		selected(m, &r);
		if (m->focus == TM_TREE && r.node && r.node->dir) {
			r.node->expanded = !r.node->expanded;
			if (r.node->expanded && !r.node->loading &&
			    m->conn == TM_READY)
				request_level(m, r.node);
		} else if (r.action || r.node) {
			m->detail = true;
			m->detail_scroll = 0;
		}
		break;
	}
	case 's':
		send_cmd(m, "sync", "sync requested: a full pass of every app");
		break;
	case 'r':
		send_cmd(m, "rescan", "rescan requested");
		break;
	case 'p':
		send_cmd(m, m->paused ? "resume" : "pause",
		    m->paused ? "resuming" : "pausing: changes will queue up "
					      "as pending actions");
		break;
	case 'a':
		if (!held_count(m)) {
			bool any = false;

			for (size_t i = 0; i < m->napps; i++)
				any |= m->apps[i].held > 0;
			if (!any) {
				snprintf(m->message, sizeof m->message,
				    "no deletes are held");
				break;
			}
		}
		send_cmd(m, "approve", "approving the held deletes...");
		break;
	default:
		m->dirty = false;
		break;
	}
}

/* ---- detail ---- */

void
tm_detail(const struct tm_model *m, struct tend_buf *out)
{
	struct tm_row r;

	selected(m, &r);
	if (r.node) {
		const struct tm_node *k = r.node;

		tend_buf_printf(out, "%s %s\n\n", k->dir ? "directory" : "entry",
		    k->prefix);
		tend_buf_printf(out, "app:        %s\n", k->app);
		if (k->owner)
			tend_buf_printf(out, "owner:      %s\n", k->owner);
		if (k->record)
			tend_buf_printf(out, "record:     %s\n", k->record);
		if (k->container)
			tend_buf_puts(out, "container:  yes\n");
		if (k->dir)
			tend_buf_printf(out, "states below: %zu\n", k->count);
		if (k->pending)
			tend_buf_puts(out, "pending:    several candidate "
					   "records (a pass was interrupted; "
					   "the next one settles it)\n");
		return;
	}
	if (m->focus == TM_APPS && r.text[0] && r.app < m->napps &&
	    m->apps[r.app].has_push) {
		const struct tm_app *p = &m->apps[r.app];

		tend_buf_printf(out, "app %s\n\npush to:      %s\n", p->name,
		    p->push_remote);
		if (p->ahead >= 0)
			tend_buf_printf(out, "ahead:        %lld\n"
					     "behind:       %lld\n",
			    p->ahead, p->behind);
		if (p->pushed)
			tend_buf_printf(out, "last pushed:  %lld (unix time)\n",
			    p->pushed);
		else
			tend_buf_puts(out, "last pushed:  never\n");
		if (p->pushing)
			tend_buf_puts(out, "pushing now\n");
		if (p->push_error)
			tend_buf_printf(out, "\nlast error (the local commit "
					     "is kept; the agent tries "
					     "again):\n%s\n",
			    p->push_error);
		return;
	}
	if (!r.action) {
		tend_buf_puts(out, "nothing selected");
		return;
	}
	const struct tm_action *a = r.action;
	const char *what = a->op == '+' ? "create" : a->op == '~' ? "update"
	    : a->op == '-' ? "delete" : a->op == '!' ? "invalidate container"
	    : "error";

	tend_buf_printf(out, "%s%s %s\n\n", a->failed && a->op != 'E'
		? "FAILED " : "", what, a->path ? a->path : "");
	if (a->held)
		tend_buf_puts(out, "HELD by the delete brake: press a to "
				   "approve, or tend sync --allow-delete\n\n");
	tend_buf_printf(out, "app:          %s\n", a->app);
	if (a->component)
		tend_buf_printf(out, "declared by:  %s\n", a->component);
	if (a->why && *a->why)
		tend_buf_printf(out, "why:          %s\n", a->why);
	if (a->invalidation)
		tend_buf_printf(out, "container:    invalidated, %s\n",
		    a->invalidation);
	if (a->provider)
		tend_buf_printf(out, "target state: %s %s\n", a->provider,
		    a->key ? a->key : "");
	if (a->provider)
		tend_buf_printf(out, "reconcile:    %u previous record%s, "
				     "may be missing: %s\n",
		    a->nprev, a->nprev == 1 ? "" : "s",
		    a->missing ? "yes" : "no");
	if (a->error)
		tend_buf_printf(out, "\nerror:\n%s\n", a->error);
}
