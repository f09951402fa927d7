/*
 * tend/arena.h - a bump allocator freed in one call.
 *
 * Everything a reconcile pass allocates (actions, new tracking records,
 * decoded keys) lives in an arena the engine frees after the pass commits.
 * Connectors never free what they allocate here.
 */
#ifndef TEND_ARENA_H
#define TEND_ARENA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tend_arena_chunk;

struct tend_arena {
	struct tend_arena_chunk *head;
	size_t used; /* bytes handed out, for statistics */
};

#define TEND_ARENA_INIT {NULL, 0}

/* Aligned to max_align_t; aborts on out of memory. */
void *tend_arena_alloc(struct tend_arena *a, size_t n);
void *tend_arena_zalloc(struct tend_arena *a, size_t n);
void *tend_arena_memdup(struct tend_arena *a, const void *p, size_t n);
char *tend_arena_strdup(struct tend_arena *a, const char *s);
/* Free everything; the arena is empty and reusable. */
void tend_arena_finish(struct tend_arena *a);

#ifdef __cplusplus
}
#endif

#endif
