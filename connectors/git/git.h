/*
 * git.h - the git-tree target (connectors/git): declared entries committed
 * to a ref with libgit2, without a working tree or an index.
 *
 * Root provider "tend/git": containers keyed by (repository as configured,
 * ref, prefix); their children are blobs keyed by their path under the
 * prefix (entry specs, as for directories); attachment "tag": lightweight
 * tags kept on the ref's tip. Every batch of entry actions for one ref
 * becomes one commit, built by updating only the changed paths of the
 * tip's tree; the ref moves with compare-and-swap, rebuilt onto a new tip
 * if someone else moved it.
 */
#ifndef TEND_CONNECTORS_GIT_H
#define TEND_CONNECTORS_GIT_H

#include <stdbool.h>

#include "tend/buf.h"
#include "tend/engine.h"

#define TEND_GIT "tend/git"

enum tend_git_exec { TEND_GIT_KEEP = 0, TEND_GIT_NEVER, TEND_GIT_ALWAYS };

struct tend_git_spec {
	enum tend_git_exec executable;
	bool exclusive;
	bool allow_checked_out;
	const char *message; /* {count} is expanded per commit */
	const char *author;  /* "Name <email>", or "" */
	/* tags moved to every new commit (declared as "tag" attachments,
	 * which create and delete them) */
	const char *const *tags;
	size_t ntags;
};

int tend_git_register(struct tend_engine *eng);
void tend_git_encode_spec(struct tend_buf *out, const struct tend_git_spec *s);

/*
 * An exclusive target's strays: the entries of `ref`:`prefix` (at its
 * tip) that no declared entry is or lies under. `declared` answers for a
 * path relative to the prefix (a tree: is anything declared under it?);
 * `stray` hears of each, in tree order. With `remove`, one commit on
 * the ref deletes them all (`message`, the spec's author; the spec's
 * tags follow it, as after a sync). A repository or ref that does not
 * exist has none. *count: how many.
 */
struct tend_git_sweep {
	const char *repo;  /* its path */
	const char *state; /* tend's state directory (tags, locks), or NULL */
	const char *ref, *prefix;
	const struct tend_git_spec *spec;
	const char *message;
	bool remove;
	bool (*declared)(const char *rel, bool dir, void *arg);
	void (*stray)(const char *rel, bool dir, void *arg);
	void *arg;
};
int tend_git_sweep(const struct tend_git_sweep *s, size_t *count);

#endif
