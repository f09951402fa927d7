/*
 * pack.h - writing many new objects to a git repository as one pack.
 *
 * A first commit of 100k files as loose objects is 100k file creations
 * and renames; as one pack it is one stream: each object deflated once,
 * its index written from the ids the caller already has (libgit2's
 * indexer would inflate and hash everything again). No delta search
 * (libgit2's packbuilder always searches a window of 10, which costs
 * more than it saves for a one-off publish); `git gc` can compress
 * later.
 */
#ifndef TEND_GIT_PACK_H
#define TEND_GIT_PACK_H

#include <git2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tend_pack;

/* Start a pack of exactly `nobjects` objects into the repository. */
int tend_pack_open(struct tend_pack **out, git_repository *repo,
    uint32_t nobjects);
/* Add one object: its raw content and its id (the caller computed it;
 * each id once). */
int tend_pack_add(struct tend_pack *p, git_object_t type, const git_oid *id,
    const void *data, size_t len);
/* Finish: trailer, index, the pack becomes visible to the repository
 * (its name, "pack-HEX", in `name` if not NULL: 46 bytes). Frees p
 * whatever happens. */
int tend_pack_commit(struct tend_pack *p, char *name);
void tend_pack_abort(struct tend_pack *p);
/*
 * The packs tend wrote are listed in a file ("REPO<TAB>pack-HEX<TAB>PID"
 * lines, REPO git_repository_path(), PID the writer's, each written
 * before its pack is renamed into place) once set: tend_pack_merge merges those of
 * a repository that are still small into one when there are
 * TEND_PACK_MERGE_AT of them (a pass's few new objects go into a pack of
 * their own: see git.c), and deletes them; nobody else's pack is read
 * for it or removed. Without a list nothing is merged.
 */
#define TEND_PACK_MERGE_AT 16
#define TEND_PACK_SMALL ((uint64_t)4 << 20)
void tend_pack_set_list(const char *path);
int tend_pack_merge(git_repository *repo);
/* Remove the temporary files of packs whose writer was killed; returns
 * how many. */
int tend_pack_sweep(git_repository *repo);
/* Is process `pid` gone (or a zombie, or dying of a SIGKILL: waited for
 * up to 2 s)? Whose leftovers may then be removed. */
bool tend_pid_gone(long pid);
/* fsync each pack and index before it is renamed into place */
void tend_pack_set_fsync(bool on);

/* SHA-1, for the pack's trailer (exposed for its test). */
struct tend_sha1 {
	uint32_t h[5];
	uint64_t len;
	unsigned char buf[64];
	size_t nbuf;
};
void tend_sha1_init(struct tend_sha1 *s);
void tend_sha1_update(struct tend_sha1 *s, const void *p, size_t n);
void tend_sha1_final(struct tend_sha1 *s, unsigned char out[20]);

#endif
