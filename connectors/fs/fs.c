/*
 * fs.c - the file and directory targets.
 *
 * Reconcile is pure and compares fixed-width records (version, XXH3-128
 * of the content, mode). Sinks do all the I/O relative to directory file
 * descriptors opened one component at a time with O_NOFOLLOW, so a symlink
 * planted inside a target root (or swapped in between plan and apply)
 * makes the action fail instead of writing elsewhere.
 *
 * Writes are atomic: a temporary file in the same directory, fchmod, then
 * renameat over the name. Data is fsync'ed only with `[tend] fsync = true`
 * (the file, then its directory after the rename); by default a power loss
 * may leave an entry older than its record, which `tend check` reports and
 * `tend sync --full` repairs. Every operation that changes a target can be
 * made to fail with TEND_FAILPOINTS (tend/failpoint.h). Deletes unlink the
 * entry, then remove the parent directories inside the target that became
 * empty, if tend made them (MADE_XATTR).
 */
#define _GNU_SOURCE
#include "fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>
#ifdef SYS_openat2
#include <linux/openat2.h>
#endif

#include "tend/arena.h"
#include "tend/failpoint.h"
#include "tend/status.h"
#include "tend/plugin.h"
#include "tend/target.h"

#define REC_VERSION 1
#define REC_LEN (1 + 16 + 4)
#define MAX_DEPTH 64

/* true when the operation is made to fail (errno set) by TEND_FAILPOINTS */
#define INJECTED(point, subject) (tend_failpoint(point, subject) != 0)

/* A directory where an entry was written is the user's (or another
 * tool's): never removed to make room (check and sync say so) */
#define WAY_FIX "tend does not remove what it did not write: if it holds " \
	"entries of this app, two of its sources collide (rename one), else " \
	"move it away, then tend sync"
#define WAY_FIX_FILE "tend replaces only what it knows it wrote " \
	"(move it away, then tend sync)"
#define IN_THE_WAY TEND_CHECK_IN_THE_WAY ": a directory is there now: " WAY_FIX
/* A file above an entry's path may be the user's, or an entry of the
 * same app (two sources collide: x and x/y) */
#define ABOVE_FIX "tend does not remove what it did not write: if it is " \
	"an entry of this app, two of its sources collide (rename one), " \
	"else move it away, then tend sync"

/* ---- encodings ---- */

static void
put_u32(struct tend_buf *b, uint32_t v)
{
	unsigned char x[4] = {(unsigned char)v, (unsigned char)(v >> 8),
	    (unsigned char)(v >> 16), (unsigned char)(v >> 24)};

	tend_buf_put(b, x, 4);
}

static uint32_t
get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24;
}

void
tend_fs_encode_dir(struct tend_buf *out, const struct tend_dir_spec *s)
{
	tend_buf_putc(out, 1);
	put_u32(out, s->file_mode);
	tend_buf_putc(out, s->exclusive);
	tend_buf_putc(out, s->manifest);
}

static bool
decode_dir(const void *p, size_t len, struct tend_dir_spec *s)
{
	const uint8_t *b = p;

	if (len != 7 || b[0] != 1)
		return false;
	s->file_mode = get_u32(b + 1);
	s->exclusive = b[5] != 0;
	s->manifest = b[6] != 0;
	return true;
}

void
tend_fs_encode_entry(struct tend_buf *out, const struct tend_entry_spec *e)
{
	uint64_t sz = e->size;

	tend_buf_putc(out, 1);
	tend_buf_put(out, e->fp.b, 16);
	for (int i = 0; i < 8; i++)
		tend_buf_putc(out, (int)(sz >> (8 * i)) & 0xff);
	put_u32(out, e->mode);
	tend_buf_puts(out, e->src);
}

static bool
decode_entry(const void *p, size_t len, struct tend_entry_spec *e,
    struct tend_arena *a)
{
	const uint8_t *b = p;

	if (len < 1 + 16 + 8 + 4 || b[0] != 1)
		return false;
	memcpy(e->fp.b, b + 1, 16);
	e->size = 0;
	for (int i = 0; i < 8; i++)
		e->size |= (uint64_t)b[17 + i] << (8 * i);
	e->mode = get_u32(b + 25);
	char *src = tend_arena_alloc(a, len - 29 + 1);
	memcpy(src, b + 29, len - 29);
	src[len - 29] = '\0';
	e->src = src;
	return true;
}

struct tend_fp
tend_fs_link_fp(const char *text)
{
	struct tend_hasher h;

	tend_hasher_init(&h);
	tend_hasher_str(&h, "tend-symlink");
	tend_hasher_str(&h, text);
	return tend_hasher_final(&h);
}

static void
make_record(uint8_t rec[REC_LEN], const struct tend_fp *fp, unsigned mode)
{
	rec[0] = REC_VERSION;
	memcpy(rec + 1, fp->b, 16);
	rec[17] = (uint8_t)mode;
	rec[18] = (uint8_t)(mode >> 8);
	rec[19] = 0;
	rec[20] = 0;
}

/* ---- names ---- */

int
tend_fs_check_name(const char *name, size_t len)
{
	size_t seg = 0;

	if (len == 0)
		return tend_error_set(TEND_EINVALID, "empty entry name");
	if (len > 4095)
		return tend_error_set(TEND_EINVALID, "entry name too long");
	if (memchr(name, '\0', len))
		return tend_error_set(TEND_EINVALID,
		    "entry name contains a NUL byte");
	if (name[0] == '/')
		return tend_error_set(TEND_EINVALID,
		    "entry name \"%.*s\" is absolute", (int)len, name);
	if (name[len - 1] == '/')
		return tend_error_set(TEND_EINVALID,
		    "entry name \"%.*s\" ends with '/'", (int)len, name);
	for (size_t i = 0; i <= len; i++) {
		if (i < len && name[i] != '/') {
			if (++seg > 255)
				return tend_error_set(TEND_EINVALID,
				    "entry name \"%.*s\": a component is longer "
				    "than 255 bytes",
				    (int)(len > 64 ? 64 : len), name);
			continue;
		}
		const char *s = name + i - seg;
		if (seg == 0)
			return tend_error_set(TEND_EINVALID,
			    "entry name \"%.*s\" has an empty component",
			    (int)len, name);
		if ((seg == 1 && s[0] == '.') ||
		    (seg == 2 && s[0] == '.' && s[1] == '.'))
			return tend_error_set(TEND_EINVALID,
			    "entry name \"%.*s\" has a \"%.*s\" component",
			    (int)len, name, (int)seg, s);
		seg = 0;
	}
	return 0;
}

/* ---- safe directory walking ---- */

/*
 * A directory tend makes is marked with an extended attribute as it is
 * made: only a marked one is removed once emptied (a target root by a
 * drop, an entry's parents by its delete). One that was there before
 * tend wrote into it is the user's, and stays. An entry's directories
 * are made and marked in the staging directory, then renamed into place
 * (make_dir): a kill leaves a marked one, or one in the staging
 * directory (swept). Made in place (no staging directory on the same
 * file system, a container's root), a kill between the mkdir and the
 * mark leaves it unmarked: kept, never lost. On a file system without
 * user attributes nothing can be marked or told apart: emptied
 * directories are removed, as before the mark.
 */
#define MADE_XATTR "user.tend.made"

static void
mark_made(int fd)
{
	(void)fsetxattr(fd, MADE_XATTR, "1", 1, 0);
}

static bool
made_by_tend(int fd)
{
	return fgetxattr(fd, MADE_XATTR, NULL, 0) >= 0 || errno == ENOTSUP;
}

/* The directories on a path under a root, opened one component at a time
 * without following symlinks. Every level's fd is kept (fd[0] = a dup of
 * the root) so deletes can remove empty parents without re-resolving. */
struct chain {
	int fd[MAX_DEPTH + 1];
	char *seg[MAX_DEPTH + 1];
	int n; /* fds open: fd[n-1] is the deepest */
	int stage; /* the staging directory's fd + 1, or 0: see make_dir */
};

/* Close the levels from `k` down: the chain keeps its first k. */
static void
chain_trim(struct chain *c, int k)
{
	while (c->n > k) {
		c->n--;
		close(c->fd[c->n]);
		free(c->seg[c->n]);
	}
}

static void
chain_close(struct chain *c)
{
	chain_trim(c, 0);
}

/* Remove the chain's directories from level `top` up to level `bottom`
 * (1 at least: level 0 is the root's fd) while each is empty and tend
 * made it (MADE_XATTR). True if any went: the chain holds removed ones. */
static bool
prune_made(struct chain *c, int top, int bottom)
{
	bool pruned = false;

	for (int i = top; i >= bottom && i > 0; i--) {
		if (!made_by_tend(c->fd[i]) ||
		    unlinkat(c->fd[i - 1], c->seg[i], AT_REMOVEDIR) != 0)
			break;
		pruned = true;
	}
	return pruned;
}

/* open-dir=stop parks here: the TOCTOU tests swap a symlink in under us */
static int
open_dir_at(int parent, const char *seg)
{
	return INJECTED("open-dir", seg)
		? -1
		: openat(parent, seg,
		      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

static void tmp_name(char *buf, size_t size);

/* Make the directory `seg` in `parent`: 1 made and marked, 2 made here
 * (to be marked: no staging directory on its file system, `stage` 0),
 * 0 somebody else made it meanwhile, -1 an error (errno). Made in the
 * staging directory, marked, then renamed into place: never in the
 * target unmarked. */
static int
make_dir(int parent, const char *seg, int stage)
{
	char tmp[64];
	int e;

	if (stage > 0) {
		tmp_name(tmp, sizeof tmp);
		if (mkdirat(stage - 1, tmp, 0755) == 0) {
			int fd = open_dir_at(stage - 1, tmp);

			if (fd >= 0) {
				mark_made(fd);
				close(fd);
				if (renameat2(stage - 1, tmp, parent, seg,
					RENAME_NOREPLACE) == 0)
					return 1;
			}
			e = errno;
			unlinkat(stage - 1, tmp, AT_REMOVEDIR);
			if (e == EEXIST)
				return 0;
			/* another file system (or no renameat2): here */
			if (fd >= 0 && e != EXDEV && e != EINVAL &&
			    e != ENOSYS) {
				errno = e;
				return -1;
			}
		}
	}
	if (mkdirat(parent, seg, 0755) == 0)
		return 2;
	return errno == EEXIST ? 0 : -1;
}

/* Open one component `seg` under `parent`: an existing directory is
 * opened at once, a missing one made first when `create`. */
static int
open_seg(int parent, const char *seg, const char *rel, size_t upto,
    bool create, int stage, int *out)
{
	int fd = open_dir_at(parent, seg);

	if (fd < 0 && errno == ENOENT && create) {
		int made = -1;

		if (INJECTED("mkdir", seg) ||
		    (made = make_dir(parent, seg, stage)) < 0) {
			int e = errno;
			return tend_error_set(e == ENOENT ? TEND_ENOTFOUND
							  : TEND_ERROR,
			    "mkdir %.*s: %s", (int)upto, rel, strerror(e));
		}
		fd = open_dir_at(parent, seg);
		if (fd >= 0 && made == 2)
			mark_made(fd);
	}
	if (fd < 0) {
		int e = errno;
		struct stat st;
		bool link = fstatat(parent, seg, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISLNK(st.st_mode);

		/* something not tend's blocks the path: TEND_ECONFLICT
		 * (check says it is in the way) */
		if (link || e == ELOOP)
			return tend_error_set(TEND_ECONFLICT,
			    "%.*s is a symbolic link: refusing to follow it "
			    "out of the target (move it away, then tend sync)",
			    (int)upto, rel);
		if (e == ENOTDIR)
			return tend_error_set(TEND_ECONFLICT,
			    "%.*s is not a directory: " ABOVE_FIX, (int)upto,
			    rel);
		return tend_error_set(e == ENOENT ? TEND_ENOTFOUND : TEND_ERROR,
		    "open %.*s: %s", (int)upto, rel, strerror(e));
	}
	*out = fd;
	return 0;
}

/*
 * Make `c` hold the directories of `rel`, keeping the leading ones it
 * holds already (consecutive entries of a batch share their parents: no
 * system call for those). Components that start before byte `clen` are
 * made when missing if `create_c`, the others if `create`. *nc (may be
 * NULL) gets how many fds the first `clen` bytes take. On failure the
 * chain is closed.
 */
static int
chain_walk(struct chain *c, int rootfd, const char *rel, size_t len,
    size_t clen, bool create_c, bool create, int *nc)
{
	int k = 1, rc;

	if (c->n == 0) {
		if ((c->fd[0] = fcntl(rootfd, F_DUPFD_CLOEXEC, 0)) < 0)
			return tend_error_set(TEND_ERROR, "dup: %s",
			    strerror(errno));
		c->seg[0] = NULL;
		c->n = 1;
	}
	if (nc)
		*nc = 1;
	for (size_t i = 0; i < len;) {
		size_t j = i;
		while (j < len && rel[j] != '/')
			j++;
		if (j == i || (j - i == 1 && rel[i] == '.')) {
			i = j + 1;
			continue;
		}
		if (k > MAX_DEPTH) {
			chain_close(c);
			return tend_error_set(TEND_EINVALID, "%.*s: too deep",
			    (int)len, rel);
		}
		if (k < c->n && strlen(c->seg[k]) == j - i &&
		    memcmp(c->seg[k], rel + i, j - i) == 0) {
			/* held already */
		} else {
			/* what the chain holds below here is another path */
			chain_trim(c, k);
			char *seg = strndup(rel + i, j - i);
			int fd = -1;

			if (!seg)
				abort();
			rc = open_seg(c->fd[k - 1], seg, rel, j,
			    i < clen ? create_c : create, c->stage, &fd);
			if (rc) {
				free(seg);
				chain_close(c);
				return rc;
			}
			c->fd[k] = fd;
			c->seg[k] = seg;
			c->n = k + 1;
		}
		k++;
		if (nc && i < clen)
			*nc = k;
		i = j + 1;
	}
	chain_trim(c, k); /* rel may be a prefix of what was held */
	return 0;
}

/* Open the directory `rel` ("" or "." is the root itself) under rootfd,
 * one component at a time without following symlinks; mkdir missing
 * ones when `create`. */
static int
chain_open(struct chain *c, int rootfd, const char *rel, size_t len,
    bool create)
{
	c->n = 0;
	return chain_walk(c, rootfd, rel, len, len, create, create, NULL);
}

/* Remove everything inside dirfd, never following a symlink. */
static int
wipe(int dirfd, int depth)
{
	DIR *d;
	struct dirent *e;
	int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0), rc = 0;

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return tend_error_set(TEND_ERROR, "opendir: %s",
		    strerror(errno));
	}
	while ((e = readdir(d))) {
		struct stat st;

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd, e->d_name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0 || depth > 256) {
				if (sub >= 0)
					close(sub);
				rc = tend_error_set(TEND_ERROR, "open %s: %s",
				    e->d_name, strerror(errno));
				continue;
			}
			if (wipe(sub, depth + 1) != 0)
				rc = TEND_ERROR;
			close(sub);
			if (unlinkat(dirfd, e->d_name, AT_REMOVEDIR) != 0)
				rc = tend_error_set(TEND_ERROR, "rmdir %s: %s",
				    e->d_name, strerror(errno));
		} else if (INJECTED("unlink", e->d_name) ||
		    (unlinkat(dirfd, e->d_name, 0) != 0 && errno != ENOENT))
			rc = tend_error_set(TEND_ERROR, "unlink %s: %s",
			    e->d_name, strerror(errno));
	}
	closedir(d);
	return rc;
}

static int
open_root(struct tend_context *ctx, int *out)
{
	const char *ws = tend_context_get(ctx, "workspace");

	if (!ws)
		return tend_error_set(TEND_ENOTFOUND,
		    "fs: no \"workspace\" resource");
	*out = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*out < 0)
		return tend_error_set(TEND_ERROR, "open workspace %s: %s", ws,
		    strerror(errno));
	return 0;
}

/* ---- handlers ---- */

struct fs_handler {
	struct tend_handler base;
	char *rel; /* container: its path in the workspace; NULL for roots */
	struct tend_dir_spec spec;
};

struct dir_action {
	char *rel;
	bool del;
	bool wipe; /* destructive, or deleting an exclusive container */
	struct tend_dir_spec spec;
};

struct entry_action {
	const char *dir; /* container path ("" for root files) */
	char *name;
	bool del;
	bool prune_parents; /* remove emptied parents (not for root files) */
	/* no write of it was ever confirmed: what is at the name is not
	 * tend's unless it holds the desired record or one of `prev` */
	bool repair; /* sync --full of an applied record: look first */
	bool fresh;
	const uint8_t *prev; /* fresh: nprev records of REC_LEN */
	size_t nprev;
	struct tend_entry_spec spec;
};

static void dir_apply(struct tend_sink *, struct tend_context *,
    void *const *, size_t, struct tend_apply_result *);
static void entry_apply(struct tend_sink *, struct tend_context *,
    void *const *, size_t, struct tend_apply_result *);

static struct tend_sink dir_sink = {.apply = dir_apply, .name = "tend/dir"};
static struct tend_sink entry_sink = {.apply = entry_apply,
    .name = "tend/entry"};

static const struct tend_handler_ops entry_ops;

static struct tend_handler *
entry_handler(const char *rel, const struct tend_dir_spec *spec)
{
	struct fs_handler *h = calloc(1, sizeof *h);

	if (!h)
		abort();
	tend_handler_init(&h->base, &entry_ops);
	h->rel = strdup(rel);
	if (spec)
		h->spec = *spec;
	return &h->base;
}

static void
fs_destroy(struct tend_handler *base)
{
	struct fs_handler *h = (struct fs_handler *)(void *)base;

	free(h->rel);
	free(h);
}

static char *
key_text(const struct tend_key *k, struct tend_arena *a)
{
	char *s = tend_arena_alloc(a, k->u.s.len + 1);

	memcpy(s, k->u.s.ptr, k->u.s.len);
	s[k->u.s.len] = '\0';
	return s;
}

static int
entry_reconcile(struct tend_handler *base, const struct tend_reconcile_in *in,
    struct tend_reconcile_out *out)
{
	struct fs_handler *h = (struct fs_handler *)(void *)base;
	struct entry_action *a;
	uint8_t rec[REC_LEN];
	int rc;

	if (in->key->kind != TEND_KEY_STR)
		return tend_error_set(TEND_EINVALID, "fs: keys are paths");
	if ((rc = tend_fs_check_name(in->key->u.s.ptr, in->key->u.s.len)))
		return rc;
	a = tend_arena_zalloc(in->arena, sizeof *a);
	a->dir = h->rel ? h->rel : "";
	a->name = key_text(in->key, in->arena);
	a->prune_parents = h->rel != NULL;
	if (!in->desired) {
		if (in->nprev == 0 && !in->prev_may_be_missing)
			return 0;
		a->del = true;
		/* a state never written (its first write failed, or was cut
		 * short): what is at its name is tend's only if it holds one
		 * of its records (leave_foreign) */
		if ((a->fresh = in->prev_never_applied) && in->nprev)
			a->prev = tend_reconcile_prev_copy(in, REC_LEN,
			    &a->nprev);
		out->action = a;
		out->sink = &entry_sink;
		out->record_absent = true;
		return 0;
	}
	if (!decode_entry(in->desired, in->desired_len, &a->spec, in->arena))
		return tend_error_set(TEND_EINVALID, "fs: bad entry spec");
	if (h->spec.file_mode && !S_ISLNK(a->spec.mode))
		a->spec.mode = h->spec.file_mode;
	make_record(rec, &a->spec.fp, a->spec.mode);
	if (tend_reconcile_settled(in, rec, REC_LEN))
		return 0;
	a->fresh = in->nprev == 0 || in->prev_never_applied;
	a->repair = !a->fresh && tend_reconcile_repairs(in, rec, REC_LEN);
	if (a->fresh && in->nprev)
		a->prev = tend_reconcile_prev_copy(in, REC_LEN, &a->nprev);
	out->action = a;
	out->sink = &entry_sink;
	out->record.data = tend_arena_memdup(in->arena, rec, REC_LEN);
	out->record.len = REC_LEN;
	return 0;
}

static int
hash_fd(int fd, struct tend_fp *out, uint64_t *size)
{
	struct tend_hasher h;
	char buf[1 << 16];
	ssize_t n;

	*size = 0;
	tend_hasher_init(&h);
	tend_hasher_begin_stream(&h);
	while ((n = read(fd, buf, sizeof buf)) > 0) {
		tend_hasher_raw(&h, buf, (size_t)n);
		*size += (uint64_t)n;
	}
	if (n < 0)
		return -1;
	*out = tend_hasher_final(&h);
	return 0;
}

/*
 * Does `leaf` in `dfd` hold `record` (REC_LEN bytes)? 0 if it does,
 * TEND_ECONFLICT and why if not (TEND_CHECK_ABSENT when nothing is
 * there). tend check and a first write's may_replace ask this one
 * question, so what plan says is in the way is what sync leaves.
 */
static int
compare_leaf(int dfd, const char *leaf, const uint8_t *record,
    struct tend_buf *why)
{
	struct stat st;
	int rc = 0;
	unsigned want = (unsigned)record[17] | (unsigned)record[18] << 8;

	if (fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		tend_buf_puts(why, errno == ENOENT ? TEND_CHECK_ABSENT :
		    strerror(errno));
		rc = TEND_ECONFLICT;
	} else if (S_ISLNK(want)) {
		char text[PATH_MAX];
		ssize_t len = S_ISLNK(st.st_mode) ? readlinkat(dfd, leaf, text,
		    sizeof text - 1) : -1;
		struct tend_fp fp;

		if (len >= 0) {
			text[len] = '\0';
			fp = tend_fs_link_fp(text);
		}
		if (S_ISDIR(st.st_mode)) {
			tend_buf_puts(why, IN_THE_WAY);
			rc = TEND_ECONFLICT;
		} else if (!S_ISLNK(st.st_mode)) {
			tend_buf_puts(why, "not a symlink");
			rc = TEND_ECONFLICT;
		} else if (len < 0 || memcmp(fp.b, record + 1, 16) != 0) {
			tend_buf_puts(why, "the link points elsewhere");
			rc = TEND_ECONFLICT;
		}
	} else if (S_ISDIR(st.st_mode)) {
		tend_buf_puts(why, IN_THE_WAY);
		rc = TEND_ECONFLICT;
	} else if (!S_ISREG(st.st_mode)) {
		tend_buf_puts(why, "not a regular file");
		rc = TEND_ECONFLICT;
	} else {
		int fd = openat(dfd, leaf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		struct tend_fp fp;
		uint64_t size;

		if (fd < 0 || hash_fd(fd, &fp, &size) != 0) {
			tend_buf_printf(why, "unreadable: %s", strerror(errno));
			rc = TEND_ECONFLICT;
		} else if (memcmp(fp.b, record + 1, 16) != 0) {
			tend_buf_puts(why, "content differs");
			rc = TEND_ECONFLICT;
		} else if ((st.st_mode & 07777) != (want & 07777)) {
			tend_buf_printf(why, "mode %04o, expected %04o",
			    (unsigned)(st.st_mode & 07777), want & 07777);
			rc = TEND_ECONFLICT;
		}
		if (fd >= 0)
			close(fd);
	}
	return rc;
}

/*
 * Is there surely nothing at WS/DIR/NAME? One openat2 that crosses no
 * symlink: ENOENT then means absent. false when unsure (no openat2, a
 * symlink on the way, any other error): the careful walk decides. Most
 * keys a plan asks about (a first sync) are absent: this is their one
 * syscall, where the walk opens the workspace and each directory.
 */
static bool
surely_absent(const char *ws, const char *dir, const char *name)
{
#ifdef SYS_openat2
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	struct tend_buf path = TEND_BUF_INIT;
	long fd;

	tend_buf_printf(&path, "%s/%s%s%s", ws, dir, dir[0] ? "/" : "", name);
	fd = syscall(SYS_openat2, AT_FDCWD, path.ptr, &how, sizeof how);
	int e = errno;
	tend_buf_release(&path);
	if (fd >= 0)
		close((int)fd);
	return fd < 0 && e == ENOENT;
#else
	(void)ws, (void)dir, (void)name;
	return false;
#endif
}

static int
entry_check(struct tend_handler *base, struct tend_context *ctx,
    const struct tend_key *key, const struct tend_bytes *record,
    struct tend_buf *why)
{
	struct fs_handler *h = (struct fs_handler *)(void *)base;
	struct chain c = {0};
	const char *dir = h->rel ? h->rel : "";
	char name[4096];
	int root = -1, rc;

	if (key->kind != TEND_KEY_STR || key->u.s.len >= sizeof name ||
	    record->len != REC_LEN)
		return tend_error_set(TEND_EINVALID, "fs: bad record");
	memcpy(name, key->u.s.ptr, key->u.s.len);
	name[key->u.s.len] = '\0';
	const char *ws = tend_context_get(ctx, "workspace");
	if (ws && surely_absent(ws, dir, name)) {
		tend_buf_puts(why, TEND_CHECK_ABSENT);
		return TEND_ECONFLICT;
	}
	if ((rc = open_root(ctx, &root)))
		return rc;
	char *slash = strrchr(name, '/');
	struct tend_buf parent = TEND_BUF_INIT;
	tend_buf_puts(&parent, dir);
	if (slash) {
		tend_buf_putc(&parent, '/');
		tend_buf_put(&parent, name, (size_t)(slash - name));
	}
	const char *leaf = slash ? slash + 1 : name;
	rc = chain_open(&c, root, parent.ptr, parent.len, false);
	tend_buf_release(&parent);
	close(root);
	if (rc == TEND_ENOTFOUND) {
		tend_error_clear();
		tend_buf_puts(why, TEND_CHECK_ABSENT);
		chain_close(&c);
		return TEND_ECONFLICT;
	}
	if (rc == TEND_ECONFLICT) {
		/* a symlink or a file where a directory of the entry's
		 * should be: every sync fails on it until it is moved */
		tend_buf_printf(why, TEND_CHECK_IN_THE_WAY ": %s",
		    tend_error_last());
		tend_error_clear();
		chain_close(&c);
		return TEND_ECONFLICT;
	}
	if (rc) {
		chain_close(&c);
		return rc;
	}
	rc = compare_leaf(c.fd[c.n - 1], leaf, record->data, why);
	chain_close(&c);
	return rc;
}

static const struct tend_handler_ops manifest_ops;

/* A directory offers one attachment, "manifest": a file in it that lists
 * every entry; reconciled like an entry, in its own namespace. */
static size_t
entry_attachments(struct tend_handler *base, struct tend_attachment *out,
    size_t max)
{
	struct fs_handler *h = (struct fs_handler *)(void *)base;
	struct fs_handler *m;

	if (max < 1 || !h->rel)
		return 0;
	if (!(m = calloc(1, sizeof *m)))
		abort();
	tend_handler_init(&m->base, &manifest_ops);
	m->rel = strdup(h->rel);
	m->spec = h->spec;
	m->spec.file_mode = 0; /* the manifest's own mode is declared */
	out[0].type = "manifest";
	out[0].handler = &m->base;
	return 1;
}

static const struct tend_handler_ops entry_ops = {
	.abi = TEND_TARGET_ABI,
	.kind = "tend/entry",
	.reconcile = entry_reconcile,
	.attachments = entry_attachments,
	.check = entry_check,
	.destroy = fs_destroy,
	.flags = TEND_HANDLER_KEEPS_FOREIGN,
};

static const struct tend_handler_ops manifest_ops = {
	.abi = TEND_TARGET_ABI,
	.kind = "tend/manifest",
	.reconcile = entry_reconcile,
	.check = entry_check,
	.destroy = fs_destroy,
	.flags = TEND_HANDLER_KEEPS_FOREIGN,
};

static int
dir_reconcile(struct tend_handler *base, const struct tend_reconcile_in *in,
    struct tend_reconcile_out *out)
{
	struct dir_action *a;
	struct tend_dir_spec spec, old;
	int rc;

	(void)base;
	if (in->key->kind != TEND_KEY_STR)
		return tend_error_set(TEND_EINVALID, "fs: keys are paths");
	if (!(in->key->u.s.len == 1 && in->key->u.s.ptr[0] == '.') &&
	    (rc = tend_fs_check_name(in->key->u.s.ptr, in->key->u.s.len)))
		return rc;
	a = tend_arena_zalloc(in->arena, sizeof *a);
	a->rel = key_text(in->key, in->arena);
	out->action = a;
	out->sink = &dir_sink;
	if (!in->desired) {
		/* its entries went one by one (dir_open_child); what else
		 * is in it is not tend's, exclusive or not: it stays (a
		 * drop deletes what the app wrote) */
		a->del = true;
		out->record_absent = true;
		return 0;
	}
	if (!decode_dir(in->desired, in->desired_len, &spec))
		return tend_error_set(TEND_EINVALID, "fs: bad directory spec");
	for (size_t i = 0; i < in->nprev; i++) {
		if (!decode_dir(in->prev[i].data, in->prev[i].len, &old))
			continue;
		/* exclusive switched on: rebuilt from declared entries only */
		if (spec.exclusive && !old.exclusive)
			out->invalidation = TEND_INVALIDATE_DESTRUCTIVE;
		else if (old.file_mode != spec.file_mode &&
		    out->invalidation == TEND_INVALIDATE_NONE)
			out->invalidation = TEND_INVALIDATE_LOSSY;
	}
	a->wipe = out->invalidation == TEND_INVALIDATE_DESTRUCTIVE;
	a->spec = spec;
	out->record.data = tend_arena_memdup(in->arena, in->desired,
	    in->desired_len);
	out->record.len = in->desired_len;
	return 0;
}

static struct tend_handler *
dir_open_child(struct tend_handler *h, const struct tend_key *key,
    const struct tend_bytes *record)
{
	struct tend_dir_spec spec = {0};
	char rel[4096];

	(void)h;
	if (key->kind != TEND_KEY_STR || key->u.s.len >= sizeof rel)
		return NULL;
	if (record && !decode_dir(record->data, record->len, &spec))
		return NULL;
	memcpy(rel, key->u.s.ptr, key->u.s.len);
	rel[key->u.s.len] = '\0';
	return entry_handler(rel, &spec);
}

static struct tend_handler *
dir_preview_child(struct tend_handler *h, const struct tend_key *key,
    const void *desired, size_t len)
{
	struct tend_bytes rec = {desired, len};

	return dir_open_child(h, key, desired ? &rec : NULL);
}

static const struct tend_handler_ops dir_ops = {
	.abi = TEND_TARGET_ABI,
	.kind = "tend/dir",
	.reconcile = dir_reconcile,
	.preview_child = dir_preview_child,
	.open_child = dir_open_child,
	.destroy = fs_destroy,
};

static const struct tend_handler_ops file_ops = {
	.abi = TEND_TARGET_ABI,
	.kind = "tend/file",
	.reconcile = entry_reconcile,
	.check = entry_check,
	.destroy = fs_destroy,
	.flags = TEND_HANDLER_KEEPS_FOREIGN,
};

/* ---- sinks ---- */

/* A target directory that stays when its app goes: what is in it is
 * not tend's (its entries went first); the reports say so, naming a few */
static void
say_kept(struct tend_apply_result *r, int dirfd)
{
	struct tend_buf names = TEND_BUF_INIT;
	int fd = dup(dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	size_t n = 0;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (n++ < 3)
			tend_buf_printf(&names, "%s%s%s", n > 1 ? ", " : "",
			    e->d_name, e->d_type == DT_DIR ? "/" : "");
	}
	closedir(d);
	/* it stays: its state goes ("forgotten", not "deleted") */
	r->left = n > 0;
	if (n)
		tend_apply_note(r, "stays, with what tend did not write in it "
		    "(%zu entr%s left: %s%s)", n, n == 1 ? "y" : "ies",
		    names.ptr, n > 3 ? ", ..." : "");
	tend_buf_release(&names);
}

static void
dir_apply(struct tend_sink *sink, struct tend_context *ctx,
    void *const *actions, size_t n, struct tend_apply_result *results)
{
	int root = -1;

	(void)sink;
	if (open_root(ctx, &root)) {
		for (size_t i = 0; i < n; i++)
			tend_apply_fail(&results[i], TEND_ERROR, "%s",
			    tend_error_last());
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct dir_action *a = actions[i];
		struct chain c = {0};
		int rc = chain_open(&c, root, a->rel, strlen(a->rel), !a->del);

		if (a->del) {
			if (rc == TEND_ENOTFOUND) {
				chain_close(&c);
				continue; /* gone already */
			}
			if (rc == 0 && a->wipe)
				rc = wipe(c.fd[c.n - 1], 0);
			/* a non-exclusive directory keeps what tend did not
			 * write: remove it only if it is empty now, and the
			 * parents tend made for it that it leaves empty */
			bool gone = false;
			if (rc == 0 && c.n > 1 && made_by_tend(c.fd[c.n - 1])) {
				gone = unlinkat(c.fd[c.n - 2], c.seg[c.n - 1],
				    AT_REMOVEDIR) == 0;
				if (!gone && errno != ENOTEMPTY &&
				    errno != EEXIST && errno != ENOENT)
					rc = tend_error_set(TEND_ERROR,
					    "rmdir %s: %s", a->rel,
					    strerror(errno));
			}
			if (gone)
				prune_made(&c, c.n - 2, 1);
			else if (rc == 0 && c.n > 1)
				say_kept(&results[i], c.fd[c.n - 1]);
		} else if (rc == 0) {
			if (a->wipe)
				rc = wipe(c.fd[c.n - 1], 0);
			if (rc == 0)
				results[i].child = entry_handler(a->rel,
				    &a->spec);
		}
		if (rc)
			tend_apply_fail(&results[i], rc, "dir %s: %s", a->rel,
			    tend_error_last());
		chain_close(&c);
	}
	close(root);
}

/*
 * Copy the declared content of `e` into dst: exactly the bytes its
 * fingerprint was taken of, or fail. The source may have changed since
 * it was declared (a user saving it while tend runs): what is read is
 * hashed as it is written, and a content other than the declared one
 * fails the entry (the next pass declares the new one) rather than
 * leaving bytes the entry's record does not describe: a first write's
 * record is how tend knows the file is its own (may_replace), and a
 * record that lies made a kill right after such a copy leave tend's own
 * file "in the way" for ever. `size` is the content's as its
 * fingerprint was taken: once that many bytes are read no read of 0
 * bytes asks for the end (one syscall of the dozen a new file costs).
 */
static int
copy_into(int dst, const struct tend_entry_spec *e)
{
	int src = open(e->src, O_RDONLY | O_CLOEXEC);
	char small[1 << 16], *buf = small;
	size_t cap = sizeof small;
	struct tend_hasher h;
	uint64_t total = 0;
	int rc = 0;

	if (src < 0 && errno == ENOENT)
		/* (a source created and deleted at once: the agent's next
		 * pass, for its delete, forgets the entry) */
		return tend_error_set(TEND_ERROR, "%s vanished after it was "
		    "declared: nothing written (the next pass forgets it)",
		    e->src);
	if (src < 0)
		return tend_error_set(TEND_ERROR, "read %s: %s", e->src,
		    strerror(errno));
	if (e->size > cap) {
		cap = 1 << 20;
		buf = tend_xmalloc(cap);
	}
	tend_hasher_init(&h);
	tend_hasher_begin_stream(&h);
	while (e->size == 0 || total < e->size) {
		size_t want = cap;

		if (e->size && e->size - total < want)
			want = (size_t)(e->size - total);
		ssize_t n = read(src, buf, want);
		if (n < 0) {
			rc = tend_error_set(TEND_ERROR, "read %s: %s", e->src,
			    strerror(errno));
			break;
		}
		if (n == 0)
			break;
		tend_hasher_raw(&h, buf, (size_t)n);
		total += (uint64_t)n;
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(dst, buf + off, (size_t)(n - off));
			if (w < 0) {
				rc = tend_error_set(TEND_ERROR, "write: %s",
				    strerror(errno));
				goto out;
			}
			off += w;
		}
	}
	if (rc == 0) {
		struct tend_fp fp = tend_hasher_final(&h);

		if (!tend_fp_equal(&fp, &e->fp))
			rc = tend_error_set(TEND_ERROR, "%s " TEND_FS_CHANGED,
			    e->src);
	}
out:
	if (buf != small)
		free(buf);
	close(src);
	return rc;
}

/* A temporary name no other tend process (or thread) uses: pid and a
 * counter (the pid is read once: exec items are forked, but never write
 * entries). */
static void
tmp_name(char *buf, size_t size)
{
	static unsigned counter;
	static pid_t pid;
	pid_t me = __atomic_load_n(&pid, __ATOMIC_RELAXED);

	if (!me)
		__atomic_store_n(&pid, me = getpid(), __ATOMIC_RELAXED);
	snprintf(buf, size, ".tend-%d-%u.tmp", (int)me,
	    __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
}

/* Give the finished anonymous file `fd` the name `name` in `dirfd`
 * (EEXIST when something has it) */
static int
link_anon(int fd, int dirfd, const char *name)
{
	char proc[64];

	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	return linkat(AT_FDCWD, proc, dirfd, name, AT_SYMLINK_FOLLOW);
}

/* Did compare_leaf find nothing at the name? */
static bool
says_absent(const struct tend_buf *why)
{
	return strncmp(why->ptr, TEND_CHECK_ABSENT,
	    strlen(TEND_CHECK_ABSENT)) == 0;
}

/* Does `leaf` hold one of a never-written state's records (what an
 * apply of it cut short wrote), or nothing any more (it went meanwhile)?
 * Then it is nobody else's. */
static bool
holds_a_record(int dirfd, const char *leaf, const struct entry_action *a)
{
	struct tend_buf why = TEND_BUF_INIT;
	bool mine = false;

	for (size_t i = 0; !mine && i < a->nprev; i++) {
		tend_buf_reset(&why);
		mine = compare_leaf(dirfd, leaf, a->prev + REC_LEN * i,
		    &why) == 0 || says_absent(&why);
	}
	tend_buf_release(&why);
	tend_error_clear();
	return mine;
}

/*
 * A fresh entry's name is taken: may the write replace what is there?
 * Only what is tend's: a file or link that holds the declared content
 * (tend adopts it: the store was lost, or the user made the same file)
 * or what an earlier apply cut short wrote. Never a directory, nor, in
 * an exclusive container, a file the user put at a declared name (tend
 * check and plan say the same: see tend_foreign_at). ADOPTED: it holds
 * the declared entry already, and stays as it is (its inode, its links,
 * its times).
 */
#define ADOPTED 2
static int
may_replace(int dirfd, const char *leaf, const struct entry_action *a)
{
	struct tend_buf why = TEND_BUF_INIT;
	uint8_t rec[REC_LEN];
	struct stat st;
	int rc;

	if (fstatat(dirfd, leaf, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return errno == ENOENT ? 0
				       : tend_error_set(TEND_ERROR, "stat %s: %s",
					     leaf, strerror(errno));
	if (S_ISDIR(st.st_mode))
		return tend_error_set(TEND_ERROR,
		    "a directory is in the way: " WAY_FIX);
	make_record(rec, &a->spec.fp, a->spec.mode);
	rc = compare_leaf(dirfd, leaf, rec, &why);
	bool gone = rc == TEND_ECONFLICT && says_absent(&why);
	tend_buf_release(&why);
	tend_error_clear();
	if (rc == 0)
		return ADOPTED;
	if (gone || holds_a_record(dirfd, leaf, a))
		return 0;
	const char *what = S_ISREG(st.st_mode) ? "file"
	    : S_ISLNK(st.st_mode) ? "symlink" : "special file";
	/* an earlier write of it failed or was cut short: tend may have
	 * written it then (and somebody changed it since), or not */
	if (a->nprev)
		return tend_error_set(TEND_ERROR, "a %s holding none of what "
		    "tend may have written there is in the way: " WAY_FIX_FILE,
		    what);
	return tend_error_set(TEND_ERROR, "a %s tend has no record of "
	    "writing is in the way: " WAY_FIX_FILE, what);
}

/* A symlink entry: a fresh one is made at its name (EEXIST when
 * something has it); otherwise it is made under a temporary name in the
 * directory, then renamed over the entry (never through a link:
 * renameat replaces it). */
static int
put_link(int dirfd, const char *leaf, const struct entry_action *a, bool sync)
{
	char tmp[64];
	int rc = 0;

	if (INJECTED("write", a->name))
		return tend_error_set(TEND_ERROR, "symlink: %s",
		    strerror(errno));
	if (a->fresh) {
		if (symlinkat(a->spec.src, dirfd, leaf) == 0)
			goto placed;
		if (errno != EEXIST)
			return tend_error_set(TEND_ERROR, "symlink: %s",
			    strerror(errno));
		if ((rc = may_replace(dirfd, leaf, a)))
			return rc; /* an error, or ADOPTED */
	}
	for (int tries = 0;; tries++) {
		tmp_name(tmp, sizeof tmp);
		if (symlinkat(a->spec.src, dirfd, tmp) == 0)
			break;
		if (errno != EEXIST || tries == 100)
			return tend_error_set(TEND_ERROR, "symlink: %s",
			    strerror(errno));
	}
	if (INJECTED("rename", a->name) || renameat(dirfd, tmp, dirfd, leaf) != 0)
		rc = errno == EISDIR
		    ? tend_error_set(TEND_ERROR, "a directory is in the way: "
			  WAY_FIX)
		    : tend_error_set(TEND_ERROR, "rename to %s: %s", leaf,
			  strerror(errno));
	if (rc) {
		unlinkat(dirfd, tmp, 0);
		return rc;
	}
placed:
	if (sync && (INJECTED("fsync", a->name) || fsync(dirfd) != 0))
		return tend_error_set(TEND_ERROR, "fsync directory: %s",
		    strerror(errno));
	return 0;
}

/*
 * Write the entry atomically: a target never shows a temporary name or
 * a part of the content.
 *
 * A new entry (`fresh`: no write of it confirmed, see may_replace)
 * is an anonymous O_TMPFILE inode in its own directory, linked under its
 * name once written: a kill mid-copy leaves nothing (the kernel frees
 * the inode), and the inode is allocated beside its directory's (the
 * filesystem places an inode near its parent's: made in one staging
 * directory, a cold pass of 100k files packed them all into the staging
 * directory's group, where ext4 searched past every recently freed one).
 * When the name is taken, the inode goes the way of an update if what
 * is there is tend's (may_replace); else the entry fails and the user's
 * file stays.
 *
 * An update goes into a temporary file that is renamed over the entry.
 * The temporary file is made in the staging directory (the "staging"
 * resource: the state directory's, swept of a dead process's leftovers
 * at the next start). Without one on the same filesystem it is an
 * anonymous inode in the entry's own directory, linked under a
 * temporary name just before the rename; without O_TMPFILE, a named
 * file there.
 */
static int
put_entry(int dirfd, int stagefd, const char *leaf,
    const struct entry_action *a, bool sync, bool fresh)
{
	char tmp[64] = "";
	int fd = -1, rc, tmpdir = stagefd >= 0 ? stagefd : dirfd;
	bool anon = false, placed = false;

	if (S_ISLNK(a->spec.mode))
		return put_link(dirfd, leaf, a, sync);
	if (stagefd < 0 || fresh) {
		fd = openat(dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
		anon = fd >= 0;
	}
	for (int tries = 0; fd < 0 && tries < 100; tries++) {
		tmp_name(tmp, sizeof tmp);
		fd = openat(tmpdir, tmp,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	if (fd < 0)
		return tend_error_set(TEND_ERROR, "create in %s: %s",
		    stagefd >= 0 ? "the staging directory" : a->dir,
		    strerror(errno));
	if (INJECTED("write", a->name))
		rc = tend_error_set(TEND_ERROR, "write: %s", strerror(errno));
	else
		rc = copy_into(fd, &a->spec);
	if (rc == 0 && fchmod(fd, a->spec.mode & 07777) != 0)
		rc = tend_error_set(TEND_ERROR, "chmod: %s", strerror(errno));
	if (rc == 0 && sync && (INJECTED("fsync", a->name) || fsync(fd) != 0))
		rc = tend_error_set(TEND_ERROR, "fsync: %s", strerror(errno));
	if (rc == 0 && anon && fresh) {
		if (INJECTED("rename", a->name))
			rc = tend_error_set(TEND_ERROR, "rename to %s: %s",
			    leaf, strerror(errno));
		else if (link_anon(fd, dirfd, leaf) == 0)
			placed = true;
		else if (errno != EEXIST && stagefd >= 0) {
			/* no /proc to link through: a named file */
			close(fd);
			if ((rc = may_replace(dirfd, leaf, a)))
				return rc; /* an error, or ADOPTED */
			return put_entry(dirfd, stagefd, leaf, a, sync, false);
		} else if (errno == EEXIST)
			rc = may_replace(dirfd, leaf, a);
	} else if (rc == 0 && fresh)
		rc = may_replace(dirfd, leaf, a); /* a named file: no link */
	bool adopted = rc == ADOPTED;
	if (adopted) {
		rc = 0;
		placed = true; /* (what was written goes) */
	}
	for (int tries = 0; rc == 0 && anon && !placed && tries < 100;
	     tries++) {
		tmp_name(tmp, sizeof tmp);
		if (link_anon(fd, tmpdir, tmp) == 0)
			break;
		if (errno == EXDEV && tmpdir != dirfd) {
			tmpdir = dirfd; /* staging is on another filesystem */
			continue;
		}
		if (errno != EEXIST) {
			rc = tend_error_set(TEND_ERROR, "link: %s",
			    strerror(errno));
			tmp[0] = '\0';
		}
	}
	if (close(fd) != 0 && rc == 0)
		rc = tend_error_set(TEND_ERROR, "close: %s", strerror(errno));
	if (rc == 0 && !placed && (INJECTED("rename", a->name) ||
			   renameat(tmpdir, tmp, dirfd, leaf) != 0)) {
		if (errno == EXDEV && tmpdir != dirfd) {
			/* staging is on another filesystem: stage here */
			unlinkat(tmpdir, tmp, 0);
			return put_entry(dirfd, -1, leaf, a, sync, false);
		}
		rc = errno == EISDIR
		    ? tend_error_set(TEND_ERROR, "a directory is in the way: "
			  WAY_FIX)
		    : tend_error_set(TEND_ERROR, "rename to %s: %s", leaf,
			  strerror(errno));
	} else if (rc == 0 && sync &&
	    (INJECTED("fsync", a->name) || fsync(dirfd) != 0)) {
		/* the entry is in place; its name is durable only now */
		return tend_error_set(TEND_ERROR, "fsync directory: %s",
		    strerror(errno));
	}
	if ((rc || adopted) && tmp[0])
		unlinkat(tmpdir, tmp, 0);
	return rc == 0 && adopted ? ADOPTED : rc;
}

/* `c` holds the directories of the previous entry of the batch: the
 * ones this entry shares are not opened again. LEFT_AS_IS: a delete
 * found nothing of the entry's at its name and removed nothing;
 * ADOPTED: a first write found the declared entry there already. */
#define LEFT_AS_IS 1
/* UNCHANGED: a repair found the entry as recorded, and wrote nothing */
#define UNCHANGED 3
static int
apply_entry(int root, int stagefd, const struct entry_action *a, bool sync,
    struct chain *c)
{
	struct tend_buf parent = TEND_BUF_INIT;
	const char *slash = strrchr(a->name, '/');
	const char *leaf = slash ? slash + 1 : a->name;
	size_t dlen = strlen(a->dir);
	int rc, base;

	tend_buf_puts(&parent, a->dir);
	if (slash) {
		if (parent.len)
			tend_buf_putc(&parent, '/');
		tend_buf_put(&parent, a->name, (size_t)(slash - a->name));
	}
	/* the container itself must exist already (its sink ran); only the
	 * entry's own parents are created */
	rc = chain_walk(c, root, parent.ptr, parent.len, dlen,
	    a->dir[0] == '\0' || !a->prune_parents, !a->del, &base);
	tend_buf_release(&parent);
	if (a->del) {
		if (rc == TEND_ENOTFOUND) {
			tend_error_clear();
			/* deleting inside a gone directory */
			return a->fresh ? LEFT_AS_IS : 0;
		}
		if (rc == 0) {
			int dfd = c->fd[c->n - 1];
			struct stat st;
			bool there = fstatat(dfd, leaf, &st,
			    AT_SYMLINK_NOFOLLOW) == 0;

			/* a directory at an entry's name is not tend's (it
			 * writes files and links there), nor, at a state
			 * never written, what holds none of its records:
			 * tend's state goes, what is there stays (and a
			 * state never written at a free name had nothing
			 * there to remove) */
			if (there ? S_ISDIR(st.st_mode) ||
				(a->fresh && !holds_a_record(dfd, leaf, a))
				  : a->fresh) {
				/* ... but the directories a first write cut
				 * short made for it (marked) go if empty, as
				 * after a delete: a kill between them and the
				 * file left them for ever (agent torture, seed
				 * 1002: check called one undeclared) */
				if (!there && a->prune_parents &&
				    prune_made(c, c->n - 1, base))
					chain_close(c);
				return LEFT_AS_IS;
			}
			if (INJECTED("unlink", a->name) ||
			    (unlinkat(dfd, leaf, 0) != 0 && errno != ENOENT))
				rc = tend_error_set(TEND_ERROR, "unlink: %s",
				    strerror(errno));
			/* empty parents inside the container go too */
			if (rc == 0 && a->prune_parents &&
			    prune_made(c, c->n - 1, base))
				chain_close(c); /* it holds removed ones */
		}
	} else if (rc == 0) {
		struct tend_buf why = TEND_BUF_INIT;
		uint8_t rec[REC_LEN];

		/* sync --full: what did not drift stays as it is (its
		 * inode, its times): a read instead of a write */
		make_record(rec, &a->spec.fp, a->spec.mode);
		bool same = a->repair && compare_leaf(c->fd[c->n - 1], leaf,
		    rec, &why) == 0;
		tend_buf_release(&why);
		tend_error_clear();
		rc = same ? UNCHANGED : put_entry(c->fd[c->n - 1], stagefd,
		    leaf, a, sync, a->fresh);
	}
	return rc;
}

static char *
full_name(const struct entry_action *a)
{
	size_t dl = strlen(a->dir), nl = strlen(a->name);
	char *p = tend_xmalloc(dl + nl + 2);

	memcpy(p, a->dir, dl);
	p[dl] = '/';
	memcpy(p + dl + 1, a->name, nl + 1);
	return p;
}

static int
cmp_cstr(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* Is there a name in sorted `v` that is `p` itself (exact) or under
 * `p/`? */
static bool
has_at_or_under(char *const *v, size_t n, const char *p, bool exact)
{
	size_t lo = 0, hi = n, len = strlen(p);

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (strcmp(v[mid], p) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < n && strncmp(v[lo], p, len) == 0; lo++)
		if (exact ? v[lo][len] == '\0' : v[lo][len] == '/')
			return true;
	return false;
}

/* The deletes that are in the way of a write: one of them is a directory
 * of the other. NULL when there are none (the usual batch). */
static bool *
swaps(void *const *actions, size_t n)
{
	char **puts = NULL;
	size_t np = 0, nd = 0;
	bool *early = NULL;

	for (size_t i = 0; i < n; i++)
		nd += ((struct entry_action *)actions[i])->del;
	if (nd == 0 || nd == n)
		return NULL;
	puts = tend_xcalloc(n - nd, sizeof *puts);
	for (size_t i = 0; i < n; i++)
		if (!((struct entry_action *)actions[i])->del)
			puts[np++] = full_name(actions[i]);
	qsort(puts, np, sizeof *puts, cmp_cstr);
	for (size_t i = 0; i < n; i++) {
		struct entry_action *a = actions[i];

		if (!a->del)
			continue;
		char *d = full_name(a);
		/* a write under it (file -> directory) */
		bool hit = has_at_or_under(puts, np, d, false);
		/* a write at one of its directories (directory -> file) */
		for (char *s = strchr(d + strlen(a->dir) + 1, '/'); !hit && s;
		     s = strchr(s + 1, '/')) {
			*s = '\0';
			hit = has_at_or_under(puts, np, d, true);
			*s = '/';
		}
		free(d);
		if (hit) {
			if (!early)
				early = tend_xcalloc(n, sizeof *early);
			early[i] = true;
		}
	}
	for (size_t i = 0; i < np; i++)
		free(puts[i]);
	free(puts);
	return early;
}

/* The rounds of a batch: see entry_apply */
enum round { ROUND_EARLY, ROUND_WRITES, ROUND_DELETES };

/* A part of a batch: one round's actions in [from, to) */
struct share {
	int root, stagefd;
	bool sync;
	void *const *actions;
	struct tend_apply_result *results;
	bool *early; /* the deletes in the way of a write, or NULL */
	enum round round;
	size_t from, to;
};

static bool
in_round(const struct share *sh, size_t i)
{
	const struct entry_action *a = sh->actions[i];

	if (sh->early && sh->early[i])
		return sh->round == ROUND_EARLY;
	return sh->round == (a->del ? ROUND_DELETES : ROUND_WRITES);
}

static void
apply_share(struct share *sh)
{
	struct chain c = {.stage = sh->stagefd + 1};

	for (size_t i = sh->from; i < sh->to; i++) {
		int rc;

		if (!in_round(sh, i))
			continue;
		rc = apply_entry(sh->root, sh->stagefd, sh->actions[i],
		    sh->sync, &c);
		if (rc == LEFT_AS_IS)
			sh->results[i].left = true;
		else if (rc == ADOPTED)
			sh->results[i].adopted = true;
		else if (rc == UNCHANGED)
			sh->results[i].unchanged = true;
		else if (rc)
			/* the engine names the entry */
			tend_apply_fail(&sh->results[i], rc, "%s",
			    tend_error_last());
	}
	chain_close(&c);
}

static void *
share_main(void *arg)
{
	apply_share(arg);
	return NULL;
}

/* Batches with fewer writes than this are written on one thread */
#define SHARE_MIN 256

/*
 * The writes of a batch go on two threads, each a contiguous half of
 * them (the entries are in path order: the halves share few
 * directories, and a directory both make is made once, EEXIST being
 * fine). A new file is a dozen system calls, most of them the kernel's
 * work on the directory and the inode, and a cold pass of 100k files
 * spent three quarters of its time here on one core while rsync spread
 * the same work over a sender and a receiver.
 */
static void
apply_writes(struct share *all)
{
	struct share first = *all, second = *all;
	size_t nwrites = 0, seen = 0, mid = all->to;
	pthread_t t;

	for (size_t i = all->from; i < all->to; i++)
		nwrites += in_round(all, i);
	for (size_t i = all->from; nwrites >= SHARE_MIN && i < all->to; i++)
		if (in_round(all, i) && ++seen > nwrites / 2) {
			mid = i;
			break;
		}
	second.from = first.to = mid;
	if (mid == all->to ||
	    pthread_create(&t, NULL, share_main, &second) != 0) {
		apply_share(all);
		return;
	}
	apply_share(&first);
	pthread_join(t, NULL);
}

/*
 * A batch in three rounds: a delete in the way of a write (a file that
 * becomes a directory, or the other way round) first; then the writes,
 * on two threads when there are many; then the deletes, on this thread:
 * a delete removes the parents it emptied, which a write on another
 * thread may be about to use.
 */
static void
entry_apply(struct tend_sink *sink, struct tend_context *ctx,
    void *const *actions, size_t n, struct tend_apply_result *results)
{
	int root = -1;

	(void)sink;
	if (open_root(ctx, &root)) {
		for (size_t i = 0; i < n; i++)
			tend_apply_fail(&results[i], TEND_ERROR, "%s",
			    tend_error_last());
		return;
	}
	const char *staging = tend_context_get(ctx, "staging");
	struct share all = {
		.root = root,
		.stagefd = staging
		    ? open(staging, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
		    : -1,
		.sync = tend_context_get(ctx, "fsync") != NULL,
		.actions = actions,
		.results = results,
		.early = swaps(actions, n),
		.to = n,
	};

	if (all.early) {
		all.round = ROUND_EARLY;
		apply_share(&all);
	}
	all.round = ROUND_WRITES;
	apply_writes(&all);
	all.round = ROUND_DELETES;
	apply_share(&all);
	free(all.early);
	if (all.stagefd >= 0)
		close(all.stagefd);
	close(root);
}

/* ---- registration ---- */

int
tend_fs_register(struct tend_engine *eng)
{
	struct fs_handler *d = calloc(1, sizeof *d), *f = calloc(1, sizeof *f);
	int rc;

	if (!d || !f)
		abort();
	tend_handler_init(&d->base, &dir_ops);
	tend_handler_init(&f->base, &file_ops);
	if ((rc = tend_engine_register_root(eng, TEND_FS_DIR, &d->base, NULL))) {
		free(f);
		return rc;
	}
	return tend_engine_register_root(eng, TEND_FS_FILE, &f->base, NULL);
}

bool
tend_entry_decode(const void *desired, size_t len, struct tend_entry *out,
    struct tend_arena *arena)
{
	struct tend_entry_spec e;

	if (!decode_entry(desired, len, &e, arena))
		return false;
	out->fp = e.fp;
	out->size = e.size;
	out->mode = e.mode;
	out->src = e.src;
	return true;
}

void
tend_entry_encode(struct tend_buf *out, const struct tend_entry *e)
{
	struct tend_entry_spec s = {e->fp, e->size, e->mode, e->src};

	tend_fs_encode_entry(out, &s);
}

struct tend_fp
tend_entry_link_fp(const char *text)
{
	return tend_fs_link_fp(text);
}
