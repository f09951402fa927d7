/*
 * buf.c - growable byte buffers and the abort-on-OOM allocators.
 */
#include "tend/buf.h"
#include <errno.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char tend_buf__empty[1];

static void
oom(void)
{
	fputs("tend: out of memory\n", stderr);
	abort();
}

void *
tend_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		oom();
	return p;
}

void *
tend_xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (!p)
		oom();
	return p;
}

void *
tend_xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);

	if (!q)
		oom();
	return q;
}

char *
tend_xstrdup(const char *s)
{
	return tend_xmemdup(s, strlen(s) + 1);
}

void *
tend_xmemdup(const void *p, size_t n)
{
	void *q = tend_xmalloc(n);

	if (n)
		memcpy(q, p, n);
	return q;
}

void
tend_buf_grow(struct tend_buf *b, size_t extra)
{
	size_t need = b->len + extra + 1, nsize;

	if (need < b->len) /* overflow */
		oom();
	if (b->size >= need)
		return;
	nsize = b->size ? b->size : 64;
	while (nsize < need)
		nsize = nsize * 2 > nsize ? nsize * 2 : need;
	if (b->size == 0) {
		b->ptr = tend_xmalloc(nsize);
		b->ptr[0] = '\0';
	} else
		b->ptr = tend_xrealloc(b->ptr, nsize);
	b->size = nsize;
}

void
tend_buf_put(struct tend_buf *b, const void *data, size_t len)
{
	if (len == 0)
		return;
	tend_buf_grow(b, len);
	memcpy(b->ptr + b->len, data, len);
	b->len += len;
	b->ptr[b->len] = '\0';
}

void
tend_buf_putc(struct tend_buf *b, int c)
{
	tend_buf_grow(b, 1);
	b->ptr[b->len++] = (char)c;
	b->ptr[b->len] = '\0';
}

void
tend_buf_puts(struct tend_buf *b, const char *s)
{
	tend_buf_put(b, s, strlen(s));
}

void
tend_buf_vprintf(struct tend_buf *b, const char *fmt, va_list ap)
{
	va_list cp;
	int n;

	va_copy(cp, ap);
	n = vsnprintf(NULL, 0, fmt, cp);
	va_end(cp);
	if (n <= 0)
		return;
	tend_buf_grow(b, (size_t)n);
	vsnprintf(b->ptr + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
}

void
tend_buf_printf(struct tend_buf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tend_buf_vprintf(b, fmt, ap);
	va_end(ap);
}

size_t
tend_utf8_len(const void *s, size_t n)
{
	const unsigned char *p = s;
	size_t len;
	uint32_t cp;

	if (n == 0)
		return 0;
	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf) {
		len = 2;
		cp = p[0] & 0x1f;
	} else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		len = 3;
		cp = p[0] & 0x0f;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		len = 4;
		cp = p[0] & 0x07;
	} else
		return 0; /* a continuation byte, an overlong lead, past U+10FFFF */
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

void
tend_buf_json(struct tend_buf *b, const char *s)
{
	size_t n = strlen(s);

	tend_buf_putc(b, '"');
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];
		size_t l;

		if (c == '"' || c == '\\')
			tend_buf_printf(b, "\\%c", c);
		else if (c == '\n')
			tend_buf_puts(b, "\\n");
		else if (c < 0x20)
			tend_buf_printf(b, "\\u%04x", c);
		else if ((l = tend_utf8_len(s + i, n - i)) > 1) {
			tend_buf_put(b, s + i, l);
			i += l;
			continue;
		} else if (l == 0)
			/* not UTF-8: the byte as text, so that the document
			 * stays JSON (RFC 8259 wants UTF-8) */
			tend_buf_printf(b, "\\\\x%02x", c);
		else
			tend_buf_putc(b, c);
		i++;
	}
	tend_buf_putc(b, '"');
}

void
tend_buf_puthex(struct tend_buf *b, const void *data, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = data;

	tend_buf_grow(b, len * 2);
	for (size_t i = 0; i < len; i++) {
		b->ptr[b->len++] = hex[p[i] >> 4];
		b->ptr[b->len++] = hex[p[i] & 15];
	}
	b->ptr[b->len] = '\0';
}

void
tend_buf_reset(struct tend_buf *b)
{
	b->len = 0;
	b->ptr[0] = '\0';
}

void
tend_buf_release(struct tend_buf *b)
{
	if (b->size)
		free(b->ptr);
	b->ptr = tend_buf__empty;
	b->len = b->size = 0;
}

char *
tend_buf_detach(struct tend_buf *b, size_t *len_out)
{
	char *p;

	if (len_out)
		*len_out = b->len;
	if (b->size == 0)
		p = tend_xcalloc(1, 1);
	else
		p = b->ptr;
	b->ptr = tend_buf__empty;
	b->len = b->size = 0;
	return p;
}

int
tend_buf_read_fd(struct tend_buf *b, int fd, size_t max)
{
	char chunk[8192];
	ssize_t n;

	while (b->len < max && (n = read(fd, chunk, sizeof chunk)) != 0) {
		if (n < 0)
			return -1;
		tend_buf_put(b, chunk, (size_t)n);
	}
	return 0;
}

void
tend_buf_consume(struct tend_buf *b, size_t n)
{
	if (n >= b->len)
		n = b->len;
	memmove(b->ptr, b->ptr + n, b->len - n);
	b->len -= n;
	if (b->size)
		b->ptr[b->len] = '\0';
}

int
tend_buf_write_fd(struct tend_buf *b, int fd)
{
	while (b->len) {
		ssize_t n = write(fd, b->ptr, b->len);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (n <= 0)
			return -1;
		tend_buf_consume(b, (size_t)n);
	}
	return 0;
}
