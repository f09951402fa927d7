/*
 * lines_plugin.c - a declaration plugin (tend/plugin.h):
 *
 *   declare = plugin build/examples/liblines_plugin.so lines_declare
 *
 * For every source file it declares two entries: the file itself under its
 * usual name, and "stats/<path>.lines" holding its line count (nested
 * directories come from the '/' in the name). A file whose first line is
 * "#skip" declares nothing; one whose first line is "#fail" fails.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tend/plugin.h>
#include <tend/status.h>

#ifndef LINES_STATS_PREFIX
#define LINES_STATS_PREFIX ""
#endif

int lines_declare(struct tend_comp *c, const struct tend_source_item *item);

int
lines_declare(struct tend_comp *c, const struct tend_source_item *item)
{
	FILE *f = fopen(item->abs_path, "rb");
	char *data = NULL, stats[64], name[4200];
	size_t len = 0, cap = 0, lines = 0, n;
	char buf[4096];
	int rc;

	if (!f)
		return tend_error_set(TEND_ERROR, "lines: cannot open %s",
		    item->path);
	while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
		if (len + n > cap) {
			cap = (len + n) * 2;
			data = realloc(data, cap);
			if (!data)
				abort();
		}
		memcpy(data + len, buf, n);
		len += n;
	}
	fclose(f);
	for (size_t i = 0; i < len; i++)
		lines += data[i] == '\n';
	if (len >= 5 && memcmp(data, "#skip", 5) == 0) {
		free(data);
		return 0;
	}
	if (len >= 5 && memcmp(data, "#fail", 5) == 0) {
		free(data);
		return tend_error_set(TEND_ERROR, "lines: %s asks to fail",
		    item->path);
	}
	rc = tend_plugin_entry(c, item, item->name, data, len, item->mode);
	snprintf(stats, sizeof stats, LINES_STATS_PREFIX "%zu\n", lines);
	snprintf(name, sizeof name, "stats/%s.lines", item->path);
	if (rc == 0)
		rc = tend_plugin_entry(c, item, name, stats, strlen(stats), 0644);
	free(data);
	return rc;
}
