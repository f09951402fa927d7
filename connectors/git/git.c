/*
 * git.c - the git-tree target, written with libgit2 (the only file that
 * includes <git2.h>).
 *
 * Entries of one ref that change in one pass become one commit: blobs
 * are written for the changed contents only, the new tree is the tip's
 * tree with just those paths updated (git_tree_create_updated: cost grows
 * with the changed paths and their depth, not with the tree), and the ref
 * moves with compare-and-swap on the tip it was built from. If another
 * writer moved the ref meanwhile, the same updates are rebuilt onto the
 * new tip (bounded retries): their commit is never lost. No working tree
 * or index is touched; a ref checked out in a working tree is refused
 * unless allowed, since its files would look deleted to the user.
 *
 * Records are (version, XXH3-128 of the content, git mode): unchanged
 * content is never hashed with SHA-1 again.
 */
#define _GNU_SOURCE
#include "git.h"

#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <git2/sys/mempack.h>
#include <git2/sys/odb_backend.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blobids.h"
#include "fs.h"
#include "pack.h"
#include "writes.h"
#include "tend/arena.h"
#include "tend/failpoint.h"
#include "tend/fingerprint.h"
#include "tend/status.h"
#include "tend/target.h"

#define REC_LEN (1 + 16 + 4)
#define RETRIES 8
/* from this many new blobs in one commit, objects go to one pack file
 * instead of one loose file each (a first commit of 100k files) */
#define PACK_MIN 512
/* a content bigger than this stays out of the pack (see pack_blobs) */
#define PACK_MAX_BLOB ((uint64_t)16 << 20)
/* fresh blobs from which a commit's blobs go into two packs, two threads */
#define PACK_SPLIT 4096

/* ---- spec ---- */

void
tend_git_encode_spec(struct tend_buf *out, const struct tend_git_spec *s)
{
	tend_buf_putc(out, 1);
	tend_buf_putc(out, (int)s->executable);
	tend_buf_putc(out, s->exclusive);
	tend_buf_putc(out, s->allow_checked_out);
	tend_buf_put(out, s->message, strlen(s->message) + 1);
	tend_buf_put(out, s->author, strlen(s->author) + 1);
	for (size_t i = 0; i < s->ntags; i++)
		tend_buf_put(out, s->tags[i], strlen(s->tags[i]) + 1);
}

struct spec {
	int executable;
	bool exclusive, allow;
	char *message, *author;
	char *tags; /* NUL-separated, ntags of them */
	size_t tagslen;
};

static bool
decode_spec(const void *p, size_t len, struct spec *s)
{
	const char *b = p, *end = b + len;

	memset(s, 0, sizeof *s);
	if (len < 6 || b[0] != 1)
		return false;
	s->executable = b[1];
	s->exclusive = b[2] != 0;
	s->allow = b[3] != 0;
	const char *m = b + 4, *mz = memchr(m, 0, (size_t)(end - m));
	if (!mz)
		return false;
	const char *a = mz + 1, *az = memchr(a, 0, (size_t)(end - a));
	if (!az)
		return false;
	s->message = strdup(m);
	s->author = strdup(a);
	s->tagslen = (size_t)(end - (az + 1));
	s->tags = malloc(s->tagslen + 1);
	if (!s->message || !s->author || !s->tags)
		abort();
	memcpy(s->tags, az + 1, s->tagslen);
	s->tags[s->tagslen] = '\0';
	return true;
}

static void
spec_free(struct spec *s)
{
	free(s->message);
	free(s->author);
	free(s->tags);
}

/* ---- errors ---- */

static int
git_fail(const char *what, const char *detail)
{
	const git_error *e = git_error_last();

	return tend_error_set(TEND_ERROR, "git: %s%s%s: %s", what,
	    detail ? " " : "", detail ? detail : "",
	    e && e->message ? e->message : "failed");
}

/* A libgit2 call made to fail by TEND_FAILPOINTS (tend/failpoint.h). */
static int
injected(const char *point, const char *what, const char *subject)
{
	if (!tend_failpoint(point, subject))
		return 0;
	return tend_error_set(TEND_ERROR, "git: %s %s: %s", what, subject,
	    strerror(errno));
}

static int
read_all(const char *path, struct tend_buf *b)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	tend_buf_reset(b);
	if (fd < 0)
		return tend_error_set(TEND_ERROR, "git: %s: %s", path,
		    strerror(errno));
	rc = tend_buf_read_fd(b, fd, SIZE_MAX);
	if (rc)
		rc = tend_error_set(TEND_ERROR, "git: %s: %s", path,
		    strerror(errno));
	close(fd);
	return rc;
}

/* Is `data` the content whose fingerprint an entry declared? */
static bool
declared_content(const struct tend_entry_spec *e, const void *data,
    size_t len)
{
	struct tend_fp fp = tend_fp_content(data, len);

	return tend_fp_equal(&fp, &e->fp);
}

/* A content bigger than a pack takes, into a loose object in bounded
 * memory: streamed, hashed on the way (*changed: not the declared one;
 * then no object is made). */
static int
blob_streamed(git_repository *repo, const char *path,
    const struct tend_entry_spec *e, git_oid *id, bool *changed)
{
	git_writestream *ws = NULL;
	struct tend_hasher h;
	size_t cap = 1 << 20;
	char *buf;
	ssize_t n;
	int rc = 0, fd = open(e->src, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return tend_error_set(TEND_ERROR, "git: %s: %s", e->src,
		    strerror(errno));
	if (git_blob_create_from_stream(&ws, repo, NULL)) {
		close(fd);
		return git_fail("write blob", path);
	}
	buf = tend_xmalloc(cap);
	tend_hasher_init(&h);
	tend_hasher_begin_stream(&h);
	while ((n = read(fd, buf, cap)) > 0) {
		tend_hasher_raw(&h, buf, (size_t)n);
		if (ws->write(ws, buf, (size_t)n)) {
			rc = git_fail("write blob", path);
			break;
		}
	}
	if (n < 0)
		rc = tend_error_set(TEND_ERROR, "git: %s: %s", e->src,
		    strerror(errno));
	free(buf);
	close(fd);
	if (rc == 0) {
		struct tend_fp fp = tend_hasher_final(&h);
		*changed = !tend_fp_equal(&fp, &e->fp);
	}
	if (rc || *changed)
		ws->free(ws);
	else if (git_blob_create_from_stream_commit(id, ws))
		rc = git_fail("write blob", path);
	return rc;
}

/*
 * An entry's blob, written loose: for a symlink (S_IFLNK in its mode)
 * the link's text, which `src` is; else the file at `src`, whose content
 * must still be the one declared (its fingerprint): a source saved since
 * sets *changed and makes no blob. The entry then fails (the next pass
 * declares the new content): a blob other than the declared content
 * would go into the tree under a record that does not describe it, and
 * its id beside the declared fingerprint (blobids.h) would make check
 * trust it.
 */
static int
blob_of_entry(git_repository *repo, const char *path,
    const struct tend_entry_spec *e, git_oid *id, bool *changed)
{
	struct tend_buf data = TEND_BUF_INIT;
	int rc = injected("git-odb-write", "write blob", path);

	*changed = false;
	if (rc)
		return rc;
	if (S_ISLNK(e->mode))
		return git_blob_create_from_buffer(id, repo, e->src,
			   strlen(e->src))
		    ? git_fail("write blob", path)
		    : 0;
	if (e->size > PACK_MAX_BLOB)
		return blob_streamed(repo, path, e, id, changed);
	if ((rc = read_all(e->src, &data)) == 0) {
		*changed = !declared_content(e, data.ptr, data.len);
		if (!*changed && git_blob_create_from_buffer(id, repo,
				     data.ptr, data.len))
			rc = git_fail("write blob", path);
	}
	tend_buf_release(&data);
	return rc;
}

/* ---- handlers ---- */

enum hkind { H_ROOT, H_ENTRIES, H_TAGS };

struct git_handler {
	struct tend_handler base;
	enum hkind kind;
	char *repo, *ref, *prefix;
	struct spec spec;
	/* tend check asks an entries handler about each of its entries in
	 * turn: the repository stays open and the tip's tree is read once
	 * while the ref does not move (re-read for every entry, with a
	 * fresh repository and no object cache, it cost 16x reading the
	 * bytes) */
	git_repository *check_repo;
	git_oid check_tip;
	git_tree *check_tree;
	/* the pairs of blobs check read and found right (blobids.h), noted
	 * in the state directory check_state */
	struct tend_buf checked;
	char *check_state;
};

/* A_SAME: an A_PUT the sink found in the ref as recorded (a repair) */
enum akind { A_OPEN, A_DROP, A_PUT, A_DEL, A_TAG, A_UNTAG, A_SAME };

struct git_action {
	enum akind kind;
	const char *repo, *ref, *prefix;
	const char *path; /* entries: under the prefix; tags: the name */
	struct tend_entry_spec e;
	unsigned gitmode;
	bool wipe; /* A_OPEN after a destructive change */
	/* A_PUT: no write of it was ever confirmed: an entry at its path
	 * is tend's only if it holds this record or one of `prev` */
	bool fresh;
	/* A_TAG first set or repair: on the tip already when the group
	 * began (a commit of the group moves it: not adopted then) */
	bool there;
	bool repair; /* A_PUT: sync --full of an applied record */
	const uint8_t *prev; /* nprev records of REC_LEN */
	size_t nprev;
	struct spec spec;
};

static void gitconn_apply(struct tend_sink *, struct tend_context *,
    void *const *, size_t, struct tend_apply_result *);
static struct tend_sink git_sink = {.apply = gitconn_apply, .name = "tend/git"};

static const struct tend_handler_ops root_ops, entries_ops, tags_ops;

static void
handler_destroy(struct tend_handler *base)
{
	struct git_handler *h = (struct git_handler *)(void *)base;

	tend_blobids_note(h->check_state, (void *)h->checked.ptr,
	    h->checked.len / sizeof(struct tend_blobid));
	tend_buf_release(&h->checked);
	free(h->check_state);
	git_tree_free(h->check_tree);
	git_repository_free(h->check_repo);
	free(h->repo);
	free(h->ref);
	free(h->prefix);
	spec_free(&h->spec);
	free(h);
}

static struct git_handler *
handler_new(enum hkind kind, const char *repo, const char *ref,
    const char *prefix, const struct spec *spec)
{
	struct git_handler *h = calloc(1, sizeof *h);

	if (!h)
		abort();
	tend_handler_init(&h->base, kind == H_ROOT ? &root_ops
	    : kind == H_ENTRIES ? &entries_ops : &tags_ops);
	h->kind = kind;
	if (repo) {
		h->repo = strdup(repo);
		h->ref = strdup(ref);
		h->prefix = strdup(prefix);
	}
	if (spec) {
		h->spec = *spec;
		h->spec.message = strdup(spec->message);
		h->spec.author = strdup(spec->author);
		h->spec.tags = malloc(spec->tagslen + 1);
		if (!h->spec.tags)
			abort();
		if (spec->tagslen)
			memcpy(h->spec.tags, spec->tags, spec->tagslen);
		h->spec.tags[spec->tagslen] = '\0';
	}
	return h;
}

static char *
adup(struct tend_arena *a, const char *p, size_t n)
{
	char *s = tend_arena_alloc(a, n + 1);

	memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

/*
 * libgit2 starts on first use, not at registration: its start loads the
 * system's CA certificates and the ssh library (2-4 ms a process here),
 * which a workspace without git targets should not pay. A pass of a git
 * app starts it on a thread of its own before its walk (tend_git_warm),
 * so that the start overlaps the walk instead of following it; the first
 * use waits for it.
 */
static pthread_mutex_t ready_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ready_cond = PTHREAD_COND_INITIALIZER;
static enum { GIT_COLD, GIT_WARMING, GIT_READY } ready_state;
static _Atomic bool ready;

/*
 * The warming thread stays, parked, until the process ends: what the TLS
 * libraries libgit2 starts keep per thread (904 bytes of OpenSSL's) is
 * never freed when a thread ends, and would be a leak once it had (the
 * ASan runs saw it). It takes no signal: they stay the other threads'.
 */
static void *
warm_run(void *arg)
{
	sigset_t all;

	(void)arg;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	git_libgit2_init();
	pthread_mutex_lock(&ready_lock);
	ready_state = GIT_READY;
	ready = true;
	pthread_cond_broadcast(&ready_cond);
	pthread_mutex_unlock(&ready_lock);
	for (;;)
		pause();
	return NULL;
}

static void
git_ready(void)
{
	if (ready)
		return;
	pthread_mutex_lock(&ready_lock);
	while (ready_state == GIT_WARMING)
		pthread_cond_wait(&ready_cond, &ready_lock);
	if (ready_state == GIT_COLD) {
		git_libgit2_init();
		ready_state = GIT_READY;
		ready = true;
	}
	pthread_mutex_unlock(&ready_lock);
}

/* at exit: never while libgit2 (and the libraries it starts, whose own
 * exit handlers then run) is half started */
static void
warm_wait(void)
{
	git_ready();
}

void
tend_git_warm(void)
{
	pthread_attr_t attr;
	pthread_t t;

	if (ready)
		return;
	pthread_mutex_lock(&ready_lock);
	if (ready_state == GIT_COLD && pthread_attr_init(&attr) == 0) {
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&attr, 1024 * 1024);
		if (pthread_create(&t, &attr, warm_run, NULL) == 0) {
			ready_state = GIT_WARMING;
			atexit(warm_wait);
		}
		pthread_attr_destroy(&attr);
	}
	pthread_mutex_unlock(&ready_lock);
}

/* key = (repo, ref, prefix) */
static int
container_key(const struct tend_key *k, struct tend_arena *a, char **repo,
    char **ref, char **prefix)
{
	if (k->kind != TEND_KEY_TUPLE || k->u.tuple.n != 3)
		return tend_error_set(TEND_EINVALID,
		    "git: a container key is (repository, ref, prefix)");
	for (int i = 0; i < 3; i++)
		if (k->u.tuple.items[i].kind != TEND_KEY_STR)
			return tend_error_set(TEND_EINVALID,
			    "git: container key parts are strings");
	*repo = adup(a, k->u.tuple.items[0].u.s.ptr, k->u.tuple.items[0].u.s.len);
	*ref = adup(a, k->u.tuple.items[1].u.s.ptr, k->u.tuple.items[1].u.s.len);
	*prefix = adup(a, k->u.tuple.items[2].u.s.ptr,
	    k->u.tuple.items[2].u.s.len);
	git_ready();
	if (!git_reference_is_valid_name(*ref) || strncmp(*ref, "refs/", 5))
		return tend_error_set(TEND_EINVALID,
		    "git: \"%s\" is not a valid ref name (refs/heads/...)",
		    *ref);
	return 0;
}

/*
 * Is this path component ".git" to git, or to a file system a checkout
 * may land on (what git fsck --strict refuses): ".git" in any case; with
 * trailing spaces or dots (NTFS); "git~1" (NTFS 8.3); with code points
 * HFS+ ignores inside it (U+200C..200F, U+202A..202E, U+206A..206F,
 * U+FEFF).
 */
static bool
git_alias(const char *c, size_t n)
{
	char plain[8];
	size_t k = 0;

	if (n == 5 && strncasecmp(c, "git~1", 5) == 0)
		return true;
	for (size_t i = 0; i < n; i++) {
		const unsigned char *u = (const unsigned char *)c + i;

		/* the ignorable ones are 3 bytes: e2 80 8c..8f, e2 80 aa..ae,
		 * e2 81 aa..af, ef bb bf */
		if (i + 2 < n && ((u[0] == 0xe2 && u[1] == 0x80 &&
				      ((u[2] >= 0x8c && u[2] <= 0x8f) ||
					  (u[2] >= 0xaa && u[2] <= 0xae))) ||
				     (u[0] == 0xe2 && u[1] == 0x81 &&
					 u[2] >= 0xaa && u[2] <= 0xaf) ||
				     (u[0] == 0xef && u[1] == 0xbb &&
					 u[2] == 0xbf))) {
			i += 2;
			continue;
		}
		if (k == sizeof plain)
			return false;
		plain[k++] = c[i];
	}
	/* NTFS drops trailing spaces and dots */
	while (k > 4 && (plain[k - 1] == ' ' || plain[k - 1] == '.'))
		k--;
	return k == 4 && strncasecmp(plain, ".git", 4) == 0;
}

static int
check_git_name(const char *name, size_t len)
{
	int rc = tend_fs_check_name(name, len);

	if (rc)
		return rc;
	for (size_t i = 0; i < len;) {
		size_t j = i;
		while (j < len && name[j] != '/')
			j++;
		if (git_alias(name + i, j - i))
			return tend_error_set(TEND_EINVALID,
			    "entry name \"%.*s\": \"%.*s\" is a .git component "
			    "to git or to some file system (git fsck refuses "
			    "it)",
			    (int)len, name, (int)(j - i), name + i);
		i = j + 1;
	}
	return 0;
}

static int
root_reconcile(struct tend_handler *base, const struct tend_reconcile_in *in,
    struct tend_reconcile_out *out)
{
	struct git_action *a = tend_arena_zalloc(in->arena, sizeof *a);
	char *repo, *ref, *prefix;
	int rc;

	(void)base;
	if ((rc = container_key(in->key, in->arena, &repo, &ref, &prefix)))
		return rc;
	if (prefix[0] && (rc = check_git_name(prefix, strlen(prefix))))
		return rc;
	a->repo = repo;
	a->ref = ref;
	a->prefix = prefix;
	out->action = a;
	out->sink = &git_sink;
	if (!in->desired) {
		struct spec old = {0};

		/* the delete runs without the declaration: its author and
		 * tags come from the last record */
		a->kind = A_DROP;
		out->record_absent = true;
		a->spec.message = tend_arena_strdup(in->arena, "tend: drop");
		a->spec.author = tend_arena_strdup(in->arena, "");
		a->spec.tags = tend_arena_strdup(in->arena, "");
		if (in->nprev &&
		    decode_spec(in->prev[in->nprev - 1].data,
			in->prev[in->nprev - 1].len, &old)) {
			a->spec.author = tend_arena_strdup(in->arena, old.author);
			spec_free(&old);
		}
		/* its entries went one by one (open_child); the rest of
		 * the subtree is someone else's, exclusive or not: it stays
		 * (a drop deletes what the app wrote) */
		return 0;
	}
	a->kind = A_OPEN;
	if (!decode_spec(in->desired, in->desired_len, &a->spec))
		return tend_error_set(TEND_EINVALID, "git: bad spec");
	/* the spec strings live as long as the action: move them into the
	 * arena */
	char *m = tend_arena_strdup(in->arena, a->spec.message);
	char *au = tend_arena_strdup(in->arena, a->spec.author);
	char *tg = tend_arena_memdup(in->arena, a->spec.tags,
	    a->spec.tagslen + 1);
	spec_free(&a->spec);
	a->spec.message = m;
	a->spec.author = au;
	a->spec.tags = tg;
	for (size_t i = 0; i < in->nprev; i++) {
		struct spec old;

		if (!decode_spec(in->prev[i].data, in->prev[i].len, &old))
			continue;
		if (a->spec.exclusive && !old.exclusive)
			out->invalidation = TEND_INVALIDATE_DESTRUCTIVE;
		else if (old.executable != a->spec.executable &&
		    out->invalidation == TEND_INVALIDATE_NONE)
			out->invalidation = TEND_INVALIDATE_LOSSY;
		spec_free(&old);
	}
	a->wipe = out->invalidation == TEND_INVALIDATE_DESTRUCTIVE;
	out->record.data = tend_arena_memdup(in->arena, in->desired,
	    in->desired_len);
	out->record.len = in->desired_len;
	return 0;
}

static unsigned
git_mode(int policy, unsigned mode)
{
	if (S_ISLNK(mode))
		return GIT_FILEMODE_LINK;
	if (policy == TEND_GIT_NEVER)
		return GIT_FILEMODE_BLOB;
	if (policy == TEND_GIT_ALWAYS)
		return GIT_FILEMODE_BLOB_EXECUTABLE;
	return mode & 0100 ? GIT_FILEMODE_BLOB_EXECUTABLE : GIT_FILEMODE_BLOB;
}

static int
entries_reconcile(struct tend_handler *base,
    const struct tend_reconcile_in *in, struct tend_reconcile_out *out)
{
	struct git_handler *h = (struct git_handler *)(void *)base;
	struct git_action *a;
	uint8_t rec[REC_LEN];
	int rc;

	if (in->key->kind != TEND_KEY_STR)
		return tend_error_set(TEND_EINVALID, "git: keys are paths");
	if (h->kind == H_ENTRIES &&
	    (rc = check_git_name(in->key->u.s.ptr, in->key->u.s.len)))
		return rc;
	if (h->kind == H_TAGS) {
		char *name = adup(in->arena, in->key->u.s.ptr, in->key->u.s.len);
		struct tend_buf full = TEND_BUF_INIT;

		tend_buf_printf(&full, "refs/tags/%s", name);
		git_ready();
		rc = git_reference_is_valid_name(full.ptr);
		tend_buf_release(&full);
		if (!rc)
			return tend_error_set(TEND_EINVALID,
			    "git: \"%s\" is not a valid tag name", name);
	}
	a = tend_arena_zalloc(in->arena, sizeof *a);
	a->repo = h->repo;
	a->ref = h->ref;
	a->prefix = h->prefix;
	a->path = adup(in->arena, in->key->u.s.ptr, in->key->u.s.len);
	a->spec = h->spec;
	if (!in->desired) {
		if (in->nprev == 0 && !in->prev_may_be_missing)
			return 0;
		a->kind = h->kind == H_TAGS ? A_UNTAG : A_DEL;
		/* never written: the entry at its path goes only if it
		 * holds one of its records (entry_in_the_way) */
		if (a->kind == A_DEL && (a->fresh = in->prev_never_applied) &&
		    in->nprev)
			a->prev = tend_reconcile_prev_copy(in, REC_LEN,
			    &a->nprev);
		out->action = a;
		out->sink = &git_sink;
		out->record_absent = true;
		return 0;
	}
	memset(rec, 0, sizeof rec);
	rec[0] = 1;
	if (h->kind == H_TAGS) {
		a->kind = A_TAG;
	} else {
		struct tend_buf tmp = TEND_BUF_INIT;
		const uint8_t *d = in->desired;

		/* the entry spec of fs.h: version, fp, size, mode, src */
		if (in->desired_len < 29 || d[0] != 1)
			return tend_error_set(TEND_EINVALID, "git: bad entry");
		memcpy(a->e.fp.b, d + 1, 16);
		for (int i = 0; i < 8; i++)
			a->e.size |= (uint64_t)d[17 + i] << (8 * i);
		a->e.mode = (unsigned)d[25] | (unsigned)d[26] << 8;
		a->e.src = adup(in->arena, (const char *)d + 29,
		    in->desired_len - 29);
		a->kind = A_PUT;
		a->gitmode = git_mode(h->spec.executable, a->e.mode);
		memcpy(rec + 1, a->e.fp.b, 16);
		rec[17] = (uint8_t)a->gitmode;
		rec[18] = (uint8_t)(a->gitmode >> 8);
		rec[19] = (uint8_t)(a->gitmode >> 16);
		tend_buf_release(&tmp);
	}
	if (tend_reconcile_settled(in, rec, REC_LEN))
		return 0;
	if (a->kind == A_TAG)
		a->fresh = in->prev_never_applied;
	if (a->kind == A_PUT || a->kind == A_TAG)
		a->repair = tend_reconcile_repairs(in, rec, REC_LEN);
	if (a->kind == A_PUT && in->prev_never_applied) {
		a->fresh = true;
		a->prev = tend_reconcile_prev_copy(in, REC_LEN, &a->nprev);
	}
	out->action = a;
	out->sink = &git_sink;
	out->record.data = tend_arena_memdup(in->arena, rec, REC_LEN);
	out->record.len = REC_LEN;
	return 0;
}

static size_t
entries_attachments(struct tend_handler *base, struct tend_attachment *out,
    size_t max)
{
	struct git_handler *h = (struct git_handler *)(void *)base;

	if (max < 1)
		return 0;
	out[0].type = "tag";
	out[0].handler = &handler_new(H_TAGS, h->repo, h->ref, h->prefix,
	    &h->spec)->base;
	return 1;
}

/* The entries handler of a container from its key and record; `going`:
 * opened for entries that go without their declaration (open_child) */
static struct tend_handler *
child_handler(const struct tend_key *key, const struct tend_bytes *record,
    bool going)
{
	struct tend_arena a = TEND_ARENA_INIT;
	char *repo, *ref, *prefix;
	struct spec spec = {0};
	struct git_handler *h = NULL;

	if (container_key(key, &a, &repo, &ref, &prefix) == 0 &&
	    (!record || decode_spec(record->data, record->len, &spec))) {
		if (!record) {
			spec.message = strdup("");
			spec.author = strdup("");
			spec.tags = strdup("");
		} else if (going) {
			/* its entries go without their declaration (drop, or
			 * the app moved away): their commit says so, unless
			 * it also holds entries written (apply_group), and
			 * it carries no tag: the app's tags go with their
			 * own states (or follow the app elsewhere), and one
			 * already deleted must not come back on this
			 * commit */
			free(spec.message);
			spec.message = strdup("tend: drop");
			free(spec.tags);
			spec.tags = strdup("");
			spec.tagslen = 0;
		}
		h = handler_new(H_ENTRIES, repo, ref, prefix, &spec);
	}
	spec_free(&spec);
	tend_arena_finish(&a);
	tend_error_clear();
	return h ? &h->base : NULL;
}

static struct tend_handler *
root_open_child(struct tend_handler *base, const struct tend_key *key,
    const struct tend_bytes *record)
{
	(void)base;
	return child_handler(key, record, true);
}

static struct tend_handler *
root_preview_child(struct tend_handler *base, const struct tend_key *key,
    const void *desired, size_t len)
{
	struct tend_bytes rec = {desired, len};

	(void)base;
	return child_handler(key, desired ? &rec : NULL, false);
}

/* ---- repositories ---- */

/* A target's repository path: relative to the workspace, or absolute */
static void
repo_path(struct tend_context *ctx, const char *repo, struct tend_buf *out)
{
	const char *ws = tend_context_get(ctx, "workspace");

	if (repo[0] == '/' || !ws)
		tend_buf_puts(out, repo);
	else
		tend_buf_printf(out, "%s/%s", ws, repo);
}

static int
open_repo(struct tend_context *ctx, const char *repo, git_repository **out)
{
	struct tend_buf path = TEND_BUF_INIT;
	int rc;

	git_ready();
	repo_path(ctx, repo, &path);
	rc = git_repository_open_ext(out, path.ptr,
	    GIT_REPOSITORY_OPEN_NO_SEARCH, NULL);
	if (rc)
		rc = git_fail("open", path.ptr);
	tend_buf_release(&path);
	return rc;
}

/* Does the repository's path not exist at all? */
static bool
repo_missing(struct tend_context *ctx, const char *repo)
{
	struct tend_buf path = TEND_BUF_INIT;
	struct stat st;
	bool missing;

	repo_path(ctx, repo, &path);
	missing = lstat(path.ptr, &st) != 0 && errno == ENOENT;
	tend_buf_release(&path);
	return missing;
}

/*
 * May tend write `ref` of `repo` (as the target names it) while it is
 * checked out? Its record's allow-checked-out, and, when the program says
 * which refs its config allows (the "git-allowed-checked-out" resource:
 * "REPO\tREF\n" lines), that one too: an app moved to another ref (the
 * setting gone with it) does not write the old one's work tree.
 */
static bool
checkout_allowed(struct tend_context *ctx, const char *repo, const char *ref,
    bool recorded)
{
	const char *list = ctx ? tend_context_get(ctx,
	    "git-allowed-checked-out") : NULL;
	size_t rl = strlen(repo), fl = strlen(ref);

	if (!recorded || !list)
		return recorded;
	for (const char *l = list; *l;) {
		const char *nl = strchr(l, '\n');
		size_t n = nl ? (size_t)(nl - l) : strlen(l);

		if (n == rl + 1 + fl && memcmp(l, repo, rl) == 0 &&
		    l[rl] == '\t' && memcmp(l + rl + 1, ref, fl) == 0)
			return true;
		if (!nl)
			break;
		l = nl + 1;
	}
	return false;
}

/* Is `ref` what some working tree of the repository has checked out? */
static bool
checked_out(git_repository *repo, const char *ref, char **where)
{
	git_reference *head = NULL;
	git_strarray wts = {0};
	bool found = false;

	if (!git_repository_is_bare(repo) &&
	    git_reference_lookup(&head, repo, "HEAD") == 0) {
		const char *t = git_reference_type(head) == GIT_REFERENCE_SYMBOLIC
			? git_reference_symbolic_target(head)
			: NULL;
		if (t && strcmp(t, ref) == 0) {
			*where = strdup(git_repository_workdir(repo)
				    ? git_repository_workdir(repo) : "the main working tree");
			found = true;
		}
		git_reference_free(head);
	}
	if (!found && git_worktree_list(&wts, repo) == 0) {
		for (size_t i = 0; i < wts.count && !found; i++) {
			if (git_repository_head_for_worktree(&head, repo,
				wts.strings[i]) != 0)
				continue;
			if (strcmp(git_reference_name(head), ref) == 0) {
				*where = strdup(wts.strings[i]);
				found = true;
			}
			git_reference_free(head);
		}
		git_strarray_dispose(&wts);
	}
	git_error_clear();
	return found;
}

char *
tend_git_checked_out(const char *repo, const char *ref)
{
	git_repository *r = NULL;
	char *where = NULL;

	git_ready();
	if (git_repository_open_ext(&r, repo, GIT_REPOSITORY_OPEN_NO_SEARCH,
		NULL) == 0 && !checked_out(r, ref, &where))
		where = NULL;
	git_error_clear();
	git_repository_free(r);
	return where;
}

int
tend_git_signature(git_repository *repo, const char *configured,
    git_signature **out)
{
	if (configured && *configured) {
		const char *lt = strchr(configured, '<'), *gt = strrchr(configured, '>');

		if (lt && gt && gt > lt) {
			char *name = strndup(configured, (size_t)(lt - configured));
			char *mail = strndup(lt + 1, (size_t)(gt - lt - 1));
			size_t n = strlen(name);
			int rc;

			while (n && name[n - 1] == ' ')
				name[--n] = '\0';
			rc = git_signature_now(out, name, mail);
			free(name);
			free(mail);
			if (rc == 0)
				return 0;
		}
	}
	if (git_signature_default(out, repo) == 0)
		return 0;
	git_error_clear();
	return git_signature_now(out, "tend", "tend@localhost");
}

static void
join_path(struct tend_buf *b, const char *prefix, const char *path)
{
	tend_buf_reset(b);
	if (prefix[0]) {
		tend_buf_puts(b, prefix);
		if (path[0])
			tend_buf_putc(b, '/');
	}
	tend_buf_puts(b, path);
}

/* ---- one pack for a big commit ---- */


/*
 * While a packer is on, every object written to the repository (blobs,
 * trees, the commit) lands in an in-memory backend; packer_flush writes
 * them as one pack and index (git_odb_write_pack) before the ref may
 * point at them. Without it each object is a loose file: a fsync-less
 * create, write and rename per object.
 */
struct packer {
	git_odb *odb;
	git_odb_backend *mem;
};

static int
packer_start(struct packer *pk, git_repository *repo)
{
	memset(pk, 0, sizeof *pk);
	if (git_repository_odb(&pk->odb, repo) || git_mempack_new(&pk->mem) ||
	    git_odb_add_backend(pk->odb, pk->mem, 1000)) {
		int rc = git_fail("set up an in-memory object store", NULL);

		git_odb_free(pk->odb);
		pk->odb = NULL;
		return rc;
	}
	return 0;
}

static int
cmp_oid(const void *x, const void *y)
{
	return git_oid_cmp(x, y);
}

/* The new trees under `tree` (those the in-memory backend holds), and
 * the new blobs they name (a small pass writes its blobs there too); an
 * object that appears twice is listed twice (packer_flush sorts and
 * drops the repeats). */
static int
new_trees(struct packer *pk, git_repository *repo, const git_oid *tree,
    git_oid **v, size_t *n, size_t *cap)
{
	git_tree *t = NULL;
	int rc = 0;

	if (!pk->mem->exists(pk->mem, tree))
		return 0;
	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 64;
		*v = tend_xrealloc(*v, *cap * sizeof **v);
	}
	(*v)[(*n)++] = *tree;
	if (git_tree_lookup(&t, repo, tree))
		return git_fail("read a new tree", NULL);
	for (size_t i = 0; rc == 0 && i < git_tree_entrycount(t); i++) {
		const git_tree_entry *e = git_tree_entry_byindex(t, i);

		if (git_tree_entry_type(e) == GIT_OBJECT_TREE)
			rc = new_trees(pk, repo, git_tree_entry_id(e), v, n, cap);
		else if (git_tree_entry_type(e) == GIT_OBJECT_BLOB &&
		    pk->mem->exists(pk->mem, git_tree_entry_id(e))) {
			if (*n == *cap) {
				*cap *= 2;
				*v = tend_xrealloc(*v, *cap * sizeof **v);
			}
			(*v)[(*n)++] = *git_tree_entry_id(e);
		}
	}
	git_tree_free(t);
	return rc;
}

/*
 * Before the ref may name `commit`: write the commit and the new trees
 * the in-memory backend holds as one pack, with the new blobs they name
 * (a big commit's blobs went to packs of their own before the trees were
 * built; a small one's are here). What the backend holds that the commit
 * does not name (a blob of a put that failed) goes with the backend.
 */
static int
packer_flush(struct packer *pk, git_repository *repo, const git_oid *commit)
{
	git_commit *c = NULL;
	git_oid *v = NULL;
	size_t n = 0, cap = 0;
	struct tend_pack *p = NULL;
	int rc;

	if (!pk || !pk->mem)
		return 0;
	if (git_commit_lookup(&c, repo, commit))
		return git_fail("read the new commit", NULL);
	rc = new_trees(pk, repo, git_commit_tree_id(c), &v, &n, &cap);
	git_commit_free(c);
	if (n > 1) {
		size_t k = 1;

		qsort(v, n, sizeof *v, cmp_oid);
		for (size_t i = 1; i < n; i++)
			if (!git_oid_equal(&v[i], &v[k - 1]))
				v[k++] = v[i];
		n = k;
	}
	if (rc == 0)
		rc = tend_pack_open(&p, repo, (uint32_t)n + 1);
	git_oid ids[1] = {*commit};
	for (size_t i = 0; rc == 0 && i <= n; i++) {
		git_odb_object *o = NULL;
		const git_oid *id = i < n ? &v[i] : &ids[0];

		if (git_odb_read(&o, pk->odb, id))
			rc = git_fail("read a new object", NULL);
		else
			rc = tend_pack_add(p, git_odb_object_type(o), id,
			    git_odb_object_data(o), git_odb_object_size(o));
		git_odb_object_free(o);
	}
	if (rc == 0) {
		rc = tend_pack_commit(p, NULL);
		p = NULL;
	}
	tend_pack_abort(p);
	free(v);
	if (rc == 0)
		git_mempack_reset(pk->mem);
	return rc;
}


static const struct git_action *const *sort_acts;

static int
cmp_put_fp(const void *x, const void *y)
{
	size_t a = *(const size_t *)x, b = *(const size_t *)y;
	int c = memcmp(sort_acts[a]->e.fp.b, sort_acts[b]->e.fp.b,
	    sizeof sort_acts[a]->e.fp.b);

	return c ? c : (a > b) - (a < b);
}

static void
packer_stop(struct packer *pk)
{
	/* the odb owns the backend: freeing the repository frees it */
	git_odb_free(pk->odb);
	pk->odb = NULL;
	pk->mem = NULL;
}

/* One pack's share of the fresh blobs: written by its own thread. */
struct pack_job {
	struct git_action *const *puts;
	const size_t *which; /* indexes into puts */
	size_t n;
	git_oid *ids;
	bool *changed; /* per put: its source is not the declared content */
	struct tend_pack *p;
	int rc;
	char err[1024]; /* the thread's error message */
};

static void *
pack_job_run(void *arg)
{
	struct pack_job *j = arg;
	struct tend_buf data = TEND_BUF_INIT;

	for (size_t k = 0; j->rc == 0 && k < j->n; k++) {
		size_t i = j->which[k];
		struct git_action *a = j->puts[i];

		if ((j->rc = injected("git-odb-write", "write blob", a->path)))
			break;
		if (S_ISLNK(a->e.mode)) {
			tend_buf_reset(&data);
			tend_buf_puts(&data, a->e.src);
		} else if ((j->rc = read_all(a->e.src, &data)))
			break;
		else
			j->changed[i] = !declared_content(&a->e, data.ptr,
			    data.len);
		/* (a changed content goes in all the same, unused: the
		 * pack's object count is written first) */
		if (git_odb_hash(&j->ids[i], data.ptr, data.len,
			GIT_OBJECT_BLOB))
			j->rc = git_fail("hash", a->e.src);
		else
			j->rc = tend_pack_add(j->p, GIT_OBJECT_BLOB, &j->ids[i],
			    data.ptr, data.len);
	}
	if (j->rc)
		snprintf(j->err, sizeof j->err, "%s", tend_error_last());
	tend_buf_release(&data);
	return NULL;
}

/*
 * The blobs of a big commit, as packs, in one read of each file: the
 * contents are told apart by the fingerprint of their record, so each
 * pack's object count is known before the first byte; each content is
 * read once, hashed (its id) and deflated. Deflating is most of the
 * work: past PACK_SPLIT fresh blobs, and with two CPUs, they go into two
 * packs (halves by size) written by two threads. ids[i] is the id of
 * puts[i]. A content bigger than PACK_MAX_BLOB is not read whole:
 * libgit2 streams it into a loose object, in bounded memory (here, on
 * this thread: the repository is not shared with the other).
 */
static int
pack_blobs(git_repository *repo, struct git_action *const *puts, size_t n,
    git_oid *ids, bool *changed)
{
	size_t *order = tend_xcalloc(n + 1, sizeof *order);
	size_t *first = tend_xcalloc(n + 1, sizeof *first);
	size_t *fresh = tend_xcalloc(n + 1, sizeof *fresh);
	size_t nfresh = 0, cut;
	uint64_t total = 0, half = 0;
	struct pack_job job[2];
	static long ncpu;
	int rc = 0, njobs;

	for (size_t i = 0; i < n; i++)
		order[i] = i;
	sort_acts = (const struct git_action *const *)puts;
	qsort(order, n, sizeof *order, cmp_put_fp);
	for (size_t j = 0; j < n; j++) {
		size_t i = order[j];
		bool same = j && memcmp(puts[order[j - 1]]->e.fp.b,
				     puts[i]->e.fp.b, sizeof puts[i]->e.fp.b) == 0;

		first[i] = same ? first[order[j - 1]] : i;
	}
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (first[i] != i)
			continue;
		if (puts[i]->e.size > PACK_MAX_BLOB)
			rc = blob_of_entry(repo, puts[i]->path, &puts[i]->e,
			    &ids[i], &changed[i]);
		else {
			fresh[nfresh++] = i;
			total += puts[i]->e.size;
		}
	}
	if (!ncpu)
		ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	cut = nfresh;
	if (nfresh >= PACK_SPLIT && ncpu > 1)
		for (cut = 0; cut < nfresh && half * 2 < total; cut++)
			half += puts[fresh[cut]]->e.size;
	njobs = cut < nfresh ? 2 : 1;
	memset(job, 0, sizeof job);
	for (int k = 0; k < njobs; k++) {
		job[k].puts = puts;
		job[k].which = k ? fresh + cut : fresh;
		job[k].n = k ? nfresh - cut : cut;
		job[k].ids = ids;
		job[k].changed = changed;
		if (rc == 0)
			rc = tend_pack_open(&job[k].p, repo, (uint32_t)job[k].n);
	}
	if (rc == 0) {
		pthread_t t;
		bool threaded = njobs == 2 &&
		    pthread_create(&t, NULL, pack_job_run, &job[1]) == 0;

		pack_job_run(&job[0]);
		if (threaded)
			pthread_join(t, NULL);
		else if (njobs == 2 && job[0].rc == 0)
			pack_job_run(&job[1]);
		for (int k = 0; k < njobs && rc == 0; k++)
			if ((rc = job[k].rc))
				tend_error_set(rc, "%s", job[k].err);
	}
	/* the same content: the same blob, unless the source read for it
	 * had changed (then each reads its own) */
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (first[i] == i)
			continue;
		if (!changed[first[i]])
			ids[i] = ids[first[i]];
		else
			rc = blob_of_entry(repo, puts[i]->path, &puts[i]->e,
			    &ids[i], &changed[i]);
	}
	for (int k = 0; k < njobs; k++) {
		if (rc == 0)
			rc = tend_pack_commit(job[k].p, NULL);
		else
			tend_pack_abort(job[k].p);
		job[k].p = NULL;
	}
	free(order);
	free(first);
	free(fresh);
	return rc;
}

static void locks_note(git_repository *repo, const char *ref,
    const git_oid *oid);

/* ---- which tags are tend's ----
 *
 * A tag tend moves is its own only if it still points where tend left
 * it: STATE/git-tags has a line "REPO<TAB>TAG<TAB>OID<TAB>OID" per tag
 * tend set, the commit before and the one it moves it to (written before
 * the move: a kill in between leaves either). A tag that exists and is
 * not tend's (a user's, an annotated one) is never moved or deleted.
 * Without a state directory (a library user's engine) every tag is.
 */
static char *tags_file; /* the group being applied */
static void tag_moved(git_repository *repo, const char *tag,
    const git_oid *to, const char *ref);

/* The line of (repo, tag) in the file's text, or NULL; *len its length */
static const char *
tags_find(const char *text, const char *repo, const char *tag, size_t *len)
{
	size_t rl = strlen(repo), tl = strlen(tag);

	for (const char *l = text; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t n = nl ? (size_t)(nl - l) : strlen(l);

		if (n > rl + tl + 2 && memcmp(l, repo, rl) == 0 &&
		    l[rl] == '\t' && memcmp(l + rl + 1, tag, tl) == 0 &&
		    l[rl + 1 + tl] == '\t') {
			*len = n;
			return l;
		}
		l = nl ? nl + 1 : NULL;
	}
	return NULL;
}

static void
tags_read(struct tend_buf *text)
{
	int fd = tags_file ? open(tags_file, O_RDONLY | O_CLOEXEC) : -1;

	if (fd >= 0) {
		tend_buf_read_fd(text, fd, 1 << 24);
		close(fd);
	}
	if (!text->ptr)
		tend_buf_puts(text, "");
}

/* Is the tag, pointing at `cur` (a commit: a lightweight tag), tend's? */
static bool
tag_is_ours(git_repository *repo, const char *tag, const git_oid *cur)
{
	struct tend_buf text = TEND_BUF_INIT;
	char hex[GIT_OID_HEXSZ + 1];
	const char *l;
	size_t len;
	bool ours;

	if (!tags_file)
		return true;
	tags_read(&text);
	git_oid_tostr(hex, sizeof hex, cur);
	l = tags_find(text.ptr, git_repository_path(repo), tag, &len);
	ours = l && memmem(l, len, hex, strlen(hex)) != NULL;
	tend_buf_release(&text);
	return ours;
}

/* A git-tags line (its own NUL-terminated copy, cut up here) as its
 * fields: repository, tag, from, to, ref. False if it has fewer. */
static bool
tags_split(char *l, char *f[5])
{
	int k = 1;

	f[0] = l;
	for (char *t = l; k < 5 && (t = strchr(t, '\t')); k++) {
		*t++ = '\0';
		f[k] = t;
	}
	return k == 5;
}

/* The record of (repo, tag), a copy to free, or NULL (none, or no state
 * directory); *ok: it splits into its fields f (tags_split) */
static char *
tag_line(git_repository *repo, const char *tag, char *f[5], bool *ok)
{
	struct tend_buf text = TEND_BUF_INIT;
	const char *l;
	char *line = NULL;
	size_t len;

	*ok = false;
	if (!tags_file)
		return NULL;
	tags_read(&text);
	if ((l = tags_find(text.ptr, git_repository_path(repo), tag, &len))) {
		line = tend_xmemdup(l, len + 1);
		line[len] = '\0';
		*ok = tags_split(line, f);
	}
	tend_buf_release(&text);
	return line;
}

/* Does tend's record say the tag follows `ref`? (No record: yes.) */
static bool
tag_follows(git_repository *repo, const char *tag, const char *ref)
{
	char *f[5];
	bool ok, yes;
	char *line = tag_line(repo, tag, f, &ok);

	yes = !line || (ok && strcmp(f[4], ref) == 0);
	free(line);
	return yes;
}

/* Where tend last moved the tag (its record's `to`), if it knows */
static bool
tag_recorded_to(git_repository *repo, const char *tag, git_oid *to)
{
	char *f[5];
	bool ok, yes;
	char *line = tag_line(repo, tag, f, &ok);

	yes = ok && git_oid_fromstr(to, f[3]) == 0;
	free(line);
	git_error_clear();
	return yes;
}

/* Record (repo, tag) -> {from, to} on `ref` (to NULL: forget it). */
static void
tag_record(git_repository *repo, const char *tag, const git_oid *from,
    const git_oid *to, const char *ref)
{
	struct tend_buf text = TEND_BUF_INIT, out = TEND_BUF_INIT,
			tmp = TEND_BUF_INIT;
	char a[GIT_OID_HEXSZ + 1] = "-", b[GIT_OID_HEXSZ + 1];
	const char *l;
	size_t len;
	int fd;

	if (!tags_file)
		return;
	tags_read(&text);
	l = tags_find(text.ptr, git_repository_path(repo), tag, &len);
	if (l) {
		tend_buf_put(&out, text.ptr, (size_t)(l - text.ptr));
		tend_buf_puts(&out, l + len + (l[len] == '\n'));
	} else
		tend_buf_puts(&out, text.ptr);
	if (to) {
		if (from)
			git_oid_tostr(a, sizeof a, from);
		git_oid_tostr(b, sizeof b, to);
		tend_buf_printf(&out, "%s\t%s\t%s\t%s\t%s\n",
		    git_repository_path(repo), tag, a, b, ref);
	}
	tend_buf_printf(&tmp, "%s.tmp", tags_file);
	fd = open(tmp.ptr, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd >= 0) {
		bool ok = write(fd, out.ptr, out.len) == (ssize_t)out.len;

		close(fd);
		if (!ok || rename(tmp.ptr, tags_file) != 0)
			unlink(tmp.ptr);
	}
	tend_buf_release(&text);
	tend_buf_release(&out);
	tend_buf_release(&tmp);
}

static void tag_note(git_repository *repo, const char *tag,
    const git_oid *oid);

/*
 * The commit tend last put on a ref, in the tags file under the name
 * "~tip:REF" ('~' is in no tag's name): a ref reset or rewritten by
 * hand no longer holds it, and the next pass verifies every entry.
 */
#define TIP_MARK '~'

static void
tip_name(struct tend_buf *b, const char *ref)
{
	tend_buf_printf(b, "%ctip:%s", TIP_MARK, ref);
}

/*
 * A tag tend adopted (it found the tag, someone else's, on the tip when
 * the tag was first declared) is kept, in the tags file, under the name
 * "~adopted:TAG" too: tend moves it with its commits while it is
 * declared, and leaves it where it is, not deleted, once it is not (a
 * new user's trial: a hand-made tag went with its setting).
 */
static void
adopted_mark(git_repository *repo, const char *tag, const git_oid *at,
    const char *ref)
{
	struct tend_buf name = TEND_BUF_INIT;

	tend_buf_printf(&name, "%cadopted:%s", TIP_MARK, tag);
	tag_record(repo, name.ptr, NULL, at, ref);
	tend_buf_release(&name);
}

static bool
tag_adopted(git_repository *repo, const char *tag)
{
	struct tend_buf name = TEND_BUF_INIT;
	char *f[5];
	bool ok;
	char *line;

	tend_buf_printf(&name, "%cadopted:%s", TIP_MARK, tag);
	line = tag_line(repo, name.ptr, f, &ok);
	ok = line != NULL;
	tend_buf_release(&name);
	free(line);
	return ok;
}

static void
tip_record(git_repository *repo, const char *ref, const git_oid *commit)
{
	struct tend_buf name = TEND_BUF_INIT;

	tip_name(&name, ref);
	tag_record(repo, name.ptr, NULL, commit, ref);
	tend_buf_release(&name);
}

static bool
in_tags(const struct spec *spec, const char *name)
{
	for (size_t off = 0; off < spec->tagslen;) {
		if (strcmp(spec->tags + off, name) == 0)
			return true;
		off += strlen(spec->tags + off) + 1;
	}
	return false;
}

/* Move tend's tags that follow `ref` from `from` (the tip a commit
 * replaced) to `to`; those of `spec` moved already. */
static void
tags_follow(git_repository *repo, const char *ref, const git_oid *from,
    const git_oid *to, const struct spec *spec)
{
	struct tend_buf text = TEND_BUF_INIT, full = TEND_BUF_INIT;
	const char *repo_path = git_repository_path(repo);

	if (!tags_file)
		return;
	tags_read(&text);
	for (char *l = text.ptr; l && *l;) {
		char *nl = strchr(l, '\n'), *f[5];
		git_oid cur;
		git_object *obj = NULL;
		git_oid out;

		if (nl)
			*nl = '\0';
		if (tags_split(l, f) && strcmp(f[0], repo_path) == 0 &&
		    strcmp(f[4], ref) == 0 && f[1][0] != TIP_MARK &&
		    !in_tags(spec, f[1])) {
			tend_buf_reset(&full);
			tend_buf_printf(&full, "refs/tags/%s", f[1]);
			if (git_reference_name_to_id(&cur, repo, full.ptr) == 0 &&
			    git_oid_equal(&cur, from) &&
			    tag_is_ours(repo, f[1], &cur) &&
			    git_object_lookup(&obj, repo, to,
				GIT_OBJECT_COMMIT) == 0) {
				tag_record(repo, f[1], from, to, ref);
				tag_note(repo, f[1], to);
				if (git_tag_create_lightweight(&out, repo, f[1],
					obj, 1) == 0)
					tag_moved(repo, f[1], to, ref);
			}
			git_object_free(obj);
			git_error_clear();
		}
		l = nl ? nl + 1 : NULL;
	}
	tend_buf_release(&text);
	tend_buf_release(&full);
}

/* A tag that could not be set: libgit2's reason, or for a lock left
 * by someone (libgit2 says only that the ref "exists"), what to do */
static int
tag_fail(git_repository *repo, const char *name)
{
	const git_error *e = git_error_last();
	struct tend_buf lock = TEND_BUF_INIT;
	struct stat st;
	int rc;

	tend_buf_printf(&lock, "%srefs/tags/%s.lock",
	    git_repository_commondir(repo), name);
	if (lstat(lock.ptr, &st) == 0)
		rc = tend_error_set(TEND_ERROR, "git: tag %s not moved: %s "
		    "exists: a git command holds it, or one was killed; delete "
		    "it if none runs", name, lock.ptr);
	else
		rc = tend_error_set(TEND_ERROR, "git: tag %s not moved: %s",
		    name, e && e->message && *e->message ? e->message
							 : "failed");
	tend_buf_release(&lock);
	return rc;
}

/*
 * May tend move tag `name` to `to`? Absent, at `to` already, or where
 * tend left it: yes (and recorded). Otherwise *cur says where it is.
 */
/* The tag is where its record said it goes: no move in flight (a tag
 * found later on the commit it came from was moved back by someone,
 * not left behind by a kill) */
static void
tag_moved(git_repository *repo, const char *tag, const git_oid *to,
    const char *ref)
{
	tag_record(repo, tag, to, to, ref);
}

/*
 * May tend move tag `name` to `to` (NULL: no commit to go to)? Yes when
 * it does not exist, or points at a commit (a lightweight tag) that is
 * `to` or one tend put it on; an annotated tag is never tend's. *exists,
 * and *cur its target if it has one.
 */
static bool
tag_movable(git_repository *repo, const char *name, const git_oid *to,
    git_oid *cur, bool *exists)
{
	struct tend_buf full = TEND_BUF_INIT;
	git_reference *t = NULL;
	git_object *o = NULL;

	tend_buf_printf(&full, "refs/tags/%s", name);
	*exists = git_reference_lookup(&t, repo, full.ptr) == 0;
	tend_buf_release(&full);
	git_error_clear();
	if (!*exists)
		return true;
	const git_oid *id = git_reference_target(t);
	bool commit = id && git_object_lookup(&o, repo, id, GIT_OBJECT_ANY) ==
	    0 && git_object_type(o) == GIT_OBJECT_COMMIT;
	git_object_free(o);
	git_error_clear();
	if (id)
		*cur = *id;
	bool ok = commit && ((to && git_oid_equal(id, to)) ||
	    tag_is_ours(repo, name, id));
	git_reference_free(t);
	return ok;
}

static bool
tag_may_move(git_repository *repo, const char *ref, const char *name,
    const git_oid *to, git_oid *cur, bool *exists)
{
	bool ok = tag_movable(repo, name, to, cur, exists);

	if (!*exists)
		tag_record(repo, name, NULL, to, ref);
	else if (ok)
		tag_record(repo, name, cur, to, ref);
	return ok;
}

/*
 * Is tend's tag `name` in the way: tend set it before (the tags file has
 * its line), it exists, and tend may not move it to `tip` (NULL: the ref
 * has none) because someone moved it or made it anew? *cur where it
 * points (zeros: a ref with no target).
 */
static bool
tag_in_way(git_repository *repo, const char *name, const git_oid *tip,
    git_oid *cur)
{
	char *f[5];
	bool ok, exists;
	char *line = tag_line(repo, name, f, &ok);
	bool set_before = line != NULL;

	free(line);
	memset(cur, 0, sizeof *cur);
	return set_before && !tag_movable(repo, name, tip, cur, &exists) &&
	    exists;
}

static void
tag_note(git_repository *repo, const char *tag, const git_oid *oid)
{
	struct tend_buf full = TEND_BUF_INIT;

	tend_buf_printf(&full, "refs/tags/%s", tag);
	locks_note(repo, full.ptr, oid);
	tend_buf_release(&full);
}

/*
 * The tags a pass said are in the way (tags_catch_up, when it opens the
 * container), so that its commits, in other batches, do not say it
 * again on an entry: (pass, repository path NUL tag NUL)... One pass
 * at a time per process, as the amends.
 */
static struct {
	uint64_t pass;
	struct tend_buf said;
	pthread_mutex_t lock;
} tags_said = {0, TEND_BUF_INIT, PTHREAD_MUTEX_INITIALIZER};

static bool
way_said(git_repository *repo, const char *tag, uint64_t pass, bool note)
{
	const char *path = git_repository_path(repo);
	size_t pl = strlen(path) + 1, tl = strlen(tag) + 1;
	bool found = false;

	pthread_mutex_lock(&tags_said.lock);
	if (tags_said.pass != pass) {
		tend_buf_reset(&tags_said.said);
		tags_said.pass = pass;
	}
	for (size_t off = 0; !found && off < tags_said.said.len;) {
		const char *p = tags_said.said.ptr + off, *t = p + strlen(p) + 1;

		found = strcmp(p, path) == 0 && strcmp(t, tag) == 0;
		off += strlen(p) + 1 + strlen(t) + 1;
	}
	if (!found && note) {
		tend_buf_put(&tags_said.said, path, pl);
		tend_buf_put(&tags_said.said, tag, tl);
	}
	pthread_mutex_unlock(&tags_said.lock);
	return found;
}

struct update {
	git_tree_update u;
	char *path;
	size_t seq; /* the action's order: the last on a path wins */
	size_t act; /* its action's index in the group */
};

/* What to say of a directory (tree entry `e` at `path`) where an entry
 * goes: it may be another author's, or hold entries of this very app
 * (two of its sources collide: x and x/y) */
#define DIR_WAY_FIX "tend writes no entry over a directory: if what is in " \
	"it is this app's, two of its sources collide (rename one), else " \
	"remove it from the ref, then tend sync"

/* ... and of a file (link, submodule) above an entry's path */
#define ABOVE_WAY_FIX "tend replaces only what it knows it wrote: if it " \
	"is an entry of this app, two of its sources collide (rename one), " \
	"else remove it from the ref, then tend sync"

static void
dir_way(struct tend_buf *b, git_repository *repo, const git_tree_entry *e,
    const char *path)
{
	git_tree *t = NULL;
	size_t n = git_tree_lookup(&t, repo, git_tree_entry_id(e)) == 0
	    ? git_tree_entrycount(t) : 0;

	if (n)
		tend_buf_printf(b, "the directory %s (holding %s%s)", path,
		    git_tree_entry_name(git_tree_entry_byindex(t, 0)),
		    n > 1 ? ", ..." : "");
	else
		tend_buf_printf(b, "the directory %s", path);
	git_tree_free(t);
	git_error_clear();
}

/* A write among ups[from..n) (sorted by path) of a path under `dir`/,
 * or NULL */
static const char *
write_under(const struct update *ups, size_t from, size_t n, const char *dir)
{
	size_t len = strlen(dir), lo = from, hi = n;

	while (lo < hi) { /* the first path >= "dir/" */
		size_t mid = lo + (hi - lo) / 2;
		int c = strncmp(ups[mid].path, dir, len);

		if (c < 0 || (c == 0 && (unsigned char)ups[mid].path[len] <
				      (unsigned char)'/'))
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < n && strncmp(ups[lo].path, dir, len) == 0 &&
	     ups[lo].path[len] == '/'; lo++)
		if (ups[lo].u.action == GIT_TREE_UPDATE_UPSERT)
			return ups[lo].path;
	return NULL;
}

/*
 * One commit per pass, memory bounded by a batch. The engine applies a
 * pass in batches (of 4096 components); each batch's changes of a ref
 * commit at once, and a later batch of the same pass replaces the
 * pass's commit with one holding its own changes too, on the same
 * parent (the tip the pass found), as long as the ref still points at
 * the commit it replaces (compare-and-swap, as always). So the store,
 * which settles each batch's records after its apply, never says more
 * than the ref holds: a kill between batches leaves the commit of the
 * batches done, and the next pass commits the rest. A reader of the ref
 * during a pass of many batches may see a commit the next batch
 * replaces. If the ref moved under the pass (somebody else's commit),
 * its next batch commits on top of it.
 */
struct amend {
	uint64_t pass; /* tend_context_pass; 0: free */
	char *key;     /* the repository's path, NUL, the ref */
	size_t klen;
	git_oid last;  /* the pass's commit, on the ref */
	git_oid parent; /* its parent (has_parent): the tip the pass found */
	bool has_parent;
	size_t count; /* the entries it commits, for {count} */
};
#define AMENDS 8
static struct amend amends[AMENDS];
static pthread_mutex_t amends_lock = PTHREAD_MUTEX_INITIALIZER;

/* The pass's commit on ref so far (am->pass 0: none yet) */
static void
amend_get(uint64_t pass, git_repository *repo, const char *ref,
    struct amend *am)
{
	struct tend_buf key = TEND_BUF_INIT;

	memset(am, 0, sizeof *am);
	if (!pass)
		return;
	tend_buf_printf(&key, "%s%c%s", git_repository_path(repo), 0, ref);
	pthread_mutex_lock(&amends_lock);
	for (size_t i = 0; i < AMENDS; i++)
		if (amends[i].pass == pass && amends[i].key &&
		    amends[i].klen == key.len &&
		    memcmp(amends[i].key, key.ptr, key.len) == 0) {
			*am = amends[i];
			am->key = NULL;
		}
	pthread_mutex_unlock(&amends_lock);
	tend_buf_release(&key);
}

/* The pass committed `am` on ref: its next batch amends it. The oldest
 * pass's slot goes first (passes of one engine come one after another). */
static void
amend_put(uint64_t pass, git_repository *repo, const char *ref,
    const struct amend *am)
{
	struct tend_buf key = TEND_BUF_INIT;
	size_t slot = 0;

	if (!pass)
		return;
	tend_buf_printf(&key, "%s%c%s", git_repository_path(repo), 0, ref);
	pthread_mutex_lock(&amends_lock);
	for (size_t i = 0; i < AMENDS; i++) {
		if (amends[i].key && amends[i].klen == key.len &&
		    memcmp(amends[i].key, key.ptr, key.len) == 0) {
			slot = i;
			break;
		}
		if (amends[i].pass < amends[slot].pass)
			slot = i;
	}
	free(amends[slot].key);
	amends[slot] = *am;
	amends[slot].pass = pass;
	amends[slot].key = tend_xmemdup(key.ptr, key.len + 1);
	amends[slot].klen = key.len;
	pthread_mutex_unlock(&amends_lock);
	tend_buf_release(&key);
}

/*
 * The removals first, then the rest, onto the tree they leave: a file
 * that becomes a directory ("foo" gone, "foo/bar" new) or the other way
 * round is one pass and one commit (libgit2 refuses both at once, a
 * D/F conflict).
 */
static int
tree_update(git_repository *repo, git_tree *base, git_tree_update *list,
    size_t n, git_oid *out)
{
	git_tree_update *sorted = tend_xcalloc(n + 1, sizeof *sorted);
	size_t nrm = 0, k = 0;
	git_tree *mid = NULL;
	git_oid mid_id;
	int rc;

	for (size_t i = 0; i < n; i++)
		if (list[i].action == GIT_TREE_UPDATE_REMOVE)
			sorted[nrm++] = list[i];
	k = nrm;
	for (size_t i = 0; i < n; i++)
		if (list[i].action != GIT_TREE_UPDATE_REMOVE)
			sorted[k++] = list[i];
	if (nrm == 0 || nrm == n)
		rc = git_tree_create_updated(out, repo, base, n, sorted);
	else if ((rc = git_tree_create_updated(&mid_id, repo, base, nrm,
		      sorted)) == 0 &&
	    (rc = git_tree_lookup(&mid, repo, &mid_id)) == 0)
		rc = git_tree_create_updated(out, repo, mid, n - nrm,
		    sorted + nrm);
	git_tree_free(mid);
	free(sorted);
	return rc;
}

static int
cmp_update(const void *x, const void *y)
{
	const struct update *a = x, *b = y;
	int c = strcmp(a->path, b->path);

	return c ? c : (a->seq > b->seq) - (a->seq < b->seq);
}

/*
 * Commit `n` updates (paths relative to the repository root) onto `ref`:
 * build from the tip, commit, move the ref if it is still that tip, else
 * start over from the new tip. `removals` of paths the tip lacks are
 * skipped. `replace_prefix`: the new tree has nothing under `prefix`
 * (a destructive change or the container's delete).
 */
static int
commit_updates(git_repository *repo, const char *ref, struct update *ups,
    size_t n, const char *wipe_prefix, bool wipe, const struct spec *spec,
    size_t nactions, struct packer *pk, uint64_t pass, struct tend_buf *tagerr)
{
	struct amend am;
	int rc = 0;

	amend_get(pass, repo, ref, &am);
	for (int attempt = 0; attempt < RETRIES; attempt++) {
		struct tend_buf mine = TEND_BUF_INIT; /* tags to move */
		struct tend_buf theirs = TEND_BUF_INIT; /* ...in the way */
		git_oid tip, tree_id, base_id, commit_id;
		git_commit *parent = NULL, *tipc = NULL;
		git_tree *base = NULL, *newtree = NULL;
		git_signature *author = NULL, *committer = NULL;
		git_reference *newref = NULL;
		git_tree_update *list = calloc(n + 1, sizeof *list);
		size_t nl = 0;
		bool have_tip = git_reference_name_to_id(&tip, repo, ref) == 0;

		if (!list)
			abort();
		git_error_clear();
		/* the tip is this pass's commit: replace it (see amend) */
		bool amending = have_tip && am.pass &&
		    git_oid_equal(&tip, &am.last);
		if (have_tip) {
			if ((rc = git_commit_lookup(&tipc, repo, &tip)) ||
			    (rc = git_commit_tree(&base, tipc))) {
				rc = git_fail("read the tip of", ref);
				goto next;
			}
			if (!amending)
				git_commit_lookup(&parent, repo, &tip);
			else if (am.has_parent &&
			    git_commit_lookup(&parent, repo, &am.parent)) {
				rc = git_fail("read the parent of the pass's "
					      "commit on", ref);
				goto next;
			}
		} else {
			git_treebuilder *tb;

			if (git_treebuilder_new(&tb, repo, NULL) ||
			    git_treebuilder_write(&base_id, tb)) {
				rc = git_fail("empty tree", NULL);
				goto next;
			}
			git_treebuilder_free(tb);
			if (git_tree_lookup(&base, repo, &base_id)) {
				rc = git_fail("empty tree", NULL);
				goto next;
			}
		}
		if (wipe) {
			git_tree_entry *e = NULL;

			if (!wipe_prefix[0]) {
				/* the whole tree goes: start from empty */
				git_treebuilder *tb;
				git_oid empty;

				git_treebuilder_new(&tb, repo, NULL);
				git_treebuilder_write(&empty, tb);
				git_treebuilder_free(tb);
				git_tree_free(base);
				git_tree_lookup(&base, repo, &empty);
			} else if (git_tree_entry_bypath(&e, base, wipe_prefix) ==
			    0) {
				list[nl].action = GIT_TREE_UPDATE_REMOVE;
				list[nl].path = wipe_prefix;
				nl++;
				git_tree_entry_free(e);
			}
			git_error_clear();
		}
		for (size_t i = 0; i < n; i++) {
			if (ups[i].u.action == GIT_TREE_UPDATE_REMOVE) {
				git_tree_entry *e = NULL;

				if (git_tree_entry_bypath(&e, base, ups[i].path)) {
					git_error_clear();
					continue; /* gone already */
				}
				git_tree_entry_free(e);
			}
			list[nl] = ups[i].u;
			list[nl].path = ups[i].path;
			nl++;
		}
		if (tree_update(repo, base, list, nl, &tree_id)) {
			rc = git_fail("update the tree of", ref);
			goto next;
		}
		if (have_tip && git_oid_equal(&tree_id, git_tree_id(base))) {
			rc = 0; /* nothing changed: no commit */
			goto next;
		}
		size_t count = amending ? am.count + nactions : nactions;
		if (git_tree_lookup(&newtree, repo, &tree_id) ||
		    tend_git_signature(repo, spec->author, &author) ||
		    tend_git_signature(repo, NULL, &committer)) {
			rc = git_fail("prepare a commit on", ref);
			goto next;
		}
		struct tend_buf msg = TEND_BUF_INIT;
		for (const char *p = spec->message; *p;) {
			if (strncmp(p, "{count}", 7) == 0) {
				tend_buf_printf(&msg, "%zu", count);
				p += 7;
			} else
				tend_buf_putc(&msg, *p++);
		}
		if (!msg.len)
			tend_buf_puts(&msg, "tend: sync");
		tend_buf_putc(&msg, '\n');
		const git_commit *parents[1] = {parent};
		rc = git_commit_create(&commit_id, repo, NULL, author, committer,
		    "UTF-8", msg.ptr, newtree, parent ? 1 : 0, parents);
		tend_buf_release(&msg);
		if (rc) {
			rc = git_fail("commit on", ref);
			goto next;
		}
		/* the objects are on disk before any ref names them */
		if ((rc = packer_flush(pk, repo, &commit_id)))
			goto next;
		/* the tags that will follow it: their records say where
		 * they go before the ref moves (a kill between the two
		 * leaves a record tags_catch_up finishes) */
		for (size_t off = 0; off < spec->tagslen;) {
			const char *tag = spec->tags + off;
			git_oid cur;
			bool exists;

			off += strlen(tag) + 1;
			if (tag_may_move(repo, ref, tag, &commit_id, &cur,
				&exists))
				tend_buf_put(&mine, tag, strlen(tag) + 1);
			else if (exists && tagerr) {
				/* someone moved it (or made it): it stays,
				 * and the pass says so (a new user's trial:
				 * the sync said nothing, exit 0), unless the
				 * container's opening in this pass did
				 * (tags_catch_up) */
				char hex[GIT_OID_HEXSZ + 1];

				tend_buf_put(&theirs, tag, strlen(tag) + 1);
				git_oid_tostr(hex, sizeof hex, &cur);
				if (!way_said(repo, tag, pass, false))
					tend_buf_printf(tagerr, "%sgit: tag %s "
					    "points at %.12s, where tend did not "
					    "put it: not moved; delete it (git "
					    "tag -d %s) for tend to set it again",
					    tagerr->len ? "; " : "", tag, hex,
					    tag);
			}
		}
		/* compare-and-swap: only if the ref is still our base */
		locks_note(repo, ref, &commit_id);
		if ((rc = injected("git-ref-update", "update", ref)))
			goto next;
		if (have_tip)
			rc = git_reference_create_matching(&newref, repo, ref,
			    &commit_id, 1, &tip, "tend: sync");
		else
			rc = git_reference_create(&newref, repo, ref, &commit_id,
			    0, "tend: sync");
		if (rc == GIT_EMODIFIED || rc == GIT_EEXISTS) {
			/* someone moved it: rebuild onto their commit */
			git_error_clear();
			rc = TEND_ECONFLICT;
			goto next;
		}
		if (rc == GIT_ELOCKED)
			rc = tend_error_set(TEND_ERROR, "git: update %s: %s%s.lock "
			    "exists: a git command holds it, or one was killed; "
			    "delete it if none runs", ref,
			    git_repository_commondir(repo), ref);
		else if (rc)
			rc = git_fail("update", ref);
		/* tags kept on the synced commit follow it; one that
		 * cannot is said in *tagerr: the commit is in. (A tag that
		 * is not tend's stays: its own action says so.) */
		for (size_t off = 0; rc == 0 && off < mine.len;) {
			const char *tag = mine.ptr + off;
			git_object *obj = NULL;
			git_oid out;
			int tr;

			off += strlen(tag) + 1;
			tag_note(repo, tag, &commit_id);
			if ((tr = injected("git-tag-update", "tag", tag)) == 0 &&
			    ((tr = git_object_lookup(&obj, repo, &commit_id,
				  GIT_OBJECT_COMMIT)) ||
				(tr = git_tag_create_lightweight(&out, repo,
				     tag, obj, 1))))
				tr = tag_fail(repo, tag);
			else if (tr == 0)
				tag_moved(repo, tag, &commit_id, ref);
			git_object_free(obj);
			if (tr && !tagerr) {
				rc = tr;
				break;
			}
			if (tr)
				tend_buf_printf(tagerr, "%s%s", tagerr->len ?
				    "; " : "", tend_error_last());
		}
		/* and so do tend's other tags that follow this ref and sat on
		 * its tip (a drop's commit, in a group of its own, or the
		 * old container's last one) */
		if (rc == 0 && have_tip)
			tags_follow(repo, ref, &tip, &commit_id, spec);
		if (rc == 0)
			tip_record(repo, ref, &commit_id);
		/* tend's place for a tag someone moved is its newest commit
		 * now (once theirs goes, tend sets it there), and where
		 * they put it is not tend's */
		for (size_t off = 0; rc == 0 && off < theirs.len;) {
			const char *tag = theirs.ptr + off;
			char *f[5];
			bool ok;
			char *line = tag_line(repo, tag, f, &ok);

			off += strlen(tag) + 1;
			if (line)
				tag_moved(repo, tag, &commit_id, ref);
			free(line);
		}
		if (rc == 0) {
			if (!amending) {
				am.has_parent = have_tip;
				if (have_tip)
					am.parent = tip;
			}
			am.last = commit_id;
			am.count = count;
			amend_put(pass, repo, ref, &am);
			am.pass = pass;
		}
	next:
		/* done, failed, or (TEND_ECONFLICT) go round again */
		tend_buf_release(&mine);
		tend_buf_release(&theirs);
		git_reference_free(newref);
		git_signature_free(author);
		git_signature_free(committer);
		git_tree_free(newtree);
		git_tree_free(base);
		git_commit_free(parent);
		git_commit_free(tipc);
		free(list);
		if (rc != TEND_ECONFLICT)
			return rc;
	}
	return tend_error_set(TEND_ECONFLICT,
	    "git: %s kept moving under us (%d attempts)", ref, RETRIES);
}

static int set_tag_at(git_repository *repo, const char *ref,
    const char *name, const git_oid *at);

static int
set_tag(git_repository *repo, const char *ref, const char *name)
{
	git_oid tip;

	if (git_reference_name_to_id(&tip, repo, ref) != 0) {
		git_error_clear();
		return 0; /* no commit yet: the first commit sets it */
	}
	return set_tag_at(repo, ref, name, &tip);
}

/* Set tag `name` (kept on `ref`) at commit `at`, if it is tend's */
static int
set_tag_at(git_repository *repo, const char *ref, const char *name,
    const git_oid *at)
{
	git_oid tip = *at;
	git_object *obj = NULL;
	git_oid out;
	int rc;
	git_oid cur;
	bool exists;
	if (!tag_may_move(repo, ref, name, &tip, &cur, &exists)) {
		char hex[GIT_OID_HEXSZ + 1];

		git_oid_tostr(hex, sizeof hex, &cur);
		return tend_error_set(TEND_ECONFLICT,
		    "git: tag %s exists and is not tend's (it points at %.12s): "
		    "not moved; delete it (git tag -d %s) or name another tag",
		    name, hex, name);
	}
	tag_note(repo, name, &tip);
	if ((rc = git_object_lookup(&obj, repo, &tip, GIT_OBJECT_COMMIT)) ||
	    (rc = git_tag_create_lightweight(&out, repo, name, obj, 1)))
		rc = tag_fail(repo, name);
	else
		tag_moved(repo, name, &tip, ref);
	git_object_free(obj);
	return rc;
}

/*
 * Is tend's tag `tag` (kept on `ref`) off the commit tend last moved it
 * to (*to)? A kill between a commit and its tags, or a move that failed
 * (a lock someone held), leaves it on the commit before, or missing.
 * One tend never set, or someone else's, is not.
 */
static bool
tag_behind(git_repository *repo, const char *ref, const char *tag,
    bool *missing, git_oid *cur, git_oid *to)
{
	struct tend_buf full = TEND_BUF_INIT;
	git_object *o = NULL;
	bool behind;

	tend_buf_printf(&full, "refs/tags/%s", tag);
	*missing = git_reference_name_to_id(cur, repo, full.ptr) != 0;
	tend_buf_release(&full);
	git_error_clear();
	git_oid tip;

	/* `to` is written before the ref moves: it counts once the ref
	 * holds it (its tip, or below the tip: someone committed on top);
	 * a move that never happened (killed, refused) leaves it off */
	if (!tag_recorded_to(repo, tag, to) || !tag_follows(repo, tag, ref) ||
	    git_object_lookup(&o, repo, to, GIT_OBJECT_COMMIT) != 0 ||
	    git_reference_name_to_id(&tip, repo, ref) != 0 ||
	    (!git_oid_equal(&tip, to) &&
		git_graph_descendant_of(repo, &tip, to) != 1))
		behind = false;
	else
		behind = *missing || (!git_oid_equal(cur, to) &&
					 tag_is_ours(repo, tag, cur));
	git_object_free(o);
	git_error_clear();
	return behind;
}

/* A kill between a commit and its tags, or a tag's failed move, leaves
 * them behind: each pass that opens the container moves tend's tags to
 * the ref's tip, and says so on the container's result `r`. */
static void
tags_catch_up(git_repository *repo, const struct git_action *a,
    struct tend_apply_result *r, uint64_t pass)
{
	char hex[GIT_OID_HEXSZ + 1], was[GIT_OID_HEXSZ + 1];
	git_oid tip;
	bool have_tip = git_reference_name_to_id(&tip, repo, a->ref) == 0;

	git_error_clear();
	for (size_t off = 0; off < a->spec.tagslen;) {
		const char *tag = a->spec.tags + off;
		git_oid cur, to;
		bool missing;

		off += strlen(tag) + 1;
		/* one someone moved (or made anew) stays, and every pass
		 * says so until it goes: its declaration is not met (a new
		 * user's trial: plan, sync and status said all was well
		 * once the commit that first met it was in) */
		if (tag_in_way(repo, tag, have_tip ? &tip : NULL, &cur)) {
			(void)way_said(repo, tag, pass, true);
			git_oid_tostr(was, sizeof was, &cur);
			tend_apply_warn(r, "git: tag %s points at %.12s, where "
			    "tend did not put it: not moved; delete it (git tag "
			    "-d %s) for tend to set it again", tag,
			    git_oid_is_zero(&cur) ? "?" : was, tag);
			continue;
		}
		/* (one never set: its own action sets it; one on the commit
		 * tend moved it to stays, also below a commit of someone
		 * else's: the next commit of tend's moves it) */
		if (!tag_behind(repo, a->ref, tag, &missing, &cur, &to))
			continue;
		if (!missing)
			git_oid_tostr(was, sizeof was, &cur);
		git_oid_tostr(hex, sizeof hex, &to);
		if (set_tag_at(repo, a->ref, tag, &to))
			tend_apply_warn(r, "%s (it stays %s%.12s, not on %.12s)",
			    tend_error_last(), missing ? "missing" : "at ",
			    missing ? "" : was, hex);
		else if (missing) {
			/* tend made it anew: tend's own now */
			adopted_mark(repo, tag, NULL, NULL);
			tend_apply_note(r, "tag %s was missing: set again on "
			    "%.12s, where tend keeps it", tag, hex);
		}
		else
			tend_apply_note(r, "tag %s moved from %.12s to %.12s, "
			    "where tend keeps it (an earlier pass was cut "
			    "short before it, or its move failed)", tag, was,
			    hex);
		git_error_clear();
	}
}

/* check: a tag of the app points at its ref's tip */
static int
tags_check(struct tend_handler *base, struct tend_context *ctx,
    const struct tend_key *key, const struct tend_bytes *record,
    struct tend_buf *why)
{
	struct git_handler *h = (struct git_handler *)(void *)base;
	const char *state = tend_context_get(ctx, "state");
	git_repository *repo = NULL;
	struct tend_buf full = TEND_BUF_INIT, tf = TEND_BUF_INIT;
	char a[GIT_OID_HEXSZ + 1], b[GIT_OID_HEXSZ + 1] = "";
	git_oid tip, cur;
	git_object *o = NULL;
	bool have_tip, commit;
	char *name;
	int rc;

	(void)record;
	if (key->kind != TEND_KEY_STR)
		return 0;
	if ((rc = open_repo(ctx, h->repo, &repo)))
		return rc;
	name = tend_xmemdup(key->u.s.ptr, key->u.s.len + 1);
	name[key->u.s.len] = '\0';
	tend_buf_printf(&full, "refs/tags/%s", name);
	/* what the sink reads: whose the tag is (tag_may_move) */
	if (state) {
		tend_buf_printf(&tf, "%s/git-tags", state);
		tags_file = tf.ptr;
	}
	have_tip = git_reference_name_to_id(&tip, repo, h->ref) == 0;
	if (have_tip)
		git_oid_tostr(b, sizeof b, &tip);
	if (git_reference_name_to_id(&cur, repo, full.ptr) != 0) {
		/* on a ref with no commit yet, tend check finds nothing
		 * wrong (its first commit sets the tag), while a plan asks
		 * what the first set of it will find: nothing */
		if (have_tip || tend_context_pass(ctx)) {
			git_oid to, c2;
			bool missing;
			char t[GIT_OID_HEXSZ + 1];

			/* deleted by hand: the next plain sync sets it again
			 * (a new user's trial: check sent them to --full) */
			if (have_tip && tag_behind(repo, h->ref, name, &missing,
				&c2, &to) && missing) {
				git_oid_tostr(t, sizeof t, &to);
				tend_buf_printf(why, TEND_CHECK_BEHIND ": tag %s "
				    "is missing: tend sync sets it again on "
				    "%.12s", name, t);
			} else
				tend_buf_printf(why, TEND_CHECK_ABSENT ": tag %s",
				    name);
			rc = TEND_ECONFLICT;
		}
		goto out;
	}
	git_oid_tostr(a, sizeof a, &cur);
	commit = git_object_lookup(&o, repo, &cur, GIT_OBJECT_ANY) == 0 &&
	    git_object_type(o) == GIT_OBJECT_COMMIT;
	if (commit && have_tip && git_oid_equal(&cur, &tip))
		goto out; /* where it belongs */
	rc = TEND_ECONFLICT;
	if (commit && tag_is_ours(repo, name, &cur)) {
		git_oid to, c2;
		bool missing;

		/* off the commit tend moved it to: tags_catch_up; on it,
		 * with someone's commits on top: tend's next commit moves
		 * it */
		if (tag_behind(repo, h->ref, name, &missing, &c2, &to)) {
			char t[GIT_OID_HEXSZ + 1];

			git_oid_tostr(t, sizeof t, &to);
			tend_buf_printf(why, TEND_CHECK_BEHIND ": tag %s points "
			    "at %.12s, not at %.12s where tend moved it last: "
			    "tend sync moves it there", name, a, t);
		} else
			rc = 0;
	} else {
		/* tag_may_move refuses it: sync --full too */
		tend_buf_printf(why, TEND_CHECK_IN_THE_WAY ": tag %s points at "
		    "%.12s", name, a);
		if (have_tip)
			tend_buf_printf(why, ", %s at %.12s", h->ref, b);
		tend_buf_printf(why, ", and is not tend's (%s): tend leaves "
		    "it; delete it (git tag -d %s), then tend sync", commit
		    ? "made or moved by someone else" : "an annotated tag",
		    name);
	}
out:
	tags_file = NULL;
	git_object_free(o);
	git_error_clear();
	tend_buf_release(&full);
	tend_buf_release(&tf);
	git_repository_free(repo);
	free(name);
	return rc;
}

/*
 * For plan, status and check, which read a repository outside a sink:
 * open `repo` and point tags_file at the state directory's (none without
 * one); *tf keeps its path until repo_done. NULL if it cannot be opened.
 */
static git_repository *
repo_at(const char *repo, const char *state, struct tend_buf *tf)
{
	git_repository *r = NULL;

	git_ready();
	if (git_repository_open_ext(&r, repo, GIT_REPOSITORY_OPEN_NO_SEARCH,
		NULL)) {
		git_error_clear();
		return NULL;
	}
	if (state) {
		tend_buf_printf(tf, "%s/git-tags", state);
		tags_file = tf->ptr;
	}
	return r;
}

static void
repo_done(git_repository *r, struct tend_buf *tf)
{
	tags_file = NULL;
	tend_buf_release(tf);
	git_repository_free(r);
	git_error_clear();
}

int
tend_git_tags_behind(const char *repo, const char *state, const char *ref,
    char *const *tags, size_t n, tend_git_tag_fn *fn, void *arg)
{
	git_repository *r;
	struct tend_buf tf = TEND_BUF_INIT;
	char tiphex[GIT_OID_HEXSZ + 1], athex[GIT_OID_HEXSZ + 1];
	git_oid tip, cur;
	int count = 0;

	if (!n)
		return 0;
	if (!(r = repo_at(repo, state, &tf)))
		return -1;
	if (git_reference_name_to_id(&tip, r, ref) != 0) {
		repo_done(r, &tf);
		return 0; /* no commit yet: nothing to be behind */
	}
	for (size_t i = 0; i < n; i++) {
		git_oid to;
		bool missing;

		if (!tag_behind(r, ref, tags[i], &missing, &cur, &to))
			continue;
		git_oid_tostr(tiphex, sizeof tiphex, &to);
		tiphex[12] = '\0';
		if (!missing) {
			git_oid_tostr(athex, sizeof athex, &cur);
			athex[12] = '\0';
		}
		struct tend_buf lock = TEND_BUF_INIT;
		struct stat st;

		tend_buf_printf(&lock, "%srefs/tags/%s.lock",
		    git_repository_commondir(r), tags[i]);
		fn(tags[i], missing ? NULL : athex, tiphex,
		    lstat(lock.ptr, &st) == 0 ? lock.ptr : NULL, arg);
		tend_buf_release(&lock);
		count++;
	}
	repo_done(r, &tf);
	return count;
}

int
tend_git_ref_rewritten(const char *repo, const char *state, const char *ref,
    char was[13])
{
	git_repository *r;
	struct tend_buf tf = TEND_BUF_INIT, name = TEND_BUF_INIT;
	char hex[GIT_OID_HEXSZ + 1];
	git_oid to, tip;
	int lost = 0;

	/* (unreadable: the pass says what is wrong with it) */
	if (!state || !(r = repo_at(repo, state, &tf)))
		return 0;
	tip_name(&name, ref);
	if (tag_recorded_to(r, name.ptr, &to)) {
		git_commit *c = NULL;

		/* gone, or not below the tip (someone else's commits on top
		 * of tend's are fine); a commit gc took with a reset is gone
		 * too */
		lost = git_reference_name_to_id(&tip, r, ref) != 0 ||
		    git_commit_lookup(&c, r, &to) != 0 ||
		    (!git_oid_equal(&tip, &to) &&
			git_graph_descendant_of(r, &tip, &to) != 1);
		git_commit_free(c);
		git_oid_tostr(hex, sizeof hex, &to);
		memcpy(was, hex, 12);
		was[12] = '\0';
	}
	tend_buf_release(&name);
	repo_done(r, &tf);
	return lost;
}

bool
tend_git_tag_stays(const char *repo, const char *state, const char *ref,
    const char *tag)
{
	struct tend_buf tf = TEND_BUF_INIT, full = TEND_BUF_INIT;
	git_repository *r;
	git_oid id;
	bool stays = false;

	if (!state || !(r = repo_at(repo, state, &tf)))
		return false;
	tend_buf_printf(&full, "refs/tags/%s", tag);
	/* as the untag decides (gitconn_apply's A_UNTAG) */
	if (tag_follows(r, tag, ref) &&
	    git_reference_name_to_id(&id, r, full.ptr) == 0)
		stays = tag_adopted(r, tag) || !tag_is_ours(r, tag, &id);
	git_error_clear();
	tend_buf_release(&full);
	repo_done(r, &tf);
	return stays;
}

int
tend_git_tags_in_way(const char *repo, const char *state, const char *ref,
    char *const *tags, size_t n, tend_git_tag_fn *fn, void *arg)
{
	git_repository *r;
	struct tend_buf tf = TEND_BUF_INIT;
	char athex[GIT_OID_HEXSZ + 1];
	git_oid tip;
	int count = 0;

	if (!n || !state)
		return 0;
	if (!(r = repo_at(repo, state, &tf)))
		return -1;
	bool have_tip = git_reference_name_to_id(&tip, r, ref) == 0;
	for (size_t i = 0; i < n; i++) {
		git_oid cur;

		/* (one tend never set: its own action says so) */
		if (!tag_in_way(r, tags[i], have_tip ? &tip : NULL, &cur))
			continue;
		if (git_oid_is_zero(&cur))
			strcpy(athex, "?"); /* (a ref with no target) */
		else
			git_oid_tostr(athex, sizeof athex, &cur);
		athex[12] = '\0';
		fn(tags[i], athex, NULL, NULL, arg);
		count++;
	}
	repo_done(r, &tf);
	return count;
}

/* Is the tag `name` (re)declared by an action of this group? A prefix
 * change on one ref deletes the old container's tag and declares the
 * new one's: the same tag, which stays. */
static bool
tag_set_here(struct git_action *const *acts, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (acts[i]->kind == A_TAG && strcmp(acts[i]->path, name) == 0)
			return true;
	return false;
}

/* ---- the sink ---- */

static bool
has_kind(struct git_action *const *acts, size_t n, enum akind kind)
{
	for (size_t i = 0; i < n; i++)
		if (acts[i]->kind == kind)
			return true;
	return false;
}

static int
cmp_group(const void *x, const void *y)
{
	const struct git_action *a = *(struct git_action *const *)x;
	const struct git_action *b = *(struct git_action *const *)y;
	int c = strcmp(a->repo, b->repo);

	if (!c)
		c = strcmp(a->ref, b->ref);
	return c;
}

/* ---- lock files left by a killed tend ----
 *
 * libgit2 moves a ref by writing its new value into REF.lock and renaming
 * that over REF. A tend SIGKILLed in between leaves the lock, and every
 * later update of that ref fails until someone deletes it. So right
 * before each ref write, tend appends "LOCK VALUE" to STATE/git-locks
 * (under its pid, written when the group starts; removed when it ends):
 * the lock file it is about to take and what it will write into it (a
 * commit id, or "-" for a delete). The next tend finds the list of a dead
 * pid, waits a second for each listed lock that exists (a live git lets
 * go of a lock in that time), then clears it only if it holds what tend
 * was writing, or nothing. A lock with anything else in it is another
 * program's (say a git that took the ref after tend died, before tend's
 * own lock): never broken; the update fails with an error naming it.
 */
static char *locks_list; /* the group being applied: one at a time */

static void locks_recover(const char *list);
static void locks_begin(const char *list);

/*
 * Around a group of writes to repositories (a sink's group, a sweep):
 * tend's tags file and the list of ref locks taken, both under the state
 * directory `state` (NULL: a library user's engine, neither). A killed
 * tend's leftover locks are recovered first. *tf keeps the tags file's
 * path alive until writes_end.
 */
static void
writes_begin_at(const char *state, const char *locks, struct tend_buf *tf)
{
	struct tend_buf p = TEND_BUF_INIT;

	if (!state)
		return;
	tend_buf_printf(tf, "%s/git-tags", state);
	tags_file = tf->ptr;
	if (locks)
		tend_buf_puts(&p, locks);
	else
		tend_buf_printf(&p, "%s/git-locks", state);
	locks_list = tend_buf_detach(&p, NULL);
	locks_recover(locks_list);
	locks_begin(locks_list);
}

static void
writes_begin(const char *state, struct tend_buf *tf)
{
	writes_begin_at(state, NULL, tf);
}

static void
writes_end(struct tend_buf *tf)
{
	if (locks_list)
		unlink(locks_list); /* every lock we took is gone with its update */
	free(locks_list);
	locks_list = NULL;
	tags_file = NULL;
	tend_buf_release(tf);
}

/* Is the stale lock `path` what a tend was writing (`want`)? */
static bool
lock_is_ours(const char *path, const char *want)
{
	char buf[128];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n;

	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n < 0)
		return false;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return n == 0 || (strcmp(want, "-") != 0 && strcmp(buf, want) == 0);
}

static void
locks_recover(const char *list)
{
	FILE *f = fopen(list, "re");
	char line[4096];
	long pid = 0;

	if (!f)
		return;
	if (fgets(line, sizeof line, f))
		pid = strtol(line, NULL, 10);
	if (pid > 0 && pid != (long)getpid() && tend_pid_gone(pid)) {
		while (fgets(line, sizeof line, f)) {
			line[strcspn(line, "\n")] = '\0';
			char *want = strrchr(line, ' ');
			struct stat st;
			int waited = 0;

			if (!want)
				continue;
			*want++ = '\0';
			while (lstat(line, &st) == 0 && waited < 50) {
				usleep(20 * 1000);
				waited++;
			}
			if (waited == 50 && S_ISREG(st.st_mode) &&
			    lock_is_ours(line, want) && unlink(line) == 0)
				fprintf(stderr, "tend: removed %s, left by an "
						"interrupted tend (pid %ld)\n",
				    line, pid);
		}
		fclose(f);
		unlink(list);
		return;
	}
	fclose(f);
	if (pid == (long)getpid())
		unlink(list);
}

static void
locks_begin(const char *list)
{
	char pid[32];
	int fd = open(list, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd >= 0) {
		snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
		(void)!write(fd, pid, strlen(pid));
		close(fd);
	}
}

/* before a write of `ref` (a full name) that puts `oid` (NULL: a delete)
 * into its lock file */
static void
locks_note(git_repository *repo, const char *ref, const git_oid *oid)
{
	struct tend_buf b = TEND_BUF_INIT;
	char hex[GIT_OID_HEXSZ + 1] = "-";

	if (!locks_list)
		return;
	if (oid)
		git_oid_tostr(hex, sizeof hex, oid);
	tend_buf_printf(&b, "%s%s.lock %s\n", git_repository_commondir(repo),
	    ref, hex);
	int fd = open(locks_list, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd >= 0) {
		(void)!write(fd, b.ptr, b.len);
		close(fd);
	}
	tend_buf_release(&b);
}

/* A blob's fingerprint as a record holds it: a symlink's is of its text
 * (fs.h), a file's of its bytes */
static struct tend_fp
blob_fp(const git_blob *b, bool link)
{
	struct tend_fp fp;

	if (link) {
		char *text = strndup(git_blob_rawcontent(b),
		    (size_t)git_blob_rawsize(b));
		fp = tend_fs_link_fp(text ? text : "");
		free(text);
	} else
		fp = tend_fp_content(git_blob_rawcontent(b),
		    (size_t)git_blob_rawsize(b));
	return fp;
}

struct going {
	const char *top; /* the tree's path */
	char *const *dels; /* sorted: the group's deleted paths */
	size_t ndels;
	bool kept;	/* an entry under it that no delete removes */
};

static int
cmp_str(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

static int
going_cb(const char *root, const git_tree_entry *e, void *arg)
{
	struct going *g = arg;
	struct tend_buf p = TEND_BUF_INIT;

	if (git_tree_entry_type(e) == GIT_OBJECT_TREE)
		return 0;
	tend_buf_printf(&p, "%s/%s%s", g->top, root, git_tree_entry_name(e));
	const char *key = p.ptr;
	g->kept = !bsearch(&key, g->dels, g->ndels, sizeof *g->dels, cmp_str);
	tend_buf_release(&p);
	return g->kept ? -1 : 0;
}

/* Does the tree `e` at `top` keep an entry once the group's deletes
 * (sorted full paths) are done? A file of tend's that became a directory
 * and back is a tree of tend's entries only, all going in this commit. */
static bool
tree_kept(git_repository *repo, const git_tree_entry *e, const char *top,
    char *const *dels, size_t ndels)
{
	struct going g = {top, dels, ndels, false};
	git_tree *t = NULL;

	if (ndels == 0 || git_tree_lookup(&t, repo, git_tree_entry_id(e)))
		g.kept = true;
	else if (git_tree_walk(t, GIT_TREEWALK_PRE, going_cb, &g) < 0 &&
	    !g.kept)
		g.kept = true; /* the walk failed: keep it */
	git_tree_free(t);
	git_error_clear();
	return g.kept;
}

/*
 * The first write of an entry (a->fresh) finds `e` at its path in the
 * ref: tend replaces it only if it is tend's, an entry holding the new
 * blob `id` with the new mode, or the content and mode of one of the
 * records an earlier apply cut short may have written. A tree (a
 * directory of the ref) or somebody else's blob stays, and the action
 * fails (the others still commit). The delete of an entry never written
 * (`id` NULL) removes it only if it holds one of those records: else
 * the state goes and the entry stays.
 */
static bool
entry_in_the_way(git_repository *repo, const struct git_action *a,
    const git_tree_entry *e, const git_oid *id, char *const *dels,
    size_t ndels, const char *path)
{
	git_blob *b = NULL;
	bool way = true;

	if (git_tree_entry_type(e) == GIT_OBJECT_TREE)
		return !id || tree_kept(repo, e, path, dels, ndels);
	if (git_tree_entry_type(e) != GIT_OBJECT_BLOB)
		return true;
	/* the mode counts, as check compares it */
	unsigned have = (unsigned)git_tree_entry_filemode(e);
	if (id && git_oid_equal(git_tree_entry_id(e), id) &&
	    have == a->gitmode)
		return false;
	if (a->nprev == 0 || git_blob_lookup(&b, repo, git_tree_entry_id(e))) {
		git_error_clear();
		return true;
	}
	struct tend_fp fp = blob_fp(b, have == GIT_FILEMODE_LINK);
	for (size_t i = 0; way && i < a->nprev; i++) {
		const uint8_t *r = a->prev + REC_LEN * i;
		unsigned mode = (unsigned)r[17] | (unsigned)r[18] << 8 |
		    (unsigned)r[19] << 16;

		way = memcmp(r + 1, fp.b, 16) != 0 || mode != have;
	}
	git_blob_free(b);
	return way;
}

/* The first directory of `path` that `tip` holds as something else
 * than a tree (a file, a link), unless `dels` (sorted) deletes it, as
 * "the file DIR" (or symlink, submodule); or NULL. `ok` keeps the last
 * directory found clean (entries come grouped by directory: one look per
 * directory, not per entry). */
static char *
file_above(git_tree *tip, const char *path, char **dels, size_t ndels,
    struct tend_buf *ok)
{
	const char *slash = strrchr(path, '/');
	size_t dirlen = slash ? (size_t)(slash - path) : 0;

	/* the directory the last entry checked was in: clean already */
	if (!slash || (ok->ptr && ok->len == dirlen &&
			  memcmp(ok->ptr, path, dirlen) == 0))
		return NULL;
	char *p = tend_xstrdup(path), *found = NULL;

	for (char *sl = strchr(p, '/'); sl && !found; sl = strchr(sl + 1, '/')) {
		git_tree_entry *e = NULL;

		*sl = '\0';
		if (git_tree_entry_bypath(&e, tip, p) == 0 &&
		    git_tree_entry_type(e) != GIT_OBJECT_TREE &&
		    !(ndels && bsearch(&p, dels, ndels, sizeof *dels, cmp_str))) {
			struct tend_buf b = TEND_BUF_INIT;

			tend_buf_printf(&b, "%s %s",
			    git_tree_entry_filemode(e) == GIT_FILEMODE_LINK
				? "the symlink" : git_tree_entry_type(e) ==
				    GIT_OBJECT_COMMIT ? "the submodule"
						      : "the file", p);
			found = tend_buf_detach(&b, NULL);
		}
		git_tree_entry_free(e);
		*sl = '/';
	}
	git_error_clear();
	free(p);
	if (!found) {
		tend_buf_reset(ok);
		tend_buf_put(ok, path, dirlen);
	}
	return found;
}

/* The tree of `ref`'s tip, or NULL (no such ref yet) */
static git_tree *
tip_tree(git_repository *repo, const char *ref)
{
	git_oid tip;
	git_commit *c = NULL;
	git_tree *t = NULL;

	if (git_reference_name_to_id(&tip, repo, ref) == 0 &&
	    git_commit_lookup(&c, repo, &tip) == 0)
		(void)git_commit_tree(&t, c);
	git_commit_free(c);
	git_error_clear();
	return t;
}

static void
apply_group(struct tend_context *ctx, struct git_action **acts, size_t n,
    size_t *idx, struct tend_apply_result *results)
{
	git_repository *repo = NULL;
	struct update *ups = calloc(n + 1, sizeof *ups);
	size_t nu = 0, nentries = 0;
	struct packer pk;
	bool use_pack = false;
	struct tend_buf path = TEND_BUF_INIT, tf = TEND_BUF_INIT,
			tagerr = TEND_BUF_INIT;
	int rc;

	if (!ups)
		abort();
	/* [tend] fsync: libgit2's objects and refs, and our packs */
	bool sync = tend_context_get(ctx, "fsync") != NULL;
	/* the packs tend writes are listed there (tend_pack_merge) */
	const char *state = tend_context_get(ctx, "state");

	if (state) {
		tend_buf_printf(&path, "%s/git-packs", state);
		tend_pack_set_list(path.ptr);
		tend_buf_reset(&path);
	} else
		tend_pack_set_list(NULL);
	git_libgit2_opts(GIT_OPT_ENABLE_FSYNC_GITDIR, (int)sync);
	/* every id a tree or commit of ours names is of an object written
	 * here (or the tip's): libgit2's check that it exists reads each
	 * object's header back from its pack, which at 100k new blobs kept
	 * the whole pack mapped (360 MiB of a 713 MiB peak) */
	git_libgit2_opts(GIT_OPT_ENABLE_STRICT_OBJECT_CREATION, 0);
	tend_pack_set_fsync(sync);
	rc = open_repo(ctx, acts[0]->repo, &repo);
	if (rc && repo_missing(ctx, acts[0]->repo)) {
		/* a repository that is not there (a typo, since fixed) has
		 * nothing of ours to undo: its deletes are done */
		bool all = true;

		for (size_t i = 0; i < n; i++)
			all &= acts[i]->kind == A_DROP ||
			    acts[i]->kind == A_DEL || acts[i]->kind == A_UNTAG;
		if (all) {
			tend_error_clear();
			rc = 0;
			goto out;
		}
	}
	if (rc)
		goto out;
	tend_pack_sweep(repo);
	writes_begin(state, &tf);
	/* containers first: open (and wipe), or drop */
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct git_action *a = acts[i];
		char *where = NULL;

		if (a->kind == A_OPEN || a->kind == A_DROP) {
			if (a->kind == A_OPEN &&
			    !checkout_allowed(ctx, a->repo, a->ref,
				a->spec.allow) &&
			    checked_out(repo, a->ref, &where)) {
				tend_apply_fail(&results[idx[i]], TEND_ECONFLICT,
				    "git: %s is checked out in %s: refusing to "
				    "write it (its files would look deleted); set "
				    "allow-checked-out = true to do it anyway",
				    a->ref, where);
				free(where);
				continue;
			}
			if (a->wipe) {
				int r = commit_updates(repo, a->ref, NULL, 0,
				    a->prefix, true, &a->spec, 0, NULL,
				    tend_context_pass(ctx), NULL);
				if (r)
					tend_apply_fail(&results[idx[i]], r, "%s",
					    tend_error_last());
			}
			if (a->kind == A_OPEN && results[idx[i]].status == 0) {
				results[idx[i]].child = &handler_new(H_ENTRIES,
				    a->repo, a->ref, a->prefix, &a->spec)->base;
				tags_catch_up(repo, a, &results[idx[i]],
				    tend_context_pass(ctx));
			}
		}
	}
	/* a ref checked out in a working tree is refused at every commit,
	 * not only when its container opens: a worktree may have been added
	 * since (a running agent opens it once) */
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct git_action *a = acts[i];
		char *where = NULL;

		if (a->kind != A_PUT && a->kind != A_DEL)
			continue;
		if (!checkout_allowed(ctx, a->repo, a->ref, a->spec.allow) &&
		    checked_out(repo, a->ref, &where)) {
			rc = tend_error_set(TEND_ECONFLICT,
			    "git: %s is checked out in %s: refusing to write "
			    "it (its files would look deleted); set "
			    "allow-checked-out = true%s to do it anyway",
			    a->ref, where, a->spec.allow ? " (with this ref)"
							 : "");
			free(where);
		}
		break;
	}
	/* a first set of a tag that finds it on the tip (before this
	 * group's commit moves both) adopts it */
	for (size_t i = 0; i < n; i++) {
		struct git_action *a = acts[i];
		git_oid cur, head;

		if (a->kind != A_TAG || !(a->fresh || a->repair))
			continue;
		tend_buf_printf(&path, "refs/tags/%s", a->path);
		/* (a repair: where tend keeps it, which may be below
		 * someone else's commits) */
		a->there = git_reference_name_to_id(&cur, repo, path.ptr) ==
		    0 && (a->fresh ? git_reference_name_to_id(&head, repo,
				      a->ref) == 0
				   : tag_recorded_to(repo, a->path, &head)) &&
		    git_oid_equal(&cur, &head);
		/* (one tend set already: an earlier batch's commit of this
		 * pass moved it there, it is tend's, not adopted) */
		if (a->there && a->fresh) {
			char *f[5];
			bool ok;
			char *line = tag_line(repo, a->path, f, &ok);

			a->there = line == NULL;
			free(line);
		}
		tend_buf_reset(&path);
		git_error_clear();
	}
	/* sync --full: an entry the ref holds as recorded (a blob whose id
	 * is known for the recorded fingerprint: blobids.h) is neither read
	 * nor written again */
	git_tree *seen = NULL;
	for (size_t i = 0, looked = 0; i < n && rc == 0 && state; i++) {
		struct git_action *a = acts[i];
		git_tree_entry *e = NULL;

		if (a->kind != A_PUT || !a->repair ||
		    a->gitmode == GIT_FILEMODE_LINK)
			continue;
		if (!looked++)
			seen = tip_tree(repo, a->ref);
		if (!seen)
			break;
		join_path(&path, a->prefix, a->path);
		if (git_tree_entry_bypath(&e, seen, path.ptr) == 0 &&
		    git_tree_entry_type(e) == GIT_OBJECT_BLOB &&
		    (unsigned)git_tree_entry_filemode(e) == a->gitmode &&
		    tend_blobids_match(state, git_tree_entry_id(e), &a->e.fp)) {
			a->kind = A_SAME;
			results[idx[i]].unchanged = true;
		}
		git_tree_entry_free(e);
		git_error_clear();
	}
	git_tree_free(seen);
	/* entries: one commit for all of them; many new blobs: one pack */
	const struct spec *spec = NULL;
	size_t nputs = 0, ndel_acts = 0;
	for (size_t i = 0; i < n; i++) {
		nputs += acts[i]->kind == A_PUT;
		ndel_acts += acts[i]->kind == A_DEL;
	}
	git_oid *packed = NULL;
	bool *pchanged = NULL;
	if (rc == 0 && nputs >= PACK_MIN) {
		struct git_action **puts = tend_xcalloc(nputs + 1, sizeof *puts);
		size_t k = 0;

		packed = tend_xcalloc(nputs + 1, sizeof *packed);
		pchanged = tend_xcalloc(nputs + 1, sizeof *pchanged);
		for (size_t i = 0; i < n; i++)
			if (acts[i]->kind == A_PUT)
				puts[k++] = acts[i];
		/* before the in-memory backend goes in: the blobs too big
		 * for the pack are written loose, and must reach the disk */
		rc = pack_blobs(repo, puts, k, packed, pchanged);
		free(puts);
		if (rc == 0 && packer_start(&pk, repo) == 0)
			use_pack = true;
	} else if (rc == 0 && state && (nputs || ndel_acts)) {
		/* a few new blobs, or only deletes (a pass of an agent, a
		 * sync of a few changes): into the in-memory backend with the
		 * trees and the commit, one small pack for all of them
		 * (packer_flush)
		 * instead of a file created and renamed per object (most of
		 * such a pass's time, in ext4's inode allocation);
		 * tend_pack_merge folds those packs together. A content too
		 * big for a pack is written first, loose and streamed. */
		packed = tend_xcalloc(nputs + 1, sizeof *packed);
		pchanged = tend_xcalloc(nputs + 1, sizeof *pchanged);
		for (int round = 0; round < 2 && rc == 0; round++) {
			size_t k = 0;

			if (round == 1 && packer_start(&pk, repo) == 0)
				use_pack = true;
			for (size_t i = 0; i < n && rc == 0; i++) {
				struct git_action *a = acts[i];
				bool big = !S_ISLNK(a->e.mode) &&
				    a->e.size > PACK_MAX_BLOB;

				if (a->kind != A_PUT)
					continue;
				if (big == (round == 0))
					rc = blob_of_entry(repo, a->path, &a->e,
					    &packed[k], &pchanged[k]);
				k++;
			}
		}
	}
	size_t nput = 0;
	bool put_spec = false;
	struct tend_buf written = TEND_BUF_INIT; /* blobids.h pairs */
	git_tree *tip = NULL; /* for first writes: what is there now */
	/* what the ref holds: a first write may find something there, and
	 * any write or delete another author's file or directory where
	 * tend's path goes (read after the blobs are written: the freshest
	 * view for those checks) */
	for (size_t i = 0; i < n && rc == 0 && !tip; i++)
		if ((acts[i]->kind == A_PUT || acts[i]->kind == A_DEL) &&
		    !(tip = tip_tree(repo, acts[i]->ref)))
			break; /* no ref yet: nothing is in the way */
	char **dels = NULL; /* with a tip: the paths this group deletes */
	size_t ndels = 0;
	struct tend_buf okdir = TEND_BUF_INIT; /* file_above's */
	for (size_t i = 0; tip && i < n; i++) {
		if (acts[i]->kind != A_DEL)
			continue;
		if (!dels)
			dels = tend_xcalloc(n, sizeof *dels);
		join_path(&path, acts[i]->prefix, acts[i]->path);
		dels[ndels++] = tend_xstrdup(path.ptr);
	}
	if (ndels > 1)
		qsort(dels, ndels, sizeof *dels, cmp_str);
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct git_action *a = acts[i];

		if (a->kind != A_PUT && a->kind != A_DEL)
			continue;
		/* the commit's message and author: a written entry's, else
		 * a deleted one's */
		if (!spec || (a->kind == A_PUT && !put_spec))
			spec = &a->spec;
		put_spec |= a->kind == A_PUT;
		join_path(&path, a->prefix, a->path);
		size_t k = nu++;
		ups[k].path = tend_xstrdup(path.ptr);
		ups[k].seq = k;
		ups[k].act = i;
		memset(&ups[k].u, 0, sizeof ups[k].u);
		if (a->kind == A_PUT) {
			bool changed = false;

			if (packed) {
				changed = pchanged[nput];
				ups[k].u.id = packed[nput++];
			} else if ((rc = blob_of_entry(repo, a->path, &a->e,
					&ups[k].u.id, &changed)))
				break;
			if (changed) {
				tend_apply_fail(&results[idx[i]], TEND_ERROR,
				    "git: %s " TEND_FS_CHANGED, a->e.src);
				free(ups[k].path);
				nu--;
				continue;
			}
			/* a directory of its path that is a file (not one
			 * this group deletes) is in the way of this entry
			 * only: in the tree update it is a D/F conflict,
			 * which failed the whole commit */
			char *blocker = tip ? file_above(tip, path.ptr, dels,
			    ndels, &okdir) : NULL;
			if (blocker) {
				tend_apply_fail(&results[idx[i]], TEND_ECONFLICT,
				    "git: %s in %s: %s is in the way: "
				    ABOVE_WAY_FIX, path.ptr, a->ref, blocker);
				free(blocker);
				free(ups[k].path);
				nu--;
				continue;
			}
			/* what the ref holds at its path */
			git_tree_entry *e = NULL;
			if (tip && git_tree_entry_bypath(&e, tip, path.ptr)) {
				e = NULL;
				git_error_clear();
			}
			/* a directory at the path of an entry tend wrote:
			 * another author's (tend writes no trees), never
			 * replaced */
			if (!a->fresh && e &&
			    git_tree_entry_type(e) == GIT_OBJECT_TREE &&
			    !(ndels && bsearch(&ups[k].path, dels, ndels,
				sizeof *dels, cmp_str))) {
				struct tend_buf w = TEND_BUF_INIT;

				dir_way(&w, repo, e, path.ptr);
				tend_apply_fail(&results[idx[i]], TEND_ECONFLICT,
				    "git: %s in %s: %s is in the way: "
				    DIR_WAY_FIX, path.ptr, a->ref, w.ptr);
				tend_buf_release(&w);
				git_tree_entry_free(e);
				free(ups[k].path);
				nu--;
				continue;
			}
			if (a->fresh && e &&
			    git_tree_entry_type(e) == GIT_OBJECT_TREE &&
			    entry_in_the_way(repo, a, e, &ups[k].u.id, dels,
				ndels, path.ptr)) {
				struct tend_buf w = TEND_BUF_INIT;

				dir_way(&w, repo, e, path.ptr);
				tend_apply_fail(&results[idx[i]], TEND_ECONFLICT,
				    "git: %s in %s: %s is in the way: "
				    DIR_WAY_FIX, path.ptr, a->ref, w.ptr);
				tend_buf_release(&w);
				git_tree_entry_free(e);
				free(ups[k].path);
				nu--;
				continue;
			}
			if (a->fresh && e &&
			    entry_in_the_way(repo, a, e, &ups[k].u.id, dels,
				ndels, path.ptr)) {
				tend_apply_fail(&results[idx[i]], TEND_ECONFLICT,
				    "git: %s in %s: %s %s is in the way: tend "
				    "replaces only what it knows it wrote (remove "
				    "it from the ref, then tend sync)", path.ptr,
				    a->ref,
				    git_tree_entry_type(e) == GIT_OBJECT_TREE
					? "a directory" : "an entry",
				    /* (an earlier write failed or was cut
				     * short: tend may have written it then,
				     * and somebody changed it since, or not) */
				    a->nprev && git_tree_entry_type(e) !=
					GIT_OBJECT_TREE
					? "holding none of what tend may have "
					  "written there"
					: "tend has no record of writing");
				git_tree_entry_free(e);
				free(ups[k].path);
				nu--;
				continue;
			}
			/* what the ref holds there already, at a first
			 * write: adopted; at a repair: unchanged (neither a
			 * change the commit's {count} counts) */
			if ((a->fresh || a->repair) && e &&
			    git_tree_entry_type(e) == GIT_OBJECT_BLOB &&
			    (unsigned)git_tree_entry_filemode(e) == a->gitmode &&
			    git_oid_equal(git_tree_entry_id(e), &ups[k].u.id)) {
				if (a->fresh)
					results[idx[i]].adopted = true;
				else
					results[idx[i]].unchanged = true;
				nentries--;
			}
			git_tree_entry_free(e);
			git_error_clear();
			ups[k].u.action = GIT_TREE_UPDATE_UPSERT;
			ups[k].u.filemode = (git_filemode_t)a->gitmode;
			if (a->gitmode != GIT_FILEMODE_LINK) {
				struct tend_blobid b;

				memcpy(b.id, ups[k].u.id.id, sizeof b.id);
				b.fp = a->e.fp;
				tend_buf_put(&written, &b, sizeof b);
			}
		} else {
			git_tree_entry *e = NULL;
			bool there = tip &&
			    git_tree_entry_bypath(&e, tip, path.ptr) == 0;
			/* a directory where tend's file was is another
			 * author's, whatever tend wrote there before (a
			 * remove of the path would take all of it) */
			bool dir = there &&
			    git_tree_entry_type(e) == GIT_OBJECT_TREE;
			bool foreign = there && (dir || (a->fresh &&
			    entry_in_the_way(repo, a, e, NULL, NULL, 0,
				path.ptr)));

			git_tree_entry_free(e);
			git_error_clear();
			if (dir || (a->fresh && (foreign || !there))) {
				/* never tend's, or nothing there: its state
				 * goes, what is there stays */
				results[idx[i]].left = true;
				free(ups[k].path);
				nu--;
				continue;
			}
			ups[k].u.action = GIT_TREE_UPDATE_REMOVE;
		}
		nentries++;
	}
	/* the last action on a path wins (sorted: no quadratic search) */
	if (nu > 1) {
		size_t k = 0;

		qsort(ups, nu, sizeof *ups, cmp_update);
		for (size_t i = 0; i < nu; i++) {
			if (i + 1 < nu && strcmp(ups[i].path, ups[i + 1].path) == 0) {
				free(ups[i].path);
				continue;
			}
			ups[k++] = ups[i];
		}
		nu = k;
	}
	/* two of the group's writes, one under the other's path (x, and
	 * x/y): a file and a directory at one name, which failed the whole
	 * commit (libgit2's D/F conflict). The file's entry fails, naming
	 * the other; the rest commits */
	if (nu > 1) {
		size_t k = 0;

		for (size_t i = 0; i < nu; i++) {
			const char *under =
			    ups[i].u.action == GIT_TREE_UPDATE_UPSERT
			    ? write_under(ups, i + 1, nu, ups[i].path) : NULL;

			if (under) {
				tend_apply_fail(&results[idx[ups[i].act]],
				    TEND_ECONFLICT, "conflict: %s and %s, two "
				    "entries of this pass, need %s to be a file "
				    "and a directory in %s: rename one of their "
				    "sources", ups[i].path, under, ups[i].path,
				    acts[0]->ref);
				free(ups[i].path);
				nentries--;
				continue;
			}
			ups[k++] = ups[i];
		}
		nu = k;
	}
	if (rc == 0 && nu) {
		/* a tag whose state goes in this group (the app moved to
		 * another ref or prefix, or dropped it) does not follow this
		 * commit */
		struct spec keep = *spec;
		struct tend_buf tags = TEND_BUF_INIT;

		for (size_t off = 0; off < spec->tagslen;) {
			const char *t = spec->tags + off;
			bool going = false;

			for (size_t i = 0; i < n && !going; i++)
				going = acts[i]->kind == A_UNTAG &&
				    strcmp(acts[i]->path, t) == 0 &&
				    !tag_set_here(acts, n, t);
			if (!going)
				tend_buf_put(&tags, t, strlen(t) + 1);
			off += strlen(t) + 1;
		}
		keep.tags = tags.ptr ? tags.ptr : (char *)"";
		keep.tagslen = tags.len;
		rc = commit_updates(repo, acts[0]->ref, ups, nu, "", false,
		    &keep, nentries, use_pack ? &pk : NULL,
		    tend_context_pass(ctx), &tagerr);
		tend_buf_release(&tags);
	}
	if (use_pack)
		packer_stop(&pk);
	git_tree_free(tip);
	tend_buf_release(&okdir);
	for (size_t i = 0; i < ndels; i++)
		free(dels[i]);
	free(dels);
	free(packed);
	free(pchanged);
	/* the blobs are written, whatever became of the commit */
	tend_blobids_note(tend_context_get(ctx, "state"), (void *)written.ptr,
	    written.len / sizeof(struct tend_blobid));
	tend_buf_release(&written);
	if (rc) {
		for (size_t i = 0; i < n; i++)
			if (acts[i]->kind == A_PUT || acts[i]->kind == A_DEL)
				tend_apply_fail(&results[idx[i]], rc, "%s",
				    tend_error_last());
		rc = 0;
	} else if (tagerr.len && !has_kind(acts, n, A_TAG))
		/* the entries are committed; a tag did not follow: said
		 * once, beside the first of them (a tag set in this group
		 * says it itself, below) */
		for (size_t i = 0; i < n; i++)
			if ((acts[i]->kind == A_PUT || acts[i]->kind == A_DEL) &&
			    !results[idx[i]].status) {
				tend_apply_warn(&results[idx[i]], "%s (%s is "
				    "committed; tend sync moves the tag once "
				    "that is mended)", tagerr.ptr, acts[i]->ref);
				break;
			}
	tend_buf_release(&tagerr);
	/* tags follow the tip */
	for (size_t i = 0; i < n; i++) {
		struct git_action *a = acts[i];
		struct tend_buf full = TEND_BUF_INIT;
		int r = 0;

		if (a->kind == A_TAG) {
			/* a first set that finds it on the tip: adopted */
			git_oid head;

			/* a repair puts it back where tend keeps it (the
			 * commit it moved it to last, maybe below someone
			 * else's) */
			r = a->repair && tag_recorded_to(repo, a->path, &head)
			    ? set_tag_at(repo, a->ref, a->path, &head)
			    : set_tag(repo, a->ref, a->path);
			results[idx[i]].adopted = r == 0 && a->there &&
			    a->fresh;
			if (results[idx[i]].adopted &&
			    git_reference_name_to_id(&head, repo, a->ref) == 0)
				adopted_mark(repo, a->path, &head, a->ref);
			results[idx[i]].unchanged = r == 0 && a->there &&
			    a->repair;
			if (r == 0 && git_reference_name_to_id(&head, repo,
					  a->ref) != 0)
				tend_apply_note(&results[idx[i]], "tag %s: %s has "
				    "no commit yet: its first commit sets the "
				    "tag", a->path, a->ref);
			git_error_clear();
		} else if (a->kind == A_UNTAG) {
			git_reference *t = NULL;
			bool gone = false;
			/* set again in this group (the same tag of a moved
			 * prefix), or following the app to another ref or
			 * prefix: not this state's to let go */
			bool mine = !tag_set_here(acts, n, a->path) &&
			    tag_follows(repo, a->path, a->ref);

			tend_buf_printf(&full, "refs/tags/%s", a->path);
			if (mine &&
			    git_reference_lookup(&t, repo, full.ptr) == 0) {
				const git_oid *id = git_reference_target(t);

				/* only where tend left it: a tag moved or
				 * made by someone else stays, and so does
				 * one someone had before tend adopted it */
				if (id && tag_adopted(repo, a->path))
					tend_apply_note(&results[idx[i]], "tag "
					    "%s was there before tend adopted "
					    "it: left where it is", a->path);
				else if (id && tag_is_ours(repo, a->path, id)) {
					locks_note(repo, full.ptr, NULL);
					if (git_reference_delete(t))
						r = git_fail("delete tag",
						    a->path);
					else
						gone = true;
				}
				git_reference_free(t);
			}
			git_error_clear();
			/* tend's record goes with the state (one left
			 * behind made tend set the tag again, as its own,
			 * once someone deleted it and it was declared anew) */
			if (mine && r == 0) {
				tag_record(repo, a->path, NULL, NULL, NULL);
				adopted_mark(repo, a->path, NULL, NULL);
			}
			/* its state goes; the tag stays (not tend's, set
			 * again here, adopted, or not there): not a delete */
			results[idx[i]].left = r == 0 && !gone;
		}
		tend_buf_release(&full);
		if (r)
			tend_apply_fail(&results[idx[i]], r, "%s",
			    tend_error_last());
	}
	/* a dropped container's subtree keeps what tend did not write: said */
	for (size_t i = 0; i < n; i++) {
		struct git_action *a = acts[i];
		git_tree *t, *sub = NULL;
		git_tree_entry *e = NULL;

		if (a->kind != A_DROP || results[idx[i]].status ||
		    !(t = tip_tree(repo, a->ref)))
			continue;
		if (!a->prefix[0])
			sub = t;
		else if (git_tree_entry_bypath(&e, t, a->prefix) == 0 &&
		    git_tree_entry_type(e) == GIT_OBJECT_TREE)
			(void)git_tree_lookup(&sub, repo, git_tree_entry_id(e));
		size_t k = sub ? git_tree_entrycount(sub) : 0;
		if (k)
			tend_apply_note(&results[idx[i]], "stays, with what "
			    "tend did not write in it (%zu entr%s left: %s%s)",
			    k, k == 1 ? "y" : "ies",
			    git_tree_entry_name(git_tree_entry_byindex(sub, 0)),
			    k > 1 ? ", ..." : "");
		if (sub != t)
			git_tree_free(sub);
		git_tree_entry_free(e);
		git_tree_free(t);
		git_error_clear();
	}
	/* the small packs of earlier passes, folded into one now and then
	 * (a failure leaves them as they are: nothing is lost) */
	if (use_pack && tend_pack_merge(repo) < 0)
		tend_error_clear();
out:
	if (rc)
		for (size_t i = 0; i < n; i++)
			if (!results[idx[i]].status)
				tend_apply_fail(&results[idx[i]], rc, "%s",
				    tend_error_last());
	for (size_t i = 0; i < nu; i++)
		free(ups[i].path);
	free(ups);
	tend_buf_release(&path);
	git_repository_free(repo);
	writes_end(&tf);
}

static void *const *group_actions;

/* by (repo, ref), then the batch order: a stable grouping */
static int
cmp_action_idx(const void *x, const void *y)
{
	size_t a = *(const size_t *)x, b = *(const size_t *)y;
	const struct git_action *p = group_actions[a], *q = group_actions[b];
	int c = cmp_group(&p, &q);

	return c ? c : (a > b) - (a < b);
}

static void
gitconn_apply(struct tend_sink *sink, struct tend_context *ctx,
    void *const *actions, size_t n, struct tend_apply_result *results)
{
	struct git_action **sorted = calloc(n + 1, sizeof *sorted);
	size_t *idx = calloc(n + 1, sizeof *idx);

	(void)sink;
	if (!sorted || !idx)
		abort();
	git_ready();
	for (size_t i = 0; i < n; i++)
		idx[i] = i;
	group_actions = actions;
	qsort(idx, n, sizeof *idx, cmp_action_idx);
	for (size_t i = 0; i < n; i++)
		sorted[i] = actions[idx[i]];
	/* one commit per ref; tags after the commits of their ref */
	for (size_t start = 0; start < n;) {
		size_t end = start + 1;

		while (end < n && cmp_group(&sorted[start], &sorted[end]) == 0)
			end++;
		apply_group(ctx, sorted + start, end - start, idx + start,
		    results);
		start = end;
	}
	free(sorted);
	free(idx);
}

/* ---- drift ---- */

/* The tree of the ref's tip `tip`, kept while the ref stays there. */
static int
check_tree(struct git_handler *h, const git_oid *tip)
{
	git_commit *c = NULL;
	int rc = 0;

	if (h->check_tree && git_oid_equal(tip, &h->check_tip))
		return 0;
	git_tree_free(h->check_tree);
	h->check_tree = NULL;
	if (git_commit_lookup(&c, h->check_repo, tip) ||
	    git_commit_tree(&h->check_tree, c))
		rc = -1;
	else
		git_oid_cpy(&h->check_tip, tip);
	git_commit_free(c);
	return rc;
}

/*
 * Is the entry e, with the record's mode, a blob known to have the
 * record's content (blobids.h)? Then check need not read it.
 */
static bool
fast_match(struct git_handler *h, struct tend_context *ctx,
    const git_tree_entry *e, const struct tend_bytes *record)
{
	const char *state = tend_context_get(ctx, "state");
	unsigned mode = (unsigned)record->data[17] |
	    (unsigned)record->data[18] << 8 |
	    (unsigned)record->data[19] << 16;
	struct tend_fp fp;

	if (state && !h->check_state)
		h->check_state = tend_xstrdup(state);
	if (!state || mode == GIT_FILEMODE_LINK ||
	    (unsigned)git_tree_entry_filemode(e) != mode)
		return false;
	memcpy(fp.b, record->data + 1, sizeof fp.b);
	return tend_blobids_match(state, git_tree_entry_id(e), &fp);
}

static int
entries_check(struct tend_handler *base, struct tend_context *ctx,
    const struct tend_key *key, const struct tend_bytes *record,
    struct tend_buf *why)
{
	struct git_handler *h = (struct git_handler *)(void *)base;
	git_repository *repo;
	git_oid tip;
	git_tree_entry *e = NULL;
	git_blob *b = NULL;
	struct tend_buf path = TEND_BUF_INIT;
	char *name;
	int rc;

	if (h->kind != H_ENTRIES || key->kind != TEND_KEY_STR ||
	    record->len != REC_LEN)
		return 0;
	if (!h->check_repo && (rc = open_repo(ctx, h->repo, &h->check_repo)))
		return rc;
	repo = h->check_repo;
	name = strndup(key->u.s.ptr, key->u.s.len);
	join_path(&path, h->prefix, name);
	rc = TEND_ECONFLICT;
	if (git_reference_name_to_id(&tip, repo, h->ref)) {
		tend_buf_printf(why, TEND_CHECK_ABSENT ": %s does not exist",
		    h->ref);
	} else if (check_tree(h, &tip) != 0) {
		tend_buf_printf(why, "cannot read %s", h->ref);
	} else if (git_tree_entry_bypath(&e, h->check_tree, path.ptr)) {
		/* not there: maybe because what is above it is not a
		 * directory (what a write of it then fails on) */
		struct tend_buf ok = TEND_BUF_INIT;
		char *above = file_above(h->check_tree, path.ptr, NULL, 0,
		    &ok);

		if (above)
			tend_buf_printf(why, TEND_CHECK_IN_THE_WAY ": %s is "
			    "there in %s, where this entry needs a directory: "
			    ABOVE_WAY_FIX, above, h->ref);
		else
			tend_buf_printf(why, TEND_CHECK_ABSENT " from %s",
			    h->ref);
		free(above);
		tend_buf_release(&ok);
	} else if (git_tree_entry_type(e) == GIT_OBJECT_TREE) {
		tend_buf_puts(why, TEND_CHECK_IN_THE_WAY ": ");
		dir_way(why, repo, e, path.ptr);
		tend_buf_printf(why, " is there in %s: " DIR_WAY_FIX, h->ref);
	} else if (fast_match(h, ctx, e, record)) {
		rc = 0; /* a blob known to have the recorded content */
	} else if (git_blob_lookup(&b, repo, git_tree_entry_id(e))) {
		tend_buf_puts(why, "not a blob");
	} else {
		unsigned mode = (unsigned)record->data[17] |
		    (unsigned)record->data[18] << 8 |
		    (unsigned)record->data[19] << 16;

		struct tend_fp fp = blob_fp(b, mode == GIT_FILEMODE_LINK);
		if (memcmp(fp.b, record->data + 1, 16) != 0)
			tend_buf_printf(why, "content differs in %s", h->ref);
		else if ((unsigned)git_tree_entry_filemode(e) != mode)
			tend_buf_printf(why, "mode %o, expected %o",
			    (unsigned)git_tree_entry_filemode(e), mode);
		else
			rc = 0;
		if (rc == 0 && mode != GIT_FILEMODE_LINK && h->check_state) {
			struct tend_blobid p;

			memcpy(p.id, git_tree_entry_id(e)->id, sizeof p.id);
			p.fp = fp;
			tend_buf_put(&h->checked, &p, sizeof p);
		}
	}
	git_error_clear();
	git_blob_free(b);
	git_tree_entry_free(e);
	tend_buf_release(&path);
	free(name);
	return rc;
}

static const struct tend_handler_ops root_ops = {
	.abi = TEND_TARGET_ABI,
	.kind = "tend/git",
	.reconcile = root_reconcile,
	.preview_child = root_preview_child,
	.open_child = root_open_child,
	.destroy = handler_destroy,
};

static const struct tend_handler_ops entries_ops = {
	.abi = TEND_TARGET_ABI,
	.kind = "tend/git-entry",
	.reconcile = entries_reconcile,
	.attachments = entries_attachments,
	.check = entries_check,
	.destroy = handler_destroy,
	.flags = TEND_HANDLER_KEEPS_FOREIGN,
};

static const struct tend_handler_ops tags_ops = {
	.abi = TEND_TARGET_ABI,
	.kind = "tend/git-tag",
	.reconcile = entries_reconcile,
	.check = tags_check,
	.destroy = handler_destroy,
	.flags = TEND_HANDLER_KEEPS_FOREIGN,
};

int
tend_git_register(struct tend_engine *eng)
{
	return tend_engine_register_root(eng, TEND_GIT,
	    &handler_new(H_ROOT, NULL, NULL, NULL, NULL)->base, NULL);
}

/* ---- an exclusive prefix's strays ---- */

struct sweep_walk {
	const struct tend_git_sweep *s;
	struct tend_buf rel;
	char **rm; /* paths from the repository's root */
	size_t n, cap;
	int depth;
};

/* Does the tree `id` (at w->rel) hold an entry tend still tracks? */
static bool
tree_tracked(struct sweep_walk *w, git_repository *repo, const git_oid *id)
{
	const struct tend_git_sweep *s = w->s;
	git_tree *t = NULL;
	bool found = false;

	if (!s->tracked || w->depth >= 256 ||
	    git_tree_lookup(&t, repo, id) != 0) {
		git_error_clear();
		return false;
	}
	for (size_t i = 0; !found && i < git_tree_entrycount(t); i++) {
		const git_tree_entry *e = git_tree_entry_byindex(t, i);
		size_t mark = w->rel.len;

		tend_buf_putc(&w->rel, '/');
		tend_buf_puts(&w->rel, git_tree_entry_name(e));
		if (git_tree_entry_type(e) == GIT_OBJECT_TREE) {
			w->depth++;
			found = tree_tracked(w, repo, git_tree_entry_id(e));
			w->depth--;
		} else
			found = s->tracked(w->rel.ptr, s->arg);
		w->rel.len = mark;
		w->rel.ptr[mark] = '\0';
	}
	git_tree_free(t);
	return found;
}

static void
sweep_tree(struct sweep_walk *w, git_repository *repo, const git_tree *t)
{
	const struct tend_git_sweep *s = w->s;

	for (size_t i = 0; i < git_tree_entrycount(t); i++) {
		const git_tree_entry *e = git_tree_entry_byindex(t, i);
		bool dir = git_tree_entry_type(e) == GIT_OBJECT_TREE;
		size_t mark = w->rel.len;

		if (w->rel.len)
			tend_buf_putc(&w->rel, '/');
		tend_buf_puts(&w->rel, git_tree_entry_name(e));
		if (dir && w->depth < 256 &&
		    (s->declared(w->rel.ptr, true, s->arg) ||
			tree_tracked(w, repo, git_tree_entry_id(e)))) {
			git_tree *sub = NULL;

			if (git_tree_lookup(&sub, repo, git_tree_entry_id(e)) ==
			    0) {
				w->depth++;
				sweep_tree(w, repo, sub);
				w->depth--;
			}
			git_tree_free(sub);
			git_error_clear();
		} else if (!s->declared(w->rel.ptr, false, s->arg)) {
			struct tend_buf full = TEND_BUF_INIT;

			s->stray(w->rel.ptr, dir, s->arg);
			join_path(&full, s->prefix, w->rel.ptr);
			if (w->n == w->cap) {
				w->cap = w->cap ? w->cap * 2 : 64;
				w->rm = tend_xrealloc(w->rm,
				    w->cap * sizeof *w->rm);
			}
			w->rm[w->n++] = tend_buf_detach(&full, NULL);
		}
		w->rel.len = mark;
		w->rel.ptr[mark] = '\0';
	}
}

int
tend_git_sweep(const struct tend_git_sweep *s, size_t *count)
{
	git_repository *repo = NULL;
	git_oid tip;
	git_commit *c = NULL;
	git_tree *root = NULL, *t = NULL;
	git_tree_entry *e = NULL;
	struct sweep_walk w = {.s = s, .rel = TEND_BUF_INIT};
	struct tend_buf tf = TEND_BUF_INIT, tags = TEND_BUF_INIT;
	char *where = NULL;
	struct update *ups = NULL;
	struct spec sp = {0};
	int rc = 0;

	*count = 0;
	git_ready();
	if (git_repository_open_ext(&repo, s->repo,
		GIT_REPOSITORY_OPEN_NO_SEARCH, NULL)) {
		/* not there: nothing of anyone's to sweep */
		git_error_clear();
		return 0;
	}
	if (git_reference_name_to_id(&tip, repo, s->ref) ||
	    git_commit_lookup(&c, repo, &tip) || git_commit_tree(&root, c))
		goto out; /* no ref yet: nothing under it */
	if (!s->prefix[0])
		t = root;
	else if (git_tree_entry_bypath(&e, root, s->prefix) == 0 &&
	    git_tree_entry_type(e) == GIT_OBJECT_TREE &&
	    git_tree_lookup(&t, repo, git_tree_entry_id(e)) != 0)
		t = NULL;
	git_error_clear();
	tend_buf_puts(&w.rel, "");
	if (t)
		sweep_tree(&w, repo, t);
	*count = w.n;
	if (!s->remove || !w.n)
		goto out;
	if (!s->spec->allow_checked_out && checked_out(repo, s->ref, &where)) {
		rc = tend_error_set(TEND_ECONFLICT,
		    "git: %s is checked out in %s: refusing to write it; set "
		    "allow-checked-out = true to do it anyway", s->ref, where);
		goto out;
	}
	ups = tend_xcalloc(w.n + 1, sizeof *ups);
	for (size_t i = 0; i < w.n; i++) {
		ups[i].path = w.rm[i];
		ups[i].seq = i;
		ups[i].u.action = GIT_TREE_UPDATE_REMOVE;
	}
	/* the app's tags follow the commit, as after its own */
	for (size_t i = 0; i < s->spec->ntags; i++)
		tend_buf_put(&tags, s->spec->tags[i],
		    strlen(s->spec->tags[i]) + 1);
	sp.message = (char *)s->message;
	sp.author = (char *)s->spec->author;
	sp.tags = tags.ptr ? tags.ptr : (char *)"";
	sp.tagslen = tags.len;
	writes_begin(s->state, &tf);
	rc = commit_updates(repo, s->ref, ups, w.n, "", false, &sp, w.n, NULL,
	    0, NULL);
	writes_end(&tf);
out:
	free(ups);
	free(where);
	for (size_t i = 0; i < w.n; i++)
		free(w.rm[i]);
	free(w.rm);
	tend_buf_release(&w.rel);
	tend_buf_release(&tf);
	tend_buf_release(&tags);
	git_tree_entry_free(e);
	if (t != root)
		git_tree_free(t);
	git_tree_free(root);
	git_commit_free(c);
	git_repository_free(repo);
	git_error_clear();
	return rc;
}

/* ---- for push.c (writes.h) ---- */

void
tend_git_writes_begin(const char *state, const char *locks,
    struct tend_buf *tf)
{
	git_ready();
	writes_begin_at(state, locks, tf);
}

void
tend_git_tags_follow(struct git_repository *repo, const char *ref,
    const struct git_oid *from, const struct git_oid *to)
{
	struct spec none = {.tags = (char *)"", .tagslen = 0};

	tags_follow(repo, ref, from, to, &none);
}

void
tend_git_writes_end(struct tend_buf *tf)
{
	writes_end(tf);
}

void
tend_git_locks_note(struct git_repository *repo, const char *ref,
    const struct git_oid *oid)
{
	locks_note(repo, ref, oid);
}

void
tend_git_locks_note_file(const char *lock, const struct git_oid *oid)
{
	struct tend_buf b = TEND_BUF_INIT;
	char hex[GIT_OID_HEXSZ + 1];

	if (!locks_list)
		return;
	git_oid_tostr(hex, sizeof hex, oid);
	tend_buf_printf(&b, "%s %s\n", lock, hex);
	int fd = open(locks_list, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd >= 0) {
		(void)!write(fd, b.ptr, b.len);
		close(fd);
	}
	tend_buf_release(&b);
}
