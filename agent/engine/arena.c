/*
 * arena.c - bump allocation in chunks, freed in one call.
 */
#include "tend/arena.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tend/buf.h"

struct tend_arena_chunk {
	struct tend_arena_chunk *next;
	size_t size, used;
	_Alignas(max_align_t) unsigned char data[];
};

#define CHUNK_FIRST 256
#define CHUNK_MAX (64 * 1024)
#define ALIGN (_Alignof(max_align_t))

void *
tend_arena_alloc(struct tend_arena *a, size_t n)
{
	struct tend_arena_chunk *c = a->head;
	size_t need = (n + ALIGN - 1) & ~(ALIGN - 1);

	if (need < n)
		abort();
	if (!c || c->size - c->used < need) {
		/* small first chunks: components each own an arena */
		size_t size = c ? c->size * 2 : CHUNK_FIRST;

		if (size > CHUNK_MAX)
			size = CHUNK_MAX;
		if (size < need)
			size = need;

		c = tend_xmalloc(sizeof *c + size);
		c->size = size;
		c->used = 0;
		c->next = a->head;
		a->head = c;
	}
	void *p = c->data + c->used;
	c->used += need;
	a->used += need;
	return p;
}

void *
tend_arena_zalloc(struct tend_arena *a, size_t n)
{
	void *p = tend_arena_alloc(a, n);

	memset(p, 0, n);
	return p;
}

void *
tend_arena_memdup(struct tend_arena *a, const void *p, size_t n)
{
	void *q = tend_arena_alloc(a, n ? n : 1);

	if (n)
		memcpy(q, p, n);
	return q;
}

char *
tend_arena_strdup(struct tend_arena *a, const char *s)
{
	return tend_arena_memdup(a, s, strlen(s) + 1);
}

void
tend_arena_finish(struct tend_arena *a)
{
	struct tend_arena_chunk *c = a->head, *next;

	for (; c; c = next) {
		next = c->next;
		free(c);
	}
	a->head = NULL;
	a->used = 0;
}
