/*
 * inspect.c - a readable dump of the tracking store, for `tend ls`, the
 * dashboard's tree and the tests' assertions on what LMDB holds.
 *
 * Target-state paths are rebuilt from the write-once NAME rows
 * (tsid -> parent id, key); component paths from their headers.
 */
#include "inspect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "tend/status.h"

static void
format_path(struct tend_buf *out, const uint8_t *p, size_t len,
    struct tend_arena *a)
{
	size_t pos = 0;

	if (len == 0)
		tend_buf_putc(out, '/');
	while (pos < len) {
		struct tend_key k;
		size_t used;

		if (tend_key_decode(&k, p + pos, len - pos, &used, a)) {
			tend_buf_puts(out, "/?");
			return;
		}
		tend_buf_putc(out, '/');
		if (k.kind == TEND_KEY_STR)
			tend_buf_put(out, k.u.s.ptr, k.u.s.len);
		else
			tend_key_format(out, &k);
		pos += used;
	}
}

/*
 * A leaf state's name: a store of format 3 keeps NAME rows for containers
 * and providers only, and an entry's parent and key are in its item row
 * (cid tsid pid), found through the owner row (or a contest row's holder
 * and contenders). Copies the key into `a`.
 */
static bool
leaf_name(struct tend_txn *txn, const struct tend_fp *tsid,
    struct tend_fp *parent, const uint8_t **key, size_t *keylen,
    struct tend_arena *a)
{
	struct tend_fp cids[8];
	size_t n = 0;
	struct tend_bytes v;

	if (tend_store_get(txn, TEND_T_OWNER, tsid->b, 16, &v) != 0)
		return false;
	if (v.len == 16)
		memcpy(cids[n++].b, v.data, 16);
	else if (tend_contest_row(&v)) {
		struct tend_fp cid;
		const char *p;
		size_t len, at = 32;

		memcpy(cids[n].b, v.data + 16, 16);
		n += !tend_fp_is_zero(&cids[n]);
		while (n < 8 && (at = tend_contest_next(&v, at, &cid, &p, &len)))
			cids[n++] = cid;
	}
	for (size_t i = 0; i < n; i++) {
		uint8_t prefix[32];
		struct tend_iter it;
		struct tend_bytes k;
		struct item item;
		bool found = false;

		memcpy(prefix, cids[i].b, 16);
		memcpy(prefix + 16, tsid->b, 16);
		if (tend_store_iter_init(&it, txn, TEND_T_ITEM, prefix, 32))
			continue;
		if (tend_store_iter_next(&it, &k, &v) == 1) {
			if (tend_item_decode(&item, v.data, v.len, a) == 0) {
				*parent = item.parent;
				*key = item.key;
				*keylen = item.keylen;
				found = true;
			} else
				tend_error_clear(); /* (a row it cannot read) */
		}
		tend_store_iter_finish(&it);
		if (found)
			return true;
	}
	return false;
}

/* The path of `tsid`; `it` (NULL: looked up) its item, whose parent and
 * key name it without a NAME row */
static int
ts_path(struct tend_txn *txn, const struct tend_fp *tsid,
    const struct item *it, struct tend_buf *out)
{
	struct tend_fp chain[64];
	size_t n = 0;
	struct tend_fp cur = *tsid;
	struct tend_arena a = TEND_ARENA_INIT;
	const uint8_t *leaf = NULL; /* chain[0]'s key, if not in NAME */
	size_t leaflen = 0;

	if (it && it->keylen && !it->container) {
		chain[n++] = cur;
		cur = it->parent;
		leaf = it->key;
		leaflen = it->keylen;
	}
	while (n < 64) {
		struct tend_bytes v;

		chain[n++] = cur;
		if (tend_store_get(txn, TEND_T_NAME, cur.b, 16, &v) == 0 &&
		    v.len >= 16)
			memcpy(cur.b, v.data, 16);
		else if (n > 1 ||
		    !leaf_name(txn, &cur, &cur, &leaf, &leaflen, &a))
			break;
		if (tend_fp_is_zero(&cur))
			break;
	}
	for (size_t i = n; i-- > 0;) {
		struct tend_bytes v;
		struct tend_key k;

		if (i == 0 && leaf) {
			v.data = leaf;
			v.len = leaflen;
		} else if (tend_store_get(txn, TEND_T_NAME, chain[i].b, 16,
			       &v) != 0 ||
		    v.len < 17) {
			v.len = 0;
		} else {
			v.data += 16;
			v.len -= 16;
		}
		if (!v.len || tend_key_decode(&k, v.data, v.len, NULL, &a)) {
			tend_buf_puts(out, "/#");
			tend_buf_puthex(out, chain[i].b, 4);
			continue;
		}
		tend_buf_putc(out, '/');
		if (k.kind == TEND_KEY_STR)
			tend_buf_put(out, k.u.s.ptr, k.u.s.len);
		else
			tend_key_format(out, &k);
	}
	tend_arena_finish(&a);
	return 0;
}

int
tend_inspect_ts_path(struct tend_txn *txn, const struct tend_fp *tsid,
    struct tend_buf *out)
{
	return ts_path(txn, tsid, NULL, out);
}

int
tend_inspect_item_path(struct tend_txn *txn, const struct tend_fp *tsid,
    const struct item *it, struct tend_buf *out)
{
	return ts_path(txn, tsid, it, out);
}

int
tend_inspect_comp_path(struct tend_txn *txn, const struct tend_fp *cid,
    struct tend_buf *out)
{
	struct tend_bytes v;
	struct tend_arena a = TEND_ARENA_INIT;

	struct hdr_row h;

	if (tend_store_get(txn, TEND_T_COMP, cid->b, 16, &v) != 0) {
		tend_buf_puts(out, "?#");
		tend_buf_puthex(out, cid->b, 4);
		return TEND_ENOTFOUND;
	}
	if (tend_hdr_parse(&h, v.data, v.len) != 0) {
		tend_buf_puts(out, "?");
		return TEND_EINVALID;
	}
	format_path(out, h.path, h.pathlen, &a);
	tend_arena_finish(&a);
	return 0;
}

bool
tend_inspect_header_app(const struct tend_bytes *hdr, struct tend_arena *arena,
    const char **app, size_t *applen, bool *root)
{
	return tend_count_header_app(hdr, arena, app, applen, root);
}

static void
format_states(struct tend_buf *out, const struct item *it)
{
	tend_buf_putc(out, '[');
	for (size_t i = 0; i < it->nstates; i++) {
		const struct state *s = &it->states[i];
		bool printable = true;

		if (i)
			tend_buf_putc(out, ',');
		if (s->deleted) {
			tend_buf_putc(out, 'D');
			continue;
		}
		for (size_t j = 0; j < s->len; j++)
			if (s->rec[j] < 0x20 || s->rec[j] >= 0x7f ||
			    s->rec[j] == ',' || s->rec[j] == ']')
				printable = false;
		if (printable)
			tend_buf_put(out, s->rec, s->len);
		else {
			tend_buf_putc(out, '#');
			tend_buf_puthex(out, s->rec, s->len > 8 ? 8 : s->len);
		}
	}
	tend_buf_putc(out, ']');
}

static int
dump_body(struct tend_txn *txn, struct tend_buf *out, unsigned what)
{
	struct tend_iter it;
	struct tend_bytes k, v;
	struct tend_arena a = TEND_ARENA_INIT;
	int more;

	if (what & TEND_DUMP_ITEMS) {
		tend_store_iter_init(&it, txn, TEND_T_ITEM, NULL, 0);
		while ((more = tend_store_iter_next(&it, &k, &v)) == 1) {
			struct tend_fp cid, tsid;
			struct item item;

			if (k.len != 40)
				continue;
			memcpy(cid.b, k.data, 16);
			memcpy(tsid.b, k.data + 16, 16);
			tend_buf_puts(out, "item ");
			tend_inspect_comp_path(txn, &cid, out);
			tend_buf_putc(out, ' ');
			bool ok = tend_item_decode(&item, v.data, v.len, &a) == 0;
			tend_inspect_item_path(txn, &tsid, ok ? &item : NULL, out);
			tend_buf_putc(out, ' ');
			if (ok) {
				format_states(out, &item);
				if (item.schema)
					tend_buf_printf(out, " schema=%llu",
					    (unsigned long long)item.schema);
				if (item.container)
					tend_buf_puts(out, " container");
			} else
				tend_buf_puts(out, "<bad>");
			tend_buf_putc(out, '\n');
		}
		tend_store_iter_finish(&it);
	}
	if (what & TEND_DUMP_OWNERS) {
		tend_store_iter_init(&it, txn, TEND_T_OWNER, NULL, 0);
		while ((more = tend_store_iter_next(&it, &k, &v)) == 1) {
			struct tend_fp cid, tsid;

			if (k.len == 16 && tend_contest_row(&v)) {
				/* "contest /@dict/x: /app/C1 /app/C2" */
				memcpy(tsid.b, k.data, 16);
				tend_buf_puts(out, "contest ");
				tend_inspect_ts_path(txn, &tsid, out);
				tend_buf_putc(out, ':');
				const char *p;
				size_t len, at = 32;
				while ((at = tend_contest_next(&v, at, &cid, &p,
					    &len))) {
					tend_buf_putc(out, ' ');
					tend_buf_put(out, p, len);
				}
				tend_buf_putc(out, '\n');
				continue;
			}
			if (k.len != 16 || v.len != 16)
				continue;
			memcpy(tsid.b, k.data, 16);
			memcpy(cid.b, v.data, 16);
			tend_buf_puts(out, "owner ");
			tend_inspect_ts_path(txn, &tsid, out);
			tend_buf_puts(out, " -> ");
			tend_inspect_comp_path(txn, &cid, out);
			tend_buf_putc(out, '\n');
		}
		tend_store_iter_finish(&it);
	}
	if (what & TEND_DUMP_COMPS) {
		static const struct {
			enum tend_table t;
			const char *name;
		} tabs[] = {{TEND_T_COMP, "comp"}, {TEND_T_CEX, "cex"},
		    {TEND_T_TOMB, "tomb"}, {TEND_T_MEMO, "memo"}};

		for (size_t i = 0; i < sizeof tabs / sizeof *tabs; i++) {
			tend_store_iter_init(&it, txn, tabs[i].t, NULL, 0);
			while ((more = tend_store_iter_next(&it, &k, &v)) == 1) {
				struct tend_fp cid;

				tend_buf_printf(out, "%s ", tabs[i].name);
				if ((tabs[i].t == TEND_T_CEX ||
					tabs[i].t == TEND_T_TOMB) &&
				    v.len) {
					format_path(out, v.data, v.len, &a);
				} else if (tabs[i].t == TEND_T_CEX) {
					/* format 3: the child's header has
					 * its path */
					memcpy(cid.b, k.data + 16, 16);
					tend_inspect_comp_path(txn, &cid, out);
				} else {
					memcpy(cid.b, k.data, 16);
					tend_inspect_comp_path(txn, &cid, out);
				}
				tend_buf_putc(out, '\n');
			}
			tend_store_iter_finish(&it);
		}
		/* a store of format 3 keeps memos in the COMP rows */
		tend_store_iter_init(&it, txn, TEND_T_COMP, NULL, 0);
		while ((more = tend_store_iter_next(&it, &k, &v)) == 1) {
			struct hdr_row h;
			struct tend_fp cid;

			if (k.len != 16 || tend_hdr_parse(&h, v.data, v.len) ||
			    !h.memo)
				continue;
			memcpy(cid.b, k.data, 16);
			tend_buf_puts(out, "memo ");
			tend_inspect_comp_path(txn, &cid, out);
			tend_buf_putc(out, '\n');
		}
		tend_store_iter_finish(&it);
	}
	tend_arena_finish(&a);
	return 0;
}

int
tend_engine_dump(struct tend_engine *eng, unsigned what, struct tend_buf *out)
{
	struct tend_txn *txn;
	int rc = tend_store_read_begin(eng->st, &txn);

	if (rc)
		return rc;
	rc = dump_body(txn, out, what);
	tend_store_read_end(txn);
	return rc;
}

struct tend_store *
tend_engine_store(struct tend_engine *eng)
{
	return eng->st;
}
