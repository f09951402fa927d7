#!/bin/sh
# The SQLite connector plugin (examples/sqlite) as a user ships it: built
# against the installed headers and tend.pc (meson install --destdir),
# loaded by a [plugin] section, checked with SQLite itself.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
BUILD=${BUILD:?the build directory} SRC=${SRC:?the source directory}

# ---- install, then build the plugin as a user would
meson install -C "$BUILD" --destdir "$WS/inst" --no-rebuild --quiet \
	>"$WS/install.log" 2>&1 || { cat "$WS/install.log"; fail "meson install"; finish; }
pc=$(dirname "$(find "$WS/inst" -name tend.pc | head -1)")
[ -d "$pc" ] || { fail "no tend.pc installed"; finish; }
cflags=$(PKG_CONFIG_SYSROOT_DIR="$WS/inst" PKG_CONFIG_PATH="$pc" pkg-config --cflags tend) ||
	fail "pkg-config --cflags tend"
libs=$(PKG_CONFIG_SYSROOT_DIR="$WS/inst" PKG_CONFIG_PATH="$pc" pkg-config --libs tend) ||
	fail "pkg-config --libs tend"
${CC:-cc} -shared -fPIC -Wall -Wextra -Werror -o tend-sqlite.so \
	"$SRC/examples/sqlite/tend_sqlite.c" $cflags $libs -lsqlite3 2>"$WS/cc.log" ||
	{ cat "$WS/cc.log"; fail "the plugin does not build against the installed headers"; finish; }

q() {
	python3 - notes.db "$1" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
def show(x):
    if x is None:
        return ""
    if isinstance(x, bytes):
        x = x.decode()
    return str(x).rstrip("\n")
for r in c.execute(sys.argv[2]):
    print("|".join(show(x) for x in r))
PY
}
digest() { sha256sum notes.db | cut -d' ' -f1; }

mkdir -p notes/sub
echo hello > notes/a.md; echo world > notes/sub/b.md; echo three > notes/c.md
conf() {
	cat > tend.conf <<CONF
[plugin "sqlite"]
	path = tend-sqlite.so
[app "notes"]
	source = notes
	target = sqlite:notes.db
	table = notes
$1
CONF
}
conf ""

# ---- rows equal sources
run sync; expect_rc 0 "first sync"
[ "$(q 'select path, content from notes order by path' | tr '\n' ' ')" = "a.md|hello c.md|three sub/b.md|world " ] || fail "rows: $(q 'select path, content from notes order by path')"
[ "$(q "select size, digest != '' from notes where path = 'a.md'")" = "6|1" ] || fail "size and digest: $(q 'select size, digest from notes')"
run plan; expect_rc 0 "converged"; expect_in "$OUT" "No changes" "plan after the first sync"
run check; expect_rc 0 "no drift"

# ---- a no-op sync changes nothing: the file's bytes
before=$(digest)
run sync; expect_rc 0 "no-op sync"
expect_in "$OUT" "0 created, 0 updated, 0 deleted" "no-op counts"
[ "$(digest)" = "$before" ] || fail "a no-op sync changed notes.db"

# ---- a modified, a deleted and a renamed source
echo hello2 > notes/a.md; rm notes/c.md; mv notes/sub/b.md notes/sub/b2.md
run plan; expect_rc 3 "changes pending"
expect_in "$OUT" '~ notes @sqlite/table/notes.db\tnotes/a.md' "plan spells a row's path"
run ls notes
expect_in "$OUT" '@sqlite/table/notes.db\tnotes/a.md  ' "ls spells it the same"
run sync; expect_rc 0 "modify, delete, rename"
[ "$(q 'select path, content from notes order by path' | tr '\n' ' ')" = "a.md|hello2 sub/b2.md|world " ] || fail "after the changes: $(q 'select path, content from notes order by path')"

# ---- rows changed by hand are drift; sync --full restores them
python3 -c "import sqlite3; c=sqlite3.connect('notes.db'); c.execute(\"delete from notes where path='a.md'\"); c.commit()"
run check; expect_rc 1 "a row deleted by hand"
expect_in "$OUT" "a.md" "check names the row"
run sync; expect_rc 0 "a plain sync"
[ -z "$(q "select path from notes where path = 'a.md'")" ] || fail "a plain sync read the table"
run sync --full; expect_rc 0 "sync --full"
[ "$(q "select content from notes where path = 'a.md'")" = hello2 ] || fail "not restored: $(q 'select * from notes')"
# (a new user's trial: --full said every row "updated" and rewrote it)
expect_in "$OUT" "0 created, 1 updated, 0 deleted, 1 verified" "--full: the drifted row updated, the other verified"
run check; expect_rc 0 "no drift after --full"
before=$(digest)
run sync --full; expect_rc 0 "sync --full without drift"
expect_in "$OUT" "0 created, 0 updated, 0 deleted, 2 verified" "--full without drift verifies"
[ "$(digest)" = "$before" ] || fail "sync --full without drift rewrote notes.db"

# ---- a lossy change: content as blobs, every row written again
conf "	content = blob"
run plan; expect_rc 3 "a lossy change is pending"
run sync; expect_rc 0 "content = blob"
[ "$(q "select typeof(content) from notes order by path" | sort -u)" = blob ] || fail "content not blobs: $(q 'select typeof(content) from notes')"
run check; expect_rc 0 "no drift after the lossy change"

# ---- a destructive change: the table is rebuilt, a row of someone else's goes
python3 -c "import sqlite3; c=sqlite3.connect('notes.db'); c.execute(\"insert into notes(path) values('theirs')\"); c.commit()"
conf "	content = blob
	recreate = true"
run sync; expect_rc 0 "recreate = true"
[ "$(q 'select path from notes order by path' | tr '\n' ' ')" = "a.md sub/b2.md " ] || fail "after the rebuild: $(q 'select path from notes')"

# ---- a kill inside the sink's transaction converges
echo killed > notes/k.md; echo hello3 > notes/a.md
TEND_FAILPOINTS='sqlite-commit=kill' "$TEND" sync >/dev/null 2>&1
[ -z "$(q "select path from notes where path = 'k.md'")" ] || fail "a killed transaction left a row"
run sync; expect_rc 0 "sync after the kill"
[ "$(q "select content from notes where path = 'k.md'")" = killed ] && [ "$(q "select content from notes where path = 'a.md'")" = hello3 ] ||
	fail "not converged after the kill: $(q 'select path, content from notes')"
run check; expect_rc 0 "no drift after the kill"

# ---- a source saved while the sink reads it: the row fails (no row of
# bytes its record does not describe), the next sync writes it
echo 'first' > notes/r.md
parked 'sqlite-put~notes/r.md@1=stop' notes/r.md 'saved meanwhile'
[ "$PRC" = 1 ] || fail "a source changed mid-apply: exit $PRC: $POUT"
expect_in "$POUT" "notes/r.md changed since tend read it" "the failure names the source"
[ -z "$(q "select path from notes where path = 'r.md'")" ] || fail "a row of the changed source: $(q "select content from notes where path = 'r.md'")"
run sync; expect_rc 0 "sync after the change"
[ "$(q "select content from notes where path = 'r.md'")" = 'saved meanwhile' ] || fail "r.md: $(q "select content from notes where path = 'r.md'")"
run check; expect_rc 0 "no drift after the race"
rm notes/r.md; run sync; expect_rc 0 "r.md gone again"

# ---- tend help config lists the plugin's keys
run help config; expect_rc 0 "help config"
expect_in "$OUT" "with target = sqlite:ARG" "the plugin's section"
expect_in "$OUT" "	recreate = false	# " "a plugin key with its default"

# ---- configuration errors name the line and the key
conf "	tabel = x"
run sync; expect_rc 2 "a typo in a plugin key"
expect_in "$ERR" "tend.conf:7: app.notes.tabel: unknown key for a sqlite: target; did you mean \"table\"?" "did you mean"
conf "	recreate = maybe"
run check; expect_rc 2 "a bad boolean"
expect_in "$ERR" "app.notes.recreate: expected a boolean" "the bad value"
conf "	content = jpeg"
run plan; expect_rc 2 "a value the plugin refuses: at load, not at every pass"
expect_in "$ERR" "tend.conf:5: app.notes.target: " "on the app's target line"
expect_in "$ERR" "content = jpeg" "the plugin's message"
conf "[app \"twin\"]
	source = notes
	target = sqlite:./notes.db
	table = notes"
run sync; expect_rc 2 "two apps, one table"
expect_in "$ERR" "app.twin.target: sqlite:./notes.db is the target of app \"notes\"" "the overlap names both apps"
sed 's|tend-sqlite.so|nope.so|' tend.conf > t && mv t tend.conf
run status; expect_rc 2 "a missing plugin: every command"
expect_in "$ERR" "tend.conf:2: plugin.sqlite.path:" "the [plugin] line"

# ---- a declaration plugin declares rows into a plugin's container
cp "${LINES:?}" lines.so
cat > tend.conf <<'CONF'
[plugin "sqlite"]
	path = tend-sqlite.so
[app "lines"]
	source = notes
	declare = plugin lines.so lines_declare
	target = sqlite:lines.db
CONF
run sync; expect_rc 0 "a declaration plugin into a sqlite target"
[ "$(python3 -c "import sqlite3; print(sqlite3.connect('lines.db').execute(\"select count(*) from lines where path like 'stats/%'\").fetchone()[0])")" = 3 ] ||
	fail "the plugin's rows: $(python3 -c "import sqlite3; print(sqlite3.connect('lines.db').execute('select path from lines').fetchall())")"
run drop lines; expect_rc 0 "drop the lines app"

# ---- a running agent starts again on a rebuilt connector plugin
CTL="python3 $HERE/agentctl.py $WS/.tend/agent.sock"
conf "	content = blob
	recreate = true"
printf '[tend]\n\tdebounce = 0\n' | cat - tend.conf > t && mv t tend.conf
"$TEND" watch 2>"$WS/agent.err" &
AGENT=$!
trap 'kill -TERM $AGENT 2>/dev/null; wait $AGENT 2>/dev/null; chmod -R u+rwx "$WS" 2>/dev/null; rm -rf "$WS"' EXIT
$CTL ready || fail "agent ready"
cp tend-sqlite.so new.so && mv new.so tend-sqlite.so   # a new file
ino=$(stat -c %i tend-sqlite.so)
i=0; until grep -q "restarts to load it" "$WS/agent.err" || [ $i -ge 200 ]; do sleep 0.05; i=$((i+1)); done
expect_in "$(cat "$WS/agent.err")" "a connector plugin changed: the agent restarts to load it" "the agent says it restarts"
$CTL ready || fail "the agent is back"
grep "tend-sqlite.so" /proc/$AGENT/maps | grep -q " $ino " || fail "the agent runs the old plugin: $(grep tend-sqlite /proc/$AGENT/maps | head -2)"
$CTL until "[ -n \"\$(python3 -c \"import sqlite3; print(sqlite3.connect('notes.db').execute(\\\"select path from notes where path='after.md'\\\").fetchall() or '')\")\" ]" -- 'echo after > notes/after.md' ||
	fail "the restarted agent applies changes"
kill -TERM $AGENT; wait $AGENT; rc=$?; AGENT=
[ $rc = 0 ] || fail "the restarted agent's exit on SIGTERM: $rc"
run check; expect_rc 0 "no drift after the agent"
rm -f notes/after.md; run sync -q

# ---- a row the user wrote at a new file's path stays: tend writes only
# rows it wrote (plan, sync and check say it is in the way)
python3 -c "import sqlite3; c = sqlite3.connect('notes.db'); c.execute(\"insert into notes (path, content, size, digest) values ('mine.md', 'my row', 6, 'x')\"); c.commit()"
echo ours > notes/mine.md
run plan; expect_rc 1 "plan: a user's row in the way"
expect_in "$ERR" "mine.md: in the way" "plan names the row"
run sync; expect_rc 1 "sync: a user's row in the way"
expect_in "$ERR" "a row tend has no record of writing is in the way" "sync says why"
[ "$(q "select content from notes where path = 'mine.md'")" = "my row" ] || fail "the user's row was replaced: $(q "select content from notes where path = 'mine.md'")"
run check; expect_rc 1 "check: in the way"; expect_in "$OUT" "mine.md: in the way" "check names the row"
# its source gone, the user's row stays (it was deleted: a new user's
# trial, 2026-12-06); then the source is back, in the way again
rm notes/mine.md
run plan; expect_in "$OUT" "1 to forget" "plan: the row's state is forgotten, not deleted"
run sync; expect_rc 0 "the source of a row in the way went"
expect_in "$OUT" "0 deleted, 1 forgotten" "sync: the row's state forgotten"
[ "$(q "select content from notes where path = 'mine.md'")" = "my row" ] || fail "the user's row was deleted: $(q "select content from notes where path = 'mine.md'")"
echo ours > notes/mine.md
run sync; expect_rc 1 "sync: in the way again"
python3 -c "import sqlite3; c = sqlite3.connect('notes.db'); c.execute(\"delete from notes where path = 'mine.md'\"); c.commit()"
run sync; expect_rc 0 "sync once the row is gone"
[ "$(q "select content from notes where path = 'mine.md'")" = "ours" ] || fail "mine.md after: $(q "select content from notes where path = 'mine.md'")"
rm notes/mine.md; run sync -q --allow-delete; expect_rc 0 "mine.md removed"

# ---- another table name: tend's rows go from the old table, which stays
# with a row of the user's: it is forgotten, not counted deleted, and the
# sync says why it stays (a new user's trial: "4 deleted", the table kept)
conf "	content = blob"
run sync; expect_rc 0 "recreate = false again"
python3 -c "import sqlite3; c = sqlite3.connect('notes.db'); c.execute(\"insert into notes (path, content, size, digest) values ('users.md', 'kept', 4, 'x')\"); c.commit()"
n=$(q "select count(*) from notes")
sed -i 's/^\ttable = notes$/\ttable = notes2/' tend.conf
run sync; expect_rc 0 "another table name"
expect_in "$OUT" "$((n - 1)) deleted, 1 forgotten" "the old table's rows deleted, the table forgotten"
expect_in "$ERR" "table notes stays, with what tend did not write in it (1 row left)" "the sync says the table stays"
[ "$(q "select path from notes")" = users.md ] || fail "the old table: $(q 'select path from notes')"
[ "$(q "select count(*) from notes2")" = $((n - 1)) ] || fail "the new table: $(q 'select path from notes2')"
conf "	content = blob"
python3 -c "import sqlite3; c = sqlite3.connect('notes.db'); c.execute(\"delete from notes where path = 'users.md'\"); c.commit()"
run sync; expect_rc 0 "back to the first table"
run check; expect_rc 0 "check after the table came back"

# ---- drop without the plugin loaded could only forget the rows: refused
printf '[tend]\n' > tend.conf
run status; expect_rc 0 "status without the app"
run drop notes; expect_rc 1 "drop without the plugin"
expect_in "$ERR" "no loaded plugin provides" "the refusal says why"
[ -n "$(q "select path from notes where path = 'a.md'")" ] || fail "a refused drop touched the rows"
run ls notes; expect_rc 0 "ls after the refused drop"
expect_in "$OUT" "a.md" "a refused drop forgot nothing"

# ---- drop leaves no table
conf "	content = blob
	recreate = true"
run drop notes; expect_rc 0 "drop"
[ -z "$(q "select name from sqlite_master where type = 'table' and name = 'notes'")" ] || fail "drop left the table"
run ls notes; expect_rc 0 "ls after drop"
[ -z "$OUT" ] || fail "drop left states: $OUT"
finish
