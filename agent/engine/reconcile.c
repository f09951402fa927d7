/*
 * reconcile.c - the reconcile decision of one target state, pure.
 *
 * Given a target state's key, its desired value (none: no longer
 * declared), its previous possible records and whether the target may be
 * missing from them (R8), the handler's reconcile decides an action; the
 * plan's action and the item's new candidate records (R9) follow from
 * it. Nothing here reads or writes the store: commit.c fetches the item,
 * calls these, and writes what they return in the pre-commit.
 *
 * The rule (issue 16): calls go one way, from engine.c and commit.c (the
 * driver) to here, never back. This file calls no function defined in
 * engine.c or commit.c: what it needs comes in as arguments, and what it
 * offers is declared in reconcile.h, alone. tests/reconcile_deps.sh
 * checks it.
 */
#include "reconcile.h"

#include <string.h>

#include "tend/status.h"

bool
tend_item_never_applied(const struct item *it)
{
	return it->nstates && it->states[0].deleted &&
	    it->states[0].version == 0;
}

size_t
tend_item_records(const struct item *it, struct tend_bytes *out)
{
	size_t n = 0;

	for (size_t i = 0; i < it->nstates; i++)
		if (!it->states[i].deleted)
			out[n++] = (struct tend_bytes){it->states[i].rec,
			    it->states[i].len};
	return n;
}

/* prev = the non-deleted records in stored order; missing per R8;
 * never: no write of it was ever confirmed */
struct tend_bytes *
tend_prev_of(struct tend_comp *c, const struct item *it, size_t *nprev,
    bool *missing, bool *never, uint64_t pschema, bool root)
{
	struct tend_bytes *prev;

	*nprev = 0;
	*never = !it || tend_item_never_applied(it);
	if (!it) {
		*missing = true;
		return NULL;
	}
	prev = tend_arena_alloc(&c->arena, (it->nstates + 1) * sizeof *prev);
	*nprev = tend_item_records(it, prev);
	*missing = c->pass->full || (!root && it->schema != pschema) ||
	    *nprev < it->nstates;
	return prev;
}

int
tend_call_reconcile(struct tend_comp *c, struct tend_handler *h,
    const struct tend_key *key, const void *desired, size_t dlen,
    const struct tend_bytes *prev, size_t nprev, bool missing, bool never,
    struct tend_reconcile_out *out)
{
	struct tend_reconcile_in in = {
		.key = key,
		.desired = desired,
		.desired_len = dlen,
		.prev = prev,
		.nprev = nprev,
		.prev_may_be_missing = missing,
		.arena = &c->arena,
		.prev_never_applied = never,
	};

	memset(out, 0, sizeof *out);
	tend_error_clear();
	int rc = h->ops->reconcile(h, &in, out);
	if (rc)
		return rc;
	if (out->action && !out->sink)
		return tend_error_set(TEND_ERROR,
		    "connector %s: reconcile returned an action without a sink",
		    h->ops->kind);
	return 0;
}

/* Append the new state to the candidates: (0, Deleted) first for a new
 * item, so a crash before commit leaves "may be missing" (R9). So does a
 * write planned while the target may differ from every record (a full
 * pass, a lossy change): if it fails, the next pass must know the target
 * is not what the records say, not settle on an equal record. */
void
tend_append_state(struct tend_comp *c, struct item *dst, const struct item *src,
    const struct tend_reconcile_out *out, bool missing)
{
	size_t n = 0, have = src ? src->nstates : 1;
	struct state *st = tend_arena_alloc(&c->arena, (have + 2) * sizeof *st);

	/* an older candidate equal to the new one adds nothing: drop it, so
	 * repeated failures do not grow the list ([a, D, D, D]) */
	for (size_t i = 0; i < have; i++) {
		struct state s = src ? src->states[i]
				     : (struct state){.deleted = true};

		if (s.deleted && out->record_absent)
			continue;
		if (!s.deleted && !out->record_absent &&
		    s.len == out->record.len &&
		    (s.len == 0 || memcmp(s.rec, out->record.data, s.len) == 0))
			continue;
		st[n++] = s;
	}
	bool marked = false;
	for (size_t i = 0; i < n; i++)
		marked |= st[i].deleted;
	if (missing && src && !out->record_absent && !marked)
		st[n++] = (struct state){.version = c->curr, .deleted = true};
	st[n].version = c->curr;
	st[n].deleted = out->record_absent;
	st[n].rec = out->record_absent ? NULL
				       : tend_arena_memdup(&c->arena,
					     out->record.data, out->record.len);
	st[n].len = out->record_absent ? 0 : out->record.len;
	dst->states = st;
	dst->nstates = n + 1;
}

void
tend_fill_action(struct plan *p, const struct tend_reconcile_out *out,
    const struct tend_bytes *prev, size_t nprev, bool missing)
{
	p->kind = PLAN_ACTION;
	p->record_changed = out->record_absent || nprev == 0;
	p->tried = false;
	for (size_t i = 0; i < nprev && !out->record_absent; i++) {
		bool same = prev[i].len == out->record.len &&
		    (!prev[i].len ||
			memcmp(prev[i].data, out->record.data, prev[i].len) == 0);

		p->record_changed |= !same;
		p->tried |= same;
	}
	p->action = out->action;
	p->sink = out->sink;
	p->is_delete = out->record_absent;
	p->inval = out->invalidation;
	p->nprev = (unsigned)nprev;
	p->missing = missing;
	if (out->record_absent)
		p->op = TEND_OP_DELETE;
	else
		p->op = nprev ? TEND_OP_UPDATE : TEND_OP_CREATE;
}
