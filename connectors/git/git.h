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
/* Start libgit2 on a thread of its own, ahead of its first use (a pass
 * of a git app calls it before its walk). */
void tend_git_warm(void);
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
	/* (optional) is the entry at `rel` still tend's (its delete
	 * pending)? A tree that holds one is walked, not a stray. */
	bool (*tracked)(const char *rel, void *arg);
	void (*stray)(const char *rel, bool dir, void *arg);
	void *arg;
};
int tend_git_sweep(const struct tend_git_sweep *s, size_t *count);

/*
 * push = REMOTE (push.c): the ref pushed to a remote, never forced. A
 * push the remote refuses because it moved merges tend's changes onto
 * the remote's tip (first parent: the remote's; second: the local tip)
 * and tries again (at most 5 times, with backoff and jitter). What the
 * remote is known to have is kept in a tracking ref
 * (tend_git_push_tracking), moved only after a push or fetch succeeded.
 */
struct tend_git_push {
	const char *repo;	/* its path */
	const char *state;	/* tend's state directory (tags), or NULL */
	const char *locks;	/* the list of ref locks taken (NULL: the
				 * state directory's) */
	const char *app;	/* names a URL remote's tracking ref */
	const char *ref;	/* the local ref */
	const char *remote;	/* a remote of the repository, or a URL */
	const char *remote_ref; /* the ref on the remote */
	const char *prefix;	/* tend's subtree ("" or NULL: the root) */
	bool exclusive;		/* a merge takes the prefix's subtree whole */
	const char *author;	/* the merge's author ("Name <email>"), or NULL */
};

/* Is `remote` a URL (or scp-like path) rather than a remote's name? */
bool tend_git_push_is_url(const char *remote);
/* The tracking ref of `remote`'s `remote_ref`: refs/remotes/NAME/BRANCH,
 * or for a URL refs/tend/remotes/APP/HASH/BRANCH (HASH: of the URL). */
void tend_git_push_tracking(struct tend_buf *out, const char *remote,
    const char *remote_ref, const char *app);

/*
 * Push the ref if the remote lacks some of its commits. 0: pushed, or
 * nothing to push; *merges: how many merges onto the remote's tip it
 * made. TEND_ERETRY: the remote could not be reached (the local commit
 * stands); TEND_ECONFLICT: the remote refused it (a hook: the message
 * has what the remote said) or kept moving; else TEND_ERROR. Blocks for
 * as long as the transport does.
 */
int tend_git_push_run(const struct tend_git_push *p, unsigned *merges);

struct tend_git_ahead {
	bool has_local; /* the local ref exists */
	bool has_seen;	/* the tracking ref exists (pushed or fetched once) */
	size_t ahead;	/* local commits the remote is not known to have */
	size_t behind;	/* remote commits (as last seen) the local ref lacks */
};
/* Counted in the local repository only: no network. */
int tend_git_push_ahead(const struct tend_git_push *p,
    struct tend_git_ahead *out);

/*
 * Which of an app's tags (`tags`, n names) tend set and left off the
 * commit it keeps them on (a pass cut short between its commit and its
 * tags, a tag whose lock someone held) in the repository at `repo`: the
 * next sync moves them there. Each goes to fn with where it is (12 hex
 * digits, or NULL: missing) and that commit; STATE/git-tags (under `state`) says which tags
 * are tend's. For plan and status, which do not read the targets
 * otherwise. Returns how many, or -1 if the repository cannot be read.
 */
typedef void tend_git_tag_fn(const char *tag, const char *at,
    const char *tip, const char *lock, void *arg);
int tend_git_tags_behind(const char *repo, const char *state,
    const char *ref, char *const *tags, size_t n, tend_git_tag_fn *fn,
    void *arg);
/*
 * The tags of `tags` that exist and are not tend's (someone made or
 * moved them, or an annotated tag): the next commit on `ref` leaves them
 * and its pass fails them. fn gets each with `at` (its commit, 12 hex
 * digits) and NULL tip and lock. Returns how many, or -1.
 */
/*
 * Does `ref` no longer hold the commit tend last put on it (reset,
 * rewritten or deleted by hand)? 1 and that commit (12 hex digits) in
 * `was`; 0 if it does, or tend never wrote it (or it cannot be read).
 */
int tend_git_ref_rewritten(const char *repo, const char *state,
    const char *ref, char was[13]);

/* Where `ref` of `repo` is checked out (a working tree's path, to
 * free), or NULL */
char *tend_git_checked_out(const char *repo, const char *ref);

/* Would the delete of tag `tag`'s state (kept on `ref`) leave the tag
 * where it is: tend adopted it (someone had it on the tip before), or
 * someone moved it? For plan, which says so as sync will ("forgotten"). */
bool tend_git_tag_stays(const char *repo, const char *state, const char *ref,
    const char *tag);
int tend_git_tags_in_way(const char *repo, const char *state,
    const char *ref, char *const *tags, size_t n, tend_git_tag_fn *fn,
    void *arg);

#endif
