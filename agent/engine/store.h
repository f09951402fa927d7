/*
 * store.h - the tracking store: typed tables in one LMDB environment.
 *
 * Private to agent/. The engine encodes keys and values; this module owns
 * every LMDB call (<lmdb.h> is included only by store.c), translates LMDB's
 * codes into tend_status, and grows the map when it fills.
 */
#ifndef TEND_STORE_H
#define TEND_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tend/target.h" /* struct tend_bytes */

enum tend_table {
	TEND_T_META,  /* "format" -> u32, "counts" -> u64 txn id,
		       * "count/APP" -> struct tend_counts, "last/APP" */
	TEND_T_COMP,  /* cid -> component header */
	TEND_T_ITEM,  /* cid tsid pid -> tracked item */
	TEND_T_OWNER, /* tsid -> cid */
	TEND_T_CEX,   /* parent cid, child cid -> child path */
	TEND_T_TOMB,  /* parent cid, child cid -> child path */
	TEND_T_MEMO,  /* cid -> component memo */
	TEND_T_NAME,  /* tsid -> parent tsid, key: readable paths */
	TEND_T_SEQ,   /* name -> next id */
	TEND_T_SIG,   /* source stat signatures */
	TEND_T__COUNT
};

/*
 * Formats: 1, ids are 16 bytes of XXH3 (uniform: a batch's rows land on
 * random pages of every table); 2, ids lead with 4 bytes of the hash of
 * what comes before the last '/' (a directory's rows share pages, so a
 * batch rewrites the few pages its directories sit on: engine.c's ids);
 * 3, the ids of 2 and the item, component and memo rows in rows.c's
 * compact layout (varints; about 100 bytes a copied file fewer). A
 * store keeps the format it was made with (every reader takes both row
 * layouts; a store of format 2 keeps writing the first, which an older
 * tend reads); a new one gets the newest (TEND_STORE_FORMAT in the
 * environment picks an older one, for tests).
 */
#define TEND_STORE_FORMAT 3

struct tend_store;
struct tend_txn;
struct tend_buf;

/* Numbers in rows' values as varints (LEB128; rows.c): the engine's
 * compact rows and the program's signature rows. get: false past n or
 * at a varint longer than 64 bits. */
void tend_varint_put(struct tend_buf *b, uint64_t v);
bool tend_varint_get(const uint8_t *p, size_t n, size_t *pos, uint64_t *out);

/*
 * Open or create the store in directory `dir` (created if missing).
 * `map_size` 0 means 256 MiB; the map doubles whenever it fills.
 * Returns 0 or TEND_ERROR (newer format, I/O, lock).
 */
int tend_store_open(struct tend_store **out, const char *dir,
    uint64_t map_size);
void tend_store_close(struct tend_store *st);

/*
 * The store's pages stay out of the process's RSS beyond a budget of
 * file-backed resident bytes (256 MiB; store.c's store_trim): the map is
 * unmapped, not the data, which the page cache keeps. For tests.
 */
void tend_store_set_trim_budget(struct tend_store *st, size_t bytes);

/* The format the store was made with (above). */
unsigned tend_store_format(const struct tend_store *st);

/* Bytes the map may use now (for tests of growth). */
uint64_t tend_store_map_size(const struct tend_store *st);

/*
 * Run `body` in a write transaction and commit it (durably). If the map
 * fills, the transaction is aborted, the map grown, and `body` run again:
 * bodies must be re-runnable. While a held transaction is open (preview),
 * `body` runs inside it and nothing is committed.
 */
typedef int tend_store_body_fn(struct tend_txn *txn, void *arg);
int tend_store_write(struct tend_store *st, tend_store_body_fn *body,
    void *arg);

/*
 * As tend_store_write, for transactions that only settle what an earlier
 * durable one made pending (a batch's commit, the signature cache): the
 * meta page is not synced (MDB_NOMETASYNC), so a power loss may undo the
 * transaction but never corrupts the store. Undone, the records are
 * pending again and the next pass re-applies them idempotently. A kill
 * loses nothing: the page cache survives the process.
 */
int tend_store_write_settle(struct tend_store *st, tend_store_body_fn *body,
    void *arg);

/*
 * Deferred settles (the agent): tend_store_write_settle runs its body in a
 * transaction left open, and the next tend_store_write commits it with its
 * own body, in one durable commit: back-to-back passes pay one disk flush
 * fewer each. Until then the settle is invisible to other processes (read
 * handles of this one borrow it) and a kill undoes it, which leaves its
 * records pending, as a crash between a sink and its settle does: the
 * next pass re-applies them idempotently. tend_store_settle_flush commits
 * it on its own (as a settle: meta page not synced); the owner calls it
 * when nothing follows soon, and tend_store_close does. A settle still
 * open when another one comes is committed first.
 */
void tend_store_defer_settles(struct tend_store *st, bool on);
bool tend_store_settle_pending(const struct tend_store *st);
int tend_store_settle_flush(struct tend_store *st);

/* A read-only snapshot (a borrowed one while a preview or a deferred
 * settle is open: end it before the next write). */
int tend_store_read_begin(struct tend_store *st, struct tend_txn **out);
void tend_store_read_end(struct tend_txn *txn);

/* Preview passes: one write txn held open for the whole pass, aborted at
 * the end, so later batches see earlier ones and nothing persists. */
int tend_store_hold_begin(struct tend_store *st);
void tend_store_hold_abort(struct tend_store *st);
/*
 * A scratch store (plan in a workspace that has none: an empty store
 * made for the command and removed after it) is not synced, and a
 * preview commits its batches there like a sync and clears the store at
 * its end (tend_store_clear) instead of holding one transaction: a
 * million new states in one transaction held ~800 MB of dirty pages.
 */
void tend_store_set_scratch(struct tend_store *st);
bool tend_store_is_scratch(const struct tend_store *st);
/* Remove every row (META keeps the format). */
int tend_store_clear(struct tend_store *st);

/* Returns 0 with *val borrowed until the txn ends, or TEND_ENOTFOUND. */
int tend_store_get(struct tend_txn *txn, enum tend_table t, const void *key,
    size_t klen, struct tend_bytes *val);
int tend_store_put(struct tend_txn *txn, enum tend_table t, const void *key,
    size_t klen, const void *val, size_t vlen);
/* Deleting a missing key succeeds. */
int tend_store_del(struct tend_txn *txn, enum tend_table t, const void *key,
    size_t klen);
/* Delete every key starting with `prefix`. */
int tend_store_del_prefix(struct tend_txn *txn, enum tend_table t,
    const void *prefix, size_t plen);

/* Iterate the keys of a table that start with `prefix`, in order. */
struct tend_iter {
	struct tend_txn *txn;
	void *cursor;
	/* a copy of the prefix (the caller's buffer may change: the walk's
	 * key grew past its size on a long name and moved, and the
	 * iterator read freed memory) */
	const void *prefix;
	unsigned char pbuf[48];
	size_t plen;
	bool started, done;
};

int tend_store_iter_init(struct tend_iter *it, struct tend_txn *txn,
    enum tend_table t, const void *prefix, size_t plen);
/* 1 and the entry (borrowed until the next call), 0 at the end, <0 error.*/
int tend_store_iter_next(struct tend_iter *it, struct tend_bytes *key,
    struct tend_bytes *val);
void tend_store_iter_finish(struct tend_iter *it);

/* Next value of a named sequence (starts at 1). */
int tend_store_seq_next(struct tend_txn *txn, const char *name,
    uint64_t *out);

/*
 * Counters: per app (a name), a few figures kept in META ("count/NAME")
 * so that `tend status` reads them instead of scanning every item row.
 * The engine adds deltas as it writes the rows that change them; the
 * store merges them into META when the write body returns, in the same
 * transaction, so a counter is never ahead of or behind its rows.
 *
 * The "counts" mark holds the id of the last transaction that kept the
 * counters: every write transaction of this tend stamps it. A store
 * written by an older tend (no mark, or a transaction after the mark) has
 * counters that cannot be trusted: readers get TEND_EINVALID (and scan
 * instead), and the first write transaction recounts every counter with
 * the recount function the engine registered, before stamping the mark.
 */
enum tend_count {
	TEND_COUNT_STATES,     /* item rows (tracked target states) */
	TEND_COUNT_PENDING,    /* ... with several records, or a delete */
	TEND_COUNT_CONTAINERS, /* ... that are containers */
	TEND_COUNT_ROOTS,      /* the app's root component rows (0 or 1) */
	TEND_COUNT__N
};

struct tend_counts {
	int64_t n[TEND_COUNT__N];
};

/* Add `delta` to NAME's counters (merged when the body returns). */
void tend_store_count_add(struct tend_txn *txn, const char *name,
    size_t len, const struct tend_counts *delta);
/* NAME's counters: 0 (all zero if it has no row), or TEND_EINVALID when
 * this snapshot's counters cannot be trusted (see above). */
int tend_store_counts_get(struct tend_txn *txn, const char *name,
    size_t len, struct tend_counts *out);
/* Are the counters of this snapshot trustworthy? */
bool tend_store_counts_valid(struct tend_txn *txn);
/* The names that have a counter row, in byte order; *out is
 * tend_xmalloc'd, each name too. TEND_EINVALID as above. */
int tend_store_count_names(struct tend_txn *txn, char ***out, size_t *n);
/*
 * The recount: called in a write transaction whose counters cannot be
 * trusted, after its body. It replaces every counter row with
 * tend_store_counts_set (the deltas of the body are dropped). Without
 * one, such a store's counters stay untrusted.
 */
typedef int tend_store_recount_fn(struct tend_txn *txn, void *arg);
void tend_store_set_recount(struct tend_store *st,
    tend_store_recount_fn *fn, void *arg);
/* For a recount: delete every counter row, then set them one by one. */
int tend_store_counts_clear(struct tend_txn *txn);
int tend_store_counts_set(struct tend_txn *txn, const char *name,
    size_t len, const struct tend_counts *c);
/* Make this transaction's counters untrusted: they are recounted when
 * its body returns (tend sync --full; tests make old stores with it). */
int tend_store_counts_invalidate(struct tend_txn *txn);

/* Rows in table `t` now (LMDB's count: no scan). */
uint64_t tend_store_rows(struct tend_store *st, enum tend_table t);

/*
 * Rewrite the store with every table's rows in key order into a new
 * environment beside it (DIR.repack), each page full, then swap the two
 * directories in one rename (RENAME_EXCHANGE) and reopen. Rows inserted
 * in hash order leave LMDB's pages about two thirds full (a page splits
 * in half when it fills); a cold sync's store shrinks by a third.
 *
 * Only for the store's one writer (the workspace's write lock), with no
 * transaction open: a process that opened the store before the swap
 * keeps reading the old one (its files stay until it closes them), and
 * must not write to it. A kill leaves the old store or the new one in
 * place, never a mix (the copy is synced before the swap), and DIR.repack
 * behind, which the next writer removes. Needs room for a second copy
 * (its size and 16 MiB); without it (or on any error before the swap) the
 * store is left as it was. 1 when rewritten, 0 when not (nothing to do,
 * a filesystem without RENAME_EXCHANGE), <0 with a message that says
 * where the store stands. Failpoint "repack" ("copied", "swapped").
 */
int tend_store_repack(struct tend_store *st);

/*
 * The store at the path opened again if a repack swapped it since this
 * process opened it: a writer calls it once it holds the write lock (it
 * may have opened the store while another one repacked it), and what
 * a killed repack left (DIR.repack) removed. 0 when nothing changed.
 */
int tend_store_refresh(struct tend_store *st);

/* Fault injection for tests: fail the n-th write commit from now with
 * TEND_ERROR (0 disarms). TEND_FAILPOINTS=lmdb-commit[~write|~settle] and
 * map-full do the same from the environment (tend/failpoint.h). */
void tend_store_fail_commit_after(struct tend_store *st, unsigned n);

#endif
