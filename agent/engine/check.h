/*
 * check.h - listing tracked target states and checking them for drift.
 */
#ifndef TEND_CHECK_H
#define TEND_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tend/buf.h"
#include "tend/engine.h"
#include "tend/events.h"
#include "store.h"

struct tend_state_info {
	const char *component; /* owner: readable component path */
	const char *path;      /* readable target-state path */
	bool container;
	unsigned nstates;
	bool pending;	       /* several candidate records, or a delete */
	const uint8_t *record; /* the latest record; NULL for a delete */
	size_t len;
	const char *drift;     /* check: why it differs */
};

typedef void tend_state_fn(const struct tend_state_info *si, void *arg);

/* Every tracked state of `app` (NULL: all apps). */
int tend_engine_list(struct tend_engine *eng, const char *app,
    tend_state_fn *fn, void *arg);
/*
 * Did the component of `app` at `path` (its keys after the app's) ever
 * apply a state to a target? 1 if one of its states has a record a sink
 * confirmed, 0 if none (every first write failed, or it declared
 * nothing), <0 on an error. The delete brake counts only sources whose
 * deletes would remove something.
 */
int tend_engine_comp_applied(struct tend_engine *eng, struct tend_txn *txn,
    const char *app, const struct tend_key *path, size_t npath);

/* Only the states whose target drifted; *ndrift counts them. */
int tend_engine_check(struct tend_engine *eng, const char *app,
    tend_state_fn *fn, void *arg, unsigned *ndrift);

/*
 * An app's counts, as `tend status` and the agent show them: from the
 * store's counters (O(1)), or, in a store whose counters this tend did
 * not keep (an older tend wrote it last), from a scan of its states
 * (`scanned`). `txn` is a read snapshot.
 */
struct tend_app_counts {
	uint64_t states;     /* tracked target states */
	uint64_t pending;    /* unsettled: several records, or a delete */
	uint64_t containers; /* of the states, containers */
	bool scanned;
};

int tend_engine_counts(struct tend_engine *eng, struct tend_txn *txn,
    const char *app, struct tend_app_counts *out);
/* tend check: the counters of `app` compared with a scan, in one
 * snapshot. 0 if they agree (or are not kept); TEND_ECONFLICT and why
 * in `why` if not; another code if the store could not be read. */
int tend_engine_counts_check(struct tend_engine *eng, const char *app,
    struct tend_buf *why);

/*
 * Is what the target holds at `key` something tend did not write? Asked
 * about a target state no write of which was ever confirmed: it is,
 * unless h's check finds nothing there or one of the n `recs` (the
 * records that state's applies may have written). `why` then says so,
 * beginning with TEND_CHECK_IN_THE_WAY. false unless h's sink keeps
 * such things (TEND_HANDLER_KEEPS_FOREIGN) and h has a check.
 * *holds_last, if not NULL, says whether the key holds recs[n - 1] (a
 * first write's desired record: the sink adopts what is there).
 */
bool tend_foreign_at(struct tend_engine *eng, struct tend_handler *h,
    const struct tend_key *key, const struct tend_bytes *recs, size_t n,
    struct tend_buf *why, bool *holds_last);

/*
 * Does the key hold none of the n `recs` (somebody else's thing, or
 * nothing)? Asked about the delete of a state no write of which was
 * confirmed: the sink then removes nothing. `absent`, if not NULL, says
 * whether the key holds nothing. false unless h keeps foreign things and
 * has a check, or when a check fails.
 */
bool tend_holds_none(struct tend_engine *eng, struct tend_handler *h,
    const struct tend_key *key, const struct tend_bytes *recs, size_t n,
    bool *absent);

/* A container's per-pass refresh of the same record: not an action a
 * user would want shown. */
bool tend_event_is_refresh(const struct tend_event *ev);
/* Is this applied action one users count (created, updated, deleted):
 * an entry, or a container's delete (a container's own create or
 * update is not counted; its entries are)? */
bool tend_event_counts(const struct tend_event *ev);

/*
 * A state's path as users read it, from an action's provider and key:
 * "public/a.html" for a dir entry, "public/" for the directory,
 * git("repo", "refs/heads/pages", "site"):docs/a for a git entry and
 * git("repo", "refs/heads/pages", "site") for its commit. Names are
 * spelled as tend_key_format spells strings (\\ \" \n \t, other control
 * characters as \xNN) and bytes that are not UTF-8 are \xNN too: the
 * path is always text, and reads back to the bytes.
 */
void tend_display_path(struct tend_buf *out, const char *provider,
    const char *key);
/* A failure event as one line: "PATH: why" (an action's), or "why" (a
 * declaration's). A heap string. */
char *tend_event_failure(const struct tend_event *ev);
/*
 * The same spelling from a tracked state's path (tend_state_info.path:
 * "/@tend/git/(\"repo\", ...)/docs/a"), with a directory container as
 * "public/". Returns the length of a git target's part ("git(...)", the
 * ':' after it starts the entry's name), 0 for other paths.
 */
size_t tend_state_display_path(struct tend_buf *out, const char *path,
    bool container);

#endif
