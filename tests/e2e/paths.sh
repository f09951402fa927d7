#!/bin/sh
# Path safety: bad entry names are refused before any I/O, and a symlink
# swapped into a target between plan and apply (a TOCTOU attempt, made
# deterministic by parking tend with a failpoint: =stop) is refused,
# never followed: nothing outside the target root is written, deleted
# or chmod-ed.
. "$(dirname "$0")/lib.sh"
BG=
trap 'kill -CONT $BG 2>/dev/null; wait 2>/dev/null; chmod -R u+rwx "$WS" 2>/dev/null; rm -rf "$WS"' EXIT
# the outside world: its listing, contents and modes must never change
mkdir -p outside/sub src/sub
printf 'precious\n' > outside/d.txt; printf 'precious\n' > outside/sub/d.txt
chmod 600 outside/d.txt
snap() { (cd outside && find . -printf '%p %m %s\n' | sort && cat d.txt sub/d.txt); }
BEFORE=$(snap)
untouched() { [ "$(snap)" = "$BEFORE" ] || fail "$1: outside changed: $(snap)"; }

printf 'a\n' > src/a; printf 'd\n' > src/sub/d.txt
old src/a src/sub/d.txt
long=$(printf '%0200d' 0)
printf 'l\n' > "src/$long"
# names: each refused with its reason, naming the source; the rest applies
for case in 'a//{name}|has an empty component' '{name}/|ends with' \
	'x/./{name}|has a "." component' 'x/../../{name}|has a ".." component' \
	'/tmp/{name}|is absolute' '{name}-{name}|longer than 255 bytes'; do
	tmpl=${case%%|*}; why=${case#*|}
	rm -rf out .tend
	conf_site "	name = $tmpl"
	run sync; expect_rc 1 "name $tmpl"
	expect_in "$ERR" "$why" "name $tmpl: the reason"
	expect_in "$ERR" "site: src/" "name $tmpl: the source that declared it"
	untouched "name $tmpl"
	# every file declares a bad name, except with {name}-{name}: only
	# the long one is bad there
	n=$(find out -type f 2>/dev/null | wc -l)
	case $tmpl in '{name}-{name}') want=2;; *) want=0;; esac
	[ "$n" = $want ] || fail "name $tmpl: $n entries written, want $want"
done
# {name}-{name} of the short names is fine: only the long one fails
expect_file out/a-a a
rm -f "src/$long"

# ---- TOCTOU: swap a directory for a symlink while tend is parked
rm -rf out .tend
conf_site ""
run sync; expect_rc 0 "first sync"
# (1) an update: out/sub becomes a symlink to outside/sub after planning
printf 'd2\n' > src/sub/d.txt
TEND_FAILPOINTS='open-dir~sub@1=stop' "$TEND" sync >"$WS/o" 2>"$WS/e" & BG=$!
stopped $BG || fail "update: did not park"
mv out/sub out/sub.moved; ln -s "$WS/outside/sub" out/sub
kill -CONT $BG; wait $BG; rc=$?; BG=
[ $rc = 1 ] || fail "update through a swapped symlink: exit $rc"
grep -q "symbolic link" "$WS/e" || fail "update: no refusal: $(cat "$WS/e")"
untouched "update"
# (2) a delete: the deleted entry's directory is swapped
rm out/sub; mv out/sub.moved out/sub
run sync; expect_rc 0 "repaired"
rm src/sub/d.txt
TEND_FAILPOINTS='open-dir~sub@1=stop' "$TEND" sync >"$WS/o" 2>"$WS/e" & BG=$!
stopped $BG || fail "delete: did not park"
mv out/sub out/sub.moved; ln -s "$WS/outside/sub" out/sub
kill -CONT $BG; wait $BG; rc=$?; BG=
[ $rc = 1 ] || fail "delete through a swapped symlink: exit $rc"
untouched "delete"
# (3) the target root itself is swapped, during a mode change (lossy):
# no chmod or write lands outside
rm out/sub; mv out/sub.moved out/sub
printf 'd\n' > src/sub/d.txt
run sync; expect_rc 0 "repaired again"
conf_site "	file-mode = 0640"
TEND_FAILPOINTS='open-dir~out@1=stop' "$TEND" sync >"$WS/o" 2>"$WS/e" & BG=$!
stopped $BG || fail "root: did not park"
mv out out.moved; ln -s "$WS/outside" out
kill -CONT $BG; wait $BG; rc=$?; BG=
[ $rc = 1 ] || fail "a swapped target root: exit $rc"
grep -q "symbolic link" "$WS/e" || fail "root: no refusal: $(cat "$WS/e")"
untouched "target root"
# (4) a file swapped for a symlink: an update renames over the link
# (replacing it), never writes through it
rm out; mv out.moved out
run sync; expect_rc 0 "repaired a third time"
printf 'a2\n' > src/a
TEND_FAILPOINTS='write~a@1=stop' "$TEND" sync >"$WS/o" 2>"$WS/e" & BG=$!
stopped $BG || fail "file: did not park"
rm out/a; ln -s "$WS/outside/d.txt" out/a
kill -CONT $BG; wait $BG; rc=$?; BG=
[ $rc = 0 ] || fail "file swapped for a symlink: exit $rc ($(cat "$WS/e"))"
[ ! -L out/a ] && expect_file out/a a2
untouched "file symlink"
# after all of it a clean sync converges
run sync; expect_rc 0 "converges"
run check -q; expect_rc 0 "check ($OUT)"
diff -r src out >/dev/null || fail "out differs from src"
finish
