/*
 * server.c - the agent's control socket, both ends.
 *
 * The control socket (state/agent.sock, 0600, peer uid checked) speaks
 * lines: a command per line ("status", "sync", "pause", "resume",
 * "rescan", "subscribe", "settle", "approve", "states"; a JSON {"cmd":
 * "..."} works too), and answers and events as JSON lines.
 *
 * Whoever asks reads the store next: every command first commits the
 * deferred settle (sched.c). At most MAX_CLIENTS connections: a new one
 * when all are taken drops the one idle the longest. A client that does
 * not read loses per-action events first, and is dropped past
 * CLIENT_MAX_OUT of unsent lines. The passes' events are broadcast to the
 * subscribers from sched.c.
 *
 * The client side, what tend status, sync, ls and check ask
 * (tend_agent_request, tend_agent_settle), is at the end.
 */
#define _GNU_SOURCE
#include "agent_int.h"
#include "inspect.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "check.h"
#include "json.h"
#include "tend/status.h"

#define CLIENT_MAX_OUT (256 * 1024) /* a slower client is dropped */

/* ---- clients ---- */

void
client_drop(struct agent *a, struct client *c)
{
	epoll_ctl(a->ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
	tend_buf_release(&c->in);
	tend_buf_release(&c->out);
	c->subscribed = false;
}

static void
client_flush(struct agent *a, struct client *c)
{
	if (tend_buf_write_fd(&c->out, c->fd) != 0) {
		client_drop(a, c);
		return;
	}
	struct epoll_event ev = {.events = EPOLLIN | (c->out.len ? EPOLLOUT : 0),
	    .data.ptr = c};
	epoll_ctl(a->ep, EPOLL_CTL_MOD, c->fd, &ev);
}

void
client_send(struct agent *a, struct client *c, const char *line)
{
	if (c->fd < 0)
		return;
	if (c->out.len + strlen(line) > CLIENT_MAX_OUT) {
		logf_(a, ALOG_WARN, "dropping a client that does not read");
		client_drop(a, c);
		return;
	}
	tend_buf_puts(&c->out, line);
	client_flush(a, c);
}

/* A client that lags loses per-action events first (it is told how
 * many when it catches up); it is dropped only when even pass events no
 * longer fit. */
#define CLIENT_SHED (64 * 1024)

void
broadcast_ex(struct agent *a, const char *line, bool sheddable)
{
	for (int i = 0; i < MAX_CLIENTS; i++) {
		struct client *c = &a->clients[i];

		if (c->fd < 0 || !c->subscribed)
			continue;
		if (sheddable && c->out.len > CLIENT_SHED) {
			c->shed++;
			continue;
		}
		if (c->shed && c->out.len <= CLIENT_SHED) {
			char note[96];

			snprintf(note, sizeof note,
			    "{\"event\": \"shed\", \"events\": %llu}\n",
			    (unsigned long long)c->shed);
			c->shed = 0;
			client_send(a, c, note);
		}
		client_send(a, c, line);
	}
}

void
broadcast(struct agent *a, const char *line)
{
	broadcast_ex(a, line, false);
}

bool
anyone_listens(struct agent *a)
{
	for (int i = 0; i < MAX_CLIENTS; i++)
		if (a->clients[i].fd >= 0 && a->clients[i].subscribed)
			return true;
	return false;
}

/* ---- status and states ---- */

static void
status_line(struct agent *a, struct tend_buf *b)
{
	size_t queued = 0;
	struct tend_txn *txn = NULL;
	bool kept;

	for (size_t i = 0; i < a->napps; i++)
		queued += a->apps[i].ndirty + a->apps[i].full;
	tend_buf_printf(b,
	    "{\"event\": \"status\", \"pid\": %d, \"state\": \"%s\", "
	    "\"uptime_ms\": %llu, \"started\": %lld, \"passes\": %llu, "
	    "\"watches\": %zu, \"overflows\": %llu, \"queue\": %zu, "
	    "\"applied\": %llu, \"apps\": [",
	    (int)getpid(), a->paused ? "paused" : "watching",
	    (unsigned long long)(now_ms() - a->start_ms),
	    (long long)a->started,
	    (unsigned long long)a->passes, nwatches(a),
	    (unsigned long long)a->overflows, queued,
	    (unsigned long long)a->applied);
	/* the store's counters, read at each status (O(1)); in a store
	 * whose counters an older tend left, a scan, kept until the app's
	 * next full pass */
	if (tend_store_read_begin(tend_engine_store(a->ws->eng), &txn))
		txn = NULL;
	kept = txn && tend_store_counts_valid(txn);
	for (size_t i = 0; i < a->napps; i++) {
		struct appstate *s = &a->apps[i];
		struct tend_app_counts ac;
		bool counted = txn && (kept || s->states < 0) &&
		    tend_engine_counts(a->ws->eng, txn,
			a->ws->cfg.apps[i].name, &ac) == 0;

		if (counted && s->components >= 0)
			s->states = (int64_t)ac.states; /* as status counts */
		tend_buf_puts(b, i ? ", {\"name\": " : "{\"name\": ");
		tend_buf_json(b, a->ws->cfg.apps[i].name);
		uint64_t now = now_ms();
		tend_buf_printf(b,
		    ", \"components\": %lld, \"states\": %lld, "
		    "\"pending\": %zu, \"errors\": %llu, \"held\": %llu, "
		    "\"queued\": %zu, \"unsettled\": %lld, "
		    "\"retry_in_ms\": %lld, \"last\": %s}",
		    (long long)s->components, (long long)s->states, s->nplan,
		    (unsigned long long)s->errors, (unsigned long long)s->held,
		    s->ndirty + s->full,
		    counted && kept ? (long long)ac.pending : -1LL,
		    s->retry_ms ? (long long)(s->retry_ms > now
			    ? s->retry_ms - now : 0) : -1LL,
		    s->last ? s->last : "null");
		if (a->ws->cfg.apps[i].push) {
			struct tend_push_status ps;

			tend_app_push_status(a->ws, &a->ws->cfg.apps[i], &ps);
			b->ptr[--b->len] = '\0'; /* the app's closing brace */
			tend_buf_printf(b, ", \"pushing\": %s, \"push\": ",
			    s->push_pid ? "true" : "false");
			tend_push_status_json(b, &ps);
			tend_buf_putc(b, '}');
			tend_push_status_finish(&ps);
		}
	}
	tend_store_read_end(txn);
	tend_buf_printf(b, "], \"last\": %s",
	    a->last_summary.len ? a->last_summary.ptr : "null");
	if (a->config_error) {
		tend_buf_puts(b, ", \"config_error\": ");
		tend_buf_json(b, a->config_error);
	}
	tend_buf_puts(b, "}\n");
}

#define STATES_MAX 500 /* children in one "states" answer */

struct state_child {
	char *name;	/* "a.md", or "howto/" for a directory */
	char *info;	/* owner, record...: JSON members, or NULL */
	size_t count;	/* states below a directory */
	bool dir;
};

struct states_ctx {
	const char *prefix;
	size_t plen;
	struct state_child *v;
	size_t n, cap;
	/* the children by name: indexes + 1 into v (0: empty), a power of
	 * two at most half full. A level folds states as they come, so a
	 * million states under three directories hold three children, not
	 * a million rows until the sort. */
	size_t *slot, nslot;
};

static size_t
name_hash(const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return (size_t)h;
}

/* The child named `name` (len bytes), added if new. */
static struct state_child *
child_of(struct states_ctx *sc, const char *name, size_t len)
{
	size_t i;

	if (2 * (sc->n + 1) > sc->nslot) {
		size_t nn = sc->nslot ? sc->nslot * 2 : 64;

		free(sc->slot);
		sc->slot = tend_xcalloc(nn, sizeof *sc->slot);
		sc->nslot = nn;
		for (size_t k = 0; k < sc->n; k++) {
			i = name_hash(sc->v[k].name, strlen(sc->v[k].name)) &
			    (nn - 1);
			while (sc->slot[i])
				i = (i + 1) & (nn - 1);
			sc->slot[i] = k + 1;
		}
	}
	i = name_hash(name, len) & (sc->nslot - 1);
	for (; sc->slot[i]; i = (i + 1) & (sc->nslot - 1)) {
		struct state_child *c = &sc->v[sc->slot[i] - 1];

		if (strncmp(c->name, name, len) == 0 && !c->name[len])
			return c;
	}
	if (sc->n == sc->cap) {
		sc->cap = sc->cap ? sc->cap * 2 : 64;
		sc->v = tend_xrealloc(sc->v, sc->cap * sizeof *sc->v);
	}
	sc->slot[i] = sc->n + 1;
	sc->v[sc->n] = (struct state_child){.name = tend_xmemdup(name, len + 1)};
	sc->v[sc->n].name[len] = '\0';
	return &sc->v[sc->n++];
}

/*
 * A state's place in the dashboard's tree: its path as plan and ls spell
 * it, with a container as a directory ("public/"). A git target is one
 * level, "git(\"repo\", \"refs/heads/pages\", \"site\"):" (its ref has
 * slashes of its own), its entries below it.
 */
static void
on_state_level(const struct tend_state_info *si, void *arg)
{
	struct states_ctx *sc = arg;
	struct tend_buf path = TEND_BUF_INIT, info = TEND_BUF_INIT;
	size_t root = tend_state_display_path(&path, si->path, si->container);

	if (root && path.len == root)
		tend_buf_putc(&path, ':'); /* the commit: the entries' node */
	if (path.len <= sc->plen ||
	    strncmp(path.ptr, sc->prefix, sc->plen) != 0) {
		tend_buf_release(&path);
		return;
	}
	const char *rest = path.ptr + sc->plen;
	const char *slash = strchr(rest, '/');
	size_t nl;
	bool dir;

	if (root && sc->plen <= root) {
		nl = root + 1 - sc->plen;
		dir = true;
	} else {
		nl = slash ? (size_t)(slash - rest) + 1 : strlen(rest);
		dir = slash != NULL;
	}
	bool self = !rest[nl]; /* the state itself, not below */
	if (self) {
		tend_buf_puts(&info, "\"owner\": ");
		tend_buf_json(&info, si->component);
		tend_buf_puts(&info, ", \"record\": \"");
		if (si->record)
			tend_buf_puthex(&info, si->record,
			    si->len < 17 ? si->len : 17);
		tend_buf_printf(&info, "\", \"container\": %s, \"pending\": %s",
		    si->container ? "true" : "false",
		    si->pending ? "true" : "false");
	}
	struct state_child *c = child_of(sc, rest, nl);

	if (self) {
		free(c->info);
		c->info = tend_buf_detach(&info, NULL);
	} else
		c->count++;
	c->dir |= dir;
	tend_buf_release(&info);
	tend_buf_release(&path);
}

static int
cmp_child(const void *x, const void *y)
{
	return strcmp(((const struct state_child *)x)->name,
	    ((const struct state_child *)y)->name);
}

/*
 * One level of the tracking-state tree: the states whose display path
 * starts with `prefix`, deeper ones folded into their directory with a
 * count, sorted by name. At most STATES_MAX children are listed; "total"
 * says how many there are.
 */
static void
states_reply(struct agent *a, const char *app, const char *prefix,
    struct tend_buf *out)
{
	struct states_ctx sc = {.prefix = prefix, .plen = strlen(prefix)};
	size_t listed = 0, total = 0;

	if (!tend_ws_app(a->ws, app)) {
		tend_buf_puts(out, "{\"event\": \"error\", \"error\": \"no such "
				   "app\"}\n");
		return;
	}
	int rc = tend_engine_list(a->ws->eng, app, on_state_level, &sc);
	if (sc.n > 1)
		qsort(sc.v, sc.n, sizeof *sc.v, cmp_child);
	tend_buf_puts(out, "{\"event\": \"states\", \"app\": ");
	tend_buf_json(out, app);
	tend_buf_puts(out, ", \"prefix\": ");
	tend_buf_json(out, prefix);
	tend_buf_puts(out, ", \"children\": [");
	for (size_t i = 0; i < sc.n; i++) {
		struct state_child *c = &sc.v[i];

		total++;
		if (listed < STATES_MAX) {
			tend_buf_puts(out, listed++ ? ", {\"name\": "
						    : "{\"name\": ");
			tend_buf_json(out, c->name);
			tend_buf_printf(out, ", \"dir\": %s, \"count\": %zu",
			    c->dir ? "true" : "false", c->count);
			if (c->info)
				tend_buf_printf(out, ", %s", c->info);
			tend_buf_putc(out, '}');
		}
		free(c->name);
		free(c->info);
	}
	free(sc.v);
	free(sc.slot);
	tend_buf_printf(out, "], \"total\": %zu, \"truncated\": %s", total,
	    total > listed ? "true" : "false");
	if (rc) {
		tend_buf_puts(out, ", \"error\": ");
		tend_buf_json(out, tend_error_last());
	}
	tend_buf_puts(out, "}\n");
}

/* ---- commands ---- */

/*
 * One command line: a word ("status") or a JSON object ({"cmd":
 * "states", "app": "site", "prefix": "public/"}). Words after the
 * command are its arguments ("states site public/").
 */
static void
on_command(struct agent *a, struct client *c, const char *line)
{
	char cmd[32] = "", arg1[256] = "", arg2[1024] = "";
	struct tend_buf out = TEND_BUF_INIT;
	const char *p = line;

	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == '{') {
		char err[128];
		struct tend_json *j = tend_json_parse(p, strlen(p), err,
		    sizeof err);

		if (!j || j->type != TEND_JSON_OBJ) {
			tend_buf_puts(&out, "{\"event\": \"error\", \"error\": ");
			tend_buf_json(&out, j ? "not an object" : err);
			tend_buf_puts(&out, "}\n");
			client_send(a, c, out.ptr);
			tend_buf_release(&out);
			tend_json_free(j);
			return;
		}
		snprintf(cmd, sizeof cmd, "%s", tend_json_str(j, "cmd", ""));
		snprintf(arg1, sizeof arg1, "%s", tend_json_str(j, "app", ""));
		snprintf(arg2, sizeof arg2, "%s",
		    tend_json_str(j, "prefix", ""));
		tend_json_free(j);
	} else
		sscanf(p, "%31s %255s %1023s", cmd, arg1, arg2);
	/* whoever asks reads the store next: give it what is settled */
	settle(a);
	if (strcmp(cmd, "settle") == 0) {
		tend_buf_puts(&out, "{\"event\": \"settled\"}\n");
	} else if (strcmp(cmd, "status") == 0) {
		status_line(a, &out);
	} else if (strcmp(cmd, "subscribe") == 0) {
		c->subscribed = true;
		tend_buf_puts(&out, "{\"event\": \"subscribed\"}\n");
		/* what is pending now, so a new dashboard shows it */
		for (size_t i = 0; i < a->napps; i++)
			if (a->apps[i].plan)
				tend_buf_puts(&out, a->apps[i].plan);
	} else if (strcmp(cmd, "sync") == 0 || strcmp(cmd, "rescan") == 0) {
		for (size_t i = 0; i < a->napps; i++)
			a->apps[i].full = true;
		due_now(a);
		c->want_done = cmd[0] == 's';
		c->passed = false; /* until this sync's passes ran */
		a->forced |= cmd[0] == 's';
		tend_buf_printf(&out, "{\"event\": \"ok\", \"cmd\": \"%s\"}\n",
		    cmd);
	} else if (strcmp(cmd, "approve") == 0) {
		uint64_t n = 0;

		for (size_t i = 0; i < a->napps; i++) {
			struct appstate *s = &a->apps[i];

			if (!s->held || (*arg1 &&
					    strcmp(arg1, a->ws->cfg.apps[i].name)))
				continue;
			n += s->held;
			s->approved = s->full = true;
		}
		if (n)
			due_now(a);
		tend_buf_printf(&out, "{\"event\": \"ok\", \"cmd\": \"approve\", "
				      "\"approved\": %llu}\n",
		    (unsigned long long)n);
	} else if (strcmp(cmd, "states") == 0) {
		states_reply(a, arg1, arg2, &out);
	} else if (strcmp(cmd, "pause") == 0 || strcmp(cmd, "resume") == 0) {
		a->paused = cmd[0] == 'p';
		tend_buf_printf(&out, "{\"event\": \"ok\", \"cmd\": \"%s\"}\n",
		    cmd);
		poke(a);
		/* tell every dashboard */
		broadcast(a, a->paused ? "{\"event\": \"paused\"}\n"
				       : "{\"event\": \"resumed\"}\n");
	} else {
		tend_buf_puts(&out, "{\"event\": \"error\", \"error\": "
				    "\"unknown command: ");
		for (const char *q = cmd; *q; q++)
			if (*q >= 'a' && *q <= 'z')
				tend_buf_putc(&out, *q);
		tend_buf_puts(&out, "\"}\n");
	}
	client_send(a, c, out.ptr);
	tend_buf_release(&out);
	arm_timer(a);
}

void
on_client(struct agent *a, struct client *c, uint32_t events)
{
	if (events & EPOLLOUT)
		client_flush(a, c);
	if (c->fd < 0 || !(events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		return;
	char buf[4096];
	ssize_t n = read(c->fd, buf, sizeof buf);

	if (n <= 0) {
		if (n < 0 && errno == EAGAIN)
			return;
		client_drop(a, c);
		return;
	}
	tend_buf_put(&c->in, buf, (size_t)n);
	c->seen = ++a->ticks;
	if (c->in.len > 64 * 1024) {
		client_drop(a, c); /* no command is that long */
		return;
	}
	char *nl;
	while (c->fd >= 0 && (nl = memchr(c->in.ptr, '\n', c->in.len))) {
		*nl = '\0';
		on_command(a, c, c->in.ptr);
		if (c->fd < 0)
			break;
		tend_buf_consume(&c->in, (size_t)(nl - c->in.ptr) + 1);
	}
}

void
on_accept(struct agent *a)
{
	int fd = accept4(a->lst, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct ucred cred;
	socklen_t len = sizeof cred;

	if (fd < 0)
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
	    cred.uid != getuid()) {
		logf_(a, ALOG_WARN, "refusing a client of uid %d", (int)cred.uid);
		close(fd);
		return;
	}
	int slot = -1, idle = -1;
	for (int i = 0; i < MAX_CLIENTS && slot < 0; i++)
		if (a->clients[i].fd < 0)
			slot = i;
	/* full: make room by dropping the connection idle the longest (not
	 * subscribed, nothing to read or write), so a script that leaks
	 * connections cannot lock `tend status` out */
	for (int i = 0; i < MAX_CLIENTS && slot < 0; i++) {
		struct client *c = &a->clients[i];

		if (c->subscribed || c->in.len || c->out.len)
			continue;
		if (idle < 0 || c->seen < a->clients[idle].seen)
			idle = i;
	}
	if (slot < 0 && idle >= 0) {
		logf_(a, ALOG_WARN, "%d clients: dropping the longest idle one",
		    MAX_CLIENTS);
		client_drop(a, &a->clients[idle]);
		slot = idle;
	}
	if (slot >= 0) {
		struct client *c = &a->clients[slot];

		c->fd = fd;
		c->in = (struct tend_buf)TEND_BUF_INIT;
		c->out = (struct tend_buf)TEND_BUF_INIT;
		c->subscribed = false;
		c->want_done = c->passed = false; /* not the last one's */
		c->shed = 0;
		c->seen = ++a->ticks;
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
		epoll_ctl(a->ep, EPOLL_CTL_ADD, fd, &ev);
		return;
	}
	close(fd); /* full */
}

int
listen_socket(struct agent *a)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct tend_buf p = TEND_BUF_INIT;

	tend_buf_printf(&p, "%s/agent.sock", a->ws->state_dir);
	a->sock_path = tend_buf_detach(&p, NULL);
	if (strlen(a->sock_path) >= sizeof sa.sun_path)
		return tend_error_set(TEND_ERROR, "socket path too long: %s",
		    a->sock_path);
	strcpy(sa.sun_path, a->sock_path);
	unlink(a->sock_path); /* ours: we hold the lock */
	a->lst = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	mode_t old = umask(0177);
	int rc = bind(a->lst, (struct sockaddr *)&sa, sizeof sa);
	umask(old);
	if (rc != 0 || listen(a->lst, 16) != 0)
		return tend_error_set(TEND_ERROR, "socket %s: %s", a->sock_path,
		    strerror(errno));
	chmod(a->sock_path, 0600);
	return 0;
}

/* ---- the client side ---- */

/* `wait_ms` > 0: give up on an answer that takes longer (TEND_ERETRY) */
static int
request(const char *state_dir, const char *cmd, struct tend_buf *reply,
    bool until_pass, int wait_ms)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, rc = TEND_ENOTFOUND;

	snprintf(sa.sun_path, sizeof sa.sun_path, "%s/agent.sock", state_dir);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		if (fd >= 0)
			close(fd);
		return TEND_ENOTFOUND;
	}
	if (wait_ms > 0) {
		struct timeval tv = {wait_ms / 1000, (wait_ms % 1000) * 1000};

		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		rc = TEND_ERETRY;
	}
	struct tend_buf req = TEND_BUF_INIT;
	if (until_pass)
		tend_buf_puts(&req, "subscribe\n");
	tend_buf_printf(&req, "%s\n", cmd);
	if (write(fd, req.ptr, req.len) != (ssize_t)req.len) {
		tend_buf_release(&req);
		close(fd);
		return TEND_ERROR;
	}
	tend_buf_release(&req);
	/* read lines until the answer: the status line, or sync_done; the
	 * pass_finished lines of a sync are kept for the caller */
	struct tend_buf in = TEND_BUF_INIT;
	char buf[4096];
	ssize_t n;
	while ((n = read(fd, buf, sizeof buf)) > 0) {
		tend_buf_put(&in, buf, (size_t)n);
		char *nl;
		while ((nl = memchr(in.ptr, '\n', in.len))) {
			size_t len = (size_t)(nl - in.ptr) + 1;
			bool done = false;

			*nl = '\0';
			/* (a command's "ok" or "error" answers it too: an
			 * approve waited for a status line for ever) */
			if (!until_pass &&
			    (strstr(in.ptr, "\"event\": \"status\"") ||
				strstr(in.ptr, "\"event\": \"settled\"") ||
				strstr(in.ptr, "\"event\": \"ok\"") ||
				strstr(in.ptr, "\"event\": \"error\""))) {
				done = true;
				tend_buf_put(reply, in.ptr, len - 1);
				tend_buf_putc(reply, '\n');
			}
			if (until_pass && strstr(in.ptr, "\"event\": \"pass_finished\"")) {
				tend_buf_put(reply, in.ptr, len - 1);
				tend_buf_putc(reply, '\n');
			}
			if (until_pass && strstr(in.ptr, "\"event\": \"sync_done\""))
				done = true;
			tend_buf_consume(&in, len);
			if (done) {
				rc = 0;
				goto out;
			}
		}
	}
out:
	tend_buf_release(&in);
	close(fd);
	return rc;
}

int
tend_agent_request(const char *state_dir, const char *cmd,
    struct tend_buf *reply, bool until_pass)
{
	return request(state_dir, cmd, reply, until_pass, 0);
}

int
tend_agent_request_wait(const char *state_dir, const char *cmd,
    struct tend_buf *reply, int wait_ms)
{
	return request(state_dir, cmd, reply, false, wait_ms);
}

int
tend_agent_settle(const char *state_dir)
{
	struct tend_buf reply = TEND_BUF_INIT;
	int rc = request(state_dir, "settle", &reply, false, 500);

	tend_buf_release(&reply);
	return rc;
}
