/*
 * tend/target.h - the connector contract: handlers, reconcile and sinks.
 *
 * This mirrors CocoIndex v1's TargetHandler / TargetActionSink protocol:
 *
 *   reconcile(key, desired | NULL, prev_possible_records[], nprev,
 *             prev_may_be_missing) -> output | none
 *
 * is pure (no I/O, no blocking) and decides an action; sinks apply actions
 * in batches; the engine persists tracking records around the sink so that
 * a crash never loses or orphans anything:
 *
 *   1. pre-commit: the new record is appended to the previous ones
 *      (durable) before any sink runs;
 *   2. sinks apply, idempotently;
 *   3. commit: the record set becomes {new} for every action that
 *      succeeded; a failed action keeps every candidate, so the next pass
 *      reconciles against all of them.
 *
 * A container target (a directory, a git tree) is a target state whose
 * sink returns one child handler per action; the engine uses it to
 * reconcile the container's children.
 */
#ifndef TEND_TARGET_H
#define TEND_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tend/key.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 2: tend_handler_ops.flags. Handlers of ABI 1 (no flags) still load. */
#define TEND_TARGET_ABI 2

struct tend_arena;
struct tend_buf;
struct tend_context;
struct tend_handler;
struct tend_sink;

/* A tracking record: connector-chosen bytes (a fingerprint, a spec). */
struct tend_bytes {
	const uint8_t *data;
	size_t len;
};

enum tend_invalidation {
	TEND_INVALIDATE_NONE = 0,
	/* children may have drifted: each is re-applied once (records kept,
	 * prev_may_be_missing = true) */
	TEND_INVALIDATE_LOSSY = 1,
	/* the container was rebuilt empty: children are re-declared from
	 * scratch (prev = [], missing = true); old entries are forgotten
	 * without delete actions */
	TEND_INVALIDATE_DESTRUCTIVE = 2,
};

struct tend_reconcile_in {
	const struct tend_key *key;
	/* The declared value (connector-defined bytes), or NULL when the
	 * target state is no longer declared (NON_EXISTENCE). */
	const void *desired;
	size_t desired_len;
	/* Every record the target may currently hold, oldest first. More
	 * than one after an interrupted apply. Borrowed for the call. */
	const struct tend_bytes *prev;
	size_t nprev;
	/* The target may not exist (first declaration, an interrupted
	 * insert or delete, a lossy container change, a full reprocess). */
	bool prev_may_be_missing;
	/* Allocate the action and the record here; freed by the engine. */
	struct tend_arena *arena;
	/* No write of this target state has ever been confirmed: the first
	 * declaration, or one whose first apply failed or was cut short
	 * (then `prev` holds what that apply may have written). Whatever
	 * is at the key that equals none of `prev` (nor the desired value)
	 * is not the target's own: a sink that finds such a thing should
	 * leave it and fail the action ("tend creates, changes and deletes
	 * only what it created"; see TEND_HANDLER_KEEPS_FOREIGN). ABI 2. */
	bool prev_never_applied;
};

struct tend_reconcile_out {
	/* The action for the sink; NULL means "nothing to do" (none). */
	void *action;
	/* Required when action != NULL. Sinks are batched by identity. */
	struct tend_sink *sink;
	/* The new tracking record; ignored when record_absent. */
	struct tend_bytes record;
	/* true: after the action the target no longer exists (a delete). */
	bool record_absent;
	/* For container targets: what happened to the children. */
	enum tend_invalidation invalidation;
};

struct tend_attachment {
	const char *type;		/* e.g. "manifest"; borrowed */
	struct tend_handler *handler; /* owned by the engine afterwards */
};

/* The start of a check's reason when nothing is at the key (ops->check) */
#define TEND_CHECK_ABSENT "missing"
/* ... and when something that is not the target's own is at the key, and
 * a sync will not replace it (a directory where a file was written):
 * check does not promise that sync --full repairs it */
#define TEND_CHECK_IN_THE_WAY "in the way"
/* ... and when the target is behind what tend applied, and the next plain
 * sync catches it up (a git tag left behind its ref's tip): check says
 * so rather than "tend sync --full repairs it" */
#define TEND_CHECK_BEHIND "left behind"

struct tend_handler_ops {
	unsigned abi; /* TEND_TARGET_ABI */
	const char *kind;
	/*
	 * Decide the action. Pure: no I/O. Fill `out` (zeroed by the engine)
	 * and return 0; leave out->action NULL for "nothing to do". A non-zero
	 * return is an error of the declaring component (message via
	 * tend_error_set).
	 */
	int (*reconcile)(struct tend_handler *h,
	    const struct tend_reconcile_in *in, struct tend_reconcile_out *out);
	/*
	 * Optional: the attachment types this child handler (one a
	 * container's sink, preview_child or open_child returned) offers;
	 * tend_provider_attachment() finds them by type. A root provider's
	 * handler is never asked.
	 *
	 * `out` has room for `max` entries (16 in this version; types past
	 * that are not supported). Fill out[0] to out[n - 1] and return n,
	 * at most `max` (the engine reads every entry below the count it
	 * gets: more than `max` reads past `out`); entries past n are not
	 * looked at. Give each type once. Each `type` must outlive the call,
	 * as the engine copies it after the return: a string literal is
	 * simplest. Every returned handler is the engine's, used or not
	 * (tend check keeps the type it looks for and destroys the rest).
	 *
	 * Called each time a handler becomes its provider's handler, so
	 * more than once for one handler: when a container's sink hands it
	 * over (every pass that applies or refreshes the container); in a
	 * plan, on preview_child's handler, then again on the handler it
	 * stood in for when the plan puts that back; and on open_child's
	 * (tend drop, tend check, a pass deleting the children of a
	 * container not declared again). Each call must return new
	 * handlers: the previous call's are destroyed.
	 */
	size_t (*attachments)(struct tend_handler *h,
	    struct tend_attachment *out, size_t max);
	/*
	 * Optional: for preview passes (tend plan), the child handler a
	 * container's sink would return for (key, desired), built without
	 * any I/O. Without it a preview cannot look inside new containers.
	 */
	struct tend_handler *(*preview_child)(struct tend_handler *h,
	    const struct tend_key *key, const void *desired,
	    size_t desired_len);
	/*
	 * Optional: the child handler of the container (key, record) built
	 * without any I/O from its stored record alone. With it the engine
	 * can delete the children of a container whose declaring component
	 * did not run in this pass (tend drop, a target moved elsewhere) one
	 * by one, before the container goes, instead of trusting the
	 * container's delete to remove them; and `tend check` can ask
	 * children for drift.
	 */
	struct tend_handler *(*open_child)(struct tend_handler *h,
	    const struct tend_key *key, const struct tend_bytes *record);
	/*
	 * Optional: compare the target with its tracking record (tend
	 * check). Return 0 if it matches, TEND_ECONFLICT with a reason in
	 * `why` if it drifted, or an error. A reason that begins with
	 * TEND_CHECK_ABSENT says the target holds nothing at the key: tend
	 * check then knows an interrupted delete of it is done. One that
	 * begins with TEND_CHECK_IN_THE_WAY says what is there is not the
	 * target's to replace: the user must move it first.
	 */
	int (*check)(struct tend_handler *h, struct tend_context *ctx,
	    const struct tend_key *key, const struct tend_bytes *record,
	    struct tend_buf *why);
	/* Free the handler. Required. */
	void (*destroy)(struct tend_handler *h);
	/* TEND_HANDLER_* bits (ABI 2; an ABI 1 table has none) */
	unsigned flags;
};

/*
 * The handler's sink leaves what it finds at a key no write of which was
 * confirmed (prev_never_applied) unless it holds one of the key's
 * records or the desired value, and fails the action: tend writes only
 * what it wrote. With this bit, tend plan asks check about such keys
 * and shows the ones that hold something else as failing ("in the way"),
 * and tend check says "in the way" of them, not "the next sync retries
 * it". Its check must say TEND_CHECK_ABSENT when the key holds nothing.
 */
#define TEND_HANDLER_KEEPS_FOREIGN 0x1u

/* Embed first in a connector's handler struct. */
struct tend_handler {
	const struct tend_handler_ops *ops;
};

/* Assert the ops are usable (ABI, reconcile, destroy) and set them. */
void tend_handler_init(struct tend_handler *h,
    const struct tend_handler_ops *ops);

struct tend_apply_result {
	/* 0, or a negative tend_status; set `error` too. The engine zeroes
	 * the results before the call. */
	int status;
	/* The four flags sit in the padding after `status`, so that the
	 * array's stride is the one of a sink built before them: such a
	 * sink never sets them, and they stay false. */
	/* A delete that left the key as it was: nothing of the state's was
	 * there (a state no write of which was confirmed, at a key that
	 * holds none of its records, or nothing). The state is forgotten;
	 * reports do not call it a delete. */
	bool left;
	/* A first write (prev_never_applied) that found the key holding
	 * the desired value already and left it as it was: the state is
	 * adopted (tend's from now on, deleted with its declaration);
	 * reports do not call it a create. */
	bool adopted;
	/* With status 0 and `error` set: the action applied, and something
	 * the sink does beside it failed (a git tag that did not follow
	 * its ref): the state settles as applied, the pass reports the
	 * message as a failure (exit 1). Without it, a message on a success
	 * is a note the reports show (a tag moved to its ref's tip). */
	bool warn;
	/* A write that re-applied the state's own record (a repair, see
	 * tend_reconcile_repairs: tend sync --full) and found the key
	 * holding it already, so wrote nothing: the reports say "verified",
	 * not "updated". */
	bool unchanged;
	/* A message for a failed action, or a success's note or warning
	 * (heap string, engine frees). */
	char *error;
	/* For a container action that created or kept the container: the
	 * child handler (the engine owns it afterwards). NULL otherwise. */
	struct tend_handler *child;
};

/*
 * A batch of actions for one sink. The engine calls apply once per sink
 * per batch with every action that reconciles chose this sink for, in
 * declaration order, deletes last. Must be idempotent: the same action may
 * be applied again after a crash.
 */
typedef void tend_sink_apply_fn(struct tend_sink *sink,
    struct tend_context *ctx, void *const *actions, size_t n,
    struct tend_apply_result *results);

struct tend_sink {
	tend_sink_apply_fn *apply;
	const char *name; /* for logs and events */
};

/*
 * Named context resources (CocoIndex's ContextKey): target keys carry the
 * stable name, sinks resolve the live object at apply time. Returns NULL
 * when nothing is registered under `name`.
 */
void *tend_context_get(struct tend_context *ctx, const char *name);

/*
 * The pass an apply belongs to: the same for every batch of one pass,
 * different for every pass of every engine of the process (0 outside a
 * pass). A sink may build one result over the batches of a pass: the git
 * target's one commit per pass, which each batch amends.
 */
uint64_t tend_context_pass(const struct tend_context *ctx);

/*
 * The convergence rule for reconcile (semantics R50), for a declared
 * value: true when no write is needed, i.e. when
 * in->prev_may_be_missing is false and each of the in->nprev previous
 * records is exactly `len` bytes equal to `rec` (the record this
 * reconcile would store). Byte equality only: the records must be
 * canonical (the same value always encodes to the same bytes).
 *
 * False after an interrupted apply unless every candidate matches, on a
 * first declaration, after a lossy invalidation of the container, in a
 * full pass (tend sync --full) and whenever a candidate is a pending
 * delete: in each of those the engine sets prev_may_be_missing. With no
 * record and prev_may_be_missing false it is (vacuously) true; the
 * engine never passes that pair. For a state no longer declared
 * (desired == NULL) it does not apply: delete when nprev > 0 or
 * prev_may_be_missing.
 */
bool tend_reconcile_settled(const struct tend_reconcile_in *in,
    const void *rec, size_t len);

/*
 * A write that is a repair: the state was applied with this very record
 * (every previous record equals `rec`, and a write of it was confirmed),
 * and only prev_may_be_missing asks for the write (tend sync --full). A
 * sink may look first, and leave a key that holds the record as it is
 * (the result's `unchanged`): no write for what did not drift.
 */
bool tend_reconcile_repairs(const struct tend_reconcile_in *in,
    const void *rec, size_t len);

/*
 * For a first write (prev_never_applied): the previous records of `len`
 * bytes (others are skipped), copied end to end into in->arena, for the
 * sink to tell what an earlier apply may have written from what is
 * somebody else's (TEND_HANDLER_KEEPS_FOREIGN). *n gets their count.
 */
const uint8_t *tend_reconcile_prev_copy(const struct tend_reconcile_in *in,
    size_t len, size_t *n);

/* Convenience for sinks: set a formatted error on a result. */
void tend_apply_fail(struct tend_apply_result *r, int status,
    const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ... and on an applied action: a failure beside it (warn, counted as an
 * error of the pass) or a note. The status stays 0. */
void tend_apply_warn(struct tend_apply_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void tend_apply_note(struct tend_apply_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif

#endif
