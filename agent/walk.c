/*
 * walk.c - sorted source walks with include/exclude globs and .gitignore.
 */
#define _GNU_SOURCE
#include "walk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tend/buf.h"
#include "tend/status.h"

/* Match one path against a pattern where `**` spans segments. Both are
 * '/'-separated; fnmatch(FNM_PATHNAME) handles one segment's wildcards. */
static bool
match_segments(const char *pat, const char *path)
{
	if (strncmp(pat, "**", 2) == 0 && (pat[2] == '/' || pat[2] == '\0')) {
		const char *rest = pat[2] ? pat + 3 : pat + 2;

		if (!*rest)
			return true;
		for (const char *p = path;; p++) {
			if (match_segments(rest, p))
				return true;
			p = strchr(p, '/');
			if (!p)
				return false;
		}
	}
	const char *ps = strchr(pat, '/'), *qs = strchr(path, '/');
	size_t pl = ps ? (size_t)(ps - pat) : strlen(pat);
	size_t ql = qs ? (size_t)(qs - path) : strlen(path);
	char pseg[256], qseg[256];

	if (pl >= sizeof pseg || ql >= sizeof qseg)
		return false;
	memcpy(pseg, pat, pl);
	pseg[pl] = '\0';
	memcpy(qseg, path, ql);
	qseg[ql] = '\0';
	if (fnmatch(pseg, qseg, 0) != 0)
		return false;
	if (!ps && !qs)
		return true;
	if (!ps || !qs)
		return false;
	return match_segments(ps + 1, qs + 1);
}

bool
tend_glob_match(const char *pat, const char *rel, bool is_dir)
{
	char buf[4096];
	size_t len = strlen(pat);

	if (len == 0 || len >= sizeof buf)
		return false;
	memcpy(buf, pat, len + 1);
	if (buf[len - 1] == '/') {
		if (!is_dir)
			return false;
		buf[--len] = '\0';
	}
	const char *p = buf;
	bool anchored = strchr(p, '/') != NULL;
	if (p[0] == '/')
		p++;
	if (anchored)
		return match_segments(p, rel);
	/* a bare name matches the last component at any depth */
	const char *base = strrchr(rel, '/');
	return fnmatch(p, base ? base + 1 : rel, 0) == 0;
}

struct rule {
	char *pat;   /* relative to the directory of its .gitignore */
	size_t base; /* length of that directory's prefix in rel paths */
	bool negate;
};

struct walker {
	const struct tend_walk_opts *o;
	tend_walk_fn *fn;
	void *arg;
	struct tend_buf rel;
	struct rule *rules;
	size_t nrules;
	unsigned skipped;
};

struct ent {
	const char *name; /* in the directory's name buffer */
	size_t off;
	bool dir;
	struct stat st;
};

static int
cmp_ent(const void *a, const void *b)
{
	const struct ent *x = a, *y = b;
	/* compare as if directories ended in '/' (git order) */
	const unsigned char *p = (const unsigned char *)x->name,
			    *q = (const unsigned char *)y->name;

	while (*p && *p == *q)
		p++, q++;
	unsigned cp = *p ? *p : (x->dir ? '/' : 0);
	unsigned cq = *q ? *q : (y->dir ? '/' : 0);
	return (int)cp - (int)cq;
}

static bool
ignored_by_rules(struct walker *w, const char *rel, bool is_dir)
{
	bool ign = false;

	for (size_t i = 0; i < w->nrules; i++) {
		struct rule *r = &w->rules[i];

		if (strlen(rel) < r->base)
			continue;
		if (tend_glob_match(r->pat, rel + r->base, is_dir))
			ign = !r->negate;
	}
	return ign;
}

static bool
listed(char *const *pats, size_t n, const char *rel, bool is_dir)
{
	for (size_t i = 0; i < n; i++)
		if (tend_glob_match(pats[i], rel, is_dir))
			return true;
	return false;
}

static void
load_gitignore(struct walker *w, int dirfd, size_t base)
{
	int fd = openat(dirfd, ".gitignore", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct tend_buf b = TEND_BUF_INIT;

	if (fd < 0)
		return;
	tend_buf_read_fd(&b, fd, 1 << 20);
	close(fd);
	for (char *line = b.ptr, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		size_t len = strlen(line);
		while (len && (line[len - 1] == '\r' || line[len - 1] == ' '))
			line[--len] = '\0';
		if (!len || line[0] == '#')
			continue;
		bool neg = line[0] == '!';
		w->rules = tend_xrealloc(w->rules,
		    (w->nrules + 1) * sizeof *w->rules);
		w->rules[w->nrules].pat = tend_xstrdup(line + neg);
		w->rules[w->nrules].base = base;
		w->rules[w->nrules].negate = neg;
		w->nrules++;
	}
	tend_buf_release(&b);
}

/* Takes ownership of dirfd. */
static int
walk_dir(struct walker *w, int dirfd, int depth)
{
	size_t base = w->rel.len, nrules = w->nrules, n = 0, cap = 0;
	struct ent *ents = NULL;
	struct tend_buf names = TEND_BUF_INIT; /* one allocation per dir */
	bool has_gitignore = false;
	DIR *d;
	struct dirent *e;
	int rc = 0;

	if (depth > 256 || !(d = fdopendir(dirfd))) {
		close(dirfd);
		w->skipped++;
		return 0;
	}
	if (w->o->on_dir)
		w->o->on_dir(w->o->dir_arg, w->rel.ptr ? w->rel.ptr : "");
	while ((e = readdir(d))) {
		const char *nm = e->d_name;

		if (nm[0] == '.' && (!nm[1] || (nm[1] == '.' && !nm[2])))
			continue;
		if (depth == 0 && strcmp(nm, ".git") == 0)
			continue;
		if (strcmp(nm, ".gitignore") == 0)
			has_gitignore = true;
		if (n == cap) {
			cap = cap ? cap * 2 : 32;
			ents = tend_xrealloc(ents, cap * sizeof *ents);
		}
		/* directories are known from d_type: no stat for them */
		if (e->d_type == DT_DIR) {
			ents[n].dir = true;
		} else if (e->d_type == DT_REG || e->d_type == DT_UNKNOWN) {
			if (fstatat(dirfd, nm, &ents[n].st,
				AT_SYMLINK_NOFOLLOW) != 0) {
				w->skipped++;
				continue;
			}
			if (!S_ISREG(ents[n].st.st_mode) &&
			    !S_ISDIR(ents[n].st.st_mode)) {
				w->skipped++;
				continue;
			}
			ents[n].dir = S_ISDIR(ents[n].st.st_mode);
		} else {
			w->skipped++; /* symlinks are never followed */
			continue;
		}
		ents[n].off = names.len;
		tend_buf_put(&names, nm, strlen(nm) + 1);
		n++;
	}
	for (size_t i = 0; i < n; i++)
		ents[i].name = names.ptr + ents[i].off;
	/* rules of a nested .gitignore match paths below it: skip the
	 * directory's own prefix and its '/' */
	if (w->o->gitignore && has_gitignore)
		load_gitignore(w, dirfd, base ? base + 1 : 0);
	if (n > 1)
		qsort(ents, n, sizeof *ents, cmp_ent);
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct ent *en = &ents[i];

		w->rel.len = base;
		w->rel.ptr[base] = '\0';
		if (base)
			tend_buf_putc(&w->rel, '/');
		tend_buf_puts(&w->rel, en->name);
		const char *rel = w->rel.ptr;
		if ((w->o->nskip &&
			listed(w->o->skip, w->o->nskip, rel, en->dir)) ||
		    (w->nrules && ignored_by_rules(w, rel, en->dir)) ||
		    (w->o->nexclude &&
			listed(w->o->exclude, w->o->nexclude, rel, en->dir)))
			continue;
		if (en->dir) {
			int sub = openat(dirfd, en->name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0) {
				w->skipped++;
				continue;
			}
			rc = walk_dir(w, sub, depth + 1);
			continue;
		}
		if (w->o->ninclude &&
		    !listed(w->o->include, w->o->ninclude, rel, false))
			continue;
		rc = w->fn(rel, w->rel.len, dirfd, en->name, &en->st, w->arg);
	}
	closedir(d);
	tend_buf_release(&names);
	free(ents);
	for (size_t i = nrules; i < w->nrules; i++)
		free(w->rules[i].pat);
	w->nrules = nrules;
	w->rel.len = base;
	w->rel.ptr[base] = '\0';
	return rc;
}

int
tend_walk(const char *root, const struct tend_walk_opts *o, tend_walk_fn *fn,
    void *arg, unsigned *nskipped)
{
	struct walker w = {.o = o, .fn = fn, .arg = arg};
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	w.rel = (struct tend_buf)TEND_BUF_INIT;
	if (fd < 0)
		return tend_error_set(errno == ENOENT ? TEND_ENOTFOUND
						      : TEND_ERROR,
		    "source %s: %s", root, strerror(errno));
	rc = walk_dir(&w, fd, 0);
	free(w.rules);
	tend_buf_release(&w.rel);
	if (nskipped)
		*nskipped = w.skipped;
	return rc;
}

/*
 * Step from the directory *fd (the root) down through the first `upto`
 * bytes of `rel`, each component a directory: real (no symlink), not
 * skipped, excluded or ignored; the .gitignore files on the way load
 * into w. *fd ends as the last directory's. false if a step fails.
 */
static bool
descend(struct walker *w, int *fd, const char *rel, size_t upto)
{
	const struct tend_walk_opts *o = w->o;
	bool ok = true;

	if (rel[0] == '/' || (strncmp(rel, ".git", 4) == 0 &&
				 (rel[4] == '\0' || rel[4] == '/')))
		return false;
	for (size_t i = 0; ok && i <= upto; i++) {
		if (i < upto && rel[i] != '/')
			continue;
		if (i == 0)
			return false; /* an empty component */
		char *part = strndup(rel, i);
		const char *leaf;

		if (!part)
			abort();
		leaf = strrchr(part, '/');
		leaf = leaf ? leaf + 1 : part;
		if (!*leaf || strcmp(leaf, ".") == 0 || strcmp(leaf, "..") == 0 ||
		    (o->nskip && listed(o->skip, o->nskip, part, true)) ||
		    (w->nrules && ignored_by_rules(w, part, true)) ||
		    (o->nexclude && listed(o->exclude, o->nexclude, part, true)))
			ok = false;
		if (ok) {
			int sub = openat(*fd, leaf,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (sub < 0)
				ok = false;
			else {
				if (o->gitignore)
					load_gitignore(w, sub, i + 1);
				close(*fd);
				*fd = sub;
			}
		}
		free(part);
	}
	return ok;
}

static void
rules_free(struct walker *w)
{
	for (size_t i = 0; i < w->nrules; i++)
		free(w->rules[i].pat);
	free(w->rules);
}

bool
tend_walk_includes(const char *root, const struct tend_walk_opts *o,
    const char *rel)
{
	struct walker w = {.o = o};
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	const char *slash = strrchr(rel, '/');
	const char *leaf = slash ? slash + 1 : rel;
	bool ok = fd >= 0 && *leaf && strcmp(leaf, ".") != 0 &&
	    strcmp(leaf, "..") != 0;

	if (fd < 0)
		return false;
	if (o->gitignore)
		load_gitignore(&w, fd, 0);
	if (ok && strncmp(rel, ".git", 4) == 0 && (rel[4] == '\0' ||
						       rel[4] == '/'))
		ok = false;
	/* the directories on the way, then the file itself */
	if (ok && slash)
		ok = descend(&w, &fd, rel, (size_t)(slash - rel));
	if (ok && ((o->nskip && listed(o->skip, o->nskip, rel, false)) ||
		      (w.nrules && ignored_by_rules(&w, rel, false)) ||
		      (o->nexclude && listed(o->exclude, o->nexclude, rel,
					 false)) ||
		      (o->ninclude && !listed(o->include, o->ninclude, rel,
					  false))))
		ok = false;
	close(fd);
	rules_free(&w);
	return ok;
}

int
tend_walk_sub(const char *root, const struct tend_walk_opts *o,
    const char *sub, tend_walk_fn *fn, void *arg, unsigned *nskipped)
{
	struct walker w = {.o = o, .fn = fn, .arg = arg};
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;
	size_t len = strlen(sub), depth = 1;

	w.rel = (struct tend_buf)TEND_BUF_INIT;
	if (fd < 0)
		return tend_error_set(errno == ENOENT ? TEND_ENOTFOUND
						      : TEND_ERROR,
		    "source %s: %s", root, strerror(errno));
	if (o->gitignore)
		load_gitignore(&w, fd, 0);
	for (size_t i = 0; i < len; i++)
		depth += sub[i] == '/';
	if (len && descend(&w, &fd, sub, len)) {
		tend_buf_puts(&w.rel, sub);
		/* walk_dir loads the directory's .gitignore again: it was
		 * loaded on the way down */
		rc = walk_dir(&w, fd, (int)depth);
	} else
		close(fd);
	rules_free(&w);
	tend_buf_release(&w.rel);
	if (nskipped)
		*nskipped = w.skipped;
	return rc;
}
