/*
 * tend/plugin.h - declaration functions in C: plugins and programs that
 * embed tend.
 *
 * A plugin is a shared object named in tend.conf:
 *
 *     [app "site"]
 *         source = docs
 *         declare = plugin ./plugins/site.so site_declare
 *         target = dir:public
 *
 * tend dlopen()s it and calls SYMBOL once per changed source file, inside
 * that file's component. The function may declare any number of entries
 * (tend_plugin_entry), mount sub-components, and declare states of
 * connectors it registered: if the object exports SYMBOL_init, tend calls
 * it once after loading, with the engine, before any pass. Rebuilding the
 * .so changes the app's logic fingerprint: every file is declared again.
 *
 * A program can instead link libtend and call tend_main() with apps whose
 * declaration function is a C function (struct tend_code_app): the same
 * command line, with apps defined in code.
 */
#ifndef TEND_PLUGIN_H
#define TEND_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tend/arena.h"
#include "tend/buf.h"
#include "tend/engine.h"
#include "tend/fingerprint.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TEND_PLUGIN_ABI 1

struct tend_source_item {
	unsigned abi;	      /* TEND_PLUGIN_ABI */
	const char *app;
	const char *path;     /* relative to the source root */
	const char *abs_path; /* to open the file */
	struct tend_fp fp;    /* content fingerprint */
	unsigned mode;	      /* permission bits */
	const char *name;     /* the entry name from the app's template */
	/* the app's target: a directory's child provider, or the root file
	 * provider for file: targets */
	struct tend_provider *target;
	struct tend_engine *engine;
};

/* Declare the entries of one source item. Return 0, or an error (the
 * item's previous entries then stay; the pass exits 1). */
typedef int tend_plugin_fn(struct tend_comp *c,
    const struct tend_source_item *item);

/* Optional SYMBOL_init: register connectors and resources. */
typedef int tend_plugin_init_fn(struct tend_engine *eng);

/*
 * Declare an entry named `name` (relative to the target directory; '/'
 * makes nested directories) holding `len` bytes of `data` (copied), with
 * permission bits `mode`. Only in the tend binary or a tend_main program.
 */
int tend_plugin_entry(struct tend_comp *c,
    const struct tend_source_item *item, const char *name, const void *data,
    size_t len, unsigned mode);

/* An app defined in code, for tend_main(). */
struct tend_code_app {
	const char *name;
	const char *source; /* relative to the workspace */
	const char *target; /* "dir:PATH" or "file:PATH" */
	tend_plugin_fn *declare;
	unsigned logic_version; /* bump when the function's output changes */
};

struct tend_main_opts {
	const struct tend_code_app *apps;
	size_t napps;
	/* Register custom connectors and resources: called once for every
	 * engine a command opens (sync, plan, check, drop, ls, status,
	 * watch), after the built-in connectors and before any pass. A
	 * non-zero return (message via tend_error_set) fails the command. */
	tend_plugin_init_fn *init;
};

/* ---- connector plugins: target types of their own ----
 *
 * A shared object named in tend.conf adds target types:
 *
 *     [plugin "sqlite"]
 *         path = plugins/tend-sqlite.so
 *     [app "notes"]
 *         source = notes
 *         target = sqlite:notes.db
 *         table = notes
 *
 * Every command (sync, plan, check, drop, ls, status, watch, top) loads
 * it and looks up the symbol `tend_connector_NAME` (NAME as in the
 * section header, '-' read as '_'): a const struct tend_connector_plugin.
 * tend calls `register_root` once per engine, then for each app whose
 * target is "TYPE:ARG" asks `container` for the container's key and
 * value, and declares that container once per pass from the app's root
 * component (as for dir: and git: targets). Each source file's entries
 * are then declared into the container's child provider, keyed by the
 * entry name (the app's `name` template, default the source's path),
 * valued as an entry (tend_entry_decode): copy, exec and plugin
 * declarations work unchanged. Deleting a source deletes its entries
 * through the connector's child reconcile and sink; `drop` deletes the
 * children one by one (through open_child) and then the container.
 *
 * Sinks find the workspace with tend_context_get(ctx, "workspace") (an
 * absolute path, const char *); "state" is tend's state directory. The
 * working directory is the user's: never rely on it. docs/connectors.md
 * has the whole checklist.
 */

#define TEND_CONNECTOR_ABI 1

enum tend_plugin_key_type {
	TEND_PKEY_STRING = 1,
	TEND_PKEY_BOOL,	   /* true/false/yes/no/on/off/1/0, given as "true"/"false" */
	TEND_PKEY_INTEGER, /* decimal, given as written */
};

/* What changing a key's value does to what the target holds (for plan's
 * wording and the documentation; the container's reconcile decides the
 * invalidation itself). */
enum tend_plugin_key_change {
	TEND_PKEY_CHANGE_UPDATE = 0, /* the container's value changes */
	TEND_PKEY_CHANGE_LOSSY,	     /* every child is written again */
	TEND_PKEY_CHANGE_DESTRUCTIVE /* the container is rebuilt */
};

/* An app key the plugin's targets accept in an [app] section. */
struct tend_plugin_key {
	const char *name; /* lowercase, '-' between words: "table" */
	enum tend_plugin_key_type type;
	const char *def;  /* the default, as text; NULL: required */
	enum tend_plugin_key_change change;
	const char *help; /* one line, for errors and documentation */
};

/* An app's target of a plugin type, as tend.conf configures it. */
struct tend_plugin_target {
	const char *app;
	const char *arg;       /* "notes.db" of "sqlite:notes.db" */
	const char *workspace; /* absolute */
	/* the value of each of the plugin's keys, in the order of its key
	 * list, defaults applied (booleans as "true"/"false") */
	const char *const *values;
	size_t nvalues;
};

struct tend_connector_plugin {
	unsigned abi;	  /* TEND_CONNECTOR_ABI */
	const char *type; /* the target type: "sqlite" for "sqlite:ARG" */
	const char *root; /* the root provider register_root registers */
	const struct tend_plugin_key *keys;
	size_t nkeys;
	/* Register the root provider `root` (and anything else) on the
	 * engine. Called once for every engine tend opens. */
	int (*register_root)(struct tend_engine *eng);
	/* The container of the app's target: its key (a string key, as
	 * tend_key_str(key->ptr)) and its value (spec bytes for the root
	 * handler's reconcile). Return 0, or an error with a message (it
	 * names the app's target in tend.conf's terms). Pure: no I/O. */
	int (*container)(const struct tend_plugin_target *t,
	    struct tend_buf *key, struct tend_buf *value);
};

/* An entry, as tend declares it into a container's child provider. */
struct tend_entry {
	struct tend_fp fp; /* of the content */
	uint64_t size;
	unsigned mode;	 /* permission bits, or S_IFLNK | 0777 for a link */
	const char *src; /* absolute path of the content (a link: its text) */
};

/* Decode a child's desired value into *out (strings in `arena`). Returns
 * false if it is not an entry. */
bool tend_entry_decode(const void *desired, size_t len,
    struct tend_entry *out, struct tend_arena *arena);
/* The value tend declares for `e` (for a connector's tests, or a
 * declaration function declaring entries into a plugin's container). */
void tend_entry_encode(struct tend_buf *out, const struct tend_entry *e);
/* A symlink entry's fp: of its text, never of what it points to. */
struct tend_fp tend_entry_link_fp(const char *text);

/*
 * The tend command line (sync, plan, ls, status, check, drop) with
 * `opts->apps` added to the workspace's tend.conf apps (a tend.conf is
 * still needed to mark the workspace; it may hold no app). Returns the
 * exit code.
 */
int tend_main(int argc, char **argv, const struct tend_main_opts *opts);

#ifdef __cplusplus
}
#endif

#endif
