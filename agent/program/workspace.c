/*
 * workspace.c - a workspace: tend.conf found, loaded and reloaded, the
 * engine opened over its state directory, the locks (write.lock, the
 * agent's), the staging directories swept of dead processes' leftovers,
 * the apps defined in code (tend_main), and declaration plugins loaded
 * from a private copy.
 */
#define _GNU_SOURCE
#include "pass.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "fs.h"
#include "inspect.h"
#include "tend/status.h"

#define CONF_MAX (4u << 20) /* tend.conf is read up to this size */

char *
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

int
hash_fd_fp(int fd, struct tend_fp *out)
{
	return hash_fd_sized(fd, -1, out);
}

/* `size`: what the file's stat said (-1: not known). A regular file read
 * short, at that size, is at its end: no read of 0 bytes to learn it (a
 * syscall of five a copied file costs). Were it to grow after the stat,
 * the signature taken then changes and the next pass reads it again. */
int
hash_fd_sized(int fd, off_t size, struct tend_fp *out)
{
	struct tend_hasher h;
	char buf[1 << 16];
	off_t total = 0;
	ssize_t n;

	tend_hasher_init(&h);
	tend_hasher_begin_stream(&h);
	while ((n = read(fd, buf, sizeof buf)) > 0) {
		tend_hasher_raw(&h, buf, (size_t)n);
		total += n;
		if ((size_t)n < sizeof buf && total == size)
			break;
	}
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

/* [tend] fsync, for the sinks that write files; and which git refs the
 * config lets tend write while checked out ("REPO\tREF\n" lines, REPO
 * as the target names it): a ref the config no longer names with
 * allow-checked-out (its app moved to another ref) is not written while
 * checked out, whatever its old container's record allowed */
static void
set_fsync(struct tend_ws *ws)
{
	tend_engine_set_resource(ws->eng, "fsync",
	    ws->cfg.fsync ? (void *)"1" : NULL);
	tend_buf_release(&ws->git_allowed); /* (zeroed: a NULL ptr) */
	tend_buf_puts(&ws->git_allowed, "");
	for (size_t i = 0; i < ws->cfg.napps; i++) {
		const struct tend_app_config *a = &ws->cfg.apps[i];

		if (a->target == TEND_TARGET_GIT && a->allow_checked_out)
			tend_buf_printf(&ws->git_allowed, "%s\t%s\n",
			    a->target_path, a->ref);
	}
	tend_engine_set_resource(ws->eng, "git-allowed-checked-out",
	    ws->git_allowed.ptr);
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

/*
 * Remove what dead processes left in state/DIR: the entries named after a
 * pid ("<pid>" or "<pid>.<suffix>") that no running process has, and our
 * own pid's, which a killed process that had our pid before us left (pids
 * are reused: pid_max is 32768 on many systems, and a torture run wraps it
 * in minutes). Returns the directory's path.
 */
/* Is process `pid` running (another user's counts)? */
static bool
pid_running(long pid)
{
	return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

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
			    (pid != (long)getpid() && pid_running(pid)))
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

/* The scratch stores (tend-empty-<pid>-XXXXXX) of this user's commands
 * that were killed: removed by the next one that makes one */
static void
sweep_scratch(const char *tmp)
{
	DIR *d = opendir(tmp);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char *end;
		long pid;
		struct stat st;

		if (strncmp(e->d_name, "tend-empty-", 11) != 0)
			continue;
		pid = strtol(e->d_name + 11, &end, 10);
		if (*end != '-' || pid <= 0 || pid == (long)getpid() ||
		    pid_running(pid))
			continue;
		char *p = path_join(tmp, e->d_name);
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode) &&
		    st.st_uid == getuid())
			rm_tree(p);
		free(p);
	}
	closedir(d);
}

int
tend_ws_open(struct tend_ws *ws)
{
	int rc;

	if (ws->eng)
		return 0;
	if (ws->readonly && !ws->scratch) {
		struct tend_buf p = TEND_BUF_INIT;
		struct stat st;

		tend_buf_printf(&p, "%s/store/data.mdb", ws->state_dir);
		if (stat(p.ptr, &st) != 0 && errno == ENOENT) {
			const char *tmp = getenv("TMPDIR");

			if (!tmp || !*tmp)
				tmp = "/tmp";
			tend_buf_reset(&p);
			sweep_scratch(tmp);
			tend_buf_printf(&p, "%s/tend-empty-%d-XXXXXX", tmp,
			    (int)getpid());
			if (!mkdtemp(p.ptr)) {
				rc = tend_error_set(TEND_ERROR, "%s: %s", p.ptr,
				    strerror(errno));
				tend_buf_release(&p);
				return rc;
			}
			free(ws->state_dir);
			ws->state_dir = tend_buf_detach(&p, NULL);
			ws->scratch = true;
		}
		tend_buf_release(&p);
	}
	if ((rc = tend_engine_open(&ws->eng, ws->state_dir, NULL)))
		return rc;
	if (ws->scratch)
		tend_store_set_scratch(tend_engine_store(ws->eng));
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

/*
 * flock(fd, op) without blocking: 0 once taken. Busy: the pid its holder
 * wrote in the file (its text in `holder`), or -1 when none is written
 * yet. A lock whose recorded holder is dead is held by what it left in
 * transit (a child between its spawn and its execve, which closes the
 * descriptor): tried again, 2 s at most. Another error of flock: -2.
 */
static int
flock_try(int fd, int op, char *holder, size_t hsize)
{
	for (int tries = 0;; tries++) {
		if (flock(fd, op | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK)
			return -2;
		int pid = read_holder(fd, holder, hsize);
		if (pid <= 0)
			return -1;
		if (tries == 200 || kill(pid, 0) == 0 || errno != ESRCH)
			return pid;
		usleep(10 * 1000);
	}
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
	/* a waiting writer waits for a dead holder's child in transit
	 * quietly (the torture caught "waiting for pid N" with N killed and
	 * reaped) */
	bool busy = wait ? flock_try(fd, LOCK_EX, holder, hsize) != 0
			 : flock(fd, LOCK_EX | LOCK_NB) != 0;
	if (busy) {
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
	/* the store may have been repacked (swapped) while this process
	 * waited for the lock with it open */
	if (ws->eng && (rc = tend_store_refresh(tend_engine_store(ws->eng))))
		return rc;
	return 0;
}

static uint64_t
store_bytes(const struct tend_ws *ws)
{
	struct tend_buf p = TEND_BUF_INIT;
	struct stat sb;
	uint64_t n = 0;

	tend_buf_printf(&p, "%s/store/data.mdb", ws->state_dir);
	if (stat(p.ptr, &sb) == 0)
		n = (uint64_t)sb.st_size;
	tend_buf_release(&p);
	return n;
}

int
tend_ws_repack(struct tend_ws *ws, uint64_t before, bool force,
    uint64_t *bytes_before, uint64_t *bytes_after)
{
	struct tend_store *st = tend_engine_store(ws->eng);
	uint64_t rows = tend_store_rows(st, TEND_T_ITEM);

	if (rows < 1000 || (!force && rows < 2 * before))
		return 0;
	*bytes_before = store_bytes(ws);
	int rc = tend_store_repack(st);
	if (rc <= 0)
		return rc < 0 ? -1 : 0;
	*bytes_after = store_bytes(ws);
	return 1;
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
	 * its pid is not written yet); a dead one's child in transit is
	 * waited for, rather than send the user to stop a dead agent */
	running = flock_try(fd, LOCK_SH, pid, sizeof pid);
	if (running == -2)
		running = 0;
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
	tend_buf_release(&ws->git_allowed); /* (a resource of the engine) */
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
	if (ws->scratch)
		rm_tree(ws->state_dir);
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

struct plugin *
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

