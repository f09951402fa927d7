/*
 * inspect.h - readable views of the tracking store (private to agent/).
 */
#ifndef TEND_INSPECT_H
#define TEND_INSPECT_H

#include "store.h"
#include "tend/buf.h"
#include "tend/engine.h"
#include "tend/fingerprint.h"

enum {
	TEND_DUMP_ITEMS = 1,
	TEND_DUMP_OWNERS = 2,
	TEND_DUMP_COMPS = 4, /* comp, cex, tomb, memo rows */
	TEND_DUMP_ALL = 7,
};

/* One line per row: "item /app/comp /@dict/a [D,1]", "owner /@dict/a ->
 * /app/comp", "cex /app/x", "tomb /app/x", "memo /app/x", "comp /app". */
int tend_engine_dump(struct tend_engine *eng, unsigned what,
    struct tend_buf *out);
int tend_inspect_ts_path(struct tend_txn *txn, const struct tend_fp *tsid,
    struct tend_buf *out);
int tend_inspect_comp_path(struct tend_txn *txn, const struct tend_fp *cid,
    struct tend_buf *out);
/* tend_inspect_ts_path of a state whose item row is at hand (`it`, or
 * NULL): an entry's parent and key are in it (a store of format 3 has
 * no NAME row for an entry) */
struct item;
int tend_inspect_item_path(struct tend_txn *txn, const struct tend_fp *tsid,
    const struct item *it, struct tend_buf *out);
/* The app a COMP row belongs to (its path's first key, in `arena`) and
 * whether it is the app's root; false if the row cannot be read. */
bool tend_inspect_header_app(const struct tend_bytes *hdr,
    struct tend_arena *arena, const char **app, size_t *applen, bool *root);
struct tend_store *tend_engine_store(struct tend_engine *eng);
/*
 * Does the store track the target state at path[0..n) below the root
 * provider `root` (path[0] the container's key, path[1] an entry's):
 * has it an owner? One point lookup, in `txn`; no provider need be
 * registered. An exclusive target's walk asks it of what no source
 * declares: an entry whose delete a killed pass left pending is tend's,
 * not a stray.
 */
bool tend_engine_state_owned(struct tend_engine *eng, struct tend_txn *txn,
    const char *root, const struct tend_key *path, size_t n);
/* The id of the component at encoded path `path` (an app's root: its
 * name's key), as this store spells ids. */
struct tend_fp tend_engine_cid(const struct tend_engine *eng,
    const void *path, size_t len);

/*
 * Called in the transaction that settles each component built in a pass,
 * with the component's display path: what the caller keeps beside the
 * component (a source item's signature) commits with it, not in a
 * transaction of its own. NULL unsets.
 */
typedef int tend_settle_hook(struct tend_txn *txn, const char *component,
    void *arg);
void tend_engine_set_settle_hook(struct tend_engine *eng,
    tend_settle_hook *fn, void *arg);

/*
 * Two components that declare one target state conflict (docs/tend.1,
 * CONFLICTS). The engine sees it when one of them declares a state the
 * other owns; the owner still declares it if it was mounted in this pass
 * (and, in this batch or queued, its declarations hold the state), or, if
 * it was not mounted (yet), when `live` says it will be: the caller knows
 * which of its components a full pass keeps. Without `live` an owner not
 * mounted in a full pass is taken over (the last one wins); in a partial
 * pass every owner not gone is live. `name` turns a component's display
 * path into what the user calls it (a source file) in the messages.
 * Either may be NULL.
 */
struct tend_component_hooks {
	/* `provider`: the name of the provider of the state in question (a
	 * component declares into its app's target: one of another app
	 * that now targets elsewhere does not declare it) */
	bool (*live)(const char *component, const char *provider, void *arg);
	void (*name)(const char *component, struct tend_buf *out, void *arg);
};
void tend_engine_set_component_hooks(struct tend_engine *eng,
    const struct tend_component_hooks *h, void *arg);

#endif
