/*
 * why.c - provenance and conflicts: which item of which app a component
 * is (for "why" and for messages), and the engine's component hooks that
 * name the two sources of a conflict.
 */
#define _GNU_SOURCE
#include "pass.h"

#include <stdlib.h>
#include <string.h>

#include "inspect.h"
#include "tend/status.h"

/* ---- provenance ---- */

static void
fp_short(struct tend_buf *b, const struct tend_fp *fp)
{
	tend_buf_puthex(b, fp->b, 4);
}

static int
cmp_rel_str(const void *key, const void *elem)
{
	const char *k = key;
	const struct item *it = elem;
	size_t kl = strlen(k), n = kl < it->len ? kl : it->len;
	int c = memcmp(k, it->rel, n);

	return c ? c : (kl > it->len) - (kl < it->len);
}

/* The rest of a component's display path after "/APP", or NULL when
 * it is not one of r's app. */
static const char *
app_rest(struct run *r, const char *component)
{
	size_t al = strlen(r->app->name);

	if (component[0] != '/' ||
	    strncmp(component + 1, r->app->name, al) != 0)
		return NULL;
	return component + 1 + al;
}

/* The source item of a component "/APP/@files/REL" (items are sorted
 * by path once the walk is over) */
struct item *
find_item(struct run *r, const char *component)
{
	const char *rest = app_rest(r, component);

	if (!rest || strncmp(rest, "/@files/", 8) != 0)
		return NULL;
	return bsearch(rest + 8, r->items, r->nitems, sizeof *r->items,
	    cmp_rel_str);
}

/* ---- conflicts (engine: tend_component_hooks) ---- */

/* The configured app a component belongs to, and the rest of its path */
static struct tend_app_config *
comp_app(struct tend_ws *ws, const char *component, const char **rest)
{
	for (size_t i = 0; i < ws->cfg.napps; i++) {
		const char *n = ws->cfg.apps[i].name;
		size_t len = strlen(n);

		if (component[0] == '/' && strncmp(component + 1, n, len) == 0 &&
		    (component[1 + len] == '/' || component[1 + len] == 0)) {
			*rest = component + 1 + len;
			return &ws->cfg.apps[i];
		}
	}
	return NULL;
}

/* An owner this pass did not mount (yet), of a state of `provider`: a
 * configured app's components declare into the target tend.conf names
 * now, so one of an app whose target moved (two apps that swap their
 * targets: each held the other's for ever) does not; else a source item
 * of the running app is live if the walk found it, and anything else of
 * a configured app (its manifest) is; an app gone from tend.conf is not
 * (its states are taken over, as `tend drop` would let go of them). */
static bool
comp_live(const char *component, const char *provider, void *arg)
{
	struct run *r = current_run;
	const char *rest = NULL;
	struct tend_app_config *app = comp_app(arg, component, &rest);

	if (!app)
		return false;
	struct tend_buf mt = TEND_BUF_INIT, prov = TEND_BUF_INIT;
	bool moved = false;
	if (app_target_names(arg, app, &mt, &prov)) {
		if (strncmp(rest, "/@tend/mount_target/", 20) == 0)
			moved = strcmp(mt.ptr, rest) != 0;
		else if (provider && strncmp(rest, "/@files/", 8) == 0)
			moved = strcmp(provider, prov.ptr) != 0;
	}
	tend_buf_release(&mt);
	tend_buf_release(&prov);
	if (moved)
		return false;
	if (!r || app != r->app || strncmp(rest, "/@files/", 8) != 0)
		return true;
	return have_item(r, rest + 8, strlen(rest + 8));
}

/* "/site/@files/sub/a.md" -> "src/sub/a.md" */
static void
comp_name(const char *component, struct tend_buf *out, void *arg)
{
	const char *rest;
	struct tend_app_config *app = comp_app(arg, component, &rest);

	if (app && strncmp(rest, "/@files/", 8) == 0) {
		if (strcmp(app->source, ".") != 0) {
			tend_buf_puts(out, app->source);
			tend_buf_putc(out, '/');
		}
		tend_buf_puts(out, rest + 8);
	} else if (app && strcmp(rest, "/@aggregate") == 0)
		tend_buf_printf(out, "app %s (every source)", app->name);
	else if (app && !*rest)
		tend_buf_printf(out, "app %s", app->name);
	else
		tend_buf_puts(out, component);
}

const struct tend_component_hooks comp_hooks = {comp_live, comp_name};

void
on_conflict(const struct tend_event *ev, void *arg)
{
	struct run *r = current_run;
	const char *rest = NULL;

	/* a declaration that failed (its body, or a conflict): the rows
	 * may not say what it declares now */
	if (r)
		r->failed_decls++;
	if (!r || ev->status != TEND_ECONFLICT || ev->preview ||
	    comp_app(arg, ev->component, &rest) != r->app ||
	    strncmp(rest, "/@files/", 8) != 0)
		return;
	r->conflicted = tend_xrealloc(r->conflicted,
	    (r->nconflicted + 1) * sizeof *r->conflicted);
	r->conflicted[r->nconflicted++] = tend_xstrdup(rest + 8);
}

struct tend_conflicts *
ws_conflicts(struct tend_ws *ws, const char *app)
{
	for (size_t i = 0; i < ws->nconflicts; i++)
		if (strcmp(ws->conflicts[i].app, app) == 0)
			return &ws->conflicts[i];
	ws->conflicts = tend_xrealloc(ws->conflicts,
	    (ws->nconflicts + 1) * sizeof *ws->conflicts);
	ws->conflicts[ws->nconflicts] = (struct tend_conflicts){
	    tend_xstrdup(app), NULL, 0};
	return &ws->conflicts[ws->nconflicts++];
}

/* After a pass that ran every item of the last conflicts (a full pass,
 * or a partial one given them too): this pass's conflicts replace them. */
void
keep_conflicts(struct run *r)
{
	struct tend_conflicts *k = ws_conflicts(r->ws, r->app->name);

	for (size_t i = 0; i < k->n; i++)
		free(k->rels[i]);
	free(k->rels);
	k->rels = r->conflicted;
	k->n = r->nconflicted;
	r->conflicted = NULL;
	r->nconflicted = 0;
}

int
tend_app_why(const char *component, struct tend_buf *out)
{
	struct run *r = current_run;
	const char *rest = r ? app_rest(r, component) : NULL;

	if (!rest)
		return -1;
	if (strcmp(rest, "/@aggregate") == 0) {
		tend_buf_printf(out, "aggregate of %zu source files (%llu read)",
		    r->nitems, (unsigned long long)r->res->hashed);
		return 0;
	}
	if (strncmp(rest, "/@files/", 8) != 0) {
		tend_buf_puts(out, "the app's target container");
		return 0;
	}
	const char *rel = rest + 8;
	for (size_t i = 0; i < r->nvanished; i++)
		if (strcmp(r->vanished[i], rel) == 0) {
			tend_buf_printf(out, "source %s deleted", rel);
			return 0;
		}
	struct item *it = find_item(r, component);
	if (!it)
		return -1;
	if (!it->had)
		tend_buf_printf(out, "new source %s", rel);
	else if (it->hashed && !tend_fp_equal(&it->old_fp, &it->sig.fp)) {
		tend_buf_printf(out, "source %s changed ", rel);
		fp_short(out, &it->old_fp);
		tend_buf_puts(out, " -> ");
		fp_short(out, &it->sig.fp);
	} else if (it->hashed)
		tend_buf_printf(out, "source %s touched, same content", rel);
	else if (it->sig.stamp && !stamp_logic_is(it->sig.stamp, &r->logic))
		tend_buf_puts(out, "logic changed (the app's declaration)");
	else if (r->o->full)
		tend_buf_puts(out, "full pass (--full)");
	else
		tend_buf_puts(out, "its target container changed");
	return 0;
}

