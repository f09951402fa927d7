#!/bin/sh
# Two declarations of one target state are a conflict (issue 15, item 1):
# neither is applied, the sync exits 1 naming both sources and the entry,
# what is there stays, and once one of them goes the other one's entry is
# applied - by `tend sync` and by a running agent.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
CTL="python3 $HERE/agentctl.py $WS/.tend/agent.sock"
AGENT=
trap '[ -n "$AGENT" ] && { kill -TERM $AGENT 2>/dev/null; wait $AGENT 2>/dev/null; }; chmod -R u+rwx "$WS" 2>/dev/null; rm -rf "$WS"' EXIT
until_() { $CTL until "$1" -- "$2" || fail "$3"; }

conf_site '	name = {name}'
mkdir -p src/sub
echo A > src/a.md; echo SUB > src/sub/a.md; echo B > src/b.md

# both new in one pass: neither applied
run sync; expect_rc 1 "a collision fails the sync"
expect_in "$ERR" "conflict: out/a.md is declared by src/a.md and by src/sub/a.md" "both sources and the entry named"
expect_gone out/a.md; expect_file out/b.md B
run sync; expect_rc 1 "still a conflict"
expect_gone out/a.md
run plan; expect_rc 1 "plan shows the conflict"
expect_in "$ERR" "conflict: out/a.md" "plan names it"
run check; expect_rc 0 "nothing tracked is wrong"
# status names who names each failure: sync, not check (it said "tend
# check, or tend sync, names each" and check said "no drift")
run status; expect_in "$OUT" "failures: tend sync names each)" "status's hint for a conflict"

# one goes: the other one's entry is applied
rm src/a.md
run sync; expect_rc 0 "the collision is over"
expect_file out/a.md SUB
run plan; expect_rc 0 "no changes after"; expect_in "$OUT" "No changes" "plan"
run check; expect_rc 0 "no drift"

# an entry that exists: a second source for it is refused, the entry stays
echo A > src/a.md
run sync; expect_rc 1 "a newcomer conflicts with the owner"
expect_in "$ERR" "conflict: out/a.md is declared by src/sub/a.md and by src/a.md: it stays src/sub/a.md's, src/a.md's is not applied" "named, and who keeps it"
expect_file out/a.md SUB
# the owner changes its source meanwhile: its change is applied, and the
# message says so (it said "neither is applied" while it wrote SUB2)
echo SUB2 > src/sub/a.md
run sync; expect_rc 1 "the owner's change beside the newcomer"
expect_file out/a.md SUB2
expect_not_in "$ERR" "neither is applied" "not when the owner writes"
expect_in "$ERR" "it stays src/sub/a.md's, src/a.md's is not applied" "the owner keeps it"
run check; expect_rc 0 "no drift: the owner's bytes"
echo SUB > src/sub/a.md; run sync -q
# the owner goes: the newcomer's entry replaces it
rm src/sub/a.md
run sync; expect_rc 0 "owner gone"
expect_file out/a.md A
run check; expect_rc 0 "no drift"
# the newcomer goes instead: nothing is deleted
echo SUB > src/sub/a.md
run sync; expect_rc 1 "conflict again"
rm src/sub/a.md
run sync; expect_rc 0 "newcomer gone"
expect_file out/a.md A
run plan; expect_rc 0 "plan clean"

# a move is not a conflict: the entry moves to its new declarer
mv src/a.md src/sub/a.md
run sync; expect_rc 0 "a move"
expect_file out/a.md A
expect_not_in "$ERR" "conflict" "no conflict reported for a move"
run plan; expect_rc 0 "plan clean after the move"

# an exec app writing one entry for two sources ($TEND_OUT): the same
rm -rf src out .tend; mkdir -p src
cat > tend.conf <<'CONF'
[app "ex"]
	source = src
	target = dir:out
	declare = exec mkdir $TEND_OUT && printf x > $TEND_OUT/shared && cat > $TEND_OUT/$(basename $TEND_PATH)
CONF
echo 1 > src/one; echo 2 > src/two
run sync; expect_rc 1 "exec outputs collide"
expect_in "$ERR" "conflict: out/shared is declared by src/one and by src/two" "exec conflict named"
expect_gone out/shared
# (a component that conflicts applies none of its entries)
expect_gone out/one
rm src/two
run sync; expect_rc 0 "one declarer left"
expect_file out/shared x; expect_file out/one 1

# the agent: a collision, then the owner goes; the other source's entry
# comes back without touching that source
rm -rf src out .tend; mkdir -p src/sub
conf_watch
printf '\tname = {name}\n' >> tend.conf
echo A > src/a.md
"$TEND" watch 2>"$WS/agent.err" &
AGENT=$!
$CTL ready || fail "agent ready"
expect_file out/a.md A
until_ '[ "$("$TEND" status --json | python3 -c "import json,sys; print(json.load(sys.stdin)[\"agent\"][\"last\"][\"errors\"])" 2>/dev/null)" != 0 ]' 'echo SUB > src/sub/a.md' "the agent reports the conflict"
expect_file out/a.md A
until_ '[ "$(cat out/a.md 2>/dev/null)" = SUB ]' 'rm src/a.md' "the agent applies the other source once the owner is gone"
kill -TERM $AGENT; wait $AGENT; AGENT=
run check; expect_rc 0 "no drift after the agent"

# two apps swap their targets in one edit: each lets go of its old one
# (each held the other's for ever: every sync failed with two conflicts
# while check said no drift; a new user's trial)
rm -rf src out .tend X Y; mkdir s1 s2; echo A > s1/f; echo B > s2/f
printf '[app "a"]\n\tsource = s1\n\ttarget = dir:X\n[app "b"]\n\tsource = s2\n\ttarget = dir:Y\n' > tend.conf
run sync; expect_rc 0 "swap: first sync"
printf '[app "a"]\n\tsource = s1\n\ttarget = dir:Y\n[app "b"]\n\tsource = s2\n\ttarget = dir:X\n' > tend.conf
run plan; expect_rc 3 "swap: plan"
expect_not_in "$ERR" "conflict" "swap: plan finds no conflict"
run sync; expect_rc 0 "swap: the sync after the swap"
expect_not_in "$ERR" "conflict" "swap: no conflict"
expect_file X/f B; expect_file Y/f A
run check; expect_rc 0 "swap: no drift"
run sync; expect_rc 0 "swap: settled"; expect_in "$OUT" "a: 0 created, 0 updated, 0 deleted" "swap: nothing left to do"

# the owner's folder renamed in the pass a second source begins to
# declare its entry: the two newcomers conflict, and the owner's entry
# goes with it (a new user's trial: the message said it stayed)
rm -rf src out .tend X Y s1 s2; mkdir -p src/q; echo Q > src/q/z.txt
printf '[app "flat"]\n\tsource = src\n\tname = {name}\n\ttarget = dir:out\n' > tend.conf
run sync; expect_rc 0 "gone owner: first sync"
mkdir src/p; echo P > src/p/z.txt; mv src/q src/r
run plan; expect_rc 1 "gone owner: plan"
expect_in "$ERR" "neither is applied, and what src/q/z.txt wrote there goes with it" "gone owner: plan says the entry goes"
expect_in "$OUT" "- flat out/z.txt" "gone owner: plan lists its delete"
run sync; expect_rc 1 "gone owner: sync"
expect_in "$ERR" "neither is applied, and what src/q/z.txt wrote there goes with it" "gone owner: sync says the entry goes"
expect_not_in "$ERR" "what is there stays" "gone owner: nothing said to stay"
expect_gone out/z.txt
rm -r src/p
run sync; expect_rc 0 "gone owner: the other one gone"
expect_file out/z.txt Q
finish
