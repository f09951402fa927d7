/*
 * store_tool.c - what the end-to-end tests do to a store behind tend's
 * back (tests/e2e/counts.sh):
 *
 *	store_tool unmark STORE     the store as an older tend left it: no
 *	                            counters, no mark
 *	store_tool skew STORE APP   one state too many in APP's counter (a
 *	                            bug in keeping them, for tend check)
 *	store_tool valid STORE      exit 0 if the counters are trusted
 *	store_tool recount STATE    recount them as the engine does in the
 *	                            first write to an old store (it times it)
 *	store_tool layouts STORE    how many item, comp and memo rows are of
 *	                            each layout (their first byte): "item
 *	                            1:N 2:M" a line; then "comp-memo N",
 *	                            the COMP rows that hold a memo,
 *	                            "cex-path N", the CEX rows that spell
 *	                            their child's path, and "name N", the
 *	                            NAME rows
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "engine_int.h"
#include "inspect.h"
#include "store.h"
#include "tend/engine.h"
#include "tend/status.h"

static int
unmark(struct tend_txn *txn, void *arg)
{
	int rc;

	(void)arg;
	/* no recount is registered here: they stay untrusted */
	if ((rc = tend_store_counts_invalidate(txn)))
		return rc;
	return tend_store_counts_clear(txn);
}

static int
skew(struct tend_txn *txn, void *arg)
{
	const char *app = arg;
	struct tend_counts d = {{0}};

	d.n[TEND_COUNT_STATES] = 1;
	tend_store_count_add(txn, app, strlen(app), &d);
	return 0;
}

static int
recount(const char *state)
{
	struct tend_engine *eng;
	struct timespec t0, t1;
	int rc;

	if (tend_engine_open(&eng, state, NULL)) {
		fprintf(stderr, "store_tool: %s\n", tend_error_last());
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* the engine registered its recount: the flush runs it */
	rc = tend_store_write(tend_engine_store(eng), unmark, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (rc)
		fprintf(stderr, "store_tool: %s\n", tend_error_last());
	else
		printf("recounted in %.3f s\n", (double)(t1.tv_sec - t0.tv_sec) +
		    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	tend_engine_close(eng);
	return rc ? 1 : 0;
}

/* what a row counts for in a line of layouts */
static bool
has_memo(const struct tend_bytes *v)
{
	struct hdr_row h;

	return tend_hdr_parse(&h, v->data, v->len) == 0 && h.memo != NULL;
}

static bool
not_empty(const struct tend_bytes *v)
{
	return v->len > 0;
}

static bool
any_row(const struct tend_bytes *v)
{
	(void)v;
	return true;
}

/* "NAME N": the rows of table t that `counts` says count */
static int
count_line(struct tend_txn *txn, enum tend_table t, const char *name,
    bool (*counts)(const struct tend_bytes *v))
{
	struct tend_iter it;
	struct tend_bytes k, v;
	unsigned long n = 0;
	int rc, more;

	if ((rc = tend_store_iter_init(&it, txn, t, NULL, 0)))
		return rc;
	while ((more = tend_store_iter_next(&it, &k, &v)) == 1)
		n += counts(&v);
	tend_store_iter_finish(&it);
	printf("%s %lu\n", name, n);
	return more < 0 ? more : 0;
}

static int
layouts(struct tend_store *st)
{
	static const struct {
		enum tend_table t;
		const char *name;
	} tabs[] = {{TEND_T_ITEM, "item"}, {TEND_T_COMP, "comp"},
	    {TEND_T_MEMO, "memo"}};
	struct tend_txn *txn = NULL;
	int rc = tend_store_read_begin(st, &txn);

	for (size_t i = 0; rc == 0 && i < sizeof tabs / sizeof *tabs; i++) {
		unsigned long n[256] = {0};
		struct tend_iter it;
		struct tend_bytes k, v;
		int more;

		if ((rc = tend_store_iter_init(&it, txn, tabs[i].t, NULL, 0)))
			break;
		while ((more = tend_store_iter_next(&it, &k, &v)) == 1)
			n[v.len ? v.data[0] : 0]++;
		tend_store_iter_finish(&it);
		if (more < 0)
			rc = more;
		printf("%s", tabs[i].name);
		for (int b = 0; b < 256; b++)
			if (n[b])
				printf(" %d:%lu", b, n[b]);
		printf("\n");
	}
	/* COMP rows that hold a memo (format 3 keeps them there), CEX rows
	 * that spell their child's path (format 3 leaves it to the child's
	 * header), NAME rows (format 3 names containers only) */
	if (rc == 0)
		rc = count_line(txn, TEND_T_COMP, "comp-memo", has_memo);
	if (rc == 0)
		rc = count_line(txn, TEND_T_CEX, "cex-path", not_empty);
	if (rc == 0)
		rc = count_line(txn, TEND_T_NAME, "name", any_row);
	if (txn)
		tend_store_read_end(txn);
	return rc;
}

int
main(int argc, char **argv)
{
	struct tend_store *st;
	int rc;

	if (argc < 3 || (strcmp(argv[1], "skew") == 0 && argc < 4)) {
		fprintf(stderr, "usage: store_tool unmark|skew|valid|format|layouts STORE "
				"[APP], store_tool recount STATE\n");
		return 2;
	}
	if (strcmp(argv[1], "recount") == 0)
		return recount(argv[2]);
	if (tend_store_open(&st, argv[2], 0)) {
		fprintf(stderr, "store_tool: %s\n", tend_error_last());
		return 1;
	}
	if (strcmp(argv[1], "unmark") == 0)
		rc = tend_store_write(st, unmark, NULL);
	else if (strcmp(argv[1], "skew") == 0)
		rc = tend_store_write(st, skew, argv[3]);
	else if (strcmp(argv[1], "layouts") == 0)
		rc = layouts(st);
	else if (strcmp(argv[1], "format") == 0) {
		printf("%u\n", tend_store_format(st));
		rc = 0;
	} else {
		struct tend_txn *txn;

		rc = tend_store_read_begin(st, &txn);
		if (rc == 0) {
			rc = tend_store_counts_valid(txn) ? 0 : 3;
			tend_store_read_end(txn);
		}
	}
	if (rc && rc != 3)
		fprintf(stderr, "store_tool: %s\n", tend_error_last());
	tend_store_close(st);
	return rc == 3 ? 3 : rc ? 1 : 0;
}
