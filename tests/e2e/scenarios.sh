#!/bin/sh
# Scenarios of the engine's black-box list (docs/scenarios.md) that only
# the program can show: catch-up without a watcher (58), a touch without
# a change (64, 51), a second agent (56), an entry added live and removed
# while no agent ran (57), and a deleted file brought back within one
# debounce (68).
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
CTL="python3 $HERE/agentctl.py $WS/.tend/agent.sock"
AGENT=
trap '[ -n "$AGENT" ] && kill -TERM $AGENT 2>/dev/null; wait 2>/dev/null; chmod -R u+rwx "$WS" 2>/dev/null; rm -rf "$WS"' EXIT
applied() { $CTL send status | python3 -c 'import json,sys; print(json.load(sys.stdin)["applied"])'; }

mkdir -p src
printf 'one\n' > src/f1; printf 'two\n' > src/f2
old src/f1 src/f2
cat > tend.conf <<'CONF'
[tend]
	debounce = 200
[app "w"]
	source = src
	target = dir:out
CONF

# 58: a one-shot sync scans, applies and exits: no agent, no socket
run sync; expect_rc 0 "58: catch-up"
expect_file out/f1 one; expect_file out/f2 two
[ ! -e .tend/agent.sock ] || fail "58: a socket is left after a one-shot sync"
run status; expect_in "$OUT" "agent: not running" "58: no agent after the sync"

# 64: a touch without a change reads the file once, applies nothing, and
# the next pass compares the stat signature only
touch src/f1; sleep 0.06
run sync; expect_in "$OUT" "0 created, 0 updated, 0 deleted; 2 files (1 read)" "64: touched"
run sync; expect_in "$OUT" "(0 read)" "64: the signature was updated"

# 51 (touch), 68: under the agent
"$TEND" watch 2>"$WS/agent.err" &
AGENT=$!
$CTL ready || fail "agent ready"
# 56: a second agent for the same workspace is refused, naming the first
run watch; [ "$RC" != 0 ] || fail "56: a second agent started"
expect_in "$ERR" "another agent (pid $AGENT) runs for this workspace" "56: the refusal"
# ... also --daemon, whose parent said only "see agent.log"
run watch --daemon; [ "$RC" != 0 ] || fail "56: a second daemon started"
expect_in "$ERR" "the agent did not start: another agent (pid $AGENT) runs for this workspace" "56: --daemon says why"
base=$(applied)
$CTL until 'true' -- 'touch src/f2' >/dev/null || fail "51: touch under the agent"
sleep 0.4
[ "$(applied)" = "$base" ] || fail "51: a touch without a change applied something"
# 68: deleted and brought back (same bytes) within one debounce: the
# pass sees the file, nothing is deleted or written
cp src/f2 f2.saved
rm src/f2; cp f2.saved src/f2
sleep 0.6
expect_file out/f2 two
[ "$(applied)" = "$base" ] || fail "68: a file deleted and restored at once was re-applied"
# 57: an entry added live, then removed while no agent runs: the next
# catch-up deletes it and leaves nothing unsettled
$CTL until '[ -f out/live ]' -- 'printf "live\n" > src/live' >/dev/null || fail "57: live add"
kill -TERM $AGENT; wait $AGENT; AGENT=
rm src/live
run sync; expect_rc 0 "57: catch-up after the agent"
expect_in "$OUT" "1 deleted" "57: the live entry deleted"
expect_gone out/live
run status; expect_in "$OUT" "0 unsettled" "57: nothing unsettled"
run check -q; expect_rc 0 "57: check"
finish
