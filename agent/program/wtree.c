/*
 * wtree.c - the agent's inotify watches of the sources, and what their
 * events make dirty.
 *
 * inotify is a hint and a full pass is the truth: changes to files become
 * incremental passes over just those paths (tend_app_sync_paths); anything
 * about directories (created, moved in or out, removed), a queue overflow
 * or a lost watch makes the app's next pass a full one, which the stat
 * signatures keep cheap. A new directory's watch is added before it is
 * scanned, so nothing created inside it is missed.
 *
 * A full pass's walk adds the watches of the directories it reads
 * (on_walk_dir); an event's new directory is watched here (watch_tree).
 * One watch may serve several apps whose sources share the directory
 * (struct wdir). At the kernel's watch limit an app is `polled` instead:
 * rescanned every 2 s. The watches of tend.conf and of plugin files are
 * watch.c's, but their events come through on_inotify too.
 */
#define _GNU_SOURCE
#include "agent_int.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#define IN_MASK (IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | \
    IN_CREATE | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

size_t
nwatches(struct agent *a)
{
	return a->ndirs;
}

static struct wdir *
wdir_find(struct agent *a, int wd)
{
	/* wds grow monotonically: binary search */
	size_t lo = 0, hi = a->ndirs;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (a->dirs[mid].wd == wd)
			return &a->dirs[mid];
		if (a->dirs[mid].wd < wd)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static void
wdir_add_ref(struct agent *a, int wd, size_t app, const char *rel)
{
	struct wdir *d = wdir_find(a, wd);

	if (!d) {
		if (a->ndirs == a->cdirs) {
			a->cdirs = a->cdirs ? a->cdirs * 2 : 64;
			a->dirs = tend_xrealloc(a->dirs,
			    a->cdirs * sizeof *a->dirs);
		}
		size_t pos = a->ndirs;
		while (pos > 0 && a->dirs[pos - 1].wd > wd)
			pos--;
		memmove(&a->dirs[pos + 1], &a->dirs[pos],
		    (a->ndirs - pos) * sizeof *a->dirs);
		a->dirs[pos] = (struct wdir){.wd = wd};
		a->ndirs++;
		d = &a->dirs[pos];
	}
	for (size_t i = 0; i < d->nrefs; i++)
		if (d->refs[i].app == app) {
			free(d->refs[i].rel);
			d->refs[i].rel = tend_xstrdup(rel);
			return;
		}
	d->refs = tend_xrealloc(d->refs, (d->nrefs + 1) * sizeof *d->refs);
	d->refs[d->nrefs].app = app;
	d->refs[d->nrefs].rel = tend_xstrdup(rel);
	d->nrefs++;
}

static void
wdir_remove(struct agent *a, int wd)
{
	struct wdir *d = wdir_find(a, wd);

	if (!d)
		return;
	for (size_t i = 0; i < d->nrefs; i++)
		free(d->refs[i].rel);
	free(d->refs);
	size_t pos = (size_t)(d - a->dirs);
	memmove(d, d + 1, (a->ndirs - pos - 1) * sizeof *d);
	a->ndirs--;
}

static bool
skipped_dir(struct agent *a, size_t app, const char *rel)
{
	struct tend_app_config *c = &a->ws->cfg.apps[app];
	struct tend_buf p = TEND_BUF_INIT;
	bool skip = false;

	if (strcmp(rel, ".git") == 0)
		return true;
	/* the target and the state directory are never watched */
	tend_buf_printf(&p, "%s%s%s", strcmp(c->source, ".") ? c->source : "",
	    strcmp(c->source, ".") && *rel ? "/" : "", rel);
	const char *ws_rel = p.ptr;
	if ((c->target == TEND_TARGET_DIR &&
		strcmp(ws_rel, c->target_path) == 0) ||
	    strcmp(ws_rel, a->ws->cfg.state) == 0)
		skip = true;
	tend_buf_release(&p);
	return skip;
}

/* The absolute path of `rel` in app's source ("" is the source). */
static void
source_path(struct tend_buf *b, struct agent *a, size_t app,
    const char *rel)
{
	tend_buf_printf(b, "%s/%s%s%s", a->ws->root,
	    a->ws->cfg.apps[app].source, *rel ? "/" : "", rel);
}

/* Watch app's source directory `rel`; false if it is not watched (the
 * limit: the app falls back to periodic rescans). */
static bool
watch_one(struct agent *a, size_t app, const char *rel)
{
	struct tend_app_config *c = &a->ws->cfg.apps[app];
	struct tend_buf abs = TEND_BUF_INIT;

	source_path(&abs, a, app, rel);
	int wd = inotify_add_watch(a->ino, abs.ptr, IN_MASK | IN_DONT_FOLLOW);
	tend_buf_release(&abs);
	if (wd < 0) {
		if (errno == ENOSPC) {
			if (!a->limit_reported)
				logf_(a, ALOG_WARN,
				    "the inotify watch limit is reached (%zu "
				    "watches): %s is rescanned every 2 s "
				    "instead; raise the limit with sysctl "
				    "fs.inotify.max_user_watches=N",
				    nwatches(a), c->name);
			a->limit_reported = true;
			a->apps[app].polled = true;
		}
		return false;
	}
	wdir_add_ref(a, wd, app, rel);
	return true;
}

/* Watch `rel` (a directory of app's source) and everything below it, as
 * a new directory needs. The watch is added before the directory is
 * listed. (A full pass's walk adds the watches of the directories it
 * reads itself: struct walk_watch.) */
static void
watch_tree(struct agent *a, size_t app, const char *rel)
{
	struct tend_buf abs = TEND_BUF_INIT;
	DIR *d;
	struct dirent *e;

	if (*rel && skipped_dir(a, app, rel))
		return;
	if (!watch_one(a, app, rel))
		return;
	source_path(&abs, a, app, rel);
	if ((d = opendir(abs.ptr))) {
		while ((e = readdir(d))) {
			if (e->d_type != DT_DIR || strcmp(e->d_name, ".") == 0 ||
			    strcmp(e->d_name, "..") == 0)
				continue;
			struct tend_buf sub = TEND_BUF_INIT;

			tend_buf_printf(&sub, "%s%s%s", rel, *rel ? "/" : "",
			    e->d_name);
			watch_tree(a, app, sub.ptr);
			tend_buf_release(&sub);
		}
		closedir(d);
	}
	tend_buf_release(&abs);
}

void
on_walk_dir(void *arg, const char *rel)
{
	struct walk_watch *ww = arg;

	if (!ww->a->apps[ww->app].polled)
		watch_one(ww->a, ww->app, rel);
}

void
mark_dirty(struct agent *a, size_t app, const char *rel)
{
	struct appstate *s = &a->apps[app];

	if (s->full)
		return;
	for (size_t i = 0; i < s->ndirty; i++)
		if (strcmp(s->dirty[i], rel) == 0)
			return;
	if (s->ndirty >= 4096) {
		s->full = true; /* a burst: a full pass is cheaper */
		return;
	}
	s->dirty = tend_xrealloc(s->dirty, (s->ndirty + 1) * sizeof *s->dirty);
	s->dirty[s->ndirty++] = tend_xstrdup(rel);
}

/* Forget the watches of app's directory `rel` and below (it moved out
 * of the source: its inode is watched no more under this name); "" is
 * the whole source. */
void
unwatch_tree(struct agent *a, size_t app, const char *rel)
{
	size_t len = strlen(rel);

	for (size_t i = 0; i < a->ndirs;) {
		struct wdir *d = &a->dirs[i];

		for (size_t k = 0; k < d->nrefs;) {
			const char *r = d->refs[k].rel;

			if (d->refs[k].app == app && strncmp(r, rel, len) == 0 &&
			    (!len || r[len] == '\0' || r[len] == '/')) {
				free(d->refs[k].rel);
				d->refs[k] = d->refs[--d->nrefs];
			} else
				k++;
		}
		if (d->nrefs) {
			i++;
			continue;
		}
		inotify_rm_watch(a->ino, d->wd);
		wdir_remove(a, d->wd); /* shifts the next one into i */
	}
}

struct move {
	uint32_t cookie;
	size_t app;
	char *rel;
	bool paired;
};

/* A regular file with one link, just created: its writer's close
 * follows. */
static bool
being_written(struct agent *a, size_t app, const char *rel)
{
	struct tend_buf abs = TEND_BUF_INIT;
	struct stat st;
	bool r;

	source_path(&abs, a, app, rel);
	r = lstat(abs.ptr, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_nlink == 1;
	tend_buf_release(&abs);
	return r;
}

/*
 * One event of a watched directory, for one app watching it. Files
 * become dirty paths; a directory created, deleted or moved becomes a
 * dirty subtree ("rel/"), which the pass expands into what was tracked
 * under it and what is there now. A directory moved out is unwatched
 * unless the same rename (cookie) brings it back in elsewhere.
 */
static void
on_event_for(struct agent *a, const struct inotify_event *ev, size_t app,
    const char *rel, struct move **moves, size_t *nmoves)
{
	struct tend_buf sub = TEND_BUF_INIT;

	if (!(ev->mask & IN_ISDIR)) {
		const char *base = strrchr(rel, '/');

		/* a new file is applied once its writer closes it
		 * (IN_CLOSE_WRITE), not half-written; a hard link or a
		 * special file has no close to wait for */
		if ((ev->mask & IN_CREATE) && being_written(a, app, rel))
			return;

		/* new ignore rules: what is synced (and watched) changes */
		if (strcmp(base ? base + 1 : rel, ".gitignore") == 0 &&
		    a->ws->cfg.apps[app].gitignore)
			a->apps[app].full = true;
		mark_dirty(a, app, rel);
		return;
	}
	if (ev->mask & IN_MOVED_FROM) {
		*moves = tend_xrealloc(*moves, (*nmoves + 1) * sizeof **moves);
		(*moves)[(*nmoves)++] = (struct move){ev->cookie, app,
		    tend_xstrdup(rel), false};
	}
	if (ev->mask & IN_MOVED_TO)
		for (size_t i = 0; i < *nmoves; i++)
			if ((*moves)[i].cookie == ev->cookie &&
			    (*moves)[i].app == app) {
				(*moves)[i].paired = true;
				logf_(a, ALOG_DEBUG, "%s: moved %s -> %s",
				    a->ws->cfg.apps[app].name, (*moves)[i].rel,
				    rel);
			}
	/* new directories are watched before the pass walks them (an
	 * inode moved within keeps its watch; its name is updated) */
	if (ev->mask & (IN_CREATE | IN_MOVED_TO))
		watch_tree(a, app, rel);
	tend_buf_printf(&sub, "%s/", rel);
	mark_dirty(a, app, sub.ptr);
	tend_buf_release(&sub);
}

void
on_inotify(struct agent *a)
{
	char buf[64 * 1024] __attribute__((aligned(8)));
	struct move *moves = NULL;
	size_t nmoves = 0;
	ssize_t n;

	while ((n = read(a->ino, buf, sizeof buf)) > 0) {
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)(void *)p;

			p += sizeof *ev + ev->len;
			if (ev->mask & IN_Q_OVERFLOW) {
				a->overflows++;
				logf_(a, ALOG_WARN, "event queue overflow: rescanning");
				for (size_t i = 0; i < a->napps; i++)
					a->apps[i].full = true;
				poke(a);
				continue;
			}
			if (ev->wd == a->wd_conf && ev->len &&
			    strcmp(ev->name, "tend.conf") == 0 &&
			    (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO))) {
				a->reload = true;
				poke(a);
			}
			for (size_t i = 0; i < a->npw && ev->len; i++)
				if (a->pwd[i] == ev->wd &&
				    strcmp(a->pname[i], ev->name) == 0 &&
				    (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO))) {
					a->plugins_changed = true;
					poke(a);
				}
			struct wdir *d = wdir_find(a, ev->wd);
			if (!d)
				continue;
			if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) {
				/* a subdirectory's parent reported it; the
				 * source root itself is another matter: moved
				 * away, its tree's watches would report the
				 * new place's events as the source's (the
				 * full pass watches what is there now) */
				size_t moved[8], nmoved = 0;

				for (size_t i = 0; i < d->nrefs; i++)
					if (!d->refs[i].rel[0]) {
						a->apps[d->refs[i].app].full = true;
						if ((ev->mask & IN_MOVE_SELF) &&
						    nmoved < 8)
							moved[nmoved++] =
							    d->refs[i].app;
					}
				if (ev->mask & IN_IGNORED)
					wdir_remove(a, ev->wd);
				/* (d is gone after this) */
				for (size_t i = 0; i < nmoved; i++)
					unwatch_tree(a, moved[i], "");
				poke(a);
				continue;
			}
			if (!ev->len)
				continue;
			/* copy the refs: watch_tree below may grow a->dirs */
			size_t nrefs = d->nrefs;
			struct wref *refs = tend_xcalloc(nrefs, sizeof *refs);
			for (size_t i = 0; i < nrefs; i++) {
				refs[i].app = d->refs[i].app;
				refs[i].rel = tend_xstrdup(d->refs[i].rel);
			}
			for (size_t i = 0; i < nrefs; i++) {
				struct tend_buf rel = TEND_BUF_INIT;

				tend_buf_printf(&rel, "%s%s%s", refs[i].rel,
				    *refs[i].rel ? "/" : "", ev->name);
				if (!(ev->mask & IN_ISDIR) ||
				    !skipped_dir(a, refs[i].app, rel.ptr))
					on_event_for(a, ev, refs[i].app, rel.ptr,
					    &moves, &nmoves);
				tend_buf_release(&rel);
				free(refs[i].rel);
			}
			free(refs);
			poke(a);
		}
	}
	/* a rename's two halves come together: a lone MOVED_FROM moved
	 * the directory out of the source */
	for (size_t i = 0; i < nmoves; i++) {
		if (!moves[i].paired)
			unwatch_tree(a, moves[i].app, moves[i].rel);
		free(moves[i].rel);
	}
	free(moves);
	arm_timer(a);
}
