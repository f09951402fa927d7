/*
 * cli.c - the tend command line: options, messages (a failure shared by
 * many entries printed once), the event printer and progress, and
 * tend_main(), which is in libtend, so a program can embed the same CLI
 * with apps defined in code (tend/plugin.h). The commands are in
 * cmd_sync.c, cmd_show.c and cmd_drop.c; exit codes in cli.h.
 */
#define _GNU_SOURCE
#include "cli.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "json.h"
#include "pack.h" /* tend_pid_gone */
#include "pass.h"
#include "top.h"
#include "watch.h"
#include "tend/status.h"

/* --json: every outcome is one JSON document on stdout, a failure too
 * ({"error": "...", "exit": N}, beside the message on stderr) */
static bool json_mode;
bool doc_printed;  /* the command's own document is out */
/* a failure repeated in a row: named this many times, then counted */
#define SAME_NAMED 20

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


/* "tend: MESSAGE" on stderr, kept for the JSON error document */
void
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

void
flush_same_errors(struct cli *c)
{
	if (c->same_err)
		fprintf(stderr, "tend: %s: ... and %llu more entries failed "
				"the same way (-v names each)\n",
		    c->cur_app ? c->cur_app : "?",
		    (unsigned long long)c->same_err);
	c->same_err = 0;
	c->same_named = 0;
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
    "  ls    [APP [PATH-PREFIX]]\n"
    "                   tracked target states, owners and records\n"
    "  status           per-app counts and the last pass\n"
    "  check [APP]      compare targets with the tracking records\n"
    "  drop  APP...     revert every target state of the app, forget it\n"
    "  watch            the agent: catch up, then follow changes (inotify)\n"
    "  stop             stop the running agent (after its pass)\n"
    "  top              the dashboard of a running agent (ncurses)\n"
    "  init [DIR]       write a commented tend.conf for DIR (never over "
    "one)\n"
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
    "  --full           reprocess everything: ignore memos, repair drift\n"
    "  --allow-delete   release deletes held back by the delete brake\n"
    "  -n, --dry-run    sync: show what it would do (tend plan)\n"
    "  --version        print the version\n"
    "  -h, --help       this text, or a command's: tend COMMAND --help\n"
    "                   (or tend help COMMAND)\n"
    "\n"
    "Exit status: 0 success, 1 failures/held deletes/drift, 2 usage or\n"
    "config error, 3 (plan) changes pending.\n";

static const struct {
	const char *cmd, *help;
} cmd_help[] = {
	{"sync", "usage: tend sync [-n] [--full] [--allow-delete] [--json] "
		 "[-q] [APP...]\n\n"
		 "Walk each app's source, run its declaration function for "
		 "every changed\nitem and apply the difference to its targets. "
		 "Unchanged files are not\nread (their stat signature "
		 "decides). Prints a progress line on a terminal\nand one "
		 "summary line per app. While an agent (tend watch) runs, a "
		 "plain\nsync is handed to it and its passes are reported the "
		 "same way.\n\n"
		 "  -n, --dry-run   apply nothing: what tend plan says (exit "
		 "3 when\n                  changes are pending)\n"
		 "  --full          ignore memos and signatures: read every "
		 "source, check\n"
		 "                  every target; write what drifted "
		 "(the rest: verified)\n"
		 "  --allow-delete  apply deletes the delete brake held back "
		 "(more than\n                  max-delete entries of one "
		 "target, or an emptied source)\n"},
	{"init", "usage: tend init [DIR]\n\n"
		 "Write DIR/tend.conf (DIR defaults to -C's or the current "
		 "directory):\none app whose source is the first of src, "
		 "docs, content, site, notes,\nsource found there (else the "
		 "first folder), copied to a new dir target,\nand every "
		 "other useful key commented out; in a git repository, a "
		 "git\napp too, commented out. Never overwrites a tend.conf "
		 "(exit 2).\n"},
	{"plan", "usage: tend plan [--json] [APP...]\n\n"
		 "Compute what sync would do and print one line per action:\n"
		 "  + create   ~ update   - delete   ! lossy/destructive "
		 "container change\nNothing is applied or persisted. Exit "
		 "status 3 when changes are pending.\n"},
	{"ls", "usage: tend ls [--json] [APP [PATH-PREFIX]]\n\n"
	       "List tracked target states with their owning component and "
	       "record,\nsorted by path (spelled as plan spells it). APP may "
	       "be one that left\ntend.conf but is still tracked. With "
	       "PATH-PREFIX, only the states whose\npath starts with it "
	       "(\"out/docs/\", \"git(\\\"repo\\\"\"; in a git target\n"
	       "also the path inside it, \"docs/\"): a page of a big "
	       "workspace,\nheld in memory alone.\n"},
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
	{"stop", "usage: tend stop\n\n"
		 "Stop the workspace's running agent: SIGTERM, then wait until "
		 "it has\nfinished its current pass, committed and exited (60 "
		 "s at most; then\nexit 1, naming it). Exit 0 when it stopped, "
		 "or when none runs.\n"},
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


void
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

bool
use_color(const struct cli *c)
{
	if (c->color >= 0)
		return c->color == 1;
	return isatty(1) && !getenv("NO_COLOR");
}

/* The i-th quoted string of a key spelled as plan spells it (a tuple:
 * ("repo", "refs/heads/x", "")), in *out; false if there is none */
static bool
key_str_at(const char *k, int i, struct tend_buf *out)
{
	tend_buf_reset(out);
	for (int n = 0; (k = strchr(k, '"')); n++) {
		for (k++; *k && *k != '"'; k++) {
			if (*k == '\\' && k[1])
				k++;
			if (n == i)
				tend_buf_putc(out, *k);
		}
		if (n == i)
			return *k == '"';
		if (!*k)
			return false;
		k++;
	}
	return false;
}

/* plan: the delete of a git tag's state that leaves the tag where it is
 * (adopted, or moved by someone), as the sync will say ("forgotten") */
static bool
plan_tag_stays(struct cli *c, const struct tend_event *ev)
{
	size_t pl = ev->provider ? strlen(ev->provider) : 0;
	struct tend_app_config *a;

	if (!c->ws || ev->op != TEND_OP_DELETE || ev->forgotten || !ev->key ||
	    pl < 5 || strcmp(ev->provider + pl - 5, "/@tag") != 0 ||
	    !(a = tend_ws_app(c->ws, ev->app)) ||
	    a->target != TEND_TARGET_GIT)
		return false;
	/* the key as plan spells it: "NAME" */
	struct tend_buf tag = TEND_BUF_INIT;
	key_str_at(ev->key, 0, &tag);
	char *repo = path_join(c->ws->root, a->target_path);
	bool stays = tag.len && tend_git_tag_stays(repo, c->ws->state_dir,
	    a->ref, tag.ptr);
	free(repo);
	tend_buf_release(&tag);
	return stays;
}

/*
 * plan: a git container whose entries the sync removes (an app moved to
 * another ref, or dropped) on a ref checked out in a working tree that
 * no app allows: the sync refuses that commit, so plan says so (a new
 * user's trial: plan counted the move as pending, the sync failed it)
 */
static void
plan_checked_out(struct cli *c, const struct tend_event *ev)
{
	struct tend_buf repo = TEND_BUF_INIT, ref = TEND_BUF_INIT;

	if (!c->ws || !ev->container || ev->op != TEND_OP_DELETE ||
	    !ev->provider || strcmp(ev->provider, "@tend/git") != 0 ||
	    !ev->key || !key_str_at(ev->key, 0, &repo) ||
	    !key_str_at(ev->key, 1, &ref))
		goto out;
	for (size_t i = 0; i < c->ws->cfg.napps; i++) {
		const struct tend_app_config *a = &c->ws->cfg.apps[i];

		if (a->target == TEND_TARGET_GIT && a->allow_checked_out &&
		    strcmp(a->target_path, repo.ptr) == 0 &&
		    strcmp(a->ref, ref.ptr) == 0)
			goto out;
	}
	char *path = path_join(c->ws->root, repo.ptr);
	char *where = tend_git_checked_out(path, ref.ptr);
	if (where) {
		c->plan_failed++;
		fprintf(stderr, "tend: %s: %s is checked out in %s: the sync "
				"refuses to remove tend's entries from it (they "
				"go once it is not checked out)\n",
		    ev->app, ref.ptr, where);
	}
	free(where);
	free(path);
out:
	tend_buf_release(&repo);
	tend_buf_release(&ref);
}

void
on_event(const struct tend_event *ev, void *arg)
{
	struct cli *c = arg;
	struct tend_buf path = TEND_BUF_INIT;

	switch (ev->kind) {
	case TEND_EV_ACTION_PLANNED:
		if (!ev->preview || tend_event_is_refresh(ev))
			break;
		c->pending = true;
		bool tag_stays = plan_tag_stays(c, ev);
		plan_checked_out(c, ev);
		/* counted as sync counts what it applies: the entries, and
		 * a container's delete (a new target directory is listed,
		 * not counted: sync's "2 created" is plan's "2 to create") */
		if (tend_event_counts(ev))
			c->plan_ops[ev->adopted ? 4
			    : ev->op == TEND_OP_CREATE ? 0
			    : ev->op == TEND_OP_UPDATE ? 1
			    : ev->forgotten || tag_stays ? 3 : 2]++;
		if (ev->container && ev->invalidation == 2)
			c->destructive = true;
		c->plan_replaces += ev->replaces;
		tend_display_path(&path, ev->provider, ev->key);
		if (c->json) {
			struct tend_buf *b = &c->json_items;

			tend_buf_puts(b, b->len ? ",\n  {" : "\n  {");
			tend_buf_printf(b, "\"op\": \"%s\", \"app\": ",
			    ev->adopted ? "adopt"
			    : ev->op == TEND_OP_CREATE ? "create"
			    : ev->op == TEND_OP_UPDATE ? "update"
			    : ev->forgotten || tag_stays ? "forget" : "delete");
			tend_buf_json(b, ev->app);
			tend_buf_puts(b, ", \"provider\": ");
			tend_buf_json(b, ev->provider);
			tend_buf_puts(b, ", \"path\": ");
			tend_buf_json(b, path.ptr);
			if (strchr(path.ptr, '\\'))
				tend_buf_puts(b, ", \"path_escaped\": true");
			if (ev->replaces)
				tend_buf_puts(b, ", \"replaces\": true");
			tend_buf_printf(b, ", \"invalidation\": %s}",
			    ev->invalidation == 1 ? "\"lossy\""
			    : ev->invalidation == 2 ? "\"destructive\"" : "null");
		} else if (!c->quiet) {
			bool col = use_color(c);
			const char *color = "", *reset = col ? "\033[0m" : "";
			char op = (char)ev->op;

			if (ev->invalidation)
				op = '!';
			else if (ev->forgotten || ev->adopted || tag_stays)
				op = '=';
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
			else if (ev->forgotten)
				printf("%s=%s %s %s  (forgotten: tend never "
				       "wrote what is there, and leaves it)\n",
				    color, reset, ev->app, path.ptr);
			else if (tag_stays)
				printf("%s=%s %s %s  (forgotten: the tag was "
				       "someone's before tend adopted it, or "
				       "someone moved it: it stays)\n",
				    color, reset, ev->app, path.ptr);
			else if (ev->adopted)
				printf("%s=%s %s %s  (adopted: it holds the "
				       "declared content already; tend's from "
				       "now on)\n",
				    color, reset, ev->app, path.ptr);
			else if (ev->replaces)
				printf("%s%c%s %s %s  (replaces what is there, "
				       "which tend did not write: the target is "
				       "rebuilt from the declared entries only)\n",
				    color, op, reset, ev->app, path.ptr);
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
		/* what the sink said beside it: a failure (counted, exit
		 * 1) or a note (a git tag it moved to its ref's tip) */
		if (ev->note && (ev->warn || !c->quiet)) {
			tend_display_path(&path, ev->provider, ev->key);
			if (ev->warn) {
				c->errors++;
				if (!c->first_err)
					c->first_err = tend_event_failure(ev);
			}
			if (c->tty)
				fputs("\r\033[K", stderr);
			fprintf(stderr, "tend: %s: %s: %s%s\n", ev->app,
			    path.ptr, ev->warn ? "" : "note: ", ev->note);
			tend_buf_reset(&path);
		}
		if (tend_event_is_refresh(ev))
			break;
		if (ev->invalidation)
			c->invalidations++;
		/* a destructive rebuild removed what was not declared in
		 * the container: not entries, so not counted as deletes,
		 * but said (plan lists them) */
		if (ev->container && ev->invalidation == 2) {
			c->rebuilt++;
			if (!c->json && !c->quiet) {
				tend_display_path(&path, ev->provider, ev->key);
				printf("! destructive %s %s (rebuilt from the "
				       "declared entries only: what else was "
				       "in it is removed)\n",
				    ev->app, path.ptr);
			}
		}
		if (!tend_event_counts(ev))
			break; /* entries are counted, not their directory */
		if (ev->unchanged)
			c->verified++;
		else if (ev->adopted)
			c->adopted++;
		else if (ev->op == TEND_OP_CREATE)
			c->created++;
		else if (ev->op == TEND_OP_UPDATE)
			c->updated++;
		else if (ev->forgotten)
			c->forgotten++;
		else
			c->deleted++;
		if (c->tty && ++c->shown % 512 == 0) {
			fprintf(stderr, "\r\033[K%s: applied %llu", ev->app,
			    (unsigned long long)(c->created + c->updated +
				c->adopted + c->deleted));
			fflush(stderr);
		}
		if (c->verbose && !c->json) {
			tend_display_path(&path, ev->provider, ev->key);
			printf("%c %s %s\n",
			    ev->forgotten || ev->adopted || ev->unchanged ? '='
								 : (char)ev->op,
			    ev->app, path.ptr);
		}
		break;
	case TEND_EV_ACTION_FAILED:
		c->failed++;
		if (!c->first_err)
			c->first_err = tend_event_failure(ev);
		/* each entry is named (the user moves what is in the way:
		 * which?), a repeated message once; past SAME_NAMED of
		 * them in a row, a count */
		bool same = c->last_err && strcmp(c->last_err, ev->error) == 0 &&
		    !c->verbose;
		if (same && c->same_named >= SAME_NAMED) {
			c->same_err++;
			break;
		}
		if (!same) {
			flush_same_errors(c);
			c->last_err = tend_xstrdup(ev->error);
		} else
			c->same_named++;
		tend_display_path(&path, ev->provider, ev->key);
		if (c->tty)
			fputs("\r\033[K", stderr);
		fprintf(stderr, "tend: %s: %s: %s\n", ev->app, path.ptr,
		    same ? "the same" : ev->error);
		break;
	case TEND_EV_COMPONENT_ERROR:
		c->errors++;
		if (!c->first_err)
			c->first_err = tend_event_failure(ev);
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

void
progress(void *arg, const char *app, uint64_t scanned, uint64_t hashed)
{
	struct cli *c = arg;

	if (!c->tty)
		return;
	fprintf(stderr, "\r\033[K%s: scanned %llu files, read %llu", app,
	    (unsigned long long)scanned, (unsigned long long)hashed);
	fflush(stderr);
}

double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

bool
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
int
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


int
put_last(struct tend_txn *txn, void *arg)
{
	struct last_pass *lp = arg;
	char key[300];

	snprintf(key, sizeof key, "last/%s", lp->app);
	return tend_store_put(txn, TEND_T_META, key, strlen(key),
	    lp->text.ptr, lp->text.len);
}

/* The last line of STATE/agent.log, without "tend watch: " */
static void
last_log_line(const char *state, char *out, size_t n)
{
	struct tend_buf p = TEND_BUF_INIT;
	char buf[4096];
	int fd;
	ssize_t len = 0;

	tend_buf_printf(&p, "%s/agent.log", state);
	fd = open(p.ptr, O_RDONLY | O_CLOEXEC);
	tend_buf_release(&p);
	if (fd < 0)
		return;
	off_t end = lseek(fd, 0, SEEK_END);
	if (end > 0 && lseek(fd, end > (off_t)sizeof buf - 1 ? end -
		(off_t)sizeof buf + 1 : 0, SEEK_SET) >= 0)
		len = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (len <= 0)
		return;
	buf[len] = '\0';
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
		buf[--len] = '\0';
	char *l = strrchr(buf, '\n');
	l = l ? l + 1 : buf;
	if (strncmp(l, "tend watch: ", 12) == 0)
		l += 12;
	size_t k = strlen(l) < n ? strlen(l) : n - 1;
	memcpy(out, l, k);
	out[k] = '\0';
}

/*
 * Open the workspace to write to it: refused while an agent runs (it
 * applies changes itself; a second writer beside it would race it), and
 * serialised with any other writing tend by .tend/write.lock.
 */
int
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
			  "applies changes itself; it takes `tend sync` and "
			  "`tend sync --allow-delete` (every app), not `%s`: "
			  "stop it first (tend stop)", pid, who);
		return EXIT_USAGE;
	}
	if (tend_ws_open(ws) || tend_ws_lock(ws, who)) {
		say_error("%s", tend_error_last());
		return EXIT_FAIL;
	}
	return 0;
}


/* An agent answering in ROOT/.tend (the default state directory) while
 * tend.conf does not load: it runs the previous config; say so */
static void
say_agent_on_bad_conf(const char *root)
{
	struct tend_buf reply = TEND_BUF_INIT;
	char *state = path_join(root, ".tend");
	struct tend_json *j;

	if (tend_agent_request_wait(state, "status", &reply, 3000) == 0 &&
	    (j = tend_json_parse(reply.ptr, reply.len, NULL, 0))) {
		fprintf(stderr, "tend: the agent (pid %lld, %s) runs with the "
				"tend.conf it loaded before this one%s\n",
		    tend_json_int(j, "pid", 0, INT32_MAX, 0),
		    tend_json_str(j, "state", "?"),
		    tend_json_get(j, "config_error")
			? " (it refused this one too)" : "");
		tend_json_free(j);
	}
	tend_buf_release(&reply);
	free(state);
}

/*
 * tend stop: SIGTERM to the agent, then wait for its lock on agent.pid to
 * be free (it finishes its pass and commits first).
 */
#define STOP_WAIT_MS 60000

static int
cmd_stop(struct tend_ws *ws)
{
	int pid = tend_ws_agent_pid(ws);

	for (int i = 0; pid < 0 && i < 200; i++) {
		usleep(10000); /* starting: its pid is not written yet */
		pid = tend_ws_agent_pid(ws);
	}
	if (pid == 0) {
		printf("no agent runs for this workspace\n");
		return 0;
	}
	if (pid < 0) {
		say_error("an agent is starting for this workspace; try again "
			  "when it runs");
		return EXIT_FAIL;
	}
	if (kill(pid, SIGTERM) != 0) {
		say_error("the agent (pid %d): %s", pid, strerror(errno));
		return EXIT_FAIL;
	}
	for (int ms = 0; ms < STOP_WAIT_MS; ms += 20) {
		/* its lock is free once it has committed and let go; then
		 * its process ends (a sanitized one checks for leaks first):
		 * gone, or a zombie its parent has not reaped */
		if (tend_ws_agent_pid(ws) != pid && tend_pid_gone(pid)) {
			printf("agent (pid %d) stopped\n", pid);
			return 0;
		}
		usleep(20000);
	}
	say_error("the agent (pid %d) did not stop within %d s (a long pass "
		  "goes on until it has committed; its log: %s/agent.log)",
	    pid, STOP_WAIT_MS / 1000, ws->state_dir);
	return EXIT_FAIL;
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
		else if (strcmp(a, "-n") == 0 || strcmp(a, "--dry-run") == 0)
			c->dry_run = true;
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
	if (c.dry_run) {
		/* sync -n is plan: what it would do, nothing applied */
		if (!c.cmd || strcmp(c.cmd, "sync") != 0)
			die_usage("-n/--dry-run is for sync (tend sync -n is "
				  "tend plan)");
		c.cmd = "plan";
	}
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
	if (strcmp(c.cmd, "init") == 0) {
		rc = cmd_init(&c);
		free(c.apps);
		return rc;
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
		/* tend status beside an agent that refused this tend.conf:
		 * the agent still runs the previous one (new users' trials:
		 * status said only the error); its default state dir */
		if (rc == TEND_EINVALID && strcmp(c.cmd, "status") == 0 &&
		    ws.root && !c.json)
			say_agent_on_bad_conf(ws.root);
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
	    strcmp(c.cmd, "drop") != 0 && strcmp(c.cmd, "stop") != 0 &&
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
	else if (strcmp(c.cmd, "stop") == 0)
		rc = cmd_stop(&ws);
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
					/* why: the log's last line (another
					 * agent runs, a bad tend.conf...) */
					char why[512] = "";
					last_log_line(ws.state_dir, why,
					    sizeof why);
					fprintf(stderr, "tend watch: the agent did "
							"not start%s%s (see %s/agent.log)\n",
					    why[0] ? ": " : "", why, ws.state_dir);
					rc = EXIT_FAIL;
				} else {
					printf("agent started, pid %d\n",
					    (int)pid);
					rc = 0;
				}
				/* (what it loaded freed: sanitizers' leak
				 * check) */
				goto done;
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
done:
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
