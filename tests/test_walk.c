/*
 * test_walk.c - the source walk on a tree big enough for its two-thread
 * path to fill chunks and hit its bounds: every file once, in path
 * order, with a usable directory fd; nothing but files; a callback that
 * stops the walk stops it there and leaks no descriptor.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "walk.h"

#define NDIRS 400 /* more than the walk's bound on open directories */

static char root[64];
static char **want; /* every regular file, in byte order */
static size_t nwant;

static void
put(const char *rel, const char *body)
{
	char p[512];
	FILE *f;

	snprintf(p, sizeof p, "%s/%s", root, rel);
	assert_non_null(f = fopen(p, "w"));
	fputs(body, f);
	fclose(f);
}

static void
mk(const char *rel)
{
	char p[512];

	snprintf(p, sizeof p, "%s/%s", root, rel);
	assert_int_equal(mkdir(p, 0755), 0);
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void
file(const char *rel)
{
	put(rel, rel);
	want = realloc(want, (nwant + 1) * sizeof *want);
	want[nwant++] = strdup(rel);
}

static int
setup(void **state)
{
	char rel[256];

	(void)state;
	strcpy(root, "/tmp/tend-walk-XXXXXX");
	assert_non_null(mkdtemp(root));
	/* d000..d399, each with sub/, files in both, some empty */
	for (int d = 0; d < NDIRS; d++) {
		snprintf(rel, sizeof rel, "d%03d", d);
		mk(rel);
		snprintf(rel, sizeof rel, "d%03d/sub", d);
		mk(rel);
		for (int f = 0; f < d % 7; f++) {
			snprintf(rel, sizeof rel, "d%03d/f%d", d, f);
			file(rel);
			snprintf(rel, sizeof rel, "d%03d/sub/g%d.txt", d, f);
			file(rel);
		}
	}
	/* git's order: a directory sorts as "name/" */
	mk("a");
	file("a/x");
	file("a-b");
	file("a.b");
	file("a0");
	/* never visited: symlinks, the root's .git */
	char p[512];
	snprintf(p, sizeof p, "%s/link", root);
	assert_int_equal(symlink("a", p), 0);
	mk(".git");
	put(".git/HEAD", "ref: refs/heads/main\n");
	qsort(want, nwant, sizeof *want, cmp_str);
	return 0;
}

static int
teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof cmd, "rm -rf %s", root);
	assert_int_equal(system(cmd), 0);
	for (size_t i = 0; i < nwant; i++)
		free(want[i]);
	free(want);
	return 0;
}

struct seen {
	size_t n, stop_at, dirs;
	int stop_rc;
	bool bad_fd;
	char **got;
};

static int
on_file(const char *rel, size_t len, int dirfd, const char *leaf,
    const struct stat *st, void *arg)
{
	struct seen *s = arg;
	struct stat again;

	if (strlen(rel) != len || fstatat(dirfd, leaf, &again,
					   AT_SYMLINK_NOFOLLOW) != 0 ||
	    again.st_ino != st->st_ino || !S_ISREG(st->st_mode) ||
	    strcmp(rel + len - strlen(leaf), leaf) != 0)
		s->bad_fd = true;
	s->got = realloc(s->got, (s->n + 1) * sizeof *s->got);
	s->got[s->n++] = strdup(rel);
	return s->n == s->stop_at ? s->stop_rc : 0;
}

static void
on_dir(void *arg, const char *rel)
{
	(void)rel;
	((struct seen *)arg)->dirs++;
}

static size_t
open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	size_t n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the DIR's own */
}

static void
seen_free(struct seen *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->got[i]);
	free(s->got);
}

static void
test_every_file_in_order(void **state)
{
	struct seen s = {0};
	struct tend_walk_opts o = {.on_dir = on_dir, .dir_arg = &s};
	unsigned skipped = 0;
	size_t fds = open_fds();

	(void)state;
	assert_int_equal(tend_walk(root, &o, on_file, &s, &skipped), 0);
	assert_false(s.bad_fd);
	assert_int_equal(s.n, nwant);
	for (size_t i = 0; i < nwant; i++)
		if (strcmp(s.got[i], want[i]) != 0)
			fail_msg("file %zu: walked %s, expected %s", i, s.got[i],
			    want[i]);
	/* root, a, d*, d* / sub */
	assert_int_equal(s.dirs, 2 + 2 * NDIRS);
	assert_int_equal(skipped, 1); /* the symlink */
	assert_int_equal(open_fds(), fds);
	seen_free(&s);
}

static void
test_stop(void **state)
{
	size_t fds = open_fds();

	(void)state;
	/* early, in the middle (past the walk's in-flight bounds), last */
	size_t at[] = {1, nwant / 2, nwant};
	for (size_t k = 0; k < 3; k++) {
		struct seen s = {.stop_at = at[k], .stop_rc = 7};
		struct tend_walk_opts o = {0};

		assert_int_equal(tend_walk(root, &o, on_file, &s, NULL), 7);
		assert_int_equal(s.n, at[k]);
		assert_string_equal(s.got[s.n - 1], want[at[k] - 1]);
		assert_int_equal(open_fds(), fds);
		seen_free(&s);
	}
}

static void
test_filters(void **state)
{
	char sub[] = "sub/", *exclude[] = {sub};
	struct seen s = {0};
	struct tend_walk_opts o = {.exclude = exclude, .nexclude = 1};
	size_t n = 0;

	(void)state;
	assert_int_equal(tend_walk(root, &o, on_file, &s, NULL), 0);
	for (size_t i = 0; i < nwant; i++)
		n += strstr(want[i], "/sub/") == NULL;
	assert_int_equal(s.n, n);
	for (size_t i = 0; i < s.n; i++)
		assert_null(strstr(s.got[i], "/sub/"));
	seen_free(&s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_file_in_order),
		cmocka_unit_test(test_stop),
		cmocka_unit_test(test_filters),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
