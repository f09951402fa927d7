/*
 * engine.c - the engine's lifecycle, components, mounts and memos, passes,
 * events (emit) and drop. Finished components are queued; batch.c flushes
 * them.
 *
 * A pass runs the app's root component. Components run synchronously on
 * this thread: a mount runs the child at once, so children always finish
 * (and are queued for submission) before their parent, as CocoIndex
 * requires (R21). Finished components are not submitted one by one: they
 * are queued, and a batch of them is flushed together (batch.c). A batch
 * is flushed when it is full, when a use_mount needs its child's
 * providers resolved before returning, and at the end of the pass.
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
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "tend/status.h"


#define DEFAULT_BATCH 4096

/* ---- small helpers ---- */

void
tend_handler_init(struct tend_handler *h, const struct tend_handler_ops *ops)
{
	assert(ops->abi == 1 || ops->abi == TEND_TARGET_ABI);
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

uint64_t
tend_context_pass(const struct tend_context *ctx)
{
	return ctx && ctx->eng->pass ? ctx->eng->pass->uid : 0;
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

bool
tend_reconcile_repairs(const struct tend_reconcile_in *in, const void *rec,
    size_t len)
{
	if (!in->prev_may_be_missing || in->prev_never_applied ||
	    in->nprev == 0)
		return false;
	for (size_t i = 0; i < in->nprev; i++)
		if (in->prev[i].len != len ||
		    (len && memcmp(in->prev[i].data, rec, len) != 0))
			return false;
	return true;
}

const uint8_t *
tend_reconcile_prev_copy(const struct tend_reconcile_in *in, size_t len,
    size_t *n)
{
	uint8_t *p = tend_arena_alloc(in->arena, (in->nprev + 1) * len);

	*n = 0;
	for (size_t i = 0; i < in->nprev; i++)
		if (in->prev[i].len == len)
			memcpy(p + len * (*n)++, in->prev[i].data, len);
	return p;
}

/* Sinks built before the result's flags index the array with its old
 * stride (status, error, child): the flags must stay in the padding. */
#if UINTPTR_MAX > 0xffffffffu
_Static_assert(sizeof(struct tend_apply_result) == 3 * sizeof(void *),
    "struct tend_apply_result changed its stride: sinks built before "
    "break");
#endif

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
apply_say(struct tend_apply_result *r, bool warn, const char *fmt,
    va_list ap) __attribute__((format(printf, 3, 0)));

static void
apply_say(struct tend_apply_result *r, bool warn, const char *fmt,
    va_list ap)
{
	struct tend_buf b = TEND_BUF_INIT;

	tend_buf_vprintf(&b, fmt, ap);
	if (r->error && !r->status) { /* a second one joins the first */
		struct tend_buf both = TEND_BUF_INIT;

		tend_buf_printf(&both, "%s; %s", r->error, b.ptr);
		tend_buf_release(&b);
		b = both;
	}
	free(r->error);
	r->error = tend_buf_detach(&b, NULL);
	r->warn |= warn;
}

void
tend_apply_warn(struct tend_apply_result *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	apply_say(r, true, fmt, ap);
	va_end(ap);
}

void
tend_apply_note(struct tend_apply_result *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	apply_say(r, false, fmt, ap);
	va_end(ap);
}

void
emit(struct tend_engine *eng, struct tend_event *ev)
{
	for (size_t i = 0; i < eng->nsubs; i++)
		if (eng->subs[i].mask & TEND_EV_MASK(ev->kind))
			eng->subs[i].fn(ev, eng->subs[i].arg);
}

bool
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

/*
 * A big table is mapped with its pages already faulted in, in one call:
 * a pass of 100k unchanged files fills a 4 MiB set of the components it
 * keeps, and page by page its first touches cost ~20 µs each on a
 * paravirtualized machine (a tenth of the no-op's pass after the walk,
 * measured with perf).
 */
#define CIDSET_MAP_BYTES ((size_t)1 << 20)

static void
cidset_table(struct cidset *s, size_t size)
{
	size_t bytes = size * sizeof *s->tab;
	void *p = MAP_FAILED;

	if (bytes >= CIDSET_MAP_BYTES)
		p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	s->mapped = p != MAP_FAILED;
	s->tab = s->mapped ? p : tend_xcalloc(size, sizeof *s->tab);
	s->size = size;
	s->n = 0;
}

void
tend_cidset_free(struct cidset *s)
{
	if (s->mapped)
		munmap(s->tab, s->size * sizeof *s->tab);
	else
		free(s->tab);
	*s = (struct cidset){0};
}

static void
cidset_resize(struct cidset *s, size_t size)
{
	struct cidset n;

	cidset_table(&n, size);
	for (size_t i = 0; i < s->size; i++)
		if (!fp_zero(&s->tab[i]))
			tend_cidset_add(&n, &s->tab[i]);
	tend_cidset_free(s);
	*s = n;
}

void
tend_cidset_reserve(struct cidset *s, size_t n)
{
	size_t size = s->size ? s->size : 256;

	while (size / 2 < n + 1)
		size *= 2;
	if (size > s->size)
		cidset_resize(s, size);
}

void
tend_cidset_add(struct cidset *s, const struct tend_fp *fp)
{
	if ((s->n + 1) * 2 > s->size)
		cidset_resize(s, s->size ? s->size * 2 : 256);
	uint64_t h;
	memcpy(&h, fp->b + 8, 8);
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
	memcpy(&h, fp->b + 8, 8);
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
	/* a store whose counters an older tend did not keep is recounted
	 * in its first write */
	tend_store_set_recount(eng->st, tend_count_recount, eng);
	eng->local_ids = tend_store_format(eng->st) >= 2;
	eng->compact_rows = tend_store_format(eng->st) >= 3;
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
	for (size_t i = 0; i < sizeof eng->mctx / sizeof *eng->mctx; i++)
		free(eng->mctx[i].bytes);
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

size_t
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

void
clear_refs(struct pass *pass)
{
	if (pass->crefs)
		memset(pass->refs, 0, pass->crefs * sizeof *pass->refs);
	pass->nrefs = 0;
}

static struct tend_fp ts_id(const struct tend_provider *p,
    const struct tend_key *key);

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

/*
 * Ids. A component's id is the hash of its encoded path, a target state's
 * the hash of its provider's id and its key. In a store of format 2 the
 * first 4 bytes are replaced by the hash of the part before the last '/'
 * (a component's path up to its directory; a state's provider and its
 * key's directory), so the rows of one directory sit together in every
 * table: a batch, which follows the walk, rewrites the few pages its
 * directories use instead of one page per row (at a million files, 50 KB
 * written per file). 96 bits still tell apart the ids of one directory.
 * Hash tables of ids read their last 8 bytes.
 */
static size_t
before_last_slash(const void *p, size_t len, size_t none)
{
	const char *s = p;

	while (len > 0)
		if (s[--len] == '/')
			return len;
	return none;
}

static void
id_locate(struct tend_fp *id, const void *where, size_t len, uint64_t seed)
{
	uint64_t h = XXH3_64bits_withSeed(where, len, seed);

	for (int i = 0; i < 4; i++)
		id->b[i] = (uint8_t)(h >> (56 - 8 * i));
}

struct tend_fp
tend_engine_cid(const struct tend_engine *eng, const void *path, size_t len)
{
	struct tend_fp id = tend_fp_bytes(path, len);

	if (eng->local_ids) {
		id_locate(&id, path, before_last_slash(path, len, len), 0);
	}
	return id;
}

/* The id of the state at `key` of the provider whose id is `pid` */
static struct tend_fp
ts_id_under(const struct tend_engine *eng, const struct tend_fp *pid,
    const struct tend_key *key)
{
	struct tend_fp kfp = tend_fp_key(key);
	struct tend_fp id = tend_fp_combine(pid, &kfp);

	if (eng->local_ids) {
		uint64_t seed;
		size_t dir = 0;

		if (key->kind == TEND_KEY_STR)
			dir = before_last_slash(key->u.s.ptr, key->u.s.len, 0);
		memcpy(&seed, pid->b + 8, 8);
		id_locate(&id, key->u.s.ptr, dir, seed);
	}
	return id;
}

static struct tend_fp
ts_id(const struct tend_provider *p, const struct tend_key *key)
{
	return ts_id_under(p->eng, &p->id, key);
}

bool
tend_engine_state_owned(struct tend_engine *eng, struct tend_txn *txn,
    const char *root, const struct tend_key *path, size_t n)
{
	struct tend_fp id = root_id(root);
	struct tend_bytes v;

	/* a child provider's id is its container state's (child_provider) */
	for (size_t i = 0; i < n; i++)
		id = ts_id_under(eng, &id, &path[i]);
	return n && tend_store_get(txn, TEND_T_OWNER, id.b, 16, &v) == 0;
}

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
	c->cid = tend_engine_cid(eng, c->path.ptr, c->path.len);
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

void
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

struct tend_fp
tend_engine_app_cid(const struct tend_engine *eng, const char *app,
    const struct tend_key *path, size_t npath)
{
	struct tend_buf enc = TEND_BUF_INIT;
	struct tend_key root = tend_key_str(app);

	tend_key_encode(&enc, &root);
	for (size_t i = 0; i < npath; i++)
		tend_key_encode(&enc, &path[i]);
	struct tend_fp cid = tend_engine_cid(eng, enc.ptr, enc.len);
	tend_buf_release(&enc);
	return cid;
}

bool
tend_engine_memo_matches(struct tend_engine *eng, const char *app,
    const struct tend_key *path, size_t npath, const struct tend_fp *input,
    const struct tend_fp *logic)
{
	struct tend_txn *txn;
	bool ok = false;
	struct tend_fp cid = tend_engine_app_cid(eng, app, path, npath);

	if (tend_store_read_begin(eng->st, &txn) != 0)
		return false;
	struct memo_row m;

	if (tend_memo_load(txn, eng, &cid, &m) == 0 &&
	    memcmp(m.input, input->b, 16) == 0 &&
	    memcmp(m.logic, logic->b, 16) == 0)
		ok = true;
	tend_store_read_end(txn);
	return ok;
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
memo_deps_up(struct tend_comp *parent, const struct memo_row *m)
{
	struct dep dep;
	size_t at = 0;

	for (size_t i = 0; i < m->ndeps && tend_memo_dep_next(m, &at, &dep);
	     i++)
		deps_up(parent, &dep, 1);
}

int
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
		c->cdecls = c->cdecls ? c->cdecls * 2 : 1;
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

/* ---- mounting ---- */

static bool
memo_valid(struct tend_engine *eng, const struct memo_row *m,
    const struct tend_mount_opts *o)
{
	struct dep d;
	size_t at = 0;

	if (memcmp(m->input, o->input_fp.b, 16) ||
	    memcmp(m->logic, o->logic_fp.b, 16))
		return false;
	for (size_t i = 0; i < m->ndeps && tend_memo_dep_next(m, &at, &d);
	     i++) {
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
	tend_cidset_add(&pass->built, &c->cid);
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

		if ((rc = tend_store_read_begin(eng->st, &txn))) {
			comp_free(c);
			return rc;
		}
		struct memo_row m;

		rc = tend_memo_load(txn, eng, &c->cid, &m);
		if (rc == 0 && !pass->full && !c->mopts.fresh &&
		    memo_valid(eng, &m, &c->mopts)) {
			memo_deps_up(parent, &m);
			tend_store_read_end(txn);
			pass->stats.unchanged++;
			comp_free(c);
			return 0;
		}
		/* R18: a memo that cannot be reused goes before the body */
		c->memo_delete = rc != TEND_ENOTFOUND;
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
	cid = tend_engine_cid(parent->eng, enc.ptr, enc.len);
	if (!tend_cidset_has(&parent->pass->built, &cid) &&
	    !tend_cidset_has(&parent->pass->gone, &cid)) {
		d = delete_comp(parent->eng, parent->pass, &parent->cid, true,
		    (const uint8_t *)enc.ptr, enc.len);
		tend_cidset_add(&parent->pass->gone, &cid);
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
	probe.cid = tend_engine_cid(parent->eng, enc.ptr, enc.len);
	if (!tend_cidset_has(&parent->pass->built, &probe.cid)) {
		add_child(parent, &probe);
		tend_cidset_add(&parent->pass->built, &probe.cid);
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
	static _Atomic uint64_t passes;

	pass->id = ++eng->npass;
	pass->uid = ++passes;
	pass->app = app;
	pass->full = opts && opts->full;
	pass->preview = opts && opts->preview;
	eng->pass = pass;
}

static int
pass_begin(struct tend_engine *eng, struct pass *pass)
{
	int rc = 0;

	if (pass->preview && !tend_store_is_scratch(eng->st))
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
	tend_cidset_free(&pass->built);
	tend_cidset_free(&pass->gone);
	tend_cidset_free(&pass->blocked);
	tend_cidset_free(&pass->failed_deletes);
	tend_cidset_free(&pass->deferred_ids);
	for (size_t i = 0; i < pass->nwaits; i++)
		free(pass->waits[i].path);
	free(pass->waits);
	free(pass->refs);
	free_kept(pass);
	if (pass->preview) {
		settle_suspects(eng, pass);
		undo_preview(eng, pass);
		if (tend_store_is_scratch(eng->st)) {
			int crc = tend_store_clear(eng->st);

			if (crc && !rc)
				rc = crc;
		} else
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
	tend_cidset_add(&pass->built, &root->cid);
	return root;
}

/* A whole pass builds or keeps every component again: its set is sized
 * once, from the app's counters, rather than doubled ~log2(n) times */
static void
reserve_built(struct tend_engine *eng, struct pass *pass, const char *app)
{
	struct tend_txn *txn;
	struct tend_counts c;

	if (tend_store_read_begin(eng->st, &txn) != 0)
		return;
	if (tend_store_counts_get(txn, app, strlen(app), &c) == 0 &&
	    c.n[TEND_COUNT_STATES] > 0)
		tend_cidset_reserve(&pass->built, (size_t)c.n[TEND_COUNT_STATES] + 1);
	tend_store_read_end(txn);
}

int
tend_engine_run(struct tend_engine *eng, const char *app, tend_comp_fn *fn,
    void *arg, const struct tend_pass_opts *opts, struct tend_stats *stats_out)
{
	struct pass pass;
	int rc;

	assert(!eng->pass);
	pass_init(eng, &pass, app, opts);
	reserve_built(eng, &pass, app);
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
