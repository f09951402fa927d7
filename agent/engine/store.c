/*
 * store.c - the LMDB boundary.
 *
 * One environment (a directory holding data.mdb and lock.mdb) with one
 * named database per logical table. Keys are built by the engine with
 * order-preserving encodings, so a component's rows, a parent's children
 * and a target state's entries are contiguous ranges, scanned with a cursor
 * instead of point lookups (cursor steps cost ~30 ns, random gets ~1.3 us).
 *
 * Writes go through tend_store_write(), which retries a body after growing
 * the map on MDB_MAP_FULL: LMDB leaves a transaction that hit MAP_FULL
 * only abortable, and the map can only be resized with no transaction
 * open, so the whole body is run again in a fresh transaction.
 *
 * Every write body ends with counts_flush: the counter deltas the engine
 * added while it wrote item rows go into META in the body's transaction,
 * and the "counts" mark is stamped with the transaction's id. A mark that
 * is not the id of the snapshot (or, in a write transaction, of the one
 * before it) means that another program wrote in between (an older tend):
 * the counters are recounted then. LMDB numbers committed write
 * transactions one by one (an aborted one takes no number), and a child
 * transaction has its parent's number, which is the one it commits with.
 */
#define _GNU_SOURCE /* renameat2 */
#include "store.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "tend/buf.h"
#include "tend/failpoint.h"
#include "tend/status.h"

static const char *const table_names[TEND_T__COUNT] = {
	[TEND_T_META] = "meta",
	[TEND_T_COMP] = "comp",
	[TEND_T_ITEM] = "item",
	[TEND_T_OWNER] = "owner",
	[TEND_T_CEX] = "cex",
	[TEND_T_TOMB] = "tomb",
	[TEND_T_MEMO] = "memo",
	[TEND_T_NAME] = "name",
	[TEND_T_SEQ] = "seq",
	[TEND_T_SIG] = "sig",
};

/* file-backed resident bytes before the map is trimmed (store_trim) */
#define TRIM_BUDGET ((size_t)256 << 20)

struct tend_store {
	MDB_env *env;
	MDB_dbi dbi[TEND_T__COUNT];
	uint64_t map_size;
	struct tend_txn *held; /* preview */
	struct tend_txn *lazy; /* a settle not committed yet (deferred) */
	bool defer;	       /* tend_store_defer_settles */
	unsigned nborrow;      /* read handles borrowing `lazy` */
	unsigned fail_commit;  /* fault injection: countdown */
	bool broken;	       /* a resize failed: LMDB has no map */
	const char *broken_why; /* ... or a reopen (repack) failed */
	bool scratch;	       /* thrown away after use (tend_store_set_scratch) */
	unsigned format;       /* TEND_STORE_FORMAT it was made with */
	unsigned reads;	       /* rows read since the last store_trim */
	int statm;	       /* /proc/self/statm (store_trim), or -1 */
	size_t trim_budget;    /* TRIM_BUDGET, or what a test set */
	void *map_addr;	       /* the map (store_trim), if found, */
	size_t map_len;	       /* ... for a map of this size */
	tend_store_recount_fn *recount;
	void *recount_arg;
	char *dir;
	dev_t dir_dev; /* the directory opened (a repack swaps it) */
	ino_t dir_ino;
};

/* A name's counter deltas, merged into META when the body returns */
struct cdelta {
	char *name;
	size_t len;
	struct tend_counts d;
};

struct tend_txn {
	struct tend_store *st;
	MDB_txn *txn;
	int map_full; /* a put hit MDB_MAP_FULL; BORROWED_*: not ours */
	bool rdonly;  /* a snapshot of its own (not borrowed) */
	bool recount; /* tend_store_counts_invalidate was called */
	bool wrote;   /* the body put or deleted something */
	struct cdelta *deltas;
	size_t ndeltas;
};

#define MARK_KEY "counts"
#define COUNT_PREFIX "count/"

#define BORROWED_HELD (-1)
#define BORROWED_LAZY (-2)

static int
mdb_fail(int rc, const char *what)
{
	int code = rc == MDB_NOTFOUND ? TEND_ENOTFOUND : TEND_ERROR;

	return tend_error_set(code, "store: %s: %s", what, mdb_strerror(rc));
}

/*
 * A commit that failed: LMDB reports a short write (a full disk) as an
 * I/O error, which sends a user looking for a failing disk: when the
 * store's filesystem is (nearly) full, say that instead.
 */
static int
commit_fail(const struct tend_store *st, int rc, const char *what)
{
	struct statvfs vfs;

	if ((rc == EIO || rc == ENOSPC || rc == EDQUOT) &&
	    statvfs(st->dir, &vfs) == 0 &&
	    (uint64_t)vfs.f_bavail * vfs.f_frsize < ((uint64_t)8 << 20))
		return tend_error_set(TEND_ERROR, "store %s: %s: the disk is "
		    "full (%llu KiB free; LMDB said: %s): nothing of this "
		    "transaction was kept",
		    st->dir, what,
		    (unsigned long long)((uint64_t)vfs.f_bavail *
			vfs.f_frsize >> 10), mdb_strerror(rc));
	return mdb_fail(rc, what);
}

/*
 * LMDB maps its lock file and writes its header through the map: on a
 * full filesystem that write is a SIGBUS, not an error (a new user's
 * trial: a full state directory killed tend without a word). The file's
 * blocks are allocated first, so a full disk is an error here, said.
 * (8 KiB: LMDB's lock file for the 126 readers set below.)
 */
#define LOCK_BYTES 8192

static int
lock_room(const char *dir, const char *shown)
{
	char path[4096];
	struct stat sb;
	int fd, e = 0;

	snprintf(path, sizeof path, "%s/lock.mdb", dir);
	/* (opened only when short: closing a descriptor of the lock file
	 * would drop the locks this process holds on it, and LMDB tells
	 * live readers by them; this runs with no env of it open) */
	if (stat(path, &sb) == 0 && (uint64_t)sb.st_blocks * 512 >= LOCK_BYTES)
		return 0;
	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0)
		return 0; /* LMDB says why */
	if (fstat(fd, &sb) == 0 && (uint64_t)sb.st_blocks * 512 < LOCK_BYTES)
		e = posix_fallocate(fd, 0, LOCK_BYTES);
	close(fd);
	if (e == 0 || e == EOPNOTSUPP || e == EINVAL)
		return 0;
	return tend_error_set(TEND_ERROR, "store %s: no room for its lock "
	    "file (%s): is the disk full?", shown, strerror(e));
}

/*
 * The environment of st->dir: its tables opened, its format read (or a
 * new store made). The directory is opened first and LMDB given its
 * /proc/self/fd path, so lock.mdb and data.mdb are the two files of one
 * directory even if a repack swaps the store's directory in between
 * (tend_store_repack).
 */
static int
env_open(struct tend_store *st)
{
	MDB_txn *txn = NULL;
	char path[64];
	const char *at = st->dir;
	int rc, error = TEND_ERROR, dead;
	int dfd = open(st->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	struct stat sb;

	if (dfd >= 0 && fstat(dfd, &sb) == 0) {
		st->dir_dev = sb.st_dev;
		st->dir_ino = sb.st_ino;
		snprintf(path, sizeof path, "/proc/self/fd/%d", dfd);
		if (access(path, F_OK) == 0)
			at = path;
	}
	if (lock_room(at, st->dir) != 0)
		goto out;
	if ((rc = mdb_env_create(&st->env)) != 0) {
		mdb_fail(rc, "create");
		goto out;
	}
	mdb_env_set_maxdbs(st->env, TEND_T__COUNT + 2);
	mdb_env_set_mapsize(st->env, (size_t)st->map_size);
	mdb_env_set_maxreaders(st->env, 126);
	if ((rc = mdb_env_open(st->env, at, MDB_NOTLS, 0600)) != 0) {
		tend_error_set(TEND_ERROR, "store: open %s: %s", st->dir,
		    mdb_strerror(rc));
		goto out;
	}
	{
		MDB_envinfo info;

		/* another process may have grown the map already */
		mdb_env_info(st->env, &info);
		if (info.me_mapsize > st->map_size)
			st->map_size = info.me_mapsize;
	}
	mdb_reader_check(st->env, &dead);
	/*
	 * A store that has its tables and format is opened in a read
	 * transaction: opening never waits for a writer (an agent's commit,
	 * or the settle it keeps open between passes). A new one is made in
	 * a write transaction.
	 */
	bool rdonly = true;
again:
	if ((rc = mdb_txn_begin(st->env, NULL, rdonly ? MDB_RDONLY : 0,
		 &txn)) != 0) {
		mdb_fail(rc, "begin");
		goto out;
	}
	for (int i = 0; i < TEND_T__COUNT; i++) {
		rc = mdb_dbi_open(txn, table_names[i], rdonly ? 0 : MDB_CREATE,
		    &st->dbi[i]);
		if (rc == MDB_NOTFOUND && rdonly) {
			mdb_txn_abort(txn);
			rdonly = false;
			goto again;
		}
		if (rc != 0) {
			mdb_fail(rc, "open table");
			goto out;
		}
	}
	{
		MDB_val k = {6, (void *)"format"}, v;
		uint32_t fmt = TEND_STORE_FORMAT;

		rc = mdb_get(txn, st->dbi[TEND_T_META], &k, &v);
		if (rc == 0) {
			uint32_t have = 0;

			if (v.mv_size == 4)
				memcpy(&have, v.mv_data, 4);
			if (v.mv_size != 4 || have > TEND_STORE_FORMAT) {
				tend_error_set(TEND_ERROR,
				    "store %s was written by a newer tend "
				    "(format %u; this tend reads format %u "
				    "and older): upgrade tend or remove the "
				    "state directory",
				    st->dir, (unsigned)have, TEND_STORE_FORMAT);
				goto out;
			}
			st->format = have;
		} else if (rc == MDB_NOTFOUND && rdonly) {
			mdb_txn_abort(txn);
			rdonly = false;
			goto again;
		} else if (rc == MDB_NOTFOUND) {
			/* a new store: its counters (none) are right */
			uint64_t id = mdb_txn_id(txn);
			MDB_val mk = {strlen(MARK_KEY), (void *)MARK_KEY},
				mv = {8, &id};
			const char *want = getenv("TEND_STORE_FORMAT");

			if (want && *want && atoi(want) >= 1 &&
			    atoi(want) < TEND_STORE_FORMAT)
				fmt = (uint32_t)atoi(want);
			st->format = fmt;

			v.mv_size = 4;
			v.mv_data = &fmt;
			if ((rc = mdb_put(txn, st->dbi[TEND_T_META], &k, &v,
				 0)) != 0 ||
			    (rc = mdb_put(txn, st->dbi[TEND_T_META], &mk, &mv,
				 0)) != 0) {
				mdb_fail(rc, "put format");
				goto out;
			}
		} else {
			mdb_fail(rc, "get format");
			goto out;
		}
	}
	rc = mdb_txn_commit(txn);
	txn = NULL;
	if (rc != 0) {
		mdb_fail(rc, "commit");
		goto out;
	}
	error = TEND_OK;
out:
	if (txn)
		mdb_txn_abort(txn);
	if (dfd >= 0)
		close(dfd);
	return error;
}

static bool store_swapped(const struct tend_store *st);

/*
 * env_open, again if a repack swapped the store's directory while it
 * opened (what it opened is then the old one, being removed: LMDB could
 * even have made an empty store in it). A few tries: a swap is rare.
 */
static int
env_open_current(struct tend_store *st)
{
	int rc = TEND_ERROR;

	for (int tries = 0; tries < 5; tries++) {
		struct stat sb;

		if ((rc = env_open(st)) != 0) {
			/* (ENOENT: the old directory went under it) */
			if (st->env) {
				mdb_env_close(st->env);
				st->env = NULL;
			}
			if (stat(st->dir, &sb) == 0 &&
			    (sb.st_dev != st->dir_dev ||
				sb.st_ino != st->dir_ino))
				continue;
			return rc;
		}
		if (stat(st->dir, &sb) == 0 && sb.st_dev == st->dir_dev &&
		    sb.st_ino == st->dir_ino && !store_swapped(st))
			return 0;
		mdb_env_close(st->env);
		st->env = NULL;
	}
	return rc ? rc : tend_error_set(TEND_ERROR, "store %s: rewritten "
	    "again and again while opened", st->dir);
}

int
tend_store_open(struct tend_store **out, const char *dir, uint64_t map_size)
{
	struct tend_store *st = tend_xcalloc(1, sizeof *st);

	*out = NULL;
	st->map_size = map_size ? map_size : (uint64_t)256 << 20;
	/* for tests: a map that fills after a few hundred rows */
	const char *ms = getenv("TEND_MAP_SIZE");
	if (!map_size && ms && strtoull(ms, NULL, 10) >= 65536)
		st->map_size = strtoull(ms, NULL, 10);
	st->dir = tend_xstrdup(dir);
	st->statm = -1;
	st->trim_budget = TRIM_BUDGET;
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		int rc = tend_error_set(TEND_ERROR, "store: mkdir %s: %s", dir,
		    strerror(errno));

		tend_store_close(st);
		return rc;
	}
	if (env_open_current(st) != 0) {
		tend_store_close(st);
		return TEND_ERROR;
	}
	*out = st;
	return TEND_OK;
}

void
tend_store_set_trim_budget(struct tend_store *st, size_t bytes)
{
	st->trim_budget = bytes;
}

unsigned
tend_store_format(const struct tend_store *st)
{
	return st->format;
}

void
tend_store_close(struct tend_store *st)
{
	if (!st)
		return;
	if (st->held)
		tend_store_hold_abort(st);
	tend_store_settle_flush(st);
	if (st->env)
		mdb_env_close(st->env);
	if (st->statm >= 0)
		close(st->statm);
	free(st->dir);
	free(st);
}

uint64_t
tend_store_map_size(const struct tend_store *st)
{
	return st->map_size;
}

void
tend_store_fail_commit_after(struct tend_store *st, unsigned n)
{
	st->fail_commit = n;
}

/* ---- counters ---- */

void
tend_store_set_recount(struct tend_store *st, tend_store_recount_fn *fn,
    void *arg)
{
	st->recount = fn;
	st->recount_arg = arg;
}

static void
deltas_free(struct tend_txn *t)
{
	for (size_t i = 0; i < t->ndeltas; i++)
		free(t->deltas[i].name);
	free(t->deltas);
	t->deltas = NULL;
	t->ndeltas = 0;
}

void
tend_store_count_add(struct tend_txn *t, const char *name, size_t len,
    const struct tend_counts *delta)
{
	struct cdelta *d = NULL;

	assert(!t->rdonly && t->map_full >= 0);
	/* a transaction touches one app's rows, or a few: a list will do */
	for (size_t i = 0; i < t->ndeltas && !d; i++)
		if (t->deltas[i].len == len &&
		    memcmp(t->deltas[i].name, name, len) == 0)
			d = &t->deltas[i];
	if (!d) {
		t->deltas = tend_xrealloc(t->deltas,
		    (t->ndeltas + 1) * sizeof *t->deltas);
		d = &t->deltas[t->ndeltas++];
		memset(d, 0, sizeof *d);
		d->name = tend_xmemdup(name, len);
		d->len = len;
	}
	for (int i = 0; i < TEND_COUNT__N; i++)
		d->d.n[i] += delta->n[i];
}

static int
mark_get(struct tend_txn *t, uint64_t *mark)
{
	struct tend_bytes v;
	int rc = tend_store_get(t, TEND_T_META, MARK_KEY, strlen(MARK_KEY), &v);

	if (rc == 0 && v.len != 8)
		rc = TEND_ENOTFOUND;
	if (rc == 0)
		memcpy(mark, v.data, 8);
	return rc;
}

bool
tend_store_counts_valid(struct tend_txn *t)
{
	uint64_t mark, id = mdb_txn_id(t->txn);

	if (t->recount || mark_get(t, &mark) != 0)
		return false;
	/* a write transaction (or one borrowed from a writer) may not have
	 * stamped it yet: then the one before it did */
	return mark == id || (!t->rdonly && mark + 1 == id);
}

static void
count_key(struct tend_buf *k, const char *name, size_t len)
{
	tend_buf_puts(k, COUNT_PREFIX);
	tend_buf_put(k, name, len);
}

static int
row_get(struct tend_txn *t, const char *name, size_t len,
    struct tend_counts *out)
{
	struct tend_buf k = TEND_BUF_INIT;
	struct tend_bytes v;
	int rc;

	count_key(&k, name, len);
	rc = tend_store_get(t, TEND_T_META, k.ptr, k.len, &v);
	tend_buf_release(&k);
	memset(out, 0, sizeof *out);
	if (rc == TEND_ENOTFOUND)
		return 0;
	if (rc == 0 && v.len != sizeof *out)
		return tend_error_set(TEND_EINVALID, "store: bad counter row");
	if (rc == 0)
		memcpy(out, v.data, sizeof *out);
	return rc;
}

int
tend_store_counts_get(struct tend_txn *t, const char *name, size_t len,
    struct tend_counts *out)
{
	memset(out, 0, sizeof *out);
	if (!tend_store_counts_valid(t))
		return tend_error_set(TEND_EINVALID, "store: the counters were "
		    "not kept by this tend");
	return row_get(t, name, len, out);
}

int
tend_store_counts_set(struct tend_txn *t, const char *name, size_t len,
    const struct tend_counts *c)
{
	struct tend_buf k = TEND_BUF_INIT;
	bool zero = true;
	int rc;

	for (int i = 0; i < TEND_COUNT__N; i++)
		zero &= c->n[i] == 0;
	count_key(&k, name, len);
	/* an app with nothing tracked has no row */
	rc = zero ? tend_store_del(t, TEND_T_META, k.ptr, k.len)
		  : tend_store_put(t, TEND_T_META, k.ptr, k.len, c, sizeof *c);
	tend_buf_release(&k);
	return rc;
}

int
tend_store_counts_clear(struct tend_txn *t)
{
	return tend_store_del_prefix(t, TEND_T_META, COUNT_PREFIX,
	    strlen(COUNT_PREFIX));
}

int
tend_store_counts_invalidate(struct tend_txn *t)
{
	t->recount = true;
	return tend_store_del(t, TEND_T_META, MARK_KEY, strlen(MARK_KEY));
}

int
tend_store_count_names(struct tend_txn *t, char ***out, size_t *n)
{
	struct tend_iter it;
	struct tend_bytes k, v;
	size_t plen = strlen(COUNT_PREFIX);
	int rc, more;

	*out = NULL;
	*n = 0;
	if (!tend_store_counts_valid(t))
		return tend_error_set(TEND_EINVALID, "store: the counters were "
		    "not kept by this tend");
	if ((rc = tend_store_iter_init(&it, t, TEND_T_META, COUNT_PREFIX,
		 plen)))
		return rc;
	while ((more = tend_store_iter_next(&it, &k, &v)) == 1) {
		char *name = tend_xmalloc(k.len - plen + 1);

		memcpy(name, k.data + plen, k.len - plen);
		name[k.len - plen] = '\0';
		*out = tend_xrealloc(*out, (*n + 1) * sizeof **out);
		(*out)[(*n)++] = name;
	}
	tend_store_iter_finish(&it);
	return more < 0 ? more : 0;
}

/*
 * The end of every write body: the deltas into their rows and the mark
 * stamped, or, when the counters could not be trusted when the body
 * began, all of them recounted from the rows.
 */
static int
counts_flush(struct tend_txn *t)
{
	struct tend_store *st = t->st;
	uint64_t id = mdb_txn_id(t->txn);
	int rc = 0;

	if (!tend_store_counts_valid(t)) {
		deltas_free(t);
		if (!st->recount)
			return 0; /* they stay untrusted */
		if ((rc = st->recount(t, st->recount_arg)))
			return rc;
		t->recount = false;
	}
	for (size_t i = 0; i < t->ndeltas && rc == 0; i++) {
		struct cdelta *d = &t->deltas[i];
		struct tend_counts c;

		if ((rc = row_get(t, d->name, d->len, &c)))
			break;
		for (int j = 0; j < TEND_COUNT__N; j++)
			c.n[j] += d->d.n[j];
		rc = tend_store_counts_set(t, d->name, d->len, &c);
	}
	deltas_free(t);
	if (rc == 0)
		rc = tend_store_put(t, TEND_T_META, MARK_KEY, strlen(MARK_KEY),
		    &id, 8);
	return rc;
}

/* A write body, then its counters (the deltas of a failed body go with
 * its transaction) */
static int
run_body(struct tend_txn *t, tend_store_body_fn *body, void *arg)
{
	int rc;

	deltas_free(t);
	t->recount = false;
	t->wrote = false;
	rc = body(t, arg);
	/* a body that wrote nothing commits nothing (LMDB numbers no
	 * transaction for it): the mark stays right as it is */
	if (rc == 0 && !t->map_full && (t->wrote || t->ndeltas))
		rc = counts_flush(t);
	deltas_free(t);
	return rc;
}

/* One transaction that still fills the map after this many doublings is
 * not going to fit (the disk is full, or a failpoint says so). The map
 * keeps its size for later transactions, so the store itself can grow
 * beyond this. */
#define MAX_GROWTH 8
/* and no map beyond 1 TiB: a failed mdb_env_set_mapsize leaves the
 * environment unmapped, so it must not be asked for what cannot be had */
#define MAX_MAP ((uint64_t)1 << 40)

/* After a failed resize LMDB has no map: no transaction may begin. */
static int
unusable(const struct tend_store *st)
{
	if (!st->broken)
		return 0;
	return tend_error_set(TEND_ERROR, "store %s: unusable after a failed "
	    "%s", st->dir, st->broken_why ? st->broken_why : "resize");
}

static int
grow(struct tend_store *st, int *growths)
{
	uint64_t nsize = st->map_size * 2;
	int rc;

	if (++*growths > MAX_GROWTH || nsize > MAX_MAP)
		return tend_error_set(TEND_ERROR,
		    "store %s: the map is still full at %llu MiB: is the "
		    "disk full?",
		    st->dir, (unsigned long long)(st->map_size >> 20));
	if ((rc = mdb_env_set_mapsize(st->env, (size_t)nsize)) != 0) {
		st->broken = true;
		return mdb_fail(rc, "grow map");
	}
	st->map_size = nsize;
	return 0;
}

/*
 * Keep the map's pages out of this process's RSS. LMDB maps the store
 * read-only and shared, and every page a command reads or a commit
 * writes stays mapped until the map goes: a pass over a million states
 * showed the whole store (1.2 GB) as its own memory. MADV_DONTNEED
 * unmaps the pages, not their data: the page cache keeps them, and a
 * pointer into the map still reads the same bytes (the next access maps
 * the page again: a minor fault). After a commit and every 4096 rows
 * read, the process's file-backed resident pages (/proc/self/statm) are
 * looked at, and the map is trimmed once they pass TRIM_BUDGET: a store
 * smaller than that is never trimmed and pays nothing (TRIM_BUDGET, at
 * the top).
 */
/* Where the map is: LMDB says so only for a fixed map, so it is found
 * in /proc/self/maps by the data file's inode (again after a resize). */
static bool
map_find(struct tend_store *st, size_t mapsize)
{
	char line[4096 + 128];
	struct stat sb;
	FILE *f;
	int fd;

	st->map_addr = NULL;
	st->map_len = mapsize;
	/* the file this env maps, not the path's (a repack in another
	 * process may have put another store there) */
	if (mdb_env_get_fd(st->env, &fd) != 0 || fstat(fd, &sb) != 0 ||
	    !(f = fopen("/proc/self/maps", "re")))
		return false;
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi, ino;
		unsigned maj, mnr;

		if (sscanf(line, "%lx-%lx %*s %*s %x:%x %lu", &lo, &hi, &maj,
			&mnr, &ino) == 5 &&
		    ino == (unsigned long)sb.st_ino &&
		    makedev(maj, mnr) == sb.st_dev) {
			st->map_addr = (void *)lo;
			break;
		}
	}
	fclose(f);
	return st->map_addr != NULL;
}

/* File-backed resident bytes of this process, or 0 if unknown. */
static size_t
resident_file(struct tend_store *st)
{
	char buf[128];
	unsigned long size, res, shared;
	ssize_t n;

	if (st->statm < 0 &&
	    (st->statm = open("/proc/self/statm", O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	if ((n = pread(st->statm, buf, sizeof buf - 1, 0)) <= 0)
		return 0;
	buf[n] = '\0';
	if (sscanf(buf, "%lu %lu %lu", &size, &res, &shared) != 3)
		return 0;
	return (size_t)shared * (size_t)sysconf(_SC_PAGESIZE);
}

static void
store_trim(struct tend_store *st)
{
	MDB_envinfo info;
	MDB_stat ms;

	st->reads = 0;
	if (!st->env || resident_file(st) < st->trim_budget ||
	    mdb_env_info(st->env, &info) != 0 ||
	    mdb_env_stat(st->env, &ms) != 0)
		return;
	size_t used = (size_t)(info.me_last_pgno + 1) * ms.ms_psize;
	if (used > info.me_mapsize)
		return;
	if ((!st->map_addr || st->map_len != info.me_mapsize) &&
	    !map_find(st, info.me_mapsize))
		return;
	madvise(st->map_addr, used, MADV_DONTNEED);
}

static void
store_read(struct tend_store *st)
{
	if (++st->reads >= 4096)
		store_trim(st);
}

/* The fault injection of a commit: `what` is "write" or "settle". */
static int
injected(struct tend_store *st, const char *what)
{
	if (!(st->fail_commit && --st->fail_commit == 0) &&
	    !tend_failpoint("lmdb-commit", what))
		return 0;
	return tend_error_set(TEND_ERROR,
	    "store %s: commit (%s): injected failure", st->dir, what);
}

/* `keep`: leave the transaction open as st->lazy, uncommitted */
static int
store_write(struct tend_store *st, tend_store_body_fn *body, void *arg,
    const char *what, bool keep)
{
	int growths = 0;

	if (st->held)
		return run_body(st->held, body, arg);
	if (unusable(st))
		return TEND_ERROR;
	for (;;) {
		struct tend_txn t = {.st = st};
		int rc = mdb_txn_begin(st->env, NULL, 0, &t.txn);

		if (rc == MDB_MAP_RESIZED) {
			/* another process grew it: adopt the new size */
			mdb_env_set_mapsize(st->env, 0);
			MDB_envinfo info;
			mdb_env_info(st->env, &info);
			st->map_size = info.me_mapsize;
			continue;
		}
		if (rc != 0)
			return mdb_fail(rc, "begin write");
		int error = run_body(&t, body, arg);

		if (t.map_full) {
			mdb_txn_abort(t.txn);
			if ((rc = grow(st, &growths)) != 0)
				return rc;
			continue;
		}
		if (error) {
			mdb_txn_abort(t.txn);
			return error;
		}
		if (keep) {
			st->lazy = tend_xmalloc(sizeof t);
			*st->lazy = t;
			return 0;
		}
		if ((rc = injected(st, what)) != 0) {
			mdb_txn_abort(t.txn);
			return rc;
		}
		rc = mdb_txn_commit(t.txn);
		if (rc == MDB_MAP_FULL) {
			if ((rc = grow(st, &growths)) != 0)
				return rc;
			continue;
		}
		if (rc != 0)
			return commit_fail(st, rc, "commit");
		store_trim(st);
		return 0;
	}
}

/*
 * With a deferred settle open, `body` runs in a child of its transaction:
 * a durable write then commits both at once, and another settle joins it.
 * The child keeps the settle safe from the body: a failed body, or one
 * that fills the map, is aborted alone (MDB_MAP_FULL: the caller commits
 * the settle on its own, since the map can only grow with no transaction
 * open, and runs the body again).
 */
static int
child_write(struct tend_store *st, tend_store_body_fn *body, void *arg,
    bool durable)
{
	struct tend_txn t = {.st = st};
	int rc, error;

	assert(st->nborrow == 0);
	if ((rc = mdb_txn_begin(st->env, st->lazy->txn, 0, &t.txn)) != 0)
		return mdb_fail(rc, "begin write");
	error = run_body(&t, body, arg);
	if (t.map_full || error) {
		mdb_txn_abort(t.txn);
		return t.map_full ? MDB_MAP_FULL : error;
	}
	if (durable && (rc = injected(st, "write")) != 0) {
		mdb_txn_abort(t.txn);
		return rc;
	}
	if ((rc = mdb_txn_commit(t.txn)) != 0)
		return rc == MDB_MAP_FULL ? rc : commit_fail(st, rc, "commit");
	if (!durable)
		return 0;
	/* the child is in the settle's transaction now: commit both (a
	 * full map loses the settle, which leaves its records pending, and
	 * the caller runs the body again) */
	struct tend_txn *lazy = st->lazy;
	st->lazy = NULL;
	rc = mdb_txn_commit(lazy->txn);
	free(lazy);
	if (rc != 0)
		return rc == MDB_MAP_FULL ? rc : commit_fail(st, rc, "commit");
	store_trim(st);
	return 0;
}

int
tend_store_write(struct tend_store *st, tend_store_body_fn *body, void *arg)
{
	if (st->lazy && !st->held &&
	    tend_failpoint("lmdb-commit", "settle")) {
		/* the settle's commit fails: its records stay pending */
		mdb_txn_abort(st->lazy->txn);
		free(st->lazy);
		st->lazy = NULL;
	}
	if (st->lazy && !st->held) {
		int rc = child_write(st, body, arg, true);

		if (rc != MDB_MAP_FULL)
			return rc;
		if ((rc = tend_store_settle_flush(st)) != 0)
			return rc;
	}
	return store_write(st, body, arg, "write", false);
}

int
tend_store_write_settle(struct tend_store *st, tend_store_body_fn *body,
    void *arg)
{
	int rc;

	if (st->held)
		return run_body(st->held, body, arg);
	if (st->defer) {
		if (st->lazy) {
			if ((rc = child_write(st, body, arg, false)) !=
			    MDB_MAP_FULL)
				return rc;
			if ((rc = tend_store_settle_flush(st)) != 0)
				return rc;
		}
		return store_write(st, body, arg, "settle", true);
	}
	mdb_env_set_flags(st->env, MDB_NOMETASYNC, 1);
	rc = store_write(st, body, arg, "settle", false);
	mdb_env_set_flags(st->env, MDB_NOMETASYNC, 0);
	return rc;
}

void
tend_store_defer_settles(struct tend_store *st, bool on)
{
	st->defer = on;
}

bool
tend_store_settle_pending(const struct tend_store *st)
{
	return st->lazy != NULL;
}

int
tend_store_settle_flush(struct tend_store *st)
{
	struct tend_txn *t = st ? st->lazy : NULL;
	int rc;

	if (!t)
		return 0;
	assert(st->nborrow == 0);
	st->lazy = NULL;
	if ((rc = injected(st, "settle")) != 0) {
		mdb_txn_abort(t->txn);
		free(t);
		return rc;
	}
	mdb_env_set_flags(st->env, MDB_NOMETASYNC, 1);
	rc = mdb_txn_commit(t->txn);
	mdb_env_set_flags(st->env, MDB_NOMETASYNC, 0);
	free(t);
	if (rc)
		return commit_fail(st, rc, "commit (settle)");
	store_trim(st);
	return 0;
}

int
tend_store_read_begin(struct tend_store *st, struct tend_txn **out)
{
	struct tend_txn *t = tend_xcalloc(1, sizeof *t);
	int rc;

	t->st = st;
	if (st->held || st->lazy) {
		/* preview: read what the pass has "written" so far; a
		 * deferred settle: what it settled */
		t->txn = st->held ? st->held->txn : st->lazy->txn;
		t->map_full = st->held ? BORROWED_HELD : BORROWED_LAZY;
		st->nborrow += !st->held;
		*out = t;
		return 0;
	}
	if (unusable(st)) {
		free(t);
		*out = NULL;
		return TEND_ERROR;
	}
	t->rdonly = true;
	rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &t->txn);
	if (rc == MDB_MAP_RESIZED) {
		mdb_env_set_mapsize(st->env, 0);
		rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &t->txn);
	}
	if (rc != 0) {
		free(t);
		*out = NULL;
		return mdb_fail(rc, "begin read");
	}
	/* =stop here parks a reader holding its snapshot (concurrency
	 * tests: a reader never blocks the writer); an errno fails it */
	if ((rc = tend_failpoint("read-txn", NULL)) != 0) {
		mdb_txn_abort(t->txn);
		free(t);
		*out = NULL;
		return tend_error_set(TEND_ERROR, "store: begin read: %s",
		    strerror(rc));
	}
	*out = t;
	return 0;
}

void
tend_store_read_end(struct tend_txn *t)
{
	if (!t)
		return;
	if (t->map_full == BORROWED_LAZY)
		t->st->nborrow--;
	else if (t->map_full != BORROWED_HELD)
		mdb_txn_abort(t->txn);
	free(t);
}

/*
 * A preview's transaction is never committed, and LMDB resizes a map only
 * between transactions: a preview that filled the map failed in the
 * middle (a plan of a million new files stopped at a third of them, on
 * a 512 MiB map). So before it begins, the map is made big enough for
 * any pass: PREVIEW_MAP, or four times the data file if that is more.
 * It is address space, not disk: the file grows only by the pages
 * written. Within RLIMIT_AS (a failed resize leaves no map at all).
 */
#define PREVIEW_MAP ((uint64_t)64 << 30)

static int
preview_room(struct tend_store *st)
{
	uint64_t want = PREVIEW_MAP;
	struct tend_buf path = TEND_BUF_INIT;
	struct stat sb;
	struct rlimit rl;
	long page = sysconf(_SC_PAGESIZE);
	int rc;

	tend_buf_printf(&path, "%s/data.mdb", st->dir);
	if (stat(path.ptr, &sb) == 0 && (uint64_t)sb.st_size * 4 > want)
		want = (uint64_t)sb.st_size * 4;
	tend_buf_release(&path);
	if (want > MAX_MAP)
		want = MAX_MAP;
	if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    want > (uint64_t)rl.rlim_cur / 4)
		want = (uint64_t)rl.rlim_cur / 4;
	if (page > 0)
		want -= want % (uint64_t)page;
	if (want <= st->map_size)
		return 0;
	if ((rc = mdb_env_set_mapsize(st->env, (size_t)want)) != 0) {
		st->broken = true;
		return mdb_fail(rc, "grow map for a preview");
	}
	st->map_size = want;
	return 0;
}

int
tend_store_hold_begin(struct tend_store *st)
{
	struct tend_txn *t;
	int rc;

	if (unusable(st) || (rc = tend_store_settle_flush(st)) != 0 ||
	    preview_room(st) != 0)
		return TEND_ERROR;
	t = tend_xcalloc(1, sizeof *t);
	if ((rc = mdb_txn_begin(st->env, NULL, 0, &t->txn)) != 0) {
		free(t);
		return mdb_fail(rc, "begin preview");
	}
	t->st = st;
	st->held = t;
	return 0;
}

void
tend_store_hold_abort(struct tend_store *st)
{
	if (!st->held)
		return;
	mdb_txn_abort(st->held->txn);
	free(st->held);
	st->held = NULL;
}

void
tend_store_set_scratch(struct tend_store *st)
{
	st->scratch = true;
	if (st->env)
		mdb_env_set_flags(st->env, MDB_NOSYNC, 1);
}

bool
tend_store_is_scratch(const struct tend_store *st)
{
	return st->scratch;
}

/* Every row but META's "format": the store as it was made */
static int
clear_body(struct tend_txn *t, void *arg)
{
	struct tend_store *st = t->st;
	MDB_cursor *c = NULL;
	MDB_val k, v;
	int rc = 0;

	(void)arg;
	t->wrote = true;
	for (int i = 0; i < TEND_T__COUNT && rc == 0; i++)
		if (i != TEND_T_META)
			rc = mdb_drop(t->txn, st->dbi[i], 0);
	if (rc == 0 && (rc = mdb_cursor_open(t->txn, st->dbi[TEND_T_META],
	    &c)) == 0) {
		rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
		while (rc == 0) {
			if (!(k.mv_size == 6 && memcmp(k.mv_data, "format", 6) == 0)
			    && (rc = mdb_cursor_del(c, 0)) != 0)
				break;
			rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
		}
		mdb_cursor_close(c);
		if (rc == MDB_NOTFOUND)
			rc = 0;
	}
	return rc ? mdb_fail(rc, "clear") : 0;
}

int
tend_store_clear(struct tend_store *st)
{
	return tend_store_write(st, clear_body, NULL);
}

uint64_t
tend_store_rows(struct tend_store *st, enum tend_table tab)
{
	MDB_txn *txn;
	MDB_stat ms;
	uint64_t n = 0;

	if (st->broken || mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn))
		return 0;
	if (mdb_stat(txn, st->dbi[tab], &ms) == 0)
		n = ms.ms_entries;
	mdb_txn_abort(txn);
	return n;
}

static void rm_store_dir(const char *dir);

/*
 * Is the store at st->dir another one than st's env has open? By the
 * data file: the one this env holds open cannot have its inode reused
 * (a directory's could: removed by one repack, its number taken by the
 * next one's copy).
 */
static bool
store_swapped(const struct tend_store *st)
{
	struct tend_buf p = TEND_BUF_INIT;
	struct stat a, b;
	int fd;
	bool swapped;

	tend_buf_printf(&p, "%s/data.mdb", st->dir);
	swapped = mdb_env_get_fd(st->env, &fd) == 0 && fstat(fd, &a) == 0 &&
	    stat(p.ptr, &b) == 0 && (a.st_dev != b.st_dev ||
		a.st_ino != b.st_ino);
	tend_buf_release(&p);
	return swapped;
}

int
tend_store_refresh(struct tend_store *st)
{
	struct tend_buf tmp = TEND_BUF_INIT;
	struct stat sb;
	int rc;

	/* what a killed repack left (only the writer repacks) */
	tend_buf_printf(&tmp, "%s.repack", st->dir);
	if (lstat(tmp.ptr, &sb) == 0)
		rm_store_dir(tmp.ptr);
	tend_buf_release(&tmp);
	if (st->scratch || st->broken || !store_swapped(st))
		return 0;
	if (st->held || st->lazy || st->nborrow)
		return tend_error_set(TEND_ERROR, "store %s: rewritten by another "
		    "process while this one had a transaction open", st->dir);
	mdb_env_close(st->env);
	st->env = NULL;
	st->map_addr = NULL;
	if ((rc = env_open_current(st)) != 0) {
		st->broken = true;
		st->broken_why = "reopen";
	}
	return rc;
}

/* Remove a store directory's files and the directory (a repack's) */
static void
rm_store_dir(const char *dir)
{
	char p[4096];

	snprintf(p, sizeof p, "%s/data.mdb", dir);
	unlink(p);
	snprintf(p, sizeof p, "%s/lock.mdb", dir);
	unlink(p);
	rmdir(dir);
}

static int
fsync_path(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

/* Room a repack wants beside the store's size: the lock file, the
 * copy's branch pages and free list, and some for whoever else writes */
#define REPACK_SLACK ((uint64_t)16 << 20)

/* Rows copied in one transaction of the repack: LMDB keeps a write
 * transaction's pages in memory (a million states' store in one would
 * hold ~700 MB) */
#define REPACK_TXN_ROWS 65536

/*
 * Every row of st's tables, in key order, into the empty env `to`: each
 * page filled before the next is begun (MDB_APPEND), in transactions of
 * REPACK_TXN_ROWS rows (`to` is nobody's until the swap), the read map
 * trimmed as a pass's is. The counters' mark is written last, with the
 * last transaction's id, if it was right in the snapshot.
 */
static int
repack_copy(struct tend_store *st, MDB_env *to, uint64_t per)
{
	MDB_txn *rt = NULL, *wt = NULL;
	MDB_cursor *cur = NULL;
	MDB_val k, v;
	MDB_dbi d[TEND_T__COUNT];
	uint64_t id, rows = 0;
	int rc;

	if ((rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &rt)) ||
	    (rc = mdb_txn_begin(to, NULL, 0, &wt)))
		goto out;
	struct tend_txn snap = {.st = st, .txn = rt, .rdonly = true};
	bool counted = tend_store_counts_valid(&snap);

	for (int i = 0; i < TEND_T__COUNT; i++)
		if ((rc = mdb_dbi_open(wt, table_names[i], MDB_CREATE, &d[i])))
			goto out;
	for (int i = 0; i < TEND_T__COUNT; i++) {
		if ((rc = mdb_cursor_open(rt, st->dbi[i], &cur)))
			goto out;
		while ((rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) == 0) {
			if (i == TEND_T_META && k.mv_size == strlen(MARK_KEY) &&
			    memcmp(k.mv_data, MARK_KEY, k.mv_size) == 0)
				continue; /* below */
			/* (MDB_TXN_FULL: the caller begins again with
			 * fewer rows a transaction) */
			if ((rc = mdb_put(wt, d[i], &k, &v, MDB_APPEND)))
				goto out;
			if (++rows % per == 0) {
				rc = mdb_txn_commit(wt);
				wt = NULL;
				if (rc || (rc = mdb_txn_begin(to, NULL, 0, &wt)))
					goto out;
				store_trim(st);
			}
		}
		mdb_cursor_close(cur);
		cur = NULL;
		if (rc != MDB_NOTFOUND)
			goto out;
	}
	rc = 0;
	if (counted) {
		id = mdb_txn_id(wt);
		k.mv_size = strlen(MARK_KEY);
		k.mv_data = (void *)MARK_KEY;
		v.mv_size = 8;
		v.mv_data = &id;
		rc = mdb_put(wt, d[TEND_T_META], &k, &v, 0);
	}
	if (rc == 0)
		rc = mdb_txn_commit(wt);
	wt = NULL;
	/* the copy's transactions were not synced one by one: now */
	if (rc == 0)
		rc = mdb_env_sync(to, 1);
out:
	if (cur)
		mdb_cursor_close(cur);
	if (wt)
		mdb_txn_abort(wt);
	if (rt)
		mdb_txn_abort(rt);
	return rc;
}

int
tend_store_repack(struct tend_store *st)
{
	struct tend_buf tmp = TEND_BUF_INIT, parent = TEND_BUF_INIT;
	MDB_env *to = NULL;
	int rc;

	if (st->held || st->scratch || st->broken || st->nborrow)
		return 0;
	if ((rc = tend_store_settle_flush(st)))
		return rc;
	/* room for the copy first: LMDB maps the new lock file, and a
	 * write to it on a full tmpfs is a SIGBUS, not an error (a new
	 * user's trial: tend died with no word) */
	{
		struct tend_buf data = TEND_BUF_INIT;
		struct statvfs vfs;
		struct stat sb;

		tend_buf_printf(&data, "%s/data.mdb", st->dir);
		bool have = stat(data.ptr, &sb) == 0 &&
		    statvfs(st->dir, &vfs) == 0;
		tend_buf_release(&data);
		uint64_t free_b = have ? (uint64_t)vfs.f_bavail * vfs.f_frsize
				       : 0;
		uint64_t need = have ? (uint64_t)sb.st_size + REPACK_SLACK : 0;
		if (!have || free_b < need)
			return tend_error_set(TEND_ERROR, "store %s: not "
			    "rewritten in key order: %llu MiB free on its disk, "
			    "the copy needs %llu MiB (the store is kept as it "
			    "was)", st->dir,
			    (unsigned long long)(free_b >> 20),
			    (unsigned long long)(need >> 20));
	}
	tend_buf_printf(&tmp, "%s.repack", st->dir);
	const char *slash = strrchr(st->dir, '/');
	if (slash)
		tend_buf_put(&parent, st->dir, (size_t)(slash - st->dir) + 1);
	else
		tend_buf_puts(&parent, ".");
	/* rows per transaction: fewer if big rows fill LMDB's dirty pages
	 * first (MDB_TXN_FULL: the copy is begun again) */
	uint64_t per = REPACK_TXN_ROWS;
	const char *e = getenv("TEND_REPACK_TXN_ROWS"); /* for tests */

	if (e && strtoull(e, NULL, 10) > 0)
		per = strtoull(e, NULL, 10);
	for (;;) {
		/* what a killed repack left: its copy, or the store it
		 * replaced */
		rm_store_dir(tmp.ptr);
		if (mkdir(tmp.ptr, 0700) != 0) {
			rc = tend_error_set(TEND_ERROR, "store: mkdir %s: %s (the "
			    "store is kept as it was)", tmp.ptr,
			    strerror(errno));
			goto out;
		}
		if ((rc = lock_room(tmp.ptr, tmp.ptr)) != 0) {
			rm_store_dir(tmp.ptr);
			goto out;
		}
		to = NULL;
		if ((rc = mdb_env_create(&to)) == 0) {
			mdb_env_set_maxdbs(to, TEND_T__COUNT + 2);
			mdb_env_set_maxreaders(to, 126);
			mdb_env_set_mapsize(to, (size_t)st->map_size);
			rc = mdb_env_open(to, tmp.ptr, MDB_NOTLS | MDB_NOSYNC,
			    0600);
		}
		if (rc == 0)
			rc = repack_copy(st, to, per);
		if (to)
			mdb_env_close(to);
		if (rc != MDB_TXN_FULL || per <= 16)
			break;
		per /= 16;
	}
	if (rc) {
		rc = tend_error_set(TEND_ERROR, "store: repack into %s: %s "
		    "(the store is kept as it was)",
		    tmp.ptr, rc == EIO || rc == ENOSPC || rc == EDQUOT
		    ? "the disk filled (LMDB: a short write)"
		    : mdb_strerror(rc));
		rm_store_dir(tmp.ptr);
		goto out;
	}
	if (tend_failpoint("repack", "copied") || fsync_path(tmp.ptr) != 0) {
		rc = tend_error_set(TEND_ERROR, "store: repack: sync %s: %s "
		    "(the store is kept as it was)", tmp.ptr, strerror(errno));
		rm_store_dir(tmp.ptr);
		goto out;
	}
	/* one rename swaps the two: a reader opens the one or the other */
	if (renameat2(AT_FDCWD, tmp.ptr, AT_FDCWD, st->dir,
		RENAME_EXCHANGE) != 0) {
		int err = errno;

		rm_store_dir(tmp.ptr);
		/* a filesystem without the exchange: the store stays as it
		 * is, without a word at every cold sync */
		rc = err == EINVAL || err == ENOSYS || err == EOPNOTSUPP ? 0
		    : tend_error_set(TEND_ERROR, "store: repack: swap %s: %s "
			"(the store is kept as it was)", st->dir,
			strerror(err));
		goto out;
	}
	fsync_path(parent.ptr);
	tend_failpoint("repack", "swapped");
	mdb_env_close(st->env);
	st->env = NULL;
	st->map_addr = NULL;
	if (env_open_current(st) != 0) {
		st->broken = true;
		st->broken_why = "reopen";
		rc = tend_error_set(TEND_ERROR, "store %s: rewritten in key "
		    "order, but opening it again failed (%s): the next command "
		    "opens it", st->dir, tend_error_last());
	} else
		rc = 1;
	/* the store it replaced (readers that have it open keep it) */
	rm_store_dir(tmp.ptr);
out:
	tend_buf_release(&tmp);
	tend_buf_release(&parent);
	return rc;
}

static bool
in_preview(const struct tend_txn *t)
{
	return t->st->held && t->txn == t->st->held->txn;
}

/* The map filled: a write transaction is run again on a grown map; a
 * preview's cannot be (preview_room made it as big as it may be) */
static int
map_full(struct tend_txn *t)
{
	t->map_full = 1;
	if (!in_preview(t))
		return tend_error_set(TEND_ERETRY, "store: map full");
	t->st->held->map_full = 1;
	return tend_error_set(TEND_ERETRY, "store: the preview filled the "
	    "store's map (%llu MiB): is the disk full?",
	    (unsigned long long)(t->st->map_size >> 20));
}

/* An LMDB error; after a preview filled the map, every later call in it
 * fails (MDB_BAD_TXN): say why */
static int
txn_fail(const struct tend_txn *t, int rc, const char *what)
{
	if (rc == MDB_BAD_TXN && in_preview(t) && t->st->held->map_full)
		return tend_error_set(TEND_ERROR, "store: the preview filled "
		    "the store's map (%llu MiB): is the disk full?",
		    (unsigned long long)(t->st->map_size >> 20));
	return mdb_fail(rc, what);
}

int
tend_store_get(struct tend_txn *t, enum tend_table tab, const void *key,
    size_t klen, struct tend_bytes *val)
{
	MDB_val k = {klen, (void *)key}, v;
	int rc = mdb_get(t->txn, t->st->dbi[tab], &k, &v);

	if (rc == MDB_NOTFOUND)
		return TEND_ENOTFOUND;
	if (rc != 0)
		return txn_fail(t, rc, "get");
	store_read(t->st);
	val->data = v.mv_data;
	val->len = v.mv_size;
	return 0;
}

int
tend_store_put(struct tend_txn *t, enum tend_table tab, const void *key,
    size_t klen, const void *val, size_t vlen)
{
	MDB_val k = {klen, (void *)key}, v = {vlen, (void *)val};
	int rc;

	t->wrote = true;
	rc = tend_failpoint("map-full", NULL) ? MDB_MAP_FULL
						   : mdb_put(t->txn,
							 t->st->dbi[tab], &k, &v, 0);

	if (rc == MDB_MAP_FULL) {
		return map_full(t);
	}
	if (rc != 0)
		return txn_fail(t, rc, "put");
	return 0;
}

int
tend_store_del(struct tend_txn *t, enum tend_table tab, const void *key,
    size_t klen)
{
	MDB_val k = {klen, (void *)key};
	int rc;

	t->wrote = true;
	rc = mdb_del(t->txn, t->st->dbi[tab], &k, NULL);

	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc == MDB_MAP_FULL) {
		return map_full(t);
	}
	if (rc != 0)
		return txn_fail(t, rc, "del");
	return 0;
}

int
tend_store_del_prefix(struct tend_txn *t, enum tend_table tab,
    const void *prefix, size_t plen)
{
	MDB_cursor *c = NULL;
	MDB_val k = {plen, (void *)prefix}, v;
	int rc = mdb_cursor_open(t->txn, t->st->dbi[tab], &c);

	if (rc != 0)
		return mdb_fail(rc, "cursor");
	t->wrote = true;
	rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	while (rc == 0 && k.mv_size >= plen &&
	    memcmp(k.mv_data, prefix, plen) == 0) {
		if ((rc = mdb_cursor_del(c, 0)) != 0)
			break;
		rc = mdb_cursor_get(c, &k, &v, MDB_GET_CURRENT);
		if (rc == MDB_NOTFOUND || rc == EINVAL)
			rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	}
	mdb_cursor_close(c);
	if (rc == MDB_MAP_FULL) {
		return map_full(t);
	}
	if (rc != 0 && rc != MDB_NOTFOUND && rc != 0)
		return mdb_fail(rc, "del range");
	return 0;
}

int
tend_store_iter_init(struct tend_iter *it, struct tend_txn *t,
    enum tend_table tab, const void *prefix, size_t plen)
{
	MDB_cursor *c = NULL;
	int rc = mdb_cursor_open(t->txn, t->st->dbi[tab], &c);

	memset(it, 0, sizeof *it);
	if (rc != 0)
		return mdb_fail(rc, "cursor");
	it->txn = t;
	it->cursor = c;
	it->prefix = plen <= sizeof it->pbuf ? it->pbuf : tend_xmalloc(plen);
	if (plen)
		memcpy((void *)it->prefix, prefix, plen);
	it->plen = plen;
	return 0;
}

int
tend_store_iter_next(struct tend_iter *it, struct tend_bytes *key,
    struct tend_bytes *val)
{
	MDB_val k = {it->plen, (void *)it->prefix}, v;
	int rc;

	if (it->done)
		return 0;
	if (!it->started) {
		it->started = true;
		rc = it->plen ? mdb_cursor_get(it->cursor, &k, &v, MDB_SET_RANGE)
			      : mdb_cursor_get(it->cursor, &k, &v, MDB_FIRST);
	} else
		rc = mdb_cursor_get(it->cursor, &k, &v, MDB_NEXT);
	if (rc == MDB_NOTFOUND) {
		it->done = true;
		return 0;
	}
	if (rc != 0)
		return mdb_fail(rc, "cursor next");
	store_read(it->txn->st);
	if (k.mv_size < it->plen ||
	    (it->plen && memcmp(k.mv_data, it->prefix, it->plen) != 0)) {
		it->done = true;
		return 0;
	}
	key->data = k.mv_data;
	key->len = k.mv_size;
	val->data = v.mv_data;
	val->len = v.mv_size;
	return 1;
}

void
tend_store_iter_finish(struct tend_iter *it)
{
	if (it->cursor)
		mdb_cursor_close(it->cursor);
	it->cursor = NULL;
	if (it->prefix && it->prefix != it->pbuf)
		free((void *)it->prefix);
	it->prefix = NULL;
}

int
tend_store_seq_next(struct tend_txn *t, const char *name, uint64_t *out)
{
	struct tend_bytes v;
	uint64_t next = 1;
	int rc = tend_store_get(t, TEND_T_SEQ, name, strlen(name), &v);

	if (rc == 0 && v.len == 8)
		memcpy(&next, v.data, 8);
	else if (rc != 0 && rc != TEND_ENOTFOUND)
		return rc;
	*out = next;
	next++;
	return tend_store_put(t, TEND_T_SEQ, name, strlen(name), &next, 8);
}
