/*
 * counts.c - what a tracked item counts for in its app's counters, and
 * the recount of every counter from the rows.
 *
 * `tend status` and the agent's status show, per app, the number of
 * tracked target states, how many are unsettled (several candidate
 * records, or a delete not done) and how many are containers. Scanning
 * every item row for that costs O(states) (5 s at a million); instead
 * commit.c's item_put and item_del, the only writers of ITEM rows, add
 * each row's difference here to the store's counters (store.h), in the
 * transaction that writes the row. The scan is still the truth: tend
 * check compares the two (check.c), and a store whose counters were not
 * kept by this tend is recounted here, once, in its first write.
 *
 * A row's app is the first key of its component's path (every component
 * of a pass is below the app's root, whose path is the app's name), as
 * tend ls and the scan attribute it.
 */
#include "engine_int.h"

#include <stdlib.h>
#include <string.h>

#include "tend/status.h"

/* What an encoded item counts for (rows.c reads it, nothing copied) */
int
tend_count_row(struct tend_counts *c, const void *data, size_t len, int sign)
{
	bool container, deleted;
	size_t nstates;
	int rc = tend_item_peek(data, len, &container, &nstates, &deleted);

	if (rc)
		return rc;
	c->n[TEND_COUNT_STATES] += sign;
	c->n[TEND_COUNT_PENDING] += sign * (nstates != 1 || deleted);
	c->n[TEND_COUNT_CONTAINERS] += sign * container;
	return 0;
}

void
tend_count_item(struct tend_counts *c, const struct item *it, int sign)
{
	c->n[TEND_COUNT_STATES] += sign;
	c->n[TEND_COUNT_PENDING] += sign *
	    (it->nstates != 1 || it->states[0].deleted);
	c->n[TEND_COUNT_CONTAINERS] += sign * it->container;
}

bool
tend_count_path_app(const uint8_t *path, size_t len, struct tend_arena *arena,
    const char **app, size_t *applen)
{
	struct tend_key k;

	if (!len || tend_key_decode(&k, path, len, NULL, arena) ||
	    k.kind != TEND_KEY_STR)
		return false;
	*app = k.u.s.ptr;
	*applen = k.u.s.len;
	return true;
}

bool
tend_count_header_app(const struct tend_bytes *hdr, struct tend_arena *arena,
    const char **app, size_t *applen, bool *root)
{
	struct hdr_row h;

	if (tend_hdr_parse(&h, hdr->data, hdr->len) != 0)
		return false;
	*root = !h.has_parent;
	return tend_count_path_app(h.path, h.pathlen, arena, app, applen);
}

struct tally {
	char *name;
	size_t len;
	struct tend_counts c;
};

static struct tend_counts *
tally_of(struct tally **v, size_t *n, const char *name, size_t len)
{
	for (size_t i = 0; i < *n; i++)
		if ((*v)[i].len == len && memcmp((*v)[i].name, name, len) == 0)
			return &(*v)[i].c;
	*v = tend_xrealloc(*v, (*n + 1) * sizeof **v);
	memset(&(*v)[*n], 0, sizeof **v);
	(*v)[*n].name = tend_xmemdup(name, len);
	(*v)[*n].len = len;
	return &(*v)[(*n)++].c;
}

/*
 * One pass over the COMP rows (the apps' roots, and each component's app)
 * and one over the ITEM rows, grouped by component (their key starts with
 * its id): an old store of a million states takes a few seconds, once.
 */
int
tend_count_recount(struct tend_txn *txn, void *arg)
{
	struct tend_arena arena = TEND_ARENA_INIT;
	struct tally *v = NULL;
	size_t n = 0;
	struct tend_iter it;
	struct tend_bytes k, val;
	struct tend_counts *cur = NULL;
	uint8_t cur_cid[16];
	bool have_cid = false;
	int rc, more;

	(void)arg;
	if ((rc = tend_store_iter_init(&it, txn, TEND_T_COMP, NULL, 0)))
		return rc;
	while ((more = tend_store_iter_next(&it, &k, &val)) == 1) {
		const char *app;
		size_t alen;
		bool root;

		if (k.len == 16 &&
		    tend_count_header_app(&val, &arena, &app, &alen, &root) &&
		    root)
			tally_of(&v, &n, app, alen)->n[TEND_COUNT_ROOTS]++;
	}
	tend_store_iter_finish(&it);
	if (more < 0) {
		rc = more;
		goto out;
	}
	if ((rc = tend_store_iter_init(&it, txn, TEND_T_ITEM, NULL, 0)))
		goto out;
	while ((more = tend_store_iter_next(&it, &k, &val)) == 1) {
		if (k.len != 40)
			continue;
		if (!have_cid || memcmp(cur_cid, k.data, 16) != 0) {
			struct tend_bytes hdr;
			const char *app;
			size_t alen;
			bool root;

			memcpy(cur_cid, k.data, 16);
			have_cid = true;
			tend_arena_finish(&arena);
			/* (the cursor stays valid across a get) */
			cur = tend_store_get(txn, TEND_T_COMP, cur_cid, 16,
				  &hdr) == 0 &&
				tend_count_header_app(&hdr, &arena, &app, &alen,
				    &root)
			    ? tally_of(&v, &n, app, alen) : NULL;
		}
		/* rows the scan cannot read, or of a component without a
		 * header, are not listed by tend ls: not counted either */
		if (cur)
			tend_count_row(cur, val.data, val.len, 1);
	}
	tend_store_iter_finish(&it);
	if (more < 0) {
		rc = more;
		goto out;
	}
	rc = tend_store_counts_clear(txn);
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = tend_store_counts_set(txn, v[i].name, v[i].len, &v[i].c);
out:
	for (size_t i = 0; i < n; i++)
		free(v[i].name);
	free(v);
	tend_arena_finish(&arena);
	return rc;
}
