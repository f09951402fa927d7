/*
 * reconcile.h - what reconcile.c offers the engine, and all it needs.
 *
 * reconcile.c is the pure part of a component's pre-commit: for one
 * target state, from its key, its desired value, its previous possible
 * records and whether the target may be missing from them, the handler's
 * reconcile decides an action, and the plan's action and the item's new
 * candidate records follow from it.
 *
 * The rule (issue 16): calls go one way. commit.c (the durable pre-commit
 * and commit of a component) calls what is declared here; reconcile.c
 * calls no function defined in engine.c or commit.c (nor the store, the
 * registry or inspection). What it needs comes in as arguments: the
 * component (it reads c->arena, c->curr and c->pass->full: the structures
 * of engine_int.h, no function), the handler (ops->reconcile is the
 * connector's), the stored item, the plan to fill. Besides those it uses
 * libc and the leaf helpers tend_arena_* and tend_error_* (arena.c,
 * status.c). tests/reconcile_deps.sh checks the rule.
 *
 * libtend-internal: hidden, not in libtend.so's symbol list.
 */
#ifndef TEND_RECONCILE_H
#define TEND_RECONCILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine_int.h"

/* Was no write of `it` ever confirmed? It leads with the new item's
 * "may be missing" marker, (0, Deleted), until its first settle. */
TEND_HIDDEN bool tend_item_never_applied(const struct item *it);
/* `it`'s non-deleted records, in stored order, into `out` (room for
 * it->nstates); their count */
TEND_HIDDEN size_t tend_item_records(const struct item *it,
    struct tend_bytes *out);
/* The previous possible records of `it` (its non-deleted candidates in
 * stored order, in c's arena), whether the target may be missing from
 * them (R8) and whether no write of it was ever confirmed. `it` NULL:
 * none, missing, never. */
TEND_HIDDEN struct tend_bytes *tend_prev_of(struct tend_comp *c,
    const struct item *it, size_t *nprev, bool *missing, bool *never,
    uint64_t pschema, bool root);
/* The handler's reconcile; an action must come with its sink. */
TEND_HIDDEN int tend_call_reconcile(struct tend_comp *c,
    struct tend_handler *h, const struct tend_key *key, const void *desired,
    size_t dlen, const struct tend_bytes *prev, size_t nprev, bool missing,
    bool never, struct tend_reconcile_out *out);
/* dst's candidate records: src's, then out's record at version c->curr. */
TEND_HIDDEN void tend_append_state(struct tend_comp *c, struct item *dst,
    const struct item *src, const struct tend_reconcile_out *out,
    bool missing);
/* p becomes a PLAN_ACTION: out's action and sink, its op, whether the
 * record changed. */
TEND_HIDDEN void tend_fill_action(struct plan *p,
    const struct tend_reconcile_out *out, const struct tend_bytes *prev,
    size_t nprev, bool missing);

#endif
