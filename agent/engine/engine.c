/*
 * engine.c - passes, components, batches and sinks.
 *
 * A pass runs the app's root component. Components run synchronously on
 * this thread: a mount runs the child at once, so children always finish
 * (and are queued for submission) before their parent, as CocoIndex
 * requires (R21). Finished components are not submitted one by one:
 * they are queued, and a batch of them is flushed together
 * (PERF-NOTES "group commits"):
 *
 *   T1  one write txn: every component's pre-commit (pending records),
 *       durable before any sink runs;
 *       sinks: actions of the whole batch grouped by sink identity, one
 *       apply call per sink (the git connector's one commit per pass);
 *   T2  one write txn: every component's commit;
 *       fulfil: resolve container child providers with the handlers the
 *       sinks returned; GC: tombstoned components are deleted in the
 *       next batch.
 *
 * A batch is flushed when it is full, when a use_mount needs its child's
 * providers resolved before returning, and at the end of the pass.
 * Crash safety holds per component: its pending records are durable
 * before its sink runs, and are pruned only after.
 */
#include "engine_int.h"
#include "check.h"

#include <assert.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tend/status.h"

#define DEFAULT_BATCH 4096

/* ---- small helpers ---- */

void
tend_handler_init(struct tend_handler *h, const struct tend_handler_ops *ops)
{
	assert(ops->abi == TEND_TARGET_ABI);
	assert(ops->reconcile && ops->destroy);
	h->ops = ops;
}

void *
tend_context_get(struct tend_context *ctx, const char *name)
{
	for (size_t i = 0; ctx && i < ctx->eng->nres; i++)
		if (strcmp(ctx->eng->res[i].name, name) == 0)
			return ctx->eng->res[i].ptr;
	return NULL;
}

bool
tend_reconcile_settled(const struct tend_reconcile_in *in, const void *rec,
    size_t len)
{
	if (in->prev_may_be_missing)
		return false;
	for (size_t i = 0; i < in->nprev; i++)
		if (in->prev[i].len != len ||
		    (len && memcmp(in->prev[i].data, rec, len) != 0))
			return false;
	return true;
}

void
tend_apply_fail(struct tend_apply_result *r, int status, const char *fmt, ...)
{
	struct tend_buf b = TEND_BUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	tend_buf_vprintf(&b, fmt, ap);
	va_end(ap);
	free(r->error);
	r->error = tend_buf_detach(&b, NULL);
	r->status = status ? status : TEND_ERROR;
}

static void
emit(struct tend_engine *eng, struct tend_event *ev)
{
	for (size_t i = 0; i < eng->nsubs; i++)
		if (eng->subs[i].mask & TEND_EV_MASK(ev->kind))
			eng->subs[i].fn(ev, eng->subs[i].arg);
}

static bool
wants(struct tend_engine *eng, enum tend_event_kind kind)
{
	for (size_t i = 0; i < eng->nsubs; i++)
		if (eng->subs[i].mask & TEND_EV_MASK(kind))
			return true;
	return false;
}

/* ---- cid set ---- */

/* Component ids are uniformly random: compare them as two words. */
static inline bool
fp_eq(const struct tend_fp *a, const struct tend_fp *b)
{
	uint64_t x[2], y[2];

	memcpy(x, a->b, 16);
	memcpy(y, b->b, 16);
	return x[0] == y[0] && x[1] == y[1];
}

static inline bool
fp_zero(const struct tend_fp *a)
{
	uint64_t x[2];

	memcpy(x, a->b, 16);
	return (x[0] | x[1]) == 0;
}

static void
cidset_add(struct cidset *s, const struct tend_fp *fp)
{
	if ((s->n + 1) * 2 > s->size) {
		struct cidset n = {0};

		n.size = s->size ? s->size * 2 : 256;
		n.tab = tend_xcalloc(n.size, sizeof *n.tab);
		for (size_t i = 0; i < s->size; i++)
			if (!fp_zero(&s->tab[i]))
				cidset_add(&n, &s->tab[i]);
		free(s->tab);
		*s = n;
	}
	uint64_t h;
	memcpy(&h, fp->b, 8);
	for (size_t i = (size_t)h & (s->size - 1);; i = (i + 1) & (s->size - 1)) {
		if (fp_eq(&s->tab[i], fp))
			return;
		if (fp_zero(&s->tab[i])) {
			s->tab[i] = *fp;
			s->n++;
			return;
		}
	}
}

bool
tend_cidset_has(const struct cidset *s, const struct tend_fp *fp)
{
	uint64_t h;

	if (!s->size)
		return false;
	memcpy(&h, fp->b, 8);
	for (size_t i = (size_t)h & (s->size - 1);; i = (i + 1) & (s->size - 1)) {
		if (fp_eq(&s->tab[i], fp))
			return true;
		if (fp_zero(&s->tab[i]))
			return false;
	}
}

/* ---- engine lifecycle ---- */

static void
random_token(uint8_t token[16])
{
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, token, 16) : -1;

	if (fd >= 0)
		close(fd);
	if (n != 16) {
		/* no urandom: pid and address still differ per process */
		struct tend_hasher h;
		struct tend_fp fp;

		tend_hasher_init(&h);
		tend_hasher_int(&h, (int64_t)getpid());
		tend_hasher_int(&h, (int64_t)(intptr_t)&h);
		fp = tend_hasher_final(&h);
		memcpy(token, fp.b, 16);
	}
}

int
tend_engine_open(struct tend_engine **out, const char *state_dir,
    const struct tend_engine_opts *opts)
{
	struct tend_engine *eng = tend_xcalloc(1, sizeof *eng);
	struct tend_buf dir = TEND_BUF_INIT;
	int rc;

	*out = NULL;
	if (mkdir(state_dir, 0700) != 0 && access(state_dir, W_OK) != 0) {
		tend_buf_release(&dir);
		free(eng);
		return tend_error_set(TEND_ERROR,
		    "cannot create state directory %s", state_dir);
	}
	tend_buf_printf(&dir, "%s/store", state_dir);
	rc = tend_store_open(&eng->st, dir.ptr, opts ? opts->map_size : 0);
	tend_buf_release(&dir);
	if (rc) {
		free(eng);
		return rc;
	}
	tend_registry_init(&eng->reg);
	eng->ctx.eng = eng;
	eng->batch = opts && opts->batch ? opts->batch : DEFAULT_BATCH;
	eng->state_dir = tend_xstrdup(state_dir);
	random_token(eng->token);
	*out = eng;
	return 0;
}

void
tend_engine_close(struct tend_engine *eng)
{
	if (!eng)
		return;
	tend_registry_finish(&eng->reg);
	tend_registry_reap(eng);
	tend_store_close(eng->st);
	for (size_t i = 0; i < eng->nres; i++)
		free(eng->res[i].name);
	free(eng->res);
	free(eng->subs);
	free(eng->state_dir);
	free(eng);
}

static struct tend_fp
root_id(const char *name)
{
	struct tend_key sym = tend_key_symbol(name);

	return tend_fp_key(&sym);
}

int
tend_engine_register_root(struct tend_engine *eng, const char *name,
    struct tend_handler *handler, struct tend_provider **out)
{
	struct tend_fp id = root_id(name);
	struct tend_key sym = tend_key_symbol(name);
	struct tend_buf n = TEND_BUF_INIT;

	if (tend_registry_get(&eng->reg, &id)) {
		handler->ops->destroy(handler);
		return tend_error_set(TEND_EEXISTS,
		    "a root provider named %s is registered already", name);
	}
	struct tend_provider *p = tend_xcalloc(1, sizeof *p);
	p->id = id;
	p->eng = eng;
	p->root = true;
	p->handler = handler;
	p->name_key = (struct tend_buf)TEND_BUF_INIT;
	tend_key_encode(&p->name_key, &sym);
	tend_buf_printf(&n, "@%s", name);
	p->name = tend_buf_detach(&n, NULL);
	tend_registry_put(&eng->reg, p);
	if (out)
		*out = p;
	return 0;
}

struct tend_provider *
tend_engine_root(struct tend_engine *eng, const char *name)
{
	struct tend_fp id = root_id(name);
	struct tend_provider *p = tend_registry_get(&eng->reg, &id);

	return p && p->root ? p : NULL;
}

void
tend_engine_set_resource(struct tend_engine *eng, const char *name,
    void *resource)
{
	for (size_t i = 0; i < eng->nres; i++) {
		if (strcmp(eng->res[i].name, name) == 0) {
			eng->res[i].ptr = resource;
			return;
		}
	}
	eng->res = tend_xrealloc(eng->res, (eng->nres + 1) * sizeof *eng->res);
	eng->res[eng->nres].name = tend_xstrdup(name);
	eng->res[eng->nres].ptr = resource;
	eng->nres++;
}

void
tend_engine_subscribe(struct tend_engine *eng, unsigned mask, tend_event_fn *fn,
    void *arg)
{
	eng->subs = tend_xrealloc(eng->subs,
	    (eng->nsubs + 1) * sizeof *eng->subs);
	eng->subs[eng->nsubs].mask = mask;
	eng->subs[eng->nsubs].fn = fn;
	eng->subs[eng->nsubs].arg = arg;
	eng->nsubs++;
}

/* ---- visibility and the batch's plan index ---- */

bool
tend_provider_visible(const struct pass *pass, const struct tend_provider *p)
{
	/* a child provider counts only once its container was applied in
	 * this pass; an incremental pass (one component, its parent not
	 * re-run) trusts the containers of earlier passes */
	return p->handler &&
	    (p->root || p->seen_pass == pass->id || pass->incremental);
}

static size_t
ref_slot(const struct tend_fp *fp, size_t size)
{
	uint64_t h;

	memcpy(&h, fp->b + 8, 8);
	return (size_t)h & (size - 1);
}

void
tend_pass_ref_plan(struct pass *pass, struct tend_comp *c, size_t i)
{
	if ((pass->nrefs + 1) * 2 > pass->crefs) {
		struct planref *old = pass->refs;
		size_t osize = pass->crefs;

		pass->crefs = osize ? osize * 2 : 256;
		pass->refs = tend_xcalloc(pass->crefs, sizeof *pass->refs);
		pass->nrefs = 0;
		for (size_t k = 0; k < osize; k++)
			if (old[k].comp)
				tend_pass_ref_plan(pass, old[k].comp,
				    old[k].index);
		free(old);
	}
	const struct tend_fp *tsid = &c->plans[i].tsid;
	for (size_t k = ref_slot(tsid, pass->crefs);;
	     k = (k + 1) & (pass->crefs - 1)) {
		if (!pass->refs[k].comp) {
			pass->refs[k] = (struct planref){*tsid, c, i};
			pass->nrefs++;
			return;
		}
	}
}

struct plan *
tend_pass_find_plan(struct pass *pass, const struct tend_fp *tsid,
    const struct tend_fp *owner)
{
	if (!pass->crefs)
		return NULL;
	for (size_t k = ref_slot(tsid, pass->crefs); pass->refs[k].comp;
	     k = (k + 1) & (pass->crefs - 1)) {
		struct planref *r = &pass->refs[k];

		if (tend_fp_equal(&r->tsid, tsid) &&
		    tend_fp_equal(&r->comp->cid, owner))
			return &r->comp->plans[r->index];
	}
	return NULL;
}

static void
clear_refs(struct pass *pass)
{
	if (pass->crefs)
		memset(pass->refs, 0, pass->crefs * sizeof *pass->refs);
	pass->nrefs = 0;
}

static struct tend_fp ts_id(const struct tend_provider *p,
    const struct tend_key *key);
static struct tend_comp *delete_comp(struct tend_engine *eng,
    struct pass *pass, const struct tend_fp *parent_cid, bool has_parent,
    const uint8_t *path, size_t len);
static void enqueue(struct pass *pass, struct tend_comp *c);

/* ---- preview undo log ---- */

void
tend_pass_save_provider(struct pass *pass, struct tend_provider *p)
{
	if (!pass->preview || p->undo_pass == pass->id)
		return;
	p->undo_pass = pass->id;
	if (pass->nundo == pass->cundo) {
		pass->cundo = pass->cundo ? pass->cundo * 2 : 8;
		pass->undo = tend_xrealloc(pass->undo,
		    pass->cundo * sizeof *pass->undo);
	}
	pass->undo[pass->nundo++] = (struct undo){
		.prov = p,
		.handler = p->handler,
		.gen_id = p->gen_id,
		.gen_schema = p->gen_schema,
	};
	/* the saved handler must survive tend_provider_resolve() */
	p->handler = NULL;
}

static void
undo_preview(struct tend_engine *eng, struct pass *pass)
{
	for (size_t i = pass->nundo; i-- > 0;) {
		struct undo *u = &pass->undo[i];
		struct tend_provider *p = u->prov;

		if (p->preview_new) {
			tend_provider_unregister(eng, p);
			continue;
		}
		tend_provider_resolve(p, u->handler);
		p->gen_id = u->gen_id;
		p->gen_schema = u->gen_schema;
		for (size_t j = 0; j < p->natt; j++) {
			p->att[j].prov->gen_id = u->gen_id;
			p->att[j].prov->gen_schema = u->gen_schema;
		}
	}
	free(pass->undo);
	pass->undo = NULL;
	pass->nundo = pass->cundo = 0;
}

/* ---- components ---- */

static void
display_append(struct tend_buf *b, const struct tend_key *path, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		tend_buf_putc(b, '/');
		if (path[i].kind == TEND_KEY_STR)
			tend_buf_put(b, path[i].u.s.ptr, path[i].u.s.len);
		else
			tend_key_format(b, &path[i]);
	}
}

static struct tend_comp *
comp_new(struct tend_engine *eng, struct pass *pass, struct tend_comp *parent,
    const uint8_t *ppath, size_t pplen, const char *pdisplay,
    const struct tend_key *path, size_t npath)
{
	struct tend_comp *c = tend_xcalloc(1, sizeof *c);
	struct tend_buf disp = TEND_BUF_INIT;

	c->eng = eng;
	c->pass = pass;
	c->parent = parent;
	c->path = (struct tend_buf)TEND_BUF_INIT;
	tend_buf_put(&c->path, ppath, pplen);
	for (size_t i = 0; i < npath; i++)
		tend_key_encode(&c->path, &path[i]);
	c->cid = tend_fp_bytes(c->path.ptr, c->path.len);
	tend_buf_puts(&disp, pdisplay);
	display_append(&disp, path, npath);
	c->display = tend_buf_detach(&disp, NULL);
	c->app = pass->app;
	if (parent) {
		c->has_parent = true;
		c->parent_cid = parent->cid;
		c->processor = parent->processor;
	}
	return c;
}

static void
comp_free(struct tend_comp *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nplans; i++) {
		free(c->plans[i].error);
		if (c->plans[i].child)
			c->plans[i].child->ops->destroy(c->plans[i].child);
	}
	free(c->plans);
	free(c->decls);
	free(c->children);
	free(c->deps);
	free(c->gc);
	free(c->error);
	free(c->display);
	tend_buf_release(&c->path);
	tend_arena_finish(&c->arena);
	free(c);
}

struct tend_engine *
tend_comp_engine(struct tend_comp *c)
{
	return c->eng;
}

const char *
tend_comp_path(struct tend_comp *c)
{
	return c->display;
}

bool
tend_comp_full(struct tend_comp *c)
{
	return c->pass->full;
}

struct tend_provider *
tend_engine_child_provider(struct tend_engine *eng, struct tend_provider *parent,
    const struct tend_key *key)
{
	/* a parent from tend_engine_root() of a name not registered */
	if (!parent || !key)
		return NULL;
	struct tend_fp id = ts_id(parent, key);
	struct tend_provider *p = tend_registry_get(&eng->reg, &id);

	return p && p->handler ? p : NULL;
}

const char *
tend_provider_name(const struct tend_provider *p)
{
	return p->name;
}

bool
tend_provider_ready(const struct tend_provider *p)
{
	return p && p->handler != NULL;
}

void
tend_provider_generation(const struct tend_provider *p, uint64_t *id,
    uint64_t *schema)
{
	*id = p->root ? 0 : p->gen_id;
	*schema = p->root ? 0 : p->gen_schema;
}

bool
tend_engine_memo_matches(struct tend_engine *eng, const char *app,
    const struct tend_key *path, size_t npath, const struct tend_fp *input,
    const struct tend_fp *logic)
{
	struct tend_buf enc = TEND_BUF_INIT;
	struct tend_key root = tend_key_str(app);
	struct tend_txn *txn;
	struct tend_bytes v;
	bool ok = false;

	tend_key_encode(&enc, &root);
	for (size_t i = 0; i < npath; i++)
		tend_key_encode(&enc, &path[i]);
	struct tend_fp cid = tend_fp_bytes(enc.ptr, enc.len);
	tend_buf_release(&enc);
	if (tend_store_read_begin(eng->st, &txn) != 0)
		return false;
	if (tend_store_get(txn, TEND_T_MEMO, cid.b, 16, &v) == 0 &&
	    v.len >= 33 && v.data[0] == 1 &&
	    memcmp(v.data + 1, input->b, 16) == 0 &&
	    memcmp(v.data + 17, logic->b, 16) == 0)
		ok = true;
	tend_store_read_end(txn);
	return ok;
}

static struct tend_fp
ts_id(const struct tend_provider *p, const struct tend_key *key)
{
	struct tend_fp kfp = tend_fp_key(key);

	return tend_fp_combine(&p->id, &kfp);
}

static void
add_dep(struct tend_comp *c, struct tend_provider *p)
{
	if (p->root)
		return;
	for (size_t i = 0; i < c->ndeps; i++)
		if (tend_fp_equal(&c->deps[i].id, &p->id))
			return;
	if (c->ndeps == c->cdeps) {
		c->cdeps = c->cdeps ? c->cdeps * 2 : 4;
		c->deps = tend_xrealloc(c->deps, c->cdeps * sizeof *c->deps);
	}
	c->deps[c->ndeps++] = (struct dep){p->id, p->gen_id, p->gen_schema};
}

/* The i-th provider dependency of a memo row (version 1: input fp, logic
 * fp, count, then (id, gen_id, gen_schema) each) */
static uint32_t
memo_ndeps(const uint8_t *memo)
{
	return (uint32_t)memo[33] | (uint32_t)memo[34] << 8 |
	    (uint32_t)memo[35] << 16 | (uint32_t)memo[36] << 24;
}

static struct dep
memo_dep(const uint8_t *memo, uint32_t i)
{
	const uint8_t *d = memo + 37 + (size_t)i * 32;
	struct dep dep = {0};

	memcpy(dep.id.b, d, 16);
	for (int k = 0; k < 8; k++) {
		dep.gen_id |= (uint64_t)d[16 + k] << (8 * k);
		dep.gen_schema |= (uint64_t)d[24 + k] << (8 * k);
	}
	return dep;
}

/* R25: the provider generations a component's subtree declared into are
 * memo dependencies of every memoised ancestor too, through its memo
 * hits as well: a lossy or destructive change of a container then
 * re-runs the parent whose child declares into it. */
static void
deps_up(struct tend_comp *parent, const struct dep *deps, size_t n)
{
	/* only a chain with a memo to write collects them (the root of a
	 * big app is not memoised, and would otherwise gather them all) */
	if (!parent || !parent->memo_chain)
		return;
	for (size_t i = 0; i < n; i++) {
		size_t j = 0;

		while (j < parent->ndeps &&
		    !tend_fp_equal(&parent->deps[j].id, &deps[i].id))
			j++;
		if (j < parent->ndeps)
			continue; /* the first generation seen stays */
		if (parent->ndeps == parent->cdeps) {
			parent->cdeps = parent->cdeps ? parent->cdeps * 2 : 4;
			parent->deps = tend_xrealloc(parent->deps,
			    parent->cdeps * sizeof *parent->deps);
		}
		parent->deps[parent->ndeps++] = deps[i];
	}
}

/* the dependencies stored in a valid memo (memo_valid checked them) */
static void
memo_deps_up(struct tend_comp *parent, const struct tend_bytes *v)
{
	const uint8_t *p = v->data;
	uint32_t n = memo_ndeps(p);

	for (uint32_t i = 0; i < n; i++) {
		struct dep dep = memo_dep(p, i);

		deps_up(parent, &dep, 1);
	}
}

static int
declare(struct tend_comp *c, struct tend_provider *p,
    const struct tend_key *key, const void *value, size_t len,
    struct tend_provider **child_out)
{
	struct tend_buf enc = TEND_BUF_INIT;

	if (c->mode != MODE_BUILD)
		return tend_error_set(TEND_EINVALID,
		    "declare: component %s is being deleted", c->display);
	if (!p->handler)
		return tend_error_set(TEND_EINVALID,
		    "declare %s: provider %s is not ready (its container has "
		    "not been applied; declare it with tend_mount_target)",
		    c->display, p->name);
	if (c->ndecls == c->cdecls) {
		c->cdecls = c->cdecls ? c->cdecls * 2 : 8;
		c->decls = tend_xrealloc(c->decls, c->cdecls * sizeof *c->decls);
	}
	struct decl *d = &c->decls[c->ndecls];
	memset(d, 0, sizeof *d);
	tend_key_encode(&enc, key);
	d->kenc = tend_arena_memdup(&c->arena, enc.ptr, enc.len);
	d->kenc_len = enc.len;
	tend_buf_release(&enc);
	/* the key handed to reconcile must outlive the caller's */
	if (tend_key_decode(&d->key, d->kenc, d->kenc_len, NULL, &c->arena))
		return TEND_EINVALID;
	d->tsid = ts_id(p, key);
	d->prov = p;
	d->value = tend_arena_memdup(&c->arena, value, len);
	d->vlen = len;
	c->ndecls++;
	c->decls_sorted = false;
	add_dep(c, p);
	if (child_out) {
		struct tend_provider *cp = tend_registry_get(&c->eng->reg,
		    &d->tsid);

		if (!cp) {
			struct tend_buf name = TEND_BUF_INIT;

			cp = tend_xcalloc(1, sizeof *cp);
			cp->id = d->tsid;
			cp->eng = c->eng;
			cp->name_key = (struct tend_buf)TEND_BUF_INIT;
			cp->name_parent = p->id;
			tend_buf_puts(&name, p->name);
			tend_buf_putc(&name, '/');
			tend_key_format(&name, key);
			cp->name = tend_buf_detach(&name, NULL);
			tend_registry_put(&c->eng->reg, cp);
			if (c->pass->preview) {
				tend_pass_save_provider(c->pass, cp);
				cp->preview_new = true;
			}
		}
		d->child = cp;
		*child_out = cp;
	}
	return 0;
}

int
tend_declare(struct tend_comp *c, struct tend_provider *p,
    const struct tend_key *key, const void *value, size_t len)
{
	return declare(c, p, key, value, len, NULL);
}

int
tend_declare_container(struct tend_comp *c, struct tend_provider *p,
    const struct tend_key *key, const void *value, size_t len,
    struct tend_provider **child_out)
{
	struct tend_provider *tmp;

	return declare(c, p, key, value, len, child_out ? child_out : &tmp);
}

int
tend_provider_attachment(struct tend_provider *p, const char *type,
    struct tend_provider **out)
{
	*out = NULL;
	if (!p->handler)
		return tend_error_set(TEND_EINVALID,
		    "attachment %s: provider %s is not resolved", type, p->name);
	for (size_t i = 0; i < p->natt; i++) {
		if (strcmp(p->att[i].type, type) == 0 && p->att[i].prov->handler) {
			*out = p->att[i].prov;
			return 0;
		}
	}
	return tend_error_set(TEND_ENOTFOUND,
	    "%s does not support attachment type %s", p->name, type);
}

/* ---- batches ---- */

static int
cmp_decl(const void *a, const void *b)
{
	return cmp_fp(&((const struct decl *)a)->tsid,
	    &((const struct decl *)b)->tsid);
}

static void
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
    const char *provider, const struct tend_key *key)
{
	struct tend_buf k = TEND_BUF_INIT, m = TEND_BUF_INIT;

	struct tend_buf a = TEND_BUF_INIT, b = TEND_BUF_INIT;

	/* one wording for both sides: the two components say the same */
	comp_name(c->eng, c->display, &a);
	comp_name(c->eng, other, &b);
	if (strcmp(a.ptr, b.ptr) > 0) {
		struct tend_buf t = a;
		a = b;
		b = t;
	}
	tend_key_format(&k, key);
	tend_buf_puts(&m, "conflict: ");
	tend_display_path(&m, provider, k.ptr);
	tend_buf_printf(&m, " is declared by %s and by %s: neither is "
			    "applied, what is there stays", a.ptr, b.ptr);
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

static bool
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
    const char *owner_path, const struct tend_fp *tsid)
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
	    eng->comp_hooks.live(owner_path, eng->comp_arg);
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
conflict_fail(struct tend_comp *c, const char *other, const struct decl *d)
{
	if (c->conflict)
		return;
	tend_conflict_message(c, other, d->prov->name, &d->key);
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
			    g[0].tsid);
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (i == mine)
			continue;
		const char *other = mine < n ? b->comps[g[mine].comp]->display
		    : live ? who.ptr
			   : b->comps[g[i ? 0 : 1].comp]->display;
		conflict_fail(b->comps[g[i].comp], other, g[i].decl);
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
	cidset_add(&pass->deferred_ids, &c->cid);
}

static struct tend_comp *
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
	c->cid = tend_fp_bytes(path, len);
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
			cidset_add(&pass->failed_deletes, &c->cid);
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
			pass->stats.planned++;
			if (wants(eng, TEND_EV_ACTION_PLANNED))
				plan_event(eng, c, p, TEND_EV_ACTION_PLANNED);
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
				cidset_add(&pass->blocked, &p->prov->id);
		}
	}
	if ((rc = tend_store_write_settle(eng->st, commit_body, b)))
		goto out;
	for (size_t i = 0; i < b->n; i++) {
		struct tend_comp *c = b->comps[i];

		fulfil(eng, pass, c);
		for (size_t j = 0; j < c->nplans; j++) {
			struct plan *p = &c->plans[j];

			if (p->kind != PLAN_ACTION || pass->preview)
				continue;
			if (p->status == 0)
				pass->stats.applied++;
			else
				pass->stats.failed++;
			enum tend_event_kind k = p->status == 0
				? TEND_EV_ACTION_APPLIED
				: TEND_EV_ACTION_FAILED;
			if (wants(eng, k))
				plan_event(eng, c, p, k);
		}
		count_outcome(pass, c);
		if (c->status_out)
			*c->status_out = c->failed || c->any_failed
				? TEND_ERROR : 0;
		if (c->mode == MODE_DELETE && !c->has_parent && c->done)
			pass->root_done = true;
		schedule_gc(eng, pass, c);
	}
	clear_refs(pass);
	rc = 0;
out:
	pass->batch = NULL;
	pass->nbatch = 0;
	return rc;
}

static int
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

static void
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
static int
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

/* ---- mounting ---- */

static bool
memo_valid(struct tend_engine *eng, const struct tend_bytes *v,
    const struct tend_mount_opts *o)
{
	const uint8_t *p = v->data;

	if (v->len < 37 || p[0] != 1 || memcmp(p + 1, o->input_fp.b, 16) ||
	    memcmp(p + 17, o->logic_fp.b, 16))
		return false;
	uint32_t n = memo_ndeps(p);
	if (v->len != 37 + (size_t)n * 32)
		return false;
	for (uint32_t i = 0; i < n; i++) {
		struct dep d = memo_dep(p, i);
		struct tend_provider *prov = tend_registry_get(&eng->reg, &d.id);
		/* R25: an absent provider is not a mismatch */
		if (prov && prov->handler &&
		    (prov->gen_id != d.gen_id || prov->gen_schema != d.gen_schema))
			return false;
	}
	return true;
}

static void
add_child(struct tend_comp *parent, struct tend_comp *c)
{
	if (parent->nchildren == parent->cchildren) {
		parent->cchildren = parent->cchildren ? parent->cchildren * 2
						      : 8;
		parent->children = tend_xrealloc(parent->children,
		    parent->cchildren * sizeof *parent->children);
	}
	parent->children[parent->nchildren].cid = c->cid;
	parent->children[parent->nchildren].path = NULL;
	parent->children[parent->nchildren].len = 0;
	parent->nchildren++;
}

static int
mount_common(struct tend_comp *parent, const struct tend_key *path,
    size_t npath, tend_comp_fn *fn, void *arg,
    const struct tend_mount_opts *opts, bool use)
{
	struct tend_engine *eng = parent->eng;
	struct pass *pass = parent->pass;
	struct tend_comp *c;
	int status = 0, rc;

	if (parent->mode != MODE_BUILD)
		return tend_error_set(TEND_EINVALID, "mount: not building");
	c = comp_new(eng, pass, parent, (const uint8_t *)parent->path.ptr,
	    parent->path.len, parent->display, path, npath);
	if (tend_cidset_has(&pass->built, &c->cid)) {
		rc = tend_error_set(TEND_EEXISTS,
		    "component %s mounted twice in one pass", c->display);
		comp_free(c);
		return rc;
	}
	add_child(parent, c);
	cidset_add(&pass->built, &c->cid);
	if (opts) {
		c->mopts = *opts;
		if (opts->processor)
			c->processor = opts->processor;
		c->memoize = opts->memo;
	}
	c->memo_chain = c->memoize || parent->memo_chain;
	/* only a use mount is committed before we return: the others are
	 * flushed later, when `status` is gone */
	c->status_out = use ? &status : NULL;
	if (c->memoize) {
		struct tend_txn *txn = NULL;
		struct tend_bytes v;

		if ((rc = tend_store_read_begin(eng->st, &txn))) {
			comp_free(c);
			return rc;
		}
		rc = tend_store_get(txn, TEND_T_MEMO, c->cid.b, 16, &v);
		if (rc == 0 && !pass->full && !c->mopts.fresh &&
		    memo_valid(eng, &v, &c->mopts)) {
			memo_deps_up(parent, &v);
			tend_store_read_end(txn);
			pass->stats.unchanged++;
			comp_free(c);
			return 0;
		}
		/* R18: a memo that cannot be reused goes before the body */
		c->memo_delete = rc == 0;
		tend_store_read_end(txn);
	}
	tend_error_clear();
	rc = fn(c, arg);
	deps_up(parent, c->deps, c->ndeps);
	if (rc) {
		c->failed = true;
		c->error = tend_xstrdup(tend_error_last()[0] ? tend_error_last()
							    : "failed");
		tend_comp_withhold_memos(parent);
		status = rc;
	}
	char *display = use ? tend_xstrdup(c->display) : NULL;

	enqueue(pass, c); /* c belongs to the queue now */
	if (use || pass->nqueue >= eng->batch) {
		int frc = flush(eng, pass);

		if (frc) {
			free(display);
			return frc;
		}
	}
	if (use && status && !rc)
		tend_error_set(TEND_ERROR, "component %s: an action failed",
		    display);
	free(display);
	return use ? status : 0;
}

void
tend_engine_set_settle_hook(struct tend_engine *eng, tend_settle_hook *fn,
    void *arg)
{
	eng->settle_hook = fn;
	eng->settle_arg = arg;
}

void
tend_engine_set_batch(struct tend_engine *eng, size_t n)
{
	eng->batch = n ? n : DEFAULT_BATCH;
}

int
tend_mount_gone(struct tend_comp *parent, const struct tend_key *path,
    size_t npath)
{
	struct tend_buf enc = TEND_BUF_INIT;
	struct tend_comp *d;
	struct tend_fp cid;

	if (parent->mode != MODE_BUILD)
		return tend_error_set(TEND_EINVALID, "mount_gone: not building");
	tend_buf_put(&enc, parent->path.ptr, parent->path.len);
	for (size_t i = 0; i < npath; i++)
		tend_key_encode(&enc, &path[i]);
	cid = tend_fp_bytes(enc.ptr, enc.len);
	if (!tend_cidset_has(&parent->pass->built, &cid) &&
	    !tend_cidset_has(&parent->pass->gone, &cid)) {
		d = delete_comp(parent->eng, parent->pass, &parent->cid, true,
		    (const uint8_t *)enc.ptr, enc.len);
		cidset_add(&parent->pass->gone, &cid);
		enqueue(parent->pass, d);
	}
	tend_buf_release(&enc);
	return 0;
}

int
tend_mount_keep(struct tend_comp *parent, const struct tend_key *path,
    size_t npath)
{
	/* the hot path of an unchanged tree: only the child's id, from a
	 * buffer kept between calls */
	static _Thread_local struct tend_buf enc = TEND_BUF_INIT;
	struct tend_comp probe;

	tend_buf_reset(&enc);
	tend_buf_put(&enc, parent->path.ptr, parent->path.len);
	for (size_t i = 0; i < npath; i++)
		tend_key_encode(&enc, &path[i]);
	probe.cid = tend_fp_bytes(enc.ptr, enc.len);
	if (!tend_cidset_has(&parent->pass->built, &probe.cid)) {
		add_child(parent, &probe);
		cidset_add(&parent->pass->built, &probe.cid);
		parent->pass->stats.unchanged++;
	}
	return 0;
}

int
tend_mount(struct tend_comp *c, const struct tend_key *path, size_t npath,
    tend_comp_fn *fn, void *arg, const struct tend_mount_opts *opts)
{
	return mount_common(c, path, npath, fn, arg, opts, false);
}

int
tend_use_mount(struct tend_comp *c, const struct tend_key *path, size_t npath,
    tend_comp_fn *fn, void *arg, const struct tend_mount_opts *opts)
{
	return mount_common(c, path, npath, fn, arg, opts, true);
}

struct mt_arg {
	struct tend_provider *prov;
	const struct tend_key *key;
	const void *value;
	size_t len;
	struct tend_provider *child;
};

static int
mt_body(struct tend_comp *c, void *arg)
{
	struct mt_arg *a = arg;

	return tend_declare_container(c, a->prov, a->key, a->value, a->len,
	    &a->child);
}

int
tend_mount_target(struct tend_comp *c, struct tend_provider *p,
    const struct tend_key *key, const void *value, size_t len,
    struct tend_provider **child_out)
{
	struct mt_arg a = {p, key, value, len, NULL};
	struct tend_key parts[2] = {tend_key_str(p->name), *key};
	struct tend_key path[2] = {tend_key_symbol("tend/mount_target"),
	    tend_key_tuple(parts, 2)};
	struct tend_mount_opts o = {.processor = "mount_target"};
	int rc;

	*child_out = NULL;
	rc = tend_use_mount(c, path, 2, mt_body, &a, &o);
	if (rc)
		return rc;
	if (!a.child || !a.child->handler)
		return tend_error_set(TEND_ERROR,
		    "container %s/%s could not be applied", p->name,
		    "target");
	*child_out = a.child;
	return 0;
}

/* ---- passes ---- */

static void
pass_init(struct tend_engine *eng, struct pass *pass, const char *app,
    const struct tend_pass_opts *opts)
{
	memset(pass, 0, sizeof *pass);
	pass->id = ++eng->npass;
	pass->app = app;
	pass->full = opts && opts->full;
	pass->preview = opts && opts->preview;
	eng->pass = pass;
}

static int
pass_begin(struct tend_engine *eng, struct pass *pass)
{
	int rc = 0;

	if (pass->preview)
		rc = tend_store_hold_begin(eng->st);
	if (wants(eng, TEND_EV_PASS_STARTED)) {
		struct tend_event ev = {.kind = TEND_EV_PASS_STARTED,
		    .pass = pass->id, .app = pass->app,
		    .preview = pass->preview};
		emit(eng, &ev);
	}
	return rc;
}

static int
pass_end(struct tend_engine *eng, struct pass *pass, int rc,
    struct tend_stats *stats_out)
{
	if (rc == 0)
		rc = retry_deferred(eng, pass);
	/* a store failure leaves components queued: nothing of theirs ran */
	for (size_t i = 0; i < pass->nqueue; i++)
		comp_free(pass->queue[i]);
	free(pass->queue);
	for (size_t i = 0; i < pass->ndeferred; i++)
		free((void *)pass->deferred[i].path);
	free(pass->deferred);
	free(pass->deferred_parent);
	free(pass->deferred_waiter);
	free(pass->built.tab);
	free(pass->gone.tab);
	free(pass->blocked.tab);
	free(pass->failed_deletes.tab);
	free(pass->deferred_ids.tab);
	for (size_t i = 0; i < pass->nwaits; i++)
		free(pass->waits[i].path);
	free(pass->waits);
	free(pass->refs);
	free_kept(pass);
	if (pass->preview) {
		undo_preview(eng, pass);
		tend_store_hold_abort(eng->st);
	}
	if (stats_out)
		*stats_out = pass->stats;
	if (wants(eng, TEND_EV_PASS_FINISHED)) {
		struct tend_event ev = {.kind = TEND_EV_PASS_FINISHED,
		    .pass = pass->id, .app = pass->app, .stats = &pass->stats,
		    .status = rc ? rc : pass->status,
		    .preview = pass->preview};
		emit(eng, &ev);
	}
	eng->pass = NULL;
	tend_registry_reap(eng);
	if (rc)
		return rc;
	if (pass->status)
		return tend_error_set(TEND_ERROR,
		    "%llu component(s) and %llu action(s) failed",
		    (unsigned long long)pass->stats.errors,
		    (unsigned long long)pass->stats.failed);
	return 0;
}

static struct tend_comp *
root_comp(struct tend_engine *eng, struct pass *pass, const char *app)
{
	struct tend_key k = tend_key_str(app);
	struct tend_comp *root = comp_new(eng, pass, NULL, NULL, 0, "", &k, 1);

	root->processor = "root";
	cidset_add(&pass->built, &root->cid);
	return root;
}

int
tend_engine_run(struct tend_engine *eng, const char *app, tend_comp_fn *fn,
    void *arg, const struct tend_pass_opts *opts, struct tend_stats *stats_out)
{
	struct pass pass;
	int rc;

	assert(!eng->pass);
	pass_init(eng, &pass, app, opts);
	if ((rc = pass_begin(eng, &pass)))
		return pass_end(eng, &pass, rc, stats_out);
	struct tend_comp *root = root_comp(eng, &pass, app);
	tend_error_clear();
	if ((rc = fn(root, arg)) != 0) {
		root->failed = true;
		root->error = tend_xstrdup(
		    tend_error_last()[0] ? tend_error_last() : "failed");
	}
	enqueue(&pass, root);
	rc = flush(eng, &pass);
	return pass_end(eng, &pass, rc, stats_out);
}

int
tend_engine_run_partial(struct tend_engine *eng, const char *app,
    tend_comp_fn *fn, void *arg, const struct tend_pass_opts *opts,
    struct tend_stats *stats_out)
{
	struct pass pass;
	int rc;

	assert(!eng->pass);
	pass_init(eng, &pass, app, opts);
	pass.incremental = true;
	if ((rc = pass_begin(eng, &pass)))
		return pass_end(eng, &pass, rc, stats_out);
	struct tend_comp *root = root_comp(eng, &pass, app);
	tend_error_clear();
	rc = fn(root, arg);
	/* the root is not committed: gone children that cannot be deleted
	 * now keep their existence rows, and the next full pass tombstones
	 * them */
	if (rc == 0)
		rc = flush(eng, &pass);
	else
		pass.status = rc;
	comp_free(root);
	return pass_end(eng, &pass, rc, stats_out);
}

struct one {
	const struct tend_key *path;
	size_t npath;
	tend_comp_fn *fn;
	void *arg;
	const struct tend_mount_opts *mopts;
};

static int
one_body(struct tend_comp *root, void *arg)
{
	struct one *o = arg;

	if (!o->fn)
		return tend_mount_gone(root, o->path, o->npath);
	return tend_mount(root, o->path, o->npath, o->fn, o->arg, o->mopts);
}

int
tend_engine_run_one(struct tend_engine *eng, const char *app,
    const struct tend_key *path, size_t npath, tend_comp_fn *fn, void *arg,
    const struct tend_mount_opts *mopts, const struct tend_pass_opts *opts,
    struct tend_stats *stats_out)
{
	struct one o = {path, npath, fn, arg, mopts};

	return tend_engine_run_partial(eng, app, one_body, &o, opts, stats_out);
}

int
tend_engine_drop(struct tend_engine *eng, const char *app,
    struct tend_stats *stats_out)
{
	struct tend_key k = tend_key_str(app);
	struct tend_buf path = TEND_BUF_INIT;
	struct pass pass;
	int rc;

	assert(!eng->pass);
	pass_init(eng, &pass, app, NULL);
	pass.dropping = true;
	if ((rc = pass_begin(eng, &pass)))
		return pass_end(eng, &pass, rc, stats_out);
	tend_key_encode(&path, &k);
	/* top-down; children of containers wait for their container's
	 * delete (their provider is not visible in a drop), so go round
	 * again while rounds make progress */
	for (int round = 0; round < 16 && rc == 0 && !pass.root_done;
	     round++) {
		uint64_t before = pass.stats.deleted + pass.stats.applied;
		uint64_t failed = pass.stats.failed + pass.stats.errors;

		enqueue(&pass, delete_comp(eng, &pass, NULL, false,
		    (const uint8_t *)path.ptr, path.len));
		if ((rc = flush(eng, &pass)) == 0)
			rc = retry_deferred(eng, &pass);
		/* a failure is not retried in the same drop: it would fail
		 * again and count twice; the next drop tries it */
		if (pass.stats.failed + pass.stats.errors != failed)
			break;
		if (round > 0 &&
		    pass.stats.deleted + pass.stats.applied == before)
			break;
	}
	tend_buf_release(&path);
	if (rc == 0 && !pass.root_done)
		pass.status = TEND_ERROR;
	return pass_end(eng, &pass, rc, stats_out);
}
