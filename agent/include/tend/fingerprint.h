/*
 * tend/fingerprint.h - XXH3-128 fingerprints of bytes, strings and
 * structured values.
 *
 * Every value is hashed with a type tag and its length, so the string "1",
 * the int 1, the symbol x and the string x all differ, and a sequence of
 * values cannot be confused with another sequence of the same bytes.
 */
#ifndef TEND_FINGERPRINT_H
#define TEND_FINGERPRINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tend_key;
struct tend_buf;

struct tend_fp {
	uint8_t b[16]; /* canonical (big-endian) XXH3-128 */
};

/* Alignment in C11 and C++11 alike (and in older GNU C) */
#if defined(__cplusplus) && __cplusplus >= 201103L
#define TEND_ALIGNAS(n) alignas(n)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define TEND_ALIGNAS(n) _Alignas(n)
#else
#define TEND_ALIGNAS(n) __attribute__((aligned(n)))
#endif

/* A streaming hasher; the state is opaque, but lives where the caller puts
 * it (no allocation). */
struct tend_hasher {
	TEND_ALIGNAS(64) unsigned char opaque[640];
};

void tend_hasher_init(struct tend_hasher *h);
void tend_hasher_bytes(struct tend_hasher *h, const void *p, size_t len);
void tend_hasher_str(struct tend_hasher *h, const char *s);
void tend_hasher_int(struct tend_hasher *h, int64_t v);
void tend_hasher_bool(struct tend_hasher *h, bool v);
void tend_hasher_key(struct tend_hasher *h, const struct tend_key *k);
void tend_hasher_fp(struct tend_hasher *h, const struct tend_fp *fp);
/* Raw bytes without tag or length: for streaming one large value after
 * tend_hasher_begin_stream(), which tags it. */
void tend_hasher_begin_stream(struct tend_hasher *h);
void tend_hasher_raw(struct tend_hasher *h, const void *p, size_t len);
struct tend_fp tend_hasher_final(const struct tend_hasher *h);

/* One-shot helpers, each equal to the hasher fed the one value. */
struct tend_fp tend_fp_bytes(const void *p, size_t len);
struct tend_fp tend_fp_str(const char *s);
struct tend_fp tend_fp_key(const struct tend_key *k);
/* The fingerprint of a file's content as the walk and the connectors
 * take it: its bytes streamed (tend_hasher_begin_stream, then raw). */
struct tend_fp tend_fp_content(const void *p, size_t len);

/* Fold `b` into `a`: the fingerprint of the pair (a, b). */
struct tend_fp tend_fp_combine(const struct tend_fp *a,
    const struct tend_fp *b);

bool tend_fp_equal(const struct tend_fp *a, const struct tend_fp *b);
bool tend_fp_is_zero(const struct tend_fp *a);
/* Append 32 lowercase hex digits. */
void tend_fp_hex(struct tend_buf *out, const struct tend_fp *fp);

#ifdef __cplusplus
}
#endif

#endif
