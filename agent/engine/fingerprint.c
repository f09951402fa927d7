/*
 * fingerprint.c - type-tagged XXH3-128 fingerprints.
 *
 * Each value fed to a hasher is preceded by a one-byte type tag and, for
 * variable-length values, its length, so that ("ab", "c") and ("a", "bc")
 * differ and the string "1" differs from the int 1. Keys are hashed through
 * their canonical encoding, which is type-tagged already.
 */
#include "tend/fingerprint.h"

#include <assert.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on our stack */
#include <xxhash.h>

#include "tend/buf.h"
#include "tend/key.h"

_Static_assert(sizeof(XXH3_state_t) <= sizeof(((struct tend_hasher *)0)->opaque),
    "tend_hasher too small for XXH3_state_t");
_Static_assert(_Alignof(XXH3_state_t) <= 64, "XXH3 state alignment");

enum { TAG_BYTES = 'B', TAG_STR = 'S', TAG_INT = 'I', TAG_BOOL = 'T',
	TAG_KEY = 'K', TAG_FP = 'F', TAG_STREAM = 'R' };

static XXH3_state_t *
state(struct tend_hasher *h)
{
	return (XXH3_state_t *)(void *)h->opaque;
}

void
tend_hasher_init(struct tend_hasher *h)
{
	XXH3_INITSTATE(state(h));
	XXH3_128bits_reset(state(h));
}

static void
put_tag_len(struct tend_hasher *h, unsigned char tag, uint64_t len)
{
	unsigned char hdr[9];

	hdr[0] = tag;
	for (int i = 0; i < 8; i++)
		hdr[1 + i] = (unsigned char)(len >> (56 - 8 * i));
	XXH3_128bits_update(state(h), hdr, sizeof hdr);
}

void
tend_hasher_bytes(struct tend_hasher *h, const void *p, size_t len)
{
	put_tag_len(h, TAG_BYTES, len);
	XXH3_128bits_update(state(h), p, len);
}

void
tend_hasher_str(struct tend_hasher *h, const char *s)
{
	size_t len = strlen(s);

	put_tag_len(h, TAG_STR, len);
	XXH3_128bits_update(state(h), s, len);
}

void
tend_hasher_int(struct tend_hasher *h, int64_t v)
{
	put_tag_len(h, TAG_INT, (uint64_t)v);
}

void
tend_hasher_bool(struct tend_hasher *h, bool v)
{
	put_tag_len(h, TAG_BOOL, v ? 1 : 0);
}

void
tend_hasher_key(struct tend_hasher *h, const struct tend_key *k)
{
	struct tend_buf b = TEND_BUF_INIT;

	tend_key_encode(&b, k);
	put_tag_len(h, TAG_KEY, b.len);
	XXH3_128bits_update(state(h), b.ptr, b.len);
	tend_buf_release(&b);
}

void
tend_hasher_fp(struct tend_hasher *h, const struct tend_fp *fp)
{
	put_tag_len(h, TAG_FP, 16);
	XXH3_128bits_update(state(h), fp->b, 16);
}

void
tend_hasher_begin_stream(struct tend_hasher *h)
{
	put_tag_len(h, TAG_STREAM, 0);
}

void
tend_hasher_raw(struct tend_hasher *h, const void *p, size_t len)
{
	XXH3_128bits_update(state(h), p, len);
}

struct tend_fp
tend_hasher_final(const struct tend_hasher *h)
{
	XXH128_canonical_t c;
	struct tend_fp fp;

	XXH128_canonicalFromHash(&c,
	    XXH3_128bits_digest((const XXH3_state_t *)(const void *)h->opaque));
	memcpy(fp.b, c.digest, 16);
	return fp;
}

struct tend_fp
tend_fp_content(const void *p, size_t len)
{
	struct tend_hasher h;

	tend_hasher_init(&h);
	tend_hasher_begin_stream(&h);
	tend_hasher_raw(&h, p, len);
	return tend_hasher_final(&h);
}

struct tend_fp
tend_fp_bytes(const void *p, size_t len)
{
	struct tend_hasher h;

	tend_hasher_init(&h);
	tend_hasher_bytes(&h, p, len);
	return tend_hasher_final(&h);
}

struct tend_fp
tend_fp_str(const char *s)
{
	struct tend_hasher h;

	tend_hasher_init(&h);
	tend_hasher_str(&h, s);
	return tend_hasher_final(&h);
}

struct tend_fp
tend_fp_key(const struct tend_key *k)
{
	struct tend_hasher h;

	tend_hasher_init(&h);
	tend_hasher_key(&h, k);
	return tend_hasher_final(&h);
}

struct tend_fp
tend_fp_combine(const struct tend_fp *a, const struct tend_fp *b)
{
	unsigned char both[32];
	XXH128_canonical_t c;
	struct tend_fp fp;

	/* hot path (one per declared target state): no hasher state */
	memcpy(both, a->b, 16);
	memcpy(both + 16, b->b, 16);
	XXH128_canonicalFromHash(&c, XXH3_128bits(both, sizeof both));
	memcpy(fp.b, c.digest, 16);
	return fp;
}

bool
tend_fp_equal(const struct tend_fp *a, const struct tend_fp *b)
{
	return memcmp(a->b, b->b, 16) == 0;
}

bool
tend_fp_is_zero(const struct tend_fp *a)
{
	static const struct tend_fp zero;

	return tend_fp_equal(a, &zero);
}

void
tend_fp_hex(struct tend_buf *out, const struct tend_fp *fp)
{
	tend_buf_puthex(out, fp->b, 16);
}
