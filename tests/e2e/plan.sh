#!/bin/sh
# plan tells the truth (issue 15): held deletes listed and counted, failed
# declarations and a missing source shown, the exit code says so, -v says
# why; the delete brake holds everything derived from the held sources
# (an aggregate, the manifest); an aggregate `exec cat` gets the paths.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"

mkdir -p src
cat > tend.conf <<'CONF'
[app "idx"]
	source = src
	declare = exec cat
	target = file:index.txt
[app "site"]
	source = src
	target = dir:out
	manifest = true
CONF
i=1; while [ $i -le 30 ]; do echo $i > src/f$i; i=$((i+1)); done
# in a workspace never synced, the commands that write nothing create
# nothing either (they made .tend/store, staging and tmp): plan runs the
# exec declarations in a scratch directory, removed after
for cmd in plan "sync -n" "plan --json" status ls check; do
	"$TEND" $cmd >/dev/null 2>&1
	[ -e .tend ] && fail "tend $cmd created .tend: $(ls -a .tend)"
done
run plan; expect_rc 3 "plan before the first sync"
expect_in "$OUT" "+ idx index.txt" "plan shows the aggregate from its exec"
# ... on an empty store made for it (committed as a sync would, cleared
# between apps: a preview holding all of a cold 1M-file pass in one
# transaction took 1 GiB), removed after: each app's plan is what it
# is alone
ALL=$OUT
mkdir "$WS/tmp"
# what a killed plan left (its pid is gone) is removed by the next one;
# a running one's is not
sh -c 'exit 0' & dead=$!; wait $dead
mkdir -p "$WS/tmp/tend-empty-$dead-XXXXXX/store" "$WS/tmp/tend-empty-$$-YYYYYY"
for app in idx site; do
	OUT=$(TMPDIR="$WS/tmp" "$TEND" plan $app 2>/dev/null)
	[ "$(printf '%s\n' "$ALL" | grep "^[-+~!=] $app ")" = "$(printf '%s\n' "$OUT" | grep "^[-+~!=] ")" ] ||
		fail "plan $app differs from its part of plan: $OUT"
done
[ "$(ls -A "$WS/tmp")" = "tend-empty-$$-YYYYYY" ] || fail "scratch stores after plan: $(ls -A "$WS/tmp")"
rm -r "$WS/tmp"
run sync; expect_rc 0 "first sync"
# `exec cat` on an aggregate is `cat "$@"`: every source, in path order
[ "$(wc -l < index.txt)" = 30 ] || fail "exec cat wrote $(wc -l < index.txt) lines, want 30"
[ "$(head -1 index.txt)" = 1 ] && [ "$(sed -n 2p index.txt)" = 10 ] || fail "index.txt not in path order: $(head -2 index.txt)"
run plan; expect_rc 0 "nothing to do"; expect_in "$OUT" "No changes" "plan"

# 22 of 30 sources go: the brake holds their deletes, and the aggregate
rm src/f1* src/f2*; echo new > src/new
run plan; expect_rc 3 "held deletes are pending"
expect_in "$OUT" "- site out/f1  (held by the delete brake)" "a held delete listed"
expect_in "$OUT" "~ idx index.txt  (held by the delete brake: 22 sources vanished)" "the held aggregate listed"
expect_in "$OUT" "+ site out/new" "the create listed"
expect_in "$OUT" "23 held by the delete brake" "counted"
expect_not_in "$OUT" "No changes" "no false promise"
run plan --json; expect_rc 3 "plan --json"; json_ok "$OUT"
printf '%s' "$OUT" | python3 -c '
import json, sys
d = json.load(sys.stdin)
held = [a["path"] for a in d["actions"] if a.get("held")]
assert d["pending"] is True, d
assert len(held) == 23 and "out/f13" in held and "index.txt" in held, held
assert d["held"] == 23 and d["create"] == 1, d
' || fail "plan --json lists the held entries"
run plan -v; expect_in "$OUT" "(new source new)" "plan -v says why"
run sync; expect_rc 1 "held deletes fail the sync"
[ "$(wc -l < index.txt)" = 30 ] || fail "the aggregate changed while the brake held its sources: $(wc -l < index.txt) lines"
expect_file out/f13 13; expect_file out/new new
# the manifest still lists what the brake keeps
grep -q ' f13$' out/.tend-manifest || fail "a held entry left the manifest"
grep -q ' new$' out/.tend-manifest || fail "a new entry is not in the manifest"
run sync --allow-delete; expect_rc 0 "approved"
[ "$(wc -l < index.txt)" = 9 ] || fail "the aggregate after approval: $(wc -l < index.txt) lines, want 9"
expect_gone out/f13
grep -q ' f13$' out/.tend-manifest && fail "a deleted entry stayed in the manifest"
run plan; expect_rc 0 "converged"; expect_in "$OUT" "No changes" "plan"

# a missing source: a failure, never "No changes"
mv src src.away
run plan; expect_rc 1 "missing source"
expect_not_in "$OUT" "No changes" "no false promise"
expect_in "$ERR" "source src is missing" "named"
mv src.away src

# a failed declaration: the same
cat > tend.conf <<'CONF'
[app "ex"]
	source = src
	target = dir:out2
	declare = exec exit 3
CONF
run plan; expect_rc 1 "a failing declaration"
expect_not_in "$OUT" "No changes" "no false promise"
expect_in "$OUT" "failed, nothing planned" "the summary says so"

# exclusive: turning it on deletes what is not tend's; plan lists each
rm -rf src out out2 .tend tend.conf index.txt; mkdir -p src out/sub
conf_site
echo A > src/a; echo B > src/b; echo stray > out/stray; echo s2 > out/sub/s2
run sync; expect_rc 0 "sync without exclusive"
expect_file out/stray stray
printf '\texclusive = true\n' >> tend.conf
run plan; expect_rc 3 "exclusive switched on is pending"
expect_in "$OUT" "- site out/stray  (not declared: the target is exclusive)" "a foreign file listed"
expect_in "$OUT" "- site out/sub/  (not declared: the target is exclusive)" "a foreign directory listed"
expect_in "$OUT" "0 to delete, 2 undeclared to go with the rebuild (marked above)" "counted apart from deletes: sync counts no delete for them (plan said 2 to delete)"
run plan --json; json_ok "$OUT"
expect_in "$OUT" '"path": "out/stray", "invalidation": null, "stray": true, "needs_full": false' "plan --json lists it"
run sync; expect_rc 0 "exclusive applied"
expect_gone out/stray; expect_gone out/sub; expect_file out/a A
# files added later: drift for check, listed by plan, removed by sync --full
echo x > out/later; mkdir out/d; ln -s "$WS/src/a" out/lnk
run check; expect_rc 1 "a stray is drift"
expect_in "$OUT" "drift out/later: not declared at the last sync: the target is exclusive" "check names it"
expect_in "$OUT" "drift out/lnk: not declared" "a link too"
expect_in "$OUT" "drift out/d/: not declared" "a directory too"
run plan; expect_rc 3 "strays are pending"
expect_in "$OUT" "? site out/later  (not declared in an exclusive target: tend sync --full removes it)" "plan shows it"
expect_not_in "$OUT" "No changes" "no false promise"
run sync; expect_rc 0 "a plain sync leaves them"; expect_file out/later x
run sync --full; expect_rc 0 "sync --full"
expect_gone out/later; expect_gone out/lnk; expect_gone out/d
expect_file src/a A
expect_in "$OUT" "3 deleted" "counted as deleted"
run check; expect_rc 0 "no drift after --full"
run plan; expect_rc 0 "plan clean"; expect_in "$OUT" "No changes" "plan"
# sync -n is plan (rsync's habit): the same lines, the same exit, nothing
# applied; -n with another command is refused
echo changed > src/a; echo brand-new > src/n2
run plan; want="$OUT"; expect_rc 3 "plan before sync -n"
run sync -n; expect_rc 3 "sync -n: changes pending"
[ "$OUT" = "$want" ] || fail "sync -n says other than plan: $OUT"
run sync --dry-run --json; expect_rc 3 "sync --dry-run --json"
expect_in "$OUT" '"actions"' "sync --dry-run --json is plan's document"
expect_file out/a A; expect_gone out/n2
run ls -n; expect_rc 2 "ls -n is refused"
expect_in "$ERR" "-n/--dry-run is for sync" "ls -n's message"
run sync -q; expect_rc 0 "then the sync"
expect_file out/a changed; expect_file out/n2 brand-new

# a plan bigger than the store's map: its transaction is never committed,
# so the map cannot grow in the middle; it is made big enough first (at
# a million new files, plan listed a third of them, then a summary as if
# that were all). TEND_MAP_SIZE makes the map 1 MiB, full after ~500.
mkdir -p big
python3 -c '
for i in range(3000):
    open("big/f%05d" % i, "w").write(str(i))'
cat > tend.conf <<'CONF'
[app "big"]
	source = big
	target = dir:bigout
CONF
export TEND_MAP_SIZE=1048576
run plan; expect_rc 3 "plan of 3000 new files on a 1 MiB map"
n=$(printf '%s\n' "$OUT" | grep -c '^+ big bigout/f')
[ "$n" = 3000 ] || fail "plan on a small map listed $n of 3000 files"
expect_in "$OUT" "Plan: 3000 to create, 0 to update, 0 to delete." "the whole plan"
# a preview that fills the map anyway (a full disk) says so, and its
# last line does not pass for the whole plan
TEND_FAILPOINTS=map-full@1000 run plan; expect_rc 1 "plan on a full map"
expect_in "$ERR" "the preview filled the store's map" "plan's error"
expect_in "$OUT" "Plan incomplete: the pass of 1 app(s) stopped" "the summary of a stopped plan"
case "$OUT" in *"Plan: "*) fail "a stopped plan's summary reads as complete: $OUT";; esac
TEND_FAILPOINTS=map-full@1000 run plan --json; expect_rc 1 "plan --json on a full map"
expect_in "$OUT" '"failed": 1' "plan --json counts the stopped pass"
run sync -q; expect_rc 0 "sync of 3000 files on a 1 MiB map (it grows)"
[ "$(ls bigout | wc -l)" = 3000 ] || fail "bigout has $(ls bigout | wc -l) files"
run plan; expect_rc 0 "plan after it"; expect_in "$OUT" "No changes" "plan after the big sync"
unset TEND_MAP_SIZE

# plan's counts are the sync's that follows (plan counted the new target
# directory as a create, sync did not: "3 to create", then "2 created")
rm -rf big bigout .tend; mkdir -p two; printf 'a\n' > two/a; printf 'b\n' > two/b
printf '[app "two"]\n\tsource = two\n\ttarget = dir:twoout\n' > tend.conf
same_counts() {
	run plan; p=$(printf '%s\n' "$OUT" | sed -n 's/^Plan: \([0-9]*\) to create, \([0-9]*\) to update, \([0-9]*\) to delete.*/\1 \2 \3/p')
	expect_in "$OUT" "$2" "$1: plan"
	run sync; s=$(printf '%s\n' "$OUT" | sed -n 's/^two: \([0-9]*\) created, \([0-9]*\) updated, \([0-9]*\) deleted.*/\1 \2 \3/p')
	[ -n "$p" ] && [ "$p" = "$s" ] || fail "$1: plan counted '$p', sync '$s'"
}
same_counts "first sync" "+ two twoout/"
printf '[app "two"]\n\tsource = two\n\ttarget = dir:twoout2\n' > tend.conf
same_counts "target moved" "- two twoout/"
# a file of tend's becomes a directory: the delete of the file makes
# room for the entry under it (plan said "in the way: out/thing is not a
# directory" and failed it, while sync did it: a new user's trial)
rm two/b; mkdir two/b; printf 'i\n' > two/b/inner
same_counts "a file becomes a directory" "+ two twoout2/b/inner"
expect_not_in "$ERR" "in the way" "plan of a file that becomes a directory"
[ "$(cat twoout2/b/inner)" = i ] || fail "twoout2/b/inner"
finish
