/*
 * embed.c - a program that defines an app in code and gets tend's whole
 * command line: `embed sync`, `embed plan`, `embed check`...
 *
 * The app "reverse" writes every source file with its lines reversed. The
 * workspace still needs a tend.conf (it marks the workspace; it may hold
 * no app at all).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tend/plugin.h>
#include <tend/status.h>

static int
reverse_lines(struct tend_comp *c, const struct tend_source_item *item)
{
	FILE *f = fopen(item->abs_path, "rb");
	char line[4096], **lines = NULL;
	size_t n = 0, total = 0;
	int rc;

	if (!f)
		return tend_error_set(TEND_ERROR, "cannot open %s", item->path);
	while (fgets(line, sizeof line, f)) {
		lines = realloc(lines, (n + 1) * sizeof *lines);
		if (!lines)
			abort();
		lines[n] = strdup(line);
		total += strlen(line) + 1;
		n++;
	}
	fclose(f);
	char *out = malloc(total + 1), *p = out;
	if (!out)
		abort();
	for (size_t i = n; i-- > 0;) {
		size_t len = strlen(lines[i]);

		memcpy(p, lines[i], len);
		p += len;
		if (len && lines[i][len - 1] != '\n')
			*p++ = '\n';
		free(lines[i]);
	}
	free(lines);
	rc = tend_plugin_entry(c, item, item->name, out, (size_t)(p - out),
	    0644);
	free(out);
	return rc;
}

int
main(int argc, char **argv)
{
	static const struct tend_code_app apps[] = {
		{.name = "reverse", .source = "src", .target = "dir:reversed",
		    .declare = reverse_lines, .logic_version = 1},
	};
	struct tend_main_opts o = {.apps = apps, .napps = 1};

	return tend_main(argc, argv, &o);
}
