/*
 * connector_main.c - a program with a connector of its own, registered in
 * tend_main_opts.init, and an app in code that declares into it: what a
 * connector author writes against the installed library (public headers
 * and libtend only). tests/e2e/connector_main.sh runs its commands.
 *
 * The connector "notes" keeps one file per declared key under
 * WORKSPACE/notes: the key is the source's path ('/' read as '_'), the
 * value the source's bytes, the record their fingerprint. Its check
 * compares a note with its record. With NOTES_INIT_FAILS set, init
 * fails.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <tend/arena.h>
#include <tend/buf.h>
#include <tend/engine.h>
#include <tend/fingerprint.h>
#include <tend/plugin.h>
#include <tend/status.h>
#include <tend/target.h>

#define NOTES "test/notes"

struct notes_action {
	char *name;
	const void *data; /* NULL: delete */
	size_t len;
};

struct notes_handler {
	struct tend_handler base;
};

static int
notes_path(struct tend_buf *out, struct tend_context *ctx, const char *name)
{
	const char *ws = tend_context_get(ctx, "workspace");

	if (!ws)
		return tend_error_set(TEND_ENOTFOUND,
		    "notes: no workspace resource");
	tend_buf_printf(out, "%s/notes", ws);
	mkdir(out->ptr, 0755);
	tend_buf_printf(out, "/%s", name);
	return 0;
}

static void
notes_apply(struct tend_sink *sink, struct tend_context *ctx,
    void *const *actions, size_t n, struct tend_apply_result *results)
{
	(void)sink;
	for (size_t i = 0; i < n; i++) {
		struct notes_action *a = actions[i];
		struct tend_buf path = TEND_BUF_INIT;
		FILE *f;

		if (notes_path(&path, ctx, a->name) != 0)
			tend_apply_fail(&results[i], TEND_ENOTFOUND, "%s",
			    tend_error_last());
		else if (!a->data) {
			if (remove(path.ptr) != 0 && errno != ENOENT)
				tend_apply_fail(&results[i], TEND_ERROR,
				    "notes: remove %s: %s", path.ptr,
				    strerror(errno));
		} else if (!(f = fopen(path.ptr, "wb")) ||
		    fwrite(a->data, 1, a->len, f) != a->len ||
		    fclose(f) != 0)
			tend_apply_fail(&results[i], TEND_ERROR,
			    "notes: write %s: %s", path.ptr, strerror(errno));
		tend_buf_release(&path);
	}
}

static struct tend_sink notes_sink = {.apply = notes_apply, .name = NOTES};

static int
notes_reconcile(struct tend_handler *h, const struct tend_reconcile_in *in,
    struct tend_reconcile_out *out)
{
	struct notes_action *a;
	struct tend_fp fp;

	(void)h;
	if (in->key->kind != TEND_KEY_STR)
		return tend_error_set(TEND_EINVALID, "notes: keys are strings");
	if (in->desired) {
		fp = tend_fp_bytes(in->desired, in->desired_len);
		if (tend_reconcile_settled(in, fp.b, sizeof fp.b))
			return 0;
	} else if (in->nprev == 0 && !in->prev_may_be_missing)
		return 0;
	a = tend_arena_zalloc(in->arena, sizeof *a);
	a->name = tend_arena_alloc(in->arena, in->key->u.s.len + 1);
	memcpy(a->name, in->key->u.s.ptr, in->key->u.s.len);
	a->name[in->key->u.s.len] = '\0';
	if (in->desired) {
		a->data = in->desired;
		a->len = in->desired_len;
		out->record.data = tend_arena_memdup(in->arena, fp.b,
		    sizeof fp.b);
		out->record.len = sizeof fp.b;
	} else
		out->record_absent = true;
	out->action = a;
	out->sink = &notes_sink;
	return 0;
}

static int
notes_check(struct tend_handler *h, struct tend_context *ctx,
    const struct tend_key *key, const struct tend_bytes *record,
    struct tend_buf *why)
{
	struct tend_buf path = TEND_BUF_INIT, name = TEND_BUF_INIT;
	struct tend_buf data = TEND_BUF_INIT;
	struct tend_fp fp;
	FILE *f;
	int rc = 0;

	(void)h;
	tend_buf_put(&name, key->u.s.ptr, key->u.s.len);
	if ((rc = notes_path(&path, ctx, name.ptr)))
		goto out;
	if (!(f = fopen(path.ptr, "rb"))) {
		tend_buf_printf(why, "note %s is missing", name.ptr);
		rc = TEND_ECONFLICT;
		goto out;
	}
	char chunk[4096];
	size_t got;
	while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
		tend_buf_put(&data, chunk, got);
	fclose(f);
	fp = tend_fp_bytes(data.ptr, data.len);
	if (record->len != sizeof fp.b ||
	    memcmp(record->data, fp.b, sizeof fp.b) != 0) {
		tend_buf_printf(why, "note %s was edited", name.ptr);
		rc = TEND_ECONFLICT;
	}
out:
	tend_buf_release(&path);
	tend_buf_release(&name);
	tend_buf_release(&data);
	return rc;
}

static void
notes_destroy(struct tend_handler *h)
{
	free(h);
}

static const struct tend_handler_ops notes_ops = {
	.abi = TEND_TARGET_ABI,
	.kind = NOTES,
	.reconcile = notes_reconcile,
	.check = notes_check,
	.destroy = notes_destroy,
};

/* tend_main_opts.init: once per engine, before any pass. A second call
 * on the same engine fails (the name is taken), as it should. */
static int
notes_init(struct tend_engine *eng)
{
	struct notes_handler *h;

	if (getenv("NOTES_INIT_FAILS"))
		return tend_error_set(TEND_ERROR, "notes: init refused");
	if (!(h = calloc(1, sizeof *h)))
		abort();
	tend_handler_init(&h->base, &notes_ops);
	return tend_engine_register_root(eng, NOTES, &h->base, NULL);
}

/* The app's declaration function: each source file becomes a note. */
static int
declare_note(struct tend_comp *c, const struct tend_source_item *item)
{
	struct tend_provider *p = tend_engine_root(item->engine, NOTES);
	struct tend_buf data = TEND_BUF_INIT;
	char chunk[4096], *name, *s;
	size_t got;
	FILE *f;
	int rc;

	if (!p)
		return tend_error_set(TEND_ERROR,
		    "notes: call notes_init first (no provider " NOTES ")");
	if (!(f = fopen(item->abs_path, "rb")))
		return tend_error_set(TEND_ERROR, "cannot open %s",
		    item->path);
	while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
		tend_buf_put(&data, chunk, got);
	fclose(f);
	name = strdup(item->path);
	if (!name)
		abort();
	for (s = name; *s; s++)
		if (*s == '/')
			*s = '_';
	struct tend_key k = tend_key_str(name);
	rc = tend_declare(c, p, &k, data.ptr, data.len);
	free(name);
	tend_buf_release(&data);
	return rc;
}

int
main(int argc, char **argv)
{
	static const struct tend_code_app apps[] = {
		{.name = "notes", .source = "src", .target = "dir:out",
		    .declare = declare_note, .logic_version = 1},
	};
	struct tend_main_opts o = {.apps = apps, .napps = 1,
	    .init = notes_init};

	return tend_main(argc, argv, &o);
}
