/*
 * test_key.c - stable keys and fingerprints: round trips, ordering of the
 * encoding, type tags. Property tests over random keys.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tend/arena.h"
#include "tend/buf.h"
#include "tend/fingerprint.h"
#include "tend/key.h"
#include "tend/status.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t
rnd(void)
{
	/* xorshift64*: deterministic, seeded per test */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1Du;
}

static struct tend_key
random_key(struct tend_arena *a, int depth)
{
	static const enum tend_key_kind kinds[] = {TEND_KEY_NONE,
	    TEND_KEY_SYMBOL, TEND_KEY_BOOL, TEND_KEY_INT, TEND_KEY_STR,
	    TEND_KEY_BYTES, TEND_KEY_UUID, TEND_KEY_TUPLE};
	enum tend_key_kind kind = kinds[rnd() % (depth > 2 ? 7 : 8)];
	struct tend_key k = {.kind = kind};

	switch (kind) {
	case TEND_KEY_NONE:
		break;
	case TEND_KEY_BOOL:
		k.u.b = rnd() & 1;
		break;
	case TEND_KEY_INT: {
		static const int64_t edge[] = {0, -1, 1, INT64_MIN, INT64_MAX,
		    255, 256, -256};
		k.u.i = rnd() % 4 ? (int64_t)(rnd() % 7) - 3 : edge[rnd() % 8];
		if (rnd() % 3 == 0)
			k.u.i = (int64_t)rnd();
		break;
	}
	case TEND_KEY_SYMBOL:
	case TEND_KEY_STR:
	case TEND_KEY_BYTES: {
		size_t len = rnd() % 5;
		char *p = tend_arena_alloc(a, len + 1);
		/* small alphabet with the escaped bytes 0 and 1 */
		static const char alpha[] = {0, 1, 2, 'a', 'b', (char)0xff};

		for (size_t i = 0; i < len; i++)
			p[i] = alpha[rnd() % sizeof alpha];
		k.u.s.ptr = p;
		k.u.s.len = len;
		break;
	}
	case TEND_KEY_UUID:
		for (int i = 0; i < 16; i++)
			k.u.uuid[i] = (uint8_t)(rnd() % 3);
		break;
	case TEND_KEY_TUPLE: {
		size_t n = rnd() % 4;
		struct tend_key *items = tend_arena_alloc(a,
		    (n + 1) * sizeof *items);

		for (size_t i = 0; i < n; i++)
			items[i] = random_key(a, depth + 1);
		k.u.tuple.items = items;
		k.u.tuple.n = n;
		break;
	}
	}
	return k;
}

static int
sign(int x)
{
	return x < 0 ? -1 : x > 0;
}

static int
memcmp_len(const struct tend_buf *a, const struct tend_buf *b)
{
	size_t n = a->len < b->len ? a->len : b->len;
	int c = memcmp(a->ptr, b->ptr, n);

	if (c)
		return c;
	return a->len < b->len ? -1 : a->len > b->len;
}

static void
round_trip_random_keys(void **state)
{
	struct tend_arena a = TEND_ARENA_INIT;

	(void)state;
	for (int i = 0; i < 20000; i++) {
		struct tend_key k = random_key(&a, 0), back;
		struct tend_buf enc = TEND_BUF_INIT, enc2 = TEND_BUF_INIT;
		size_t used = 0;

		tend_key_encode(&enc, &k);
		assert_int_equal(tend_key_decode(&back, enc.ptr, enc.len, &used,
				     &a), 0);
		assert_int_equal(used, enc.len);
		assert_true(tend_key_equal(&k, &back));
		tend_key_encode(&enc2, &back);
		assert_int_equal(enc.len, enc2.len);
		assert_memory_equal(enc.ptr, enc2.ptr, enc.len);
		tend_buf_release(&enc);
		tend_buf_release(&enc2);
		if (i % 1000 == 999)
			tend_arena_finish(&a);
	}
	tend_arena_finish(&a);
}

static void
encoding_order_equals_key_order(void **state)
{
	struct tend_arena a = TEND_ARENA_INIT;

	(void)state;
	for (int i = 0; i < 50000; i++) {
		struct tend_key x = random_key(&a, 0), y = random_key(&a, 0);
		struct tend_buf ex = TEND_BUF_INIT, ey = TEND_BUF_INIT;

		tend_key_encode(&ex, &x);
		tend_key_encode(&ey, &y);
		assert_int_equal(sign(memcmp_len(&ex, &ey)),
		    sign(tend_key_compare(&x, &y)));
		assert_int_equal(sign(tend_key_compare(&x, &y)),
		    -sign(tend_key_compare(&y, &x)));
		tend_buf_release(&ex);
		tend_buf_release(&ey);
		if (i % 1000 == 999)
			tend_arena_finish(&a);
	}
	tend_arena_finish(&a);
}

static void
tuple_prefix_is_byte_prefix(void **state)
{
	struct tend_arena a = TEND_ARENA_INIT;

	(void)state;
	for (int i = 0; i < 5000; i++) {
		struct tend_key items[4];
		size_t n = 1 + rnd() % 4;

		for (size_t j = 0; j < n; j++)
			items[j] = random_key(&a, 1);
		struct tend_key whole = tend_key_tuple(items, n);
		struct tend_key part = tend_key_tuple(items, n - 1);
		struct tend_buf ew = TEND_BUF_INIT, ep = TEND_BUF_INIT;

		tend_key_encode(&ew, &whole);
		tend_key_encode(&ep, &part);
		/* the shorter tuple without its terminator prefixes the
		 * longer one, and sorts first */
		assert_true(ep.len - 1 <= ew.len);
		assert_memory_equal(ep.ptr, ew.ptr, ep.len - 1);
		assert_true(memcmp_len(&ep, &ew) < 0);
		tend_buf_release(&ew);
		tend_buf_release(&ep);
	}
	tend_arena_finish(&a);
}

static void
decode_rejects_malformed_input(void **state)
{
	struct tend_arena a = TEND_ARENA_INIT;
	struct tend_key k;
	static const struct {
		const char *data;
		size_t len;
	} bad[] = {
		{"", 0},
		{"\x06" "abc", 4},	  /* unterminated string */
		{"\x06" "a\x01\x05\x00", 5}, /* bad escape */
		{"\x05\x00\x00", 3},      /* short int */
		{"\x04\x07", 2},	  /* bad bool */
		{"\x09\x06" "a\x00", 4},  /* unterminated tuple */
		{"\x0b", 1},		  /* unknown tag */
		{"\x08\x01\x02", 3},      /* short uuid */
	};

	(void)state;
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		assert_int_equal(tend_key_decode(&k, bad[i].data, bad[i].len,
				     NULL, &a),
		    TEND_EINVALID);
	/* deep nesting is refused, not a stack overflow */
	char deep[200];
	memset(deep, 9, sizeof deep);
	assert_int_equal(tend_key_decode(&k, deep, sizeof deep, NULL, &a),
	    TEND_EINVALID);
	tend_arena_finish(&a);
}

static void
key_format_is_readable(void **state)
{
	struct tend_key items[3] = {tend_key_symbol("tend/dir"),
	    tend_key_str("a \"b\"\n"), tend_key_int(-7)};
	struct tend_key t = tend_key_tuple(items, 3);
	struct tend_buf b = TEND_BUF_INIT;

	(void)state;
	tend_key_format(&b, &t);
	assert_string_equal(b.ptr, "(@tend/dir, \"a \\\"b\\\"\\n\", -7)");
	tend_buf_release(&b);
}

static void
fingerprints_are_type_tagged(void **state)
{
	struct tend_key s1 = tend_key_str("1"), i1 = tend_key_int(1);
	struct tend_key sx = tend_key_str("x"), yx = tend_key_symbol("x");
	struct tend_key bx = tend_key_bytes("x", 1);
	struct tend_fp a = tend_fp_key(&s1), b = tend_fp_key(&i1);

	(void)state;
	assert_false(tend_fp_equal(&a, &b));
	a = tend_fp_key(&sx);
	b = tend_fp_key(&yx);
	assert_false(tend_fp_equal(&a, &b));
	b = tend_fp_key(&bx);
	assert_false(tend_fp_equal(&a, &b));
	/* a string fingerprint differs from the bytes of the same text */
	a = tend_fp_str("x");
	b = tend_fp_bytes("x", 1);
	assert_false(tend_fp_equal(&a, &b));
	/* sequences are length-delimited: ("ab","c") != ("a","bc") */
	struct tend_hasher h1, h2;
	tend_hasher_init(&h1);
	tend_hasher_str(&h1, "ab");
	tend_hasher_str(&h1, "c");
	tend_hasher_init(&h2);
	tend_hasher_str(&h2, "a");
	tend_hasher_str(&h2, "bc");
	a = tend_hasher_final(&h1);
	b = tend_hasher_final(&h2);
	assert_false(tend_fp_equal(&a, &b));
	/* deterministic, and equal to the one-shot helper */
	tend_hasher_init(&h1);
	tend_hasher_bytes(&h1, "hello", 5);
	a = tend_hasher_final(&h1);
	b = tend_fp_bytes("hello", 5);
	assert_true(tend_fp_equal(&a, &b));
	struct tend_buf hex = TEND_BUF_INIT;
	tend_fp_hex(&hex, &a);
	assert_int_equal(hex.len, 32);
	tend_buf_release(&hex);
}

static void
streamed_fingerprint_is_chunking_independent(void **state)
{
	char data[10000];
	struct tend_hasher h1, h2;

	(void)state;
	for (size_t i = 0; i < sizeof data; i++)
		data[i] = (char)(rnd() & 0xff);
	tend_hasher_init(&h1);
	tend_hasher_begin_stream(&h1);
	tend_hasher_raw(&h1, data, sizeof data);
	tend_hasher_init(&h2);
	tend_hasher_begin_stream(&h2);
	for (size_t off = 0; off < sizeof data; off += 333)
		tend_hasher_raw(&h2, data + off,
		    sizeof data - off < 333 ? sizeof data - off : 333);
	struct tend_fp a = tend_hasher_final(&h1), b = tend_hasher_final(&h2);
	assert_true(tend_fp_equal(&a, &b));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_trip_random_keys),
		cmocka_unit_test(encoding_order_equals_key_order),
		cmocka_unit_test(tuple_prefix_is_byte_prefix),
		cmocka_unit_test(decode_rejects_malformed_input),
		cmocka_unit_test(key_format_is_readable),
		cmocka_unit_test(fingerprints_are_type_tagged),
		cmocka_unit_test(streamed_fingerprint_is_chunking_independent),
	};

	return cmocka_run_group_tests_name("key", tests, NULL, NULL);
}
