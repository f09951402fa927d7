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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "app.h"
#include "check.h"
#include "inspect.h"
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
};

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
		 "summary line per app.\n\n"
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
	       "record.\n"},
	{"status", "usage: tend status [--json]\n\n"
		   "Per app: components, target states, unsettled states, "
		   "and the last pass.\n"},
	{"check", "usage: tend check [--json] [APP]\n\n"
		  "Read every tracked target and compare it with its "
		  "tracking record.\nExit status 1 when something drifted; "
		  "`tend sync --full` repairs it.\n"},
	{"watch", "usage: tend watch [--daemon | --tui] [--allow-delete] [-v]\n\n"
		  "--daemon detaches once the catch-up pass is done and logs "
		  "to\n.tend/agent.log. --tui runs the dashboard (tend top) in "
		  "the same\nprocess and logs to .tend/agent.log; quitting it "
		  "stops the agent.\n\n"
		  "Catch up once, then follow every app's sources with inotify "
		  "and apply\nchanges as they happen (debounce and max-delay "
		  "from [tend] in tend.conf).\nChanged files re-run only their "
		  "component; directory moves, overflows\nand lost watches "
		  "trigger a full pass (stat signatures keep it cheap).\n"
		  "Edits of tend.conf and SIGHUP reload the config; SIGINT and "
		  "SIGTERM\nfinish the current pass and exit 0. One agent per "
		  "workspace: its pid is\nin .tend/agent.pid. While it runs, "
		  "`tend status` and `tend sync` ask it\nthrough "
		  ".tend/agent.sock (JSON lines; commands: status, sync, "
		  "pause,\nresume, rescan, subscribe, settle).\n"},
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
	{"drop", "usage: tend drop APP...\n\n"
		 "Revert every target state the app created (delete what it "
		 "wrote), then\nforget the app. Not braked: it is explicit.\n"},
};

static void
die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
die_usage(const char *fmt, ...)
{
	va_list ap;

	fputs("tend: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'tend --help'.\n", stderr);
	exit(EXIT_USAGE);
}

static bool
use_color(const struct cli *c)
{
	if (c->color >= 0)
		return c->color == 1;
	return isatty(1) && !getenv("NO_COLOR");
}

/* "/@tend/dir/public/a.html" -> "public/a.html" */
static const char *
short_path(const char *p)
{
	if (strncmp(p, "/@tend/dir/", 11) == 0)
		return p + 11;
	if (strncmp(p, "/@tend/file/", 12) == 0)
		return p + 12;
	return p;
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

static int
check_app_names(struct cli *c, struct tend_ws *ws)
{
	for (size_t i = 0; i < c->napps; i++)
		if (!tend_ws_app(ws, c->apps[i])) {
			fprintf(stderr, "tend: no app \"%s\" in %s\n",
			    c->apps[i], ws->conf_path);
			return EXIT_USAGE;
		}
	return 0;
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
 * serialised with any other writing tend by state/write.lock.
 */
static int
writer_open(struct tend_ws *ws, const char *who)
{
	int pid = tend_ws_agent_pid(ws);

	if (pid < 0) {
		fprintf(stderr, "tend: an agent is starting for this "
				"workspace; try again when it runs\n");
		return EXIT_USAGE;
	}
	if (pid) {
		fprintf(stderr,
		    "tend: an agent (pid %d) runs for this workspace and "
		    "applies changes itself; it takes a plain `tend sync`, "
		    "not %s with these options: stop it first "
		    "(kill -TERM %d)\n",
		    pid, who, pid);
		return EXIT_USAGE;
	}
	if (tend_ws_open(ws) || tend_ws_lock(ws, who)) {
		fprintf(stderr, "tend: %s\n", tend_error_last());
		return EXIT_FAIL;
	}
	return 0;
}

static int
cmd_sync(struct cli *c, struct tend_ws *ws, bool preview)
{
	struct tend_buf out = TEND_BUF_INIT;
	int status = 0, rc;

	if ((rc = check_app_names(c, ws)))
		return rc;
	if (!preview && !c->full && !c->napps && !c->allow_delete) {
		/* an agent runs: it does the pass, we report it */
		struct tend_buf reply = TEND_BUF_INIT;

		if (tend_agent_request(ws->state_dir, "sync", &reply, true) ==
		    0) {
			int st = strstr(reply.ptr, "\"status\": 1") ? EXIT_FAIL : 0;

			if (c->json)
				printf("{\"agent\": true, \"passes\": [%s]}\n",
				    reply.ptr);
			else if (!c->quiet)
				printf("(applied by the running agent)\n%s",
				    reply.ptr);
			tend_buf_release(&reply);
			return st;
		}
		tend_buf_release(&reply);
	}
	if (!preview && (rc = writer_open(ws, "tend sync")))
		return rc;
	if (preview && (rc = tend_ws_open(ws))) {
		fprintf(stderr, "tend: %s\n", tend_error_last());
		return EXIT_FAIL;
	}
	tend_engine_subscribe(ws->eng, ~0u, on_event, c);
	if (c->json)
		tend_buf_puts(&out, preview ? "{\"actions\": [" : "{\"apps\": [");
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
		if (rc) {
			status = EXIT_FAIL;
			if (res.error || res.held_deletes ||
			    (!c->failed && !c->errors))
				fprintf(stderr, "tend: %s\n", tend_error_last());
		}
		if (!preview) {
			struct last_pass lp = {TEND_BUF_INIT, app->name};

			tend_buf_printf(&lp.text,
			    "{\"time\": %lld, \"seconds\": %.3f, "
			    "\"created\": %llu, \"updated\": %llu, "
			    "\"deleted\": %llu, \"failed\": %llu, "
			    "\"errors\": %llu, \"held_deletes\": %llu, "
			    "\"files\": %llu}",
			    (long long)time(NULL), dt,
			    (unsigned long long)c->created,
			    (unsigned long long)c->updated,
			    (unsigned long long)c->deleted,
			    (unsigned long long)c->failed,
			    (unsigned long long)c->errors,
			    (unsigned long long)res.held_deletes,
			    (unsigned long long)res.files);
			tend_store_write_settle(tend_engine_store(ws->eng), put_last,
			    &lp);
			if (c->json) {
				tend_buf_puts(&out, i ? ",\n  " : "\n  ");
				tend_buf_puts(&out, "{\"app\": ");
				tend_buf_json(&out, app->name);
				tend_buf_printf(&out, ", \"result\": %s, "
						      "\"hashed\": %llu, "
						      "\"status\": %d}",
				    lp.text.ptr,
				    (unsigned long long)res.hashed, rc ? 1 : 0);
			} else if (!c->quiet) {
				printf("%s: %llu created, %llu updated, %llu "
				       "deleted",
				    app->name, (unsigned long long)c->created,
				    (unsigned long long)c->updated,
				    (unsigned long long)c->deleted);
				if (c->failed || c->errors)
					printf(", %llu failed",
					    (unsigned long long)(c->failed +
						c->errors));
				if (res.held_deletes)
					printf(", %llu deletes held",
					    (unsigned long long)res.held_deletes);
				printf("; %llu files (%llu read) in %.2fs\n",
				    (unsigned long long)res.files,
				    (unsigned long long)res.hashed, dt);
			}
			tend_buf_release(&lp.text);
		}
		tend_app_result_finish(&res);
	}
	if (preview) {
		if (c->json) {
			tend_buf_puts(&out, c->json_items.ptr);
			tend_buf_printf(&out, "%s], \"pending\": %s}\n",
			    c->json_items.len ? "\n" : "",
			    c->pending ? "true" : "false");
		} else if (!c->pending && !c->quiet)
			printf("No changes: the targets match the "
			       "declarations.\n");
		if (status == 0 && c->pending)
			status = EXIT_PENDING;
	} else if (c->json)
		tend_buf_puts(&out, "\n]}\n");
	if (c->json)
		fputs(out.ptr, stdout);
	tend_buf_release(&out);
	return status;
}

struct ls_ctx {
	struct cli *c;
	struct tend_buf *out;
	unsigned n;
};

static void
on_state(const struct tend_state_info *si, void *arg)
{
	struct ls_ctx *l = arg;
	struct tend_buf rec = TEND_BUF_INIT;

	if (si->record)
		tend_buf_puthex(&rec, si->record,
		    si->len > 17 ? 17 : si->len);
	if (l->c->json) {
		tend_buf_puts(l->out, l->n ? ",\n  {" : "\n  {");
		tend_buf_puts(l->out, "\"path\": ");
		tend_buf_json(l->out, short_path(si->path));
		tend_buf_puts(l->out, ", \"owner\": ");
		tend_buf_json(l->out, si->component);
		tend_buf_printf(l->out, ", \"record\": \"%s\", \"container\": "
					"%s, \"pending\": %s",
		    rec.ptr, si->container ? "true" : "false",
		    si->pending ? "true" : "false");
		if (si->drift) {
			tend_buf_puts(l->out, ", \"drift\": ");
			tend_buf_json(l->out, si->drift);
		}
		tend_buf_putc(l->out, '}');
	} else if (si->drift)
		printf("drift %s: %s\n", short_path(si->path), si->drift);
	else
		printf("%s%s  %s  %s%s\n", short_path(si->path),
		    si->container ? "/" : "", si->record ? rec.ptr : "-",
		    si->component, si->pending ? "  (pending)" : "");
	l->n++;
	tend_buf_release(&rec);
}

static int
cmd_ls_check(struct cli *c, struct tend_ws *ws, bool check)
{
	struct tend_buf out = TEND_BUF_INIT;
	struct ls_ctx l = {c, &out, 0};
	unsigned drift = 0, total = 0;
	int rc;

	if (c->napps > 1)
		die_usage("%s takes at most one app", c->cmd);
	/* a running agent commits what it settled before we read it */
	tend_agent_settle(ws->state_dir);
	if ((rc = tend_ws_open(ws))) {
		fprintf(stderr, "tend: %s\n", tend_error_last());
		return EXIT_FAIL;
	}
	if (c->json)
		tend_buf_puts(&out, check ? "{\"drift\": [" : "{\"states\": [");
	for (size_t i = 0; i < ws->cfg.napps || (c->napps && i == 0); i++) {
		const char *name = c->napps ? c->apps[0] : ws->cfg.apps[i].name;
		unsigned d = 0;

		if (check)
			rc = tend_engine_check(ws->eng, name, on_state, &l, &d);
		else
			rc = tend_engine_list(ws->eng, name, on_state, &l);
		if (rc) {
			fprintf(stderr, "tend: %s\n", tend_error_last());
			tend_buf_release(&out);
			return EXIT_FAIL;
		}
		drift += d;
		total++;
		if (c->napps)
			break;
	}
	if (c->json) {
		tend_buf_printf(&out, "%s]}\n", l.n ? "\n" : "");
		fputs(out.ptr, stdout);
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

static int
cmd_status(struct cli *c, struct tend_ws *ws)
{
	char **tracked = NULL;
	size_t ntracked = 0;
	struct tend_buf out = TEND_BUF_INIT;
	struct tend_txn *txn = NULL;
	int rc;

	struct tend_buf agent = TEND_BUF_INIT;
	bool running = tend_agent_request(ws->state_dir, "status", &agent,
			   false) == 0;

	while (agent.len && agent.ptr[agent.len - 1] == '\n')
		agent.ptr[--agent.len] = '\0';
	if ((rc = tend_ws_open(ws)) ||
	    (rc = tend_ws_tracked_apps(ws, &tracked, &ntracked))) {
		fprintf(stderr, "tend: %s\n", tend_error_last());
		tend_buf_release(&agent);
		return EXIT_FAIL;
	}
	if (!c->json && !c->quiet) {
		printf("workspace %s (state %s)\n", ws->root, ws->cfg.state);
		printf("agent: %s\n", running ? agent.ptr : "not running");
	}
	if (c->json) {
		tend_buf_printf(&out, "{\"workspace\": ");
		tend_buf_json(&out, ws->root);
		tend_buf_printf(&out, ", \"agent\": %s, \"apps\": [",
		    running ? agent.ptr : "null");
	}
	tend_buf_release(&agent);
	tend_store_read_begin(tend_engine_store(ws->eng), &txn);
	size_t nall = ws->cfg.napps + ntracked;
	for (size_t i = 0; i < nall; i++) {
		const char *name = i < ws->cfg.napps ? ws->cfg.apps[i].name
						     : tracked[i - ws->cfg.napps];
		bool in_conf = tend_ws_app(ws, name) != NULL;
		struct count_ctx cc = {0};
		struct tend_bytes last = {NULL, 0};
		char key[300];

		if (i >= ws->cfg.napps && in_conf)
			continue;
		tend_engine_list(ws->eng, name, on_count, &cc);
		snprintf(key, sizeof key, "last/%s", name);
		tend_store_get(txn, TEND_T_META, key, strlen(key), &last);
		if (c->json) {
			tend_buf_puts(&out, i ? ",\n  {" : "\n  {");
			tend_buf_puts(&out, "\"app\": ");
			tend_buf_json(&out, name);
			tend_buf_printf(&out,
			    ", \"configured\": %s, \"states\": %u, "
			    "\"pending\": %u, \"last\": %.*s}",
			    in_conf ? "true" : "false", cc.states, cc.pending,
			    last.len ? (int)last.len : 4,
			    last.len ? (const char *)last.data : "null");
		} else {
			printf("%s%s: %u target states, %u unsettled",
			    name, in_conf ? "" : " (not in tend.conf: tend drop "
						 "removes it)",
			    cc.states, cc.pending);
			if (last.len)
				printf("; last pass %.*s\n", (int)last.len,
				    (const char *)last.data);
			else
				printf("; never synced\n");
		}
	}
	tend_store_read_end(txn);
	if (c->json) {
		tend_buf_puts(&out, "\n]}\n");
		fputs(out.ptr, stdout);
	}
	for (size_t i = 0; i < ntracked; i++)
		free(tracked[i]);
	free(tracked);
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

static int
cmd_drop(struct cli *c, struct tend_ws *ws)
{
	int status = 0, rc;

	if (!c->napps)
		die_usage("drop needs the name of an app");
	if ((rc = writer_open(ws, "tend drop")))
		return rc;
	tend_engine_subscribe(ws->eng, ~0u, on_event, c);
	for (size_t i = 0; i < c->napps; i++) {
		struct tend_stats st;
		struct forget f = {c->apps[i]};

		c->deleted = c->failed = 0;
		c->cur_app = c->apps[i];
		rc = tend_engine_drop(ws->eng, c->apps[i], &st);
		flush_same_errors(c);
		if (rc == 0)
			rc = tend_store_write(tend_engine_store(ws->eng),
			    forget_body, &f);
		if (rc) {
			fprintf(stderr, "tend: drop %s: %s (what could not be "
					"reverted is still tracked; run drop "
					"again)\n",
			    c->apps[i], tend_error_last());
			status = EXIT_FAIL;
		} else if (c->json)
			printf("{\"app\": \"%s\", \"deleted\": %llu}\n",
			    c->apps[i], (unsigned long long)c->deleted);
		else if (!c->quiet)
			printf("%s: dropped, %llu target states reverted\n",
			    c->apps[i], (unsigned long long)c->deleted);
	}
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
	struct cli c = {.color = -1, .json_items = TEND_BUF_INIT};
	struct tend_ws ws;
	struct tend_buf err = TEND_BUF_INIT;
	int rc;

	parse_args(&c, argc, argv);
	if (!c.cmd) {
		fputs(usage_text, c.help ? stdout : stderr);
		return c.help ? 0 : EXIT_USAGE;
	}
	size_t ci;
	for (ci = 0; ci < sizeof cmd_help / sizeof *cmd_help; ci++)
		if (strcmp(cmd_help[ci].cmd, c.cmd) == 0)
			break;
	if (ci == sizeof cmd_help / sizeof *cmd_help)
		die_usage("unknown command \"%s\"", c.cmd);
	if (c.help) {
		fputs(cmd_help[ci].help, stdout);
		return 0;
	}
	c.tty = isatty(2) && !c.quiet && !c.json;
	rc = tend_ws_load(&ws, c.dir, c.conf, &err);
	if (rc) {
		fprintf(stderr, "%s%s", rc == TEND_EINVALID ? "" : "tend: ",
		    err.ptr);
		tend_buf_release(&err);
		tend_ws_close(&ws);
		free(c.apps);
		return EXIT_USAGE;
	}
	tend_buf_release(&err);
	if (opts && (rc = tend_ws_add_code_apps(&ws, opts)) != 0) {
		fprintf(stderr, "tend: %s\n", tend_error_last());
		tend_ws_close(&ws);
		free(c.apps);
		return EXIT_USAGE;
	}
	if (strcmp(c.cmd, "sync") == 0)
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
	else if (strcmp(c.cmd, "watch") == 0) {
		struct tend_agent_opts ao = {.verbose = c.verbose,
		    .allow_delete = c.allow_delete, .ready_fd = -1,
		    .stop_fd = -1};
		const char *rfd = getenv("TEND_READY_FD");

		if (rfd)
			ao.ready_fd = atoi(rfd);
		if (c.daemon) {
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
			if (!ao.verbose)
				ao.verbose = 1;
		}
		if (c.daemon && c.tui)
			die_usage("--daemon and --tui do not go together");
		if (c.tui)
			rc = watch_tui(&ws, &ao);
		else
			rc = tend_agent_run(&ws, &ao);
		if (rc) {
			fprintf(stderr, "tend watch: %s\n", tend_error_last());
			rc = rc == TEND_EEXISTS ? EXIT_USAGE : EXIT_FAIL;
		}
	}
	else
		rc = cmd_drop(&c, &ws);
	tend_ws_close(&ws);
	tend_buf_release(&c.json_items);
	free(c.apps);
	return rc;
}
