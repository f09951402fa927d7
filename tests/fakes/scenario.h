/*
 * scenario.h - a fixture and a tiny declaration language for engine tests.
 *
 * A script is whitespace-separated statements run as a component body:
 *   k=v               declare dict state k = v (root provider "dict")
 *   #D=MODE:SPEC      mount_target container D of "dicts" (resolved)
 *   %D=MODE:SPEC      declare container D here (tend_declare_container)
 *   D/k=v             declare child k in container D
 *   D@items/k=v       declare attachment state (type items) of D
 *   C(name) { ... }   mount a child component running the inner script
 *   U(name) { ... }   use_mount
 *   M(name,fp) { ... } memoized mount; input fingerprint of "fp"
 *   M(name,fp,lg) { ... } the same with logic fingerprint "lg" (default
 *                     "logic-v1")
 *   !                 the body fails here
 */
#ifndef TEND_TEST_SCENARIO_H
#define TEND_TEST_SCENARIO_H

#include "dict_target.h"
#include "tend/engine.h"

struct fixture {
	char dir[256];
	char state[300];
	struct tend_engine *eng;
	struct dict_world w;
	struct tend_stats stats;
	int rc;
	char *dump;
	char *world;
	/* containers mounted by the running script, by name */
	char *cnames[32];
	struct tend_provider *cprov[32];
	size_t ncont;
	/* events seen */
	unsigned nplanned_ev, napplied_ev, nfailed_ev, ncomp_err_ev;
	char comp_error[512]; /* the last component error's message */
};

struct fixture *fixture_new(void);
void fixture_free(struct fixture *f);
/* Close and reopen the engine: a new process with the same store. */
void fixture_restart(struct fixture *f);
/* Run one pass of app "app" with `script` as the root body. */
int fx_run(struct fixture *f, const char *script);
int fx_run_opts(struct fixture *f, const char *script, bool full,
    bool preview);
int fx_drop(struct fixture *f);
/* fx_run for a fixture whose engine and world the caller set up. */
int fx_run_script(struct fixture *f, const char *script);
/* The store (items + owners + comps), one row a line; owned by f. */
const char *fx_dump(struct fixture *f);
/* The world "k=v ..." sorted; owned by f. */
const char *fx_world(struct fixture *f);
/* Does the dump contain this line (exactly)? */
bool fx_has(struct fixture *f, const char *line);
/* Count dump lines starting with prefix. */
unsigned fx_count(struct fixture *f, const char *prefix);

#endif
