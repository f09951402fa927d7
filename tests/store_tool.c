/*
 * store_tool.c - what the end-to-end tests do to a store behind tend's
 * back (tests/e2e/counts.sh):
 *
 *	store_tool unmark STORE     the store as an older tend left it: no
 *	                            counters, no mark
 *	store_tool skew STORE APP   one state too many in APP's counter (a
 *	                            bug in keeping them, for tend check)
 *	store_tool valid STORE      exit 0 if the counters are trusted
 */
#include <stdio.h>
#include <string.h>

#include "store.h"
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

int
main(int argc, char **argv)
{
	struct tend_store *st;
	int rc;

	if (argc < 3 || (strcmp(argv[1], "skew") == 0 && argc < 4)) {
		fprintf(stderr, "usage: store_tool unmark|skew|valid STORE "
				"[APP]\n");
		return 2;
	}
	if (tend_store_open(&st, argv[2], 0)) {
		fprintf(stderr, "store_tool: %s\n", tend_error_last());
		return 1;
	}
	if (strcmp(argv[1], "unmark") == 0)
		rc = tend_store_write(st, unmark, NULL);
	else if (strcmp(argv[1], "skew") == 0)
		rc = tend_store_write(st, skew, argv[3]);
	else {
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
