/*
 * check.c - listing an app's tracked target states and comparing them
 * with the targets (tend ls, tend check).
 *
 * Both walk the component headers of the app, then each component's item
 * rows. A check needs each state's handler outside of any pass: root
 * providers are registered; a container's children get theirs from the
 * container connector's open_child, fed the container's stored record.
 */
#include "check.h"

#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "inspect.h"
#include "reconcile.h"
#include "tend/status.h"

struct opened {
	struct tend_fp id;
	struct tend_handler *h;
};

struct walk {
	struct tend_engine *eng;
	struct tend_txn *txn;
	struct tend_arena arena;
	struct opened *open;
	size_t nopen;
};

static bool
starts(const char *s, const char *prefix)
{
	return s && strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The app a component belongs to is the first key of its path. */
static bool
comp_in_app(const struct tend_bytes *hdr, const char *app, struct tend_arena *a)
{
	struct hdr_row h;
	struct tend_key k;
	size_t used;

	if (tend_hdr_parse(&h, hdr->data, hdr->len) != 0)
		return false;
	if (tend_key_decode(&k, h.path, h.pathlen, &used, a))
		return false;
	return !app || (k.kind == TEND_KEY_STR && k.u.s.len == strlen(app) &&
			   memcmp(k.u.s.ptr, app, k.u.s.len) == 0);
}

static struct tend_handler *
handler_for(struct walk *w, const struct tend_fp *parent)
{
	struct tend_provider *p = tend_registry_get(&w->eng->reg, parent);
	struct tend_bytes v;
	struct tend_fp gp, owner;
	struct tend_key key;
	struct item item;

	if (p && p->root)
		return p->handler;
	for (size_t i = 0; i < w->nopen; i++)
		if (tend_fp_equal(&w->open[i].id, parent))
			return w->open[i].h;
	struct tend_handler *h = NULL;
	if (tend_store_get(w->txn, TEND_T_NAME, parent->b, 16, &v) != 0 ||
	    v.len < 17)
		goto out;
	memcpy(gp.b, v.data, 16);
	if (tend_key_decode(&key, v.data + 16, v.len - 16, NULL, &w->arena))
		goto out;
	if (key.kind == TEND_KEY_SYMBOL) {
		/* an attachment namespace (a git target's tags): its
		 * container's handler offers it */
		struct tend_handler *ch = handler_for(w, &gp);
		struct tend_attachment att[16];
		size_t n = ch && ch->ops->attachments
		    ? ch->ops->attachments(ch, att, 16) : 0;

		for (size_t i = 0; i < n; i++) {
			if (!h && strlen(att[i].type) == key.u.s.len &&
			    memcmp(att[i].type, key.u.s.ptr, key.u.s.len) == 0)
				h = att[i].handler;
			else
				att[i].handler->ops->destroy(att[i].handler);
		}
		goto out;
	}
	struct tend_provider *gpp = tend_registry_get(&w->eng->reg, &gp);
	if (!gpp || !gpp->root || !gpp->handler->ops->open_child)
		goto out;
	if (tend_store_get(w->txn, TEND_T_OWNER, parent->b, 16, &v) != 0 ||
	    v.len != 16)
		goto out;
	memcpy(owner.b, v.data, 16);
	uint8_t k[40];
	memcpy(k, owner.b, 16);
	memcpy(k + 16, parent->b, 16);
	memset(k + 32, 0, 8);
	if (tend_store_get(w->txn, TEND_T_ITEM, k, 40, &v) != 0 ||
	    tend_item_decode(&item, v.data, v.len, &w->arena) != 0)
		goto out;
	for (size_t i = item.nstates; i-- > 0;) {
		if (item.states[i].deleted)
			continue;
		struct tend_bytes rec = {item.states[i].rec, item.states[i].len};
		h = gpp->handler->ops->open_child(gpp->handler, &key, &rec);
		break;
	}
out:
	w->open = tend_xrealloc(w->open, (w->nopen + 1) * sizeof *w->open);
	w->open[w->nopen].id = *parent;
	w->open[w->nopen].h = h;
	w->nopen++;
	return h;
}

/* `txn`: the snapshot to read (NULL: one of its own) */
static int
visit(struct tend_engine *eng, struct tend_txn *txn, const char *app,
    bool check, tend_state_fn *fn, void *arg, unsigned *ndrift)
{
	struct walk w = {.eng = eng, .arena = TEND_ARENA_INIT, .txn = txn};
	struct tend_iter ci;
	struct tend_bytes ck, cv;
	struct tend_fp *cids = NULL;
	size_t ncids = 0;
	int rc, more;

	if (ndrift)
		*ndrift = 0;
	if (!txn && (rc = tend_store_read_begin(eng->st, &w.txn)))
		return rc;
	tend_store_iter_init(&ci, w.txn, TEND_T_COMP, NULL, 0);
	while ((more = tend_store_iter_next(&ci, &ck, &cv)) == 1) {
		if (ck.len != 16 || !comp_in_app(&cv, app, &w.arena))
			continue;
		cids = tend_xrealloc(cids, (ncids + 1) * sizeof *cids);
		memcpy(cids[ncids++].b, ck.data, 16);
	}
	tend_store_iter_finish(&ci);
	for (size_t c = 0; c < ncids; c++) {
		struct tend_iter it;
		struct tend_bytes k, v;
		struct tend_buf comp = TEND_BUF_INIT;

		tend_inspect_comp_path(w.txn, &cids[c], &comp);
		tend_store_iter_init(&it, w.txn, TEND_T_ITEM, cids[c].b, 16);
		while (tend_store_iter_next(&it, &k, &v) == 1) {
			struct tend_state_info si = {0};
			struct tend_buf path = TEND_BUF_INIT, why = TEND_BUF_INIT;
			struct tend_fp tsid;
			struct item item;

			if (k.len != 40 ||
			    tend_item_decode(&item, v.data, v.len, &w.arena))
				continue;
			memcpy(tsid.b, k.data + 16, 16);
			tend_inspect_item_path(w.txn, &tsid, &item, &path);
			si.component = comp.ptr;
			si.path = path.ptr;
			si.container = item.container;
			si.nstates = (unsigned)item.nstates;
			si.pending = item.nstates != 1 || item.states[0].deleted;
			if (item.nstates && !item.states[item.nstates - 1].deleted) {
				si.record = item.states[item.nstates - 1].rec;
				si.len = item.states[item.nstates - 1].len;
			}
			if (check && !item.container) {
				struct tend_handler *h = handler_for(&w,
				    &item.parent);
				struct tend_key key;

				/* an unsettled state (its apply failed or
				 * was interrupted, or only its settle was)
				 * is right if its target holds the newest
				 * record: what the last pass wrote */
				bool asked = false;

				if (h && h->ops->check && si.record &&
				    tend_key_decode(&key, item.key, item.keylen,
					NULL, &w.arena) == 0) {
					asked = true;
					struct tend_bytes rec = {si.record,
					    si.len};
					int r = h->ops->check(h, &eng->ctx, &key,
					    &rec, &why);
					if (r == TEND_ECONFLICT)
						si.drift = why.ptr;
					else if (r)
						si.drift = tend_error_last();
				}
				/* a pending delete is done if the target has
				 * nothing at the key: asked with the record
				 * before it, a check says "missing" */
				const struct state *before = NULL;
				for (size_t i = item.nstates; !si.record &&
				    i-- > 0;)
					if (!item.states[i].deleted) {
						before = &item.states[i];
						break;
					}
				if (h && h->ops->check && before &&
				    tend_key_decode(&key, item.key, item.keylen,
					NULL, &w.arena) == 0) {
					struct tend_bytes rec = {before->rec,
					    before->len};
					int r;

					tend_buf_reset(&why);
					r = h->ops->check(h, &eng->ctx, &key, &rec,
					    &why);
					asked = r == TEND_ECONFLICT && why.ptr &&
					    strncmp(why.ptr, TEND_CHECK_ABSENT,
						strlen(TEND_CHECK_ABSENT)) == 0;
					tend_error_clear();
				}
				/* what is at the key of a state never written
				 * (its first apply failed) and holds none of
				 * its records is not tend's: the sync leaves
				 * it, so it is in the way, not retried */
				bool way = starts(si.drift,
				    TEND_CHECK_IN_THE_WAY);
				if (si.drift && !way &&
				    tend_item_never_applied(&item) &&
				    !starts(si.drift, TEND_CHECK_ABSENT) &&
				    tend_key_decode(&key, item.key, item.keylen,
					NULL, &w.arena) == 0) {
					struct tend_bytes *recs = tend_arena_alloc(
					    &w.arena, item.nstates * sizeof *recs);
					size_t n = tend_item_records(&item, recs);
					struct tend_buf own = TEND_BUF_INIT;

					if (tend_foreign_at(eng, h, &key, recs, n,
						&own, NULL)) {
						si.drift = tend_arena_memdup(
						    &w.arena, own.ptr,
						    own.len + 1);
						way = true;
					}
					tend_buf_release(&own);
				}
				/* (a pending delete not known done, nor what
				 * no check was asked about) */
				if (si.pending && (si.drift || !asked) && !way)
					si.drift = !si.record && before
					    /* what it would delete is there */
					    ? "a delete cut short: the next sync "
					      "deletes it, or keeps it if its "
					      "source is back"
					    : "a failed or interrupted apply: "
					      "the next sync retries it";
				if (si.drift && ndrift)
					(*ndrift)++;
			}
			if (!check || si.drift)
				fn(&si, arg);
			tend_buf_release(&path);
			tend_buf_release(&why);
		}
		tend_store_iter_finish(&it);
		tend_buf_release(&comp);
	}
	for (size_t i = 0; i < w.nopen; i++)
		if (w.open[i].h)
			w.open[i].h->ops->destroy(w.open[i].h);
	free(w.open);
	free(cids);
	tend_arena_finish(&w.arena);
	if (!txn)
		tend_store_read_end(w.txn);
	return more < 0 ? more : 0;
}

/* h's check of every record says the key holds something else or
 * nothing; `r` gets the last check's reason, *held (if not NULL) the
 * index of a record the key holds (or n) */
static bool
none_held(struct tend_engine *eng, struct tend_handler *h,
    const struct tend_key *key, const struct tend_bytes *recs, size_t n,
    struct tend_buf *r, size_t *held)
{
	bool none = n > 0 && h && h->ops->check && h->ops->abi >= 2 &&
	    (h->ops->flags & TEND_HANDLER_KEEPS_FOREIGN);

	if (held)
		*held = n;
	for (size_t i = 0; none && i < n; i++) {
		tend_buf_reset(r);
		int rc = h->ops->check(h, &eng->ctx, key, &recs[i], r);

		/* an error says nothing of what is there; what is left
		 * behind is the state's own (the sink catches it up) */
		none = rc == TEND_ECONFLICT && r->ptr &&
		    !starts(r->ptr, TEND_CHECK_BEHIND);
		if (rc == 0 && held)
			*held = i;
		tend_error_clear();
	}
	return none;
}

bool
tend_holds_none(struct tend_engine *eng, struct tend_handler *h,
    const struct tend_key *key, const struct tend_bytes *recs, size_t n,
    bool *absent)
{
	struct tend_buf r = TEND_BUF_INIT;
	bool none = none_held(eng, h, key, recs, n, &r, NULL);

	if (absent)
		*absent = none && starts(r.ptr, TEND_CHECK_ABSENT);
	tend_buf_release(&r);
	return none;
}

bool
tend_foreign_at(struct tend_engine *eng, struct tend_handler *h,
    const struct tend_key *key, const struct tend_bytes *recs, size_t n,
    struct tend_buf *why, bool *holds_last)
{
	struct tend_buf r = TEND_BUF_INIT;
	size_t held;
	bool foreign = none_held(eng, h, key, recs, n, &r, &held) &&
	    !starts(r.ptr, TEND_CHECK_ABSENT);

	if (holds_last)
		*holds_last = n > 0 && held == n - 1;
	if (foreign && starts(r.ptr, TEND_CHECK_IN_THE_WAY))
		tend_buf_puts(why, r.ptr);
	else if (foreign)
		tend_buf_printf(why, TEND_CHECK_IN_THE_WAY ": something tend "
		    "has no record of writing is there (%s): tend replaces "
		    "only what it knows it wrote (move it away, then tend "
		    "sync)", r.ptr);
	tend_buf_release(&r);
	return foreign;
}

int
tend_engine_list(struct tend_engine *eng, const char *app, tend_state_fn *fn,
    void *arg)
{
	return visit(eng, NULL, app, false, fn, arg, NULL);
}

int
tend_engine_check(struct tend_engine *eng, const char *app,
    tend_state_fn *fn, void *arg, unsigned *ndrift)
{
	return visit(eng, NULL, app, true, fn, arg, ndrift);
}

/* ---- an app's counts: its counters, or a scan ---- */

static void
on_count(const struct tend_state_info *si, void *arg)
{
	struct tend_app_counts *ac = arg;

	ac->states++;
	ac->pending += si->pending;
	ac->containers += si->container;
}

static void
from_counters(struct tend_app_counts *ac, const struct tend_counts *c)
{
	ac->states = (uint64_t)c->n[TEND_COUNT_STATES];
	ac->pending = (uint64_t)c->n[TEND_COUNT_PENDING];
	ac->containers = (uint64_t)c->n[TEND_COUNT_CONTAINERS];
}

int
tend_engine_counts(struct tend_engine *eng, struct tend_txn *txn,
    const char *app, struct tend_app_counts *out)
{
	struct tend_counts c;

	memset(out, 0, sizeof *out);
	if (tend_store_counts_get(txn, app, strlen(app), &c) == 0) {
		from_counters(out, &c);
		return 0;
	}
	out->scanned = true;
	return visit(eng, txn, app, false, on_count, out, NULL);
}

int
tend_engine_counts_check(struct tend_engine *eng, const char *app,
    struct tend_buf *why)
{
	struct tend_app_counts kept = {0}, real = {0};
	struct tend_counts c;
	struct tend_txn *txn;
	int rc;

	/* one snapshot for both: a writer in between would differ */
	if ((rc = tend_store_read_begin(eng->st, &txn)))
		return rc;
	if (tend_store_counts_get(txn, app, strlen(app), &c) != 0) {
		tend_store_read_end(txn); /* not kept: nothing to compare */
		return 0;
	}
	from_counters(&kept, &c);
	rc = visit(eng, txn, app, false, on_count, &real, NULL);
	tend_store_read_end(txn);
	if (rc)
		return rc;
	if (kept.states == real.states && kept.pending == real.pending &&
	    kept.containers == real.containers)
		return 0;
	tend_buf_printf(why, "the store counts %lld target states (%lld "
	    "unsettled, %lld containers), its rows are %llu (%llu, %llu)",
	    (long long)c.n[TEND_COUNT_STATES],
	    (long long)c.n[TEND_COUNT_PENDING],
	    (long long)c.n[TEND_COUNT_CONTAINERS],
	    (unsigned long long)real.states, (unsigned long long)real.pending,
	    (unsigned long long)real.containers);
	return TEND_ECONFLICT;
}

/* "@tend/dir/\"public\"" + "\"a.html\"" -> "public/a.html" */
static void
strip_quotes(struct tend_buf *out, const char *s)
{
	size_t len = strlen(s);

	if (len >= 2 && s[0] == '"' && s[len - 1] == '"')
		tend_buf_put(out, s + 1, len - 2);
	else
		tend_buf_puts(out, s);
}

/* Text that tend_key_format wrote (every backslash in it doubled), with
 * the bytes that are not UTF-8 as \xNN: it reads back, and it is text. */
static void
put_utf8(struct tend_buf *out, const char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t l = tend_utf8_len(s + i, n - i);

		if (l == 0) {
			tend_buf_printf(out, "\\x%02x", (unsigned char)s[i]);
			i++;
		} else {
			tend_buf_put(out, s + i, l);
			i += l;
		}
	}
}

/* A name's bytes as tend_key_format spells a string's (\\ \" \n \t, other
 * control characters as \xNN), and bytes that are not UTF-8 as \xNN. */
static void
put_name(struct tend_buf *out, const char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];
		size_t l = tend_utf8_len(s + i, n - i);

		if (c == '"' || c == '\\')
			tend_buf_printf(out, "\\%c", c);
		else if (c == '\n')
			tend_buf_puts(out, "\\n");
		else if (c == '\t')
			tend_buf_puts(out, "\\t");
		else if (c < 0x20 || c == 0x7f || l == 0)
			tend_buf_printf(out, "\\x%02x", c);
		else {
			tend_buf_put(out, s + i, l);
			i += l;
			continue;
		}
		i++;
	}
}

char *
tend_event_failure(const struct tend_event *ev)
{
	struct tend_buf b = TEND_BUF_INIT;
	/* an applied action's warning: what failed beside it */
	bool beside = ev->kind == TEND_EV_ACTION_APPLIED;
	const char *msg = beside ? ev->note : ev->error;

	if ((ev->kind == TEND_EV_ACTION_FAILED || beside) && ev->provider) {
		tend_display_path(&b, ev->provider, ev->key);
		tend_buf_puts(&b, ": ");
	}
	tend_buf_puts(&b, msg && *msg ? msg : "failed");
	return tend_buf_detach(&b, NULL);
}

/* An entry's key, under its attachment's "@NAME/" if it has one. */
static void
put_key(struct tend_buf *t, const char *att, const char *key)
{
	if (att)
		tend_buf_printf(t, "%s/", att);
	strip_quotes(t, key);
}

void
tend_display_path(struct tend_buf *out, const char *provider, const char *key)
{
	struct tend_buf t = TEND_BUF_INIT, base = TEND_BUF_INIT;
	/* an attachment's provider is its container's and "/@NAME": its
	 * states read "CONTAINER/@NAME/KEY", as ls spells them */
	const char *att = strrchr(provider, '/');

	if (att && att[1] == '@' && !strpbrk(att, "\"()")) {
		tend_buf_put(&base, provider, (size_t)(att - provider));
		provider = base.ptr;
		att++;
	} else
		att = NULL;
	if (strcmp(provider, "@tend/dir") == 0) {
		strip_quotes(&t, key);
		tend_buf_putc(&t, '/');
	} else if (strncmp(provider, "@tend/dir/", 10) == 0) {
		strip_quotes(&t, provider + 10);
		tend_buf_putc(&t, '/');
		put_key(&t, att, key);
	} else if (strcmp(provider, "@tend/file") == 0)
		put_key(&t, att, key);
	else if (strncmp(provider, "@tend/git/", 10) == 0) {
		tend_buf_printf(&t, "git%s:", provider + 10);
		put_key(&t, att, key);
	} else if (strcmp(provider, "@tend/git") == 0) {
		tend_buf_printf(&t, "git%s", key);
	}
	else {
		/* another connector's: "ROOT/CONTAINER-KEY/KEY" without the
		 * keys' quotes, as ls and check spell its state paths */
		const char *q = strstr(provider, "/\"");

		if (q) {
			tend_buf_put(&t, provider, (size_t)(q + 1 - provider));
			strip_quotes(&t, q + 1);
		} else
			tend_buf_puts(&t, provider);
		tend_buf_putc(&t, '/');
		put_key(&t, att, key);
	}
	put_utf8(out, t.ptr, t.len);
	tend_buf_release(&t);
	tend_buf_release(&base);
}

/* The end of the tuple that starts `s` ("(\"repo\", \"refs/x\")..."), as
 * tend_key_format writes one; NULL if it is not one. */
static const char *
tuple_end(const char *s)
{
	int depth = 0;
	bool quoted = false;

	for (const char *p = s; *p; p++) {
		if (quoted) {
			if (*p == '\\' && p[1])
				p++;
			else if (*p == '"')
				quoted = false;
		} else if (*p == '"')
			quoted = true;
		else if (*p == '(')
			depth++;
		else if (*p == ')' && --depth == 0)
			return p + 1;
	}
	return NULL;
}

size_t
tend_state_display_path(struct tend_buf *out, const char *path,
    bool container)
{
	const char *end;

	if (strncmp(path, "/@tend/dir/", 11) == 0) {
		put_name(out, path + 11, strlen(path + 11));
		if (container)
			tend_buf_putc(out, '/');
		return 0;
	}
	if (strncmp(path, "/@tend/file/", 12) == 0) {
		put_name(out, path + 12, strlen(path + 12));
		return 0;
	}
	if (strncmp(path, "/@tend/git/", 11) == 0 &&
	    (end = tuple_end(path + 11)) && (!*end || *end == '/')) {
		size_t root;

		tend_buf_puts(out, "git");
		put_utf8(out, path + 11, (size_t)(end - (path + 11)));
		root = out->len;
		if (*end) {
			tend_buf_putc(out, ':');
			put_name(out, end + 1, strlen(end + 1));
		}
		return root;
	}
	if (*path == '/')
		path++; /* another connector's: "provider/key", as plan says */
	put_name(out, path, strlen(path));
	return 0;
}

bool
tend_event_is_refresh(const struct tend_event *ev)
{
	return ev->container && !ev->record_changed && !ev->invalidation &&
	    ev->op != TEND_OP_DELETE;
}

bool
tend_event_counts(const struct tend_event *ev)
{
	return !tend_event_is_refresh(ev) &&
	    (!ev->container || ev->op == TEND_OP_DELETE);
}

int
tend_engine_comp_applied(struct tend_engine *eng, struct tend_txn *txn,
    const char *app, const struct tend_key *path, size_t npath)
{
	struct tend_arena arena = TEND_ARENA_INIT;
	struct tend_iter it;
	struct tend_bytes k, v;
	int more, applied = 0;
	struct tend_fp cid = tend_engine_app_cid(eng, app, path, npath);

	if ((more = tend_store_iter_init(&it, txn, TEND_T_ITEM, cid.b, 16)))
		return more;
	while (!applied && (more = tend_store_iter_next(&it, &k, &v)) == 1) {
		struct item item;

		if (k.len == 40 &&
		    tend_item_decode(&item, v.data, v.len, &arena) == 0 &&
		    !tend_item_never_applied(&item))
			applied = 1;
	}
	tend_store_iter_finish(&it);
	tend_arena_finish(&arena);
	return more < 0 ? more : applied;
}
