/*
 * kv_connector.c - a custom target connector written against the public
 * headers only: the walkthrough of docs/connectors.md, compiled and run by
 * the test suite (`meson test kv_connector`).
 *
 * The target is a tiny key-value store kept as files: a root provider
 * "example/kv" for single keys, and "example/kv-bucket" containers (a
 * directory each) whose children are keys and which offer an "index"
 * attachment (a file listing the bucket's keys). The store's location is
 * a named context resource ("kv-root"): target keys carry the stable name,
 * the sink resolves the live directory.
 *
 * Run: kv_connector STATE_DIR KV_ROOT [k=v ...]
 * Each argument k=v declares key k; "bucket/k=v" declares k in bucket
 * "bucket"; "bucket@index/name=x" declares an index entry. Prints the
 * pass's stats.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tend/arena.h>
#include <tend/buf.h>
#include <tend/engine.h>
#include <tend/fingerprint.h>
#include <tend/status.h>
#include <tend/target.h>

/* ---- step 1: types ---- */

/* The declared value of a key is its text; its tracking record is the
 * 16-byte fingerprint of that text: minimal, deterministic, canonical. */
struct kv_record {
	uint8_t version; /* first byte of every record: its format */
	struct tend_fp fp;
};

/* What the sink does: write a value, or delete. */
struct kv_action {
	const char *dir;   /* context resource name + bucket, resolved late */
	const char *bucket; /* "" for root keys */
	const char *key;
	const char *value; /* NULL: delete */
	size_t len;
};

/* ---- step 2: the handler ---- */

struct kv_handler {
	struct tend_handler base;
	struct tend_sink *sink;
	char *bucket; /* "" for the root provider */
};

static int
kv_reconcile(struct tend_handler *h, const struct tend_reconcile_in *in,
    struct tend_reconcile_out *out)
{
	struct kv_handler *kh = (struct kv_handler *)(void *)h;
	struct kv_action *a;
	struct kv_record rec = {.version = 1};

	if (in->key->kind != TEND_KEY_STR)
		return tend_error_set(TEND_EINVALID, "kv: keys are strings");
	if (!in->desired) {
		/* no longer declared: delete if it may exist */
		if (in->nprev == 0 && !in->prev_may_be_missing)
			return 0;
	} else {
		rec.fp = tend_fp_bytes(in->desired, in->desired_len);
		/* skip only if every possible previous record matches: after
		 * an interrupted update there can be several */
		bool same = !in->prev_may_be_missing;
		for (size_t i = 0; i < in->nprev; i++)
			if (in->prev[i].len != sizeof rec ||
			    memcmp(in->prev[i].data, &rec, sizeof rec) != 0)
				same = false;
		if (same)
			return 0;
	}
	a = tend_arena_zalloc(in->arena, sizeof *a);
	a->bucket = kh->bucket;
	a->key = tend_arena_memdup(in->arena, in->key->u.s.ptr,
	    in->key->u.s.len + 1);
	((char *)a->key)[in->key->u.s.len] = '\0';
	if (in->desired) {
		a->value = tend_arena_memdup(in->arena, in->desired,
		    in->desired_len);
		a->len = in->desired_len;
		out->record.data = tend_arena_memdup(in->arena, &rec,
		    sizeof rec);
		out->record.len = sizeof rec;
	} else
		out->record_absent = true;
	out->action = a;
	out->sink = kh->sink;
	return 0;
}

static void
kv_destroy(struct tend_handler *h)
{
	struct kv_handler *kh = (struct kv_handler *)(void *)h;

	free(kh->bucket);
	free(kh);
}

static const struct tend_handler_ops kv_ops = {
	.abi = TEND_TARGET_ABI,
	.kind = "example/kv",
	.reconcile = kv_reconcile,
	.destroy = kv_destroy,
};

/* ---- the sink: all I/O happens here, idempotently ---- */

static int
kv_path(struct tend_buf *out, struct tend_context *ctx, const char *bucket,
    const char *key)
{
	const char *root = tend_context_get(ctx, "kv-root");

	if (!root)
		return tend_error_set(TEND_ENOTFOUND,
		    "kv: no resource named kv-root");
	tend_buf_printf(out, "%s/%s%s%s", root, bucket, *bucket ? "/" : "",
	    key);
	return 0;
}

static void
kv_apply(struct tend_sink *sink, struct tend_context *ctx,
    void *const *actions, size_t n, struct tend_apply_result *results)
{
	(void)sink;
	for (size_t i = 0; i < n; i++) {
		struct kv_action *a = actions[i];
		struct tend_buf path = TEND_BUF_INIT, tmp = TEND_BUF_INIT;

		if (kv_path(&path, ctx, a->bucket, a->key)) {
			tend_apply_fail(&results[i], TEND_ENOTFOUND, "%s",
			    tend_error_last());
			continue;
		}
		if (!a->value) {
			/* unlink + ENOENT is success: idempotent */
			if (unlink(path.ptr) != 0 && errno != ENOENT)
				tend_apply_fail(&results[i], TEND_ERROR,
				    "kv: unlink %s: %s", path.ptr,
				    strerror(errno));
		} else {
			/* write a temporary file, then rename over */
			tend_buf_printf(&tmp, "%s.tmp", path.ptr);
			int fd = open(tmp.ptr, O_WRONLY | O_CREAT | O_TRUNC,
			    0644);
			if (fd < 0 || write(fd, a->value, a->len) !=
					  (ssize_t)a->len ||
			    rename(tmp.ptr, path.ptr) != 0)
				tend_apply_fail(&results[i], TEND_ERROR,
				    "kv: write %s: %s", path.ptr,
				    strerror(errno));
			if (fd >= 0)
				close(fd);
		}
		tend_buf_release(&path);
		tend_buf_release(&tmp);
	}
}

static struct tend_sink kv_sink = {.apply = kv_apply, .name = "example/kv"};

static struct tend_handler *
kv_handler_new(const char *bucket)
{
	struct kv_handler *h = calloc(1, sizeof *h);

	tend_handler_init(&h->base, &kv_ops);
	h->sink = &kv_sink;
	h->bucket = strdup(bucket);
	return &h->base;
}

/* ---- step 3: register the root provider ---- */

static int
kv_register(struct tend_engine *eng)
{
	return tend_engine_register_root(eng, "example/kv", kv_handler_new(""),
	    NULL);
}

/* ---- step 4: the user-facing API ---- */

static int
kv_declare(struct tend_comp *c, struct tend_provider *p, const char *key,
    const char *value)
{
	struct tend_key k = tend_key_str(key);

	return tend_declare(c, p, &k, value, strlen(value));
}

/* ---- containers: a bucket is a directory with keys inside ---- */

/* The container's record is its spec: here, the file mode of its keys.
 * A mode change is lossy (every key re-applied once); the container is
 * re-applied every pass, because its sink hands back the child handler. */
struct bucket_action {
	const char *name;
	bool remove;
};

static int
bucket_reconcile(struct tend_handler *h, const struct tend_reconcile_in *in,
    struct tend_reconcile_out *out)
{
	struct bucket_action *a = tend_arena_zalloc(in->arena, sizeof *a);
	char *name = tend_arena_alloc(in->arena, in->key->u.s.len + 1);

	memcpy(name, in->key->u.s.ptr, in->key->u.s.len);
	name[in->key->u.s.len] = '\0';
	a->name = name;
	a->remove = in->desired == NULL;
	out->action = a;
	out->sink = ((struct kv_handler *)(void *)h)->sink;
	out->record_absent = a->remove;
	if (!a->remove) {
		out->record.data = in->desired;
		out->record.len = in->desired_len;
		for (size_t i = 0; i < in->nprev; i++)
			if (in->prev[i].len != in->desired_len ||
			    memcmp(in->prev[i].data, in->desired,
				in->desired_len) != 0)
				out->invalidation = TEND_INVALIDATE_LOSSY;
	}
	return 0;
}

/* ---- attachments: a bucket's "index" ---- */

static size_t
bucket_child_attachments(struct tend_handler *h, struct tend_attachment *out,
    size_t max)
{
	struct kv_handler *kh = (struct kv_handler *)(void *)h;
	struct tend_buf b = TEND_BUF_INIT;

	if (max < 1)
		return 0;
	tend_buf_printf(&b, "%s/.index", kh->bucket);
	out[0].type = "index";
	out[0].handler = kv_handler_new(b.ptr);
	tend_buf_release(&b);
	return 1;
}

static const struct tend_handler_ops bucket_child_ops = {
	.abi = TEND_TARGET_ABI,
	.kind = "example/kv-bucket-entry",
	.reconcile = kv_reconcile,
	.attachments = bucket_child_attachments,
	.destroy = kv_destroy,
};

static void
rm_rf(const char *path)
{
	struct tend_buf cmd = TEND_BUF_INIT;

	/* an example: a real connector walks with unlinkat */
	tend_buf_printf(&cmd, "rm -rf -- '%s'", path);
	if (system(cmd.ptr) != 0)
		fprintf(stderr, "kv: cannot remove %s\n", path);
	tend_buf_release(&cmd);
}

static void
bucket_apply(struct tend_sink *sink, struct tend_context *ctx,
    void *const *actions, size_t n, struct tend_apply_result *results)
{
	(void)sink;
	for (size_t i = 0; i < n; i++) {
		struct bucket_action *a = actions[i];
		struct tend_buf path = TEND_BUF_INIT, idx = TEND_BUF_INIT;

		kv_path(&path, ctx, "", a->name);
		if (a->remove) {
			/* the container's delete removes its content: its
			 * children get no delete actions of their own */
			rm_rf(path.ptr);
		} else if ((mkdir(path.ptr, 0755) != 0 && errno != EEXIST) ||
		    (tend_buf_printf(&idx, "%s/.index", path.ptr),
			mkdir(idx.ptr, 0755) != 0 && errno != EEXIST)) {
			tend_apply_fail(&results[i], TEND_ERROR,
			    "kv: mkdir %s: %s", path.ptr, strerror(errno));
		} else {
			struct kv_handler *child = calloc(1, sizeof *child);

			tend_handler_init(&child->base, &bucket_child_ops);
			child->sink = &kv_sink;
			child->bucket = strdup(a->name);
			results[i].child = &child->base;
		}
		tend_buf_release(&path);
		tend_buf_release(&idx);
	}
}

static struct tend_sink bucket_sink = {.apply = bucket_apply,
    .name = "example/kv-bucket"};

static const struct tend_handler_ops bucket_ops = {
	.abi = TEND_TARGET_ABI,
	.kind = "example/kv-bucket",
	.reconcile = bucket_reconcile,
	.destroy = kv_destroy,
};

static int
bucket_register(struct tend_engine *eng)
{
	struct kv_handler *h = calloc(1, sizeof *h);

	tend_handler_init(&h->base, &bucket_ops);
	h->sink = &bucket_sink;
	h->bucket = strdup("");
	return tend_engine_register_root(eng, "example/kv-bucket", &h->base,
	    NULL);
}

/* A bucket is mounted in a sub-component of its own, applied before its
 * keys are declared; what comes back is the bucket's child provider. */
static int
kv_bucket(struct tend_comp *c, const char *name, const char *mode,
    struct tend_provider **out)
{
	struct tend_key k = tend_key_str(name);

	return tend_mount_target(c,
	    tend_engine_root(tend_comp_engine(c), "example/kv-bucket"), &k,
	    mode, strlen(mode), out);
}

/* ---- a declaration function using it all ---- */

struct args {
	int argc;
	char **argv;
};

static int
declare_all(struct tend_comp *c, void *arg)
{
	struct args *a = arg;
	struct tend_engine *eng = tend_comp_engine(c);
	char names[16][256];
	struct tend_provider *buckets[16];
	int nbuckets = 0, rc;

	for (int i = 0; i < a->argc; i++) {
		char buf[256], *eq, *slash, *at;
		struct tend_provider *p = tend_engine_root(eng, "example/kv");

		snprintf(buf, sizeof buf, "%s", a->argv[i]);
		if (!(eq = strchr(buf, '=')))
			return tend_error_set(TEND_EINVALID, "bad arg %s", buf);
		*eq = '\0';
		if ((slash = strchr(buf, '/'))) {
			*slash = '\0';
			if ((at = strchr(buf, '@')))
				*at = '\0';
			/* mount each bucket once per pass */
			int j;
			for (j = 0; j < nbuckets; j++)
				if (strcmp(names[j], buf) == 0)
					break;
			if (j == nbuckets) {
				if (nbuckets == 16)
					return tend_error_set(TEND_EINVALID,
					    "too many buckets");
				snprintf(names[j], sizeof names[j], "%s", buf);
				if ((rc = kv_bucket(c, buf, "0644",
					 &buckets[j])))
					return rc;
				nbuckets++;
			}
			p = buckets[j];
			if (at && (rc = tend_provider_attachment(p, at + 1, &p)))
				return rc;
			rc = kv_declare(c, p, slash + 1, eq + 1);
		} else
			rc = kv_declare(c, p, buf, eq + 1);
		if (rc)
			return rc;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	struct tend_engine *eng;
	struct tend_stats st;
	struct args a = {argc - 3, argv + 3};
	int rc;

	if (argc < 3) {
		fprintf(stderr, "usage: kv_connector STATE_DIR KV_ROOT "
				"[k=v | bucket/k=v | bucket@index/k=v ...]\n");
		return 2;
	}
	mkdir(argv[2], 0755);
	if (tend_engine_open(&eng, argv[1], NULL)) {
		fprintf(stderr, "kv_connector: %s\n", tend_error_last());
		return 2;
	}
	kv_register(eng);
	bucket_register(eng);
	tend_engine_set_resource(eng, "kv-root", argv[2]);
	rc = tend_engine_run(eng, "kv-example", declare_all, &a, NULL, &st);
	printf("added %llu, reprocessed %llu, deleted %llu, applied %llu, "
	       "failed %llu\n",
	    (unsigned long long)st.added, (unsigned long long)st.reprocessed,
	    (unsigned long long)st.deleted, (unsigned long long)st.applied,
	    (unsigned long long)st.failed);
	if (rc)
		fprintf(stderr, "kv_connector: %s\n", tend_error_last());
	tend_engine_close(eng);
	return rc ? 1 : 0;
}
