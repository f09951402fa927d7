/*
 * app.c - from [app] sections to engine passes.
 *
 * One pass of an app:
 *   1. walk the source (sorted, filtered) and compare every file's stat
 *      signature (size, mtime ns, ctime ns, inode, mode) with the one
 *      stored in the SIG table: only files whose signature changed are
 *      read and hashed; a signature within the racy window (mtime too
 *      close to the scan) is stored as untrusted, so it is hashed again;
 *   2. the delete brake: if more than the allowed number of previously
 *      seen items vanished (or the source is suddenly empty), those items
 *      are kept, not deleted, and the pass reports them;
 *   3. the engine pass: the root component mounts the target container,
 *      then one memoized component per file (input: path, content
 *      fingerprint, mode; logic: the app's declaration settings), whose
 *      body runs the declaration function;
 *   4. the SIG table is brought up to date in one transaction.
 */
#define _GNU_SOURCE
#include "app.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "exec.h"
#include "fs.h"
#include "git.h"
#include "inspect.h"
#include "store.h"
#include "tend/arena.h"
#include "tend/failpoint.h"
#include "tend/plugin.h"
#include "tend/status.h"
#include "walk.h"

/* A file changed within this window before the scan may change again
 * without its mtime moving (timestamps advance in kernel ticks): its
 * signature is not trusted next time. */
#define RACY_NS (50ull * 1000000ull)
#define SIG_VERSION 3
#define CONF_MAX (4u << 20) /* tend.conf is read up to this size */

/* ---- workspace ---- */

static char *
path_join(const char *a, const char *b)
{
	struct tend_buf p = TEND_BUF_INIT;

	if (b[0] == '/')
		tend_buf_puts(&p, b);
	else if (strcmp(b, ".") == 0)
		tend_buf_puts(&p, a);
	else
		tend_buf_printf(&p, "%s/%s", a, b);
	return tend_buf_detach(&p, NULL);
}

static int
hash_fd_fp(int fd, struct tend_fp *out)
{
	struct tend_hasher h;
	char buf[1 << 16];
	ssize_t n;

	tend_hasher_init(&h);
	tend_hasher_begin_stream(&h);
	while ((n = read(fd, buf, sizeof buf)) > 0)
		tend_hasher_raw(&h, buf, (size_t)n);
	if (n < 0)
		return -1;
	*out = tend_hasher_final(&h);
	return 0;
}

int
tend_ws_load(struct tend_ws *ws, const char *dir, const char *conf,
    struct tend_buf *err)
{
	char cwd[PATH_MAX], *found = NULL;
	struct tend_buf text = TEND_BUF_INIT;
	int rc = 0;

	memset(ws, 0, sizeof *ws);
	if (dir && chdir(dir) != 0) {
		tend_buf_printf(err, "cannot change to %s: %s\n", dir,
		    strerror(errno));
		return TEND_ENOTFOUND;
	}
	if (!getcwd(cwd, sizeof cwd)) {
		tend_buf_printf(err, "getcwd: %s\n", strerror(errno));
		return TEND_ERROR;
	}
	if (conf) {
		char *abs = path_join(cwd, conf);
		char *slash = strrchr(abs, '/');

		found = abs;
		ws->root = strndup(abs, slash && slash != abs
			? (size_t)(slash - abs) : 1);
	} else {
		char probe[PATH_MAX + 16];
		char *d = strdup(cwd);

		for (;;) {
			snprintf(probe, sizeof probe, "%s/tend.conf",
			    strcmp(d, "/") == 0 ? "" : d);
			if (access(probe, F_OK) == 0) {
				found = strdup(probe);
				ws->root = d;
				break;
			}
			char *slash = strrchr(d, '/');
			if (!slash || strcmp(d, "/") == 0) {
				free(d);
				break;
			}
			if (slash == d)
				slash[1] = '\0';
			else
				*slash = '\0';
		}
		if (!found) {
			tend_buf_printf(err,
			    "no tend.conf in %s or any parent directory (use "
			    "-C DIR or -c FILE)\n",
			    cwd);
			return TEND_ENOTFOUND;
		}
	}
	ws->conf_path = found;
	int fd = open(found, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		tend_buf_printf(err, "%s: %s\n", found, strerror(errno));
		tend_ws_close(ws);
		return TEND_ENOTFOUND;
	}
	tend_buf_read_fd(&text, fd, CONF_MAX);
	close(fd);
	struct tend_diags diags = {0};
	const char *shown = conf ? conf : "tend.conf";
	if (tend_config_parse_in(text.ptr, text.len, shown, ws->root, &ws->cfg,
		&diags)) {
		char *msg = tend_diags_format(&diags);

		tend_buf_puts(err, msg);
		free(msg);
		rc = TEND_EINVALID;
	}
	tend_diags_finish(&diags);
	tend_buf_release(&text);
	if (rc == 0)
		ws->state_dir = path_join(ws->root, ws->cfg.state);
	/* every command loads the connector plugins: a check or a drop
	 * needs them as much as a sync */
	if (rc == 0)
		rc = tend_ws_connectors_load(ws, &ws->cfg, err);
	return rc;
}

/* [tend] fsync, for the sinks that write files */
static void
set_fsync(struct tend_ws *ws)
{
	tend_engine_set_resource(ws->eng, "fsync",
	    ws->cfg.fsync ? (void *)"1" : NULL);
}

int
tend_ws_reload(struct tend_ws *ws, struct tend_buf *err)
{
	struct tend_buf text = TEND_BUF_INIT;
	struct tend_diags diags = {0};
	struct tend_config cfg;
	int fd = open(ws->conf_path, O_RDONLY | O_CLOEXEC), rc = 0;

	if (fd < 0) {
		tend_buf_printf(err, "%s: %s\n", ws->conf_path, strerror(errno));
		return TEND_ENOTFOUND;
	}
	tend_buf_read_fd(&text, fd, CONF_MAX);
	close(fd);
	if (tend_config_parse_in(text.ptr, text.len, "tend.conf", ws->root, &cfg,
		&diags)) {
		char *msg = tend_diags_format(&diags);

		tend_buf_puts(err, msg);
		free(msg);
		rc = TEND_EINVALID;
	} else if ((rc = tend_ws_connectors_load(ws, &cfg, err)) != 0) {
		tend_config_finish(&cfg); /* the old one stays */
	} else {
		/* apps of tend_main stay: they are not in the file */
		for (size_t i = 0; i < ws->cfg.napps; i++) {
			struct tend_app_config *a = &ws->cfg.apps[i];

			if (a->declare != TEND_DECLARE_CODE)
				continue;
			cfg.apps = tend_xrealloc(cfg.apps,
			    (cfg.napps + 1) * sizeof *cfg.apps);
			cfg.apps[cfg.napps++] = *a;
			memset(a, 0, sizeof *a);
		}
		tend_config_finish(&ws->cfg);
		ws->cfg = cfg;
		if (ws->eng)
			set_fsync(ws);
	}
	tend_diags_finish(&diags);
	tend_buf_release(&text);
	return rc;
}

static void rm_tree(const char *path);

/*
 * Remove what dead processes left in state/DIR: the entries named after a
 * pid ("<pid>" or "<pid>.<suffix>") that no running process has, and our
 * own pid's, which a killed process that had our pid before us left (pids
 * are reused: pid_max is 32768 on many systems, and a torture run wraps it
 * in minutes). Returns the directory's path.
 */
static char *
sweep_dead(struct tend_ws *ws, const char *dir)
{
	struct tend_buf base = TEND_BUF_INIT;
	DIR *d;
	struct dirent *e;

	tend_buf_printf(&base, "%s/%s", ws->state_dir, dir);
	mkdir(base.ptr, 0700);
	if ((d = opendir(base.ptr))) {
		while ((e = readdir(d))) {
			char *end;
			long pid = strtol(e->d_name, &end, 10);

			if ((*end && *end != '.') || pid <= 0 ||
			    (pid != (long)getpid() &&
				(kill((pid_t)pid, 0) == 0 || errno == EPERM)))
				continue;
			char *p = path_join(base.ptr, e->d_name);
			rm_tree(p);
			free(p);
		}
		closedir(d);
	}
	return tend_buf_detach(&base, NULL);
}

/* state/staging/<pid>: where entries are written before being renamed
 * into place; state/tmp/<pid>.XXXXXX: a pass's exec outputs. What a
 * killed process left in either is removed here. */
static void
staging_setup(struct tend_ws *ws)
{
	struct tend_buf base = TEND_BUF_INIT;
	char *dir = sweep_dead(ws, "staging");

	free(sweep_dead(ws, "tmp"));
	tend_buf_printf(&base, "%s/%d", dir, (int)getpid());
	free(dir);
	mkdir(base.ptr, 0700);
	ws->staging = tend_buf_detach(&base, NULL);
	tend_engine_set_resource(ws->eng, "staging", ws->staging);
}

static const struct tend_component_hooks comp_hooks;
static tend_event_fn on_conflict;

int
tend_ws_open(struct tend_ws *ws)
{
	int rc;

	if (ws->eng)
		return 0;
	if ((rc = tend_engine_open(&ws->eng, ws->state_dir, NULL)))
		return rc;
	tend_engine_set_component_hooks(ws->eng, &comp_hooks, ws);
	tend_engine_subscribe(ws->eng, TEND_EV_MASK(TEND_EV_COMPONENT_ERROR),
	    on_conflict, ws);
	tend_engine_set_resource(ws->eng, "workspace", ws->root);
	tend_engine_set_resource(ws->eng, "state", ws->state_dir);
	staging_setup(ws);
	set_fsync(ws);
	if ((rc = tend_fs_register(ws->eng)) ||
	    (rc = tend_git_register(ws->eng)) ||
	    (rc = tend_ws_connectors_register(ws)))
		return rc;
	/* tend_main's init: once per engine, before any pass */
	if (ws->code && ws->code->init && (rc = ws->code->init(ws->eng)))
		return tend_error_set(rc, "tend_main init: %s",
		    tend_error_last()[0] ? tend_error_last() : "failed");
	return 0;
}

static int
read_holder(int fd, char *buf, size_t size)
{
	ssize_t n = pread(fd, buf, size - 1, 0);

	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return atoi(buf);
}

int
tend_ws_flock(struct tend_ws *ws, const char *name, bool wait, char *holder,
    size_t hsize, int *fd_out)
{
	struct tend_buf p = TEND_BUF_INIT;
	int fd, rc = 0;

	tend_buf_printf(&p, "%s/%s", ws->state_dir, name);
	fd = open(p.ptr, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = tend_error_set(TEND_ERROR, "%s: %s", p.ptr,
		    strerror(errno));
		goto out;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		read_holder(fd, holder, hsize);
		if (!wait) {
			close(fd);
			rc = TEND_EEXISTS;
			goto out;
		}
		fprintf(stderr, "tend: waiting for pid %s to finish with "
				"this workspace\n",
		    holder[0] ? holder : "?");
		while (flock(fd, LOCK_EX) != 0)
			if (errno != EINTR) {
				rc = tend_error_set(TEND_ERROR, "%s: %s",
				    p.ptr, strerror(errno));
				close(fd);
				goto out;
			}
	}
	*fd_out = fd;
out:
	tend_buf_release(&p);
	return rc;
}

int
tend_ws_lock(struct tend_ws *ws, const char *who)
{
	char text[128], holder[128];
	int fd, rc;

	if (ws->wlock)
		return 0;
	if ((rc = tend_ws_flock(ws, "write.lock", true, holder, sizeof holder,
		 &fd)))
		return rc;
	snprintf(text, sizeof text, "%d (%s)\n", (int)getpid(), who);
	/* the name is a courtesy to the next one; the flock is the lock */
	if (ftruncate(fd, 0) == 0)
		(void)!pwrite(fd, text, strlen(text), 0);
	ws->wlock = fd + 1;
	return 0;
}

int
tend_ws_agent_pid(const struct tend_ws *ws)
{
	struct tend_buf p = TEND_BUF_INIT;
	char pid[64];
	int fd, running = 0;

	tend_buf_printf(&p, "%s/agent.pid", ws->state_dir);
	fd = open(p.ptr, O_RDONLY | O_CLOEXEC);
	tend_buf_release(&p);
	if (fd < 0)
		return 0;
	/* the agent holds an exclusive flock for its life (-1: one runs,
	 * its pid is not written yet). A lock whose recorded holder is dead
	 * is held by what it left in transit (a child between its spawn and
	 * its execve, which closes the descriptor): wait for that, 2 s at
	 * most, rather than send the user to stop a dead agent. */
	for (int tries = 0;; tries++) {
		if (flock(fd, LOCK_SH | LOCK_NB) == 0 || errno != EWOULDBLOCK) {
			running = 0;
			break;
		}
		running = read_holder(fd, pid, sizeof pid);
		if (running <= 0) {
			running = -1;
			break;
		}
		if (tries == 200 || kill(running, 0) == 0 || errno != ESRCH)
			break;
		usleep(10 * 1000);
	}
	close(fd);
	return running;
}

void
tend_ws_close(struct tend_ws *ws)
{
	if (ws->wlock) {
		close(ws->wlock - 1);
		ws->wlock = 0;
	}
	tend_engine_close(ws->eng);
	tend_ws_connectors_close(ws);
	for (size_t i = 0; i < ws->nplugins; i++) {
		free(ws->plugins[i].spec);
		free(ws->plugins[i].path);
		if (ws->plugins[i].dl)
			dlclose(ws->plugins[i].dl);
	}
	free(ws->plugins);
	for (size_t i = 0; i < ws->nconflicts; i++) {
		for (size_t k = 0; k < ws->conflicts[i].n; k++)
			free(ws->conflicts[i].rels[k]);
		free(ws->conflicts[i].rels);
		free(ws->conflicts[i].app);
	}
	free(ws->conflicts);
	for (size_t i = 0; i < ws->nold_dls; i++)
		dlclose(ws->old_dls[i]);
	free(ws->old_dls);
	if (ws->staging)
		rm_tree(ws->staging);
	free(ws->staging);
	tend_config_finish(&ws->cfg);
	free(ws->root);
	free(ws->conf_path);
	free(ws->state_dir);
	memset(ws, 0, sizeof *ws);
}

struct tend_app_config *
tend_ws_app(struct tend_ws *ws, const char *name)
{
	for (size_t i = 0; i < ws->cfg.napps; i++)
		if (strcmp(ws->cfg.apps[i].name, name) == 0)
			return &ws->cfg.apps[i];
	return NULL;
}

int
tend_ws_add_code_apps(struct tend_ws *ws, const struct tend_main_opts *o)
{
	ws->code = o;
	for (size_t i = 0; i < o->napps; i++) {
		const struct tend_code_app *ca = &o->apps[i];
		struct tend_diags d = {0};
		struct tend_config tmp;
		struct tend_buf text = TEND_BUF_INIT;

		if (tend_ws_app(ws, ca->name))
			return tend_error_set(TEND_EINVALID,
			    "app %s is defined twice (tend.conf and code)",
			    ca->name);
		/* go through the parser: the same validation as tend.conf */
		tend_buf_printf(&text, "[app \"%s\"]\nsource = \"%s\"\n"
				       "target = \"%s\"\ndeclare = \"plugin code "
				       "%s\"\n",
		    ca->name, ca->source, ca->target, ca->name);
		int rc = tend_config_parse(text.ptr, text.len, "(code)", &tmp, &d);
		tend_buf_release(&text);
		if (rc) {
			char *msg = tend_diags_format(&d);

			tend_error_set(TEND_EINVALID, "app %s: %s", ca->name,
			    msg);
			free(msg);
			tend_diags_finish(&d);
			return TEND_EINVALID;
		}
		tmp.apps[0].declare = TEND_DECLARE_CODE;
		tmp.apps[0].code_fn = (void *)(uintptr_t)ca->declare;
		tmp.apps[0].code_version = ca->logic_version;
		ws->cfg.apps = tend_xrealloc(ws->cfg.apps,
		    (ws->cfg.napps + 1) * sizeof *ws->cfg.apps);
		ws->cfg.apps[ws->cfg.napps++] = tmp.apps[0];
		tmp.napps = 0;
		tend_config_finish(&tmp);
	}
	return 0;
}

/* Load `declare = plugin FILE.so SYMBOL` once; FILE is relative to the
 * workspace. Its bytes are part of the app's logic fingerprint. */
/* Copy the whole of fd (from its start) to a new file at `to`. */
static int
copy_file(int fd, const char *to)
{
	char buf[65536];
	off_t off = 0;
	ssize_t n;
	int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);

	if (out < 0)
		return -1;
	while ((n = pread(fd, buf, sizeof buf, off)) > 0) {
		if (write(out, buf, (size_t)n) != n) {
			n = -1;
			break;
		}
		off += n;
	}
	if (close(out) != 0 || n < 0) {
		unlink(to);
		return -1;
	}
	return 0;
}

static struct plugin *
plugin_load(struct tend_ws *ws, const char *spec)
{
	for (size_t i = 0; i < ws->nplugins; i++)
		if (strcmp(ws->plugins[i].spec, spec) == 0)
			return ws->plugins[i].dl ? &ws->plugins[i] : NULL;
	ws->plugins = tend_xrealloc(ws->plugins,
	    (ws->nplugins + 1) * sizeof *ws->plugins);
	struct plugin *p = &ws->plugins[ws->nplugins++];
	memset(p, 0, sizeof *p);
	p->spec = tend_xstrdup(spec);
	const char *sp = strrchr(spec, ' ');
	char *file = strndup(spec, (size_t)(sp - spec));
	char *path = path_join(ws->root, file);
	struct tend_buf init = TEND_BUF_INIT, copy = TEND_BUF_INIT;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	p->path = tend_xstrdup(path);
	if (fd < 0 || hash_fd_fp(fd, &p->fp) != 0) {
		tend_error_set(TEND_ERROR, "plugin %s: %s", path, strerror(errno));
		goto fail;
	}
	/* dlopen of a path already open returns the old code: load a
	 * private copy of the file (its mapping outlives the copy) */
	tend_buf_printf(&copy, "%s/plugin-%u.so", ws->staging, ws->plugin_seq++);
	if (copy_file(fd, copy.ptr) != 0) {
		tend_error_set(TEND_ERROR, "plugin %s: copying to %s: %s", path,
		    copy.ptr, strerror(errno));
		goto fail;
	}
	p->dl = dlopen(copy.ptr, RTLD_NOW | RTLD_LOCAL);
	unlink(copy.ptr);
	if (!p->dl) {
		tend_error_set(TEND_ERROR, "plugin %s: %s", path, dlerror());
		goto fail;
	}
	*(void **)&p->fn = dlsym(p->dl, sp + 1);
	if (!p->fn) {
		tend_error_set(TEND_ERROR, "plugin %s: no symbol %s", path, sp + 1);
		dlclose(p->dl);
		p->dl = NULL;
		goto fail;
	}
	tend_buf_printf(&init, "%s_init", sp + 1);
	tend_plugin_init_fn *initfn;
	*(void **)&initfn = dlsym(p->dl, init.ptr);
	p->has_init = initfn != NULL;
	if (initfn && initfn(ws->eng) != 0) {
		tend_error_set(TEND_ERROR, "plugin %s: %s failed: %s", path,
		    init.ptr, tend_error_last());
		dlclose(p->dl);
		p->dl = NULL;
		goto fail;
	}
	close(fd);
	free(file);
	free(path);
	tend_buf_release(&init);
	tend_buf_release(&copy);
	return p;
fail:
	if (fd >= 0)
		close(fd);
	free(file);
	free(path);
	tend_buf_release(&init);
	tend_buf_release(&copy);
	return NULL;
}

int
tend_ws_refresh_plugins(struct tend_ws *ws, struct tend_buf *notes)
{
	int n = 0;

	for (size_t i = 0; i < ws->nplugins;) {
		struct plugin *p = &ws->plugins[i];
		struct tend_fp fp;
		int fd = open(p->path, O_RDONLY | O_CLOEXEC);
		bool same = fd >= 0 && hash_fd_fp(fd, &fp) == 0 &&
		    tend_fp_equal(&fp, &p->fp);

		if (fd >= 0)
			close(fd);
		if (same && p->dl) {
			i++;
			continue;
		}
		if (p->dl && p->has_init) {
			tend_buf_printf(notes, "plugin %s changed, but it registers "
					       "connectors: restart the agent to "
					       "load it\n", p->path);
			i++;
			continue;
		}
		/* loaded again on its next use; the old code stays mapped
		 * (nothing points into it after this pass, but cheap) */
		if (p->dl) {
			ws->old_dls = tend_xrealloc(ws->old_dls,
			    (ws->nold_dls + 1) * sizeof *ws->old_dls);
			ws->old_dls[ws->nold_dls++] = p->dl;
		}
		free(p->spec);
		free(p->path);
		ws->plugins[i] = ws->plugins[--ws->nplugins];
		n++;
	}
	tend_ws_connectors_changed(ws, notes);
	return n;
}

char **
tend_ws_plugin_files(struct tend_ws *ws, size_t *n)
{
	char **v = tend_xcalloc(ws->cfg.napps + 1, sizeof *v);

	*n = 0;
	for (size_t i = 0; i < ws->cfg.napps; i++) {
		struct tend_app_config *a = &ws->cfg.apps[i];
		const char *sp;

		if (a->declare != TEND_DECLARE_PLUGIN || !a->declare_arg ||
		    !(sp = strrchr(a->declare_arg, ' ')))
			continue;
		char *file = strndup(a->declare_arg,
		    (size_t)(sp - a->declare_arg));
		if (!file)
			abort();
		v[(*n)++] = path_join(ws->root, file);
		free(file);
	}
	tend_ws_connector_files(ws, &v, n);
	return v;
}

/* ---- source items ---- */

struct sig {
	uint64_t size, mtime_ns, ctime_ns, ino;
	uint32_t mode;
	bool trusted; /* not racy when stored */
	struct tend_fp fp;
	/* the item's component last committed with this logic and this
	 * target generation: while both hold and the signature is unchanged,
	 * the component is kept without being looked at */
	bool stamped;
	struct tend_fp logic;
	uint64_t gen_id, gen_schema;
};

struct item {
	char *rel;
	size_t len;
	struct sig sig;
	bool hashed; /* read now: the SIG row needs writing */
	bool ran;    /* its declaration ran and succeeded: new outputs */
	bool unchanged; /* signature trusted and equal to the stored one */
	bool kept;      /* kept by the fast path, not mounted */
	bool restamp;   /* stamp written after the pass */
	bool sig_done;  /* its SIG row settled with its component */
	bool had;	/* a signature was stored: seen in an earlier pass */
	int read_errno; /* why it could not be read (sig.mode == 0) */
	struct tend_fp old_fp; /* the content it had then */
	/* exec run ahead of its component, in parallel with others */
	bool job_done;
	int job_rc;
	char *job_msg, *job_out, *job_dir;
	/* the entries it declared, [u16 len][name][fp16]..., from the SIG
	 * row, or collected when it ran: the manifest lists them */
	struct tend_buf outs;
};

struct run {
	struct tend_ws *ws;
	struct tend_app_config *app;
	const struct tend_sync_opts *o;
	struct tend_app_result *res;
	char *source;	     /* absolute */
	struct item *items;
	size_t nitems, citems;
	char **vanished;     /* seen last time, gone now */
	size_t nvanished;
	bool hold;	     /* the brake holds their deletes */
	/* a sync --full of the app was interrupted: its components may hold
	 * unsettled states under stamped rows, so no source is kept
	 * without a look this pass */
	bool unsure;
	bool rows_done; /* the pass's SIG rows are written (pass_done) */
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

/* For tend_plugin_entry(): passes run on one thread, one at a time. */
static struct run *current_run;

static uint64_t
ts_ns(const struct timespec *t)
{
	return (uint64_t)t->tv_sec * 1000000000ull + (uint64_t)t->tv_nsec;
}

static void
sig_of(struct sig *s, const struct stat *st)
{
	s->size = (uint64_t)st->st_size;
	s->mtime_ns = ts_ns(&st->st_mtim);
	s->ctime_ns = ts_ns(&st->st_ctim);
	s->ino = (uint64_t)st->st_ino;
	s->mode = (uint32_t)st->st_mode;
}

static bool
sig_same(const struct sig *a, const struct sig *b)
{
	return a->size == b->size && a->mtime_ns == b->mtime_ns &&
	    a->ctime_ns == b->ctime_ns && a->ino == b->ino && a->mode == b->mode;
}

static void
sig_key(struct tend_buf *k, const char *app, const char *rel, size_t len)
{
	tend_buf_reset(k);
	tend_buf_puts(k, app);
	tend_buf_putc(k, 0);
	if (len <= 400)
		tend_buf_put(k, rel, len);
	else {
		/* LMDB keys are at most 511 bytes: long paths by digest */
		struct tend_fp fp = tend_fp_bytes(rel, len);

		tend_buf_put(k, rel, 300);
		tend_buf_putc(k, 0xff);
		tend_buf_put(k, fp.b, 16);
	}
}

#define SIG_FIXED (1 + 32 + 4 + 1 + 16 + 1 + 16 + 16)

static void
sig_encode(struct tend_buf *b, const struct sig *s, const struct tend_buf *outs)
{
	uint64_t v[4] = {s->size, s->mtime_ns, s->ctime_ns, s->ino};
	uint64_t g[2] = {s->gen_id, s->gen_schema};

	tend_buf_putc(b, SIG_VERSION);
	tend_buf_put(b, v, sizeof v);
	tend_buf_put(b, &s->mode, 4);
	tend_buf_putc(b, s->trusted);
	tend_buf_put(b, s->fp.b, 16);
	tend_buf_putc(b, s->stamped);
	tend_buf_put(b, s->logic.b, 16);
	tend_buf_put(b, g, sizeof g);
	tend_buf_put(b, outs->ptr, outs->len);
}

static bool
sig_decode(const struct tend_bytes *v, struct sig *s)
{
	uint64_t x[4];

	if (v->len < SIG_FIXED || v->data[0] != SIG_VERSION)
		return false;
	memcpy(x, v->data + 1, 32);
	s->size = x[0];
	s->mtime_ns = x[1];
	s->ctime_ns = x[2];
	s->ino = x[3];
	memcpy(&s->mode, v->data + 33, 4);
	s->trusted = v->data[37] != 0;
	memcpy(s->fp.b, v->data + 38, 16);
	s->stamped = v->data[54] != 0;
	memcpy(s->logic.b, v->data + 55, 16);
	uint64_t g[2];
	memcpy(g, v->data + 71, 16);
	s->gen_id = g[0];
	s->gen_schema = g[1];
	return true;
}

/* A symlink's content is its target's text, never what it points to;
 * `text` (PATH_MAX bytes) gets it too. */
static int
hash_link(int dirfd, const char *leaf, struct tend_fp *out, char *text)
{
	char buf[PATH_MAX];
	ssize_t n = readlinkat(dirfd, leaf, buf, sizeof buf - 1);

	if (n < 0)
		return -1;
	buf[n] = '\0';
	*out = tend_fs_link_fp(buf);
	if (text)
		memcpy(text, buf, (size_t)n + 1);
	return 0;
}

static int
hash_file(int dirfd, const char *leaf, struct tend_fp *out)
{
	int fd, rc;

	if (tend_failpoint("read", leaf))
		return -1;
	if ((fd = openat(dirfd, leaf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return -1;
	rc = hash_fd_fp(fd, out);
	close(fd);
	return rc;
}

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

static int
cmp_bytes(const void *a, size_t alen, const void *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	return c ? c : (alen > blen) - (alen < blen);
}

/* The stored signature row of the key in s->key, or not found. */
static int
sig_lookup(struct scan *s, size_t rel_len, struct tend_bytes *v)
{
	if (rel_len > 400) /* digested keys are out of path order */
		return tend_store_get(s->txn, TEND_T_SIG, s->key.ptr,
		    s->key.len, v);
	if (!s->started) {
		size_t plen = strlen(s->r->app->name) + 1;

		s->started = true;
		tend_store_iter_init(&s->it, s->txn, TEND_T_SIG, s->key.ptr,
		    plen);
		s->cur_valid = tend_store_iter_next(&s->it, &s->ck, &s->cv) == 1;
	}
	while (s->cur_valid &&
	    cmp_bytes(s->ck.data, s->ck.len, s->key.ptr, s->key.len) < 0)
		s->cur_valid = tend_store_iter_next(&s->it, &s->ck, &s->cv) == 1;
	if (s->cur_valid &&
	    cmp_bytes(s->ck.data, s->ck.len, s->key.ptr, s->key.len) == 0) {
		*v = s->cv;
		return 0;
	}
	return TEND_ENOTFOUND;
}

/*
 * Add the source file rel (stat st, stored signature row `row` or NULL)
 * to the run: unchanged if its trusted signature matches, else read and
 * hashed; a signature within the racy window is stored untrusted.
 */
static void
add_item(struct run *r, const char *rel, size_t len, const struct stat *st,
    const struct tend_bytes *row, int dirfd, const char *leaf)
{
	struct item it = {0};
	struct sig old;
	bool have = row && sig_decode(row, &old);

	it.rel = tend_xmemdup(rel, len + 1);
	it.len = len;
	it.outs = (struct tend_buf)TEND_BUF_INIT;
	sig_of(&it.sig, st);
	if (have) {
		tend_buf_put(&it.outs, row->data + SIG_FIXED,
		    row->len - SIG_FIXED);
		it.had = true;
		it.old_fp = old.fp;
	}
	if (have && old.trusted && sig_same(&old, &it.sig)) {
		it.sig = old;
		it.unchanged = true;
	} else {
		if ((S_ISLNK(st->st_mode) ? hash_link(dirfd, leaf, &it.sig.fp,
			 NULL) : hash_file(dirfd, leaf, &it.sig.fp)) != 0) {
			/* unreadable: an error of this item, reported by its
			 * component (the target keeps what it had) */
			it.read_errno = errno ? errno : EIO;
			memset(&it.sig.fp, 0, sizeof it.sig.fp);
			it.sig.mode = 0;
		}
		it.hashed = true;
		it.sig.trusted = it.sig.mode != 0 &&
		    it.sig.mtime_ns + RACY_NS < r->scan_ns &&
		    it.sig.ctime_ns + RACY_NS < r->scan_ns;
		r->res->hashed++;
	}
	if (r->nitems == r->citems) {
		r->citems = r->citems ? r->citems * 2 : 256;
		r->items = tend_xrealloc(r->items, r->citems * sizeof *r->items);
	}
	r->items[r->nitems++] = it;
	r->res->files++;
	r->res->new_items += !have;
}

static int
on_file(const char *rel, size_t len, int dirfd, const char *leaf,
    const struct stat *st, void *arg)
{
	struct scan *s = arg;
	struct run *r = s->r;
	struct tend_bytes v;

	sig_key(&s->key, r->app->name, rel, len);
	add_item(r, rel, len, st, sig_lookup(s, len, &v) == 0 ? &v : NULL,
	    dirfd, leaf);
	if (r->o->progress && (r->nitems & 1023) == 0)
		r->o->progress(r->o->arg, r->app->name, r->res->files,
		    r->res->hashed);
	return 0;
}

static int
cmp_rel(const void *a, const void *b)
{
	const struct item *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->rel, y->rel, n);

	return c ? c : (x->len > y->len) - (x->len < y->len);
}

static bool
have_item(struct run *r, const char *rel, size_t len)
{
	struct item probe = {.rel = (char *)rel, .len = len};

	if (!r->nitems)
		return false;
	return bsearch(&probe, r->items, r->nitems, sizeof *r->items,
		   cmp_rel) != NULL;
}

/* Previously seen source items: how many, and which vanished. Both the
 * rows and the items are in path order: a merge. */
static int
count_previous(struct run *r, struct tend_txn *txn, size_t *nprev)
{
	struct tend_buf prefix = TEND_BUF_INIT;
	struct tend_iter it;
	struct tend_bytes k, v;
	size_t j = 0;
	int more;

	*nprev = 0;
	tend_buf_puts(&prefix, r->app->name);
	tend_buf_putc(&prefix, 0);
	tend_store_iter_init(&it, txn, TEND_T_SIG, prefix.ptr, prefix.len);
	while ((more = tend_store_iter_next(&it, &k, &v)) == 1) {
		const char *rel = (const char *)k.data + prefix.len;
		size_t len = k.len - prefix.len;
		struct item probe = {.rel = (char *)rel, .len = len};

		(*nprev)++;
		if (memchr(rel, 0xff, len))
			continue; /* a digested long path: never vanishes here */
		while (j < r->nitems && cmp_rel(&r->items[j], &probe) < 0)
			j++;
		if ((j < r->nitems && cmp_rel(&r->items[j], &probe) == 0) ||
		    have_item(r, rel, len))
			continue;
		r->vanished = tend_xrealloc(r->vanished,
		    (r->nvanished + 1) * sizeof *r->vanished);
		r->vanished[r->nvanished++] = strndup(rel, len);
	}
	tend_store_iter_finish(&it);
	tend_buf_release(&prefix);
	return more < 0 ? more : 0;
}

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

/* The fingerprint of content as the fs connector and the walk compute it
 * (a streamed hash), so records agree however the bytes arrived. */
static struct tend_fp
tend_fp_bytes_stream(const void *data, size_t len)
{
	struct tend_hasher h;

	tend_hasher_init(&h);
	tend_hasher_begin_stream(&h);
	tend_hasher_raw(&h, data, len);
	return tend_hasher_final(&h);
}

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
	if (rc == 0 && r->cur) {
		uint16_t len = (uint16_t)strlen(name);

		tend_buf_put(&r->cur->outs, &len, 2);
		tend_buf_put(&r->cur->outs, name, len);
		tend_buf_put(&r->cur->outs, fp->b, 16);
	}
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
		fp = tend_fp_bytes_stream(data, len);
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

	if (stat(path, &st) != 0 || hash_file(AT_FDCWD, path, fp) != 0)
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
	if (hash_file(dirfd, leaf, &fp) != 0) {
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
		struct tend_walk_opts wo = {0};

		return tend_walk(dir, &wo, on_out_file, &w, NULL);
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

static struct tend_fp item_input(const struct item *it);

/*
 * Run the exec of every item that will need it, `jobs` at a time, before
 * the components are mounted (they run one after another): items kept by
 * the fast path or whose memo matches are left out.
 */
static void prerun_exec(struct tend_comp *c, struct run *r, bool fast,
    uint64_t gid, uint64_t gsc);

static void
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
		    (fast && it->unchanged && it->sig.stamped &&
			tend_fp_equal(&it->sig.logic, &r->logic) &&
			it->sig.gen_id == gid && it->sig.gen_schema == gsc) ||
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

		it->job_done = true;
		it->job_rc = rcs[i];
		it->job_msg = msgs[i];
		it->job_out = xs[i].out;
		it->job_dir = xs[i].dir;
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
	it->outs = (struct tend_buf)TEND_BUF_INIT;
	r->cur = it;
	char *src = path_join(r->source, it->rel);
	if (r->app->declare == TEND_DECLARE_COPY &&
	    S_ISLNK(it->sig.mode)) {
		rc = declare_link(c, r, name.ptr, it->rel, src);
	} else if (r->app->declare == TEND_DECLARE_COPY) {
		rc = declare_entry(c, r, name.ptr, src, &it->sig.fp,
		    it->sig.size, mode);
	} else if (r->app->declare == TEND_DECLARE_EXEC && it->job_done) {
		if ((rc = it->job_rc) != 0)
			tend_error_set(rc, "exec `%s` on %s: %s",
			    r->app->declare_arg, it->rel,
			    it->job_msg ? it->job_msg : "failed");
		else
			rc = declare_outputs(c, r, name.ptr, mode, it->job_out,
			    it->job_dir);
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

	for (size_t i = 0; i < r->nitems; i++)
		args[i] = r->items[i].rel;
	rc = run_exec(c, r, NULL, r->app->target_path, 0644, args);
	free(args);
	return rc;
}

static struct tend_fp
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
 * with its digest ("<xxh3-128 hex>  <name>"), sorted by name. It is an
 * attachment of the directory, not a child: switching it off deletes it,
 * and it is never mistaken for an entry.
 */
/* The entries an outs list (a SIG row's tail, an item's outs) names:
 * each is a u16 length, the name, its 16-byte digest. The next one from
 * *pos; false at the end. */
static bool
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

/* The outs of the vanished items whose deletes the brake holds, from
 * their SIG rows, appended to `out`. */
static int
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
		if (tend_store_get(txn, TEND_T_SIG, k.ptr, k.len, &v) == 0 &&
		    v.len > SIG_FIXED)
			tend_buf_put(out, v.data + SIG_FIXED, v.len - SIG_FIXED);
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
		tend_buf_puthex(&text, lines[i].fp, 16);
		tend_buf_puts(&text, "  ");
		tend_buf_put(&text, lines[i].name, lines[i].len);
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

/* Components per write batch: one batch for a git target (one commit
 * per pass), else the engine's 4,096, or TEND_BATCH (the tests' way to
 * cross batch boundaries with a small tree). */
static size_t
app_batch(const struct tend_app_config *app)
{
	const char *e = getenv("TEND_BATCH");

	if (app->target == TEND_TARGET_GIT)
		return SIZE_MAX;
	return e && atoi(e) > 0 ? (size_t)atoi(e) : 0;
}

/* A source item's memoized component: full and incremental passes mount
 * it the same way. */
static int
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
static void
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
static void
held_sources(struct tend_app_result *res, const struct run *r)
{
	res->held_sources = tend_xcalloc(r->nvanished + 1,
	    sizeof *res->held_sources);
	for (size_t i = 0; i < r->nvanished; i++)
		res->held_sources[i] = tend_xstrdup(r->vanished[i]);
	res->nheld_sources = r->nvanished;
}

static int
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
	for (size_t i = 0; i < r->nitems; i++) {
		struct item *it = &r->items[i];
		struct tend_key path[2] = {tend_key_symbol("files"),
		    tend_key_strn(it->rel, it->len)};

		/* unchanged signature, same logic, same target generation,
		 * and it committed with them last time: nothing to look at */
		if (fast && it->unchanged && it->sig.stamped &&
		    tend_fp_equal(&it->sig.logic, &r->logic) &&
		    it->sig.gen_id == gid && it->sig.gen_schema == gsc) {
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

/* ---- exclusive targets: what no entry declares ---- */

static int cmp_str(const void *a, const void *b);

struct strays {
	char **names; /* declared entry names, sorted */
	size_t n, cap;
	const char *shown; /* the target's state path */
	bool remove;
	tend_stray_fn *fn;
	void *arg;
	size_t count;
	int rc;
};

static void
strays_add(struct strays *s, const char *name, size_t len)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 256;
		s->names = tend_xrealloc(s->names, s->cap * sizeof *s->names);
	}
	s->names[s->n++] = tend_xmemdup(name, len + 1);
	s->names[s->n - 1][len] = '\0';
}

/* Is `rel` declared, or (dir) a directory with something declared under
 * it? */
static bool
strays_declared(const struct strays *s, const char *rel, bool dir)
{
	size_t lo = 0, hi = s->n, len = strlen(rel);

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (strcmp(s->names[mid], rel) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!dir)
		return lo < s->n && strcmp(s->names[lo], rel) == 0;
	for (; lo < s->n && strncmp(s->names[lo], rel, len) == 0; lo++)
		if (s->names[lo][len] == '/')
			return true;
	return false;
}

static void
strays_rm(int dirfd, const char *leaf, bool dir)
{
	if (dir) {
		int fd = openat(dirfd, leaf, O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC);
		DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
		struct dirent *e;

		if (!d) {
			if (fd >= 0)
				close(fd);
			return;
		}
		while ((e = readdir(d)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
				struct stat st;

				if (fstatat(fd, e->d_name, &st,
					AT_SYMLINK_NOFOLLOW) == 0)
					strays_rm(fd, e->d_name,
					    S_ISDIR(st.st_mode));
			}
		closedir(d);
	}
	unlinkat(dirfd, leaf, dir ? AT_REMOVEDIR : 0);
}

/* In path order; never follows a link: a symlink is a stray like a
 * file. */
static void
strays_walk(struct strays *s, int dirfd, struct tend_buf *rel, int depth)
{
	DIR *d = fdopendir(dirfd);
	struct dirent *e;
	char **names = NULL;
	size_t n = 0;

	if (!d) {
		close(dirfd);
		return;
	}
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			names = tend_xrealloc(names, (n + 1) * sizeof *names);
			names[n++] = tend_xstrdup(e->d_name);
		}
	if (n > 1)
		qsort(names, n, sizeof *names, cmp_str);
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		size_t mark = rel->len;

		if (fstatat(dirfd, names[i], &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		bool dir = S_ISDIR(st.st_mode);
		if (rel->len)
			tend_buf_putc(rel, '/');
		tend_buf_puts(rel, names[i]);
		if (dir && strays_declared(s, rel->ptr, true)) {
			int fd = depth < 256 ? openat(dirfd, names[i],
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
					     : -1;
			if (fd >= 0)
				strays_walk(s, fd, rel, depth + 1);
		} else if (!strays_declared(s, rel->ptr, false)) {
			struct tend_buf shown = TEND_BUF_INIT;

			tend_buf_printf(&shown, "%s/%s%s", s->shown, rel->ptr,
			    dir ? "/" : "");
			s->count++;
			if (s->fn)
				s->fn(shown.ptr, s->arg);
			tend_buf_release(&shown);
			if (s->remove)
				strays_rm(dirfd, names[i], dir);
		}
		rel->len = mark;
		rel->ptr[mark] = '\0';
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
}

/* A git target's: its tree under the prefix, at the ref's tip */
static bool
git_stray_declared(const char *rel, bool dir, void *arg)
{
	return strays_declared(arg, rel, dir);
}

static void
git_stray(const char *rel, bool dir, void *arg)
{
	struct strays *s = arg;
	struct tend_buf shown = TEND_BUF_INIT;

	tend_buf_printf(&shown, "%s/%s%s", s->shown, rel, dir ? "/" : "");
	s->count++;
	if (s->fn)
		s->fn(shown.ptr, s->arg);
	tend_buf_release(&shown);
}

static int
git_strays(struct tend_ws *ws, struct tend_app_config *app, struct strays *s)
{
	struct tend_buf msg = TEND_BUF_INIT, shown = TEND_BUF_INIT;
	struct tend_git_spec spec;
	struct tend_key parts[3] = {tend_key_str(app->target_path),
	    tend_key_str(app->ref), tend_key_str(app->prefix ? app->prefix : "")};
	struct tend_key k = tend_key_tuple(parts, 3);
	char *repo = app->target_path[0] == '/' ? tend_xstrdup(app->target_path)
						: path_join(ws->root, app->target_path);
	size_t n;
	int rc;

	git_spec(app, &spec, &msg);
	tend_buf_puts(&shown, "/@tend/git/");
	tend_key_format(&shown, &k);
	s->shown = shown.ptr;
	struct tend_git_sweep sw = {
		.repo = repo,
		.state = ws->state_dir,
		.ref = app->ref,
		.prefix = app->prefix ? app->prefix : "",
		.spec = &spec,
		.message = "tend: sync --full: remove what the exclusive target "
			   "does not declare",
		.remove = s->remove,
		.declared = git_stray_declared,
		.stray = git_stray,
		.arg = s,
	};
	rc = tend_git_sweep(&sw, &n);
	s->shown = NULL;
	free(repo);
	tend_buf_release(&msg);
	tend_buf_release(&shown);
	return rc;
}

int
tend_app_strays(struct tend_ws *ws, struct tend_app_config *app, bool remove,
    tend_stray_fn *fn, void *arg, size_t *count)
{
	struct strays s = {.remove = remove, .fn = fn, .arg = arg};
	struct tend_buf prefix = TEND_BUF_INIT, rel = TEND_BUF_INIT;
	struct tend_txn *txn;
	struct tend_iter it;
	struct tend_bytes k, v;
	int rc, more;

	*count = 0;
	if (!app->exclusive || (app->target != TEND_TARGET_DIR &&
				   app->target != TEND_TARGET_GIT))
		return 0;
	if ((rc = tend_ws_open(ws)) ||
	    (rc = tend_store_read_begin(tend_engine_store(ws->eng), &txn)))
		return rc;
	/* what the app declared: its items' entries, as their SIG rows list
	 * them (the brake's held ones too), and its manifest */
	tend_buf_puts(&prefix, app->name);
	tend_buf_putc(&prefix, 0);
	tend_store_iter_init(&it, txn, TEND_T_SIG, prefix.ptr, prefix.len);
	while ((more = tend_store_iter_next(&it, &k, &v)) == 1) {
		const char *name;
		uint16_t len;

		for (size_t pos = SIG_FIXED;
		     outs_next(v.data, v.len, &pos, &name, &len);)
			strays_add(&s, name, len);
	}
	tend_store_iter_finish(&it);
	tend_store_read_end(txn);
	tend_buf_release(&prefix);
	if (more < 0)
		rc = more;
	if (app->manifest && app->target == TEND_TARGET_DIR)
		strays_add(&s, app->manifest_name, strlen(app->manifest_name));
	if (s.n > 1)
		qsort(s.names, s.n, sizeof *s.names, cmp_str);
	if (app->target == TEND_TARGET_GIT) {
		if (rc == 0)
			rc = git_strays(ws, app, &s);
	} else {
		struct tend_buf shown = TEND_BUF_INIT;

		tend_buf_printf(&shown, "/@tend/dir/%s", app->target_path);
		s.shown = shown.ptr;
		char *root = path_join(ws->root, app->target_path);
		int fd = rc ? -1 : open(root, O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC);

		free(root);
		if (fd >= 0) {
			tend_buf_puts(&rel, "");
			strays_walk(&s, fd, &rel, 0);
		}
		tend_buf_release(&shown);
	}
	tend_buf_release(&rel);
	for (size_t i = 0; i < s.n; i++)
		free(s.names[i]);
	free(s.names);
	*count = s.count;
	return rc;
}

/* ---- provenance ---- */

static void
fp_short(struct tend_buf *b, const struct tend_fp *fp)
{
	tend_buf_puthex(b, fp->b, 4);
}

static int
cmp_rel_str(const void *key, const void *elem)
{
	const char *k = key;
	const struct item *it = elem;
	size_t kl = strlen(k), n = kl < it->len ? kl : it->len;
	int c = memcmp(k, it->rel, n);

	return c ? c : (kl > it->len) - (kl < it->len);
}

/* The rest of a component's display path after "/APP", or NULL when
 * it is not one of r's app. */
static const char *
app_rest(struct run *r, const char *component)
{
	size_t al = strlen(r->app->name);

	if (component[0] != '/' ||
	    strncmp(component + 1, r->app->name, al) != 0)
		return NULL;
	return component + 1 + al;
}

/* The source item of a component "/APP/@files/REL" (items are sorted
 * by path once the walk is over) */
static struct item *
find_item(struct run *r, const char *component)
{
	const char *rest = app_rest(r, component);

	if (!rest || strncmp(rest, "/@files/", 8) != 0)
		return NULL;
	return bsearch(rest + 8, r->items, r->nitems, sizeof *r->items,
	    cmp_rel_str);
}

/* ---- conflicts (engine: tend_component_hooks) ---- */

/* The configured app a component belongs to, and the rest of its path */
static struct tend_app_config *
comp_app(struct tend_ws *ws, const char *component, const char **rest)
{
	for (size_t i = 0; i < ws->cfg.napps; i++) {
		const char *n = ws->cfg.apps[i].name;
		size_t len = strlen(n);

		if (component[0] == '/' && strncmp(component + 1, n, len) == 0 &&
		    (component[1 + len] == '/' || component[1 + len] == 0)) {
			*rest = component + 1 + len;
			return &ws->cfg.apps[i];
		}
	}
	return NULL;
}

/* An owner this pass did not mount (yet): a source item of the running
 * app is live if the walk found it; anything else of a configured app
 * (its target, its manifest) is; an app gone from tend.conf is not (its
 * states are taken over, as `tend drop` would let go of them). */
static bool
comp_live(const char *component, void *arg)
{
	struct run *r = current_run;
	const char *rest;
	struct tend_app_config *app = comp_app(arg, component, &rest);

	if (!app)
		return false;
	if (!r || app != r->app || strncmp(rest, "/@files/", 8) != 0)
		return true;
	return have_item(r, rest + 8, strlen(rest + 8));
}

/* "/site/@files/sub/a.md" -> "src/sub/a.md" */
static void
comp_name(const char *component, struct tend_buf *out, void *arg)
{
	const char *rest;
	struct tend_app_config *app = comp_app(arg, component, &rest);

	if (app && strncmp(rest, "/@files/", 8) == 0) {
		if (strcmp(app->source, ".") != 0) {
			tend_buf_puts(out, app->source);
			tend_buf_putc(out, '/');
		}
		tend_buf_puts(out, rest + 8);
	} else if (app && strcmp(rest, "/@aggregate") == 0)
		tend_buf_printf(out, "app %s (every source)", app->name);
	else if (app && !*rest)
		tend_buf_printf(out, "app %s", app->name);
	else
		tend_buf_puts(out, component);
}

static const struct tend_component_hooks comp_hooks = {comp_live, comp_name};

static void
on_conflict(const struct tend_event *ev, void *arg)
{
	struct run *r = current_run;
	const char *rest;

	if (!r || ev->status != TEND_ECONFLICT || ev->preview ||
	    comp_app(arg, ev->component, &rest) != r->app ||
	    strncmp(rest, "/@files/", 8) != 0)
		return;
	r->conflicted = tend_xrealloc(r->conflicted,
	    (r->nconflicted + 1) * sizeof *r->conflicted);
	r->conflicted[r->nconflicted++] = tend_xstrdup(rest + 8);
}

static struct tend_conflicts *
ws_conflicts(struct tend_ws *ws, const char *app)
{
	for (size_t i = 0; i < ws->nconflicts; i++)
		if (strcmp(ws->conflicts[i].app, app) == 0)
			return &ws->conflicts[i];
	ws->conflicts = tend_xrealloc(ws->conflicts,
	    (ws->nconflicts + 1) * sizeof *ws->conflicts);
	ws->conflicts[ws->nconflicts] = (struct tend_conflicts){
	    tend_xstrdup(app), NULL, 0};
	return &ws->conflicts[ws->nconflicts++];
}

/* After a pass that ran every item of the last conflicts (a full pass,
 * or a partial one given them too): this pass's conflicts replace them. */
static void
keep_conflicts(struct run *r)
{
	struct tend_conflicts *k = ws_conflicts(r->ws, r->app->name);

	for (size_t i = 0; i < k->n; i++)
		free(k->rels[i]);
	free(k->rels);
	k->rels = r->conflicted;
	k->n = r->nconflicted;
	r->conflicted = NULL;
	r->nconflicted = 0;
}

int
tend_app_why(const char *component, struct tend_buf *out)
{
	struct run *r = current_run;
	const char *rest = r ? app_rest(r, component) : NULL;

	if (!rest)
		return -1;
	if (strcmp(rest, "/@aggregate") == 0) {
		tend_buf_printf(out, "aggregate of %zu source files (%llu read)",
		    r->nitems, (unsigned long long)r->res->hashed);
		return 0;
	}
	if (strncmp(rest, "/@files/", 8) != 0) {
		tend_buf_puts(out, "the app's target container");
		return 0;
	}
	const char *rel = rest + 8;
	for (size_t i = 0; i < r->nvanished; i++)
		if (strcmp(r->vanished[i], rel) == 0) {
			tend_buf_printf(out, "source %s deleted", rel);
			return 0;
		}
	struct item *it = find_item(r, component);
	if (!it)
		return -1;
	if (!it->had)
		tend_buf_printf(out, "new source %s", rel);
	else if (it->hashed && !tend_fp_equal(&it->old_fp, &it->sig.fp)) {
		tend_buf_printf(out, "source %s changed ", rel);
		fp_short(out, &it->old_fp);
		tend_buf_puts(out, " -> ");
		fp_short(out, &it->sig.fp);
	} else if (it->hashed)
		tend_buf_printf(out, "source %s touched, same content", rel);
	else if (it->sig.stamped && !tend_fp_equal(&it->sig.logic, &r->logic))
		tend_buf_puts(out, "logic changed (the app's declaration)");
	else if (r->o->full)
		tend_buf_puts(out, "full pass (--full)");
	else
		tend_buf_puts(out, "its target container changed");
	return 0;
}

/* ---- SIG upkeep ---- */

/* Does the item's SIG row need writing? (read now, ran, or restamped) */
static bool
sig_wanted(const struct item *it)
{
	return (it->hashed || it->ran || it->restamp) && it->sig.mode != 0;
}

/* ... and was it not settled with its component already? */
static bool
sig_due(const struct item *it)
{
	return sig_wanted(it) && !it->sig_done;
}

static int
put_sig(struct tend_txn *txn, struct run *r, struct item *it,
    struct tend_buf *k, struct tend_buf *v)
{
	sig_key(k, r->app->name, it->rel, it->len);
	tend_buf_reset(v);
	sig_encode(v, &it->sig, &it->outs);
	return tend_store_put(txn, TEND_T_SIG, k->ptr, k->len, v->ptr, v->len);
}

static int
sig_body(struct tend_txn *txn, void *arg)
{
	struct run *r = arg;
	struct tend_buf k = TEND_BUF_INIT, v = TEND_BUF_INIT;
	int rc = 0;

	for (size_t i = 0; i < r->nitems && rc == 0; i++)
		if (sig_due(&r->items[i]))
			rc = put_sig(txn, r, &r->items[i], &k, &v);
	/* forget vanished items, unless the brake holds them (digested long
	 * paths are not in the list: they stay, harmless, until drop) */
	for (size_t i = 0; rc == 0 && !r->hold && i < r->nvanished; i++) {
		sig_key(&k, r->app->name, r->vanished[i], strlen(r->vanished[i]));
		rc = tend_store_del(txn, TEND_T_SIG, k.ptr, k.len);
	}
	tend_buf_release(&k);
	tend_buf_release(&v);
	return rc;
}

/*
 * A partial pass writes an item's SIG row in the transaction that settles
 * its component (tend_engine_set_settle_hook): one durable commit per
 * pass fewer, and the row commits with what it describes. (A full pass
 * restamps its items after the run: there the rows wait for that.)
 */
static int
settle_sig(struct tend_txn *txn, const char *component, void *arg)
{
	struct run *r = arg;
	struct item *it = find_item(r, component);
	struct tend_buf k = TEND_BUF_INIT, v = TEND_BUF_INIT;
	int rc = 0;

	/* a failed component's row is written all the same. sig_wanted,
	 * not sig_due: a body retried after the map grew writes the row
	 * again. If the transaction fails for good the row stays old: its
	 * signature no longer matches the file, which the next pass reads
	 * again. */
	if (it && sig_wanted(it)) {
		rc = put_sig(txn, r, it, &k, &v);
		it->sig_done = rc == 0;
	}
	tend_buf_release(&k);
	tend_buf_release(&v);
	return rc;
}

/* ---- one pass ---- */

static struct tend_fp
app_logic(const struct tend_app_config *a)
{
	struct tend_hasher h;

	tend_hasher_init(&h);
	tend_hasher_str(&h, "tend-app-logic-1");
	tend_hasher_str(&h, a->declare_text);
	tend_hasher_str(&h, a->name_tmpl ? a->name_tmpl : "{path}");
	tend_hasher_int(&h, a->target);
	tend_hasher_str(&h, a->target_path);
	/* a git target's container is (repository, ref, prefix): another
	 * ref or prefix is another container, which every item declares
	 * into anew (a memo would keep them in the old one, deleted) */
	if (a->target == TEND_TARGET_GIT) {
		tend_hasher_str(&h, a->ref ? a->ref : "");
		tend_hasher_str(&h, a->prefix ? a->prefix : "");
	}
	/* a plugin target's type and keys: another container, maybe */
	if (a->target == TEND_TARGET_PLUGIN) {
		tend_hasher_str(&h, a->target_type);
		for (size_t i = 0; i < a->plugin_values.n; i++)
			tend_hasher_str(&h, a->plugin_values.v[i]);
	}
	/* outputs of exec and plugin items are remembered for the
	 * manifest only when they run: switching it on runs them */
	if (a->declare != TEND_DECLARE_COPY)
		tend_hasher_bool(&h, a->manifest);
	if (a->declare == TEND_DECLARE_CODE)
		tend_hasher_int(&h, a->code_version);
	return tend_hasher_final(&h);
}

/* Is `inner` (relative to the workspace) inside `outer`? Then the
 * relative path from outer to inner goes into *rel. */
static bool
inside(const char *outer, const char *inner, char **rel)
{
	size_t ol = strlen(outer);

	if (strcmp(outer, ".") == 0) {
		*rel = strdup(inner);
		return true;
	}
	if (strncmp(outer, inner, ol) != 0 || (inner[ol] != '/' && inner[ol]))
		return false;
	*rel = strdup(inner[ol] ? inner + ol + 1 : ".");
	return true;
}

static void
rm_tree(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;

	if (d) {
		while ((e = readdir(d))) {
			char *p;

			if (strcmp(e->d_name, ".") == 0 ||
			    strcmp(e->d_name, "..") == 0)
				continue;
			p = path_join(path, e->d_name);
			struct stat st;
			if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
				rm_tree(p);
			else
				unlink(p);
			free(p);
		}
		closedir(d);
	}
	rmdir(path);
}

/* What a walk of the app's source never visits: a target inside it and
 * the state directory (skip[] holds 3). False if the target directory is
 * the source itself. */
static bool
source_skips(struct tend_ws *ws, struct tend_app_config *app, char **skip,
    size_t *nskip)
{
	char *rel;

	if (app->target != TEND_TARGET_GIT &&
	    inside(app->source, app->target_path, &rel)) {
		if (app->target == TEND_TARGET_DIR && strcmp(rel, ".") == 0) {
			free(rel);
			return false;
		}
		skip[(*nskip)++] = rel;
	}
	if (inside(app->source, ws->cfg.state, &rel))
		skip[(*nskip)++] = rel;
	return true;
}

static struct tend_walk_opts
walk_opts(const struct tend_app_config *app, char **skip, size_t nskip)
{
	struct tend_walk_opts wo = {
		.include = app->include.v,
		.ninclude = app->include.n,
		.exclude = app->exclude.v,
		.nexclude = app->exclude.n,
		.gitignore = app->gitignore,
		.skip = skip,
		.nskip = nskip,
		.links = strcmp(app->symlinks, "skip") != 0,
	};

	return wo;
}

/* For plan: the entries the vanished items declared (their SIG rows
 * list them), whose deletes the brake holds. */
static void
held_entries(struct run *r)
{
	struct tend_buf outs = TEND_BUF_INIT, key = TEND_BUF_INIT;
	struct tend_buf disp = TEND_BUF_INIT;
	const char *name;
	uint16_t len;

	if (r->app->target == TEND_TARGET_FILE) {
		r->res->held = tend_xcalloc(1, sizeof *r->res->held);
		r->res->held[r->res->nheld++] = tend_xstrdup(
		    r->app->target_path);
		r->res->held_update = true;
		return;
	}
	if (!r->target_name || held_outs(r, &outs))
		return;
	for (size_t pos = 0; outs_next(outs.ptr, outs.len, &pos, &name, &len);) {
		struct tend_key k = tend_key_strn(name, len);

		tend_buf_reset(&key);
		tend_buf_reset(&disp);
		tend_key_format(&key, &k);
		tend_display_path(&disp, r->target_name, key.ptr);
		r->res->held = tend_xrealloc(r->res->held,
		    (r->res->nheld + 1) * sizeof *r->res->held);
		r->res->held[r->res->nheld++] = tend_buf_detach(&disp, NULL);
	}
	tend_buf_release(&outs);
	tend_buf_release(&key);
	tend_buf_release(&disp);
}

/* After an engine pass: bring the signatures up to date, report held
 * deletes. */
static int
pass_done(struct run *r, int rc)
{
	bool due = !r->hold && r->nvanished;

	if (r->o->preview && r->hold)
		held_entries(r);

	if (!r->o->preview)
		keep_conflicts(r);

	for (size_t i = 0; i < r->nitems && !due; i++)
		due = sig_due(&r->items[i]);
	if (!r->o->preview && due) {
		int src = tend_store_write_settle(
		    tend_engine_store(r->ws->eng), sig_body, r);
		if (src && !rc)
			rc = src;
		r->rows_done = src == 0;
	} else
		r->rows_done = true;
	if (r->res->held_deletes && rc == 0 && !r->o->preview)
		rc = tend_error_set(TEND_ERROR,
		    "%s: %llu source items vanished; their deletes are held "
		    "back (tend sync --allow-delete, or raise max-delete)",
		    r->app->name, (unsigned long long)r->res->held_deletes);
	return rc;
}

static void
run_free(struct run *r, char **skip, size_t nskip)
{
	free(r->target_name);
	for (size_t i = 0; i < r->nconflicted; i++)
		free(r->conflicted[i]);
	free(r->conflicted);
	if (r->stage)
		rm_tree(r->stage);
	free(r->stage);
	for (size_t i = 0; i < nskip; i++)
		free(skip[i]);
	for (size_t i = 0; i < r->nitems; i++) {
		free(r->items[i].rel);
		tend_buf_release(&r->items[i].outs);
		free(r->items[i].job_msg);
		free(r->items[i].job_out);
		free(r->items[i].job_dir);
	}
	free(r->items);
	for (size_t i = 0; i < r->nvanished; i++)
		free(r->vanished[i]);
	free(r->vanished);
	free(r->source);
}

/* META "full/APP": a sync --full of APP is under way (set before its
 * first write, gone once it finished) */
struct full_mark {
	const char *app;
	bool on;
};

static int
full_mark_body(struct tend_txn *txn, void *arg)
{
	struct full_mark *m = arg;
	char key[300];

	snprintf(key, sizeof key, "full/%s", m->app);
	if (m->on)
		return tend_store_put(txn, TEND_T_META, key, strlen(key), "1",
		    1);
	int rc = tend_store_del(txn, TEND_T_META, key, strlen(key));
	return rc == TEND_ENOTFOUND ? 0 : rc;
}

static int
full_mark(struct tend_ws *ws, const char *app, bool on)
{
	struct full_mark m = {app, on};

	return tend_store_write(tend_engine_store(ws->eng), full_mark_body, &m);
}

static bool
full_marked(struct tend_txn *txn, const char *app)
{
	struct tend_bytes v;
	char key[300];

	snprintf(key, sizeof key, "full/%s", app);
	return tend_store_get(txn, TEND_T_META, key, strlen(key), &v) == 0;
}

int
tend_app_sync(struct tend_ws *ws, struct tend_app_config *app,
    const struct tend_sync_opts *o, struct tend_app_result *res)
{
	struct run r = {.ws = ws, .app = app, .o = o, .res = res};
	struct tend_txn *txn = NULL;
	struct scan scan = {.r = &r};
	char *skip[3] = {NULL, NULL, NULL};
	size_t nskip = 0, nprev = 0;
	struct timespec now;
	int rc;

	memset(res, 0, sizeof *res);
	if ((rc = tend_ws_open(ws)))
		return rc;
	r.source = path_join(ws->root, app->source);
	r.logic = app_logic(app);
	clock_gettime(CLOCK_REALTIME, &now);
	r.scan_ns = ts_ns(&now);
	/* an unmounted or missing source must never wipe a target */
	struct stat st;
	if (stat(r.source, &st) != 0 || !S_ISDIR(st.st_mode)) {
		char msg[PATH_MAX + 128];
		snprintf(msg, sizeof msg,
		    "source %s is missing or not a directory: nothing done "
		    "(its targets are kept)",
		    app->source);
		res->error = strdup(msg);
		rc = tend_error_set(TEND_ERROR, "%s", msg);
		goto out;
	}
	/* never read what we write, nor our own state */
	if (!source_skips(ws, app, skip, &nskip)) {
		res->error = strdup("target and source are the same "
				    "directory");
		rc = tend_error_set(TEND_ERROR, "%s: %s", app->name, res->error);
		goto out;
	}
	struct tend_walk_opts wo = walk_opts(app, skip, nskip);
	unsigned links_skipped = 0;
	wo.on_dir = o->on_dir;
	wo.dir_arg = o->dir_arg;
	wo.links_skipped = &links_skipped;
	scan.key = (struct tend_buf)TEND_BUF_INIT;
	if ((rc = tend_store_read_begin(tend_engine_store(ws->eng), &txn)))
		goto out;
	scan.txn = txn;
	r.unsure = full_marked(txn, app->name);
	unsigned skipped = 0;
	rc = tend_walk(r.source, &wo, on_file, &scan, &skipped);
	if (scan.started)
		tend_store_iter_finish(&scan.it);
	res->skipped = skipped;
	res->links_skipped = links_skipped;
	if (rc == 0) {
		/* the walk yields path order already; sort only if a long
		 * or odd name broke it */
		for (size_t i = 1; i < r.nitems; i++)
			if (cmp_rel(&r.items[i - 1], &r.items[i]) > 0) {
				qsort(r.items, r.nitems, sizeof *r.items,
				    cmp_rel);
				break;
			}
		rc = count_previous(&r, txn, &nprev);
	}
	tend_store_read_end(txn);
	tend_buf_release(&scan.key);
	if (rc)
		goto out;
	if (o->progress)
		o->progress(o->arg, app->name, res->files, res->hashed);
	if (app->declare == TEND_DECLARE_PLUGIN) {
		if (!(r.plugin = plugin_load(ws, app->declare_arg))) {
			res->error = strdup(tend_error_last());
			rc = TEND_ERROR;
			goto out;
		}
		struct tend_hasher lh;
		tend_hasher_init(&lh);
		tend_hasher_fp(&lh, &r.logic);
		tend_hasher_fp(&lh, &r.plugin->fp);
		r.logic = tend_hasher_final(&lh);
	}
	/* the delete brake */
	bool trip;
	if (app->max_delete >= 0)
		trip = r.nvanished > (size_t)app->max_delete;
	else
		trip = (r.nvanished * 2 > nprev && r.nvanished >= 20) ||
		    (r.nitems == 0 && nprev > 0);
	res->brake = trip && r.nvanished;
	if (trip && !o->allow_delete && r.nvanished) {
		res->held_deletes = r.nvanished;
		r.hold = true;
		held_sources(res, &r);
	} else
		res->gone_items = r.nvanished;
	struct tend_pass_opts po = {.full = o->full, .preview = o->preview};
	current_run = &r;
	/* a git target makes one commit per pass: one batch */
	tend_engine_set_batch(ws->eng, app_batch(app));
	if (o->full && !o->preview && !r.unsure &&
	    (rc = full_mark(ws, app->name, true)))
		goto out;
	rc = tend_engine_run(ws->eng, app->name, root_body, &r, &po,
	    &res->stats);
	current_run = NULL;
	if (!o->preview && app->target != TEND_TARGET_FILE && r.target) {
		uint64_t gid, gsc;

		tend_provider_generation(r.target, &gid, &gsc);
		for (size_t i = 0; i < r.nitems; i++) {
			struct item *it = &r.items[i];
			struct tend_key path[2] = {tend_key_symbol("files"),
			    tend_key_strn(it->rel, it->len)};
			struct tend_fp in = item_input(it);

			if (it->kept || it->sig.mode == 0)
				continue;
			bool ok = tend_engine_memo_matches(ws->eng, app->name,
			    path, 2, &in, &r.logic);
			if (ok == it->sig.stamped &&
			    (!ok || (tend_fp_equal(&it->sig.logic, &r.logic) &&
				       it->sig.gen_id == gid &&
				       it->sig.gen_schema == gsc)))
				continue;
			it->sig.stamped = ok;
			it->sig.logic = r.logic;
			it->sig.gen_id = gid;
			it->sig.gen_schema = gsc;
			it->restamp = true;
		}
	}
	bool ran = rc == 0 || r.res->stats.failed || r.res->stats.errors;
	rc = pass_done(&r, rc);
	/* every source was looked at and its row stamped as its memo is (a
	 * failed component has none): a later pass may trust them again */
	if (ran && r.rows_done && !o->preview && (o->full || r.unsure)) {
		int mrc = full_mark(ws, app->name, false);

		if (mrc && !rc)
			rc = mrc;
	}
	/* sync --full: an exclusive target holds what is declared, nothing
	 * else (a plain sync never reads the target) */
	if (rc == 0 && o->full && !o->preview) {
		size_t n;

		rc = tend_app_strays(ws, app, true, NULL, NULL, &n);
		res->strays = n;
	}
out:
	run_free(&r, skip, nskip);
	return rc;
}

void
tend_app_result_finish(struct tend_app_result *res)
{
	free(res->error);
	res->error = NULL;
	for (size_t i = 0; i < res->nheld; i++)
		free(res->held[i]);
	free(res->held);
	res->held = NULL;
	res->nheld = 0;
	for (size_t i = 0; i < res->nheld_sources; i++)
		free(res->held_sources[i]);
	free(res->held_sources);
	res->held_sources = NULL;
	res->nheld_sources = 0;
}

int
tend_ws_tracked_apps(struct tend_ws *ws, char ***out, size_t *n)
{
	struct tend_txn *txn;
	struct tend_iter it;
	struct tend_bytes k, v;
	struct tend_arena a = TEND_ARENA_INIT;
	int rc, more;

	*out = NULL;
	*n = 0;
	if ((rc = tend_ws_open(ws)))
		return rc;
	if ((rc = tend_store_read_begin(tend_engine_store(ws->eng), &txn)))
		return rc;
	tend_store_iter_init(&it, txn, TEND_T_COMP, NULL, 0);
	while ((more = tend_store_iter_next(&it, &k, &v)) == 1) {
		/* header: fmt, version, token, flags, has_parent, parent,
		 * processor, path */
		size_t pos = 1 + 8 + 16 + 1;
		if (v.len < pos + 1 + 16 + 4 || v.data[pos] != 0)
			continue; /* has a parent: not an app root */
		pos += 1 + 16;
		uint32_t plen;
		memcpy(&plen, v.data + pos, 4);
		pos += 4 + plen;
		if (pos + 4 > v.len)
			continue;
		uint32_t len;
		memcpy(&len, v.data + pos, 4);
		pos += 4;
		struct tend_key key;
		size_t used;
		if (pos + len > v.len ||
		    tend_key_decode(&key, v.data + pos, len, &used, &a) ||
		    used != len || key.kind != TEND_KEY_STR)
			continue;
		*out = tend_xrealloc(*out, (*n + 1) * sizeof **out);
		(*out)[(*n)++] = strndup(key.u.s.ptr, key.u.s.len);
	}
	tend_store_iter_finish(&it);
	tend_store_read_end(txn);
	tend_arena_finish(&a);
	return more < 0 ? more : 0;
}

/* ---- incremental passes (tend watch) ---- */

struct partial {
	struct run *r;
};

static int
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

static struct tend_provider *
existing_target(struct tend_ws *ws, struct tend_app_config *app)
{
	struct tend_engine *eng = ws->eng;

	if (app->target == TEND_TARGET_DIR) {
		struct tend_key k = tend_key_str(app->target_path);

		return tend_engine_child_provider(eng,
		    tend_engine_root(eng, TEND_FS_DIR), &k);
	}
	if (app->target == TEND_TARGET_GIT) {
		struct tend_key parts[3] = {tend_key_str(app->target_path),
		    tend_key_str(app->ref),
		    tend_key_str(app->prefix ? app->prefix : "")};
		struct tend_key k = tend_key_tuple(parts, 3);

		return tend_engine_child_provider(eng,
		    tend_engine_root(eng, TEND_GIT), &k);
	}
	if (app->target == TEND_TARGET_PLUGIN) {
		const struct tend_connector_plugin *d =
		    tend_ws_connector(ws, app->target_type);
		struct tend_buf key = TEND_BUF_INIT, v = TEND_BUF_INIT;
		struct tend_provider *p = NULL;

		if (d && tend_ws_connector_container(ws, app, &key, &v) == 0) {
			struct tend_key k = tend_key_str(key.ptr);

			p = tend_engine_child_provider(eng,
			    tend_engine_root(eng, d->root), &k);
		}
		tend_error_clear();
		tend_buf_release(&key);
		tend_buf_release(&v);
		return p;
	}
	return NULL;
}

/* ---- incremental passes ---- */

struct pathset {
	char **v;
	size_t n, cap;
	bool too_many; /* a full pass is cheaper, or a path is digested */
};

#define SUBTREE_MAX 20000 /* paths from directory events before a full pass */

static void
pathset_add(struct pathset *ps, const char *p, size_t len)
{
	if (ps->n >= SUBTREE_MAX) {
		ps->too_many = true;
		return;
	}
	if (ps->n == ps->cap) {
		ps->cap = ps->cap ? ps->cap * 2 : 64;
		ps->v = tend_xrealloc(ps->v, ps->cap * sizeof *ps->v);
	}
	ps->v[ps->n] = tend_xmemdup(p, len + 1);
	ps->v[ps->n++][len] = '\0';
}

static int
on_sub_file(const char *rel, size_t len, int dirfd, const char *leaf,
    const struct stat *st, void *arg)
{
	(void)dirfd;
	(void)leaf;
	(void)st;
	pathset_add(arg, rel, len);
	return 0;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * The agent's paths, with "dir/" (a directory created, removed, moved in,
 * out or within) standing for every file under it: those it had (their
 * signatures) and those it has now (a walk of it). Sorted, unique.
 */
static void
expand_paths(struct run *r, struct tend_txn *txn,
    const struct tend_walk_opts *wo, char *const *rels, size_t n,
    struct pathset *ps)
{
	struct tend_buf prefix = TEND_BUF_INIT;
	size_t al = strlen(r->app->name) + 1;

	for (size_t i = 0; i < n && !ps->too_many; i++) {
		size_t len = strlen(rels[i]);

		if (!len || rels[i][len - 1] != '/') {
			pathset_add(ps, rels[i], len);
			continue;
		}
		struct tend_iter it;
		struct tend_bytes k, v;

		tend_buf_reset(&prefix);
		tend_buf_put(&prefix, r->app->name, al);
		tend_buf_put(&prefix, rels[i], len);
		tend_store_iter_init(&it, txn, TEND_T_SIG, prefix.ptr,
		    prefix.len);
		while (!ps->too_many && tend_store_iter_next(&it, &k, &v) == 1) {
			if (memchr(k.data + al, 0xff, k.len - al))
				ps->too_many = true; /* a digested long path */
			else
				pathset_add(ps, (const char *)k.data + al,
				    k.len - al);
		}
		tend_store_iter_finish(&it);
		char *dir = tend_xmemdup(rels[i], len);
		dir[len - 1] = '\0';
		tend_walk_sub(r->source, wo, dir, on_sub_file, ps, NULL);
		free(dir);
	}
	tend_buf_release(&prefix);
	if (ps->n > 1)
		qsort(ps->v, ps->n, sizeof *ps->v, cmp_str);
	size_t k = 0;
	for (size_t i = 0; i < ps->n; i++) {
		if (k && strcmp(ps->v[k - 1], ps->v[i]) == 0)
			free(ps->v[i]);
		else
			ps->v[k++] = ps->v[i];
	}
	ps->n = k;
}

static void
pathset_free(struct pathset *ps)
{
	for (size_t i = 0; i < ps->n; i++)
		free(ps->v[i]);
	free(ps->v);
}

int
tend_app_sync_paths(struct tend_ws *ws, struct tend_app_config *app,
    char *const *rels, size_t n, const struct tend_sync_opts *o,
    struct tend_app_result *res)
{
	struct run r = {.ws = ws, .app = app, .o = o, .res = res};
	struct tend_txn *txn = NULL;
	struct tend_buf key = TEND_BUF_INIT;
	struct pathset ps = {0};
	char *skip[3] = {NULL, NULL, NULL};
	size_t nskip = 0, nprev = 0;
	struct timespec now;
	int rc;

	if ((rc = tend_ws_open(ws)))
		return rc;
	r.target = existing_target(ws, app);
	/* no container from an earlier pass in this process, an aggregate,
	 * a manifest to rewrite: a full pass is the truth */
	if (!r.target || app->manifest || app->declare == TEND_DECLARE_PLUGIN ||
	    app->declare == TEND_DECLARE_CODE)
		return tend_app_sync(ws, app, o, res);
	memset(res, 0, sizeof *res);
	r.source = path_join(ws->root, app->source);
	r.logic = app_logic(app);
	clock_gettime(CLOCK_REALTIME, &now);
	r.scan_ns = ts_ns(&now);
	source_skips(ws, app, skip, &nskip); /* a full pass ran: not the source */
	struct tend_walk_opts wo = walk_opts(app, skip, nskip);
	wo.on_dir = o->on_dir;
	wo.dir_arg = o->dir_arg;
	if ((rc = tend_store_read_begin(tend_engine_store(ws->eng), &txn)))
		goto out;
	/* the items that conflicted last time run again: the other
	 * declaration may be gone */
	struct tend_conflicts *was = o->preview ? NULL
					       : ws_conflicts(ws, app->name);
	size_t nwas = was ? was->n : 0;
	char **all = tend_xcalloc(n + nwas + 1, sizeof *all);
	memcpy(all, rels, n * sizeof *rels);
	if (nwas)
		memcpy(all + n, was->rels, nwas * sizeof *was->rels);
	expand_paths(&r, txn, &wo, all, n + nwas, &ps);
	free(all);
	if (ps.too_many) {
		tend_store_read_end(txn);
		pathset_free(&ps);
		run_free(&r, skip, nskip);
		return tend_app_sync(ws, app, o, res);
	}
	rels = ps.v;
	n = ps.n;
	for (size_t i = 0; i < n; i++) {
		const char *p = rels[i];
		size_t len = strlen(p);
		struct tend_bytes v;
		struct sig old;
		struct stat st;

		sig_key(&key, app->name, p, len);
		bool had = tend_store_get(txn, TEND_T_SIG, key.ptr, key.len,
			       &v) == 0 &&
		    sig_decode(&v, &old);
		char *abs = path_join(r.source, p);
		bool present = lstat(abs, &st) == 0 &&
		    (S_ISREG(st.st_mode) || (wo.links && S_ISLNK(st.st_mode))) &&
		    tend_walk_includes(r.source, &wo, p);
		if (!present) {
			free(abs);
			if (had) {
				r.vanished = tend_xrealloc(r.vanished,
				    (r.nvanished + 1) * sizeof *r.vanished);
				r.vanished[r.nvanished++] = tend_xstrdup(p);
			}
			continue;
		}
		add_item(&r, p, len, &st, had ? &v : NULL, AT_FDCWD, abs);
		free(abs);
	}
	if (r.nvanished) {
		struct tend_buf prefix = TEND_BUF_INIT;
		struct tend_iter it;
		struct tend_bytes k, v;

		tend_buf_puts(&prefix, app->name);
		tend_buf_putc(&prefix, 0);
		tend_store_iter_init(&it, txn, TEND_T_SIG, prefix.ptr,
		    prefix.len);
		while (tend_store_iter_next(&it, &k, &v) == 1)
			nprev++;
		tend_store_iter_finish(&it);
		tend_buf_release(&prefix);
	}
	tend_store_read_end(txn);
	if (r.nitems > 1)
		qsort(r.items, r.nitems, sizeof *r.items, cmp_rel);
	/* the brake, over this batch of events */
	bool trip = app->max_delete >= 0
	    ? r.nvanished > (size_t)app->max_delete
	    : r.nvanished * 2 > nprev && r.nvanished >= 20;
	res->brake = trip && r.nvanished;
	if (trip && !o->allow_delete && r.nvanished) {
		res->held_deletes = r.nvanished;
		r.hold = true;
		held_sources(res, &r);
	} else
		res->gone_items = r.nvanished;
	struct partial pa = {&r};
	struct tend_pass_opts po = {.full = o->full, .preview = o->preview};
	current_run = &r;
	tend_engine_set_batch(ws->eng, app_batch(app));
	if (app->declare == TEND_DECLARE_EXEC) {
		uint64_t gid, gsc;

		tend_provider_generation(r.target, &gid, &gsc);
		prerun_exec_items(&r, gid, gsc);
	}
	if (!o->preview)
		tend_engine_set_settle_hook(ws->eng, settle_sig, &r);
	rc = tend_engine_run_partial(ws->eng, app->name, partial_body, &pa,
	    &po, &res->stats);
	tend_engine_set_settle_hook(ws->eng, NULL, NULL);
	current_run = NULL;
	rc = pass_done(&r, rc);
out:
	tend_buf_release(&key);
	pathset_free(&ps);
	run_free(&r, skip, nskip);
	return rc;
}
