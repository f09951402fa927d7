/* fuzz_key.c - the key codec: decoding never reads past the input, and
 * whatever decodes re-encodes to the same bytes and compares equal to
 * itself after a second decode. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tend/arena.h"
#include "tend/buf.h"
#include "tend/key.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tend_arena a = TEND_ARENA_INIT;
	struct tend_buf enc = TEND_BUF_INIT, txt = TEND_BUF_INIT;
	size_t off = 0;

	while (off < size) {
		struct tend_key k, k2;
		size_t used = 0;

		if (tend_key_decode(&k, data + off, size - off, &used, &a) != 0)
			break;
		if (used == 0 || used > size - off)
			abort(); /* it must consume what it decoded */
		tend_buf_reset(&enc);
		tend_key_encode(&enc, &k);
		tend_key_format(&txt, &k);
		if (tend_key_decode(&k2, enc.ptr, enc.len, NULL, &a) != 0 ||
		    !tend_key_equal(&k, &k2) || tend_key_compare(&k, &k2) != 0)
			abort(); /* the canonical form decodes to the same key */
		off += used;
	}
	tend_buf_release(&enc);
	tend_buf_release(&txt);
	tend_arena_finish(&a);
	return 0;
}
