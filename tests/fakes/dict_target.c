/*
 * dict_target.c - the recording test connector; see dict_target.h.
 */
#include "dict_target.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tend/arena.h"
#include "tend/buf.h"
#include "tend/status.h"

enum act_kind { A_PUT, A_DEL, A_MKDIR, A_RMDIR };

struct dict_action {
	enum act_kind kind;
	char *path;
	char *value;
	char *prev;
	bool missing;
	int inval;
	char *prefix; /* containers: children prefix */
};

struct dict_handler {
	struct tend_handler base;
	struct dict_world *w;
	char *prefix; /* "" for the root "dict", "D1/" for children */
	bool container;
	bool offer_attachments;
};

static void
log_push(struct dict_log **arr, size_t *n, const char *path,
    const char *value, const char *prev, bool missing, bool acted, int inval)
{
	*arr = tend_xrealloc(*arr, (*n + 1) * sizeof **arr);
	(*arr)[*n] = (struct dict_log){
		.path = tend_xstrdup(path),
		.value = value ? tend_xstrdup(value) : NULL,
		.prev = tend_xstrdup(prev),
		.missing = missing,
		.acted = acted,
		.inval = inval,
	};
	(*n)++;
}

static void
logs_free(struct dict_log *arr, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(arr[i].path);
		free(arr[i].value);
		free(arr[i].prev);
	}
	free(arr);
}

void
dict_clear_logs(struct dict_world *w)
{
	logs_free(w->recs, w->nrecs);
	logs_free(w->acts, w->nacts);
	w->recs = w->acts = NULL;
	w->nrecs = w->nacts = 0;
	w->sink_calls = 0;
}

static ssize_t
find(const struct dict_world *w, const char *key)
{
	for (size_t i = 0; i < w->n; i++)
		if (strcmp(w->keys[i], key) == 0)
			return (ssize_t)i;
	return -1;
}

const char *
dict_get(const struct dict_world *w, const char *key)
{
	ssize_t i = find(w, key);

	return i < 0 ? NULL : w->vals[i];
}

static void
file_name(struct tend_buf *b, const struct dict_world *w, const char *key)
{
	tend_buf_printf(b, "%s/", w->dir);
	for (const char *p = key; *p; p++)
		tend_buf_putc(b, *p == '/' ? '%' : *p);
}

static void
world_put(struct dict_world *w, const char *key, const char *val)
{
	ssize_t i = find(w, key);

	if (i >= 0) {
		free(w->vals[i]);
		w->vals[i] = tend_xstrdup(val);
	} else {
		w->keys = tend_xrealloc(w->keys, (w->n + 1) * sizeof *w->keys);
		w->vals = tend_xrealloc(w->vals, (w->n + 1) * sizeof *w->vals);
		w->keys[w->n] = tend_xstrdup(key);
		w->vals[w->n] = tend_xstrdup(val);
		w->n++;
	}
	if (w->dir) {
		struct tend_buf f = TEND_BUF_INIT, tmp = TEND_BUF_INIT;
		int fd;

		file_name(&f, w, key);
		tend_buf_printf(&tmp, "%s.tmp", f.ptr);
		fd = open(tmp.ptr, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			if (write(fd, val, strlen(val)) < 0)
				perror("write");
			close(fd);
			rename(tmp.ptr, f.ptr);
		}
		tend_buf_release(&f);
		tend_buf_release(&tmp);
	}
}

static void
world_del(struct dict_world *w, const char *key)
{
	ssize_t i = find(w, key);

	if (i >= 0) {
		free(w->keys[i]);
		free(w->vals[i]);
		w->keys[i] = w->keys[w->n - 1];
		w->vals[i] = w->vals[w->n - 1];
		w->n--;
	}
	if (w->dir) {
		struct tend_buf f = TEND_BUF_INIT;

		file_name(&f, w, key);
		unlink(f.ptr);
		tend_buf_release(&f);
	}
}

static void
world_del_prefix(struct dict_world *w, const char *prefix)
{
	size_t len = strlen(prefix);

	for (size_t i = w->n; i-- > 0;)
		if (strncmp(w->keys[i], prefix, len) == 0) {
			char *k = tend_xstrdup(w->keys[i]);
			world_del(w, k);
			free(k);
		}
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

char *
dict_dump(const struct dict_world *w)
{
	struct tend_buf b = TEND_BUF_INIT;
	char **ks = tend_xcalloc(w->n + 1, sizeof *ks);

	if (w->n)
		memcpy(ks, w->keys, w->n * sizeof *ks);
	qsort(ks, w->n, sizeof *ks, cmp_str);
	for (size_t i = 0; i < w->n; i++)
		tend_buf_printf(&b, "%s%s=%s", i ? " " : "", ks[i],
		    dict_get(w, ks[i]));
	free(ks);
	return tend_buf_detach(&b, NULL);
}

const struct dict_log *
dict_rec(const struct dict_world *w, const char *path)
{
	for (size_t i = w->nrecs; i-- > 0;)
		if (strcmp(w->recs[i].path, path) == 0)
			return &w->recs[i];
	return NULL;
}

const struct dict_log *
dict_act(const struct dict_world *w, const char *path)
{
	for (size_t i = w->nacts; i-- > 0;)
		if (strcmp(w->acts[i].path, path) == 0)
			return &w->acts[i];
	return NULL;
}

unsigned
dict_nacts(const struct dict_world *w, const char *path)
{
	unsigned n = 0;

	for (size_t i = 0; i < w->nacts; i++)
		if (strcmp(w->acts[i].path, path) == 0)
			n++;
	return n;
}

/* ---- handler ---- */

static const struct tend_handler_ops dict_ops, dict_oc_ops;

static struct tend_handler *
handler_new(struct dict_world *w, const char *prefix, bool container,
    bool attachments)
{
	struct dict_handler *h = tend_xcalloc(1, sizeof *h);

	tend_handler_init(&h->base, w->open_child ? &dict_oc_ops : &dict_ops);
	h->w = w;
	h->prefix = tend_xstrdup(prefix);
	h->container = container;
	h->offer_attachments = attachments;
	return &h->base;
}

static void
join_prev(struct tend_buf *b, const struct tend_reconcile_in *in)
{
	for (size_t i = 0; i < in->nprev; i++) {
		if (i)
			tend_buf_putc(b, ',');
		tend_buf_put(b, in->prev[i].data, in->prev[i].len);
	}
}

static int
dict_reconcile(struct tend_handler *base, const struct tend_reconcile_in *in,
    struct tend_reconcile_out *out)
{
	struct dict_handler *h = (struct dict_handler *)(void *)base;
	struct tend_buf path = TEND_BUF_INIT, prev = TEND_BUF_INIT;
	struct dict_action *a;
	const char *spec = NULL;
	size_t speclen = 0;
	int inval = 0;
	bool act;

	if (in->key->kind != TEND_KEY_STR)
		return tend_error_set(TEND_EINVALID, "dict: string keys only");
	tend_buf_puts(&path, h->prefix);
	tend_buf_put(&path, in->key->u.s.ptr, in->key->u.s.len);
	join_prev(&prev, in);
	if (in->desired && h->container) {
		const char *v = in->desired;

		if (in->desired_len < 2 || v[1] != ':') {
			tend_buf_release(&path);
			tend_buf_release(&prev);
			return tend_error_set(TEND_EINVALID,
			    "dicts: value must be MODE:SPEC");
		}
		spec = v + 2;
		speclen = in->desired_len - 2;
		for (size_t i = 0; i < in->nprev; i++)
			if (in->prev[i].len != speclen ||
			    memcmp(in->prev[i].data, spec, speclen))
				inval = v[0] == 'l' ? TEND_INVALIDATE_LOSSY
				    : v[0] == 'd' ? TEND_INVALIDATE_DESTRUCTIVE
						  : 0;
		act = true; /* a container acts every pass */
	} else if (in->desired) {
		spec = in->desired;
		speclen = in->desired_len;
		act = in->prev_may_be_missing;
		for (size_t i = 0; i < in->nprev; i++)
			if (in->prev[i].len != speclen ||
			    memcmp(in->prev[i].data, spec, speclen))
				act = true;
	} else
		act = in->nprev > 0 || in->prev_may_be_missing;

	struct tend_buf val = TEND_BUF_INIT;
	if (spec)
		tend_buf_put(&val, spec, speclen);
	log_push(&h->w->recs, &h->w->nrecs, path.ptr, spec ? val.ptr : NULL,
	    prev.ptr, in->prev_may_be_missing, act, inval);
	if (act) {
		a = tend_arena_zalloc(in->arena, sizeof *a);
		a->kind = h->container ? (spec ? A_MKDIR : A_RMDIR)
				       : (spec ? A_PUT : A_DEL);
		a->path = tend_arena_strdup(in->arena, path.ptr);
		a->value = spec ? tend_arena_strdup(in->arena, val.ptr) : NULL;
		a->prev = tend_arena_strdup(in->arena, prev.ptr);
		a->missing = in->prev_may_be_missing;
		a->inval = inval;
		out->action = a;
		out->sink = &h->w->sink;
		out->record_absent = spec == NULL;
		if (spec) {
			out->record.data = tend_arena_memdup(in->arena, spec,
			    speclen);
			out->record.len = speclen;
		}
		out->invalidation = (enum tend_invalidation)inval;
	}
	tend_buf_release(&val);
	tend_buf_release(&path);
	tend_buf_release(&prev);
	return 0;
}

static size_t
dict_attachments(struct tend_handler *base, struct tend_attachment *out,
    size_t max)
{
	struct dict_handler *h = (struct dict_handler *)(void *)base;
	struct tend_buf p = TEND_BUF_INIT;

	if (!h->offer_attachments || max < 2)
		return 0;
	tend_buf_printf(&p, "%s@items/", h->prefix);
	out[0].type = "items";
	out[0].handler = handler_new(h->w, p.ptr, false, false);
	tend_buf_reset(&p);
	tend_buf_printf(&p, "%s@tags/", h->prefix);
	out[1].type = "tags";
	out[1].handler = handler_new(h->w, p.ptr, false, false);
	tend_buf_release(&p);
	return 2;
}

static struct tend_handler *
dict_preview_child(struct tend_handler *base, const struct tend_key *key,
    const void *desired, size_t len)
{
	struct dict_handler *h = (struct dict_handler *)(void *)base;
	struct tend_buf p = TEND_BUF_INIT;
	struct tend_handler *c;

	tend_buf_puts(&p, h->prefix);
	tend_buf_put(&p, key->u.s.ptr, key->u.s.len);
	tend_buf_putc(&p, '/');
	c = handler_new(h->w, p.ptr, false, true);
	tend_buf_release(&p);
	return c;
}

static void
dict_destroy(struct tend_handler *base)
{
	struct dict_handler *h = (struct dict_handler *)(void *)base;

	free(h->prefix);
	free(h);
}

static const struct tend_handler_ops dict_ops = {
	.abi = TEND_TARGET_ABI,
	.kind = "dict",
	.reconcile = dict_reconcile,
	.attachments = dict_attachments,
	.preview_child = dict_preview_child,
	.destroy = dict_destroy,
};

/* the child handler of container `key` from its record alone */
static struct tend_handler *
dict_open_child(struct tend_handler *base, const struct tend_key *key,
    const struct tend_bytes *record)
{
	struct dict_handler *h = (struct dict_handler *)(void *)base;

	if (!h->container || key->kind != TEND_KEY_STR)
		return NULL;
	return dict_preview_child(base, key, NULL, 0);
}

static const struct tend_handler_ops dict_oc_ops = {
	.abi = TEND_TARGET_ABI,
	.kind = "dict",
	.reconcile = dict_reconcile,
	.attachments = dict_attachments,
	.preview_child = dict_preview_child,
	.open_child = dict_open_child,
	.destroy = dict_destroy,
};

static void
dict_apply(struct tend_sink *sink, struct tend_context *ctx,
    void *const *actions, size_t n, struct tend_apply_result *results)
{
	struct dict_world *w = (struct dict_world *)(void *)((char *)sink -
	    offsetof(struct dict_world, sink));

	w->sink_calls++;
	for (size_t i = 0; i < n; i++) {
		struct dict_action *a = actions[i];
		bool fail = false;

		w->counter++;
		if (w->crash_at && w->counter == w->crash_at &&
		    !w->crash_after_write)
			raise(SIGKILL);
		if (w->fail_at && w->counter == w->fail_at)
			fail = true;
		if (w->fail_key && strcmp(w->fail_key, a->path) == 0)
			fail = true;
		if (fail && !w->fail_after_write) {
			tend_apply_fail(&results[i], TEND_ERROR,
			    "dict: injected failure on %s", a->path);
			continue;
		}
		switch (a->kind) {
		case A_PUT:
			world_put(w, a->path, a->value);
			break;
		case A_DEL:
			world_del(w, a->path);
			break;
		case A_MKDIR: {
			struct tend_buf p = TEND_BUF_INIT;

			world_put(w, a->path, a->value);
			tend_buf_printf(&p, "%s/", a->path);
			if (!fail && !w->no_child)
				results[i].child = handler_new(w, p.ptr, false,
				    true);
			if (a->inval == TEND_INVALIDATE_DESTRUCTIVE)
				world_del_prefix(w, p.ptr);
			tend_buf_release(&p);
			break;
		}
		case A_RMDIR: {
			struct tend_buf p = TEND_BUF_INIT;
			bool children = false;

			tend_buf_printf(&p, "%s/", a->path);
			for (size_t k = 0; w->open_child && k < w->n; k++)
				if (strncmp(w->keys[k], p.ptr, p.len) == 0)
					children = true;
			if (!children) {
				world_del(w, a->path);
				world_del_prefix(w, p.ptr);
			}
			tend_buf_release(&p);
			break;
		}
		}
		if (w->crash_at && w->counter == w->crash_at)
			raise(SIGKILL);
		log_push(&w->acts, &w->nacts, a->path, a->value, a->prev,
		    a->missing, true, a->inval);
		if (fail)
			tend_apply_fail(&results[i], TEND_ERROR,
			    "dict: injected failure after writing %s", a->path);
	}
}

void
dict_world_init(struct dict_world *w)
{
	memset(w, 0, sizeof *w);
	w->sink.apply = dict_apply;
	w->sink.name = "dict";
}

void
dict_world_finish(struct dict_world *w)
{
	for (size_t i = 0; i < w->n; i++) {
		free(w->keys[i]);
		free(w->vals[i]);
	}
	free(w->keys);
	free(w->vals);
	dict_clear_logs(w);
	free(w->fail_key);
	free(w->dir);
	memset(w, 0, sizeof *w);
}

void dict_test_put(struct dict_world *w, const char *key, const char *val);

void
dict_test_put(struct dict_world *w, const char *key, const char *val)
{
	world_put(w, key, val);
}

void
dict_world_attach_dir(struct dict_world *w, const char *dir)
{
	DIR *d;
	struct dirent *e;

	mkdir(dir, 0755);
	free(w->dir);
	w->dir = NULL; /* loading must not write back */
	if ((d = opendir(dir))) {
		while ((e = readdir(d))) {
			struct tend_buf f = TEND_BUF_INIT, key = TEND_BUF_INIT;
			char val[4096];
			size_t len = strlen(e->d_name);
			int fd;

			if (e->d_name[0] == '.' ||
			    (len > 4 && strcmp(e->d_name + len - 4, ".tmp") == 0))
				continue;
			tend_buf_printf(&f, "%s/%s", dir, e->d_name);
			for (const char *p = e->d_name; *p; p++)
				tend_buf_putc(&key, *p == '%' ? '/' : *p);
			fd = open(f.ptr, O_RDONLY);
			ssize_t n = fd >= 0 ? read(fd, val, sizeof val - 1) : -1;
			if (fd >= 0)
				close(fd);
			if (n >= 0) {
				val[n] = '\0';
				world_put(w, key.ptr, val);
			}
			tend_buf_release(&f);
			tend_buf_release(&key);
		}
		closedir(d);
	}
	w->dir = tend_xstrdup(dir);
}

void
dict_register(struct tend_engine *eng, struct dict_world *w)
{
	tend_engine_register_root(eng, "dict", handler_new(w, "", false, false),
	    NULL);
	tend_engine_register_root(eng, "dicts", handler_new(w, "", true, false),
	    NULL);
}

int
dict_declare_in(struct tend_comp *c, struct tend_provider *p, const char *key,
    const char *value)
{
	struct tend_key k = tend_key_str(key);

	return tend_declare(c, p, &k, value, strlen(value));
}

int
dict_declare(struct tend_comp *c, const char *key, const char *value)
{
	return dict_declare_in(c, tend_engine_root(tend_comp_engine(c), "dict"),
	    key, value);
}

int
dict_mount_container(struct tend_comp *c, const char *name,
    const char *mode_spec, struct tend_provider **out)
{
	struct tend_key k = tend_key_str(name);

	return tend_mount_target(c,
	    tend_engine_root(tend_comp_engine(c), "dicts"), &k, mode_spec,
	    strlen(mode_spec), out);
}
