/*
 * test_crash.c - a pass SIGKILLed at random points converges on rerun.
 *
 * Each iteration forks a child that runs a pass of a random declaration
 * (containers with lossy and destructive changes, components, ownership
 * moves) against the dict target mirrored in files, and dies: either the
 * sink kills it at the k-th action (before or after writing it: between
 * pre-commit and sink, mid-sink, between sink and commit), or the parent
 * kills it after a random delay. Then a clean pass in a new process must
 * converge: the external state equals the declaration, every tracked
 * state has exactly one record, no owner row without its item, no
 * tombstone left, and one more pass applies nothing.
 * TEND_CRASH_ITERS sets the number of iterations (default 200).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fakes/scenario.h"
#include "tend/buf.h"
#include "tend/status.h"

static uint64_t seed;

static unsigned
rnd(unsigned n)
{
	seed = seed * 6364136223846793005u + 1442695040888963407u;
	return (unsigned)((seed >> 33) % n);
}

/* A random declaration and the world it should produce. */
static void
gen(struct tend_buf *script, struct tend_buf *expect_keys)
{
	int owner[10];
	bool has_d = rnd(4) != 0;
	char spec = (char)('0' + rnd(3)), mode = rnd(2) ? 'l' : 'd';

	tend_buf_reset(script);
	tend_buf_reset(expect_keys);
	if (has_d)
		tend_buf_printf(script, "U(setup) { #D=%c:s%c } ", mode, spec);
	for (int k = 0; k < 10; k++)
		owner[k] = (int)rnd(6) - 1; /* -1: not declared, 4: root */
	for (int c = 0; c < 5; c++) {
		if (c < 4)
			tend_buf_printf(script, "C(c%d) { ", c);
		for (int k = 0; k < 10; k++) {
			if (owner[k] != c)
				continue;
			bool in_d = has_d && k % 2 == 0;
			unsigned v = rnd(3);

			tend_buf_printf(script, "%sk%d=v%u ", in_d ? "D/" : "",
			    k, v);
			tend_buf_printf(expect_keys, "%sk%d=v%u\n",
			    in_d ? "D/" : "", k, v);
		}
		if (c < 4)
			tend_buf_puts(script, "} ");
	}
	if (has_d)
		tend_buf_printf(expect_keys, "D=s%c\n", spec);
}

static char *
sorted_world(struct dict_world *w)
{
	return dict_dump(w);
}

static char *
sorted_expect(const char *lines)
{
	struct dict_world w;
	char *copy = strdup(lines), *sv = NULL, *out;

	dict_world_init(&w);
	for (char *l = strtok_r(copy, "\n", &sv); l; l = strtok_r(NULL, "\n", &sv)) {
		char *eq = strchr(l, '=');
		*eq = '\0';
		/* reuse the world's sorted dump */
		struct tend_buf b = TEND_BUF_INIT;
		tend_buf_printf(&b, "%s", l);
		extern void dict_test_put(struct dict_world *, const char *,
		    const char *);
		dict_test_put(&w, b.ptr, eq + 1);
		tend_buf_release(&b);
	}
	out = dict_dump(&w);
	dict_world_finish(&w);
	free(copy);
	return out;
}

/* Every item holds exactly one record and no tombstone is left. */
static bool
settled(const char *dump)
{
	for (const char *l = dump; *l;) {
		const char *end = strchr(l, '\n');
		size_t len = end ? (size_t)(end - l) : strlen(l);

		if (strncmp(l, "tomb ", 5) == 0)
			return false;
		if (strncmp(l, "item ", 5) == 0) {
			const char *open = NULL;
			for (const char *p = l; p < l + len; p++)
				if (*p == '[')
					open = p;
			if (!open || open[1] == 'D')
				return false;
			for (const char *p = open; p < l + len && *p != ']'; p++)
				if (*p == ',')
					return false;
		}
		if (!end)
			break;
		l = end + 1;
	}
	return true;
}

static void
child_run(const char *state_dir, const char *world_dir, const char *script,
    unsigned crash_at, bool after, bool loop)
{
	struct fixture f;
	struct tend_engine *eng;

	memset(&f, 0, sizeof f);
	if (tend_engine_open(&eng, state_dir, NULL))
		_exit(3);
	dict_world_init(&f.w);
	dict_world_attach_dir(&f.w, world_dir);
	dict_register(eng, &f.w);
	f.w.crash_at = crash_at;
	f.w.crash_after_write = after;
	f.eng = eng;
	do {
		fx_run_script(&f, script);
	} while (loop);
	_exit(0);
}

static void
kill_at_random_points_then_converge(void **state)
{
	const char *env = getenv("TEND_CRASH_ITERS");
	int iters = env ? atoi(env) : 200;
	char dir[256], st[300], wd[300];
	struct tend_buf script = TEND_BUF_INIT, expect = TEND_BUF_INIT;
	unsigned killed = 0, exited = 0;

	(void)state;
	snprintf(dir, sizeof dir, "%s/tend-crash-XXXXXX",
	    getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	assert_non_null(mkdtemp(dir));
	snprintf(st, sizeof st, "%s/state", dir);
	snprintf(wd, sizeof wd, "%s/world", dir);
	seed = 42;
	for (int it = 0; it < iters; it++) {
		gen(&script, &expect);
		bool external = rnd(3) == 0;
		unsigned crash_at = external ? 0 : 1 + rnd(14);
		bool after = rnd(2);
		unsigned delay_us = rnd(15000);
		pid_t pid = fork();
		int status;

		assert_true(pid >= 0);
		if (pid == 0)
			child_run(st, wd, script.ptr, crash_at, after, external);
		if (external) {
			usleep(delay_us);
			kill(pid, SIGKILL);
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		if (WIFSIGNALED(status))
			killed++;
		else {
			assert_int_equal(WEXITSTATUS(status), 0);
			exited++;
		}

		/* a clean rerun in this process must converge */
		struct fixture f;
		memset(&f, 0, sizeof f);
		snprintf(f.state, sizeof f.state, "%s", st);
		assert_int_equal(tend_engine_open(&f.eng, st, NULL), 0);
		dict_world_init(&f.w);
		dict_world_attach_dir(&f.w, wd);
		dict_register(f.eng, &f.w);
		if (fx_run_script(&f, script.ptr) != 0)
			fail_msg("iteration %d: rerun failed: %s\nscript: %s", it,
			    tend_error_last(), script.ptr);
		/* what is on disk, not what the process believes */
		dict_world_finish(&f.w);
		dict_world_init(&f.w);
		dict_world_attach_dir(&f.w, wd);
		char *got = sorted_world(&f.w), *want = sorted_expect(expect.ptr);
		if (strcmp(got, want) != 0)
			fail_msg("iteration %d: world\n  %s\nwant\n  %s\nscript: %s",
			    it, got, want, script.ptr);
		free(got);
		free(want);
		const char *d = fx_dump(&f);
		if (!settled(d))
			fail_msg("iteration %d: unsettled store:\n%s", it, d);
		if (fx_count(&f, "item ") != fx_count(&f, "owner "))
			fail_msg("iteration %d: items and owners differ:\n%s", it,
			    d);
		/* converged: one more pass changes nothing but the
		 * container's per-pass handler refresh */
		assert_int_equal(fx_run_script(&f, script.ptr), 0);
		bool has_d = strstr(script.ptr, "#D=") != NULL;
		if (f.w.nacts != (has_d ? 1u : 0u))
			fail_msg("iteration %d: %zu actions on a converged pass",
			    it, f.w.nacts);
		tend_engine_close(f.eng);
		dict_world_finish(&f.w);
		free(f.dump);
		free(f.world);
	}
	print_message("crash iterations: %d, killed %u, exited %u\n", iters,
	    killed, exited);
	assert_true(killed > (unsigned)iters / 2);
	tend_buf_release(&script);
	tend_buf_release(&expect);
	char cmd[400];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(kill_at_random_points_then_converge),
	};

	return cmocka_run_group_tests_name("crash", tests, NULL, NULL);
}
