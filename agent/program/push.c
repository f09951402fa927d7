/*
 * push.c - a git app's push = REMOTE, above the connector: when to push,
 * and what is known of the last push.
 *
 * Whether the remote lacks commits is asked of git (the tracking ref the
 * connector keeps, tend_git_push_ahead), so a push killed or failed is
 * seen by whichever run comes next: sync pushes after its pass, the
 * agent after each pass and on its retry timer. What git cannot tell -
 * when the last push succeeded, and what the last failure said - is in
 * STATE/push/APP, a small JSON object replaced whole (write and rename):
 * {"pushed": TIME, "tried": TIME, "error": "..."}.
 */
#define _GNU_SOURCE
#include "pass.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "git.h"
#include "json.h"
#include "tend/status.h"

/* *repo and *locks: the repository's path, and STATE/push-locks, where
 * the push notes the ref locks it takes (a list of its own: the agent's
 * passes keep theirs in STATE/git-locks while a push runs beside them) */
static void
push_spec(struct tend_ws *ws, const struct tend_app_config *app,
    struct tend_git_push *p, char **repo, char **locks)
{
	*repo = path_join(ws->root, app->target_path);
	*locks = path_join(ws->state_dir, "push-locks");
	*p = (struct tend_git_push){
		.repo = *repo,
		.state = ws->state_dir,
		.locks = *locks,
		.app = app->name,
		.ref = app->ref,
		.remote = app->push,
		.remote_ref = app->push_ref ? app->push_ref : app->ref,
		.prefix = app->prefix ? app->prefix : "",
		.exclusive = app->exclusive,
		.author = app->author,
	};
}

static char *
state_file(struct tend_ws *ws, const char *app)
{
	size_t n = strlen(ws->state_dir) + strlen(app) + 8;
	char *p = tend_xmalloc(n);

	snprintf(p, n, "%s/push/%s", ws->state_dir, app);
	return p;
}

static struct tend_json *
state_read(struct tend_ws *ws, const char *app)
{
	char *path = state_file(ws, app);
	struct tend_buf text = TEND_BUF_INIT;
	struct tend_json *j = NULL;
	char buf[4096];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		while ((n = read(fd, buf, sizeof buf)) > 0)
			tend_buf_put(&text, buf, (size_t)n);
		close(fd);
		j = tend_json_parse(text.ptr, text.len, NULL, 0);
	}
	tend_buf_release(&text);
	free(path);
	return j;
}

/* The file replaced whole: a reader sees the old one or the new one. */
static void
state_write(struct tend_ws *ws, const char *app, long long pushed,
    long long tried, const char *error)
{
	char *path = state_file(ws, app);
	struct tend_buf dir = TEND_BUF_INIT, tmp = TEND_BUF_INIT;
	struct tend_buf text = TEND_BUF_INIT;

	tend_buf_printf(&dir, "%s/push", ws->state_dir);
	mkdir(dir.ptr, 0700);
	tend_buf_printf(&tmp, "%s.%ld.tmp", path, (long)getpid());
	tend_buf_printf(&text, "{\"pushed\": %lld, \"tried\": %lld", pushed,
	    tried);
	if (error) {
		tend_buf_puts(&text, ", \"error\": ");
		tend_buf_json(&text, error);
	}
	tend_buf_puts(&text, "}\n");
	int fd = open(tmp.ptr, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd >= 0) {
		bool ok = write(fd, text.ptr, text.len) == (ssize_t)text.len;

		close(fd);
		if (!ok || rename(tmp.ptr, path) != 0)
			unlink(tmp.ptr);
	}
	tend_buf_release(&dir);
	tend_buf_release(&tmp);
	tend_buf_release(&text);
	free(path);
}

int
tend_app_push(struct tend_ws *ws, struct tend_app_config *app)
{
	struct tend_git_push p;
	struct tend_git_ahead ah;
	char *repo, *state;
	unsigned merges = 0;
	int rc;

	if (!app->push || app->target != TEND_TARGET_GIT)
		return 0;
	push_spec(ws, app, &p, &repo, &state);
	/* nothing to push costs no connection */
	if ((rc = tend_git_push_ahead(&p, &ah)) == 0 && ah.has_local &&
	    ah.has_seen && ah.ahead == 0) {
		/* (pushed by someone else, say): an old error is over */
		struct tend_json *j = state_read(ws, app->name);

		if (tend_json_str(j, "error", NULL))
			state_write(ws, app->name,
			    tend_json_int(j, "pushed", 0, TEND_JSON_INT_MAX, 0),
			    tend_json_int(j, "tried", 0, TEND_JSON_INT_MAX, 0),
			    NULL);
		tend_json_free(j);
		free(repo);
		free(state);
		return 0;
	}
	tend_error_clear();
	rc = tend_git_push_run(&p, &merges);
	struct tend_json *old = state_read(ws, app->name);
	long long now = (long long)time(NULL);
	long long pushed = tend_json_int(old, "pushed", 0, TEND_JSON_INT_MAX, 0);
	tend_json_free(old);
	if (rc == 0)
		state_write(ws, app->name, now, now, NULL);
	else {
		char *msg = tend_xstrdup(tend_error_last());

		state_write(ws, app->name, pushed, now, msg);
		tend_error_set(rc, "%s", msg);
		free(msg);
	}
	free(repo);
	free(state);
	return rc;
}

void
tend_app_push_status(struct tend_ws *ws, const struct tend_app_config *app,
    struct tend_push_status *out)
{
	struct tend_git_push p;
	struct tend_git_ahead ah;
	char *repo, *state;

	memset(out, 0, sizeof *out);
	if (!app->push || app->target != TEND_TARGET_GIT)
		return;
	out->configured = true;
	push_spec(ws, app, &p, &repo, &state);
	out->remote = tend_xstrdup(p.remote);
	out->remote_ref = tend_xstrdup(p.remote_ref);
	if (tend_git_push_ahead(&p, &ah) == 0) {
		out->known = true;
		out->ahead = ah.ahead;
		out->behind = ah.behind;
	} else
		tend_error_clear();
	struct tend_json *j = state_read(ws, app->name);
	out->pushed = tend_json_int(j, "pushed", 0, TEND_JSON_INT_MAX, 0);
	out->tried = tend_json_int(j, "tried", 0, TEND_JSON_INT_MAX, 0);
	const char *e = tend_json_str(j, "error", NULL);
	out->error = e ? tend_xstrdup(e) : NULL;
	tend_json_free(j);
	free(repo);
	free(state);
}

void
tend_push_status_finish(struct tend_push_status *s)
{
	free(s->remote);
	free(s->remote_ref);
	free(s->error);
	memset(s, 0, sizeof *s);
}

void
tend_push_status_json(struct tend_buf *b, const struct tend_push_status *s)
{
	tend_buf_puts(b, "{\"remote\": ");
	tend_buf_json(b, s->remote);
	tend_buf_puts(b, ", \"ref\": ");
	tend_buf_json(b, s->remote_ref);
	if (s->known)
		tend_buf_printf(b, ", \"ahead\": %zu, \"behind\": %zu",
		    s->ahead, s->behind);
	else
		tend_buf_puts(b, ", \"ahead\": null, \"behind\": null");
	tend_buf_printf(b, ", \"pushed\": %lld, \"tried\": %lld", s->pushed,
	    s->tried);
	tend_buf_puts(b, ", \"error\": ");
	if (s->error)
		tend_buf_json(b, s->error);
	else
		tend_buf_puts(b, "null");
	tend_buf_putc(b, '}');
}
