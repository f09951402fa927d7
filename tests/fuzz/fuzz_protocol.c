/* fuzz_protocol.c - the control protocol's reader: the bytes are split
 * into lines as the socket does; each line goes through the JSON reader
 * and into the dashboard's model (which turns events into rows), and
 * the rows of every panel are built. Bytes past the first NUL of a line
 * end it, as in the agent. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tm_model m;
	char *buf = malloc(size + 1), err[128];

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	tm_init(&m, "/fuzz");
	tm_connected(&m);
	for (char *line = buf, *nl; line && line <= buf + size; line = nl) {
		nl = strchr(line, '\n');
		if (nl)
			*nl++ = '\0';
		struct tend_json *j = tend_json_parse(line, strlen(line), err,
		    sizeof err);
		tend_json_free(j);
		tm_feed(&m, line, 1.0);
		/* a key per line too: the first byte */
		if (*line)
			tm_key(&m, (unsigned char)line[0] == 'q'
				? 'j' : (unsigned char)line[0]);
		if (!nl)
			break;
	}
	for (int p = 0; p < TM_NPANELS; p++) {
		size_t n;
		struct tend_buf t = TEND_BUF_INIT;

		free(tm_rows(&m, (enum tm_panel)p, &n));
		tm_title(&m, (enum tm_panel)p, &t);
		tend_buf_release(&t);
	}
	struct tend_buf d = TEND_BUF_INIT, h = TEND_BUF_INIT;
	tm_detail(&m, &d);
	tm_header(&m, 2.0, 80, &h);
	tend_buf_release(&d);
	tend_buf_release(&h);
	tm_free(&m);
	free(buf);
	return 0;
}
