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

static uint32_t
le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24;
}

/* The ITEM row layout (commit.c's tend_item_encode): format, container,
 * parent, schema, [gen_id, gen_schema], key, nstates, states. Only what
 * is counted is read, and nothing is copied. */
int
tend_count_row(struct tend_counts *c, const void *data, size_t len, int sign)
{
	const uint8_t *p = data;
	size_t pos = 1 + 1 + 16 + 8;
	uint32_t keylen, nstates;

	if (len < pos || p[0] != 1 || p[1] > 1)
		return tend_error_set(TEND_EINVALID, "store: bad item record");
	bool container = p[1] == 1;
	if (container)
		pos += 16;
	if (len < pos + 4)
		return tend_error_set(TEND_EINVALID, "store: bad item record");
	keylen = le32(p + pos);
	pos += 4;
	if (len - pos < (size_t)keylen + 4)
		return tend_error_set(TEND_EINVALID, "store: bad item record");
	pos += keylen;
	nstates = le32(p + pos);
	pos += 4;
	/* the first state's deleted flag follows its u64 version */
	bool deleted = nstates >= 1 && len > pos + 8 && p[pos + 8] == 1;
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

/* The COMP row (commit.c's header_put): format, version, token, flags,
 * has_parent, parent, processor, path. */
bool
tend_count_header_app(const struct tend_bytes *hdr, struct tend_arena *arena,
    const char **app, size_t *applen, bool *root)
{
	size_t pos = 1 + 8 + 16 + 1;
	uint32_t plen, len;

	if (hdr->len < pos + 1 + 16 + 4)
		return false;
	*root = hdr->data[pos] == 0;
	pos += 1 + 16;
	plen = le32(hdr->data + pos);
	pos += 4;
	if (hdr->len - pos < (size_t)plen + 4)
		return false;
	pos += plen;
	len = le32(hdr->data + pos);
	pos += 4;
	if (hdr->len - pos < len)
		return false;
	return tend_count_path_app(hdr->data + pos, len, arena, app, applen);
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
