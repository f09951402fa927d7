#!/bin/sh
# Resource bounds: a 4 GiB source file is fingerprinted and copied in
# bounded memory (peak RSS under 64 MiB), and so is a 64 MiB file in a
# git commit big enough to be packed; a plan of 50k new files holds
# none of what it would write, and a git commit of them holds a batch.
# Needs 9 GiB of free disk (source and target): skipped, and said so,
# without it. Memory is measured on the plain build only (the
# sanitizers' setup sets TEND_SANITIZED: their shadow memory is not
# tend's).
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
if [ -n "${TEND_SANITIZED:-}" ]; then
	echo "SKIP: peak RSS is not measured under the sanitizers"
	exit 0
fi
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t
LIMIT=65536 # KiB
rss() { sed -n 's/^maxrss //p' "$WS/.err" | tail -1; }

free_kb=$(df -Pk "$WS" | awk 'NR==2 {print $4}')
if [ "$free_kb" -lt $((9 * 1024 * 1024)) ]; then
	echo "SKIP: $((free_kb / 1024)) MiB free, the 4 GiB case needs 9 GiB"
else
	mkdir -p src
	# not sparse: a sparse file could be copied as holes; 4 GiB of data
	head -c 1048576 /dev/urandom > "$WS/mib"
	i=0; while [ $i -lt 4096 ]; do cat "$WS/mib"; i=$((i+1)); done > src/big
	rm "$WS/mib"
	printf 'small\n' > src/small
	conf_site ""
	OUT=$(python3 "$HERE/maxrss.py" "$TEND" sync 2>"$WS/.err"); RC=$?; ERR=$(cat "$WS/.err")
	expect_rc 0 "4 GiB sync"
	kb=$(rss)
	echo "4 GiB file: tend sync peak RSS $kb KiB"
	[ "$kb" -lt $LIMIT ] || fail "4 GiB copy: peak RSS $kb KiB, limit $LIMIT"
	[ "$(stat -c %s out/big)" = 4294967296 ] || fail "out/big size $(stat -c %s out/big)"
	cmp -s src/big out/big || fail "out/big differs"
	expect_file out/small small
	# a no-op pass does not read it again
	OUT=$(python3 "$HERE/maxrss.py" "$TEND" check -q 2>"$WS/.err"); RC=$?; ERR=$(cat "$WS/.err")
	expect_rc 0 "check of the 4 GiB entry"
	kb=$(rss)
	echo "4 GiB file: tend check peak RSS $kb KiB"
	[ "$kb" -lt $LIMIT ] || fail "4 GiB check: peak RSS $kb KiB"
	rm -rf src out .tend
fi

# git: a 64 MiB file among 600 others (a packed commit): the big blob is
# streamed, not read whole into the pack
git init -q --bare repo.git
mkdir -p src
head -c 67108864 /dev/urandom > src/big
i=0; while [ $i -lt 600 ]; do printf '%d\n' $i > src/f$i; i=$((i+1)); done
cat > tend.conf <<'CONF'
[app "pub"]
	source = src
	target = git:repo.git
	ref = refs/heads/pages
CONF
OUT=$(python3 "$HERE/maxrss.py" "$TEND" sync 2>"$WS/.err"); RC=$?; ERR=$(cat "$WS/.err")
expect_rc 0 "git sync with a 64 MiB file"
kb=$(rss)
echo "64 MiB blob in a packed git commit: peak RSS $kb KiB"
[ "$kb" -lt $LIMIT ] || fail "git: peak RSS $kb KiB, limit $LIMIT"
git -C repo.git fsck --strict >/dev/null 2>&1 || fail "git fsck"
[ "$(git -C repo.git cat-file -s refs/heads/pages:big)" = 67108864 ] || fail "big blob size"
git -C repo.git cat-file blob refs/heads/pages:big | cmp -s - src/big || fail "big blob content"

# git: 1024 files of 128 KiB (incompressible), all in one pack: building
# the commit's trees does not read the blobs back from it (libgit2's
# strict object creation did, which kept the whole pack mapped: the
# peak RSS grew with the pack, 360 MiB of 713 at 100k files)
rm -rf src repo.git .tend
git init -q --bare repo.git
mkdir -p src
head -c 134217728 /dev/urandom | split -b 131072 -a 4 - src/p
OUT=$(python3 "$HERE/maxrss.py" "$TEND" sync 2>"$WS/.err"); RC=$?; ERR=$(cat "$WS/.err")
expect_rc 0 "git sync of 128 MiB in 1024 blobs"
kb=$(rss)
echo "1024 blobs of 128 KiB in one git commit: peak RSS $kb KiB"
[ "$kb" -lt $LIMIT ] || fail "git pack: peak RSS $kb KiB, limit $LIMIT"
[ "$(git -C repo.git ls-tree -r refs/heads/pages | wc -l)" = 1024 ] || fail "1024 entries"
git -C repo.git fsck --strict >/dev/null 2>&1 || fail "git fsck of the packed commit"
git -C repo.git cat-file blob refs/heads/pages:paaaa | cmp -s - src/paaaa || fail "paaaa content"

# plan of 50,000 new files in a workspace never synced: its store is a
# scratch one, committed batch by batch, so what the pass would write is
# not held in memory to its end (one held transaction: 59 MiB of
# anonymous memory here, 752 MiB at 1M files; now 24 MiB)
rm -rf src repo.git .tend
python3 - <<'PY'
import os
for d in range(50):
    os.makedirs("src/d%02d" % d)
    for f in range(1000):
        with open("src/d%02d/f%04d" % (d, f), "w") as o:
            o.write("%d %d\n" % (d, f))
PY
conf_site ""
OUT=$(python3 "$HERE/maxrss.py" "$TEND" plan 2>"$WS/.err"); RC=$?; ERR=$(cat "$WS/.err")
expect_rc 3 "plan of 50k new files"
anon=$(sed -n 's/^maxanon //p' "$WS/.err" | tail -1)
echo "plan of 50,000 new files: peak anonymous RSS $anon KiB"
[ "$anon" -gt 0 ] && [ "$anon" -lt 40960 ] || fail "plan of 50k new files: peak anonymous RSS $anon KiB, limit 40960"
[ ! -e .tend ] || fail "plan made .tend"

# the first commit of the 50,000 files into a git target: its batches
# amend one commit, so the pass is not held in memory to its end (as one
# batch: 158 MiB of anonymous memory here, 337 MiB at 100k; now 62)
git init -q --bare repo.git
cat > tend.conf <<'CONF'
[app "pub"]
	source = src
	target = git:repo.git
	ref = refs/heads/pages
CONF
OUT=$(python3 "$HERE/maxrss.py" "$TEND" sync -q 2>"$WS/.err"); RC=$?; ERR=$(cat "$WS/.err")
expect_rc 0 "git sync of 50k new files"
anon=$(sed -n 's/^maxanon //p' "$WS/.err" | tail -1)
echo "git first commit of 50,000 files: peak anonymous RSS $anon KiB"
[ "$anon" -gt 0 ] && [ "$anon" -lt 98304 ] || fail "git first commit of 50k files: peak anonymous RSS $anon KiB, limit 98304"
[ "$(git -C repo.git rev-list --count refs/heads/pages)" = 1 ] || fail "git: one commit for the pass"
[ "$(git -C repo.git ls-tree -r refs/heads/pages | wc -l)" = 50000 ] || fail "git: 50000 entries"
git -C repo.git fsck --strict >/dev/null 2>&1 || fail "git fsck of the batched commit"
finish
