/*
 * cmd_init.c - tend init [DIR]: a commented tend.conf for a directory.
 *
 * It looks at what is there: the first of the usual source folders (or
 * the first folder at all) becomes the suggested app's source; a git
 * repository (DIR/.git) gets a git app, commented out, that commits the
 * same source to a branch of its own. It never overwrites a tend.conf,
 * and the file it writes loads: `tend plan` right after works.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool
is_dir(const char *dir, const char *name)
{
	struct stat st;
	char *p;
	bool yes;

	if (asprintf(&p, "%s/%s", dir, name) < 0)
		abort();
	yes = lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
	free(p);
	return yes;
}

/* A name that can stand in tend.conf unquoted and means a folder here:
 * no spaces, quotes, comment or escape characters. */
static bool
plain_name(const char *s)
{
	if (!*s || *s == '.' || *s == '-')
		return false;
	for (; *s; s++)
		if (!(*s == '_' || *s == '-' || *s == '.' ||
			(*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
			(*s >= '0' && *s <= '9')))
			return false;
	return true;
}

static int
cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The suggested source: a usual name if there is one, else the first
 * folder by name, else NULL (the template then says to make one). */
static char *
pick_source(const char *dir)
{
	static const char *usual[] = {"src", "docs", "content", "site",
	    "notes", "source", NULL};
	char **names = NULL, *pick = NULL;
	size_t n = 0;
	DIR *d;
	struct dirent *e;

	for (size_t i = 0; usual[i]; i++)
		if (is_dir(dir, usual[i]))
			return strdup(usual[i]);
	if (!(d = opendir(dir)))
		return NULL;
	while ((e = readdir(d))) {
		if (!plain_name(e->d_name) || !is_dir(dir, e->d_name) ||
		    strcmp(e->d_name, "out") == 0 ||
		    strcmp(e->d_name, "public") == 0 ||
		    strcmp(e->d_name, "build") == 0)
			continue;
		names = tend_xrealloc(names, (n + 1) * sizeof *names);
		names[n++] = strdup(e->d_name);
	}
	closedir(d);
	if (n) {
		qsort(names, n, sizeof *names, cmp_name);
		pick = names[0];
		for (size_t i = 1; i < n; i++)
			free(names[i]);
	}
	free(names);
	return pick;
}

/* A target folder that is not there yet: tend creates it. */
static const char *
pick_target(const char *dir)
{
	static const char *names[] = {"public", "out", "tend-out", NULL};

	for (size_t i = 0; names[i]; i++)
		if (!is_dir(dir, names[i]))
			return names[i];
	return "tend-out";
}

static void
put_template(struct tend_buf *b, const char *src, const char *target,
    bool git)
{
	tend_buf_puts(b,
	    "# tend.conf, written by `tend init`. tend(1) says everything;\n"
	    "# `tend help config` lists every key. Try `tend plan`, then\n"
	    "# `tend sync`; `tend watch` follows the sources as they change.\n"
	    "\n"
	    "# [tend]\n"
	    "#\tdebounce = 20ms      # the agent waits this long after a "
	    "change\n"
	    "#\tstate = .tend        # the tracking store\n"
	    "\n"
	    "# One [app] per source tree: what each source file declares "
	    "(a copy,\n"
	    "# or what `exec COMMAND` prints for it) and the target it goes "
	    "to.\n");
	if (!src)
		tend_buf_puts(b, "# (no folder here yet: make one, e.g. "
				 "mkdir src, and name it below)\n");
	tend_buf_printf(b,
	    "[app \"%s\"]\n"
	    "\tsource = %s\n"
	    "\ttarget = dir:%s\n"
	    "# instead of a copy, what a command prints for each file:\n"
	    "#\tdeclare = exec sed s/^/x:/\n"
	    "# only these sources (** spans directories):\n"
	    "#\tinclude = *.md\n"
	    "# the target holds only what is declared; the rest is "
	    "removed:\n"
	    "#\texclusive = true\n",
	    src ? src : "site", src ? src : "src", target);
	if (git)
		tend_buf_printf(b,
		    "\n"
		    "# This is a git repository: the same sources committed to "
		    "a branch\n"
		    "# of their own (never a checked-out one), one commit per "
		    "pass.\n"
		    "#[app \"pages\"]\n"
		    "#\tsource = %s\n"
		    "#\ttarget = git:.git\n"
		    "#\tref = refs/heads/pages\n"
		    "#\ttag = latest\n"
		    "# (and keep tend's own files out of the repository: "
		    ".tend/ and the\n# dir target above in .gitignore)\n",
		    src ? src : "src");
}

/* Write it all and close fd (whatever happens); false on any failure. */
static bool
write_all(int fd, const struct tend_buf *b)
{
	bool ok = write(fd, b->ptr, b->len) == (ssize_t)b->len;

	if (close(fd) != 0)
		ok = false;
	return ok;
}

int
cmd_init(struct cli *c)
{
	const char *dir = c->napps ? c->apps[0] : c->dir ? c->dir : ".";
	struct tend_buf path = TEND_BUF_INIT, text = TEND_BUF_INIT;
	struct stat st;
	int fd, rc = 0;

	if (c->napps > 1)
		die_usage("init takes one directory");
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		say_error("init: %s: %s", dir,
		    errno ? strerror(errno) : "not a directory");
		return EXIT_USAGE;
	}
	tend_buf_printf(&path, "%s/tend.conf", dir);
	char *src = pick_source(dir);
	put_template(&text, src, pick_target(dir), is_dir(dir, ".git"));
	/* O_EXCL: never over a tend.conf, not even one made meanwhile */
	fd = open(path.ptr, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		say_error("init: %s: %s", path.ptr, errno == EEXIST
			? "already exists: tend init never overwrites it"
			: strerror(errno));
		rc = EXIT_USAGE;
	} else if (!write_all(fd, &text)) {
		say_error("init: write %s: %s", path.ptr, strerror(errno));
		unlink(path.ptr);
		rc = EXIT_FAIL;
	} else if (!c->quiet)
		printf("wrote %s (source %s); next: tend%s%s plan\n",
		    path.ptr, src ? src : "(none yet)",
		    strcmp(dir, ".") ? " -C " : "", strcmp(dir, ".") ? dir : "");
	free(src);
	tend_buf_release(&path);
	tend_buf_release(&text);
	return rc;
}
