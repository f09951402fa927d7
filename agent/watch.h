/*
 * watch.h - the agent: tend watch, and talking to a running one.
 */
#ifndef TEND_WATCH_H
#define TEND_WATCH_H

#include <stdbool.h>

#include "app.h"

struct tend_agent_opts {
	int verbose;
	bool allow_delete;
	int ready_fd;	    /* written "ready\n" after the catch-up, or -1 */
	int stop_fd;	    /* readable: stop as on SIGTERM (-1: none) */
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

/*
 * Ask the agent of `state_dir` to commit what its last pass settled, so
 * that the store can be read: 0 once it has, TEND_ENOTFOUND when no agent
 * runs, TEND_ERETRY if it did not answer within half a second (a long
 * pass: the store is read as it is).
 */
int tend_agent_settle(const char *state_dir);

#endif
