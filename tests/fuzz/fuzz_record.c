/* fuzz_record.c - the decoders of the engine's row values (rows.c:
 * items, component headers, memos, in both layouts): LMDB rows a crash,
 * a bug or disk corruption could garble are refused, never read out of
 * bounds. */
#include <stddef.h>
#include <stdint.h>

#include "engine_int.h"
#include "tend/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tend_arena a = TEND_ARENA_INIT;
	struct item it;
	struct hdr_row h;
	struct memo_row m;
	bool container, deleted;
	size_t n;

	(void)tend_item_decode(&it, data, size, &a);
	(void)tend_item_peek(data, size, &container, &n, &deleted);
	(void)tend_hdr_parse(&h, data, size);
	if (tend_memo_parse(&m, data, size) == 0) {
		struct dep d;
		size_t at = 0;

		for (size_t i = 0; i < m.ndeps; i++)
			if (!tend_memo_dep_next(&m, &at, &d))
				__builtin_trap(); /* parse said they were whole */
	}
	/* a memo context (format 3's META rows) */
	if (tend_memo_ctx_parse(&m, data, size) == 0) {
		struct dep d;
		size_t at = 0;

		for (size_t i = 0; i < m.ndeps; i++)
			if (!tend_memo_dep_next(&m, &at, &d))
				__builtin_trap();
	}
	tend_error_clear();
	tend_arena_finish(&a);
	return 0;
}
