/*
 * json.c - the control protocol's JSON reader (see json.h).
 *
 * A recursive descent over a bounded input with a depth limit; every
 * node is one allocation, strings another. Numbers go through strtod on
 * a copy of the token (the input is not NUL-terminated).
 */
#include "json.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tend/buf.h"

#define MAX_DEPTH 64

struct parser {
	const char *p, *end, *start;
	char *err;
	size_t errlen;
	bool failed;
};

static void
fail(struct parser *ps, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
fail(struct parser *ps, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (ps->failed)
		return;
	ps->failed = true;
	if (!ps->errlen)
		return;
	n = snprintf(ps->err, ps->errlen, "offset %zu: ",
	    (size_t)(ps->p - ps->start));
	if (n < 0 || (size_t)n >= ps->errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(ps->err + n, ps->errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

static void
skip_ws(struct parser *ps)
{
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' ||
				      *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static bool
literal(struct parser *ps, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
		return false;
	ps->p += n;
	return true;
}

static int
hex4(const char *p)
{
	int v = 0;

	for (int i = 0; i < 4; i++) {
		int c = p[i], d;

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return -1;
		v = v * 16 + d;
	}
	return v;
}

static size_t
put_utf8(char *o, uint32_t cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* At the opening quote. The decoded string is never longer than its
 * source, so one allocation of the source length suffices. */
static char *
string(struct parser *ps, size_t *lenp)
{
	const char *q = ++ps->p;

	while (q < ps->end && *q != '"')
		q += *q == '\\' && q + 1 < ps->end ? 2 : 1;
	if (q >= ps->end) {
		fail(ps, "unterminated string");
		return NULL;
	}
	char *out = tend_xmalloc((size_t)(q - ps->p) + 1);
	size_t n = 0;

	while (ps->p < q) {
		unsigned char c = (unsigned char)*ps->p;

		if (c < 0x20) {
			fail(ps, "control character in a string");
			goto bad;
		}
		if (c != '\\') {
			out[n++] = (char)c;
			ps->p++;
			continue;
		}
		ps->p++;
		switch (*ps->p++) {
		case '"': out[n++] = '"'; break;
		case '\\': out[n++] = '\\'; break;
		case '/': out[n++] = '/'; break;
		case 'b': out[n++] = '\b'; break;
		case 'f': out[n++] = '\f'; break;
		case 'n': out[n++] = '\n'; break;
		case 'r': out[n++] = '\r'; break;
		case 't': out[n++] = '\t'; break;
		case 'u': {
			int hi = q - ps->p >= 4 ? hex4(ps->p) : -1;
			uint32_t cp;

			if (hi < 0) {
				fail(ps, "bad \\u escape");
				goto bad;
			}
			ps->p += 4;
			cp = (uint32_t)hi;
			if (hi >= 0xd800 && hi < 0xdc00 && q - ps->p >= 6 &&
			    ps->p[0] == '\\' && ps->p[1] == 'u') {
				int lo = hex4(ps->p + 2);

				if (lo >= 0xdc00 && lo < 0xe000) {
					cp = 0x10000 + (((uint32_t)hi - 0xd800)
							    << 10) +
					    ((uint32_t)lo - 0xdc00);
					ps->p += 6;
				}
			}
			if (cp >= 0xd800 && cp < 0xe000)
				cp = 0xfffd; /* a lone surrogate */
			/* "\uXXXX" is 6 bytes, at most 3 out; a pair is 12
			 * bytes for 4 out: the buffer is large enough */
			n += put_utf8(out + n, cp);
			break;
		}
		default:
			ps->p--;
			fail(ps, "bad escape");
			goto bad;
		}
	}
	ps->p = q + 1;
	out[n] = '\0';
	*lenp = n;
	return out;
bad:
	free(out);
	return NULL;
}

static struct tend_json *value(struct parser *ps, int depth);

static struct tend_json *
node(enum tend_json_type t)
{
	struct tend_json *j = tend_xcalloc(1, sizeof *j);

	j->type = t;
	return j;
}

static struct tend_json *
number(struct parser *ps)
{
	const char *s = ps->p;
	char tmp[64];

	if (ps->p < ps->end && *ps->p == '-')
		ps->p++;
	if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') {
		fail(ps, "unexpected character");
		return NULL;
	}
	while (ps->p < ps->end && ((*ps->p >= '0' && *ps->p <= '9') ||
				      *ps->p == '.' || *ps->p == 'e' ||
				      *ps->p == 'E' || *ps->p == '+' ||
				      *ps->p == '-'))
		ps->p++;
	size_t n = (size_t)(ps->p - s);
	if (n >= sizeof tmp) {
		fail(ps, "number too long");
		return NULL;
	}
	memcpy(tmp, s, n);
	tmp[n] = '\0';
	char *end;
	double d = strtod(tmp, &end);
	if (*end) {
		fail(ps, "bad number");
		return NULL;
	}
	struct tend_json *j = node(TEND_JSON_NUM);
	j->n = d;
	return j;
}

static struct tend_json *
container(struct parser *ps, int depth, bool obj)
{
	struct tend_json *j = node(obj ? TEND_JSON_OBJ : TEND_JSON_ARR);
	struct tend_json **tail = &j->child;
	char close = obj ? '}' : ']';

	ps->p++;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == close) {
		ps->p++;
		return j;
	}
	for (;;) {
		char *key = NULL;
		size_t klen;

		skip_ws(ps);
		if (obj) {
			if (ps->p >= ps->end || *ps->p != '"') {
				fail(ps, "expected a member name");
				break;
			}
			if (!(key = string(ps, &klen)))
				break;
			skip_ws(ps);
			if (ps->p >= ps->end || *ps->p != ':') {
				free(key);
				fail(ps, "expected ':'");
				break;
			}
			ps->p++;
		}
		struct tend_json *v = value(ps, depth + 1);
		if (!v) {
			free(key);
			break;
		}
		v->key = key;
		*tail = v;
		tail = &v->next;
		j->len++;
		skip_ws(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			continue;
		}
		if (ps->p < ps->end && *ps->p == close) {
			ps->p++;
			return j;
		}
		fail(ps, "expected ',' or '%c'", close);
		break;
	}
	tend_json_free(j);
	return NULL;
}

static struct tend_json *
value(struct parser *ps, int depth)
{
	struct tend_json *j;

	if (depth > MAX_DEPTH) {
		fail(ps, "nested deeper than %d", MAX_DEPTH);
		return NULL;
	}
	skip_ws(ps);
	if (ps->p >= ps->end) {
		fail(ps, "unexpected end");
		return NULL;
	}
	switch (*ps->p) {
	case '{':
		return container(ps, depth, true);
	case '[':
		return container(ps, depth, false);
	case '"': {
		size_t n;
		char *s = string(ps, &n);

		if (!s)
			return NULL;
		j = node(TEND_JSON_STR);
		j->s = s;
		j->len = n;
		return j;
	}
	case 't':
	case 'f':
		if (literal(ps, "true") || literal(ps, "false")) {
			j = node(TEND_JSON_BOOL);
			j->b = ps->p[-1] == 'e' && ps->p[-2] == 'u';
			return j;
		}
		break;
	case 'n':
		if (literal(ps, "null"))
			return node(TEND_JSON_NULL);
		break;
	default:
		return number(ps);
	}
	fail(ps, "unexpected character");
	return NULL;
}

struct tend_json *
tend_json_parse(const char *text, size_t len, char *err, size_t errlen)
{
	struct parser ps = {text, text + len, text, err, errlen, false};
	struct tend_json *j;

	if (errlen)
		err[0] = '\0';
	j = value(&ps, 0);
	if (!j)
		return NULL;
	skip_ws(&ps);
	if (ps.p != ps.end) {
		fail(&ps, "trailing characters");
		tend_json_free(j);
		return NULL;
	}
	return j;
}

void
tend_json_free(struct tend_json *j)
{
	/* siblings iteratively, children recursively (depth is bounded) */
	while (j) {
		struct tend_json *next = j->next;

		tend_json_free(j->child);
		free(j->key);
		free(j->s);
		free(j);
		j = next;
	}
}

const struct tend_json *
tend_json_get(const struct tend_json *obj, const char *key)
{
	if (!obj || obj->type != TEND_JSON_OBJ)
		return NULL;
	for (const struct tend_json *c = obj->child; c; c = c->next)
		if (strcmp(c->key, key) == 0)
			return c;
	return NULL;
}

const char *
tend_json_str(const struct tend_json *obj, const char *key, const char *def)
{
	const struct tend_json *v = tend_json_get(obj, key);

	return v && v->type == TEND_JSON_STR ? v->s : def;
}

double
tend_json_num(const struct tend_json *obj, const char *key, double def)
{
	const struct tend_json *v = tend_json_get(obj, key);

	return v && v->type == TEND_JSON_NUM ? v->n : def;
}

bool
tend_json_bool(const struct tend_json *obj, const char *key, bool def)
{
	const struct tend_json *v = tend_json_get(obj, key);

	return v && v->type == TEND_JSON_BOOL ? v->b : def;
}

long long
tend_json_int(const struct tend_json *obj, const char *key, long long lo,
    long long hi, long long def)
{
	const struct tend_json *v = tend_json_get(obj, key);

	if (!v || v->type != TEND_JSON_NUM ||
	    !(v->n >= (double)lo && v->n <= (double)hi))
		return def;
	return (long long)v->n;
}

void
tend_json_write(struct tend_buf *b, const struct tend_json *j)
{
	switch (j ? j->type : TEND_JSON_NULL) {
	case TEND_JSON_NULL:
		tend_buf_puts(b, "null");
		break;
	case TEND_JSON_BOOL:
		tend_buf_puts(b, j->b ? "true" : "false");
		break;
	case TEND_JSON_NUM:
		if (j->n == (double)(long long)j->n &&
		    j->n > -(double)TEND_JSON_INT_MAX &&
		    j->n < (double)TEND_JSON_INT_MAX)
			tend_buf_printf(b, "%lld", (long long)j->n);
		else
			tend_buf_printf(b, "%.17g", j->n);
		break;
	case TEND_JSON_STR:
		tend_buf_json(b, j->s);
		break;
	case TEND_JSON_ARR:
	case TEND_JSON_OBJ: {
		bool obj = j->type == TEND_JSON_OBJ;

		tend_buf_putc(b, obj ? '{' : '[');
		for (const struct tend_json *c = j->child; c; c = c->next) {
			if (c != j->child)
				tend_buf_puts(b, ", ");
			if (obj) {
				tend_buf_json(b, c->key);
				tend_buf_puts(b, ": ");
			}
			tend_json_write(b, c);
		}
		tend_buf_putc(b, obj ? '}' : ']');
		break;
	}
	}
}
