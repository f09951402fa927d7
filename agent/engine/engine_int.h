/*
 * engine_int.h - the engine's private structures, shared by engine.c
 * (passes, batches, sinks), commit.c (pre-commit and commit bodies),
 * reconcile.c (the reconcile decision) and registry.c (providers).
 *
 * One rule on calls (issue 16): reconcile.c is pure and called, never
 * calling back. engine.c and commit.c may call it (what it offers is in
 * reconcile.h, alone); it calls no function defined in engine.c or
 * commit.c, the declarations below included, and gets what it needs as
 * arguments. tests/reconcile_deps.sh checks it.
 *
 * Identities:
 *   cid   component id  = XXH3-128 of the encoded component path
 *   tsid  target state  = combine(provider id, fp(key)); a container's
 *                         child provider has the container's tsid as id
 *   pid   provider generation id of a target state's parent provider
 *         (0 for root providers); a destructive change gives a new one
 *
 * Store rows (see store.h): ITEM cid.tsid.pid -> item, OWNER tsid -> cid,
 * CEX / TOMB parent-cid.child-cid -> child path, MEMO cid, COMP cid,
 * NAME tsid -> parent id + key (for readable paths).
 */
#ifndef TEND_ENGINE_INT_H
#define TEND_ENGINE_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "inspect.h"
#include "store.h"
#include "tend/arena.h"
#include "tend/buf.h"
#include "tend/engine.h"
#include "tend/events.h"
#include "tend/fingerprint.h"

/* Cross-file functions of the engine that libtend does not export. Those
 * exported today stay so (libtend.so's symbol list does not change): this
 * is for new ones. */
#ifndef TEND_HIDDEN
#define TEND_HIDDEN __attribute__((visibility("hidden")))
#endif

struct pass;

/* Order of fingerprints (tsids, cids): bytewise, as LMDB sorts keys. */
static inline int
cmp_fp(const struct tend_fp *a, const struct tend_fp *b)
{
	return memcmp(a->b, b->b, 16);
}

/* ---- providers (registry.c) ---- */

struct attach {
	char *type;
	struct tend_provider *prov;
};

struct tend_provider {
	struct tend_fp id;
	struct tend_engine *eng;
	char *name;  /* readable: "@tend/dir/(\"out\")" */
	bool root;
	bool attachment;
	struct tend_handler *handler; /* NULL: pending */
	uint64_t gen_id, gen_schema;  /* roots: 0, 0 */
	/* NAME row for this provider: parent id and encoded key */
	struct tend_fp name_parent;
	struct tend_buf name_key;
	struct attach *att;
	size_t natt;
	struct tend_provider *hnext; /* registry hash chain */
	struct tend_provider *parent_container; /* for attachments */
	uint64_t seen_pass;	     /* last pass that applied its container */
	uint64_t undo_pass;	     /* preview: saved in this pass */
	bool preview_new;	     /* preview: created in the preview */
	/* the pass whose action on its container was destructive: that
	 * pass's sink empties it before its children are written */
	uint64_t wiped_pass;
};

struct registry {
	struct tend_provider **tab;
	size_t size, n;
};

void tend_registry_init(struct registry *r);
void tend_registry_finish(struct registry *r);
struct tend_provider *tend_registry_get(struct registry *r,
    const struct tend_fp *id);
void tend_registry_put(struct registry *r, struct tend_provider *p);
void tend_registry_remove(struct registry *r, struct tend_provider *p);
void tend_provider_free(struct tend_provider *p);
/* Install a handler on a resolved child provider and (re)build its
 * attachment providers. Takes ownership of `h`. */
void tend_provider_resolve(struct tend_provider *p, struct tend_handler *h);
/* Forget a container's child provider and its attachments (freed by
 * tend_registry_reap once no component can point at them). */
void tend_provider_unregister(struct tend_engine *eng,
    struct tend_provider *p);
void tend_registry_reap(struct tend_engine *eng);

/* ---- components ---- */

enum comp_mode { MODE_BUILD, MODE_DELETE };

struct decl {
	struct tend_fp tsid;
	struct tend_provider *prov;
	struct tend_key key;
	const uint8_t *kenc;
	size_t kenc_len;
	const void *value;
	size_t vlen;
	struct tend_provider *child; /* containers */
};

struct child_ref {
	struct tend_fp cid;
	const uint8_t *path;
	size_t len;
};

struct dep {
	struct tend_fp id;
	uint64_t gen_id, gen_schema;
};

struct state {
	uint64_t version;
	bool deleted;
	const uint8_t *rec;
	size_t len;
};

struct item {
	bool container;
	struct tend_fp parent; /* parent provider id */
	uint64_t schema;
	uint64_t gen_id, gen_schema;
	const uint8_t *key;
	size_t keylen;
	struct state *states;
	size_t nstates;
};

enum plan_kind {
	PLAN_ACTION, /* an action for a sink; item rewritten */
	PLAN_DROP,   /* stale or provider gone: forget without action */
	PLAN_SCHEMA, /* no action, but the parent schema moved on */
	PLAN_MOVE,   /* taken over from another owner, no action */
	PLAN_CANCELLED, /* superseded in the same batch by a new owner */
};

struct plan {
	enum plan_kind kind;
	struct tend_fp tsid;
	uint64_t pid;
	struct item item; /* state after pre-commit */
	struct decl *decl; /* NULL in phase 2 */
	struct tend_provider *prov;
	bool declared; /* the tsid is declared in this component */
	bool preempted;
	struct tend_fp prev_owner;
	bool claim;    /* write the owner row */
	bool new_item; /* write NAME rows */
	/* action */
	void *action;
	struct tend_sink *sink;
	bool is_delete;
	enum tend_op op;
	enum tend_invalidation inval;
	unsigned nprev;
	bool missing;
	bool never; /* no write of it was ever confirmed */
	bool record_changed;
	/* re-applies the single settled record: nothing to persist, before
	 * or after (a container's per-pass refresh) */
	bool refresh;
	struct tend_key key;
	/* results */
	int status;
	char *error;
	struct tend_handler *child;
	bool applied;
	bool forgotten; /* a delete that removes nothing (tend_event) */
	bool adopted; /* a first write that found it there (tend_event) */
	/* an earlier apply (cut short) may have written this very record:
	 * what holds it is not reported as adopted, but as created */
	bool tried;
	/* preview: a write into a container this pass rebuilds, over
	 * something tend did not write (tend_event) */
	bool replaces;
	/* applied with `error` as a note, or (warn) a failure beside it */
	bool warn;
	bool unchanged; /* a repair that found its record there (tend_event) */
};

struct tend_comp {
	struct tend_engine *eng;
	struct pass *pass;
	struct tend_comp *parent;
	struct tend_arena arena;
	struct tend_buf path; /* encoded keys, no terminator */
	struct tend_fp cid;
	struct tend_fp parent_cid;
	bool has_parent;
	char *display;
	const char *app;
	const char *processor;
	enum comp_mode mode;
	struct tend_mount_opts mopts;
	bool memoize;
	bool memo_chain; /* it or an ancestor is memoised */
	bool memo_delete;
	bool failed;	    /* the body failed */
	bool conflict;	    /* ... or it declares another's target state */
	bool child_failed;  /* a mounted child failed */
	bool in_preflight;  /* delete: skip, re-mounted meanwhile */
	char *error;
	/* declarations */
	struct decl *decls;
	size_t ndecls, cdecls;
	bool decls_sorted;
	struct child_ref *children;
	size_t nchildren, cchildren;
	struct dep *deps;
	size_t ndeps, cdeps;
	/* pre-commit results */
	struct plan *plans;
	size_t nplans, cplans;
	bool existed;
	uint8_t hdr_flags, stored_flags;
	uint64_t curr;
	bool token_was_set;
	size_t ndeferred;
	bool any_failed; /* an action of this component failed */
	/* commit results */
	struct child_ref *gc;
	size_t ngc, cgc;
	int waiter;	 /* delete: index of the parent waiting for us, -1 */
	bool keep;	 /* build with deferred items: retried at pass end */
	bool retry;	 /* this run is such a retry: not counted again */
	bool failed_before; /* an action failed in the run before the retry */
	bool done;
	int *status_out; /* use_mount: the outcome, after commit */
	const char *count_app; /* its rows' app (counters), once known */
	size_t count_applen;
	bool count_app_known;
};

struct tend_context {
	struct tend_engine *eng;
};

struct resource {
	char *name;
	void *ptr;
};

struct subscriber {
	unsigned mask;
	tend_event_fn *fn;
	void *arg;
};

struct cidset {
	struct tend_fp *tab;
	size_t size, n;
	bool mapped; /* tab is an mmap of its own (cidset_table) */
};

struct undo {
	struct tend_provider *prov;
	struct tend_handler *handler;
	uint64_t gen_id, gen_schema;
	bool registered;
};

/* A deleted component waiting for its tombstoned children. */
struct wait {
	struct tend_fp cid, parent_cid;
	bool has_parent;
	uint8_t *path;
	size_t len;
	size_t remaining; /* children not finished */
	size_t done;	  /* children deleted */
	int parent_waiter;
};

/* Plans of the batch being pre-committed, by tsid, so that a component
 * taking a state over can cancel the previous owner's pending action. */
struct planref {
	struct tend_fp tsid;
	struct tend_comp *comp;
	size_t index;
};

struct pass {
	uint64_t id;
	uint64_t uid; /* unique in the process: tend_context_pass */
	bool incremental; /* run_one: providers of earlier passes count */
	const char *app;
	bool full, preview;
	struct tend_stats stats;
	struct tend_comp **queue;
	size_t nqueue, cqueue;
	struct cidset built;
	struct cidset gone; /* deleted by mount_gone: not by the gc again */
	/* containers (provider ids) a child's delete failed in: theirs
	 * waits for the next pass */
	struct cidset blocked;
	struct cidset failed_deletes; /* components: not again this pass */
	struct cidset deferred_ids;   /* ever in `deferred` this pass */
	struct child_ref *deferred; /* delete comps to retry: (cid, path) */
	struct tend_fp *deferred_parent;
	int *deferred_waiter; /* their parents' waits, finished by the retry */
	size_t ndeferred, cdeferred;
	struct undo *undo;
	size_t nundo, cundo;
	int status;
	bool dropping;
	bool retrying; /* retry_deferred: containers' deletes go now */
	bool root_done;
	struct wait *waits;
	size_t nwaits, cwaits;
	struct tend_comp **kept; /* builds whose phase 2 waited */
	size_t nkept, ckept;
	struct tend_comp **batch; /* the batch being processed */
	size_t nbatch;
	struct planref *refs; /* open addressing, size a power of two */
	size_t nrefs, crefs;
	/* preview: first writes whose check found something else at the
	 * key, decided at the pass's end (settle_suspects), and the keys
	 * the pass deletes: a delete under the key (a directory of tend's
	 * that becomes a file) empties it before the write */
	struct suspect *suspects;
	size_t nsuspects, csuspects;
	struct gone_key *gone_keys;
	size_t ngone_keys, cgone_keys;
};

/* Is provider p visible to this pass (R3, made explicit)? */
bool tend_provider_visible(const struct pass *pass,
    const struct tend_provider *p);
void tend_pass_ref_plan(struct pass *pass, struct tend_comp *c, size_t i);
struct plan *tend_pass_find_plan(struct pass *pass, const struct tend_fp *tsid,
    const struct tend_fp *owner);

struct tend_engine {
	struct tend_store *st;
	struct registry reg;
	struct resource *res;
	size_t nres;
	struct subscriber *subs;
	size_t nsubs;
	struct tend_context ctx;
	uint8_t token[16];
	uint64_t npass;
	size_t batch;
	struct pass *pass;
	char *state_dir;
	struct tend_provider *graveyard;
	tend_settle_hook *settle_hook;
	void *settle_arg;
	struct tend_component_hooks comp_hooks;
	void *comp_arg;
	bool local_ids; /* the store's format >= 2: engine.c's ids */
	bool compact_rows; /* format >= 3: rows.c's compact layout */
	/* memo contexts read (format 3): id -> bytes, a few, replaced
	 * round-robin; an id names one content for good */
	struct mctx {
		uint8_t id[8];
		uint8_t *bytes;
		size_t len;
	} mctx[16];
	size_t mctx_next;
};

/* engine.c: the id of a component from its encoded path (inspect.h) */
struct tend_fp tend_engine_cid(const struct tend_engine *eng,
    const void *path, size_t len);
/* The id of app's component at `path` (its keys after the app's) */
struct tend_fp tend_engine_app_cid(const struct tend_engine *eng,
    const char *app, const struct tend_key *path, size_t npath);

/* commit.c: the bodies of the pre-commit and commit transactions */
int tend_precommit_comp(struct tend_txn *txn, struct tend_comp *c);
int tend_commit_comp(struct tend_txn *txn, struct tend_comp *c);
void tend_comp_withhold_memos(struct tend_comp *c);

/* engine.c helpers used by commit.c */
void tend_pass_save_provider(struct pass *pass, struct tend_provider *p);
/* Does component `owner` still declare target state `tsid` in this pass
 * (inspect.h: tend_component_hooks)? `owner_path` is its display path. */
bool tend_pass_still_declares(struct tend_comp *c, const struct tend_fp *owner,
    const char *owner_path, const struct tend_fp *tsid, const char *provider);
/* commit.c: an owner row naming a conflict's contenders */
bool tend_contest_row(const struct tend_bytes *v);
/* Its next contender from offset `at` (32 first); 0 at the end. */
size_t tend_contest_next(const struct tend_bytes *v, size_t at,
    struct tend_fp *cid, const char **path, size_t *len);
int tend_contest_add(struct tend_txn *txn, const struct tend_fp *tsid,
    const struct tend_fp *holder, struct tend_comp *const *comps, size_t n);
/* c's conflict over STATE with `other`: "conflict: STATE is declared by
 * A and by B: neither is applied, what is there stays" (or, when `gone`
 * owned it and stopped declaring it in this pass, "..., and what GONE
 * wrote there goes with it"), or, when `other` owns it and goes on
 * (owner), "...: it stays OTHER's, C's is not applied" */
void tend_conflict_message(struct tend_comp *c, const char *other,
    const char *provider, const struct tend_key *key, bool owner,
    const char *gone);
bool tend_cidset_has(const struct cidset *s, const struct tend_fp *fp);

/* ---- row values (rows.c): ITEM, COMP and MEMO, in two layouts ---- */

#define ROW_FIXED 1   /* numbers in fixed widths (stores of format < 3) */
#define ROW_COMPACT 2 /* numbers in varints, absent fields left out */


int tend_item_decode(struct item *out, const void *data, size_t len,
    struct tend_arena *arena);
void tend_item_encode(struct tend_buf *out, const struct item *it,
    bool compact);
/* What the counters need of an encoded item, nothing copied (EINVALID if
 * it is not one). */
int tend_item_peek(const void *data, size_t len, bool *container,
    size_t *nstates, bool *first_deleted);

/* A component's header; the pointers point into the row. */
struct hdr_row {
	uint64_t version;
	const uint8_t *token; /* 16 bytes, NULL if none */
	uint8_t flags;        /* HDR_HAS_CHILDREN (commit.c): six bits */
	bool has_parent;
	const uint8_t *parent; /* 16 bytes if has_parent */
	const uint8_t *proc, *path;
	size_t proclen, pathlen;
	const uint8_t *memo; /* layout 2: the memo that follows, or NULL */
	size_t memolen;
};
void tend_hdr_encode(struct tend_buf *b, const struct hdr_row *h,
    bool compact);
/* 0, or -1 if the row is not a header (no error is set: readers of
 * many rows skip one; the pass's error stays) */
int tend_hdr_parse(struct hdr_row *h, const void *data, size_t len);

/* A component's memo; the pointers point into the row. */
struct memo_row {
	const uint8_t *input, *logic; /* 16 bytes each */
	size_t ndeps;
	const uint8_t *deps; /* tend_memo_dep_next walks them */
	size_t depslen;
	bool compact;
	/* layout 3: the id of its context (logic and dependencies), which
	 * tend_memo_load resolves; NULL in the others */
	const uint8_t *ctx;
};
#define MEMO_SHARED 3 /* a memo's layout 3 (rows.c) */
void tend_memo_ctx_encode(struct tend_buf *b, const struct tend_fp *logic,
    const struct dep *deps, size_t n);
void tend_memo_shared_encode(struct tend_buf *b, const struct tend_fp *input,
    const uint8_t ctx[8]);
int tend_memo_ctx_parse(struct memo_row *m, const void *data, size_t len);
/* commit.c: component cid's memo, parsed, its context resolved (m's
 * pointers valid until the next write in txn or the next load): 0,
 * TEND_ENOTFOUND (none) or TEND_EINVALID (one that cannot be read; no
 * error is set) */
int tend_memo_load(struct tend_txn *txn, struct tend_engine *eng,
    const struct tend_fp *cid, struct memo_row *m);
void tend_memo_encode(struct tend_buf *b, const struct tend_fp *input,
    const struct tend_fp *logic, const struct dep *deps, size_t n,
    bool compact);
/* commit.c: component cid's memo row (or, format 3, the memo in its
 * COMP row): 0 and its bytes, or TEND_ENOTFOUND */
int tend_memo_get(struct tend_txn *txn, const struct tend_engine *eng,
    const struct tend_fp *cid, struct tend_bytes *out);
/* 0, or -1 if the row is not a whole memo */
int tend_memo_parse(struct memo_row *m, const void *data, size_t len);
/* The dependency at offset *at of m's (0 for the first), *at moved past
 * it; false at a truncated one. */
bool tend_memo_dep_next(const struct memo_row *m, size_t *at,
    struct dep *out);

/* ---- per-app counters (counts.c; store.h says how they are kept) ---- */

/* What an item counts for, times `sign`, added to *c: an encoded row
 * (EINVALID if it is not one), or a decoded one. */
TEND_HIDDEN int tend_count_row(struct tend_counts *c, const void *data,
    size_t len, int sign);
TEND_HIDDEN void tend_count_item(struct tend_counts *c, const struct item *it,
    int sign);
/* The app of an encoded component path (its first key, a string, in
 * `arena`); false if it has none. */
TEND_HIDDEN bool tend_count_path_app(const uint8_t *path, size_t len,
    struct tend_arena *arena, const char **app, size_t *applen);
/* The same from a COMP row (and whether it is an app's root) */
TEND_HIDDEN bool tend_count_header_app(const struct tend_bytes *hdr,
    struct tend_arena *arena, const char **app, size_t *applen, bool *root);
/* The store's recount (tend_store_set_recount): every counter from the
 * ITEM and COMP rows. */
TEND_HIDDEN int tend_count_recount(struct tend_txn *txn, void *arg);

/* engine.c and batch.c: what the components and passes (engine.c) and
 * the batches (batch.c) call of each other */

/* engine.c */
TEND_HIDDEN void emit(struct tend_engine *eng, struct tend_event *ev);
TEND_HIDDEN bool wants(struct tend_engine *eng, enum tend_event_kind kind);
void tend_cidset_add(struct cidset *s, const struct tend_fp *fp);
/* Room for n ids without growing; tend_cidset_free releases the table. */
void tend_cidset_reserve(struct cidset *s, size_t n);
void tend_cidset_free(struct cidset *s);
TEND_HIDDEN size_t ref_slot(const struct tend_fp *fp, size_t size);
TEND_HIDDEN void clear_refs(struct pass *pass);
TEND_HIDDEN void comp_free(struct tend_comp *c);
TEND_HIDDEN int declare(struct tend_comp *c, struct tend_provider *p,
    const struct tend_key *key, const void *value, size_t len,
    struct tend_provider **child_out);

/* batch.c */
TEND_HIDDEN void enqueue(struct pass *pass, struct tend_comp *c);
TEND_HIDDEN bool declares(const struct tend_comp *x,
    const struct tend_fp *tsid);
TEND_HIDDEN struct tend_comp *delete_comp(struct tend_engine *eng,
    struct pass *pass, const struct tend_fp *parent_cid, bool has_parent,
    const uint8_t *path, size_t len);
TEND_HIDDEN int flush(struct tend_engine *eng, struct pass *pass);
TEND_HIDDEN void free_kept(struct pass *pass);
TEND_HIDDEN int retry_deferred(struct tend_engine *eng, struct pass *pass);
TEND_HIDDEN void settle_suspects(struct tend_engine *eng, struct pass *pass);

#endif
