/*
 * tend/buf.h - a growable byte buffer (git's strbuf invariants).
 *
 * TEND_BUF_INIT is a valid empty buffer; `ptr` is never NULL and always
 * NUL-terminated, so a buffer holding text can be printed directly.
 * Out of memory aborts.
 */
#ifndef TEND_BUF_H
#define TEND_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tend_buf {
	char *ptr;   /* never NULL; ptr[len] == '\0' */
	size_t len;  /* bytes in use */
	size_t size; /* capacity; 0 while ptr points at the shared empty string */
};

extern char tend_buf__empty[];
#define TEND_BUF_INIT {tend_buf__empty, 0, 0}

void tend_buf_grow(struct tend_buf *b, size_t extra);
void tend_buf_put(struct tend_buf *b, const void *data, size_t len);
void tend_buf_putc(struct tend_buf *b, int c);
void tend_buf_puts(struct tend_buf *b, const char *s);
void tend_buf_printf(struct tend_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void tend_buf_vprintf(struct tend_buf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* Append `s` as a JSON string literal (quoted, escaped). Always valid
 * UTF-8: a byte that is not part of a UTF-8 character is written as the
 * four characters \xNN (JSON "\\xNN"). */
void tend_buf_json(struct tend_buf *b, const char *s);
/* The length of the UTF-8 character at `s` (of at most `n` bytes): 1-4,
 * or 0 if the bytes there are not one (a stray continuation byte, an
 * overlong form, a surrogate, past U+10FFFF, cut short). */
size_t tend_utf8_len(const void *s, size_t n);
/* Append `len` bytes as lowercase hex. */
void tend_buf_puthex(struct tend_buf *b, const void *data, size_t len);
/* Append what `fd` reads until its end, or until more than `max` bytes
 * are in the buffer. 0, or -1 with errno on a read error. */
int tend_buf_read_fd(struct tend_buf *b, int fd, size_t max);
/* Drop the first `n` bytes (all of them if fewer). */
void tend_buf_consume(struct tend_buf *b, size_t n);
/* Write to the non-blocking `fd` as much as it takes, dropping what was
 * written: 0 when all is written or fd would block, -1 when fd failed
 * or is closed. */
int tend_buf_write_fd(struct tend_buf *b, int fd);
/* Empty the buffer, keeping its memory. */
void tend_buf_reset(struct tend_buf *b);
/* Free the memory; the buffer is TEND_BUF_INIT again. */
void tend_buf_release(struct tend_buf *b);
/* Take the memory (caller frees with free()); the buffer is reset. */
char *tend_buf_detach(struct tend_buf *b, size_t *len_out);

/* Abort-on-OOM allocators. */
void *tend_xmalloc(size_t n);
void *tend_xcalloc(size_t n, size_t size);
void *tend_xrealloc(void *p, size_t n);
char *tend_xstrdup(const char *s);
void *tend_xmemdup(const void *p, size_t n);

#ifdef __cplusplus
}
#endif

#endif
