/*
 * parse.c - tend.conf from a buffer (git-config syntax) into plain data.
 *
 * Two stages: a lexer that turns the buffer into (section, subsection,
 * key, value, line) entries and reports syntax errors, then the schema
 * table below that validates and stores each entry. Every problem is
 * collected; the caller prints them all at once (tmux's cfg_add_cause).
 */
#include "config.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *
xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		abort();
	return p;
}

static void *
xrealloc(void *p, size_t n)
{
	if (!(p = realloc(p, n ? n : 1)))
		abort();
	return p;
}

static char *
xstrndup(const char *s, size_t n)
{
	char *p = xmalloc(n + 1);

	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

static char *
xstrdup(const char *s)
{
	return xstrndup(s, strlen(s));
}

static void
diag(struct tend_diags *d, const char *file, int line, const char *key,
    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void
diag(struct tend_diags *d, const char *file, int line, const char *key,
    const char *fmt, ...)
{
	char msg[4096]; /* a loop names every app on it */
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	struct tend_diag *nv = realloc(d->v, (d->n + 1) * sizeof *d->v);
	if (!nv)
		abort();
	d->v = nv;
	d->v[d->n].file = xstrdup(file);
	d->v[d->n].line = line;
	d->v[d->n].key = key ? xstrdup(key) : NULL;
	d->v[d->n].msg = xstrdup(msg);
	d->n++;
}

void
tend_diags_finish(struct tend_diags *d)
{
	for (size_t i = 0; i < d->n; i++) {
		free(d->v[i].file);
		free(d->v[i].key);
		free(d->v[i].msg);
	}
	free(d->v);
	d->v = NULL;
	d->n = 0;
}

char *
tend_diags_format(const struct tend_diags *d)
{
	size_t size = 1;
	char *out;

	for (size_t i = 0; i < d->n; i++)
		size += strlen(d->v[i].file) + 16 +
		    (d->v[i].key ? strlen(d->v[i].key) : 0) +
		    strlen(d->v[i].msg) + 8;
	out = xmalloc(size);
	out[0] = '\0';
	for (size_t i = 0; i < d->n; i++) {
		size_t len = strlen(out);

		if (d->v[i].key)
			snprintf(out + len, size - len, "%s:%d: %s: %s\n",
			    d->v[i].file, d->v[i].line, d->v[i].key,
			    d->v[i].msg);
		else
			snprintf(out + len, size - len, "%s:%d: %s\n",
			    d->v[i].file, d->v[i].line, d->v[i].msg);
	}
	return out;
}

static void
strv_push(struct tend_strv *sv, const char *s, int line)
{
	char **nv = realloc(sv->v, (sv->n + 1) * sizeof *sv->v);
	int *nl = realloc(sv->line, (sv->n + 1) * sizeof *sv->line);

	if (!nv || !nl)
		abort();
	sv->v = nv;
	sv->line = nl;
	sv->line[sv->n] = line;
	sv->v[sv->n++] = xstrdup(s);
}

static void
strv_finish(struct tend_strv *sv)
{
	for (size_t i = 0; i < sv->n; i++)
		free(sv->v[i]);
	free(sv->v);
	free(sv->line);
	sv->v = NULL;
	sv->line = NULL;
	sv->n = 0;
}

/* ---- values ---- */

/* A day is the longest wait that makes sense; anything above it (or a
 * number strtod reads as inf or nan) is an error, not a cast out of
 * range. */
#define DURATION_MAX_MS (24.0 * 3600 * 1000)

int64_t
tend_config_parse_duration(const char *s)
{
	char *end;
	double v, unit;

	if (!*s)
		return -1;
	v = strtod(s, &end);
	if (end == s || !(v >= 0)) /* also nan */
		return -1;
	if (*end == '\0' || strcmp(end, "ms") == 0)
		unit = 1;
	else if (strcmp(end, "s") == 0)
		unit = 1000;
	else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
		unit = 60000;
	else if (strcmp(end, "h") == 0)
		unit = 3600000;
	else
		return -1;
	v *= unit;
	if (!(v <= DURATION_MAX_MS))
		return -1;
	return (int64_t)v;
}

int
tend_config_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = {"true", "yes", "on", "1"};
	static const char *const no[] = {"false", "no", "off", "0", ""};

	for (size_t i = 0; i < 4; i++)
		if (strcasecmp(s, yes[i]) == 0)
			return *out = true, 0;
	for (size_t i = 0; i < 5; i++)
		if (strcasecmp(s, no[i]) == 0)
			return *out = false, 0;
	return -1;
}

/* ---- the schema table ---- */

enum vtype { V_STR, V_STRV, V_BOOL, V_DURATION, V_MODE, V_INT, V_DECLARE,
	V_TARGET, V_REF, V_TAG };

struct opt {
	const char *section; /* "tend" or "app" */
	const char *name;
	enum vtype type;
	size_t off; /* in struct tend_config or struct tend_app_config */
	const char *def;
	const char *help;
};

#define T(f) offsetof(struct tend_config, f)
#define A(f) offsetof(struct tend_app_config, f)

static const struct opt opts[] = {
	{"tend", "state", V_STR, T(state), ".tend",
	    "tracking store and agent socket directory"},
	{"tend", "debounce", V_DURATION, T(debounce_ms), "20ms",
	    "quiet period before a watch-mode pass"},
	{"tend", "max-delay", V_DURATION, T(max_delay_ms), "1s",
	    "longest a change waits for a quiet period"},
	{"tend", "fsync", V_BOOL, T(fsync), "false",
	    "fsync each written entry and its directory before its record "
	    "settles"},
	{"app", "source", V_STR, A(source), NULL,
	    "source directory, relative to the workspace (required)"},
	{"app", "include", V_STRV, A(include), NULL,
	    "glob of source paths to use (repeatable; default: all)"},
	{"app", "exclude", V_STRV, A(exclude), NULL,
	    "glob of source paths to skip (repeatable)"},
	{"app", "gitignore", V_BOOL, A(gitignore), "true",
	    "honour .gitignore files in the source"},
	{"app", "declare", V_DECLARE, A(declare), "copy",
	    "copy | exec CMD | plugin FILE.so SYMBOL"},
	{"app", "name", V_STR, A(name_tmpl), "{path}",
	    "entry name; placeholders {path} {dir} {name} {stem} {ext}"},
	{"app", "target", V_TARGET, A(target), NULL,
	    "dir:PATH | file:PATH | git:REPO | TYPE:ARG of a [plugin] "
	    "(required)"},
	{"app", "file-mode", V_MODE, A(file_mode), NULL,
	    "mode of written entries (octal); changing it is lossy"},
	{"app", "exclusive", V_BOOL, A(exclusive), "false",
	    "the target holds only declared entries; switching it on is "
	    "destructive"},
	{"app", "symlinks", V_STR, A(symlinks), "skip",
	    "skip | copy (links inside the source) | copy-any; never "
	    "followed"},
	{"app", "manifest", V_BOOL, A(manifest), "false",
	    "keep a manifest file listing every entry with its digest"},
	{"app", "manifest-name", V_STR, A(manifest_name), ".tend-manifest",
	    "name of the manifest file inside the target"},
	{"app", "timeout", V_DURATION, A(timeout_ms), "30s",
	    "time limit of one exec declaration"},
	{"app", "max-delete", V_INT, A(max_delete), NULL,
	    "deletes per pass per target before the brake holds them"},
	{"app", "jobs", V_INT, A(jobs), "0",
	    "exec declarations run at once (0: number of CPUs)"},
	{"app", "ref", V_REF, A(ref), "refs/heads/tend",
	    "git: the ref to commit to"},
	{"app", "prefix", V_STR, A(prefix), NULL,
	    "git: subtree inside each commit"},
	{"app", "message", V_STR, A(message), "tend: sync {app}",
	    "git: commit message; {app} {count}"},
	{"app", "author", V_STR, A(author), NULL,
	    "git: \"Name <email>\" of the commits"},
	{"app", "executable", V_STR, A(executable), "keep",
	    "git: keep | never | always; changing it is lossy"},
	{"app", "tag", V_TAG, A(tags), NULL,
	    "git: lightweight tag kept on the synced commit (repeatable)"},
	{"app", "allow-checked-out", V_BOOL, A(allow_checked_out), "false",
	    "git: write a ref that is checked out in a working tree"},
	{"app", "push", V_STR, A(push), NULL,
	    "git: after each commit, push the ref to this remote (a remote "
	    "of the repository, or a URL); never forced"},
	{"app", "push-ref", V_REF, A(push_ref), NULL,
	    "git: the ref to push to (default: the app's ref)"},
};

#define NOPTS (sizeof opts / sizeof *opts)

size_t
tend_config_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), prev[64], cur[64];

	if (la >= 63 || lb >= 63)
		return 99;
	for (size_t j = 0; j <= lb; j++)
		prev[j] = j;
	for (size_t i = 1; i <= la; i++) {
		cur[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t sub = prev[j - 1] +
			    (tolower((unsigned char)a[i - 1]) !=
				tolower((unsigned char)b[j - 1]));
			size_t del = prev[j] + 1, ins = cur[j - 1] + 1;

			cur[j] = sub < del ? (sub < ins ? sub : ins)
					   : (del < ins ? del : ins);
		}
		memcpy(prev, cur, (lb + 1) * sizeof *cur);
	}
	return prev[lb];
}

static const char *
closest(const char *section, const char *key)
{
	const char *best = NULL;
	size_t bd = 99;

	for (size_t i = 0; i < NOPTS; i++) {
		if (strcmp(opts[i].section, section) != 0)
			continue;
		size_t d = tend_config_distance(key, opts[i].name);
		if (d < bd) {
			bd = d;
			best = opts[i].name;
		}
	}
	return bd <= 3 ? best : NULL;
}

char *
tend_config_describe(void)
{
	size_t size = 1;
	char *out;

	for (size_t i = 0; i < NOPTS; i++)
		size += 64 + strlen(opts[i].help) +
		    (opts[i].def ? strlen(opts[i].def) : 0);
	out = xmalloc(size);
	out[0] = '\0';
	const char *sect = "";
	for (size_t i = 0; i < NOPTS; i++) {
		size_t len = strlen(out);

		if (strcmp(sect, opts[i].section) != 0) {
			sect = opts[i].section;
			len += (size_t)snprintf(out + len, size - len, "[%s%s]\n",
			    sect, strcmp(sect, "app") == 0 ? " \"NAME\"" : "");
		}
		snprintf(out + len, size - len, "\t%s = %s\t# %s\n",
		    opts[i].name, opts[i].def ? opts[i].def : "",
		    opts[i].help);
	}
	static const char plugin[] =
	    "[plugin \"TYPE\"]\n\tpath = \t# the connector plugin (FILE.so, "
	    "relative to the workspace) that adds target = TYPE:ARG\n";
	size_t len = strlen(out);
	out = realloc(out, len + sizeof plugin);
	if (!out)
		abort();
	memcpy(out + len, plugin, sizeof plugin);
	return out;
}

/* ---- storing a value ---- */

struct ctx {
	const char *file;
	struct tend_diags *d;
	struct tend_config *cfg;
	/* the single-valued keys set so far: (app index or -1 for [tend],
	 * option index, line) */
	struct set_key {
		long app;
		size_t opt;
		int line;
	} *set;
	size_t nset;
};

/*
 * A single-valued key given a second time in the same section (or in a
 * repeated [app "NAME"] section, which merges into the first): git config
 * would keep the last silently; tend names both lines. 0 if it is the
 * first time, or repeatable.
 */
static int
set_twice(struct ctx *x, const void *base, size_t opt, int line,
    const char *fullkey)
{
	long app = base == x->cfg ? -1
				  : (long)((const struct tend_app_config *)base -
					x->cfg->apps);

	if (opts[opt].type == V_STRV || opts[opt].type == V_TAG)
		return 0;
	for (size_t i = 0; i < x->nset; i++)
		if (x->set[i].app == app && x->set[i].opt == opt) {
			diag(x->d, x->file, line, fullkey, "given twice (line "
			    "%d sets it already): one value per key",
			    x->set[i].line);
			return -1;
		}
	x->set = xrealloc(x->set, (x->nset + 1) * sizeof *x->set);
	x->set[x->nset++] = (struct set_key){app, opt, line};
	return 0;
}

/*
 * Why `name` is not a ref name git accepts, or NULL: git
 * check-ref-format's rules, which libgit2's git_reference_name_is_valid
 * applies too (this module does not link libgit2).
 */
static const char *
refname_fault(const char *name)
{
	size_t len = strlen(name);

	if (len == 0 || name[0] == '/' || name[len - 1] == '/')
		return "it begins or ends with /";
	if (name[len - 1] == '.')
		return "it ends with .";
	if (strcmp(name, "@") == 0)
		return "@ alone is not a name";
	for (const char *p = name; *p; p++) {
		unsigned char c = (unsigned char)*p;

		if (c < 040 || c == 0177 || strchr(" ~^:?*[\\", c))
			return "it holds a space, a control character or one "
			       "of ~ ^ : ? * [ \\";
		if (p[0] == '.' && p[1] == '.')
			return "it holds ..";
		if (p[0] == '@' && p[1] == '{')
			return "it holds @{";
		if (p[0] == '/' && p[1] == '/')
			return "it holds //";
	}
	for (const char *c = name; c; c = strchr(c, '/')) {
		if (*c == '/')
			c++;
		size_t cl = strcspn(c, "/");
		if (c[0] == '.')
			return "a component begins with .";
		if (cl >= 5 && strncmp(c + cl - 5, ".lock", 5) == 0)
			return "a component ends with .lock";
	}
	return NULL;
}

/* The git connector would refuse a bad ref deep inside a pass, at sync
 * time, naming an internal component: say it here, with the line. */
static bool
valid_ref(struct ctx *x, const char *value, int line, const char *fullkey)
{
	const char *why = strncmp(value, "refs/", 5) != 0
	    ? "a ref is a full name under refs/"
	    : refname_fault(value);

	if (!why)
		return true;
	diag(x->d, x->file, line, fullkey,
	    "\"%s\" is not a valid git ref: %s (e.g. refs/heads/pages)",
	    value, why);
	return false;
}

static bool
valid_tag(struct ctx *x, const char *value, int line, const char *fullkey)
{
	size_t n = strlen(value) + 16;
	char *full = xmalloc(n);
	const char *why;

	snprintf(full, n, "refs/tags/%s", value);
	why = refname_fault(full);
	free(full);
	if (!why)
		return true;
	diag(x->d, x->file, line, fullkey,
	    "\"%s\" is not a valid git tag name: %s", value, why);
	return false;
}

/* push = REMOTE and push-ref: a git app's, a remote's name git accepts
 * or a URL (whether the repository has that remote is known only when
 * it pushes) */
static void
push_checks(struct ctx *x, const struct tend_app_config *a, const char *k)
{
	char kx[320];

	snprintf(kx, sizeof kx, "%s.push", k);
	if (a->push && a->target && a->target != TEND_TARGET_GIT)
		diag(x->d, x->file, a->push_line, kx,
		    "push needs a git: target");
	else if (a->push) {
		const char *v = a->push, *why = NULL;
		bool url = strchr(v, ':') || strchr(v, '/');

		for (const char *q = v; *q && !why; q++)
			if ((unsigned char)*q <= 0x20 || *q == 0x7f)
				why = "it holds a space or a control character";
		if (!why && !*v)
			why = "it is empty";
		if (!why && !url) {
			size_t n = strlen(v) + 16;
			char *full = xmalloc(n);

			snprintf(full, n, "refs/remotes/%s", v);
			why = refname_fault(full);
			free(full);
		}
		if (why)
			diag(x->d, x->file, a->push_line, kx,
			    "\"%s\" is neither a remote's name nor a URL: %s "
			    "(e.g. origin, or file:///srv/site.git)", v, why);
	}
	snprintf(kx, sizeof kx, "%s.push-ref", k);
	if (a->push_ref && !a->push)
		diag(x->d, x->file, a->push_ref_line, kx,
		    "push-ref without push (the remote to push to)");
}

static int
store(struct ctx *x, const struct opt *o, void *base, const char *value,
    int line, const char *fullkey)
{
	char *p = (char *)base + o->off;

	if ((o->type == V_REF && !valid_ref(x, value, line, fullkey)) ||
	    (o->type == V_TAG && !valid_tag(x, value, line, fullkey)))
		return -1;
	switch (o->type) {
	case V_REF:
	case V_STR:
		free(*(char **)(void *)p);
		*(char **)(void *)p = xstrdup(value);
		return 0;
	case V_TAG:
	case V_STRV:
		strv_push((struct tend_strv *)(void *)p, value, line);
		return 0;
	case V_BOOL:
		if (tend_config_parse_bool(value, (bool *)(void *)p) != 0) {
			diag(x->d, x->file, line, fullkey,
			    "expected a boolean (true/false), got \"%s\"",
			    value);
			return -1;
		}
		return 0;
	case V_DURATION: {
		int64_t ms = tend_config_parse_duration(value);

		if (ms < 0) {
			diag(x->d, x->file, line, fullkey,
			    "expected a duration like 20ms, 1s, 2m (at most 24h); "
			    "got \"%s\"",
			    value);
			return -1;
		}
		*(uint64_t *)(void *)p = (uint64_t)ms;
		return 0;
	}
	case V_MODE: {
		char *end;
		unsigned long m = strtoul(value, &end, 8);

		if (!*value || *end || m > 07777) {
			diag(x->d, x->file, line, fullkey,
			    "expected an octal mode like 0644, got \"%s\"",
			    value);
			return -1;
		}
		*(unsigned *)(void *)p = (unsigned)m;
		return 0;
	}
	case V_INT: {
		char *end;
		long v = strtol(value, &end, 10);

		if (!*value || *end || v < 0) {
			diag(x->d, x->file, line, fullkey,
			    "expected a whole number >= 0, got \"%s\"", value);
			return -1;
		}
		if (o->off == A(jobs))
			*(unsigned *)(void *)p = (unsigned)v;
		else
			*(long *)(void *)p = v;
		return 0;
	}
	case V_DECLARE: {
		struct tend_app_config *app = base;

		free(app->declare_arg);
		free(app->declare_text);
		app->declare_arg = NULL;
		app->declare_text = xstrdup(value);
		if (strcmp(value, "copy") == 0) {
			app->declare = TEND_DECLARE_COPY;
			return 0;
		}
		if (strncmp(value, "exec ", 5) == 0 && value[5]) {
			app->declare = TEND_DECLARE_EXEC;
			app->declare_arg = xstrdup(value + 5);
			return 0;
		}
		if (strncmp(value, "plugin ", 7) == 0 &&
		    strchr(value + 7, ' ')) {
			app->declare = TEND_DECLARE_PLUGIN;
			app->declare_arg = xstrdup(value + 7);
			return 0;
		}
		diag(x->d, x->file, line, fullkey,
		    "expected copy, exec CMD or plugin FILE.so SYMBOL; got "
		    "\"%s\"",
		    value);
		return -1;
	}
	case V_TARGET: {
		struct tend_app_config *app = base;
		static const struct {
			const char *prefix;
			enum tend_target_kind kind;
		} kinds[] = {{"dir:", TEND_TARGET_DIR},
		    {"file:", TEND_TARGET_FILE}, {"git:", TEND_TARGET_GIT}};

		for (size_t i = 0; i < 3; i++) {
			size_t pl = strlen(kinds[i].prefix);

			if (strncmp(value, kinds[i].prefix, pl) == 0 &&
			    value[pl]) {
				app->target = kinds[i].kind;
				free(app->target_path);
				app->target_path = xstrdup(value + pl);
				return 0;
			}
		}
		/* TYPE:ARG: a plugin's target type (checked once every
		 * [plugin] section is read) */
		const char *colon = strchr(value, ':');
		bool word = colon && colon > value && colon[1];
		for (const char *q = value; word && q < colon; q++)
			word = isalnum((unsigned char)*q) || *q == '-' ||
			    *q == '_';
		if (word) {
			app->target = TEND_TARGET_PLUGIN;
			free(app->target_type);
			app->target_type = xstrndup(value,
			    (size_t)(colon - value));
			free(app->target_path);
			app->target_path = xstrdup(colon + 1);
			return 0;
		}
		diag(x->d, x->file, line, fullkey,
		    "expected dir:PATH, file:PATH, git:REPO or TYPE:ARG of a "
		    "[plugin \"TYPE\"]; got \"%s\"",
		    value);
		return -1;
	}
	}
	return -1;
}

static void
app_defaults(struct tend_app_config *app)
{
	memset(app, 0, sizeof *app);
	app->gitignore = true;
	app->declare = TEND_DECLARE_COPY;
	app->declare_text = xstrdup("copy");
	app->timeout_ms = 30000;
	app->max_delete = -1;
	app->manifest_name = xstrdup(".tend-manifest");
	app->ref = xstrdup("refs/heads/tend");
	app->message = xstrdup("tend: sync {app}");
	app->executable = xstrdup("keep");
	app->symlinks = xstrdup("skip");
}

/* Where an app keeps the line of a key that conflicts between apps are
 * about, or NULL */
static int *
key_line(struct tend_app_config *app, size_t off)
{
	if (off == A(source))
		return &app->source_line;
	if (off == A(target))
		return &app->target_line;
	if (off == A(ref))
		return &app->ref_line;
	if (off == A(prefix))
		return &app->prefix_line;
	if (off == A(executable))
		return &app->executable_line;
	if (off == A(symlinks))
		return &app->symlinks_line;
	if (off == A(name_tmpl))
		return &app->name_line;
	if (off == A(push))
		return &app->push_line;
	if (off == A(push_ref))
		return &app->push_ref_line;
	return NULL;
}

static struct tend_app_config *
find_app(struct tend_config *cfg, const char *name)
{
	for (size_t i = 0; i < cfg->napps; i++)
		if (strcmp(cfg->apps[i].name, name) == 0)
			return &cfg->apps[i];
	return NULL;
}

static void
unknown_key(struct ctx *x, const char *section, const char *key, int line,
    const char *fullkey)
{
	const char *near = closest(section, key);

	if (near)
		diag(x->d, x->file, line, fullkey,
		    "unknown key; did you mean \"%s\"?", near);
	else
		diag(x->d, x->file, line, fullkey, "unknown key");
}

static void
entry(struct ctx *x, const char *section, const char *sub, const char *key,
    const char *value, int line)
{
	char fullkey[512];
	void *base;

	if (sub)
		snprintf(fullkey, sizeof fullkey, "%s.%s.%s", section, sub,
		    key);
	else
		snprintf(fullkey, sizeof fullkey, "%s.%s", section, key);
	if (strcmp(section, "plugin") == 0 && sub) {
		struct tend_plugin_config *pc = &x->cfg->plugins[
		    x->cfg->nplugins - 1];

		if (strcasecmp(key, "path") == 0) {
			free(pc->path);
			pc->path = xstrdup(value);
			pc->path_line = line;
		} else
			diag(x->d, x->file, line, fullkey, "unknown key; a "
			    "[plugin] section has only \"path\" (FILE.so)");
		return;
	}
	if (strcmp(section, "tend") == 0 && !sub)
		base = x->cfg;
	else if (strcmp(section, "app") == 0 && sub) {
		base = find_app(x->cfg, sub);
	} else {
		/* (said once, at the section's header: its keys are not
		 * each an error of their own) */
		if (strcmp(section, "tend") == 0 || strcmp(section, "app") == 0 ||
		    strcmp(section, "plugin") == 0)
			diag(x->d, x->file, line, fullkey,
			    "unknown section [%s%s%s%s]", section,
			    sub ? " \"" : "", sub ? sub : "", sub ? "\"" : "");
		return;
	}
	for (size_t i = 0; i < NOPTS; i++) {
		if (strcmp(opts[i].section, section) == 0 &&
		    strcasecmp(opts[i].name, key) == 0) {
			int *at = base == x->cfg ? NULL
							 : key_line(base, opts[i].off);

			if (set_twice(x, base, i, line, fullkey))
				return;
			if (store(x, &opts[i], base, value, line, fullkey) ==
				0 &&
			    at)
				*at = line;
			if (base != x->cfg &&
			    strncmp(opts[i].help, "git: ", 5) == 0 &&
			    strncmp(opts[i].name, "push", 4) != 0 &&
			    !((struct tend_app_config *)base)->git_key_line) {
				struct tend_app_config *app = base;

				app->git_key = opts[i].name;
				app->git_key_line = line;
			}
			return;
		}
	}
	if (base != x->cfg) {
		/* maybe a plugin target's key: known once the target is */
		struct tend_app_config *app = base;

		app->pkeys = xrealloc(app->pkeys,
		    (app->npkeys + 1) * sizeof *app->pkeys);
		app->pkeys[app->npkeys++] = (struct tend_kv){xstrdup(key),
		    xstrdup(value), line};
		return;
	}
	unknown_key(x, section, key, line, fullkey);
}

/* ---- the lexer ---- */

struct lex {
	const char *p, *end;
	int line;
};

static void
skip_space(struct lex *l)
{
	while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\r'))
		l->p++;
}

static void
skip_line(struct lex *l)
{
	while (l->p < l->end && *l->p != '\n')
		l->p++;
	if (l->p < l->end) {
		l->p++;
		l->line++;
	}
}

/* A value up to the end of the line: quotes, escapes, continuation,
 * trailing comments, surrounding space trimmed (inner space kept).
 * *cut is the character that began a comment after the value (0: none),
 * *bare whether any of it stood outside double quotes; *inside is the
 * length of the value before its first double quote (-1: none), *mixed
 * whether bare text followed a closing one. */
static char *
read_value(struct ctx *x, struct lex *l, const char *fullkey, bool *bad,
    char *cut, bool *bare, long *inside, bool *mixed)
{
	size_t cap = 64, n = 0, keep = 0;
	char *v = xmalloc(cap);
	bool quoted = false;

	skip_space(l);
	while (l->p < l->end) {
		char c = *l->p;

		if (n + 2 >= cap)
			v = realloc(v, cap *= 2);
		if (!v)
			abort();
		if (c == '\n' && !quoted)
			break;
		if (c == '\n') {
			diag(x->d, x->file, l->line, fullkey,
			    "unterminated quoted value");
			*bad = true;
			break;
		}
		if (!quoted && (c == '#' || c == ';')) {
			*cut = c;
			break;
		}
		l->p++;
		if (c == '"') {
			quoted = !quoted;
			if (*inside < 0)
				*inside = (long)n;
			keep = n;
			continue;
		}
		if (!quoted && c != ' ' && c != '\t' && c != '\r' &&
		    c != '\\') {
			*bare = true;
			if (*inside >= 0)
				*mixed = true;
		}
		if (c == '\\') {
			char e = l->p < l->end ? *l->p++ : '\0';

			switch (e) {
			case '\n':
				l->line++;
				continue; /* continuation */
			case 'n':
				v[n++] = '\n';
				break;
			case 't':
				v[n++] = '\t';
				break;
			case '"':
			case '\\':
				v[n++] = e;
				break;
			default:
				/* one message per value, however many */
				if (!*bad)
					diag(x->d, x->file, l->line, fullkey,
					    "unknown escape \\%c (inside a value, "
					    "\\ is written \\\\)",
					    e ? e : '0');
				*bad = true;
				break;
			}
			if (!quoted)
				*bare = true;
			keep = n;
			continue;
		}
		v[n++] = c;
		if (quoted || (c != ' ' && c != '\t' && c != '\r'))
			keep = n;
	}
	if (quoted && !*bad) {
		diag(x->d, x->file, l->line, fullkey,
		    "unterminated quoted value");
		*bad = true;
	}
	v[keep] = '\0';
	skip_line(l);
	return v;
}

/*
 * git-config's comments cut a shell command without a word:
 * `declare = exec sed 's/a/b/;s/c/d/'` stores `sed 's/a/b/`, and every
 * file then fails with a shell syntax error (`plan` runs it too). A
 * comment after an exec value that is not wholly in double quotes, or a
 * quote the shell would find open, is refused (true after the
 * diagnostic). A comment after any other value stays allowed.
 */
static bool
exec_cut(struct ctx *x, int line, const char *fullkey, const char *section,
    const char *sub, const char *key, const char *value, char cut, bool bare,
    long inside, bool mixed)
{
	char open = 0;

	if (!sub || strcmp(section, "app") != 0 ||
	    strcasecmp(key, "declare") != 0 || strncmp(value, "exec", 4) != 0 ||
	    (value[4] != ' ' && value[4] != '\0'))
		return false;
	/* sh's quoting: '' takes everything literally, "" and bare text
	 * take a backslash as an escape */
	for (const char *p = value + 4; *p; p++) {
		if (open == '\'') {
			if (*p == '\'')
				open = 0;
		} else if (*p == '\\' && p[1])
			p++;
		else if (open == '"') {
			if (*p == '"')
				open = 0;
		} else if (*p == '\'' || *p == '"')
			open = *p;
	}
	const char *cmd = value[4] ? value + 5 : "";
	const char *fix = "write the whole value in double quotes, with \\\" "
			  "for \" and \\\\ for \\ inside them, e.g. declare = "
			  "\"exec sed 's/a/b/;s/c/d/'\", and a comment on a line "
			  "of its own";
	/* `exec grep "a b"`: the quotes are tend.conf's, gone before the
	 * shell sees the command (quoting all of it, `exec "cmd; cmd"`, or
	 * the whole value, is how tend.conf keeps a ; or #) */
	if (inside >= 0 && (mixed || inside > 5) && !cut && !open) {
		diag(x->d, x->file, line, fullkey,
		    "the double quotes in this exec value are tend.conf's "
		    "quoting, not the shell's: they are removed, so the shell "
		    "would run \"%s\"; %s", cmd, fix);
		return true;
	}
	if (!(cut && bare) && !open)
		return false;
	if (cut && bare)
		diag(x->d, x->file, line, fullkey,
		    "the command is cut at '%c': # and ; start a comment "
		    "outside double quotes, so the shell would run \"%s\"%s; "
		    "%s",
		    cut, cmd, open == '\'' ? " (with a ' left open)"
			: open ? " (with a \" left open)" : "", fix);
	else
		diag(x->d, x->file, line, fullkey,
		    "the command \"%s\" leaves a %c open (# and ; start a "
		    "comment outside double quotes); %s", cmd, open, fix);
	return true;
}

static bool
key_char(char c)
{
	return isalnum((unsigned char)c) || c == '-' || c == '_';
}

/* ---- apps that would fight, or read what they write ---- */

/*
 * The place `path` names, for comparing apps' paths: "." and ".." and
 * repeated or trailing slashes resolved lexically, relative to the
 * workspace ("" is the workspace itself; a leading "../" stays). With
 * `root`, the place is absolute and the symbolic links of its longest
 * existing part are resolved (realpath), so that a link to a directory
 * and the directory are one place.
 */
static char *
place(const char *root, const char *path)
{
	size_t cap = (root ? strlen(root) : 0) + strlen(path) + 3, n = 0, base;
	char *in = xmalloc(cap), *out = xmalloc(cap);

	if (root && path[0] != '/')
		snprintf(in, cap, "%s/%s", root, path);
	else
		snprintf(in, cap, "%s", path);
	base = in[0] == '/';
	if (base)
		out[n++] = '/';
	for (const char *p = in; *p;) {
		size_t cl = strcspn(p, "/");

		if (cl == 2 && p[0] == '.' && p[1] == '.') {
			size_t k = n;

			while (k > base && out[k - 1] != '/')
				k--;
			if (n > base && !(n - k == 2 && out[k] == '.' &&
					    out[k + 1] == '.'))
				n = k > base ? k - 1 : base;
			else if (!base) {
				if (n > 0)
					out[n++] = '/';
				out[n++] = '.';
				out[n++] = '.';
			}
		} else if (cl > 0 && !(cl == 1 && p[0] == '.')) {
			if (n > base)
				out[n++] = '/';
			memcpy(out + n, p, cl);
			n += cl;
		}
		p += cl;
		if (*p == '/')
			p++;
	}
	out[n] = '\0';
	free(in);
	if (!root)
		return out;
	/* resolve the longest part that exists; the rest is kept */
	for (size_t m = n;;) {
		char keep = out[m], *real;

		out[m] = '\0';
		real = realpath(m ? out : "/", NULL);
		out[m] = keep;
		if (real) {
			const char *rest = out + m;
			size_t rl = strlen(real);
			char *res = xmalloc(rl + strlen(rest) + 2);

			if (*rest == '/' && rl && real[rl - 1] == '/')
				rest++;
			snprintf(res, rl + strlen(rest) + 2, "%s%s%s", real,
			    *rest && *rest != '/' && real[rl - 1] != '/' ? "/"
									 : "",
			    rest);
			free(real);
			free(out);
			return res;
		}
		if (m <= 1)
			return out; /* not even "/": compare it as it is */
		while (m > 1 && out[m - 1] != '/')
			m--;
		if (m > 1)
			m--;
	}
}

/* Is place `in` the place `out` or inside it? */
static bool
within(const char *in, const char *out)
{
	size_t ol = strlen(out);

	if (ol == 0) /* the workspace, lexically */
		return in[0] != '/' &&
		    !(in[0] == '.' && in[1] == '.' &&
			(in[2] == '/' || in[2] == '\0'));
	if (strcmp(out, "/") == 0)
		return in[0] == '/';
	return strncmp(in, out, ol) == 0 && (in[ol] == '/' || in[ol] == '\0');
}

/* "is", "is inside" or "holds": how place `a` stands to place `b`
 * (which overlap) */
static const char *
relation(const char *a, const char *b)
{
	if (strcmp(a, b) == 0)
		return "is";
	return within(a, b) ? "is inside" : "holds";
}

static const char *
kind_name(enum tend_target_kind k)
{
	return k == TEND_TARGET_DIR ? "dir" : k == TEND_TARGET_FILE ? "file"
								    : "git";
}

struct app_places {
	char *target; /* dir, file: the place written; git: the repository */
	char *source;
	char *prefix; /* git: "" for the whole tree */
};

/* A git target's repository: `git:.` and `git:.git` are one */
static char *
repo_place(const char *root, const char *path)
{
	char *p = place(root, path);
	size_t n = strlen(p);

	if (n >= 4 && strcmp(p + n - 4, ".git") == 0 &&
	    (n == 4 || p[n - 5] == '/'))
		p[n == 4 ? 0 : n == 5 ? 1 : n - 5] = '\0';
	return p;
}

/*
 * Two apps whose targets overlap overwrite and delete each other's
 * entries, and `check` and `sync --full` cannot settle it: each is right
 * about its own records. So a target has one owner and no other target
 * inside it: dir and file targets may not be the same place or nest,
 * and git targets on one repository and ref may not share a subtree
 * (prefixes that are equal or nest, or one without a prefix). Apps
 * still share a parent directory side by side (dir:public/a and
 * dir:public/b).
 */
static void
overlap_check(struct tend_config *cfg, const struct app_places *pl,
    const char *origin, struct tend_diags *diags)
{
	char k[300];

	for (size_t j = 0; j < cfg->napps; j++) {
		struct tend_app_config *b = &cfg->apps[j];
		bool bgit = b->target == TEND_TARGET_GIT;

		if (!pl[j].target)
			continue;
		for (size_t i = 0; i < j; i++) {
			struct tend_app_config *a = &cfg->apps[i];
			bool agit = a->target == TEND_TARGET_GIT;

			if (!pl[i].target || agit != bgit)
				continue;
			if (!bgit) {
				const char *ta = pl[i].target, *tb = pl[j].target;

				if (!within(ta, tb) && !within(tb, ta))
					continue;
				size_t hl = 2 * (strlen(a->target_path) +
				    strlen(b->target_path)) + strlen(a->name) +
				    strlen(b->name) + 40;
				char *hint = xmalloc(hl);

				/* two directories: side by side in the outer one */
				if (a->target == TEND_TARGET_DIR &&
				    b->target == TEND_TARGET_DIR) {
					char *at = place(NULL, within(tb, ta)
						? a->target_path
						: b->target_path);
					const char *sl = *at ? "/" : "";

					snprintf(hint, hl,
					    " (e.g. dir:%s%s%s and dir:%s%s%s)", at,
					    sl, a->name, at, sl, b->name);
					free(at);
				} else
					hint[0] = '\0';

				snprintf(k, sizeof k, "app.%s.target", b->name);
				diag(diags, origin,
				    b->target_line ? b->target_line : b->line, k,
				    "%s:%s %s %s:%s, the target of app \"%s\" "
				    "(%s:%d): apps whose targets overlap "
				    "overwrite and delete each other's entries; "
				    "give each app a target of its own, side by "
				    "side%s",
				    kind_name(b->target), b->target_path,
				    relation(tb, ta), kind_name(a->target),
				    a->target_path, a->name, origin,
				    a->target_line ? a->target_line : a->line,
				    hint);
				free(hint);
				break;
			}
			const char *pa = pl[i].prefix, *pb = pl[j].prefix;

			if (strcmp(pl[i].target, pl[j].target) != 0 ||
			    strcmp(a->ref, b->ref) != 0 ||
			    (!within(pa, pb) && !within(pb, pa)))
				continue;
			/* the key that makes them meet: the prefix, or the
			 * ref the whole tree of which is taken */
			int lb = b->prefix_line ? b->prefix_line
			    : b->ref_line	    ? b->ref_line
			    : b->target_line	    ? b->target_line
						    : b->line;
			int la = a->prefix_line ? a->prefix_line
			    : a->ref_line	    ? a->ref_line
			    : a->target_line	    ? a->target_line
						    : a->line;
			char da[300], db[300];

			snprintf(k, sizeof k, "app.%s.%s", b->name,
			    b->prefix_line ? "prefix"
			    : b->ref_line  ? "ref"
					   : "target");
			if (*pa)
				snprintf(da, sizeof da, "prefix \"%s\"", a->prefix);
			else
				snprintf(da, sizeof da, "the whole tree");
			if (*pb)
				snprintf(db, sizeof db, "prefix \"%s\"", b->prefix);
			else
				snprintf(db, sizeof db, "the whole tree");
			diag(diags, origin, lb, k,
			    "%s of %s in git:%s %s %s of app \"%s\" (%s:%d): two "
			    "apps committing one subtree of a ref undo each "
			    "other's entries; give each app its own ref, or "
			    "prefixes side by side",
			    db, b->ref, b->target_path, relation(pb, pa), da,
			    a->name, origin, la);
			break;
		}
	}
}

/*
 * A tag moves to its app's newest commit: two apps of one repository
 * keeping the same tag would move it back and forth, each deleting it
 * when dropped. One app per tag.
 */
static void
tag_check(struct tend_config *cfg, const struct app_places *pl,
    const char *origin, struct tend_diags *diags)
{
	char k[300];

	for (size_t j = 0; j < cfg->napps; j++) {
		struct tend_app_config *b = &cfg->apps[j];

		if (b->target != TEND_TARGET_GIT || !pl[j].target)
			continue;
		for (size_t i = 0; i < j; i++) {
			struct tend_app_config *a = &cfg->apps[i];

			if (a->target != TEND_TARGET_GIT || !pl[i].target ||
			    strcmp(pl[i].target, pl[j].target) != 0)
				continue;
			for (size_t t = 0; t < b->tags.n; t++)
				for (size_t u = 0; u < a->tags.n; u++) {
					if (strcmp(b->tags.v[t], a->tags.v[u]))
						continue;
					snprintf(k, sizeof k, "app.%s.tag",
					    b->name);
					diag(diags, origin, b->tags.line[t], k,
					    "tag \"%s\" in git:%s is also kept by "
					    "app \"%s\" (%s:%d): each app would "
					    "move it to its own commits; give "
					    "each app a tag of its own",
					    b->tags.v[t], b->target_path,
					    a->name, origin, a->tags.line[u]);
				}
		}
	}
}

/* Does app i's target feed app j's source (they overlap)? */
static bool
feeds(const struct tend_config *cfg, const struct app_places *pl, size_t i,
    size_t j)
{
	return cfg->apps[i].target != TEND_TARGET_GIT && pl[i].target &&
	    pl[j].source &&
	    (within(pl[i].target, pl[j].source) ||
		within(pl[j].source, pl[i].target));
}

/* A path from v back to s through apps numbered above s: its apps after
 * s go into path[], their count into *len. */
static bool
loop_from(const struct tend_config *cfg, const struct app_places *pl,
    size_t s, size_t v, bool *seen, size_t *path, size_t *len)
{
	for (size_t w = 0; w < cfg->napps; w++) {
		if (w == v || !feeds(cfg, pl, v, w))
			continue;
		if (w == s)
			return true;
		if (w < s || seen[w])
			continue;
		seen[w] = true;
		path[(*len)++] = w;
		if (loop_from(cfg, pl, s, w, seen, path, len))
			return true;
		(*len)--;
	}
	return false;
}

/*
 * A pass reads its source and writes its target. A target inside the
 * app's own source is fine, the walk skips it; a target that is the
 * source, or holds it, is read back on the next pass. Across apps a
 * target inside another app's source is a pipeline (html from docs into
 * public, public into a git branch) until the chain comes back: each
 * pass would then feed the last one's output in again, without end.
 * Loops are judged from the directories alone, not the globs.
 */
static void
loop_check(struct tend_config *cfg, const struct app_places *pl,
    const char *origin, struct tend_diags *diags)
{
	size_t n = cfg->napps, *path = xmalloc(n * sizeof *path);
	bool *seen = xmalloc(n * sizeof *seen);
	char k[300];

	for (size_t s = 0; s < n; s++) {
		struct tend_app_config *a = &cfg->apps[s];
		int tl = a->target_line ? a->target_line : a->line;
		int sl = a->source_line ? a->source_line : a->line;
		size_t len = 0;

		if (!pl[s].target || !pl[s].source ||
		    a->target == TEND_TARGET_GIT)
			continue;
		snprintf(k, sizeof k, "app.%s.target", a->name);
		if (within(pl[s].source, pl[s].target)) {
			diag(diags, origin, tl, k,
			    "%s:%s %s the app's own source \"%s\" (%s:%d): "
			    "each pass would read what the last one wrote; "
			    "keep the target outside the source",
			    kind_name(a->target), a->target_path,
			    relation(pl[s].target, pl[s].source), a->source,
			    origin, sl);
			continue;
		}
		memset(seen, 0, n * sizeof *seen);
		if (!loop_from(cfg, pl, s, s, seen, path, &len))
			continue;
		size_t cap = 1024 * (len + 1), used = 0;
		char *msg = xmalloc(cap);
		size_t from = s;

		for (size_t e = 0; e <= len; e++) {
			size_t to = e < len ? path[e] : s;
			struct tend_app_config *f = &cfg->apps[from],
					       *t = &cfg->apps[to];
			int l = t->source_line ? t->source_line : t->line;
			char who[300];

			if (to == s)
				snprintf(who, sizeof who, "this app");
			else
				snprintf(who, sizeof who, "app \"%s\"", t->name);
			used += (size_t)snprintf(msg + used, cap - used,
			    "%s%s:%s %s the source \"%s\" of %s (%s:%d)",
			    e ? ", whose target " : "", kind_name(f->target),
			    f->target_path,
			    relation(pl[from].target, pl[to].source),
			    t->source, who, origin, l);
			if (used >= cap)
				used = cap - 1;
			from = to;
		}
		diag(diags, origin, tl, k,
		    "%s: a feedback loop, each pass would feed its own "
		    "output back in, without end; move one of these targets "
		    "out of the source it is in",
		    msg);
		free(msg);
	}
	free(path);
	free(seen);
}

static void
app_checks(struct tend_config *cfg, const char *origin, const char *root,
    struct tend_diags *diags)
{
	struct app_places *pl = xmalloc((cfg->napps + 1) * sizeof *pl);

	for (size_t i = 0; i < cfg->napps; i++) {
		struct tend_app_config *a = &cfg->apps[i];

		/* a plugin's target is its own business: no place here */
		pl[i].target = !a->target_path ||
			a->target == TEND_TARGET_PLUGIN
		    ? NULL
		    : a->target == TEND_TARGET_GIT
		    ? repo_place(root, a->target_path)
		    : place(root, a->target_path);
		pl[i].source = a->source ? place(root, a->source) : NULL;
		pl[i].prefix = place(NULL, a->prefix ? a->prefix : "");
	}
	overlap_check(cfg, pl, origin, diags);
	tag_check(cfg, pl, origin, diags);
	loop_check(cfg, pl, origin, diags);
	for (size_t i = 0; i < cfg->napps; i++) {
		free(pl[i].target);
		free(pl[i].source);
		free(pl[i].prefix);
	}
	free(pl);
}

int
tend_config_parse(const char *buf, size_t len, const char *origin,
    struct tend_config *out, struct tend_diags *diags)
{
	return tend_config_parse_in(buf, len, origin, NULL, out, diags);
}

int
tend_config_parse_in(const char *buf, size_t len, const char *origin,
    const char *root, struct tend_config *out, struct tend_diags *diags)
{
	struct lex l = {buf, buf + len, 1};
	struct ctx x = {origin, diags, out, NULL, 0};
	char *section = NULL, *sub = NULL;
	size_t before = diags->n;

	memset(out, 0, sizeof *out);
	out->file = xstrdup(origin);
	out->state = xstrdup(".tend");
	out->debounce_ms = 20;
	out->max_delay_ms = 1000;
	while (l.p < l.end) {
		skip_space(&l);
		if (l.p >= l.end)
			break;
		char c = *l.p;
		if (c == '\n') {
			l.p++;
			l.line++;
			continue;
		}
		if (c == '#' || c == ';') {
			skip_line(&l);
			continue;
		}
		if (c == '[') {
			const char *s = ++l.p, *e;
			int line = l.line;

			free(section);
			free(sub);
			section = sub = NULL;
			while (l.p < l.end && key_char(*l.p))
				l.p++;
			e = l.p;
			skip_space(&l);
			if (l.p < l.end && *l.p == '"') {
				const char *ss = ++l.p;
				while (l.p < l.end && *l.p != '"' && *l.p != '\n')
					l.p++;
				if (l.p >= l.end || *l.p != '"') {
					diag(diags, origin, line, NULL,
					    "unterminated subsection name");
					skip_line(&l);
					continue;
				}
				sub = xstrndup(ss, (size_t)(l.p - ss));
				l.p++;
				skip_space(&l);
			}
			if (l.p >= l.end || *l.p != ']' || e == s) {
				diag(diags, origin, line, NULL,
				    "malformed section header");
				free(sub);
				sub = NULL;
				skip_line(&l);
				continue;
			}
			l.p++;
			section = xstrndup(s, (size_t)(e - s));
			for (char *q = section; *q; q++)
				*q = (char)tolower((unsigned char)*q);
			if (strcmp(section, "app") == 0 && sub) {
				if (find_app(out, sub)) {
					/* git-config merges repeated sections */
				} else {
					struct tend_app_config *na = realloc(
					    out->apps,
					    (out->napps + 1) * sizeof *na);
					if (!na)
						abort();
					out->apps = na;
					app_defaults(&out->apps[out->napps]);
					out->apps[out->napps].name = xstrdup(sub);
					out->apps[out->napps].line = line;
					out->napps++;
				}
			} else if (strcmp(section, "plugin") == 0 && sub) {
				struct tend_plugin_config *pc = NULL;

				for (size_t i = 0; i < out->nplugins; i++)
					if (strcmp(out->plugins[i].name, sub) ==
					    0)
						pc = &out->plugins[i];
				if (pc) {
					/* one section per plugin: keep it last
					 * so its keys land in it */
					struct tend_plugin_config t = *pc;

					*pc = out->plugins[out->nplugins - 1];
					out->plugins[out->nplugins - 1] = t;
				} else {
					out->plugins = xrealloc(
					    out->plugins, (out->nplugins + 1) *
						sizeof *out->plugins);
					out->plugins[out->nplugins++] =
					    (struct tend_plugin_config){
						xstrdup(sub), NULL, line, 0};
				}
			} else if (strcmp(section, "app") == 0 ||
			    strcmp(section, "plugin") == 0) {
				diag(diags, origin, line, NULL,
				    "[%s] needs a name: [%s \"NAME\"]", section,
				    section);
			} else if (strcmp(section, "tend") != 0) {
				/* a typo of one of the three */
				static const char *const known[] = {"tend",
				    "app", "plugin"};
				const char *like = NULL;

				for (size_t k = 0; k < 3 && !like; k++)
					if (tend_config_distance(section,
						known[k]) <= 2)
						like = known[k];
				if (like)
					diag(diags, origin, line, NULL,
					    "unknown section [%s]; did you "
					    "mean [%s]?", section, like);
				else
					diag(diags, origin, line, NULL,
					    "unknown section [%s] (there are "
					    "[tend], [app \"NAME\"] and "
					    "[plugin \"TYPE\"])", section);
			}
			skip_space(&l);
			if (l.p < l.end && (*l.p == '#' || *l.p == ';'))
				skip_line(&l);
			else if (l.p < l.end && *l.p != '\n') {
				diag(diags, origin, line, NULL,
				    "text after section header");
				skip_line(&l);
			}
			continue;
		}
		/* key [= value] */
		const char *ks = l.p;
		int line = l.line;
		while (l.p < l.end && key_char(*l.p))
			l.p++;
		char *key = xstrndup(ks, (size_t)(l.p - ks));
		char fullkey[512];
		snprintf(fullkey, sizeof fullkey, "%s%s%s%s%s",
		    section ? section : "", sub ? "." : "", sub ? sub : "",
		    section ? "." : "", key);
		skip_space(&l);
		if (!*key) {
			diag(diags, origin, line, NULL, "expected a key");
			free(key);
			skip_line(&l);
			continue;
		}
		char *value, cut = 0;
		bool bad = false, bare = false, mixed = false;
		long inside = -1;
		if (l.p < l.end && *l.p == '=') {
			l.p++;
			value = read_value(&x, &l, fullkey, &bad, &cut, &bare,
			    &inside, &mixed);
		} else if (l.p >= l.end || *l.p == '\n' || *l.p == '#' ||
		    *l.p == ';') {
			value = xstrdup("true"); /* git: a bare key is true */
			skip_line(&l);
		} else {
			diag(diags, origin, line, fullkey, "expected '='");
			free(key);
			skip_line(&l);
			continue;
		}
		if (!section)
			diag(diags, origin, line, fullkey,
			    "key outside of any section");
		else if (!bad && !exec_cut(&x, line, fullkey, section, sub,
				     key, value, cut, bare, inside, mixed))
			entry(&x, section, sub, key, value, line);
		free(key);
		free(value);
	}
	free(section);
	free(sub);
	/* cross-key validation */
	for (size_t i = 0; i < out->napps; i++) {
		struct tend_app_config *a = &out->apps[i];
		char k[300];

		snprintf(k, sizeof k, "app.%s", a->name);
		if (!a->source)
			diag(diags, origin, a->line, k,
			    "missing \"source\" (the directory to read)");
		if (!a->target)
			diag(diags, origin, a->line, k,
			    "missing \"target\" (dir:PATH, file:PATH or git:REPO)");
		if (a->source && a->source[0] == '/')
			diag(diags, origin, a->line, k,
			    "source must be relative to the workspace");
		if (a->target_path && a->target_path[0] == '/' &&
		    a->target != TEND_TARGET_GIT &&
		    a->target != TEND_TARGET_PLUGIN)
			diag(diags, origin, a->line, k,
			    "target path must be relative to the workspace");
		if (a->target == TEND_TARGET_FILE &&
		    a->declare != TEND_DECLARE_EXEC &&
		    a->declare != TEND_DECLARE_PLUGIN)
			diag(diags, origin, a->line, k,
			    "a file: target needs declare = exec CMD (it sees "
			    "every source) or a plugin");
		char kx[320];

		/* {word}: one of the placeholders, or a typo that would
		 * become part of every entry's name */
		snprintf(kx, sizeof kx, "%s.name", k);
		for (const char *q = a->name_tmpl; q && (q = strchr(q, '{'));
		     q++) {
			size_t n = strspn(q + 1, "abcdefghijklmnopqrstuvwxyz");
			static const char *known[] = {"path", "dir", "name",
			    "stem", "ext", NULL};
			bool ok = n == 0 || q[1 + n] != '}';

			for (size_t j = 0; !ok && known[j]; j++)
				ok = strlen(known[j]) == n &&
				    strncmp(q + 1, known[j], n) == 0;
			if (!ok)
				diag(diags, origin,
				    a->name_line ? a->name_line : a->line, kx,
				    "unknown placeholder {%.*s} (there are "
				    "{path} {dir} {name} {stem} {ext})",
				    (int)n, q + 1);
		}
		snprintf(kx, sizeof kx, "%s.executable", k);
		if (strcmp(a->executable, "keep") != 0 &&
		    strcmp(a->executable, "never") != 0 &&
		    strcmp(a->executable, "always") != 0)
			diag(diags, origin,
			    a->executable_line ? a->executable_line : a->line,
			    kx, "executable must be keep, never or always");
		snprintf(kx, sizeof kx, "%s.symlinks", k);
		if (strcmp(a->symlinks, "skip") != 0 &&
		    strcmp(a->symlinks, "copy") != 0 &&
		    strcmp(a->symlinks, "copy-any") != 0)
			diag(diags, origin,
			    a->symlinks_line ? a->symlinks_line : a->line, kx,
			    "symlinks must be skip, copy or copy-any");
		else if (strcmp(a->symlinks, "skip") != 0 &&
		    (a->declare != TEND_DECLARE_COPY ||
			(a->target != TEND_TARGET_DIR &&
			    a->target != TEND_TARGET_GIT)))
			diag(diags, origin,
			    a->symlinks_line ? a->symlinks_line : a->line, kx,
			    "symlinks = %s needs declare = copy and a dir: or "
			    "git: target", a->symlinks);
		push_checks(&x, a, k);
		if (a->git_key_line && a->target &&
		    a->target != TEND_TARGET_GIT) {
			snprintf(kx, sizeof kx, "%s.%s", k, a->git_key);
			diag(diags, origin, a->git_key_line, kx,
			    "%s is a key of git: targets; this app's target "
			    "is %s (tend.conf:%d)", a->git_key,
			    a->target == TEND_TARGET_DIR    ? "a directory"
			    : a->target == TEND_TARGET_FILE ? "a file"
							    : "a plugin's",
			    a->target_line ? a->target_line : a->line);
		}
		snprintf(kx, sizeof kx, "%s.ref", k);
		if (a->target == TEND_TARGET_GIT && a->ref &&
		    strncmp(a->ref, "refs/tags/", 10) == 0)
			diag(diags, origin, a->ref_line ? a->ref_line : a->line,
			    kx, "%s is a tag: tend commits to a branch "
			    "(refs/heads/...) and keeps tags on its commits "
			    "with tag = NAME", a->ref);
		for (const char *q = a->name; *q; q++)
			if (*q == '/' || (unsigned char)*q < 0x20) {
				diag(diags, origin, a->line, k,
				    "app names cannot hold '/' or control "
				    "characters");
				break;
			}
	}
	/* plugins: a path each; a plugin target names one; the other apps'
	 * unknown keys are errors now */
	for (size_t i = 0; i < out->nplugins; i++)
		if (!out->plugins[i].path) {
			char k[300];

			snprintf(k, sizeof k, "plugin.%s", out->plugins[i].name);
			diag(diags, origin, out->plugins[i].line, k,
			    "missing \"path\" (the plugin's FILE.so)");
		}
	for (size_t i = 0; i < out->napps; i++) {
		struct tend_app_config *a = &out->apps[i];
		bool found = false;

		for (size_t j = 0; a->target == TEND_TARGET_PLUGIN &&
		     j < out->nplugins; j++)
			found |= strcmp(out->plugins[j].name, a->target_type) == 0;
		if (a->target == TEND_TARGET_PLUGIN && !found) {
			char k[300];

			snprintf(k, sizeof k, "app.%s.target", a->name);
			diag(diags, origin, a->target_line ? a->target_line
							   : a->line, k,
			    "unknown target type \"%s\": expected dir:, file:, "
			    "git:, or the name of a [plugin \"%s\"] section "
			    "(with path = FILE.so)", a->target_type,
			    a->target_type);
		}
		if (a->target == TEND_TARGET_PLUGIN)
			continue; /* its keys are the plugin's to check */
		for (size_t k = 0; k < a->npkeys; k++) {
			char fk[512];

			snprintf(fk, sizeof fk, "app.%s.%s", a->name,
			    a->pkeys[k].key);
			unknown_key(&x, "app", a->pkeys[k].key, a->pkeys[k].line,
			    fk);
		}
	}
	app_checks(out, origin, root, diags);
	free(x.set);
	if (diags->n > before) {
		tend_config_finish(out);
		return -1;
	}
	return 0;
}

void
tend_config_finish(struct tend_config *cfg)
{
	for (size_t i = 0; i < cfg->napps; i++) {
		struct tend_app_config *a = &cfg->apps[i];

		free(a->name);
		free(a->source);
		strv_finish(&a->include);
		strv_finish(&a->exclude);
		free(a->declare_arg);
		free(a->declare_text);
		free(a->name_tmpl);
		free(a->target_path);
		free(a->manifest_name);
		free(a->ref);
		free(a->prefix);
		free(a->message);
		free(a->author);
		free(a->executable);
		free(a->symlinks);
		free(a->push);
		free(a->push_ref);
		strv_finish(&a->tags);
		free(a->target_type);
		for (size_t k = 0; k < a->npkeys; k++) {
			free(a->pkeys[k].key);
			free(a->pkeys[k].value);
		}
		free(a->pkeys);
		strv_finish(&a->plugin_values);
	}
	for (size_t i = 0; i < cfg->nplugins; i++) {
		free(cfg->plugins[i].name);
		free(cfg->plugins[i].path);
	}
	free(cfg->plugins);
	free(cfg->file);
	free(cfg->apps);
	free(cfg->state);
	memset(cfg, 0, sizeof *cfg);
}
