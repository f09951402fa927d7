/* seedgen.c - writes the committed seed corpus of fuzz_key and
 * fuzz_record (encoded keys, item rows) into the directories given:
 * seedgen KEY_DIR RECORD_DIR. Run by hand when the encodings change. */
#include <stdio.h>
#include <string.h>

#include "engine_int.h"

static void
save(const char *dir, const char *name, const struct tend_buf *b)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	if (!(f = fopen(path, "wb")) || fwrite(b->ptr, 1, b->len, f) != b->len)
		perror(path);
	if (f)
		fclose(f);
}

int
main(int argc, char **argv)
{
	struct tend_buf b = TEND_BUF_INIT, k = TEND_BUF_INIT;
	uint8_t uuid[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
	struct tend_key parts[4] = {tend_key_str("public"), tend_key_int(-7),
	    tend_key_bytes("\0\xff", 2), tend_key_symbol("files")};
	struct tend_key keys[] = {tend_key_none(), tend_key_bool(true),
	    tend_key_int(0), tend_key_int(-1), tend_key_int(1LL << 40),
	    tend_key_str(""), tend_key_str("a/b.md"), tend_key_symbol("tend"),
	    tend_key_bytes("\0\0\1", 3), tend_key_uuid(uuid),
	    tend_key_tuple(parts, 4), tend_key_tuple(parts, 0)};
	char name[32];

	if (argc < 3)
		return 2;
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
		tend_buf_reset(&b);
		tend_key_encode(&b, &keys[i]);
		snprintf(name, sizeof name, "key-%02zu", i);
		save(argv[1], name, &b);
	}
	/* two keys back to back: the fuzzer decodes a sequence */
	tend_buf_reset(&b);
	tend_key_encode(&b, &keys[6]);
	tend_key_encode(&b, &keys[10]);
	save(argv[1], "key-seq", &b);

	tend_key_encode(&k, &keys[6]);
	struct state st[2] = {{3, false, (const uint8_t *)"\1abc", 4},
	    {4, true, NULL, 0}};
	struct item it = {.container = false, .schema = 2, .gen_id = 9,
	    .gen_schema = 1, .key = (const uint8_t *)k.ptr, .keylen = k.len,
	    .states = st, .nstates = 2};
	memset(it.parent.b, 0xab, sizeof it.parent.b);
	for (int compact = 0; compact <= 1; compact++) {
		for (size_t n = 0; n <= 2; n++) {
			it.nstates = n;
			it.container = n == 1;
			tend_buf_reset(&b);
			tend_item_encode(&b, &it, compact);
			snprintf(name, sizeof name, "item-%s%zu",
			    compact ? "c" : "", n);
			save(argv[2], name, &b);
		}
		struct hdr_row h = {.version = 300, .token = uuid,
		    .flags = 1, .has_parent = true, .parent = uuid,
		    .proc = (const uint8_t *)"copy", .proclen = 4,
		    .path = (const uint8_t *)k.ptr, .pathlen = k.len};
		tend_buf_reset(&b);
		tend_hdr_encode(&b, &h, compact);
		snprintf(name, sizeof name, "hdr-%s", compact ? "c" : "f");
		save(argv[2], name, &b);
		struct tend_fp fp;
		struct dep deps[2] = {{.gen_id = 1, .gen_schema = 1 << 20},
		    {.gen_id = 5}};
		memset(fp.b, 0x5a, 16);
		deps[0].id = deps[1].id = fp;
		tend_buf_reset(&b);
		tend_memo_encode(&b, &fp, &fp, deps, 2, compact);
		snprintf(name, sizeof name, "memo-%s", compact ? "c" : "f");
		save(argv[2], name, &b);
		if (compact) {
			tend_buf_reset(&b);
			tend_memo_shared_encode(&b, &fp, uuid);
			save(argv[2], "memo-s", &b);
			tend_buf_reset(&b);
			tend_memo_ctx_encode(&b, &fp, deps, 2);
			save(argv[2], "memo-ctx", &b);
		}
	}
	tend_buf_release(&b);
	tend_buf_release(&k);
	return 0;
}
