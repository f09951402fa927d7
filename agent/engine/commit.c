/*
 * commit.c - the pre-commit and commit bodies of a component.
 *
 * Pre-commit (semantics §1.6 step 5, R7-R14) runs in the batch's first
 * write transaction, before any sink: it merges the component's declared
 * target states (sorted by tsid) with its tracked items (a cursor over
 * ITEM rows with prefix cid, in the same order), calls the handlers'
 * reconcile, and writes the pending state: every action's new record is
 * appended to the item's candidate records, new owner rows are claimed,
 * preempted owners lose their rows. Only items with something to write
 * are kept in memory (the plans), so an unchanged component costs a merge
 * walk and no writes.
 *
 * Commit (R16) runs in the batch's second transaction, after the sinks:
 * an item whose action succeeded keeps only its new record (or is removed
 * for a delete); a failed action leaves every candidate for the next pass.
 *
 * Versions differ from CocoIndex in one deliberate way: the component
 * version only grows (it is bumped when the component has an action) and
 * is never renumbered back to 1. Convergence renumbering would rewrite
 * every row of a component after each change; monotonic versions give the
 * same retention decisions ("keep the states of this version") without
 * touching unchanged rows. Items whose reconcile returned none are not
 * rewritten at all.
 *
 * The handlers' reconcile decision itself is reconcile.c's (reconcile.h):
 * this file calls it, it calls nothing here or in engine.c (issue 16).
 */
#include "engine_int.h"
#include "reconcile.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tend/status.h"

#define SEQ_PROVIDER "tend/provider_id"

struct header {
	uint64_t version;
	bool has_token;
	uint8_t flags;
};

/* The component has child-existence or tombstone rows: a leaf without
 * them skips the existence diff (two cursor seeks) at commit. */
#define HDR_HAS_CHILDREN 1

static int
header_get(struct tend_txn *txn, const struct tend_fp *cid, struct header *h)
{
	struct tend_bytes v;
	struct hdr_row row;
	int rc = tend_store_get(txn, TEND_T_COMP, cid->b, 16, &v);

	memset(h, 0, sizeof *h);
	if (rc)
		return rc;
	if (tend_hdr_parse(&row, v.data, v.len))
		return tend_error_set(TEND_EINVALID, "store: bad component");
	h->version = row.version;
	h->has_token = row.token != NULL;
	h->flags = row.flags;
	return 0;
}

/* ---- the counters' side of a row (counts.c, store.h) ---- */

/* The app whose counters c's rows move: the first key of its path */
static bool
comp_app(struct tend_comp *c, const char **app, size_t *len)
{
	if (!c->count_app_known) {
		c->count_app_known = true;
		if (!tend_count_path_app((const uint8_t *)c->path.ptr,
			c->path.len, &c->arena, &c->count_app,
			&c->count_applen))
			c->count_app = NULL;
	}
	*app = c->count_app;
	*len = c->count_applen;
	return c->count_app != NULL;
}

static void
count_add(struct tend_txn *txn, const char *app, size_t len,
    const struct tend_counts *d)
{
	for (int i = 0; i < TEND_COUNT__N; i++)
		if (d->n[i]) {
			tend_store_count_add(txn, app, len, d);
			return;
		}
}

/*
 * A component's memo: in a MEMO row of its own, or (a store of format 3)
 * after its header in its COMP row, one row read and written for both.
 * What the row's memo becomes when the header is written: the one it
 * has (MEMO_KEEP), none, or c's.
 */
enum memo_op { MEMO_KEEP, MEMO_DROP, MEMO_SET };

#define MCTX_KEY "mctx/"

/* c's memo; in a store of format 3 its context (logic, dependencies)
 * goes into META once, and the memo names it */
static int
memo_encode(struct tend_txn *txn, struct tend_buf *b,
    const struct tend_comp *c)
{
	struct tend_buf ctx = TEND_BUF_INIT;
	uint8_t key[sizeof MCTX_KEY - 1 + 8];
	struct tend_bytes v;
	int rc;

	if (!c->eng->compact_rows) {
		tend_memo_encode(b, &c->mopts.input_fp, &c->mopts.logic_fp,
		    c->deps, c->ndeps, false);
		return 0;
	}
	tend_memo_ctx_encode(&ctx, &c->mopts.logic_fp, c->deps, c->ndeps);
	struct tend_fp id = tend_fp_bytes(ctx.ptr, ctx.len);
	memcpy(key, MCTX_KEY, sizeof MCTX_KEY - 1);
	memcpy(key + sizeof MCTX_KEY - 1, id.b, 8);
	rc = tend_store_get(txn, TEND_T_META, key, sizeof key, &v);
	if (rc == TEND_ENOTFOUND)
		rc = tend_store_put(txn, TEND_T_META, key, sizeof key, ctx.ptr,
		    ctx.len);
	if (rc == 0)
		tend_memo_shared_encode(b, &c->mopts.input_fp, id.b);
	tend_buf_release(&ctx);
	return rc;
}

int
tend_memo_load(struct tend_txn *txn, struct tend_engine *eng,
    const struct tend_fp *cid, struct memo_row *m)
{
	struct tend_bytes v;
	int rc = tend_memo_get(txn, eng, cid, &v);

	if (rc)
		return rc;
	if (tend_memo_parse(m, v.data, v.len) != 0)
		return TEND_EINVALID;
	if (!m->ctx)
		return 0;
	struct mctx *x = NULL;
	for (size_t i = 0; i < sizeof eng->mctx / sizeof *eng->mctx && !x; i++)
		if (eng->mctx[i].bytes &&
		    memcmp(eng->mctx[i].id, m->ctx, 8) == 0)
			x = &eng->mctx[i];
	if (!x) {
		uint8_t key[sizeof MCTX_KEY - 1 + 8];

		memcpy(key, MCTX_KEY, sizeof MCTX_KEY - 1);
		memcpy(key + sizeof MCTX_KEY - 1, m->ctx, 8);
		if (tend_store_get(txn, TEND_T_META, key, sizeof key, &v))
			return TEND_EINVALID; /* (never: it came first) */
		x = &eng->mctx[eng->mctx_next++ % (sizeof eng->mctx /
						     sizeof *eng->mctx)];
		free(x->bytes);
		memcpy(x->id, m->ctx, 8);
		x->bytes = tend_xmemdup(v.data, v.len);
		x->len = v.len;
	}
	return tend_memo_ctx_parse(m, x->bytes, x->len) ? TEND_EINVALID : 0;
}

static int
comp_put(struct tend_txn *txn, struct tend_comp *c, uint64_t version,
    bool token, enum memo_op m)
{
	struct tend_buf b = TEND_BUF_INIT, memo = TEND_BUF_INIT;
	struct tend_bytes v;
	const char *app;
	size_t alen;
	int rc = 0;
	bool had = false;

	/* an app's root row makes it a tracked app (tend status lists it
	 * from its counters); format 3 keeps the row's memo */
	if ((!c->has_parent && comp_app(c, &app, &alen)) ||
	    (c->eng->compact_rows && m == MEMO_KEEP)) {
		rc = tend_store_get(txn, TEND_T_COMP, c->cid.b, 16, &v);
		if (rc && rc != TEND_ENOTFOUND)
			return rc;
		had = rc == 0;
		struct hdr_row old;
		/* (copied before any write: LMDB's pages may move) */
		if (had && c->eng->compact_rows && m == MEMO_KEEP &&
		    tend_hdr_parse(&old, v.data, v.len) == 0 && old.memo)
			tend_buf_put(&memo, old.memo, old.memolen);
		if (!had && !c->has_parent && comp_app(c, &app, &alen)) {
			struct tend_counts d = {{0}};

			d.n[TEND_COUNT_ROOTS] = 1;
			count_add(txn, app, alen, &d);
		}
	}
	if (m == MEMO_SET && (rc = memo_encode(txn, &memo, c))) {
		tend_buf_release(&memo);
		return rc;
	}

	const char *proc = c->processor ? c->processor : "";
	struct hdr_row h = {.version = version,
	    .token = token ? c->eng->token : NULL, .flags = c->hdr_flags,
	    .has_parent = c->has_parent, .parent = c->parent_cid.b,
	    .proc = (const uint8_t *)proc, .proclen = strlen(proc),
	    .path = (const uint8_t *)c->path.ptr, .pathlen = c->path.len};
	if (c->eng->compact_rows) {
		h.memo = (const uint8_t *)memo.ptr;
		h.memolen = memo.len;
	}
	tend_hdr_encode(&b, &h, c->eng->compact_rows);
	rc = tend_store_put(txn, TEND_T_COMP, c->cid.b, 16, b.ptr, b.len);
	/* an older store's MEMO row */
	if (rc == 0 && !c->eng->compact_rows && m == MEMO_SET)
		rc = tend_store_put(txn, TEND_T_MEMO, c->cid.b, 16, memo.ptr,
		    memo.len);
	else if (rc == 0 && !c->eng->compact_rows && m == MEMO_DROP)
		rc = tend_store_del(txn, TEND_T_MEMO, c->cid.b, 16);
	tend_buf_release(&b);
	tend_buf_release(&memo);
	return rc;
}

static int
header_put(struct tend_txn *txn, struct tend_comp *c, uint64_t version,
    bool token)
{
	return comp_put(txn, c, version, token, MEMO_KEEP);
}

int
tend_memo_get(struct tend_txn *txn, const struct tend_engine *eng,
    const struct tend_fp *cid, struct tend_bytes *out)
{
	struct hdr_row h;
	int rc;

	if (!eng->compact_rows)
		return tend_store_get(txn, TEND_T_MEMO, cid->b, 16, out);
	if ((rc = tend_store_get(txn, TEND_T_COMP, cid->b, 16, out)))
		return rc;
	if (tend_hdr_parse(&h, out->data, out->len) || !h.memo)
		return TEND_ENOTFOUND;
	out->data = h.memo;
	out->len = h.memolen;
	return 0;
}

/* Drop component `cid`'s memo, wherever it is kept */
static int
memo_drop(struct tend_txn *txn, const struct tend_engine *eng,
    const struct tend_fp *cid)
{
	struct tend_buf b = TEND_BUF_INIT;
	struct tend_bytes v;
	struct hdr_row h;
	int rc;

	if (!eng->compact_rows)
		return tend_store_del(txn, TEND_T_MEMO, cid->b, 16);
	rc = tend_store_get(txn, TEND_T_COMP, cid->b, 16, &v);
	if (rc == TEND_ENOTFOUND)
		return 0;
	if (rc)
		return rc;
	if (tend_hdr_parse(&h, v.data, v.len) || !h.memo)
		return 0;
	h.memo = NULL;
	h.memolen = 0;
	tend_hdr_encode(&b, &h, true);
	rc = tend_store_put(txn, TEND_T_COMP, cid->b, 16, b.ptr, b.len);
	tend_buf_release(&b);
	return rc;
}

static void
item_key(uint8_t out[40], const struct tend_fp *cid, const struct tend_fp *tsid,
    uint64_t pid)
{
	memcpy(out, cid->b, 16);
	memcpy(out + 16, tsid->b, 16);
	for (int i = 0; i < 8; i++)
		out[32 + i] = (uint8_t)(pid >> (56 - 8 * i));
}

static uint64_t
item_key_pid(const uint8_t *k)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | k[32 + i];
	return v;
}

/*
 * ITEM rows are written by these three only: each moves its app's
 * counters by the difference between the row it replaces and the one it
 * writes, in the same transaction. A row's app is its owner's, so `c`
 * (or `app`) owns the key's cid.
 */
static int
item_put(struct tend_txn *txn, struct tend_comp *c, const uint8_t k[40],
    const struct item *item)
{
	struct tend_counts d = {{0}};
	struct tend_buf b = TEND_BUF_INIT;
	struct tend_bytes old;
	const char *app;
	size_t alen;
	bool counted = comp_app(c, &app, &alen);
	int rc;

	if (counted) {
		/* (a row that cannot be read was not counted: no scan
		 * lists it) */
		rc = tend_store_get(txn, TEND_T_ITEM, k, 40, &old);
		if (rc == 0)
			tend_count_row(&d, old.data, old.len, -1);
		else if (rc != TEND_ENOTFOUND)
			return rc;
		tend_count_item(&d, item, 1);
	}
	tend_item_encode(&b, item, c->eng->compact_rows);
	rc = tend_store_put(txn, TEND_T_ITEM, k, 40, b.ptr, b.len);
	tend_buf_release(&b);
	if (rc == 0 && counted)
		count_add(txn, app, alen, &d);
	return rc;
}

static int
item_del(struct tend_txn *txn, struct tend_comp *c, const uint8_t k[40])
{
	struct tend_counts d = {{0}};
	struct tend_bytes old;
	const char *app;
	size_t alen;
	bool counted = comp_app(c, &app, &alen);
	int rc = tend_store_get(txn, TEND_T_ITEM, k, 40, &old);

	if (rc == TEND_ENOTFOUND)
		return 0;
	if (rc == 0 && counted)
		tend_count_row(&d, old.data, old.len, -1);
	if (rc == 0)
		rc = tend_store_del(txn, TEND_T_ITEM, k, 40);
	if (rc == 0 && counted)
		count_add(txn, app, alen, &d);
	return rc;
}

/* Every row of component `cid` whose key starts with `prefix` (the
 * component's own rows, or one state's under every generation); `app`
 * NULL: look the owner's app up in its header. */
static int
items_del_prefix(struct tend_txn *txn, const uint8_t *prefix, size_t plen,
    const char *app, size_t alen, struct tend_arena *arena)
{
	struct tend_counts d = {{0}};
	struct tend_iter it;
	struct tend_bytes k, v;
	bool root;
	int rc = 0, more;

	if (!app && (rc = tend_store_get(txn, TEND_T_COMP, prefix, 16, &v)) &&
	    rc != TEND_ENOTFOUND)
		return rc;
	if (!app && rc == 0)
		tend_count_header_app(&v, arena, &app, &alen, &root);
	if ((rc = tend_store_iter_init(&it, txn, TEND_T_ITEM, prefix, plen)))
		return rc;
	while ((more = tend_store_iter_next(&it, &k, &v)) == 1)
		if (app && k.len == 40)
			tend_count_row(&d, v.data, v.len, 1);
	tend_store_iter_finish(&it);
	if (more < 0)
		return more;
	for (int i = 0; i < TEND_COUNT__N; i++)
		d.n[i] = -d.n[i];
	if ((rc = tend_store_del_prefix(txn, TEND_T_ITEM, prefix, plen)))
		return rc;
	if (app)
		count_add(txn, app, alen, &d);
	return 0;
}

static int
put_item(struct tend_txn *txn, struct tend_comp *c, const struct plan *p)
{
	uint8_t k[40];

	item_key(k, &c->cid, &p->tsid, p->pid);
	return item_put(txn, c, k, &p->item);
}

static int
del_owner_if_mine(struct tend_txn *txn, const struct tend_fp *tsid,
    const struct tend_fp *cid)
{
	struct tend_bytes v;
	int rc = tend_store_get(txn, TEND_T_OWNER, tsid->b, 16, &v);

	if (rc == TEND_ENOTFOUND)
		return 0;
	if (rc)
		return rc;
	if (v.len == 16 && memcmp(v.data, cid->b, 16) == 0)
		return tend_store_del(txn, TEND_T_OWNER, tsid->b, 16);
	return 0;
}

/* Is the container behind provider `id` still tracked by someone? Its
 * children must then be kept, not dropped, while the provider is not
 * visible (semantics §7 item 22: do the safer thing). */
static bool
container_alive(struct tend_txn *txn, const struct tend_fp *id)
{
	struct tend_bytes v;
	struct tend_fp cur = *id;

	for (int depth = 0; depth < 4; depth++) {
		if (tend_store_get(txn, TEND_T_OWNER, cur.b, 16, &v) == 0)
			return true;
		/* an attachment namespace: look at its container */
		if (tend_store_get(txn, TEND_T_NAME, cur.b, 16, &v) != 0 ||
		    v.len < 17 || v.data[16] != TEND_KEY_SYMBOL)
			return false;
		memcpy(cur.b, v.data, 16);
	}
	return false;
}

static void prov_gen(const struct tend_provider *prov, uint64_t *pid,
    uint64_t *schema);

/*
 * A container whose component did not run in this pass has no visible
 * provider. If its connector can rebuild the child handler from the
 * stored record alone (open_child), do that, so its children are
 * reconciled (deleted one by one) instead of waiting for the container's
 * fate. Returns the provider, or NULL.
 */
static struct tend_provider *
reopen(struct tend_txn *txn, struct tend_comp *c, const struct tend_fp *id,
    int depth)
{
	struct tend_engine *eng = c->eng;
	struct tend_bytes v;
	struct tend_fp parent_id, owner;
	struct tend_key key;
	struct item item;

	if (depth > 4 || tend_store_get(txn, TEND_T_NAME, id->b, 16, &v) != 0 ||
	    v.len < 17)
		return NULL;
	memcpy(parent_id.b, v.data, 16);
	if (tend_key_decode(&key, v.data + 16, v.len - 16, NULL, &c->arena))
		return NULL;
	if (key.kind == TEND_KEY_SYMBOL) {
		/* an attachment namespace: reopen its container */
		if (!reopen(txn, c, &parent_id, depth + 1))
			return NULL;
		struct tend_provider *a = tend_registry_get(&eng->reg, id);
		return a && a->handler ? a : NULL;
	}
	struct tend_provider *parent = tend_registry_get(&eng->reg, &parent_id);
	if (!parent || !tend_provider_visible(c->pass, parent) ||
	    !parent->handler->ops->open_child)
		return NULL;
	if (tend_store_get(txn, TEND_T_OWNER, id->b, 16, &v) != 0 ||
	    v.len != 16)
		return NULL;
	memcpy(owner.b, v.data, 16);
	uint64_t ppid, pschema;
	prov_gen(parent, &ppid, &pschema);
	uint8_t k[40];
	item_key(k, &owner, id, ppid);
	if (tend_store_get(txn, TEND_T_ITEM, k, 40, &v) != 0 ||
	    tend_item_decode(&item, v.data, v.len, &c->arena) != 0 ||
	    !item.container)
		return NULL;
	const struct state *last = NULL;
	for (size_t i = 0; i < item.nstates; i++)
		if (!item.states[i].deleted)
			last = &item.states[i];
	if (!last)
		return NULL;
	struct tend_bytes rec = {last->rec, last->len};
	struct tend_handler *h = parent->handler->ops->open_child(
	    parent->handler, &key, &rec);
	if (!h)
		return NULL;
	struct tend_provider *p = tend_registry_get(&eng->reg, id);
	if (!p) {
		struct tend_buf name = TEND_BUF_INIT;

		p = tend_xcalloc(1, sizeof *p);
		p->id = *id;
		p->eng = eng;
		p->name_key = (struct tend_buf)TEND_BUF_INIT;
		p->name_parent = parent_id;
		tend_buf_puts(&name, parent->name);
		tend_buf_putc(&name, '/');
		tend_key_format(&name, &key);
		p->name = tend_buf_detach(&name, NULL);
		tend_registry_put(&eng->reg, p);
		if (c->pass->preview) {
			tend_pass_save_provider(c->pass, p);
			p->preview_new = true;
		}
	} else
		tend_pass_save_provider(c->pass, p);
	p->gen_id = item.gen_id;
	p->gen_schema = item.gen_schema;
	tend_provider_resolve(p, h);
	p->seen_pass = c->pass->id;
	for (size_t i = 0; i < p->natt; i++)
		p->att[i].prov->seen_pass = c->pass->id;
	return p;
}

static int
ensure_name(struct tend_txn *txn, const struct tend_fp *id,
    const struct tend_fp *parent, const uint8_t *key, size_t keylen)
{
	struct tend_bytes v;
	struct tend_buf b = TEND_BUF_INIT;
	int rc = tend_store_get(txn, TEND_T_NAME, id->b, 16, &v);

	if (rc != TEND_ENOTFOUND)
		return rc;
	tend_buf_put(&b, parent->b, 16);
	tend_buf_put(&b, key, keylen);
	rc = tend_store_put(txn, TEND_T_NAME, id->b, 16, b.ptr, b.len);
	tend_buf_release(&b);
	return rc;
}

/* ---- planning ---- */

static struct plan *
plan_new(struct tend_comp *c)
{
	if (c->nplans == c->cplans) {
		c->cplans = c->cplans ? c->cplans * 2 : 1;
		c->plans = tend_xrealloc(c->plans, c->cplans * sizeof *c->plans);
	}
	struct plan *p = &c->plans[c->nplans++];
	memset(p, 0, sizeof *p);
	return p;
}

static void
prov_gen(const struct tend_provider *prov, uint64_t *pid, uint64_t *schema)
{
	*pid = prov->root ? 0 : prov->gen_id;
	*schema = prov->root ? 0 : prov->gen_schema;
}

/*
 * Contest rows. Two components that declared one state in one batch, with
 * no live owner among them, both failed (nothing applied): the state's
 * owner row then names them all, so that the next pass does not let the
 * first of them, in a batch of its own, take it. Format: 16 bytes of
 * 0xff, the holder (the owner whose item row has the state; zeros: none),
 * then per contender its id, a u16 length and its display path (a failed
 * new component has no header to find it by).
 */
static const uint8_t contest_mark[16] = {
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

bool
tend_contest_row(const struct tend_bytes *v)
{
	return v->len >= 32 && memcmp(v->data, contest_mark, 16) == 0;
}

size_t
tend_contest_next(const struct tend_bytes *v, size_t at, struct tend_fp *cid,
    const char **path, size_t *len)
{
	uint16_t n;

	if (at + 18 > v->len)
		return 0;
	memcpy(cid->b, v->data + at, 16);
	memcpy(&n, v->data + at + 16, 2);
	if (at + 18 + n > v->len)
		return 0;
	*path = (const char *)v->data + at + 18;
	*len = n;
	return at + 18 + n;
}

int
tend_contest_add(struct tend_txn *txn, const struct tend_fp *tsid,
    const struct tend_fp *holder, struct tend_comp *const *comps, size_t n)
{
	struct tend_buf row = TEND_BUF_INIT;
	struct tend_bytes v;
	static const uint8_t zero[16];
	int rc = tend_store_get(txn, TEND_T_OWNER, tsid->b, 16, &v);

	if (rc && rc != TEND_ENOTFOUND)
		return rc;
	bool old = rc == 0 && tend_contest_row(&v);
	tend_buf_put(&row, contest_mark, 16);
	tend_buf_put(&row, holder ? holder->b : old ? v.data + 16 : zero, 16);
	if (old)
		tend_buf_put(&row, v.data + 32, v.len - 32);
	for (size_t i = 0; i < n; i++) {
		struct tend_bytes r = {(const uint8_t *)row.ptr, row.len};
		struct tend_fp cid;
		const char *p;
		size_t len, at = 32;
		bool have = false;

		while (!have && (at = tend_contest_next(&r, at, &cid, &p, &len)))
			have = tend_fp_equal(&cid, &comps[i]->cid);
		if (have)
			continue;
		uint16_t l16 = (uint16_t)strnlen(comps[i]->display, 0xffff);
		tend_buf_put(&row, comps[i]->cid.b, 16);
		tend_buf_put(&row, &l16, 2);
		tend_buf_put(&row, comps[i]->display, l16);
	}
	rc = tend_store_put(txn, TEND_T_OWNER, tsid->b, 16, row.ptr, row.len);
	tend_buf_release(&row);
	return rc;
}

/* c declares a contested state: a conflict while another contender
 * still declares it (c joins them), else c takes it (from *holder). */
static int
contest_enter(struct tend_txn *txn, struct tend_comp *c, struct decl *d,
    const struct tend_bytes *v, struct tend_fp *holder, bool *held)
{
	static const uint8_t zero[16];
	struct tend_buf copy = TEND_BUF_INIT;
	struct tend_fp cid;
	const char *p;
	size_t len, at = 32;
	int rc = 0;

	memcpy(holder->b, v->data + 16, 16);
	*held = memcmp(holder->b, zero, 16) != 0;
	/* (the row moves when we add to it) */
	tend_buf_put(&copy, v->data, v->len);
	struct tend_bytes r = {(const uint8_t *)copy.ptr, copy.len};
	while (!rc && (at = tend_contest_next(&r, at, &cid, &p, &len))) {
		char *who = tend_xmemdup(p, len + 1);

		who[len] = '\0';
		if (!tend_fp_equal(&cid, &c->cid) &&
		    tend_pass_still_declares(c, &cid, who, &d->tsid,
			d->prov->name)) {
			rc = tend_contest_add(txn, &d->tsid, NULL, &c, 1);
			if (rc == 0) {
				tend_conflict_message(c, who, d->prov->name,
				    &d->key, false, NULL);
				rc = TEND_ECONFLICT;
			}
		}
		free(who);
	}
	tend_buf_release(&copy);
	return rc;
}

static int
phase1(struct tend_txn *txn, struct tend_comp *c, struct decl *d,
    struct item *stored)
{
	struct tend_provider *prov = d->prov;
	struct item *it = stored, taken;
	struct tend_reconcile_out out;
	uint64_t pid, pschema;
	struct plan tmp;
	size_t nprev;
	bool missing, never;
	int rc;

	memset(&tmp, 0, sizeof tmp);
	prov_gen(prov, &pid, &pschema);
	tmp.tsid = d->tsid;
	tmp.pid = pid;
	tmp.decl = d;
	tmp.prov = prov;
	tmp.declared = true;
	tmp.key = d->key;
	if (!it) {
		/* R7(b): another component may own it: preempt */
		struct tend_bytes v;
		struct tend_fp from;
		bool take = false;

		rc = tend_store_get(txn, TEND_T_OWNER, d->tsid.b, 16, &v);
		if (rc && rc != TEND_ENOTFOUND)
			return rc;
		if (rc == TEND_ENOTFOUND) {
			tmp.claim = true;
		} else if (tend_contest_row(&v)) {
			/* a conflict left unresolved: ours once no other
			 * contender declares it */
			bool held;

			if ((rc = contest_enter(txn, c, d, &v, &from, &held)))
				return rc;
			tmp.claim = true;
			take = held && !tend_fp_equal(&from, &c->cid);
		} else if (v.len == 16 && memcmp(v.data, c->cid.b, 16) != 0) {
			struct tend_buf who = TEND_BUF_INIT;

			memcpy(from.b, v.data, 16);
			/* taken over only from an owner that no longer
			 * declares it: two that do conflict */
			tend_inspect_comp_path(txn, &from, &who);
			if (tend_pass_still_declares(c, &from, who.ptr,
				&d->tsid, prov->name)) {
				tend_conflict_message(c, who.ptr, prov->name,
				    &d->key, true, NULL);
				tend_buf_release(&who);
				return TEND_ECONFLICT;
			}
			tend_buf_release(&who);
			take = true;
		}
		if (take) {
			uint8_t k[40];

			tmp.prev_owner = from;
			tmp.preempted = true;
			tmp.claim = true;
			/* the previous owner's action earlier in this batch
			 * has not run: it is superseded (its delete must not
			 * undo our write) */
			struct plan *old = tend_pass_find_plan(c->pass,
			    &d->tsid, &tmp.prev_owner);
			if (old && old->kind == PLAN_ACTION)
				old->kind = PLAN_CANCELLED;
			item_key(k, &tmp.prev_owner, &d->tsid, pid);
			rc = tend_store_get(txn, TEND_T_ITEM, k, 40, &v);
			if (rc == 0) {
				rc = tend_item_decode(&taken, v.data, v.len,
				    &c->arena);
				if (rc)
					return rc;
				for (size_t i = 0; i < taken.nstates; i++)
					taken.states[i].version = 0;
				it = &taken;
			} else if (rc != TEND_ENOTFOUND)
				return rc;
		}
		tmp.new_item = !it;
	}
	const struct tend_bytes *prev =
	    tend_prev_of(c, it, &nprev, &missing, &never, pschema, prov->root);

	rc = tend_call_reconcile(c, prov->handler, &d->key, d->value, d->vlen,
	    prev, nprev, missing, never, &out);
	if (rc)
		return rc;
	if (out.action) {
		struct plan *p = plan_new(c);

		*p = tmp;
		tend_fill_action(p, &out, prev, nprev, missing);
		/* a state whose first pass was cut short (it leads with the
		 * new item's "may be missing" marker, version 0, and was
		 * never settled) is still being created: said so, not
		 * "updated" (its target was never known to hold it) */
		p->never = never;
		if (p->op == TEND_OP_UPDATE && never)
			p->op = TEND_OP_CREATE;
		if (it) {
			p->item = *it;
		} else {
			p->item.parent = prov->id;
			p->item.schema = pschema;
			p->item.key = d->kenc;
			p->item.keylen = d->kenc_len;
		}
		p->item.parent = prov->id;
		/* the candidates stay {r}: a crash cannot lose anything */
		p->refresh = it && !tmp.preempted && !missing &&
		    it->nstates == 1 && !it->states[0].deleted &&
		    !out.record_absent && !p->record_changed &&
		    out.invalidation == TEND_INVALIDATE_NONE &&
		    (!d->child || (it->container &&
				      it->gen_id != 0));
		tend_append_state(c, &p->item, it, &out, missing);
		if (d->child) {
			/* R24 child provider generation; a container seen for
			 * the first time (or re-created) gets a fresh id
			 * (§7 item 7) */
			p->item.container = true;
			if (!it || !it->container ||
			    out.invalidation == TEND_INVALIDATE_DESTRUCTIVE) {
				rc = tend_store_seq_next(txn, SEQ_PROVIDER,
				    &p->item.gen_id);
				if (rc)
					return rc;
				p->item.gen_schema = 0;
			} else {
				p->item.gen_id = it->gen_id;
				p->item.gen_schema = it->gen_schema +
				    (out.invalidation == TEND_INVALIDATE_LOSSY);
			}
		}
		return 0;
	}
	if (d->child)
		return tend_error_set(TEND_ERROR,
		    "connector %s: a container's reconcile must return an "
		    "action every pass (it returns the child handler)",
		    prov->handler->ops->kind);
	if (!it)
		return 0; /* new and nothing to do: nothing tracked */
	if (tmp.preempted) {
		struct plan *p = plan_new(c);

		*p = tmp;
		p->kind = PLAN_MOVE;
		p->item = *it;
	} else if (!prov->root && it->schema != pschema) {
		struct plan *p = plan_new(c);

		*p = tmp;
		p->kind = PLAN_SCHEMA;
		p->item = *it;
	}
	return 0;
}

static int
phase2(struct tend_txn *txn, struct tend_comp *c, const struct tend_fp *tsid,
    uint64_t ipid, struct item *it)
{
	struct tend_provider *prov = tend_registry_get(&c->eng->reg,
	    &it->parent);
	struct tend_reconcile_out out;

	if (prov && !tend_provider_visible(c->pass, prov))
		prov = NULL;
	if (!prov && container_alive(txn, &it->parent))
		prov = reopen(txn, c, &it->parent, 0);
	uint64_t pid, pschema;
	struct tend_key key;
	size_t nprev;
	bool missing, never;
	int rc;

	if (!prov || !prov->handler) {
		/* R12, made safe: forget the children of a container only
		 * once the container itself is gone */
		if (container_alive(txn, &it->parent)) {
			c->ndeferred++;
			return 0;
		}
		struct plan *p = plan_new(c);
		p->kind = PLAN_DROP;
		p->tsid = *tsid;
		p->pid = ipid;
		p->item = *it;
		return 0;
	}
	prov_gen(prov, &pid, &pschema);
	if (it->container && prov->handler->ops->open_child &&
	    !c->pass->preview && (!c->pass->retrying ||
	    tend_cidset_has(&c->pass->blocked, tsid))) {
		/* R22, R23: a container goes after its children, whatever the
		 * batch and the sink order. With open_child its children are
		 * deleted one by one, in this pass's batches: a container
		 * deleted in an earlier batch would leave them to be dropped
		 * untracked, and an rmdir run before their unlinks fails. So
		 * its delete waits for the pass's retries, and for the next
		 * pass if a child's delete failed. (Without open_child the
		 * container's delete is what removes them, and they wait
		 * for it.) */
		c->ndeferred++;
		return 0;
	}
	if (ipid != pid) {
		/* R10: stale generation (destructive change): prune */
		struct plan *p = plan_new(c);
		p->kind = PLAN_DROP;
		p->tsid = *tsid;
		p->pid = ipid;
		p->item = *it;
		p->prov = prov;
		return 0;
	}
	if ((rc = tend_key_decode(&key, it->key, it->keylen, NULL,
		 &c->arena)) != 0)
		return rc;
	const struct tend_bytes *prev =
	    tend_prev_of(c, it, &nprev, &missing, &never, pschema, prov->root);
	rc = tend_call_reconcile(c, prov->handler, &key, NULL, 0, prev, nprev,
	    missing, never, &out);
	if (rc)
		return rc;
	if (!out.action)
		return 0;
	struct plan *p = plan_new(c);
	p->tsid = *tsid;
	p->pid = ipid;
	p->prov = prov;
	p->key = key;
	p->item = *it;
	tend_fill_action(p, &out, prev, nprev, missing);
	p->op = TEND_OP_DELETE;
	p->never = never;
	tend_append_state(c, &p->item, it, &out, missing);
	return 0;
}

/* The retry of a kept component (c->retry) walks its undeclared items
 * only: its declared ones were applied, or failed, in its first run, and
 * are not tried again in the same pass. */
static int
merge_walk(struct tend_txn *txn, struct tend_comp *c)
{
	struct tend_iter it;
	struct tend_bytes k, v;
	size_t j = 0;
	bool matched = false;
	int rc, more;

	if ((rc = tend_store_iter_init(&it, txn, TEND_T_ITEM, c->cid.b, 16)))
		return rc;
	while ((more = tend_store_iter_next(&it, &k, &v)) == 1) {
		struct tend_fp tsid;
		struct item item;
		uint64_t ipid;

		if (k.len != 40) {
			rc = tend_error_set(TEND_ERROR, "store: bad item key");
			goto out;
		}
		memcpy(tsid.b, k.data + 16, 16);
		ipid = item_key_pid(k.data);
		while (j < c->ndecls && cmp_fp(&c->decls[j].tsid, &tsid) < 0) {
			if (!matched && !c->retry &&
			    (rc = phase1(txn, c, &c->decls[j], NULL)))
				goto out;
			j++;
			matched = false;
		}
		if ((rc = tend_item_decode(&item, v.data, v.len, &c->arena)))
			goto out;
		if (j < c->ndecls && cmp_fp(&c->decls[j].tsid, &tsid) == 0) {
			uint64_t pid, pschema;

			prov_gen(c->decls[j].prov, &pid, &pschema);
			if (pid == ipid && !matched) {
				matched = true;
				rc = c->retry ? 0
					      : phase1(txn, c, &c->decls[j], &item);
			} else if (c->retry) {
				rc = 0;
			} else {
				/* declared again under a new generation:
				 * the old entry is stale (R10) */
				struct plan *p = plan_new(c);
				p->kind = PLAN_DROP;
				p->tsid = tsid;
				p->pid = ipid;
				p->item = item;
				p->declared = true;
				rc = 0;
			}
		} else
			rc = phase2(txn, c, &tsid, ipid, &item);
		if (rc)
			goto out;
	}
	if (more < 0) {
		rc = more;
		goto out;
	}
	for (; j < c->ndecls && !c->retry; j++, matched = false)
		if (!matched && (rc = phase1(txn, c, &c->decls[j], NULL)))
			goto out;
	rc = 0;
out:
	tend_store_iter_finish(&it);
	return rc;
}

static int
write_plans(struct tend_txn *txn, struct tend_comp *c)
{
	int rc;

	for (size_t i = 0; i < c->nplans; i++) {
		struct plan *p = &c->plans[i];

		if ((p->kind != PLAN_ACTION && p->kind != PLAN_MOVE) ||
		    p->refresh)
			continue;
		if (p->preempted) {
			uint8_t pre[32];

			memcpy(pre, p->prev_owner.b, 16);
			memcpy(pre + 16, p->tsid.b, 16);
			/* (the previous owner may be another app's) */
			if ((rc = items_del_prefix(txn, pre, 32, NULL, 0,
				 &c->arena)))
				return rc;
		}
		if (p->claim && (rc = tend_store_put(txn, TEND_T_OWNER,
				     p->tsid.b, 16, c->cid.b, 16)))
			return rc;
		/* (a state tracked as a leaf before, declared as a
		 * container now, is named now: a store of format 3 did not
		 * name it as a leaf) */
		if (p->prov && (p->new_item ||
				   (c->eng->compact_rows && p->item.container))) {
			struct tend_provider *pr = p->prov;

			if (pr->name_key.len &&
			    (rc = ensure_name(txn, &pr->id, &pr->name_parent,
				 (const uint8_t *)pr->name_key.ptr,
				 pr->name_key.len)))
				return rc;
			/* an entry's parent and key are in its item row: a
			 * store of format 3 names only containers here
			 * (inspect.c's leaf_name) */
			if ((!c->eng->compact_rows || p->item.container) &&
			    (rc = ensure_name(txn, &p->tsid, &pr->id,
				 p->item.key, p->item.keylen)))
				return rc;
		}
		if ((rc = put_item(txn, c, p)))
			return rc;
	}
	return 0;
}

/* The existence row of new component c under its parent, with c's path
 * (or, when c's header in this transaction has it, empty) */
static int
cex_eager(struct tend_txn *txn, struct tend_comp *c, bool path)
{
	uint8_t k[32];
	struct tend_bytes v;
	int rc;

	memcpy(k, c->parent_cid.b, 16);
	memcpy(k + 16, c->cid.b, 16);
	rc = tend_store_get(txn, TEND_T_CEX, k, 32, &v);
	if (rc == TEND_ENOTFOUND)
		rc = tend_store_put(txn, TEND_T_CEX, k, 32,
		    path ? c->path.ptr : "", path ? c->path.len : 0);
	return rc;
}

int
tend_precommit_comp(struct tend_txn *txn, struct tend_comp *c)
{
	struct header h;
	int rc;

	/* re-runnable: forget a previous attempt (map full, or the retry
	 * of a kept component) */
	for (size_t i = 0; i < c->nplans; i++) {
		free(c->plans[i].error);
		if (c->plans[i].child)
			c->plans[i].child->ops->destroy(c->plans[i].child);
	}
	c->nplans = 0;
	c->ndeferred = 0;
	if (c->in_preflight)
		return 0;
	rc = header_get(txn, &c->cid, &h);
	if (rc && rc != TEND_ENOTFOUND)
		return rc;
	c->existed = rc == 0;
	c->token_was_set = h.has_token;
	c->curr = h.version + 1;
	c->hdr_flags = h.flags;
	c->stored_flags = h.flags;
	/* eager existence row, so a later GC finds this component even if
	 * its parent never commits (a known component has one: see the
	 * pre-flight skip in commit); in this transaction, with its header
	 * (below) or, when it fails first, with its path */
	bool eager = c->has_parent && c->mode == MODE_BUILD && !c->existed;
	if (c->memo_delete && (rc = memo_drop(txn, c->eng, &c->cid)))
		return rc;
	if (c->failed)
		return eager ? cex_eager(txn, c, true) : 0;
	if ((rc = merge_walk(txn, c))) {
		if (rc == TEND_ERETRY && tend_error_code() == TEND_ERETRY)
			return rc;
		/* a reconcile error, or a conflict, fails this component
		 * only; what it has stays, and so does its parent's memo */
		c->failed = true;
		c->conflict = rc == TEND_ECONFLICT;
		free(c->error);
		c->error = tend_xstrdup(tend_error_last());
		c->nplans = 0;
		tend_comp_withhold_memos(c->parent);
		return eager ? cex_eager(txn, c, true) : 0;
	}
	if ((rc = write_plans(txn, c)))
		return rc;
	for (size_t i = 0; i < c->nplans; i++)
		if (c->plans[i].kind == PLAN_ACTION)
			tend_pass_ref_plan(c->pass, c, i);
	bool any = false;
	for (size_t i = 0; i < c->nplans; i++)
		if (c->plans[i].kind == PLAN_ACTION && !c->plans[i].refresh)
			any = true;
	/* R18: a component with an action in flight is not memoised until
	 * every action succeeded, and the memo goes in this durable commit,
	 * before any sink: a kill or a failed action then leaves no memo
	 * that the same input (a source brought back) could hit, while the
	 * pending records wait for a body to settle them */
	if (any && !c->memo_delete &&
	    (rc = memo_drop(txn, c->eng, &c->cid)))
		return rc;
	if ((!c->existed && c->mode == MODE_BUILD) || any || c->token_was_set)
		rc = header_put(txn, c, any ? c->curr : h.version, any);
	/* (its header has its path: a store of format 3 does not repeat
	 * it) */
	if (rc == 0 && eager)
		rc = cex_eager(txn, c, !c->eng->compact_rows);
	if (!any)
		c->curr = h.version; /* nothing appended */
	return rc;
}

/* ---- commit ---- */

static bool
declared_tsid(const struct tend_comp *c, const struct tend_fp *tsid)
{
	size_t lo = 0, hi = c->ndecls;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int r = cmp_fp(&c->decls[mid].tsid, tsid);

		if (r == 0)
			return true;
		if (r < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

static void
gc_add(struct tend_comp *c, const uint8_t *cid, const void *path, size_t len)
{
	if (c->ngc == c->cgc) {
		c->cgc = c->cgc ? c->cgc * 2 : 4;
		c->gc = tend_xrealloc(c->gc, c->cgc * sizeof *c->gc);
	}
	memcpy(c->gc[c->ngc].cid.b, cid, 16);
	c->gc[c->ngc].path = tend_arena_memdup(&c->arena, path, len);
	c->gc[c->ngc].len = len;
	c->ngc++;
}

/* Diff the stored child-existence rows with the children mounted now;
 * every child that disappeared gets a tombstone (§2.5). "Mounted now" is
 * the pass's set of mounted components: a child's id hashes its whole
 * path, so an id under this parent that was mounted is this parent's. */
static int
existence_diff(struct tend_txn *txn, struct tend_comp *c, bool none)
{
	struct tend_iter it;
	struct tend_bytes k, v;
	struct child_ref *gone = NULL;
	size_t ngone = 0, cgone = 0;
	int rc, more;

	if ((rc = tend_store_iter_init(&it, txn, TEND_T_CEX, c->cid.b, 16)))
		return rc;
	while ((more = tend_store_iter_next(&it, &k, &v)) == 1) {
		struct tend_fp cid;

		if (k.len != 32)
			continue;
		memcpy(cid.b, k.data + 16, 16);
		if (!none && tend_cidset_has(&c->pass->built, &cid))
			continue;
		if (ngone == cgone) {
			cgone = cgone ? cgone * 2 : 8;
			gone = tend_xrealloc(gone, cgone * sizeof *gone);
		}
		gone[ngone].cid = cid;
		gone[ngone].path = v.len ? tend_arena_memdup(&c->arena, v.data,
		    v.len) : NULL;
		gone[ngone].len = v.len;
		ngone++;
	}
	tend_store_iter_finish(&it);
	rc = more < 0 ? more : 0;
	/* a row of format 3 leaves the path to the child's header (read
	 * once the cursor is done) */
	for (size_t i = 0; i < ngone && rc == 0;) {
		struct tend_bytes hv;
		struct hdr_row h;

		if (gone[i].path) {
			i++;
			continue;
		}
		rc = tend_store_get(txn, TEND_T_COMP, gone[i].cid.b, 16, &hv);
		if (rc == 0 && tend_hdr_parse(&h, hv.data, hv.len) == 0) {
			gone[i].path = tend_arena_memdup(&c->arena, h.path,
			    h.pathlen);
			gone[i].len = h.pathlen;
			i++;
		} else if (rc == 0 || rc == TEND_ENOTFOUND) {
			/* (never: its header came with its row) the row
			 * stays, nothing to delete is known */
			gone[i] = gone[--ngone];
			rc = 0;
		}
	}
	for (size_t i = 0; i < ngone && rc == 0; i++) {
		uint8_t key[32];

		memcpy(key, c->cid.b, 16);
		memcpy(key + 16, gone[i].cid.b, 16);
		if ((rc = tend_store_del(txn, TEND_T_CEX, key, 32)) == 0)
			rc = tend_store_put(txn, TEND_T_TOMB, key, 32,
			    gone[i].path, gone[i].len);
	}
	free(gone);
	return rc;
}

static int
collect_tombs(struct tend_txn *txn, struct tend_comp *c)
{
	struct tend_iter it;
	struct tend_bytes k, v;
	int rc, more;

	c->ngc = 0;
	if ((rc = tend_store_iter_init(&it, txn, TEND_T_TOMB, c->cid.b, 16)))
		return rc;
	while ((more = tend_store_iter_next(&it, &k, &v)) == 1)
		if (k.len == 32)
			gc_add(c, k.data + 16, v.data, v.len);
	tend_store_iter_finish(&it);
	return more < 0 ? more : 0;
}

/* c's memo, its header as it is (format 3: in the header's row; a
 * component without one, never committed, gets no memo) */
static int
put_memo(struct tend_txn *txn, struct tend_comp *c)
{
	struct tend_buf b = TEND_BUF_INIT, memo = TEND_BUF_INIT;
	struct tend_bytes v;
	struct hdr_row h;
	int rc;

	if ((rc = memo_encode(txn, &memo, c))) {
		tend_buf_release(&memo);
		return rc;
	}
	if (!c->eng->compact_rows) {
		rc = tend_store_put(txn, TEND_T_MEMO, c->cid.b, 16, memo.ptr,
		    memo.len);
		tend_buf_release(&memo);
		return rc;
	}
	rc = tend_store_get(txn, TEND_T_COMP, c->cid.b, 16, &v);
	if (rc == 0 && tend_hdr_parse(&h, v.data, v.len) == 0) {
		h.memo = (const uint8_t *)memo.ptr;
		h.memolen = memo.len;
		tend_hdr_encode(&b, &h, true);
		rc = tend_store_put(txn, TEND_T_COMP, c->cid.b, 16, b.ptr,
		    b.len);
	} else if (rc == TEND_ENOTFOUND || rc == 0) {
		rc = 0;
	}
	tend_buf_release(&b);
	tend_buf_release(&memo);
	return rc;
}

/* Forget what is left of a deleted component: items whose delete
 * reconciled to "nothing to do", owner rows still naming it. */
static int
forget_component(struct tend_txn *txn, struct tend_comp *c)
{
	struct tend_iter it;
	struct tend_bytes k, v;
	struct tend_fp *tsids = NULL;
	size_t n = 0, cap = 0;
	int rc, more;

	if ((rc = tend_store_iter_init(&it, txn, TEND_T_ITEM, c->cid.b, 16)))
		return rc;
	while ((more = tend_store_iter_next(&it, &k, &v)) == 1) {
		if (k.len != 40)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 8;
			tsids = tend_xrealloc(tsids, cap * sizeof *tsids);
		}
		memcpy(tsids[n++].b, k.data + 16, 16);
	}
	tend_store_iter_finish(&it);
	rc = more < 0 ? more : 0;
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = del_owner_if_mine(txn, &tsids[i], &c->cid);
	free(tsids);
	const char *app;
	size_t alen;
	bool counted = comp_app(c, &app, &alen);
	if (rc == 0)
		rc = items_del_prefix(txn, c->cid.b, 16, counted ? app : NULL,
		    alen, &c->arena);
	if (rc == 0 && !c->eng->compact_rows)
		rc = tend_store_del(txn, TEND_T_MEMO, c->cid.b, 16);
	if (rc == 0 && counted && !c->has_parent) {
		/* the app's root goes: it is no longer tracked */
		struct tend_bytes hdr;

		rc = tend_store_get(txn, TEND_T_COMP, c->cid.b, 16, &hdr);
		if (rc == 0) {
			struct tend_counts d = {{0}};

			d.n[TEND_COUNT_ROOTS] = -1;
			count_add(txn, app, alen, &d);
		} else if (rc == TEND_ENOTFOUND)
			rc = 0;
	}
	if (rc == 0)
		rc = tend_store_del(txn, TEND_T_COMP, c->cid.b, 16);
	return rc;
}

/* R4, R18: a component whose subtree did not fully succeed (a body or
 * an action failed, items still deferred) is memoised nowhere up its
 * chain, or the same input would skip it next time. Ancestors are alive
 * here: a parent is enqueued after its children, so it commits in the
 * same batch or a later one. */
void
tend_comp_withhold_memos(struct tend_comp *c)
{
	for (; c; c = c->parent)
		c->child_failed = true;
}

int
tend_commit_comp(struct tend_txn *txn, struct tend_comp *c)
{
	bool any_action = false;
	int rc;

	c->any_failed = false;
	c->done = false;
	c->ngc = 0;
	if (c->in_preflight) {
		/* re-mounted since it was tombstoned: the tombstone goes and
		 * the existence row comes back */
		uint8_t k[32];

		memcpy(k, c->parent_cid.b, 16);
		memcpy(k + 16, c->cid.b, 16);
		if ((rc = tend_store_del(txn, TEND_T_TOMB, k, 32)))
			return rc;
		return tend_store_put(txn, TEND_T_CEX, k, 32, c->path.ptr,
		    c->path.len);
	}
	if (c->failed)
		return 0;
	for (size_t i = 0; i < c->nplans; i++) {
		struct plan *p = &c->plans[i];
		uint8_t k[40];

		item_key(k, &c->cid, &p->tsid, p->pid);
		switch (p->kind) {
		case PLAN_ACTION:
			if (p->status != 0) {
				c->any_failed = true;
				any_action |= !p->refresh;
				break;
			}
			if (p->refresh)
				break; /* the stored item is already [r] */
			any_action = true;
			/* R16 retention: the state of this version survives,
			 * unless it is a delete */
			struct state *last = &p->item.states[p->item.nstates - 1];
			assert(last->version == c->curr);
			if (last->deleted) {
				if ((rc = item_del(txn, c, k)))
					return rc;
				if (!p->declared &&
				    (rc = del_owner_if_mine(txn, &p->tsid,
					 &c->cid)))
					return rc;
				break;
			}
			p->item.states = last;
			p->item.nstates = 1;
			if (p->prov && !p->prov->root)
				p->item.schema = p->prov->gen_schema;
			if ((rc = put_item(txn, c, p)))
				return rc;
			break;
		case PLAN_DROP:
			if ((rc = item_del(txn, c, k)))
				return rc;
			if (!p->declared && !declared_tsid(c, &p->tsid) &&
			    (rc = del_owner_if_mine(txn, &p->tsid, &c->cid)))
				return rc;
			break;
		case PLAN_SCHEMA:
			p->item.schema = p->prov->gen_schema;
			if ((rc = put_item(txn, c, p)))
				return rc;
			break;
		case PLAN_MOVE:
		case PLAN_CANCELLED:
			break;
		}
	}
	if (c->mode == MODE_DELETE) {
		if (c->any_failed) {
			/* the parent that stopped declaring us committed
			 * before our delete ran: its memo must not hide the
			 * tombstone that waits for the retry */
			if (c->has_parent &&
			    (rc = memo_drop(txn, c->eng, &c->parent_cid)))
				return rc;
			if (any_action)
				rc = header_put(txn, c, c->curr, false);
			else
				rc = 0;
			return rc;
		}
		/* every child becomes a tombstone and goes first: a child may
		 * hold the container our deferred items live in. The
		 * component is gone once its children are (it is visited
		 * again when they are) and no item is left. */
		if ((rc = existence_diff(txn, c, true)))
			return rc;
		if ((rc = collect_tombs(txn, c)))
			return rc;
		if (c->ngc || c->ndeferred) {
			if (any_action || c->token_was_set)
				rc = header_put(txn, c, c->curr, false);
			return rc;
		}
		if ((rc = forget_component(txn, c)))
			return rc;
		if (c->has_parent) {
			uint8_t k[32];

			memcpy(k, c->parent_cid.b, 16);
			memcpy(k + 16, c->cid.b, 16);
			if ((rc = tend_store_del(txn, TEND_T_TOMB, k, 32)) ||
			    (rc = tend_store_del(txn, TEND_T_CEX, k, 32)))
				return rc;
		}
		c->done = true;
		return 0;
	}
	if (c->any_failed) {
		if (!c->retry)
			tend_comp_withhold_memos(c->parent);
		if (any_action)
			return header_put(txn, c, c->curr, false);
		return 0;
	}
	if (c->nchildren || (c->stored_flags & HDR_HAS_CHILDREN)) {
		if ((rc = existence_diff(txn, c, false)))
			return rc;
		if ((rc = collect_tombs(txn, c)))
			return rc;
	}
	c->hdr_flags = (uint8_t)((c->hdr_flags & ~HDR_HAS_CHILDREN) |
	    (c->nchildren || c->ngc ? HDR_HAS_CHILDREN : 0));
	bool memo = c->memoize && !c->child_failed && c->ndeferred == 0 &&
	    !c->failed_before;
	bool hdr = any_action || c->hdr_flags != c->stored_flags ||
	    (c->token_was_set && !any_action);
	/* one put for both when they share the row (format 3) */
	if (hdr && (rc = comp_put(txn, c, c->curr, false,
			memo && c->eng->compact_rows ? MEMO_SET : MEMO_KEEP)))
		return rc;
	if (memo && !(hdr && c->eng->compact_rows) &&
	    (rc = put_memo(txn, c)))
		return rc;
	/* items left deferred: not memoised up the chain either (a retry
	 * at the pass's end has outlived its parent, which saw this) */
	if (c->ndeferred && !c->retry)
		tend_comp_withhold_memos(c->parent);
	c->done = true;
	return 0;
}
