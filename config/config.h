/*
 * config.h - tend.conf: parsed from a buffer into plain data.
 *
 * git-config syntax: [section] and [section "subsection"] headers,
 * `key = value` lines, `#` and `;` comments (also after a value), quoted
 * values with \" \\ \n \t escapes, a trailing backslash continues a line,
 * a key may repeat (multi-valued keys: include, exclude, tag).
 *
 * This module uses only libc and knows nothing about the engine. Every
 * diagnostic carries file:line, the key, and for an unknown key the
 * closest known one; all diagnostics are collected, not just the first.
 */
#ifndef TEND_CONFIG_H
#define TEND_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum tend_target_kind {
	TEND_TARGET_DIR = 1,
	TEND_TARGET_FILE,
	TEND_TARGET_GIT,
	TEND_TARGET_PLUGIN, /* TYPE:ARG of a [plugin "TYPE"] section */
};

enum tend_declare_kind {
	TEND_DECLARE_COPY = 1,
	TEND_DECLARE_EXEC,
	TEND_DECLARE_PLUGIN,
	TEND_DECLARE_CODE, /* a C function given to tend_main() */
};

struct tend_strv {
	char **v;
	size_t n;
	int *line; /* where each was set (its tend.conf line) */
};

/* A key of an [app] that none of tend's own keys is: a plugin target's
 * (validated by the host once the plugin is loaded), or an error. */
struct tend_kv {
	char *key, *value;
	int line;
};

struct tend_app_config {
	char *name;
	int line; /* of the [app "name"] header */
	/* of the keys that conflicts between apps are about (0: not set,
	 * the default holds) */
	int source_line, target_line, ref_line, prefix_line;
	/* of keys whose values are checked after parsing (their errors
	 * name their line) */
	int executable_line, symlinks_line, name_line, push_line, push_ref_line;
	/* the first key only a git: target takes (its line; NULL: none) */
	const char *git_key;
	int git_key_line;
	char *source;
	struct tend_strv include, exclude;
	bool gitignore;
	enum tend_declare_kind declare;
	char *declare_arg;  /* exec: the command; plugin: "FILE.so SYMBOL" */
	char *declare_text; /* the whole declare value, for fingerprints */
	char *name_tmpl;    /* entry name template; NULL: {path} */
	enum tend_target_kind target;
	char *target_path;
	unsigned file_mode; /* 0: keep the source's permission bits */
	bool exclusive;
	bool manifest;	     /* write a manifest attachment */
	char *manifest_name; /* default ".tend-manifest" */
	uint64_t timeout_ms;
	long max_delete; /* -1: default rule */
	unsigned jobs;	 /* 0: number of CPUs */
	/* git */
	char *ref, *prefix, *message, *author, *executable;
	char *symlinks; /* skip | copy | copy-any */
	struct tend_strv tags;
	bool allow_checked_out;
	/* push = REMOTE: a remote of the repository or a URL; push-ref: the
	 * ref on the remote (NULL: the app's ref) */
	char *push, *push_ref;
	/* plugin targets: the type (a [plugin] name), the app's other keys
	 * as written, and (filled by the host from the plugin's key list)
	 * each key's value in the plugin's order, defaults applied */
	char *target_type;
	struct tend_kv *pkeys;
	size_t npkeys;
	struct tend_strv plugin_values;
	/* TEND_DECLARE_CODE: set by the embedding program, not parsed */
	void *code_fn;
	unsigned code_version;
};

/* [plugin "NAME"]: a shared object adding the target type NAME */
struct tend_plugin_config {
	char *name;
	char *path; /* relative to the workspace, or absolute */
	int line, path_line;
};

struct tend_config {
	char *state;	/* relative to the workspace; default ".tend" */
	uint64_t debounce_ms;
	uint64_t max_delay_ms;
	bool fsync; /* fsync written entries and their directories */
	struct tend_app_config *apps;
	size_t napps;
	struct tend_plugin_config *plugins;
	size_t nplugins;
	char *file; /* the name diagnostics use for tend.conf */
};

struct tend_diag {
	char *file;
	int line;
	char *key; /* "app.site.target"; may be NULL */
	char *msg;
};

struct tend_diags {
	struct tend_diag *v;
	size_t n;
};

/*
 * Parse `len` bytes of `buf` (named `origin` in messages) into *out.
 * Returns 0, or -1 with every problem in *diags (the config is then
 * freed and zeroed). Out of memory aborts.
 *
 * Apps whose targets overlap, or that would read what they or another
 * app write (a feedback loop), are errors. Paths are compared lexically;
 * tend_config_parse_in() also resolves symbolic links of the parts that
 * exist under the workspace directory `root`.
 */
int tend_config_parse(const char *buf, size_t len, const char *origin,
    struct tend_config *out, struct tend_diags *diags);
int tend_config_parse_in(const char *buf, size_t len, const char *origin,
    const char *root, struct tend_config *out, struct tend_diags *diags);
void tend_config_finish(struct tend_config *cfg);
void tend_diags_finish(struct tend_diags *d);
/* "file:line: key: message" lines, one per diagnostic. */
char *tend_diags_format(const struct tend_diags *d);

/* Duration "20ms" "1s" "2m" "500" (ms); returns -1 if malformed. */
int64_t tend_config_parse_duration(const char *s);

/* The schema as text, for --print-defaults and docs. */
char *tend_config_describe(void);
/* A boolean as tend.conf spells it (true/yes/on/1, false/no/off/0, any
 * case): 0, or -1 if it is none. */
int tend_config_parse_bool(const char *s, bool *out);
/* Edit distance between two keys, ignoring case (99 past 62 bytes): for
 * "did you mean". */
size_t tend_config_distance(const char *a, const char *b);

#endif
