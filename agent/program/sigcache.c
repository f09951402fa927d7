/*
 * sigcache.c - the stat-signature cache: one SIG row per source file
 * (size, mtime ns, ctime ns, inode, mode, content fingerprint, the
 * entries it declared, and the stamp of the component that last
 * committed it). A walk compares every file's signature with its row and
 * reads and hashes only those that changed; a signature within the racy
 * window (mtime too close to the scan) is stored as untrusted, so it is
 * hashed again next time. The rows are written after a full pass, or with
 * each component's settle in a partial one.
 */
#define _GNU_SOURCE
#include "pass.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "fs.h"
#include "tend/failpoint.h"
#include "tend/status.h"

/* A file changed within this window before the scan may change again
 * without its mtime moving (timestamps advance in kernel ticks): its
 * signature is not trusted next time. */
#define RACY_NS (50ull * 1000000ull)

/* a million items are held for a pass: keep them small */
_Static_assert(sizeof(struct item) <= 152, "struct item grew");



uint64_t
ts_ns(const struct timespec *t)
{
	return (uint64_t)t->tv_sec * 1000000000ull + (uint64_t)t->tv_nsec;
}

/* ---- the items' paths ---- */

struct name_chunk {
	struct name_chunk *next;
	size_t used, size;
	char data[];
};

char *
names_dup(struct run *r, const char *rel, size_t len)
{
	struct name_chunk *c = r->names;

	if (!c || c->size - c->used < len + 1) {
		size_t size = len + 1 > 60000 ? len + 1 : 60000;

		c = tend_xmalloc(sizeof *c + size);
		c->next = r->names;
		c->used = 0;
		c->size = size;
		r->names = c;
	}
	char *p = c->data + c->used;
	memcpy(p, rel, len);
	p[len] = '\0';
	c->used += len + 1;
	return p;
}

void
names_free(struct run *r)
{
	while (r->names) {
		struct name_chunk *c = r->names;

		r->names = c->next;
		free(c);
	}
}

/* ---- stamps: few distinct ones, many rows ---- */

/*
 * A stamp as rows keep it: the first 8 bytes of the logic fingerprint,
 * then 8 of a hash of the target generation (16 bytes, not 32; a row of
 * a million keeps one). Two stamps are the same when their keys are.
 */
struct stamp {
	uint8_t key[16];
};

static struct stamp *stamps; /* stamps[n - 1] is number n */
static uint32_t nstamps, cstamps;
static pthread_mutex_t stamps_lock = PTHREAD_MUTEX_INITIALIZER;

static void
stamp_key(uint8_t key[16], const struct tend_fp *logic, uint64_t gen_id,
    uint64_t gen_schema)
{
	uint64_t g[2] = {gen_id, gen_schema};
	struct tend_fp h = tend_fp_bytes(g, sizeof g);

	memcpy(key, logic->b, 8);
	memcpy(key + 8, h.b, 8);
}

static uint32_t
stamp_intern_key(const uint8_t key[16])
{
	uint32_t n;

	pthread_mutex_lock(&stamps_lock);
	for (n = nstamps; n > 0; n--)
		if (memcmp(stamps[n - 1].key, key, 16) == 0)
			break;
	if (n == 0) {
		if (nstamps == cstamps) {
			cstamps = cstamps ? cstamps * 2 : 4;
			stamps = tend_xrealloc(stamps,
			    cstamps * sizeof *stamps);
		}
		memcpy(stamps[nstamps++].key, key, 16);
		n = nstamps;
	}
	pthread_mutex_unlock(&stamps_lock);
	return n;
}

uint32_t
stamp_intern(const struct tend_fp *logic, uint64_t gen_id,
    uint64_t gen_schema)
{
	uint8_t key[16];

	stamp_key(key, logic, gen_id, gen_schema);
	return stamp_intern_key(key);
}

static bool
stamp_get(uint32_t stamp, uint8_t key[16])
{
	bool ok = false;

	pthread_mutex_lock(&stamps_lock);
	if (stamp && stamp <= nstamps) {
		memcpy(key, stamps[stamp - 1].key, 16);
		ok = true;
	}
	pthread_mutex_unlock(&stamps_lock);
	return ok;
}

bool
stamp_is(uint32_t stamp, const struct tend_fp *logic, uint64_t gen_id,
    uint64_t gen_schema)
{
	uint8_t have[16], want[16];

	if (!stamp_get(stamp, have))
		return false;
	stamp_key(want, logic, gen_id, gen_schema);
	return memcmp(have, want, 16) == 0;
}

bool
stamp_logic_is(uint32_t stamp, const struct tend_fp *logic)
{
	uint8_t have[16];

	return stamp_get(stamp, have) && memcmp(have, logic->b, 8) == 0;
}

static void
sig_of(struct sig *s, const struct stat *st)
{
	s->size = (uint64_t)st->st_size;
	s->mtime_ns = ts_ns(&st->st_mtim);
	s->ctime_ns = ts_ns(&st->st_ctim);
	s->ino = (uint64_t)st->st_ino;
	s->mode = (uint32_t)st->st_mode;
}

static bool
sig_same(const struct sig *a, const struct sig *b)
{
	return a->size == b->size && a->mtime_ns == b->mtime_ns &&
	    a->ctime_ns == b->ctime_ns && a->ino == b->ino && a->mode == b->mode;
}

void
sig_key(struct tend_buf *k, const char *app, const char *rel, size_t len)
{
	tend_buf_reset(k);
	tend_buf_puts(k, app);
	tend_buf_putc(k, 0);
	if (len <= 400)
		tend_buf_put(k, rel, len);
	else {
		/* LMDB keys are at most 511 bytes: long paths by digest */
		struct tend_fp fp = tend_fp_bytes(rel, len);

		tend_buf_put(k, rel, 300);
		tend_buf_putc(k, 0xff);
		tend_buf_put(k, fp.b, 16);
	}
}

/* ---- the row ---- */

/*
 * Version 4 (this tend writes it; version 3, 123 bytes for a copied
 * file, is still read):
 *	[4][flags][size][mtime ns, 8 bytes][ctime - mtime, zigzag]
 *	[inode][mode][content fp, 16][stamp key, 16 if SIGF_STAMP]
 *	[outs, unless SIGF_SELF*]
 * numbers in varints (LEB128). A source that declared one entry under
 * its own path (every copied file) names it by a flag: SIGF_SELF_SAME
 * when the entry's fingerprint is the content's, SIGF_SELF and 16 bytes
 * when not. 55 bytes for a copied file.
 */
#define SIG_V3 3
#define SIG_V4 4
#define SIGF_TRUSTED 1
#define SIGF_STAMP 2
#define SIGF_SELF_SAME 4
#define SIGF_SELF 8

/* TEND_SIG_VERSION=3 in the environment (tests): rows as version 3 */
static bool sig_v3;

static void
sig_encode(struct tend_buf *b, const struct sig *s, const char *rel,
    size_t len, const struct tend_buf *outs)
{
	uint8_t key[16];
	bool stamped = stamp_get(s->stamp, key);
	int64_t dc = (int64_t)(s->ctime_ns - s->mtime_ns);
	uint8_t fl = (s->trusted ? SIGF_TRUSTED : 0) |
	    (stamped ? SIGF_STAMP : 0);
	const char *name;
	uint16_t nlen;
	size_t pos = 0;
	bool self = len <= 400 && outs_next(outs->ptr, outs->len, &pos, &name,
	    &nlen) && pos == outs->len && nlen == len &&
	    memcmp(name, rel, len) == 0;
	bool same = self && memcmp(name + nlen, s->fp.b, 16) == 0;

	fl |= same ? SIGF_SELF_SAME : self ? SIGF_SELF : 0;
	if (sig_v3) {
		/* for tests: what an older tend wrote (unstamped: its stamp
		 * held the whole logic, which is not kept any more) */
		uint64_t x[4] = {s->size, s->mtime_ns, s->ctime_ns, s->ino};
		uint8_t zero[32] = {0};

		tend_buf_putc(b, SIG_V3);
		tend_buf_put(b, x, sizeof x);
		tend_buf_put(b, &s->mode, 4);
		tend_buf_putc(b, s->trusted);
		tend_buf_put(b, s->fp.b, 16);
		tend_buf_putc(b, 0);
		tend_buf_put(b, zero, 32);
		tend_buf_put(b, outs->ptr, outs->len);
		return;
	}
	tend_buf_putc(b, SIG_V4);
	tend_buf_putc(b, (char)fl);
	tend_varint_put(b, s->size);
	tend_buf_put(b, &s->mtime_ns, 8);
	tend_varint_put(b, (uint64_t)((dc << 1) ^ (dc >> 63)));
	tend_varint_put(b, s->ino);
	tend_varint_put(b, s->mode);
	tend_buf_put(b, s->fp.b, 16);
	if (stamped)
		tend_buf_put(b, key, 16);
	if (same)
		return;
	if (self)
		tend_buf_put(b, name + nlen, 16);
	else
		tend_buf_put(b, outs->ptr, outs->len);
}

/* s from row v; *outs_at the offset of its outs (SIGF_SELF: of the
 * entry's fingerprint), *fl its flags (0 for version 3) */
static bool
sig_parse(const struct tend_bytes *v, struct sig *s, size_t *outs_at,
    uint8_t *fl)
{
	if (v->len >= SIG_FIXED && v->data[0] == SIG_V3) {
		uint64_t x[4];
		uint8_t key[16];

		memcpy(x, v->data + 1, 32);
		s->size = x[0];
		s->mtime_ns = x[1];
		s->ctime_ns = x[2];
		s->ino = x[3];
		memcpy(&s->mode, v->data + 33, 4);
		s->trusted = v->data[37] != 0;
		memcpy(s->fp.b, v->data + 38, 16);
		s->stamp = 0;
		if (v->data[54]) {
			struct tend_fp logic;
			uint64_t g[2];

			memcpy(logic.b, v->data + 55, 16);
			memcpy(g, v->data + 71, 16);
			stamp_key(key, &logic, g[0], g[1]);
			s->stamp = stamp_intern_key(key);
		}
		*outs_at = SIG_FIXED;
		*fl = 0;
		return true;
	}
	size_t pos = 2;
	uint64_t dc, mode;

	if (v->len < 2 || v->data[0] != SIG_V4)
		return false;
	*fl = v->data[1];
	if (!tend_varint_get(v->data, v->len, &pos, &s->size) || pos + 8 > v->len)
		return false;
	memcpy(&s->mtime_ns, v->data + pos, 8);
	pos += 8;
	if (!tend_varint_get(v->data, v->len, &pos, &dc) ||
	    !tend_varint_get(v->data, v->len, &pos, &s->ino) ||
	    !tend_varint_get(v->data, v->len, &pos, &mode) || pos + 16 > v->len)
		return false;
	s->ctime_ns = s->mtime_ns + (uint64_t)((int64_t)(dc >> 1) ^
	    -(int64_t)(dc & 1));
	s->mode = (uint32_t)mode;
	s->trusted = (*fl & SIGF_TRUSTED) != 0;
	memcpy(s->fp.b, v->data + pos, 16);
	pos += 16;
	s->stamp = 0;
	if (*fl & SIGF_STAMP) {
		if (pos + 16 > v->len)
			return false;
		s->stamp = stamp_intern_key(v->data + pos);
		pos += 16;
	}
	if ((*fl & SIGF_SELF) && pos + 16 != v->len)
		return false;
	*outs_at = pos;
	return true;
}

bool
sig_decode(const struct tend_bytes *v, struct sig *s)
{
	size_t at;
	uint8_t fl;

	return sig_parse(v, s, &at, &fl);
}

/* The entries row v lists, appended to `out` as outs lists them (`rel`,
 * `len`: the row's source, which names the entry of a SIGF_SELF row) */
bool
sig_outs(const struct tend_bytes *v, const char *rel, size_t len,
    struct tend_buf *out)
{
	struct sig s;
	size_t at;
	uint8_t fl;
	uint16_t n = (uint16_t)len;

	if (!sig_parse(v, &s, &at, &fl))
		return false;
	if (fl & (SIGF_SELF_SAME | SIGF_SELF)) {
		tend_buf_put(out, &n, 2);
		tend_buf_put(out, rel, len);
		tend_buf_put(out, (fl & SIGF_SELF) ? v->data + at : s.fp.b, 16);
	} else
		tend_buf_put(out, v->data + at, v->len - at);
	return true;
}

/* A symlink's content is its target's text, never what it points to;
 * `text` (PATH_MAX bytes) gets it too. */
int
hash_link(int dirfd, const char *leaf, struct tend_fp *out, char *text)
{
	char buf[PATH_MAX];
	ssize_t n = readlinkat(dirfd, leaf, buf, sizeof buf - 1);

	if (n < 0)
		return -1;
	buf[n] = '\0';
	*out = tend_fs_link_fp(buf);
	if (text)
		memcpy(text, buf, (size_t)n + 1);
	return 0;
}

int
hash_file(int dirfd, const char *leaf, off_t size, struct tend_fp *out)
{
	int fd, rc;

	if (tend_failpoint("read", leaf))
		return -1;
	if ((fd = openat(dirfd, leaf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return -1;
	rc = hash_fd_sized(fd, size, out);
	close(fd);
	return rc;
}

static int
cmp_bytes(const void *a, size_t alen, const void *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	return c ? c : (alen > blen) - (alen < blen);
}

/* The stored signature row of the key in s->key, or not found. */
static int
sig_lookup(struct scan *s, size_t rel_len, struct tend_bytes *v)
{
	if (rel_len > 400) /* digested keys are out of path order */
		return tend_store_get(s->txn, TEND_T_SIG, s->key.ptr,
		    s->key.len, v);
	if (!s->started) {
		size_t plen = strlen(s->r->app->name) + 1;

		s->started = true;
		tend_store_iter_init(&s->it, s->txn, TEND_T_SIG, s->key.ptr,
		    plen);
		s->cur_valid = tend_store_iter_next(&s->it, &s->ck, &s->cv) == 1;
	}
	while (s->cur_valid &&
	    cmp_bytes(s->ck.data, s->ck.len, s->key.ptr, s->key.len) < 0)
		s->cur_valid = tend_store_iter_next(&s->it, &s->ck, &s->cv) == 1;
	if (s->cur_valid &&
	    cmp_bytes(s->ck.data, s->ck.len, s->key.ptr, s->key.len) == 0) {
		*v = s->cv;
		return 0;
	}
	return TEND_ENOTFOUND;
}

/*
 * Add the source file rel (stat st, stored signature row `row` or NULL)
 * to the run: unchanged if its trusted signature matches, else read and
 * hashed; a signature within the racy window is stored untrusted. A
 * full pass (sync --full) trusts no signature: every file is hashed.
 */
void
add_item(struct run *r, const char *rel, size_t len, const struct stat *st,
    const struct tend_bytes *row, int dirfd, const char *leaf)
{
	struct item it = {0};
	struct sig old;
	size_t at = 0;
	uint8_t fl = 0;
	bool have = row && sig_parse(row, &old, &at, &fl);

	it.rel = names_dup(r, rel, len);
	it.len = len;
	it.outs = (struct tend_buf)TEND_BUF_INIT;
	sig_of(&it.sig, st);
	if (have) {
		/* (no copy of the path: the hot path of a no-op pass) */
		if (fl & (SIGF_SELF_SAME | SIGF_SELF)) {
			it.outs_self = true;
			memcpy(it.outs_fp.b, (fl & SIGF_SELF) ? row->data + at
			    : old.fp.b, 16);
		} else
			item_outs_set(&it, row->data + at, row->len - at);
		it.had = true;
		it.old_fp = old.fp;
	}
	if (have && old.trusted && sig_same(&old, &it.sig) && !r->o->full) {
		it.sig = old;
		it.unchanged = true;
	} else {
		if ((S_ISLNK(st->st_mode) ? hash_link(dirfd, leaf, &it.sig.fp,
			 NULL) : hash_file(dirfd, leaf, st->st_size, &it.sig.fp)) != 0) {
			/* unreadable: an error of this item, reported by its
			 * component (the target keeps what it had) */
			it.read_errno = errno ? errno : EIO;
			memset(&it.sig.fp, 0, sizeof it.sig.fp);
			it.sig.mode = 0;
		}
		it.hashed = true;
		it.sig.trusted = it.sig.mode != 0 &&
		    it.sig.mtime_ns + RACY_NS < r->scan_ns &&
		    it.sig.ctime_ns + RACY_NS < r->scan_ns;
		r->res->hashed++;
	}
	if (r->nitems == r->citems) {
		r->citems = r->citems ? r->citems * 2 : 256;
		r->items = tend_xrealloc(r->items, r->citems * sizeof *r->items);
	}
	r->items[r->nitems++] = it;
	r->res->files++;
	r->res->new_items += !have;
}

int
on_file(const char *rel, size_t len, int dirfd, const char *leaf,
    const struct stat *st, void *arg)
{
	struct scan *s = arg;
	struct run *r = s->r;
	struct tend_bytes v;

	sig_key(&s->key, r->app->name, rel, len);
	add_item(r, rel, len, st, sig_lookup(s, len, &v) == 0 ? &v : NULL,
	    dirfd, leaf);
	if (r->o->progress && (r->nitems & 1023) == 0)
		r->o->progress(r->o->arg, r->app->name, r->res->files,
		    r->res->hashed);
	return 0;
}

int
cmp_rel(const void *a, const void *b)
{
	const struct item *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->rel, y->rel, n);

	return c ? c : (x->len > y->len) - (x->len < y->len);
}

bool
have_item(struct run *r, const char *rel, size_t len)
{
	struct item probe = {.rel = (char *)rel, .len = len};

	if (!r->nitems)
		return false;
	return bsearch(&probe, r->items, r->nitems, sizeof *r->items,
		   cmp_rel) != NULL;
}

/* Previously seen source items: how many, and which vanished. Both the
 * rows and the items are in path order: a merge. */
int
count_previous(struct run *r, struct tend_txn *txn, size_t *nprev)
{
	struct tend_buf prefix = TEND_BUF_INIT;
	struct tend_iter it;
	struct tend_bytes k, v;
	size_t j = 0;
	int more;

	*nprev = 0;
	tend_buf_puts(&prefix, r->app->name);
	tend_buf_putc(&prefix, 0);
	tend_store_iter_init(&it, txn, TEND_T_SIG, prefix.ptr, prefix.len);
	while ((more = tend_store_iter_next(&it, &k, &v)) == 1) {
		const char *rel = (const char *)k.data + prefix.len;
		size_t len = k.len - prefix.len;
		struct item probe = {.rel = (char *)rel, .len = len};

		(*nprev)++;
		if (memchr(rel, 0xff, len))
			continue; /* a digested long path: never vanishes here */
		while (j < r->nitems && cmp_rel(&r->items[j], &probe) < 0)
			j++;
		if ((j < r->nitems && cmp_rel(&r->items[j], &probe) == 0) ||
		    have_item(r, rel, len))
			continue;
		r->vanished = tend_xrealloc(r->vanished,
		    (r->nvanished + 1) * sizeof *r->vanished);
		r->vanished[r->nvanished++] = strndup(rel, len);
	}
	tend_store_iter_finish(&it);
	tend_buf_release(&prefix);
	return more < 0 ? more : 0;
}

/* ---- SIG upkeep ---- */

/* Does the item's SIG row need writing? (read now, ran, or restamped) */
static bool
sig_wanted(const struct item *it)
{
	return (it->hashed || it->ran || it->restamp) && it->sig.mode != 0;
}

/* ... and was it not settled with its component already? */
bool
sig_due(const struct item *it)
{
	return sig_wanted(it) && !it->sig_done;
}

static int
put_sig(struct tend_txn *txn, struct run *r, struct item *it,
    struct tend_buf *k, struct tend_buf *v)
{
	struct tend_buf tmp = TEND_BUF_INIT;
	int rc;

	static int v3 = -1; /* (getenv once: a million rows a pass) */

	if (v3 < 0) {
		const char *want = getenv("TEND_SIG_VERSION");

		v3 = want && strcmp(want, "3") == 0;
	}
	sig_v3 = v3 == 1;
	sig_key(k, r->app->name, it->rel, it->len);
	tend_buf_reset(v);
	sig_encode(v, &it->sig, it->rel, it->len, item_outs(it, &tmp));
	rc = tend_store_put(txn, TEND_T_SIG, k->ptr, k->len, v->ptr, v->len);
	tend_buf_release(&tmp);
	return rc;
}

int
sig_body(struct tend_txn *txn, void *arg)
{
	struct run *r = arg;
	struct tend_buf k = TEND_BUF_INIT, v = TEND_BUF_INIT;
	int rc = 0;

	for (size_t i = r->sig_from; i < r->sig_to && rc == 0; i++)
		if (sig_due(&r->items[i]))
			rc = put_sig(txn, r, &r->items[i], &k, &v);
	/* (vanished items' rows went before the pass: forget_vanished) */
	tend_buf_release(&k);
	tend_buf_release(&v);
	return rc;
}

/*
 * A partial pass writes an item's SIG row in the transaction that settles
 * its component (tend_engine_set_settle_hook): one durable commit per
 * pass fewer, and the row commits with what it describes. (A full pass
 * restamps its items after the run: there the rows wait for that.)
 */
int
settle_sig(struct tend_txn *txn, const char *component, void *arg)
{
	struct run *r = arg;
	struct item *it = find_item(r, component);
	struct tend_buf k = TEND_BUF_INIT, v = TEND_BUF_INIT;
	int rc = 0;

	/* a failed component's row is written all the same. sig_wanted,
	 * not sig_due: a body retried after the map grew writes the row
	 * again. If the transaction fails for good the row stays old: its
	 * signature no longer matches the file, which the next pass reads
	 * again. */
	if (it && sig_wanted(it)) {
		rc = put_sig(txn, r, it, &k, &v);
		it->sig_done = rc == 0;
	}
	tend_buf_release(&k);
	tend_buf_release(&v);
	return rc;
}

