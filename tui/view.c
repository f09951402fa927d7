/*
 * view.c - the only code that touches ncurses.
 *
 * Layout, top to bottom: the header (two lines, three when narrow); the
 * apps panel (every app when there is room); then pending,
 * activity and the tracking-state tree (side by side with the first two
 * when the terminal is 120 columns or wider); a status line. The focused
 * panel's title is reversed and its selected row highlighted. Colors
 * when the terminal has them and NO_COLOR is not set; bold, dim and
 * reverse otherwise.
 */
#include "view.h"

#include <curses.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool use_color;

enum { P_CREATE = 1, P_UPDATE, P_DELETE, P_INVALID, P_ERROR, P_TITLE };

void
tv_init(void)
{
	initscr();
	cbreak();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	nodelay(stdscr, TRUE);
	set_escdelay(25);
	curs_set(0);
	const char *nc = getenv("NO_COLOR");
	use_color = has_colors() && !(nc && *nc);
	if (use_color) {
		start_color();
		use_default_colors();
		init_pair(P_CREATE, COLOR_GREEN, -1);
		init_pair(P_UPDATE, COLOR_YELLOW, -1);
		init_pair(P_DELETE, COLOR_RED, -1);
		init_pair(P_INVALID, COLOR_MAGENTA, -1);
		init_pair(P_ERROR, COLOR_RED, -1);
		init_pair(P_TITLE, COLOR_CYAN, -1);
	}
}

void
tv_end(void)
{
	if (!isendwin())
		endwin();
}

static attr_t
class_attr(enum tm_class c)
{
	if (!use_color) {
		switch (c) {
		case TM_C_ERROR:
		case TM_C_HELD:
			return A_BOLD;
		case TM_C_DIM:
			return A_DIM;
		default:
			return A_NORMAL;
		}
	}
	switch (c) {
	case TM_C_CREATE: return COLOR_PAIR(P_CREATE);
	case TM_C_UPDATE: return COLOR_PAIR(P_UPDATE);
	case TM_C_DELETE: return COLOR_PAIR(P_DELETE);
	case TM_C_INVALID: return COLOR_PAIR(P_INVALID);
	case TM_C_ERROR: return COLOR_PAIR(P_ERROR) | A_BOLD;
	case TM_C_HELD: return COLOR_PAIR(P_DELETE) | A_BOLD;
	case TM_C_DIM: return A_DIM;
	default: return A_NORMAL;
	}
}

/* text clipped to w columns at (y, x), the rest of the width blank */
static void
put_line(int y, int x, int w, const char *s, attr_t at)
{
	if (w <= 0)
		return;
	attrset(at);
	mvhline(y, x, ' ', w);
	mvaddnstr(y, x, s, w);
	attrset(A_NORMAL);
}

static void
panel(struct tm_model *m, enum tm_panel p, int y, int x, int h, int w)
{
	struct tend_buf title = TEND_BUF_INIT;
	size_t n;
	struct tm_row *rows;
	bool focused = m->focus == p;

	if (h < 1 || w < 4)
		return;
	tm_title(m, p, &title);
	put_line(y, x, w, title.ptr, (focused ? A_REVERSE : A_BOLD) |
		(use_color && !focused ? COLOR_PAIR(P_TITLE) : 0));
	tend_buf_release(&title);
	rows = tm_rows(m, p, &n);
	size_t vis = (size_t)(h - 1);
	size_t *sel = &m->sel[p], *top = &m->top[p];

	if (*sel >= n)
		*sel = n ? n - 1 : 0;
	if (*sel < *top)
		*top = *sel;
	if (vis && *sel >= *top + vis)
		*top = *sel - vis + 1;
	if (*top + vis > n)
		*top = n > vis ? n - vis : 0;
	for (size_t i = 0; i < vis; i++) {
		size_t r = *top + i;
		int yy = y + 1 + (int)i;

		if (r < n) {
			attr_t at = class_attr(rows[r].cls);

			if (focused && r == *sel)
				at |= A_REVERSE;
			put_line(yy, x, w, rows[r].text, at);
		} else if (i == 0 && n == 0 && p == TM_PENDING &&
		    m->conn == TM_READY && !m->filter[p][0]) {
			struct tend_buf e = TEND_BUF_INIT;

			tm_pending_empty(m, &e);
			put_line(yy, x, w, e.ptr, A_DIM);
			tend_buf_release(&e);
		} else if (i == 0 && n == 0) {
			const char *empty = m->conn == TM_CONNECTING
			    ? "connecting..."
			    : m->conn == TM_LOADING ? "loading..."
			    : m->conn == TM_DISCONNECTED ? "(disconnected)"
			    : m->filter[p][0] ? "(nothing matches the filter)"
			    : p == TM_PENDING ? "nothing pending: targets match "
						"the sources"
			    : p == TM_ACTIVITY ? "nothing applied since the "
						 "dashboard started"
			    : p == TM_TREE ? "no apps" : "no apps in tend.conf";
			put_line(yy, x, w, empty, A_DIM);
		} else
			put_line(yy, x, w, "", A_NORMAL);
	}
	free(rows);
}

/* A centered box with `text`, from line `scroll` on. */
static void
draw_overlay(const char *text, size_t scroll, const char *foot)
{
	int h = LINES - 4, w = COLS - 8;
	int y0 = 2, x0 = 4, nlines = 1;

	/* as tall as the text (wrapped lines aside), at most the screen */
	for (const char *p = text; *p; p++)
		nlines += *p == '\n';
	if (nlines + 4 < h)
		h = nlines + 4;

	if (h < 3 || w < 10)
		return;
	/* a frame that reads in plain text too (copy, capture-pane) */
	for (int y = 0; y < h; y++) {
		put_line(y0 + y, x0, w, "", A_REVERSE);
		mvaddch(y0 + y, x0, (y == 0 || y == h - 1 ? '+' : '|') |
			A_REVERSE);
		mvaddch(y0 + y, x0 + w - 1, (y == 0 || y == h - 1 ? '+' : '|') |
			A_REVERSE);
	}
	attrset(A_REVERSE);
	mvhline(y0, x0 + 1, '-', w - 2);
	mvhline(y0 + h - 1, x0 + 1, '-', w - 2);
	attrset(A_NORMAL);
	int y = 1;
	size_t line = 0;
	for (const char *p = text; *p && y < h - 3;) {
		const char *nl = strchr(p, '\n');
		int len = nl ? (int)(nl - p) : (int)strlen(p);

		/* long lines wrap */
		for (int off = 0; (off < len || len == 0) && y < h - 3;
		     off += w - 4) {
			if (line++ >= scroll) {
				attrset(A_REVERSE);
				mvaddnstr(y0 + y, x0 + 2, p + off,
				    len - off < w - 4 ? len - off : w - 4);
				y++;
			}
			if (len == 0)
				break;
		}
		p += len + (nl ? 1 : 0);
	}
	attrset(A_REVERSE | A_BOLD);
	mvaddnstr(y0 + h - 2, x0 + 2, foot, w - 4);
	attrset(A_NORMAL);
}

void
tv_draw(struct tm_model *m, double now)
{
	struct tend_buf hd = TEND_BUF_INIT;
	int H = LINES, W = COLS;

	erase();
	/* the header wraps rather than cut a field: 2 lines at 120
	 * columns, 3 at 80 (at most 4) */
	int hh = (int)tm_header(m, now, W, &hd);
	if (hh > 4)
		hh = 4;
	const char *line = hd.ptr;
	for (int i = 0; i < hh; i++) {
		const char *nl = strchr(line, '\n');
		char buf[512];

		snprintf(buf, sizeof buf, "%.*s", (int)(nl - line), line);
		put_line(i, 0, W, buf, i ? A_NORMAL : A_BOLD |
			(m->conn == TM_DISCONNECTED ? class_attr(TM_C_ERROR)
						    : 0));
		line = nl + 1;
	}
	tend_buf_release(&hd);

	int body = H - hh - 1; /* the header, the status line */
	/* every app when there is room (a third of the body at most; the
	 * model puts the apps with errors first) */
	int apps_h = (int)m->napps + 1;
	if (m->napps == 0)
		apps_h = 2;
	if (apps_h > body / 3)
		apps_h = body / 3;
	panel(m, TM_APPS, hh, 0, apps_h, W);
	int y = hh + apps_h, rest = body - apps_h;
	if (W >= 120) {
		int lw = W * 3 / 5;

		panel(m, TM_PENDING, y, 0, rest / 2, lw - 1);
		panel(m, TM_ACTIVITY, y + rest / 2, 0, rest - rest / 2, lw - 1);
		mvvline(y, lw - 1, '|', rest);
		panel(m, TM_TREE, y, lw, rest, W - lw);
	} else {
		int ph = rest / 3;

		panel(m, TM_PENDING, y, 0, ph, W);
		panel(m, TM_ACTIVITY, y + ph, 0, ph, W);
		panel(m, TM_TREE, y + 2 * ph, 0, rest - 2 * ph, W);
	}
	/* the status line: the filter being typed, a note, or the keys */
	struct tend_buf st = TEND_BUF_INIT;
	if (m->filtering)
		tend_buf_printf(&st, "filter: %s_   (Enter keeps, Esc clears)",
		    m->filter[m->focus]);
	else if (m->message[0])
		tend_buf_printf(&st, "%s", m->message);
	else if (strlen(tm_keys_line) <= (size_t)W)
		tend_buf_puts(&st, tm_keys_line);
	else {
		/* narrower than the keys: one space between them, so that
		 * the last ("a approve", what a held delete needs) stays */
		for (const char *k = tm_keys_line; *k; k++)
			if (!(k[0] == ' ' && k[1] == ' '))
				tend_buf_putc(&st, *k);
	}
	put_line(H - 1, 0, W, st.ptr, A_REVERSE);
	tend_buf_release(&st);

	if (m->help)
		draw_overlay(tm_help_text, 0, "? or Esc closes");
	else if (m->detail) {
		struct tend_buf d = TEND_BUF_INIT;

		tm_detail(m, &d);
		draw_overlay(d.ptr, m->detail_scroll, "j/k scroll, Enter or Esc "
						 "closes");
		tend_buf_release(&d);
	}
	refresh();
	m->dirty = false;
}

int
tv_key(void)
{
	int ch = getch();

	switch (ch) {
	case ERR: return -1;
	case KEY_RESIZE: return TV_RESIZE;
	case KEY_UP: return TM_KEY_UP;
	case KEY_DOWN: return TM_KEY_DOWN;
	case KEY_PPAGE: return TM_KEY_PGUP;
	case KEY_NPAGE: return TM_KEY_PGDN;
	case KEY_HOME: return TM_KEY_HOME;
	case KEY_END: return TM_KEY_END;
	case KEY_BTAB: return TM_KEY_BTAB;
	case KEY_ENTER: case '\r': case '\n': return TM_KEY_ENTER;
	case 27: return TM_KEY_ESC;
	case KEY_BACKSPACE: case 127: case 8: return TM_KEY_BACKSPACE;
	default: return ch;
	}
}
