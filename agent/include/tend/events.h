/*
 * tend/events.h - what the engine tells its subscribers.
 *
 * Events are plain data. Pointers inside an event are valid only during the
 * callback; a subscriber that keeps anything copies it.
 */
#ifndef TEND_EVENTS_H
#define TEND_EVENTS_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum tend_event_kind {
	TEND_EV_PASS_STARTED = 1,
	TEND_EV_ACTION_PLANNED,	 /* reconcile chose an action */
	TEND_EV_ACTION_APPLIED,	 /* the sink applied it */
	TEND_EV_ACTION_FAILED,	 /* the sink failed it; error set */
	TEND_EV_COMPONENT_ERROR, /* a declaration function failed */
	TEND_EV_PASS_FINISHED,
};

#define TEND_EV_MASK(kind) (1u << (kind))

enum tend_op {
	TEND_OP_CREATE = '+', /* nothing tracked before */
	TEND_OP_UPDATE = '~',
	TEND_OP_DELETE = '-',
};

struct tend_stats {
	/* components */
	uint64_t added;	      /* built, never built before */
	uint64_t reprocessed; /* built again */
	uint64_t unchanged;   /* memo hit: not run at all */
	uint64_t deleted;     /* gone, its target states reverted */
	uint64_t errors;      /* failed body, or a failed action */
	/* actions */
	uint64_t planned;
	uint64_t applied;
	uint64_t failed;
	uint64_t deferred; /* deletes held back for a later pass */
};

struct tend_event {
	enum tend_event_kind kind;
	uint64_t pass;	     /* pass number in this engine */
	const char *app;      /* the app (first key of the component path) */
	const char *component; /* readable component path */
	const char *provider;  /* readable provider path */
	const char *key;       /* readable target-state key */
	enum tend_op op;
	int invalidation;	   /* enum tend_invalidation */
	bool container;		   /* the state is a container */
	/* false for an action that re-applies the same record (a container's
	 * per-pass refresh, a repair under prev_may_be_missing) */
	bool record_changed;
	unsigned nprev;		   /* reconcile inputs, for "why" */
	bool prev_may_be_missing;
	int status;		   /* for failures */
	/* ACTION_FAILED and COMPONENT_ERROR: the message, never NULL;
	 * every other kind: NULL */
	const char *error;
	const struct tend_stats *stats; /* PASS_FINISHED */
	bool preview;
	/* a delete (TEND_OP_DELETE) that removes nothing: the state is
	 * forgotten, what is at its key is not tend's and stays (APPLIED:
	 * the sink said so; PLANNED in a preview: the handler's check) */
	bool forgotten;
	/* a create (TEND_OP_CREATE) that found the key holding the desired
	 * value already and left it: the state is adopted, tend's from now
	 * on (APPLIED: the sink said so; PLANNED in a preview: the
	 * handler's check). Not when an earlier apply of that value was cut
	 * short: it may have written it, and the report says created. */
	bool adopted;
	/* PLANNED in a preview: a write into a container the pass rebuilds
	 * from the declared entries only (exclusive switched on) where
	 * something tend did not write is: it goes, as the rest of what the
	 * container held */
	bool replaces;
	/* APPLIED: what the sink said beside the action (NULL: nothing),
	 * and whether it is a failure of something beside it (`warn`: the
	 * pass counts an error) or a note */
	const char *note;
	bool warn;
	/* APPLIED: a repair (sync --full) that found the target holding
	 * its record already, and wrote nothing: "verified" */
	bool unchanged;
};

typedef void tend_event_fn(const struct tend_event *ev, void *arg);

#ifdef __cplusplus
}
#endif

#endif
