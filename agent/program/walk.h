/*
 * walk.h - the source walk: sorted, filtered, never following symlinks.
 *
 * Files are visited in the byte order of their relative paths (a
 * directory sorts as "name/", as in git), so a walk can be merged with a
 * sorted table. Patterns follow .gitignore rules: without a '/' a pattern
 * matches a name at any depth, with one it is anchored at the root, `**`
 * spans directories, a trailing '/' matches directories only, '!'
 * re-includes (in .gitignore files).
 */
#ifndef TEND_WALK_H
#define TEND_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

struct tend_buf;

struct tend_walk_opts {
	char *const *include; /* NULL/0: every file */
	size_t ninclude;
	char *const *exclude;
	size_t nexclude;
	bool gitignore;
	/* relative paths (files or directories) never visited: a target
	 * inside the source, the state directory */
	char *const *skip;
	size_t nskip;
	/* called with each directory's path ("" for the root) just before
	 * it is read: the agent adds its inotify watch there, so nothing
	 * created in it after the read is missed */
	void (*on_dir)(void *arg, const char *rel);
	void *dir_arg;
	/* symlinks: visited as files (their lstat; never followed), or
	 * skipped and counted in *links_skipped (if set) */
	bool links;
	unsigned *links_skipped;
};

/* Called per regular file (and symlink, with o->links); return non-zero
 * to stop the walk with it. */
typedef int tend_walk_fn(const char *rel, size_t len, int dirfd,
    const char *leaf, const struct stat *st, void *arg);

/*
 * Walk `root`. Unreadable directories and entries that are neither
 * regular files nor directories (symlinks, sockets) are skipped and
 * counted in *nskipped. Returns 0, the callback's value, or TEND_ERROR
 * if the root cannot be opened.
 */
int tend_walk(const char *root, const struct tend_walk_opts *o,
    tend_walk_fn *fn, void *arg, unsigned *nskipped);

/*
 * Would a walk of `root` with `o` visit the file `rel`? (include,
 * exclude, skip, .gitignore files along its directories, no symlink or
 * non-directory on the way.)
 */
bool tend_walk_includes(const char *root, const struct tend_walk_opts *o,
    const char *rel);

/*
 * Walk only the directory `sub` (relative to `root`) as tend_walk would
 * reach it: the .gitignore files and filters of the directories above it
 * apply, and nothing is visited if a walk of root would not enter it.
 * The callback's paths are relative to `root`.
 */
int tend_walk_sub(const char *root, const struct tend_walk_opts *o,
    const char *sub, tend_walk_fn *fn, void *arg, unsigned *nskipped);

/* Does pattern `pat` match the relative path `rel` (is_dir: a
 * directory)? Exposed for tests. */
bool tend_glob_match(const char *pat, const char *rel, bool is_dir);

#endif
