/*
 * connector.c - target types from shared objects ([plugin] sections).
 *
 * Each [plugin "NAME"] is dlopen()ed once per process by every command
 * (a plan, a check and a drop need the connector as much as a sync), its
 * tend_connector_NAME descriptor checked, and the keys of the apps that
 * target NAME:ARG checked against the descriptor's key list: a typo is a
 * configuration error (exit 2) with its file, line and a "did you mean",
 * like tend's own keys. The root provider is registered on every engine
 * the workspace opens.
 */
#include "app.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "tend/plugin.h"
#include "tend/status.h"

struct connector {
	char *name, *path; /* as configured; path resolved */
	void *dl;
	const struct tend_connector_plugin *desc;
	bool registered;
	struct stat st; /* the file as loaded */
	bool told;	/* that it changed since */
};

static struct connector *
find(struct tend_ws *ws, const char *name)
{
	for (size_t i = 0; i < ws->nconnectors; i++)
		if (strcmp(ws->connectors[i].name, name) == 0)
			return &ws->connectors[i];
	return NULL;
}

const struct tend_connector_plugin *
tend_ws_connector(struct tend_ws *ws, const char *type)
{
	struct connector *c = type ? find(ws, type) : NULL;

	return c ? c->desc : NULL;
}

/* Load [plugin] `pc` (once per name and path); a message in err. */
static int
load(struct tend_ws *ws, const struct tend_config *cfg,
    const struct tend_plugin_config *pc, struct tend_buf *err)
{
	struct tend_buf path = TEND_BUF_INIT, sym = TEND_BUF_INIT;
	struct connector *c = find(ws, pc->name);
	const char *file = cfg->file ? cfg->file : "tend.conf";
	struct stat st;
	int rc = 0;

	if (pc->path[0] == '/')
		tend_buf_puts(&path, pc->path);
	else
		tend_buf_printf(&path, "%s/%s", ws->root, pc->path);
	if (c && strcmp(c->path, path.ptr) == 0) {
		tend_buf_release(&path);
		return 0; /* loaded already */
	}
	if (c) {
		tend_buf_printf(err, "%s:%d: plugin.%s.path: the plugin was "
				     "loaded from %s; restart tend to load %s\n",
		    file, pc->path_line, pc->name, c->path, path.ptr);
		tend_buf_release(&path);
		return TEND_EINVALID;
	}
	if (stat(path.ptr, &st) != 0) {
		tend_buf_printf(err, "%s:%d: plugin.%s.path: %s: %s (build the "
				     "plugin, or fix the path: it is relative "
				     "to the workspace)\n",
		    file, pc->path_line, pc->name, path.ptr, strerror(errno));
		tend_buf_release(&path);
		return TEND_EINVALID;
	}
	void *dl = dlopen(path.ptr, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		tend_buf_printf(err, "%s:%d: plugin.%s.path: %s\n", file,
		    pc->path_line, pc->name, dlerror());
		tend_buf_release(&path);
		return TEND_EINVALID;
	}
	tend_buf_puts(&sym, "tend_connector_");
	for (const char *q = pc->name; *q; q++)
		tend_buf_putc(&sym, *q == '-' ? '_' : *q);
	const struct tend_connector_plugin *d = dlsym(dl, sym.ptr);
	const char *why = !d		      ? "does not export"
	    : d->abi != TEND_CONNECTOR_ABI    ? "was built for another tend: ABI "
					     "mismatch of"
	    : !d->type || strcmp(d->type, pc->name) != 0
	    ? "names another target type in"
	    : !d->root || !d->register_root || !d->container
	    ? "leaves root, register_root or container unset in"
	    : NULL;
	if (why) {
		tend_buf_printf(err, "%s:%d: plugin.%s: %s %s %s (see "
				     "tend/plugin.h: const struct "
				     "tend_connector_plugin)\n",
		    file, pc->line, pc->name, path.ptr, why, sym.ptr);
		if (d && d->type && strcmp(d->type, pc->name) != 0)
			tend_buf_printf(err, "  it says its type is \"%s\": name "
					     "the section [plugin \"%s\"]\n",
			    d->type, d->type);
		dlclose(dl);
		rc = TEND_EINVALID;
	} else {
		ws->connectors = tend_xrealloc(ws->connectors,
		    (ws->nconnectors + 1) * sizeof *ws->connectors);
		ws->connectors[ws->nconnectors++] = (struct connector){
		    tend_xstrdup(pc->name), tend_xstrdup(path.ptr), dl, d,
		    false, st, false};
	}
	tend_buf_release(&path);
	tend_buf_release(&sym);
	return rc;
}

/* An app's keys against its plugin's list: every diagnostic in err;
 * the values, in the plugin's order, in app->plugin_values. */
static int
check_app(struct tend_app_config *a, const struct tend_connector_plugin *d,
    const char *file, struct tend_buf *err)
{
	const char **vals = tend_xcalloc(d->nkeys + 1, sizeof *vals);
	int rc = 0;

	for (size_t k = 0; k < a->npkeys; k++) {
		const struct tend_kv *kv = &a->pkeys[k];
		const struct tend_plugin_key *key = NULL;
		const char *near = NULL;
		size_t best = 4;

		for (size_t i = 0; i < d->nkeys && !key; i++) {
			if (strcasecmp(d->keys[i].name, kv->key) == 0) {
				key = &d->keys[i];
				vals[i] = kv->value; /* the last one wins */
			} else if (tend_config_distance(kv->key, d->keys[i].name) <
			    best) {
				best = tend_config_distance(kv->key, d->keys[i].name);
				near = d->keys[i].name;
			}
		}
		if (!key) {
			tend_buf_printf(err, "%s:%d: app.%s.%s: unknown key for "
					     "a %s: target",
			    file, kv->line, a->name, kv->key, d->type);
			if (near)
				tend_buf_printf(err, "; did you mean \"%s\"?",
				    near);
			else if (d->nkeys) {
				tend_buf_puts(err, " (it takes");
				for (size_t i = 0; i < d->nkeys; i++)
					tend_buf_printf(err, "%s %s",
					    i ? "," : "", d->keys[i].name);
				tend_buf_putc(err, ')');
			}
			tend_buf_putc(err, '\n');
			rc = TEND_EINVALID;
			continue;
		}
		bool b;
		char *end;
		if (key->type == TEND_PKEY_BOOL && tend_config_parse_bool(kv->value, &b) != 0) {
			tend_buf_printf(err, "%s:%d: app.%s.%s: expected a boolean "
					     "(true/false), got \"%s\"\n",
			    file, kv->line, a->name, kv->key, kv->value);
			rc = TEND_EINVALID;
		} else if (key->type == TEND_PKEY_INTEGER &&
		    (strtoll(kv->value, &end, 10), !*kv->value || *end)) {
			tend_buf_printf(err, "%s:%d: app.%s.%s: expected a whole "
					     "number, got \"%s\"\n",
			    file, kv->line, a->name, kv->key, kv->value);
			rc = TEND_EINVALID;
		}
	}
	for (size_t i = 0; i < a->plugin_values.n; i++)
		free(a->plugin_values.v[i]);
	a->plugin_values.n = 0;
	for (size_t i = 0; i < d->nkeys; i++) {
		const struct tend_plugin_key *key = &d->keys[i];
		const char *v = vals[i] ? vals[i] : key->def;
		bool b;

		if (!v) {
			tend_buf_printf(err, "%s:%d: app.%s: missing \"%s\" (%s)\n",
			    file, a->line, a->name, key->name,
			    key->help ? key->help : "the plugin needs it");
			rc = TEND_EINVALID;
			v = "";
		} else if (key->type == TEND_PKEY_BOOL &&
		    tend_config_parse_bool(v, &b) == 0)
			v = b ? "true" : "false";
		a->plugin_values.v = tend_xrealloc(a->plugin_values.v,
		    (a->plugin_values.n + 1) * sizeof *a->plugin_values.v);
		a->plugin_values.v[a->plugin_values.n++] = tend_xstrdup(v);
	}
	free(vals);
	return rc;
}

int
tend_ws_connectors_load(struct tend_ws *ws, struct tend_config *cfg,
    struct tend_buf *err)
{
	const char *file = cfg->file ? cfg->file : "tend.conf";
	int rc = 0;

	for (size_t i = 0; i < cfg->nplugins; i++)
		if (cfg->plugins[i].path &&
		    load(ws, cfg, &cfg->plugins[i], err) != 0)
			rc = TEND_EINVALID;
	char **keys = tend_xcalloc(cfg->napps + 1, sizeof *keys);
	for (size_t i = 0; i < cfg->napps; i++) {
		struct tend_app_config *a = &cfg->apps[i];
		const struct tend_connector_plugin *d;
		struct tend_buf key = TEND_BUF_INIT, v = TEND_BUF_INIT;
		int line = a->target_line ? a->target_line : a->line;

		if (a->target != TEND_TARGET_PLUGIN)
			continue;
		if (!(d = tend_ws_connector(ws, a->target_type)))
			continue; /* its [plugin] failed: said above */
		if (check_app(a, d, file, err) != 0) {
			rc = TEND_EINVALID;
			continue;
		}
		/* what the plugin makes of the values: refused now, on the
		 * app's line, not at every pass */
		tend_error_clear();
		if (tend_ws_connector_container(ws, a, &key, &v) != 0) {
			tend_buf_printf(err, "%s:%d: app.%s.target: %s\n", file,
			    line, a->name, tend_error_last());
			rc = TEND_EINVALID;
		} else {
			/* one container, one app (as for dir: targets) */
			tend_buf_reset(&v);
			tend_buf_printf(&v, "%s\n%s", d->root, key.ptr);
			for (size_t j = 0; j < i; j++)
				if (keys[j] && strcmp(keys[j], v.ptr) == 0) {
					tend_buf_printf(err, "%s:%d: app.%s.target: "
					    "%s:%s is the target of app \"%s\" "
					    "(%s:%d) too: apps whose targets "
					    "overlap overwrite and delete each "
					    "other's entries; give each its own\n",
					    file, line, a->name, a->target_type,
					    a->target_path, cfg->apps[j].name,
					    file, cfg->apps[j].line);
					rc = TEND_EINVALID;
					break;
				}
			keys[i] = tend_buf_detach(&v, NULL);
		}
		tend_buf_release(&key);
		tend_buf_release(&v);
	}
	for (size_t i = 0; i < cfg->napps; i++)
		free(keys[i]);
	free(keys);
	if (rc == 0 && ws->eng)
		rc = tend_ws_connectors_register(ws);
	return rc;
}

int
tend_ws_connectors_register(struct tend_ws *ws)
{
	for (size_t i = 0; i < ws->nconnectors; i++) {
		struct connector *c = &ws->connectors[i];
		int rc;

		if (c->registered)
			continue;
		if ((rc = c->desc->register_root(ws->eng)) != 0)
			return tend_error_set(rc, "plugin %s (%s): register_root "
						  "failed: %s",
			    c->name, c->path, tend_error_last());
		if (!tend_engine_root(ws->eng, c->desc->root))
			return tend_error_set(TEND_EINVALID, "plugin %s (%s): "
							     "register_root did not register the root "
							     "provider \"%s\"",
			    c->name, c->path, c->desc->root);
		c->registered = true;
	}
	return 0;
}

void
tend_ws_connectors_close(struct tend_ws *ws)
{
	for (size_t i = 0; i < ws->nconnectors; i++) {
		free(ws->connectors[i].name);
		free(ws->connectors[i].path);
		/* the engine (closed before) held its handlers: the code
		 * may go now */
		dlclose(ws->connectors[i].dl);
	}
	free(ws->connectors);
	ws->connectors = NULL;
	ws->nconnectors = 0;
}

int
tend_ws_connector_container(struct tend_ws *ws,
    const struct tend_app_config *a, struct tend_buf *key,
    struct tend_buf *value)
{
	const struct tend_connector_plugin *d = tend_ws_connector(ws,
	    a->target_type);
	struct tend_plugin_target t = {
		.app = a->name,
		.arg = a->target_path,
		.workspace = ws->root,
		.values = (const char *const *)a->plugin_values.v,
		.nvalues = a->plugin_values.n,
	};
	int rc;

	if (!d)
		return tend_error_set(TEND_EINVALID, "%s: the plugin of target "
						     "type \"%s\" is not loaded",
		    a->name, a->target_type);
	if ((rc = d->container(&t, key, value)) != 0)
		return rc;
	if (!key->ptr)
		tend_buf_puts(key, "");
	return 0;
}

size_t
tend_ws_connectors_changed(struct tend_ws *ws, struct tend_buf *notes)
{
	size_t n = 0;

	for (size_t i = 0; i < ws->nconnectors; i++) {
		struct connector *c = &ws->connectors[i];
		struct stat st;

		if (stat(c->path, &st) == 0 && st.st_ino == c->st.st_ino &&
		    st.st_size == c->st.st_size &&
		    st.st_mtim.tv_sec == c->st.st_mtim.tv_sec &&
		    st.st_mtim.tv_nsec == c->st.st_mtim.tv_nsec)
			continue;
		n++;
		if (!c->told)
			tend_buf_printf(notes, "plugin %s (%s) changed: it "
					       "stays loaded as it was; restart "
					       "the agent to load it\n",
			    c->name, c->path);
		c->told = true;
	}
	return n;
}

void
tend_ws_connector_files(struct tend_ws *ws, char ***v, size_t *n)
{
	for (size_t i = 0; i < ws->nconnectors; i++) {
		*v = tend_xrealloc(*v, (*n + 2) * sizeof **v);
		(*v)[(*n)++] = tend_xstrdup(ws->connectors[i].path);
		(*v)[*n] = NULL;
	}
}
