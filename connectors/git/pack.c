/*
 * pack.c - one pack for many new objects (see pack.h).
 *
 * Pack format (git's Documentation/gitformat-pack): "PACK", version 2,
 * the object count, then per object a header (type in bits 4-6 of the
 * first byte, the size in 4 + 7n bits, high bit = more) and the
 * zlib-deflated content; last, the SHA-1 of everything before it. The
 * index (version 2) is written here too: the caller knows every object's
 * id, so nothing is inflated or hashed again (libgit2's indexer would do
 * both). Both files are written under temporary names in objects/pack/
 * and renamed, the .idx last: a pack is visible only once complete.
 */
#define _GNU_SOURCE
#include "pack.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "tend/buf.h"
#include "tend/failpoint.h"
#include "writes.h"
#include "tend/status.h"

/* ---- SHA-1 (FIPS 180-4) ---- */

static uint32_t
rol(uint32_t x, int n)
{
	return (x << n) | (x >> (32 - n));
}

static void
sha1_block(struct tend_sha1 *s, const unsigned char *p)
{
	uint32_t w[80], a, b, c, d, e;

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		    (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
	for (int i = 16; i < 80; i++)
		w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4];
	for (int i = 0; i < 80; i++) {
		uint32_t f, k;

		if (i < 20)
			f = (b & c) | (~b & d), k = 0x5a827999;
		else if (i < 40)
			f = b ^ c ^ d, k = 0x6ed9eba1;
		else if (i < 60)
			f = (b & c) | (b & d) | (c & d), k = 0x8f1bbcdc;
		else
			f = b ^ c ^ d, k = 0xca62c1d6;
		uint32_t t = rol(a, 5) + f + e + k + w[i];
		e = d, d = c, c = rol(b, 30), b = a, a = t;
	}
	s->h[0] += a, s->h[1] += b, s->h[2] += c, s->h[3] += d, s->h[4] += e;
}

void
tend_sha1_init(struct tend_sha1 *s)
{
	static const uint32_t h0[5] = {0x67452301, 0xefcdab89, 0x98badcfe,
	    0x10325476, 0xc3d2e1f0};

	memcpy(s->h, h0, sizeof h0);
	s->len = 0;
	s->nbuf = 0;
}

void
tend_sha1_update(struct tend_sha1 *s, const void *data, size_t n)
{
	const unsigned char *p = data;

	s->len += n;
	if (s->nbuf) {
		size_t k = 64 - s->nbuf < n ? 64 - s->nbuf : n;

		memcpy(s->buf + s->nbuf, p, k);
		s->nbuf += k, p += k, n -= k;
		if (s->nbuf < 64)
			return;
		sha1_block(s, s->buf);
		s->nbuf = 0;
	}
	for (; n >= 64; p += 64, n -= 64)
		sha1_block(s, p);
	memcpy(s->buf, p, n);
	s->nbuf = n;
}

void
tend_sha1_final(struct tend_sha1 *s, unsigned char out[20])
{
	uint64_t bits = s->len * 8;
	unsigned char pad[72] = {0x80};
	size_t padlen = (s->nbuf < 56 ? 56 : 120) - s->nbuf;

	for (int i = 0; i < 8; i++)
		pad[padlen + (size_t)i] = (unsigned char)(bits >> (56 - 8 * i));
	tend_sha1_update(s, pad, padlen + 8);
	for (int i = 0; i < 5; i++) {
		out[4 * i] = (unsigned char)(s->h[i] >> 24);
		out[4 * i + 1] = (unsigned char)(s->h[i] >> 16);
		out[4 * i + 2] = (unsigned char)(s->h[i] >> 8);
		out[4 * i + 3] = (unsigned char)s->h[i];
	}
}

/* ---- the pack and its index ---- */

#define CHUNK (256 * 1024)

struct pack_ent {
	git_oid id;
	uint64_t off;
	uint32_t crc;
};

/* [tend] fsync: the pack and its index reach the disk before the rename */
static bool sync_files;
/* where the packs tend writes are listed (tend_pack_set_list) */
static char *list_path;

struct tend_pack {
	git_repository *repo;
	char *dir;		/* objects/pack/ */
	char *tmp;		/* the pack being written */
	int fd;
	uint64_t off;		/* bytes written so far */
	struct tend_sha1 sha;
	uint32_t crc;		/* of the current object's bytes */
	struct pack_ent *ents;
	uint32_t n, want;
	unsigned char *out;
	size_t nout;
	z_stream z;
};

static int
sys_fail(const char *what, const char *path)
{
	return tend_error_set(TEND_ERROR, "git: %s %s: %s", what, path,
	    strerror(errno));
}

static int
flush_out(struct tend_pack *p)
{
	size_t done = 0;

	while (done < p->nout) {
		ssize_t w = write(p->fd, p->out + done, p->nout - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return sys_fail("write", p->tmp);
		done += (size_t)w;
	}
	p->nout = 0;
	return 0;
}

/* Bytes of the pack: hashed for the trailer, counted for the offsets,
 * and in the current object's CRC. */
static int
put(struct tend_pack *p, const void *data, size_t n)
{
	const unsigned char *s = data;

	tend_sha1_update(&p->sha, s, n);
	p->crc = (uint32_t)crc32(p->crc, s, (uInt)n);
	p->off += n;
	while (n) {
		size_t k = CHUNK - p->nout < n ? CHUNK - p->nout : n;

		memcpy(p->out + p->nout, s, k);
		p->nout += k, s += k, n -= k;
		if (p->nout == CHUNK && flush_out(p))
			return TEND_ERROR;
	}
	return 0;
}

/*
 * Is process `pid` gone, or as good as gone? A dead process can still be
 * seen for a moment: a zombie its new parent has not reaped yet, or one
 * with a SIGKILL pending (an agent's push child, killed by
 * PR_SET_PDEATHSIG when the agent was, may still hold a ref lock when
 * the next tend starts). Such a one is waited for (up to 2 s); its
 * locks are then a dead process's.
 */
bool
tend_pid_gone(long pid)
{
	char path[64], line[256];

	for (int tries = 0; tries < 100; tries++) {
		if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
			return true;
		snprintf(path, sizeof path, "/proc/%ld/status", pid);
		FILE *f = fopen(path, "re");
		bool dying = false, dead = false;

		while (f && fgets(line, sizeof line, f)) {
			if (strncmp(line, "State:", 6) == 0)
				dead = strpbrk(line + 6, "ZX") != NULL;
			else if (strncmp(line, "SigPnd:", 7) == 0 ||
			    strncmp(line, "ShdPnd:", 7) == 0)
				dying |= (strtoull(line + 7, NULL, 16) >>
					     (SIGKILL - 1)) & 1;
		}
		if (f)
			fclose(f);
		else
			return errno == ENOENT;
		if (dead)
			return true;
		if (!dying)
			return false;
		usleep(20 * 1000);
	}
	return false;
}

/* A temporary file of a pack whose writer is gone: "tmp_tend_pack_PID_"
 * with PID dead, or an older tend's "tmp_tend_pack_XXXXXX" (no pid)
 * untouched for an hour; its ".idx" too. */
static bool
stale_tmp(const char *dir, const char *name)
{
	const char *p = name + strlen("tmp_tend_pack_");
	char *end;
	long pid = strtol(p, &end, 10);

	if (end != p && *end == '_' && pid > 0)
		return pid != (long)getpid() && tend_pid_gone(pid);
	struct stat st;
	struct tend_buf path = TEND_BUF_INIT;
	tend_buf_printf(&path, "%s%s", dir, name);
	bool old = lstat(path.ptr, &st) == 0 &&
	    st.st_mtime + 3600 < time(NULL);
	tend_buf_release(&path);
	return old;
}

static int sweep_orphans(git_repository *repo, const char *dir);

int
tend_pack_sweep(git_repository *repo)
{
	struct tend_buf dir = TEND_BUF_INIT, path = TEND_BUF_INIT;
	DIR *d;
	struct dirent *e;
	int n = 0;

	tend_buf_printf(&dir, "%sobjects/pack/", git_repository_path(repo));
	if ((d = opendir(dir.ptr))) {
		while ((e = readdir(d)))
			if (strncmp(e->d_name, "tmp_tend_pack_", 14) == 0 &&
			    stale_tmp(dir.ptr, e->d_name)) {
				tend_buf_reset(&path);
				tend_buf_printf(&path, "%s%s", dir.ptr,
				    e->d_name);
				n += unlink(path.ptr) == 0;
			}
		closedir(d);
	}
	n += sweep_orphans(repo, dir.ptr);
	tend_buf_release(&dir);
	tend_buf_release(&path);
	return n;
}

int
tend_pack_open(struct tend_pack **out, git_repository *repo, uint32_t nobjects)
{
	struct tend_pack *p = tend_xcalloc(1, sizeof *p);
	unsigned char hdr[12] = {'P', 'A', 'C', 'K', 0, 0, 0, 2};
	struct tend_buf b = TEND_BUF_INIT;

	*out = NULL;
	p->fd = -1;
	p->repo = repo;
	p->want = nobjects;
	p->out = tend_xmalloc(CHUNK);
	p->ents = tend_xcalloc((size_t)nobjects + 1, sizeof *p->ents);
	tend_sha1_init(&p->sha);
	tend_buf_printf(&b, "%sobjects/pack/", git_repository_path(repo));
	p->dir = tend_buf_detach(&b, NULL);
	/* the pid names the writer: the next run sweeps a killed one's */
	tend_buf_printf(&b, "%stmp_tend_pack_%ld_XXXXXX", p->dir,
	    (long)getpid());
	p->tmp = tend_buf_detach(&b, NULL);
	if (deflateInit(&p->z, Z_BEST_SPEED) != Z_OK) {
		tend_pack_abort(p);
		return tend_error_set(TEND_ERROR, "git: zlib: deflateInit");
	}
	mkdir(p->dir, 0755);
	if ((p->fd = mkostemp(p->tmp, O_CLOEXEC)) < 0) {
		int rc = sys_fail("create", p->tmp);

		free(p->tmp);
		p->tmp = NULL;
		tend_pack_abort(p);
		return rc;
	}
	for (int i = 0; i < 4; i++)
		hdr[8 + i] = (unsigned char)(nobjects >> (24 - 8 * i));
	put(p, hdr, sizeof hdr);
	*out = p;
	return 0;
}

int
tend_pack_add(struct tend_pack *p, git_object_t type, const git_oid *id,
    const void *data, size_t len)
{
	unsigned char hdr[16], zbuf[65536];
	size_t n = 0, size = len;
	int zr;

	if (p->n == p->want)
		return tend_error_set(TEND_ERROR, "git: pack: more objects "
						  "than announced");
	p->ents[p->n].id = *id;
	p->ents[p->n].off = p->off;
	p->crc = (uint32_t)crc32(0, NULL, 0);
	hdr[n++] = (unsigned char)(((unsigned)type << 4) | (size & 0x0f) |
	    (size > 0x0f ? 0x80 : 0));
	for (size >>= 4; size; size >>= 7)
		hdr[n++] = (unsigned char)((size & 0x7f) | (size > 0x7f ? 0x80
									: 0));
	if (put(p, hdr, n))
		return TEND_ERROR;
	deflateReset(&p->z);
	p->z.next_in = (unsigned char *)(uintptr_t)data;
	p->z.avail_in = (uInt)len;
	do {
		p->z.next_out = zbuf;
		p->z.avail_out = sizeof zbuf;
		zr = deflate(&p->z, Z_FINISH);
		if (zr == Z_STREAM_ERROR)
			return tend_error_set(TEND_ERROR, "git: zlib: deflate");
		if (put(p, zbuf, sizeof zbuf - p->z.avail_out))
			return TEND_ERROR;
	} while (zr != Z_STREAM_END);
	p->ents[p->n++].crc = p->crc;
	return 0;
}

static int
cmp_ent(const void *x, const void *y)
{
	return git_oid_cmp(&((const struct pack_ent *)x)->id,
	    &((const struct pack_ent *)y)->id);
}

static void
be32(unsigned char *o, uint32_t v)
{
	o[0] = (unsigned char)(v >> 24), o[1] = (unsigned char)(v >> 16);
	o[2] = (unsigned char)(v >> 8), o[3] = (unsigned char)v;
}

/* idx v2: magic, version, fan-out, ids, CRCs, offsets (large ones in a
 * 64-bit table), the pack's checksum, the index's own checksum. */
static int
write_idx(struct tend_pack *p, const unsigned char packsum[20],
    const char *path)
{
	struct tend_buf b = TEND_BUF_INIT;
	unsigned char w[8], sum[20];
	uint32_t fan[256] = {0}, nlarge = 0;
	struct tend_sha1 s;
	int fd, rc = 0;

	qsort(p->ents, p->n, sizeof *p->ents, cmp_ent);
	for (uint32_t i = 0; i < p->n; i++)
		fan[p->ents[i].id.id[0]]++;
	tend_buf_put(&b, "\377tOc\0\0\0\2", 8);
	for (uint32_t i = 0, acc = 0; i < 256; i++) {
		acc += fan[i];
		be32(w, acc);
		tend_buf_put(&b, w, 4);
	}
	for (uint32_t i = 0; i < p->n; i++)
		tend_buf_put(&b, p->ents[i].id.id, 20);
	for (uint32_t i = 0; i < p->n; i++) {
		be32(w, p->ents[i].crc);
		tend_buf_put(&b, w, 4);
	}
	for (uint32_t i = 0; i < p->n; i++) {
		uint64_t off = p->ents[i].off;

		be32(w, off < 0x80000000u ? (uint32_t)off
					  : 0x80000000u | nlarge++);
		tend_buf_put(&b, w, 4);
	}
	for (uint32_t i = 0; i < p->n; i++) {
		uint64_t off = p->ents[i].off;

		if (off < 0x80000000u)
			continue;
		be32(w, (uint32_t)(off >> 32));
		be32(w + 4, (uint32_t)off);
		tend_buf_put(&b, w, 8);
	}
	tend_buf_put(&b, packsum, 20);
	tend_sha1_init(&s);
	tend_sha1_update(&s, b.ptr, b.len);
	tend_sha1_final(&s, sum);
	tend_buf_put(&b, sum, 20);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
	if (fd < 0 || write(fd, b.ptr, b.len) != (ssize_t)b.len ||
	    (sync_files && fsync(fd) != 0))
		rc = sys_fail("write", path);
	if (fd >= 0 && close(fd) != 0 && rc == 0)
		rc = sys_fail("close", path);
	if (rc)
		unlink(path);
	tend_buf_release(&b);
	return rc;
}

void
tend_pack_set_fsync(bool on)
{
	sync_files = on;
}

void
tend_pack_set_list(const char *path)
{
	free(list_path);
	list_path = path ? tend_xstrdup(path) : NULL;
}

/* "REPO<TAB>pack-HEX<TAB>PID" appended to the list: one write, O_APPEND;
 * before the pack is renamed into place, so that a kill between its
 * .pack and its .idx leaves a .pack tend_pack_sweep knows is its own */
static void
list_add(git_repository *repo, const char *hex)
{
	struct tend_buf l = TEND_BUF_INIT;
	int fd;

	if (!list_path)
		return;
	tend_buf_printf(&l, "%s\tpack-%s\t%ld\n", git_repository_path(repo),
	    hex, (long)getpid());
	fd = open(list_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0) {
		(void)!write(fd, l.ptr, l.len);
		close(fd);
	}
	tend_buf_release(&l);
}

int
tend_pack_commit(struct tend_pack *p, char *name)
{
	unsigned char sum[20] = {0};
	struct tend_buf hex = TEND_BUF_INIT, pack = TEND_BUF_INIT, idx = TEND_BUF_INIT,
			tmpidx = TEND_BUF_INIT;
	git_odb *odb = NULL;
	int rc = 0;

	if (p->n != p->want)
		rc = tend_error_set(TEND_ERROR, "git: pack: %u objects missing",
		    p->want - p->n);
	if (rc == 0) {
		tend_sha1_final(&p->sha, sum);
		rc = flush_out(p);
		memcpy(p->out, sum, 20);
		p->nout = 20;
		if (rc == 0)
			rc = flush_out(p);
	}
	if (rc == 0 && sync_files && fsync(p->fd) != 0)
		rc = sys_fail("fsync", p->tmp);
	if (rc == 0 && close(p->fd) != 0)
		rc = sys_fail("close", p->tmp);
	p->fd = -1;
	tend_buf_puthex(&hex, sum, sizeof sum);
	tend_buf_printf(&pack, "%spack-%s.pack", p->dir, hex.ptr);
	tend_buf_printf(&idx, "%spack-%s.idx", p->dir, hex.ptr);
	tend_buf_printf(&tmpidx, "%s.idx", p->tmp);
	if (rc == 0)
		rc = write_idx(p, sum, tmpidx.ptr);
	if (rc == 0)
		list_add(p->repo, hex.ptr);
	/* the .pack, then the .idx that makes it visible */
	if (rc == 0 && (chmod(p->tmp, 0444) != 0 ||
			   rename(p->tmp, pack.ptr) != 0))
		rc = sys_fail("rename", p->tmp);
	if (rc == 0 && rename(tmpidx.ptr, idx.ptr) != 0) {
		rc = sys_fail("rename", tmpidx.ptr);
		unlink(pack.ptr);
	}
	if (rc)
		unlink(tmpidx.ptr);
	else {
		free(p->tmp);
		p->tmp = NULL; /* renamed: nothing to remove */
		if (name)
			snprintf(name, 46, "pack-%s", hex.ptr);
		if (git_repository_odb(&odb, p->repo) || git_odb_refresh(odb)) {
			const git_error *e = git_error_last();

			rc = tend_error_set(TEND_ERROR, "git: refresh: %s",
			    e ? e->message : "?");
		}
		git_odb_free(odb);
	}
	tend_buf_release(&hex);
	tend_buf_release(&pack);
	tend_buf_release(&idx);
	tend_buf_release(&tmpidx);
	tend_pack_abort(p);
	return rc;
}

void
tend_pack_abort(struct tend_pack *p)
{
	if (!p)
		return;
	if (p->fd >= 0)
		close(p->fd);
	if (p->tmp)
		unlink(p->tmp);
	deflateEnd(&p->z);
	free(p->tmp);
	free(p->dir);
	free(p->ents);
	free(p->out);
	free(p);
}

/* ---- merging tend's small packs ---- */

/* An object of a pack to merge: where its bytes are in which pack. */
struct src_ent {
	git_oid id;
	uint32_t pack;
	uint32_t crc;
	uint64_t off, len;
};

static int
read_file(const char *path, struct tend_buf *b)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	tend_buf_reset(b);
	if (fd < 0)
		return -1;
	rc = tend_buf_read_fd(b, fd, SIZE_MAX);
	close(fd);
	return rc;
}

/*
 * A line of the list (its '\n' made a NUL) if it is one of repository
 * `rp`'s: its pack's name ("pack-HEX") in *name, *namelen, and the pid
 * of its writer in *pid (0 if the line has none).
 */
static bool
list_line(const char *l, const char *rp, size_t rplen, const char **name,
    size_t *namelen, long *pid)
{
	if (strncmp(l, rp, rplen) != 0 || l[rplen] != '\t')
		return false;
	*name = l + rplen + 1;
	*namelen = strcspn(*name, "\t");
	*pid = (*name)[*namelen] == '\t' ?
	    strtol(*name + *namelen + 1, NULL, 10) : 0;
	return *namelen > 0 && !memchr(*name, '/', *namelen);
}

static uint32_t
get32(const unsigned char *u)
{
	return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 |
	    (uint32_t)u[2] << 8 | u[3];
}

static int
cmp_src_off(const void *x, const void *y)
{
	const struct src_ent *a = x, *b = y;

	if (a->pack != b->pack)
		return a->pack < b->pack ? -1 : 1;
	return (a->off > b->off) - (a->off < b->off);
}

static int
cmp_src_id(const void *x, const void *y)
{
	const struct src_ent *a = x, *b = y;
	int c = git_oid_cmp(&a->id, &b->id);

	return c ? c : cmp_src_off(x, y);
}

/*
 * The objects a pack's index (v2) lists, appended to *v, each with its
 * bytes' place in the pack of `packsize` bytes (an object ends where the
 * next begins; the last, at the trailer). Small packs only: no 64-bit
 * offsets.
 */
static int
idx_entries(const char *path, uint32_t pack, uint64_t packsize,
    struct src_ent **v, size_t *n, size_t *cap)
{
	struct tend_buf b = TEND_BUF_INIT;
	const unsigned char *u;
	uint32_t count;
	size_t first = *n;
	int rc = 0;

	if (read_file(path, &b) || b.len < 8 + 256 * 4 ||
	    memcmp(b.ptr, "\377tOc\0\0\0\2", 8)) {
		tend_buf_release(&b);
		return -1;
	}
	u = (const unsigned char *)b.ptr + 8;
	count = get32(u + 255 * 4);
	if (b.len < 8 + 256 * 4 + (size_t)count * 28 + 40) {
		tend_buf_release(&b);
		return -1;
	}
	const unsigned char *ids = u + 256 * 4, *crcs = ids + (size_t)count * 20,
			    *offs = crcs + (size_t)count * 4;
	for (uint32_t i = 0; i < count && rc == 0; i++) {
		uint32_t off = get32(offs + (size_t)i * 4);

		if (off & 0x80000000u) {
			rc = -1;
			break;
		}
		if (*n == *cap) {
			*cap = *cap ? *cap * 2 : 1024;
			*v = tend_xrealloc(*v, *cap * sizeof **v);
		}
		struct src_ent *e = &(*v)[(*n)++];
		memcpy(e->id.id, ids + (size_t)i * 20, 20);
		e->pack = pack;
		e->crc = get32(crcs + (size_t)i * 4);
		e->off = off;
	}
	tend_buf_release(&b);
	if (rc) {
		*n = first;
		return rc;
	}
	qsort(*v + first, *n - first, sizeof **v, cmp_src_off);
	for (size_t i = first; i < *n; i++) {
		uint64_t end = i + 1 < *n ? (*v)[i + 1].off : packsize - 20;

		if (end <= (*v)[i].off || (*v)[i].off < 12)
			return *n = first, -1;
		(*v)[i].len = end - (*v)[i].off;
	}
	return 0;
}

/* An object's bytes as another pack holds them (its header and deflated
 * content), copied: not inflated and deflated again. A delta (a pack
 * tend did not write) is refused. */
static int
pack_add_raw(struct tend_pack *p, const struct src_ent *e,
    const unsigned char *bytes)
{
	unsigned type = (bytes[0] >> 4) & 7;

	if (type < GIT_OBJECT_COMMIT || type > GIT_OBJECT_TAG)
		return tend_error_set(TEND_ERROR, "git: pack: a delta in a "
						  "pack to merge");
	if (p->n == p->want)
		return tend_error_set(TEND_ERROR, "git: pack: more objects "
						  "than announced");
	p->ents[p->n].id = e->id;
	p->ents[p->n].off = p->off;
	p->crc = (uint32_t)crc32(0, NULL, 0);
	if (put(p, bytes, e->len))
		return TEND_ERROR;
	if (p->crc != e->crc)
		return tend_error_set(TEND_ERROR, "git: pack: an object of a "
						  "pack to merge is damaged");
	p->ents[p->n++].crc = p->crc;
	return 0;
}

/* The list written again without the lines of repository `rp` that
 * name one of a[] or b[] (a line appended by another process since this
 * one read it may be lost: its pack is then never merged, not lost). */
static void
list_drop(const char *rp, char *const *a, size_t na, char *const *b,
    size_t nb)
{
	struct tend_buf text = TEND_BUF_INIT, out = TEND_BUF_INIT,
			tmp = TEND_BUF_INIT;
	size_t rplen = strlen(rp);
	int fd;

	if (!list_path || read_file(list_path, &text))
		goto out;
	for (char *l = text.ptr, *nl; l && (nl = strchr(l, '\n')); l = nl + 1) {
		const char *name;
		size_t k;
		long pid;
		bool drop = false;

		*nl = '\0';
		if (list_line(l, rp, rplen, &name, &k, &pid))
			for (size_t i = 0; i < na + nb && !drop; i++) {
				const char *x = i < na ? a[i] : b[i - na];

				drop = strlen(x) == k && memcmp(x, name, k) == 0;
			}
		if (!drop) {
			tend_buf_put(&out, l, (size_t)(nl - l));
			tend_buf_putc(&out, '\n');
		}
	}
	tend_buf_printf(&tmp, "%s.tmp", list_path);
	fd = open(tmp.ptr, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd >= 0) {
		bool ok = write(fd, out.ptr ? out.ptr : "", out.len) ==
		    (ssize_t)out.len;

		if (close(fd) != 0 || !ok || rename(tmp.ptr, list_path))
			unlink(tmp.ptr);
	}
out:
	tend_buf_release(&text);
	tend_buf_release(&out);
	tend_buf_release(&tmp);
}

/* A .pack of tend's without its .idx: its writer was killed between the
 * two renames (the list names it, with the writer's pid). Removed once
 * that writer is gone; nobody else's .pack is touched. */
static int
sweep_orphans(git_repository *repo, const char *dir)
{
	struct tend_buf text = TEND_BUF_INIT, path = TEND_BUF_INIT;
	const char *rp = git_repository_path(repo);
	size_t rplen = strlen(rp);
	int n = 0;

	if (list_path && read_file(list_path, &text) == 0)
		for (char *l = text.ptr, *nl; l && (nl = strchr(l, '\n'));
		     l = nl + 1) {
			const char *name;
			size_t k;
			long pid;
			struct stat st;

			*nl = '\0';
			if (!list_line(l, rp, rplen, &name, &k, &pid) ||
			    pid <= 0 || pid == (long)getpid())
				continue;
			tend_buf_reset(&path);
			tend_buf_printf(&path, "%s%.*s.idx", dir, (int)k, name);
			if (lstat(path.ptr, &st) == 0 || errno != ENOENT)
				continue;
			tend_buf_reset(&path);
			tend_buf_printf(&path, "%s%.*s.pack", dir, (int)k, name);
			if (lstat(path.ptr, &st) == 0 && S_ISREG(st.st_mode) &&
			    tend_pid_gone(pid))
				n += unlink(path.ptr) == 0;
		}
	tend_buf_release(&text);
	tend_buf_release(&path);
	return n;
}

/*
 * The packs the list names for this repository that are still there,
 * small (a .pack of at most TEND_PACK_SMALL bytes) and not kept (.keep):
 * when there are TEND_PACK_MERGE_AT of them, their objects go into one
 * new pack, each once, its bytes copied as they are
 * (tend's packs hold no deltas: nothing is inflated, deflated or hashed
 * but the new pack's trailer), then they are deleted (the .idx first:
 * the pack is gone for readers before its bytes) and the list is written
 * again without them. A reader that has one open keeps reading it; one
 * that looks an object up afterwards finds it in the new pack (libgit2
 * and git look for new packs when an object is not found). Returns how
 * many were merged.
 */
int
tend_pack_merge(git_repository *repo)
{
	struct tend_buf text = TEND_BUF_INIT, dir = TEND_BUF_INIT,
			path = TEND_BUF_INIT, keep = TEND_BUF_INIT;
	const char *rp = git_repository_path(repo);
	size_t rplen = strlen(rp), nsmall = 0, nents = 0, cap = 0, ngone = 0;
	char **small = NULL, **gone = NULL;
	uint64_t *size = NULL; /* of each small pack's .pack */
	struct src_ent *ents = NULL;
	struct tend_buf bytes = TEND_BUF_INIT;
	struct tend_pack *p = NULL;
	char newname[46] = "";
	bool locked = false;
	int rc = 0, merged = 0;

	if (!list_path || read_file(list_path, &text)) {
		tend_buf_release(&text);
		return 0;
	}
	tend_buf_printf(&dir, "%sobjects/pack/", rp);
	/* this repository's small packs, each once */
	for (char *l = text.ptr, *nl; l && (nl = strchr(l, '\n')); l = nl + 1) {
		const char *nm;
		size_t k;
		long pid;
		struct stat st;
		bool seen = false;

		*nl = '\0';
		if (!list_line(l, rp, rplen, &nm, &k, &pid))
			continue;
		char *name = tend_xstrdup(nm);

		name[k] = '\0';
		for (size_t i = 0; i < nsmall && !seen; i++)
			seen = strcmp(small[i], name) == 0;
		for (size_t i = 0; i < ngone && !seen; i++)
			seen = strcmp(gone[i], name) == 0;
		if (seen) {
			free(name);
			continue;
		}
		tend_buf_reset(&path);
		tend_buf_printf(&path, "%s%s.pack", dir.ptr, name);
		if (lstat(path.ptr, &st) != 0) {
			if (errno == ENOENT) {
				/* gone (a git gc): its line goes too, in
				 * time */
				gone = tend_xrealloc(gone,
				    (ngone + 1) * sizeof *gone);
				gone[ngone++] = name;
			} else
				free(name);
			continue;
		}
		/* kept (.keep), or without its .idx (a writer between its
		 * renames, or killed there: sweep_orphans): not one to
		 * merge */
		tend_buf_reset(&keep);
		tend_buf_printf(&keep, "%s%s.keep", dir.ptr, name);
		tend_buf_reset(&path);
		tend_buf_printf(&path, "%s%s.idx", dir.ptr, name);
		if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size >
		    TEND_PACK_SMALL || access(keep.ptr, F_OK) == 0 ||
		    access(path.ptr, F_OK) != 0) {
			free(name);
			continue;
		}
		small = tend_xrealloc(small, (nsmall + 1) * sizeof *small);
		size = tend_xrealloc(size, (nsmall + 1) * sizeof *size);
		size[nsmall] = (uint64_t)st.st_size;
		small[nsmall++] = name;
	}
	/* a multi-pack-index (git maintenance writes one) names packs by
	 * position: deleting one it names breaks it until git rewrites it,
	 * so a repository with one is left to git */
	tend_buf_reset(&path);
	tend_buf_printf(&path, "%smulti-pack-index", dir.ptr);
	if (access(path.ptr, F_OK) == 0)
		goto out;
	if (nsmall < TEND_PACK_MERGE_AT) {
		if (ngone >= TEND_PACK_MERGE_AT)
			list_drop(rp, gone, ngone, NULL, 0);
		goto out;
	}
	for (size_t i = 0; i < nsmall && rc == 0; i++) {
		tend_buf_reset(&path);
		tend_buf_printf(&path, "%s%s.idx", dir.ptr, small[i]);
		rc = idx_entries(path.ptr, (uint32_t)i, size[i], &ents, &nents,
		    &cap);
	}
	if (rc) { /* one went meanwhile (a git gc), or is not ours to
		   * copy: another time */
		rc = 0;
		goto out;
	}
	/* each object once, then in the order of their packs' bytes */
	qsort(ents, nents, sizeof *ents, cmp_src_id);
	size_t nuniq = 0;
	for (size_t i = 0; i < nents; i++)
		if (!nuniq || !git_oid_equal(&ents[i].id, &ents[nuniq - 1].id))
			ents[nuniq++] = ents[i];
	qsort(ents, nuniq, sizeof *ents, cmp_src_off);
	rc = tend_pack_open(&p, repo, (uint32_t)nuniq);
	for (size_t i = 0, cur = (size_t)-1; rc == 0 && i < nuniq; i++) {
		if (ents[i].pack != cur) {
			cur = ents[i].pack;
			tend_buf_reset(&path);
			tend_buf_printf(&path, "%s%s.pack", dir.ptr,
			    small[cur]);
			if (read_file(path.ptr, &bytes) ||
			    bytes.len < ents[i].off + ents[i].len) {
				rc = tend_error_set(TEND_ERROR, "git: read %s",
				    path.ptr);
				break;
			}
		}
		if (bytes.len < ents[i].off + ents[i].len)
			rc = tend_error_set(TEND_ERROR, "git: pack: %s is "
			    "shorter than its index", small[cur]);
		else
			rc = pack_add_raw(p, &ents[i],
			    (const unsigned char *)bytes.ptr + ents[i].off);
	}
	if (rc == 0) {
		rc = tend_pack_commit(p, newname); /* lists the new one */
		p = NULL;
	}
	tend_pack_abort(p);
	if (rc)
		goto out;
	/* the same objects make the same pack: one an earlier merge wrote
	 * and was killed before it deleted the old ones is among them, and
	 * is the new one (it stays, and its line too) */
	for (size_t i = 0; i < nsmall; i++)
		if (strcmp(small[i], newname) == 0) {
			free(small[i]);
			small[i] = small[--nsmall];
			break; /* (each name is there once) */
		}
	/* every object is in the new pack: the old ones go, the .idx first
	 * (a kill between leaves a .pack sweep_orphans removes) */
	if (tend_failpoint("git-pack-merge", "merged"))
		goto out; /* (kept: another time) */
	/* git writes a multi-pack-index under this lock: held for the
	 * deletes, none can name a pack being deleted; one written since
	 * the check above, or a git holding the lock, leaves the old packs
	 * to another time (their objects are in the new one too). Noted
	 * in git-locks: a kill leaves a lock the next tend removes. */
	tend_buf_reset(&keep);
	tend_buf_printf(&keep, "%smulti-pack-index.lock", dir.ptr);
	git_oid none;
	memset(&none, 0, sizeof none);
	tend_git_locks_note_file(keep.ptr, &none);
	int lfd = open(keep.ptr, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (lfd < 0)
		goto out;
	close(lfd);
	locked = true;
	tend_buf_reset(&path);
	tend_buf_printf(&path, "%smulti-pack-index", dir.ptr);
	if (access(path.ptr, F_OK) == 0)
		goto out;
	for (size_t i = 0; i < nsmall; i++) {
		static const char *const ext[] = {".idx", ".pack", ".rev",
		    ".bitmap"};

		for (size_t k = 0; k < sizeof ext / sizeof *ext; k++) {
			tend_buf_reset(&path);
			tend_buf_printf(&path, "%s%s%s", dir.ptr, small[i],
			    ext[k]);
			unlink(path.ptr);
			if (k == 0 && tend_failpoint("git-pack-merge",
					  "idx-gone"))
				goto out;
		}
		merged++;
	}
	list_drop(rp, small, nsmall, gone, ngone);
out:
	if (locked)
		unlink(keep.ptr);
	for (size_t i = 0; i < nsmall; i++)
		free(small[i]);
	free(small);
	free(size);
	for (size_t i = 0; i < ngone; i++)
		free(gone[i]);
	free(gone);
	free(ents);
	tend_buf_release(&bytes);
	tend_buf_release(&text);
	tend_buf_release(&dir);
	tend_buf_release(&path);
	tend_buf_release(&keep);
	return rc ? rc : merged;
}
