/*
 * tend/failpoint.h - fault injection, compiled in, armed by the environment.
 *
 * TEND_FAILPOINTS is a comma-separated list of
 *
 *	POINT[~TEXT][@N][=ACTION]
 *
 * POINT names an operation: in the dir target "write", "rename", "fsync",
 * "mkdir", "unlink", "open-dir" (subject: the entry name, or the directory
 * component); "read" (a source file); in the tracking store
 * "lmdb-commit" (subject "write" or "settle"), "map-full", "read-txn"; in
 * the git target "git-odb-write" (the entry), "git-ref-update" (the
 * ref) and "git-pack-merge" ("merged": the merged pack in place, none of
 * the old ones deleted; "idx-gone": the first old one's .idx deleted,
 * its .pack not); in a pass "source-missing" (the app's source, found missing:
 * "stop" parks the pass there); or any name a connector passes. ~TEXT fires only when the operation's subject (a
 * path, a ref) contains TEXT; @N fires only on the N-th matching call
 * (1-based; without it, every matching call fails). ACTION is an errno name
 * (EIO, the default, ENOSPC, EACCES, EROFS, EPERM, EDQUOT, ENOMEM), "stop"
 * (the process stops itself with SIGSTOP, then carries on: a test can race
 * the operation deterministically) or "kill" (SIGKILL at that point).
 *
 * With TEND_FAILPOINTS unset a call costs one load and a branch. Custom
 * connectors may place their own points to test their failure paths.
 */
#ifndef TEND_FAILPOINT_H
#define TEND_FAILPOINT_H

#ifdef __cplusplus
extern "C" {
#endif

/*
 * 0 when the point does not fire; otherwise the injected errno value (also
 * stored in errno), which the caller reports as if the operation had
 * failed with it. `subject` may be NULL.
 */
int tend_failpoint(const char *point, const char *subject);

#ifdef __cplusplus
}
#endif

#endif
