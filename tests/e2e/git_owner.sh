#!/bin/sh
# Git targets own their entries and nothing else (issue 19): a prefix or
# ref change moves the app's entries in one pass.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
CTL="python3 $HERE/agentctl.py $WS/.tend/agent.sock"
AGENT=
trap '[ -n "$AGENT" ] && { kill -TERM $AGENT 2>/dev/null; wait $AGENT 2>/dev/null; }; chmod -R u+rwx "$WS" 2>/dev/null; rm -rf "$WS"' EXIT
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t

mkdir -p src; echo a > src/a; echo b > src/b
git init -q --bare repo.git
conf() {
	cat > tend.conf <<CONF
[app "pages"]
	source = src
	target = git:repo.git
	ref = $1
	prefix = $2
CONF
}
conf refs/heads/pages site
run sync; expect_rc 0 "first sync"
[ "$(git -C repo.git ls-tree -r --name-only pages | tr '\n' ' ')" = "site/a site/b " ] || fail "first tree: $(git -C repo.git ls-tree -r --name-only pages)"

# prefix site -> web: one commit, the entries under web/ only
before=$(git -C repo.git rev-parse pages)
conf refs/heads/pages web
run plan; expect_rc 3 "a prefix change is pending"
expect_in "$OUT" '+ pages git("repo.git", "refs/heads/pages", "web"):a' "plan shows the new entries"
run sync; expect_rc 0 "prefix change"
[ "$(git -C repo.git ls-tree -r --name-only pages | tr '\n' ' ')" = "web/a web/b " ] || fail "after the prefix change: $(git -C repo.git ls-tree -r --name-only pages)"
[ "$(git -C repo.git rev-list --count "$before..pages")" = 1 ] || fail "a prefix move is one commit, got $(git -C repo.git rev-list --count "$before..pages")"
run plan; expect_rc 0 "converged"; expect_in "$OUT" "No changes" "plan"
run check; expect_rc 0 "no drift"

# ref pages -> gh-pages: the entries are on the new ref
conf refs/heads/gh-pages web
run sync; expect_rc 0 "ref change"
[ "$(git -C repo.git ls-tree -r --name-only gh-pages | tr '\n' ' ')" = "web/a web/b " ] || fail "the new ref: $(git -C repo.git ls-tree -r --name-only gh-pages 2>&1)"
[ -z "$(git -C repo.git ls-tree -r --name-only pages)" ] || fail "the old ref keeps tend's entries"
run plan; expect_rc 0 "converged after the ref change"
git -C repo.git fsck --strict >/dev/null 2>&1 || fail "fsck"

# a running agent and a worktree added after it started: no commit on
# the checked-out branch, at any pass
conf refs/heads/gh-pages web
printf '[tend]\n\tdebounce = 0\n' >> tend.conf
"$TEND" watch 2>"$WS/agent.err" &
AGENT=$!
$CTL ready || fail "agent ready"
git -C repo.git worktree add -q "$WS/wt" gh-pages 2>/dev/null || fail "worktree add"
tip=$(git -C repo.git rev-parse gh-pages)
$CTL until '[ "$("$TEND" status --json | python3 -c "import json,sys; print(json.load(sys.stdin)[\"agent\"][\"last\"][\"failed\"])" 2>/dev/null)" != 0 ]' -- 'echo 2 >> src/a' || fail "the agent reports the refused commit"
[ "$(git -C repo.git rev-parse gh-pages)" = "$tip" ] || fail "the agent committed to a branch checked out in a worktree"
[ -z "$(git -C "$WS/wt" status --porcelain)" ] || fail "the worktree shows changes: $(git -C "$WS/wt" status --porcelain)"
expect_in "$(cat "$WS/agent.err")" "checked out in" "the agent says why"
kill -TERM $AGENT; wait $AGENT; AGENT=

# a kill while a pack is written leaves its temporary file: the next run
# sweeps it (and only a killed tend's)
rm -rf src2 && mkdir src2
i=0; while [ $i -lt 600 ]; do echo "$i" > src2/f$i; i=$((i+1)); done
cat > tend.conf <<'CONF'
[app "big"]
	source = src2
	target = git:repo.git
	ref = refs/heads/big
CONF
TEND_FAILPOINTS='git-odb-write@300=kill' "$TEND" sync >/dev/null 2>&1
ls repo.git/objects/pack/ | grep -q '^tmp_tend_pack_' || fail "the killed pack left no temporary file (the test is wrong)"
: > "repo.git/objects/pack/tmp_tend_pack_$$_live"
run sync; expect_rc 0 "the sync after the kill"
left=$(ls repo.git/objects/pack/ | grep '^tmp_tend_pack_' | tr '\n' ' ')
[ "$left" = "tmp_tend_pack_$$_live " ] || fail "temporary files left: $left"
rm "repo.git/objects/pack/tmp_tend_pack_$$_live"
[ "$(git -C repo.git count-objects -v | sed -n 's/^garbage: //p')" = 0 ] || fail "garbage: $(git -C repo.git count-objects -v)"
[ "$(git -C repo.git ls-tree -r --name-only big | wc -l)" = 600 ] || fail "big: $(git -C repo.git ls-tree -r --name-only big | wc -l) entries"
git -C repo.git fsck --strict >/dev/null 2>&1 || fail "fsck after the kill"

# what a dead tend left is swept even while its parent has not reaped it
# (a zombie: an agent killed under a supervisor), and a .pack whose .idx
# never came (killed between the two renames) goes if the list names it
# as written by a dead pid; a .pack nobody listed, or one a live tend is
# renaming, stays
( sleep 0.1 & echo $! > "$WS/zpid"; exec sleep 30 ) & holder=$!
sleep 0.5
zpid=$(cat "$WS/zpid")
grep -q '^State:.*Z' /proc/$zpid/status 2>/dev/null || fail "no zombie (the test is wrong)"
rp=$(cut -f1 .tend/git-packs | head -1)
[ -n "$rp" ] || fail "nothing in .tend/git-packs"
h1=1111111111111111111111111111111111111111
h2=2222222222222222222222222222222222222222
h3=3333333333333333333333333333333333333333
: > repo.git/objects/pack/tmp_tend_pack_${zpid}_x
for h in $h1 $h2 $h3; do : > repo.git/objects/pack/pack-$h.pack; done
printf '%s\tpack-%s\t%s\n%s\tpack-%s\t%s\n' "$rp" $h1 "$zpid" "$rp" $h3 $$ >> .tend/git-packs
printf 'z\n' > src2/zombie.txt
run sync; expect_rc 0 "the sync after a zombie's leftovers"
kill $holder 2>/dev/null; wait $holder 2>/dev/null
[ ! -e repo.git/objects/pack/tmp_tend_pack_${zpid}_x ] || fail "a zombie's temporary pack was kept"
[ ! -e repo.git/objects/pack/pack-$h1.pack ] || fail "a listed .pack without .idx of a dead pid was kept"
[ -e repo.git/objects/pack/pack-$h2.pack ] || fail "a .pack tend did not list was removed"
[ -e repo.git/objects/pack/pack-$h3.pack ] || fail "a .pack a live tend is writing was removed"
rm -f repo.git/objects/pack/pack-$h2.pack repo.git/objects/pack/pack-$h3.pack
git -C repo.git fsck --strict >/dev/null 2>&1 || fail "fsck after the sweep"

# someone else's file where a new entry needs a directory (a D/F
# conflict): that entry fails, in the way; the rest of the pass commits
rm -rf .tend dfr dfs && git init -q --bare dfr && mkdir dfs && echo a > dfs/a.txt
printf '[app "df"]\n\tsource = dfs\n\ttarget = git:dfr\n\tref = refs/heads/main\n\tprefix = p\n' > tend.conf
run sync; expect_rc 0 "df: first sync"
blob=$(echo user | git -C dfr hash-object -w --stdin)
t=$(git -C dfr ls-tree refs/heads/main:p | { cat; printf '100644 blob %s\tsub\n' "$blob"; } | git -C dfr mktree)
t=$(printf '040000 tree %s\tp\n' "$t" | git -C dfr mktree)
git -C dfr update-ref refs/heads/main "$(git -C dfr commit-tree -p refs/heads/main -m user "$t")"
mkdir dfs/sub && echo x > dfs/sub/x.txt && echo changed > dfs/a.txt
run plan; expect_rc 1 "df: plan predicts the entry fails"
expect_in "$ERR" "in the way: the file p/sub is there" "df: plan says what is in the way"
run sync; expect_rc 1 "df: a file where a directory is needed"
expect_in "$ERR" "the file p/sub is in the way" "df: what is in the way"
run check; expect_rc 1 "df: check after"
expect_in "$OUT" "in the way: the file p/sub is there" "df: check says what is in the way"
[ "$(git -C dfr show refs/heads/main:p/a.txt)" = changed ] || fail "df: the rest of the pass was not committed"
[ "$(git -C dfr show refs/heads/main:p/sub)" = user ] || fail "df: the user's file"
case "$ERR" in *a.txt*) fail "df: a.txt blamed: $ERR";; esac
# the user removes it: the entry goes in
t=$(git -C dfr ls-tree refs/heads/main:p | grep -v '	sub$' | git -C dfr mktree)
t=$(printf '040000 tree %s\tp\n' "$t" | git -C dfr mktree)
git -C dfr update-ref refs/heads/main "$(git -C dfr commit-tree -p refs/heads/main -m gone "$t")"
run sync; expect_rc 0 "df: after the user's file went"
[ "$(git -C dfr show refs/heads/main:p/sub/x.txt)" = x ] || fail "df: the entry after"
git -C dfr fsck --strict >/dev/null 2>&1 || fail "df: fsck"
# another author turns tend's file p/a.txt into a directory of theirs:
# an update of a.txt fails alone (in the way), and its delete leaves
# their directory (removing the path would take all of it)
inner=$(echo theirs | git -C dfr hash-object -w --stdin)
t=$(printf '100644 blob %s\tinner\n' "$inner" | git -C dfr mktree)
t=$(git -C dfr ls-tree refs/heads/main:p | grep -v '	a.txt$' | { cat; printf '040000 tree %s\ta.txt\n' "$t"; } | git -C dfr mktree)
t=$(printf '040000 tree %s\tp\n' "$t" | git -C dfr mktree)
git -C dfr update-ref refs/heads/main "$(git -C dfr commit-tree -p refs/heads/main -m dir "$t")"
echo again > dfs/a.txt; echo y > dfs/sub/y.txt
run sync; expect_rc 1 "df: tend's file made a directory by another author"
expect_in "$ERR" "the directory p/a.txt (holding inner) is in the way" "df: the directory named"
[ "$(git -C dfr show refs/heads/main:p/sub/y.txt)" = y ] || fail "df: the rest of the pass (sub/y.txt) was not committed"
rm dfs/a.txt
run sync; expect_rc 0 "df: tend's file deleted where another author's directory is"
[ "$(git -C dfr show refs/heads/main:p/a.txt/inner)" = theirs ] || fail "df: the delete took another author's directory"
# another author turns tend's directory p/sub into a file: an update of
# sub/x.txt fails alone
t=$(git -C dfr ls-tree refs/heads/main:p | grep -v '	sub$' | { cat; printf '100644 blob %s\tsub\n' "$blob"; } | git -C dfr mktree)
t=$(printf '040000 tree %s\tp\n' "$t" | git -C dfr mktree)
git -C dfr update-ref refs/heads/main "$(git -C dfr commit-tree -p refs/heads/main -m file "$t")"
echo x2 > dfs/sub/x.txt; echo n > dfs/new.txt
run sync; expect_rc 1 "df: tend's directory made a file by another author"
expect_in "$ERR" "the file p/sub is in the way" "df: the file named"
[ "$(git -C dfr show refs/heads/main:p/new.txt)" = n ] || fail "df: the rest of the pass (new.txt) was not committed"
[ "$(git -C dfr show refs/heads/main:p/sub)" = user ] || fail "df: their file"
git -C dfr fsck --strict >/dev/null 2>&1 || fail "df: fsck at the end"
# a symlink in the way is called one
lnk=$(printf 'elsewhere' | git -C dfr hash-object -w --stdin)
t=$(git -C dfr ls-tree refs/heads/main:p | { cat; printf '120000 blob %s\tln\n' "$lnk"; } | git -C dfr mktree)
t=$(printf '040000 tree %s\tp\n' "$t" | git -C dfr mktree)
git -C dfr update-ref refs/heads/main "$(git -C dfr commit-tree -p refs/heads/main -m link "$t")"
mkdir dfs/ln && echo z > dfs/ln/z.txt
run sync; expect_rc 1 "df: a symlink where a directory is needed"
expect_in "$ERR" "the symlink p/ln is in the way" "df: the symlink named"
rm -rf dfr dfs

# someone else's files under the prefix: a prefix change and a drop
# delete only tend's entries (not exclusive)
rm -rf .tend repo2 && git init -q repo2
cat > tend.conf <<'CONF'
[app "pages"]
	source = src
	target = git:repo2
	ref = refs/heads/pages
	prefix = site
CONF
run sync; expect_rc 0 "sync into repo2"
git -C repo2 worktree add -q "$WS/wt2" pages 2>/dev/null
mkdir -p "$WS/wt2/site/extra"; echo x > "$WS/wt2/site/stray.txt"; echo y > "$WS/wt2/site/extra/y"
git -C "$WS/wt2" add site && git -C "$WS/wt2" commit -qm "another author"
git -C repo2 worktree remove --force "$WS/wt2"
sed -i 's/prefix = site/prefix = web/' tend.conf
run sync; expect_rc 0 "prefix change beside a foreign file"
have=$(git -C repo2 ls-tree -r --name-only pages | tr '\n' ' ')
[ "$have" = "site/extra/y site/stray.txt web/a web/b " ] || fail "after the prefix change: $have"
run drop pages; expect_rc 0 "drop"
[ "$(git -C repo2 log -1 --format=%s pages)" = "tend: drop" ] || fail "the drop's commit says so: $(git -C repo2 log -1 --format=%s pages)"
have=$(git -C repo2 ls-tree -r --name-only pages | tr '\n' ' ')
[ "$have" = "site/extra/y site/stray.txt " ] || fail "after the drop: $have"
git -C repo2 fsck --strict >/dev/null 2>&1 || fail "fsck repo2"

# tags: one that is not tend's is refused, never moved nor deleted; tend's
# own follow the tip, come back after a kill between commit and tag
rm -rf .tend repo3 && git init -q repo3
git -C repo3 commit -q --allow-empty -m base
git -C repo3 tag v1.0; git -C repo3 tag -a v2.0 -m release
v1=$(git -C repo3 rev-parse v1.0); v2=$(git -C repo3 rev-parse v2.0)
cat > tend.conf <<'CONF'
[app "pages"]
	source = src
	target = git:repo3
	ref = refs/heads/pages
	tag = v1.0
	tag = v2.0
	tag = latest
CONF
run plan; expect_rc 1 "plan: the foreign tags would fail"
expect_not_in "$OUT" "@tag/v1.0" "plan does not promise to set a foreign tag"
expect_in "$OUT" "2 failed, nothing planned for them" "plan counts them"
expect_in "$ERR" "in the way: tag v1.0 points at" "plan names the lightweight one"
expect_in "$ERR" "not tend's (an annotated tag)" "plan names the annotated one"
run sync; expect_rc 1 "foreign tags are refused"
expect_in "$ERR" "tag v1.0 exists and is not tend's" "v1.0 named"
expect_in "$ERR" "tag v2.0 exists and is not tend's" "v2.0 named"
[ "$(git -C repo3 rev-parse v1.0)" = "$v1" ] || fail "a lightweight tag was moved"
[ "$(git -C repo3 rev-parse v2.0)" = "$v2" ] || fail "an annotated tag was moved"
[ "$(git -C repo3 rev-parse latest)" = "$(git -C repo3 rev-parse pages)" ] || fail "tend's tag is not on the tip"
sed -i '/tag = v/d' tend.conf
run sync; expect_rc 0 "the foreign tags out of tend.conf"
[ "$(git -C repo3 rev-parse v1.0)" = "$v1" ] && [ "$(git -C repo3 rev-parse v2.0)" = "$v2" ] || fail "removing the setting deleted or moved a foreign tag: $(git -C repo3 tag)"
git -C repo3 fsck --strict >/dev/null 2>&1 || fail "fsck repo3 (a dangling tag object?)"
echo c > src/c
TEND_FAILPOINTS='git-tag-update=kill' "$TEND" sync >/dev/null 2>&1
[ "$(git -C repo3 rev-parse latest)" != "$(git -C repo3 rev-parse pages)" ] || fail "the kill did not leave the tag behind (the test is wrong)"
run check; expect_rc 1 "check sees the tag behind"
expect_in "$OUT" "@tag/latest: left behind: tag latest points at" "named"
expect_in "$OUT" "the next tend sync catches them up" "check says which command mends it (it said sync --full)"
run sync; expect_rc 0 "the next sync"
expect_in "$ERR" "note: tag latest moved from" "sync says it moved the tag (it was silent)"
[ "$(git -C repo3 rev-parse latest)" = "$(git -C repo3 rev-parse pages)" ] || fail "the tag stayed behind"
run check; expect_rc 0 "no drift"
# a tag's lock held by someone: the commit is in, the tag is said to fail
# (it failed every entry of the commit, with no reason), and catches up
touch "$WS/repo3/.git/refs/tags/latest.lock"
echo d > src/d
run sync; expect_rc 1 "a tag that cannot follow fails the pass"
expect_in "$OUT" "1 created, 0 updated, 0 deleted, 1 error" "the entry is created, the tag's failure counted"
expect_in "$ERR" "tag latest not moved: $WS/repo3/.git/refs/tags/latest.lock exists" "the lock named"
expect_in "$ERR" "refs/heads/pages is committed" "says the commit is in"
[ "$(git -C repo3 show pages:d)" = d ] || fail "the entry did not reach the ref"
run check; expect_rc 1 "the tag is behind"
expect_in "$OUT" "left behind: tag latest" "check: left behind"
run plan; expect_rc 1 "plan: the locked tag would fail (it promised a move)"
expect_in "$ERR" "latest.lock exists: the sync cannot move it" "plan names the lock"
run sync; expect_rc 1 "still locked"
expect_in "$ERR" "(it stays at " "each sync says the tag stays behind"
rm "$WS/repo3/.git/refs/tags/latest.lock"
run plan; expect_rc 3 "plan: the tag to move is pending (it said No changes)"
expect_in "$OUT" "@tag/latest  (left behind at " "plan lists the tag"
expect_in "$OUT" "1 tag left behind to move back" "plan counts it"
run status; expect_in "$OUT" "1 tag left behind (tend sync moves it)" "status says so (it said 0 unsettled, nothing else)"
run sync; expect_rc 0 "lock gone"
expect_in "$ERR" "note: tag latest moved from" "caught up"
[ "$(git -C repo3 rev-parse latest)" = "$(git -C repo3 rev-parse pages)" ] || fail "the tag stayed behind the lock"
run check; expect_rc 0 "no drift after the lock"
run plan; expect_rc 0 "plan: nothing left"
# someone else's commit on top of tend's: tend's tag stays on tend's
# commit (the catch-up moved it onto theirs, saying a pass was cut short)
git clone -q -b pages repo3 wt3 2>/dev/null && echo theirs > wt3/theirs && git -C wt3 add theirs && git -C wt3 commit -qm theirs && git -C wt3 push -q origin pages || fail "their commit"
mine=$(git -C repo3 rev-parse latest)
run check; expect_rc 0 "their commit on top: no drift"
run plan; expect_rc 0 "their commit on top: nothing to do"
run sync; expect_rc 0 "their commit on top: sync"
[ "$(git -C repo3 rev-parse latest)" = "$mine" ] || fail "tend's tag moved onto someone else's commit"
echo e > src/e
run sync; expect_rc 0 "tend's next commit"
[ "$(git -C repo3 rev-parse latest)" = "$(git -C repo3 rev-parse pages)" ] || fail "tend's next commit did not move its tag"
rm -rf wt3
# tend's tag moved back by hand onto the commit before (a new user's
# trial: it looked left behind by a kill, and every sync moved it
# forward, saying an earlier pass was cut short): it stays, plan and sync
# fail it, check says it is in the way
prev=$(git -C repo3 rev-parse latest)
echo f > src/f; run sync; expect_rc 0 "a commit that moves the tag"
git -C repo3 tag -f latest "$prev" >/dev/null
echo g > src/g
run plan; expect_rc 1 "plan: the tag moved back by hand fails the sync"
expect_in "$ERR" "@tag/latest: in the way: it points at" "plan names the tag in the way"
expect_not_in "$OUT" "left behind" "plan: a tag moved back is not left behind"
run sync; expect_rc 1 "sync: the tag moved back by hand"
expect_in "$ERR" "tag latest points at" "sync says the tag stays"
expect_not_in "$ERR" "moved from" "sync did not move the tag forward"
[ "$(git -C repo3 rev-parse latest)" = "$prev" ] || fail "tend moved a tag someone moved back"
# and with nothing to commit, as long as it stays (a new user's trial:
# once the commit was in, plan said No changes, sync exit 0, status clean)
run plan; expect_rc 1 "plan, nothing to commit: the tag is still in the way"
expect_in "$ERR" "@tag/latest: in the way: it points at" "plan names the tag still in the way"
expect_in "$ERR" "the sync leaves it (and fails)" "plan: no commit, the sync fails the tag"
run sync; expect_rc 1 "sync, nothing to commit: the tag is still in the way"
expect_in "$ERR" "tag latest points at" "sync says the tag still stays"
expect_not_in "$ERR" "g:" "the tag's failure is not put on an entry"
run status; expect_in "$OUT" "1 error" "status: the last pass had the tag's error"
run check; expect_in "$OUT" "in the way: tag latest points at" "check: in the way"
git -C repo3 tag -d latest >/dev/null
run check; expect_in "$OUT" "tag latest is missing: tend sync sets it again" "check: a deleted tag is caught up by a plain sync"
expect_not_in "$OUT" "sync --full" "check does not send a deleted tag to --full"
run sync; expect_rc 0 "the tag deleted: tend sets it again"
[ "$(git -C repo3 rev-parse latest)" = "$(git -C repo3 rev-parse pages)" ] || fail "the tag was not set again on the tip: $OUT $ERR $(git -C repo3 rev-parse latest pages)"
# the ref reset by hand below tend's last commit (a new user's trial:
# sync, plan and status then said all was applied, the ref held the old
# content, only check saw it): plan and status say so, the sync verifies
# every entry and writes back what the ref lost
echo h1 > src/h; run sync; expect_rc 0 "h1"
echo h2 > src/h; run sync; expect_rc 0 "h2"
git -C repo3 update-ref refs/heads/pages pages~1
run plan; expect_rc 3 "plan after a reset by hand: pending"
expect_in "$OUT" "1 ref reset by hand to verify entry by entry" "plan counts the reset ref"
expect_in "$ERR" "refs/heads/pages no longer holds" "plan says the ref lost tend's commit"
run status; expect_in "$OUT" "its ref no longer holds" "status says the ref lost tend's commit"
run check; expect_rc 1 "check after a reset by hand: the ref lost h2"
expect_in "$OUT" "their git ref was reset by hand: the next tend sync verifies every entry and writes them again" "check: a plain sync repairs a reset"
expect_not_in "$OUT" "sync --full" "check does not send a reset ref to --full"
run sync; expect_rc 0 "sync after a reset by hand"
[ "$(git -C repo3 show pages:h)" = h2 ] || fail "the reset's lost content was not written back: $(git -C repo3 show pages:h)"
run plan; expect_rc 0 "plan once the ref holds tend's commit again"
run check; expect_rc 0 "check after the reset was mended"
git -C repo3 update-ref -d refs/heads/pages
run sync; expect_rc 0 "sync after the ref was deleted by hand"
[ "$(git -C repo3 show pages:h)" = h2 ] || fail "a deleted ref was not written again"
run check; expect_rc 0 "check after the ref came back"
# a tag at the tip already is adopted, as plan says
git -C repo3 tag here pages
printf '\ttag = here\n' >> tend.conf
run plan; expect_in "$OUT" "@tag/here  (adopted" "plan: adopt"
run sync; expect_rc 0 "adopt a tag"
expect_in "$OUT" "1 adopted" "sync: adopted"
echo adopted > src/adopted; run sync; expect_rc 0 "a commit moves the adopted tag"
[ "$(git -C repo3 rev-parse here)" = "$(git -C repo3 rev-parse pages)" ] || fail "the adopted tag did not follow tend's commit"
# it was someone's before: once not declared it stays where it is (a new
# user's trial: the hand-made tag was deleted with its setting)
at=$(git -C repo3 rev-parse here)
sed -i '/tag = here/d' tend.conf
run plan; expect_in "$OUT" "@tag/here  (forgotten: the tag was someone's before tend adopted it" "plan says the adopted tag stays"
expect_in "$OUT" "1 to forget" "plan counts the adopted tag as forgotten"
run sync; expect_rc 0 "the adopted tag's setting removed"
expect_in "$OUT" "0 deleted, 1 forgotten" "the adopted tag is not counted as deleted"
expect_in "$ERR" "tag here was there before tend adopted it: left where it is" "sync says the adopted tag stays"
[ "$(git -C repo3 rev-parse -q --verify refs/tags/here)" = "$at" ] || fail "an adopted tag was deleted (or moved) with its setting"
echo after > src/after; run sync; expect_rc 0 "a commit after the adopted tag was let go"
[ "$(git -C repo3 rev-parse here)" = "$at" ] || fail "a tag let go was moved by tend's next commit"
git -C repo3 tag -d here >/dev/null
# tend's own tag, moved by hand, is not deleted with the setting
git -C repo3 tag -f latest "$v1" >/dev/null
run check; expect_rc 1 "a tag moved by hand is drift"
expect_in "$OUT" "in the way: tag latest points at" "not tend's any more"
expect_in "$OUT" "something is in their way" "check does not promise sync --full repairs it"
sed -i '/tag = latest/d' tend.conf
run plan; expect_in "$OUT" "@tag/latest  (forgotten: " "plan says the tag someone moved stays"
run sync; expect_rc 0 "tag setting removed"
expect_in "$OUT" "0 deleted, 1 forgotten" "a tag left where someone moved it is not counted as deleted"
[ "$(git -C repo3 rev-parse latest)" = "$v1" ] || fail "a tag moved by hand was deleted"
git -C repo3 tag -d latest >/dev/null
printf '\ttag = latest\n' >> tend.conf
run sync; expect_rc 0 "tag again"
sed -i '/tag = latest/d' tend.conf
run sync; expect_rc 0 "tag removed"
git -C repo3 rev-parse -q --verify refs/tags/latest >/dev/null && fail "tend's own tag was not deleted: $OUT $ERR $(cat .tend/git-tags)"

# a file that becomes a directory and back, beside an unrelated new file:
# one pass, one commit, the final form (git and dir targets alike)
rm -rf .tend repo4 src5 out5 && git init -q --bare repo4 && mkdir src5
cat > tend.conf <<'CONF'
[app "pages"]
	source = src5
	target = git:repo4
	ref = refs/heads/pages
[app "site"]
	source = src5
	target = dir:out5
CONF
echo a > src5/foo; echo x > src5/x
run sync; expect_rc 0 "before the swap"
before=$(git -C repo4 rev-parse pages)
rm src5/foo; mkdir src5/foo; echo b > src5/foo/bar; echo y > src5/y
run sync; expect_rc 0 "file -> directory in one pass"
[ "$(git -C repo4 ls-tree -r --name-only pages | tr '\n' ' ')" = "foo/bar x y " ] || fail "git after the swap: $(git -C repo4 ls-tree -r --name-only pages)"
[ "$(git -C repo4 rev-list --count "$before..pages")" = 1 ] || fail "the swap took $(git -C repo4 rev-list --count "$before..pages") commits"
expect_file out5/foo/bar b; expect_file out5/y y
rm -r src5/foo; echo c > src5/foo
run sync; expect_rc 0 "directory -> file in one pass"
[ "$(git -C repo4 ls-tree -r --name-only pages | tr '\n' ' ')" = "foo x y " ] || fail "git after the swap back: $(git -C repo4 ls-tree -r --name-only pages)"
expect_file out5/foo c
run check; expect_rc 0 "no drift after the swaps"
run plan; expect_rc 0 "nothing pending"

# a typo in the repository path, once fixed, leaves nothing to undo
rm -rf .tend repo6 src6 && git init -q --bare repo6 && mkdir src6 && echo a > src6/a
cat > tend.conf <<'CONF'
[app "pages"]
	source = src6
	target = git:nope.git
	ref = refs/heads/pages
CONF
run sync; expect_rc 1 "a missing repository"
expect_in "$ERR" "nope.git" "named"
sed -i 's/nope.git/repo6/' tend.conf
run sync; expect_rc 0 "the path fixed: one sync"
[ "$(git -C repo6 ls-tree -r --name-only pages)" = a ] || fail "repo6: $(git -C repo6 ls-tree -r --name-only pages 2>&1)"
run sync; expect_rc 0 "and the next"
run check; expect_rc 0 "no drift"
run drop pages; expect_rc 0 "drop works"
[ ! -e nope.git ] || fail "tend made the mistyped repository"

# names git (or a file system under a checkout) takes for .git fail alone
rm -rf .tend repo7 src7 && git init -q --bare repo7 && mkdir src7
echo a > src7/a; echo b > src7/GIT~1; echo c > "src7/.git "; printf 'd' > "$(printf 'src7/.g\342\200\214it')"
sed -i 's/repo6/repo7/; s/src6/src7/' tend.conf
run sync; expect_rc 1 "git aliases of .git"
expect_in "$ERR" '"GIT~1" is a .git component to git or to some file system' "GIT~1 named"
expect_in "$ERR" '".git " is a .git component' "trailing space named"
[ "$(git -C repo7 ls-tree -r --name-only pages)" = a ] || fail "the other entries: $(git -C repo7 ls-tree -r --name-only pages 2>&1)"
git -C repo7 fsck --strict >/dev/null 2>&1 || fail "fsck --strict repo7"

# tend's tag follows the app through a prefix and a ref change
rm -rf .tend repo8 && git init -q --bare repo8
cat > tend.conf <<'CONF'
[app "pages"]
	source = src6
	target = git:repo8
	ref = refs/heads/pages
	prefix = site
	tag = latest
CONF
run sync; expect_rc 0 "with a tag"
sed -i 's/prefix = site/prefix = web/' tend.conf
run sync; expect_rc 0 "prefix change with a tag"
[ "$(git -C repo8 rev-parse latest 2>&1)" = "$(git -C repo8 rev-parse pages)" ] || fail "the tag after the prefix change: $(git -C repo8 rev-parse latest 2>&1)"
sed -i 's|refs/heads/pages|refs/heads/gh|' tend.conf
run sync; expect_rc 0 "ref change with a tag"
[ "$(git -C repo8 rev-parse latest 2>&1)" = "$(git -C repo8 rev-parse gh)" ] || fail "the tag after the ref change: $(git -C repo8 rev-parse latest 2>&1)"
run check; expect_rc 0 "no drift"

# exclusive: another author's files added later under the prefix are
# drift for check, shown by plan, removed by sync --full in one commit of
# their own; what is outside the prefix stays, and so does a tag's place
rm -rf .tend repo9 && git init -q repo9
cat > tend.conf <<'CONF'
[app "pages"]
	source = src6
	target = git:repo9
	ref = refs/heads/pages
	prefix = site
	tag = latest
	exclusive = true
CONF
run sync; expect_rc 0 "exclusive git app"
mine=$(git -C repo9 ls-tree -r --name-only pages | tr '\n' ' ')
git -C repo9 worktree add -q "$WS/wt9" pages 2>/dev/null
mkdir -p "$WS/wt9/site/extra"; echo x > "$WS/wt9/site/stray.txt"; echo y > "$WS/wt9/site/extra/y"; echo z > "$WS/wt9/outside.txt"
git -C "$WS/wt9" add -A && git -C "$WS/wt9" commit -qm "another author"
git -C repo9 worktree remove --force "$WS/wt9"
run sync; expect_rc 0 "a plain sync never reads the target"
[ "$(git -C repo9 log -1 --format=%s pages)" = "another author" ] || fail "a plain sync committed"
run check; expect_rc 1 "strays under an exclusive prefix are drift"
expect_in "$OUT" 'drift git("repo9", "refs/heads/pages", "site"):extra/: not declared' "check names the directory"
expect_in "$OUT" 'drift git("repo9", "refs/heads/pages", "site"):stray.txt: not declared' "check names the file"
expect_not_in "$OUT" "outside.txt" "outside the prefix is not the app's"
run plan; expect_rc 3 "plan shows the strays"
expect_in "$OUT" '? pages git("repo9", "refs/heads/pages", "site"):stray.txt' "plan names the file"
before=$(git -C repo9 rev-parse pages)
run sync --full; expect_rc 0 "sync --full removes the strays"
have=$(git -C repo9 ls-tree -r --name-only pages | tr '\n' ' ')
[ "$have" = "outside.txt $mine" ] || fail "after sync --full: $have (tend's: $mine)"
[ "$(git -C repo9 rev-list --count "$before..pages")" = 1 ] || fail "the strays go in one commit"
expect_in "$(git -C repo9 log -1 --format=%s pages)" "remove what the exclusive target does not declare" "the commit says why"
[ "$(git -C repo9 rev-parse latest)" = "$(git -C repo9 rev-parse pages)" ] || fail "tend's tag follows the sweep"
git -C repo9 merge-base --is-ancestor "$before" pages || fail "the other author's commit is kept in history"
run check; expect_rc 0 "no drift after sync --full"
run plan; expect_rc 0 "converged"
git -C repo9 fsck --strict >/dev/null 2>&1 || fail "fsck --strict repo9"
# drop of an app with a tag: the tag goes (it said "reverted" and left the
# tag, moved onto the drop's commit, where the next tend no longer knew it)
git init -q --bare repo10
cat > tend.conf <<'CONF'
[app "tagged"]
	source = src
	target = git:repo10
	ref = refs/heads/pub
	tag = mytag
CONF
run sync -q; expect_rc 0 "sync with a tag"
[ "$(git -C repo10 rev-parse mytag)" = "$(git -C repo10 rev-parse pub)" ] || fail "the tag on the tip"
run drop tagged; expect_rc 0 "drop tagged"
expect_in "$OUT" "reverted" "drop says it reverted"
git -C repo10 rev-parse -q --verify refs/tags/mytag >/dev/null &&
	fail "the dropped app's tag is left: $(git -C repo10 for-each-ref refs/tags)"
[ "$(git -C repo10 ls-tree -r --name-only pub)" = "" ] || fail "the drop left entries"
git -C repo10 fsck --strict >/dev/null 2>&1 || fail "fsck --strict repo10"
# two of the app's own entries at one name, a file and a directory (x
# from x.txt, x/y from x/y.txt with name = {dir}/{stem}): libgit2's D/F
# conflict failed every entry of the commit, the unrelated z too, and the
# ref got no commit at all (found by a new user); now the file's entry
# fails naming the other, the rest commits
rm -rf dfo dfo.git .tend; mkdir -p dfo/x; echo f > dfo/x.txt; echo i > dfo/x/y.txt; echo z > dfo/z.txt
git init -q --bare dfo.git
printf '[app "o"]\n\tsource = dfo\n\tname = {dir}/{stem}\n\ttarget = git:dfo.git\n\tref = refs/heads/t\n' > tend.conf
run sync; expect_rc 1 "own df: the conflict fails"
expect_in "$ERR" "conflict: x and x/y, two entries of this pass, need x to be a file and a directory in refs/heads/t" "own df: both named"
[ "$(git -C dfo.git show refs/heads/t:z)" = z ] || fail "own df: the unrelated z was not committed"
[ "$(git -C dfo.git show refs/heads/t:x/y)" = i ] || fail "own df: x/y was not committed"
run sync; expect_rc 1 "own df: still in conflict"
expect_in "$ERR" "if what is in it is this app's, two of its sources collide" "own df: the next sync does not blame another author"
rm dfo/x.txt
run sync; expect_rc 0 "own df: one source renamed away"
run check; expect_rc 0 "own df: no drift"
finish
