/*
 * writes.h - what git.c lends push.c: the bracket around a group of ref
 * writes (a killed tend's leftover ref locks are recovered first; each
 * lock taken is noted in the state directory) and the note itself. Both
 * files include <git2.h>; this header names its types by tag only.
 */
#ifndef TEND_CONNECTORS_GIT_WRITES_H
#define TEND_CONNECTORS_GIT_WRITES_H

#include "tend/buf.h"

struct git_repository;
struct git_oid;
struct git_signature;

/* `state`: tend's state directory, or NULL (then neither is done);
 * `locks`: the list of ref locks (NULL: STATE/git-locks); *tf stays
 * alive until tend_git_writes_end. */
void tend_git_writes_begin(const char *state, const char *locks,
    struct tend_buf *tf);
/* tend's tags that follow `ref` and sat on `from` move to `to` (inside
 * a writes bracket). */
void tend_git_tags_follow(struct git_repository *repo, const char *ref,
    const struct git_oid *from, const struct git_oid *to);
void tend_git_writes_end(struct tend_buf *tf);
/* Right before `ref` (a full name) is written with `oid`. */
void tend_git_locks_note(struct git_repository *repo, const char *ref,
    const struct git_oid *oid);

/* Right before a ref of another repository on this machine (a file://
 * remote, which libgit2 writes in this process) is written with `oid`:
 * `lock` is that ref's lock file. */
void tend_git_locks_note_file(const char *lock, const struct git_oid *oid);

/* A commit's signature: "Name <email>" as configured, else the
 * repository's user, else tend <tend@localhost>. */
int tend_git_signature(struct git_repository *repo, const char *configured,
    struct git_signature **out);

#endif
