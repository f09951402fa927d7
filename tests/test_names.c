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

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_accepted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
