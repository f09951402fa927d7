/*
 * blobids.c - STATE/git-blobs: blob ids and content fingerprints (see
 * blobids.h).
 */
#include "blobids.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "tendbid1"
#define MAGICLEN 8
#define RECLEN 36
/* 64 MiB: about 1.8 million contents; past it the cache starts over */
#define BLOBIDS_MAX (64u << 20)

_Static_assert(sizeof(struct tend_blobid) == RECLEN, "record size");

static struct {
	char *state; /* what was loaded, and from where */
	struct tend_blobid *v;
	size_t n;
} loaded;

static char *
file_of(const char *state)
{
	size_t len = strlen(state) + sizeof "/git-blobs";
	char *p = malloc(len);

	if (!p)
		abort();
	snprintf(p, len, "%s/git-blobs", state);
	return p;
}

static int
cmp_id(const void *x, const void *y)
{
	return memcmp(x, y, sizeof ((struct tend_blobid *)0)->id);
}

void
tend_blobids_note(const char *state, const struct tend_blobid *v, size_t n)
{
	char *path;
	struct stat st;
	int fd;

	if (!state || n == 0)
		return;
	path = file_of(state);
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		goto out;
	if (fstat(fd, &st) == 0 &&
	    (st.st_size < MAGICLEN || (uint64_t)st.st_size > BLOBIDS_MAX ||
		(st.st_size - MAGICLEN) % RECLEN != 0)) {
		/* new, too big, or torn: start again (a cache) */
		if (ftruncate(fd, 0) != 0 ||
		    write(fd, MAGIC, MAGICLEN) != MAGICLEN)
			goto close;
	}
	/* one write per call: appends of a whole number of records */
	(void)!write(fd, v, n * RECLEN);
close:
	close(fd);
out:
	free(path);
}

static void
load(const char *state)
{
	char *path = file_of(state);
	char head[MAGICLEN];
	struct stat st;
	size_t n = 0, k = 0;
	int fd;

	tend_blobids_reset();
	loaded.state = strdup(state);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	free(path);
	if (fd < 0)
		return;
	if (fstat(fd, &st) != 0 || st.st_size < MAGICLEN ||
	    (uint64_t)st.st_size > BLOBIDS_MAX ||
	    read(fd, head, MAGICLEN) != MAGICLEN ||
	    memcmp(head, MAGIC, MAGICLEN) != 0)
		goto out;
	n = ((size_t)st.st_size - MAGICLEN) / RECLEN;
	if (!(loaded.v = malloc((n + 1) * sizeof *loaded.v)))
		abort();
	for (size_t got = 0; got < n * RECLEN;) {
		ssize_t r = read(fd, (char *)loaded.v + got, n * RECLEN - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			n = got / RECLEN; /* shorter than it was: what we have */
			break;
		}
		got += (size_t)r;
	}
	qsort(loaded.v, n, sizeof *loaded.v, cmp_id);
	/* one record per id: the same content noted twice */
	for (size_t i = 0; i < n; i++)
		if (k == 0 || cmp_id(&loaded.v[k - 1], &loaded.v[i]) != 0)
			loaded.v[k++] = loaded.v[i];
	loaded.n = k;
out:
	close(fd);
}

bool
tend_blobids_match(const char *state, const git_oid *id,
    const struct tend_fp *fp)
{
	struct tend_blobid key;
	const struct tend_blobid *hit;

	if (!state)
		return false;
	if (!loaded.state || strcmp(loaded.state, state) != 0)
		load(state);
	if (!loaded.n)
		return false;
	memcpy(key.id, id->id, sizeof key.id);
	hit = bsearch(&key, loaded.v, loaded.n, sizeof *loaded.v, cmp_id);
	return hit && memcmp(hit->fp.b, fp->b, sizeof fp->b) == 0;
}

void
tend_blobids_reset(void)
{
	free(loaded.state);
	free(loaded.v);
	memset(&loaded, 0, sizeof loaded);
}
