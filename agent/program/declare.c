/*
 * declare.c - the declaration functions: what one source item declares
 * (copy, a symlink, exec and its staged outputs, a declaration plugin,
 * an aggregate over all sources, the manifest), and the root component
 * of an app's pass, which mounts the target container and one memoized
 * component per item.
 */
#define _GNU_SOURCE
#include "pass.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "exec.h"
#include "fs.h"
#include "inspect.h"
#include "tend/status.h"
#include "walk.h"

/* For tend_plugin_entry(): passes run on one thread, one at a time. */
struct run *current_run;

/* ---- names ---- */

/* Expand {path} {dir} {name} {stem} {ext} for a source path. */
static void
expand_name(struct tend_buf *out, const char *tmpl, const char *rel)
{
	const char *slash = strrchr(rel, '/');
	const char *name = slash ? slash + 1 : rel;
	const char *dot = strrchr(name, '.');
	size_t dirlen = slash ? (size_t)(slash - rel) : 0;
	size_t stemlen = dot && dot != name ? (size_t)(dot - name)
					    : strlen(name);
	const char *ext = dot && dot != name ? dot + 1 : "";

	tend_buf_reset(out);
	if (!tmpl) {
		tend_buf_puts(out, rel);
		return;
	}
	/* "{dir}/x" for a top-level file is "x", not "/x" */
	if (dirlen == 0 && strncmp(tmpl, "{dir}/", 6) == 0)
		tmpl += 6;
	for (const char *p = tmpl; *p;) {
		if (strncmp(p, "{path}", 6) == 0) {
			tend_buf_puts(out, rel);
			p += 6;
		} else if (strncmp(p, "{dir}", 5) == 0) {
			tend_buf_put(out, rel, dirlen);
			p += 5;
		} else if (strncmp(p, "{name}", 6) == 0) {
			tend_buf_puts(out, name);
			p += 6;
		} else if (strncmp(p, "{stem}", 6) == 0) {
			tend_buf_put(out, name, stemlen);
			p += 6;
		} else if (strncmp(p, "{ext}", 5) == 0) {
			tend_buf_puts(out, ext);
			p += 5;
		} else
			tend_buf_putc(out, *p++);
	}
}

/* ---- declaration functions ---- */

static char *stage_path(struct run *r);

static int
declare_entry(struct tend_comp *c, struct run *r, const char *name,
    const char *src, const struct tend_fp *fp, uint64_t size, unsigned mode)
{
	struct tend_entry_spec e = {.fp = *fp, .size = size, .mode = mode,
	    .src = src};
	struct tend_buf v = TEND_BUF_INIT;
	struct tend_key k = tend_key_str(name);
	int rc;

	if ((rc = tend_fs_check_name(name, strlen(name)))) {
		/* the event names the app; say which source declared it */
		if (r->cur)
			tend_error_set(rc, "%s/%s: %s", r->app->source,
			    r->cur->rel, tend_error_last());
		return rc;
	}
	tend_fs_encode_entry(&v, &e);
	rc = tend_declare(c, r->target, &k, v.ptr, v.len);
	tend_buf_release(&v);
	if (rc == 0 && r->cur)
		item_outs_add(r->cur, name, (uint16_t)strlen(name), fp);
	return rc;
}

/* Does a symlink at `rel` to `text` lead out of the source (lexically:
 * an absolute path, or more ".." than directories above it)? */
static bool
link_escapes(const char *rel, const char *text)
{
	int depth = 0;

	if (text[0] == '/')
		return true;
	for (const char *p = rel; *p; p++)
		depth += *p == '/';
	for (const char *p = text; *p;) {
		size_t n = strcspn(p, "/");

		if (n == 2 && p[0] == '.' && p[1] == '.') {
			if (--depth < 0)
				return true;
		} else if (n && !(n == 1 && p[0] == '.'))
			depth++;
		p += n + (p[n] == '/');
	}
	return false;
}

/* A source symlink, declared as a symlink entry (symlinks = copy): its
 * text, never what it points to. */
static int
declare_link(struct tend_comp *c, struct run *r, const char *name,
    const char *rel, const char *src)
{
	char text[PATH_MAX];
	struct tend_fp fp;

	if (hash_link(AT_FDCWD, src, &fp, text) != 0)
		return tend_error_set(TEND_ERROR, "%s/%s: readlink: %s",
		    r->app->source, rel, strerror(errno));
	if (strcmp(r->app->symlinks, "copy-any") != 0 &&
	    link_escapes(rel, text))
		return tend_error_set(TEND_EINVALID,
		    "%s/%s: the symlink leads out of the source (to %s): not "
		    "copied (symlinks = copy-any allows it)",
		    r->app->source, rel, text);
	return declare_entry(c, r, name, text, &fp, strlen(text),
	    S_IFLNK | 0777);
}

int
tend_plugin_entry(struct tend_comp *c, const struct tend_source_item *item,
    const char *name, const void *data, size_t len, unsigned mode)
{
	struct run *r = current_run;
	struct tend_fp fp;
	char *path;
	int fd, rc;

	(void)item;
	if (!r)
		return tend_error_set(TEND_EINVALID,
		    "tend_plugin_entry: no pass is running");
	path = stage_path(r);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, data, len) != (ssize_t)len) {
		rc = tend_error_set(TEND_ERROR, "stage %s: %s", path,
		    strerror(errno));
	} else {
		fp = tend_fp_content(data, len);
		rc = declare_entry(c, r, name, path, &fp, len, mode & 07777);
	}
	if (fd >= 0)
		close(fd);
	free(path);
	return rc;
}

static char *
stage_path(struct run *r)
{
	struct tend_buf p = TEND_BUF_INIT;

	if (!r->stage) {
		struct tend_buf d = TEND_BUF_INIT;

		/* a new directory, never one that exists: an exec's TEND_OUT
		 * must start empty, whatever a killed process left */
		tend_buf_printf(&d, "%s/tmp", r->ws->state_dir);
		mkdir(d.ptr, 0700);
		tend_buf_printf(&d, "/%d.XXXXXX", (int)getpid());
		if (!mkdtemp(d.ptr)) {
			/* then staging in it fails, and says where */
		}
		r->stage = tend_buf_detach(&d, NULL);
	}
	tend_buf_printf(&p, "%s/%u", r->stage, r->stage_seq++);
	return tend_buf_detach(&p, NULL);
}

static int
fingerprint_path(const char *path, struct tend_fp *fp, uint64_t *size)
{
	struct stat st;

	if (stat(path, &st) != 0 || hash_file(AT_FDCWD, path, st.st_size, fp) != 0)
		return -1;
	*size = (uint64_t)st.st_size;
	return 0;
}

struct outwalk {
	struct tend_comp *c;
	struct run *r;
	const char *base;
	int rc;
};

static int
on_out_file(const char *rel, size_t len, int dirfd, const char *leaf,
    const struct stat *st, void *arg)
{
	struct outwalk *w = arg;
	struct tend_fp fp;
	char *abs = path_join(w->base, rel);
	int rc;

	(void)len;
	if (S_ISLNK(st->st_mode)) {
		/* (a new user's trial: it was left out without a word) */
		rc = tend_error_set(TEND_EINVALID, "the command left a symlink "
		    "in $TEND_OUT, %s: tend declares its files only (write the "
		    "file itself)", rel);
	} else if (hash_file(dirfd, leaf, st->st_size, &fp) != 0) {
		rc = tend_error_set(TEND_ERROR, "read %s: %s", abs,
		    strerror(errno));
	} else
		rc = declare_entry(w->c, w->r, rel, abs, &fp,
		    (uint64_t)st->st_size, (unsigned)st->st_mode & 0777);
	free(abs);
	return rc;
}

/* After an exec: every file of $TEND_OUT if the command made it, else
 * its stdout, is an entry. */
static int
declare_outputs(struct tend_comp *c, struct run *r, const char *name,
    unsigned mode, const char *out, const char *dir)
{
	struct stat st;
	int rc;

	if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) {
		struct outwalk w = {c, r, dir, 0};
		/* symlinks reach on_out_file, which refuses them; what is
		 * neither a file nor a directory is counted */
		struct tend_walk_opts wo = {.links = true};
		unsigned skipped = 0;

		rc = tend_walk(dir, &wo, on_out_file, &w, &skipped);
		if (rc == 0 && skipped)
			rc = tend_error_set(TEND_EINVALID, "the command left %u "
			    "entr%s in $TEND_OUT that %s neither a file nor a "
			    "directory (a FIFO, a socket): tend declares files "
			    "only", skipped, skipped == 1 ? "y" : "ies",
			    skipped == 1 ? "is" : "are");
		return rc;
	}
	struct tend_fp fp;
	uint64_t size;

	if (fingerprint_path(out, &fp, &size) != 0)
		rc = tend_error_set(TEND_ERROR, "read %s: %s", out,
		    strerror(errno));
	else
		rc = declare_entry(c, r, name, out, &fp, size, mode);
	return rc;
}

struct exec_setup {
	char *out, *dir, *src;
	char *cmd; /* an aggregate's command with "$@" added, or NULL */
	struct tend_buf env[4];
	char *envp[5];
	int ifd, ofd;
	struct tend_exec ex;
};

/* Does a shell command read its positional parameters? */
static bool
uses_args(const char *cmd)
{
	for (const char *p = strchr(cmd, '$'); p; p = strchr(p + 1, '$')) {
		const char *q = p[1] == '{' ? p + 2 : p + 1;

		if (*q == '@' || *q == '*' || *q == '#' ||
		    (*q >= '1' && *q <= '9'))
			return true;
	}
	return false;
}

/* Prepare an exec of the app's command for one item (rel) or for all
 * sources (rel NULL, args = the paths: `exec cat` is `cat "$@"`, unless
 * the command uses them itself). */
static int
exec_setup(struct exec_setup *x, struct run *r, const char *rel,
    char *const *args)
{
	memset(x, 0, sizeof *x);
	x->out = stage_path(r);
	x->dir = stage_path(r);
	x->src = rel ? path_join(r->source, rel) : NULL;
	for (int i = 0; i < 4; i++)
		x->env[i] = (struct tend_buf)TEND_BUF_INIT;
	tend_buf_printf(&x->env[0], "TEND_APP=%s", r->app->name);
	tend_buf_printf(&x->env[1], "TEND_PATH=%s", rel ? rel : "");
	tend_buf_printf(&x->env[2], "TEND_SOURCE=%s", x->src ? x->src : r->source);
	tend_buf_printf(&x->env[3], "TEND_OUT=%s", x->dir);
	for (int i = 0; i < 4; i++)
		x->envp[i] = x->env[i].ptr;
	x->ofd = open(x->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	x->ifd = x->src ? open(x->src, O_RDONLY | O_CLOEXEC) : -1;
	if (args && !uses_args(r->app->declare_arg)) {
		struct tend_buf b = TEND_BUF_INIT;

		tend_buf_printf(&b, "%s \"$@\"", r->app->declare_arg);
		x->cmd = tend_buf_detach(&b, NULL);
	}
	x->ex = (struct tend_exec){
		.cmd = x->cmd ? x->cmd : r->app->declare_arg,
		.cwd = r->source,
		.env = x->envp,
		.args = args,
		.stdin_fd = x->ifd,
		.stdout_fd = x->ofd,
		.timeout_ms = r->app->timeout_ms,
	};
	if (x->ofd < 0)
		return tend_error_set(TEND_ERROR, "stage %s: %s", x->out,
		    strerror(errno));
	if (x->src && x->ifd < 0)
		return tend_error_set(TEND_ERROR, "read %s: %s", x->src,
		    strerror(errno));
	return 0;
}

/* Close the fds; keep or free the staged paths. */
static void
exec_finish(struct exec_setup *x, bool keep_paths)
{
	if (x->ofd >= 0)
		close(x->ofd);
	if (x->ifd >= 0)
		close(x->ifd);
	for (int i = 0; i < 4; i++)
		tend_buf_release(&x->env[i]);
	free(x->src);
	free(x->cmd);
	if (!keep_paths) {
		free(x->out);
		free(x->dir);
	}
}

static int
run_exec(struct tend_comp *c, struct run *r, const char *rel,
    const char *name, unsigned mode, char *const *args)
{
	struct exec_setup x;
	int rc = exec_setup(&x, r, rel, args);

	if (rc == 0 && (rc = tend_exec_run(&x.ex, NULL)) != 0)
		tend_error_set(rc, "exec `%s` on %s: %s", r->app->declare_arg,
		    rel ? rel : "(all sources)", tend_error_last());
	else if (rc == 0)
		rc = declare_outputs(c, r, name, mode, x.out, x.dir);
	exec_finish(&x, false);
	return rc;
}

/*
 * Run the exec of every item that will need it, `jobs` at a time, before
 * the components are mounted (they run one after another): items kept by
 * the fast path or whose memo matches are left out.
 */
static void prerun_exec(struct tend_comp *c, struct run *r, bool fast,
    uint64_t gid, uint64_t gsc);

void
prerun_exec_items(struct run *r, uint64_t gid, uint64_t gsc)
{
	prerun_exec(NULL, r, false, gid, gsc);
}

static void
prerun_exec(struct tend_comp *c, struct run *r, bool fast, uint64_t gid,
    uint64_t gsc)
{
	struct exec_setup *xs = tend_xcalloc(r->nitems + 1, sizeof *xs);
	struct tend_exec *ex = tend_xcalloc(r->nitems + 1, sizeof *ex);
	struct item **its = tend_xcalloc(r->nitems + 1, sizeof *its);
	size_t n = 0;

	for (size_t i = 0; i < r->nitems; i++) {
		struct item *it = &r->items[i];
		struct tend_key path[2] = {tend_key_symbol("files"),
		    tend_key_strn(it->rel, it->len)};
		struct tend_fp in = item_input(it);

		if (it->sig.mode == 0 ||
		    (fast && it->unchanged && stamp_is(it->sig.stamp, &r->logic, gid, gsc)) ||
		    (!r->o->full &&
			tend_engine_memo_matches(r->ws->eng,
			    r->app->name, path, 2, &in, &r->logic)))
			continue;
		if (exec_setup(&xs[n], r, it->rel, NULL) != 0) {
			exec_finish(&xs[n], false);
			continue; /* the component runs it, and reports */
		}
		ex[n] = xs[n].ex;
		its[n++] = it;
	}
	int *rcs = tend_xcalloc(n + 1, sizeof *rcs);
	char **msgs = tend_xcalloc(n + 1, sizeof *msgs);
	tend_exec_batch(ex, n, r->app->jobs, rcs, msgs);
	for (size_t i = 0; i < n; i++) {
		struct item *it = its[i];

		it->job = tend_xcalloc(1, sizeof *it->job);
		it->job->rc = rcs[i];
		it->job->msg = msgs[i];
		it->job->out = xs[i].out;
		it->job->dir = xs[i].dir;
		exec_finish(&xs[i], true);
	}
	free(rcs);
	free(msgs);
	free(xs);
	free(ex);
	free(its);
}

struct item_arg {
	struct run *r;
	struct item *it;
};

static int
item_body(struct tend_comp *c, void *arg)
{
	struct item_arg *a = arg;
	struct run *r = a->r;
	struct item *it = a->it;
	struct tend_buf name = TEND_BUF_INIT;
	unsigned mode = it->sig.mode & 0777;
	int rc;

	if (it->sig.mode == 0)
		return tend_error_set(TEND_ERROR, "%s/%s: cannot read: %s",
		    r->app->source, it->rel, strerror(it->read_errno));
	expand_name(&name, r->app->name_tmpl, it->rel);
	/* collect what it declares now (the manifest lists it) */
	struct tend_buf old = it->outs;
	bool old_self = it->outs_self;
	struct tend_fp old_fp = it->outs_fp;
	it->outs = (struct tend_buf)TEND_BUF_INIT;
	it->outs_self = false;
	r->cur = it;
	char *src = path_join(r->source, it->rel);
	if (r->app->declare == TEND_DECLARE_COPY &&
	    S_ISLNK(it->sig.mode)) {
		rc = declare_link(c, r, name.ptr, it->rel, src);
	} else if (r->app->declare == TEND_DECLARE_COPY) {
		rc = declare_entry(c, r, name.ptr, src, &it->sig.fp,
		    it->sig.size, mode);
	} else if (r->app->declare == TEND_DECLARE_EXEC && it->job) {
		if ((rc = it->job->rc) != 0)
			tend_error_set(rc, "exec `%s` on %s: %s",
			    r->app->declare_arg, it->rel,
			    it->job->msg ? it->job->msg : "failed");
		else
			rc = declare_outputs(c, r, name.ptr, mode, it->job->out,
			    it->job->dir);
	} else if (r->app->declare == TEND_DECLARE_EXEC)
		rc = run_exec(c, r, it->rel, name.ptr, mode, NULL);
	else {
		struct tend_source_item si = {
			.abi = TEND_PLUGIN_ABI,
			.app = r->app->name,
			.path = it->rel,
			.abs_path = src,
			.fp = it->sig.fp,
			.mode = mode,
			.name = name.ptr,
			.target = r->target,
			.engine = tend_comp_engine(c),
		};
		tend_plugin_fn *fn = r->plugin ? r->plugin->fn
		    : (tend_plugin_fn *)(uintptr_t)r->app->code_fn;

		tend_error_clear();
		rc = fn(c, &si);
		if (rc && !tend_error_last()[0])
			tend_error_set(rc, "%s: declaration of %s failed (%d)",
			    r->app->name, it->rel, rc);
	}
	r->cur = NULL;
	free(src);
	if (rc == 0) {
		it->ran = true;
		tend_buf_release(&old);
	} else {
		tend_buf_release(&it->outs);
		it->outs = old;
		it->outs_self = old_self;
		it->outs_fp = old_fp;
	}
	tend_buf_release(&name);
	return rc;
}

static int
aggregate_body(struct tend_comp *c, void *arg)
{
	struct run *r = arg;
	char **args = tend_xcalloc(r->nitems + 1, sizeof *args);
	int rc;

	/* a name that begins with '-' goes as ./NAME: `exec cat` took
	 * -dash for an option and failed the whole aggregate */
	for (size_t i = 0; i < r->nitems; i++)
		args[i] = r->items[i].rel[0] == '-'
		    ? path_join(".", r->items[i].rel) : r->items[i].rel;
	rc = run_exec(c, r, NULL, r->app->target_path, 0644, args);
	for (size_t i = 0; i < r->nitems; i++)
		if (args[i] != r->items[i].rel)
			free(args[i]);
	free(args);
	return rc;
}

struct tend_fp
item_input(const struct item *it)
{
	struct tend_hasher h;

	tend_hasher_init(&h);
	tend_hasher_bytes(&h, it->rel, it->len);
	tend_hasher_fp(&h, &it->sig.fp);
	tend_hasher_int(&h, it->sig.mode & 0777);
	return tend_hasher_final(&h);
}

struct mline {
	const char *name;
	size_t len;
	const uint8_t *fp;
};

static int
cmp_mline(const void *a, const void *b)
{
	const struct mline *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->name, y->name, n);

	return c ? c : (x->len > y->len) - (x->len < y->len);
}

/*
 * The manifest attachment: one file in the target listing every entry
 * with its digest ("<xxh3-128 hex>  <name>"; a name with a newline, a
 * carriage return or a backslash as sha256sum writes it: the line
 * begins with a backslash, and they are \n, \r, \\), sorted by name. It is an
 * attachment of the directory, not a child: switching it off deletes it,
 * and it is never mistaken for an entry. It lists what is declared: an
 * entry that could not be written (something in the way) is listed with
 * the digest declared, so that checking the manifest flags it; a name
 * two sources declare (a conflict) is not listed.
 */
/* The entries an outs list (a SIG row's tail, an item's outs) names:
 * each is a u16 length, the name, its 16-byte digest. The next one from
 * *pos; false at the end. */
bool
outs_next(const void *outs, size_t n, size_t *pos, const char **name,
    uint16_t *len)
{
	const char *p = outs;

	if (*pos + 2 > n)
		return false;
	memcpy(len, p + *pos, 2);
	if (*pos + 2 + *len + 16 > n)
		return false;
	*name = p + *pos + 2;
	*pos += 2 + (size_t)*len + 16;
	return true;
}

static void
outs_put(struct tend_buf *b, const char *name, uint16_t len,
    const struct tend_fp *fp)
{
	tend_buf_put(b, &len, 2);
	tend_buf_put(b, name, len);
	tend_buf_put(b, fp->b, 16);
}

const struct tend_buf *
item_outs(const struct item *it, struct tend_buf *tmp)
{
	if (!it->outs_self)
		return &it->outs;
	tend_buf_reset(tmp);
	outs_put(tmp, it->rel, (uint16_t)it->len, &it->outs_fp);
	return tmp;
}

void
item_outs_add(struct item *it, const char *name, uint16_t len,
    const struct tend_fp *fp)
{
	if (!it->outs_self && it->outs.len == 0 && len == it->len &&
	    memcmp(name, it->rel, len) == 0) {
		it->outs_self = true;
		it->outs_fp = *fp;
		return;
	}
	if (it->outs_self) { /* a second entry: spelled out */
		it->outs_self = false;
		outs_put(&it->outs, it->rel, (uint16_t)it->len, &it->outs_fp);
	}
	outs_put(&it->outs, name, len, fp);
}

void
item_outs_set(struct item *it, const void *outs, size_t n)
{
	const char *name;
	uint16_t len;
	size_t pos = 0;

	tend_buf_reset(&it->outs);
	it->outs_self = false;
	if (outs_next(outs, n, &pos, &name, &len) && pos == n &&
	    len == it->len && memcmp(name, it->rel, len) == 0) {
		it->outs_self = true;
		memcpy(it->outs_fp.b, name + len, 16);
	} else if (n)
		tend_buf_put(&it->outs, outs, n);
}

void
item_free(struct item *it)
{
	/* (it->rel is the run's: names_free) */
	tend_buf_release(&it->outs);
	if (it->job) {
		free(it->job->msg);
		free(it->job->out);
		free(it->job->dir);
		free(it->job);
	}
}

/* The outs of the vanished items whose deletes the brake holds, from
 * their SIG rows, appended to `out`. */
int
held_outs(struct run *r, struct tend_buf *out)
{
	struct tend_txn *txn;
	struct tend_buf k = TEND_BUF_INIT;
	struct tend_bytes v;
	int rc;

	if ((rc = tend_store_read_begin(tend_engine_store(r->ws->eng), &txn)))
		return rc;
	for (size_t i = 0; i < r->nvanished; i++) {
		sig_key(&k, r->app->name, r->vanished[i],
		    strlen(r->vanished[i]));
		if (tend_store_get(txn, TEND_T_SIG, k.ptr, k.len, &v) == 0)
			sig_outs(&v, r->vanished[i], strlen(r->vanished[i]),
			    out);
	}
	tend_store_read_end(txn);
	tend_buf_release(&k);
	return 0;
}

static int
declare_manifest(struct tend_comp *c, struct run *r)
{
	struct mline *lines = NULL;
	size_t n = 0, cap = 0;
	struct tend_buf text = TEND_BUF_INIT;
	struct tend_provider *att;
	struct tend_buf held = TEND_BUF_INIT;
	int rc;

	/* what the brake holds stays in the target: in the manifest too */
	if (r->hold && r->nvanished && (rc = held_outs(r, &held)))
		return rc;
	for (size_t i = 0; i <= r->nitems; i++) {
		const struct tend_buf *o = i < r->nitems ? &r->items[i].outs
							 : &held;
		const char *name;
		uint16_t len;

		if (i < r->nitems && r->items[i].outs_self) {
			if (n == cap) {
				cap = cap ? cap * 2 : 256;
				lines = tend_xrealloc(lines, cap * sizeof *lines);
			}
			lines[n].name = r->items[i].rel;
			lines[n].len = r->items[i].len;
			lines[n].fp = r->items[i].outs_fp.b;
			n++;
			continue;
		}
		for (size_t pos = 0; outs_next(o->ptr, o->len, &pos, &name,
			 &len);) {
			if (n == cap) {
				cap = cap ? cap * 2 : 256;
				lines = tend_xrealloc(lines, cap * sizeof *lines);
			}
			lines[n].name = name;
			lines[n].len = len;
			lines[n].fp = (const uint8_t *)name + len;
			n++;
		}
	}
	if (n > 1)
		qsort(lines, n, sizeof *lines, cmp_mline);
	for (size_t i = 0; i < n; i++) {
		if (lines[i].len == strlen(r->app->manifest_name) &&
		    memcmp(lines[i].name, r->app->manifest_name,
			lines[i].len) == 0) {
			free(lines);
			tend_buf_release(&text);
			tend_buf_release(&held);
			return tend_error_set(TEND_EINVALID,
			    "%s: an entry is named like the manifest (%s): set "
			    "manifest-name",
			    r->app->name, r->app->manifest_name);
		}
		/* a name two sources declare is a conflict: which (if
		 * either) holds it is decided as they apply, so the manifest
		 * vouches for neither (it listed both) */
		size_t j = i + 1;
		while (j < n && cmp_mline(&lines[i], &lines[j]) == 0)
			j++;
		if (j > i + 1) {
			i = j - 1;
			continue;
		}
		/* as sha256sum writes a name with a newline, a carriage
		 * return or a backslash: the line begins with '\\', and
		 * those are escaped (raw, one name took two lines) */
		const char *nm = lines[i].name;
		bool esc = memchr(nm, '\n', lines[i].len) ||
		    memchr(nm, '\\', lines[i].len) ||
		    memchr(nm, '\r', lines[i].len);
		if (esc)
			tend_buf_putc(&text, '\\');
		tend_buf_puthex(&text, lines[i].fp, 16);
		tend_buf_puts(&text, "  ");
		for (size_t k = 0; k < lines[i].len; k++) {
			if (esc && nm[k] == '\n')
				tend_buf_puts(&text, "\\n");
			else if (esc && nm[k] == '\r')
				tend_buf_puts(&text, "\\r");
			else if (esc && nm[k] == '\\')
				tend_buf_puts(&text, "\\\\");
			else
				tend_buf_putc(&text, nm[k]);
		}
		tend_buf_putc(&text, '\n');
	}
	free(lines);
	if ((rc = tend_provider_attachment(r->target, "manifest", &att)) == 0) {
		struct tend_provider *saved = r->target;
		struct item *cur = r->cur;

		/* the manifest is declared like an entry, in the attachment
		 * namespace */
		r->target = att;
		r->cur = NULL;
		struct tend_source_item si = {.abi = TEND_PLUGIN_ABI};
		rc = tend_plugin_entry(c, &si, r->app->manifest_name, text.ptr,
		    text.len, r->app->file_mode ? r->app->file_mode : 0644);
		r->target = saved;
		r->cur = cur;
	}
	tend_buf_release(&text);
	tend_buf_release(&held);
	return rc;
}

/* Components per write batch: the engine's 4,096, or TEND_BATCH (the
 * tests' way to cross batch boundaries with a small tree). A git target
 * takes 16,384: its pass's batches amend one commit (git.c, "amend"),
 * and each batch writes its packs (a first commit of 100k files: 20
 * packs, 216 MiB peak RSS, 16.4 s; batches of 4,096: 74 packs, 152 MiB,
 * 19.2 s; as one batch, before: 3 packs, 462 MiB, 18.2 s). */
size_t
app_batch(const struct tend_app_config *app)
{
	const char *e = getenv("TEND_BATCH");

	if (e && atoi(e) > 0)
		return (size_t)atoi(e);
	return app->target == TEND_TARGET_GIT ? 16384 : 0;
}

/* A source item's memoized component: full and incremental passes mount
 * it the same way. */
int
mount_item(struct tend_comp *c, struct run *r, struct item *it)
{
	struct tend_key path[2] = {tend_key_symbol("files"),
	    tend_key_strn(it->rel, it->len)};
	struct tend_mount_opts o = {
		.processor = r->app->declare == TEND_DECLARE_EXEC ? "exec"
								  : "copy",
		.memo = it->sig.mode != 0,
		.input_fp = item_input(it),
		.logic_fp = r->logic,
		/* no SIG row: a kill between the component's commit and the
		 * rows a full pass writes after the run; its memo would keep
		 * the outputs unknown (exclusive strays, the manifest) */
		.fresh = !it->had,
	};
	struct item_arg a = {r, it};

	return tend_mount(c, path, 2, item_body, &a, &o);
}

/* An app's git target spec; its message (with {app} expanded) in *msg */
void
git_spec(const struct tend_app_config *app, struct tend_git_spec *spec,
    struct tend_buf *msg)
{
	for (const char *p = app->message; *p;) {
		if (strncmp(p, "{app}", 5) == 0) {
			tend_buf_puts(msg, app->name);
			p += 5;
		} else
			tend_buf_putc(msg, *p++);
	}
	if (!msg->ptr)
		tend_buf_puts(msg, "");
	*spec = (struct tend_git_spec){
		.executable = strcmp(app->executable, "never") == 0
		    ? TEND_GIT_NEVER
		    : strcmp(app->executable, "always") == 0 ? TEND_GIT_ALWAYS
							     : TEND_GIT_KEEP,
		.exclusive = app->exclusive,
		.allow_checked_out = app->allow_checked_out,
		.message = msg->ptr,
		.author = app->author ? app->author : "",
		.tags = (const char *const *)app->tags.v,
		.ntags = app->tags.n,
	};
}

/* The vanished sources the brake holds, for the agent (res) */
void
held_sources(struct tend_app_result *res, const struct run *r)
{
	res->held_sources = tend_xcalloc(r->nvanished + 1,
	    sizeof *res->held_sources);
	for (size_t i = 0; i < r->nvanished; i++)
		res->held_sources[i] = tend_xstrdup(r->vanished[i]);
	res->nheld_sources = r->nvanished;
}

bool
app_target_names(struct tend_ws *ws, const struct tend_app_config *app,
    struct tend_buf *component, struct tend_buf *provider)
{
	struct tend_buf key = TEND_BUF_INIT, v = TEND_BUF_INIT;
	const char *root = NULL;
	struct tend_key k, git[3];
	/* (asked in the middle of a pass: its error, if any, stays) */
	int ecode = tend_error_code();
	char *emsg = ecode ? tend_xstrdup(tend_error_last()) : NULL;

	if (app->target == TEND_TARGET_DIR) {
		root = TEND_FS_DIR;
		k = tend_key_str(app->target_path);
	} else if (app->target == TEND_TARGET_GIT) {
		root = TEND_GIT;
		git[0] = tend_key_str(app->target_path);
		git[1] = tend_key_str(app->ref);
		git[2] = tend_key_str(app->prefix ? app->prefix : "");
		k = tend_key_tuple(git, 3);
	} else if (app->target == TEND_TARGET_PLUGIN &&
	    tend_ws_connector_container(ws, (struct tend_app_config *)app,
		&key, &v) == 0) {
		root = tend_ws_connector(ws, app->target_type)->root;
		k = tend_key_str(key.ptr);
	}
	struct tend_provider *p = root ? tend_engine_root(ws->eng, root) : NULL;
	if (p) {
		struct tend_key parts[2] = {tend_key_str(tend_provider_name(p)),
		    k};
		struct tend_key t = tend_key_tuple(parts, 2);

		tend_buf_puts(component, "/@tend/mount_target/");
		tend_key_format(component, &t);
		tend_buf_printf(provider, "%s/", tend_provider_name(p));
		tend_key_format(provider, &k);
	}
	tend_buf_release(&key);
	tend_buf_release(&v);
	if (emsg)
		tend_error_set(ecode, "%s", emsg);
	else
		tend_error_clear();
	free(emsg);
	return p != NULL;
}

/* The first of r's items (sorted by path) not before key[0..len) */
static size_t
item_lower(const struct run *r, const char *key, size_t len)
{
	size_t lo = 0, hi = r->nitems;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct item *it = &r->items[mid];
		size_t n = it->len < len ? it->len : len;
		int d = memcmp(it->rel, key, n);

		if (d < 0 || (d == 0 && it->len < len))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Is there an item at `rel` exactly, or, with `under`, under rel/? */
static bool
item_at(const struct run *r, const char *rel, size_t len, bool under)
{
	char *key = tend_xmalloc(len + 2);

	memcpy(key, rel, len);
	key[len] = '/';
	size_t klen = len + (under ? 1 : 0);
	size_t i = item_lower(r, key, klen);
	const struct item *it = i < r->nitems ? &r->items[i] : NULL;
	bool yes = it && it->len >= klen && memcmp(it->rel, key, klen) == 0 &&
	    (under || it->len == len);
	free(key);
	return yes;
}

/* A vanished source whose path is a directory of present ones now (a
 * file that became a directory), or under a path that is a present
 * file now (a directory that became a file) */
static bool
gone_in_the_way(const struct run *r, const char *v)
{
	size_t len = strlen(v);

	if (item_at(r, v, len, true))
		return true;
	for (size_t i = len; i-- > 0;)
		if (v[i] == '/' && item_at(r, v, i, false))
			return true;
	return false;
}

int
root_body(struct tend_comp *c, void *arg)
{
	struct run *r = arg;
	struct tend_engine *eng = tend_comp_engine(c);
	int rc;

	if (r->app->target == TEND_TARGET_DIR) {
		struct tend_dir_spec spec = {
			.file_mode = r->app->file_mode,
			.exclusive = r->app->exclusive,
			.manifest = r->app->manifest,
		};
		struct tend_buf v = TEND_BUF_INIT;
		struct tend_key k = tend_key_str(r->app->target_path);

		tend_fs_encode_dir(&v, &spec);
		rc = tend_mount_target(c, tend_engine_root(eng, TEND_FS_DIR),
		    &k, v.ptr, v.len, &r->target);
		tend_buf_release(&v);
		if (rc)
			return rc;
	} else if (r->app->target == TEND_TARGET_FILE) {
		struct tend_hasher h;
		struct tend_mount_opts o = {.processor = "aggregate",
		    .memo = true, .logic_fp = r->logic};
		struct tend_key path = tend_key_symbol("aggregate");

		r->target = tend_engine_root(eng, TEND_FS_FILE);
		/* the brake holds deletes: nothing made of those sources
		 * changes until they are approved */
		if (r->hold) {
			tend_mount_keep(c, &path, 1);
			return 0;
		}
		tend_hasher_init(&h);
		for (size_t i = 0; i < r->nitems; i++) {
			struct tend_fp in = item_input(&r->items[i]);
			tend_hasher_fp(&h, &in);
		}
		o.input_fp = tend_hasher_final(&h);
		return tend_mount(c, &path, 1, aggregate_body, r, &o);
	} else if (r->app->target == TEND_TARGET_PLUGIN) {
		/* a plugin's container, declared here as dir: and git:
		 * ones are: the app's, whatever source runs */
		struct tend_buf key = TEND_BUF_INIT, v = TEND_BUF_INIT;
		const struct tend_connector_plugin *d =
		    tend_ws_connector(r->ws, r->app->target_type);

		rc = tend_ws_connector_container(r->ws, r->app, &key, &v);
		if (rc == 0) {
			struct tend_key k = tend_key_str(key.ptr);

			rc = tend_mount_target(c, tend_engine_root(eng, d->root),
			    &k, v.ptr, v.len, &r->target);
		}
		tend_buf_release(&key);
		tend_buf_release(&v);
		if (rc)
			return rc;
	} else {
		/* git: a tree under (repository, ref, prefix) */
		struct tend_buf msg = TEND_BUF_INIT, v = TEND_BUF_INIT;
		struct tend_git_spec spec;

		git_spec(r->app, &spec, &msg);
		struct tend_key parts[3] = {tend_key_str(r->app->target_path),
		    tend_key_str(r->app->ref),
		    tend_key_str(r->app->prefix ? r->app->prefix : "")};
		struct tend_key k = tend_key_tuple(parts, 3);

		tend_git_encode_spec(&v, &spec);
		rc = tend_mount_target(c, tend_engine_root(eng, TEND_GIT), &k,
		    v.ptr, v.len, &r->target);
		tend_buf_release(&v);
		tend_buf_release(&msg);
		if (rc)
			return rc;
	}
	uint64_t gid, gsc;
	tend_provider_generation(r->target, &gid, &gsc);
	/* (a preview's new provider is gone after the pass) */
	free(r->target_name);
	r->target_name = tend_xstrdup(tend_provider_name(r->target));
	bool fast = !r->o->full && !r->unsure &&
	    (r->app->declare == TEND_DECLARE_COPY ||
		r->app->declare == TEND_DECLARE_EXEC);
	if (r->app->declare == TEND_DECLARE_EXEC)
		prerun_exec(c, r, fast, gid, gsc);
	/* a gone file where a directory is now, or one under a path that
	 * is a file now, first: its delete goes in the first batch, so the
	 * new entry finds its way clear in any batch (a new user's trial: in
	 * a pass of more than one batch the write came first and failed,
	 * "out/x is not a directory: tend does not remove what it did not
	 * write", and a second sync was needed). The other gone go last, so
	 * that a source that now declares one of their entries takes it
	 * over (an update) rather than see it deleted and written again
	 * (another trial: a renamed folder under name = {name}). */
	for (size_t i = 0; !r->hold && i < r->nvanished; i++) {
		struct tend_key path[2] = {tend_key_symbol("files"),
		    tend_key_str(r->vanished[i])};

		if (gone_in_the_way(r, r->vanished[i]))
			tend_mount_gone(c, path, 2);
	}
	for (size_t i = 0; i < r->nitems; i++) {
		struct item *it = &r->items[i];
		struct tend_key path[2] = {tend_key_symbol("files"),
		    tend_key_strn(it->rel, it->len)};

		/* unchanged signature, same logic, same target generation,
		 * and it committed with them last time: nothing to look at */
		if (fast && it->unchanged && stamp_is(it->sig.stamp, &r->logic, gid, gsc)) {
			it->kept = true;
			tend_mount_keep(c, path, 2);
			continue;
		}
		if ((rc = mount_item(c, r, it)))
			return rc;
	}
	for (size_t i = 0; i < r->nvanished; i++) {
		struct tend_key path[2] = {tend_key_symbol("files"),
		    tend_key_str(r->vanished[i])};

		/* (mounted first, above: a second mount does nothing) */
		if (r->hold)
			tend_mount_keep(c, path, 2);
		else
			tend_mount_gone(c, path, 2);
	}
	if (r->app->manifest && r->app->target == TEND_TARGET_DIR)
		return declare_manifest(c, r);
	if (r->app->target == TEND_TARGET_GIT && r->app->tags.n) {
		struct tend_provider *tags;

		if ((rc = tend_provider_attachment(r->target, "tag", &tags)))
			return rc;
		for (size_t i = 0; i < r->app->tags.n; i++) {
			struct tend_key k = tend_key_str(r->app->tags.v[i]);

			if ((rc = tend_declare(c, tags, &k, "t", 1)))
				return rc;
		}
	}
	return 0;
}

/* An incremental pass's root: the target stays mounted from the last full
 * pass; the vanished items go first, then the given items. */
int
partial_body(struct tend_comp *c, void *arg)
{
	struct run *r = ((struct partial *)arg)->r;
	int rc;

	/* the gone first: an item that takes over one of their entries
	 * (a move) then finds its owner gone, whatever the batches */
	for (size_t i = 0; !r->hold && i < r->nvanished; i++) {
		struct tend_key path[2] = {tend_key_symbol("files"),
		    tend_key_str(r->vanished[i])};

		if ((rc = tend_mount_gone(c, path, 2)))
			return rc;
	}
	for (size_t i = 0; i < r->nitems; i++)
		if ((rc = mount_item(c, r, &r->items[i])) != 0)
			return rc;
	return 0;
}

