/*
 * tend_sqlite.c - a SQLite table as a tend target, shipped as a connector
 * plugin (tend/plugin.h, "connector plugins"):
 *
 *     [plugin "sqlite"]
 *         path = plugins/tend-sqlite.so
 *     [app "notes"]
 *         source = notes
 *         target = sqlite:notes.db
 *         table = notes
 *
 * The table is the container; each entry is a row:
 *
 *     path TEXT PRIMARY KEY NOT NULL, content, size INTEGER, digest TEXT
 *
 * path is the entry's name, content its bytes (as TEXT or as a BLOB, or
 * NULL, or no such column at all), size their length and digest tend's fingerprint of
 * them (XXH3-128, 32 hex digits). A symbolic link's row holds its text.
 *
 * Records are small and fixed: the container's is its spec (the encoded
 * keys), a row's is (version, fingerprint). A pass that changes nothing
 * reconciles every row to "nothing to do", and the container's per-pass
 * action only reads the schema: the database file is not written.
 *
 * The row actions of a batch go into one transaction per database file
 * (BEGIN IMMEDIATE ... COMMIT, with a busy timeout), as upserts and
 * deletes that may be applied twice. SQLite's journal makes the
 * transaction atomic: a process killed inside it leaves the file as it
 * was, and the engine, which recorded the actions before the sink ran,
 * applies them again on the next pass.
 *
 * Failpoints (tend/failpoint.h), for tests: "sqlite-put" (subject
 * "TABLE/ROW") fails one row's write, "sqlite-commit" (subject the
 * database's path) fails a batch's commit, "sqlite-table" (subject the
 * table) fails a change of the table itself.
 */
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700 /* lstat, O_CLOEXEC, strncasecmp with -std=c11 */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include <tend/arena.h>
#include <tend/buf.h>
#include <tend/failpoint.h>
#include <tend/fingerprint.h>
#include <tend/plugin.h>
#include <tend/status.h>
#include <tend/target.h>

#define SPEC_VERSION 1
#define SPEC_LEN 7
#define REC_VERSION 1
#define REC_LEN (1 + 16)
#define BUSY_MAX 3600000 /* an hour, in milliseconds */

#ifndef SQLITE_OPEN_NOFOLLOW
#define SQLITE_OPEN_NOFOLLOW 0 /* before SQLite 3.31: links are followed */
#endif

enum content { CONTENT_NONE = 0, CONTENT_TEXT = 1, CONTENT_BLOB = 2 };

/* What the container's value holds: everything a change of which does
 * something to the table. */
struct spec {
	enum content content;
	bool recreate;
	uint32_t busy_ms;
};

/* ---- the keys an [app] section may set ---- */

/* In this order in tend_plugin_target.values. */
enum { KEY_TABLE, KEY_CONTENT, KEY_RECREATE, KEY_BUSY, NKEYS };

static const struct tend_plugin_key sqlite_keys[NKEYS] = {
	[KEY_TABLE] = {"table", TEND_PKEY_STRING, "",
	    TEND_PKEY_CHANGE_DESTRUCTIVE,
	    "the table's name (default: the app's name); another name "
	    "deletes tend's rows of the old table (the table goes if no "
	    "other rows are left) and writes every row into the new one"},
	[KEY_CONTENT] = {"content", TEND_PKEY_STRING, "text",
	    TEND_PKEY_CHANGE_LOSSY,
	    "text, blob or none: how a row holds the entry's bytes (none: "
	    "NULL, or no content column in a table tend makes); a change "
	    "alters the table and rewrites every row"},
	[KEY_RECREATE] = {"recreate", TEND_PKEY_BOOL, "false",
	    TEND_PKEY_CHANGE_DESTRUCTIVE,
	    "true: the table holds tend's rows only, and is dropped and "
	    "built again (instead of altered) when its columns change; "
	    "switching it on rebuilds it once"},
	[KEY_BUSY] = {"busy-timeout", TEND_PKEY_INTEGER, "5000",
	    TEND_PKEY_CHANGE_UPDATE,
	    "milliseconds to wait for another connection's lock"},
};

/* ---- encodings ---- */

static void
encode_spec(struct tend_buf *out, const struct spec *s)
{
	uint32_t b = s->busy_ms;

	tend_buf_putc(out, SPEC_VERSION);
	tend_buf_putc(out, (int)s->content);
	tend_buf_putc(out, s->recreate);
	for (int i = 0; i < 4; i++)
		tend_buf_putc(out, (int)(b >> (8 * i)) & 0xff);
}

static bool
decode_spec(const void *p, size_t len, struct spec *s)
{
	const uint8_t *b = p;

	if (len != SPEC_LEN || b[0] != SPEC_VERSION || b[1] > CONTENT_BLOB ||
	    b[2] > 1)
		return false;
	s->content = (enum content)b[1];
	s->recreate = b[2] != 0;
	s->busy_ms = (uint32_t)b[3] | (uint32_t)b[4] << 8 |
	    (uint32_t)b[5] << 16 | (uint32_t)b[6] << 24;
	return true;
}

/* ---- the container: key and value from the app's target ---- */

/*
 * The database's name as the key holds it: relative to the workspace when
 * it is inside it, without "." components or repeated slashes, so two
 * spellings of one file are one container (two containers on one table
 * would have one delete the other's rows).
 */
static int
db_name(const struct tend_plugin_target *t, struct tend_buf *out)
{
	const char *p = t->arg;
	size_t wl = t->workspace ? strlen(t->workspace) : 0;

	if (!p[0])
		return tend_error_set(TEND_EINVALID,
		    "[app \"%s\"] target = sqlite: names no database file",
		    t->app);
	for (const char *c = p; *c; c++)
		if ((unsigned char)*c < 0x20)
			return tend_error_set(TEND_EINVALID,
			    "[app \"%s\"] target = sqlite:%s: a control "
			    "character in the file name",
			    t->app, p);
	if (wl && strncmp(p, t->workspace, wl) == 0 && p[wl] == '/')
		p += wl + 1;
	if (p[0] == '/')
		tend_buf_putc(out, '/');
	while (*p) {
		size_t n = strcspn(p, "/");

		if (n == 2 && p[0] == '.' && p[1] == '.')
			return tend_error_set(TEND_EINVALID,
			    "[app \"%s\"] target = sqlite:%s: no \"..\" "
			    "components",
			    t->app, t->arg);
		if (n && !(n == 1 && p[0] == '.')) {
			if (out->len && out->ptr[out->len - 1] != '/')
				tend_buf_putc(out, '/');
			tend_buf_put(out, p, n);
		}
		p += n;
		if (*p == '/' && !p[1])
			return tend_error_set(TEND_EINVALID,
			    "[app \"%s\"] target = sqlite:%s: names a "
			    "directory, not a database file",
			    t->app, t->arg);
		p += *p == '/';
	}
	if (!out->len || out->ptr[out->len - 1] == '/')
		return tend_error_set(TEND_EINVALID,
		    "[app \"%s\"] target = sqlite:%s: names no database file",
		    t->app, t->arg);
	return 0;
}

static int
sqlite_container(const struct tend_plugin_target *t, struct tend_buf *key,
    struct tend_buf *value)
{
	struct spec s = {0};
	const char *table, *content, *busy;
	char *end;
	unsigned long ms;
	int rc;

	if (t->nvalues != NKEYS)
		return tend_error_set(TEND_EINVALID,
		    "sqlite: %zu key values for %d keys", t->nvalues, NKEYS);
	table = t->values[KEY_TABLE][0] ? t->values[KEY_TABLE] : t->app;
	content = t->values[KEY_CONTENT];
	busy = t->values[KEY_BUSY];
	if (strncasecmp(table, "sqlite_", 7) == 0)
		return tend_error_set(TEND_EINVALID,
		    "[app \"%s\"] table = %s: names starting with sqlite_ "
		    "are SQLite's own",
		    t->app, table);
	for (const char *c = table; *c; c++)
		if ((unsigned char)*c < 0x20)
			return tend_error_set(TEND_EINVALID,
			    "[app \"%s\"] table: a control character in the "
			    "name",
			    t->app);
	if (strcmp(content, "text") == 0)
		s.content = CONTENT_TEXT;
	else if (strcmp(content, "blob") == 0)
		s.content = CONTENT_BLOB;
	else if (strcmp(content, "none") == 0)
		s.content = CONTENT_NONE;
	else
		return tend_error_set(TEND_EINVALID,
		    "[app \"%s\"] content = %s: expected text, blob or none",
		    t->app, content);
	s.recreate = strcmp(t->values[KEY_RECREATE], "true") == 0;
	errno = 0;
	ms = strtoul(busy, &end, 10);
	if (busy[0] < '0' || busy[0] > '9' || *end || errno || ms > BUSY_MAX)
		return tend_error_set(TEND_EINVALID,
		    "[app \"%s\"] busy-timeout = %s: expected milliseconds, "
		    "0 to %d",
		    t->app, busy, BUSY_MAX);
	s.busy_ms = (uint32_t)ms;
	if ((rc = db_name(t, key)))
		return rc;
	/* the file name holds no control character: a tab ends it */
	tend_buf_putc(key, '\t');
	tend_buf_puts(key, table);
	encode_spec(value, &s);
	return 0;
}

/* ---- handlers ---- */

/* The root handler (db == NULL) and the rows of one table. */
struct sq_handler {
	struct tend_handler base;
	char *db;    /* as in the key: relative to the workspace, or absolute */
	char *table;
	struct spec spec;
};

struct table_action {
	const char *db;
	const char *table;
	struct spec spec;
	bool drop;
	bool wipe; /* drop what is there first (destructive), or drop even a
		    * table holding rows tend did not write */
};

struct row_action {
	const struct sq_handler *h;
	const char *path;
	bool del;
	bool link;
	const char *src; /* a file's absolute path, or a link's text */
	uint64_t size;
	struct tend_fp fp;
	/* no write of the row was ever confirmed (prev_never_applied): a
	 * row at its path is tend's only if it holds fp or one of `prev` */
	bool fresh;
	const uint8_t *prev; /* nprev records of REC_LEN */
	size_t nprev;
	/* tend sync --full re-applies what it recorded: a row found as
	 * recorded is left as it is ("verified", not "updated") */
	bool repair;
};

static void table_apply(struct tend_sink *, struct tend_context *,
    void *const *, size_t, struct tend_apply_result *);
static void row_apply(struct tend_sink *, struct tend_context *,
    void *const *, size_t, struct tend_apply_result *);

static struct tend_sink table_sink = {.apply = table_apply,
    .name = "sqlite/table"};
static struct tend_sink row_sink = {.apply = row_apply, .name = "sqlite/row"};

static const struct tend_handler_ops table_ops, row_ops;

static struct tend_handler *
handler_new(const struct tend_handler_ops *ops, const char *db,
    const char *table, const struct spec *spec)
{
	struct sq_handler *h = tend_xcalloc(1, sizeof *h);

	tend_handler_init(&h->base, ops);
	if (db) {
		h->db = tend_xstrdup(db);
		h->table = tend_xstrdup(table);
		h->spec = *spec;
	}
	return &h->base;
}

static void
handler_destroy(struct tend_handler *base)
{
	struct sq_handler *h = (struct sq_handler *)(void *)base;

	free(h->db);
	free(h->table);
	free(h);
}

/* key = "DB\tTABLE" */
static int
split_key(const struct tend_key *k, struct tend_arena *a, char **db,
    char **table)
{
	const char *tab;
	size_t n;

	if (k->kind != TEND_KEY_STR ||
	    !(tab = memchr(k->u.s.ptr, '\t', k->u.s.len)) ||
	    tab == k->u.s.ptr || tab + 1 == k->u.s.ptr + k->u.s.len ||
	    memchr(k->u.s.ptr, '\0', k->u.s.len))
		return tend_error_set(TEND_EINVALID,
		    "sqlite: a container key is \"DATABASE\\tTABLE\"");
	n = (size_t)(tab - k->u.s.ptr);
	*db = tend_arena_alloc(a, n + 1);
	memcpy(*db, k->u.s.ptr, n);
	(*db)[n] = '\0';
	n = k->u.s.len - n - 1;
	*table = tend_arena_alloc(a, n + 1);
	memcpy(*table, tab + 1, n);
	(*table)[n] = '\0';
	return 0;
}

static int
table_reconcile(struct tend_handler *base, const struct tend_reconcile_in *in,
    struct tend_reconcile_out *out)
{
	struct table_action *a = tend_arena_zalloc(in->arena, sizeof *a);
	char *db, *table;
	struct spec old;
	int rc;

	(void)base;
	if ((rc = split_key(in->key, in->arena, &db, &table)))
		return rc;
	a->db = db;
	a->table = table;
	/* an action every pass, even an unchanged one: its sink hands the
	 * engine the rows' handler (and only reads when nothing changed) */
	out->action = a;
	out->sink = &table_sink;
	if (!in->desired) {
		/* its rows went one by one first (open_child) */
		a->drop = true;
		a->spec.busy_ms = 5000;
		out->record_absent = true;
		for (size_t i = 0; i < in->nprev; i++)
			if (decode_spec(in->prev[i].data, in->prev[i].len,
				&old)) {
				a->wipe |= old.recreate;
				a->spec.busy_ms = old.busy_ms;
			}
		return 0;
	}
	if (!decode_spec(in->desired, in->desired_len, &a->spec))
		return tend_error_set(TEND_EINVALID, "sqlite: bad table spec");
	for (size_t i = 0; i < in->nprev; i++) {
		enum tend_invalidation inv = TEND_INVALIDATE_NONE;

		if (!decode_spec(in->prev[i].data, in->prev[i].len, &old))
			/* another version's table: its columns, even its key,
			 * may differ: build it again */
			inv = TEND_INVALIDATE_DESTRUCTIVE;
		else if (a->spec.recreate && !old.recreate)
			/* from now on the table holds tend's rows only */
			inv = TEND_INVALIDATE_DESTRUCTIVE;
		else if (old.content != a->spec.content)
			/* another column set, or another type in it */
			inv = a->spec.recreate ? TEND_INVALIDATE_DESTRUCTIVE
					       : TEND_INVALIDATE_LOSSY;
		if (inv > out->invalidation)
			out->invalidation = inv;
	}
	a->wipe = out->invalidation == TEND_INVALIDATE_DESTRUCTIVE;
	out->record.data = tend_arena_memdup(in->arena, in->desired,
	    in->desired_len);
	out->record.len = in->desired_len;
	return 0;
}

/* The rows' handler from the container's key and record alone: `tend
 * drop` deletes the rows one by one with it, `tend check` asks it. */
static struct tend_handler *
table_open_child(struct tend_handler *base, const struct tend_key *key,
    const struct tend_bytes *record)
{
	struct tend_arena a = TEND_ARENA_INIT;
	/* (a preview of a container not declared any more: its rows are
	 * only deleted, and a delete needs no spec) */
	struct spec spec = {.content = CONTENT_TEXT, .busy_ms = 5000};
	struct tend_handler *h = NULL;
	char *db = NULL, *table = NULL;

	(void)base;
	if (split_key(key, &a, &db, &table) == 0 &&
	    (!record || decode_spec(record->data, record->len, &spec)))
		h = handler_new(&row_ops, db, table, &spec);
	tend_arena_finish(&a);
	tend_error_clear();
	return h;
}

static struct tend_handler *
table_preview_child(struct tend_handler *base, const struct tend_key *key,
    const void *desired, size_t len)
{
	struct tend_bytes rec = {desired, len};

	return table_open_child(base, key, desired ? &rec : NULL);
}

static int
row_reconcile(struct tend_handler *base, const struct tend_reconcile_in *in,
    struct tend_reconcile_out *out)
{
	struct sq_handler *h = (struct sq_handler *)(void *)base;
	struct row_action *a;
	struct tend_entry e;
	uint8_t rec[REC_LEN];
	char *path;

	if (in->key->kind != TEND_KEY_STR || in->key->u.s.len == 0 ||
	    memchr(in->key->u.s.ptr, '\0', in->key->u.s.len))
		return tend_error_set(TEND_EINVALID,
		    "sqlite: a row's key is a non-empty name");
	if (!in->desired && in->nprev == 0 && !in->prev_may_be_missing)
		return 0;
	path = tend_arena_alloc(in->arena, in->key->u.s.len + 1);
	memcpy(path, in->key->u.s.ptr, in->key->u.s.len);
	path[in->key->u.s.len] = '\0';
	a = tend_arena_zalloc(in->arena, sizeof *a);
	a->h = h;
	a->path = path;
	if (!in->desired) {
		a->del = true;
		/* never written: the row at its path goes only if it holds
		 * one of its records (row_in_the_way) */
		if ((a->fresh = in->prev_never_applied))
			a->prev = tend_reconcile_prev_copy(in, REC_LEN,
			    &a->nprev);
		out->action = a;
		out->sink = &row_sink;
		out->record_absent = true;
		return 0;
	}
	if (!tend_entry_decode(in->desired, in->desired_len, &e, in->arena))
		return tend_error_set(TEND_EINVALID,
		    "sqlite: row %s of table %s: not an entry", path,
		    h->table);
	a->src = e.src;
	a->size = e.size;
	a->fp = e.fp;
	if (S_ISLNK(e.mode)) {
		/* the row holds the link's text: fingerprint that, as the
		 * digest column and check do */
		a->link = true;
		a->size = strlen(e.src);
		a->fp = tend_fp_content(e.src, a->size);
	}
	rec[0] = REC_VERSION;
	memcpy(rec + 1, a->fp.b, 16);
	if (tend_reconcile_settled(in, rec, REC_LEN))
		return 0;
	if ((a->fresh = in->prev_never_applied))
		a->prev = tend_reconcile_prev_copy(in, REC_LEN, &a->nprev);
	a->repair = !a->fresh && tend_reconcile_repairs(in, rec, REC_LEN);
	out->action = a;
	out->sink = &row_sink;
	out->record.data = tend_arena_memdup(in->arena, rec, REC_LEN);
	out->record.len = REC_LEN;
	return 0;
}

/* ---- the database ---- */

static int
db_path(struct tend_context *ctx, const char *db, struct tend_buf *out)
{
	const char *ws = tend_context_get(ctx, "workspace");

	if (db[0] == '/')
		tend_buf_puts(out, db);
	else if (ws)
		tend_buf_printf(out, "%s/%s", ws, db);
	else
		return tend_error_set(TEND_ENOTFOUND,
		    "sqlite: no \"workspace\" resource for %s", db);
	return 0;
}

/*
 * Open the database file. Never through a symbolic link (the file is the
 * target; a link planted there is not), and made only when `create`.
 * Returns 0, TEND_ENOTFOUND when the file does not exist, or an error.
 */
static int
db_open(const char *path, int mode, uint32_t busy_ms, sqlite3 **out)
{
	int rc = sqlite3_open_v2(path, out, mode | SQLITE_OPEN_NOFOLLOW, NULL);
	struct stat st;

	if (rc == SQLITE_OK) {
		sqlite3_busy_timeout(*out, (int)busy_ms);
		return 0;
	}
	if (!(mode & SQLITE_OPEN_CREATE) && lstat(path, &st) != 0 &&
	    errno == ENOENT)
		rc = tend_error_set(TEND_ENOTFOUND, "%s does not exist", path);
	else if (*out && sqlite3_system_errno(*out))
		rc = tend_error_set(TEND_ERROR, "open %s: %s (%s)", path,
		    sqlite3_errmsg(*out), strerror(sqlite3_system_errno(*out)));
	else
		rc = tend_error_set(TEND_ERROR, "open %s: %s", path,
		    *out ? sqlite3_errmsg(*out) : "out of memory");
	sqlite3_close(*out);
	*out = NULL;
	return rc;
}

static int
db_exec(sqlite3 *db, const char *sql)
{
	if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
		return tend_error_set(TEND_ERROR, "%s", sqlite3_errmsg(db));
	return 0;
}

/* What a table's columns are, from the schema. */
struct columns {
	bool exists, path_key, content, size, digest;
};

static int
read_columns(sqlite3 *db, const char *table, struct columns *c)
{
	sqlite3_stmt *st;
	int rc;

	memset(c, 0, sizeof *c);
	if (sqlite3_prepare_v2(db,
		"SELECT name, pk FROM pragma_table_info(?1)", -1, &st,
		NULL) != SQLITE_OK)
		return tend_error_set(TEND_ERROR, "%s", sqlite3_errmsg(db));
	sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);

		c->exists = true;
		if (!name)
			continue;
		if (strcmp(name, "path") == 0)
			c->path_key = sqlite3_column_int(st, 1) == 1;
		c->content |= strcmp(name, "content") == 0;
		c->size |= strcmp(name, "size") == 0;
		c->digest |= strcmp(name, "digest") == 0;
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return tend_error_set(TEND_ERROR, "%s", sqlite3_errmsg(db));
	return 0;
}

/* content = none leaves a content column where there is one: other
 * rows may hold theirs (tend's rows hold NULL there: row_compare) */
static bool
columns_ok(const struct columns *c, const struct spec *s)
{
	return c->exists && c->path_key && c->size && c->digest &&
	    (c->content || s->content == CONTENT_NONE);
}

static int
alter(sqlite3 *db, const char *fmt, const char *table)
{
	char *sql = sqlite3_mprintf(fmt, table);
	int rc;

	if (!sql)
		return tend_error_set(TEND_ERROR, "out of memory");
	rc = db_exec(db, sql);
	sqlite3_free(sql);
	return rc;
}

/*
 * Make the table's columns what the spec says, in one transaction. When
 * they are already (the usual pass) this only reads: the file is not
 * written. `wipe` drops the table first (a destructive change).
 */
static int
ensure_table(sqlite3 *db, const char *table, const struct spec *s, bool wipe)
{
	struct columns c;
	int rc;

	if ((rc = read_columns(db, table, &c)))
		return rc;
	if (!wipe && columns_ok(&c, s))
		return 0;
	if ((rc = db_exec(db, "BEGIN IMMEDIATE")))
		return rc;
	if (tend_failpoint("sqlite-table", table)) {
		rc = tend_error_set(TEND_ERROR, "%s", strerror(errno));
		goto out;
	}
	if (wipe && (rc = alter(db, "DROP TABLE IF EXISTS \"%w\"", table)))
		goto out;
	/* read again under the write lock: another writer may have been
	 * first */
	if ((rc = read_columns(db, table, &c)))
		goto out;
	if (!c.exists) {
		rc = alter(db, s->content != CONTENT_NONE
			? "CREATE TABLE \"%w\" (path TEXT PRIMARY KEY NOT "
			  "NULL, content, size INTEGER, digest TEXT)"
			: "CREATE TABLE \"%w\" (path TEXT PRIMARY KEY NOT "
			  "NULL, size INTEGER, digest TEXT)",
		    table);
		goto out;
	}
	if (!c.path_key) {
		rc = tend_error_set(TEND_ECONFLICT,
		    "it exists without \"path\" as its primary key: not a "
		    "table tend made");
		goto out;
	}
	if (s->content != CONTENT_NONE && !c.content)
		rc = alter(db, "ALTER TABLE \"%w\" ADD COLUMN content", table);
	if (rc == 0 && !c.size)
		rc = alter(db, "ALTER TABLE \"%w\" ADD COLUMN size INTEGER",
		    table);
	if (rc == 0 && !c.digest)
		rc = alter(db, "ALTER TABLE \"%w\" ADD COLUMN digest TEXT",
		    table);
out:
	if (rc == 0)
		rc = db_exec(db, "COMMIT");
	if (rc && !sqlite3_get_autocommit(db))
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}

/* Does the table hold no row? */
/* The table's rows: *rows 0 if empty */
static int
table_rows(sqlite3 *db, const char *table, int64_t *rows)
{
	char *sql = sqlite3_mprintf("SELECT count(*) FROM \"%w\"", table);
	sqlite3_stmt *st = NULL;
	int rc = 0;

	if (!sql || sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		rc = tend_error_set(TEND_ERROR, "%s", sqlite3_errmsg(db));
	else if (sqlite3_step(st) == SQLITE_ROW)
		*rows = sqlite3_column_int64(st, 0);
	else
		rc = tend_error_set(TEND_ERROR, "%s", sqlite3_errmsg(db));
	sqlite3_finalize(st);
	sqlite3_free(sql);
	return rc;
}

/*
 * Drop the table: always when it is tend's alone (recreate), else only if
 * it is empty (tend's rows were deleted one by one before this): rows
 * somebody else wrote there keep it.
 */
static int
drop_table(sqlite3 *db, const char *table, bool always, int64_t *kept)
{
	struct columns c;
	int64_t rows = 0;
	int rc;

	*kept = 0;

	if ((rc = read_columns(db, table, &c)) || !c.exists)
		return rc; /* gone already: nothing to write */
	if ((rc = db_exec(db, "BEGIN IMMEDIATE")))
		return rc;
	if (tend_failpoint("sqlite-table", table))
		rc = tend_error_set(TEND_ERROR, "%s", strerror(errno));
	else if (!always)
		rc = table_rows(db, table, &rows);
	if (rc == 0 && rows == 0)
		rc = alter(db, "DROP TABLE IF EXISTS \"%w\"", table);
	if (rc == 0 && (rc = db_exec(db, "COMMIT")) == 0)
		*kept = rows;
	if (rc && !sqlite3_get_autocommit(db))
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}

static void
table_apply(struct tend_sink *sink, struct tend_context *ctx,
    void *const *actions, size_t n, struct tend_apply_result *results)
{
	(void)sink;
	for (size_t i = 0; i < n; i++) {
		struct table_action *a = actions[i];
		struct tend_buf path = TEND_BUF_INIT;
		sqlite3 *db = NULL;
		int rc = db_path(ctx, a->db, &path);

		if (rc == 0)
			rc = db_open(path.ptr, SQLITE_OPEN_READWRITE |
				(a->drop ? 0 : SQLITE_OPEN_CREATE),
			    a->spec.busy_ms, &db);
		if (a->drop) {
			if (rc == TEND_ENOTFOUND) {
				rc = 0; /* no file, no table */
				tend_error_clear();
			} else if (rc == 0) {
				int64_t kept = 0;

				rc = drop_table(db, a->table, a->wipe, &kept);
				/* it stays: its state goes ("forgotten") */
				if (rc == 0 && kept) {
					results[i].left = true;
					tend_apply_note(&results[i], "table %s "
					    "stays, with what tend did not "
					    "write in it (%lld row%s left)",
					    a->table, (long long)kept,
					    kept == 1 ? "" : "s");
				}
			}
		} else if (rc == 0 &&
		    (rc = ensure_table(db, a->table, &a->spec, a->wipe)) == 0)
			results[i].child = handler_new(&row_ops, a->db,
			    a->table, &a->spec);
		if (rc)
			tend_apply_fail(&results[i], rc,
			    "sqlite: table %s in %s: %s", a->table, a->db,
			    tend_error_last());
		sqlite3_close(db);
		tend_buf_release(&path);
	}
}

/* ---- rows ---- */

/* The prepared statements for the rows of one table, kept while
 * consecutive actions of a batch write that table; each is prepared when
 * first needed (a delete needs no content column). */
struct stmts {
	const struct sq_handler *h;
	sqlite3_stmt *put, *del, *sel;
};

static void
stmts_reset(struct stmts *s)
{
	sqlite3_finalize(s->put);
	sqlite3_finalize(s->del);
	sqlite3_finalize(s->sel);
	memset(s, 0, sizeof *s);
}

static int
stmt_for(struct stmts *s, sqlite3 *db, const struct sq_handler *h, bool del,
    sqlite3_stmt **out)
{
	sqlite3_stmt **slot = del ? &s->del : &s->put;
	char *sql;
	int rc = 0;

	if (!s->h || strcmp(s->h->table, h->table) != 0 ||
	    s->h->spec.content != h->spec.content) {
		stmts_reset(s);
		s->h = h;
	}
	if (!*slot) {
		if (del)
			sql = sqlite3_mprintf(
			    "DELETE FROM \"%w\" WHERE path = ?1", h->table);
		else
			sql = sqlite3_mprintf(h->spec.content != CONTENT_NONE
				? "INSERT OR REPLACE INTO \"%w\" (path, "
				  "content, size, digest) VALUES (?1, ?2, ?3, "
				  "?4)"
				: "INSERT OR REPLACE INTO \"%w\" (path, size, "
				  "digest) VALUES (?1, ?3, ?4)",
			    h->table);
		if (!sql || sqlite3_prepare_v2(db, sql, -1, slot, NULL) !=
				SQLITE_OK)
			rc = tend_error_set(TEND_ERROR, "%s",
			    sqlite3_errmsg(db));
		sqlite3_free(sql);
	}
	*out = *slot;
	return rc;
}

static bool
table_exists(sqlite3 *db, const char *table)
{
	struct columns c;

	return read_columns(db, table, &c) != 0 || c.exists;
}

/* Read what the row holds: the file's bytes, or the link's text. */
static int
read_content(const struct row_action *a, struct tend_buf *out, int max)
{
	int fd;

	if (a->link) {
		tend_buf_puts(out, a->src);
		return 0;
	}
	if ((fd = open(a->src, O_RDONLY | O_CLOEXEC)) < 0)
		return tend_error_set(TEND_ERROR, "read %s: %s", a->src,
		    strerror(errno));
	if (tend_buf_read_fd(out, fd, (size_t)max) != 0) {
		int e = errno;

		close(fd);
		return tend_error_set(TEND_ERROR, "read %s: %s", a->src,
		    strerror(e));
	}
	close(fd);
	if (out->len > (size_t)max)
		return tend_error_set(TEND_ERROR,
		    "%s is larger than a row may hold (%d bytes)", a->src, max);
	/* saved since it was declared: a row of other bytes than its
	 * record says would be "in the way" of a retry after a kill */
	struct tend_fp got = tend_fp_content(out->ptr, out->len);
	if (!tend_fp_equal(&got, &a->fp))
		return tend_error_set(TEND_ERROR, "%s changed since tend "
		    "read it: the next sync copies it again", a->src);
	return 0;
}

/*
 * The first write of a row (a->fresh): a row already at its path is
 * tend's only if it holds the declared content or what an earlier apply
 * cut short wrote (its content's fingerprint, or without a content
 * column its digest); else it is somebody else's, and stays (tend check
 * says the same: "in the way"). `s` is the table's statements.
 */
static int
row_in_the_way(sqlite3 *db, struct stmts *s, const struct row_action *a)
{
	const struct sq_handler *h = a->h;
	bool with_content = h->spec.content != CONTENT_NONE;
	struct tend_buf hex = TEND_BUF_INIT;
	struct tend_fp got;
	int rc = 0, step;

	if (!s->sel) {
		char *sql = sqlite3_mprintf(with_content
			? "SELECT digest, content FROM \"%w\" WHERE path = ?1"
			: "SELECT digest FROM \"%w\" WHERE path = ?1",
		    h->table);
		int r = sql ? sqlite3_prepare_v2(db, sql, -1, &s->sel, NULL)
			    : SQLITE_NOMEM;

		sqlite3_free(sql);
		if (r != SQLITE_OK)
			return tend_error_set(TEND_ERROR, "%s",
			    sqlite3_errmsg(db));
	}
	sqlite3_bind_text(s->sel, 1, a->path, -1, SQLITE_STATIC);
	step = sqlite3_step(s->sel);
	if (step == SQLITE_ROW) {
		bool ours = false;

		if (with_content) {
			const void *p = sqlite3_column_type(s->sel, 1) ==
				SQLITE_TEXT
			    ? (const void *)sqlite3_column_text(s->sel, 1)
			    : sqlite3_column_blob(s->sel, 1);
			got = tend_fp_content(p ? p : "",
			    (size_t)sqlite3_column_bytes(s->sel, 1));
		} else {
			const char *d = (const char *)sqlite3_column_text(
			    s->sel, 0);

			memset(&got, 0, sizeof got);
			for (size_t i = 0; d && i < a->nprev + 1 && !ours; i++) {
				struct tend_fp fp = a->fp;

				if (i)
					memcpy(fp.b, a->prev + REC_LEN *
					    (i - 1) + 1, 16);
				tend_buf_reset(&hex);
				tend_fp_hex(&hex, &fp);
				ours = strcmp(d, hex.ptr) == 0;
			}
		}
		for (size_t i = 0; with_content && i < a->nprev + 1 && !ours;
		     i++)
			ours = memcmp(got.b, i ? a->prev + REC_LEN * (i - 1) + 1
						: a->fp.b, 16) == 0;
		if (!ours)
			rc = tend_error_set(TEND_ECONFLICT, "a row tend has no "
			    "record of writing is in the way: tend replaces "
			    "only what it knows it wrote (delete or rename the "
			    "row, then tend sync)");
	} else if (step != SQLITE_DONE)
		rc = tend_error_set(TEND_ERROR, "%s", sqlite3_errmsg(db));
	sqlite3_reset(s->sel);
	sqlite3_clear_bindings(s->sel);
	tend_buf_release(&hex);
	return rc;
}

static int
put_row(sqlite3 *db, sqlite3_stmt *st, const struct row_action *a)
{
	struct tend_buf content = TEND_BUF_INIT, digest = TEND_BUF_INIT;
	struct tend_buf subject = TEND_BUF_INIT;
	int rc;

	tend_buf_printf(&subject, "%s/%s", a->h->table, a->path);
	if (tend_failpoint("sqlite-put", subject.ptr)) {
		rc = tend_error_set(TEND_ERROR, "%s", strerror(errno));
		goto out;
	}
	if (a->h->spec.content != CONTENT_NONE &&
	    (rc = read_content(a, &content,
		 sqlite3_limit(db, SQLITE_LIMIT_LENGTH, -1))))
		goto out;
	tend_fp_hex(&digest, &a->fp);
	sqlite3_bind_text(st, 1, a->path, -1, SQLITE_STATIC);
	if (a->h->spec.content == CONTENT_TEXT)
		sqlite3_bind_text(st, 2, content.ptr, (int)content.len,
		    SQLITE_STATIC);
	else if (a->h->spec.content == CONTENT_BLOB)
		sqlite3_bind_blob(st, 2, content.ptr, (int)content.len,
		    SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)a->size);
	sqlite3_bind_text(st, 4, digest.ptr, (int)digest.len,
	    SQLITE_STATIC);
	rc = sqlite3_step(st) == SQLITE_DONE
	    ? 0
	    : tend_error_set(TEND_ERROR, "%s", sqlite3_errmsg(db));
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
out:
	tend_buf_release(&content);
	tend_buf_release(&digest);
	tend_buf_release(&subject);
	return rc;
}

static int
delete_row(sqlite3 *db, sqlite3_stmt *st, const struct row_action *a)
{
	int rc;

	sqlite3_bind_text(st, 1, a->path, -1, SQLITE_STATIC);
	rc = sqlite3_step(st) == SQLITE_DONE
	    ? 0
	    : tend_error_set(TEND_ERROR, "%s", sqlite3_errmsg(db));
	sqlite3_reset(st);
	return rc;
}

static void
row_fail(struct tend_apply_result *r, const struct row_action *a, int rc,
    const char *what)
{
	if (r->status)
		return; /* the first reason stands */
	tend_apply_fail(r, rc ? rc : TEND_ERROR, "sqlite: table %s, row %s: %s%s",
	    a->h->table, a->path, what, tend_error_last());
}

/*
 * Does row `name` of h's table hold what the record says (fingerprint
 * fp: its content, size and digest)? 0 if so, TEND_ECONFLICT and why
 * if not (TEND_CHECK_ABSENT: no such row), another code on an error.
 * tend check asks it, and tend sync --full before it writes a row.
 */
static int
row_compare(sqlite3 *db, const struct sq_handler *h, const char *name,
    size_t len, const struct tend_fp *fp, struct tend_buf *why)
{
	struct tend_buf hex = TEND_BUF_INIT;
	bool with_content = h->spec.content != CONTENT_NONE;
	sqlite3_stmt *st = NULL;
	const char *digest;
	char *sql;
	int rc = TEND_ECONFLICT, step;

	/* content = none: a content column kept for other rows must be
	 * NULL in tend's (columns_ok); a table without one has none */
	sql = sqlite3_mprintf(
	    "SELECT size, digest, content FROM \"%w\" WHERE path = ?1",
	    h->table);
	if (sql && !with_content &&
	    sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		sqlite3_free(sql);
		sql = sqlite3_mprintf(
		    "SELECT size, digest FROM \"%w\" WHERE path = ?1",
		    h->table);
	}
	if (!sql || (!st &&
			sqlite3_prepare_v2(db, sql, -1, &st, NULL) !=
			    SQLITE_OK)) {
		rc = tend_error_set(TEND_ERROR, "sqlite: table %s: %s",
		    h->table, sqlite3_errmsg(db));
		goto out;
	}
	sqlite3_bind_text(st, 1, name, (int)len, SQLITE_STATIC);
	step = sqlite3_step(st);
	if (step == SQLITE_DONE) {
		tend_buf_printf(why, TEND_CHECK_ABSENT ": no such row in table %s",
		    h->table);
		goto out;
	}
	if (step != SQLITE_ROW) {
		rc = tend_error_set(TEND_ERROR, "sqlite: table %s: %s",
		    h->table, sqlite3_errmsg(db));
		goto out;
	}
	tend_fp_hex(&hex, fp);
	digest = (const char *)sqlite3_column_text(st, 1);
	if (with_content) {
		int type = sqlite3_column_type(st, 2);
		const void *p = type == SQLITE_TEXT
		    ? (const void *)sqlite3_column_text(st, 2)
		    : sqlite3_column_blob(st, 2);
		size_t clen = (size_t)sqlite3_column_bytes(st, 2);
		struct tend_fp got = tend_fp_content(p ? p : "", clen);
		int want = h->spec.content == CONTENT_TEXT ? SQLITE_TEXT
							   : SQLITE_BLOB;

		if (!tend_fp_equal(&got, fp)) {
			tend_buf_puts(why, "content differs");
			goto out;
		}
		if (type != want) {
			tend_buf_printf(why, "content is stored as %s, not %s",
			    type == SQLITE_TEXT ? "text"
			    : type == SQLITE_BLOB ? "a blob"
			    : type == SQLITE_NULL ? "NULL" : "a number",
			    want == SQLITE_TEXT ? "text" : "a blob");
			goto out;
		}
		if (sqlite3_column_int64(st, 0) != (sqlite3_int64)clen) {
			tend_buf_printf(why, "size %lld, the content has %zu "
					     "bytes",
			    (long long)sqlite3_column_int64(st, 0), clen);
			goto out;
		}
	}
	if (!with_content && sqlite3_column_count(st) == 3 &&
	    sqlite3_column_type(st, 2) != SQLITE_NULL) {
		tend_buf_puts(why, "holds content (content = none)");
		goto out;
	}
	if (!digest || strcmp(digest, hex.ptr) != 0) {
		tend_buf_puts(why, "digest differs");
		goto out;
	}
	rc = 0;
out:
	sqlite3_finalize(st);
	sqlite3_free(sql);
	tend_buf_release(&hex);
	return rc;
}

/*
 * The actions of one database file (group[0..n)): one transaction. A row
 * that fails (its source unreadable) fails alone, the statement undone;
 * anything that ends the transaction (a failed commit, an I/O error)
 * fails every action of the group, and the next pass applies them all
 * again.
 */
static void
apply_group(struct tend_context *ctx, struct row_action **group,
    struct tend_apply_result **res, size_t n)
{
	struct tend_buf path = TEND_BUF_INIT;
	struct stmts s = {0};
	sqlite3 *db = NULL;
	uint32_t busy = 0;
	bool all_del = true;
	int rc;

	for (size_t i = 0; i < n; i++) {
		if (group[i]->h->spec.busy_ms > busy)
			busy = group[i]->h->spec.busy_ms;
		all_del &= group[i]->del;
	}
	/* rows go into a table the container made: never create the file */
	if ((rc = db_path(ctx, group[0]->h->db, &path)) == 0)
		rc = db_open(path.ptr, SQLITE_OPEN_READWRITE, busy, &db);
	if (rc == TEND_ENOTFOUND && all_del) {
		tend_error_clear();
		goto done; /* no file: its rows are gone */
	}
	if (rc == 0)
		rc = db_exec(db, "BEGIN IMMEDIATE");
	if (rc) {
		for (size_t i = 0; i < n; i++)
			row_fail(res[i], group[i], rc, "");
		goto done;
	}
	for (size_t i = 0; i < n && !sqlite3_get_autocommit(db); i++) {
		struct row_action *a = group[i];
		sqlite3_stmt *st;

		if (a->repair) {
			struct tend_buf why = TEND_BUF_INIT;

			rc = row_compare(db, a->h, a->path, strlen(a->path),
			    &a->fp, &why);
			tend_buf_release(&why);
			tend_error_clear();
			if (rc == 0) {
				res[i]->unchanged = true;
				continue;
			}
		}
		if ((rc = stmt_for(&s, db, a->h, a->del, &st)) == 0 &&
		    (!a->fresh || (rc = row_in_the_way(db, &s, a)) == 0))
			rc = a->del ? delete_row(db, st, a) : put_row(db, st, a);
		else if (a->del && rc == TEND_ECONFLICT) {
			/* a row tend never wrote: the state goes, it stays */
			tend_error_clear();
			res[i]->left = true;
			continue;
		} else if (a->del && !table_exists(db, a->h->table)) {
			tend_error_clear();
			continue; /* the table went, and the row with it */
		}
		if (rc)
			row_fail(res[i], a, rc, "");
		else if (a->del && a->fresh && sqlite3_changes(db) == 0)
			res[i]->left = true; /* no row was there */
	}
	stmts_reset(&s);
	if (sqlite3_get_autocommit(db)) {
		/* an error (the last message) rolled the whole transaction
		 * back: the rows written before it are undone too */
		for (size_t i = 0; i < n; i++)
			row_fail(res[i], group[i], TEND_ERROR,
			    "transaction rolled back: ");
		goto done;
	}
	if (tend_failpoint("sqlite-commit", path.ptr))
		rc = tend_error_set(TEND_ERROR, "%s", strerror(errno));
	else
		rc = db_exec(db, "COMMIT");
	if (rc) {
		if (!sqlite3_get_autocommit(db))
			sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
		for (size_t i = 0; i < n; i++)
			row_fail(res[i], group[i], rc, "commit failed: ");
	}
done:
	sqlite3_close(db);
	tend_buf_release(&path);
}

static void
row_apply(struct tend_sink *sink, struct tend_context *ctx,
    void *const *actions, size_t n, struct tend_apply_result *results)
{
	struct row_action **group = tend_xcalloc(n, sizeof *group);
	struct tend_apply_result **res = tend_xcalloc(n, sizeof *res);
	bool *done = tend_xcalloc(n, sizeof *done);

	(void)sink;
	/* one transaction per database file, its actions in the engine's
	 * order (deletes last) */
	for (size_t i = 0; i < n; i++) {
		const char *db = ((struct row_action *)actions[i])->h->db;
		size_t k = 0;

		if (done[i])
			continue;
		for (size_t j = i; j < n; j++) {
			struct row_action *b = actions[j];

			if (!done[j] && strcmp(b->h->db, db) == 0) {
				done[j] = true;
				group[k] = b;
				res[k++] = &results[j];
			}
		}
		apply_group(ctx, group, res, k);
	}
	free(group);
	free(res);
	free(done);
}

/* ---- check: the row against its record ---- */

static int
row_check(struct tend_handler *base, struct tend_context *ctx,
    const struct tend_key *key, const struct tend_bytes *record,
    struct tend_buf *why)
{
	struct sq_handler *h = (struct sq_handler *)(void *)base;
	struct tend_buf path = TEND_BUF_INIT;
	bool with_content = h->spec.content != CONTENT_NONE;
	sqlite3 *db = NULL;
	struct columns c;
	struct tend_fp fp;
	int rc;

	if (key->kind != TEND_KEY_STR || record->len != REC_LEN ||
	    record->data[0] != REC_VERSION)
		return tend_error_set(TEND_EINVALID, "sqlite: bad row record");
	memcpy(fp.b, record->data + 1, 16);
	if ((rc = db_path(ctx, h->db, &path)))
		return rc;
	rc = db_open(path.ptr, SQLITE_OPEN_READONLY, h->spec.busy_ms, &db);
	if (rc == TEND_ENOTFOUND) {
		tend_error_clear();
		tend_buf_printf(why, TEND_CHECK_ABSENT ": no database %s",
		    h->db);
		rc = TEND_ECONFLICT;
		goto out;
	}
	if (rc || (rc = read_columns(db, h->table, &c)))
		goto out;
	rc = TEND_ECONFLICT;
	if (!c.exists) {
		/* nothing at the key (TEND_CHECK_ABSENT): an interrupted
		 * delete of the row is done */
		tend_buf_printf(why, TEND_CHECK_ABSENT ": table %s is not in %s",
		    h->table, h->db);
		goto out;
	}
	if (with_content && !c.content) {
		tend_buf_printf(why, "table %s has no content column",
		    h->table);
		goto out;
	}
	rc = row_compare(db, h, key->u.s.ptr, key->u.s.len, &fp, why);
out:
	sqlite3_close(db);
	tend_buf_release(&path);
	return rc;
}

static const struct tend_handler_ops table_ops = {
	.abi = TEND_TARGET_ABI,
	.kind = "sqlite/table",
	.reconcile = table_reconcile,
	.preview_child = table_preview_child,
	.open_child = table_open_child,
	.destroy = handler_destroy,
};

static const struct tend_handler_ops row_ops = {
	.abi = TEND_TARGET_ABI,
	.kind = "sqlite/row",
	.reconcile = row_reconcile,
	.check = row_check,
	.destroy = handler_destroy,
	.flags = TEND_HANDLER_KEEPS_FOREIGN,
};

/* ---- the plugin ---- */

static int
sqlite_register(struct tend_engine *eng)
{
	return tend_engine_register_root(eng, "sqlite/table",
	    handler_new(&table_ops, NULL, NULL, NULL), NULL);
}

extern const struct tend_connector_plugin tend_connector_sqlite;

const struct tend_connector_plugin tend_connector_sqlite = {
	.abi = TEND_CONNECTOR_ABI,
	.type = "sqlite",
	.root = "sqlite/table",
	.keys = sqlite_keys,
	.nkeys = NKEYS,
	.register_root = sqlite_register,
	.container = sqlite_container,
};
