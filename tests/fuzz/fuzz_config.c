/* fuzz_config.c - tend.conf parsing: any bytes give a config or
 * diagnostics, never a crash, a leak or an out-of-bounds read. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tend_config cfg;
	struct tend_diags d = {0};

	if (tend_config_parse((const char *)data, size, "fuzz.conf", &cfg,
		&d) == 0)
		tend_config_finish(&cfg);
	else
		free(tend_diags_format(&d));
	tend_diags_finish(&d);
	return 0;
}
