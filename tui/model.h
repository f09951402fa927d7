/*
 * model.h - the dashboard's model: agent events in, rows to show out.
 *
 * Pure: no curses, no I/O. The loop (top.c) feeds it the agent's JSON
 * lines and the user's keys; the view (view.c) draws the rows it makes.
 * Requests for the agent (a sync, a level of the state tree) are queued
 * in `out` for the loop to send. Tests drive it the same way.
 */
#ifndef TEND_TUI_MODEL_H
#define TEND_TUI_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tend/buf.h"

enum tm_conn {
	TM_CONNECTING,	 /* no answer yet */
	TM_LOADING,	 /* connected, waiting for the first status */
	TM_READY,
	TM_DISCONNECTED, /* the agent went away: retrying */
};

enum tm_panel { TM_APPS, TM_PENDING, TM_ACTIVITY, TM_TREE, TM_NPANELS };

/* what a row is drawn as */
enum tm_class {
	TM_C_NORMAL,
	TM_C_CREATE,
	TM_C_UPDATE,
	TM_C_DELETE,
	TM_C_INVALID,
	TM_C_ERROR,
	TM_C_HELD,
	TM_C_DIM,
};

struct tm_action {
	char op;	/* + ~ - as the agent said; ! for an invalidation */
	bool held;	/* a delete the brake holds */
	bool failed;	/* action_failed, or a component error (op 'E') */
	bool live;	/* action_pending of a running pass, not a plan */
	char *app, *path, *provider, *key, *component, *why, *error;
	char *invalidation;
	unsigned nprev;
	bool missing;
	double time;	/* wall clock, seconds */
	char clock[12];	/* "HH:MM:SS ", set when it enters the activity */
};

struct tm_app {
	char *name;
	long long components, states;
	unsigned long long pending, errors, held, queued;
	long long unsettled;   /* the store's count (-1: not known) */
	long long retry_in_ms; /* the agent's next retry of it (-1: none) */
	/* push = REMOTE: the agent's status and "push" events */
	bool has_push, pushing;
	long long ahead, behind; /* -1: not known */
	long long pushed;	 /* the last push that succeeded (0: never) */
	char *push_remote, *push_error;
};

struct tm_node {
	char *app;
	char *prefix;	/* the node's full path in its app ("" for an app) */
	char *name;	/* as shown */
	bool dir, expanded, loaded, loading, truncated;
	size_t count, total;
	char *owner, *record;
	bool container, pending;
	struct tm_node *kids;
	size_t nkids;
};

struct tm_row {
	char text[512];
	enum tm_class cls;
	const struct tm_action *action; /* pending and activity rows */
	struct tm_node *node;		/* tree rows */
	size_t app;			/* apps rows */
};

#define TM_ACTIVITY_MAX 500

struct tm_model {
	char *workspace;
	enum tm_conn conn;
	bool paused, quit;
	int pid;
	uint64_t uptime_ms, passes, watches, overflows, queue;
	double status_at;	/* when the last status came */
	char last[256];		/* the last pass, as a line */
	char running[128];	/* the app whose pass runs now, or "" */
	char *config_error;	/* tend.conf not loaded by the agent: why */

	struct tm_app *apps;
	size_t napps;
	struct tm_action *pending;
	size_t npending;
	struct tm_action *activity; /* a ring of TM_ACTIVITY_MAX */
	size_t nactivity, act_next; /* act_next: the slot written next */
	uint64_t shed;		/* events the agent skipped for us */
	struct tm_node tree;	/* its kids are the apps */

	/* the user's view */
	enum tm_panel focus;
	size_t sel[TM_NPANELS], top[TM_NPANELS];
	char filter[TM_NPANELS][64];
	bool filtering, help;
	bool detail;		/* the detail overlay of the selected row */
	size_t detail_scroll;
	char message[256];	/* the status line's note */

	bool dirty;		/* something to redraw */
	struct tend_buf out;	/* commands for the agent */
};

void tm_init(struct tm_model *m, const char *workspace);
void tm_free(struct tm_model *m);

/* Connection changes. */
void tm_connected(struct tm_model *m);
void tm_disconnected(struct tm_model *m);

/* One line from the agent (a JSON object); `now` is the wall clock. */
void tm_feed(struct tm_model *m, const char *line, double now);

/* One key (curses codes: KEY_UP etc. come as TM_KEY_*). */
enum {
	TM_KEY_UP = 0x1001, TM_KEY_DOWN, TM_KEY_PGUP, TM_KEY_PGDN,
	TM_KEY_HOME, TM_KEY_END, TM_KEY_BTAB, TM_KEY_ENTER, TM_KEY_ESC,
	TM_KEY_BACKSPACE,
};
void tm_key(struct tm_model *m, int key);

/* The rows of a panel, filtered; *n rows in a malloc'ed array. */
struct tm_row *tm_rows(const struct tm_model *m, enum tm_panel p, size_t *n);
/* The selected row of the focused panel explained, line by line (\n). */
void tm_detail(const struct tm_model *m, struct tend_buf *out);
/* The header: the agent's state and counters, then its last pass,
 * wrapped between fields so that no line is wider than `cols` (two lines
 * at 120 columns, three at 80). Each line ends in '\n'; returns how
 * many there are. */
size_t tm_header(const struct tm_model *m, double now, int cols,
    struct tend_buf *out);
/* The panel titles. */
void tm_title(const struct tm_model *m, enum tm_panel p, struct tend_buf *b);
/* What an empty Pending panel says: nothing to do, or what failed and
 * when the agent tries again. */
void tm_pending_empty(const struct tm_model *m, struct tend_buf *b);
extern const char *const tm_help_text;
extern const char *const tm_keys_line;

#endif
