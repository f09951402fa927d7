#!/bin/sh
# First sync, no-op sync (zero writes), modify, delete, rename, plan, JSON.
. "$(dirname "$0")/lib.sh"

mkdir -p src/d
printf 'alpha\n' > src/a.txt
printf 'beta\n' > src/d/b.txt
chmod 0640 src/d/b.txt
old src/a.txt src/d/b.txt
conf_site

run plan; expect_rc 3 "plan with pending changes"
expect_in "$OUT" "+ site out/a.txt" "plan lists the create"
expect_gone out
run plan --json; expect_rc 3 "plan --json"; json_ok "$OUT"
expect_in "$OUT" '"op": "create"' "plan json op"

run sync; expect_rc 0 "first sync"
expect_file out/a.txt alpha
expect_file out/d/b.txt beta
[ "$(stat -c %a out/d/b.txt)" = 640 ] || fail "mode not copied"
expect_in "$OUT" "site: 2 created" "summary counts entries, not their directory"

# no-op: no write at all (inode and mtime unchanged), nothing read
before=$(stat -c '%i %Y %y' out/a.txt out/d/b.txt)
run sync; expect_rc 0 "no-op sync"
expect_in "$OUT" "0 created, 0 updated, 0 deleted; 2 files (0 read)" "no-op summary"
after=$(stat -c '%i %Y %y' out/a.txt out/d/b.txt)
[ "$before" = "$after" ] || fail "no-op sync rewrote targets"
run plan; expect_rc 0 "plan after sync"
expect_in "$OUT" "No changes" "plan says no changes"

# modify
printf 'alpha 2\n' > src/a.txt
run sync; expect_rc 0 "modify"
expect_file out/a.txt "alpha 2"
expect_in "$OUT" "1 updated" "modify summary"

# delete and rename
rm src/d/b.txt
mv src/a.txt src/renamed.txt
run sync --json; expect_rc 0 "delete+rename"; json_ok "$OUT"
expect_gone out/d/b.txt
expect_gone out/d          # the emptied parent goes too
expect_gone out/a.txt
expect_file out/renamed.txt "alpha 2"
expect_in "$OUT" '"deleted": 2' "json counts deletes"

# tend ls / status --json
run ls; expect_rc 0 "ls"; expect_in "$OUT" "out/renamed.txt" "ls lists the entry"
run status --json; expect_rc 0 "status"; json_ok "$OUT"
# workspace discovery from a subdirectory, and -C
mkdir -p src/deep && cd src/deep && run plan && cd "$WS"
expect_rc 0 "plan from a subdirectory finds tend.conf"
cd / && run -C "$WS" plan && cd "$WS"; expect_rc 0 "-C DIR"

# sizes about the read buffer (64 KiB) and the copy: the hash stops at
# a short read of the size stat gave, the copy at that size; a source
# that grows after its stat is copied whole by the next sync
mkdir -p src/sz
for n in 0 1 65535 65536 65537 131072 200001; do
	head -c $n /dev/urandom > src/sz/f$n
done
run sync; expect_rc 0 "sync of sizes about 64 KiB"
for n in 0 1 65535 65536 65537 131072 200001; do
	cmp -s src/sz/f$n out/sz/f$n || fail "out/sz/f$n differs from its source"
done
run check; expect_rc 0 "check after the sizes"; expect_in "$OUT" "no drift" "sizes: no drift"
head -c 70000 /dev/urandom >> src/sz/f65536
run sync; expect_rc 0 "sync of a grown file"
cmp -s src/sz/f65536 out/sz/f65536 || fail "the grown file was not copied whole"
run plan; expect_in "$OUT" "No changes" "plan after the grown file"

# a batch of many writes goes on two threads (each half of the batch):
# every name, byte and mode lands, a directory both halves need is made
# once, a file already at a new entry's name holding its bytes is
# adopted (tests/e2e/owner.sh: one with other bytes is left), and nothing
# temporary is left in the target
mkdir -p src/many
for d in $(seq 10 39); do
	mkdir -p src/many/d$d
	for f in $(seq 10 29); do printf 'file %s %s\n' $d $f > src/many/d$d/f$f; done
done
chmod 0600 src/many/d39/f29; chmod 0755 src/many/d11/f11 src/many/d30/f10
mkdir -p out/many/d35; printf 'file 35 13\n' > out/many/d35/f13
run sync; expect_rc 0 "sync of 600 files"
expect_in "$OUT" "599 created, 0 updated, 0 deleted, 1 adopted" "the 600 files are counted, the one already there as adopted"
diff -r src/many out/many > /dev/null || fail "out/many differs from src/many"
[ "$(cd src/many && find . -type f -printf '%p %m\n' | sort)" = \
  "$(cd out/many && find . -type f -printf '%p %m\n' | sort)" ] || fail "modes of out/many differ"
[ -z "$(find out -name '.tend-*')" ] || fail "a temporary file was left in the target"
run check; expect_rc 0 "check after 600 files"; expect_in "$OUT" "no drift" "600 files: no drift"
rm -r src/many
run sync --allow-delete; expect_rc 0 "delete of 600 files"
# the directories tend made go; out/many/d35 was there before (owner.sh)
[ "$(cd out && find many | sort | tr '\n' ' ')" = "many many/d35 " ] || fail "after the deletes: $(cd out && find many)"
rm -r out/many

# a file that becomes a directory and back: the delete in its way goes
# first, in the same batch as the write
mkdir -p src/sw && printf 'one\n' > src/sw/f
run sync; expect_rc 0 "sync of sw/f"
rm -r src/sw && printf 'two\n' > src/sw
run sync; expect_rc 0 "a directory becomes a file"
expect_file out/sw two
rm src/sw && mkdir -p src/sw && printf 'three\n' > src/sw/g
run sync; expect_rc 0 "a file becomes a directory"
expect_file out/sw/g three
expect_gone out/sw/f
run check; expect_rc 0 "check after the swaps"; expect_in "$OUT" "no drift" "swaps: no drift"
# the signature rows of a pass are written in transactions of a chunk of
# items (TEND_SIG_CHUNK makes it small): every file's row is written,
# so the next pass reads nothing, and a vanished file's row goes
mkdir "$WS/chunks" && cd "$WS/chunks" || exit 1
mkdir src; i=0; while [ $i -lt 20 ]; do echo "c $i" > src/f$i; i=$((i+1)); done
old src/*
conf_site ""
export TEND_SIG_CHUNK=7
run sync; expect_rc 0 "chunks: first sync"
expect_in "$OUT" "20 files (20 read)" "chunks: all read once"
run sync; expect_in "$OUT" "20 files (0 read)" "chunks: every row written"
rm src/f0 src/f19; echo 'c new' > src/f5; old src/f5
run sync; expect_in "$OUT" "2 deleted; 18 files (1 read)" "chunks: deletes and a change"
run sync; expect_in "$OUT" "0 deleted; 18 files (0 read)" "chunks: the vanished rows went"
unset TEND_SIG_CHUNK
run check; expect_rc 0 "chunks: check"
# a directory name of 60 bytes or more: the walk's key buffer grew and
# moved, and the signature rows' iterator kept reading its old bytes (a
# use after free): every file after it was read again on every sync (a
# new user's trial, 2026-12-06)
mkdir "$WS/long" && cd "$WS/long" || exit 1
long=bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb
mkdir -p src/a "src/$long" src/zz
echo 1 > src/a/f; echo 2 > "src/$long/g"; echo 3 > "src/$long/h"; echo 4 > src/zz/k
old src/a/f "src/$long/g" "src/$long/h" src/zz/k
conf_site ""
run sync; expect_rc 0 "long: first sync"
run sync; expect_in "$OUT" "4 files (0 read)" "long: nothing read again"
finish
