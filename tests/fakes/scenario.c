/*
 * scenario.c - fixture and script interpreter; see scenario.h.
 */
#define _GNU_SOURCE
#include "scenario.h"

#include <assert.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "inspect.h"
#include "tend/buf.h"
#include "tend/status.h"

static void
on_event(const struct tend_event *ev, void *arg)
{
	struct fixture *f = arg;

	switch (ev->kind) {
	case TEND_EV_ACTION_PLANNED:
		f->nplanned_ev++;
		break;
	case TEND_EV_ACTION_APPLIED:
		f->napplied_ev++;
		break;
	case TEND_EV_ACTION_FAILED:
		f->nfailed_ev++;
		break;
	case TEND_EV_COMPONENT_ERROR:
		f->ncomp_err_ev++;
		snprintf(f->comp_error, sizeof f->comp_error, "%s",
		    ev->error ? ev->error : "");
		break;
	default:
		break;
	}
}

static void
open_engine(struct fixture *f)
{
	int rc = tend_engine_open(&f->eng, f->state, NULL);

	if (rc) {
		fprintf(stderr, "engine open: %s\n", tend_error_last());
		abort();
	}
	dict_register(f->eng, &f->w);
	tend_engine_subscribe(f->eng, ~0u, on_event, f);
}

struct fixture *
fixture_new(void)
{
	struct fixture *f = tend_xcalloc(1, sizeof *f);
	const char *tmp = getenv("TMPDIR");

	snprintf(f->dir, sizeof f->dir, "%s/tend-test-XXXXXX",
	    tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(f->dir))
		abort();
	snprintf(f->state, sizeof f->state, "%s/state", f->dir);
	dict_world_init(&f->w);
	open_engine(f);
	return f;
}

static int
rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

void
fixture_free(struct fixture *f)
{
	if (!f)
		return;
	tend_engine_close(f->eng);
	dict_world_finish(&f->w);
	nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	assert(access(f->dir, F_OK) != 0);
	free(f->dump);
	free(f->world);
	free(f);
}

void
fixture_restart(struct fixture *f)
{
	tend_engine_close(f->eng);
	open_engine(f);
}

/* ---- interpreter ---- */

struct script {
	struct fixture *f;
	char **tok;
	size_t start, end; /* [start, end) */
};

static size_t
match_brace(char **tok, size_t i, size_t end)
{
	int depth = 0;

	for (; i < end; i++) {
		if (strcmp(tok[i], "{") == 0)
			depth++;
		else if (strcmp(tok[i], "}") == 0 && --depth == 0)
			return i;
	}
	abort();
}

static struct tend_provider *
container(struct fixture *f, const char *name, size_t len)
{
	for (size_t i = 0; i < f->ncont; i++)
		if (strlen(f->cnames[i]) == len &&
		    strncmp(f->cnames[i], name, len) == 0)
			return f->cprov[i];
	return NULL;
}

static void
remember(struct fixture *f, const char *name, struct tend_provider *p)
{
	assert(f->ncont < 32);
	f->cnames[f->ncont] = tend_xstrdup(name);
	f->cprov[f->ncont++] = p;
}

static int body(struct tend_comp *c, void *arg);

static int
stmt_mount(struct script *s, size_t *i, struct tend_comp *c)
{
	char *t = s->tok[*i];
	char kind = t[0];
	char *open = strchr(t, '('), *close = strchr(t, ')');
	char name[128], fp[128] = "", logic[128] = "logic-v1";
	struct script inner = *s;
	struct tend_mount_opts o = {0};

	assert(open && close && close > open);
	snprintf(name, sizeof name, "%.*s", (int)(close - open - 1), open + 1);
	char *comma = strchr(name, ',');
	if (comma) {
		snprintf(fp, sizeof fp, "%s", comma + 1);
		*comma = '\0';
		char *c2 = strchr(fp, ',');
		if (c2) { /* M(name,fp,logic) */
			snprintf(logic, sizeof logic, "%s", c2 + 1);
			*c2 = '\0';
		}
	}
	assert(strcmp(s->tok[*i + 1], "{") == 0);
	size_t end = match_brace(s->tok, *i + 1, s->end);
	inner.start = *i + 2;
	inner.end = end;
	*i = end + 1;
	struct tend_key k = tend_key_str(name);
	if (kind == 'M') {
		o.memo = true;
		o.input_fp = tend_fp_str(fp);
		o.logic_fp = tend_fp_str(logic);
	}
	o.processor = "proc";
	if (kind == 'U')
		return tend_use_mount(c, &k, 1, body, &inner, &o);
	return tend_mount(c, &k, 1, body, &inner, &o);
}

static int
body(struct tend_comp *c, void *arg)
{
	struct script *s = arg;
	struct fixture *f = s->f;
	int rc;

	for (size_t i = s->start; i < s->end;) {
		const char *t = s->tok[i];
		char buf[256];

		if ((t[0] == 'C' || t[0] == 'U' || t[0] == 'M') && t[1] == '(') {
			if ((rc = stmt_mount(s, &i, c)))
				return rc;
			continue;
		}
		i++;
		if (strcmp(t, "!") == 0)
			return tend_error_set(TEND_ERROR, "script: fails");
		snprintf(buf, sizeof buf, "%s", t);
		char *eq = strchr(buf, '=');
		assert(eq);
		*eq = '\0';
		const char *name = buf, *val = eq + 1;
		if (name[0] == '#' || name[0] == '%') {
			struct tend_provider *p = NULL;
			struct tend_key k = tend_key_str(name + 1);

			if (name[0] == '#')
				rc = dict_mount_container(c, name + 1, val, &p);
			else
				rc = tend_declare_container(c,
				    tend_engine_root(f->eng, "dicts"), &k, val,
				    strlen(val), &p);
			if (rc)
				return rc;
			remember(f, name + 1, p);
			continue;
		}
		char *slash = strchr(buf, '/'), *at = strchr(buf, '@');
		if (slash) {
			char *cend = at && at < slash ? at : slash;
			struct tend_provider *p = container(f, buf,
			    (size_t)(cend - buf));

			if (!p)
				return tend_error_set(TEND_ERROR,
				    "script: no container for %s", t);
			if (cend == at) {
				*slash = '\0';
				if ((rc = tend_provider_attachment(p, at + 1,
					 &p)))
					return rc;
			}
			rc = dict_declare_in(c, p, slash + 1, val);
		} else
			rc = dict_declare(c, name, val);
		if (rc)
			return rc;
	}
	return 0;
}

static int
root_body(struct tend_comp *c, void *arg)
{
	return body(c, arg);
}

static void
reset_run(struct fixture *f)
{
	for (size_t i = 0; i < f->ncont; i++)
		free(f->cnames[i]);
	f->ncont = 0;
	free(f->dump);
	free(f->world);
	f->dump = f->world = NULL;
	f->nplanned_ev = f->napplied_ev = f->nfailed_ev = f->ncomp_err_ev = 0;
	f->comp_error[0] = '\0';
	dict_clear_logs(&f->w);
	f->w.counter = 0;
}

/*
 * After every pass and drop of every scenario: the app's counters (what
 * tend status reads) are trusted and equal to a scan of its rows. A
 * scenario that leaves them wrong aborts, naming both.
 */
static void
counts_agree(struct fixture *f)
{
	struct tend_buf why = TEND_BUF_INIT;
	struct tend_txn *txn;
	bool valid;

	if (tend_store_read_begin(tend_engine_store(f->eng), &txn) != 0)
		return; /* (a test of a broken store) */
	valid = tend_store_counts_valid(txn);
	tend_store_read_end(txn);
	if (!valid) {
		fprintf(stderr, "scenario: the store's counters are not "
				"trusted after a pass\n");
		abort();
	}
	if (tend_engine_counts_check(f->eng, "app", &why) == TEND_ECONFLICT) {
		fprintf(stderr, "scenario: counters of app: %s\n%s\n", why.ptr,
		    fx_dump(f));
		abort();
	}
	tend_buf_release(&why);
}

int
fx_run_opts(struct fixture *f, const char *script, bool full, bool preview)
{
	char *copy = tend_xstrdup(script);
	char **tok = NULL;
	size_t n = 0;
	struct tend_pass_opts o = {.full = full, .preview = preview};

	reset_run(f);
	for (char *sv, *t = strtok_r(copy, " \t\n", &sv); t;
	     t = strtok_r(NULL, " \t\n", &sv)) {
		tok = tend_xrealloc(tok, (n + 1) * sizeof *tok);
		tok[n++] = t;
	}
	struct script s = {f, tok, 0, n};
	f->rc = tend_engine_run(f->eng, "app", root_body, &s, &o, &f->stats);
	free(tok);
	free(copy);
	for (size_t i = 0; i < f->ncont; i++)
		free(f->cnames[i]);
	f->ncont = 0;
	counts_agree(f);
	return f->rc;
}

int
fx_run_script(struct fixture *f, const char *script)
{
	return fx_run_opts(f, script, false, false);
}

int
fx_run(struct fixture *f, const char *script)
{
	return fx_run_opts(f, script, false, false);
}

int
fx_drop(struct fixture *f)
{
	reset_run(f);
	f->rc = tend_engine_drop(f->eng, "app", &f->stats);
	counts_agree(f);
	return f->rc;
}

const char *
fx_dump(struct fixture *f)
{
	struct tend_buf b = TEND_BUF_INIT;

	free(f->dump);
	tend_engine_dump(f->eng, TEND_DUMP_ALL, &b);
	f->dump = tend_buf_detach(&b, NULL);
	return f->dump;
}

const char *
fx_world(struct fixture *f)
{
	free(f->world);
	f->world = dict_dump(&f->w);
	return f->world;
}

bool
fx_has(struct fixture *f, const char *line)
{
	const char *d = fx_dump(f);
	size_t len = strlen(line);

	for (const char *p = d; (p = strstr(p, line)); p++)
		if ((p == d || p[-1] == '\n') && (p[len] == '\n' || !p[len]))
			return true;
	return false;
}

unsigned
fx_count(struct fixture *f, const char *prefix)
{
	const char *d = fx_dump(f);
	unsigned n = 0;

	for (const char *p = d; *p;) {
		if (strncmp(p, prefix, strlen(prefix)) == 0)
			n++;
		p = strchr(p, '\n');
		if (!p)
			break;
		p++;
	}
	return n;
}
