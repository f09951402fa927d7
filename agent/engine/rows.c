/*
 * rows.c - the values of the engine's ITEM, COMP and MEMO rows.
 *
 * Two layouts of each, told apart by their first byte. The first (1)
 * spells numbers in fixed widths and always carries a token and a
 * parent; a store of format 3 (store.h) writes the second (2), which
 * spells them in varints (LEB128) and leaves out what is absent: the
 * same item in 57 bytes instead of 82 plus its key. Every reader takes
 * both, so a store of format 2 keeps working (and keeps writing the
 * first: an older tend can read it), and one made by this tend says
 * format 3, which an older tend refuses instead of misreading.
 *
 * Readers of rows go through this file only (counts.c, check.c,
 * inspect.c and the program's scan of an old store used to parse the
 * header by hand, each with its own offsets).
 */
#include "engine_int.h"

#include <string.h>

#include "tend/status.h"

/* ---- numbers ---- */

static void
put_fixed(struct tend_buf *b, uint64_t v, int width)
{
	unsigned char x[8];

	for (int i = 0; i < width; i++)
		x[i] = (unsigned char)(v >> (8 * i));
	tend_buf_put(b, x, (size_t)width);
}

void
tend_varint_put(struct tend_buf *b, uint64_t v)
{
	do {
		uint8_t c = (uint8_t)(v & 0x7f);

		v >>= 7;
		tend_buf_putc(b, (char)(c | (v ? 0x80 : 0)));
	} while (v);
}

bool
tend_varint_get(const uint8_t *p, size_t n, size_t *pos, uint64_t *out)
{
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (*pos >= n)
			return false;
		uint8_t c = p[(*pos)++];

		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*out = v;
			return true;
		}
	}
	return false;
}

/* A reader over one value: fixed-width or varint numbers by layout. */
struct rd {
	const uint8_t *p;
	size_t len, pos;
	bool compact, bad;
};

static uint64_t
get_fixed(struct rd *r, int width)
{
	uint64_t v = 0;

	if (r->pos > r->len || r->len - r->pos < (size_t)width) {
		r->bad = true;
		return 0;
	}
	for (int i = 0; i < width; i++)
		v |= (uint64_t)r->p[r->pos + (size_t)i] << (8 * i);
	r->pos += (size_t)width;
	return v;
}

/* a number: a varint in the compact layout, `width` bytes in the other */
static uint64_t
get_num(struct rd *r, int width)
{
	uint64_t v = 0;

	if (!r->compact)
		return get_fixed(r, width);
	if (!r->bad && !tend_varint_get(r->p, r->len, &r->pos, &v))
		r->bad = true;
	return r->bad ? 0 : v;
}

static void
put_num(struct tend_buf *b, bool compact, uint64_t v, int width)
{
	if (compact)
		tend_varint_put(b, v);
	else
		put_fixed(b, v, width);
}

static const uint8_t *
get_bytes(struct rd *r, size_t n)
{
	if (r->bad || r->pos > r->len || r->len - r->pos < n) {
		r->bad = true;
		return NULL;
	}
	const uint8_t *p = r->p + r->pos;
	r->pos += n;
	return p;
}

/* The layout byte: 1 or 2 (compact) */
static bool
rd_start(struct rd *r, const void *data, size_t len)
{
	*r = (struct rd){data, len, 0, false, false};
	const uint8_t *p = get_bytes(r, 1);
	if (!p || (p[0] != ROW_FIXED && p[0] != ROW_COMPACT))
		return false;
	r->compact = p[0] == ROW_COMPACT;
	return true;
}

/* ---- ITEM: cid tsid pid -> the tracked item ----
 *
 * layout 1: 1, container (1 byte), parent (16), schema (8), [gen_id (8),
 *   gen_schema (8)], keylen (4), key, nstates (4), then each state:
 *   version (8), deleted (1), len (4), record.
 * layout 2: 2, flags (1: container), parent (16), schema, [gen_id,
 *   gen_schema], keylen, key, nstates, then each state: version,
 *   len << 1 | deleted, record; numbers in varints.
 */

void
tend_item_encode(struct tend_buf *b, const struct item *it, bool compact)
{
	tend_buf_putc(b, compact ? ROW_COMPACT : ROW_FIXED);
	tend_buf_putc(b, it->container ? 1 : 0);
	tend_buf_put(b, it->parent.b, 16);
	put_num(b, compact, it->schema, 8);
	if (it->container) {
		put_num(b, compact, it->gen_id, 8);
		put_num(b, compact, it->gen_schema, 8);
	}
	put_num(b, compact, it->keylen, 4);
	tend_buf_put(b, it->key, it->keylen);
	put_num(b, compact, it->nstates, 4);
	for (size_t i = 0; i < it->nstates; i++) {
		const struct state *s = &it->states[i];

		put_num(b, compact, s->version, 8);
		if (compact) {
			tend_varint_put(b, (uint64_t)s->len << 1 | s->deleted);
		} else {
			tend_buf_putc(b, s->deleted ? 1 : 0);
			put_fixed(b, s->len, 4);
		}
		tend_buf_put(b, s->rec, s->len);
	}
}

/* The item's fields up to its states; its key points into the row. */
static bool
item_head(struct rd *r, struct item *out)
{
	const uint8_t *p = get_bytes(r, 1);

	memset(out, 0, sizeof *out);
	if (!p || p[0] > 1)
		return false;
	out->container = p[0] == 1;
	if ((p = get_bytes(r, 16)))
		memcpy(out->parent.b, p, 16);
	out->schema = get_num(r, 8);
	if (out->container) {
		out->gen_id = get_num(r, 8);
		out->gen_schema = get_num(r, 8);
	}
	uint64_t keylen = get_num(r, 4);
	if (r->bad || keylen > r->len)
		return false;
	out->keylen = (size_t)keylen;
	out->key = get_bytes(r, out->keylen);
	uint64_t n = get_num(r, 4);
	if (r->bad || n > r->len)
		return false;
	out->nstates = (size_t)n;
	return true;
}

/* One state; its record points into the row. */
static bool
item_state(struct rd *r, struct state *s)
{
	s->version = get_num(r, 8);
	if (r->compact) {
		uint64_t ld = get_num(r, 4);

		s->deleted = ld & 1;
		if ((ld >> 1) > r->len)
			return false;
		s->len = (size_t)(ld >> 1);
	} else {
		const uint8_t *p = get_bytes(r, 1);

		s->deleted = p && p[0] == 1;
		s->len = (size_t)get_fixed(r, 4);
	}
	s->rec = get_bytes(r, s->len);
	return !r->bad;
}

/* Decode an item, copying everything into `arena` (LMDB memory is only
 * valid until the next write in the transaction). */
int
tend_item_decode(struct item *out, const void *data, size_t len,
    struct tend_arena *arena)
{
	struct rd r;

	if (!rd_start(&r, data, len) || !item_head(&r, out))
		return tend_error_set(TEND_EINVALID, "store: bad item record");
	out->key = tend_arena_memdup(arena, out->key, out->keylen);
	out->states = tend_arena_alloc(arena,
	    (out->nstates + 1) * sizeof *out->states);
	for (size_t i = 0; i < out->nstates; i++) {
		struct state *s = &out->states[i];

		if (!item_state(&r, s))
			return tend_error_set(TEND_EINVALID,
			    "store: bad item record");
		s->rec = tend_arena_memdup(arena, s->rec, s->len);
	}
	if (r.pos != len)
		return tend_error_set(TEND_EINVALID, "store: bad item record");
	return 0;
}

int
tend_item_peek(const void *data, size_t len, bool *container,
    size_t *nstates, bool *first_deleted)
{
	struct rd r;
	struct item it;
	struct state s = {0};

	if (!rd_start(&r, data, len) || !item_head(&r, &it) ||
	    (it.nstates && !item_state(&r, &s)))
		return tend_error_set(TEND_EINVALID, "store: bad item record");
	*container = it.container;
	*nstates = it.nstates;
	*first_deleted = it.nstates && s.deleted;
	return 0;
}

/* ---- COMP: cid -> the component's header ----
 *
 * layout 1: 1, version (8), token (16, zeros if none), flags (1),
 *   has_parent (1), parent (16, zeros if none), processor's length (4)
 *   and bytes, path's length (4) and bytes.
 * layout 2: 2, flags (1: the low six bits, then HDR_TOKEN and
 *   HDR_PARENT), version, [token (16)], [parent (16)], processor's length
 *   and bytes, path's length and bytes; numbers in varints; then, if the
 *   component is memoised, its memo (layout 2, below): one row read and
 *   written for both.
 */
#define HDR_TOKEN 0x40
#define HDR_PARENT 0x80

void
tend_hdr_encode(struct tend_buf *b, const struct hdr_row *h, bool compact)
{
	static const uint8_t zero[16];

	if (compact) {
		tend_buf_putc(b, ROW_COMPACT);
		tend_buf_putc(b, (h->flags & 0x3f) | (h->token ? HDR_TOKEN : 0) |
			(h->has_parent ? HDR_PARENT : 0));
		tend_varint_put(b, h->version);
		if (h->token)
			tend_buf_put(b, h->token, 16);
		if (h->has_parent)
			tend_buf_put(b, h->parent, 16);
	} else {
		tend_buf_putc(b, ROW_FIXED);
		put_fixed(b, h->version, 8);
		tend_buf_put(b, h->token ? h->token : zero, 16);
		tend_buf_putc(b, h->flags);
		tend_buf_putc(b, h->has_parent ? 1 : 0);
		tend_buf_put(b, h->has_parent ? h->parent : zero, 16);
	}
	put_num(b, compact, h->proclen, 4);
	tend_buf_put(b, h->proc, h->proclen);
	put_num(b, compact, h->pathlen, 4);
	tend_buf_put(b, h->path, h->pathlen);
	if (compact && h->memolen)
		tend_buf_put(b, h->memo, h->memolen);
}

int
tend_hdr_parse(struct hdr_row *h, const void *data, size_t len)
{
	static const uint8_t zero[16];
	struct rd r;
	const uint8_t *p;

	memset(h, 0, sizeof *h);
	if (!rd_start(&r, data, len))
		return -1;
	if (r.compact) {
		uint8_t f = (p = get_bytes(&r, 1)) ? p[0] : 0;

		h->flags = f & 0x3f;
		h->version = get_num(&r, 8);
		if (f & HDR_TOKEN)
			h->token = get_bytes(&r, 16);
		if ((h->has_parent = f & HDR_PARENT))
			h->parent = get_bytes(&r, 16);
	} else {
		h->version = get_fixed(&r, 8);
		if ((p = get_bytes(&r, 16)) && memcmp(p, zero, 16) != 0)
			h->token = p;
		h->flags = (p = get_bytes(&r, 1)) ? p[0] : 0;
		h->has_parent = (p = get_bytes(&r, 1)) && p[0] == 1;
		h->parent = get_bytes(&r, 16);
	}
	uint64_t n = get_num(&r, 4);
	if (r.bad || n > len)
		return -1;
	h->proclen = (size_t)n;
	h->proc = get_bytes(&r, h->proclen);
	n = get_num(&r, 4);
	if (r.bad || n > len)
		return -1;
	h->pathlen = (size_t)n;
	h->path = get_bytes(&r, h->pathlen);
	if (r.bad)
		return -1;
	/* layout 2: the component's memo may follow (a store of format 3
	 * keeps it here, not in a MEMO row of its own) */
	if (r.pos != len && (!r.compact || (r.p[r.pos] != ROW_COMPACT &&
					       r.p[r.pos] != MEMO_SHARED)))
		return -1;
	h->memo = r.pos != len ? r.p + r.pos : NULL;
	h->memolen = len - r.pos;
	return 0;
}

/* ---- MEMO: cid -> the component's memo ----
 *
 * layout 1: 1, input fp (16), logic fp (16), ndeps (4), then each
 *   dependency: provider id (16), gen_id (8), gen_schema (8).
 * layout 2: the same with ndeps, gen_id and gen_schema in varints.
 */

/* a memo's context: logic fp, ndeps, each dependency */
static void
ctx_put(struct tend_buf *b, const struct tend_fp *logic, const struct dep *deps,
    size_t n, bool compact)
{
	tend_buf_put(b, logic->b, 16);
	put_num(b, compact, n, 4);
	for (size_t i = 0; i < n; i++) {
		tend_buf_put(b, deps[i].id.b, 16);
		put_num(b, compact, deps[i].gen_id, 8);
		put_num(b, compact, deps[i].gen_schema, 8);
	}
}

/* m's context from r (the rest of the row): every dependency whole, and
 * nothing after them */
static int
ctx_read(struct rd *r, struct memo_row *m)
{
	m->logic = get_bytes(r, 16);
	uint64_t n = get_num(r, 4);
	if (r->bad || n > r->len)
		return -1;
	m->ndeps = (size_t)n;
	m->compact = r->compact;
	m->deps = r->p + r->pos;
	m->depslen = r->len - r->pos;
	struct dep d;
	size_t at = 0;
	for (size_t i = 0; i < m->ndeps; i++)
		if (!tend_memo_dep_next(m, &at, &d))
			return -1;
	return at == m->depslen ? 0 : -1;
}

void
tend_memo_encode(struct tend_buf *b, const struct tend_fp *input,
    const struct tend_fp *logic, const struct dep *deps, size_t n,
    bool compact)
{
	tend_buf_putc(b, compact ? ROW_COMPACT : ROW_FIXED);
	tend_buf_put(b, input->b, 16);
	ctx_put(b, logic, deps, n, compact);
}

/*
 * layout 3 (format 3, in the COMP row): 3, input fp (16), the id (8) of
 * the memo's context: its logic fp and dependencies, the same for most
 * components of an app, kept once in META under "mctx/" and the id (the
 * first 8 bytes of their XXH3-128: an id names one content for good, so
 * a cache of them never goes stale). tend_memo_parse leaves m->ctx set
 * and the logic and dependencies to tend_memo_ctx_parse.
 */
void
tend_memo_ctx_encode(struct tend_buf *b, const struct tend_fp *logic,
    const struct dep *deps, size_t n)
{
	ctx_put(b, logic, deps, n, true);
}

void
tend_memo_shared_encode(struct tend_buf *b, const struct tend_fp *input,
    const uint8_t ctx[8])
{
	tend_buf_putc(b, MEMO_SHARED);
	tend_buf_put(b, input->b, 16);
	tend_buf_put(b, ctx, 8);
}

/* the logic and dependencies of m (m->ctx's) from the context's bytes */
int
tend_memo_ctx_parse(struct memo_row *m, const void *data, size_t len)
{
	struct rd r = {data, len, 0, true, false};

	return ctx_read(&r, m);
}

int
tend_memo_parse(struct memo_row *m, const void *data, size_t len)
{
	struct rd r;

	memset(m, 0, sizeof *m);
	if (len == 25 && ((const uint8_t *)data)[0] == MEMO_SHARED) {
		m->input = (const uint8_t *)data + 1;
		m->ctx = (const uint8_t *)data + 17;
		return 0;
	}
	if (!rd_start(&r, data, len))
		return -1;
	m->input = get_bytes(&r, 16);
	return ctx_read(&r, m);
}

bool
tend_memo_dep_next(const struct memo_row *m, size_t *at, struct dep *out)
{
	struct rd r = {m->deps, m->depslen, *at, m->compact, false};
	const uint8_t *id = get_bytes(&r, 16);

	if (!id)
		return false;
	memcpy(out->id.b, id, 16);
	out->gen_id = get_num(&r, 8);
	out->gen_schema = get_num(&r, 8);
	*at = r.pos;
	return !r.bad;
}
