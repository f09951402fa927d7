#!/bin/sh
# The agent's control socket under misbehaving clients: garbage, a 1 MiB
# line, 40 silent connections, a subscriber that never reads while the
# agent syncs 3,000 files, and (as root) another uid. The agent must keep
# working through all of it and answer status at the end.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
SOCK=$WS/.tend/agent.sock
CTL="python3 $HERE/agentctl.py $SOCK"
HOST="python3 $HERE/hostile_client.py $SOCK"
STALL=
trap 'kill $STALL 2>/dev/null; kill -TERM $AGENT 2>/dev/null; wait $AGENT 2>/dev/null; chmod -R u+rwx "$WS" 2>/dev/null; rm -rf "$WS"' EXIT

mkdir -p src
printf 'a\n' > src/a
conf_watch
"$TEND" watch -v 2>"$WS/agent.err" &
AGENT=$!
$CTL ready || fail "agent ready"

$HOST garbage || fail "garbage"
$HOST oversized || fail "oversized line"
$HOST flood || fail "connection flood"

# a subscriber that never reads, while 3,000 files are synced: the agent
# must not stall (another client sees the pass finish) and must drop it
$HOST stalled > "$WS/stall.out" &
STALL=$!
i=0; while [ $i -lt 100 ] && ! grep -q ready "$WS/stall.out"; do sleep 0.05; i=$((i+1)); done
$CTL until '[ "$(ls out/many 2>/dev/null | wc -l)" -ge 3000 ]' -- \
	'mkdir -p src/many && cd src/many && seq 1 3000 | xargs touch' ||
	fail "the agent stalled behind a client that does not read"
kill -USR1 $STALL
wait $STALL || fail "stalled client: $(cat "$WS/stall.out")"
STALL=
grep -q "dropped after" "$WS/stall.out" || fail "stalled client: $(cat "$WS/stall.out")"

# another user: the socket is 0600, so open it up to let a connection
# reach the peer-credential check
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && [ -x /usr/bin/python3 ]; then
	chmod 755 "$WS" "$WS/.tend"; chmod 666 "$SOCK"
	setpriv --reuid=65534 --regid=65534 --clear-groups \
		/usr/bin/python3 "$HERE/hostile_client.py" "$SOCK" refused ||
		fail "another uid was served"
	chmod 700 "$WS" "$WS/.tend"; chmod 600 "$SOCK"
	grep -q "refusing a client of uid 65534" "$WS/agent.err" ||
		fail "the refusal is logged: $(tail -3 "$WS/agent.err")"
else
	echo "SKIP: not root; the other-uid case did not run"
fi

# still alive and answering, and it stops cleanly
run status --json; expect_rc 0 "status after all that"
expect_in "$OUT" '"state": "watching"' "the agent still runs"
kill -TERM $AGENT; wait $AGENT; rc=$?
[ $rc = 0 ] || fail "agent exit $rc: $(tail -5 "$WS/agent.err")"
AGENT=
finish
