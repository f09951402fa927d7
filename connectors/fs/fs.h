/*
 * fs.h - the file and directory targets (connectors/fs).
 *
 * Root providers:
 *   "tend/dir"   containers: key = the directory's path relative to the
 *                workspace, value = a struct tend_dir_spec (encoded);
 *                children are entries keyed by their relative name.
 *   "tend/file"  single files: key = path relative to the workspace,
 *                value = an entry spec.
 * The workspace directory is the context resource "workspace" (a
 * NUL-terminated absolute path): keys stay valid if the tree moves.
 *
 * Safety: every path is resolved component by component from the
 * workspace's directory fd with O_NOFOLLOW; a symlink inside a target root
 * is never followed, and names with "..", absolute names, empty segments
 * and NULs are refused before any I/O.
 */
#ifndef TEND_CONNECTORS_FS_H
#define TEND_CONNECTORS_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tend/buf.h"
#include "tend/engine.h"
#include "tend/fingerprint.h"

#define TEND_FS_DIR "tend/dir"
#define TEND_FS_FILE "tend/file"

struct tend_dir_spec {
	unsigned file_mode; /* 0: the source's permission bits */
	bool exclusive;
	bool manifest;
};

/* An entry: copy `src` (absolute path of the content: a source file or a
 * staged exec output) whose content fingerprint is `fp`. With S_IFLNK in
 * `mode` it is a symlink instead: `src` is its text, `fp` is
 * tend_fs_link_fp(text). */
/* A source whose content is not the declared one any more when a sink
 * reads it (it was saved since): the entry fails, the next pass declares
 * the new content. After the source's path. */
#define TEND_FS_CHANGED "changed since tend read it: the next sync " \
	"copies it again"

struct tend_entry_spec {
	struct tend_fp fp;
	uint64_t size;
	unsigned mode; /* permission bits to apply (or S_IFLNK | 0777) */
	const char *src;
};

/* The fingerprint of a symlink whose text is `text` (never of what it
 * points to). */
struct tend_fp tend_fs_link_fp(const char *text);

/* Register "tend/dir" and "tend/file" on the engine. */
int tend_fs_register(struct tend_engine *eng);

void tend_fs_encode_dir(struct tend_buf *out, const struct tend_dir_spec *s);
void tend_fs_encode_entry(struct tend_buf *out, const struct tend_entry_spec *e);

/*
 * Is `name` acceptable as an entry name (relative, no "..", no ".", no
 * empty segment, no NUL, no trailing '/', components <= 255 bytes)?
 * Returns 0, or TEND_EINVALID with a message naming the problem.
 */
int tend_fs_check_name(const char *name, size_t len);

#endif
