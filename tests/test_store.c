/*
 * test_store.c - the LMDB boundary against a real environment: prefix
 * iteration, sequences, map growth, the format guard, injected commit
 * failures, deferred settles.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <ftw.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "engine_int.h"
#include "store.h"
#include "tend/status.h"

struct fx {
	char dir[256];
	struct tend_store *st;
};

static int
setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	const char *tmp = getenv("TMPDIR");

	snprintf(f->dir, sizeof f->dir, "%s/tend-store-XXXXXX",
	    tmp && *tmp ? tmp : "/tmp");
	assert_non_null(mkdtemp(f->dir));
	*state = f;
	return 0;
}

static int
rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(path);
}

static int
teardown(void **state)
{
	struct fx *f = *state;

	tend_store_close(f->st);
	nftw(f->dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
	assert_int_not_equal(access(f->dir, F_OK), 0);
	free(f);
	return 0;
}

struct kv {
	const char *k, *v;
	int n;
};

static int
put_body(struct tend_txn *txn, void *arg)
{
	struct kv *kv = arg;
	char key[64];

	for (int i = 0; i < kv->n; i++) {
		int rc;

		snprintf(key, sizeof key, "%s%06d", kv->k, i);
		if ((rc = tend_store_put(txn, TEND_T_SIG, key, strlen(key),
			 kv->v, strlen(kv->v))))
			return rc;
	}
	return 0;
}

/* 500 rows of `c` * 1999 in `big`: about 1 MB, more than a small map */
static struct kv
big_rows(char big[2000], char c)
{
	memset(big, c, 1999);
	big[1999] = '\0';
	return (struct kv){"k", big, 500};
}

static void
prefix_iteration_sees_only_the_prefix(void **state)
{
	struct fx *f = *state;
	struct kv a = {"a/", "1", 10}, b = {"b/", "2", 5}, ab = {"a", "3", 1};
	struct tend_txn *txn;
	struct tend_iter it;
	struct tend_bytes k, v;
	int n = 0;

	assert_int_equal(tend_store_open(&f->st, f->dir, 0), 0);
	assert_int_equal(tend_store_write(f->st, put_body, &a), 0);
	assert_int_equal(tend_store_write(f->st, put_body, &b), 0);
	assert_int_equal(tend_store_write(f->st, put_body, &ab), 0);
	assert_int_equal(tend_store_read_begin(f->st, &txn), 0);
	assert_int_equal(tend_store_iter_init(&it, txn, TEND_T_SIG, "a/", 2), 0);
	while (tend_store_iter_next(&it, &k, &v) == 1) {
		assert_memory_equal(k.data, "a/", 2);
		n++;
	}
	tend_store_iter_finish(&it);
	assert_int_equal(n, 10);
	tend_store_read_end(txn);
}

static int
seq_body(struct tend_txn *txn, void *arg)
{
	uint64_t *out = arg;

	return tend_store_seq_next(txn, "ids", out);
}

static void
sequences_start_at_one_and_persist(void **state)
{
	struct fx *f = *state;
	uint64_t id = 0;

	assert_int_equal(tend_store_open(&f->st, f->dir, 0), 0);
	assert_int_equal(tend_store_write(f->st, seq_body, &id), 0);
	assert_int_equal(id, 1);
	assert_int_equal(tend_store_write(f->st, seq_body, &id), 0);
	assert_int_equal(id, 2);
	tend_store_close(f->st);
	assert_int_equal(tend_store_open(&f->st, f->dir, 0), 0);
	assert_int_equal(tend_store_write(f->st, seq_body, &id), 0);
	assert_int_equal(id, 3);
}

static void
map_full_grows_the_map(void **state)
{
	struct fx *f = *state;
	char big[2000];
	struct kv kv = big_rows(big, 'x');

	assert_int_equal(tend_store_open(&f->st, f->dir, 32 * 1024), 0);
	assert_int_equal(tend_store_write(f->st, put_body, &kv), 0);
	assert_true(tend_store_map_size(f->st) > 32 * 1024);
	/* and the data is all there */
	struct tend_txn *txn;
	struct tend_bytes v;
	assert_int_equal(tend_store_read_begin(f->st, &txn), 0);
	assert_int_equal(tend_store_get(txn, TEND_T_SIG, "k000499", 7, &v), 0);
	assert_int_equal(v.len, sizeof big - 1);
	tend_store_read_end(txn);
}

static int
format_body(struct tend_txn *txn, void *arg)
{
	uint32_t fmt = 99;

	(void)arg;
	return tend_store_put(txn, TEND_T_META, "format", 6, &fmt, 4);
}

static void
newer_format_is_refused_with_a_clear_message(void **state)
{
	struct fx *f = *state;

	assert_int_equal(tend_store_open(&f->st, f->dir, 0), 0);
	assert_int_equal(tend_store_write(f->st, format_body, NULL), 0);
	tend_store_close(f->st);
	f->st = NULL;
	assert_int_equal(tend_store_open(&f->st, f->dir, 0), TEND_ERROR);
	assert_null(f->st);
	assert_non_null(strstr(tend_error_last(), "newer tend (format 99"));
}

/* A new store gets the newest format, or the older one asked for; a
 * store keeps the format it was made with (its ids depend on it). */
static void
a_store_keeps_the_format_it_was_made_with(void **state)
{
	struct fx *f = *state;

	assert_int_equal(tend_store_open(&f->st, f->dir, 0), 0);
	assert_int_equal(tend_store_format(f->st), TEND_STORE_FORMAT);
	assert_true(TEND_STORE_FORMAT >= 2);
	tend_store_close(f->st);
	f->st = NULL;

	char old[300];
	snprintf(old, sizeof old, "%s/old", f->dir);
	setenv("TEND_STORE_FORMAT", "1", 1);
	assert_int_equal(tend_store_open(&f->st, old, 0), 0);
	unsetenv("TEND_STORE_FORMAT");
	assert_int_equal(tend_store_format(f->st), 1);
	tend_store_close(f->st);
	f->st = NULL;
	assert_int_equal(tend_store_open(&f->st, old, 0), 0);
	assert_int_equal(tend_store_format(f->st), 1);
	tend_store_close(f->st);
	f->st = NULL;
	/* and the one made with the newest stays so, whatever is asked */
	setenv("TEND_STORE_FORMAT", "1", 1);
	assert_int_equal(tend_store_open(&f->st, f->dir, 0), 0);
	unsetenv("TEND_STORE_FORMAT");
	assert_int_equal(tend_store_format(f->st), TEND_STORE_FORMAT);
}

/* This process's file-backed resident bytes (RssFile). */
static size_t
rss_file(void)
{
	char line[256];
	size_t kb = 0;
	FILE *f = fopen("/proc/self/status", "r");

	assert_non_null(f);
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "RssFile: %zu kB", &kb) == 1)
			break;
	fclose(f);
	return kb << 10;
}

static int
big_body(struct tend_txn *txn, void *arg)
{
	static char val[2000];
	int *n = arg, rc = 0;
	char key[32];

	memset(val, 'v', sizeof val);
	for (int i = 0; i < *n && rc == 0; i++) {
		snprintf(key, sizeof key, "row%08d", i);
		rc = tend_store_put(txn, TEND_T_SIG, key, strlen(key), val,
		    sizeof val);
	}
	return rc;
}

/* Reading a store bigger than the budget keeps its pages out of RSS:
 * 48 MB of rows read with a budget of 16 MiB. (Read without one, they
 * all stay mapped.) */
static void
reading_keeps_the_store_out_of_rss(void **state)
{
	struct fx *f = *state;
	int n = 24000;
	struct tend_txn *txn;
	struct tend_iter it;
	struct tend_bytes k, v;
	size_t peak = 0, rows = 0, base;
	int more;

	assert_int_equal(tend_store_open(&f->st, f->dir, 0), 0);
	assert_int_equal(tend_store_write(f->st, big_body, &n), 0);
	tend_store_close(f->st);
	assert_int_equal(tend_store_open(&f->st, f->dir, 0), 0);
	base = rss_file();
	tend_store_set_trim_budget(f->st, base + ((size_t)16 << 20));
	assert_int_equal(tend_store_read_begin(f->st, &txn), 0);
	assert_int_equal(tend_store_iter_init(&it, txn, TEND_T_SIG, "row", 3),
	    0);
	while ((more = tend_store_iter_next(&it, &k, &v)) == 1) {
		assert_int_equal(v.len, 2000);
		assert_int_equal(((const char *)v.data)[1999], 'v');
		if (++rows % 1000 == 0 && rss_file() > peak)
			peak = rss_file();
	}
	assert_int_equal(more, 0);
	tend_store_iter_finish(&it);
	tend_store_read_end(txn);
	assert_int_equal(rows, (size_t)n);
	if (peak > base + ((size_t)24 << 20))
		fail_msg("file-backed RSS grew by %zu MiB reading 48 MB",
		    (peak - base) >> 20);
}

static void
injected_commit_failure_writes_nothing(void **state)
{
	struct fx *f = *state;
	struct kv kv = {"z", "1", 3};
	struct tend_txn *txn;
	struct tend_bytes v;

	assert_int_equal(tend_store_open(&f->st, f->dir, 0), 0);
	tend_store_fail_commit_after(f->st, 1);
	assert_int_equal(tend_store_write(f->st, put_body, &kv), TEND_ERROR);
	assert_int_equal(tend_store_read_begin(f->st, &txn), 0);
	assert_int_equal(tend_store_get(txn, TEND_T_SIG, "z000000", 7, &v),
	    TEND_ENOTFOUND);
	tend_store_read_end(txn);
}

static bool
has(struct tend_store *st, const char *key)
{
	struct tend_txn *txn;
	struct tend_bytes v;
	bool found;

	assert_int_equal(tend_store_read_begin(st, &txn), 0);
	found = tend_store_get(txn, TEND_T_SIG, key, strlen(key), &v) == 0;
	tend_store_read_end(txn);
	return found;
}

/* What another process sees: 1 if `key` is committed, 0 if not. */
static int
other_process_has(const char *dir, const char *key)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		struct tend_store *st;

		if (tend_store_open(&st, dir, 0) != 0)
			_exit(2);
		_exit(has(st, key) ? 1 : 0);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static void
deferred_settle_commits_with_the_next_write(void **state)
{
	struct fx *f = *state;
	struct kv settle = {"s", "1", 3}, next = {"w", "2", 3};

	assert_int_equal(tend_store_open(&f->st, f->dir, 0), 0);
	tend_store_defer_settles(f->st, true);
	assert_int_equal(tend_store_write_settle(f->st, put_body, &settle), 0);
	assert_true(tend_store_settle_pending(f->st));
	/* this process reads what it settled; nobody else does yet */
	assert_true(has(f->st, "s000002"));
	assert_int_equal(other_process_has(f->dir, "s000002"), 0);
	assert_int_equal(tend_store_write(f->st, put_body, &next), 0);
	assert_false(tend_store_settle_pending(f->st));
	assert_int_equal(other_process_has(f->dir, "s000002"), 1);
	assert_int_equal(other_process_has(f->dir, "w000002"), 1);
}

static void
deferred_settle_is_flushed_alone_and_at_close(void **state)
{
	struct fx *f = *state;
	struct kv a = {"a", "1", 1}, b = {"b", "1", 1}, c = {"c", "1", 1};

	assert_int_equal(tend_store_open(&f->st, f->dir, 0), 0);
	tend_store_defer_settles(f->st, true);
	assert_int_equal(tend_store_write_settle(f->st, put_body, &a), 0);
	assert_int_equal(tend_store_settle_flush(f->st), 0);
	assert_false(tend_store_settle_pending(f->st));
	assert_int_equal(other_process_has(f->dir, "a000000"), 1);
	/* a second settle joins the first one */
	assert_int_equal(tend_store_write_settle(f->st, put_body, &b), 0);
	assert_int_equal(tend_store_write_settle(f->st, put_body, &c), 0);
	assert_true(has(f->st, "b000000") && has(f->st, "c000000"));
	assert_int_equal(other_process_has(f->dir, "b000000"), 0);
	assert_int_equal(other_process_has(f->dir, "c000000"), 0);
	tend_store_close(f->st);
	f->st = NULL;
	assert_int_equal(other_process_has(f->dir, "b000000"), 1);
	assert_int_equal(other_process_has(f->dir, "c000000"), 1);
}

static int
fail_body(struct tend_txn *txn, void *arg)
{
	int rc = put_body(txn, arg);

	return rc ? rc : TEND_EINVALID;
}

static void
a_failed_write_keeps_the_deferred_settle(void **state)
{
	struct fx *f = *state;
	struct kv settle = {"s", "1", 1}, bad = {"x", "1", 1};

	assert_int_equal(tend_store_open(&f->st, f->dir, 0), 0);
	tend_store_defer_settles(f->st, true);
	assert_int_equal(tend_store_write_settle(f->st, put_body, &settle), 0);
	assert_int_equal(tend_store_write(f->st, fail_body, &bad),
	    TEND_EINVALID);
	assert_true(tend_store_settle_pending(f->st));
	assert_true(has(f->st, "s000000"));
	assert_false(has(f->st, "x000000"));
	/* an injected commit failure of the write keeps it too */
	tend_store_fail_commit_after(f->st, 1);
	assert_int_equal(tend_store_write(f->st, put_body, &bad), TEND_ERROR);
	assert_true(tend_store_settle_pending(f->st));
	assert_int_equal(tend_store_settle_flush(f->st), 0);
	assert_int_equal(other_process_has(f->dir, "s000000"), 1);
	assert_int_equal(other_process_has(f->dir, "x000000"), 0);
}

/* A 64 KiB map with a deferred settle of s000000..s000004 open. */
static void
small_map_with_a_settle_open(struct fx *f)
{
	struct kv settle = {"s", "1", 5};

	assert_int_equal(tend_store_open(&f->st, f->dir, 64 * 1024), 0);
	tend_store_defer_settles(f->st, true);
	assert_int_equal(tend_store_write_settle(f->st, put_body, &settle), 0);
}

static void
a_write_that_fills_the_map_keeps_the_deferred_settle(void **state)
{
	struct fx *f = *state;
	char big[2000];
	struct kv kv = big_rows(big, 'x');

	small_map_with_a_settle_open(f);
	assert_int_equal(tend_store_write(f->st, put_body, &kv), 0);
	assert_true(tend_store_map_size(f->st) > 64 * 1024);
	assert_false(tend_store_settle_pending(f->st));
	assert_int_equal(other_process_has(f->dir, "s000004"), 1);
	assert_int_equal(other_process_has(f->dir, "k000499"), 1);
}

static void
a_settle_that_fills_the_map_keeps_the_one_open(void **state)
{
	struct fx *f = *state;
	char big[2000];
	struct kv kv = big_rows(big, 'y');

	small_map_with_a_settle_open(f);
	assert_int_equal(tend_store_write_settle(f->st, put_body, &kv), 0);
	assert_true(tend_store_map_size(f->st) > 64 * 1024);
	/* the first one was committed to let the map grow */
	assert_int_equal(other_process_has(f->dir, "s000004"), 1);
	assert_true(tend_store_settle_pending(f->st));
	assert_int_equal(tend_store_settle_flush(f->st), 0);
	assert_int_equal(other_process_has(f->dir, "k000499"), 1);
}

static void
a_failed_deferred_settle_leaves_nothing_half_done(void **state)
{
	struct fx *f = *state;
	struct kv settle = {"s", "1", 3}, next = {"w", "1", 1};

	assert_int_equal(tend_store_open(&f->st, f->dir, 0), 0);
	tend_store_defer_settles(f->st, true);
	assert_int_equal(tend_store_write_settle(f->st, put_body, &settle), 0);
	tend_store_fail_commit_after(f->st, 1);
	assert_int_equal(tend_store_settle_flush(f->st), TEND_ERROR);
	assert_non_null(strstr(tend_error_last(), "commit (settle)"));
	assert_false(tend_store_settle_pending(f->st));
	assert_false(has(f->st, "s000000"));
	/* and the store goes on */
	assert_int_equal(tend_store_write(f->st, put_body, &next), 0);
	assert_int_equal(other_process_has(f->dir, "w000000"), 1);
}

/* ---- counters (store.h) ---- */

struct cnt {
	const char *name;
	int64_t states;
	int fail; /* the body fails after adding */
	struct kv *kv; /* rows put too (map growth) */
};

static int
count_body(struct tend_txn *txn, void *arg)
{
	struct cnt *c = arg;
	struct tend_counts d = {{0}};
	int rc;

	d.n[TEND_COUNT_STATES] = c->states;
	d.n[TEND_COUNT_PENDING] = 1;
	tend_store_count_add(txn, c->name, strlen(c->name), &d);
	tend_store_count_add(txn, c->name, strlen(c->name), &d);
	if (c->kv && (rc = put_body(txn, c->kv)))
		return rc;
	return c->fail ? tend_error_set(TEND_ERROR, "body failed") : 0;
}

/* NAME's states counter, -1 if the counters are not trusted */
static int64_t
states_of(struct tend_store *st, const char *name)
{
	struct tend_txn *txn;
	struct tend_counts c;
	int rc;

	assert_int_equal(tend_store_read_begin(st, &txn), 0);
	rc = tend_store_counts_get(txn, name, strlen(name), &c);
	tend_store_read_end(txn);
	if (rc == TEND_EINVALID)
		return -1;
	assert_int_equal(rc, 0);
	return c.n[TEND_COUNT_STATES];
}

static void
counters_move_with_the_body_that_adds_to_them(void **state)
{
	struct fx *f = *state;
	struct cnt c = {"app", 3, 0, NULL};
	struct tend_txn *txn;
	char **names;
	size_t n;

	assert_int_equal(tend_store_open(&f->st, f->dir, 0), 0);
	assert_int_equal(states_of(f->st, "app"), 0); /* a new store: 0 */
	assert_int_equal(tend_store_write(f->st, count_body, &c), 0);
	assert_int_equal(states_of(f->st, "app"), 6);
	/* a failed body's deltas go with its transaction */
	c.fail = 1;
	assert_int_equal(tend_store_write(f->st, count_body, &c), TEND_ERROR);
	assert_int_equal(states_of(f->st, "app"), 6);
	/* back to zero: the row goes, and the name with it */
	c.fail = 0;
	c.states = -3;
	assert_int_equal(tend_store_write(f->st, count_body, &c), 0);
	assert_int_equal(tend_store_read_begin(f->st, &txn), 0);
	assert_int_equal(tend_store_count_names(txn, &names, &n), 0);
	assert_int_equal(n, 1); /* pending is 4 */
	assert_string_equal(names[0], "app");
	free(names[0]);
	free(names);
	tend_store_read_end(txn);
	/* and they persist */
	tend_store_close(f->st);
	assert_int_equal(tend_store_open(&f->st, f->dir, 0), 0);
	assert_int_equal(states_of(f->st, "app"), 0);
}

static void
counters_are_counted_once_when_the_map_fills(void **state)
{
	struct fx *f = *state;
	char big[2000];
	struct kv kv = big_rows(big, 'x');
	struct cnt c = {"app", 1, 0, &kv};

	assert_int_equal(tend_store_open(&f->st, f->dir, 32 * 1024), 0);
	assert_int_equal(tend_store_write(f->st, count_body, &c), 0);
	assert_true(tend_store_map_size(f->st) > 32 * 1024);
	assert_int_equal(states_of(f->st, "app"), 2);
}

static int
invalidate_body(struct tend_txn *txn, void *arg)
{
	int rc;

	(void)arg;
	if ((rc = tend_store_counts_invalidate(txn)))
		return rc;
	return tend_store_counts_clear(txn);
}

static unsigned recounts;

static int
recount(struct tend_txn *txn, void *arg)
{
	struct tend_counts c = {{0}};

	(void)arg;
	recounts++;
	c.n[TEND_COUNT_STATES] = 7;
	return tend_store_counts_set(txn, "app", 3, &c);
}

/* A store an older tend wrote last: readers are told, and its next
 * write recounts, once */
static void
untrusted_counters_are_recounted_by_the_next_write(void **state)
{
	struct fx *f = *state;
	struct cnt c = {"app", 3, 0, NULL};
	struct tend_txn *txn;
	char **names;
	size_t n;

	assert_int_equal(tend_store_open(&f->st, f->dir, 0), 0);
	assert_int_equal(tend_store_write(f->st, count_body, &c), 0);
	assert_int_equal(tend_store_write(f->st, invalidate_body, NULL), 0);
	assert_int_equal(states_of(f->st, "app"), -1);
	assert_int_equal(tend_store_read_begin(f->st, &txn), 0);
	assert_false(tend_store_counts_valid(txn));
	assert_int_equal(tend_store_count_names(txn, &names, &n),
	    TEND_EINVALID);
	tend_store_read_end(txn);
	/* without a recount, writes leave them untrusted */
	assert_int_equal(tend_store_write(f->st, count_body, &c), 0);
	assert_int_equal(states_of(f->st, "app"), -1);
	recounts = 0;
	tend_store_set_recount(f->st, recount, NULL);
	assert_int_equal(tend_store_write(f->st, count_body, &c), 0);
	assert_int_equal(recounts, 1);
	assert_int_equal(states_of(f->st, "app"), 7); /* the body's dropped */
	assert_int_equal(tend_store_write(f->st, count_body, &c), 0);
	assert_int_equal(recounts, 1);
	assert_int_equal(states_of(f->st, "app"), 13);
}

/* A deferred settle's deltas are seen by this process's readers, and
 * lost with it when its commit fails */
static void
deferred_settle_counts_commit_or_go_with_it(void **state)
{
	struct fx *f = *state;
	struct cnt c = {"app", 1, 0, NULL};

	assert_int_equal(tend_store_open(&f->st, f->dir, 0), 0);
	tend_store_defer_settles(f->st, true);
	assert_int_equal(tend_store_write_settle(f->st, count_body, &c), 0);
	assert_true(tend_store_settle_pending(f->st));
	assert_int_equal(states_of(f->st, "app"), 2);
	assert_int_equal(tend_store_write_settle(f->st, count_body, &c), 0);
	assert_int_equal(states_of(f->st, "app"), 4);
	assert_int_equal(tend_store_settle_flush(f->st), 0);
	assert_int_equal(states_of(f->st, "app"), 4);
	assert_int_equal(tend_store_write_settle(f->st, count_body, &c), 0);
	tend_store_fail_commit_after(f->st, 1);
	assert_int_equal(tend_store_settle_flush(f->st), TEND_ERROR);
	assert_int_equal(states_of(f->st, "app"), 4);
	/* a durable write commits the settle with it */
	assert_int_equal(tend_store_write_settle(f->st, count_body, &c), 0);
	assert_int_equal(tend_store_write(f->st, count_body, &c), 0);
	tend_store_close(f->st);
	assert_int_equal(tend_store_open(&f->st, f->dir, 0), 0);
	assert_int_equal(states_of(f->st, "app"), 8);
}

/* The set of a pass's component ids, sized up front (its table then
 * mapped, pre-faulted, past 1 MiB) or grown: every id added is in it,
 * no other is, and a reserve keeps what it holds. */
static void
cid_of(struct tend_fp *fp, uint64_t i)
{
	uint64_t w[2] = {i * 0x9E3779B97F4A7C15ull + 1, ~i};

	memcpy(fp->b, w, 16);
}

static void
cidset_holds_what_was_added(void **state)
{
	(void)state;
	for (int reserve = 0; reserve < 2; reserve++) {
		struct cidset s = {0};
		struct tend_fp fp;
		const uint64_t n = 150000;

		if (reserve)
			tend_cidset_reserve(&s, n);
		size_t size = s.size;
		for (uint64_t i = 0; i < n / 2; i++) {
			cid_of(&fp, i);
			tend_cidset_add(&s, &fp);
			tend_cidset_add(&s, &fp); /* twice: counted once */
		}
		tend_cidset_reserve(&s, n); /* keeps the first half */
		for (uint64_t i = n / 2; i < n; i++) {
			cid_of(&fp, i);
			tend_cidset_add(&s, &fp);
		}
		assert_int_equal(s.n, n);
		if (reserve)
			assert_int_equal(s.size, size); /* never grew */
		assert_true(s.mapped); /* 16 B x 2^19 */
		for (uint64_t i = 0; i < n + 1000; i++) {
			cid_of(&fp, i);
			assert_int_equal(tend_cidset_has(&s, &fp), i < n);
		}
		tend_cidset_free(&s);
		assert_null(s.tab);
		assert_false(tend_cidset_has(&s, &fp));
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(prefix_iteration_sees_only_the_prefix),
		T(sequences_start_at_one_and_persist),
		T(map_full_grows_the_map),
		T(newer_format_is_refused_with_a_clear_message),
		T(a_store_keeps_the_format_it_was_made_with),
		T(reading_keeps_the_store_out_of_rss),
		T(injected_commit_failure_writes_nothing),
		T(deferred_settle_commits_with_the_next_write),
		T(deferred_settle_is_flushed_alone_and_at_close),
		T(a_failed_write_keeps_the_deferred_settle),
		T(a_write_that_fills_the_map_keeps_the_deferred_settle),
		T(a_settle_that_fills_the_map_keeps_the_one_open),
		T(a_failed_deferred_settle_leaves_nothing_half_done),
		T(counters_move_with_the_body_that_adds_to_them),
		T(counters_are_counted_once_when_the_map_fills),
		T(untrusted_counters_are_recounted_by_the_next_write),
		T(deferred_settle_counts_commit_or_go_with_it),
		cmocka_unit_test(cidset_holds_what_was_added),
	};

	return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}
