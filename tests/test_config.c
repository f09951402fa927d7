/*
 * test_config.c - tend.conf parsing from buffers: syntax, every key's
 * validation, diagnostics with file:line, key and suggestion, all at once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"

static int
parse(const char *text, struct tend_config *cfg, char **errs)
{
	struct tend_diags d = {0};
	int rc = tend_config_parse(text, strlen(text), "tend.conf", cfg, &d);

	*errs = tend_diags_format(&d);
	tend_diags_finish(&d);
	return rc;
}

static void
parses_the_product_example(void **state)
{
	const char *text =
	    "[tend]\n"
	    "\tstate = .tend              # tracking store\n"
	    "\tdebounce = 20ms\n"
	    "\n"
	    "[app \"site\"]                   # markdown -> html\n"
	    "\tsource = docs\n"
	    "\tinclude = *.md\n"
	    "\tinclude = **/*.markdown\n"
	    "\texclude = drafts/**        ; repeatable\n"
	    "\tgitignore = true\n"
	    "\tdeclare = exec pandoc -f markdown -t html\n"
	    "\tname = {dir}/{stem}.html\n"
	    "\ttarget = dir:public\n"
	    "\tfile-mode = 0644\n"
	    "\texclusive = false\n"
	    "[app \"pages\"]\n"
	    "\tsource = public\n"
	    "\ttarget = git:.\n"
	    "\tref = refs/heads/pages\n"
	    "\tmessage = \"tend: sync {app} # not a comment\"\n"
	    "\ttag = pages-latest\n";
	struct tend_config cfg;
	char *errs;

	(void)state;
	assert_int_equal(parse(text, &cfg, &errs), 0);
	assert_string_equal(errs, "");
	assert_string_equal(cfg.state, ".tend");
	assert_int_equal(cfg.debounce_ms, 20);
	assert_int_equal(cfg.napps, 2);
	struct tend_app_config *a = &cfg.apps[0];
	assert_string_equal(a->name, "site");
	assert_string_equal(a->source, "docs");
	assert_int_equal(a->include.n, 2);
	assert_string_equal(a->include.v[1], "**/*.markdown");
	assert_string_equal(a->exclude.v[0], "drafts/**");
	assert_int_equal(a->declare, TEND_DECLARE_EXEC);
	assert_string_equal(a->declare_arg, "pandoc -f markdown -t html");
	assert_string_equal(a->name_tmpl, "{dir}/{stem}.html");
	assert_int_equal(a->target, TEND_TARGET_DIR);
	assert_string_equal(a->target_path, "public");
	assert_int_equal(a->file_mode, 0644);
	assert_false(a->exclusive);
	struct tend_app_config *b = &cfg.apps[1];
	assert_int_equal(b->target, TEND_TARGET_GIT);
	assert_string_equal(b->message, "tend: sync {app} # not a comment");
	assert_int_equal(b->tags.n, 1);
	assert_int_equal(b->declare, TEND_DECLARE_COPY);
	free(errs);
	tend_config_finish(&cfg);
}

static void
typo_names_line_key_and_suggestion(void **state)
{
	const char *text = "[app \"a\"]\n"
			   "\tsource = src\n"
			   "\ttraget = dir:out\n";
	struct tend_config cfg;
	char *errs;

	(void)state;
	assert_int_equal(parse(text, &cfg, &errs), -1);
	assert_non_null(strstr(errs,
	    "tend.conf:3: app.a.traget: unknown key; did you mean "
	    "\"target\"?"));
	/* and the missing target is reported too: all errors at once */
	assert_non_null(strstr(errs, "tend.conf:1: app.a: missing \"target\""));
	free(errs);
}

static void
every_bad_value_is_reported(void **state)
{
	const char *text = "[tend]\n"
			   "debounce = soon\n"
			   "[app \"a\"]\n"
			   "source = /abs\n"
			   "target = ftp:x\n"
			   "file-mode = 999\n"
			   "exclusive = maybe\n"
			   "declare = run it\n"
			   "max-delete = -3\n"
			   "[weird]\n";
	struct tend_config cfg;
	char *errs;
	const char *want[] = {
	    "tend.conf:2: tend.debounce: expected a duration",
	    "tend.conf:5: app.a.target: unknown target type \"ftp\"",
	    "tend.conf:6: app.a.file-mode: expected an octal mode",
	    "tend.conf:7: app.a.exclusive: expected a boolean",
	    "tend.conf:8: app.a.declare: expected copy, exec CMD",
	    "tend.conf:9: app.a.max-delete: expected a whole number",
	    ("tend.conf:10: unknown section [weird] (there are [tend], [app "
	     "\"NAME\"] and [plugin \"TYPE\"])"),
	    "source must be relative",
	};

	(void)state;
	assert_int_equal(parse(text, &cfg, &errs), -1);
	for (size_t i = 0; i < sizeof want / sizeof *want; i++)
		if (!strstr(errs, want[i]))
			fail_msg("missing \"%s\" in:\n%s", want[i], errs);
	free(errs);
}

static void
syntax_errors_have_lines(void **state)
{
	struct tend_config cfg;
	char *errs;

	(void)state;
	assert_int_equal(parse("[app \"x\n", &cfg, &errs), -1);
	assert_non_null(strstr(errs, "tend.conf:1: unterminated subsection"));
	free(errs);
	assert_int_equal(parse("[tend]\nstate = \"open\n", &cfg, &errs), -1);
	assert_non_null(strstr(errs, "tend.conf:2: tend.state: unterminated"));
	free(errs);
	assert_int_equal(parse("state = x\n", &cfg, &errs), -1);
	assert_non_null(strstr(errs, "key outside of any section"));
	free(errs);
	assert_int_equal(parse("[tend]\nstate = \"a\\q\"\n", &cfg, &errs), -1);
	assert_non_null(strstr(errs, "unknown escape"));
	free(errs);
}

static void
quoting_escapes_and_continuations(void **state)
{
	/* (not an exec value: quotes inside one are refused, below) */
	const char *text = "[app \"a\"]\n"
			   "source = src\n"
			   "target = git:repo\n"
			   "message = printf \"%s\\n\" \\\n"
			   "   more\n";
	struct tend_config cfg;
	char *errs;

	(void)state;
	assert_int_equal(parse(text, &cfg, &errs), 0);
	assert_string_equal(cfg.apps[0].message, "printf %s\n    more");
	free(errs);
	tend_config_finish(&cfg);
}

/* Every diagnostic wanted is in errs, and there are `n` of them. */
static void
want_errs(const char *text, const char *const *want, size_t nwant, size_t n)
{
	struct tend_config cfg;
	char *errs;
	size_t lines = 0;

	assert_int_equal(parse(text, &cfg, &errs), -1);
	for (size_t i = 0; i < nwant; i++)
		if (!strstr(errs, want[i]))
			fail_msg("missing \"%s\" in:\n%s", want[i], errs);
	for (const char *p = errs; (p = strchr(p, '\n')); p++)
		lines++;
	if (lines != n)
		fail_msg("%zu diagnostics, want %zu:\n%s", lines, n, errs);
	free(errs);
}

static void
parses_ok(const char *text)
{
	struct tend_config cfg;
	char *errs;

	if (parse(text, &cfg, &errs) != 0)
		fail_msg("refused:\n%s", errs);
	free(errs);
	tend_config_finish(&cfg);
}

/* issue 15: apps whose targets overlap overwrote each other's entries */
static void
overlapping_targets_name_both_apps(void **state)
{
	(void)state;
	const char *nested[] = {
	    "tend.conf:6: app.b.target: dir:out/sub is inside dir:out, the "
	    "target of app \"a\" (tend.conf:3)",
	    "(e.g. dir:out/a and dir:out/b)"};
	want_errs("[app \"a\"]\n"
		  "\tsource = s1\n"
		  "\ttarget = dir:out\n"
		  "[app \"b\"]\n"
		  "\tsource = s2\n"
		  "\ttarget = dir:out/sub\n",
	    nested, 2, 1);
	/* the other way round, and written oddly: the same place */
	const char *holds[] = {
	    "tend.conf:5: app.b.target: dir:./x/../out holds dir:out//sub/., "
	    "the target of app \"a\" (tend.conf:2)",
	    "(e.g. dir:out/a and dir:out/b)"};
	want_errs("[app \"a\"]\n\ttarget = dir:out//sub/.\n\tsource = s1\n"
		  "[app \"b\"]\n\ttarget = dir:./x/../out\n\tsource = s2\n",
	    holds, 2, 1);
	/* a line not set by a key: the header's */
	const char *file[] = {
	    "tend.conf:8: app.b.target: file:out/a.md is inside dir:out, the "
	    "target of app \"a\" (tend.conf:3)"};
	want_errs("[app \"a\"]\n"
		  "\tsource = s1\n"
		  "\ttarget = dir:out\n"
		  "[app \"b\"]\n"
		  "\tsource = s2\n"
		  "\tdeclare = exec cat\n"
		  "\n"
		  "\ttarget = file:out/a.md\n",
	    file, 1, 1);
	const char *files[] = {
	    "tend.conf:7: app.b.target: file:all.txt is file:./all.txt, the "
	    "target of app \"a\" (tend.conf:3)"};
	want_errs("[app \"a\"]\n"
		  "\tsource = s1\n"
		  "\ttarget = file:./all.txt\n"
		  "\tdeclare = exec cat\n"
		  "[app \"b\"]\n"
		  "\tsource = s2\n"
		  "\ttarget = file:all.txt\n"
		  "\tdeclare = exec cat\n",
	    files, 1, 1);
	/* side by side is fine, and so is a name that only starts alike */
	parses_ok("[app \"a\"]\n\tsource = s1\n\ttarget = dir:out/a\n"
		  "[app \"b\"]\n\tsource = s2\n\ttarget = dir:out/b\n"
		  "[app \"c\"]\n\tsource = s2\n\ttarget = dir:out/a-c\n"
		  "[app \"d\"]\n\tsource = s2\n\ttarget = file:out/d.txt\n"
		  "\tdeclare = exec cat\n");
}

static void
git_apps_overlap_on_one_ref(void **state)
{
	(void)state;
	const char *want[] = {
	    "tend.conf:10: app.b.prefix: prefix \"site/x/\" of "
	    "refs/heads/pages in git:./repo/.git is inside prefix \"site\" of "
	    "app \"a\" (tend.conf:5)",
	    "tend.conf:13: app.c.ref: the whole tree of refs/heads/pages in "
	    "git:repo holds prefix \"site\" of app \"a\" (tend.conf:5)"};
	want_errs("[app \"a\"]\n"
		  "\tsource = src\n"
		  "\ttarget = git:repo\n"
		  "\tref = refs/heads/pages\n"
		  "\tprefix = site\n"
		  "[app \"b\"]\n"
		  "\tsource = src\n"
		  "\ttarget = git:./repo/.git\n"
		  "\tref = refs/heads/pages\n"
		  "\tprefix = site/x/\n"
		  "[app \"c\"]\n"
		  "\tsource = src\n"
		  "\tref = refs/heads/pages\n"
		  "\ttarget = git:repo\n",
	    want, 2, 2);
	/* other refs, other repositories, prefixes side by side, and a dir
	 * target inside the repository's working tree */
	parses_ok("[app \"a\"]\n\tsource = src\n\ttarget = git:repo\n"
		  "\tref = refs/heads/pages\n"
		  "[app \"b\"]\n\tsource = src\n\ttarget = git:repo\n"
		  "\tref = refs/heads/other\n"
		  "[app \"c\"]\n\tsource = src\n\ttarget = git:repo2\n"
		  "\tref = refs/heads/pages\n"
		  "[app \"d\"]\n\tsource = src\n\ttarget = git:repo2\n"
		  "\tref = refs/heads/tend\n\tprefix = site/a\n"
		  "[app \"e\"]\n\tsource = src\n\ttarget = git:repo2\n"
		  "\tprefix = site/b\n"
		  "[app \"f\"]\n\tsource = src\n\ttarget = dir:repo/out\n");
}

/* a new user's trial: [ap "a"] gave three errors (one per key) and no
 * hint */
static void
a_typo_of_a_section_is_named_once(void **state)
{
	(void)state;
	const char *want[] = {
	    "tend.conf:1: unknown section [ap]; did you mean [app]?"};
	want_errs("[ap \"a\"]\n"
		  "\tsource = src\n"
		  "\ttarget = dir:out\n",
	    want, 1, 1);
}

/* a new user's trial: git keys on a dir: target were taken without a
 * word, and ref = refs/tags/X committed onto the user's tag X */
static void
git_keys_need_a_git_target(void **state)
{
	(void)state;
	const char *want[] = {
	    "tend.conf:4: app.a.prefix: prefix is a key of git: targets; this "
	    "app's target is a directory (tend.conf:3)",
	    "tend.conf:8: app.b.tag: tag is a key of git: targets; this app's "
	    "target is a file (tend.conf:7)",
	    "tend.conf:14: app.c.ref: refs/tags/v1 is a tag: tend commits to "
	    "a branch (refs/heads/...) and keeps tags on its commits with tag "
	    "= NAME"};
	want_errs("[app \"a\"]\n"
		  "\tsource = src\n"
		  "\ttarget = dir:out\n"
		  "\tprefix = site\n"
		  "\tmessage = hi\n"
		  "[app \"b\"]\n"
		  "\ttarget = file:f.txt\n"
		  "\ttag = v1\n"
		  "\tsource = src\n\tdeclare = exec cat\n"
		  "[app \"c\"]\n"
		  "\tsource = src\n"
		  "\ttarget = git:repo\n"
		  "\tref = refs/tags/v1\n",
	    want, 3, 3);
	parses_ok("[app \"a\"]\n\tsource = src\n\ttarget = git:repo\n"
		  "\tprefix = site\n\ttag = v1\n\tmessage = hi\n"
		  "\tref = refs/heads/tags/x\n");
}

static void
feedback_loops_are_refused(void **state)
{
	(void)state;
	const char *own[] = {
	    "tend.conf:3: app.a.target: dir:src/ is the app's own source "
	    "\"src\" (tend.conf:2)",
	    "tend.conf:6: app.b.target: dir:docs holds the app's own source "
	    "\"docs/in\" (tend.conf:5)"};
	want_errs("[app \"a\"]\n\tsource = src\n\ttarget = dir:src/\n"
		  "[app \"b\"]\n\tsource = docs/in\n\ttarget = dir:docs\n",
	    own, 2, 2);
	const char *two[] = {
	    "tend.conf:3: app.a.target: dir:outa is inside the source \".\" "
	    "of app \"b\" (tend.conf:5), whose target dir:outb is inside the "
	    "source \".\" of this app (tend.conf:2): a feedback loop"};
	want_errs("[app \"a\"]\n\tsource = .\n\ttarget = dir:outa\n"
		  "[app \"b\"]\n\tsource = .\n\ttarget = dir:outb\n",
	    two, 1, 1);
	const char *three[] = {
	    "tend.conf:3: app.a.target: dir:docs/a is inside the source "
	    "\"docs\" of app \"b\" (tend.conf:5), whose target dir:x is the "
	    "source \"x\" of app \"c\" (tend.conf:8), whose target dir:src/c "
	    "is inside the source \"src\" of this app (tend.conf:2)"};
	want_errs("[app \"a\"]\n\tsource = src\n\ttarget = dir:docs/a\n"
		  "[app \"b\"]\n\tsource = docs\n\ttarget = dir:x\n"
		  "[app \"c\"]\n\tsource = x\n\ttarget = dir:src/c\n",
	    three, 1, 1);
	/* a target inside its own source is skipped by the walk; a chain
	 * that does not come back is a pipeline */
	parses_ok("[app \"root\"]\n\tsource = .\n\ttarget = dir:out\n"
		  "[app \"html\"]\n\tsource = docs\n\ttarget = dir:public\n"
		  "[app \"pages\"]\n\tsource = public\n\ttarget = git:.\n");
}

/* with the workspace directory, a symbolic link and its directory are
 * one place */
static void
symlinked_targets_overlap(void **state)
{
	char root[] = "/tmp/tend-config-XXXXXX", path[64];
	const char *text = "[app \"a\"]\n\tsource = s1\n\ttarget = dir:out\n"
			   "[app \"b\"]\n\tsource = s2\n"
			   "\ttarget = dir:link/sub\n";
	struct tend_config cfg;
	struct tend_diags d = {0};

	(void)state;
	assert_non_null(mkdtemp(root));
	snprintf(path, sizeof path, "%s/out", root);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof path, "%s/link", root);
	assert_int_equal(symlink("out", path), 0);
	assert_int_equal(tend_config_parse(text, strlen(text), "tend.conf",
			     &cfg, &d), 0);
	tend_config_finish(&cfg);
	assert_int_equal(tend_config_parse_in(text, strlen(text), "tend.conf",
			     root, &cfg, &d), -1);
	char *errs = tend_diags_format(&d);
	assert_non_null(strstr(errs, "tend.conf:6: app.b.target: dir:link/sub "
				     "is inside dir:out, the target of app "
				     "\"a\" (tend.conf:3)"));
	free(errs);
	tend_diags_finish(&d);
	unlink(path);
	snprintf(path, sizeof path, "%s/out", root);
	rmdir(path);
	rmdir(root);
}

/* a bad ref failed at sync time, exit 1, naming an internal component */
static void
git_ref_and_tag_names_are_checked(void **state)
{
	static const char *const bad[] = {"pages", "heads/pages",
	    "refs/heads/a..b", "refs/heads/.x", "refs/heads/x.lock",
	    "refs/heads/x.", "refs/heads/x/", "refs//x", "refs/heads/a b",
	    "refs/heads/a~1", "refs/heads/a^", "refs/heads/a:b",
	    "refs/heads/a?", "refs/heads/a*", "refs/heads/a[",
	    "refs/heads/a\\\\b", "refs/heads/a@{1}"};
	static const char *const good[] = {"refs/heads/tend",
	    "refs/heads/feature/x-1", "refs/tend/v1.0", "refs/pages",
	    "refs/heads/a@b"};
	char text[256], want[256];

	(void)state;
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		snprintf(text, sizeof text,
		    "[app \"g\"]\nsource = s\ntarget = git:r\nref = %s\n", bad[i]);
		snprintf(want, sizeof want, "tend.conf:4: app.g.ref: \"");
		const char *w[] = {want, "\" is not a valid git ref"};
		want_errs(text, w, 2, 1);
	}
	for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
		snprintf(text, sizeof text,
		    "[app \"g\"]\nsource = s\ntarget = git:r\nref = %s\n",
		    good[i]);
		parses_ok(text);
	}
	const char *tag[] = {"tend.conf:5: app.g.tag: \"a b\" is not a valid "
			     "git tag name"};
	want_errs("[app \"g\"]\nsource = s\ntarget = git:r\ntag = ok\n"
		  "tag = \"a b\"\n",
	    tag, 1, 1);
}

/* issue 15: `;` and `#` cut an exec command without a word */
static void
exec_cut_by_a_comment_is_refused(void **state)
{
	(void)state;
	const char *semi[] = {
	    "tend.conf:4: app.a.declare: the command is cut at ';'",
	    "the shell would run \"sed 's/a/b/\" (with a ' left open)",
	    "e.g. declare = \"exec sed 's/a/b/;s/c/d/'\""};
	want_errs("[app \"a\"]\n\tsource = src\n\ttarget = dir:out\n"
		  "\tdeclare = exec sed 's/a/b/;s/c/d/'\n",
	    semi, 3, 1);
	const char *hash[] = {
	    "tend.conf:3: app.a.declare: the command is cut at '#'",
	    "the shell would run \"foo\";"};
	want_errs("[app \"a\"]\n\tsource = src\n\tdeclare = exec foo # bar\n"
		  "\ttarget = dir:out\n",
	    hash, 2, 1);
	/* no comment, but a quote left open */
	const char *open[] = {"tend.conf:2: app.a.declare: the command "
			      "\"tr \"a b\" leaves a \" open"};
	want_errs("[app \"a\"]\n\tdeclare = exec tr \\\"a b\n"
		  "\tsource = src\n\ttarget = dir:out\n",
	    open, 1, 1);
	/* quotes of tend.conf inside an unquoted command: eaten before the
	 * shell sees it */
	const char *eaten[] = {"tend.conf:2: app.a.declare: the double quotes "
			       "in this exec value are tend.conf's quoting",
	    "the shell would run \"grep a b\""};
	want_errs("[app \"a\"]\n\tdeclare = exec grep \"a b\"\n"
		  "\tsource = src\n\ttarget = dir:out\n",
	    eaten, 2, 1);
	/* the advice works: the whole value in double quotes, with \" and
	 * \\, and then a comment after it is no cut */
	struct tend_config cfg;
	char *errs;
	const char *ok = "[app \"a\"]\n\tsource = src  # comment\n"
			 "\tinclude = *.md  ; markdown\n"
			 "\ttarget = dir:out\n"
			 "\tdeclare = \"exec sed 's/a/b/;s/c/d/' | tr -d \\\"\\\\\\\\\\\"\" "
			 "# quoted\n";
	assert_int_equal(parse(ok, &cfg, &errs), 0);
	assert_string_equal(cfg.apps[0].declare_arg,
	    "sed 's/a/b/;s/c/d/' | tr -d \"\\\\\"");
	assert_string_equal(cfg.apps[0].include.v[0], "*.md");
	assert_string_equal(cfg.apps[0].source, "src");
	free(errs);
	tend_config_finish(&cfg);
}

/* a line with several bad escapes said so once per escape */
static void
bad_escapes_are_reported_once_a_line(void **state)
{
	(void)state;
	const char *want[] = {"tend.conf:2: app.a.declare: unknown escape \\q"};
	want_errs("[app \"a\"]\n\tdeclare = exec tr a\\q\\w\\e b\n"
		  "\tsource = src\n\ttarget = dir:out\n",
	    want, 1, 1);
}

static void
defaults_are_set(void **state)
{
	struct tend_config cfg;
	char *errs;

	(void)state;
	assert_int_equal(parse("[app \"a\"]\nsource=s\ntarget=dir:o\n", &cfg,
			     &errs), 0);
	struct tend_app_config *a = &cfg.apps[0];
	assert_true(a->gitignore);
	assert_int_equal(a->declare, TEND_DECLARE_COPY);
	assert_int_equal(a->timeout_ms, 30000);
	assert_int_equal(a->max_delete, -1);
	assert_int_equal(cfg.max_delay_ms, 1000);
	assert_string_equal(a->ref, "refs/heads/tend");
	free(errs);
	tend_config_finish(&cfg);
	char *desc = tend_config_describe();
	assert_non_null(strstr(desc, "file-mode"));
	free(desc);
}

static void
durations_parse(void **state)
{
	(void)state;
	assert_int_equal(tend_config_parse_duration("20ms"), 20);
	assert_int_equal(tend_config_parse_duration("1s"), 1000);
	assert_int_equal(tend_config_parse_duration("1.5s"), 1500);
	assert_int_equal(tend_config_parse_duration("2m"), 120000);
	assert_int_equal(tend_config_parse_duration("0"), 0);
	/* found by fuzz-config: out of range was a UB cast, not an error */
	assert_int_equal(tend_config_parse_duration("27777777777777777777s"), -1);
	assert_int_equal(tend_config_parse_duration("1e400"), -1);
	assert_int_equal(tend_config_parse_duration("nan"), -1);
	assert_int_equal(tend_config_parse_duration("inf"), -1);
	assert_int_equal(tend_config_parse_duration("25h"), -1);
	assert_int_equal(tend_config_parse_duration("24h"), 86400000);
	assert_int_equal(tend_config_parse_duration("x"), -1);
	assert_int_equal(tend_config_parse_duration("5 s"), -1);
}

/* [plugin] sections add target types; a plugin target's other keys are
 * kept for the plugin to check; anyone else's unknown keys are errors */
static void
plugin_targets_and_their_keys(void **state)
{
	const char *text = "[plugin \"sqlite\"]\n"
			   "\tpath = plugins/tend-sqlite.so\n"
			   "[app \"notes\"]\n"
			   "\ttable = notes\n"
			   "\tsource = notes\n"
			   "\ttarget = sqlite:notes.db\n"
			   "\trecreate = true\n";
	struct tend_config cfg;
	char *errs;

	(void)state;
	assert_int_equal(parse(text, &cfg, &errs), 0);
	free(errs);
	assert_int_equal(cfg.nplugins, 1);
	assert_string_equal(cfg.plugins[0].name, "sqlite");
	assert_string_equal(cfg.plugins[0].path, "plugins/tend-sqlite.so");
	assert_int_equal(cfg.apps[0].target, TEND_TARGET_PLUGIN);
	assert_string_equal(cfg.apps[0].target_type, "sqlite");
	assert_string_equal(cfg.apps[0].target_path, "notes.db");
	assert_int_equal(cfg.apps[0].npkeys, 2);
	assert_string_equal(cfg.apps[0].pkeys[0].key, "table");
	assert_string_equal(cfg.apps[0].pkeys[0].value, "notes");
	assert_int_equal(cfg.apps[0].pkeys[0].line, 4);
	assert_string_equal(cfg.apps[0].pkeys[1].key, "recreate");
	tend_config_finish(&cfg);

	const char *bad = "[plugin \"sqlite\"]\n"
			  "\tfile = x.so\n"
			  "[app \"a\"]\n"
			  "\tsource = a\n"
			  "\ttarget = dir:out\n"
			  "\ttable = t\n"
			  "\texclusiv = true\n"
			  "[app \"b\"]\n"
			  "\tsource = b\n"
			  "\ttarget = mysql:db\n"
			  "[plugin]\n";
	const char *want[] = {
	    "tend.conf:2: plugin.sqlite.file: unknown key",
	    "tend.conf:1: plugin.sqlite: missing \"path\"",
	    "tend.conf:6: app.a.table: unknown key",
	    "tend.conf:7: app.a.exclusiv: unknown key; did you mean \"exclusive\"?",
	    "tend.conf:10: app.b.target: unknown target type \"mysql\"",
	    "tend.conf:11: [plugin] needs a name",
	};
	assert_int_equal(parse(bad, &cfg, &errs), -1);
	for (size_t i = 0; i < sizeof want / sizeof *want; i++)
		if (!strstr(errs, want[i]))
			fail_msg("missing \"%s\" in:\n%s", want[i], errs);
	free(errs);
}

/* one tag, one app: two apps of a repository keeping one tag move it
 * back and forth */
static void
a_tag_belongs_to_one_app(void **state)
{
	const char *text = "[app \"a\"]\n"
			   "\tsource = a\n"
			   "\ttarget = git:repo.git\n"
			   "\tref = refs/heads/a\n"
			   "\ttag = latest\n"
			   "[app \"b\"]\n"
			   "\tsource = b\n"
			   "\ttarget = git:./repo.git\n"
			   "\tref = refs/heads/b\n"
			   "\ttag = v1\n"
			   "\ttag = latest\n"
			   "[app \"c\"]\n"
			   "\tsource = c\n"
			   "\ttarget = git:other.git\n"
			   "\ttag = latest\n";
	struct tend_config cfg;
	char *errs;

	(void)state;
	assert_int_equal(parse(text, &cfg, &errs), -1);
	/* each side named by its tag line (a new user's trial: the
	 * other app was named by its section's line) */
	if (!strstr(errs, "tend.conf:11: app.b.tag: tag \"latest\" in git:./repo.git "
			  "is also kept by app \"a\" (tend.conf:5)"))
		fail_msg("not refused:\n%s", errs);
	if (strstr(errs, "app.c.tag") || strstr(errs, "\"v1\""))
		fail_msg("refused too much:\n%s", errs);
	free(errs);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parses_the_product_example),
		cmocka_unit_test(typo_names_line_key_and_suggestion),
		cmocka_unit_test(every_bad_value_is_reported),
		cmocka_unit_test(syntax_errors_have_lines),
		cmocka_unit_test(quoting_escapes_and_continuations),
		cmocka_unit_test(defaults_are_set),
		cmocka_unit_test(durations_parse),
		cmocka_unit_test(overlapping_targets_name_both_apps),
		cmocka_unit_test(git_apps_overlap_on_one_ref),
		cmocka_unit_test(git_keys_need_a_git_target),
		cmocka_unit_test(a_typo_of_a_section_is_named_once),
		cmocka_unit_test(feedback_loops_are_refused),
		cmocka_unit_test(symlinked_targets_overlap),
		cmocka_unit_test(git_ref_and_tag_names_are_checked),
		cmocka_unit_test(exec_cut_by_a_comment_is_refused),
		cmocka_unit_test(bad_escapes_are_reported_once_a_line),
		cmocka_unit_test(plugin_targets_and_their_keys),
		cmocka_unit_test(a_tag_belongs_to_one_app),
	};

	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
