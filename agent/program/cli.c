/*
 * cli.c - the tend command line: sync, plan, ls, status, check, drop.
 * tend_main() is in libtend, so a program can embed the same CLI with
 * apps defined in code (tend/plugin.h).
 *
 * Exit codes: 0 success (plan: nothing pending; check: no drift); 1 some
 * components or actions failed, deletes were held, or drift was found;
 * 2 usage or config error (nothing applied); 3 plan: changes pending.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "app.h"
#include "check.h"
#include "inspect.h"
#include "json.h"
#include "store.h"
#include "top.h"
#include "watch.h"
#include "tend/buf.h"
#include "tend/plugin.h"
#include "tend/status.h"

#define EXIT_FAIL 1
#define EXIT_USAGE 2
#define EXIT_PENDING 3

struct cli {
	const char *cmd;
	const char *dir, *conf;
	bool json, quiet, full, allow_delete, help, daemon, tui;
	int verbose;
	int color; /* -1 auto, 0 never, 1 always */
	char **apps;
	size_t napps;
	bool tty;
	/* per app counters, fed by events */
	uint64_t created, updated, deleted, failed, errors, invalidations;
	uint64_t shown; /* progress */
	const char *cur_app;
	struct tend_buf json_items;
	bool pending;
	/* one failure shared by many entries (a git commit, a full disk)
	 * is printed once, then counted */
	char *last_err;
	uint64_t same_err;
	char *last_comp_err;
	/* plan: what it found, over every app */
	uint64_t plan_ops[3]; /* create, update, delete */
	uint64_t plan_held, plan_failed, plan_strays;
	bool destructive; /* plan: this app's target is rebuilt */
};

/* --json: every outcome is one JSON document on stdout, a failure too
 * ({"error": "...", "exit": N}, beside the message on stderr) */
static bool json_mode;
static bool doc_printed;  /* the command's own document is out */
static char *first_error; /* the message of the failure, for the JSON */

static void
keep_error(const char *msg)
{
	size_t n = strlen(msg);

	if (first_error || !json_mode)
		return;
	while (n && msg[n - 1] == '\n')
		n--;
	first_error = strndup(msg, n);
}

static void
say_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "tend: MESSAGE" on stderr, kept for the JSON error document */
static void
say_error(const char *fmt, ...)
{
	struct tend_buf b = TEND_BUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	tend_buf_vprintf(&b, fmt, ap);
	va_end(ap);
	fprintf(stderr, "tend: %s\n", b.ptr);
	keep_error(b.ptr);
	tend_buf_release(&b);
}

static void
json_error(int code)
{
	struct tend_buf b = TEND_BUF_INIT;

	tend_buf_puts(&b, "{\"error\": ");
	tend_buf_json(&b, first_error ? first_error : "failed");
	tend_buf_printf(&b, ", \"exit\": %d}\n", code);
	fputs(b.ptr, stdout);
	tend_buf_release(&b);
	doc_printed = true;
}

static void
flush_same_errors(struct cli *c)
{
	if (c->same_err)
		fprintf(stderr, "tend: %s: ... and %llu more entries failed "
				"the same way\n",
		    c->cur_app ? c->cur_app : "?",
		    (unsigned long long)c->same_err);
	c->same_err = 0;
	free(c->last_err);
	c->last_err = NULL;
	free(c->last_comp_err);
	c->last_comp_err = NULL;
}

static const char *const usage_text =
    "usage: tend [-C DIR] [-c FILE] COMMAND [OPTIONS] [APP...]\n"
    "\n"
    "Commands:\n"
    "  sync  [APP...]   catch up once and apply the difference\n"
    "  plan  [APP...]   show pending actions; apply and persist nothing\n"
    "  ls    [APP]      tracked target states, owners and records\n"
    "  status           per-app counts and the last pass\n"
    "  check [APP]      compare targets with the tracking records\n"
    "  drop  APP...     revert every target state of the app, forget it\n"
    "  watch            the agent: catch up, then follow changes (inotify)\n"
    "  top              the dashboard of a running agent (ncurses)\n"
    "  help [COMMAND]   this text, or a command's (help config: every\n"
    "                   tend.conf key)\n"
    "\n"
    "Options:\n"
    "  -C DIR           run as if started in DIR\n"
    "  -c FILE          use FILE instead of searching for tend.conf\n"
    "  --json           machine-readable output\n"
    "  -q, --quiet      only errors\n"
    "  -v, --verbose    more detail\n"
    "  --color=WHEN     auto, always or never (NO_COLOR is honoured)\n"
    "  --full           reprocess everything: ignore memos, re-apply\n"
    "  --allow-delete   release deletes held back by the delete brake\n"
    "  --version        print the version\n"
    "  -h, --help       this text, or a command's: tend COMMAND --help\n"
    "                   (or tend help COMMAND)\n"
    "\n"
    "Exit status: 0 success, 1 failures/held deletes/drift, 2 usage or\n"
    "config error, 3 (plan) changes pending.\n";

static const struct {
	const char *cmd, *help;
} cmd_help[] = {
	{"sync", "usage: tend sync [--full] [--allow-delete] [--json] [-q] "
		 "[APP...]\n\n"
		 "Walk each app's source, run its declaration function for "
		 "every changed\nitem and apply the difference to its targets. "
		 "Unchanged files are not\nread (their stat signature "
		 "decides). Prints a progress line on a terminal\nand one "
		 "summary line per app. While an agent (tend watch) runs, a "
		 "plain\nsync is handed to it and its passes are reported the "
		 "same way.\n\n"
		 "  --full          ignore memos and signatures: re-apply "
		 "everything\n"
		 "  --allow-delete  apply deletes the delete brake held back "
		 "(more than\n                  max-delete entries of one "
		 "target, or an emptied source)\n"},
	{"plan", "usage: tend plan [--json] [APP...]\n\n"
		 "Compute what sync would do and print one line per action:\n"
		 "  + create   ~ update   - delete   ! lossy/destructive "
		 "container change\nNothing is applied or persisted. Exit "
		 "status 3 when changes are pending.\n"},
	{"ls", "usage: tend ls [--json] [APP]\n\n"
	       "List tracked target states with their owning component and "
	       "record,\nsorted by path (spelled as plan spells it). APP may "
	       "be one that left\ntend.conf but is still tracked.\n"},
	{"status", "usage: tend status [--json]\n\n"
		   "The running agent, if any (its pid, state, start, passes, "
		   "watches,\noverflows, queued changes and actions applied), "
		   "then per app: its\ntarget states, those unsettled (an "
		   "apply was interrupted), what the\nagent has queued and the "
		   "deletes it holds, and the app's last pass\n(when, as a "
		   "local time and an age, and what it did). Apps no longer in\n"
		   "tend.conf but still tracked are listed too.\n"},
	{"check", "usage: tend check [--json] [APP]\n\n"
		  "Read every tracked target and compare it with its "
		  "tracking record.\nExit status 1 when something drifted; "
		  "`tend sync --full` repairs it.\n"},
	{"watch", "usage: tend watch [--daemon | --tui] [--allow-delete] "
		  "[-q | -v]\n\n"
		  "Catch up once, then follow every app's sources with inotify "
		  "and apply\nchanges as they happen (debounce and max-delay "
		  "from [tend] in tend.conf).\nA changed file re-runs only its "
		  "component; a directory created, moved\nor removed re-scans "
		  "just that subtree; a queue overflow, a lost source\nroot, a "
		  ".gitignore or tend.conf edit, more than 4,096 changed paths "
		  "at\nonce or more than 20,000 files under changed directories "
		  "make the\napp's next pass a full one (stat signatures keep "
		  "it cheap).\n\n"
		  "In the foreground it prints one line per pass (time, app, "
		  "what it did);\n-q only errors, -v more (directory moves). "
		  "--daemon detaches once the\ncatch-up is done and logs to "
		  ".tend/agent.log. --tui runs the dashboard\n(tend top) on "
		  "this terminal in the same process and logs to\n"
		  ".tend/agent.log; quitting it stops the agent.\n\n"
		  "Edits of tend.conf and SIGHUP reload the config; SIGINT and "
		  "SIGTERM\nfinish the current pass and exit 0. One agent per "
		  "workspace: its pid is\nin .tend/agent.pid, and it holds "
		  ".tend/write.lock while it runs. `tend\nstatus` and `tend "
		  "sync` ask it through .tend/agent.sock (JSON lines;\n"
		  "commands: status, sync, rescan, pause, resume, approve, "
		  "states,\nsubscribe, settle: see docs/agent.md).\n"},
	{"top", "usage: tend top\n\n"
		"The dashboard of the workspace's running agent: the header "
		"(agent state,\nwatches, overflows, queue, last pass), apps, "
		"pending actions (the live\nplan, and deletes the delete brake "
		"holds), recent activity and errors,\nand the tracked states as "
		"a tree. Enter on an action says why it\nhappens: the app and "
		"component that declared it, the source change that\ncaused it, "
		"the reconcile inputs. Keys: q quit, ? help, Tab panel, /\n"
		"filter, j/k/arrows/PgUp/PgDn, Enter details or expand, s sync, "
		"p pause\nor resume, r rescan, a approve held deletes. "
		"NO_COLOR turns colors off.\nWithout a running agent it says "
		"so and exits 1: start one with\n`tend watch --daemon`, or run "
		"both at once with `tend watch --tui`.\nIt needs a terminal: "
		"with standard input or output not one, it exits 2.\n"},
	{"drop", "usage: tend drop [--json] APP...\n\n"
		 "Revert every target state the app created (delete what it "
		 "wrote), then\nforget the app. Not braked: it is explicit. "
		 "APP may be one that left\ntend.conf but is still tracked.\n"},
	{"help", "usage: tend help [COMMAND | config]\n\n"
		 "The list of commands, or what tend COMMAND --help says. "
		 "`tend help config`\nlists every key of tend.conf with its "
		 "default, and the keys of the\nworkspace's connector plugins.\n"},
};

/* tend help config: every key of tend.conf, and of the workspace's
 * connector plugins (if there is a workspace and it loads) */
static int
help_config(struct cli *c)
{
	static const char *change[] = {"", " (a change is lossy)",
	    " (a change is destructive)"};
	char *text = tend_config_describe();
	struct tend_ws ws = {0};
	struct tend_buf err = TEND_BUF_INIT;

	fputs(text, stdout);
	free(text);
	int lrc = tend_ws_load(&ws, c->dir, c->conf, &err);
	if (lrc == TEND_EINVALID)
		printf("# tend.conf does not load, so its plugins' keys are not "
		       "listed: tend status says why\n");
	if (lrc == 0)
		for (size_t i = 0; i < ws.cfg.nplugins; i++) {
			const struct tend_connector_plugin *d =
			    tend_ws_connector(&ws, ws.cfg.plugins[i].name);

			if (!d)
				continue;
			printf("[app \"NAME\"] with target = %s:ARG (plugin %s)\n",
			    d->type, ws.cfg.plugins[i].path);
			for (size_t k = 0; k < d->nkeys; k++) {
				const struct tend_plugin_key *key = &d->keys[k];
				unsigned ch = (unsigned)key->change;

				printf("\t%s = %s\t# %s%s\n", key->name,
				    key->def ? key->def : "(required)",
				    key->help ? key->help : "",
				    ch < 3 ? change[ch] : "");
			}
		}
	tend_buf_release(&err);
	tend_ws_close(&ws);
	return 0;
}

/* for an agent that starts again on a rebuilt connector plugin */
static char **main_argv;

static void
die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
die_usage(const char *fmt, ...)
{
	struct tend_buf b = TEND_BUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	tend_buf_vprintf(&b, fmt, ap);
	va_end(ap);
	fprintf(stderr, "tend: %s\nTry 'tend --help'.\n", b.ptr);
	if (json_mode) {
		keep_error(b.ptr);
		json_error(EXIT_USAGE);
	}
	tend_buf_release(&b);
	exit(EXIT_USAGE);
}

static bool
use_color(const struct cli *c)
{
	if (c->color >= 0)
		return c->color == 1;
	return isatty(1) && !getenv("NO_COLOR");
}

static void
on_event(const struct tend_event *ev, void *arg)
{
	struct cli *c = arg;
	struct tend_buf path = TEND_BUF_INIT;

	switch (ev->kind) {
	case TEND_EV_ACTION_PLANNED:
		if (!ev->preview || tend_event_is_refresh(ev))
			break;
		c->pending = true;
		/* every line plan shows is counted (a new target directory
		 * too) */
		c->plan_ops[ev->op == TEND_OP_CREATE ? 0
		    : ev->op == TEND_OP_UPDATE ? 1 : 2]++;
		if (ev->container && ev->invalidation == 2)
			c->destructive = true;
		tend_display_path(&path, ev->provider, ev->key);
		if (c->json) {
			struct tend_buf *b = &c->json_items;

			tend_buf_puts(b, b->len ? ",\n  {" : "\n  {");
			tend_buf_printf(b, "\"op\": \"%s\", \"app\": ",
			    ev->op == TEND_OP_CREATE ? "create"
			    : ev->op == TEND_OP_UPDATE ? "update" : "delete");
			tend_buf_json(b, ev->app);
			tend_buf_puts(b, ", \"provider\": ");
			tend_buf_json(b, ev->provider);
			tend_buf_puts(b, ", \"path\": ");
			tend_buf_json(b, path.ptr);
			if (strchr(path.ptr, '\\'))
				tend_buf_puts(b, ", \"path_escaped\": true");
			tend_buf_printf(b, ", \"invalidation\": %s}",
			    ev->invalidation == 1 ? "\"lossy\""
			    : ev->invalidation == 2 ? "\"destructive\"" : "null");
		} else if (!c->quiet) {
			bool col = use_color(c);
			const char *color = "", *reset = col ? "\033[0m" : "";
			char op = (char)ev->op;

			if (ev->invalidation)
				op = '!';
			if (col)
				color = op == '+' ? "\033[32m"
				    : op == '~' ? "\033[33m"
				    : op == '-' ? "\033[31m" : "\033[35m";
			if (ev->invalidation)
				printf("%s! %s%s %s %s (%s)\n", color,
				    ev->invalidation == 1 ? "lossy"
							  : "destructive",
				    reset, ev->app, path.ptr,
				    ev->invalidation == 1
					? "every entry is re-applied"
					: "rebuilt from the declared entries "
					  "only");
			else
				printf("%s%c%s %s %s\n", color, op, reset,
				    ev->app, path.ptr);
			if (c->verbose) {
				struct tend_buf why = TEND_BUF_INIT;

				if (tend_app_why(ev->component, &why) == 0)
					printf("    (%s)\n", why.ptr);
				tend_buf_release(&why);
			}
		}
		break;
	case TEND_EV_ACTION_APPLIED:
		if (tend_event_is_refresh(ev))
			break;
		if (ev->invalidation)
			c->invalidations++;
		if (!tend_event_counts(ev))
			break; /* entries are counted, not their directory */
		if (ev->op == TEND_OP_CREATE)
			c->created++;
		else if (ev->op == TEND_OP_UPDATE)
			c->updated++;
		else
			c->deleted++;
		if (c->tty && ++c->shown % 512 == 0) {
			fprintf(stderr, "\r\033[K%s: applied %llu", ev->app,
			    (unsigned long long)(c->created + c->updated +
				c->deleted));
			fflush(stderr);
		}
		if (c->verbose && !c->json) {
			tend_display_path(&path, ev->provider, ev->key);
			printf("%c %s %s\n", (char)ev->op, ev->app, path.ptr);
		}
		break;
	case TEND_EV_ACTION_FAILED:
		c->failed++;
		if (c->last_err && strcmp(c->last_err, ev->error) == 0 &&
		    !c->verbose) {
			c->same_err++;
			break;
		}
		flush_same_errors(c);
		c->last_err = tend_xstrdup(ev->error);
		tend_display_path(&path, ev->provider, ev->key);
		if (c->tty)
			fputs("\r\033[K", stderr);
		fprintf(stderr, "tend: %s: %s: %s\n", ev->app, path.ptr,
		    ev->error);
		break;
	case TEND_EV_COMPONENT_ERROR:
		c->errors++;
		/* the two sides of a conflict say the same: once is enough */
		if (c->last_comp_err && strcmp(c->last_comp_err, ev->error) == 0)
			break;
		free(c->last_comp_err);
		c->last_comp_err = tend_xstrdup(ev->error);
		if (c->tty)
			fputs("\r\033[K", stderr);
		fprintf(stderr, "tend: %s: %s\n", ev->app, ev->error);
		break;
	default:
		break;
	}
	tend_buf_release(&path);
}

static void
progress(void *arg, const char *app, uint64_t scanned, uint64_t hashed)
{
	struct cli *c = arg;

	if (!c->tty)
		return;
	fprintf(stderr, "\r\033[K%s: scanned %llu files, read %llu", app,
	    (unsigned long long)scanned, (unsigned long long)hashed);
	fflush(stderr);
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool
selected(struct cli *c, const char *name)
{
	if (!c->napps)
		return true;
	for (size_t i = 0; i < c->napps; i++)
		if (strcmp(c->apps[i], name) == 0)
			return true;
	return false;
}

/*
 * Every APP on the command line is in tend.conf; `tracked_ok`: or is
 * still tracked from before (drop and ls take an app that left it).
 */
static int
check_app_names(struct cli *c, struct tend_ws *ws, bool tracked_ok)
{
	char **tracked = NULL;
	size_t ntracked = 0;
	bool loaded = false;
	int rc = 0;

	for (size_t i = 0; i < c->napps && !rc; i++) {
		bool was = false;

		if (tend_ws_app(ws, c->apps[i]))
			continue;
		/* (no state directory yet: nothing is tracked, and an error
		 * creates none) */
		if (!loaded && access(ws->state_dir, F_OK) == 0 &&
		    tend_ws_tracked_apps(ws, &tracked, &ntracked) != 0) {
			say_error("%s", tend_error_last());
			rc = EXIT_FAIL;
			break;
		}
		loaded = true;
		for (size_t k = 0; k < ntracked; k++)
			was |= strcmp(tracked[k], c->apps[i]) == 0;
		if (was && tracked_ok)
			continue;
		if (was)
			say_error("app \"%s\" is no longer in %s: %s needs its "
				  "configuration (its targets stay; tend drop "
				  "%s removes them)",
			    c->apps[i], ws->conf_path, c->cmd, c->apps[i]);
		else
			say_error("no app \"%s\" in %s", c->apps[i],
			    ws->conf_path);
		rc = EXIT_USAGE;
	}
	for (size_t k = 0; k < ntracked; k++)
		free(tracked[k]);
	free(tracked);
	return rc;
}

struct last_pass {
	struct tend_buf text;
	const char *app;
};

static int
put_last(struct tend_txn *txn, void *arg)
{
	struct last_pass *lp = arg;
	char key[300];

	snprintf(key, sizeof key, "last/%s", lp->app);
	return tend_store_put(txn, TEND_T_META, key, strlen(key),
	    lp->text.ptr, lp->text.len);
}

/*
 * Open the workspace to write to it: refused while an agent runs (it
 * applies changes itself; a second writer beside it would race it), and
 * serialised with any other writing tend by .tend/write.lock.
 */
static int
writer_open(struct tend_ws *ws, const char *who)
{
	int pid = tend_ws_agent_pid(ws);

	if (pid < 0) {
		say_error("an agent is starting for this workspace; try again "
			  "when it runs");
		return EXIT_USAGE;
	}
	if (pid) {
		say_error("an agent (pid %d) runs for this workspace and "
			  "applies changes itself; it takes a plain `tend "
			  "sync`, not %s with these options: stop it first "
			  "(kill -TERM %d)",
		    pid, who, pid);
		return EXIT_USAGE;
	}
	if (tend_ws_open(ws) || tend_ws_lock(ws, who)) {
		say_error("%s", tend_error_last());
		return EXIT_FAIL;
	}
	return 0;
}

/* plan, after each app: the deletes the brake holds (not actions: the
 * engine never plans them), and what failed */
struct stray_ctx {
	struct cli *c;
	const char *app;
	bool going; /* the sync this plan shows removes them */
	struct tend_buf *out; /* check --json */
	unsigned n;
};

static void
plan_stray(const char *state_path, void *arg)
{
	struct stray_ctx *x = arg;
	struct cli *c = x->c;
	bool col = use_color(c);
	struct tend_buf shown = TEND_BUF_INIT;
	const char *path;

	tend_state_display_path(&shown, state_path, false);
	path = shown.ptr;

	if (c->json) {
		struct tend_buf *b = &c->json_items;

		tend_buf_puts(b, b->len ? ",\n  {" : "\n  {");
		tend_buf_puts(b, "\"op\": \"delete\", \"app\": ");
		tend_buf_json(b, x->app);
		tend_buf_puts(b, ", \"path\": ");
		tend_buf_json(b, path);
		/* a stray goes with this plan's sync, or with sync --full */
		tend_buf_printf(b, ", \"invalidation\": null, \"stray\": true, "
				   "\"needs_full\": %s}",
		    x->going ? "false" : "true");
	} else if (!c->quiet && x->going)
		printf("%s-%s %s %s  (not declared: the target is exclusive)\n",
		    col ? "\033[31m" : "", col ? "\033[0m" : "", x->app, path);
	else if (!c->quiet)
		printf("? %s %s  (not declared in an exclusive target: tend "
		       "sync --full removes it)\n", x->app, path);
	x->n++;
	tend_buf_release(&shown);
}

static void
plan_app(struct cli *c, struct tend_ws *ws, struct tend_app_config *a,
    const struct tend_app_result *res, int rc)
{
	const char *app = a->name;
	bool col = use_color(c);
	struct stray_ctx x = {c, app, c->full || c->destructive, NULL, 0};
	size_t n;

	/* an exclusive target's undeclared files: the destructive switch
	 * to exclusive, or sync --full, removes them */
	if (rc == 0 && !tend_app_strays(ws, a, false, plan_stray, &x, &n) &&
	    n) {
		c->pending = true;
		if (x.going)
			c->plan_ops[2] += n;
		else
			c->plan_strays += n;
	}
	c->destructive = false;

	for (size_t i = 0; i < res->nheld; i++) {
		if (c->json) {
			struct tend_buf *b = &c->json_items;

			tend_buf_puts(b, b->len ? ",\n  {" : "\n  {");
			tend_buf_printf(b, "\"op\": \"%s\", \"app\": ",
			    res->held_update ? "update" : "delete");
			tend_buf_json(b, app);
			tend_buf_puts(b, ", \"path\": ");
			tend_buf_json(b, res->held[i]);
			tend_buf_puts(b, ", \"invalidation\": null, "
					 "\"held\": true}");
		} else if (c->quiet)
			continue;
		else if (res->held_update)
			printf("%s~%s %s %s  (held by the delete brake: %llu "
			       "sources vanished)\n",
			    col ? "\033[33m" : "", col ? "\033[0m" : "", app,
			    res->held[i], (unsigned long long)res->held_deletes);
		else
			printf("%s-%s %s %s  (held by the delete brake)\n",
			    col ? "\033[31m" : "", col ? "\033[0m" : "", app,
			    res->held[i]);
	}
	c->plan_held += res->nheld;
	if (res->held_deletes)
		c->pending = true;
	if (rc && (res->error || c->failed || c->errors))
		c->plan_failed += res->error ? 1 : c->failed + c->errors;
}

/* plan's last line: a promise, so only what was looked at */
static void
plan_summary(struct cli *c)
{
	const uint64_t *n = c->plan_ops;

	if (!c->pending && !c->plan_failed) {
		printf("No changes: every declaration is applied as "
		       "recorded (tend check reads the targets for drift).\n");
		return;
	}
	printf("Plan: %llu to create, %llu to update, %llu to delete",
	    (unsigned long long)n[0], (unsigned long long)n[1],
	    (unsigned long long)n[2]);
	if (c->plan_held)
		printf(", %llu held by the delete brake (tend sync "
		       "--allow-delete applies them)",
		    (unsigned long long)c->plan_held);
	if (c->plan_strays)
		printf(", %llu undeclared in exclusive targets (tend sync "
		       "--full removes them)",
		    (unsigned long long)c->plan_strays);
	if (c->plan_failed)
		printf("; %llu failed, nothing planned for %s", (unsigned long
			long)c->plan_failed,
		    c->plan_failed == 1 ? "it" : "them");
	printf(".\n");
}

/* One app's pass in sync --json: {"app", "status", "result": {...}} */
static void
put_app_pass(struct tend_buf *b, size_t k, const char *app,
    const struct tend_pass *p)
{
	tend_buf_puts(b, k ? ",\n  {\"app\": " : "\n  {\"app\": ");
	tend_buf_json(b, app);
	tend_buf_printf(b, ", \"status\": %d, \"result\": {", p->status);
	tend_pass_json(b, p);
	tend_buf_puts(b, "}}");
}

static void
put_doc(struct tend_buf *b)
{
	fputs(b->ptr, stdout);
	doc_printed = true;
}

struct agent_pass {
	char *app;
	struct tend_json *j;
};

/*
 * tend sync beside a running agent: the agent runs the passes and this
 * reports them as its own would be (the same lines, the same JSON).
 * Returns -1 when no agent answered, else the exit status.
 */
static int
sync_by_agent(struct cli *c, struct tend_ws *ws)
{
	struct tend_buf reply = TEND_BUF_INIT, out = TEND_BUF_INIT;
	struct agent_pass *v = NULL;
	size_t n = 0;
	int status = 0;

	if (tend_agent_request(ws->state_dir, "sync", &reply, true) != 0) {
		tend_buf_release(&reply);
		return -1;
	}
	/* a pass_finished line per pass; an app's last one is the sync's */
	for (char *line = reply.ptr; *line;) {
		char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		struct tend_json *j = tend_json_parse(line, len, NULL, 0);
		const char *app = tend_json_str(j, "app", NULL);
		size_t k;

		line += len + (nl != NULL);
		if (!app) {
			tend_json_free(j);
			continue;
		}
		for (k = 0; k < n && strcmp(v[k].app, app) != 0; k++)
			;
		if (k == n) {
			v = tend_xrealloc(v, (n + 1) * sizeof *v);
			v[n++] = (struct agent_pass){tend_xstrdup(app), NULL};
		}
		tend_json_free(v[k].j);
		v[k].j = j;
	}
	tend_buf_release(&reply);
	int pid = tend_ws_agent_pid(ws);
	if (c->json)
		tend_buf_puts(&out, "{\"agent\": true, \"apps\": [");
	else if (!c->quiet) {
		if (pid > 0)
			printf("applied by the running agent (pid %d):\n", pid);
		else
			printf("applied by the running agent:\n");
	}
	for (size_t k = 0; k < n; k++) {
		struct tend_pass p;
		size_t al = strlen(v[k].app);

		tend_pass_from_json(&p, v[k].j);
		if (p.status)
			status = EXIT_FAIL;
		if (p.error) /* (its messages name the app, or not) */
			fprintf(stderr, "tend: %s%s%s\n",
			    strncmp(p.error, v[k].app, al) == 0 &&
				p.error[al] == ':' ? "" : v[k].app,
			    strncmp(p.error, v[k].app, al) == 0 &&
				p.error[al] == ':' ? "" : ": ",
			    p.error);
		if (c->json)
			put_app_pass(&out, k, v[k].app, &p);
		else if (!c->quiet) {
			struct tend_buf t = TEND_BUF_INIT;

			tend_pass_text(&t, &p);
			printf("%s: %s\n", v[k].app, t.ptr);
			tend_buf_release(&t);
		}
	}
	if (c->json) {
		tend_buf_puts(&out, n ? "\n]}\n" : "]}\n");
		put_doc(&out);
	}
	for (size_t k = 0; k < n; k++) {
		free(v[k].app);
		tend_json_free(v[k].j);
	}
	free(v);
	tend_buf_release(&out);
	return status;
}

static int
cmd_sync(struct cli *c, struct tend_ws *ws, bool preview)
{
	struct tend_buf out = TEND_BUF_INIT;
	int status = 0, rc;
	size_t shown = 0;

	if ((rc = check_app_names(c, ws, false)))
		return rc;
	if (!preview && !c->full && !c->napps && !c->allow_delete) {
		/* an agent runs: it does the pass, we report it */
		if ((rc = sync_by_agent(c, ws)) >= 0)
			return rc;
	}
	if (!preview && (rc = writer_open(ws, "tend sync")))
		return rc;
	if (preview && (rc = tend_ws_open(ws))) {
		say_error("%s", tend_error_last());
		return EXIT_FAIL;
	}
	tend_engine_subscribe(ws->eng, ~0u, on_event, c);
	if (c->json)
		tend_buf_puts(&out, preview ? "{\"actions\": ["
					    : "{\"agent\": false, \"apps\": [");
	for (size_t i = 0; i < ws->cfg.napps; i++) {
		struct tend_app_config *app = &ws->cfg.apps[i];
		struct tend_app_result res;
		struct tend_sync_opts o = {
			.full = c->full,
			.preview = preview,
			.allow_delete = c->allow_delete,
			.progress = progress,
			.arg = c,
		};
		double t0 = now_s();

		if (!selected(c, app->name))
			continue;
		c->created = c->updated = c->deleted = c->failed = 0;
		c->errors = c->invalidations = c->shown = 0;
		c->cur_app = app->name;
		rc = tend_app_sync(ws, app, &o, &res);
		flush_same_errors(c);
		double dt = now_s() - t0;
		if (c->tty)
			fputs("\r\033[K", stderr);
		c->deleted += res.strays;
		if (preview)
			plan_app(c, ws, app, &res, rc);
		/* an error of the app itself (the entries' failures have
		 * been said, and are counted) */
		bool app_error = rc && (res.error || res.held_deletes ||
					   (!c->failed && !c->errors));
		if (rc)
			status = EXIT_FAIL;
		if (app_error)
			fprintf(stderr, "tend: %s\n", tend_error_last());
		if (!preview) {
			struct last_pass lp = {TEND_BUF_INIT, app->name};
			struct tend_pass p = {.time = (long long)time(NULL),
			    .ms = (uint64_t)(dt * 1000 + 0.5),
			    .status = rc ? 1 : 0, .created = c->created,
			    .updated = c->updated, .deleted = c->deleted,
			    .failed = c->failed, .errors = c->errors,
			    .held_deletes = res.held_deletes,
			    .files = res.files, .read = res.hashed,
			    .links_skipped = res.links_skipped,
			    .error = app_error ? tend_error_last() : NULL};

			tend_buf_putc(&lp.text, '{');
			tend_pass_json(&lp.text, &p);
			tend_buf_putc(&lp.text, '}');
			tend_store_write_settle(tend_engine_store(ws->eng), put_last,
			    &lp);
			if (c->json)
				put_app_pass(&out, shown, app->name, &p);
			else if (!c->quiet) {
				struct tend_buf t = TEND_BUF_INIT;

				tend_pass_text(&t, &p);
				printf("%s: %s\n", app->name, t.ptr);
				tend_buf_release(&t);
			}
			tend_buf_release(&lp.text);
		}
		shown++;
		tend_app_result_finish(&res);
	}
	if (preview) {
		if (c->json) {
			tend_buf_puts(&out, c->json_items.ptr);
			tend_buf_printf(&out, "%s], \"pending\": %s, "
					      "\"create\": %llu, \"update\": %llu, "
					      "\"delete\": %llu, \"held\": %llu, "
					      "\"failed\": %llu}\n",
			    c->json_items.len ? "\n" : "",
			    c->pending ? "true" : "false",
			    (unsigned long long)c->plan_ops[0],
			    (unsigned long long)c->plan_ops[1],
			    (unsigned long long)c->plan_ops[2],
			    (unsigned long long)c->plan_held,
			    (unsigned long long)c->plan_failed);
		} else if (!c->quiet)
			plan_summary(c);
		if (status == 0 && c->pending)
			status = EXIT_PENDING;
	} else if (c->json)
		tend_buf_puts(&out, shown ? "\n]}\n" : "]}\n");
	if (c->json)
		put_doc(&out);
	tend_buf_release(&out);
	return status;
}

/* Text for a terminal: control characters and bytes that are not UTF-8
 * as plan escapes them, \t \n \xNN (an owner's component path, a drift
 * message: text to read, not names to parse) */
static void
put_readable(struct tend_buf *b, const char *s)
{
	size_t n = strlen(s);

	for (size_t i = 0; i < n;) {
		unsigned char ch = (unsigned char)s[i];
		size_t l = tend_utf8_len(s + i, n - i);

		if (ch == '\n' || ch == '\t') {
			tend_buf_puts(b, ch == '\n' ? "\\n" : "\\t");
			i++;
		} else if (ch < 0x20 || ch == 0x7f || l == 0) {
			tend_buf_printf(b, "\\x%02x", ch);
			i++;
		} else {
			tend_buf_put(b, s + i, l);
			i += l;
		}
	}
}

struct ls_row {
	char *path;  /* as plan spells it */
	char *line;  /* what is printed: text, or a JSON object */
};

struct ls_ctx {
	struct cli *c;
	struct ls_row *v;
	size_t n;
};

static void
on_state(const struct tend_state_info *si, void *arg)
{
	struct ls_ctx *l = arg;
	struct tend_buf rec = TEND_BUF_INIT, path = TEND_BUF_INIT;
	struct tend_buf line = TEND_BUF_INIT;

	if (si->record)
		tend_buf_puthex(&rec, si->record,
		    si->len > 17 ? 17 : si->len);
	tend_state_display_path(&path, si->path, si->container);
	if (l->c->json) {
		tend_buf_puts(&line, "{\"path\": ");
		tend_buf_json(&line, path.ptr);
		if (strchr(path.ptr, '\\'))
			tend_buf_puts(&line, ", \"path_escaped\": true");
		tend_buf_puts(&line, ", \"owner\": ");
		tend_buf_json(&line, si->component);
		tend_buf_printf(&line, ", \"record\": \"%s\", \"container\": "
				       "%s, \"pending\": %s",
		    rec.ptr, si->container ? "true" : "false",
		    si->pending ? "true" : "false");
		if (si->drift) {
			tend_buf_puts(&line, ", \"drift\": ");
			tend_buf_json(&line, si->drift);
		}
		tend_buf_putc(&line, '}');
	} else if (si->drift) {
		tend_buf_printf(&line, "drift %s: ", path.ptr);
		put_readable(&line, si->drift);
		tend_buf_putc(&line, '\n');
	} else {
		tend_buf_printf(&line, "%s  %s  ", path.ptr,
		    si->record ? rec.ptr : "-");
		put_readable(&line, si->component);
		tend_buf_puts(&line, si->pending ? "  (pending)\n" : "\n");
	}
	l->v = tend_xrealloc(l->v, (l->n + 1) * sizeof *l->v);
	l->v[l->n].path = tend_buf_detach(&path, NULL);
	l->v[l->n++].line = tend_buf_detach(&line, NULL);
	tend_buf_release(&rec);
}

static void
check_stray(const char *path, void *arg)
{
	struct tend_state_info si = {.component = "", .path = path,
	    .drift = "not declared: the target is exclusive (tend sync --full "
		     "removes it)"};

	on_state(&si, arg);
}

static int
cmp_row(const void *x, const void *y)
{
	return strcmp(((const struct ls_row *)x)->path,
	    ((const struct ls_row *)y)->path);
}

static int
cmd_ls_check(struct cli *c, struct tend_ws *ws, bool check)
{
	struct tend_buf out = TEND_BUF_INIT;
	struct ls_ctx l = {c, NULL, 0};
	unsigned drift = 0;
	size_t shown = 0;
	int rc;

	if (c->napps > 1)
		die_usage("%s takes at most one app", c->cmd);
	if ((rc = check_app_names(c, ws, !check)))
		return rc;
	/* a running agent commits what it settled before we read it */
	tend_agent_settle(ws->state_dir);
	if ((rc = tend_ws_open(ws))) {
		say_error("%s", tend_error_last());
		return EXIT_FAIL;
	}
	if (c->json)
		tend_buf_puts(&out, check ? "{\"drift\": [" : "{\"states\": [");
	for (size_t i = 0; i < ws->cfg.napps || (c->napps && i == 0); i++) {
		const char *name = c->napps ? c->apps[0] : ws->cfg.apps[i].name;
		unsigned d = 0;

		l.n = 0;
		if (check)
			rc = tend_engine_check(ws->eng, name, on_state, &l, &d);
		else
			rc = tend_engine_list(ws->eng, name, on_state, &l);
		/* an exclusive target holds only what is declared */
		struct tend_app_config *a = check && !rc ? tend_ws_app(ws, name)
							: NULL;
		size_t ns;
		if (a && tend_app_strays(ws, a, false, check_stray, &l, &ns) == 0)
			d += (unsigned)ns;
		/* each app's states in the order of their paths */
		if (l.n > 1)
			qsort(l.v, l.n, sizeof *l.v, cmp_row);
		for (size_t k = 0; k < l.n; k++) {
			if (!rc && c->json) {
				tend_buf_puts(&out, shown++ ? ",\n  " : "\n  ");
				tend_buf_puts(&out, l.v[k].line);
			} else if (!rc)
				fputs(l.v[k].line, stdout);
			free(l.v[k].path);
			free(l.v[k].line);
		}
		if (rc) {
			say_error("%s", tend_error_last());
			free(l.v);
			tend_buf_release(&out);
			return EXIT_FAIL;
		}
		drift += d;
		if (c->napps)
			break;
	}
	free(l.v);
	if (c->json) {
		tend_buf_printf(&out, "%s]}\n", shown ? "\n" : "");
		put_doc(&out);
	} else if (check && !c->quiet)
		printf(drift ? "%u target state(s) drifted: tend sync --full "
			       "repairs them\n"
			     : "no drift\n",
		    drift);
	tend_buf_release(&out);
	return check && drift ? EXIT_FAIL : 0;
}

struct count_ctx {
	unsigned states, pending, containers;
};

static void
on_count(const struct tend_state_info *si, void *arg)
{
	struct count_ctx *cc = arg;

	cc->states++;
	cc->pending += si->pending;
	cc->containers += si->container;
}

/* "12:03:04, 5 s ago" (with the date when it is not today's) */
static void
put_when(struct tend_buf *b, long long t)
{
	time_t now = time(NULL), tt = (time_t)t;
	long long age = (long long)now - t;
	struct tm tm, today;
	char s[32];

	localtime_r(&tt, &tm);
	localtime_r(&now, &today);
	strftime(s, sizeof s,
	    tm.tm_year == today.tm_year && tm.tm_yday == today.tm_yday
		? "%H:%M:%S" : "%Y-%m-%d %H:%M:%S", &tm);
	tend_buf_printf(b, "%s, ", s);
	if (age < 0)
		tend_buf_puts(b, "in the future (is the clock right?)");
	else if (age < 60)
		tend_buf_printf(b, "%lld s ago", age);
	else if (age < 3600)
		tend_buf_printf(b, "%lld min ago", age / 60);
	else if (age < 2 * 86400)
		tend_buf_printf(b, "%lld h %lld min ago", age / 3600,
		    age % 3600 / 60);
	else
		tend_buf_printf(b, "%lld days ago", age / 86400);
}

/* The agent's entry for `name` in its status answer, or NULL */
static const struct tend_json *
agent_app(const struct tend_json *agent, const char *name)
{
	const struct tend_json *apps = tend_json_get(agent, "apps");

	for (const struct tend_json *a = apps ? apps->child : NULL; a;
	     a = a->next)
		if (strcmp(tend_json_str(a, "name", ""), name) == 0)
			return a;
	return NULL;
}

/*
 * tend status: the agent, then each app, in tend.conf's order and then
 * those tracked from before. Text says it with local times and ages; the
 * JSON has the same facts under the same names as sync's.
 */
static int
cmd_status(struct cli *c, struct tend_ws *ws)
{
	char **tracked = NULL;
	size_t ntracked = 0, shown = 0;
	struct tend_buf out = TEND_BUF_INIT, reply = TEND_BUF_INIT;
	struct tend_txn *txn = NULL;
	struct tend_json *agent = NULL;
	int rc;

	if (tend_agent_request(ws->state_dir, "status", &reply, false) == 0)
		agent = tend_json_parse(reply.ptr, reply.len, NULL, 0);
	tend_buf_release(&reply);
	if ((rc = tend_ws_open(ws)) ||
	    (rc = tend_ws_tracked_apps(ws, &tracked, &ntracked))) {
		say_error("%s", tend_error_last());
		tend_json_free(agent);
		return EXIT_FAIL;
	}
	if (c->json) {
		tend_buf_printf(&out, "{\"workspace\": ");
		tend_buf_json(&out, ws->root);
		tend_buf_puts(&out, ", \"agent\": ");
		if (agent) {
			/* its status answer, but for "event", and its apps
			 * are under "apps" below */
			tend_buf_putc(&out, '{');
			for (const struct tend_json *m = agent->child; m;
			     m = m->next) {
				if (strcmp(m->key, "event") == 0 ||
				    strcmp(m->key, "apps") == 0)
					continue;
				tend_buf_puts(&out, out.ptr[out.len - 1] == '{'
						  ? "" : ", ");
				tend_buf_json(&out, m->key);
				tend_buf_puts(&out, ": ");
				tend_json_write(&out, m);
			}
			tend_buf_putc(&out, '}');
		} else
			tend_buf_puts(&out, "null");
		tend_buf_puts(&out, ", \"apps\": [");
	} else if (!c->quiet) {
		printf("workspace %s (state %s)\n", ws->root, ws->cfg.state);
		if (agent) {
			struct tend_buf t = TEND_BUF_INIT;
			long long started = tend_json_int(agent, "started", 0,
			    TEND_JSON_INT_MAX, 0);

			if (started)
				put_when(&t, started);
			else
				tend_buf_puts(&t, "?");
			printf("agent: pid %lld, %s, started %s; %lld passes, "
			       "%lld watches, %lld overflows, %lld queued, "
			       "%lld applied\n",
			    tend_json_int(agent, "pid", 0, INT32_MAX, 0),
			    tend_json_str(agent, "state", "?"), t.ptr,
			    tend_json_int(agent, "passes", 0, TEND_JSON_INT_MAX, 0),
			    tend_json_int(agent, "watches", 0, TEND_JSON_INT_MAX, 0),
			    tend_json_int(agent, "overflows", 0, TEND_JSON_INT_MAX, 0),
			    tend_json_int(agent, "queue", 0, TEND_JSON_INT_MAX, 0),
			    tend_json_int(agent, "applied", 0, TEND_JSON_INT_MAX, 0));
			tend_buf_release(&t);
		} else
			printf("agent: not running\n");
		if (!ws->cfg.napps)
			printf("%s defines no apps: add an [app \"NAME\"] "
			       "section with a source and a target (see "
			       "tend(1))\n", ws->conf_path);
	}
	tend_store_read_begin(tend_engine_store(ws->eng), &txn);
	size_t nall = ws->cfg.napps + ntracked;
	for (size_t i = 0; i < nall; i++) {
		const char *name = i < ws->cfg.napps ? ws->cfg.apps[i].name
						     : tracked[i - ws->cfg.napps];
		bool in_conf = tend_ws_app(ws, name) != NULL;
		struct count_ctx cc = {0};
		struct tend_bytes stored = {NULL, 0};
		const struct tend_json *aa = agent ? agent_app(agent, name) : NULL;
		const struct tend_json *al = tend_json_get(aa, "last");
		struct tend_json *sl = NULL;
		const struct tend_json *last = NULL;
		char key[300];

		if (i >= ws->cfg.napps && in_conf)
			continue;
		tend_engine_list(ws->eng, name, on_count, &cc);
		snprintf(key, sizeof key, "last/%s", name);
		if (tend_store_get(txn, TEND_T_META, key, strlen(key),
			&stored) == 0)
			sl = tend_json_parse((const char *)stored.data,
			    stored.len, NULL, 0);
		/* the agent's pass, if it made one since it started; else
		 * the one kept in the store */
		last = al && al->type == TEND_JSON_OBJ ? al : sl;
		long long queued = tend_json_int(aa, "queued", 0,
		    TEND_JSON_INT_MAX, 0);
		long long held = tend_json_int(aa, "held", 0,
		    TEND_JSON_INT_MAX, 0);
		if (c->json) {
			tend_buf_puts(&out, shown++ ? ",\n  {" : "\n  {");
			tend_buf_puts(&out, "\"app\": ");
			tend_buf_json(&out, name);
			tend_buf_printf(&out,
			    ", \"configured\": %s, \"states\": %u, "
			    "\"pending\": %u",
			    in_conf ? "true" : "false", cc.states, cc.pending);
			if (aa)
				tend_buf_printf(&out, ", \"queued\": %lld, "
						      "\"held_deletes\": %lld",
				    queued, held);
			tend_buf_puts(&out, ", \"last\": ");
			if (last) {
				struct tend_pass p;

				tend_pass_from_json(&p, last);
				tend_buf_putc(&out, '{');
				tend_pass_json(&out, &p);
				tend_buf_printf(&out, ", \"by\": \"%s\"}",
				    last == al ? "agent" : "store");
			} else
				tend_buf_puts(&out, "null");
			tend_buf_putc(&out, '}');
		} else if (!c->quiet) {
			struct tend_buf t = TEND_BUF_INIT;

			tend_buf_puts(&t, name);
			if (!in_conf)
				tend_buf_printf(&t, " (not in tend.conf: tend "
						    "drop %s removes it)", name);
			tend_buf_printf(&t, ": %u target states, %u unsettled",
			    cc.states, cc.pending);
			if (queued)
				tend_buf_printf(&t, ", %lld queued", queued);
			if (held)
				tend_buf_printf(&t, ", %lld delete%s held", held,
				    held == 1 ? "" : "s");
			if (last) {
				struct tend_pass p;

				tend_pass_from_json(&p, last);
				tend_buf_puts(&t, "; last pass ");
				if (p.time)
					put_when(&t, p.time);
				tend_buf_puts(&t, ": ");
				tend_pass_text(&t, &p);
				if (p.error) {
					tend_buf_puts(&t, "\n  error: ");
					put_readable(&t, p.error);
				}
			} else
				tend_buf_puts(&t, "; never synced");
			printf("%s\n", t.ptr);
			tend_buf_release(&t);
		}
		tend_json_free(sl);
	}
	tend_store_read_end(txn);
	if (c->json) {
		tend_buf_puts(&out, shown ? "\n]}\n" : "]}\n");
		put_doc(&out);
	}
	for (size_t i = 0; i < ntracked; i++)
		free(tracked[i]);
	free(tracked);
	tend_json_free(agent);
	tend_buf_release(&out);
	return 0;
}

struct forget {
	const char *app;
};

static int
forget_body(struct tend_txn *txn, void *arg)
{
	struct forget *f = arg;
	struct tend_buf p = TEND_BUF_INIT;
	char key[300];
	int rc;

	tend_buf_puts(&p, f->app);
	tend_buf_putc(&p, 0);
	rc = tend_store_del_prefix(txn, TEND_T_SIG, p.ptr, p.len);
	tend_buf_release(&p);
	snprintf(key, sizeof key, "last/%s", f->app);
	if (rc == 0)
		rc = tend_store_del(txn, TEND_T_META, key, strlen(key));
	return rc;
}

/* A tracked state of a target type no loaded connector provides (its
 * [plugin] left tend.conf): a drop could only forget it, not delete it */
struct unknown_root {
	struct tend_engine *eng;
	char *path;
};

static void
find_unknown_root(const struct tend_state_info *si, void *arg)
{
	struct unknown_root *u = arg;
	const char *p = si->path;

	if (u->path || strncmp(p, "/@", 2) != 0)
		return;
	/* the root's name is some '/'-prefix of what follows "/@" */
	for (const char *q = p + 2; *q; q++) {
		if (*q != '/')
			continue;
		char *name = strndup(p + 2, (size_t)(q - (p + 2)));
		bool known = name && tend_engine_root(u->eng, name);

		free(name);
		if (known)
			return;
	}
	if (tend_engine_root(u->eng, p + 2))
		return;
	u->path = tend_xstrdup(p + 1);
}

static int
cmd_drop(struct cli *c, struct tend_ws *ws)
{
	struct tend_buf out = TEND_BUF_INIT;
	int status = 0, rc;

	if (!c->napps)
		die_usage("drop needs the name of an app");
	if ((rc = check_app_names(c, ws, true)))
		return rc;
	if ((rc = writer_open(ws, "tend drop")))
		return rc;
	tend_engine_subscribe(ws->eng, ~0u, on_event, c);
	if (c->json)
		tend_buf_puts(&out, "{\"apps\": [");
	for (size_t i = 0; i < c->napps; i++) {
		struct tend_stats st;
		struct forget f = {c->apps[i]};

		c->deleted = c->failed = 0;
		c->cur_app = c->apps[i];
		struct unknown_root u = {ws->eng, NULL};
		tend_engine_list(ws->eng, c->apps[i], find_unknown_root, &u);
		if (u.path) {
			rc = tend_error_set(TEND_EINVALID, "%s is a target of a "
			    "type no loaded plugin provides (is its [plugin] "
			    "section gone from tend.conf?): nothing dropped; put "
			    "the section back", u.path);
			free(u.path);
		} else
			/* the app's source rows go first: a drop killed
			 * halfway leaves nothing that lets the next sync skip
			 * a source (its entries may be half deleted) */
			rc = tend_store_write(tend_engine_store(ws->eng),
			    forget_body, &f);
		if (rc == 0)
			rc = tend_engine_drop(ws->eng, c->apps[i], &st);
		flush_same_errors(c);
		if (rc == 0)
			rc = tend_store_write(tend_engine_store(ws->eng),
			    forget_body, &f);
		if (rc == TEND_EINVALID) {
			fprintf(stderr, "tend: drop %s: %s\n", c->apps[i],
			    tend_error_last());
			status = EXIT_FAIL;
		} else if (rc) {
			fprintf(stderr, "tend: drop %s: %s (what could not be "
					"reverted is still tracked; run drop "
					"again)\n",
			    c->apps[i], tend_error_last());
			status = EXIT_FAIL;
		} else if (!c->quiet && !c->json)
			printf("%s: dropped, %llu target states reverted\n",
			    c->apps[i], (unsigned long long)c->deleted);
		if (c->json) {
			tend_buf_puts(&out, i ? ",\n  {\"app\": " : "\n  {\"app\": ");
			tend_buf_json(&out, c->apps[i]);
			tend_buf_printf(&out, ", \"status\": %d, \"deleted\": %llu, "
					      "\"failed\": %llu",
			    rc ? 1 : 0, (unsigned long long)c->deleted,
			    (unsigned long long)c->failed);
			if (rc) {
				tend_buf_puts(&out, ", \"error\": ");
				tend_buf_json(&out, tend_error_last());
			}
			tend_buf_putc(&out, '}');
		}
	}
	if (c->json) {
		tend_buf_puts(&out, "\n]}\n");
		put_doc(&out);
	}
	tend_buf_release(&out);
	return status;
}

struct agent_thread {
	struct tend_ws *ws;
	struct tend_agent_opts *ao;
	int rc;
	char msg[512]; /* its error (errors are per thread) */
	int done_fd; /* closed when the agent returns */
};

static void *
agent_thread(void *arg)
{
	struct agent_thread *t = arg;
	sigset_t m;

	/* the dashboard's thread takes resizes and ^C */
	sigemptyset(&m);
	sigaddset(&m, SIGWINCH);
	sigaddset(&m, SIGINT);
	sigaddset(&m, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &m, NULL);
	t->rc = tend_agent_run(t->ws, t->ao);
	if (t->rc)
		snprintf(t->msg, sizeof t->msg, "%s", tend_error_last());
	close(t->done_fd);
	return NULL;
}

/*
 * tend watch --tui: the agent on a thread of its own, the dashboard on
 * this one, talking over the agent's socket like tend top does. The
 * agent logs to state/agent.log (the terminal is the dashboard's);
 * quitting the dashboard stops the agent as SIGTERM would.
 */
static int
watch_tui(struct tend_ws *ws, struct tend_agent_opts *ao)
{
	int stop[2], done[2];
	struct tend_buf log = TEND_BUF_INIT;
	struct agent_thread t = {.ws = ws, .ao = ao};
	pthread_t th;
	sigset_t m;

	if (tend_top_need_tty("tend watch --tui"))
		exit(EXIT_USAGE);
	if (pipe2(stop, O_CLOEXEC) != 0 || pipe2(done, O_CLOEXEC) != 0)
		return tend_error_set(TEND_ERROR, "pipe: %s", strerror(errno));
	mkdir(ws->state_dir, 0700);
	tend_buf_printf(&log, "%s/agent.log", ws->state_dir);
	int lfd = open(log.ptr, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
	    0600);
	int saved = dup(2);
	if (lfd >= 0) {
		dup2(lfd, 2);
		close(lfd);
	}
	/* SIGHUP reloads the agent's config: its signalfd takes it */
	sigemptyset(&m);
	sigaddset(&m, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &m, NULL);
	ao->stop_fd = stop[0];
	t.done_fd = done[1];
	if (pthread_create(&th, NULL, agent_thread, &t) != 0) {
		tend_buf_release(&log);
		return tend_error_set(TEND_ERROR, "thread: %s",
		    strerror(errno));
	}
	struct tend_top_opts to = {.state_dir = ws->state_dir,
	    .workspace = ws->root, .agent_done_fd = done[0]};
	tend_top_run(&to);
	if (write(stop[1], "q", 1) < 0)
		perror("tend watch: stop");
	pthread_join(th, NULL);
	if (saved >= 0) {
		dup2(saved, 2);
		close(saved);
	}
	close(stop[0]);
	close(stop[1]);
	close(done[0]);
	tend_buf_release(&log);
	return t.rc ? tend_error_set(t.rc, "%s", t.msg) : 0;
}

static void
parse_args(struct cli *c, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "-C") == 0 || strcmp(a, "-c") == 0) {
			if (i + 1 >= argc)
				die_usage("%s needs an argument", a);
			if (a[1] == 'C')
				c->dir = argv[++i];
			else
				c->conf = argv[++i];
		} else if (strcmp(a, "--json") == 0)
			c->json = true;
		else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0)
			c->quiet = true;
		else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0)
			c->verbose++;
		else if (strcmp(a, "--full") == 0)
			c->full = true;
		else if (strcmp(a, "--allow-delete") == 0)
			c->allow_delete = true;
		else if (strcmp(a, "--daemon") == 0)
			c->daemon = true;
		else if (strcmp(a, "--tui") == 0)
			c->tui = true;
		else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
			c->help = true;
		else if (strcmp(a, "--version") == 0) {
			printf("tend 0.1.0\n");
			exit(0);
		} else if (strncmp(a, "--color", 7) == 0) {
			const char *w = a[7] == '=' ? a + 8 : "always";
			c->color = strcmp(w, "always") == 0 ? 1
			    : strcmp(w, "never") == 0	   ? 0
			    : strcmp(w, "auto") == 0	   ? -1
							   : -2;
			if (c->color == -2)
				die_usage("--color takes auto, always or never");
		} else if (a[0] == '-' && a[1])
			die_usage("unknown option %s", a);
		else if (!c->cmd)
			c->cmd = a;
		else {
			c->apps = realloc(c->apps,
			    (c->napps + 1) * sizeof *c->apps);
			if (!c->apps)
				abort();
			c->apps[c->napps++] = argv[i];
		}
	}
}

int
tend_main(int argc, char **argv, const struct tend_main_opts *opts)
{
	main_argv = argv;
	struct cli c = {.color = -1, .json_items = TEND_BUF_INIT};
	struct tend_ws ws;
	struct tend_buf err = TEND_BUF_INIT;
	int rc;

	/* before anything can fail: a usage error is a JSON document too */
	json_mode = doc_printed = false;
	for (int i = 1; i < argc; i++)
		json_mode |= strcmp(argv[i], "--json") == 0;
	parse_args(&c, argc, argv);
	if (!c.cmd) {
		fputs(usage_text, c.help ? stdout : stderr);
		return c.help ? 0 : EXIT_USAGE;
	}
	const char *topic = c.cmd;
	bool help = c.help;
	if (strcmp(c.cmd, "help") == 0 && !c.help) {
		/* tend help [COMMAND]: what tend [COMMAND] --help says */
		if (c.napps > 1)
			die_usage("help takes one command");
		if (!c.napps) {
			fputs(usage_text, stdout);
			return 0;
		}
		topic = c.apps[0];
		help = true;
		if (strcmp(topic, "config") == 0) {
			free(c.apps);
			return help_config(&c);
		}
	}
	size_t ci;
	for (ci = 0; ci < sizeof cmd_help / sizeof *cmd_help; ci++)
		if (strcmp(cmd_help[ci].cmd, topic) == 0)
			break;
	if (ci == sizeof cmd_help / sizeof *cmd_help)
		die_usage("unknown command \"%s\"", topic);
	if (help) {
		fputs(cmd_help[ci].help, stdout);
		free(c.apps);
		return 0;
	}
	bool watch = strcmp(c.cmd, "watch") == 0;
	if (watch && c.napps)
		die_usage("watch takes no app: it follows every app of "
			  "tend.conf");
	if (watch && c.daemon && c.tui)
		die_usage("--daemon and --tui do not go together: --tui runs "
			  "the dashboard on this terminal");
	if (watch && c.tui && tend_top_need_tty("tend watch --tui"))
		exit(EXIT_USAGE);
	c.tty = isatty(2) && !c.quiet && !c.json;
	rc = tend_ws_load(&ws, c.dir, c.conf, &err);
	if (rc) {
		fprintf(stderr, "%s%s", rc == TEND_EINVALID ? "" : "tend: ",
		    err.ptr);
		keep_error(err.ptr);
		tend_buf_release(&err);
		tend_ws_close(&ws);
		free(c.apps);
		rc = EXIT_USAGE;
		goto out;
	}
	tend_buf_release(&err);
	if (opts && (rc = tend_ws_add_code_apps(&ws, opts)) != 0) {
		say_error("%s", tend_error_last());
		tend_ws_close(&ws);
		free(c.apps);
		rc = EXIT_USAGE;
		goto out;
	}
	/* a config without apps has nothing to do: every command says so
	 * (status reports it; drop and ls APP still reach apps tracked from
	 * before) */
	if (!ws.cfg.napps && strcmp(c.cmd, "status") != 0 &&
	    strcmp(c.cmd, "drop") != 0 &&
	    !(strcmp(c.cmd, "ls") == 0 && c.napps)) {
		say_error("%s defines no apps: add an [app \"NAME\"] section "
			  "with a source and a target (see tend(1))",
		    ws.conf_path);
		rc = EXIT_USAGE;
	} else if (strcmp(c.cmd, "sync") == 0)
		rc = cmd_sync(&c, &ws, false);
	else if (strcmp(c.cmd, "plan") == 0)
		rc = cmd_sync(&c, &ws, true);
	else if (strcmp(c.cmd, "ls") == 0)
		rc = cmd_ls_check(&c, &ws, false);
	else if (strcmp(c.cmd, "check") == 0)
		rc = cmd_ls_check(&c, &ws, true);
	else if (strcmp(c.cmd, "status") == 0)
		rc = cmd_status(&c, &ws);
	else if (strcmp(c.cmd, "top") == 0) {
		struct tend_top_opts to = {.state_dir = ws.state_dir,
		    .workspace = ws.root, .agent_done_fd = -1};

		rc = tend_top_run(&to);
	}
	else if (watch) {
		/* one line per pass unless -q; -v says more */
		struct tend_agent_opts ao = {
		    .verbose = c.quiet ? 0 : 1 + c.verbose,
		    .allow_delete = c.allow_delete, .ready_fd = -1,
		    .stop_fd = -1};
		const char *rfd = getenv("TEND_READY_FD");

		if (rfd)
			ao.ready_fd = atoi(rfd);
		/* started again after a connector plugin changed: it is
		 * detached already */
		bool again = getenv("TEND_AGENT_RESTARTED") != NULL;
		unsetenv("TEND_AGENT_RESTARTED");
		bool restart = false;
		if (!c.tui)
			ao.restart = &restart;
		if (c.daemon && !again) {
			/* the parent returns once the child has caught up */
			int p[2];
			char buf[8];

			if (pipe(p) != 0) {
				perror("tend watch: pipe");
				return EXIT_FAIL;
			}
			pid_t pid = fork();
			if (pid > 0) {
				close(p[1]);
				ssize_t n = read(p[0], buf, sizeof buf);
				close(p[0]);
				if (n <= 0) {
					fprintf(stderr, "tend watch: the agent did "
							"not start (see %s/agent.log)\n",
					    ws.state_dir);
					return EXIT_FAIL;
				}
				printf("agent started, pid %d\n", (int)pid);
				return 0;
			}
			close(p[0]);
			setsid();
			struct tend_buf log = TEND_BUF_INIT;
			mkdir(ws.state_dir, 0700);
			tend_buf_printf(&log, "%s/agent.log", ws.state_dir);
			int lfd = open(log.ptr, O_WRONLY | O_CREAT | O_APPEND |
				O_CLOEXEC, 0600);
			int nfd = open("/dev/null", O_RDWR);
			if (lfd >= 0) {
				dup2(lfd, 2);
				dup2(lfd, 1);
				close(lfd);
			}
			if (nfd >= 0) {
				dup2(nfd, 0);
				close(nfd);
			}
			tend_buf_release(&log);
			ao.ready_fd = p[1];
		}
		if (c.tui)
			rc = watch_tui(&ws, &ao);
		else
			rc = tend_agent_run(&ws, &ao);
		if (rc == 0 && restart) {
			/* the same command on the new code: the locks and the
			 * socket went with the agent, the pid stays */
			tend_ws_close(&ws);
			setenv("TEND_AGENT_RESTARTED", "1", 1);
			/* its ready fd was written and closed: that number
			 * may be anything in the new process */
			unsetenv("TEND_READY_FD");
			execv("/proc/self/exe", main_argv);
			fprintf(stderr, "tend watch: restarting: %s\n",
			    strerror(errno));
			return EXIT_FAIL;
		}
		if (rc) {
			fprintf(stderr, "tend watch: %s\n", tend_error_last());
			keep_error(tend_error_last());
			rc = rc == TEND_EEXISTS ? EXIT_USAGE : EXIT_FAIL;
		}
	}
	else
		rc = cmd_drop(&c, &ws);
	tend_ws_close(&ws);
	tend_buf_release(&c.json_items);
	free(c.apps);
out:
	if (json_mode && rc && rc != EXIT_PENDING && !doc_printed)
		json_error(rc);
	free(first_error);
	first_error = NULL;
	return rc;
}
