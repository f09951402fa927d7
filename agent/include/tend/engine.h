/*
 * tend/engine.h - running declaration functions against the tracking store.
 *
 * An engine owns one tracking store (an LMDB environment in a state
 * directory), a registry of target-state providers and the named context
 * resources. A pass runs an app's root function as the root component; the
 * function declares target states and mounts child components (one per
 * source item, say). When components finish, the engine reconciles what
 * they declared against what they declared last time and applies the
 * difference through the connectors' sinks, in batches.
 *
 * Everything here runs on the caller's thread; an engine is not
 * thread-safe.
 */
#ifndef TEND_ENGINE_H
#define TEND_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tend/events.h"
#include "tend/fingerprint.h"
#include "tend/key.h"
#include "tend/target.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tend_engine;
struct tend_comp;     /* a running component: the scope of declarations */
struct tend_provider; /* a factory of target states of one kind */
struct tend_mount_opts;

struct tend_engine_opts {
	/* Initial LMDB map size in bytes (0: 256 MiB). It grows on demand. */
	uint64_t map_size;
	/* Components per write batch (0: 4096). */
	size_t batch;
};

/*
 * Open (creating if needed) the store in `state_dir`. Fails with a clear
 * message if the store was written by a newer format.
 * Returns 0 or TEND_ERROR.
 */
int tend_engine_open(struct tend_engine **out, const char *state_dir,
    const struct tend_engine_opts *opts);
/* Close the store and free every provider and handler. NULL is a no-op. */
void tend_engine_close(struct tend_engine *eng);

/*
 * Register a root provider under a unique name ("tend/dir"). Takes
 * ownership of `handler`. Returns 0, or TEND_EEXISTS for a duplicate name.
 */
int tend_engine_register_root(struct tend_engine *eng, const char *name,
    struct tend_handler *handler, struct tend_provider **out);

/* Look a root provider up by name; NULL if none. */
struct tend_provider *tend_engine_root(struct tend_engine *eng,
    const char *name);

/* Register a named resource for sinks (retained, not owned). */
void tend_engine_set_resource(struct tend_engine *eng, const char *name,
    void *resource);

/* Subscribe to events; `mask` is an OR of TEND_EV_MASK(kind). */
void tend_engine_subscribe(struct tend_engine *eng, unsigned mask,
    tend_event_fn *fn, void *arg);

/* A component's body: declare, mount; return 0 or an error status. */
typedef int tend_comp_fn(struct tend_comp *c, void *arg);

struct tend_pass_opts {
	/* Ignore memos; every target state "may be missing". */
	bool full;
	/* Compute actions, apply and persist nothing. */
	bool preview;
};

/*
 * Run one pass of `app`: `fn` is the root component, at path ("app").
 * Components that were mounted last time and are not mounted now are
 * deleted (their target states reverted) after their parent commits.
 * `stats_out` may be NULL.
 * Returns 0 when every component and action succeeded, TEND_ERROR when
 * some failed (the others were applied and committed), or another error
 * for a store failure.
 */
int tend_engine_run(struct tend_engine *eng, const char *app,
    tend_comp_fn *fn, void *arg, const struct tend_pass_opts *opts,
    struct tend_stats *stats_out);

/*
 * Run one component of `app` at `path` (relative to the app root) on its
 * own, as the agent does for one changed source item: the component's
 * parent (the app root) is not re-run. A NULL fn deletes the component
 * (its target states are reverted).
 */
int tend_engine_run_one(struct tend_engine *eng, const char *app,
    const struct tend_key *path, size_t npath, tend_comp_fn *fn, void *arg,
    const struct tend_mount_opts *mopts, const struct tend_pass_opts *opts,
    struct tend_stats *stats_out);

/*
 * A partial pass of `app`: `fn` runs as the app root's body, but the root
 * is neither submitted nor diffed: only the children it mounts
 * (tend_mount), keeps or reports gone (tend_mount_gone) are touched. The
 * agent's incremental passes: a few changed source items at a time.
 */
int tend_engine_run_partial(struct tend_engine *eng, const char *app,
    tend_comp_fn *fn, void *arg, const struct tend_pass_opts *opts,
    struct tend_stats *stats_out);

/*
 * Revert every target state `app` created, top-down, then forget the app.
 * Fails (keeping what could not be reverted, for a retry) if any delete
 * fails.
 */
int tend_engine_drop(struct tend_engine *eng, const char *app,
    struct tend_stats *stats_out);

/* ---- inside a component ---- */

struct tend_mount_opts {
	/* A name for stats ("copy", "exec"); NULL: inherited. */
	const char *processor;
	/* Memoize: skip the body while input_fp, logic_fp and every provider
	 * generation the body declared into are unchanged. */
	bool memo;
	struct tend_fp input_fp;
	struct tend_fp logic_fp;
	/* With memo: run the body even if the memo holds (the caller needs
	 * what it declares, e.g. it lost track of it in a crash), and
	 * memoize it again. */
	bool fresh;
};

/*
 * Declare that target state (provider, key) should hold `value` (`len`
 * bytes, copied). Declaring the same state twice in one component is an
 * error. Returns 0, TEND_EEXISTS (duplicate), or TEND_EINVALID (the
 * provider is not ready: its container's sink has not run).
 */
int tend_declare(struct tend_comp *c, struct tend_provider *p,
    const struct tend_key *key, const void *value, size_t len);

/*
 * Declare a container target state and get its child provider, pending
 * until the container's sink has run. Children cannot be declared on it in
 * the same component: use tend_mount_target() to get it resolved first.
 */
int tend_declare_container(struct tend_comp *c, struct tend_provider *p,
    const struct tend_key *key, const void *value, size_t len,
    struct tend_provider **child_out);

/*
 * Declare a container in a sub-component of its own
 * (path: parent / @tend/mount_target / (provider, key)), apply it now, and
 * return its resolved child provider (borrowed; valid while the engine
 * lives and the container is declared).
 */
int tend_mount_target(struct tend_comp *c, struct tend_provider *p,
    const struct tend_key *key, const void *value, size_t len,
    struct tend_provider **child_out);

/*
 * The attachment provider of `type` under a resolved child provider. The
 * same object every time. TEND_ENOTFOUND if the handler does not offer the
 * type, TEND_EINVALID if `p` is not resolved.
 */
int tend_provider_attachment(struct tend_provider *p, const char *type,
    struct tend_provider **out);

/*
 * The child provider of container (parent, key) as resolved by an earlier
 * pass in this engine, or NULL. For incremental passes (tend watch) that
 * declare into a container without re-declaring it. A NULL parent (what
 * tend_engine_root() returns for a name not registered) or key gives
 * NULL.
 */
struct tend_provider *tend_engine_child_provider(struct tend_engine *eng,
    struct tend_provider *parent, const struct tend_key *key);

/* Is the provider resolved (its handler known)? */
bool tend_provider_ready(const struct tend_provider *p);

/* Its readable path, as events report it (`provider`). */
const char *tend_provider_name(const struct tend_provider *p);

/* The provider's generation (0, 0 for root providers): it changes when
 * its container is invalidated (lossy: schema; destructive: id). */
void tend_provider_generation(const struct tend_provider *p, uint64_t *id,
    uint64_t *schema);

/*
 * Does the component at app / path... hold a memo for this input and
 * logic fingerprint (it last ran and committed with them)? For callers
 * that keep their own record of what is unchanged.
 */
bool tend_engine_memo_matches(struct tend_engine *eng, const char *app,
    const struct tend_key *path, size_t npath, const struct tend_fp *input,
    const struct tend_fp *logic);

/*
 * Mount a child component at parent / path[0] / ... / path[npath-1] and run
 * it now. Its failure does not fail the parent (it is reported and
 * counted). Returns 0, or the child's error for tend_use_mount().
 */
int tend_mount(struct tend_comp *c, const struct tend_key *path,
    size_t npath, tend_comp_fn *fn, void *arg,
    const struct tend_mount_opts *opts);
/* As tend_mount(), but the child is applied before this returns and its
 * error is returned to the caller. */
int tend_use_mount(struct tend_comp *c, const struct tend_key *path,
    size_t npath, tend_comp_fn *fn, void *arg,
    const struct tend_mount_opts *opts);

/*
 * Keep the child at parent / path... as it is, without running it: its
 * target states stay and it is not garbage-collected this pass. For a
 * caller that knows the child is unchanged (counted as unchanged), and
 * for the delete brake holding a vanished source item.
 */
int tend_mount_keep(struct tend_comp *c, const struct tend_key *path,
    size_t npath);

/*
 * The child at parent / path... existed and is gone: delete it now, in
 * the same batch as its parent, rather than after the parent commits (so
 * a git target makes one commit for a pass's changes and deletions). If
 * it cannot be deleted now, the parent's commit tombstones it as usual.
 */
int tend_mount_gone(struct tend_comp *c, const struct tend_key *path,
    size_t npath);

/* Components per batch from now on (0: the default 4096; SIZE_MAX: one
 * batch per pass, as a git target wants one commit per pass). */
void tend_engine_set_batch(struct tend_engine *eng, size_t n);

struct tend_engine *tend_comp_engine(struct tend_comp *c);
/* The component's readable path ("/site/@files/\"a.md\""); borrowed. */
const char *tend_comp_path(struct tend_comp *c);
/* Are we in a full-reprocess pass? */
bool tend_comp_full(struct tend_comp *c);

#ifdef __cplusplus
}
#endif

#endif
