/*
 * walk.c - sorted source walks with include/exclude globs and .gitignore.
 */
#define _GNU_SOURCE
#include "walk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <pthread.h>
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

struct pipe;

struct walker {
	const struct tend_walk_opts *o;
	tend_walk_fn *fn;
	void *arg;
	struct tend_buf rel;
	struct rule *rules;
	size_t nrules;
	unsigned skipped;
	struct pipe *pipe; /* files go to the consumer thread, not fn */
};

static int emit_file(struct walker *w, int dirfd, const char *leaf,
    const struct stat *st);
static void emit_close(struct walker *w, int dirfd);

struct ent {
	const char *name; /* in the directory's name buffer */
	size_t off;
	bool dir;
	bool nostat; /* a regular file by d_type: the consumer stats it */
	struct stat st;
};

static bool stat_later(struct walker *w);

/*
 * Stat `name` in dirfd as the walk takes it: false, counted in *skipped,
 * when it is gone, a symlink (never followed: a file of its own with
 * o->links, else skipped and counted in *links_skipped too, if set), or
 * not a regular file (nor a directory, when `dir_ok`).
 */
static bool
take(int dirfd, const char *name, struct stat *st,
    const struct tend_walk_opts *o, bool dir_ok, unsigned *skipped,
    unsigned *links_skipped)
{
	if (fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW) != 0) {
		(*skipped)++;
		return false;
	}
	if (S_ISLNK(st->st_mode) && !o->links) {
		(*skipped)++;
		if (links_skipped)
			(*links_skipped)++;
		return false;
	}
	if (!S_ISREG(st->st_mode) && !S_ISLNK(st->st_mode) &&
	    !(dir_ok && S_ISDIR(st->st_mode))) {
		(*skipped)++;
		return false;
	}
	return true;
}


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

/* Takes ownership of dirfd: closed here, or by the consumer thread after
 * the directory's last file (emit_close). */
static int
walk_dir(struct walker *w, int dirfd, int depth)
{
	size_t base = w->rel.len, nrules = w->nrules, n = 0, cap = 0;
	struct ent *ents = NULL;
	struct tend_buf names = TEND_BUF_INIT; /* one allocation per dir */
	bool has_gitignore = false, failed = false;
	/* one buffer per thread: a directory is read whole before the walk
	 * goes down */
	static _Thread_local _Alignas(struct dirent64) char dents[32768];
	int rc = 0;

	if (depth > 256) {
		close(dirfd);
		w->skipped++;
		return 0;
	}
	if (w->o->on_dir)
		w->o->on_dir(w->o->dir_arg, w->rel.ptr ? w->rel.ptr : "");
	/* getdents64, not readdir: no DIR (a 32 KiB allocation and an
	 * fcntl per directory) */
	for (ssize_t at = 0, got = 0;;) {
		if (at >= got) {
			got = getdents64(dirfd, dents, sizeof dents);
			if (got <= 0) {
				failed = got < 0;
				break;
			}
			at = 0;
		}
		struct dirent64 *e = (struct dirent64 *)(void *)(dents + at);
		const char *nm = e->d_name;

		at += e->d_reclen;
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
		ents[n].nostat = false;
		if (e->d_type == DT_DIR) {
			ents[n].dir = true;
		} else if (e->d_type == DT_REG && stat_later(w)) {
			ents[n].dir = false;
			ents[n].nostat = true;
		} else if (e->d_type == DT_REG || e->d_type == DT_UNKNOWN ||
		    e->d_type == DT_LNK) {
			if (!take(dirfd, nm, &ents[n].st, w->o, true,
				&w->skipped, w->o->links_skipped))
				continue;
			ents[n].dir = S_ISDIR(ents[n].st.st_mode);
		} else {
			w->skipped++; /* sockets, fifos, devices */
			continue;
		}
		ents[n].off = names.len;
		tend_buf_put(&names, nm, strlen(nm) + 1);
		n++;
	}
	if (failed && n == 0) { /* not a directory, or unreadable */
		close(dirfd);
		w->skipped++;
		tend_buf_release(&names);
		free(ents);
		return 0;
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
		rc = emit_file(w, dirfd, en->name, en->nostat ? NULL : &en->st);
	}
	emit_close(w, dirfd);
	tend_buf_release(&names);
	free(ents);
	for (size_t i = nrules; i < w->nrules; i++)
		free(w->rules[i].pat);
	w->nrules = nrules;
	w->rel.len = base;
	w->rel.ptr[base] = '\0';
	return rc;
}

/*
 * The walk on two threads. A producer thread lists and stats the
 * directories (most of a walk's time is those system calls) while the
 * calling thread runs the callback on what it has listed, in the same
 * order as a walk on one thread. Files travel in chunks; a directory's fd
 * stays open until the consumer has passed its last file, then the
 * consumer closes it (a marker in the stream). Bounded: PIPE_CHUNKS full
 * chunks in flight and PIPE_FDS finished directories not yet closed.
 */
#define CHUNK_RECS 512
#define PIPE_CHUNKS 8
#define PIPE_FDS 64

struct rec {
	struct stat st;
	size_t off;  /* the path in the chunk's names */
	size_t len;
	size_t leaf; /* offset of the leaf in the path */
	int dirfd;   /* the file's directory, or the fd a marker closes */
	bool marker;
	bool need_stat; /* st is the consumer's to take (stat_later) */
};

struct chunk {
	struct chunk *next;
	size_t n, nmarkers;
	struct tend_buf names;
	struct rec recs[CHUNK_RECS];
};

struct pipe {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct chunk *head, *tail; /* published, in order */
	struct chunk *spare;       /* consumed, for reuse */
	struct chunk *cur;         /* the producer's, being filled */
	size_t nfull, fds;         /* nfull: read without the lock too */
	bool done, stop;
	/* what the consumer's own stats skipped (stat_later) */
	unsigned skipped, links_skipped;
};

/*
 * Share the stats. The producer's stats are most of a walk (an unchanged
 * tree of 100k files: 0.37 s of path lookups on its thread while the
 * consumer was busy half of that time, perf). When the consumer has
 * nothing published left to take, a regular file (d_type says so) goes
 * to it unstatted and it stats the file itself, so both threads stat;
 * when chunks pile up the producer stats them all again.
 */
static bool
stat_later(struct walker *w)
{
	return w->pipe && __atomic_load_n(&w->pipe->nfull, __ATOMIC_RELAXED) == 0;
}

static struct chunk *
chunk_get(struct pipe *p)
{
	struct chunk *c = p->spare;

	if (c)
		p->spare = c->next;
	else {
		c = tend_xmalloc(sizeof *c);
		c->names = (struct tend_buf)TEND_BUF_INIT;
	}
	c->next = NULL;
	c->n = c->nmarkers = 0;
	tend_buf_reset(&c->names);
	return c;
}

/* Hand the producer's chunk over; wait while the consumer is far behind
 * (unless it stopped the walk: emit_file sees that). */
static void
publish(struct pipe *p, bool last)
{
	pthread_mutex_lock(&p->mu);
	if (p->cur->n) {
		if (p->tail)
			p->tail->next = p->cur;
		else
			p->head = p->cur;
		p->tail = p->cur;
		__atomic_fetch_add(&p->nfull, 1, __ATOMIC_RELAXED);
		p->fds += p->cur->nmarkers;
		p->cur = NULL;
	}
	if (last)
		p->done = true;
	pthread_cond_broadcast(&p->cv);
	while (!last && !p->stop &&
	    (p->nfull >= PIPE_CHUNKS || p->fds >= PIPE_FDS))
		pthread_cond_wait(&p->cv, &p->mu);
	if (!last && !p->cur)
		p->cur = chunk_get(p);
	pthread_mutex_unlock(&p->mu);
}

static struct rec *
rec_new(struct walker *w)
{
	struct pipe *p = w->pipe;

	if (p->cur->n == CHUNK_RECS || p->cur->nmarkers >= PIPE_FDS / 2)
		publish(p, false);
	return &p->cur->recs[p->cur->n++];
}

static int
emit_file(struct walker *w, int dirfd, const char *leaf,
    const struct stat *st)
{
	if (!w->pipe)
		return w->fn(w->rel.ptr, w->rel.len, dirfd, leaf, st, w->arg);

	struct pipe *p = w->pipe;

	if (__atomic_load_n(&p->stop, __ATOMIC_RELAXED))
		return 1; /* the consumer's callback stopped the walk */
	struct rec *r = rec_new(w);
	r->need_stat = st == NULL;
	if (st)
		r->st = *st;
	r->off = p->cur->names.len;
	r->len = w->rel.len;
	r->leaf = w->rel.len - strlen(leaf); /* rel ends with the leaf */
	r->dirfd = dirfd;
	r->marker = false;
	tend_buf_put(&p->cur->names, w->rel.ptr, w->rel.len + 1);
	return 0;
}

static void
emit_close(struct walker *w, int dirfd)
{
	if (!w->pipe) {
		close(dirfd);
		return;
	}
	struct rec *r = rec_new(w);
	r->dirfd = dirfd;
	r->marker = true;
	r->need_stat = false;
	w->pipe->cur->nmarkers++;
}

struct producer {
	struct walker *w;
	int fd;
};

static void *
produce(void *arg)
{
	struct producer *pr = arg;

	walk_dir(pr->w, pr->fd, 0);
	publish(pr->w->pipe, true);
	return NULL;
}

/* A file the producer left unstatted: taken as walk_dir would (one that
 * is gone, or no longer a regular file or a symlink, is skipped) */
static bool
late_stat(struct pipe *p, const struct tend_walk_opts *o, struct rec *r,
    const char *rel)
{
	return take(r->dirfd, rel + r->leaf, &r->st, o, false, &p->skipped,
	    &p->links_skipped);
}

/* The consumer: the callback on every file, in order, then the fds. */
static int
consume(struct pipe *p, const struct tend_walk_opts *o, tend_walk_fn *fn,
    void *arg)
{
	int rc = 0;

	for (;;) {
		struct chunk *c;

		pthread_mutex_lock(&p->mu);
		while (!p->head && !p->done)
			pthread_cond_wait(&p->cv, &p->mu);
		c = p->head;
		if (c) {
			p->head = c->next;
			if (!p->head)
				p->tail = NULL;
			__atomic_fetch_sub(&p->nfull, 1, __ATOMIC_RELAXED);
			pthread_cond_broadcast(&p->cv);
		}
		pthread_mutex_unlock(&p->mu);
		if (!c)
			return rc;
		for (size_t i = 0; i < c->n; i++) {
			struct rec *r = &c->recs[i];
			const char *rel = c->names.ptr + r->off;

			if (r->marker)
				close(r->dirfd);
			else if (rc == 0 && r->need_stat &&
			    !late_stat(p, o, r, rel))
				continue;
			else if (rc == 0 &&
			    (rc = fn(rel, r->len, r->dirfd, rel + r->leaf,
				 &r->st, arg)) != 0) {
				pthread_mutex_lock(&p->mu);
				__atomic_store_n(&p->stop, true,
				    __ATOMIC_RELAXED);
				pthread_cond_broadcast(&p->cv);
				pthread_mutex_unlock(&p->mu);
			}
		}
		pthread_mutex_lock(&p->mu);
		p->fds -= c->nmarkers;
		c->next = p->spare;
		p->spare = c;
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
	}
}

static void
pipe_free(struct pipe *p)
{
	while (p->spare) {
		struct chunk *c = p->spare;

		p->spare = c->next;
		tend_buf_release(&c->names);
		free(c);
	}
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
}

/* Walk on two threads when there are two CPUs to run them. */
static int
walk_threaded(struct walker *w, int fd, bool *ran)
{
	static long ncpu;
	struct pipe p = {.cur = NULL};
	struct producer pr = {w, fd};
	pthread_t t;
	int rc;

	if (!ncpu)
		ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	*ran = false;
	if (ncpu < 2)
		return 0;
	pthread_mutex_init(&p.mu, NULL);
	pthread_cond_init(&p.cv, NULL);
	p.cur = chunk_get(&p);
	w->pipe = &p;
	if (pthread_create(&t, NULL, produce, &pr) != 0) {
		w->pipe = NULL;
		p.cur->next = p.spare;
		p.spare = p.cur;
		pipe_free(&p);
		return 0;
	}
	*ran = true;
	rc = consume(&p, w->o, w->fn, w->arg);
	pthread_join(t, NULL);
	w->skipped += p.skipped;
	if (w->o->links_skipped)
		*w->o->links_skipped += p.links_skipped;
	w->pipe = NULL;
	pipe_free(&p);
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
	bool threaded;
	rc = walk_threaded(&w, fd, &threaded);
	if (!threaded)
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
