/*
 * pass.c - from [app] sections to engine passes.
 *
 * One pass of an app:
 *   1. walk the source (sorted, filtered) and compare every file's stat
 *      signature (size, mtime ns, ctime ns, inode, mode) with the one
 *      stored in the SIG table: only files whose signature changed are
 *      read and hashed; a signature within the racy window (mtime too
 *      close to the scan) is stored as untrusted, so it is hashed again;
 *   2. the delete brake: if more than the allowed number of previously
 *      seen items vanished (or the source is suddenly empty), those items
 *      are kept, not deleted, and the pass reports them;
 *   3. the engine pass: the root component mounts the target container,
 *      then one memoized component per file (input: path, content
 *      fingerprint, mode; logic: the app's declaration settings), whose
 *      body runs the declaration function;
 *   4. the SIG table is brought up to date in one transaction.
 */
#define _GNU_SOURCE
#include "pass.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "fs.h"
#include "git.h"
#include "inspect.h"
#include "tend/failpoint.h"
#include "tend/status.h"
#include "walk.h"

/* ---- one pass ---- */

static struct tend_fp
app_logic(const struct tend_app_config *a)
{
	struct tend_hasher h;

	tend_hasher_init(&h);
	tend_hasher_str(&h, "tend-app-logic-1");
	tend_hasher_str(&h, a->declare_text);
	tend_hasher_str(&h, a->name_tmpl ? a->name_tmpl : "{path}");
	tend_hasher_int(&h, a->target);
	tend_hasher_str(&h, a->target_path);
	/* a git target's container is (repository, ref, prefix): another
	 * ref or prefix is another container, which every item declares
	 * into anew (a memo would keep them in the old one, deleted) */
	if (a->target == TEND_TARGET_GIT) {
		tend_hasher_str(&h, a->ref ? a->ref : "");
		tend_hasher_str(&h, a->prefix ? a->prefix : "");
	}
	/* a plugin target's type and keys: another container, maybe */
	if (a->target == TEND_TARGET_PLUGIN) {
		tend_hasher_str(&h, a->target_type);
		for (size_t i = 0; i < a->plugin_values.n; i++)
			tend_hasher_str(&h, a->plugin_values.v[i]);
	}
	/* outputs of exec and plugin items are remembered for the
	 * manifest only when they run: switching it on runs them */
	if (a->declare != TEND_DECLARE_COPY)
		tend_hasher_bool(&h, a->manifest);
	if (a->declare == TEND_DECLARE_CODE)
		tend_hasher_int(&h, a->code_version);
	return tend_hasher_final(&h);
}

/* Is `inner` (relative to the workspace) inside `outer`? Then the
 * relative path from outer to inner goes into *rel. */
static bool
inside(const char *outer, const char *inner, char **rel)
{
	size_t ol = strlen(outer);

	if (strcmp(outer, ".") == 0) {
		*rel = strdup(inner);
		return true;
	}
	if (strncmp(outer, inner, ol) != 0 || (inner[ol] != '/' && inner[ol]))
		return false;
	*rel = strdup(inner[ol] ? inner + ol + 1 : ".");
	return true;
}

void
rm_tree(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;

	if (d) {
		while ((e = readdir(d))) {
			char *p;

			if (strcmp(e->d_name, ".") == 0 ||
			    strcmp(e->d_name, "..") == 0)
				continue;
			p = path_join(path, e->d_name);
			struct stat st;
			if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
				rm_tree(p);
			else
				unlink(p);
			free(p);
		}
		closedir(d);
	}
	rmdir(path);
}

/* What a walk of the app's source never visits: a target inside it and
 * the state directory (skip[] holds 3). False if the target directory is
 * the source itself. */
static bool
source_skips(struct tend_ws *ws, struct tend_app_config *app, char **skip,
    size_t *nskip)
{
	char *rel;

	if (app->target != TEND_TARGET_GIT &&
	    inside(app->source, app->target_path, &rel)) {
		if (app->target == TEND_TARGET_DIR && strcmp(rel, ".") == 0) {
			free(rel);
			return false;
		}
		skip[(*nskip)++] = rel;
	}
	if (inside(app->source, ws->cfg.state, &rel))
		skip[(*nskip)++] = rel;
	return true;
}

static struct tend_walk_opts
walk_opts(const struct tend_app_config *app, char **skip, size_t nskip)
{
	struct tend_walk_opts wo = {
		.include = app->include.v,
		.ninclude = app->include.n,
		.exclude = app->exclude.v,
		.nexclude = app->exclude.n,
		.gitignore = app->gitignore,
		.skip = skip,
		.nskip = nskip,
		.links = strcmp(app->symlinks, "skip") != 0,
	};

	return wo;
}

/* For plan: the entries the vanished items declared (their SIG rows
 * list them), whose deletes the brake holds. */
static void
held_entries(struct run *r)
{
	struct tend_buf outs = TEND_BUF_INIT, key = TEND_BUF_INIT;
	struct tend_buf disp = TEND_BUF_INIT;
	const char *name;
	uint16_t len;

	if (r->app->target == TEND_TARGET_FILE) {
		r->res->held = tend_xcalloc(1, sizeof *r->res->held);
		r->res->held[r->res->nheld++] = tend_xstrdup(
		    r->app->target_path);
		r->res->held_update = true;
		return;
	}
	if (!r->target_name || held_outs(r, &outs))
		return;
	for (size_t pos = 0; outs_next(outs.ptr, outs.len, &pos, &name, &len);) {
		struct tend_key k = tend_key_strn(name, len);

		tend_buf_reset(&key);
		tend_buf_reset(&disp);
		tend_key_format(&key, &k);
		tend_display_path(&disp, r->target_name, key.ptr);
		r->res->held = tend_xrealloc(r->res->held,
		    (r->res->nheld + 1) * sizeof *r->res->held);
		r->res->held[r->res->nheld++] = tend_buf_detach(&disp, NULL);
	}
	tend_buf_release(&outs);
	tend_buf_release(&key);
	tend_buf_release(&disp);
}

#define SIG_CHUNK 65536

static int
forget_body(struct tend_txn *txn, void *arg)
{
	struct run *r = arg;
	struct tend_buf k = TEND_BUF_INIT;
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < r->nvanished; i++) {
		sig_key(&k, r->app->name, r->vanished[i], strlen(r->vanished[i]));
		rc = tend_store_del(txn, TEND_T_SIG, k.ptr, k.len);
	}
	tend_buf_release(&k);
	return rc;
}

/*
 * Before a pass deletes what vanished items declared: their SIG rows go,
 * durably, first (unless the brake holds them; digested long paths are
 * not in the list: they stay, harmless, until drop). Kept until the end of the pass (as they were), a kill
 * in between left the rows of files whose deletes were pending: brought
 * back as they were, the files matched their rows, were never read nor
 * declared again, and their states stayed unsettled for good (status,
 * check and plan disagreeing) until a sync --full.
 */
static int
forget_vanished(struct run *r)
{
	if (r->o->preview || r->hold || !r->nvanished)
		return 0;
	return tend_store_write(tend_engine_store(r->ws->eng), forget_body, r);
}

/* After an engine pass: bring the signatures up to date, report held
 * deletes. */
int
pass_done(struct run *r, int rc)
{
	bool due = false; /* (vanished rows went before: forget_vanished) */

	if (r->o->preview && r->hold)
		held_entries(r);

	if (!r->o->preview)
		keep_conflicts(r);

	for (size_t i = 0; i < r->nitems && !due; i++)
		due = sig_due(&r->items[i]);
	if (!r->o->preview && due) {
		/* in transactions of SIG_CHUNK items: the rows of a cold
		 * pass of 1M files, in one, held 159 MB of dirty pages
		 * beside the items (each row is a fact of its own file: a
		 * kill between two leaves the rest old, read again) */
		const char *e = getenv("TEND_SIG_CHUNK"); /* (tests) */
		size_t chunk = e && atoi(e) > 0 ? (size_t)atoi(e) : SIG_CHUNK;
		int src = 0;

		r->sig_from = 0;
		do {
			r->sig_to = r->nitems - r->sig_from > chunk
			    ? r->sig_from + chunk : r->nitems;
			src = tend_store_write_settle(
			    tend_engine_store(r->ws->eng), sig_body, r);
			r->sig_from = r->sig_to;
		} while (src == 0 && r->sig_from < r->nitems);
		if (src && !rc)
			rc = src;
		r->rows_done = src == 0;
	} else
		r->rows_done = true;
	if (r->res->held_deletes && rc == 0 && !r->o->preview)
		rc = tend_error_set(TEND_ERROR,
		    "%s: %llu source items vanished; their deletes are held "
		    "back (%s, or raise max-delete)", r->app->name,
		    (unsigned long long)r->res->held_deletes, r->o->agent
			? "approve them: key a in tend top, the socket's "
			  "approve, or tend sync --allow-delete"
			: "tend sync --allow-delete");
	return rc;
}

static void
run_free(struct run *r, char **skip, size_t nskip)
{
	free(r->target_name);
	for (size_t i = 0; i < r->nconflicted; i++)
		free(r->conflicted[i]);
	free(r->conflicted);
	if (r->stage)
		rm_tree(r->stage);
	free(r->stage);
	for (size_t i = 0; i < nskip; i++)
		free(skip[i]);
	for (size_t i = 0; i < r->nitems; i++)
		item_free(&r->items[i]);
	free(r->items);
	names_free(r);
	for (size_t i = 0; i < r->nvanished; i++)
		free(r->vanished[i]);
	free(r->vanished);
	free(r->source);
}

/* META "full/APP": a sync --full of APP is under way (set before its
 * first write, gone once it finished) */
/* META "full/APP": a full pass is under way (or was cut short);
 * "held/APP": the last pass held deletes the brake tripped on */
struct full_mark {
	const char *what, *app;
	bool on;
};

static int
full_mark_body(struct tend_txn *txn, void *arg)
{
	struct full_mark *m = arg;
	char key[300];

	snprintf(key, sizeof key, "%s/%s", m->what, m->app);
	if (m->on)
		return tend_store_put(txn, TEND_T_META, key, strlen(key), "1",
		    1);
	int rc = tend_store_del(txn, TEND_T_META, key, strlen(key));
	return rc == TEND_ENOTFOUND ? 0 : rc;
}

static int
meta_mark(struct tend_ws *ws, const char *what, const char *app, bool on)
{
	struct full_mark m = {what, app, on};

	return tend_store_write(tend_engine_store(ws->eng), full_mark_body, &m);
}

static int
full_mark(struct tend_ws *ws, const char *app, bool on)
{
	return meta_mark(ws, "full", app, on);
}

static bool
meta_marked(struct tend_txn *txn, const char *what, const char *app)
{
	struct tend_bytes v;
	char key[300];

	snprintf(key, sizeof key, "%s/%s", what, app);
	return tend_store_get(txn, TEND_T_META, key, strlen(key), &v) == 0;
}

static bool
full_marked(struct tend_txn *txn, const char *app)
{
	return meta_marked(txn, "full", app);
}

/* The delete brake, once `trip` says whether this pass's vanished items
 * are too many: their deletes are held (the pass reports them) unless
 * --allow-delete or an approve released them. Full and partial passes
 * trip it their own way. */
static int
brake(struct run *r, struct tend_app_result *res,
    const struct tend_sync_opts *o, bool trip, bool held_before, bool all)
{
	/* held once, held until allowed: the next pass must not let them
	 * go because it counts more items (a directory renamed: its new
	 * files made the vanished ones less than half) */
	trip |= held_before;
	res->brake = trip && r->nvanished;
	if (trip && !o->allow_delete && r->nvanished) {
		res->held_deletes = r->nvanished;
		r->hold = true;
		held_sources(res, r);
	} else
		res->gone_items = r->nvanished;
	/* released by --allow-delete, or by a pass that saw every source
	 * (`all`) with none vanished: a partial pass sees only its own */
	bool release = held_before && !r->hold &&
	    (o->allow_delete || (all && r->nvanished == 0));
	if (o->preview || (r->hold == held_before) ||
	    (held_before && !release))
		return 0;
	return meta_mark(r->ws, "held", r->app->name, r->hold);
}

/*
 * The vanished sources whose deletes would remove something: of a copy
 * or exec app (one component per source), those whose component ever
 * applied a state. A new user's trial created 5,000 files and deleted
 * them 50 ms later under the agent: the pass that saw them could write
 * 514 before they went, and the brake held 3,903 deletes, nearly all of
 * entries never written. For other apps (an aggregate, a plugin's own
 * components) every vanished source counts.
 */
static size_t
vanished_to_remove(struct run *r, bool held_before)
{
	struct tend_txn *txn;
	size_t n = 0;

	/* (held already: held whatever the count, which is not looked up
	 * again in every pass while they wait) */
	if (held_before ||
	    (r->app->declare != TEND_DECLARE_COPY &&
		r->app->declare != TEND_DECLARE_EXEC) ||
	    r->app->target == TEND_TARGET_FILE ||
	    tend_store_read_begin(tend_engine_store(r->ws->eng), &txn))
		return r->nvanished;
	for (size_t i = 0; i < r->nvanished; i++) {
		struct tend_key path[2] = {tend_key_symbol("files"),
		    tend_key_str(r->vanished[i])};

		/* (an error counts: the brake errs on the safe side) */
		if (tend_engine_comp_applied(r->ws->eng, txn, r->app->name,
			path, 2) != 0)
			n++;
	}
	tend_store_read_end(txn);
	return n;
}

bool
tend_app_ref_rewritten(struct tend_ws *ws, const struct tend_app_config *app,
    char was[13])
{
	if (app->target != TEND_TARGET_GIT)
		return false;
	char *repo = path_join(ws->root, app->target_path);
	bool lost = tend_git_ref_rewritten(repo, ws->state_dir, app->ref,
	    was) == 1;

	free(repo);
	return lost;
}

int
tend_app_sync(struct tend_ws *ws, struct tend_app_config *app,
    const struct tend_sync_opts *opts, struct tend_app_result *res)
{
	/* verify: full for everything but the strays (opts->full, below) */
	struct tend_sync_opts oo = *opts;
	const struct tend_sync_opts *o = &oo;
	oo.full |= opts->verify;
	struct run r = {.ws = ws, .app = app, .o = o, .res = res};
	struct tend_txn *txn = NULL;
	struct scan scan = {.r = &r};
	char *skip[3] = {NULL, NULL, NULL};
	size_t nskip = 0, nprev = 0;
	struct timespec now;
	int rc;

	memset(res, 0, sizeof *res);
	if ((rc = tend_ws_open(ws)))
		return rc;
	r.source = path_join(ws->root, app->source);
	r.logic = app_logic(app);
	clock_gettime(CLOCK_REALTIME, &now);
	r.scan_ns = ts_ns(&now);
	/* an unmounted or missing source must never wipe a target */
	struct stat st;
	if (stat(r.source, &st) != 0 || !S_ISDIR(st.st_mode)) {
		char msg[PATH_MAX + 128];

		tend_failpoint("source-missing", app->source);
		snprintf(msg, sizeof msg,
		    "source %s is missing or not a directory: nothing done "
		    "(its targets are kept)",
		    app->source);
		res->error = strdup(msg);
		res->source_missing = true;
		rc = tend_error_set(TEND_ERROR, "%s", msg);
		goto out;
	}
	/* never read what we write, nor our own state */
	if (!source_skips(ws, app, skip, &nskip)) {
		res->error = strdup("target and source are the same "
				    "directory");
		rc = tend_error_set(TEND_ERROR, "%s: %s", app->name, res->error);
		goto out;
	}
	struct tend_walk_opts wo = walk_opts(app, skip, nskip);
	unsigned links_skipped = 0;
	wo.on_dir = o->on_dir;
	wo.dir_arg = o->dir_arg;
	wo.links_skipped = &links_skipped;
	scan.key = (struct tend_buf)TEND_BUF_INIT;
	if ((rc = tend_store_read_begin(tend_engine_store(ws->eng), &txn)))
		goto out;
	scan.txn = txn;
	r.unsure = full_marked(txn, app->name);
	bool held_before = meta_marked(txn, "held", app->name);
	unsigned skipped = 0;
	if (app->target == TEND_TARGET_GIT)
		tend_git_warm(); /* overlaps the walk */
	rc = tend_walk(r.source, &wo, on_file, &scan, &skipped);
	if (scan.started)
		tend_store_iter_finish(&scan.it);
	res->skipped = skipped;
	res->links_skipped = links_skipped;
	if (rc == 0) {
		/* the walk yields path order already; sort only if a long
		 * or odd name broke it */
		for (size_t i = 1; i < r.nitems; i++)
			if (cmp_rel(&r.items[i - 1], &r.items[i]) > 0) {
				qsort(r.items, r.nitems, sizeof *r.items,
				    cmp_rel);
				break;
			}
		rc = count_previous(&r, txn, &nprev);
	}
	tend_store_read_end(txn);
	tend_buf_release(&scan.key);
	if (rc)
		goto out;
	if (o->progress)
		o->progress(o->arg, app->name, res->files, res->hashed);
	if (app->declare == TEND_DECLARE_PLUGIN) {
		if (!(r.plugin = plugin_load(ws, app->declare_arg))) {
			res->error = strdup(tend_error_last());
			rc = TEND_ERROR;
			goto out;
		}
		struct tend_hasher lh;
		tend_hasher_init(&lh);
		tend_hasher_fp(&lh, &r.logic);
		tend_hasher_fp(&lh, &r.plugin->fp);
		r.logic = tend_hasher_final(&lh);
	}
	/* the delete brake (over the deletes that would remove something,
	 * counted only when the vanished ones would trip it) */
	bool trip;
	size_t nrm = r.nvanished;
	if (app->max_delete >= 0)
		trip = nrm > (size_t)app->max_delete &&
		    (nrm = vanished_to_remove(&r, held_before)) > (size_t)app->max_delete;
	else
		trip = ((nrm * 2 > nprev && nrm >= 20) ||
			   (r.nitems == 0 && nprev > 0)) &&
		    (nrm = vanished_to_remove(&r, held_before)) > 0 &&
		    ((nrm * 2 > nprev && nrm >= 20) || r.nitems == 0);
	if ((rc = brake(&r, res, o, trip, held_before, true)))
		goto out;
	struct tend_pass_opts po = {.full = o->full, .preview = o->preview};
	current_run = &r;
	tend_engine_set_batch(ws->eng, app_batch(app));
	if (o->full && !o->preview && !r.unsure &&
	    (rc = full_mark(ws, app->name, true)))
		goto out;
	if ((rc = forget_vanished(&r)))
		goto out;
	rc = tend_engine_run(ws->eng, app->name, root_body, &r, &po,
	    &res->stats);
	current_run = NULL;
	if (!o->preview && app->target != TEND_TARGET_FILE && r.target) {
		uint64_t gid, gsc;

		tend_provider_generation(r.target, &gid, &gsc);
		for (size_t i = 0; i < r.nitems; i++) {
			struct item *it = &r.items[i];
			struct tend_key path[2] = {tend_key_symbol("files"),
			    tend_key_strn(it->rel, it->len)};
			struct tend_fp in = item_input(it);

			if (it->kept || it->sig.mode == 0)
				continue;
			bool ok = tend_engine_memo_matches(ws->eng, app->name,
			    path, 2, &in, &r.logic);
			uint32_t want = ok ? stamp_intern(&r.logic, gid, gsc)
					   : 0;
			if (it->sig.stamp == want)
				continue;
			it->sig.stamp = want;
			it->restamp = true;
		}
	}
	bool ran = rc == 0 || r.res->stats.failed || r.res->stats.errors;
	rc = pass_done(&r, rc);
	/* every source was looked at and its row stamped as its memo is (a
	 * failed component has none): a later pass may trust them again */
	if (ran && r.rows_done && !o->preview && (o->full || r.unsure)) {
		int mrc = full_mark(ws, app->name, false);

		if (mrc && !rc)
			rc = mrc;
	}
	/* sync --full: an exclusive target holds what is declared, nothing
	 * else (a plain sync never reads the target). Entries that failed
	 * (one in the way) do not stop it: every source's row says what it
	 * declares; a declaration that failed does (its row may be old). */
	bool decls_known = rc == 0 || (ran && r.failed_decls == 0 &&
	    !res->held_deletes && !res->error);
	if (opts->full && !o->preview && decls_known && r.rows_done) {
		size_t n;
		int src = tend_app_strays(ws, app, true, NULL, NULL, NULL, &n);

		res->strays = n;
		if (src && !rc)
			rc = src;
	}
	/* a plan: what its pass declared, for the strays plan shows */
	res->strays_known = decls_known;
	if (o->preview && app->exclusive && decls_known)
		for (size_t i = 0; i < r.nitems; i++) {
			struct tend_buf tmp = TEND_BUF_INIT;
			const struct tend_buf *ob = item_outs(&r.items[i], &tmp);

			tend_buf_put(&res->declared, ob->ptr, ob->len);
			tend_buf_release(&tmp);
		}
out:
	run_free(&r, skip, nskip);
	return rc;
}

void
tend_app_result_finish(struct tend_app_result *res)
{
	free(res->error);
	res->error = NULL;
	tend_buf_release(&res->declared);
	for (size_t i = 0; i < res->nheld; i++)
		free(res->held[i]);
	free(res->held);
	res->held = NULL;
	res->nheld = 0;
	for (size_t i = 0; i < res->nheld_sources; i++)
		free(res->held_sources[i]);
	free(res->held_sources);
	res->held_sources = NULL;
	res->nheld_sources = 0;
}

struct named_cid {
	struct tend_fp cid;
	char *name;
};

static int
cmp_named_cid(const void *x, const void *y)
{
	return memcmp(((const struct named_cid *)x)->cid.b,
	    ((const struct named_cid *)y)->cid.b, 16);
}

/*
 * The apps with a root component, from their counters: one row per app,
 * not one per component. In the order of their roots' ids, as the scan
 * of the component rows finds them.
 */
static int
tracked_by_counters(struct tend_ws *ws, struct tend_txn *txn, char ***out,
    size_t *n)
{
	char **names;
	size_t nnames, kept = 0;
	int rc = tend_store_count_names(txn, &names, &nnames);
	struct named_cid *v;

	if (rc)
		return rc;
	v = tend_xcalloc(nnames + 1, sizeof *v);
	for (size_t i = 0; i < nnames; i++) {
		struct tend_counts c;
		struct tend_buf path = TEND_BUF_INIT;
		struct tend_key k = tend_key_str(names[i]);

		if (tend_store_counts_get(txn, names[i], strlen(names[i]),
			&c) != 0 || c.n[TEND_COUNT_ROOTS] <= 0) {
			free(names[i]);
			continue;
		}
		tend_key_encode(&path, &k);
		v[kept].cid = tend_engine_cid(ws->eng, path.ptr, path.len);
		v[kept++].name = names[i];
		tend_buf_release(&path);
	}
	free(names);
	qsort(v, kept, sizeof *v, cmp_named_cid);
	*out = tend_xcalloc(kept + 1, sizeof **out);
	for (size_t i = 0; i < kept; i++)
		(*out)[i] = v[i].name;
	*n = kept;
	free(v);
	return 0;
}

int
tend_ws_tracked_apps(struct tend_ws *ws, char ***out, size_t *n)
{
	struct tend_txn *txn;
	struct tend_iter it;
	struct tend_bytes k, v;
	struct tend_arena a = TEND_ARENA_INIT;
	int rc, more;

	*out = NULL;
	*n = 0;
	if ((rc = tend_ws_open(ws)))
		return rc;
	if ((rc = tend_store_read_begin(tend_engine_store(ws->eng), &txn)))
		return rc;
	if (tend_store_counts_valid(txn)) {
		rc = tracked_by_counters(ws, txn, out, n);
		tend_store_read_end(txn);
		return rc;
	}
	/* a store an older tend wrote last: every component's row */
	tend_store_iter_init(&it, txn, TEND_T_COMP, NULL, 0);
	while ((more = tend_store_iter_next(&it, &k, &v)) == 1) {
		const char *app;
		size_t alen;
		bool root;

		if (!tend_inspect_header_app(&v, &a, &app, &alen, &root) ||
		    !root)
			continue;
		*out = tend_xrealloc(*out, (*n + 1) * sizeof **out);
		(*out)[(*n)++] = strndup(app, alen);
	}
	tend_store_iter_finish(&it);
	tend_store_read_end(txn);
	tend_arena_finish(&a);
	return more < 0 ? more : 0;
}

/* ---- incremental passes (tend watch) ---- */

/* The target provider a partial pass mounts: the one its last full pass
 * made, if the engine still knows it. */
static struct tend_provider *
existing_target(struct tend_ws *ws, struct tend_app_config *app)
{
	struct tend_engine *eng = ws->eng;

	if (app->target == TEND_TARGET_DIR) {
		struct tend_key k = tend_key_str(app->target_path);

		return tend_engine_child_provider(eng,
		    tend_engine_root(eng, TEND_FS_DIR), &k);
	}
	if (app->target == TEND_TARGET_GIT) {
		struct tend_key parts[3] = {tend_key_str(app->target_path),
		    tend_key_str(app->ref),
		    tend_key_str(app->prefix ? app->prefix : "")};
		struct tend_key k = tend_key_tuple(parts, 3);

		return tend_engine_child_provider(eng,
		    tend_engine_root(eng, TEND_GIT), &k);
	}
	if (app->target == TEND_TARGET_PLUGIN) {
		const struct tend_connector_plugin *d =
		    tend_ws_connector(ws, app->target_type);
		struct tend_buf key = TEND_BUF_INIT, v = TEND_BUF_INIT;
		struct tend_provider *p = NULL;

		if (d && tend_ws_connector_container(ws, app, &key, &v) == 0) {
			struct tend_key k = tend_key_str(key.ptr);

			p = tend_engine_child_provider(eng,
			    tend_engine_root(eng, d->root), &k);
		}
		tend_error_clear();
		tend_buf_release(&key);
		tend_buf_release(&v);
		return p;
	}
	return NULL;
}

/* ---- the paths of an incremental pass ---- */

struct pathset {
	char **v;
	size_t n, cap;
	bool too_many; /* a full pass is cheaper, or a path is digested */
};

#define SUBTREE_MAX 20000 /* paths from directory events before a full pass */

static void
pathset_add(struct pathset *ps, const char *p, size_t len)
{
	if (ps->n >= SUBTREE_MAX) {
		ps->too_many = true;
		return;
	}
	if (ps->n == ps->cap) {
		ps->cap = ps->cap ? ps->cap * 2 : 64;
		ps->v = tend_xrealloc(ps->v, ps->cap * sizeof *ps->v);
	}
	ps->v[ps->n] = tend_xmemdup(p, len + 1);
	ps->v[ps->n++][len] = '\0';
}

static int
on_sub_file(const char *rel, size_t len, int dirfd, const char *leaf,
    const struct stat *st, void *arg)
{
	(void)dirfd;
	(void)leaf;
	(void)st;
	pathset_add(arg, rel, len);
	return 0;
}

int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * The agent's paths, with "dir/" (a directory created, removed, moved in,
 * out or within) standing for every file under it: those it had (their
 * signatures) and those it has now (a walk of it). Sorted, unique.
 */
static void
expand_paths(struct run *r, struct tend_txn *txn,
    const struct tend_walk_opts *wo, char *const *rels, size_t n,
    struct pathset *ps)
{
	struct tend_buf prefix = TEND_BUF_INIT;
	size_t al = strlen(r->app->name) + 1;

	for (size_t i = 0; i < n && !ps->too_many; i++) {
		size_t len = strlen(rels[i]);

		if (!len || rels[i][len - 1] != '/') {
			pathset_add(ps, rels[i], len);
			continue;
		}
		struct tend_iter it;
		struct tend_bytes k, v;

		tend_buf_reset(&prefix);
		tend_buf_put(&prefix, r->app->name, al);
		tend_buf_put(&prefix, rels[i], len);
		tend_store_iter_init(&it, txn, TEND_T_SIG, prefix.ptr,
		    prefix.len);
		while (!ps->too_many && tend_store_iter_next(&it, &k, &v) == 1) {
			if (memchr(k.data + al, 0xff, k.len - al))
				ps->too_many = true; /* a digested long path */
			else
				pathset_add(ps, (const char *)k.data + al,
				    k.len - al);
		}
		tend_store_iter_finish(&it);
		char *dir = tend_xmemdup(rels[i], len);
		dir[len - 1] = '\0';
		tend_walk_sub(r->source, wo, dir, on_sub_file, ps, NULL);
		free(dir);
	}
	tend_buf_release(&prefix);
	if (ps->n > 1)
		qsort(ps->v, ps->n, sizeof *ps->v, cmp_str);
	size_t k = 0;
	for (size_t i = 0; i < ps->n; i++) {
		if (k && strcmp(ps->v[k - 1], ps->v[i]) == 0)
			free(ps->v[i]);
		else
			ps->v[k++] = ps->v[i];
	}
	ps->n = k;
}

static void
pathset_free(struct pathset *ps)
{
	for (size_t i = 0; i < ps->n; i++)
		free(ps->v[i]);
	free(ps->v);
}

int
tend_app_sync_paths(struct tend_ws *ws, struct tend_app_config *app,
    char *const *rels, size_t n, const struct tend_sync_opts *o,
    struct tend_app_result *res)
{
	struct run r = {.ws = ws, .app = app, .o = o, .res = res};
	struct tend_txn *txn = NULL;
	struct tend_buf key = TEND_BUF_INIT;
	struct pathset ps = {0};
	char *skip[3] = {NULL, NULL, NULL};
	size_t nskip = 0, nprev = 0;
	struct timespec now;
	int rc;

	if ((rc = tend_ws_open(ws)))
		return rc;
	r.target = existing_target(ws, app);
	/* no container from an earlier pass in this process, an aggregate,
	 * a manifest to rewrite: a full pass is the truth */
	if (!r.target || app->manifest || app->declare == TEND_DECLARE_PLUGIN ||
	    app->declare == TEND_DECLARE_CODE)
		return tend_app_sync(ws, app, o, res);
	memset(res, 0, sizeof *res);
	r.source = path_join(ws->root, app->source);
	r.logic = app_logic(app);
	clock_gettime(CLOCK_REALTIME, &now);
	r.scan_ns = ts_ns(&now);
	source_skips(ws, app, skip, &nskip); /* a full pass ran: not the source */
	struct tend_walk_opts wo = walk_opts(app, skip, nskip);
	wo.on_dir = o->on_dir;
	wo.dir_arg = o->dir_arg;
	if ((rc = tend_store_read_begin(tend_engine_store(ws->eng), &txn)))
		goto out;
	bool held_before = meta_marked(txn, "held", app->name);
	/* the items that conflicted last time run again: the other
	 * declaration may be gone */
	struct tend_conflicts *was = o->preview ? NULL
					       : ws_conflicts(ws, app->name);
	size_t nwas = was ? was->n : 0;
	char **all = tend_xcalloc(n + nwas + 1, sizeof *all);
	memcpy(all, rels, n * sizeof *rels);
	if (nwas)
		memcpy(all + n, was->rels, nwas * sizeof *was->rels);
	expand_paths(&r, txn, &wo, all, n + nwas, &ps);
	free(all);
	if (ps.too_many) {
		tend_store_read_end(txn);
		pathset_free(&ps);
		run_free(&r, skip, nskip);
		return tend_app_sync(ws, app, o, res);
	}
	rels = ps.v;
	n = ps.n;
	for (size_t i = 0; i < n; i++) {
		const char *p = rels[i];
		size_t len = strlen(p);
		struct tend_bytes v;
		struct sig old;
		struct stat st;

		sig_key(&key, app->name, p, len);
		bool had = tend_store_get(txn, TEND_T_SIG, key.ptr, key.len,
			       &v) == 0 &&
		    sig_decode(&v, &old);
		char *abs = path_join(r.source, p);
		bool there = lstat(abs, &st) == 0;
		bool present = there &&
		    (S_ISREG(st.st_mode) || (wo.links && S_ISLNK(st.st_mode))) &&
		    tend_walk_includes(r.source, &wo, p);
		/* counted as a full pass's walk counts it (symlinks = skip) */
		if (there && S_ISLNK(st.st_mode) && !wo.links &&
		    tend_walk_includes(r.source, &wo, p))
			res->links_skipped++;
		if (!present) {
			free(abs);
			if (had) {
				r.vanished = tend_xrealloc(r.vanished,
				    (r.nvanished + 1) * sizeof *r.vanished);
				r.vanished[r.nvanished++] = tend_xstrdup(p);
			}
			continue;
		}
		add_item(&r, p, len, &st, had ? &v : NULL, AT_FDCWD, abs);
		free(abs);
	}
	if (r.nvanished) {
		struct tend_buf prefix = TEND_BUF_INIT;
		struct tend_iter it;
		struct tend_bytes k, v;

		tend_buf_puts(&prefix, app->name);
		tend_buf_putc(&prefix, 0);
		tend_store_iter_init(&it, txn, TEND_T_SIG, prefix.ptr,
		    prefix.len);
		while (tend_store_iter_next(&it, &k, &v) == 1)
			nprev++;
		tend_store_iter_finish(&it);
		tend_buf_release(&prefix);
	}
	tend_store_read_end(txn);
	if (r.nitems > 1)
		qsort(r.items, r.nitems, sizeof *r.items, cmp_rel);
	/* the brake, over this batch of events */
	size_t nrm = r.nvanished;
	bool trip = app->max_delete >= 0
	    ? nrm > (size_t)app->max_delete &&
		(nrm = vanished_to_remove(&r, held_before)) > (size_t)app->max_delete
	    : nrm * 2 > nprev && nrm >= 20 &&
		(nrm = vanished_to_remove(&r, held_before)) * 2 > nprev && nrm >= 20;
	if ((rc = brake(&r, res, o, trip, held_before, o->held_included)))
		goto out;
	struct partial pa = {&r};
	struct tend_pass_opts po = {.full = o->full, .preview = o->preview};
	current_run = &r;
	tend_engine_set_batch(ws->eng, app_batch(app));
	if (app->declare == TEND_DECLARE_EXEC) {
		uint64_t gid, gsc;

		tend_provider_generation(r.target, &gid, &gsc);
		prerun_exec_items(&r, gid, gsc);
	}
	if (!o->preview)
		tend_engine_set_settle_hook(ws->eng, settle_sig, &r);
	if ((rc = forget_vanished(&r)) == 0)
		rc = tend_engine_run_partial(ws->eng, app->name, partial_body,
		    &pa, &po, &res->stats);
	tend_engine_set_settle_hook(ws->eng, NULL, NULL);
	current_run = NULL;
	rc = pass_done(&r, rc);
out:
	tend_buf_release(&key);
	pathset_free(&ps);
	run_free(&r, skip, nskip);
	return rc;
}

