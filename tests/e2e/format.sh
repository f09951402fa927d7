#!/bin/sh
# A workspace an older tend synced keeps working: its store is of format 1
# (ids without locality, TEND_STORE_FORMAT=1 makes one), this tend reads
# it with the ids it was made with and keeps its format; a dir and a git
# target see no spurious create, and changes, deletes and renames land.
# A new store is of format 3 (rows in the compact layout), and one of
# format 2 keeps writing the fixed-width rows an older tend reads.
. "$(dirname "$0")/lib.sh"
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t
G() { git -C repo "$@"; }

# the tree and tend.conf an older tend synced, as they were
setup_old() {
	rm -rf .tend out repo src
	git init -q --bare repo
	mkdir -p src/d1 src/d2
	for i in 1 2 3; do
		printf 'one %s\n' $i > src/d1/f$i.txt
		printf 'two %s\n' $i > src/d2/f$i.txt
	done
	printf 'top\n' > src/top.txt
	old src/top.txt src/d1/* src/d2/*
	cat > tend.conf <<'CONF'
[app "site"]
	source = src
	target = dir:out
[app "pages"]
	source = src
	target = git:repo
	ref = refs/heads/pages
CONF
}

old_store() {
	F=$1
	OUT=$(TEND_STORE_FORMAT=$F "$TEND" sync 2>&1); RC=$?
	expect_rc 0 "first sync, format $F"
	[ "$("$STORE_TOOL" format .tend/store)" = "$F" ] || fail "(format $F) the old store is not of format $F"

	# the old store read by this tend: nothing to do
	run plan; expect_rc 0 "plan of an old store"
	expect_in "$OUT" "No changes" "plan of an old store says no changes"
	run sync; expect_rc 0 "no-op sync of an old store"
	expect_in "$OUT" "site: 0 created, 0 updated, 0 deleted" "dir: nothing redone"
	expect_in "$OUT" "pages: 0 created, 0 updated, 0 deleted" "git: nothing redone"
	[ "$(G rev-list --count refs/heads/pages)" = 1 ] || fail "(format $F) a no-op made a commit"

	# changes land, deletes and renames leave nothing behind
	printf 'one changed\n' > src/d1/f1.txt
	rm src/d2/f2.txt
	mv src/top.txt src/d2/moved.txt
	printf 'new\n' > src/d2/f9.txt
	run sync; expect_rc 0 "sync of changes, old store"
	expect_in "$OUT" "site: 2 created, 1 updated, 2 deleted" "dir counts"
	expect_in "$OUT" "pages: 2 created, 1 updated, 2 deleted" "git counts"
	diff -r src out >/dev/null || fail "(format $F) out differs from src: $(diff -r src out)"
	want=$(cd src && find . -type f | sed 's|^\./||' | sort)
	[ "$(G ls-tree -r --name-only refs/heads/pages)" = "$want" ] || fail "(format $F) git tree: $(G ls-tree -r --name-only refs/heads/pages)"
	[ "$(G show refs/heads/pages:d1/f1.txt)" = "one changed" ] || fail "(format $F) git blob not updated"
	run check; expect_rc 0 "check of the old store after changes ($OUT)"
	run ls site; [ "$(printf '%s\n' "$OUT" | grep -c .)" = 8 ] || fail "(format $F) ls site (7 files and out/): $OUT"
	run status; expect_in "$OUT" "site: 8 target states" "status of site"
	[ "$("$STORE_TOOL" format .tend/store)" = "$F" ] || fail "(format $F) the store changed format"
	# an older tend reads every row this one wrote there
	L=$("$STORE_TOOL" layouts .tend/store)
	expect_not_in "$L" " 2:" "(format $F) a compact row in an old store"
	expect_in "$L" "comp-memo 0" "(format $F) a memo in a component's row of an old store"
	[ "$(printf '%s\n' "$L" | sed -n 's/^cex-path //p')" -ge 7 ] || fail "(format $F) an old store's existence rows lost their paths: $L"
	expect_in "$L" "memo 1:" "(format $F) the memos of an old store"
	# and names every entry, as it did
	[ "$(printf '%s\n' "$L" | sed -n 's/^name //p')" -ge 7 ] || fail "(format $F) an old store lost its entries' names: $L"

	# dropping an app of an old store removes what it made
	run drop site; expect_rc 0 "drop site"
	expect_gone out/d1/f1.txt
	expect_gone out/d2/moved.txt
}

setup_old; old_store 1
setup_old; old_store 2

# a new store is of the newest format, and does the same
rm -rf .tend out
sed -i '/^\[app "pages"\]/,$d' tend.conf
run sync; expect_rc 0 "first sync, new store"
[ "$("$STORE_TOOL" format .tend/store)" = 3 ] || fail "a new store is not of format 3"
diff -r src out >/dev/null || fail "out differs from src (new store)"
L=$("$STORE_TOOL" layouts .tend/store)
expect_not_in "$L" " 1:" "a fixed-width row in a new store"
expect_in "$L" "item 2:" "compact item rows"
expect_in "$L" "comp 2:" "compact component rows"
# memos in their components' rows, not in MEMO rows of their own
expect_not_in "$L" "memo 1:" "a MEMO row in a new store"
expect_not_in "$L" "memo 2:" "a MEMO row in a new store"
[ "$(printf '%s\n' "$L" | sed -n 's/^comp-memo //p')" -ge 7 ] || fail "memos not in the components' rows: $L"
expect_in "$L" "cex-path 0" "a new store's existence rows repeat their children's paths"
# NAME rows for containers only (an entry's name is in its item row):
# the target directory and tend's root, not the 7 files
[ "$(printf '%s\n' "$L" | sed -n 's/^name //p')" -le 3 ] || fail "a new store names its entries: $L"
printf 'changed again\n' > src/d1/f2.txt; rm src/d2/f3.txt
run sync; expect_in "$OUT" "site: 0 created, 1 updated, 1 deleted" "a new store: changes"
diff -r src out >/dev/null || fail "out differs from src (new store, changes)"
run check; expect_rc 0 "check of a new store"
run ls site; expect_in "$OUT" "d1/f2.txt" "ls of a new store"

# source signatures an older tend wrote (rows of version 3, 123 bytes for
# a copied file; this tend writes 50): read as they are, nothing read
# again nor redone; changes, deletes, held deletes and an exclusive
# target's strays see the entries they list
rm -rf .tend out
i=0; while [ $i -lt 30 ]; do echo "n $i" > src/d1/n$i.txt; i=$((i + 1)); done
old src/d1/*
printf '\texclusive = true\n' >> tend.conf
TEND_SIG_VERSION=3 "$TEND" sync -q || fail "sync writing version-3 signatures"
run sync; expect_in "$OUT" "0 created, 0 updated, 0 deleted; " "v3 signatures: nothing redone"
expect_in "$OUT" " files (0 read)" "v3 signatures: nothing read again"
run plan; expect_in "$OUT" "No changes" "plan over v3 signatures"
echo "stray" > out/d1/stray.txt
run check; expect_in "$OUT" "stray.txt" "check: the stray of an exclusive target, with v3 signatures"
run sync --full; expect_rc 0 "sync --full over v3 signatures"
expect_gone out/d1/stray.txt
[ -e out/d1/n7.txt ] || fail "sync --full removed a declared entry (v3 signatures)"
TEND_SIG_VERSION=3 "$TEND" sync -q --full || fail "v3 signatures again"
rm src/d1/n*.txt
run sync; expect_rc 1 "30 of 36 sources gone: the brake holds"
expect_in "$ERR" "held back" "the brake holds the deletes (v3 signatures)"
[ -e out/d1/n7.txt ] || fail "a held delete ran"
run sync --allow-delete; expect_rc 0 "the held deletes approved"
expect_gone out/d1/n7.txt
diff -r src out >/dev/null || fail "out differs from src after v3 signatures: $(diff -r src out)"
run check; expect_rc 0 "check after v3 signatures"
finish
