/*
 * app.h - a workspace and its apps: what `tend sync`, `plan`, `check` and
 * `drop` do, above the engine.
 *
 * A workspace is a directory with a tend.conf, found like git finds a
 * repository. Each [app] becomes a root component that mounts its target
 * container, walks its source tree and mounts one memoized component per
 * source file; the file's declaration function (copy, exec) declares the
 * entries.
 */
#ifndef TEND_APP_H
#define TEND_APP_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "tend/buf.h"
#include "tend/engine.h"
#include "tend/plugin.h"

struct plugin {
	char *spec; /* "FILE.so SYMBOL" as configured */
	char *path; /* the file, absolute */
	void *dl;
	tend_plugin_fn *fn;
	struct tend_fp fp; /* of the object's bytes */
	bool has_init;	    /* it registered connectors: never reloaded */
};

struct tend_ws {
	struct connector *connectors; /* [plugin] sections (connector.c) */
	size_t nconnectors;
	struct plugin *plugins;
	size_t nplugins;
	void **old_dls;	 /* replaced plugins, closed with the workspace */
	size_t nold_dls;
	unsigned plugin_seq;
	const struct tend_main_opts *code;
	char *root;	 /* absolute workspace directory */
	char *conf_path; /* absolute path of tend.conf */
	char *state_dir; /* absolute */
	char *staging;	 /* state/staging/<pid> */
	/* the engine's "git-allowed-checked-out" resource (set_fsync) */
	struct tend_buf git_allowed;
	struct tend_config cfg;
	struct tend_engine *eng;
	int wlock; /* state/write.lock + 1 while held (0: not held) */
	/* a command that writes nothing (plan, ls, check, status): where
	 * there is no store yet it works on an empty one in a scratch
	 * directory, removed with the workspace, and creates no state */
	bool readonly, scratch;
	/* source items whose declaration conflicted with another's, by
	 * app: a partial pass runs them again (one of the two may be gone) */
	struct tend_conflicts {
		char *app;
		char **rels;
		size_t n;
	} *conflicts;
	size_t nconflicts;
};

/*
 * Connector plugins (connector.c): load every [plugin] of `cfg` not
 * loaded yet and check the keys of the apps that target them (each
 * problem a "file:line: key: message" line in err; TEND_EINVALID), then,
 * if the engine is open, register their roots. tend_ws_load and
 * tend_ws_reload call it; tend_ws_open registers.
 */
struct tend_connector_plugin;
int tend_ws_connectors_load(struct tend_ws *ws, struct tend_config *cfg,
    struct tend_buf *err);
int tend_ws_connectors_register(struct tend_ws *ws);
void tend_ws_connectors_close(struct tend_ws *ws);
/* Connector plugins whose file changed since they were loaded (each
 * told once in notes: they stay loaded until a restart). */
size_t tend_ws_connectors_changed(struct tend_ws *ws, struct tend_buf *notes);
/* Their files, appended to *v (for the agent's watch). */
void tend_ws_connector_files(struct tend_ws *ws, char ***v, size_t *n);
const struct tend_connector_plugin *tend_ws_connector(struct tend_ws *ws,
    const char *type);
/* The container (key, value) of app `a`'s plugin target. */
int tend_ws_connector_container(struct tend_ws *ws,
    const struct tend_app_config *a, struct tend_buf *key,
    struct tend_buf *value);

/*
 * Find the workspace (from `dir`, or the cwd, upwards to the first
 * tend.conf; `conf` names the config file instead) and parse its config.
 * Returns 0, TEND_ENOTFOUND (no workspace), or TEND_EINVALID with every
 * config diagnostic in `err`.
 */
int tend_ws_load(struct tend_ws *ws, const char *dir, const char *conf,
    struct tend_buf *err);
/* Parse tend.conf again and swap the config in whole; on errors the old
 * one stays and `err` has every diagnostic. */
int tend_ws_reload(struct tend_ws *ws, struct tend_buf *err);

/*
 * One writer per workspace: take state/write.lock (flock, released with
 * the process), waiting with a message on stderr while another tend
 * (`who` names us to the next one: "tend sync") holds it. Readers (plan,
 * status, check, ls, top) never take it.
 */
int tend_ws_lock(struct tend_ws *ws, const char *who);

/*
 * The flock of state/NAME (created 0600). Held by another process: with
 * `wait`, say so on stderr (naming what the holder wrote in the file) and
 * wait; without, TEND_EEXISTS with what the holder wrote in `holder`. The
 * lock lives as long as *fd_out stays open; the caller writes its own
 * name into it.
 */
int tend_ws_flock(struct tend_ws *ws, const char *name, bool wait,
    char *holder, size_t hsize, int *fd_out);

/*
 * The writer's store, rewritten in key order (tend_store_repack) when
 * its target states at least doubled since `before` (a cold sync, a big
 * app added; rows inserted in hash order leave pages two thirds full),
 * or with `force` (sync --full), from 1000 states up. 1 when it was
 * rewritten (*bytes_before, *bytes_after: data.mdb's size), 0 when not
 * needed, <0 on an error (the store is left as it was).
 */
int tend_ws_repack(struct tend_ws *ws, uint64_t before, bool force,
    uint64_t *bytes_before, uint64_t *bytes_after);

/* The pid of the agent running for this workspace, or 0. */
int tend_ws_agent_pid(const struct tend_ws *ws);

/* Open the tracking store and register the built-in connectors. */
int tend_ws_open(struct tend_ws *ws);
void tend_ws_close(struct tend_ws *ws);

struct tend_app_config *tend_ws_app(struct tend_ws *ws, const char *name);

/*
 * The agent, after a plugin file changed: plugins whose bytes changed
 * (or that failed to load) are loaded again on their next use; the old
 * code stays mapped until the workspace closes. A plugin that registered
 * connectors cannot be swapped in a running process: `notes` says so.
 * Returns how many will be loaded again.
 */
int tend_ws_refresh_plugins(struct tend_ws *ws, struct tend_buf *notes);
/* The plugin files the config names (absolute; caller frees each and
 * the array). */
char **tend_ws_plugin_files(struct tend_ws *ws, size_t *n);

/* Add tend_main()'s apps defined in code. Returns 0 or TEND_EINVALID. */
int tend_ws_add_code_apps(struct tend_ws *ws, const struct tend_main_opts *o);

struct tend_sync_opts {
	bool full;
	/* a full pass, but not --full's removal of an exclusive target's
	 * strays (tend_app_ref_rewritten) */
	bool verify;
	bool preview;
	bool allow_delete;
	bool agent; /* the agent runs it: its messages say how to act there */
	/* a partial pass whose paths hold every source whose delete is held
	 * (the agent's): none vanished among them releases the brake */
	bool held_included;
	/* progress: called now and then during the walk */
	void (*progress)(void *arg, const char *app, uint64_t scanned,
	    uint64_t hashed);
	void *arg;
	/* each source directory, just before the walk reads it */
	void (*on_dir)(void *arg, const char *rel);
	void *dir_arg;
};

struct tend_app_result {
	struct tend_stats stats;
	uint64_t files;	  /* source files matched */
	uint64_t hashed;  /* of which read and hashed (signature changed) */
	uint64_t skipped; /* symlinks, unreadable entries */
	uint64_t links_skipped; /* of which symlinks (symlinks = skip) */
	uint64_t held_deletes; /* source items whose deletion was held */
	uint64_t new_items;    /* source items seen for the first time */
	uint64_t gone_items;   /* source items vanished (deletes not held) */
	bool brake;	       /* the delete brake tripped (held or allowed) */
	char *error;	       /* app-level failure (NULL if none) */
	bool source_missing;   /* ...because the source directory was */
	/* preview: the target entries whose deletes the brake holds, as
	 * plan shows paths ("out/a.md") */
	char **held;
	size_t nheld;
	bool held_update; /* ...an aggregate file the brake keeps as it is */
	/* the source paths whose deletes the brake holds (any pass): the
	 * agent runs them again with its next partial pass, so they stay
	 * held, and counted, until approved or back */
	char **held_sources;
	size_t nheld_sources;
	uint64_t strays;  /* sync --full, exclusive: undeclared files removed */
	/* a plan of an exclusive app: the entries its pass declared (an
	 * outs list; the preview keeps no rows), for its strays */
	struct tend_buf declared;
	/* every declaration ran (actions may have failed): what is not
	 * declared is known, and sync --full removes it */
	bool strays_known;
};

/* Run one pass of `app`. Returns 0, or TEND_ERROR when anything failed or
 * deletes were held (res says what). */
int tend_app_sync(struct tend_ws *ws, struct tend_app_config *app,
    const struct tend_sync_opts *o, struct tend_app_result *res);
void tend_app_result_finish(struct tend_app_result *res);

/*
 * A git app whose ref no longer holds the commit tend last put on it
 * (reset, rewritten or deleted by hand): a plain pass would trust its
 * records and leave the ref without tend's entries, so the callers make
 * its pass a full one (every entry verified, what is missing written)
 * and say so. True and that commit (12 hex digits) in `was`.
 */
bool tend_app_ref_rewritten(struct tend_ws *ws,
    const struct tend_app_config *app, char was[13]);

/*
 * push = REMOTE (push.c): push the app's ref if the remote lacks some of
 * its commits (nothing for other apps). Returns 0 (pushed, or nothing to
 * push), TEND_ERETRY (unreachable), TEND_ECONFLICT (refused) or
 * TEND_ERROR, the message set ("push to REMOTE: ..."); the local commit
 * stands either way. Notes the outcome in STATE/push/APP.
 */
int tend_app_push(struct tend_ws *ws, struct tend_app_config *app);

/* What status shows of an app's push (counted locally: no network). */
struct tend_push_status {
	bool configured; /* a git app with push = */
	char *remote, *remote_ref;
	bool known; /* ahead and behind counted */
	size_t ahead, behind;
	long long pushed; /* the last push that succeeded (0: never) */
	long long tried;  /* the last attempt (0: never) */
	char *error;	  /* the last attempt's failure, or NULL */
};
void tend_app_push_status(struct tend_ws *ws,
    const struct tend_app_config *app, struct tend_push_status *out);
void tend_push_status_finish(struct tend_push_status *s);
/* {"remote": ..., "ref": ..., "ahead": N, "behind": N, "pushed": T,
 * "tried": T, "error": ...} */
void tend_push_status_json(struct tend_buf *b,
    const struct tend_push_status *s);

/*
 * An exclusive app's strays: what is in its target (a directory, or a
 * git tree under ref and prefix) but no entry of it declares (per its
 * last pass) - files, links (never followed), and directories with
 * nothing declared under them - each passed to `fn` as a state path
 * ("/@tend/dir/out/sub/" for a directory; tend_state_display_path shows
 * it). With `remove`, each goes (a git target's in one commit). Nothing
 * for other apps. `also` (or NULL): more declared entries, as an outs
 * list (a plan's pass, whose rows are not kept).
 */
typedef void tend_stray_fn(const char *path, void *arg);
int tend_app_strays(struct tend_ws *ws, struct tend_app_config *app,
    bool remove, const struct tend_buf *also, tend_stray_fn *fn, void *arg,
    size_t *count);

/*
 * Sync only the source paths `rels` (relative to the app's source root;
 * files that changed, appeared or vanished), as the agent does after
 * inotify events. Needs an earlier full pass in this process (the target
 * container's provider); without one, or for file: targets, it runs a
 * full pass. Vanished items follow the delete brake like a full pass.
 */
int tend_app_sync_paths(struct tend_ws *ws, struct tend_app_config *app,
    char *const *rels, size_t n, const struct tend_sync_opts *o,
    struct tend_app_result *res);

/*
 * During a pass (from an engine event callback): why the component at
 * readable path `component` runs - "new source a.md", "source a.md
 * changed 3f2a.. -> 9c1d..", "source a.md deleted", "logic changed" -
 * appended to `out`. -1 if no pass runs or the component is not known.
 */
int tend_app_why(const char *component, struct tend_buf *out);

/* Names of apps with tracked state (including ones gone from the
 * config), sorted; caller frees each and the array. */
int tend_ws_tracked_apps(struct tend_ws *ws, char ***out, size_t *n);

#endif
