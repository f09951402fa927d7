#!/bin/sh
# The agent's deferred settle: a pass's settling commit waits for the
# next pass's durable commit, a command, or the agent's exit.
# TEND_SETTLE_MS holds it open for as long as a step needs, and a SIGKILL
# shows what was committed: `tend ls` of a dead agent's store marks what
# is still pending.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
CTL="python3 $HERE/agentctl.py $WS/.tend/agent.sock"
AGENT=
trap '[ -n "$AGENT" ] && kill -KILL $AGENT 2>/dev/null; wait 2>/dev/null; rm -rf "$WS"' EXIT
until_() { $CTL until "$1" -- "$2" || fail "$3"; }
start() {
	TEND_SETTLE_MS=600000 "$TEND" watch 2>>"$WS/agent.err" &
	AGENT=$!
	$CTL ready || fail "agent ready"
}
crash() { kill -KILL $AGENT; wait $AGENT 2>/dev/null; AGENT=; }
# the ls line of target entry $1, and whether it is pending
state() { printf '%s\n' "$OUT" | grep "^out/$1 "; }
settled() { state "$1" | grep -q . && ! state "$1" | grep -q pending || fail "$2: out/$1 should be settled: $(state "$1")"; }
pending() { state "$1" | grep -q pending || fail "$2: out/$1 should be pending: $(state "$1")"; }

mkdir src
printf 'a\n' > src/a
conf_watch
start

# the next pass's commit carries the settle of the one before
until_ '[ "$(cat out/b 2>/dev/null)" = b ]' 'printf "b\n" > src/b' "create b"
until_ '[ "$(cat out/c 2>/dev/null)" = c ]' 'printf "c\n" > src/c' "create c"
crash
run ls; expect_rc 0 "ls of the killed agent's store"
settled a "the catch-up (settled by the ready check's status)"
settled b "a pass followed by another"
pending c "the last pass, killed before its settle"
# a crash between a sink and its settle: the next pass converges
run sync; expect_rc 0 "sync after the kill"
run ls; expect_not_in "$OUT" "pending" "nothing pending after the sync"
run check; expect_rc 0 "no drift after the kill"
expect_file out/c c
run sync; expect_rc 0 "a second sync"; expect_in "$OUT" "0 created, 0 updated, 0 deleted" "a second sync applies nothing"

# `tend ls` beside a running agent asks it to commit first
start
until_ '[ "$(cat out/d 2>/dev/null)" = d ]' 'printf "d\n" > src/d' "create d"
run ls; settled d "ls beside the agent"
crash
run ls; settled d "ls asked the agent to commit"

# a `tend sync` handed to the agent returns with its pass committed: the
# signature rows it settles last too (the agent is paused so that the
# sync's pass is the one that reads e; an old mtime makes its signature
# trusted)
start
$CTL send pause >/dev/null || fail "pause"
printf 'e\n' > src/e; old src/e
run sync; expect_rc 0 "sync through the agent"; expect_in "$OUT" "running agent" "hand-off"
crash
run ls; settled e "a sync through the agent"
run sync; expect_in "$OUT" "(0 read)" "the signatures of a sync through the agent"

# SIGTERM commits the settle before the agent exits
start
until_ '[ "$(cat out/f 2>/dev/null)" = f ]' 'printf "f\n" > src/f' "create f"
kill -TERM $AGENT; wait $AGENT; rc=$?; AGENT=
[ $rc = 0 ] || fail "SIGTERM exit $rc"
run ls; settled f "SIGTERM"

# a pass due soon carries the open settle, and the agent sleeps until it
# (it spun in epoll_wait before: a second's worth of CPU ticks here)
sed -i 's/debounce = 0/debounce = 2s/' tend.conf
TEND_SETTLE_MS=300 "$TEND" watch 2>>"$WS/agent.err" &
AGENT=$!
$CTL ready || fail "agent ready (2 s debounce)"
until_ '[ -f out/h1 ]' 'printf "h\n" > src/h1' "create h1"
# within h1's settle wait (no command since: a command would commit it),
# an event whose pass is due in 2 s; a second of the wait, measured
printf 'h\n' > src/h2
t0=$(awk '{print $14 + $15}' /proc/$AGENT/stat)
sleep 1
t1=$(awk '{print $14 + $15}' /proc/$AGENT/stat)
[ $((t1 - t0)) -lt 30 ] || fail "the agent used $((t1 - t0)) ticks of CPU in 1 s waiting for a pass"
until_ '[ -f out/h2 ]' 'true' "create h2"
kill -TERM $AGENT; wait $AGENT; AGENT=
sed -i 's/debounce = 2s/debounce = 0/' tend.conf

# the default wait commits on its own when no pass follows
"$TEND" watch 2>>"$WS/agent.err" &
AGENT=$!
$CTL ready || fail "agent ready (default settle)"
until_ '[ "$(cat out/g 2>/dev/null)" = g ]' 'printf "g\n" > src/g' "create g"
sleep 0.5
crash
run ls; settled g "the default settle wait"

# tend ls beside an agent stuck in a pass reads the store as it is, after
# half a second, instead of waiting for the agent's answer
TEND_FAILPOINTS='write~stuck@1=stop' "$TEND" watch 2>>"$WS/agent.err" &
AGENT=$!
$CTL ready || fail "agent ready (failpoint)"
printf 'x\n' > src/stuck
stopped $AGENT || fail "the agent stopped at the failpoint"
timeout 20 "$TEND" ls >/dev/null 2>&1; rc=$?
[ $rc = 0 ] || fail "tend ls beside a stopped agent: exit $rc (124: it waited)"
crash
finish
