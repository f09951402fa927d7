/*
 * watch.h - the agent: tend watch, and talking to a running one.
 */
#ifndef TEND_WATCH_H
#define TEND_WATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "app.h"

struct tend_agent_opts {
	int verbose;
	bool allow_delete;
	int ready_fd;	    /* written "ready\n" after the catch-up, or -1 */
	int stop_fd;	    /* readable: stop as on SIGTERM (-1: none) */
	/* non-NULL: a connector plugin whose file changed stops the agent
	 * (after its pass, as on SIGTERM) with *restart set, for the caller
	 * to start it again on the new code; NULL: it is only reported */
	bool *restart;
};

/*
 * Take the workspace's agent lock, catch up, then follow changes until
 * SIGINT or SIGTERM (the current pass finishes; returns 0). TEND_EEXISTS
 * if another agent holds the lock (the message names its pid).
 */
int tend_agent_run(struct tend_ws *ws, const struct tend_agent_opts *o);

/*
 * Send `cmd` to the agent of `state_dir`: "status" returns its status
 * line; "sync" (until_pass) waits until the passes it asked for are over
 * and returns their pass_finished lines. TEND_ENOTFOUND when no agent
 * runs.
 */
int tend_agent_request(const char *state_dir, const char *cmd,
    struct tend_buf *reply, bool until_pass);
/* The same, waiting at most wait_ms for the answer (TEND_ERETRY: none
 * came: the agent is busy in a pass) */
int tend_agent_request_wait(const char *state_dir, const char *cmd,
    struct tend_buf *reply, int wait_ms);

/*
 * Ask the agent of `state_dir` to commit what its last pass settled, so
 * that the store can be read: 0 once it has, TEND_ENOTFOUND when no agent
 * runs, TEND_ERETRY if it did not answer within half a second (a long
 * pass: the store is read as it is).
 */
int tend_agent_settle(const char *state_dir);

/*
 * One pass of one app, as tend sync, tend status, the agent's log and its
 * pass_finished event report it: one vocabulary (tend.1, OUTPUT).
 */
struct tend_pass {
	long long time;	 /* when it finished, seconds since the epoch */
	uint64_t ms;	 /* how long it took */
	int status;	 /* 0 ok; 1 something failed or deletes were held */
	uint64_t created, updated, deleted;
	/* deletes that removed nothing: the state was never tend's to
	 * write there (what was in the way stays) */
	uint64_t forgotten;
	/* first writes that found the declared content there already: the
	 * state is tend's from now on (not counted as created) */
	uint64_t adopted;
	/* repairs (sync --full) that found the target as recorded and
	 * wrote nothing (not counted as updated) */
	uint64_t verified;
	uint64_t failed; /* actions that could not be applied */
	uint64_t errors; /* declarations that failed (nothing of them applied) */
	uint64_t held_deletes; /* source items whose deletes the brake holds */
	uint64_t files;	 /* source files seen */
	uint64_t read;	 /* of which read (their signature changed) */
	uint64_t links_skipped; /* symlinks not synced (symlinks = skip) */
	const char *error; /* the pass's own error, or NULL */
};

/* Its JSON members, without braces: "time": ..., "ms": ..., ... */
void tend_pass_json(struct tend_buf *b, const struct tend_pass *p);
/* "2 created, 0 updated, 0 deleted, 1 failed; 5 files (2 read) in 0.01s" */
void tend_pass_text(struct tend_buf *b, const struct tend_pass *p);
/* From a pass_finished event or a stored record (absent members are 0;
 * `error` points into `j`). */
struct tend_json;
void tend_pass_from_json(struct tend_pass *p, const struct tend_json *j);

#endif
