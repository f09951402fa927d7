/* replay.c - run a fuzz target over files (the committed corpus and the
 * crashes found), without libFuzzer: every build runs them as tests. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		uint8_t *buf = NULL;
		size_t len = 0, cap = 0, n;
		uint8_t chunk[65536];

		if (!f) {
			perror(argv[i]);
			return 1;
		}
		while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
			if (len + n > cap) {
				cap = (len + n) * 2;
				if (!(buf = realloc(buf, cap)))
					abort();
			}
			for (size_t k = 0; k < n; k++)
				buf[len + k] = chunk[k];
			len += n;
		}
		fclose(f);
		LLVMFuzzerTestOneInput(buf ? buf : (const uint8_t *)"", len);
		free(buf);
	}
	printf("%d inputs replayed\n", argc - 1);
	return 0;
}
