#!/bin/sh
# The git target, checked with the git CLI: fsck, one commit per pass that
# changed something, ls-tree equal to the declared set, tags, CAS onto a
# moved ref, exclusive and executable changes, refusals, kills.
. "$(dirname "$0")/lib.sh"
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t
G() { git -C repo "$@"; }
ncommits() { G rev-list --count refs/heads/pages 2>/dev/null || echo 0; }
tree() { G ls-tree -r --format='%(objectmode) %(path)' refs/heads/pages 2>/dev/null || G ls-tree -r refs/heads/pages | awk '{print $1, $4}'; }
fsck() { G fsck --strict >"$WS/.fsck" 2>&1 || fail "git fsck: $(cat "$WS/.fsck")"; }
# every object of repository $1 as a loose file (its packs unpacked)
loosen() {
	for p in "$1"/objects/pack/pack-*.pack; do
		[ -f "$p" ] || continue
		mv "$p" "$WS/.unpack"; rm -f "${p%.pack}.idx"
		git -C "$1" unpack-objects -q < "$WS/.unpack" || fail "unpack $p"
		rm -f "$WS/.unpack"
	done
}

git init -q --bare repo
mkdir -p src/sub
printf 'a\n' > src/a.txt; printf 'b\n' > src/sub/b.txt; chmod 755 src/sub/b.txt
cat > tend.conf <<'CONF'
[app "pages"]
	source = src
	target = git:repo
	ref = refs/heads/pages
	prefix = site
	message = tend: {app} {count}
	tag = latest
CONF
run sync; expect_rc 0 "first git sync"
fsck
[ "$(ncommits)" = 1 ] || fail "one commit, got $(ncommits)"
[ "$(tree)" = "$(printf '100644 site/a.txt\n100755 site/sub/b.txt')" ] || fail "tree: $(tree)"
[ "$(G rev-parse latest)" = "$(G rev-parse refs/heads/pages)" ] || fail "tag on the tip"
[ "$(G log -1 --format=%s refs/heads/pages)" = "tend: pages 2" ] || fail "message"
run sync; expect_rc 0 "no-op"; [ "$(ncommits)" = 1 ] || fail "a no-op made a commit"

# modify, delete and rename in one pass: one commit
printf 'a2\n' > src/a.txt; rm src/sub/b.txt; printf 'c\n' > src/c.txt
run sync; expect_rc 0 "changes"; fsck
[ "$(ncommits)" = 2 ] || fail "one commit for three changes, got $(ncommits)"
[ "$(tree)" = "$(printf '100644 site/a.txt\n100644 site/c.txt')" ] || fail "tree after changes: $(tree)"
[ "$(G show refs/heads/pages:site/a.txt)" = a2 ] || fail "content"
[ "$(G rev-parse latest)" = "$(G rev-parse refs/heads/pages)" ] || fail "the tag moved"

# someone else commits to the ref between two passes: tend builds on it
tmp=$(mktemp -d); git clone -q repo "$tmp/w"; git -C "$tmp/w" checkout -q pages
printf 'theirs\n' > "$tmp/w/THEIRS"; git -C "$tmp/w" add THEIRS; git -C "$tmp/w" commit -qm theirs
git -C "$tmp/w" push -q origin pages; theirs=$(git -C "$tmp/w" rev-parse HEAD); rm -rf "$tmp"
printf 'a3\n' > src/a.txt
run sync; expect_rc 0 "on a moved ref"; fsck
[ "$(G rev-parse refs/heads/pages^)" = "$theirs" ] || fail "their commit is the parent"
G show refs/heads/pages:THEIRS >/dev/null 2>&1 || fail "their file was lost"

# exclusive on (destructive): a stray file under the prefix disappears
tmp=$(mktemp -d); git clone -q repo "$tmp/w"; git -C "$tmp/w" checkout -q pages
printf 'stray\n' > "$tmp/w/site/stray"; git -C "$tmp/w" add site/stray; git -C "$tmp/w" commit -qm stray
git -C "$tmp/w" push -q origin pages; rm -rf "$tmp"
printf '\texclusive = true\n' >> tend.conf
run sync; expect_rc 0 "exclusive on"; fsck
G show refs/heads/pages:site/stray >/dev/null 2>&1 && fail "stray file survived"
G show refs/heads/pages:THEIRS >/dev/null 2>&1 || fail "outside the prefix must stay"
[ "$(G ls-tree -r --name-only refs/heads/pages site)" = "$(printf 'site/a.txt\nsite/c.txt')" ] || fail "declared set after exclusive"

# executable = always (lossy): modes change, blob ids stay
before=$(G ls-tree -r refs/heads/pages site | awk '{print $3}')
printf '\texecutable = always\n' >> tend.conf
run sync; expect_rc 0 "executable always"; fsck
[ "$(G ls-tree -r refs/heads/pages site | awk '{print $1}' | sort -u)" = 100755 ] || fail "modes"
[ "$(G ls-tree -r refs/heads/pages site | awk '{print $3}')" = "$before" ] || fail "blob ids changed"

# tags: removed from the config, deleted
sed -i '/tag = latest/d' tend.conf
run sync; expect_rc 0 "tag removed"
G rev-parse -q --verify refs/tags/latest >/dev/null && fail "tag still there"

# check: a ref reset behind tend's back is drift; --full repairs it
G update-ref refs/heads/pages "$theirs"
run check; expect_rc 1 "drift after a reset"
run sync --full; expect_rc 0 "repair"; fsck
run check; expect_rc 0 "no drift after repair"

# check compares the tree's blob ids with the ids of the blobs tend wrote
# (.tend/git-blobs) and reads no blob it knows: an older content that tend
# itself once wrote, put back by someone else, is still drift
rm -rf ck cksrc; git init -q --bare ck; mkdir cksrc
printf 'one\n' > cksrc/x; printf 'two\n' > cksrc/y
cp tend.conf tend.conf.ck; printf '[app "ck"]\n\tsource = cksrc\n\ttarget = git:ck\n\tref = refs/heads/main\n' >> tend.conf
run sync ck; expect_rc 0 "ck: sync"
[ "$(($(wc -c < .tend/git-blobs) % 36))" = 8 ] || fail "ck: git-blobs is not a header and whole records"
old=$(git -C ck rev-parse refs/heads/main:x)
printf 'one v2\n' > cksrc/x
run sync ck; expect_rc 0 "ck: sync v2"
run check ck; expect_rc 0 "ck: no drift"
tree=$(git -C ck ls-tree refs/heads/main | sed "s/ blob [0-9a-f]*\tx\$/ blob $old\tx/" | git -C ck mktree)
git -C ck update-ref refs/heads/main "$(git -C ck commit-tree -p refs/heads/main -m back "$tree")"
run check ck; expect_rc 1 "ck: an older content of tend's put back is drift"
expect_in "$OUT" "content differs" "ck: what differs"
run sync --full ck; expect_rc 0 "ck: repair"
run check ck; expect_rc 0 "ck: repaired"
# no blob is read whose id is known: y's object removed, check still
# compares ids (git fsck is what checks objects) ...
y=$(git -C ck rev-parse refs/heads/main:y)
loosen ck # a pass's objects are in a pack of their own
mv "ck/objects/$(echo $y | cut -c1-2)/$(echo $y | cut -c3-)" ck.y
run check ck; expect_rc 0 "ck: a known id is not read"
# ... without the file, check reads each blob, and notes what it read
rm .tend/git-blobs
run check ck; expect_rc 1 "ck: without git-blobs the blob is read"
expect_in "$OUT" "not a blob" "ck: the missing object"
printf 'two\n' | git -C ck hash-object -w --stdin >/dev/null
run check ck; expect_rc 0 "ck: the object back"
[ "$(wc -c < .tend/git-blobs)" = $((8 + 2 * 36)) ] || fail "ck: check noted the 2 blobs it read: $(wc -c < .tend/git-blobs) bytes"
mv ck.y "ck/objects/$(echo $y | cut -c1-2)/$(echo $y | cut -c3-)" 2>/dev/null; rm -f ck.y
# a damaged file is started again, never trusted
head -c 50 /dev/urandom > .tend/git-blobs
run check ck; expect_rc 0 "ck: a damaged git-blobs"
printf 'one v3\n' > cksrc/x
run sync ck; expect_rc 0 "ck: sync after damage"
[ "$(head -c 8 .tend/git-blobs)" = tendbid1 ] || fail "ck: git-blobs started again"
run check ck; expect_rc 0 "ck: no drift after damage"
mv tend.conf.ck tend.conf; rm -rf ck cksrc

# dropping the app removes the prefix subtree in one commit; history stays
n=$(ncommits)
run drop pages; expect_rc 0 "drop"; fsck
[ "$(ncommits)" = $((n + 1)) ] || fail "drop: one commit, got $(( $(ncommits) - n ))"
[ -z "$(G ls-tree --name-only refs/heads/pages site)" ] || fail "site/ survived the drop"
G show refs/heads/pages:THEIRS >/dev/null 2>&1 || fail "drop touched what tend does not own"
G show refs/heads/pages~1:site/a.txt >/dev/null 2>&1 || fail "history lost"

# refusals: a .git component, a checked-out ref
printf '\tname = .git/hooks/{name}\n' >> tend.conf
run sync; expect_rc 1 ".git name"; expect_in "$ERR" ".git component" "message"
sed -i '/name = .git/d' tend.conf
rm -rf wt; git init -q -b pages wt; git -C wt commit -q --allow-empty -m init
cat > tend.conf <<'CONF'
[app "co"]
	source = src
	target = git:wt
	ref = refs/heads/pages
CONF
run plan; expect_rc 1 "plan: the sync would refuse the checked-out ref"
expect_in "$ERR" "refs/heads/pages is checked out in" "plan says why"
run sync; expect_rc 1 "checked-out ref refused"
expect_in "$ERR" "checked out" "refusal message"
printf '\tallow-checked-out = true\n' >> tend.conf
run sync; expect_rc 0 "allowed"
# the app moved to another ref, the setting gone with it (a new user's
# trial: the move committed "tend: drop" to the checked-out branch): the
# old ref is not written while checked out; back with the setting, it is
git -C wt reset -q --hard
before=$(git -C wt rev-parse pages)
sed -i 's|ref = refs/heads/pages|ref = refs/heads/other|; /allow-checked-out/d' tend.conf
# plan says the sync will refuse it (a new user's trial: exit 3, nothing
# said, and the sync failed)
run plan; expect_rc 1 "plan: moving away from a checked-out ref"
expect_in "$ERR" "refs/heads/pages is checked out in" "plan names the checked-out old ref"
run sync; expect_rc 1 "moving away from a checked-out ref, the setting removed"
expect_in "$ERR" "refs/heads/pages is checked out in" "the old ref's refusal names it"
[ "$(git -C wt rev-parse pages)" = "$before" ] || fail "tend committed to a checked-out ref after its setting went"
[ -z "$(git -C wt status --porcelain)" ] || fail "the work tree looks changed: $(git -C wt status --porcelain)"
git -C wt checkout -q -b elsewhere
run sync; expect_rc 0 "the old ref no longer checked out: the move finishes"
[ -z "$(git -C wt ls-tree --name-only pages)" ] || fail "tend's entries stayed on the old ref: $(git -C wt ls-tree --name-only pages)"

# kills: SIGKILL mid-sync, then a sync converges, fsck clean, and the
# same change is never committed twice
rm -rf repo .tend; git init -q --bare repo
i=0; while [ $i -lt 300 ]; do printf "f$i\n" > src/f$i; i=$((i+1)); done
cat > tend.conf <<'CONF'
[app "pages"]
	source = src
	target = git:repo
	ref = refs/heads/pages
CONF
killed=0 pointed=0
# the kills land in the first three quarters of a sync's time here (a
# fixed 45 ms outlasted every sync of this machine: none was killed)
"$TEND" sync -q >/dev/null 2>&1
ms_of() { t0=$(date +%s%N); "$@" >/dev/null 2>&1; t1=$(date +%s%N); echo $(( (t1 - t0) / 1000000 )); }
j=0; while [ $j -lt 30 ]; do printf "c\n" >> src/f$j; j=$((j+1)); done
span=$(( $(ms_of "$TEND" sync -q) * 3 / 4 ))
[ $span -ge 4 ] || span=4
[ $span -le 999 ] || span=999
r=1
while [ $r -le ${GIT_KILL_ITERS:-20} ]; do
	j=0; while [ $j -lt 30 ]; do printf "r$r\n" >> src/f$(( (r * 37 + j * 11) % 300 )); j=$((j+1)); done
	# every other round is killed at a point of its own (a blob's write,
	# the ref's move, the settling commit): a kill mid-sync that no
	# timing decides; the others at a time picked in the span, which a
	# loaded machine may outlast (counted, not required)
	case $((r % 6)) in
	0) fp="git-odb-write@$(( r % 5 + 1 ))=kill" ;;
	2) fp="git-ref-update=kill" ;;
	4) fp="lmdb-commit~settle=kill" ;;
	*) fp= ;;
	esac
	TEND_FAILPOINTS=$fp "$TEND" sync -q $( [ $((r % 4)) = 1 ] && echo --full ) >/dev/null 2>&1 &
	pid=$!
	if [ -n "$fp" ]; then
		wait $pid; rc=$?
		[ $rc = 137 ] || fail "round $r: not killed at $fp (exit $rc)"
		pointed=$((pointed+1))
	else
		sleep "$(printf '0.%03d' $(( (r * 7919) % span )))"
		kill -9 $pid 2>/dev/null && killed=$((killed+1)); wait $pid 2>/dev/null
	fi
	before=$(ncommits)
	run sync -q; expect_rc 0 "round $r: sync after kill"
	fsck
	[ "$(G ls-tree -r --name-only refs/heads/pages | wc -l)" = "$(find src -type f | wc -l)" ] || fail "round $r: tree size"
	for f in f1 f$((r % 300)); do
		[ "$(G show refs/heads/pages:$f)" = "$(cat src/$f)" ] || fail "round $r: $f differs"
	done
	after=$(ncommits)
	run sync -q; [ "$(ncommits)" = "$after" ] || fail "round $r: a converged sync committed again"
	[ $((after - before)) -le 1 ] || fail "round $r: $((after - before)) commits for one change"
	run check -q; expect_rc 0 "round $r: check"
	[ "$FAILS" = 0 ] || break
	r=$((r+1))
done
echo "git kill rounds: $((r - 1)), killed at a failpoint: $pointed, by a timer mid-sync: $killed"

# a big first commit (600 new files, from 512 on) is written as packs,
# not 600 loose objects: same content deduplicated, an empty file, nested
# directories, and then an ordinary small commit on top
rm -rf big bigsrc .tend; git init -q --bare big; mkdir -p bigsrc/d1/d2
i=0; while [ $i -lt 600 ]; do printf 'file %d\n' $((i % 550)) > bigsrc/d1/f$i; i=$((i+1)); done
: > bigsrc/empty; printf 'deep\n' > bigsrc/d1/d2/deep
printf '[app "big"]\n\tsource = bigsrc\n\ttarget = git:big\n\tref = refs/heads/main\n' > tend.conf
run sync; expect_rc 0 "a big first commit"
git -C big fsck --strict >"$WS/.fsck" 2>&1 || fail "git fsck after a packed commit: $(cat "$WS/.fsck")"
[ "$(git -C big ls-tree -r --name-only refs/heads/main | wc -l)" = 602 ] || fail "602 entries in the packed commit"
[ "$(git -C big show refs/heads/main:d1/f599)" = "file 49" ] || fail "content from the pack"
[ -z "$(git -C big show refs/heads/main:empty)" ] || fail "the empty file"
[ "$(git -C big show refs/heads/main:d1/d2/deep)" = deep ] || fail "a nested file"
LOOSE=$(git -C big count-objects -v | awk '/^count:/ {print $2}')
PACKS=$(git -C big count-objects -v | awk '/^packs:/ {print $2}')
[ "$LOOSE" = 0 ] || fail "a packed commit left $LOOSE loose objects"
[ "$PACKS" -ge 1 ] || fail "no pack written"
printf 'changed\n' > bigsrc/d1/f0
run sync; expect_rc 0 "a small commit on a packed one"
git -C big fsck --strict >"$WS/.fsck" 2>&1 || fail "git fsck after: $(cat "$WS/.fsck")"
[ "$(git -C big show refs/heads/main:d1/f0)" = changed ] || fail "small commit content"
[ "$(git -C big rev-list --count refs/heads/main)" = 2 ] || fail "two commits"

# past 4096 new blobs the commit's blobs go into two packs written by two
# threads: every blob where it belongs, and a failure in either half
# (here b/f4999, in the second) fails the commit and leaves no
# pack behind
rm -rf big bigsrc .tend; git init -q --bare big; mkdir -p bigsrc/a bigsrc/b
i=0; while [ $i -lt 5000 ]; do printf 'blob %d\n' $i > bigsrc/$([ $i -lt 2500 ] && echo a || echo b)/f$i; i=$((i+1)); done
printf '[app "big"]\n\tsource = bigsrc\n\ttarget = git:big\n\tref = refs/heads/main\n' > tend.conf
TEND_FAILPOINTS='git-odb-write~b/f4999' run sync; expect_rc 1 "a failed blob in a split pack"
expect_in "$ERR" "b/f4999" "the failed blob is named"
[ -z "$(ls big/objects/pack)" ] || fail "a failed split pack left: $(ls big/objects/pack)"
git -C big rev-parse -q --verify refs/heads/main >/dev/null && fail "a failed commit moved the ref"
run sync; expect_rc 0 "the split pack after the failure"
git -C big fsck --strict >"$WS/.fsck" 2>&1 || fail "git fsck after a split pack: $(cat "$WS/.fsck")"
[ "$(git -C big ls-tree -r --name-only refs/heads/main | wc -l)" = 5000 ] || fail "5000 entries from two packs"
[ "$(git -C big show refs/heads/main:a/f7)" = "blob 7" ] && [ "$(git -C big show refs/heads/main:b/f4999)" = "blob 4999" ] ||
	fail "contents from both packs"
PACKS=$(git -C big count-objects -v | awk '/^packs:/ {print $2}')
[ "$PACKS" = 3 ] || fail "two blob packs and the trees': $PACKS packs"
[ "$(git -C big count-objects -v | awk '/^count:/ {print $2}')" = 0 ] || fail "loose objects beside the split packs"

# a drop of more than a batch (4,096 components) is one commit, as a
# sync's is: it was one per 4,096 (29 commits for 118k entries); for an
# app in tend.conf and for one that left it (its stored container says
# git)
for how in conf gone; do
	rm -rf many manysrc .tend; git init -q --bare many; mkdir -p manysrc/a manysrc/b
	i=0; while [ $i -lt 4200 ]; do echo $i > manysrc/$(( i % 2 ? 1 : 0 ))$i; i=$((i+1)); done
	mv manysrc/1* manysrc/a/ 2>/dev/null; mv manysrc/0* manysrc/b/ 2>/dev/null
	printf '[app "many"]\n\tsource = manysrc\n\ttarget = git:many\n\tref = refs/heads/main\n' > tend.conf
	run sync -q; expect_rc 0 "$how: sync of 4200"
	[ "$(git -C many rev-list --count refs/heads/main)" = 1 ] || fail "$how: one commit for the sync"
	# ls APP PATH-PREFIX: a git target's paths inside it will do
	run ls many a/; expect_rc 0 "$how: ls many a/"
	[ "$(printf '%s\n' "$OUT" | wc -l)" = 2100 ] || fail "$how: ls many a/ listed $(printf '%s\n' "$OUT" | wc -l), want 2100"
	run ls many 'git("many", "refs/heads/main", ""):b/'
	[ "$(printf '%s\n' "$OUT" | wc -l)" = 2100 ] || fail "$how: ls by the whole path"
	[ "$how" = gone ] && : > tend.conf
	run drop many; expect_rc 0 "$how: drop of 4200"
	[ "$(git -C many rev-list --count refs/heads/main)" = 2 ] || fail "$how: the drop made $(( $(git -C many rev-list --count refs/heads/main) - 1 )) commits, want 1"
	[ -z "$(git -C many ls-tree -r refs/heads/main)" ] || fail "$how: entries left after the drop"
	git -C many fsck --strict >"$WS/.fsck" 2>&1 || fail "$how: git fsck after the drop: $(cat "$WS/.fsck")"
done
rm -rf many manysrc

# A pass of many batches (TEND_BATCH=4: 30 files, the root, a tag) makes
# one commit: each batch amends the pass's commit, so memory is bounded
# by a batch, not the pass (a first commit of 100k files held 467 MiB as
# one batch). Killed between batches, the ref holds the commit of the
# batches done, which the store settled, and the next sync commits the
# rest; a commit of somebody else's between two batches is kept.
rm -rf bsrc .tend; git init -q --bare batched; mkdir -p bsrc/a bsrc/b bsrc/c
i=0; while [ $i -lt 30 ]; do echo $i > bsrc/$(printf 'abc' | cut -c$(( i % 3 + 1 )))/f$i; i=$((i+1)); done
printf '[app "bat"]\n\tsource = bsrc\n\ttarget = git:batched\n\tref = refs/heads/main\n\ttag = v\n\tmessage = sync {count}\n' > tend.conf
B() { git -C batched "$@"; }
btree() { B ls-tree -r --name-only refs/heads/main | sort; }
srctree() { (cd bsrc && find . -type f | sed 's|^\./||' | sort); }
TEND_BATCH=4 run sync; expect_rc 0 "batched: first sync"
[ "$(B rev-list --count refs/heads/main)" = 1 ] || fail "batched: $(B rev-list --count refs/heads/main) commits for one pass, want 1"
[ "$(btree)" = "$(srctree)" ] || fail "batched: the tree is not the source"
[ "$(B log -1 --format=%s refs/heads/main)" = "sync 30" ] || fail "batched: the message counts $(B log -1 --format=%s refs/heads/main), want sync 30"
[ "$(B rev-parse v)" = "$(B rev-parse refs/heads/main)" ] || fail "batched: the tag is not on the pass's commit"
B fsck --strict >"$WS/.fsck" 2>&1 || fail "batched: git fsck: $(cat "$WS/.fsck")"
i=30; while [ $i -lt 60 ]; do echo $i > bsrc/$(printf 'abc' | cut -c$(( i % 3 + 1 )))/f$i; i=$((i+1)); done
TEND_BATCH=4 TEND_FAILPOINTS='git-ref-update@3=kill' run sync
expect_rc 137 "batched: killed at its third ref update"
[ "$(B rev-list --count refs/heads/main)" = 2 ] || fail "batched: the killed pass left $(( $(B rev-list --count refs/heads/main) - 1 )) commits, want 1"
n=$(btree | wc -l); [ "$n" -gt 30 ] && [ "$n" -lt 60 ] || fail "batched: the killed pass's commit holds $n entries"
run check; expect_rc 1 "batched: check after the kill"
expect_in "$OUT" "interrupted applies: the next tend sync retries them" "batched: check says what the kill left"
TEND_BATCH=4 run sync; expect_rc 0 "batched: the sync after the kill"
[ "$(B rev-list --count refs/heads/main)" = 3 ] || fail "batched: $(B rev-list --count refs/heads/main) commits, want 3"
[ "$(btree)" = "$(srctree)" ] || fail "batched: the tree after the kill is not the source"
run check; expect_rc 0 "batched: no drift"
# somebody commits between two batches: kept, the pass goes on top of it
git clone -q -b main batched bwt 2>/dev/null || fail "batched: clone"
i=60; while [ $i -lt 90 ]; do echo $i > bsrc/$(printf 'abc' | cut -c$(( i % 3 + 1 )))/f$i; i=$((i+1)); done
TEND_BATCH=4 TEND_FAILPOINTS='git-ref-update@2=stop' "$TEND" sync >"$WS/bs.out" 2>&1 & BG=$!
stopped $BG || fail "batched: the sync did not park at its second ref update"
printf 'theirs\n' > bwt/theirs.txt; git -C bwt add theirs.txt; git -C bwt commit -qm theirs
git -C bwt fetch -q origin main && git -C bwt rebase -q origin/main && git -C bwt push -q origin HEAD:main || fail "batched: the user's push"
theirs=$(git -C bwt rev-parse HEAD)
kill -CONT $BG; wait $BG; rc=$?; BG=
[ $rc = 0 ] || fail "batched: the sync beside a user's commit: exit $rc: $(cat "$WS/bs.out")"
B merge-base --is-ancestor "$theirs" refs/heads/main || fail "batched: the user's commit was lost"
[ "$(B show refs/heads/main:theirs.txt)" = theirs ] || fail "batched: the user's file"
[ "$(btree | grep -v theirs.txt)" = "$(srctree)" ] || fail "batched: the tree beside the user's commit"
B fsck --strict >"$WS/.fsck" 2>&1 || fail "batched: git fsck at the end: $(cat "$WS/.fsck")"
rm -rf batched bsrc bwt
# A small pass's objects (blobs, trees, its commit) go into one pack of
# their own, not a loose file each; tend merges its small packs when there
# are 16 of them, and never reads for it nor deletes a pack it did not
# write (a user's, made here by git repack of their own commit).
rm -rf sp spsrc .tend; git init -q --bare sp; mkdir -p spsrc/a/b
printf '[app "sp"]\n\tsource = spsrc\n\ttarget = git:sp\n\tref = refs/heads/main\n' > tend.conf
printf 'x0\n' > spsrc/a/b/x; run sync; expect_rc 0 "small packs: the first sync"
mine=$(printf 'mine\n' | git -C sp hash-object -w --stdin)
t=$(printf '100644 blob %s\tmine.txt\n' "$mine" | git -C sp mktree)
git -C sp update-ref refs/heads/user "$(git -C sp commit-tree -m mine "$t")"
before=$(ls sp/objects/pack | sort)
git -C sp repack -d -q
printf '%s\n' "$before" > "$WS/.before"
userpack=$(ls sp/objects/pack | sort | comm -13 "$WS/.before" - | grep '\.pack$')
[ -n "$userpack" ] || fail "small packs: git repack made no pack (the test is wrong)"
i=1; while [ $i -le 40 ]; do
	printf 'x%d\n' $i > spsrc/a/b/x; printf 'n%d\n' $i > spsrc/a/n$i
	run sync; expect_rc 0 "small packs: sync $i"
	loose=$(git -C sp count-objects -v | awk '/^count:/ {print $2}')
	[ "$loose" = 0 ] || { fail "small packs: sync $i left $loose loose objects"; break; }
	i=$((i+1))
done
# a pass that only deletes: its trees and commit in a pack too
rm spsrc/a/n40; run sync; expect_rc 0 "small packs: a delete"
[ "$(git -C sp count-objects -v | awk '/^count:/ {print $2}')" = 0 ] || fail "small packs: a delete left loose objects"
printf 'n40\n' > spsrc/a/n40; run sync; expect_rc 0 "small packs: the file back"
git -C sp fsck --strict >"$WS/.fsck" 2>&1 || fail "small packs: git fsck: $(cat "$WS/.fsck")"
[ "$(git -C sp show refs/heads/main:a/b/x)" = x40 ] || fail "small packs: the last content"
[ "$(git -C sp show refs/heads/main~41:a/b/x)" = x1 ] || fail "small packs: an old commit's content"
[ "$(git -C sp ls-tree -r --name-only refs/heads/main | wc -l)" = 41 ] || fail "small packs: 41 entries"
[ -f "sp/objects/pack/$userpack" ] || fail "small packs: the user's pack $userpack was deleted"
[ "$(git -C sp show refs/heads/user:mine.txt)" = mine ] || fail "small packs: the user's commit"
grep -q "${userpack%.pack}" .tend/git-packs && fail "small packs: the user's pack is listed as tend's"
packs=$(git -C sp count-objects -v | awk '/^packs:/ {print $2}')
[ "$packs" -le 18 ] || fail "small packs: 41 passes left $packs packs (never merged)"
# a user's git gc repacks tend's packs too: their lines leave the list
git -C sp repack -a -d -q
i=41; while [ $i -le 57 ]; do
	printf 'x%d\n' $i > spsrc/a/b/x; run sync; expect_rc 0 "small packs: sync $i after a gc"
	i=$((i+1))
done
git -C sp fsck --strict >"$WS/.fsck" 2>&1 || fail "small packs: git fsck after a gc: $(cat "$WS/.fsck")"
[ "$(git -C sp show refs/heads/main:a/b/x)" = x57 ] || fail "small packs: the content after a gc"
[ "$(grep -c . .tend/git-packs)" -le 3 ] || fail "small packs: the list keeps packs a gc removed: $(grep -c . .tend/git-packs) lines"
# killed once the merged pack is in place, before any old one is deleted:
# the next sync (nothing changed) merges the same packs into a pack of the
# same name, which must not be deleted with them
sp_kill() { # $1: the failpoint's subject; syncs until one is killed there
	i=0; RC=0
	while [ $i -lt 20 ] && [ "$RC" != 137 ]; do
		printf 'k%s%d\n' "$1" $i > spsrc/a/b/x
		TEND_FAILPOINTS="git-pack-merge~$1=kill" run sync
		[ "$RC" = 0 ] || [ "$RC" = 137 ] || fail "small packs: sync before the $1 kill: exit $RC: $ERR"
		i=$((i+1))
	done
	[ "$RC" = 137 ] || fail "small packs: no merge was killed at $1 (the test is wrong)"
	printf '%s\n' "$(cat spsrc/a/b/x)" > "$WS/.want"
}
sp_ok() { # $1: what; the ref's tip readable, fsck clean, no garbage
	git -C sp fsck --strict >"$WS/.fsck" 2>&1 || fail "small packs: $1: git fsck: $(cat "$WS/.fsck")"
	[ "$(git -C sp show refs/heads/main:a/b/x)" = "$(cat "$WS/.want")" ] || fail "small packs: $1: the content"
	[ "$(git -C sp count-objects -v | sed -n 's/^garbage: //p')" = 0 ] || fail "small packs: $1: $(git -C sp count-objects -v | tr '\n' ' ')"
}
sp_kill merged
run sync; expect_rc 0 "small packs: the sync after a merge killed before its deletes"
sp_ok "after a merge killed before its deletes"
run sync; expect_rc 0 "small packs: the sync after that"
sp_ok "the sync after that"
# killed between an old pack's .idx and its .pack: that .pack is swept
# (it is listed, its writer gone) and merging goes on
sp_kill idx-gone
[ -e sp/objects/pack/multi-pack-index.lock ] || fail "small packs: the merge held no multi-pack-index lock while it deleted"
run sync; expect_rc 0 "small packs: the sync after a merge killed between .idx and .pack"
sp_ok "after a merge killed between .idx and .pack"
[ ! -e sp/objects/pack/multi-pack-index.lock ] || fail "small packs: a killed merge's multi-pack-index lock was left"
i=0; while [ $i -lt 17 ]; do printf 'm%d\n' $i > spsrc/a/b/x; run sync; expect_rc 0 "small packs: sync $i after"; i=$((i+1)); done
packs=$(git -C sp count-objects -v | awk '/^packs:/ {print $2}')
[ "$packs" -le 18 ] || fail "small packs: merging stopped after a killed merge: $packs packs"
# a multi-pack-index (git maintenance) names packs: tend merges none then
git -C sp multi-pack-index write
i=0; while [ $i -lt 20 ]; do printf 'midx%d\n' $i > spsrc/a/b/x; run sync; expect_rc 0 "small packs: sync $i with a multi-pack-index"; i=$((i+1)); done
git -C sp fsck --strict >"$WS/.fsck" 2>&1 || fail "small packs: git fsck with a multi-pack-index: $(cat "$WS/.fsck")"
git -C sp multi-pack-index verify >"$WS/.fsck" 2>&1 || fail "small packs: the multi-pack-index broke: $(cat "$WS/.fsck")"
[ "$(git -C sp show refs/heads/main:a/b/x)" = midx19 ] || fail "small packs: the content with a multi-pack-index"
# one written while a merge runs (git maintenance in the background):
# the merge, parked before its deletes, then deletes nothing
rm -f sp/objects/pack/multi-pack-index
i=0; got=
while [ $i -lt 20 ] && [ -z "$got" ]; do
	printf 'r%d\n' $i > spsrc/a/b/x
	TEND_FAILPOINTS='git-pack-merge~merged=stop' "$TEND" sync >/dev/null 2>&1 & bg=$!
	j=0
	while [ $j -lt 200 ] && kill -0 $bg 2>/dev/null; do
		[ "$(sed "s/.*) //" /proc/$bg/stat 2>/dev/null | cut -c1)" = T ] && { got=1; break; }
		sleep 0.02; j=$((j+1))
	done
	[ -n "$got" ] && { git -C sp multi-pack-index write; kill -CONT $bg; }
	wait $bg || fail "small packs: a sync beside a multi-pack-index write: exit $?"
	i=$((i+1))
done
[ -n "$got" ] || fail "small packs: no merge was parked (the test is wrong)"
git -C sp fsck --strict >"$WS/.fsck" 2>&1 || fail "small packs: git fsck after a multi-pack-index written during a merge: $(cat "$WS/.fsck")"
git -C sp multi-pack-index verify >"$WS/.fsck" 2>&1 || fail "small packs: a multi-pack-index written during a merge broke: $(cat "$WS/.fsck")"
[ "$(git -C sp show refs/heads/main:a/b/x)" = "$(cat spsrc/a/b/x)" ] || fail "small packs: the content after a multi-pack-index written during a merge"
rm -rf sp spsrc
finish
