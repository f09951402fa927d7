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
struct tend_store *tend_engine_store(struct tend_engine *eng);

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

#endif
