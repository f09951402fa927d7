/*
 * pass.h - what the files that make an app's pass share (workspace.c,
 * sigcache.c, declare.c, strays.c, why.c, pass.c): a pass's state (struct
 * run), its source items and their signatures, and the functions that
 * cross those files. Internal to the program: nothing here is exported
 * from libtend (TEND_HIDDEN); app.h is the interface the rest of the
 * program uses.
 */
#ifndef TEND_PASS_H
#define TEND_PASS_H

#include <sys/stat.h>

#include "app.h"
#include "git.h"
#include "store.h"

#ifndef TEND_HIDDEN
#define TEND_HIDDEN __attribute__((visibility("hidden")))
#endif

/* a SIG row of version 3: [version][signature and stamp, SIG_FIXED
 * bytes in all][the entries it declared, as struct item's outs];
 * version 4: sigcache.c */
#define SIG_FIXED (1 + 32 + 4 + 1 + 16 + 1 + 16 + 16)

struct sig {
	uint64_t size, mtime_ns, ctime_ns, ino;
	uint32_t mode;
	bool trusted; /* not racy when stored */
	struct tend_fp fp;
	/* the item's component last committed with this logic and this
	 * target generation: while both hold and the signature is unchanged,
	 * the component is kept without being looked at. 0: not stamped;
	 * else a stamp_intern() number (the rows of an app nearly all have
	 * one: 4 bytes an item, not 41) */
	uint32_t stamp;
};

struct run;
struct name_chunk;
/* A copy of rel[0..len) and a NUL in the run's packed names: freed with
 * the run (names_free) */
TEND_HIDDEN char *names_dup(struct run *r, const char *rel, size_t len);
TEND_HIDDEN void names_free(struct run *r);

/* The stamp of (logic, target generation), interned: the same number
 * for the same three for the life of the process (never 0). */
TEND_HIDDEN uint32_t stamp_intern(const struct tend_fp *logic,
    uint64_t gen_id, uint64_t gen_schema);
/* Is `stamp` that of these? (0 is nobody's) */
TEND_HIDDEN bool stamp_is(uint32_t stamp, const struct tend_fp *logic,
    uint64_t gen_id, uint64_t gen_schema);
/* Does `stamp` hold this logic? (false for 0) */
TEND_HIDDEN bool stamp_logic_is(uint32_t stamp, const struct tend_fp *logic);

struct item {
	char *rel;
	uint32_t len;
	int read_errno; /* why it could not be read (sig.mode == 0) */
	struct sig sig;
	/* the entries it declared, [u16 len][name][fp16]..., from the SIG
	 * row, or collected when it ran: the manifest lists them. Most
	 * items declare one entry named like their source: outs_self, that
	 * entry is (rel, outs_fp) and outs is empty (a million items kept
	 * 80 MB of copies of their own paths); item_outs() spells it out. */
	struct tend_fp outs_fp;
	struct tend_fp old_fp; /* the content it had then */
	bool outs_self;
	bool hashed; /* read now: the SIG row needs writing */
	bool ran;    /* its declaration ran and succeeded: new outputs */
	bool unchanged; /* signature trusted and equal to the stored one */
	bool kept;      /* kept by the fast path, not mounted */
	bool restamp;   /* stamp written after the pass */
	bool sig_done;  /* its SIG row settled with its component */
	bool had;	/* a signature was stored: seen in an earlier pass */
	/* exec run ahead of its component, in parallel with others */
	struct item_job *job;
	struct tend_buf outs;
	/* (a million of these are held for a pass: their order keeps them
	 * at 152 bytes) */
};

struct item_job {
	int rc;
	char *msg, *out, *dir;
};

struct run {
	struct tend_ws *ws;
	struct tend_app_config *app;
	const struct tend_sync_opts *o;
	struct tend_app_result *res;
	char *source;	     /* absolute */
	struct item *items;
	/* the items' paths, packed one after the other (a path a million
	 * times over is not a million mallocs) */
	struct name_chunk *names;
	size_t nitems, citems;
	char **vanished;     /* seen last time, gone now */
	size_t nvanished;
	bool hold;	     /* the brake holds their deletes */
	/* a sync --full of the app was interrupted: its components may hold
	 * unsettled states under stamped rows, so no source is kept
	 * without a look this pass */
	bool unsure;
	bool rows_done; /* the pass's SIG rows are written (pass_done) */
	size_t failed_decls; /* components that failed (not their actions) */
	size_t sig_from, sig_to; /* the items sig_body writes the rows of */
	struct tend_fp logic;
	uint64_t scan_ns;
	char *stage;	     /* staging directory for exec outputs */
	unsigned stage_seq;
	struct tend_provider *target;
	struct plugin *plugin;
	struct item *cur;    /* the item whose declaration runs now */
	char *target_name;   /* the target provider's, for messages */
	char **conflicted;   /* items that conflicted in this pass */
	size_t nconflicted;
};

/* a walk of the source beside its SIG rows (sigcache.c's on_file) */
struct scan {
	struct run *r;
	struct tend_txn *txn;
	struct tend_buf key;
	/* the SIG rows are merged with the walk (both in path order)
	 * instead of looked up one by one */
	struct tend_iter it;
	bool started, cur_valid;
	struct tend_bytes ck, cv;
};

/* the pass that runs now, for tend_plugin_entry() and the component
 * hooks: passes run on one thread, one at a time */
extern TEND_HIDDEN struct run *current_run;
/* the engine's component hooks: names and liveness of an app's items */
extern TEND_HIDDEN const struct tend_component_hooks comp_hooks;

/* workspace.c */
TEND_HIDDEN char *path_join(const char *a, const char *b);
TEND_HIDDEN int hash_fd_fp(int fd, struct tend_fp *out);
TEND_HIDDEN int hash_fd_sized(int fd, off_t size, struct tend_fp *out);
TEND_HIDDEN struct plugin *plugin_load(struct tend_ws *ws, const char *spec);

/* sigcache.c: the SIG rows */
TEND_HIDDEN uint64_t ts_ns(const struct timespec *t);
TEND_HIDDEN void sig_key(struct tend_buf *k, const char *app, const char *rel,
    size_t len);
TEND_HIDDEN bool sig_decode(const struct tend_bytes *v, struct sig *s);
/* The entries SIG row v lists, appended to `out` as an outs list; `rel`
 * (`len` bytes) is the row's source path. False if v is no SIG row. */
TEND_HIDDEN bool sig_outs(const struct tend_bytes *v, const char *rel,
    size_t len, struct tend_buf *out);
TEND_HIDDEN int hash_link(int dirfd, const char *leaf, struct tend_fp *out,
    char *text);
TEND_HIDDEN int hash_file(int dirfd, const char *leaf, off_t size,
    struct tend_fp *out);
TEND_HIDDEN void add_item(struct run *r, const char *rel, size_t len,
    const struct stat *st, const struct tend_bytes *row, int dirfd, const char *leaf);
TEND_HIDDEN int on_file(const char *rel, size_t len, int dirfd,
    const char *leaf, const struct stat *st, void *arg);
TEND_HIDDEN int cmp_rel(const void *a, const void *b);
TEND_HIDDEN bool have_item(struct run *r, const char *rel, size_t len);
TEND_HIDDEN int count_previous(struct run *r, struct tend_txn *txn,
    size_t *nprev);
TEND_HIDDEN bool sig_due(const struct item *it);
TEND_HIDDEN int sig_body(struct tend_txn *txn, void *arg);
TEND_HIDDEN int settle_sig(struct tend_txn *txn, const char *component,
    void *arg);

/* declare.c: what items declare, the root component */
TEND_HIDDEN void prerun_exec_items(struct run *r, uint64_t gid, uint64_t gsc);
TEND_HIDDEN struct tend_fp item_input(const struct item *it);
TEND_HIDDEN bool outs_next(const void *outs, size_t n, size_t *pos,
    const char **name, uint16_t *len);
TEND_HIDDEN int held_outs(struct run *r, struct tend_buf *out);
/* An item's outs: `it->outs`, or (outs_self) its one entry written
 * into `tmp`. */
TEND_HIDDEN const struct tend_buf *item_outs(const struct item *it,
    struct tend_buf *tmp);
/* Add an entry to what the item declares; set them from a SIG row's. */
TEND_HIDDEN void item_outs_add(struct item *it, const char *name,
    uint16_t len, const struct tend_fp *fp);
TEND_HIDDEN void item_outs_set(struct item *it, const void *outs, size_t n);
TEND_HIDDEN void item_free(struct item *it);
TEND_HIDDEN size_t app_batch(const struct tend_app_config *app);
TEND_HIDDEN int mount_item(struct tend_comp *c, struct run *r,
    struct item *it);
TEND_HIDDEN void git_spec(const struct tend_app_config *app,
    struct tend_git_spec *spec, struct tend_buf *msg);
TEND_HIDDEN void held_sources(struct tend_app_result *res,
    const struct run *r);
TEND_HIDDEN int root_body(struct tend_comp *c, void *arg);
/* an incremental pass's root: arg is a struct partial */
struct partial {
	struct run *r;
};
TEND_HIDDEN int partial_body(struct tend_comp *c, void *arg);

/* why.c: provenance and conflicts */
TEND_HIDDEN struct item *find_item(struct run *r, const char *component);
/* The display path, after "/APP", of the component that mounts app's
 * target container ("/@tend/mount_target/(...)"), and the name of the
 * provider its entries are declared in; false for a target without a
 * container (file:) */
TEND_HIDDEN bool app_target_names(struct tend_ws *ws,
    const struct tend_app_config *app, struct tend_buf *component,
    struct tend_buf *provider);
TEND_HIDDEN void on_conflict(const struct tend_event *ev, void *arg);
TEND_HIDDEN struct tend_conflicts *ws_conflicts(struct tend_ws *ws,
    const char *app);
TEND_HIDDEN void keep_conflicts(struct run *r);

/* pass.c: passes */
TEND_HIDDEN void rm_tree(const char *path);
TEND_HIDDEN int pass_done(struct run *r, int rc);
TEND_HIDDEN int cmp_str(const void *a, const void *b);

#endif
