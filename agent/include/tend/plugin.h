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

#include <stddef.h>

#include "tend/engine.h"
#include "tend/fingerprint.h"

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
	/* called once with the engine before any pass (custom connectors) */
	tend_plugin_init_fn *init;
};

/*
 * The tend command line (sync, plan, ls, status, check, drop) with
 * `opts->apps` added to the workspace's tend.conf apps (a tend.conf is
 * still needed to mark the workspace; it may hold no app). Returns the
 * exit code.
 */
int tend_main(int argc, char **argv, const struct tend_main_opts *opts);

#endif
