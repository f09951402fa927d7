/*
 * test_tui_model.c - the dashboard's model: agent events and keys in,
 * what the panels show out. No terminal: the rows are the assertions.
 * Also the JSON reader the model and the agent share.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "json.h"
#include "model.h"

static const char *status_ev =
    "{\"event\": \"status\", \"pid\": 42, \"state\": \"watching\", "
    "\"uptime_ms\": 65000, \"passes\": 3, \"watches\": 7, \"overflows\": 1, "
    "\"queue\": 0, \"apps\": [{\"name\": \"site\", \"components\": 4, "
    "\"states\": 3, \"pending\": 0, \"errors\": 0, \"held\": 0, "
    "\"queued\": 0}, {\"name\": \"docs\", \"components\": 2, \"states\": "
    "1, \"pending\": 0, \"errors\": 1, \"held\": 0, \"queued\": 0}], "
    "\"last\": null}";

static const char *plan_ev =
    "{\"event\": \"plan\", \"app\": \"site\", \"held\": 0, \"actions\": ["
    "{\"app\": \"site\", \"op\": \"~\", \"provider\": \"@tend/dir/\\\"out\\\"\", "
    "\"key\": \"\\\"a.md\\\"\", \"path\": \"out/a.md\", \"nprev\": 1, "
    "\"missing\": false, \"container\": false, \"component\": "
    "\"/site/@files/a.md\", \"why\": \"source a.md changed 111 -> 222\", "
    "\"held\": false}, "
    "{\"app\": \"site\", \"op\": \"-\", \"provider\": \"@tend/dir/\\\"out\\\"\", "
    "\"key\": \"\\\"b.md\\\"\", \"path\": \"out/b.md\", \"nprev\": 1, "
    "\"missing\": false, \"container\": false, \"component\": "
    "\"/site/@files/b.md\", \"why\": \"source b.md deleted\", "
    "\"held\": true}]}";

static const char *applied_a =
    "{\"event\": \"action_applied\", \"app\": \"site\", \"op\": \"~\", "
    "\"provider\": \"@tend/dir/\\\"out\\\"\", \"key\": \"\\\"a.md\\\"\", "
    "\"path\": \"out/a.md\", \"nprev\": 1, \"missing\": false, "
    "\"component\": \"/site/@files/a.md\", \"why\": \"source a.md "
    "changed 111 -> 222\"}";

static struct tm_model *
fresh(void)
{
	struct tm_model *m = malloc(sizeof *m);

	tm_init(m, "/ws");
	tm_connected(m);
	tend_buf_reset(&m->out);
	return m;
}

static void
done(struct tm_model *m)
{
	tm_free(m);
	free(m);
}

/* the text of row i of panel p ("" past the end) */
static char *
row(struct tm_model *m, enum tm_panel p, size_t i, size_t *n)
{
	static char text[512];
	size_t cnt;
	struct tm_row *r = tm_rows(m, p, &cnt);

	text[0] = '\0';
	if (i < cnt)
		strcpy(text, r[i].text);
	if (n)
		*n = cnt;
	free(r);
	return text;
}

static void
test_states_of_connection(void **state)
{
	struct tm_model m;
	struct tend_buf h = TEND_BUF_INIT;

	(void)state;
	tm_init(&m, "/ws");
	assert_int_equal(tm_header(&m, 0, 120, &h), 2);
	assert_non_null(strstr(h.ptr, "connecting"));
	tend_buf_reset(&h);
	tm_connected(&m);
	assert_string_equal(m.out.ptr, "subscribe\nstatus\n");
	tm_header(&m, 0, 120, &h);
	assert_non_null(strstr(h.ptr, "loading"));
	tend_buf_reset(&h);
	tm_feed(&m, status_ev, 100);
	assert_int_equal(m.conn, TM_READY);
	assert_int_equal(tm_header(&m, 100, 120, &h), 2);
	assert_non_null(strstr(h.ptr, "agent 42 watching"));
	assert_non_null(strstr(h.ptr, "up 1m05s"));
	assert_non_null(strstr(h.ptr, "watches 7"));
	assert_non_null(strstr(h.ptr, "overflows 1"));
	tend_buf_reset(&h);
	tm_disconnected(&m);
	tm_header(&m, 100, 120, &h);
	assert_non_null(strstr(h.ptr, "DISCONNECTED"));
	tend_buf_release(&h);
	tm_free(&m);
}

/* every line of a header no wider than `cols`, and how many there are */
static size_t
header_fits(const struct tend_buf *h, size_t cols)
{
	size_t n = 0;

	for (const char *p = h->ptr, *nl; (nl = strchr(p, '\n')); p = nl + 1) {
		if ((size_t)(nl - p) > cols)
			fail_msg("a header line of %zu columns: %.*s",
			    (size_t)(nl - p), (int)(nl - p), p);
		n++;
	}
	return n;
}

/* a pass that forgot states tend never wrote (their files stay) says so
 * apart from its deletes, and one that adopted files (they held the
 * declared content) apart from its creates */
static void
test_last_pass_forgotten(void **state)
{
	struct tm_model m;
	struct tend_buf h = TEND_BUF_INIT;

	(void)state;
	tm_init(&m, "/w");
	tm_connected(&m);
	tm_feed(&m, "{\"event\": \"status\", \"pid\": 7, \"state\": "
		    "\"watching\", \"uptime_ms\": 1000, \"passes\": 1, "
		    "\"watches\": 1, \"overflows\": 0, \"queue\": 0, "
		    "\"apps\": []}", 1);
	tm_feed(&m, "{\"event\": \"pass_finished\", \"app\": \"site\", "
		    "\"seq\": 1, \"created\": 0, \"updated\": 0, "
		    "\"deleted\": 0, \"forgotten\": 2, \"adopted\": 3, "
		    "\"ms\": 3}", 1);
	tm_header(&m, 1, 120, &h);
	if (!strstr(h.ptr, "site: +0 ~0 -0 =2 3 adopted, 0 failed"))
		fail_msg("no forgotten or adopted count in\n%s", h.ptr);
	tend_buf_release(&h);
	tm_free(&m);
}

/* A new user's trial: with a target read-only, the Pending panel said
 * "nothing pending: targets match the sources" while 3 states were
 * unsettled; a tend.conf the agent refused was nowhere on the screen;
 * a declaration's error was counted as "failed" */
static void
test_pending_tells_failures(void **state)
{
	struct tm_model m;
	struct tend_buf b = TEND_BUF_INIT;

	(void)state;
	tm_init(&m, "/w");
	tm_connected(&m);
	tm_feed(&m, "{\"event\": \"status\", \"pid\": 7, \"state\": "
		    "\"watching\", \"uptime_ms\": 1000, \"passes\": 2, "
		    "\"watches\": 1, \"overflows\": 0, \"queue\": 0, "
		    "\"apps\": [{\"name\": \"site\", \"states\": 7, "
		    "\"pending\": 0, \"errors\": 3, \"unsettled\": 3, "
		    "\"retry_in_ms\": 1500}], \"config_error\": "
		    "\"tend.conf:13: unterminated subsection name\"}", 1);
	tm_pending_empty(&m, &b);
	if (!strstr(b.ptr, "3 unsettled in site") ||
	    !strstr(b.ptr, "retried in 2s") || strstr(b.ptr, "targets match"))
		fail_msg("the pending panel says: %s", b.ptr);
	/* an exec that failed on its input: an error, not retried, and no
	 * promise that the targets match */
	tm_feed(&m, "{\"event\": \"status\", \"pid\": 7, \"state\": "
		    "\"watching\", \"uptime_ms\": 1500, \"passes\": 2, "
		    "\"watches\": 1, \"overflows\": 0, \"queue\": 0, "
		    "\"apps\": [{\"name\": \"shout\", \"states\": 3, "
		    "\"pending\": 0, \"errors\": 1, \"unsettled\": 0, "
		    "\"retry_in_ms\": -1}], \"config_error\": "
		    "\"tend.conf:13: unterminated subsection name\"}", 1);
	tend_buf_reset(&b);
	tm_pending_empty(&m, &b);
	assert_string_equal(b.ptr, "nothing pending, but 1 error in shout "
	    "(Activity says which)");
	tend_buf_reset(&b);
	size_t n = tm_header(&m, 1, 80, &b);
	assert_int_equal(header_fits(&b, 80), n);
	if (!strstr(b.ptr, "tend.conf NOT LOADED") ||
	    !strstr(b.ptr, "unterminated subsection name"))
		fail_msg("no config error in the header:\n%s", b.ptr);
	/* an unreadable source: an error, not a failed action */
	tm_feed(&m, "{\"event\": \"pass_finished\", \"app\": \"site\", "
		    "\"seq\": 3, \"created\": 0, \"updated\": 0, "
		    "\"deleted\": 0, \"failed\": 0, \"errors\": 1, "
		    "\"ms\": 3}", 2);
	tend_buf_reset(&b);
	tm_header(&m, 2, 120, &b);
	if (!strstr(b.ptr, "0 failed, 1 error,"))
		fail_msg("errors counted as failed:\n%s", b.ptr);
	/* settled, config fixed: the promise holds again */
	tm_feed(&m, "{\"event\": \"status\", \"pid\": 7, \"state\": "
		    "\"watching\", \"uptime_ms\": 2000, \"passes\": 3, "
		    "\"watches\": 1, \"overflows\": 0, \"queue\": 0, "
		    "\"apps\": [{\"name\": \"site\", \"states\": 7, "
		    "\"pending\": 0, \"errors\": 0, \"unsettled\": 0, "
		    "\"retry_in_ms\": -1}]}", 3);
	tend_buf_reset(&b);
	tm_pending_empty(&m, &b);
	assert_string_equal(b.ptr, "nothing pending: targets match the sources");
	tend_buf_reset(&b);
	tm_header(&m, 3, 80, &b);
	assert_null(strstr(b.ptr, "NOT LOADED"));
	tend_buf_release(&b);
	tm_free(&m);
}

/* issue 15: at 80 columns the header cut "queue" and "passes" */
static void
test_header_fits_80_columns(void **state)
{
	struct tm_model m;
	struct tend_buf h = TEND_BUF_INIT;
	static const char *const fields[] = {"tend top", "agent 4194304 "
	    "watching", "up 1h05m", "queue 123456", "passes 1234567",
	    "watches 8192", "overflows 12", "last pass", "documentation: "
	    "+1000 ~2000 -3000,", "3 failed,", "1 error,", "5 held,", "100000 files "
	    "(99999 read) in 12345 ms"};

	(void)state;
	tm_init(&m, "/home/someone/projects/a-rather-long-workspace-name");
	tm_connected(&m);
	tm_feed(&m, "{\"event\": \"status\", \"pid\": 4194304, \"state\": "
		    "\"watching\", \"uptime_ms\": 3900000, \"passes\": "
		    "1234567, \"watches\": 8192, \"overflows\": 12, "
		    "\"queue\": 123456, \"apps\": []}", 1);
	tm_feed(&m, "{\"event\": \"pass_finished\", \"app\": "
		    "\"documentation\", \"seq\": 1234567, \"created\": 1000, "
		    "\"updated\": 2000, \"deleted\": 3000, \"failed\": 3, "
		    "\"errors\": 1, \"held_deletes\": 5, \"files\": 100000, "
		    "\"read\": 99999, \"ms\": 12345}", 1);
	for (size_t cols = 80; cols <= 120; cols += 40) {
		tend_buf_reset(&h);
		size_t n = tm_header(&m, 1, (int)cols, &h);

		assert_int_equal(header_fits(&h, cols), n);
		for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
			if (!strstr(h.ptr, fields[i]))
				fail_msg("%zu columns: no \"%s\" in\n%s", cols,
				    fields[i], h.ptr);
		assert_non_null(strstr(h.ptr, "a-rather-long-workspace-name"));
	}
	/* a workspace wider than the screen keeps its end */
	tend_buf_reset(&h);
	tm_header(&m, 1, 40, &h);
	header_fits(&h, 40);
	assert_non_null(strstr(h.ptr, "tend top  ...-rather-long-workspace-"
				      "name\n"));
	/* the other states wrap too */
	tm_disconnected(&m);
	tend_buf_reset(&h);
	tm_header(&m, 1, 80, &h);
	header_fits(&h, 80);
	assert_non_null(strstr(h.ptr, "retrying every second"));
	tend_buf_release(&h);
	tm_free(&m);
}

static void
test_apps_and_tree_roots(void **state)
{
	struct tm_model *m = fresh();
	size_t n;

	(void)state;
	tm_feed(m, status_ev, 1);
	assert_int_equal(m->napps, 2);
	/* docs has errors: it comes first */
	assert_non_null(strstr(row(m, TM_APPS, 0, &n), "docs"));
	assert_int_equal(n, 2);
	assert_non_null(strstr(row(m, TM_APPS, 0, NULL), "errors 1"));
	assert_non_null(strstr(row(m, TM_APPS, 1, NULL), "site"));
	assert_non_null(strstr(row(m, TM_APPS, 1, NULL), "components 4"));
	assert_non_null(strstr(row(m, TM_APPS, 1, NULL), "states 3"));
	/* a second status does not duplicate the tree's app nodes */
	tm_feed(m, status_ev, 2);
	row(m, TM_TREE, 0, &n);
	assert_int_equal(n, 2);
	assert_string_equal(row(m, TM_TREE, 1, NULL), "[+] app docs");
	done(m);
}

/* push = REMOTE: the status's push object and the agent's push events
 * show in the app's row; a failed push puts the app first, in red */
static void
test_push_state_in_app_rows(void **state)
{
	struct tm_model *m = fresh();
	struct tend_buf d = TEND_BUF_INIT;
	size_t n;

	(void)state;
	tm_feed(m, "{\"event\": \"status\", \"pid\": 7, \"state\": "
		   "\"watching\", \"apps\": [{\"name\": \"a\"}, {\"name\": "
		   "\"pages\", \"pushing\": true, \"push\": {\"remote\": "
		   "\"origin\", \"ref\": \"refs/heads/pages\", \"ahead\": 2, "
		   "\"behind\": 0, \"pushed\": 0, \"tried\": 0, \"error\": "
		   "null}}]}", 1);
	assert_int_equal(m->napps, 2);
	assert_non_null(strstr(row(m, TM_APPS, 1, &n),
	    "push ahead 2 behind 0 (pushing)"));
	assert_null(strstr(row(m, TM_APPS, 0, NULL), "push"));
	tm_feed(m, "{\"event\": \"push\", \"app\": \"pages\", \"ok\": "
		   "false, \"push\": {\"remote\": \"origin\", \"ref\": "
		   "\"refs/heads/pages\", \"ahead\": 3, \"behind\": 1, "
		   "\"pushed\": 5, \"tried\": 9, \"error\": \"push to origin "
		   "failed: connection refused\"}}", 2);
	assert_non_null(strstr(row(m, TM_APPS, 0, NULL), "pages"));
	assert_non_null(strstr(row(m, TM_APPS, 0, NULL),
	    "push ahead 3 behind 1 FAILED"));
	m->focus = TM_APPS;
	m->sel[TM_APPS] = 0;
	tm_detail(m, &d);
	assert_non_null(strstr(d.ptr, "push to:      origin"));
	assert_non_null(strstr(d.ptr, "connection refused"));
	tend_buf_release(&d);
	tm_feed(m, "{\"event\": \"push\", \"app\": \"pages\", \"ok\": "
		   "true, \"push\": {\"remote\": \"origin\", \"ref\": "
		   "\"refs/heads/pages\", \"ahead\": 0, \"behind\": 0, "
		   "\"pushed\": 10, \"tried\": 10, \"error\": null}}", 3);
	assert_null(strstr(row(m, TM_APPS, 1, NULL), "FAILED"));
	assert_non_null(strstr(row(m, TM_APPS, 1, NULL),
	    "push ahead 0 behind 0"));
	done(m);
}

static void
test_plan_then_applied(void **state)
{
	struct tm_model *m = fresh();
	size_t n;

	(void)state;
	tm_feed(m, status_ev, 1);
	tm_feed(m, plan_ev, 2);
	assert_int_equal(m->npending, 2);
	/* the apps panel counts them at once, not at the next status */
	assert_non_null(strstr(row(m, TM_APPS, 1, NULL), "site "));
	assert_non_null(strstr(row(m, TM_APPS, 1, NULL), "pending 2 "));
	assert_non_null(strstr(row(m, TM_APPS, 1, NULL), "held 1"));
	/* held deletes come last and say so */
	assert_non_null(strstr(row(m, TM_PENDING, 0, NULL), "~ site"));
	assert_non_null(strstr(row(m, TM_PENDING, 0, NULL), "out/a.md"));
	assert_non_null(strstr(row(m, TM_PENDING, 1, NULL), "- HELD site"));
	struct tend_buf t = TEND_BUF_INIT;
	tm_title(m, TM_PENDING, &t);
	assert_non_null(strstr(t.ptr, "1 deletes HELD"));
	tend_buf_release(&t);
	/* applied: out of pending, into activity with its why */
	tm_feed(m, applied_a, 3);
	assert_int_equal(m->npending, 1);
	assert_non_null(strstr(row(m, TM_ACTIVITY, 0, &n), "out/a.md"));
	assert_int_equal(n, 1);
	assert_non_null(strstr(row(m, TM_ACTIVITY, 0, NULL),
	    "source a.md changed 111 -> 222"));
	/* a new plan replaces the app's old one */
	tm_feed(m, "{\"event\": \"plan\", \"app\": \"site\", \"held\": 0, "
		   "\"actions\": []}", 4);
	assert_int_equal(m->npending, 0);
	done(m);
}

static void
test_live_pending_cleared_by_pass(void **state)
{
	struct tm_model *m = fresh();

	(void)state;
	tm_feed(m, status_ev, 1);
	tm_feed(m, "{\"event\": \"pass_started\", \"app\": \"site\"}", 1);
	assert_string_equal(m->running, "site");
	tm_feed(m, "{\"event\": \"action_pending\", \"app\": \"site\", "
		   "\"op\": \"+\", \"provider\": \"p\", \"key\": \"k\", "
		   "\"path\": \"out/k\"}", 1);
	tm_feed(m, "{\"event\": \"action_pending\", \"app\": \"site\", "
		   "\"op\": \"+\", \"provider\": \"p\", \"key\": \"k\", "
		   "\"path\": \"out/k\"}", 1);
	assert_int_equal(m->npending, 1); /* the same state once */
	tm_feed(m, "{\"event\": \"pass_finished\", \"app\": \"site\", "
		   "\"seq\": 9, \"created\": 1, \"updated\": 0, \"deleted\": 0, "
		   "\"failed\": 0, \"errors\": 0, \"held_deletes\": 0, "
		   "\"files\": 3, \"read\": 1, \"ms\": 4}", 2);
	assert_int_equal(m->npending, 0);
	assert_string_equal(m->running, "");
	assert_non_null(strstr(m->last, "site: +1 ~0 -0"));
	assert_non_null(strstr(m->last, "in 4 ms"));
	assert_int_equal(m->passes, 9);
	done(m);
}

static void
test_failure_detail(void **state)
{
	struct tm_model *m = fresh();
	struct tend_buf d = TEND_BUF_INIT;

	(void)state;
	tm_feed(m, status_ev, 1);
	tm_feed(m, "{\"event\": \"error\", \"app\": \"site\", \"component\": "
		   "\"/site/@files/bad.md\", \"why\": \"new source bad.md\", "
		   "\"error\": \"exec failed: exit 3\\nstderr: boom line 1\\n"
		   "boom line 2\"}", 5);
	assert_non_null(strstr(row(m, TM_ACTIVITY, 0, NULL),
	    "E site     /site/@files/bad.md  exec failed: exit 3"));
	m->focus = TM_ACTIVITY;
	tm_key(m, TM_KEY_ENTER);
	assert_true(m->detail);
	tm_detail(m, &d);
	assert_non_null(strstr(d.ptr, "declared by:  /site/@files/bad.md"));
	assert_non_null(strstr(d.ptr, "boom line 2"));
	tm_key(m, TM_KEY_ESC);
	assert_false(m->detail);
	tend_buf_release(&d);
	done(m);
}

static void
test_provenance_detail(void **state)
{
	struct tm_model *m = fresh();
	struct tend_buf d = TEND_BUF_INIT;

	(void)state;
	tm_feed(m, status_ev, 1);
	tm_feed(m, plan_ev, 2);
	m->focus = TM_PENDING;
	tm_key(m, TM_KEY_ENTER);
	tm_detail(m, &d);
	assert_non_null(strstr(d.ptr, "update out/a.md"));
	assert_non_null(strstr(d.ptr, "why:          source a.md changed "
				      "111 -> 222"));
	assert_non_null(strstr(d.ptr, "1 previous record, may be missing: "
				      "no"));
	tend_buf_reset(&d);
	tm_key(m, TM_KEY_ESC);
	tm_key(m, 'j');
	tm_detail(m, &d);
	assert_non_null(strstr(d.ptr, "HELD by the delete brake"));
	tend_buf_release(&d);
	done(m);
}

static void
test_tree_lazy_levels(void **state)
{
	struct tm_model *m = fresh();
	size_t n;

	(void)state;
	tm_feed(m, status_ev, 1);
	m->focus = TM_TREE;
	tm_key(m, TM_KEY_ENTER); /* open "site" */
	assert_non_null(strstr(m->out.ptr, "\"cmd\": \"states\", \"app\": "
					   "\"site\", \"prefix\": \"\""));
	tend_buf_reset(&m->out);
	tm_feed(m, "{\"event\": \"states\", \"app\": \"site\", \"prefix\": \"\", "
		   "\"children\": [{\"name\": \"out/\", \"dir\": true, "
		   "\"count\": 3, \"owner\": \"/site/@tend/mount_target\", "
		   "\"record\": \"01a4\", \"container\": true, \"pending\": "
		   "false}], \"total\": 1, \"truncated\": false}", 2);
	assert_non_null(strstr(row(m, TM_TREE, 1, &n), "[+] out/  (3)"));
	assert_int_equal(n, 3);
	tm_key(m, 'j');
	tm_key(m, TM_KEY_ENTER); /* open out/ */
	assert_non_null(strstr(m->out.ptr, "\"prefix\": \"out/\""));
	tend_buf_reset(&m->out);
	tm_feed(m, "{\"event\": \"states\", \"app\": \"site\", \"prefix\": "
		   "\"out/\", \"children\": [{\"name\": \"a.md\", \"dir\": false, "
		   "\"count\": 0, \"owner\": \"/site/@files/a.md\", \"record\": "
		   "\"01aabbccddeeff\", \"container\": false, \"pending\": "
		   "false}, {\"name\": \"sub/\", \"dir\": true, \"count\": 2}], "
		   "\"total\": 2, \"truncated\": false}", 3);
	row(m, TM_TREE, 0, &n);
	assert_int_equal(n, 5);
	assert_non_null(strstr(row(m, TM_TREE, 2, NULL),
	    "a.md  /site/@files/a.md  01aabbccddee"));
	assert_non_null(strstr(row(m, TM_TREE, 3, NULL), "[+] sub/  (2)"));
	/* after a pass of site, the open levels are asked for again */
	tm_feed(m, "{\"event\": \"pass_finished\", \"app\": \"site\"}", 4);
	assert_non_null(strstr(m->out.ptr, "\"prefix\": \"\""));
	/* collapse */
	m->sel[TM_TREE] = 1;
	tm_key(m, TM_KEY_ENTER);
	row(m, TM_TREE, 0, &n);
	assert_int_equal(n, 3);
	done(m);
}

static void
test_filter_keys(void **state)
{
	struct tm_model *m = fresh();
	size_t n;

	(void)state;
	tm_feed(m, status_ev, 1);
	tm_feed(m, plan_ev, 2);
	m->focus = TM_PENDING;
	tm_key(m, '/');
	assert_true(m->filtering);
	tm_key(m, 'b');
	tm_key(m, '.');
	row(m, TM_PENDING, 0, &n);
	assert_int_equal(n, 1);
	assert_non_null(strstr(row(m, TM_PENDING, 0, NULL), "out/b.md"));
	tm_key(m, TM_KEY_ENTER);
	assert_false(m->filtering);
	/* the filter stays, for this panel only */
	row(m, TM_PENDING, 0, &n);
	assert_int_equal(n, 1);
	row(m, TM_APPS, 0, &n);
	assert_int_equal(n, 2);
	tm_key(m, '/');
	tm_key(m, TM_KEY_ESC);
	row(m, TM_PENDING, 0, &n);
	assert_int_equal(n, 2);
	done(m);
}

static void
test_command_keys(void **state)
{
	struct tm_model *m = fresh();

	(void)state;
	/* not connected yet: nothing is sent */
	tm_key(m, 's');
	assert_int_equal(m->out.len, 0);
	tm_feed(m, status_ev, 1);
	tm_key(m, 's');
	tm_key(m, 'p');
	tm_key(m, 'r');
	assert_string_equal(m->out.ptr, "sync\npause\nrescan\n");
	tend_buf_reset(&m->out);
	tm_feed(m, "{\"event\": \"paused\"}", 2);
	assert_true(m->paused);
	tm_key(m, 'p');
	assert_string_equal(m->out.ptr, "resume\n");
	tend_buf_reset(&m->out);
	tm_key(m, 'a'); /* nothing held: says so, sends nothing */
	assert_int_equal(m->out.len, 0);
	assert_non_null(strstr(m->message, "no deletes are held"));
	tm_feed(m, plan_ev, 3);
	tm_key(m, 'a');
	assert_string_equal(m->out.ptr, "approve\n");
	tm_feed(m, "{\"event\": \"ok\", \"cmd\": \"approve\", \"approved\": 1}",
	    4);
	assert_non_null(strstr(m->message, "approved 1 held delete:"));
	tm_key(m, '?');
	assert_true(m->help);
	tm_key(m, 'q'); /* closes help, does not quit */
	assert_false(m->help);
	assert_false(m->quit);
	tm_key(m, '\t');
	assert_int_equal(m->focus, TM_ACTIVITY);
	tm_key(m, TM_KEY_BTAB);
	assert_int_equal(m->focus, TM_PENDING);
	tm_key(m, 'q');
	assert_true(m->quit);
	done(m);
}

/* a status of five apps, a1 a2 a3 site a5, a3 and a5 with the errors
 * given */
static void
five_apps(struct tm_model *m, const char *state, int err3, int err5)
{
	char line[1024];

	snprintf(line, sizeof line,
	    "{\"event\": \"status\", \"pid\": 42, \"state\": \"%s\", "
	    "\"uptime_ms\": 1000, \"passes\": 5, \"watches\": 5, "
	    "\"overflows\": 0, \"queue\": 0, \"apps\": ["
	    "{\"name\": \"a1\", \"components\": 2, \"states\": 1, "
	    "\"errors\": 0}, {\"name\": \"a2\", \"components\": 2, "
	    "\"states\": 1, \"errors\": 0}, {\"name\": \"a3\", "
	    "\"components\": 2, \"states\": 1, \"errors\": %d}, "
	    "{\"name\": \"site\", \"components\": 2, \"states\": 1, "
	    "\"errors\": 0}, {\"name\": \"a5\", \"components\": 2, "
	    "\"states\": 1, \"errors\": %d}]}", state, err3, err5);
	tm_feed(m, line, 1);
}

/* issue 15: "Apps (5)" showed 4 rows, and the app with errors was the
 * fifth: apps with errors come first, then those with held deletes,
 * then the rest in tend.conf's order */
static void
test_apps_with_errors_first(void **state)
{
	struct tm_model *m = fresh();
	size_t n;

	(void)state;
	five_apps(m, "watching", 0, 0);
	for (size_t i = 0; i < 5; i++)
		assert_int_equal(strncmp(row(m, TM_APPS, i, NULL),
		    (const char *[]){"a1 ", "a2 ", "a3 ", "site ", "a5 "}[i],
		    3), 0);
	five_apps(m, "watching", 0, 2);
	assert_non_null(strstr(row(m, TM_APPS, 0, &n), "a5 "));
	assert_non_null(strstr(row(m, TM_APPS, 0, NULL), "errors 2 "));
	assert_int_equal(n, 5);
	/* a row still names its app (Enter, the filter) */
	struct tm_row *r = tm_rows(m, TM_APPS, &n);
	assert_int_equal(r[0].app, 4);
	assert_int_equal(r[0].cls, TM_C_ERROR);
	free(r);
	/* held deletes (site's plan holds one) next, then the rest */
	five_apps(m, "watching", 1, 2);
	tm_feed(m, plan_ev, 2);
	assert_non_null(strstr(row(m, TM_APPS, 0, NULL), "a3 "));
	assert_non_null(strstr(row(m, TM_APPS, 1, NULL), "a5 "));
	assert_non_null(strstr(row(m, TM_APPS, 2, NULL), "site "));
	assert_non_null(strstr(row(m, TM_APPS, 2, NULL), "held 1"));
	assert_non_null(strstr(row(m, TM_APPS, 3, NULL), "a1 "));
	assert_non_null(strstr(row(m, TM_APPS, 4, NULL), "a2 "));
	done(m);
}

/* issue 15: "Pending (0) - paused: s or p applies them" with nothing
 * pending */
static void
test_paused_hint_only_when_pending(void **state)
{
	struct tm_model *m = fresh();
	struct tend_buf t = TEND_BUF_INIT;

	(void)state;
	tm_feed(m, status_ev, 1);
	tm_feed(m, "{\"event\": \"paused\"}", 2);
	assert_true(m->paused);
	tm_title(m, TM_PENDING, &t);
	assert_string_equal(t.ptr, "Pending (0)");
	tend_buf_reset(&t);
	tm_feed(m, "{\"event\": \"plan\", \"app\": \"site\", \"held\": 0, "
		   "\"actions\": [{\"app\": \"site\", \"op\": \"+\", "
		   "\"provider\": \"p\", \"key\": \"k\", \"path\": "
		   "\"out/k\", \"held\": false}]}", 3);
	tm_title(m, TM_PENDING, &t);
	assert_string_equal(t.ptr, "Pending (1) - paused: s or p applies them");
	tend_buf_reset(&t);
	/* applied (s while paused): nothing left, no hint */
	tm_feed(m, "{\"event\": \"action_applied\", \"app\": \"site\", "
		   "\"op\": \"+\", \"provider\": \"p\", \"key\": \"k\", "
		   "\"path\": \"out/k\"}", 4);
	tm_title(m, TM_PENDING, &t);
	assert_string_equal(t.ptr, "Pending (0)");
	tend_buf_release(&t);
	done(m);
}

/* the plan of an exec app that writes two entries per source: `n`
 * sources deleted, 2n deletes held */
static void
held_plan(struct tm_model *m, const char *app, int n)
{
	struct tend_buf b = TEND_BUF_INIT;

	tend_buf_printf(&b, "{\"event\": \"plan\", \"app\": \"%s\", "
			    "\"held\": %d, \"actions\": [", app, n);
	for (int i = 0; i < 2 * n; i++)
		tend_buf_printf(&b, "%s{\"app\": \"%s\", \"op\": \"-\", "
				    "\"provider\": \"p\", \"key\": \"k%d\", "
				    "\"path\": \"out/%d.%s\", \"why\": "
				    "\"source %d deleted\", \"held\": true}",
		    i ? ", " : "", app, i, i / 2, i % 2 ? "b" : "a", i / 2);
	tend_buf_puts(&b, "]}");
	tm_feed(m, b.ptr, 2);
	tend_buf_release(&b);
}

/* issue 15: `a` said "approved 2000 held deletes" when 1,500 were held.
 * The agent's "approved" counts source items; the deletes it releases
 * are the held actions of its plans, which the dashboard lists. */
static void
test_approve_says_what_was_held(void **state)
{
	struct tm_model *m = fresh();
	struct tend_buf t = TEND_BUF_INIT;

	(void)state;
	tm_feed(m, status_ev, 1);
	held_plan(m, "site", 1000);
	held_plan(m, "docs", 500);
	tm_title(m, TM_PENDING, &t);
	assert_non_null(strstr(t.ptr, "3000 deletes HELD"));
	tm_key(m, 'a');
	assert_string_equal(m->out.ptr, "approve\n");
	tm_feed(m, "{\"event\": \"ok\", \"cmd\": \"approve\", "
		   "\"approved\": 1500}", 3);
	assert_string_equal(m->message,
	    "approved 3000 held deletes: the next pass applies them");
	/* paused, before a pass: the preview marks what the brake will
	 * hold, the agent holds nothing yet */
	tm_feed(m, "{\"event\": \"ok\", \"cmd\": \"approve\", "
		   "\"approved\": 0}", 3);
	assert_non_null(strstr(m->message, "nothing approved yet"));
	/* no plan listed (yet): the agent's count, in its own unit */
	tm_feed(m, "{\"event\": \"plan\", \"app\": \"site\", \"held\": 0, "
		   "\"actions\": []}", 4);
	tm_feed(m, "{\"event\": \"plan\", \"app\": \"docs\", \"held\": 0, "
		   "\"actions\": []}", 4);
	tm_feed(m, "{\"event\": \"ok\", \"cmd\": \"approve\", "
		   "\"approved\": 7}", 5);
	assert_string_equal(m->message, "approved the held deletes of 7 "
	    "source items: the next pass applies them");
	tm_feed(m, "{\"event\": \"ok\", \"cmd\": \"approve\", "
		   "\"approved\": 0}", 6);
	assert_string_equal(m->message, "no deletes were held: nothing "
	    "approved");
	tend_buf_release(&t);
	done(m);
}

/* issue 15: while paused the header's queue was the last status's (0
 * while the agent had 12 queued changes): each plan brings its app's
 * queue, and a pass empties it */
static void
test_queue_follows_the_plans(void **state)
{
	struct tm_model *m = fresh();

	(void)state;
	five_apps(m, "paused", 0, 0);
	assert_true(m->paused);
	assert_int_equal(m->queue, 0);
	tm_feed(m, "{\"event\": \"plan\", \"app\": \"site\", \"held\": 0, "
		   "\"queued\": 12, \"actions\": []}", 2);
	assert_int_equal(m->queue, 12);
	tm_feed(m, "{\"event\": \"plan\", \"app\": \"a3\", \"held\": 0, "
		   "\"queued\": 3, \"actions\": []}", 2);
	assert_int_equal(m->queue, 15);
	/* s while paused: site's pass takes its queue */
	tm_feed(m, "{\"event\": \"pass_finished\", \"app\": \"site\", "
		   "\"seq\": 6}", 3);
	assert_int_equal(m->queue, 3);
	/* an app the status did not list changes nothing */
	tm_feed(m, "{\"event\": \"plan\", \"app\": \"new\", \"held\": 0, "
		   "\"queued\": 9, \"actions\": []}", 4);
	assert_int_equal(m->queue, 3);
	/* an agent that does not say keeps the status's count */
	tm_feed(m, "{\"event\": \"plan\", \"app\": \"a3\", \"held\": 0, "
		   "\"actions\": []}", 5);
	assert_int_equal(m->queue, 3);
	done(m);
}

static void
test_activity_bounded(void **state)
{
	struct tm_model *m = fresh();
	char line[256];

	(void)state;
	for (int i = 0; i < TM_ACTIVITY_MAX + 50; i++) {
		snprintf(line, sizeof line,
		    "{\"event\": \"action_applied\", \"app\": \"s\", \"op\": "
		    "\"+\", \"provider\": \"p\", \"key\": \"k%d\", \"path\": "
		    "\"f%d\"}", i, i);
		tm_feed(m, line, i);
	}
	assert_int_equal(m->nactivity, TM_ACTIVITY_MAX);
	assert_non_null(strstr(row(m, TM_ACTIVITY, 0, NULL), " f549"));
	/* garbage is skipped, not fatal */
	tm_feed(m, "{not json", 1);
	tm_feed(m, "", 1);
	tm_feed(m, "[1, 2]", 1);
	assert_int_equal(m->nactivity, TM_ACTIVITY_MAX);
	done(m);
}

/* ---- the JSON reader ---- */

static void
test_json_values(void **state)
{
	char err[128];
	const char *text = " {\"a\": [1, -2.5e2, true, false, null], "
			   "\"s\": \"q\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\", "
			   "\"o\": {}} ";
	struct tend_json *j = tend_json_parse(text, strlen(text), err,
	    sizeof err);

	(void)state;
	assert_non_null(j);
	const struct tend_json *a = tend_json_get(j, "a");
	assert_int_equal(a->type, TEND_JSON_ARR);
	assert_int_equal(a->len, 5);
	assert_true(a->child->n == 1.0);
	assert_true(a->child->next->n == -250.0);
	assert_true(a->child->next->next->b);
	assert_false(a->child->next->next->next->b);
	assert_int_equal(a->child->next->next->next->next->type,
	    TEND_JSON_NULL);
	assert_string_equal(tend_json_str(j, "s", ""),
	    "q\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80");
	assert_int_equal(tend_json_get(j, "o")->type, TEND_JSON_OBJ);
	assert_null(tend_json_get(j, "missing"));
	assert_string_equal(tend_json_str(j, "a", "def"), "def");
	tend_json_free(j);

	/* integers: out of range is the default, not an undefined cast
	 * (fuzz-protocol found 6.4e+100 cast to an unsigned long) */
	const char *nums = "{\"big\": 6.4e100, \"neg\": -1, \"frac\": 5.7, "
			   "\"str\": \"7\", \"max\": 9007199254740992}";
	j = tend_json_parse(nums, strlen(nums), err, sizeof err);
	assert_non_null(j);
	assert_int_equal(tend_json_int(j, "big", 0, TEND_JSON_INT_MAX, 3), 3);
	assert_int_equal(tend_json_int(j, "neg", 0, TEND_JSON_INT_MAX, 3), 3);
	assert_int_equal(tend_json_int(j, "frac", 0, 10, 3), 5);
	assert_int_equal(tend_json_int(j, "str", 0, 10, 3), 3);
	assert_int_equal(tend_json_int(j, "none", 0, 10, 3), 3);
	assert_true(tend_json_int(j, "max", 0, TEND_JSON_INT_MAX, 3) ==
	    TEND_JSON_INT_MAX);
	tend_json_free(j);
	/* and the model survives such a status */
	struct tm_model *m = fresh();
	tm_feed(m, "{\"event\": \"status\", \"pid\": 1e300, \"uptime_ms\": "
		   "-5, \"apps\": [{\"name\": \"a\", \"states\": 1e99}]}", 1);
	assert_int_equal(m->pid, 0);
	assert_int_equal(m->apps[0].states, -1);
	done(m);
}

static void
test_json_refuses(void **state)
{
	static const char *bad[] = {"", "{", "[1,]", "{\"a\" 1}", "{\"a\":}",
	    "\"\\x\"", "\"abc", "tru", "1 2", "{\"a\": 1,}", "\"a\x01\"",
	    "-", "01x", "[1] x", "\"\\u12\"", "{1: 2}"};
	char err[128];

	(void)state;
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		struct tend_json *j = tend_json_parse(bad[i], strlen(bad[i]),
		    err, sizeof err);

		if (j)
			fail_msg("accepted %s", bad[i]);
		assert_non_null(strstr(err, "offset"));
	}
	/* nesting is bounded, not a stack overflow */
	char deep[300];
	memset(deep, '[', sizeof deep);
	assert_null(tend_json_parse(deep, sizeof deep, err, sizeof err));
	assert_non_null(strstr(err, "nested deeper"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_states_of_connection),
		cmocka_unit_test(test_apps_and_tree_roots),
		cmocka_unit_test(test_plan_then_applied),
		cmocka_unit_test(test_live_pending_cleared_by_pass),
		cmocka_unit_test(test_failure_detail),
		cmocka_unit_test(test_provenance_detail),
		cmocka_unit_test(test_tree_lazy_levels),
		cmocka_unit_test(test_filter_keys),
		cmocka_unit_test(test_command_keys),
		cmocka_unit_test(test_header_fits_80_columns),
		cmocka_unit_test(test_last_pass_forgotten),
		cmocka_unit_test(test_apps_with_errors_first),
		cmocka_unit_test(test_paused_hint_only_when_pending),
		cmocka_unit_test(test_approve_says_what_was_held),
		cmocka_unit_test(test_queue_follows_the_plans),
		cmocka_unit_test(test_activity_bounded),
		cmocka_unit_test(test_json_values),
		cmocka_unit_test(test_push_state_in_app_rows),
		cmocka_unit_test(test_json_refuses),
		cmocka_unit_test(test_pending_tells_failures),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
