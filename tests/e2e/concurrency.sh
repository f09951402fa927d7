#!/bin/sh
# Two writers on one workspace, readers beside a writer, and writers
# beside an agent: no corruption, a clear message or a hand-off, and a
# reader holding its snapshot never blocks the writer.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
CTL="python3 $HERE/agentctl.py $WS/.tend/agent.sock"
AGENT= BG=
trap 'kill -CONT $BG 2>/dev/null; kill $BG 2>/dev/null; kill -TERM $AGENT 2>/dev/null; wait 2>/dev/null; chmod -R u+rwx "$WS" 2>/dev/null; rm -rf "$WS"' EXIT

mkdir -p src
d=0
while [ $d -lt 20 ]; do
	mkdir -p src/d$d; f=0
	while [ $f -lt 100 ]; do printf '%d %d\n' $d $f > src/d$d/f$f; f=$((f+1)); done
	d=$((d+1))
done
conf_site ""

# two syncs at once: the second waits for the first, both succeed
"$TEND" sync --full >"$WS/s1.out" 2>&1 & p1=$!
"$TEND" sync --full >"$WS/s2.out" 2>&1 & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
[ $r1 = 0 ] && [ $r2 = 0 ] || fail "two syncs: exit $r1 and $r2: $(cat "$WS/s1.out" "$WS/s2.out")"
diff -r src out >/dev/null || fail "two syncs: target differs"
run check -q; expect_rc 0 "two syncs: check"

# deterministic: a sync parked mid-apply holds the write lock; a second
# one says whom it waits for, and runs once the first one finishes
printf 'changed\n' > src/d3/f3
TEND_FAILPOINTS='write~f3@1=stop' "$TEND" sync >"$WS/s1.out" 2>&1 & BG=$!
stopped $BG || fail "the first sync did not reach its failpoint"
"$TEND" sync >"$WS/s2.out" 2>&1 & p2=$!
i=0; while [ $i -lt 200 ] && ! grep -q "waiting for pid $BG (tend sync)" "$WS/s2.out"; do sleep 0.05; i=$((i+1)); done
grep -q "waiting for pid $BG (tend sync)" "$WS/s2.out" || fail "the second sync does not say whom it waits for: $(cat "$WS/s2.out")"
kill -0 $p2 2>/dev/null || fail "the second sync did not wait"
# readers are not writers: status, ls and check answer meanwhile
run status; expect_rc 0 "status beside a parked writer"
run ls site; expect_rc 0 "ls beside a parked writer"
kill -CONT $BG; wait $BG; r1=$?; BG=
wait $p2; r2=$?
[ $r1 = 0 ] && [ $r2 = 0 ] || fail "parked sync then waiting sync: exit $r1 and $r2"
expect_file out/d3/f3 changed

# a reader holding a read snapshot (parked) never blocks a writer
TEND_FAILPOINTS='read-txn@1=stop' "$TEND" ls site >/dev/null 2>&1 & BG=$!
stopped $BG || fail "ls did not park with its snapshot"
printf 'changed again\n' > src/d4/f4
timeout 60 "$TEND" sync --full >/dev/null 2>&1; rc=$?
[ $rc = 0 ] || fail "a writer beside a parked reader: exit $rc"
expect_file out/d4/f4 'changed again'
kill -CONT $BG; wait $BG; rc=$?; BG=
[ $rc = 0 ] || fail "the parked reader: exit $rc"

# an agent starting while a sync holds the lock waits for it
printf 'agent\n' > src/d5/f5
TEND_FAILPOINTS='write~f5@1=stop' "$TEND" sync >/dev/null 2>&1 & BG=$!
stopped $BG || fail "sync did not park"
"$TEND" watch 2>"$WS/agent.err" & AGENT=$!
i=0; while [ $i -lt 200 ] && ! grep -q "waiting for pid $BG" "$WS/agent.err"; do sleep 0.05; i=$((i+1)); done
grep -q "waiting for pid $BG (tend sync)" "$WS/agent.err" || fail "the agent does not say it waits: $(cat "$WS/agent.err")"
kill -CONT $BG; wait $BG; BG=
$CTL ready || fail "the agent runs once the sync is done"
expect_file out/d5/f5 agent

# with the agent running: plain sync is handed to it; sync with options
# and drop are refused with the agent's pid, touching nothing
printf 'handed\n' > src/d6/f6
run sync; expect_rc 0 "sync handed to the agent"
expect_in "$OUT" "running agent" "hand-off reported"
expect_file out/d6/f6 handed
run sync --full; expect_rc 2 "sync --full beside an agent"
expect_in "$ERR" "an agent (pid $AGENT) runs for this workspace" "names the agent"
run drop site; expect_rc 2 "drop beside an agent"
expect_in "$ERR" "not \`tend drop\`: stop it first (tend stop)" "drop's refusal (it said 'with these options')"
expect_file out/d6/f6 handed
run check -q; expect_rc 0 "check beside the agent"
kill -TERM $AGENT; wait $AGENT; rc=$?; AGENT=
[ $rc = 0 ] || fail "agent exit $rc"
# and once it is gone, the same commands run
run sync --full; expect_rc 0 "sync --full after the agent stopped"
run check -q; expect_rc 0 "check at the end"

# an agent killed while a child it spawned had not yet exec'd: the child
# holds the lock's open file a moment longer. The dead agent's lock is
# waited for, not reported as a running agent (nor taken by a new one
# before it is free): here a stand-in holds it 0.6 s under a dead pid.
sh -c 'exit 0' & dead=$!; wait $dead
printf '%d\n' $dead > .tend/agent.pid
flock -x .tend/agent.pid sleep 0.6 &
holder=$!
sleep 0.1
printf 'after a dead agent\n' > src/d7/f7
run sync --full; expect_rc 0 "sync --full while a dead agent's child holds the lock"
expect_file out/d7/f7 "after a dead agent"
wait $holder
printf '%d\n' $dead > .tend/agent.pid
flock -x .tend/agent.pid sleep 0.6 &
holder=$!
sleep 0.1
"$TEND" watch >/dev/null 2>"$WS/.werr" &
AGENT=$!
$CTL ready || fail "an agent starts once a dead agent's lock is free ($(cat "$WS/.werr"))"
kill -TERM $AGENT; wait $AGENT; AGENT=
wait $holder

# the write lock of a killed, reaped sync held a moment more by what it
# left in transit (a child between its spawn and its exec): the next sync
# waits for it without naming the dead pid (the torture caught "waiting
# for pid N" with N gone)
sh -c 'exit 0' & dead=$!; wait $dead
printf '%s (tend sync)\n' "$dead" > .tend/write.lock
flock .tend/write.lock sleep 0.5 & transit=$!
sleep 0.1
run sync; expect_rc 0 "a sync after a dead holder's lock"
expect_not_in "$ERR" "waiting for pid $dead" "no wait announced for a dead pid"
wait $transit
finish
