/*
 * test_names.c - the entry-name check every fs and git entry passes before
 * any I/O: what is refused (and why) and what is a legitimate name.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fs.h"
#include "tend/arena.h"
#include "tend/plugin.h"
#include "tend/status.h"

static void
refused(const char *name, size_t len, const char *why)
{
	int rc = tend_fs_check_name(name, len);

	if (rc != TEND_EINVALID)
		fail_msg("\"%.*s\" accepted (%d)", (int)len, name, rc);
	if (!strstr(tend_error_last(), why))
		fail_msg("\"%.*s\": \"%s\" does not say \"%s\"", (int)len, name,
		    tend_error_last(), why);
}

static void
test_refused(void **state)
{
	char longseg[300], longname[5000];

	(void)state;
	refused("", 0, "empty entry name");
	refused("/etc/passwd", 11, "is absolute");
	refused("..", 2, "\"..\" component");
	refused("a/../../b", 9, "\"..\" component");
	refused("a/..", 4, "\"..\" component");
	refused(".", 1, "\".\" component");
	refused("a/./b", 5, "\".\" component");
	refused("a//b", 4, "empty component");
	refused("a/", 2, "ends with '/'");
	refused("a\0b", 3, "NUL byte");
	refused("a/b\0", 4, "NUL byte");
	memset(longseg, 'x', 256);
	refused(longseg, 256, "longer than 255 bytes");
	memcpy(longname, "d/", 2);
	memset(longname + 2, 'y', 256);
	refused(longname, 258, "longer than 255 bytes");
	for (size_t i = 0; i < sizeof longname; i++)
		longname[i] = i % 100 == 99 ? '/' : 'z';
	refused(longname, 4096, "too long");
}

static void
test_accepted(void **state)
{
	static const char *const ok[] = {"a", "a/b/c.txt", "...", "..a",
	    "a..", ".hidden", "dir/.x", "sp ace", "caf\xc3\xa9",
	    "\xff\xfe raw bytes", "a\\b", "-rf", "~", "a:b"};
	char longseg[300];

	(void)state;
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
		if (tend_fs_check_name(ok[i], strlen(ok[i])) != 0)
			fail_msg("\"%s\" refused: %s", ok[i], tend_error_last());
	memset(longseg, 'x', 255);
	assert_int_equal(tend_fs_check_name(longseg, 255), 0);
}

/* plugin.h's entry codec is the one tend declares with */
static void
test_entry_codec(void **state)
{
	struct tend_entry e = {.size = 5, .mode = 0644, .src = "/w/src/a.md"}, d;
	struct tend_entry_spec sp = {.size = 5, .mode = 0644,
	    .src = "/w/src/a.md"};
	struct tend_buf a = TEND_BUF_INIT, b = TEND_BUF_INIT;
	struct tend_arena ar = TEND_ARENA_INIT;

	(void)state;
	memset(e.fp.b, 7, sizeof e.fp.b);
	sp.fp = e.fp;
	tend_entry_encode(&a, &e);
	tend_fs_encode_entry(&b, &sp);
	assert_int_equal(a.len, b.len);
	assert_memory_equal(a.ptr, b.ptr, a.len);
	assert_true(tend_entry_decode(a.ptr, a.len, &d, &ar));
	assert_int_equal(d.size, 5);
	assert_int_equal(d.mode, 0644);
	assert_string_equal(d.src, "/w/src/a.md");
	assert_memory_equal(d.fp.b, e.fp.b, sizeof e.fp.b);
	assert_false(tend_entry_decode("x", 1, &d, &ar));
	struct tend_fp l1 = tend_entry_link_fp("../a"), l2 = tend_fs_link_fp("../a");
	assert_memory_equal(l1.b, l2.b, sizeof l1.b);
	tend_buf_release(&a);
	tend_buf_release(&b);
	tend_arena_finish(&ar);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_accepted),
		cmocka_unit_test(test_entry_codec),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
