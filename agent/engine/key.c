/*
 * key.c - stable keys: canonical order-preserving encoding, decoding,
 * comparison and a readable form.
 *
 * The encoding is the storekey scheme (see tend/key.h). Its two properties
 * are what the store relies on: memcmp order equals key order, and a tuple
 * encoding without its terminator is a byte prefix of every longer tuple
 * that starts with the same elements.
 */
#include "tend/key.h"

#include <string.h>

#include "tend/arena.h"
#include "tend/buf.h"
#include "tend/status.h"

struct tend_key
tend_key_str(const char *s)
{
	return tend_key_strn(s, strlen(s));
}

struct tend_key
tend_key_symbol(const char *s)
{
	struct tend_key k = {.kind = TEND_KEY_SYMBOL};

	k.u.s.ptr = s;
	k.u.s.len = strlen(s);
	return k;
}

struct tend_key
tend_key_bytes(const void *p, size_t len)
{
	struct tend_key k = {.kind = TEND_KEY_BYTES};

	k.u.s.ptr = p;
	k.u.s.len = len;
	return k;
}

struct tend_key
tend_key_uuid(const uint8_t uuid[16])
{
	struct tend_key k = {.kind = TEND_KEY_UUID};

	memcpy(k.u.uuid, uuid, 16);
	return k;
}

struct tend_key
tend_key_tuple(const struct tend_key *items, size_t n)
{
	struct tend_key k = {.kind = TEND_KEY_TUPLE};

	k.u.tuple.items = items;
	k.u.tuple.n = n;
	return k;
}

static void
put_escaped(struct tend_buf *out, const char *p, size_t len)
{
	size_t start = 0;

	tend_buf_grow(out, len + 1);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)p[i];

		if (c <= 1) {
			tend_buf_put(out, p + start, i - start);
			tend_buf_putc(out, 1);
			tend_buf_putc(out, c);
			start = i + 1;
		}
	}
	tend_buf_put(out, p + start, len - start);
	tend_buf_putc(out, 0);
}

void
tend_key_encode(struct tend_buf *out, const struct tend_key *k)
{
	tend_buf_putc(out, (int)k->kind);
	switch (k->kind) {
	case TEND_KEY_NONE:
		break;
	case TEND_KEY_BOOL:
		tend_buf_putc(out, k->u.b ? 1 : 0);
		break;
	case TEND_KEY_INT: {
		uint64_t v = (uint64_t)k->u.i ^ (UINT64_C(1) << 63);
		unsigned char be[8];

		for (int i = 7; i >= 0; i--) {
			be[i] = (unsigned char)(v & 0xff);
			v >>= 8;
		}
		tend_buf_put(out, be, 8);
		break;
	}
	case TEND_KEY_STR:
	case TEND_KEY_SYMBOL:
	case TEND_KEY_BYTES:
		put_escaped(out, k->u.s.ptr, k->u.s.len);
		break;
	case TEND_KEY_UUID:
		tend_buf_put(out, k->u.uuid, 16);
		break;
	case TEND_KEY_TUPLE:
		for (size_t i = 0; i < k->u.tuple.n; i++)
			tend_key_encode(out, &k->u.tuple.items[i]);
		tend_buf_putc(out, 0);
		break;
	}
}

#define MAX_DEPTH 64

static int
decode_at(struct tend_key *out, const unsigned char *p, size_t len,
    size_t *pos, struct tend_arena *arena, int depth)
{
	if (depth > MAX_DEPTH)
		return tend_error_set(TEND_EINVALID, "key: nested too deep");
	if (*pos >= len)
		return tend_error_set(TEND_EINVALID, "key: truncated");
	memset(out, 0, sizeof *out);
	unsigned char tag = p[(*pos)++];

	switch (tag) {
	case TEND_KEY_NONE:
		out->kind = TEND_KEY_NONE;
		return 0;
	case TEND_KEY_BOOL:
		if (*pos >= len || p[*pos] > 1)
			return tend_error_set(TEND_EINVALID, "key: bad bool");
		out->kind = TEND_KEY_BOOL;
		out->u.b = p[(*pos)++] == 1;
		return 0;
	case TEND_KEY_INT: {
		uint64_t v = 0;

		if (len - *pos < 8)
			return tend_error_set(TEND_EINVALID, "key: short int");
		for (int i = 0; i < 8; i++)
			v = v << 8 | p[(*pos)++];
		out->kind = TEND_KEY_INT;
		out->u.i = (int64_t)(v ^ (UINT64_C(1) << 63));
		return 0;
	}
	case TEND_KEY_STR:
	case TEND_KEY_SYMBOL:
	case TEND_KEY_BYTES: {
		size_t n = 0, i = *pos;

		/* first pass: length and validation */
		for (;;) {
			if (i >= len)
				return tend_error_set(TEND_EINVALID,
				    "key: unterminated string");
			if (p[i] == 0)
				break;
			if (p[i] == 1) {
				if (i + 1 >= len || p[i + 1] > 1)
					return tend_error_set(TEND_EINVALID,
					    "key: bad escape");
				i++;
			}
			i++;
			n++;
		}
		char *s = tend_arena_alloc(arena, n + 1);

		n = 0;
		for (i = *pos; p[i] != 0; i++) {
			if (p[i] == 1)
				i++;
			s[n++] = (char)p[i];
		}
		s[n] = '\0';
		*pos = i + 1;
		out->kind = (enum tend_key_kind)tag;
		out->u.s.ptr = s;
		out->u.s.len = n;
		return 0;
	}
	case TEND_KEY_UUID:
		if (len - *pos < 16)
			return tend_error_set(TEND_EINVALID, "key: short uuid");
		out->kind = TEND_KEY_UUID;
		memcpy(out->u.uuid, p + *pos, 16);
		*pos += 16;
		return 0;
	case TEND_KEY_TUPLE: {
		size_t n = 0, cap = 0;
		struct tend_key *items = NULL;

		for (;;) {
			if (*pos >= len)
				return tend_error_set(TEND_EINVALID,
				    "key: unterminated tuple");
			if (p[*pos] == 0) {
				(*pos)++;
				break;
			}
			if (n == cap) {
				size_t ncap = cap ? cap * 2 : 4;
				struct tend_key *ni = tend_arena_alloc(arena,
				    ncap * sizeof *ni);

				if (n)
					memcpy(ni, items, n * sizeof *ni);
				items = ni;
				cap = ncap;
			}
			int rc = decode_at(&items[n], p, len, pos, arena,
			    depth + 1);
			if (rc)
				return rc;
			n++;
		}
		out->kind = TEND_KEY_TUPLE;
		out->u.tuple.items = items;
		out->u.tuple.n = n;
		return 0;
	}
	}
	return tend_error_set(TEND_EINVALID, "key: unknown tag %u", tag);
}

int
tend_key_decode(struct tend_key *out, const void *data, size_t len,
    size_t *consumed, struct tend_arena *arena)
{
	size_t pos = 0;
	int rc = decode_at(out, data, len, &pos, arena, 0);

	if (rc == 0 && consumed)
		*consumed = pos;
	return rc;
}

static int
cmp_bytes(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t n = alen < blen ? alen : blen;
	int c = n ? memcmp(a, b, n) : 0;

	if (c)
		return c < 0 ? -1 : 1;
	return alen < blen ? -1 : alen > blen;
}

int
tend_key_compare(const struct tend_key *a, const struct tend_key *b)
{
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	switch (a->kind) {
	case TEND_KEY_NONE:
		return 0;
	case TEND_KEY_BOOL:
		return (int)a->u.b - (int)b->u.b;
	case TEND_KEY_INT:
		return a->u.i < b->u.i ? -1 : a->u.i > b->u.i;
	case TEND_KEY_STR:
	case TEND_KEY_SYMBOL:
	case TEND_KEY_BYTES:
		return cmp_bytes(a->u.s.ptr, a->u.s.len, b->u.s.ptr,
		    b->u.s.len);
	case TEND_KEY_UUID: {
		int c = memcmp(a->u.uuid, b->u.uuid, 16);
		return c < 0 ? -1 : c > 0;
	}
	case TEND_KEY_TUPLE: {
		size_t n = a->u.tuple.n < b->u.tuple.n ? a->u.tuple.n
						       : b->u.tuple.n;
		for (size_t i = 0; i < n; i++) {
			int c = tend_key_compare(&a->u.tuple.items[i],
			    &b->u.tuple.items[i]);
			if (c)
				return c;
		}
		return a->u.tuple.n < b->u.tuple.n ? -1
						   : a->u.tuple.n > b->u.tuple.n;
	}
	}
	return 0;
}

bool
tend_key_equal(const struct tend_key *a, const struct tend_key *b)
{
	return tend_key_compare(a, b) == 0;
}

static void
format_chars(struct tend_buf *out, const char *p, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)p[i];

		if (c == '"' || c == '\\')
			tend_buf_printf(out, "\\%c", c);
		else if (c == '\n')
			tend_buf_puts(out, "\\n");
		else if (c == '\t')
			tend_buf_puts(out, "\\t");
		else if (c < 0x20 || c == 0x7f)
			tend_buf_printf(out, "\\x%02x", c);
		else
			tend_buf_putc(out, c);
	}
}

void
tend_key_format(struct tend_buf *out, const struct tend_key *k)
{
	switch (k->kind) {
	case TEND_KEY_NONE:
		tend_buf_puts(out, "none");
		break;
	case TEND_KEY_BOOL:
		tend_buf_puts(out, k->u.b ? "true" : "false");
		break;
	case TEND_KEY_INT:
		tend_buf_printf(out, "%lld", (long long)k->u.i);
		break;
	case TEND_KEY_SYMBOL:
		tend_buf_putc(out, '@');
		format_chars(out, k->u.s.ptr, k->u.s.len);
		break;
	case TEND_KEY_STR:
		tend_buf_putc(out, '"');
		format_chars(out, k->u.s.ptr, k->u.s.len);
		tend_buf_putc(out, '"');
		break;
	case TEND_KEY_BYTES:
		tend_buf_puts(out, "b\"");
		for (size_t i = 0; i < k->u.s.len; i++)
			tend_buf_printf(out, "\\x%02x",
			    (unsigned char)k->u.s.ptr[i]);
		tend_buf_putc(out, '"');
		break;
	case TEND_KEY_UUID:
		tend_buf_puts(out, "uuid:");
		tend_buf_puthex(out, k->u.uuid, 16);
		break;
	case TEND_KEY_TUPLE:
		tend_buf_putc(out, '(');
		for (size_t i = 0; i < k->u.tuple.n; i++) {
			if (i)
				tend_buf_puts(out, ", ");
			tend_key_format(out, &k->u.tuple.items[i]);
		}
		if (k->u.tuple.n == 1)
			tend_buf_putc(out, ',');
		tend_buf_putc(out, ')');
		break;
	}
}
