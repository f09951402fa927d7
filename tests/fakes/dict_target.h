/*
 * dict_target.h - the recording test connector (CocoIndex's DictTarget).
 *
 * A "world" of string keys and values stands for an external system.
 *   root provider "dict":  leaf states; world[key] = value
 *   root provider "dicts": containers; value "MODE:SPEC" where MODE is
 *       n (no invalidation), l (lossy) or d (destructive) on a SPEC
 *       change; the container's children live at world["NAME/child"];
 *       attachments "items" and "tags" at world["NAME/@items/key"].
 * Every reconcile call and every applied action is logged with the
 * (prev, prev_may_be_missing) it was reconciled with; the sink can be told
 * to fail at the k-th action, before or after writing.
 */
#ifndef TEND_TEST_DICT_TARGET_H
#define TEND_TEST_DICT_TARGET_H

#include <stdbool.h>
#include <stddef.h>

#include "tend/engine.h"

struct dict_log {
	char *path;   /* world key */
	char *value;  /* NULL: delete */
	char *prev;   /* prev records joined by ',' */
	bool missing;
	bool acted;   /* reconcile: returned an action */
	int inval;
};

struct dict_world {
	char **keys, **vals;
	size_t n;
	/* logs */
	struct dict_log *recs; /* reconcile calls */
	size_t nrecs;
	struct dict_log *acts; /* applied actions */
	size_t nacts;
	unsigned sink_calls;
	/* fault injection: fail the action with this 1-based index counted
	 * from arming; after_write: write first, then fail */
	unsigned fail_at;
	bool fail_after_write;
	unsigned counter;
	/* fail every action on this world key */
	char *fail_key;
	/* SIGKILL ourselves at the k-th action (1-based), before writing
	 * it or after: for crash tests */
	unsigned crash_at;
	bool crash_after_write;
	/* containers offer open_child (as the fs and git connectors do),
	 * and a container's delete removes only the container, like rmdir:
	 * children still in the world keep it there */
	bool open_child;
	/* a broken connector: a container's sink succeeds without returning
	 * the child handler */
	bool no_child;
	/* mirror the world in files under this directory */
	char *dir;
	struct tend_sink sink;
};

void dict_world_init(struct dict_world *w);
void dict_world_finish(struct dict_world *w);
/* Mirror the world in files under `dir` (created), loading what is there. */
void dict_world_attach_dir(struct dict_world *w, const char *dir);
/* Register "dict" and "dicts" on the engine. */
void dict_register(struct tend_engine *eng, struct dict_world *w);
const char *dict_get(const struct dict_world *w, const char *key);
/* "k1=v1 k2=v2" in key order: the whole world */
char *dict_dump(const struct dict_world *w);
void dict_clear_logs(struct dict_world *w);
/* Find the last reconcile log for a path; NULL if none. */
const struct dict_log *dict_rec(const struct dict_world *w, const char *path);
/* Number of applied actions on path (any kind). */
unsigned dict_nacts(const struct dict_world *w, const char *path);
const struct dict_log *dict_act(const struct dict_world *w, const char *path);

/* Declaration helpers for tests */
int dict_declare(struct tend_comp *c, const char *key, const char *value);
int dict_declare_in(struct tend_comp *c, struct tend_provider *p,
    const char *key, const char *value);
int dict_mount_container(struct tend_comp *c, const char *name,
    const char *mode_spec, struct tend_provider **out);

#endif
