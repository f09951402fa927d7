/*
 * failpoint.c - TEND_FAILPOINTS (see tend/failpoint.h).
 *
 * The specification is parsed once, on the first call. Hit counters are
 * atomic: exec items run on worker threads.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tend/failpoint.h"

#define MAX_POINTS 16

struct point {
	char name[32];
	char text[128];
	unsigned long nth; /* 0: every call */
	unsigned long hits;
	int action; /* > 0: errno; -1 stop; -2 kill */
};

static struct point points[MAX_POINTS];
static int npoints;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static const struct {
	const char *name;
	int value;
} actions[] = {
	{"EIO", EIO}, {"ENOSPC", ENOSPC}, {"EACCES", EACCES},
	{"EROFS", EROFS}, {"EPERM", EPERM}, {"EDQUOT", EDQUOT},
	{"ENOMEM", ENOMEM}, {"stop", -1}, {"kill", -2},
};

static int
parse_action(const char *s, size_t len)
{
	for (size_t i = 0; i < sizeof actions / sizeof actions[0]; i++)
		if (strlen(actions[i].name) == len &&
		    strncmp(actions[i].name, s, len) == 0)
			return actions[i].value;
	return 0;
}

/* One POINT[~TEXT][@N][=ACTION]; a malformed entry is reported and
 * ignored (an armed test that fires nothing fails on its own). */
static void
parse_one(const char *s, size_t len)
{
	struct point *p = &points[npoints];
	const char *end = s + len, *eq = memchr(s, '=', len);
	const char *at, *tilde, *name_end;

	memset(p, 0, sizeof *p);
	p->action = EIO;
	if (eq) {
		if (!(p->action = parse_action(eq + 1, (size_t)(end - eq - 1))))
			goto bad;
		end = eq;
	}
	at = memrchr(s, '@', (size_t)(end - s));
	if (at) {
		char *stop;
		p->nth = strtoul(at + 1, &stop, 10);
		if (stop != end || p->nth == 0)
			goto bad;
		end = at;
	}
	tilde = memchr(s, '~', (size_t)(end - s));
	name_end = tilde ? tilde : end;
	if (name_end == s || (size_t)(name_end - s) >= sizeof p->name)
		goto bad;
	memcpy(p->name, s, (size_t)(name_end - s));
	if (tilde) {
		size_t tl = (size_t)(end - tilde - 1);
		if (tl >= sizeof p->text)
			goto bad;
		memcpy(p->text, tilde + 1, tl);
	}
	npoints++;
	return;
bad:
	fprintf(stderr, "tend: TEND_FAILPOINTS: ignoring \"%.*s\"\n",
	    (int)len, s);
}

static void
parse(void)
{
	const char *s = getenv("TEND_FAILPOINTS");

	while (s && *s && npoints < MAX_POINTS) {
		size_t len = strcspn(s, ",");
		if (len)
			parse_one(s, len);
		s += len;
		if (*s == ',')
			s++;
	}
}

int
tend_failpoint(const char *point, const char *subject)
{
	static int armed = -1;

	if (__atomic_load_n(&armed, __ATOMIC_RELAXED) == 0)
		return 0;
	pthread_once(&once, parse);
	__atomic_store_n(&armed, npoints > 0, __ATOMIC_RELAXED);
	for (int i = 0; i < npoints; i++) {
		struct point *p = &points[i];

		if (strcmp(p->name, point) != 0)
			continue;
		if (p->text[0] && (!subject || !strstr(subject, p->text)))
			continue;
		unsigned long n = __atomic_add_fetch(&p->hits, 1,
		    __ATOMIC_RELAXED);
		if (p->nth && n != p->nth)
			continue;
		if (p->action == -1) {
			raise(SIGSTOP);
			continue;
		}
		if (p->action == -2)
			raise(SIGKILL);
		errno = p->action;
		return p->action;
	}
	return 0;
}
