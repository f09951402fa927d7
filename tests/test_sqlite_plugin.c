/*
 * test_sqlite_plugin.c - the SQLite connector plugin (examples/sqlite),
 * loaded the way tend loads a [plugin] section: dlopen the .so named by
 * TEND_SQLITE_PLUGIN, look up tend_connector_sqlite, register its root on
 * an engine. No tend.conf: each pass mounts the container from what
 * plugin->container() makes of the app's key values, then declares rows
 * as entries encoded exactly as tend encodes them (tend_fs_encode_entry).
 * What the table holds is read back with SQLite itself.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "check.h"
#include "fs.h"
#include "tend/buf.h"
#include "tend/plugin.h"
#include "tend/status.h"

/* What the plugin's failpoints do in this process (parsed once, before
 * the first pass): each is aimed at one test's database, table or row. */
#define FAILPOINTS                                                    \
	"sqlite-commit~flaky.db@1,sqlite-put~notes/bad@1,"             \
	"sqlite-put~notes/boom=kill,sqlite-table~tablefail@1"

static const struct tend_connector_plugin *plugin;

enum { V_TABLE, V_CONTENT, V_RECREATE, V_BUSY, NV };

struct row {
	char name[64];
	char content[128];
	bool link;
};

struct fx {
	char dir[256], ws[300], state[300], src[300];
	struct tend_engine *eng;
	const char *values[NV];
	const char *arg;
	bool mount;
	struct row rows[16];
	size_t nrows;
	unsigned seq;
	/* row (not container) events of the last pass */
	unsigned planned, applied, failed;
	char error[512]; /* the last failed action's message */
	struct tend_stats st;
	struct tend_buf drift;
};

#define F ((struct fx *)*state)

#define ASSERT_OK(x)                                                     \
	do {                                                             \
		int rc_ = (x);                                           \
		if (rc_)                                                 \
			fail_msg("%s = %d: %s", #x, rc_, tend_error_last()); \
	} while (0)

/* ---- the fixture ---- */

static void
on_event(const struct tend_event *ev, void *arg)
{
	struct fx *f = arg;

	if (ev->container)
		return;
	if (ev->kind == TEND_EV_ACTION_PLANNED)
		f->planned++;
	else if (ev->kind == TEND_EV_ACTION_APPLIED)
		f->applied++;
	else if (ev->kind == TEND_EV_ACTION_FAILED) {
		f->failed++;
		snprintf(f->error, sizeof f->error, "%s",
		    ev->error ? ev->error : "");
	}
}

static struct tend_engine *
engine_open(struct fx *f)
{
	struct tend_engine *eng;

	if (tend_engine_open(&eng, f->state, NULL))
		return NULL;
	tend_engine_set_resource(eng, "workspace", f->ws);
	tend_engine_subscribe(eng,
	    TEND_EV_MASK(TEND_EV_ACTION_PLANNED) |
		TEND_EV_MASK(TEND_EV_ACTION_APPLIED) |
		TEND_EV_MASK(TEND_EV_ACTION_FAILED),
	    on_event, f);
	if (plugin->register_root(eng)) {
		tend_engine_close(eng);
		return NULL;
	}
	return eng;
}

static int
setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);

	snprintf(f->dir, sizeof f->dir, "%s/tend-sqlite-XXXXXX",
	    getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->ws, sizeof f->ws, "%s/ws", f->dir);
	snprintf(f->state, sizeof f->state, "%s/state", f->dir);
	snprintf(f->src, sizeof f->src, "%s/src", f->dir);
	mkdir(f->ws, 0755);
	mkdir(f->src, 0755);
	f->values[V_TABLE] = "notes";
	f->values[V_CONTENT] = "text";
	f->values[V_RECREATE] = "false";
	f->values[V_BUSY] = "5000";
	f->arg = "notes.db";
	f->mount = true;
	f->drift = (struct tend_buf)TEND_BUF_INIT;
	if (!(f->eng = engine_open(f)))
		return -1;
	*state = f;
	return 0;
}

static int
rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static int
teardown(void **state)
{
	struct fx *f = *state;

	tend_engine_close(f->eng);
	nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	tend_buf_release(&f->drift);
	free(f);
	return 0;
}

static void
set_row(struct fx *f, const char *name, const char *content)
{
	size_t i;

	for (i = 0; i < f->nrows; i++)
		if (strcmp(f->rows[i].name, name) == 0)
			break;
	assert_true(i < 16);
	if (i == f->nrows)
		f->nrows++;
	snprintf(f->rows[i].name, sizeof f->rows[i].name, "%s", name);
	snprintf(f->rows[i].content, sizeof f->rows[i].content, "%s",
	    content);
	f->rows[i].link = false;
}

static void
unset_row(struct fx *f, const char *name)
{
	for (size_t i = 0; i < f->nrows; i++)
		if (strcmp(f->rows[i].name, name) == 0) {
			f->rows[i] = f->rows[--f->nrows];
			return;
		}
	fail_msg("no row %s", name);
}

static struct tend_fp
stream_fp(const char *s)
{
	struct tend_hasher h;

	tend_hasher_init(&h);
	tend_hasher_begin_stream(&h);
	tend_hasher_raw(&h, s, strlen(s));
	return tend_hasher_final(&h);
}

/* The app's root component: the container, then a row per entry. */
static int
body(struct tend_comp *c, void *arg)
{
	struct fx *f = arg;
	struct tend_plugin_target t = {.app = "notes", .arg = f->arg,
	    .workspace = f->ws, .values = f->values, .nvalues = NV};
	struct tend_buf k = TEND_BUF_INIT, v = TEND_BUF_INIT;
	struct tend_provider *p;
	int rc;

	if (!f->mount)
		return 0;
	if ((rc = plugin->container(&t, &k, &v)) == 0) {
		struct tend_key key = tend_key_str(k.ptr);

		rc = tend_mount_target(c,
		    tend_engine_root(tend_comp_engine(c), plugin->root), &key,
		    v.ptr, v.len, &p);
	}
	tend_buf_release(&k);
	tend_buf_release(&v);
	for (size_t i = 0; rc == 0 && i < f->nrows; i++) {
		struct row *r = &f->rows[i];
		struct tend_entry_spec e = {0};
		struct tend_buf path = TEND_BUF_INIT, enc = TEND_BUF_INIT;
		struct tend_key key = tend_key_str(r->name);

		if (r->link) {
			/* as the walk declares a symbolic link */
			e.mode = S_IFLNK | 0777;
			e.src = r->content;
			e.fp = tend_fs_link_fp(r->content);
			e.size = strlen(r->content);
		} else {
			/* a source file of its own, as a copy or an exec
			 * declaration would stage it */
			int fd;

			tend_buf_printf(&path, "%s/%u", f->src, f->seq++);
			fd = open(path.ptr, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			if (fd < 0 || write(fd, r->content, strlen(r->content)) !=
					  (ssize_t)strlen(r->content))
				rc = tend_error_set(TEND_ERROR, "write %s",
				    path.ptr);
			if (fd >= 0)
				close(fd);
			e.mode = 0644;
			e.src = path.ptr;
			e.fp = stream_fp(r->content);
			e.size = strlen(r->content);
		}
		tend_fs_encode_entry(&enc, &e);
		if (rc == 0)
			rc = tend_declare(c, p, &key, enc.ptr, enc.len);
		tend_buf_release(&path);
		tend_buf_release(&enc);
	}
	return rc;
}

static int
run_opts(struct fx *f, bool full, bool preview)
{
	struct tend_pass_opts o = {.full = full, .preview = preview};

	f->planned = f->applied = f->failed = 0;
	f->error[0] = '\0';
	return tend_engine_run(f->eng, "notes", body, f, &o, &f->st);
}

static int
run(struct fx *f)
{
	return run_opts(f, false, false);
}

/* ---- what the database holds ---- */

static void
db_file(struct fx *f, char *out, size_t size)
{
	snprintf(out, size, "%s/%s", f->ws, f->arg);
}

static int
collect(void *arg, int n, char **vals, char **names)
{
	struct tend_buf *b = arg;

	(void)names;
	for (int i = 0; i < n; i++)
		tend_buf_printf(b, "%s%s", i ? "|" : "",
		    vals[i] ? vals[i] : "NULL");
	tend_buf_putc(b, '\n');
	return 0;
}

/* Every row of `sql`'s result, "a|b|c\n" each; "ERROR: ..." on error.
 * The caller frees. */
static char *
query(struct fx *f, const char *sql)
{
	char path[512];
	struct tend_buf b = TEND_BUF_INIT;
	sqlite3 *db;
	char *err = NULL;

	db_file(f, path, sizeof path);
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) !=
	    SQLITE_OK)
		tend_buf_printf(&b, "ERROR: open: %s", sqlite3_errmsg(db));
	else if (sqlite3_exec(db, sql, collect, &b, &err) != SQLITE_OK)
		tend_buf_printf(&b, "ERROR: %s", err);
	sqlite3_free(err);
	sqlite3_close(db);
	return tend_buf_detach(&b, NULL);
}

static void
exec_sql(struct fx *f, const char *sql)
{
	char path[512], *err = NULL;
	sqlite3 *db;

	db_file(f, path, sizeof path);
	assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE,
			     NULL),
	    SQLITE_OK);
	if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK)
		fail_msg("%s: %s", sql, err);
	sqlite3_close(db);
}

static int
cmp_row(const void *a, const void *b)
{
	return strcmp(((const struct row *)a)->name,
	    ((const struct row *)b)->name);
}

/*
 * What the table must hold for the declared rows: path, content, its
 * type, size and digest (tend's fingerprint of the bytes, in hex), by
 * path; without the content columns for content = none.
 */
static char *
expected(struct fx *f, const char *type)
{
	struct row rows[16];
	struct tend_buf b = TEND_BUF_INIT;

	memcpy(rows, f->rows, sizeof rows);
	qsort(rows, f->nrows, sizeof *rows, cmp_row);
	for (size_t i = 0; i < f->nrows; i++) {
		struct tend_fp fp = stream_fp(rows[i].content);

		tend_buf_puts(&b, rows[i].name);
		if (strcmp(type, "none") != 0)
			tend_buf_printf(&b, "|%s|%s", rows[i].content, type);
		tend_buf_printf(&b, "|%zu|", strlen(rows[i].content));
		tend_fp_hex(&b, &fp);
		tend_buf_putc(&b, '\n');
	}
	return tend_buf_detach(&b, NULL);
}

static void
assert_rows_(struct fx *f, const char *type, const char *file, int line)
{
	const char *sql = strcmp(type, "none") == 0
	    ? "SELECT path, size, digest FROM notes ORDER BY path"
	    : "SELECT path, content, typeof(content), size, digest FROM "
	      "notes ORDER BY path";
	char *got = query(f, sql), *want = expected(f, type);

	if (strcmp(got, want) != 0)
		fail_msg("%s:%d: table notes holds\n%swant\n%s", file, line,
		    got, want);
	free(got);
	free(want);
}
#define ASSERT_ROWS(f, type) assert_rows_(f, type, __FILE__, __LINE__)

static void
assert_query_(struct fx *f, const char *sql, const char *want,
    const char *file, int line)
{
	char *got = query(f, sql);

	if (strcmp(got, want) != 0)
		fail_msg("%s:%d: %s gives\n%swant\n%s", file, line, sql, got,
		    want);
	free(got);
}
#define ASSERT_QUERY(f, sql, want) \
	assert_query_(f, sql, want, __FILE__, __LINE__)

static char *
read_file(const char *path, size_t *len)
{
	struct tend_buf b = TEND_BUF_INIT;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(tend_buf_read_fd(&b, fd, SIZE_MAX), 0);
	close(fd);
	return tend_buf_detach(&b, len);
}

static void
on_drift(const struct tend_state_info *si, void *arg)
{
	struct tend_buf *b = arg;

	tend_buf_printf(b, "%s: %s\n", si->path, si->drift);
}

/* tend check: "path: why" per drifted state, in f->drift */
static unsigned
check(struct fx *f)
{
	unsigned n = 0;

	tend_buf_reset(&f->drift);
	ASSERT_OK(tend_engine_check(f->eng, "notes", on_drift, &f->drift, &n));
	return n;
}

/* ---- the plugin's declaration ---- */

static void
t_keys(void **state)
{
	(void)state;
	assert_int_equal(plugin->abi, TEND_CONNECTOR_ABI);
	assert_string_equal(plugin->type, "sqlite");
	assert_string_equal(plugin->root, "sqlite/table");
	assert_int_equal(plugin->nkeys, NV);
	assert_string_equal(plugin->keys[V_TABLE].name, "table");
	assert_string_equal(plugin->keys[V_CONTENT].name, "content");
	assert_int_equal(plugin->keys[V_CONTENT].change,
	    TEND_PKEY_CHANGE_LOSSY);
	assert_string_equal(plugin->keys[V_RECREATE].name, "recreate");
	assert_int_equal(plugin->keys[V_RECREATE].type, TEND_PKEY_BOOL);
	assert_int_equal(plugin->keys[V_RECREATE].change,
	    TEND_PKEY_CHANGE_DESTRUCTIVE);
	assert_string_equal(plugin->keys[V_BUSY].name, "busy-timeout");
	assert_int_equal(plugin->keys[V_BUSY].type, TEND_PKEY_INTEGER);
	for (size_t i = 0; i < plugin->nkeys; i++) {
		assert_non_null(plugin->keys[i].def); /* none required */
		assert_non_null(plugin->keys[i].help);
	}
}

/* container(): the key names the file and the table; bad values are
 * refused with the key's name in the message */
static void
container_of(struct fx *f, const char *arg, struct tend_buf *key, int want,
    const char *msg)
{
	struct tend_plugin_target t = {.app = "notes", .arg = arg,
	    .workspace = f->ws, .values = f->values, .nvalues = NV};
	struct tend_buf v = TEND_BUF_INIT;
	int rc;

	tend_buf_reset(key);
	rc = plugin->container(&t, key, &v);
	if (rc != want)
		fail_msg("sqlite:%s: %d, want %d (%s)", arg, rc, want,
		    tend_error_last());
	if (msg && !strstr(tend_error_last(), msg))
		fail_msg("sqlite:%s: \"%s\" does not say \"%s\"", arg,
		    tend_error_last(), msg);
	tend_buf_release(&v);
}

static void
t_container(void **state)
{
	struct fx *f = F;
	struct tend_buf k = TEND_BUF_INIT, abs = TEND_BUF_INIT;

	container_of(f, "notes.db", &k, 0, NULL);
	assert_string_equal(k.ptr, "notes.db\tnotes");
	/* one file, one container, however it is spelled */
	container_of(f, "./data//notes.db", &k, 0, NULL);
	assert_string_equal(k.ptr, "data/notes.db\tnotes");
	tend_buf_printf(&abs, "%s/data/notes.db", f->ws);
	container_of(f, abs.ptr, &k, 0, NULL);
	assert_string_equal(k.ptr, "data/notes.db\tnotes");
	container_of(f, "/srv/notes.db", &k, 0, NULL);
	assert_string_equal(k.ptr, "/srv/notes.db\tnotes");
	container_of(f, "../notes.db", &k, TEND_EINVALID, "\"..\"");
	container_of(f, "", &k, TEND_EINVALID, "no database file");
	container_of(f, "data/", &k, TEND_EINVALID, "directory");
	/* the table defaults to the app's name */
	f->values[V_TABLE] = "";
	container_of(f, "notes.db", &k, 0, NULL);
	assert_string_equal(k.ptr, "notes.db\tnotes");
	f->values[V_TABLE] = "sqlite_master";
	container_of(f, "notes.db", &k, TEND_EINVALID, "SQLite's own");
	f->values[V_TABLE] = "notes";
	f->values[V_CONTENT] = "xml";
	container_of(f, "notes.db", &k, TEND_EINVALID, "content = xml");
	f->values[V_CONTENT] = "text";
	f->values[V_BUSY] = "-1";
	container_of(f, "notes.db", &k, TEND_EINVALID, "busy-timeout");
	f->values[V_BUSY] = "5000";
	tend_buf_release(&k);
	tend_buf_release(&abs);
}

/* ---- passes ---- */

static void
t_insert_then_noop(void **state)
{
	struct fx *f = F;
	char path[512];
	struct stat before, after;
	size_t len0, len1;

	set_row(f, "a.md", "alpha\n");
	set_row(f, "dir/b.txt", "beta");
	ASSERT_OK(run(f));
	assert_int_equal(f->applied, 2);
	ASSERT_ROWS(f, "text");
	ASSERT_QUERY(f,
	    "SELECT name, type, pk FROM pragma_table_info('notes') "
	    "ORDER BY cid",
	    "path|TEXT|1\ncontent||0\nsize|INTEGER|0\ndigest|TEXT|0\n");

	/* nothing changed: no row action at all, and the file is not
	 * written (its bytes and its mtime stay) */
	db_file(f, path, sizeof path);
	char *b0 = read_file(path, &len0);
	assert_int_equal(stat(path, &before), 0);
	ASSERT_OK(run(f));
	assert_int_equal(f->planned, 0);
	assert_int_equal(f->applied, 0);
	char *b1 = read_file(path, &len1);
	assert_int_equal(stat(path, &after), 0);
	assert_int_equal(len0, len1);
	assert_memory_equal(b0, b1, len0);
	assert_int_equal(before.st_mtim.tv_sec, after.st_mtim.tv_sec);
	assert_int_equal(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
	free(b0);
	free(b1);
	assert_int_equal(check(f), 0);
}

static void
t_update_and_delete(void **state)
{
	struct fx *f = F;

	set_row(f, "a.md", "alpha");
	set_row(f, "b.md", "beta");
	set_row(f, "c.md", "gamma");
	ASSERT_OK(run(f));
	set_row(f, "a.md", "alpha, changed");
	unset_row(f, "b.md");
	ASSERT_OK(run(f));
	/* one update, one delete; c untouched */
	assert_int_equal(f->planned, 2);
	assert_int_equal(f->applied, 2);
	ASSERT_ROWS(f, "text");
	ASSERT_OK(run(f));
	assert_int_equal(f->planned, 0);
}

/* content = text -> blob -> none -> text: the column set (or its type)
 * changes, the table is altered in place and every row written again;
 * a row somebody else wrote stays, its content too (going to none kept
 * the column: dropping it lost that content) */
static void
t_lossy_change(void **state)
{
	struct fx *f = F;

	set_row(f, "a.md", "alpha");
	set_row(f, "b.md", "beta");
	ASSERT_OK(run(f));
	exec_sql(f, "INSERT INTO notes VALUES ('zz-other', 'theirs', 6, 'x')");

	f->values[V_CONTENT] = "blob";
	ASSERT_OK(run(f));
	assert_int_equal(f->applied, 2);
	ASSERT_QUERY(f, "SELECT path, typeof(content) FROM notes ORDER BY path",
	    "a.md|blob\nb.md|blob\nzz-other|text\n");

	f->values[V_CONTENT] = "none";
	ASSERT_OK(run(f));
	assert_int_equal(f->applied, 2);
	ASSERT_QUERY(f, "SELECT path, content FROM notes ORDER BY path",
	    "a.md|NULL\nb.md|NULL\nzz-other|theirs\n");
	assert_int_equal(check(f), 0);
	ASSERT_OK(run(f));
	assert_int_equal(f->planned, 0);
	/* content put back into tend's row by hand is drift */
	exec_sql(f, "UPDATE notes SET content = 'x' WHERE path = 'a.md'");
	assert_int_not_equal(check(f), 0);
	exec_sql(f, "UPDATE notes SET content = NULL WHERE path = 'a.md'");
	exec_sql(f, "DELETE FROM notes WHERE path = 'zz-other'");
	ASSERT_ROWS(f, "none");

	exec_sql(f, "INSERT INTO notes (path, size, digest) "
		    "VALUES ('zz-other', 6, 'x')");
	f->values[V_CONTENT] = "text";
	ASSERT_OK(run(f));
	assert_int_equal(f->applied, 2);
	exec_sql(f, "DELETE FROM notes WHERE path = 'zz-other'");
	ASSERT_ROWS(f, "text");
	assert_int_equal(check(f), 0);
}

/* recreate switched on, then a column change with it on: the table is
 * dropped and built again from the declared rows only */
static void
t_destructive_change(void **state)
{
	struct fx *f = F;

	set_row(f, "a.md", "alpha");
	set_row(f, "b.md", "beta");
	ASSERT_OK(run(f));
	exec_sql(f, "INSERT INTO notes VALUES ('zz-other', 'theirs', 6, 'x')");

	f->values[V_RECREATE] = "true";
	ASSERT_OK(run(f));
	assert_int_equal(f->applied, 2);
	ASSERT_ROWS(f, "text"); /* zz-other is gone */

	exec_sql(f, "INSERT INTO notes VALUES ('zz-other', 'theirs', 6, 'x')");
	f->values[V_CONTENT] = "none";
	ASSERT_OK(run(f));
	assert_int_equal(f->applied, 2);
	ASSERT_ROWS(f, "none");
	assert_int_equal(check(f), 0);

	/* and nothing more to do afterwards */
	ASSERT_OK(run(f));
	assert_int_equal(f->planned, 0);
}

static bool
table_exists(struct fx *f, const char *table)
{
	struct tend_buf sql = TEND_BUF_INIT;
	char *got;
	bool yes;

	tend_buf_printf(&sql,
	    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
	    "name = '%s'",
	    table);
	got = query(f, sql.ptr);
	if (strcmp(got, "0\n") != 0 && strcmp(got, "1\n") != 0)
		fail_msg("%s", got);
	yes = strcmp(got, "1\n") == 0;
	free(got);
	tend_buf_release(&sql);
	return yes;
}

/* The app's target is no longer declared: its rows are deleted one by
 * one (open_child), then the table is dropped */
static void
t_container_delete(void **state)
{
	struct fx *f = F;

	set_row(f, "a.md", "alpha");
	set_row(f, "b.md", "beta");
	ASSERT_OK(run(f));
	assert_true(table_exists(f, "notes"));
	f->mount = false;
	ASSERT_OK(run(f));
	assert_int_equal(f->applied, 2); /* two row deletes */
	assert_false(table_exists(f, "notes"));
	ASSERT_OK(run(f));
	assert_int_equal(f->planned, 0);
}

/* A row tend did not write keeps the table (without recreate); with
 * recreate the table is tend's and goes whatever it holds */
static void
t_container_delete_keeps_others(void **state)
{
	struct fx *f = F;

	set_row(f, "a.md", "alpha");
	ASSERT_OK(run(f));
	exec_sql(f, "INSERT INTO notes VALUES ('zz-other', 'theirs', 6, 'x')");
	f->mount = false;
	ASSERT_OK(run(f));
	ASSERT_QUERY(f, "SELECT path FROM notes", "zz-other\n");

	/* a table that is there when the target is first declared is
	 * adopted as it is, even with recreate */
	f->mount = true;
	f->values[V_RECREATE] = "true";
	ASSERT_OK(run(f));
	ASSERT_QUERY(f, "SELECT path FROM notes ORDER BY path",
	    "a.md\nzz-other\n");
	f->mount = false;
	ASSERT_OK(run(f));
	assert_false(table_exists(f, "notes"));
}

/* tend drop: the same, from the stored records alone */
static void
t_drop(void **state)
{
	struct fx *f = F;
	struct tend_stats st;

	set_row(f, "a.md", "alpha");
	set_row(f, "b.md", "beta");
	ASSERT_OK(run(f));
	f->planned = f->applied = 0;
	ASSERT_OK(tend_engine_drop(f->eng, "notes", &st));
	assert_int_equal(f->applied, 2);
	assert_false(table_exists(f, "notes"));
}

/* tend plan on a new target: the rows are planned through
 * preview_child, and no file is made */
static void
t_preview(void **state)
{
	struct fx *f = F;
	char path[512];
	struct stat st;

	set_row(f, "a.md", "alpha");
	set_row(f, "b.md", "beta");
	ASSERT_OK(run_opts(f, false, true));
	assert_int_equal(f->planned, 2);
	assert_int_equal(f->applied, 0);
	db_file(f, path, sizeof path);
	assert_int_equal(stat(path, &st), -1);
	ASSERT_OK(run(f));
	assert_int_equal(f->applied, 2);
	set_row(f, "a.md", "alpha 2");
	ASSERT_OK(run_opts(f, false, true));
	assert_int_equal(f->planned, 1);
	set_row(f, "a.md", "alpha");
	ASSERT_ROWS(f, "text");
}

/* A failed commit fails every row of the batch, with a message naming
 * the table and the row; the next pass applies them */
static void
t_failed_commit_converges(void **state)
{
	struct fx *f = F;

	f->arg = "flaky.db";
	set_row(f, "a.md", "alpha");
	set_row(f, "b.md", "beta");
	assert_int_equal(run(f), TEND_ERROR);
	assert_int_equal(f->failed, 2);
	assert_non_null(strstr(f->error, "table notes, row "));
	assert_non_null(strstr(f->error, "commit failed"));
	ASSERT_QUERY(f, "SELECT count(*) FROM notes", "0\n");
	assert_int_equal(check(f), 2); /* both pending */
	ASSERT_OK(run(f));
	assert_int_equal(f->applied, 2);
	ASSERT_ROWS(f, "text");
	assert_int_equal(check(f), 0);
	ASSERT_OK(run(f));
	assert_int_equal(f->planned, 0);
}

/* One row that cannot be written fails alone: the others commit */
static void
t_failed_row_alone(void **state)
{
	struct fx *f = F;

	set_row(f, "a.md", "alpha");
	set_row(f, "bad", "not this time");
	set_row(f, "c.md", "gamma");
	assert_int_equal(run(f), TEND_ERROR);
	assert_int_equal(f->failed, 1);
	assert_int_equal(f->applied, 2);
	assert_non_null(strstr(f->error, "table notes, row bad"));
	ASSERT_QUERY(f, "SELECT path FROM notes ORDER BY path",
	    "a.md\nc.md\n");
	ASSERT_OK(run(f));
	assert_int_equal(f->applied, 1);
	ASSERT_ROWS(f, "text");
}

/* The table's own change failing fails the pass; the next one makes it */
static void
t_failed_table_converges(void **state)
{
	struct fx *f = F;

	f->values[V_TABLE] = "tablefail";
	set_row(f, "a.md", "alpha");
	assert_int_not_equal(run(f), 0);
	ASSERT_OK(run(f));
	ASSERT_QUERY(f, "SELECT path, content FROM tablefail", "a.md|alpha\n");
}

/* SIGKILL inside the row transaction: the journal undoes it, and the
 * next pass applies what was pending (and deletes the row that is not
 * declared any more) */
static void
t_kill_mid_transaction(void **state)
{
	struct fx *f = F;
	char path[512], journal[600];
	struct stat st;
	int status;
	pid_t pid;

	set_row(f, "a.md", "alpha");
	set_row(f, "b.md", "beta");
	set_row(f, "boom", "killed while writing this");
	/* a store is opened once per process: the child opens its own */
	tend_engine_close(f->eng);
	f->eng = NULL;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (!(f->eng = engine_open(f)))
			_exit(2);
		run(f);
		_exit(3); /* not killed */
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGKILL);
	/* it died inside the transaction: a hot journal, then nothing */
	db_file(f, path, sizeof path);
	snprintf(journal, sizeof journal, "%s-journal", path);
	assert_int_equal(stat(journal, &st), 0);
	assert_true(st.st_size > 0);
	ASSERT_QUERY(f, "SELECT count(*) FROM notes", "0\n");

	assert_non_null(f->eng = engine_open(f));
	assert_int_equal(check(f), 3); /* interrupted: all pending */
	unset_row(f, "boom");
	ASSERT_OK(run(f));
	ASSERT_ROWS(f, "text");
	assert_int_equal(check(f), 0);
	ASSERT_OK(run(f));
	assert_int_equal(f->planned, 0);
}

/* tend check: a row deleted, changed or with another digest by hand */
static void
t_check_drift(void **state)
{
	struct fx *f = F;

	set_row(f, "a.md", "alpha");
	set_row(f, "b.md", "beta");
	set_row(f, "c.md", "gamma");
	ASSERT_OK(run(f));
	assert_int_equal(check(f), 0);
	exec_sql(f, "DELETE FROM notes WHERE path = 'a.md'");
	exec_sql(f, "UPDATE notes SET content = 'BETA' WHERE path = 'b.md'");
	exec_sql(f, "UPDATE notes SET digest = '00' WHERE path = 'c.md'");
	if (check(f) != 3)
		fail_msg("drift:\n%s", f->drift.ptr);
	assert_non_null(strstr(f->drift.ptr,
	    "/a.md: missing: no such row in table notes\n"));
	assert_non_null(strstr(f->drift.ptr, "/b.md: content differs\n"));
	assert_non_null(strstr(f->drift.ptr, "/c.md: digest differs\n"));
	/* a plain sync trusts its records; a full one repairs */
	ASSERT_OK(run(f));
	assert_int_equal(check(f), 3);
	ASSERT_OK(run_opts(f, true, false));
	assert_int_equal(check(f), 0);
	ASSERT_ROWS(f, "text");

	exec_sql(f, "DROP TABLE notes");
	assert_int_equal(check(f), 3);
	assert_non_null(strstr(f->drift.ptr,
	    "missing: table notes is not in notes.db"));
}

/* A symbolic link's row holds its text; an odd table name is quoted */
static void
t_link_and_odd_table(void **state)
{
	struct fx *f = F;

	f->values[V_TABLE] = "my \"odd\" table";
	set_row(f, "a.md", "alpha");
	set_row(f, "latest", "a.md");
	f->rows[1].link = true;
	ASSERT_OK(run(f));
	ASSERT_QUERY(f,
	    "SELECT path, content, size FROM \"my \"\"odd\"\" table\" "
	    "ORDER BY path",
	    "a.md|alpha|5\nlatest|a.md|4\n");
	assert_int_equal(check(f), 0);
	ASSERT_OK(run(f));
	assert_int_equal(f->planned, 0);
	exec_sql(f, "UPDATE \"my \"\"odd\"\" table\" SET content = 'b.md' "
		    "WHERE path = 'latest'");
	assert_int_equal(check(f), 1);
	assert_non_null(strstr(f->drift.ptr, "content differs"));
}

int
main(void)
{
	const char *so = getenv("TEND_SQLITE_PLUGIN");
	void *dl;

	setenv("TEND_FAILPOINTS", FAILPOINTS, 1);
	if (!so) {
		fprintf(stderr, "TEND_SQLITE_PLUGIN: the plugin's path\n");
		return 1;
	}
	if (!(dl = dlopen(so, RTLD_NOW | RTLD_LOCAL)) ||
	    !(plugin = dlsym(dl, "tend_connector_sqlite"))) {
		fprintf(stderr, "%s: %s\n", so, dlerror());
		return 1;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(t_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(t_container, setup, teardown),
		cmocka_unit_test_setup_teardown(t_insert_then_noop, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_update_and_delete, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_lossy_change, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_destructive_change, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_container_delete, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_container_delete_keeps_others,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(t_drop, setup, teardown),
		cmocka_unit_test_setup_teardown(t_preview, setup, teardown),
		cmocka_unit_test_setup_teardown(t_failed_commit_converges,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(t_failed_row_alone, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_failed_table_converges,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(t_kill_mid_transaction, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_check_drift, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(t_link_and_odd_table, setup,
		    teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
