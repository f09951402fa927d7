/*
 * test_engine.c - the black-box scenarios of cocoindex-semantics.md §6,
 * run against the real engine and a real LMDB store, with the recording
 * dict target. Each test asserts the actions applied (the world), the
 * reconcile inputs seen (prev, prev_may_be_missing) and what the store
 * holds afterwards. Scenario numbers refer to §6.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "check.h"
#include "engine_int.h"
#include "fakes/scenario.h"
#include "inspect.h"
#include "store.h"
#include "tend/fingerprint.h"
#include "tend/key.h"
#include "tend/buf.h"
#include "tend/status.h"

#define F ((struct fixture *)*state)

static int
setup(void **state)
{
	*state = fixture_new();
	return 0;
}

/* The same scenarios against containers the way the real connectors
 * make them: open_child, and a delete that removes only the container */
static int
setup_open_child(void **state)
{
	struct fixture *f = fixture_new();

	f->w.open_child = true;
	fixture_restart(f);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	fixture_free(*state);
	return 0;
}

static void
assert_rec_(struct fixture *f, const char *path, const char *prev,
    bool missing, bool acted, const char *file, int line)
{
	const struct dict_log *r = dict_rec(&f->w, path);

	if (!r)
		fail_msg("%s:%d: no reconcile of %s", file, line, path);
	if (strcmp(r->prev, prev) != 0 || r->missing != missing ||
	    r->acted != acted)
		fail_msg("%s:%d: R(%s) = ([%s], %s, %s), want ([%s], %s, %s)",
		    file, line, path, r->prev, r->missing ? "T" : "F",
		    r->acted ? "act" : "none", prev, missing ? "T" : "F",
		    acted ? "act" : "none");
}
#define ASSERT_REC(f, path, prev, missing, acted) \
	assert_rec_(f, path, prev, missing, acted, __FILE__, __LINE__)

static void
assert_has_(struct fixture *f, const char *line, bool want, const char *file,
    int l)
{
	if (fx_has(f, line) != want)
		fail_msg("%s:%d: store %s \"%s\":\n%s", file, l,
		    want ? "lacks" : "has", line, fx_dump(f));
}
#define ASSERT_HAS(f, line) assert_has_(f, line, true, __FILE__, __LINE__)
#define ASSERT_LACKS(f, line) assert_has_(f, line, false, __FILE__, __LINE__)

#define ASSERT_WORLD(f, want) assert_string_equal(fx_world(f), want)
#define ASSERT_OK(x)                                                     \
	do {                                                             \
		int rc_ = (x);                                           \
		if (rc_)                                                 \
			fail_msg("%s = %d: %s", #x, rc_, tend_error_last()); \
	} while (0)

/* ---- flat, single component (1-12) ---- */

static void
s01_first_insert(void **state)
{
	ASSERT_OK(fx_run(F, "a=1"));
	ASSERT_WORLD(F, "a=1");
	ASSERT_REC(F, "a", "", true, true);
	ASSERT_HAS(F, "item /app /@dict/a [1]");
	ASSERT_HAS(F, "owner /@dict/a -> /app");
	ASSERT_OK(fx_run(F, "a=1 b=2"));
	ASSERT_WORLD(F, "a=1 b=2");
	ASSERT_REC(F, "b", "", true, true);
	ASSERT_REC(F, "a", "1", false, false);
	assert_int_equal(F->w.nacts, 1);
	assert_int_equal(F->stats.added, 0);
	assert_int_equal(F->stats.reprocessed, 1);
}

static void
s02_unchanged_is_a_noop(void **state)
{
	ASSERT_OK(fx_run(F, "a=1 b=2"));
	assert_int_equal(F->stats.added, 1);
	ASSERT_OK(fx_run(F, "a=1 b=2"));
	assert_int_equal(F->w.sink_calls, 0);
	assert_int_equal(F->stats.applied, 0);
	assert_int_equal(F->stats.reprocessed, 1);
	ASSERT_HAS(F, "item /app /@dict/a [1]");
	ASSERT_HAS(F, "item /app /@dict/b [2]");
}

static void
s03_content_change_updates(void **state)
{
	ASSERT_OK(fx_run(F, "a=1 b=2"));
	ASSERT_OK(fx_run(F, "a=3 b=2"));
	ASSERT_WORLD(F, "a=3 b=2");
	ASSERT_REC(F, "a", "1", false, true);
	ASSERT_REC(F, "b", "2", false, false);
	assert_int_equal(F->w.nacts, 1);
	ASSERT_HAS(F, "item /app /@dict/a [3]");
}

static void
s04_removed_key_is_deleted(void **state)
{
	ASSERT_OK(fx_run(F, "a=1 b=2"));
	ASSERT_OK(fx_run(F, "b=2"));
	ASSERT_WORLD(F, "b=2");
	ASSERT_REC(F, "a", "1", false, true);
	assert_null(dict_act(&F->w, "a")->value);
	ASSERT_LACKS(F, "owner /@dict/a -> /app");
	assert_int_equal(fx_count(F, "item "), 1);
}

static void
s05_reinsert_after_delete(void **state)
{
	ASSERT_OK(fx_run(F, "a=1"));
	ASSERT_OK(fx_run(F, ""));
	ASSERT_OK(fx_run(F, "a=1"));
	ASSERT_REC(F, "a", "", true, true);
	ASSERT_WORLD(F, "a=1");
}

static void
s06_interrupted_insert(void **state)
{
	F->w.fail_at = 1;
	assert_int_not_equal(fx_run(F, "a=1"), 0);
	ASSERT_WORLD(F, "");
	ASSERT_HAS(F, "item /app /@dict/a [D,1]");
	F->w.fail_at = 0;
	ASSERT_OK(fx_run(F, "a=2"));
	ASSERT_REC(F, "a", "1", true, true);
	ASSERT_OK(fx_run(F, "a=3"));
	ASSERT_REC(F, "a", "2", false, true);
	ASSERT_WORLD(F, "a=3");
}

static void
s07_partial_apply_then_undeclare(void **state)
{
	F->w.fail_at = 1;
	F->w.fail_after_write = true;
	assert_int_not_equal(fx_run(F, "a=1"), 0);
	ASSERT_WORLD(F, "a=1"); /* written, then the sink failed */
	F->w.fail_at = 0;
	ASSERT_OK(fx_run(F, ""));
	ASSERT_REC(F, "a", "1", true, true);
	ASSERT_WORLD(F, "");
	assert_int_equal(fx_count(F, "item "), 0);
	assert_int_equal(fx_count(F, "owner "), 0);
}

static void
s08_interrupted_update(void **state)
{
	ASSERT_OK(fx_run(F, "a=1"));
	F->w.fail_at = 1;
	assert_int_not_equal(fx_run(F, "a=2"), 0);
	ASSERT_WORLD(F, "a=1");
	ASSERT_HAS(F, "item /app /@dict/a [1,2]");
	F->w.fail_at = 0;
	ASSERT_OK(fx_run(F, "a=2"));
	ASSERT_REC(F, "a", "1,2", false, true);
	ASSERT_HAS(F, "item /app /@dict/a [2]");
	ASSERT_WORLD(F, "a=2");
}

static void
s09_failed_updates_accumulate(void **state)
{
	ASSERT_OK(fx_run(F, "a=1"));
	F->w.fail_key = strdup("a");
	assert_int_not_equal(fx_run(F, "a=2"), 0);
	assert_int_not_equal(fx_run(F, "a=3"), 0);
	ASSERT_HAS(F, "item /app /@dict/a [1,2,3]");
	free(F->w.fail_key);
	F->w.fail_key = NULL;
	ASSERT_OK(fx_run(F, "a=3"));
	ASSERT_REC(F, "a", "1,2,3", false, true);
	ASSERT_HAS(F, "item /app /@dict/a [3]");
}

static void
s10_interrupted_delete(void **state)
{
	ASSERT_OK(fx_run(F, "a=3"));
	F->w.fail_at = 1;
	assert_int_not_equal(fx_run(F, ""), 0);
	ASSERT_WORLD(F, "a=3");
	ASSERT_HAS(F, "item /app /@dict/a [3,D]");
	F->w.fail_at = 0;
	ASSERT_OK(fx_run(F, ""));
	ASSERT_REC(F, "a", "3", true, true);
	ASSERT_WORLD(F, "");
	assert_int_equal(fx_count(F, "item "), 0);
	assert_int_equal(fx_count(F, "owner "), 0);
}

static void
s10b_interrupted_delete_then_redeclared(void **state)
{
	ASSERT_OK(fx_run(F, "a=3"));
	F->w.fail_at = 1;
	assert_int_not_equal(fx_run(F, ""), 0);
	F->w.fail_at = 0;
	ASSERT_OK(fx_run(F, "a=3"));
	ASSERT_REC(F, "a", "3", true, true); /* (§2.2 table) */
	ASSERT_WORLD(F, "a=3");
	ASSERT_HAS(F, "item /app /@dict/a [3]");
}

static void
s11_restart_after_failed_sink(void **state)
{
	ASSERT_OK(fx_run(F, "a=1"));
	F->w.fail_at = 1;
	assert_int_not_equal(fx_run(F, "a=2"), 0);
	F->w.fail_at = 0;
	fixture_restart(F); /* a new process: a new token */
	ASSERT_OK(fx_run(F, "a=2"));
	ASSERT_REC(F, "a", "1,2", false, true);
	ASSERT_WORLD(F, "a=2");
}

static void
s12_preview_applies_and_persists_nothing(void **state)
{
	ASSERT_OK(fx_run_opts(F, "a=1 b=2", false, true));
	assert_int_equal(F->stats.planned, 2);
	assert_int_equal(F->w.sink_calls, 0);
	ASSERT_WORLD(F, "");
	assert_int_equal(fx_count(F, "item "), 0);
	assert_int_equal(fx_count(F, "comp "), 0);
	ASSERT_OK(fx_run(F, "a=1 b=2"));
	ASSERT_REC(F, "a", "", true, true);
	ASSERT_WORLD(F, "a=1 b=2");
}

/* ---- containers (13-25) ---- */

#define D1 "#D1=n:v1"

static void
s13_container_and_children(void **state)
{
	ASSERT_OK(fx_run(F, D1 " D1/a=1 D1/b=2"));
	ASSERT_WORLD(F, "D1=v1 D1/a=1 D1/b=2");
	ASSERT_REC(F, "D1/a", "", true, true);
	ASSERT_HAS(F, "owner /@dicts/D1 -> "
		      "/app/@tend/mount_target/(\"@dicts\", \"D1\")");
	ASSERT_HAS(F, "owner /@dicts/D1/a -> /app");
	ASSERT_HAS(F, "owner /@dicts/D1/b -> /app");
	assert_true(dict_act(&F->w, "D1") != NULL);
}

static void
s14_container_unchanged(void **state)
{
	ASSERT_OK(fx_run(F, D1 " D1/a=1 D1/b=2"));
	ASSERT_OK(fx_run(F, D1 " D1/a=1 D1/b=2"));
	/* the container's sink runs every pass (to hand back its handler),
	 * its children get no action */
	assert_int_equal(dict_nacts(&F->w, "D1"), 1);
	assert_int_equal(F->w.nacts, 1);
	ASSERT_REC(F, "D1/a", "1", false, false);
}

static void
s15_child_removed_in_existing_container(void **state)
{
	ASSERT_OK(fx_run(F, D1 " D1/a=1 D1/b=2"));
	ASSERT_OK(fx_run(F, D1 " D1/b=2"));
	ASSERT_REC(F, "D1/a", "1", false, true);
	ASSERT_WORLD(F, "D1=v1 D1/b=2");
	ASSERT_LACKS(F, "owner /@dicts/D1/a -> /app");
}

static void
s16_container_removed_with_children(void **state)
{
	ASSERT_OK(fx_run(F, "U(dict) { U(D1) { " D1 " } D1/a=1 D1/b=2 }"));
	ASSERT_WORLD(F, "D1=v1 D1/a=1 D1/b=2");
	ASSERT_OK(fx_run(F, ""));
	ASSERT_WORLD(F, "");
	/* only the container is deleted: no per-child delete actions; with
	 * open_child each child is deleted, then the container, last */
	assert_int_equal(F->w.nacts, F->w.open_child ? 3 : 1);
	assert_null(dict_act(&F->w, "D1")->value);
	assert_string_equal(F->w.acts[F->w.nacts - 1].path, "D1");
	assert_int_equal(fx_count(F, "owner "), 0);
	assert_int_equal(fx_count(F, "item "), 0);
	assert_int_equal(fx_count(F, "comp "), 1); /* just /app */
	assert_int_equal(fx_count(F, "cex "), 0);
	assert_int_equal(fx_count(F, "tomb "), 0);
}

static void
print_acts(struct fixture *f)
{
	for (size_t i = 0; i < f->w.nacts; i++)
		print_message("  act %s = %s (prev [%s] %s)\n", f->w.acts[i].path,
		    f->w.acts[i].value ? f->w.acts[i].value : "<delete>",
		    f->w.acts[i].prev, f->w.acts[i].missing ? "T" : "F");
}

#define ASSERT_NACTS(f, n)                                               \
	do {                                                             \
		if ((f)->w.nacts != (n)) {                               \
			print_acts(f);                                   \
			fail_msg("%zu actions, want %d", (f)->w.nacts, n); \
		}                                                        \
	} while (0)

static void
s17_container_removed_children_elsewhere(void **state)
{
	ASSERT_OK(fx_run(F, "U(setup) { #D1=n:v1 #D2=n:v1 } "
			    "C(D1) { D1/a=1 } C(D2) { D2/b=2 }"));
	ASSERT_WORLD(F, "D1=v1 D1/a=1 D2=v1 D2/b=2");
	ASSERT_OK(fx_run(F, "U(setup) { #D2=n:v1 } C(D2) { D2/b=2 }"));
	ASSERT_WORLD(F, "D2=v1 D2/b=2");
	/* D2's sink runs every pass; of D1 only the container is deleted
	 * (with open_child, its child first) */
	assert_int_equal(dict_nacts(&F->w, "D1"), 1);
	assert_int_equal(dict_nacts(&F->w, "D1/a"), F->w.open_child ? 1 : 0);
	ASSERT_LACKS(F, "owner /@dicts/D1/a -> /app/D1");
	assert_int_equal(fx_count(F, "item /app/D1 "), 0);
}

static void
s18_container_recreated_after_removal(void **state)
{
	ASSERT_OK(fx_run(F, D1 " D1/a=1 D1/b=2"));
	ASSERT_OK(fx_run(F, ""));
	ASSERT_OK(fx_run(F, D1 " D1/a=3 D1/c=4"));
	ASSERT_REC(F, "D1/a", "", true, true);
	ASSERT_REC(F, "D1/c", "", true, true);
	ASSERT_WORLD(F, "D1=v1 D1/a=3 D1/c=4");
}

static void
s19_lossy_change(void **state)
{
	ASSERT_OK(fx_run(F, "#D1=l:v1 D1/a=1 D1/b=2"));
	ASSERT_OK(fx_run(F, "#D1=l:v2 D1/a=1 D1/b=2"));
	assert_int_equal(dict_rec(&F->w, "D1")->inval, 1);
	ASSERT_REC(F, "D1/a", "1", true, true);
	ASSERT_REC(F, "D1/b", "2", true, true);
	ASSERT_OK(fx_run(F, "#D1=l:v2 D1/a=1 D1/b=2"));
	ASSERT_REC(F, "D1/a", "1", false, false);
	assert_int_equal(F->w.nacts, 1); /* the container only */
}

static void
s20_destructive_change(void **state)
{
	ASSERT_OK(fx_run(F, "#D1=d:v1 D1/a=1 D1/b=2"));
	ASSERT_OK(fx_run(F, "#D1=d:v2 D1/a=1 D1/b=2"));
	assert_int_equal(dict_rec(&F->w, "D1")->inval, 2);
	ASSERT_REC(F, "D1/a", "", true, true);
	ASSERT_REC(F, "D1/b", "", true, true);
	ASSERT_WORLD(F, "D1=v2 D1/a=1 D1/b=2");
	assert_int_equal(fx_count(F, "item /app /@dicts/D1/"), 2);
	ASSERT_OK(fx_run(F, "#D1=d:v2 D1/a=1 D1/b=2"));
	assert_int_equal(F->w.nacts, 1);
}

static void
s21_destructive_plus_data_change(void **state)
{
	ASSERT_OK(fx_run(F, "#D1=d:v1 D1/a=1 D1/b=2"));
	ASSERT_OK(fx_run(F, "#D1=d:v2 D1/a=1 D1/c=3"));
	assert_int_equal(dict_nacts(&F->w, "D1/b"), 0); /* no delete of b */
	ASSERT_WORLD(F, "D1=v2 D1/a=1 D1/c=3");
	ASSERT_LACKS(F, "owner /@dicts/D1/b -> /app");
	assert_int_equal(fx_count(F, "item /app /@dicts/D1/"), 2);
}

static void
s22_failed_container_creation(void **state)
{
	F->w.fail_at = 1;
	assert_int_not_equal(fx_run(F, D1 " D1/a=1"), 0);
	ASSERT_WORLD(F, "");
	F->w.fail_at = 0;
	ASSERT_OK(fx_run(F, D1 " D1/a=1"));
	ASSERT_REC(F, "D1", "v1", true, true);
	ASSERT_REC(F, "D1/a", "", true, true);
	ASSERT_WORLD(F, "D1=v1 D1/a=1");
}

static void
s23_memoized_child_declarer_and_invalidation(void **state)
{
	ASSERT_OK(fx_run(F, "#D1=l:v1 M(rows,x) { D1/a=1 }"));
	ASSERT_OK(fx_run(F, "#D1=l:v1 M(rows,x) { D1/a=1 }"));
	assert_int_equal(F->stats.unchanged, 1);
	assert_null(dict_rec(&F->w, "D1/a"));
	ASSERT_OK(fx_run(F, "#D1=l:v2 M(rows,x) { D1/a=1 }"));
	ASSERT_REC(F, "D1/a", "1", true, true); /* memo missed: re-run */
	ASSERT_OK(fx_run(F, "#D1=l:v2 M(rows,x) { D1/a=1 }"));
	assert_int_equal(F->stats.unchanged, 1);
	ASSERT_OK(fx_run(F, "#D1=d:v3 M(rows,x) { D1/a=1 }"));
	ASSERT_REC(F, "D1/a", "", true, true);
}

/* 24: the provider is captured by a child, not passed: the generation
 * the child declared into is a memo dependency of the memoised parent,
 * through a memo hit of a mid -> leaf chain too */
static void
s24_captured_provider_invalidates_memo(void **state)
{
	ASSERT_OK(fx_run(F, "#D1=l:v1 M(P,x) { C(c) { D1/a=1 } }"));
	ASSERT_OK(fx_run(F, "#D1=l:v1 M(P,x) { C(c) { D1/a=1 } }"));
	assert_int_equal(F->stats.unchanged, 1);
	ASSERT_OK(fx_run(F, "#D1=l:v2 M(P,x) { C(c) { D1/a=1 } }"));
	ASSERT_REC(F, "D1/a", "1", true, true);
	ASSERT_OK(fx_run(F, "#D1=l:v2 M(P,x) { C(c) { D1/a=1 } }"));
	assert_int_equal(F->stats.unchanged, 1);
	assert_null(dict_rec(&F->w, "D1/a"));
}

static void
s24b_mid_leaf_chain(void **state)
{
	ASSERT_OK(fx_run(F, "#D1=l:v1 M(mid,x) { M(leaf,y) { D1/a=1 } }"));
	/* mid re-runs, leaf is a memo hit */
	ASSERT_OK(fx_run(F, "#D1=l:v1 M(mid,x2) { M(leaf,y) { D1/a=1 } }"));
	assert_int_equal(F->stats.unchanged, 1);
	assert_null(dict_rec(&F->w, "D1/a"));
	/* a lossy change re-runs both */
	ASSERT_OK(fx_run(F, "#D1=l:v2 M(mid,x2) { M(leaf,y) { D1/a=1 } }"));
	ASSERT_REC(F, "D1/a", "1", true, true);
	assert_int_equal(F->stats.unchanged, 0);
}

static void
s25_directory_to_component_transition(void **state)
{
	ASSERT_OK(fx_run(F, "U(t) { " D1 " }"));
	ASSERT_OK(fx_run(F, "U(t) { C(D1) { x=1 } }"));
	ASSERT_WORLD(F, "x=1");
	assert_null(dict_act(&F->w, "D1")->value);
	ASSERT_LACKS(F, "owner /@dicts/D1 -> "
			"/app/t/@tend/mount_target/(\"@dicts\", \"D1\")");
	ASSERT_HAS(F, "comp /app/t/D1");
}

/* ---- component tree and GC (26-31) ---- */

static void
s26_per_item_components(void **state)
{
	ASSERT_OK(fx_run(F, "C(D1) { U(setup) { #D1=n:v1 } D1/r=1 } "
			    "C(D2) { U(setup) { #D2=n:v1 } D2/r=2 }"));
	ASSERT_WORLD(F, "D1=v1 D1/r=1 D2=v1 D2/r=2");
	ASSERT_OK(fx_run(F, "C(D2) { U(setup) { #D2=n:v1 } D2/r=2 }"));
	ASSERT_WORLD(F, "D2=v1 D2/r=2");
	assert_int_equal(dict_nacts(&F->w, "D1"), 1);
	assert_int_equal(dict_nacts(&F->w, "D1/r"), F->w.open_child ? 1 : 0);
	assert_int_equal(F->stats.deleted, 3); /* D1, setup, mount_target */
	ASSERT_OK(fx_run(F, "C(D1) { U(setup) { #D1=n:v1 } D1/r=1 } "
			    "C(D2) { U(setup) { #D2=n:v1 } D2/r=2 }"));
	ASSERT_REC(F, "D1/r", "", true, true);
	assert_int_equal(F->stats.added, 3);
}

static void
s27_source_deleted_deletes_its_outputs(void **state)
{
	ASSERT_OK(fx_run(F, D1 " C(x) { D1/x1=1 D1/x2=2 } C(y) { D1/y=3 }"));
	ASSERT_OK(fx_run(F, D1 " C(y) { D1/y=3 }"));
	ASSERT_WORLD(F, "D1=v1 D1/y=3");
	ASSERT_REC(F, "D1/x1", "1", false, true);
	assert_int_equal(F->stats.deleted, 1);
	ASSERT_LACKS(F, "comp /app/x");
}

static void
s28_partially_built_component(void **state)
{
	assert_int_not_equal(fx_run(F, "C(p) { U(setup) { #D1=n:v1 } D1/a=1 ! }"),
	    0);
	ASSERT_WORLD(F, "D1=v1"); /* the container applied; p's own not */
	ASSERT_OK(fx_run(F, ""));
	ASSERT_WORLD(F, "");
	if (fx_count(F, "comp ") != 1)
		print_message("%s", fx_dump(F));
	assert_int_equal(fx_count(F, "comp "), 1);
}

static void
s29_gc_failure_then_retry(void **state)
{
	ASSERT_OK(fx_run(F, "U(dict) { U(D1) { " D1 " } D1/a=1 }"));
	F->w.fail_key = strdup("D1");
	/* CocoIndex logs GC failures and succeeds; tend reports them (exit
	 * 1: an action failed) and keeps the tombstone for the retry */
	assert_int_not_equal(fx_run(F, ""), 0);
	assert_int_equal(F->stats.failed, 1);
	/* with open_child the child went first, on its own */
	ASSERT_WORLD(F, F->w.open_child ? "D1=v1" : "D1=v1 D1/a=1");
	ASSERT_HAS(F, "tomb /app/dict");
	free(F->w.fail_key);
	F->w.fail_key = NULL;
	ASSERT_OK(fx_run(F, ""));
	ASSERT_WORLD(F, "");
	assert_int_equal(fx_count(F, "owner "), 0);
	assert_int_equal(fx_count(F, "tomb "), 0);
}

static void
s30_gc_failure_then_redeclare(void **state)
{
	ASSERT_OK(fx_run(F, "U(dict) { U(D1) { " D1 " } D1/a=1 }"));
	F->w.fail_key = strdup("D1");
	assert_int_not_equal(fx_run(F, ""), 0);
	free(F->w.fail_key);
	F->w.fail_key = NULL;
	ASSERT_OK(fx_run(F, "U(dict) { U(D1) { " D1 " } D1/b=2 }"));
	ASSERT_WORLD(F, "D1=v1 D1/b=2");
	assert_int_equal(fx_count(F, "tomb "), 0);
}

static void
s31_drop(void **state)
{
	ASSERT_OK(fx_run(F, "z=0 U(s) { " D1 " } D1/a=1 C(k) { D1/b=2 }"));
	ASSERT_OK(fx_drop(F));
	ASSERT_WORLD(F, "");
	assert_int_equal(fx_count(F, ""), 0);
	fixture_restart(F);
	ASSERT_OK(fx_drop(F)); /* never run / already dropped: no-op */
	ASSERT_OK(fx_run(F, "z=0"));
	ASSERT_REC(F, "z", "", true, true);
}

static void
s31b_drop_in_fresh_process(void **state)
{
	ASSERT_OK(fx_run(F, "U(s) { " D1 " } C(k) { D1/b=2 } C(j) { D1/c=3 }"));
	fixture_restart(F); /* no provider of D1 is registered now */
	ASSERT_OK(fx_drop(F));
	ASSERT_WORLD(F, "");
	assert_int_equal(fx_count(F, ""), 0);
}

/* The connectors' way (fs, git): containers offer open_child, and a
 * container's delete removes only the container (rmdir). A drop spread
 * over several batches deletes every child, each before its container:
 * none is dropped untracked when the container went in an earlier batch,
 * and the container is not left behind by a delete run too early. */
static void
drop_over_batches_with_open_child(void **state)
{
	F->w.open_child = true;
	fixture_restart(F);
	ASSERT_OK(fx_run(F, D1 " C(c1) { D1/a=1 } C(c2) { D1/b=2 } "
			    "C(c3) { D1/c=3 } C(c4) { D1/d=4 } C(c5) { D1/e=5 } "
			    "C(c6) { D1/f=6 } C(c7) { D1/g=7 }"));
	ASSERT_WORLD(F, "D1=v1 D1/a=1 D1/b=2 D1/c=3 D1/d=4 D1/e=5 D1/f=6 "
			"D1/g=7");
	fixture_restart(F);
	tend_engine_set_batch(F->eng, 2);
	ASSERT_OK(fx_drop(F));
	ASSERT_WORLD(F, "");
	assert_int_equal(fx_count(F, ""), 0);
}

/* The same when the container is deleted with its users in one batch. */
static void
drop_in_one_batch_with_open_child(void **state)
{
	F->w.open_child = true;
	fixture_restart(F);
	ASSERT_OK(fx_run(F, D1 " C(c1) { D1/a=1 } C(c2) { D1/b=2 } "
			    "C(c3) { D1/c=3 }"));
	dict_clear_logs(&F->w);
	ASSERT_OK(fx_drop(F));
	ASSERT_WORLD(F, "");
	assert_int_equal(dict_nacts(&F->w, "D1"), 1); /* deleted once */
	assert_int_equal(F->stats.applied, 4);
	assert_int_equal(fx_count(F, ""), 0);
}

/* A drop goes round while rounds make progress; an action that failed
 * is not tried again in the same drop (the next drop retries it). */
static void
drop_tries_a_failing_delete_once(void **state)
{
	F->w.open_child = true;
	fixture_restart(F);
	ASSERT_OK(fx_run(F, D1 " C(c1) { D1/a=1 } C(c2) { D1/b=2 }"));
	F->w.fail_key = strdup("D1/a");
	F->w.fail_after_write = true;
	dict_clear_logs(&F->w);
	assert_int_not_equal(fx_drop(F), 0);
	assert_int_equal(dict_nacts(&F->w, "D1/a"), 1);
	assert_int_equal(F->stats.failed, 1);
	free(F->w.fail_key);
	F->w.fail_key = NULL;
	F->w.fail_after_write = false;
	ASSERT_OK(fx_drop(F));
	ASSERT_WORLD(F, "");
	assert_int_equal(fx_count(F, ""), 0);
}

/* ---- ownership transfer (32-40) ---- */

static void
s32_basic_transfer(void **state)
{
	ASSERT_OK(fx_run(F, "C(C1) { x=1 }"));
	ASSERT_OK(fx_run(F, "C(C2) { x=2 }"));
	ASSERT_WORLD(F, "x=2");
	ASSERT_HAS(F, "owner /@dict/x -> /app/C2");
}

static void
s33_strict_preempt(void **state)
{
	ASSERT_OK(fx_run(F, "C(C1) { x=1 }"));
	ASSERT_OK(fx_run(F, "C(C2) { x=1 }"));
	/* C2 submits before C1's GC: taken over, unchanged -> no action */
	assert_int_equal(F->w.nacts, 0);
	ASSERT_REC(F, "x", "1", false, false);
	ASSERT_OK(fx_run(F, "C(C3) { x=2 }"));
	ASSERT_REC(F, "x", "1", false, true); /* an update, not delete+insert */
	assert_int_equal(F->w.nacts, 1);
	ASSERT_HAS(F, "owner /@dict/x -> /app/C3");
	ASSERT_WORLD(F, "x=2");
}

static void
s34_transfer_then_undeclare(void **state)
{
	ASSERT_OK(fx_run(F, "C(C1) { x=1 }"));
	ASSERT_OK(fx_run(F, "C(C2) { x=2 }"));
	ASSERT_OK(fx_run(F, "C(C2) { }"));
	assert_int_equal(dict_nacts(&F->w, "x"), 1);
	ASSERT_WORLD(F, "");
	assert_int_equal(fx_count(F, "owner "), 0);
}

static void
s35_concurrent_order_independence(void **state)
{
	ASSERT_OK(fx_run(F, "C(C1) { x=1 }"));
	ASSERT_OK(fx_run(F, "C(C1) { } C(C2) { x=2 }"));
	ASSERT_WORLD(F, "x=2");
	ASSERT_HAS(F, "owner /@dict/x -> /app/C2");
	/* and the other order */
	ASSERT_OK(fx_run(F, "C(C3) { x=3 } C(C2) { }"));
	ASSERT_WORLD(F, "x=3");
	ASSERT_HAS(F, "owner /@dict/x -> /app/C3");
}

static void
s36_multiple_keys(void **state)
{
	ASSERT_OK(fx_run(F, "C(C1) { a=1 b=2 }"));
	ASSERT_OK(fx_run(F, "C(C1) { b=2 } C(C2) { a=3 }"));
	ASSERT_WORLD(F, "a=3 b=2");
	ASSERT_HAS(F, "owner /@dict/a -> /app/C2");
	ASSERT_HAS(F, "owner /@dict/b -> /app/C1");
}

static void
s37_chain(void **state)
{
	ASSERT_OK(fx_run(F, "C(C1) { x=1 }"));
	ASSERT_OK(fx_run(F, "C(C2) { x=2 }"));
	ASSERT_OK(fx_run(F, "C(C3) { x=3 }"));
	ASSERT_WORLD(F, "x=3");
	ASSERT_HAS(F, "owner /@dict/x -> /app/C3");
	assert_int_equal(fx_count(F, "item "), 1);
}

static void
s39_transfer_with_failed_sink(void **state)
{
	ASSERT_OK(fx_run(F, "C(C1) { x=1 }"));
	F->w.fail_at = 1;
	assert_int_not_equal(fx_run(F, "C(C2) { x=2 }"), 0);
	ASSERT_WORLD(F, "x=1");
	ASSERT_HAS(F, "owner /@dict/x -> /app/C2");
	F->w.fail_at = 0;
	ASSERT_OK(fx_run(F, "C(C2) { x=2 }"));
	ASSERT_REC(F, "x", "1,2", false, true);
	ASSERT_WORLD(F, "x=2");
}

static void
s39b_transfer_failed_then_unmounted(void **state)
{
	ASSERT_OK(fx_run(F, "C(C1) { x=1 }"));
	F->w.fail_at = 1;
	assert_int_not_equal(fx_run(F, "C(C2) { x=2 }"), 0);
	F->w.fail_at = 0;
	ASSERT_OK(fx_run(F, ""));
	assert_int_equal(dict_nacts(&F->w, "x"), 1);
	ASSERT_REC(F, "x", "1,2", false, true);
	ASSERT_WORLD(F, "");
	assert_int_equal(fx_count(F, ""), 1); /* comp /app */
}

static void
s40_component_deleted_then_another_claims(void **state)
{
	ASSERT_OK(fx_run(F, "C(C1) { x=1 }"));
	ASSERT_OK(fx_run(F, ""));
	ASSERT_OK(fx_run(F, "C(C2) { x=2 }"));
	ASSERT_REC(F, "x", "", true, true);
	ASSERT_WORLD(F, "x=2");
}

/* ---- attachments (41-43) ---- */

static void
s41_attachment_lifecycle(void **state)
{
	ASSERT_OK(fx_run(F, D1 " D1@items/a=1 D1@items/b=2"));
	ASSERT_REC(F, "D1/@items/a", "", true, true);
	ASSERT_OK(fx_run(F, D1 " D1@items/b=2 D1@items/c=3"));
	ASSERT_REC(F, "D1/@items/a", "1", false, true);
	ASSERT_WORLD(F, "D1=v1 D1/@items/b=2 D1/@items/c=3");
	ASSERT_OK(fx_run(F, ""));
	ASSERT_WORLD(F, "");
	/* container delete only; with open_child its attachments first */
	ASSERT_NACTS(F, F->w.open_child ? 3 : 1);
	assert_string_equal(F->w.acts[F->w.nacts - 1].path, "D1");
	assert_int_equal(fx_count(F, "item "), 0);
}

static void
s41b_orphaned_attachment_is_deleted(void **state)
{
	ASSERT_OK(fx_run(F, D1 " D1@items/a=1 D1/x=1"));
	ASSERT_OK(fx_run(F, D1 " D1/x=1")); /* no attachment declared */
	ASSERT_REC(F, "D1/@items/a", "1", false, true);
	ASSERT_WORLD(F, "D1=v1 D1/x=1");
}

static void
s42_attachment_provider_is_idempotent(void **state)
{
	ASSERT_OK(fx_run(F, D1 " D1@items/a=1 D1@items/b=2"));
	ASSERT_WORLD(F, "D1=v1 D1/@items/a=1 D1/@items/b=2");
	assert_int_not_equal(fx_run(F, D1 " D1@nope/a=1"), 0);
	assert_non_null(strstr(tend_error_last(), "failed"));
	if (!strstr(F->comp_error, "does not support attachment type nope"))
		fail_msg("component error: %s", F->comp_error);
}

static void
s43_independent_attachment_types(void **state)
{
	ASSERT_OK(fx_run(F, "#D1=l:v1 D1@items/a=1 D1@tags/a=9"));
	ASSERT_OK(fx_run(F, "#D1=l:v1 D1@items/a=1"));
	ASSERT_WORLD(F, "D1=v1 D1/@items/a=1");
	ASSERT_OK(fx_run(F, "#D1=l:v2 D1@items/a=1"));
	ASSERT_REC(F, "D1/@items/a", "1", true, true); /* lossy propagates */
}

/* ---- memoization and full reprocess (44-48, 63-64) ---- */

static void
s44_component_memo_skip(void **state)
{
	ASSERT_OK(fx_run(F, "M(i,v1) { a=1 }"));
	ASSERT_OK(fx_run(F, "M(i,v1) { a=2 }")); /* same memo key: skipped */
	ASSERT_WORLD(F, "a=1");
	assert_int_equal(F->stats.unchanged, 1);
	ASSERT_OK(fx_run(F, "M(i,v2) { a=2 }"));
	ASSERT_REC(F, "a", "1", false, true);
	ASSERT_WORLD(F, "a=2");
}

static void
s45_memo_invalidated_by_failed_start(void **state)
{
	ASSERT_OK(fx_run(F, "M(i,v1) { a=1 }"));
	assert_int_not_equal(fx_run(F, "M(i,v2) { a=2 ! }"), 0);
	ASSERT_LACKS(F, "memo /app/i");
	ASSERT_OK(fx_run(F, "M(i,v1) { a=1 }"));
	assert_int_equal(F->stats.unchanged, 0); /* it ran again */
	ASSERT_REC(F, "a", "1", false, false);
}

static void
s46_memo_hit_keeps_states_and_delete_works(void **state)
{
	ASSERT_OK(fx_run(F, "M(i,v1) { a=1 } M(j,v1) { b=1 }"));
	ASSERT_OK(fx_run(F, "M(i,v1) { a=1 }"));
	ASSERT_WORLD(F, "a=1");
	assert_int_equal(F->stats.deleted, 1);
	assert_int_equal(F->stats.unchanged, 1);
}

/* R18: a deleted component whose delete was written but reported failed
 * (or killed before its settle) keeps no memo; the same input brought
 * back must run its body and re-create the state. */
static void
memo_gone_before_a_failed_delete(void **state)
{
	ASSERT_OK(fx_run(F, "M(i,v1) { a=1 } b=1"));
	F->w.fail_key = strdup("a");
	F->w.fail_after_write = true;
	assert_int_not_equal(fx_run(F, "b=1"), 0);
	free(F->w.fail_key);
	F->w.fail_key = NULL;
	F->w.fail_after_write = false;
	ASSERT_WORLD(F, "b=1"); /* the delete was written */
	ASSERT_LACKS(F, "memo /app/i");
	ASSERT_OK(fx_run(F, "M(i,v1) { a=1 } b=1"));
	assert_int_equal(F->stats.unchanged, 0);
	ASSERT_WORLD(F, "a=1 b=1");
	ASSERT_OK(fx_run(F, "M(i,v1) { a=1 } b=1"));
	assert_int_equal(F->stats.unchanged, 1); /* memoised again */
}

/* R4, R18: a memoised parent whose child's sink failed is not memoised:
 * the same input runs again and the child's state is applied. */
static void
memo_withheld_when_a_child_sink_fails(void **state)
{
	ASSERT_OK(fx_run(F, "M(P,x) { C(c) { a=1 } }"));
	F->w.fail_key = strdup("a");
	assert_int_not_equal(fx_run(F, "M(P,y) { C(c) { a=2 } }"), 0);
	free(F->w.fail_key);
	F->w.fail_key = NULL;
	ASSERT_WORLD(F, "a=1");
	ASSERT_LACKS(F, "memo /app/P");
	ASSERT_OK(fx_run(F, "M(P,y) { C(c) { a=2 } }"));
	assert_int_equal(F->stats.unchanged, 0);
	ASSERT_WORLD(F, "a=2");
}

/* A container sink that returns no child handler failed the action
 * before the commit: the records stay pending, no memo is written, and
 * the next pass (with a working connector) applies it again. */
static void
container_without_child_handler_fails_before_commit(void **state)
{
	F->w.no_child = true;
	assert_int_not_equal(fx_run(F, "M(P,x) { %D1=n:v1 }"), 0);
	F->w.no_child = false;
	ASSERT_LACKS(F, "memo /app/P");
	ASSERT_HAS(F, "item /app/P /@dicts/D1 [D,v1] container");
	ASSERT_OK(fx_run(F, "M(P,x) { %D1=n:v1 }"));
	assert_int_equal(F->stats.unchanged, 0);
	ASSERT_HAS(F, "item /app/P /@dicts/D1 [v1] container");
	ASSERT_OK(fx_run(F, "M(P,x) { %D1=n:v1 }"));
	assert_int_equal(F->stats.unchanged, 1);
}

/* A failing delete is tried once per pass, whichever way it is found
 * (the component's own commit, the GC of its tombstone, the retries),
 * and again on the next pass. */
static void
failing_delete_tried_once_per_pass(void **state)
{
	ASSERT_OK(fx_run(F, "r=0 C(C1) { a=1 } C(C2) { U(s) { " "#D1=n:v1" " } "
			    "D1/b=2 }"));
	F->w.fail_key = strdup("a");
	F->w.fail_after_write = true;
	dict_clear_logs(&F->w);
	assert_int_not_equal(fx_run(F, "r=0"), 0);
	assert_int_equal(dict_nacts(&F->w, "a"), 1);
	assert_int_equal(dict_nacts(&F->w, "D1"), 1);
	dict_clear_logs(&F->w);
	assert_int_not_equal(fx_run(F, "r=0"), 0);
	assert_int_equal(dict_nacts(&F->w, "a"), 1);
	free(F->w.fail_key);
	F->w.fail_key = NULL;
	F->w.fail_after_write = false;
	ASSERT_OK(fx_run(F, "r=0"));
	ASSERT_WORLD(F, "r=0");
	assert_int_equal(fx_count(F, "tomb "), 0);
}

static void
failing_child_delete_tried_once_per_pass_open_child(void **state)
{
	F->w.open_child = true;
	fixture_restart(F);
	ASSERT_OK(fx_run(F, D1 " C(C1) { D1/a=1 } C(C2) { D1/b=2 }"));
	F->w.fail_key = strdup("D1/a");
	F->w.fail_after_write = true;
	dict_clear_logs(&F->w);
	assert_int_not_equal(fx_run(F, ""), 0);
	assert_int_equal(dict_nacts(&F->w, "D1/a"), 1);
	assert_int_equal(dict_nacts(&F->w, "D1/b"), 1);
	free(F->w.fail_key);
	F->w.fail_key = NULL;
	F->w.fail_after_write = false;
	ASSERT_OK(fx_run(F, ""));
	ASSERT_WORLD(F, "");
	assert_int_equal(fx_count(F, ""), 1); /* comp /app */
}

/* A child's delete fails (nothing written) while its container goes:
 * the container must wait for it, not leave it behind untracked. */
static void
container_waits_for_a_failed_child_delete(void **state)
{
	F->w.open_child = true;
	fixture_restart(F);
	ASSERT_OK(fx_run(F, D1 " C(C1) { D1/a=1 } C(C2) { D1/b=2 }"));
	F->w.fail_key = strdup("D1/a");
	assert_int_not_equal(fx_run(F, ""), 0);
	ASSERT_WORLD(F, "D1=v1 D1/a=1");
	free(F->w.fail_key);
	F->w.fail_key = NULL;
	ASSERT_OK(fx_run(F, ""));
	ASSERT_WORLD(F, "");
	assert_int_equal(fx_count(F, ""), 1); /* comp /app */
}

/* A component kept for the pass's retries (an undeclared item waits for
 * its container's fate) whose action failed: the retry plans again and
 * must not leak the failed plan's error (ASan's leak check), and the
 * failure is still reported. */
static void
kept_component_with_a_failed_action(void **state)
{
	ASSERT_OK(fx_run(F, "U(s) { " D1 " } M(C1,x) { D1/x=1 a=1 }"));
	F->w.fail_key = strdup("a");
	assert_int_not_equal(fx_run(F, "M(C1,y) { a=2 }"), 0);
	assert_int_equal(F->stats.failed, 1);
	ASSERT_LACKS(F, "memo /app/C1"); /* not written by the retry */
	free(F->w.fail_key);
	F->w.fail_key = NULL;
	ASSERT_OK(fx_run(F, "M(C1,y) { a=2 }"));
	assert_int_equal(F->stats.unchanged, 0);
	ASSERT_WORLD(F, "a=2");
}

/* A component whose mount path changes (another parent) is a new
 * component: the old one's existence rows and states all go, the state
 * moves to the new one, and nothing is left under the old parent. */
static void
moved_component_leaves_no_existence_row(void **state)
{
	ASSERT_OK(fx_run(F, "C(P) { C(x) { a=1 } } C(Q) { b=1 }"));
	ASSERT_HAS(F, "cex /app/P/x");
	ASSERT_OK(fx_run(F, "C(P) { } C(Q) { C(x) { a=1 } b=1 }"));
	ASSERT_WORLD(F, "a=1 b=1");
	ASSERT_LACKS(F, "cex /app/P/x");
	ASSERT_LACKS(F, "comp /app/P/x");
	ASSERT_HAS(F, "cex /app/Q/x");
	ASSERT_HAS(F, "owner /@dict/a -> /app/Q/x");
	assert_int_equal(fx_count(F, "tomb "), 0);
	/* and under a memoised parent that moves it away */
	ASSERT_OK(fx_run(F, "M(P,1) { C(y) { c=1 } } C(Q) { C(x) { a=1 } b=1 }"));
	ASSERT_OK(fx_run(F, "M(P,2) { } C(Q) { C(x) { a=1 } C(y) { c=1 } b=1 }"));
	ASSERT_WORLD(F, "a=1 b=1 c=1");
	ASSERT_LACKS(F, "cex /app/P/y");
	ASSERT_LACKS(F, "comp /app/P/y");
	assert_int_equal(fx_count(F, "tomb "), 0);
}

/* 47: a change of the logic fingerprint (the declaration's code, tend's
 * declare line) re-runs; so does a component run without a memo in
 * between (its action dropped the memo) once memoised again. */
static void
s47_code_change(void **state)
{
	ASSERT_OK(fx_run(F, "M(i,v1) { a=1 }"));
	ASSERT_OK(fx_run(F, "M(i,v1,logic-v2) { a=2 }"));
	ASSERT_REC(F, "a", "1", false, true);
	ASSERT_WORLD(F, "a=2");
	ASSERT_OK(fx_run(F, "M(i,v1,logic-v2) { a=9 }"));
	assert_int_equal(F->stats.unchanged, 1);
	ASSERT_OK(fx_run(F, "C(i) { a=3 }")); /* memo off */
	ASSERT_WORLD(F, "a=3");
	ASSERT_OK(fx_run(F, "M(i,v1,logic-v2) { a=2 }")); /* and on again */
	assert_int_equal(F->stats.unchanged, 0);
	ASSERT_WORLD(F, "a=2");
}

static void
s48_full_reprocess(void **state)
{
	ASSERT_OK(fx_run(F, "M(i,v1) { a=1 } b=2"));
	ASSERT_OK(fx_run(F, "M(i,v1) { a=1 }"));
	ASSERT_OK(fx_run_opts(F, "M(i,v1) { a=1 }", true, false));
	ASSERT_REC(F, "a", "1", true, true);
	assert_int_equal(F->stats.unchanged, 0);
	assert_null(dict_rec(&F->w, "b")); /* stays deleted */
	ASSERT_WORLD(F, "a=1");
	ASSERT_OK(fx_run(F, "M(i,v1) { a=1 }"));
	assert_int_equal(F->stats.unchanged, 1); /* the memo was rewritten */
}

static void
s60_background_child_failure(void **state)
{
	assert_int_not_equal(fx_run(F, "r=0 C(C1) { a=1 ! } C(C2) { b=2 }"), 0);
	ASSERT_WORLD(F, "b=2 r=0");
	assert_int_equal(F->stats.errors, 1);
	assert_int_equal(F->ncomp_err_ev, 1);
	/* the parent's memo is withheld: the same input runs it again */
	assert_int_not_equal(fx_run(F, "M(P,x) { r=0 C(C1) { a=1 ! } "
					"C(C2) { b=2 } }"), 0);
	ASSERT_LACKS(F, "memo /app/P");
	assert_int_not_equal(fx_run(F, "M(P,x) { r=0 C(C1) { a=1 ! } "
					"C(C2) { b=2 } }"), 0);
	assert_int_equal(F->stats.unchanged, 0);
	ASSERT_OK(fx_run(F, "M(P,x) { r=0 C(C1) { a=1 } C(C2) { b=2 } }"));
	ASSERT_WORLD(F, "a=1 b=2 r=0");
	ASSERT_HAS(F, "memo /app/P");
}

static void
s61_use_mount_child_failure(void **state)
{
	ASSERT_OK(fx_run(F, "r=0"));
	assert_int_not_equal(fx_run(F, "U(C1) { ! }"), 0);
	ASSERT_WORLD(F, "r=0"); /* the root submitted nothing */
}

static void
s63_stats(void **state)
{
	ASSERT_OK(fx_run(F, "M(a,1) { a=1 } M(b,1) { b=1 } M(c,1) { c=1 }"));
	assert_int_equal(F->stats.added, 4);
	ASSERT_OK(fx_run(F, "M(a,1) { a=1 } M(b,1) { b=1 } M(c,1) { c=1 }"));
	assert_int_equal(F->stats.unchanged, 3);
	ASSERT_OK(fx_run(F, "M(a,2) { a=2 } M(b,1) { b=1 } M(c,1) { c=1 }"));
	assert_int_equal(F->stats.reprocessed, 2); /* a and the root */
	assert_int_equal(F->stats.unchanged, 2);
	ASSERT_OK(fx_run(F, "M(a,2) { a=2 } M(b,1) { b=1 }"));
	assert_int_equal(F->stats.deleted, 1);
}

/* CocoIndex lets the last submitter win; tend makes it a conflict
 * (issue 15): neither is applied, what is there stays, and both
 * components fail with status TEND_ECONFLICT. */
static void
s66_same_state_two_components_one_run(void **state)
{
	assert_int_not_equal(fx_run(F, "C(C1) { x=1 } C(C2) { x=2 }"), 0);
	ASSERT_WORLD(F, "");
	assert_int_equal(F->ncomp_err_ev, 2);
	assert_non_null(strstr(F->comp_error, "conflict: "));
	assert_non_null(strstr(F->comp_error, "/app/C1 and by /app/C2"));
	assert_int_equal(fx_count(F, "owner "), 0);
	assert_int_equal(fx_count(F, "item "), 0);
	assert_non_null(strstr(fx_dump(F), ": /app/C1 /app/C2\n"));
	/* one of them goes: the other one's state is applied */
	ASSERT_OK(fx_run(F, "C(C2) { x=2 }"));
	ASSERT_WORLD(F, "x=2");
	ASSERT_HAS(F, "owner /@dict/x -> /app/C2");
}

/* An owner that still declares the state keeps it; a newcomer fails and
 * takes it over once the owner stops declaring it. */
static void
conflict_with_an_owner_keeps_what_is_there(void **state)
{
	ASSERT_OK(fx_run(F, "C(C1) { x=1 y=1 }"));
	assert_int_not_equal(fx_run(F, "C(C1) { x=1 y=1 } C(C2) { x=2 z=2 }"),
	    0);
	/* the conflicting component applies none of its states */
	ASSERT_WORLD(F, "x=1 y=1");
	ASSERT_HAS(F, "owner /@dict/x -> /app/C1");
	/* the owner changes its value in the same pass: it keeps writing
	 * it (and so it does whatever the batches) */
	assert_int_not_equal(fx_run(F, "C(C1) { x=3 y=1 } C(C2) { x=2 z=2 }"),
	    0);
	ASSERT_WORLD(F, "x=3 y=1");
	assert_int_equal(F->ncomp_err_ev, 1);
	/* the owner lets go of x (and stays): the newcomer's value */
	ASSERT_OK(fx_run(F, "C(C1) { y=1 } C(C2) { x=2 z=2 }"));
	ASSERT_WORLD(F, "x=2 y=1 z=2");
	ASSERT_HAS(F, "owner /@dict/x -> /app/C2");
}

/* A conflict found in one batch stays one when the next pass puts the
 * two in batches of their own (the first would otherwise take it). */
static const char *live_names; /* "C1 C2": the test's live components */

static bool
test_live(const char *component, const char *provider, void *arg)
{
	const char *leaf = strrchr(component, '/');

	(void)arg;
	(void)provider;
	return leaf && strstr(live_names, leaf + 1) != NULL;
}

static void
conflict_stays_across_batches(void **state)
{
	static const struct tend_component_hooks hooks = {test_live, NULL};

	tend_engine_set_component_hooks(F->eng, &hooks, NULL);
	live_names = "C1 C2";
	assert_int_not_equal(fx_run(F, "C(C1) { x=1 } C(C2) { x=2 }"), 0);
	tend_engine_set_batch(F->eng, 1);
	assert_int_not_equal(fx_run(F, "C(C1) { x=1 } C(C2) { x=2 }"), 0);
	assert_int_not_equal(fx_run(F, "C(C2) { x=2 } C(C1) { x=1 }"), 0);
	ASSERT_WORLD(F, "");
	assert_int_equal(F->napplied_ev, 0);
	/* a third one in the same batch joins the contest */
	live_names = "C1 C2 C3";
	tend_engine_set_batch(F->eng, 0);
	assert_int_not_equal(fx_run(F, "C(C1) { x=1 } C(C2) { x=2 } "
					"C(C3) { x=3 }"), 0);
	assert_non_null(strstr(fx_dump(F), ": /app/C1 /app/C2 /app/C3\n"));
	tend_engine_set_batch(F->eng, 1);
	assert_int_not_equal(fx_run(F, "C(C3) { x=3 } C(C2) { x=2 } "
					"C(C1) { x=1 }"), 0);
	ASSERT_WORLD(F, "");
	/* two go: the last one takes it */
	live_names = "C3";
	ASSERT_OK(fx_run(F, "C(C3) { x=3 }"));
	ASSERT_WORLD(F, "x=3");
	ASSERT_HAS(F, "owner /@dict/x -> /app/C3");
	assert_int_equal(fx_count(F, "contest "), 0);
	tend_engine_set_component_hooks(F->eng, NULL, NULL);
}

/* The owner in an earlier batch of the pass, or a memo hit: the same. */
static void
conflict_across_batches_and_memos(void **state)
{
	tend_engine_set_batch(F->eng, 1);
	assert_int_not_equal(fx_run(F, "C(C1) { x=1 } C(C2) { x=2 }"), 0);
	/* batches apply as they go: the first declarer's write landed */
	ASSERT_WORLD(F, "x=1");
	ASSERT_HAS(F, "owner /@dict/x -> /app/C1");
	assert_int_equal(F->ncomp_err_ev, 1);
	tend_engine_set_batch(F->eng, 0);
	ASSERT_OK(fx_run(F, "M(C1,a) { x=1 }"));
	assert_int_not_equal(fx_run(F, "M(C1,a) { x=1 } C(C2) { x=2 }"), 0);
	assert_int_equal(F->stats.unchanged, 1);
	ASSERT_WORLD(F, "x=1");
	/* a move (the owner gone in the same pass) is no conflict */
	ASSERT_OK(fx_run(F, "C(C2) { x=2 }"));
	ASSERT_WORLD(F, "x=2");
}

static void
duplicate_in_one_component_is_an_error(void **state)
{
	assert_int_not_equal(fx_run(F, "a=1 a=2"), 0);
	ASSERT_WORLD(F, "");
	assert_int_equal(F->ncomp_err_ev, 1);
}

static void
children_on_pending_provider_are_rejected(void **state)
{
	assert_int_not_equal(fx_run(F, "%D1=n:v1 D1/a=1"), 0);
	assert_non_null(strstr(tend_error_last(), "failed"));
	ASSERT_WORLD(F, "");
}

static void
s70_crash_mid_sink_leaves_candidates(void **state)
{
	/* a kill after the pre-commit is what a failed sink leaves, minus
	 * the token clearing: both are reconciled against every record */
	ASSERT_OK(fx_run(F, "a=1 b=1"));
	F->w.fail_at = 2;
	F->w.fail_after_write = true;
	assert_int_not_equal(fx_run(F, "a=2 b=2"), 0);
	fixture_restart(F);
	F->w.fail_at = 0;
	ASSERT_OK(fx_run(F, "a=2 b=2"));
	ASSERT_WORLD(F, "a=2 b=2");
	assert_int_equal(fx_count(F, "item "), 2);
	ASSERT_HAS(F, "item /app /@dict/a [2]");
	ASSERT_HAS(F, "item /app /@dict/b [2]");
}

static void
s71_drop_with_failure(void **state)
{
	ASSERT_OK(fx_run(F, "U(s) { " D1 " } D1/a=1"));
	F->w.fail_key = strdup("D1");
	assert_int_not_equal(fx_drop(F), 0);
	ASSERT_HAS(F, "item /app/s/@tend/mount_target/(\"@dicts\", \"D1\") "
		      "/@dicts/D1 [v1,D] container");
	free(F->w.fail_key);
	F->w.fail_key = NULL;
	ASSERT_OK(fx_drop(F));
	ASSERT_WORLD(F, "");
	assert_int_equal(fx_count(F, ""), 0);
}

static void
events_report_actions(void **state)
{
	ASSERT_OK(fx_run(F, "a=1 b=2"));
	assert_int_equal(F->nplanned_ev, 2);
	assert_int_equal(F->napplied_ev, 2);
	F->w.fail_at = 1;
	assert_int_not_equal(fx_run(F, "a=3 b=4"), 0);
	assert_int_equal(F->nfailed_ev, 1);
	assert_int_equal(F->napplied_ev, 1);
}

/* what an event callback saw of ev->error */
struct error_seen {
	unsigned ok_null, ok_set;   /* planned/applied: error NULL or not */
	unsigned fail_msg, fail_bad; /* failed: a message, or NULL/"" */
	char last[256];
};

static void
on_error_event(const struct tend_event *ev, void *arg)
{
	struct error_seen *e = arg;

	if (ev->kind == TEND_EV_ACTION_FAILED ||
	    ev->kind == TEND_EV_COMPONENT_ERROR) {
		if (ev->error && *ev->error) {
			e->fail_msg++;
			snprintf(e->last, sizeof e->last, "%s", ev->error);
		} else
			e->fail_bad++;
	} else if (ev->error)
		e->ok_set++;
	else
		e->ok_null++;
}

/* ev->error is NULL unless something failed, and then a message */
static void
event_error_is_null_on_success(void **state)
{
	struct error_seen e = {0};

	tend_engine_subscribe(F->eng, ~0u, on_error_event, &e);
	ASSERT_OK(fx_run(F, "a=1 b=2"));
	assert_int_equal(e.ok_set, 0);
	/* pass started, 2 planned, 2 applied, pass finished */
	assert_int_equal(e.ok_null, 6);
	assert_int_equal(e.fail_msg + e.fail_bad, 0);
	F->w.fail_at = 1;
	assert_int_not_equal(fx_run(F, "a=3 b=4"), 0);
	assert_int_equal(e.ok_set, 0);
	assert_int_equal(e.fail_bad, 0);
	assert_int_equal(e.fail_msg, 1);
	assert_non_null(strstr(e.last, "injected"));
	F->w.fail_at = 0;
	assert_int_not_equal(fx_run(F, "a=3 !"), 0);
	assert_int_equal(e.ok_set, 0);
	assert_int_equal(e.fail_bad, 0);
	assert_int_equal(e.fail_msg, 2);
}

/*
 * Ids with locality (store format 2): the ids of one directory's
 * components, and of one container's states, share their first 4 bytes,
 * so their rows share pages; the other 12 tell them apart. A format-1
 * store (this suite run with TEND_STORE_FORMAT=1) keeps plain hashes.
 */
static struct tend_fp
cid_of(struct fixture *f, const char *app, const char *rel)
{
	struct tend_buf enc = TEND_BUF_INIT;
	struct tend_key k[2] = {tend_key_str(app), tend_key_str(rel)};

	tend_key_encode(&enc, &k[0]);
	tend_key_encode(&enc, &k[1]);
	struct tend_fp id = tend_engine_cid(f->eng, enc.ptr, enc.len);
	struct tend_fp plain = tend_fp_bytes(enc.ptr, enc.len);
	if (tend_store_format(tend_engine_store(f->eng)) < 2)
		assert_memory_equal(id.b, plain.b, 16);
	else
		assert_memory_equal(id.b + 4, plain.b + 4, 12);
	tend_buf_release(&enc);
	return id;
}

static void
ids_of_one_directory_sit_together(void **state)
{
	struct tend_fp a = cid_of(F, "app", "d1/a.txt");
	struct tend_fp b = cid_of(F, "app", "d1/b.txt");
	struct tend_fp c = cid_of(F, "app", "d2/a.txt");
	bool local = tend_store_format(tend_engine_store(F->eng)) >= 2;

	assert_true(memcmp(a.b, b.b, 16) != 0);
	assert_int_equal(memcmp(a.b, b.b, 4) == 0, local);
	assert_true(memcmp(a.b, c.b, 4) != 0);

	/* the states: ITEM rows (cid id pid -> parent id, key...), by
	 * parent */
	ASSERT_OK(fx_run(F, "#D1=n:v1 #D2=n:v2 D1/a=1 D1/b=2 D1/c=3 D2/a=1 "
			    "D2/b=2"));
	struct tend_txn *txn;
	struct tend_iter it;
	struct tend_bytes k, v;
	struct {
		uint8_t id[16], parent[16];
	} rows[32];
	size_t n = 0;
	int more;

	ASSERT_OK(tend_store_read_begin(tend_engine_store(F->eng), &txn));
	ASSERT_OK(tend_store_iter_init(&it, txn, TEND_T_ITEM, NULL, 0));
	while ((more = tend_store_iter_next(&it, &k, &v)) == 1 && n < 32) {
		struct tend_arena ar = TEND_ARENA_INIT;
		struct item item;

		assert_int_equal(k.len, 40);
		ASSERT_OK(tend_item_decode(&item, v.data, v.len, &ar));
		memcpy(rows[n].id, k.data + 16, 16);
		memcpy(rows[n++].parent, item.parent.b, 16);
		tend_arena_finish(&ar);
	}
	assert_int_equal(more, 0);
	tend_store_iter_finish(&it);
	tend_store_read_end(txn);
	size_t siblings = 0, cousins = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++) {
			bool same = memcmp(rows[i].id, rows[j].id, 4) == 0;

			if (memcmp(rows[i].parent, rows[j].parent, 16) == 0) {
				siblings++;
				assert_int_equal(same, local);
			} else if (!same)
				cousins++;
		}
	/* D1's three and D2's two, at least */
	assert_true(siblings >= 4);
	assert_true(cousins > 0);
}

/* tend_engine_child_provider with the result of a failed root lookup
 * (NULL) returns NULL rather than crashing */
static void
child_provider_of_null_parent_is_null(void **state)
{
	struct tend_key k = tend_key_str("D1");

	ASSERT_OK(fx_run(F, D1 " D1/a=1"));
	assert_non_null(tend_engine_child_provider(F->eng,
	    tend_engine_root(F->eng, "dicts"), &k));
	assert_null(tend_engine_root(F->eng, "no-such-root"));
	assert_null(tend_engine_child_provider(F->eng,
	    tend_engine_root(F->eng, "no-such-root"), &k));
	assert_null(tend_engine_child_provider(F->eng, NULL, &k));
	assert_null(tend_engine_child_provider(F->eng,
	    tend_engine_root(F->eng, "dicts"), NULL));
}

static void
map_full_grows_and_retries(void **state)
{
	struct tend_engine_opts o = {.map_size = 64 * 1024};
	struct tend_buf s = TEND_BUF_INIT;

	tend_engine_close(F->eng);
	ASSERT_OK(tend_engine_open(&F->eng, F->state, &o));
	dict_register(F->eng, &F->w);
	for (int i = 0; i < 3000; i++)
		tend_buf_printf(&s, "key%05d=value%d ", i, i);
	ASSERT_OK(fx_run(F, s.ptr));
	assert_int_equal(F->w.n, 3000);
	assert_int_equal(fx_count(F, "item "), 3000);
	tend_buf_release(&s);
}

/* ---- per-app counters (tend status; every pass checks them against a
 * scan too: scenario.c's counts_agree) ---- */

static void
assert_counts_(struct fixture *f, uint64_t states, uint64_t pending,
    uint64_t containers, const char *file, int line)
{
	struct tend_app_counts ac;
	struct tend_txn *txn;

	assert_int_equal(tend_store_read_begin(tend_engine_store(f->eng),
			     &txn), 0);
	assert_int_equal(tend_engine_counts(f->eng, txn, "app", &ac), 0);
	tend_store_read_end(txn);
	if (ac.scanned || ac.states != states || ac.pending != pending ||
	    ac.containers != containers)
		fail_msg("%s:%d: counts %llu/%llu/%llu%s, want %llu/%llu/%llu\n%s",
		    file, line, (unsigned long long)ac.states,
		    (unsigned long long)ac.pending,
		    (unsigned long long)ac.containers,
		    ac.scanned ? " (scanned)" : "", (unsigned long long)states,
		    (unsigned long long)pending,
		    (unsigned long long)containers, fx_dump(f));
}
#define ASSERT_COUNTS(f, s, p, c) \
	assert_counts_(f, s, p, c, __FILE__, __LINE__)

static void
counters_follow_puts_deletes_failures_invalidation_and_drops(void **state)
{
	ASSERT_OK(fx_run(F, "a=1 b=2 C(k) { c=3 }"));
	ASSERT_COUNTS(F, 3, 0, 0);
	/* a failed update keeps two records: unsettled */
	F->w.fail_key = strdup("b");
	assert_int_not_equal(fx_run(F, "a=1 b=9 C(k) { c=3 }"), 0);
	ASSERT_COUNTS(F, 3, 1, 0);
	free(F->w.fail_key);
	F->w.fail_key = NULL;
	/* settled, one deleted, one moved between components */
	ASSERT_OK(fx_run(F, "b=9 C(k) { } C(j) { c=3 }"));
	ASSERT_COUNTS(F, 2, 0, 0);
	/* containers and their children; a lossy then a destructive
	 * change re-applies them (a new generation replaces the rows) */
	ASSERT_OK(fx_run(F, "b=9 #D1=l:v1 D1/a=1 D1/b=2 C(j) { c=3 }"));
	ASSERT_COUNTS(F, 5, 0, 1);
	ASSERT_OK(fx_run(F, "b=9 #D1=l:v2 D1/a=1 D1/b=2 C(j) { c=3 }"));
	ASSERT_COUNTS(F, 5, 0, 1);
	ASSERT_OK(fx_run(F, "b=9 #D1=d:v3 D1/a=1 C(j) { c=3 }"));
	ASSERT_COUNTS(F, 4, 0, 1);
	/* the container goes with its children */
	ASSERT_OK(fx_run(F, "b=9 C(j) { c=3 }"));
	ASSERT_COUNTS(F, 2, 0, 0);
	/* a drop that fails on one entry, then one that finishes */
	ASSERT_OK(fx_run(F, "b=9 C(j) { c=3 } C(i) { d=4 }"));
	fixture_restart(F);
	F->w.fail_key = strdup("d");
	assert_int_not_equal(fx_drop(F), 0);
	ASSERT_COUNTS(F, 1, 1, 0);
	free(F->w.fail_key);
	F->w.fail_key = NULL;
	ASSERT_OK(fx_drop(F));
	ASSERT_COUNTS(F, 0, 0, 0);
	assert_int_equal(fx_count(F, ""), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(s01_first_insert),
		T(counters_follow_puts_deletes_failures_invalidation_and_drops),
		T(s02_unchanged_is_a_noop),
		T(s03_content_change_updates),
		T(s04_removed_key_is_deleted),
		T(s05_reinsert_after_delete),
		T(s06_interrupted_insert),
		T(s07_partial_apply_then_undeclare),
		T(s08_interrupted_update),
		T(s09_failed_updates_accumulate),
		T(s10_interrupted_delete),
		T(s10b_interrupted_delete_then_redeclared),
		T(s11_restart_after_failed_sink),
		T(s12_preview_applies_and_persists_nothing),
		T(s13_container_and_children),
		T(s14_container_unchanged),
		T(s15_child_removed_in_existing_container),
		T(s16_container_removed_with_children),
		T(s17_container_removed_children_elsewhere),
		T(s18_container_recreated_after_removal),
		T(s19_lossy_change),
		T(s20_destructive_change),
		T(s21_destructive_plus_data_change),
		T(s22_failed_container_creation),
		T(s23_memoized_child_declarer_and_invalidation),
		T(s24_captured_provider_invalidates_memo),
		T(s24b_mid_leaf_chain),
		T(s25_directory_to_component_transition),
		T(s26_per_item_components),
		T(s27_source_deleted_deletes_its_outputs),
		T(s28_partially_built_component),
		T(s29_gc_failure_then_retry),
		T(s30_gc_failure_then_redeclare),
		T(s31_drop),
		T(s31b_drop_in_fresh_process),
		T(drop_over_batches_with_open_child),
		T(drop_in_one_batch_with_open_child),
		T(drop_tries_a_failing_delete_once),
		T(s32_basic_transfer),
		T(s33_strict_preempt),
		T(s34_transfer_then_undeclare),
		T(s35_concurrent_order_independence),
		T(s36_multiple_keys),
		T(s37_chain),
		T(s39_transfer_with_failed_sink),
		T(s39b_transfer_failed_then_unmounted),
		T(s40_component_deleted_then_another_claims),
		T(s41_attachment_lifecycle),
		T(s41b_orphaned_attachment_is_deleted),
		T(s42_attachment_provider_is_idempotent),
		T(s43_independent_attachment_types),
		T(s44_component_memo_skip),
		T(s45_memo_invalidated_by_failed_start),
		T(s46_memo_hit_keeps_states_and_delete_works),
		T(s47_code_change),
		T(memo_gone_before_a_failed_delete),
		T(memo_withheld_when_a_child_sink_fails),
		T(container_without_child_handler_fails_before_commit),
		T(failing_delete_tried_once_per_pass),
		T(failing_child_delete_tried_once_per_pass_open_child),
		T(container_waits_for_a_failed_child_delete),
		T(kept_component_with_a_failed_action),
		T(moved_component_leaves_no_existence_row),
		T(s48_full_reprocess),
		T(s60_background_child_failure),
		T(s61_use_mount_child_failure),
		T(s63_stats),
		T(s66_same_state_two_components_one_run),
		T(conflict_with_an_owner_keeps_what_is_there),
		T(conflict_across_batches_and_memos),
		T(conflict_stays_across_batches),
		T(duplicate_in_one_component_is_an_error),
		T(children_on_pending_provider_are_rejected),
		T(s70_crash_mid_sink_leaves_candidates),
		T(s71_drop_with_failure),
		T(events_report_actions),
		T(event_error_is_null_on_success),
		T(child_provider_of_null_parent_is_null),
		T(ids_of_one_directory_sit_together),
		T(map_full_grows_and_retries),
	};

#define OC(fn) {#fn " (open_child)", fn, setup_open_child, teardown, NULL}
	const struct CMUnitTest open_child_tests[] = {
		OC(s13_container_and_children),
		OC(s15_child_removed_in_existing_container),
		OC(s16_container_removed_with_children),
		OC(s17_container_removed_children_elsewhere),
		OC(s18_container_recreated_after_removal),
		OC(s19_lossy_change),
		OC(s20_destructive_change),
		OC(s21_destructive_plus_data_change),
		OC(s25_directory_to_component_transition),
		OC(s26_per_item_components),
		OC(s27_source_deleted_deletes_its_outputs),
		OC(s28_partially_built_component),
		OC(s29_gc_failure_then_retry),
		OC(s30_gc_failure_then_redeclare),
		OC(s31_drop),
		OC(s31b_drop_in_fresh_process),
		OC(s41_attachment_lifecycle),
		OC(s41b_orphaned_attachment_is_deleted),
		OC(s71_drop_with_failure),
	};
	int failed = cmocka_run_group_tests_name("engine", tests, NULL, NULL);
	return failed + cmocka_run_group_tests_name("engine, open_child",
	    open_child_tests, NULL, NULL);
}
