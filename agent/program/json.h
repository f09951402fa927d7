/*
 * json.h - a small JSON reader for the control-socket protocol.
 *
 * The agent reads commands with it and the dashboard reads events. It
 * accepts RFC 8259 text (one value, surrounded by whitespace), builds a
 * tree of nodes, and refuses anything else with a message naming the
 * byte offset: nesting deeper than 64, numbers it cannot parse, bad
 * escapes, control characters in strings, trailing garbage. Strings are
 * NUL-terminated UTF-8 (\u escapes decoded; an escaped NUL ends the C
 * string early but `len` has the full length).
 */
#ifndef TEND_JSON_H
#define TEND_JSON_H

#include <stdbool.h>
#include <stddef.h>

enum tend_json_type {
	TEND_JSON_NULL,
	TEND_JSON_BOOL,
	TEND_JSON_NUM,
	TEND_JSON_STR,
	TEND_JSON_ARR,
	TEND_JSON_OBJ,
};

struct tend_json {
	enum tend_json_type type;
	char *key;	/* the member name inside an object, else NULL */
	bool b;
	double n;
	char *s;	/* TEND_JSON_STR */
	size_t len;	/* string length, or number of children */
	struct tend_json *child, *next;
};

/* Parse `len` bytes. NULL on error, with a message in `err`. */
struct tend_json *tend_json_parse(const char *text, size_t len, char *err,
    size_t errlen);
void tend_json_free(struct tend_json *j);

/* The member `key` of an object (NULL if absent or not an object). */
const struct tend_json *tend_json_get(const struct tend_json *obj,
    const char *key);
/* Typed member access with a default for absent or mistyped members. */
const char *tend_json_str(const struct tend_json *obj, const char *key,
    const char *def);
double tend_json_num(const struct tend_json *obj, const char *key,
    double def);
bool tend_json_bool(const struct tend_json *obj, const char *key, bool def);
/* An integer member: a number in [lo, hi] (fractions truncated), else
 * `def` - absent, not a number, nan or out of range are all `def`, never
 * an out-of-range cast. Keep |lo|, |hi| <= TEND_JSON_INT_MAX. */
#define TEND_JSON_INT_MAX 9007199254740992LL /* 2^53: exact in a double */
long long tend_json_int(const struct tend_json *obj, const char *key,
    long long lo, long long hi, long long def);

/* Write `j` (NULL: null) as JSON text: what was parsed, re-emitted, always
 * valid UTF-8 (tend_buf_json). Numbers that are integers print as such. */
struct tend_buf;
void tend_json_write(struct tend_buf *b, const struct tend_json *j);

#endif
