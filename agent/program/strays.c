/*
 * strays.c - an exclusive target's strays: what is inside a dir target or
 * under a git target's prefix that no entry declares. plan and check
 * report them; sync --full removes them.
 */
#define _GNU_SOURCE
#include "pass.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "fs.h"
#include "inspect.h"

/* ---- exclusive targets: what no entry declares ---- */

struct strays {
	char **names; /* declared entry names, sorted */
	size_t n, cap;
	/* the store, to ask whether an entry no source declares is still
	 * tracked (its delete pending: a killed pass's) */
	struct tend_engine *eng;
	struct tend_txn *txn;
	const char *root;
	struct tend_key container;
	const char *shown; /* the target's state path */
	bool remove;
	tend_stray_fn *fn;
	void *arg;
	size_t count;
	int rc;
};

static void
strays_add(struct strays *s, const char *name, size_t len)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 256;
		s->names = tend_xrealloc(s->names, s->cap * sizeof *s->names);
	}
	s->names[s->n++] = tend_xmemdup(name, len + 1);
	s->names[s->n - 1][len] = '\0';
}

/* Is `rel` declared, or (dir) a directory with something declared under
 * it? */
static bool
strays_declared(const struct strays *s, const char *rel, bool dir)
{
	size_t lo = 0, hi = s->n, len = strlen(rel);

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (strcmp(s->names[mid], rel) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!dir)
		return lo < s->n && strcmp(s->names[lo], rel) == 0;
	for (; lo < s->n && strncmp(s->names[lo], rel, len) == 0; lo++)
		if (s->names[lo][len] == '/')
			return true;
	return false;
}

/* Is `rel`, which no source declares, still tend's? A pass killed
 * after it forgot a vanished source and before it deleted what that
 * declared leaves such entries: the next sync deletes them, they are no
 * strays (a new user's trial: plan and check listed them twice, once as
 * "undeclared: tend sync --full removes it"). */
static bool
strays_tracked(const struct strays *s, const char *rel)
{
	struct tend_key path[2] = {s->container, tend_key_str(rel)};

	return s->txn &&
	    tend_engine_state_owned(s->eng, s->txn, s->root, path, 2);
}

/* Does the directory `leaf` of dirfd (at `rel`) hold an entry tend still
 * tracks, at any depth? */
static bool
strays_dir_tracked(struct strays *s, int dirfd, const char *leaf,
    struct tend_buf *rel, int depth)
{
	int fd = depth < 256 ? openat(dirfd, leaf, O_RDONLY | O_DIRECTORY |
	    O_NOFOLLOW | O_CLOEXEC) : -1;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	bool found = false;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	while (!found && (e = readdir(d))) {
		struct stat st;
		size_t mark = rel->len;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		tend_buf_putc(rel, '/');
		tend_buf_puts(rel, e->d_name);
		found = S_ISDIR(st.st_mode)
		    ? strays_dir_tracked(s, fd, e->d_name, rel, depth + 1)
		    : strays_tracked(s, rel->ptr);
		rel->len = mark;
		rel->ptr[mark] = '\0';
	}
	closedir(d);
	return found;
}

static void
strays_rm(int dirfd, const char *leaf, bool dir)
{
	if (dir) {
		int fd = openat(dirfd, leaf, O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC);
		DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
		struct dirent *e;

		if (!d) {
			if (fd >= 0)
				close(fd);
			return;
		}
		while ((e = readdir(d)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
				struct stat st;

				if (fstatat(fd, e->d_name, &st,
					AT_SYMLINK_NOFOLLOW) == 0)
					strays_rm(fd, e->d_name,
					    S_ISDIR(st.st_mode));
			}
		closedir(d);
	}
	unlinkat(dirfd, leaf, dir ? AT_REMOVEDIR : 0);
}

/* In path order; never follows a link: a symlink is a stray like a
 * file. */
static void
strays_walk(struct strays *s, int dirfd, struct tend_buf *rel, int depth)
{
	DIR *d = fdopendir(dirfd);
	struct dirent *e;
	char **names = NULL;
	size_t n = 0;

	if (!d) {
		close(dirfd);
		return;
	}
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			names = tend_xrealloc(names, (n + 1) * sizeof *names);
			names[n++] = tend_xstrdup(e->d_name);
		}
	if (n > 1)
		qsort(names, n, sizeof *names, cmp_str);
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		size_t mark = rel->len;

		if (fstatat(dirfd, names[i], &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		bool dir = S_ISDIR(st.st_mode);
		if (rel->len)
			tend_buf_putc(rel, '/');
		tend_buf_puts(rel, names[i]);
		if (dir && (strays_declared(s, rel->ptr, true) ||
				   strays_dir_tracked(s, dirfd, names[i], rel,
				       depth))) {
			int fd = depth < 256 ? openat(dirfd, names[i],
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
					     : -1;
			if (fd >= 0)
				strays_walk(s, fd, rel, depth + 1);
		} else if (!strays_declared(s, rel->ptr, false) &&
		    (dir || !strays_tracked(s, rel->ptr))) {
			struct tend_buf shown = TEND_BUF_INIT;

			tend_buf_printf(&shown, "%s/%s%s", s->shown, rel->ptr,
			    dir ? "/" : "");
			s->count++;
			if (s->fn)
				s->fn(shown.ptr, s->arg);
			tend_buf_release(&shown);
			if (s->remove)
				strays_rm(dirfd, names[i], dir);
		}
		rel->len = mark;
		rel->ptr[mark] = '\0';
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
}

/* A git target's: its tree under the prefix, at the ref's tip */
static bool
git_stray_declared(const char *rel, bool dir, void *arg)
{
	return strays_declared(arg, rel, dir) ||
	    (!dir && strays_tracked(arg, rel));
}

static bool
git_stray_tracked(const char *rel, void *arg)
{
	return strays_tracked(arg, rel);
}

static void
git_stray(const char *rel, bool dir, void *arg)
{
	struct strays *s = arg;
	struct tend_buf shown = TEND_BUF_INIT;

	tend_buf_printf(&shown, "%s/%s%s", s->shown, rel, dir ? "/" : "");
	s->count++;
	if (s->fn)
		s->fn(shown.ptr, s->arg);
	tend_buf_release(&shown);
}

static int
git_strays(struct tend_ws *ws, struct tend_app_config *app, struct strays *s)
{
	struct tend_buf msg = TEND_BUF_INIT, shown = TEND_BUF_INIT;
	struct tend_git_spec spec;
	struct tend_key parts[3] = {tend_key_str(app->target_path),
	    tend_key_str(app->ref), tend_key_str(app->prefix ? app->prefix : "")};
	struct tend_key k = tend_key_tuple(parts, 3);
	char *repo = path_join(ws->root, app->target_path);
	size_t n;
	int rc;

	git_spec(app, &spec, &msg);
	tend_buf_puts(&shown, "/@tend/git/");
	tend_key_format(&shown, &k);
	s->shown = shown.ptr;
	struct tend_git_sweep sw = {
		.repo = repo,
		.state = ws->state_dir,
		.ref = app->ref,
		.prefix = app->prefix ? app->prefix : "",
		.spec = &spec,
		.message = "tend: sync --full: remove what the exclusive target "
			   "does not declare",
		.remove = s->remove,
		.declared = git_stray_declared,
		.tracked = git_stray_tracked,
		.stray = git_stray,
		.arg = s,
	};
	rc = tend_git_sweep(&sw, &n);
	s->shown = NULL;
	free(repo);
	tend_buf_release(&msg);
	tend_buf_release(&shown);
	return rc;
}

int
tend_app_strays(struct tend_ws *ws, struct tend_app_config *app, bool remove,
    const struct tend_buf *also, tend_stray_fn *fn, void *arg, size_t *count)
{
	struct strays s = {.remove = remove, .fn = fn, .arg = arg};
	struct tend_buf prefix = TEND_BUF_INIT, rel = TEND_BUF_INIT;
	struct tend_buf outs = TEND_BUF_INIT;
	struct tend_txn *txn;
	struct tend_iter it;
	struct tend_bytes k, v;
	int rc, more;

	*count = 0;
	if (!app->exclusive || (app->target != TEND_TARGET_DIR &&
				   app->target != TEND_TARGET_GIT))
		return 0;
	if ((rc = tend_ws_open(ws)) ||
	    (rc = tend_store_read_begin(tend_engine_store(ws->eng), &txn)))
		return rc;
	/* what the app declared: its items' entries, as their SIG rows list
	 * them (the brake's held ones too), and its manifest */
	tend_buf_puts(&prefix, app->name);
	tend_buf_putc(&prefix, 0);
	tend_store_iter_init(&it, txn, TEND_T_SIG, prefix.ptr, prefix.len);
	while ((more = tend_store_iter_next(&it, &k, &v)) == 1) {
		const char *name;
		uint16_t len;

		/* (a long path's key is a digest: its row spells its
		 * entries out) */
		tend_buf_reset(&outs);
		sig_outs(&v, (const char *)k.data + prefix.len,
		    k.len - prefix.len, &outs);
		for (size_t pos = 0;
		     outs_next(outs.ptr, outs.len, &pos, &name, &len);)
			strays_add(&s, name, len);
	}
	tend_store_iter_finish(&it);
	tend_buf_release(&prefix);
	tend_buf_release(&outs);
	if (more < 0)
		rc = more;
	/* (the snapshot stays open for the walk: strays_tracked) */
	struct tend_key git[3] = {tend_key_str(app->target_path),
	    tend_key_str(app->ref), tend_key_str(app->prefix ? app->prefix : "")};
	s.eng = ws->eng;
	s.txn = txn;
	s.root = app->target == TEND_TARGET_GIT ? TEND_GIT : TEND_FS_DIR;
	s.container = app->target == TEND_TARGET_GIT
	    ? tend_key_tuple(git, 3) : tend_key_str(app->target_path);
	if (app->manifest && app->target == TEND_TARGET_DIR)
		strays_add(&s, app->manifest_name, strlen(app->manifest_name));
	for (size_t pos = 0; also;) {
		const char *name;
		uint16_t len;

		if (!outs_next(also->ptr, also->len, &pos, &name, &len))
			break;
		strays_add(&s, name, len);
	}
	if (s.n > 1)
		qsort(s.names, s.n, sizeof *s.names, cmp_str);
	if (app->target == TEND_TARGET_GIT) {
		if (rc == 0)
			rc = git_strays(ws, app, &s);
	} else {
		struct tend_buf shown = TEND_BUF_INIT;

		tend_buf_printf(&shown, "/@tend/dir/%s", app->target_path);
		s.shown = shown.ptr;
		char *root = path_join(ws->root, app->target_path);
		int fd = rc ? -1 : open(root, O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC);

		free(root);
		if (fd >= 0) {
			tend_buf_puts(&rel, "");
			strays_walk(&s, fd, &rel, 0);
		}
		tend_buf_release(&shown);
	}
	tend_store_read_end(txn);
	tend_buf_release(&rel);
	for (size_t i = 0; i < s.n; i++)
		free(s.names[i]);
	free(s.names);
	*count = s.count;
	return rc;
}

