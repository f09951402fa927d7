/*
 * batch.c - a batch of finished components, flushed together (PERF-NOTES
 * "group commits"):
 *
 *   T1  one write txn: every component's pre-commit (pending records,
 *       commit.c), durable before any sink runs;
 *       sinks: actions of the whole batch grouped by sink identity, one
 *       apply call per sink (the git connector amends one commit per
 *       pass over its batches);
 *   T2  one write txn: every component's commit;
 *       fulfil: resolve container child providers with the handlers the
 *       sinks returned; GC: tombstoned components are deleted in the
 *       next batch.
 *
 * Before T1, contests: two components that declare one target state
 * (conflicts). After T2, deletes of components that are gone, their
 * garbage collection, and the deferred retries. The action events
 * (planned, applied, failed) and component errors are emitted here.
 * Crash safety holds per component: its pending records are durable
 * before its sink runs, and are pruned only after.
 */
#include "engine_int.h"
#include "check.h"
#include "reconcile.h"

#include <stdlib.h>

#include "tend/status.h"


/* ---- batches ---- */

static int
cmp_decl(const void *a, const void *b)
{
	return cmp_fp(&((const struct decl *)a)->tsid,
	    &((const struct decl *)b)->tsid);
}

void
enqueue(struct pass *pass, struct tend_comp *c)
{
	if (pass->nqueue == pass->cqueue) {
		pass->cqueue = pass->cqueue ? pass->cqueue * 2 : 64;
		pass->queue = tend_xrealloc(pass->queue,
		    pass->cqueue * sizeof *pass->queue);
	}
	pass->queue[pass->nqueue++] = c;
}

struct batch {
	struct tend_comp **comps;
	size_t n;
};

/* ---- conflicts: two components, one target state ---- */

void
tend_engine_set_component_hooks(struct tend_engine *eng,
    const struct tend_component_hooks *h, void *arg)
{
	eng->comp_hooks = h ? *h : (struct tend_component_hooks){0};
	eng->comp_arg = arg;
}

static void
comp_name(struct tend_engine *eng, const char *display, struct tend_buf *out)
{
	if (eng->comp_hooks.name)
		eng->comp_hooks.name(display, out, eng->comp_arg);
	else
		tend_buf_puts(out, display);
}

void
tend_conflict_message(struct tend_comp *c, const char *other,
    const char *provider, const struct tend_key *key, bool owner,
    const char *gone)
{
	struct tend_buf k = TEND_BUF_INIT, m = TEND_BUF_INIT;

	struct tend_buf a = TEND_BUF_INIT, b = TEND_BUF_INIT;

	comp_name(c->eng, c->display, &a);
	comp_name(c->eng, other, &b);
	tend_key_format(&k, key);
	tend_buf_puts(&m, "conflict: ");
	tend_display_path(&m, provider, k.ptr);
	if (owner) {
		/* the owner goes on (and writes its changes): only the
		 * newcomer's declaration is refused */
		tend_buf_printf(&m, " is declared by %s and by %s: it stays "
				    "%s's, %s's is not applied", b.ptr, a.ptr,
		    b.ptr, a.ptr);
	} else {
		/* one wording for both sides: the two components fail and
		 * say the same */
		if (strcmp(a.ptr, b.ptr) > 0) {
			struct tend_buf t = a;
			a = b;
			b = t;
		}
		tend_buf_printf(&m, " is declared by %s and by %s: neither "
				    "is applied", a.ptr, b.ptr);
		if (gone) {
			/* its owner stopped declaring it in this pass (a
			 * new user's trial: the message said it stayed,
			 * and the owner's delete removed it) */
			struct tend_buf g = TEND_BUF_INIT;

			comp_name(c->eng, gone, &g);
			tend_buf_printf(&m, ", and what %s wrote there goes "
					    "with it", g.ptr);
			tend_buf_release(&g);
		} else
			tend_buf_puts(&m, ", what is there stays");
	}
	tend_buf_release(&a);
	tend_buf_release(&b);
	tend_error_set(TEND_ECONFLICT, "%s", m.ptr);
	tend_buf_release(&k);
	tend_buf_release(&m);
}

static int
cmp_tsid(const void *key, const void *elem)
{
	return memcmp(key, ((const struct decl *)elem)->tsid.b, 16);
}

bool
declares(const struct tend_comp *x, const struct tend_fp *tsid)
{
	if (!x->ndecls)
		return false;
	if (x->decls_sorted)
		return bsearch(tsid->b, x->decls, x->ndecls, sizeof *x->decls,
		    cmp_tsid) != NULL;
	for (size_t i = 0; i < x->ndecls; i++)
		if (tend_fp_equal(&x->decls[i].tsid, tsid))
			return true;
	return false;
}

static struct tend_comp *
pass_comp(struct pass *pass, const struct tend_fp *cid)
{
	for (size_t i = 0; i < pass->nbatch; i++)
		if (tend_fp_equal(&pass->batch[i]->cid, cid))
			return pass->batch[i];
	for (size_t i = 0; i < pass->nqueue; i++)
		if (tend_fp_equal(&pass->queue[i]->cid, cid))
			return pass->queue[i];
	return NULL;
}

bool
tend_pass_still_declares(struct tend_comp *c, const struct tend_fp *owner,
    const char *owner_path, const struct tend_fp *tsid, const char *provider)
{
	struct tend_engine *eng = c->eng;
	struct pass *pass = c->pass;
	struct tend_comp *x;

	if (tend_cidset_has(&pass->gone, owner))
		return false;
	if ((x = pass_comp(pass, owner)) != NULL) {
		if (x->mode != MODE_BUILD)
			return false; /* being deleted */
		return x->failed || declares(x, tsid);
	}
	/* mounted earlier in this pass (and still the owner), a memo hit,
	 * or kept unchanged: it declares what it owns */
	if (tend_cidset_has(&pass->built, owner))
		return true;
	if (pass->incremental)
		return true;
	return eng->comp_hooks.live &&
	    eng->comp_hooks.live(owner_path, provider, eng->comp_arg);
}

struct claim {
	const struct tend_fp *tsid;
	size_t comp; /* its first declarer in the batch */
	bool contested;
};

struct contender {
	const struct tend_fp *tsid;
	size_t comp;
	const struct decl *decl;
};

static int
cmp_contender(const void *x, const void *y)
{
	const struct contender *a = x, *b = y;
	int d = memcmp(a->tsid->b, b->tsid->b, 16);

	return d ? d : (a->comp > b->comp) - (a->comp < b->comp);
}

static void
conflict_fail(struct tend_comp *c, const char *other, const struct decl *d,
    bool owner, const char *gone)
{
	if (c->conflict)
		return;
	tend_conflict_message(c, other, d->prov->name, &d->key, owner, gone);
	c->failed = true;
	c->conflict = true;
	free(c->error);
	c->error = tend_xstrdup(tend_error_last());
	tend_comp_withhold_memos(c->parent);
}

static bool
conflict_eligible(const struct tend_comp *c)
{
	return c->mode == MODE_BUILD && !c->failed && !c->in_preflight &&
	    !c->retry;
}

/* The components of a batch that declare one state (a group): its owner
 * among them goes on, the others fail; without a live owner they all
 * fail, and the owner row becomes a contest row naming them. */
static int
settle_contest(struct tend_txn *txn, struct batch *b,
    const struct contender *g, size_t n)
{
	struct tend_comp *any = b->comps[g[0].comp];
	struct tend_buf who = TEND_BUF_INIT;
	struct tend_bytes v;
	struct tend_fp owner;
	bool has_owner = false, live = false;
	size_t mine = n;
	int rc = tend_store_get(txn, TEND_T_OWNER, g[0].tsid->b, 16, &v);

	if (rc && rc != TEND_ENOTFOUND)
		return rc;
	if (rc == 0 && v.len == 16) {
		memcpy(owner.b, v.data, 16);
		has_owner = true;
		for (size_t i = 0; i < n && mine == n; i++)
			if (tend_fp_equal(&b->comps[g[i].comp]->cid, &owner))
				mine = i;
		if (mine == n) {
			tend_inspect_comp_path(txn, &owner, &who);
			live = tend_pass_still_declares(any, &owner, who.ptr,
			    g[0].tsid, g[0].decl->prov->name);
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (i == mine)
			continue;
		const char *other = mine < n ? b->comps[g[mine].comp]->display
		    : live ? who.ptr
			   : b->comps[g[i ? 0 : 1].comp]->display;
		conflict_fail(b->comps[g[i].comp], other, g[i].decl,
		    mine < n || live,
		    has_owner && mine == n && !live ? who.ptr : NULL);
	}
	tend_buf_release(&who);
	if (mine < n || live)
		return 0;
	struct tend_comp **cs = tend_xcalloc(n, sizeof *cs);
	for (size_t i = 0; i < n; i++)
		cs[i] = b->comps[g[i].comp];
	rc = tend_contest_add(txn, g[0].tsid, has_owner ? &owner : NULL, cs, n);
	free(cs);
	return rc;
}

/* Two components of the batch that declare one target state conflict
 * before anything is written (an owner outside the batch is phase 1's
 * business). Re-runnable: a map resize runs the pre-commit again. */
static int
find_conflicts(struct tend_txn *txn, struct batch *b)
{
	size_t n = 0, size = 16, ncont = 0;
	bool any = false;
	int rc = 0;

	for (size_t i = 0; i < b->n; i++) {
		struct tend_comp *c = b->comps[i];

		if (c->conflict) { /* the attempt before: found again */
			c->conflict = false;
			c->failed = false;
			free(c->error);
			c->error = NULL;
		}
		if (conflict_eligible(c))
			n += c->ndecls;
	}
	if (n < 2)
		return 0;
	while (size < n * 2)
		size *= 2;
	struct claim *tab = tend_xcalloc(size, sizeof *tab);
	for (size_t i = 0; i < b->n; i++) {
		struct tend_comp *c = b->comps[i];

		for (size_t j = 0; conflict_eligible(c) && j < c->ndecls; j++) {
			const struct decl *d = &c->decls[j];
			size_t k = ref_slot(&d->tsid, size);

			while (tab[k].tsid &&
			    !tend_fp_equal(tab[k].tsid, &d->tsid))
				k = (k + 1) & (size - 1);
			if (!tab[k].tsid)
				tab[k] = (struct claim){&d->tsid, i, false};
			else if (tab[k].comp != i && !tab[k].contested) {
				tab[k].contested = true;
				any = true;
			}
		}
	}
	struct contender *g = NULL;
	for (size_t i = 0; any && i < b->n; i++) {
		struct tend_comp *c = b->comps[i];

		for (size_t j = 0; conflict_eligible(c) && j < c->ndecls; j++) {
			const struct decl *d = &c->decls[j];
			size_t k = ref_slot(&d->tsid, size);

			while (!tend_fp_equal(tab[k].tsid, &d->tsid))
				k = (k + 1) & (size - 1);
			if (!tab[k].contested)
				continue;
			g = tend_xrealloc(g, (ncont + 1) * sizeof *g);
			g[ncont++] = (struct contender){&d->tsid, i, d};
		}
	}
	free(tab);
	if (ncont > 1)
		qsort(g, ncont, sizeof *g, cmp_contender);
	for (size_t i = 0, j; rc == 0 && i < ncont; i = j) {
		for (j = i + 1; j < ncont &&
		     tend_fp_equal(g[j].tsid, g[i].tsid); j++)
			;
		rc = settle_contest(txn, b, g + i, j - i);
	}
	free(g);
	return rc;
}

static int
precommit_body(struct tend_txn *txn, void *arg)
{
	struct batch *b = arg;

	/* re-runnable after a map resize: forget the previous attempt */
	clear_refs(b->comps[0]->pass);
	int rc0 = find_conflicts(txn, b);
	if (rc0)
		return rc0;
	for (size_t i = 0; i < b->n; i++) {
		int rc = tend_precommit_comp(txn, b->comps[i]);
		if (rc)
			return rc;
	}
	return 0;
}

static int
commit_body(struct tend_txn *txn, void *arg)
{
	struct batch *b = arg;

	for (size_t i = 0; i < b->n; i++) {
		struct tend_comp *c = b->comps[i];
		struct tend_engine *eng = c->eng;
		int rc = tend_commit_comp(txn, c);

		if (rc == 0 && eng->settle_hook && c->mode == MODE_BUILD &&
		    !c->in_preflight)
			rc = eng->settle_hook(txn, c->display, eng->settle_arg);
		if (rc)
			return rc;
	}
	return 0;
}

static void
plan_event(struct tend_engine *eng, struct tend_comp *c, struct plan *p,
    enum tend_event_kind kind)
{
	struct tend_buf key = TEND_BUF_INIT;
	struct tend_event ev = {
		.kind = kind,
		.pass = c->pass->id,
		.app = c->app,
		.component = c->display,
		.provider = p->prov ? p->prov->name : "",
		.op = p->op,
		.invalidation = (int)p->inval,
		.container = p->item.container,
		.record_changed = p->record_changed,
		.nprev = p->nprev,
		.prev_may_be_missing = p->missing,
		.status = p->status,
		/* NULL unless the action failed (a sink may leave a message
		 * on a success: it is not an error) */
		.error = kind != TEND_EV_ACTION_FAILED ? NULL
			: p->error ? p->error : "failed",
		.preview = c->pass->preview,
		.forgotten = p->forgotten,
		.adopted = p->adopted,
		.replaces = p->replaces,
		.note = kind == TEND_EV_ACTION_APPLIED ? p->error : NULL,
		.warn = kind == TEND_EV_ACTION_APPLIED && p->error && p->warn,
		.unchanged = kind == TEND_EV_ACTION_APPLIED && p->unchanged,
	};

	tend_key_format(&key, &p->key);
	ev.key = key.ptr;
	emit(eng, &ev);
	tend_buf_release(&key);
}

struct sinkgroup {
	struct tend_sink *sink;
	struct plan **plans;
	size_t n, cap;
};

/* Group the batch's actions by sink (first appearance order); inside a
 * group, each component's creates and updates come before its deletes. */
static void
run_sinks(struct tend_engine *eng, struct batch *b)
{
	struct sinkgroup *g = NULL;
	size_t ng = 0;

	for (int deletes = 0; deletes < 2; deletes++) {
		for (size_t i = 0; i < b->n; i++) {
			struct tend_comp *c = b->comps[i];

			for (size_t j = 0; j < c->nplans; j++) {
				struct plan *p = &c->plans[j];
				size_t k;

				if (p->kind != PLAN_ACTION ||
				    p->is_delete != (deletes == 1))
					continue;
				for (k = 0; k < ng; k++)
					if (g[k].sink == p->sink)
						break;
				if (k == ng) {
					g = tend_xrealloc(g,
					    (ng + 1) * sizeof *g);
					memset(&g[ng], 0, sizeof *g);
					g[ng++].sink = p->sink;
				}
				if (g[k].n == g[k].cap) {
					g[k].cap = g[k].cap ? g[k].cap * 2 : 16;
					g[k].plans = tend_xrealloc(g[k].plans,
					    g[k].cap * sizeof *g[k].plans);
				}
				g[k].plans[g[k].n++] = p;
			}
		}
	}
	for (size_t k = 0; k < ng; k++) {
		void **actions = tend_xcalloc(g[k].n, sizeof *actions);
		struct tend_apply_result *res =
		    tend_xcalloc(g[k].n, sizeof *res);

		for (size_t j = 0; j < g[k].n; j++)
			actions[j] = g[k].plans[j]->action;
		g[k].sink->apply(g[k].sink, &eng->ctx, actions, g[k].n, res);
		for (size_t j = 0; j < g[k].n; j++) {
			struct plan *p = g[k].plans[j];

			p->status = res[j].status;
			p->error = res[j].error;
			p->child = res[j].child;
			p->forgotten = p->is_delete && p->status == 0 &&
			    res[j].left;
			p->adopted = !p->is_delete && p->status == 0 &&
			    res[j].adopted && !p->tried;
			p->warn = p->status == 0 && res[j].warn;
			p->unchanged = !p->is_delete && p->status == 0 &&
			    res[j].unchanged;
			p->applied = true;
			if (p->status && !p->error)
				p->error = tend_xstrdup("sink failed");
		}
		free(actions);
		free(res);
		free(g[k].plans);
	}
	free(g);
}

/* A container action that succeeded without returning its child
 * handler failed: found before the commit, so that the commit keeps the
 * pending records and writes no memo (a failure found after it came too
 * late for both). In a preview, a container without preview_child is
 * only not looked into. */
static void
no_child(struct tend_engine *eng, struct pass *pass, struct tend_comp *c)
{
	for (size_t i = 0; i < c->nplans; i++) {
		struct plan *p = &c->plans[i];

		if (p->kind != PLAN_ACTION || !p->item.container ||
		    p->status != 0 || p->is_delete || p->child)
			continue;
		struct tend_provider *cp = p->decl ? p->decl->child
			: tend_registry_get(&eng->reg, &p->tsid);
		if (!cp || (pass->preview && cp->handler))
			continue;
		p->status = TEND_ERROR;
		free(p->error);
		p->error = tend_xstrdup("container sink returned no child "
					"handler");
	}
}

/* After T2: resolve child providers, forget deleted containers. */
static void
fulfil(struct tend_engine *eng, struct pass *pass, struct tend_comp *c)
{
	for (size_t i = 0; i < c->nplans; i++) {
		struct plan *p = &c->plans[i];

		if (p->kind != PLAN_ACTION || !p->item.container)
			continue;
		struct tend_provider *cp = p->decl ? p->decl->child
			: tend_registry_get(&eng->reg, &p->tsid);
		if (!cp)
			continue;
		if (p->status != 0) {
			if (p->child) {
				p->child->ops->destroy(p->child);
				p->child = NULL;
			}
			continue;
		}
		if (p->is_delete) {
			if (p->child) {
				p->child->ops->destroy(p->child);
				p->child = NULL;
			}
			if (!pass->preview)
				tend_provider_unregister(eng, cp);
			continue;
		}
		tend_pass_save_provider(pass, cp);
		cp->gen_id = p->item.gen_id;
		cp->gen_schema = p->item.gen_schema;
		cp->seen_pass = pass->id;
		if (p->inval == TEND_INVALIDATE_DESTRUCTIVE)
			cp->wiped_pass = pass->id;
		if (!p->child)
			continue; /* failed before the commit: no_child() */
		tend_provider_resolve(cp, p->child);
		p->child = NULL;
		for (size_t j = 0; j < cp->natt; j++)
			cp->att[j].prov->seen_pass = pass->id;
	}
}

static void
count_outcome(struct pass *pass, struct tend_comp *c)
{
	if (c->in_preflight || c->retry)
		return;
	if (c->failed || c->any_failed) {
		pass->stats.errors++;
		pass->status = TEND_ERROR;
		return;
	}
	if (c->mode == MODE_DELETE) {
		if (c->done)
			pass->stats.deleted++;
		return;
	}
	if (c->existed)
		pass->stats.reprocessed++;
	else
		pass->stats.added++;
}

static void
defer(struct pass *pass, struct tend_comp *c)
{
	if (pass->ndeferred == pass->cdeferred) {
		pass->cdeferred = pass->cdeferred ? pass->cdeferred * 2 : 8;
		pass->deferred = tend_xrealloc(pass->deferred,
		    pass->cdeferred * sizeof *pass->deferred);
		pass->deferred_parent = tend_xrealloc(pass->deferred_parent,
		    pass->cdeferred * sizeof *pass->deferred_parent);
		pass->deferred_waiter = tend_xrealloc(pass->deferred_waiter,
		    pass->cdeferred * sizeof *pass->deferred_waiter);
	}
	pass->deferred[pass->ndeferred].cid = c->cid;
	pass->deferred[pass->ndeferred].path =
	    tend_xmemdup(c->path.ptr, c->path.len);
	pass->deferred[pass->ndeferred].len = c->path.len;
	pass->deferred_parent[pass->ndeferred] =
	    c->has_parent ? c->parent_cid : (struct tend_fp){{0}};
	pass->deferred_waiter[pass->ndeferred] = c->waiter;
	pass->ndeferred++;
	tend_cidset_add(&pass->deferred_ids, &c->cid);
}

struct tend_comp *
delete_comp(struct tend_engine *eng, struct pass *pass,
    const struct tend_fp *parent_cid, bool has_parent, const uint8_t *path,
    size_t len)
{
	struct tend_comp *c = tend_xcalloc(1, sizeof *c);
	struct tend_arena tmp = TEND_ARENA_INIT;
	struct tend_buf disp = TEND_BUF_INIT;
	size_t pos = 0;

	c->eng = eng;
	c->pass = pass;
	c->mode = MODE_DELETE;
	c->waiter = -1;
	c->path = (struct tend_buf)TEND_BUF_INIT;
	tend_buf_put(&c->path, path, len);
	c->cid = tend_engine_cid(eng, path, len);
	c->has_parent = has_parent;
	if (has_parent)
		c->parent_cid = *parent_cid;
	while (pos < len) {
		struct tend_key k;
		size_t used;

		if (tend_key_decode(&k, path + pos, len - pos, &used, &tmp))
			break;
		tend_buf_putc(&disp, '/');
		if (k.kind == TEND_KEY_STR)
			tend_buf_put(&disp, k.u.s.ptr, k.u.s.len);
		else
			tend_key_format(&disp, &k);
		pos += used;
	}
	tend_arena_finish(&tmp);
	c->display = tend_buf_detach(&disp, NULL);
	c->app = pass->app;
	return c;
}

static void
component_error_event(struct tend_engine *eng, struct tend_comp *c)
{
	struct tend_event ev = {
		.kind = TEND_EV_COMPONENT_ERROR,
		.pass = c->pass->id,
		.app = c->app,
		.component = c->display,
		.error = c->error ? c->error : "failed",
		.status = c->conflict ? TEND_ECONFLICT : TEND_ERROR,
		.preview = c->pass->preview,
	};

	emit(eng, &ev);
}

/* Sort a component's declarations by tsid (the store's order) and reject
 * a target state declared twice in one component. */
static void
prepare_decls(struct tend_comp *c)
{
	if (c->ndecls > 1 && !c->decls_sorted)
		qsort(c->decls, c->ndecls, sizeof *c->decls, cmp_decl);
	c->decls_sorted = true;
	for (size_t j = 1; j < c->ndecls && !c->failed; j++) {
		if (!tend_fp_equal(&c->decls[j - 1].tsid, &c->decls[j].tsid))
			continue;
		struct tend_buf k = TEND_BUF_INIT;

		tend_buf_printf(&k, "%s: target state ",
		    c->decls[j].prov->name);
		tend_key_format(&k, &c->decls[j].key);
		tend_buf_puts(&k, " already declared in this component");
		c->failed = true;
		free(c->error);
		c->error = tend_buf_detach(&k, NULL);
	}
}

static void delete_finished(struct tend_engine *eng, struct pass *pass,
    int waiter, bool done);

static int
wait_new(struct pass *pass, struct tend_comp *c)
{
	if (pass->nwaits == pass->cwaits) {
		pass->cwaits = pass->cwaits ? pass->cwaits * 2 : 8;
		pass->waits = tend_xrealloc(pass->waits,
		    pass->cwaits * sizeof *pass->waits);
	}
	struct wait *w = &pass->waits[pass->nwaits];
	w->cid = c->cid;
	w->parent_cid = c->parent_cid;
	w->has_parent = c->has_parent;
	w->path = tend_xmemdup(c->path.ptr, c->path.len);
	w->len = c->path.len;
	w->remaining = c->ngc;
	w->done = 0;
	w->parent_waiter = c->waiter;
	return (int)pass->nwaits++;
}

/* A deleted child reached an end. When all children of a waiting parent
 * have, the parent is visited again (it completes once no tombstone is
 * left), or, if none of them could be deleted, gives up until the next
 * pass: its own tombstone stays for the retry. */
static void
delete_finished(struct tend_engine *eng, struct pass *pass, int waiter,
    bool done)
{
	if (waiter < 0)
		return;
	struct wait *w = &pass->waits[waiter];
	if (done)
		w->done++;
	if (--w->remaining > 0)
		return;
	if (w->done == 0) {
		delete_finished(eng, pass, w->parent_waiter, false);
		return;
	}
	struct tend_comp *d = delete_comp(eng, pass, &w->parent_cid,
	    w->has_parent, w->path, w->len);
	d->waiter = w->parent_waiter;
	enqueue(pass, d);
}

/* After commit: queue the deletion of the children a component
 * tombstoned, and track deleted components that wait for theirs. */
static void
schedule_gc(struct tend_engine *eng, struct pass *pass, struct tend_comp *c)
{
	int waiter = -1;

	if (c->mode == MODE_DELETE) {
		if (c->in_preflight || c->done) {
			delete_finished(eng, pass, c->waiter, true);
			return;
		}
		if (c->failed || c->any_failed) {
			tend_cidset_add(&pass->failed_deletes, &c->cid);
			delete_finished(eng, pass, c->waiter, false);
			return;
		}
		if (c->ngc == 0) {
			/* items wait for a provider (or a container for its
			 * children): retried at the end, and the parent waits
			 * for that retry, which finishes it */
			defer(pass, c);
			return;
		}
		waiter = wait_new(pass, c);
	}
	if (c->mode == MODE_BUILD && c->ndeferred && !c->failed) {
		/* its undeclared items wait for a container's fate, decided
		 * later in this pass (its delete): run phase 2 again then */
		c->keep = true;
		c->status_out = NULL; /* retried after its mount returned */
		c->failed_before = c->any_failed;
		if (pass->nkept == pass->ckept) {
			pass->ckept = pass->ckept ? pass->ckept * 2 : 8;
			pass->kept = tend_xrealloc(pass->kept,
			    pass->ckept * sizeof *pass->kept);
		}
		pass->kept[pass->nkept++] = c;
	}
	for (size_t j = 0; j < c->ngc; j++) {
		struct child_ref *g = &c->gc[j];

		/* declared gone this pass: its delete ran already, and a
		 * failed one waits for the next pass, not a second try */
		if (waiter < 0 && tend_cidset_has(&pass->gone, &g->cid))
			continue;
		/* its delete failed in this pass: the next pass retries it;
		 * or it waits for the retries already: they run it, once */
		if (tend_cidset_has(&pass->failed_deletes, &g->cid) ||
		    tend_cidset_has(&pass->deferred_ids, &g->cid)) {
			delete_finished(eng, pass, waiter, false);
			continue;
		}
		struct tend_comp *d = delete_comp(eng, pass, &c->cid, true,
		    g->path, g->len);

		/* pre-flight (§2.5): mounted again meanwhile, keep it */
		if (tend_cidset_has(&pass->built, &g->cid))
			d->in_preflight = true;
		d->waiter = waiter;
		enqueue(pass, d);
	}
}

struct suspect {
	struct tend_event ev; /* its strings are the fields below */
	char *app, *component, *provider, *key, *error;
	const struct tend_provider *prov;
	uint8_t *raw; /* a string key's bytes, or NULL */
	size_t rawlen;
};

struct gone_key {
	const struct tend_provider *prov;
	uint8_t *raw;
	size_t rawlen;
};

/* preview: note the string key a delete of this pass removes */
static void
note_gone(struct pass *pass, const struct plan *p)
{
	if (!p->prov || p->key.kind != TEND_KEY_STR)
		return;
	if (pass->ngone_keys == pass->cgone_keys) {
		pass->cgone_keys = pass->cgone_keys ? 2 * pass->cgone_keys : 16;
		pass->gone_keys = tend_xrealloc(pass->gone_keys,
		    pass->cgone_keys * sizeof *pass->gone_keys);
	}
	struct gone_key *g = &pass->gone_keys[pass->ngone_keys++];
	g->prov = p->prov;
	g->rawlen = p->key.u.s.len;
	g->raw = tend_xmalloc(g->rawlen + 1);
	memcpy(g->raw, p->key.u.s.ptr, g->rawlen);
}

static char *
dup_or_null(const char *s)
{
	return s ? tend_xstrdup(s) : NULL;
}

/* preview: keep what the action's event needs until the pass's end */
static void
add_suspect(struct pass *pass, struct tend_comp *c, struct plan *p, char *why)
{
	struct tend_buf key = TEND_BUF_INIT;

	if (pass->nsuspects == pass->csuspects) {
		pass->csuspects = pass->csuspects ? 2 * pass->csuspects : 8;
		pass->suspects = tend_xrealloc(pass->suspects,
		    pass->csuspects * sizeof *pass->suspects);
	}
	struct suspect *x = &pass->suspects[pass->nsuspects++];
	memset(x, 0, sizeof *x);
	tend_key_format(&key, &p->key);
	x->app = dup_or_null(c->app);
	x->component = dup_or_null(c->display);
	x->provider = tend_xstrdup(p->prov ? p->prov->name : "");
	x->key = tend_buf_detach(&key, NULL);
	x->error = why;
	x->prov = p->prov;
	if (p->key.kind == TEND_KEY_STR) {
		x->rawlen = p->key.u.s.len;
		x->raw = tend_xmalloc(x->rawlen + 1);
		memcpy(x->raw, p->key.u.s.ptr, x->rawlen);
	}
	x->ev = (struct tend_event){
		.pass = pass->id,
		.app = x->app,
		.component = x->component,
		.provider = x->provider,
		.key = x->key,
		.op = p->op,
		.invalidation = (int)p->inval,
		.record_changed = p->record_changed,
		.nprev = p->nprev,
		.prev_may_be_missing = p->missing,
		.preview = true,
	};
}

/* Does the pass delete a key of x's provider under x's key (a
 * directory of tend's files there), or one of x's parents (tend's file
 * where x's directory goes)? */
static bool
emptied(const struct pass *pass, const struct suspect *x)
{
	for (size_t i = 0; x->raw && i < pass->ngone_keys; i++) {
		const struct gone_key *g = &pass->gone_keys[i];

		if (g->prov != x->prov)
			continue;
		if (g->rawlen > x->rawlen &&
		    memcmp(g->raw, x->raw, x->rawlen) == 0 &&
		    g->raw[x->rawlen] == '/')
			return true;
		if (g->rawlen < x->rawlen &&
		    memcmp(g->raw, x->raw, g->rawlen) == 0 &&
		    x->raw[g->rawlen] == '/')
			return true;
	}
	return false;
}

/*
 * The end of a preview: each suspect is shown as planned if the pass
 * deletes something under its key (the directory there is tend's, and
 * the sink removes what it deletes before it writes), else as the
 * failure the sync would meet. Then the notes go.
 */
void
settle_suspects(struct tend_engine *eng, struct pass *pass)
{
	for (size_t i = 0; i < pass->nsuspects; i++) {
		struct suspect *x = &pass->suspects[i];

		if (emptied(pass, x)) {
			pass->stats.planned++;
			x->ev.kind = TEND_EV_ACTION_PLANNED;
		} else {
			pass->stats.failed++;
			pass->status = TEND_ERROR;
			x->ev.kind = TEND_EV_ACTION_FAILED;
			x->ev.status = TEND_ECONFLICT;
			x->ev.error = x->error;
		}
		if (wants(eng, x->ev.kind))
			emit(eng, &x->ev);
		free(x->app);
		free(x->component);
		free(x->provider);
		free(x->key);
		free(x->error);
		free(x->raw);
	}
	free(pass->suspects);
	pass->suspects = NULL;
	pass->nsuspects = pass->csuspects = 0;
	for (size_t i = 0; i < pass->ngone_keys; i++)
		free(pass->gone_keys[i].raw);
	free(pass->gone_keys);
	pass->gone_keys = NULL;
	pass->ngone_keys = pass->cgone_keys = 0;
}

/*
 * A preview of the first write of a target state (no write of it ever
 * confirmed) asks its handler's check what is at the key: something
 * that holds none of its records is not tend's, and the sink leaves it
 * and fails the action. A plan that said "create" there would promise
 * what the sync does not do. Most keys hold nothing: one check each.
 * What is found is a suspect until the pass's end (settle_suspects).
 * A key that holds the desired record already is adopted (p->adopted):
 * the sink leaves it as it is.
 */
static bool
preview_in_the_way(struct tend_engine *eng, struct pass *pass,
    struct tend_comp *c, struct plan *p)
{
	struct tend_handler *h = p->prov ? p->prov->handler : NULL;
	struct tend_buf why = TEND_BUF_INIT;
	struct tend_bytes *recs;
	size_t n;

	if (!p->never || p->is_delete || p->item.container || !h)
		return false;
	recs = tend_xcalloc(p->item.nstates + 1, sizeof *recs);
	n = tend_item_records(&p->item, recs);
	bool way = tend_foreign_at(eng, h, &p->key, recs, n, &why,
	    &p->adopted);
	p->adopted &= !p->tried;
	free(recs);
	/* a container rebuilt empty in this pass (exclusive switched on)
	 * holds nothing of the user's when its children are written: what
	 * is in the way goes with the rest, and the plan says so */
	if (p->prov->wiped_pass == pass->id) {
		p->replaces = way;
		p->adopted = false; /* (written again: it went too) */
		way = false;
	}
	if (way)
		add_suspect(pass, c, p, tend_buf_detach(&why, NULL));
	tend_buf_release(&why);
	return way;
}

/*
 * A preview of the delete of a state no write of which was confirmed:
 * when its key holds none of its records (somebody else's file that was
 * in the way, or nothing), the sink removes nothing and the state is
 * forgotten. The plan says so rather than "delete".
 */
static bool
preview_forgets(struct tend_engine *eng, struct plan *p)
{
	struct tend_handler *h = p->prov ? p->prov->handler : NULL;
	struct tend_bytes *recs;
	size_t n;

	if (!p->never || !p->is_delete || p->item.container || !h)
		return false;
	recs = tend_xcalloc(p->item.nstates + 1, sizeof *recs);
	n = tend_item_records(&p->item, recs);
	bool none = tend_holds_none(eng, h, &p->key, recs, n, NULL);
	free(recs);
	return none;
}

static int
process_batch(struct tend_engine *eng, struct pass *pass, struct batch *b)
{
	int rc;

	for (size_t i = 0; i < b->n; i++)
		prepare_decls(b->comps[i]);
	pass->batch = b->comps;
	pass->nbatch = b->n;
	rc = tend_store_write(eng->st, precommit_body, b);
	if (rc)
		goto out;
	for (size_t i = 0; i < b->n; i++) {
		struct tend_comp *c = b->comps[i];

		if (c->failed && !c->in_preflight &&
		    wants(eng, TEND_EV_COMPONENT_ERROR))
			component_error_event(eng, c);
		for (size_t j = 0; j < c->nplans; j++) {
			struct plan *p = &c->plans[j];

			if (p->kind != PLAN_ACTION)
				continue;
			if (pass->preview && p->is_delete)
				p->forgotten = preview_forgets(eng, p);
			/* (what a forgotten state leaves stays in its
			 * directory) */
			if (pass->preview && p->is_delete && !p->forgotten)
				note_gone(pass, p);
			/* (a suspect's event waits for the pass's end) */
			if (!pass->preview ||
			    !preview_in_the_way(eng, pass, c, p)) {
				pass->stats.planned++;
				if (wants(eng, TEND_EV_ACTION_PLANNED))
					plan_event(eng, c, p,
					    TEND_EV_ACTION_PLANNED);
			}
			if (!pass->preview)
				continue;
			/* preview: pretend it applied; look inside new
			 * containers through preview_child (no I/O) */
			p->applied = true;
			struct tend_provider *pp = p->prov;
			if (p->item.container && !p->is_delete && pp &&
			    pp->handler && pp->handler->ops->preview_child)
				p->child = pp->handler->ops->preview_child(
				    pp->handler, &p->key,
				    p->decl ? p->decl->value : NULL,
				    p->decl ? p->decl->vlen : 0);
		}
	}
	if (!pass->preview)
		run_sinks(eng, b);
	for (size_t i = 0; i < b->n; i++) {
		struct tend_comp *c = b->comps[i];

		no_child(eng, pass, c);
		/* a child that could not be deleted keeps its container */
		for (size_t j = 0; j < c->nplans; j++) {
			struct plan *p = &c->plans[j];

			if (p->kind == PLAN_ACTION && p->is_delete &&
			    p->status != 0 && p->prov && !p->prov->root)
				tend_cidset_add(&pass->blocked, &p->prov->id);
		}
	}
	rc = tend_store_write_settle(eng->st, commit_body, b);
	for (size_t i = 0; i < b->n; i++) {
		struct tend_comp *c = b->comps[i];

		if (rc == 0)
			fulfil(eng, pass, c);
		/* what the sinks did is on disk even when its settle
		 * failed (the records stay pending): the report says it */
		for (size_t j = 0; j < c->nplans; j++) {
			struct plan *p = &c->plans[j];

			if (p->kind != PLAN_ACTION || pass->preview)
				continue;
			if (p->status == 0)
				pass->stats.applied++;
			else
				pass->stats.failed++;
			/* applied, and something beside it failed */
			if (p->status == 0 && p->warn && p->error) {
				pass->stats.errors++;
				pass->status = TEND_ERROR;
			}
			enum tend_event_kind k = p->status == 0
				? TEND_EV_ACTION_APPLIED
				: TEND_EV_ACTION_FAILED;
			if (wants(eng, k))
				plan_event(eng, c, p, k);
		}
		if (rc)
			continue;
		count_outcome(pass, c);
		if (c->status_out)
			*c->status_out = c->failed || c->any_failed
				? TEND_ERROR : 0;
		if (c->mode == MODE_DELETE && !c->has_parent && c->done)
			pass->root_done = true;
		schedule_gc(eng, pass, c);
	}
	if (rc)
		goto out;
	clear_refs(pass);
out:
	pass->batch = NULL;
	pass->nbatch = 0;
	return rc;
}

int
flush(struct tend_engine *eng, struct pass *pass)
{
	while (pass->nqueue) {
		struct batch b;
		size_t n = pass->nqueue;
		int rc;

		if (n > eng->batch)
			n = eng->batch;
		b.comps = tend_xmalloc(n * sizeof *b.comps);
		memcpy(b.comps, pass->queue, n * sizeof *b.comps);
		b.n = n;
		memmove(pass->queue, pass->queue + n,
		    (pass->nqueue - n) * sizeof *pass->queue);
		pass->nqueue -= n;
		rc = process_batch(eng, pass, &b);
		for (size_t i = 0; i < b.n; i++)
			if (!b.comps[i]->keep)
				comp_free(b.comps[i]);
		free(b.comps);
		if (rc)
			return rc;
	}
	return 0;
}

void
free_kept(struct pass *pass)
{
	for (size_t i = 0; i < pass->nkept; i++)
		comp_free(pass->kept[i]);
	free(pass->kept);
	pass->kept = NULL;
	pass->nkept = pass->ckept = 0;
}

/* Deletes that waited for a provider (a container's own deletion, say)
 * are retried while they make progress. */
int
retry_deferred(struct tend_engine *eng, struct pass *pass)
{
	size_t last = SIZE_MAX;
	int rc = 0;

	pass->retrying = true;
	while (pass->ndeferred || pass->nkept) {
		size_t n = pass->ndeferred, nk = pass->nkept, waiting = 0;
		struct child_ref *list = pass->deferred;
		struct tend_fp *parents = pass->deferred_parent;
		int *waiters = pass->deferred_waiter;
		struct tend_comp **kept = pass->kept;

		for (size_t i = 0; i < nk; i++)
			waiting += kept[i]->ndeferred;
		waiting += n;
		if (waiting >= last)
			break; /* no progress: leave them for the next pass */
		last = waiting;
		pass->deferred = NULL;
		pass->deferred_parent = NULL;
		pass->deferred_waiter = NULL;
		pass->ndeferred = pass->cdeferred = 0;
		pass->kept = NULL;
		pass->nkept = pass->ckept = 0;
		for (size_t i = 0; i < n; i++) {
			bool has_parent = !tend_fp_is_zero(&parents[i]);

			struct tend_comp *d = delete_comp(eng, pass,
			    &parents[i], has_parent, list[i].path, list[i].len);

			d->waiter = waiters[i];
			enqueue(pass, d);
			free((void *)list[i].path);
		}
		for (size_t i = 0; i < nk; i++) {
			kept[i]->keep = false;
			kept[i]->retry = true;
			enqueue(pass, kept[i]);
		}
		free(list);
		free(parents);
		free(waiters);
		free(kept);
		if ((rc = flush(eng, pass)))
			break;
	}
	pass->retrying = false;
	pass->stats.deferred += pass->ndeferred;
	for (size_t i = 0; i < pass->nkept; i++)
		pass->stats.deferred += pass->kept[i]->ndeferred;
	free_kept(pass);
	if (pass->ndeferred && pass->dropping)
		pass->status = TEND_ERROR;
	for (size_t i = 0; i < pass->ndeferred; i++)
		free((void *)pass->deferred[i].path);
	free(pass->deferred);
	free(pass->deferred_parent);
	free(pass->deferred_waiter);
	pass->deferred = NULL;
	pass->deferred_parent = NULL;
	pass->deferred_waiter = NULL;
	pass->ndeferred = pass->cdeferred = 0;
	return rc;
}

