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
	char msg[512];
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
strv_push(struct tend_strv *sv, const char *s)
{
	char **nv = realloc(sv->v, (sv->n + 1) * sizeof *sv->v);

	if (!nv)
		abort();
	sv->v = nv;
	sv->v[sv->n++] = xstrdup(s);
}

static void
strv_finish(struct tend_strv *sv)
{
	for (size_t i = 0; i < sv->n; i++)
		free(sv->v[i]);
	free(sv->v);
	sv->v = NULL;
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

static int
parse_bool(const char *s, bool *out)
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
	V_TARGET };

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
	    "dir:PATH | file:PATH | git:REPO (required)"},
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
	{"app", "ref", V_STR, A(ref), "refs/heads/tend",
	    "git: the ref to commit to"},
	{"app", "prefix", V_STR, A(prefix), NULL,
	    "git: subtree inside each commit"},
	{"app", "message", V_STR, A(message), "tend: sync {app}",
	    "git: commit message; {app} {count}"},
	{"app", "author", V_STR, A(author), NULL,
	    "git: \"Name <email>\" of the commits"},
	{"app", "executable", V_STR, A(executable), "keep",
	    "git: keep | never | always; changing it is lossy"},
	{"app", "tag", V_STRV, A(tags), NULL,
	    "git: lightweight tag kept on the synced commit (repeatable)"},
	{"app", "allow-checked-out", V_BOOL, A(allow_checked_out), "false",
	    "git: write a ref that is checked out in a working tree"},
};

#define NOPTS (sizeof opts / sizeof *opts)

static size_t
distance(const char *a, const char *b)
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
		size_t d = distance(key, opts[i].name);
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
	return out;
}

/* ---- storing a value ---- */

struct ctx {
	const char *file;
	struct tend_diags *d;
	struct tend_config *cfg;
};

static int
store(struct ctx *x, const struct opt *o, void *base, const char *value,
    int line, const char *fullkey)
{
	char *p = (char *)base + o->off;

	switch (o->type) {
	case V_STR:
		free(*(char **)(void *)p);
		*(char **)(void *)p = xstrdup(value);
		return 0;
	case V_STRV:
		strv_push((struct tend_strv *)(void *)p, value);
		return 0;
	case V_BOOL:
		if (parse_bool(value, (bool *)(void *)p) != 0) {
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
		diag(x->d, x->file, line, fullkey,
		    "expected dir:PATH, file:PATH or git:REPO; got \"%s\"",
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

static struct tend_app_config *
find_app(struct tend_config *cfg, const char *name)
{
	for (size_t i = 0; i < cfg->napps; i++)
		if (strcmp(cfg->apps[i].name, name) == 0)
			return &cfg->apps[i];
	return NULL;
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
	if (strcmp(section, "tend") == 0 && !sub)
		base = x->cfg;
	else if (strcmp(section, "app") == 0 && sub) {
		base = find_app(x->cfg, sub);
	} else {
		diag(x->d, x->file, line, fullkey, "unknown section [%s%s%s%s]",
		    section, sub ? " \"" : "", sub ? sub : "", sub ? "\"" : "");
		return;
	}
	for (size_t i = 0; i < NOPTS; i++) {
		if (strcmp(opts[i].section, section) == 0 &&
		    strcasecmp(opts[i].name, key) == 0) {
			store(x, &opts[i], base, value, line, fullkey);
			return;
		}
	}
	const char *near = closest(section, key);
	if (near)
		diag(x->d, x->file, line, fullkey,
		    "unknown key; did you mean \"%s\"?", near);
	else
		diag(x->d, x->file, line, fullkey, "unknown key");
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
 * trailing comments, surrounding space trimmed (inner space kept). */
static char *
read_value(struct ctx *x, struct lex *l, const char *fullkey, bool *bad)
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
		if (!quoted && (c == '#' || c == ';'))
			break;
		l->p++;
		if (c == '"') {
			quoted = !quoted;
			keep = n;
			continue;
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
				diag(x->d, x->file, l->line, fullkey,
				    "unknown escape \\%c", e ? e : '0');
				*bad = true;
				break;
			}
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

static bool
key_char(char c)
{
	return isalnum((unsigned char)c) || c == '-' || c == '_';
}

/* "./a//b/" and "a/b" name the same place */
static void
norm_path(char *out, size_t size, const char *p)
{
	size_t n = 0;

	while (p[0] == '.' && p[1] == '/')
		p += 2;
	for (; *p && n + 1 < size; p++) {
		if (*p == '/' && (n == 0 || out[n - 1] == '/'))
			continue;
		out[n++] = *p;
	}
	while (n > 0 && out[n - 1] == '/')
		n--;
	out[n] = '\0';
}

static bool
same_str(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

/*
 * A container or file target has one owner: two apps naming the same one
 * would take it over from each other on every pass, and dropping one app
 * would forget the other's entries with it. Apps can still share a
 * directory through distinct containers (dir:public and dir:public/img)
 * or distinct entry names in distinct targets.
 */
static void
same_target_check(struct tend_config *cfg, const char *origin,
    struct tend_diags *diags)
{
	for (size_t j = 0; j < cfg->napps; j++) {
		struct tend_app_config *b = &cfg->apps[j];
		char pb[1024], pa[1024], k[300];

		if (!b->target_path)
			continue;
		norm_path(pb, sizeof pb, b->target_path);
		for (size_t i = 0; i < j; i++) {
			struct tend_app_config *a = &cfg->apps[i];

			if (!a->target_path || a->target != b->target)
				continue;
			norm_path(pa, sizeof pa, a->target_path);
			if (strcmp(pa, pb) != 0 ||
			    (b->target == TEND_TARGET_GIT &&
				(!same_str(a->ref, b->ref) ||
				    !same_str(a->prefix, b->prefix))))
				continue;
			char hint[1100] = "";
			if (b->target == TEND_TARGET_DIR)
				snprintf(hint, sizeof hint,
				    " (e.g. target = dir:%s/%s)", pb, b->name);
			else if (b->target == TEND_TARGET_GIT)
				snprintf(hint, sizeof hint,
				    " (e.g. prefix = %s)", b->name);
			snprintf(k, sizeof k, "app.%s.target", b->name);
			diag(diags, origin, b->line, k,
			    "the same target as app \"%s\" (line %d): a "
			    "target has one owner; give each app its own%s",
			    a->name, a->line, hint);
			break;
		}
	}
}

int
tend_config_parse(const char *buf, size_t len, const char *origin,
    struct tend_config *out, struct tend_diags *diags)
{
	struct lex l = {buf, buf + len, 1};
	struct ctx x = {origin, diags, out};
	char *section = NULL, *sub = NULL;
	size_t before = diags->n;

	memset(out, 0, sizeof *out);
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
			} else if (strcmp(section, "app") == 0) {
				diag(diags, origin, line, NULL,
				    "[app] needs a name: [app \"NAME\"]");
			} else if (strcmp(section, "tend") != 0) {
				diag(diags, origin, line, NULL,
				    "unknown section [%s]", section);
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
		char *value;
		bool bad = false;
		if (l.p < l.end && *l.p == '=') {
			l.p++;
			value = read_value(&x, &l, fullkey, &bad);
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
		else if (!bad)
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
		    a->target != TEND_TARGET_GIT)
			diag(diags, origin, a->line, k,
			    "target path must be relative to the workspace");
		if (a->target == TEND_TARGET_FILE &&
		    a->declare != TEND_DECLARE_EXEC &&
		    a->declare != TEND_DECLARE_PLUGIN)
			diag(diags, origin, a->line, k,
			    "a file: target needs declare = exec CMD (it sees "
			    "every source) or a plugin");
		if (strcmp(a->executable, "keep") != 0 &&
		    strcmp(a->executable, "never") != 0 &&
		    strcmp(a->executable, "always") != 0)
			diag(diags, origin, a->line, k,
			    "executable must be keep, never or always");
		if (strcmp(a->symlinks, "skip") != 0 &&
		    strcmp(a->symlinks, "copy") != 0 &&
		    strcmp(a->symlinks, "copy-any") != 0)
			diag(diags, origin, a->line, k,
			    "symlinks must be skip, copy or copy-any");
		else if (strcmp(a->symlinks, "skip") != 0 &&
		    (a->declare != TEND_DECLARE_COPY ||
			a->target == TEND_TARGET_FILE))
			diag(diags, origin, a->line, k,
			    "symlinks = %s needs declare = copy and a dir: or "
			    "git: target", a->symlinks);
		for (const char *q = a->name; *q; q++)
			if (*q == '/' || (unsigned char)*q < 0x20) {
				diag(diags, origin, a->line, k,
				    "app names cannot hold '/' or control "
				    "characters");
				break;
			}
	}
	same_target_check(out, origin, diags);
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
		strv_finish(&a->tags);
	}
	free(cfg->apps);
	free(cfg->state);
	memset(cfg, 0, sizeof *cfg);
}
