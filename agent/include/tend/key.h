/*
 * tend/key.h - stable keys: the identities of target states and components.
 *
 * A stable key is none, bool, int64, string, bytes, uuid, symbol or a tuple
 * of stable keys. A symbol is a namespaced name ("@tend/files") that never
 * equals a string of the same text.
 *
 * Keys have a canonical, order-preserving binary encoding (the storekey
 * scheme): memcmp() of two encodings orders them as tend_key_compare()
 * orders the keys, and an encoded tuple prefix is a byte prefix of the
 * encodings of the tuples that extend it, so range scans work.
 *
 *   tag 2 none | 3 symbol | 4 bool | 5 int | 6 string | 7 bytes | 8 uuid
 *   | 9 tuple
 *   strings, bytes, symbols: bytes <= 0x01 escaped by a 0x01, then 0x00
 *   int: 8 bytes big-endian with the sign bit flipped
 *   tuple: the elements in turn, then 0x00
 *
 * Keys are plain values. Pointers inside a key are borrowed: the caller keeps
 * the string bytes and tuple arrays alive while the key is in use.
 */
#ifndef TEND_KEY_H
#define TEND_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tend_arena;
struct tend_buf;

enum tend_key_kind {
	TEND_KEY_NONE = 2,
	TEND_KEY_SYMBOL = 3,
	TEND_KEY_BOOL = 4,
	TEND_KEY_INT = 5,
	TEND_KEY_STR = 6,
	TEND_KEY_BYTES = 7,
	TEND_KEY_UUID = 8,
	TEND_KEY_TUPLE = 9,
};

struct tend_key {
	enum tend_key_kind kind;
	union {
		bool b;
		int64_t i;
		struct {
			const char *ptr; /* STR, SYMBOL, BYTES; not NUL-bounded */
			size_t len;
		} s;
		uint8_t uuid[16];
		struct {
			const struct tend_key *items;
			size_t n;
		} tuple;
	} u;
};

static inline struct tend_key
tend_key_none(void)
{
	struct tend_key k = {TEND_KEY_NONE, {false}};

	return k;
}

static inline struct tend_key
tend_key_bool(bool b)
{
	struct tend_key k = {TEND_KEY_BOOL, {false}};

	k.u.b = b;
	return k;
}

static inline struct tend_key
tend_key_int(int64_t i)
{
	struct tend_key k = {TEND_KEY_INT, {false}};

	k.u.i = i;
	return k;
}

/* A string key over `len` bytes of `p` (borrowed). */
static inline struct tend_key
tend_key_strn(const char *p, size_t len)
{
	struct tend_key k = {TEND_KEY_STR, {false}};

	k.u.s.ptr = p;
	k.u.s.len = len;
	return k;
}

struct tend_key tend_key_str(const char *s);
struct tend_key tend_key_symbol(const char *s);
struct tend_key tend_key_bytes(const void *p, size_t len);
struct tend_key tend_key_uuid(const uint8_t uuid[16]);
/* A tuple over `n` keys of `items` (borrowed). */
struct tend_key tend_key_tuple(const struct tend_key *items, size_t n);

/* Append the canonical encoding of `k` to `out`. */
void tend_key_encode(struct tend_buf *out, const struct tend_key *k);

/*
 * Decode one key from `data`; strings and tuples are allocated in `arena`.
 * On success *consumed (if not NULL) is the number of bytes read.
 * Returns 0, or TEND_EINVALID for malformed input (never reads past len).
 */
int tend_key_decode(struct tend_key *out, const void *data, size_t len,
    size_t *consumed, struct tend_arena *arena);

/* Total order: by kind (in tag order), then by value; tuples and strings
 * lexicographically, a prefix first. Returns <0, 0, >0. */
int tend_key_compare(const struct tend_key *a, const struct tend_key *b);

bool tend_key_equal(const struct tend_key *a, const struct tend_key *b);

/*
 * Append a readable form: none, true, 42, "text" (C-escaped), b"\x00",
 * uuid:..., @symbol, (a, b).
 */
void tend_key_format(struct tend_buf *out, const struct tend_key *k);

#ifdef __cplusplus
}
#endif

#endif
