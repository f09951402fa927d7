/*
 * blobids.h - which git blob has which content fingerprint.
 *
 * A git target's tracking record holds the XXH3 fingerprint of an entry's
 * content (the record is decided before the blob exists, so it cannot
 * hold the blob's id). To tell whether a tree's entry is what tend wrote,
 * `tend check` would have to read and hash every blob. Both ids are pure
 * functions of the content, so a pair (blob id, fingerprint) seen once is
 * true for ever: the sink notes the pairs of the blobs it writes, check
 * the pairs of the blobs it had to read, in STATE/git-blobs, and check
 * reads no blob whose id is there with the recorded fingerprint.
 *
 * The file is a cache: "tendbid1" then 36-byte records (id, fingerprint),
 * appended; a torn last record is ignored, a file with another header is
 * started again, one past BLOBIDS_MAX bytes is emptied. Losing it costs
 * time, never a wrong answer.
 */
#ifndef TEND_GIT_BLOBIDS_H
#define TEND_GIT_BLOBIDS_H

#include <git2.h>
#include <stdbool.h>
#include <stddef.h>

#include "tend/fingerprint.h"

struct tend_blobid {
	unsigned char id[20]; /* a SHA-1 blob id, raw */
	struct tend_fp fp;
};

/* Append pairs to STATE/git-blobs (state NULL: nothing). */
void tend_blobids_note(const char *state, const struct tend_blobid *v,
    size_t n);
/* Is `id` known, with the fingerprint `fp`? Loads STATE/git-blobs once
 * per process and state directory. */
bool tend_blobids_match(const char *state, const git_oid *id,
    const struct tend_fp *fp);
/* Forget what was loaded (for tests and long-lived processes). */
void tend_blobids_reset(void);

#endif
