#!/bin/sh
# file-mode (lossy), exclusive (destructive), drop, check and --full.
. "$(dirname "$0")/lib.sh"

mkdir src
for i in 1 2 3; do printf "f$i" > src/f$i; done
old src/*
conf_site "	file-mode = 0644"
run sync; expect_rc 0 "first"
[ "$(stat -c %a out/f1)" = 644 ] || fail "file-mode 0644"

# lossy: every entry re-applied once, content unchanged
conf_site "	file-mode = 0600"
run plan; expect_rc 3 "plan shows the lossy change"
expect_in "$OUT" "! lossy site out/" "plan marks the invalidation"
run sync; expect_rc 0 "lossy"
expect_in "$OUT" "3 updated" "all entries re-applied"
for i in 1 2 3; do expect_file out/f$i f$i; [ "$(stat -c %a out/f$i)" = 600 ] || fail "mode of f$i"; done
run sync; expect_rc 0 "after lossy"; expect_in "$OUT" "0 updated" "once only"

# non-exclusive: a stranger's file is left alone
printf 'mine' > out/stranger
run sync; expect_rc 0 "stranger"; expect_file out/stranger mine
# exclusive on: destructive, the undeclared file goes
conf_site "	file-mode = 0600
	exclusive = true"
run sync; expect_rc 0 "exclusive on"
expect_gone out/stranger
for i in 1 2 3; do expect_file out/f$i f$i; done

# check: a hand-edited and a hand-deleted entry; --full repairs
printf 'edited' > out/f1
rm out/f2
run check; expect_rc 1 "check finds drift"
expect_in "$OUT" "out/f1: content differs" "edited entry"
expect_in "$OUT" "out/f2: missing" "deleted entry"
run check --json; json_ok "$OUT"
run sync --full; expect_rc 0 "sync --full"
expect_file out/f1 f1; expect_file out/f2 f2
run check; expect_rc 0 "no drift after repair"

# drop leaves no trace, and spares another app in the same directory
cat >> tend.conf <<'CONF'
[app "other"]
	source = src2
	target = dir:out2
CONF
mkdir src2; printf 'keep' > src2/k
run sync; expect_rc 0 "two apps"
run drop site; expect_rc 0 "drop"
expect_gone out
expect_file out2/k keep
run ls site; expect_rc 0 "ls after drop"; [ -z "$OUT" ] || fail "ls after drop: $OUT"
run status; expect_in "$OUT" "other:" "the other app is still there"
# ownership: one target, one owner. Two apps naming the same container
# are refused (they would take it over from each other on every pass,
# and dropping one forgot the other's entries: found by this test)
rm -rf shared .tend
mkdir -p s1 s2; printf '1' > s1/x; printf '2' > s2/y
cat > tend.conf <<'CONF'
[app "a"]
	source = s1
	target = dir:shared
[app "b"]
	source = s2
	target = dir:./shared/
CONF
run sync; expect_rc 2 "two apps, one container"
expect_in "$ERR" 'tend.conf:6: app.b.target: dir:./shared/ is dir:shared, the target of app "a" (tend.conf:3)' "names both"
expect_gone shared
# apps share a directory through their own containers and files side by
# side (nested ones are refused: tests/e2e/config_errors.sh); a file tend
# did not write survives all of it, and dropping or emptying one app
# touches only its own entries
cat > tend.conf <<'CONF'
[app "a"]
	source = s1
	target = dir:shared/a
	name = a-{name}
[app "b"]
	source = s2
	target = dir:shared/b
[app "c"]
	source = s2
	target = file:shared/c.json
	declare = exec cat
CONF
run sync; expect_rc 0 "three apps in one directory"
printf 'mine' > shared/stranger
run drop a; expect_rc 0 "drop a"
expect_gone shared/a/a-x; expect_file shared/b/y 2; [ -f shared/c.json ] || fail "c.json dropped with a"
expect_file shared/stranger mine
run sync; expect_rc 0 "a back"; expect_file shared/a/a-x 1
rm s2/y
run sync --allow-delete; expect_rc 0 "b's source emptied"
expect_gone shared/b/y; expect_file shared/a/a-x 1; expect_file shared/stranger mine
run drop b c; expect_rc 0 "drop b and c"
expect_gone shared/c.json; expect_file shared/a/a-x 1; expect_file shared/stranger mine
run drop a; expect_rc 0 "drop a again"
expect_gone shared/a/a-x; expect_file shared/stranger mine

# a drop bigger than one batch (4,096 components): every entry is deleted
# before its directory, none is left on disk untracked, the directory
# tend created goes too, and a stranger in it keeps it
mkdir -p big/src; cd big
i=0; while [ $i -lt 5000 ]; do echo $i > src/f$i; i=$((i+1)); done
conf_site ""
run sync -q; expect_rc 0 "sync of 5,000 files"
run drop site; expect_rc 0 "drop of 5,000 files"
[ ! -e out ] || fail "drop left $(find out -type f | wc -l) files in out/"
run ls; [ -z "$OUT" ] || fail "drop left tracked states: $(echo "$OUT" | head -2)"
run sync -q; expect_rc 0 "sync after the drop"
echo mine > out/stranger
run drop site; expect_rc 0 "drop beside a stranger"
[ "$(ls out)" = stranger ] || fail "drop beside a stranger left: $(ls out | head -3)"
cd ..

# an exclusive target's reports agree with what sync --full does (a new
# user's trial): plan before the first sync does not call a declared file
# undeclared; one entry in the way does not keep sync --full from
# removing what is undeclared, and plan lists it
rm -rf xs; mkdir -p xs/src xs/out; cd xs
echo a > src/a; echo a > out/a; echo precious > out/precious.txt
printf '[app "x"]\n\tsource = src\n\ttarget = dir:out\n\texclusive = true\n' > tend.conf
run plan; expect_rc 3 "exclusive: plan before the first sync"
expect_not_in "$OUT" "? x out/a " "exclusive: plan does not call the declared file undeclared"
expect_in "$OUT" "? x out/precious.txt" "exclusive: plan lists the undeclared one"
expect_in "$OUT" "1 undeclared in exclusive targets" "exclusive: plan counts one"
run sync; expect_rc 0 "exclusive: first sync"
echo c > src/c; echo userc > out/c
run check; expect_rc 1 "exclusive: check"
expect_in "$OUT" "drift out/precious.txt: not declared at the last sync" "exclusive: check names the undeclared file"
run plan; expect_rc 1 "exclusive: plan with an entry in the way"
expect_in "$OUT" "? x out/precious.txt" "exclusive: plan lists the undeclared file beside a failure"
run sync --full; expect_rc 1 "exclusive: sync --full with an entry in the way"
expect_gone out/precious.txt
expect_file out/c userc
run check; expect_rc 1 "exclusive: check after"
expect_not_in "$OUT" "precious" "exclusive: nothing undeclared is left"
expect_in "$OUT" "drift out/c: in the way" "exclusive: the entry in the way"
cd ..

# exclusive switched on rebuilds the target from the declared entries: a
# user's file at a declared name goes with the rest, and plan says so (it
# said "+ create", and sync replaced the user's bytes: a new user's trial)
rm -rf xw; mkdir -p xw/src xw/out; cd xw
echo a > src/a; echo b > src/b; echo USERB > out/b; echo stray > out/stray
printf '[app "e"]\n\tsource = src\n\ttarget = dir:out\n' > tend.conf
run sync; expect_rc 1 "switch: out/b is in the way"
expect_file out/b USERB
printf '\texclusive = true\n' >> tend.conf
run plan; expect_rc 3 "switch: plan"
expect_in "$OUT" "+ e out/b  (replaces what is there, which tend did not write: the target is rebuilt from the declared entries only)" "switch: plan says the user's file goes"
expect_in "$OUT" "1 of the writes over what tend did not write" "switch: plan counts it"
expect_in "$OUT" "- e out/stray" "switch: plan lists the stray"
run plan --json; expect_in "$OUT" '"path": "out/b", "replaces": true' "switch: plan --json"
run sync; expect_rc 0 "switch: sync"
expect_file out/b b; expect_gone out/stray
cd ..

# a file that becomes a directory, and a directory that becomes a file,
# in a pass of many batches with many deletes (a new user's trial: the
# new entry's write came in a batch before the old one's delete, failed
# with "out/x is not a directory: tend does not remove what it did not
# write", and a second sync was needed)
rm -rf src out .tend; mkdir -p src/gone src/x src/y
i=0; while [ $i -lt 40 ]; do echo "g$i" > src/gone/f$i; i=$((i+1)); done
echo x > src/x/f; echo file > src/y/was-file; echo d > src/y/d1; echo d > src/y/d2
mkdir src/y/dir; echo in > src/y/dir/a; echo in > src/y/dir/b
printf '[app "fd"]\n\tsource = src\n\ttarget = dir:out\n\tmax-delete = 1000\n' > tend.conf
run sync; expect_rc 0 "fd: first sync"
rm -r src/gone
rm src/y/was-file; mkdir src/y/was-file; echo now > src/y/was-file/n
rm -r src/y/dir; echo nowfile > src/y/dir
TEND_BATCH=4 run sync; expect_rc 0 "fd: file <-> directory in a pass of many batches ($ERR)"
expect_not_in "$ERR" "not a directory" "fd: no write before the delete it waits for"
expect_file out/y/was-file/n now
expect_file out/y/dir nowfile
diff -r src out >/dev/null || fail "fd: out differs: $(diff -r src out)"
run check; expect_rc 0 "fd: no drift"

# ... while a folder renamed under name = {name} keeps its entries: the
# source that declares them now takes them over, in any batch (a new
# user's trial: with the gone sources' deletes first, they were deleted
# and written again, and counted so)
rm -rf src out .tend; mkdir -p src/a
i=0; while [ $i -lt 30 ]; do echo "a$i" > src/a/f$i; i=$((i+1)); done
printf '[app "flat"]\n\tsource = src\n\tname = {name}\n\ttarget = dir:out\n\tmax-delete = 1000\n' > tend.conf
run sync; expect_rc 0 "flat: first sync"
ino=$(stat -c %i out/f7)
mv src/a src/b
TEND_BATCH=4 run sync; expect_rc 0 "flat: a renamed folder in a pass of many batches"
expect_in "$OUT" "flat: 0 created, 0 updated, 0 deleted" "flat: taken over, not deleted and written again"
[ "$(stat -c %i out/f7)" = "$ino" ] || fail "flat: out/f7 was written again"
run check; expect_rc 0 "flat: no drift"
finish
