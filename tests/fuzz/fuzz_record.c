/* fuzz_record.c - the tracking-record (item row) decoder: LMDB rows a
 * crash, a bug or disk corruption could garble are refused, never read
 * out of bounds. */
#include <stddef.h>
#include <stdint.h>

#include "engine_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tend_arena a = TEND_ARENA_INIT;
	struct item it;

	(void)tend_item_decode(&it, data, size, &a);
	tend_arena_finish(&a);
	return 0;
}
