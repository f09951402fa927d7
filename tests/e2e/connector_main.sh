#!/bin/sh
# A program linked against libtend with a connector of its own,
# registered in tend_main_opts.init, and an app in code declaring into
# it (tests/connector_main.c): init runs once for every engine a command
# opens, before any pass, so every command finds the connector.
PROG=${CONNECTOR_MAIN:?}
TEND=$PROG
. "$(dirname "$0")/lib.sh"
CTL="python3 $(cd "$(dirname "$0")" && pwd)/agentctl.py"
AGENT=
trap '[ -n "$AGENT" ] && kill -TERM $AGENT 2>/dev/null; wait 2>/dev/null; rm -rf "$WS"' EXIT

mkdir -p src/d
printf 'one\n' > src/a.txt
printf 'two\n' > src/d/b.txt
printf '# no app here: it marks the workspace\n' > tend.conf

run plan; expect_rc 3 "plan: the notes are pending"
expect_not_in "$ERR" "call notes_init first" "plan finds the connector"
expect_gone notes
run sync; expect_rc 0 "sync through the program's connector"
expect_file notes/a.txt one
expect_file notes/d_b.txt two
run plan; expect_rc 0 "plan after sync: nothing pending"
run check; expect_rc 0 "check: the notes match their records"
run ls; expect_rc 0 "ls"; expect_in "$OUT" "test/notes" "ls lists the notes"
run status; expect_rc 0 "status"
# check asks the connector itself
printf 'edited\n' > notes/a.txt
run check; expect_rc 1 "check: drift"
expect_in "$OUT$ERR" "note a.txt was edited" "the connector's reason"
run sync --full; expect_rc 0 "sync --full repairs"
expect_file notes/a.txt one

# the agent: its engine gets the connector too
printf '[tend]\n\tdebounce = 0\n' > tend.conf
"$PROG" watch 2>"$WS/agent.err" &
AGENT=$!
$CTL "$WS/.tend/agent.sock" ready || fail "agent: $(cat "$WS/agent.err")"
$CTL "$WS/.tend/agent.sock" until '[ "$(cat notes/c.txt 2>/dev/null)" = three ]' -- "printf 'three\n' > src/c.txt" || fail "the agent declares into the connector: $(cat "$WS/agent.err")"
kill -TERM $AGENT; wait $AGENT; AGENT=
expect_not_in "$(cat "$WS/agent.err")" "call notes_init first" "agent"

# a failing init fails the command, with its message
export NOTES_INIT_FAILS=1
run sync; expect_rc 1 "a failing init"
expect_in "$ERR" "tend_main init: notes: init refused" "init's message"
unset NOTES_INIT_FAILS
run drop notes; expect_rc 0 "drop reverts through the connector"
expect_gone notes/a.txt; expect_gone notes/d_b.txt; expect_gone notes/c.txt
finish
