/*
 * bench/engine.c - the engine's own cost per target state.
 *
 * Usage: bench-engine [N] [DIR]   (N default 100000)
 *
 * With a no-op sink, times passes over N tracked target states:
 *   flat:  one component declaring N states
 *   items: N components (one per source item) declaring one state each
 * for a first pass (all new), an unchanged pass and an all-changed pass,
 * beside a raw LMDB cursor scan of the same rows (the read floor). Prints
 * per-state costs and the peak RSS after each phase. Not a test: timings
 * are printed, never asserted.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "inspect.h"
#include "store.h"
#include "tend/buf.h"
#include "tend/engine.h"
#include "tend/status.h"

struct noop_handler {
	struct tend_handler base;
	struct tend_sink sink;
};

static void
noop_apply(struct tend_sink *sink, struct tend_context *ctx,
    void *const *actions, size_t n, struct tend_apply_result *res)
{
	(void)sink, (void)ctx, (void)actions, (void)n, (void)res;
}

static int
noop_reconcile(struct tend_handler *h, const struct tend_reconcile_in *in,
    struct tend_reconcile_out *out)
{
	struct noop_handler *nh = (struct noop_handler *)(void *)h;
	bool act = in->desired ? in->prev_may_be_missing
			       : (in->nprev || in->prev_may_be_missing);

	for (size_t i = 0; in->desired && i < in->nprev; i++)
		if (in->prev[i].len != in->desired_len ||
		    memcmp(in->prev[i].data, in->desired, in->desired_len))
			act = true;
	if (!act)
		return 0;
	out->action = &nh->sink; /* any non-NULL token */
	out->sink = &nh->sink;
	out->record_absent = in->desired == NULL;
	out->record.data = in->desired;
	out->record.len = in->desired_len;
	return 0;
}

static void
noop_destroy(struct tend_handler *h)
{
	free(h);
}

static const struct tend_handler_ops noop_ops = {
	.abi = TEND_TARGET_ABI,
	.kind = "noop",
	.reconcile = noop_reconcile,
	.destroy = noop_destroy,
};

struct job {
	struct tend_provider *prov;
	unsigned n;
	unsigned gen; /* value generation: change it to change every state */
	bool items;
};

static int
item_body(struct tend_comp *c, void *arg)
{
	struct job *j = arg;
	unsigned i = j->n; /* the item index is passed in n */
	char key[32], val[32];
	struct tend_key k;

	snprintf(key, sizeof key, "k%07u", i);
	snprintf(val, sizeof val, "v%u-%u", i, j->gen);
	k = tend_key_str(key);
	return tend_declare(c, j->prov, &k, val, strlen(val));
}

static int
root_body(struct tend_comp *c, void *arg)
{
	struct job *j = arg;
	char key[32], val[32];

	for (unsigned i = 0; i < j->n; i++) {
		if (j->items) {
			struct job one = *j;
			struct tend_key path[2];
			int rc;

			one.n = i;
			snprintf(key, sizeof key, "f%07u", i);
			path[0] = tend_key_symbol("files");
			path[1] = tend_key_str(key);
			if ((rc = tend_mount(c, path, 2, item_body, &one, NULL)))
				return rc;
			continue;
		}
		struct tend_key k;
		snprintf(key, sizeof key, "k%07u", i);
		snprintf(val, sizeof val, "v%u-%u", i, j->gen);
		k = tend_key_str(key);
		int rc = tend_declare(c, j->prov, &k, val, strlen(val));
		if (rc)
			return rc;
	}
	return 0;
}

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long
peak_rss_kib(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

static double
scan_floor(struct tend_engine *eng)
{
	struct tend_txn *txn;
	struct tend_iter it;
	struct tend_bytes k, v;
	size_t n = 0, bytes = 0;
	double t0 = now();

	tend_store_read_begin(tend_engine_store(eng), &txn);
	tend_store_iter_init(&it, txn, TEND_T_ITEM, NULL, 0);
	while (tend_store_iter_next(&it, &k, &v) == 1) {
		n++;
		bytes += v.len;
	}
	tend_store_iter_finish(&it);
	tend_store_read_end(txn);
	(void)bytes;
	return now() - t0;
}

/* What visiting N components costs LMDB alone: one point lookup of each
 * component's header, in the pass's order (cids are hashes, so random). */
static double
get_floor(struct tend_engine *eng, unsigned n)
{
	struct tend_txn *txn;
	struct tend_bytes v;
	struct tend_buf path = TEND_BUF_INIT;
	unsigned found = 0;
	double t0 = now();

	tend_store_read_begin(tend_engine_store(eng), &txn);
	for (unsigned i = 0; i < n; i++) {
		char key[32];
		struct tend_key k[3] = {tend_key_str("bench"),
		    tend_key_symbol("files"), tend_key_str(key)};

		snprintf(key, sizeof key, "f%07u", i);
		k[2] = tend_key_str(key);
		tend_buf_reset(&path);
		for (int j = 0; j < 3; j++)
			tend_key_encode(&path, &k[j]);
		struct tend_fp cid = tend_engine_cid(eng, path.ptr, path.len);
		found += tend_store_get(txn, TEND_T_COMP, cid.b, 16, &v) == 0;
	}
	tend_store_read_end(txn);
	tend_buf_release(&path);
	if (found != n)
		fprintf(stderr, "bench: %u of %u headers found\n", found, n);
	return now() - t0;
}

static void
phase(struct tend_engine *eng, const char *name, struct job *j, unsigned n)
{
	struct tend_stats st;
	double t0 = now();
	int rc = tend_engine_run(eng, "bench", root_body, j, NULL, &st);
	double dt = now() - t0;

	if (rc) {
		fprintf(stderr, "bench: %s: %s\n", name, tend_error_last());
		exit(1);
	}
	printf("  %-10s %8.3f s  %7.2f us/state  applied %-7llu peak RSS %ld "
	       "MiB\n",
	    name, dt, dt * 1e6 / n, (unsigned long long)st.applied,
	    peak_rss_kib() / 1024);
}

static void
run_layout(const char *base, unsigned n, bool items)
{
	char dir[512];
	struct tend_engine *eng;
	struct noop_handler *h = calloc(1, sizeof *h);
	struct job j = {.n = n, .items = items};

	snprintf(dir, sizeof dir, "%s/%s", base, items ? "items" : "flat");
	if (tend_engine_open(&eng, dir, NULL)) {
		fprintf(stderr, "bench: %s\n", tend_error_last());
		exit(1);
	}
	tend_handler_init(&h->base, &noop_ops);
	h->sink.apply = noop_apply;
	h->sink.name = "noop";
	tend_engine_register_root(eng, "noop", &h->base, &j.prov);
	printf("%s: %u target states%s\n", items ? "items" : "flat", n,
	    items ? " in as many components" : " in one component");
	phase(eng, "first", &j, n);
	const char *rep = getenv("TEND_BENCH_REPEAT");
	for (int i = 0; i < (rep ? atoi(rep) : 2); i++)
		phase(eng, "unchanged", &j, n);
	double scan = scan_floor(eng);
	printf("  %-10s %8.3f s  %7.2f us/state  (floor: LMDB cursor over "
	       "the item rows)\n",
	    "scan", scan, scan * 1e6 / n);
	if (items) {
		double gets = get_floor(eng, n);
		printf("  %-10s %8.3f s  %7.2f us/state  (floor: one random "
		       "get per component)\n",
		    "gets", gets, gets * 1e6 / n);
	}
	j.gen = 1;
	phase(eng, "changed", &j, n);
	tend_engine_close(eng);
}

int
main(int argc, char **argv)
{
	unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 100000;
	char base[] = "/tmp/tend-bench-XXXXXX";
	const char *dir = argc > 2 ? argv[2] : mkdtemp(base);
	char cmd[600];

	const char *only = getenv("TEND_BENCH_LAYOUT");

	if (!only || strcmp(only, "flat") == 0)
		run_layout(dir, n, false);
	if (!only || strcmp(only, "items") == 0)
		run_layout(dir, n, true);
	if (argc <= 2) {
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			return 1;
	}
	return 0;
}
