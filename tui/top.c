/*
 * top.c - the dashboard's loop: one poll() over the terminal, the
 * agent's socket and (in-process) the agent's end.
 *
 * Nothing blocks: the socket is non-blocking both ways, and what the
 * model wants sent waits in its buffer. Nothing spins either: poll()
 * sleeps until a key, a line, room to write or a timer; a lost agent's
 * socket is closed until the retry; a terminal that hung up or ended
 * ends the dashboard (without one it does not start: stdin and stdout
 * must be terminals). The screen is redrawn only when
 * the model is dirty, at most 10 times a second; the agent is asked for
 * its status once a second; a lost agent is retried once a second. The
 * terminal is restored on every exit, including crash signals.
 */
#define _GNU_SOURCE
#include "top.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "model.h"
#include "view.h"

#define REDRAW_MS 100
#define STATUS_MS 1000
#define RETRY_MS 1000

static volatile sig_atomic_t quit_signal;

static double
wall(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long long
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
on_quit(int sig)
{
	quit_signal = sig;
}

/* A crash must not leave the terminal raw: restore it, then die as
 * the signal would have made us. */
static void
on_crash(int sig)
{
	tv_end();
	signal(sig, SIG_DFL);
	raise(sig);
}

static int
sock_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof sa.sun_path)
		return -1;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		close(fd);
		return -1;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return fd;
}

struct conn {
	int fd;
	struct tend_buf in;
	long long retry_at, status_at;
};

static void
conn_lost(struct conn *c, struct tm_model *m)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	tend_buf_reset(&c->in);
	c->retry_at = mono_ms() + RETRY_MS;
	tm_disconnected(m);
}

/* read what is there; every complete line goes to the model */
static void
conn_read(struct conn *c, struct tm_model *m)
{
	char buf[65536];

	for (;;) {
		ssize_t n = read(c->fd, buf, sizeof buf);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (n <= 0) {
			conn_lost(c, m);
			return;
		}
		tend_buf_put(&c->in, buf, (size_t)n);
	}
	double now = wall();
	size_t start = 0;
	char *nl;
	while ((nl = memchr(c->in.ptr + start, '\n', c->in.len - start))) {
		*nl = '\0';
		tm_feed(m, c->in.ptr + start, now);
		start = (size_t)(nl - c->in.ptr) + 1;
	}
	tend_buf_consume(&c->in, start);
	if (c->in.len > 4 * 1024 * 1024)
		conn_lost(c, m); /* no line is that long */
}

static void
conn_write(struct conn *c, struct tm_model *m)
{
	if (c->fd >= 0 && tend_buf_write_fd(&m->out, c->fd) != 0)
		conn_lost(c, m);
}

int
tend_top_need_tty(const char *cmd)
{
	bool in = isatty(STDIN_FILENO), out = isatty(STDOUT_FILENO);

	if (in && out)
		return 0;
	fprintf(stderr,
	    "%s: standard %s not a terminal: the dashboard needs one "
	    "for its keys and its screen\n"
	    "(tend status prints the agent's state; tend plan what it would "
	    "do)\n",
	    cmd, !in && !out ? "input and output are"
		: !in ? "input is" : "output is");
	return 2;
}

/*
 * The terminal is gone when it hung up or failed, or when it says it
 * has input but curses got no key from it: that is an end of file (a
 * tty reads 0 bytes only once it is hung up). Either way no key will
 * come again, and polling it would return at once, forever.
 */
static bool
tty_gone(short revents, bool got_key)
{
	int avail = 0;

	if (revents & (POLLHUP | POLLERR | POLLNVAL))
		return true;
	if (!(revents & POLLIN) || got_key)
		return false;
	return ioctl(STDIN_FILENO, FIONREAD, &avail) != 0 || avail == 0;
}

int
tend_top_run(const struct tend_top_opts *o)
{
	struct tend_buf path = TEND_BUF_INIT;
	struct conn c = {.fd = -1, .in = TEND_BUF_INIT};
	struct tm_model m;
	long long last_draw = 0;
	bool gone = false;

	if (tend_top_need_tty(o->agent_done_fd < 0 ? "tend top"
						   : "tend watch --tui"))
		return 2;
	tend_buf_printf(&path, "%s/agent.sock", o->state_dir);
	c.fd = sock_connect(path.ptr);
	if (c.fd < 0 && o->agent_done_fd < 0) {
		fprintf(stderr,
		    "tend top: no agent runs for %s\n"
		    "start one with `tend watch --daemon` (then run tend top "
		    "again),\nor run the agent and the dashboard together: "
		    "tend watch --tui\n",
		    o->workspace);
		tend_buf_release(&path);
		return 1;
	}
	tm_init(&m, o->workspace);
	if (c.fd >= 0)
		tm_connected(&m);

	struct sigaction sa = {.sa_handler = on_quit};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (o->agent_done_fd < 0)
		sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	struct sigaction cr = {.sa_handler = on_crash};
	sigemptyset(&cr.sa_mask);
	int crash[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
	for (size_t i = 0; i < sizeof crash / sizeof *crash; i++)
		sigaction(crash[i], &cr, NULL);

	tv_init();
	while (!m.quit && !quit_signal) {
		long long now = mono_ms();

		if (c.fd < 0 && now >= c.retry_at) {
			c.fd = sock_connect(path.ptr);
			if (c.fd >= 0)
				tm_connected(&m);
			else
				c.retry_at = now + RETRY_MS;
		}
		if (c.fd >= 0 && now - c.status_at >= STATUS_MS) {
			tend_buf_puts(&m.out, "status\n");
			c.status_at = now;
			m.dirty = true; /* the uptime moves */
		}
		conn_write(&c, &m);
		if (m.dirty && now - last_draw >= REDRAW_MS) {
			tv_draw(&m, wall());
			last_draw = now;
		}

		long long wait = STATUS_MS - (now - c.status_at);
		if (c.fd < 0)
			wait = c.retry_at - now;
		if (m.dirty) {
			long long d = REDRAW_MS - (now - last_draw);
			if (d < wait)
				wait = d;
		}
		if (wait < 0)
			wait = 0;
		struct pollfd pf[3] = {
		    {.fd = STDIN_FILENO, .events = POLLIN},
		    {.fd = c.fd, .events = POLLIN |
			    (m.out.len ? POLLOUT : 0)},
		    {.fd = o->agent_done_fd, .events = POLLIN},
		};
		int n = poll(pf, 3, (int)wait);
		if (n < 0 && errno != EINTR)
			break;
		int key;
		bool got_key = false;
		/* a resize arrives as KEY_RESIZE, after the poll's EINTR */
		while ((key = tv_key()) != -1) {
			got_key = true;
			if (key == TV_RESIZE)
				m.dirty = true;
			else
				tm_key(&m, key);
		}
		if (n > 0 && tty_gone(pf[0].revents, got_key)) {
			gone = true;
			break;
		}
		if (n > 0 && c.fd >= 0 && (pf[1].revents & (POLLIN | POLLHUP |
							      POLLERR)))
			conn_read(&c, &m);
		if (n > 0 && (pf[2].revents & (POLLIN | POLLHUP)))
			break; /* the in-process agent stopped */
	}
	tv_end();
	if (gone)
		fprintf(stderr, "tend top: the terminal is gone\n");
	if (c.fd >= 0)
		close(c.fd);
	tend_buf_release(&c.in);
	tend_buf_release(&path);
	tm_free(&m);
	return gone ? 1 : 0;
}
