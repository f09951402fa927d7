/*
 * cli.h - what the files of the command line share (cli.c: options,
 * messages, the event printer, tend_main; cmd_sync.c: sync and plan;
 * cmd_show.c: ls, check and status; cmd_drop.c: drop). Internal to the
 * program: nothing here is exported from libtend (TEND_HIDDEN).
 *
 * Exit codes: 0 success (plan: nothing pending; check: no drift); 1 some
 * components or actions failed, deletes were held, or drift was found;
 * 2 usage or config error (nothing applied); 3 plan: changes pending.
 */
#ifndef TEND_CLI_H
#define TEND_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "app.h"
#include "store.h"
#include "tend/buf.h"
#include "tend/events.h"

#define EXIT_FAIL 1
#define EXIT_USAGE 2
#define EXIT_PENDING 3

#ifndef TEND_HIDDEN
#define TEND_HIDDEN __attribute__((visibility("hidden")))
#endif

struct cli {
	const char *cmd;
	const char *dir, *conf;
	bool json, quiet, full, allow_delete, help, daemon, tui;
	bool dry_run; /* -n: sync becomes plan (rsync's habit) */
	int verbose;
	int color; /* -1 auto, 0 never, 1 always */
	char **apps;
	size_t napps;
	bool tty;
	/* per app counters, fed by events */
	uint64_t created, updated, deleted, failed, errors, invalidations;
	uint64_t forgotten; /* deletes that removed nothing (not tend's) */
	uint64_t adopted;   /* creates that found it there (tend's now) */
	uint64_t verified;  /* repairs (--full) that found it as recorded */
	uint64_t rebuilt; /* containers rebuilt (destructive): strays removed */
	uint64_t shown; /* progress */
	const char *cur_app;
	struct tend_buf json_items;
	bool pending;
	/* one failure shared by many entries (a git commit, a full disk)
	 * is printed once, then counted */
	char *last_err;
	uint64_t same_err;   /* repeats of last_err not shown */
	uint64_t same_named; /* repeats of last_err shown as "the same" */
	char *last_comp_err;
	char *first_err; /* the app's first failure, for status and --json */
	/* plan: what it found, over every app */
	uint64_t plan_ops[5]; /* create, update, delete, forget, adopt */
	uint64_t app_ops0;    /* their sum before the app's preview */
	uint64_t plan_verify; /* git refs reset by hand (verified) */
	uint64_t plan_replaces; /* writes over what tend did not write */
	uint64_t plan_held, plan_failed, plan_strays;
	uint64_t plan_tags; /* git tags left behind their ref's tip */
	uint64_t plan_rebuilt; /* undeclared, removed by a destructive rebuild */
	uint64_t plan_stopped; /* apps whose plan pass stopped on an error */
	bool destructive; /* plan: this app's target is rebuilt */
	struct tend_ws *ws; /* plan: the workspace (a tag's delete) */
};

struct last_pass {
	struct tend_buf text;
	const char *app;
};

extern TEND_HIDDEN bool doc_printed; /* the command's own document is out */


/* cli.c */
TEND_HIDDEN void say_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
TEND_HIDDEN void flush_same_errors(struct cli *c);
TEND_HIDDEN void die_usage(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
TEND_HIDDEN bool use_color(const struct cli *c);
TEND_HIDDEN void on_event(const struct tend_event *ev, void *arg);
TEND_HIDDEN void progress(void *arg, const char *app, uint64_t scanned,
    uint64_t hashed);
TEND_HIDDEN double now_s(void);
TEND_HIDDEN bool selected(struct cli *c, const char *name);
TEND_HIDDEN int check_app_names(struct cli *c, struct tend_ws *ws,
    bool tracked_ok);
TEND_HIDDEN int put_last(struct tend_txn *txn, void *arg);
TEND_HIDDEN int writer_open(struct tend_ws *ws, const char *who);

/* cmd_sync.c */
TEND_HIDDEN void put_doc(struct tend_buf *b);
TEND_HIDDEN int cmd_sync(struct cli *c, struct tend_ws *ws, bool preview);

/* cmd_show.c */
/* "12:03:04, 5 s ago" */
TEND_HIDDEN void put_when(struct tend_buf *b, long long t);
/* A drop of `app` began and did not finish (killed): *when (if not
 * NULL) gets when it began */
TEND_HIDDEN bool drop_interrupted(struct tend_ws *ws, const char *app,
    long long *when);
/* "a drop began ... and did not finish: ..." for status, check and
 * plan */
TEND_HIDDEN void say_drop_interrupted(struct tend_buf *b, const char *app,
    long long when);
TEND_HIDDEN int cmd_ls_check(struct cli *c, struct tend_ws *ws, bool check);
TEND_HIDDEN int cmd_status(struct cli *c, struct tend_ws *ws);

/* cmd_init.c */
TEND_HIDDEN int cmd_init(struct cli *c);

/* cmd_drop.c */
TEND_HIDDEN int cmd_drop(struct cli *c, struct tend_ws *ws);

#endif
