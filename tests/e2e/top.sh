#!/bin/sh
# tend top in a real terminal: an agent on a temp workspace, the
# dashboard inside tmux (120x40, then 80x24), driven with send-keys and
# read with capture-pane, asserting what a person would see.
# TEND_CAPTURE_DIR=DIR also saves each screen there (docs/dashboard.md).
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
command -v tmux >/dev/null || { echo "tmux is not installed: skipped"; exit 77; }
CTL="python3 $HERE/agentctl.py $WS/.tend/agent.sock"
TM="tmux -L tend-e2e-$$ -f /dev/null"
AGENT=
stop_agent() { [ -n "$AGENT" ] && kill -TERM "$AGENT" 2>/dev/null && wait "$AGENT" 2>/dev/null; AGENT=; }
trap '$TM kill-server 2>/dev/null; stop_agent; chmod -R u+rwx "$WS" 2>/dev/null; rm -rf "$WS"' EXIT

screen() { $TM capture-pane -p -t top; }
# wait until the screen shows the pattern (a grep -E regex)
wait_screen() {
	i=0
	while [ $i -lt 100 ]; do
		if screen | grep -Eq -- "$1"; then return 0; fi
		sleep 0.1; i=$((i + 1))
	done
	fail "$2: '$1' never appeared; the screen was:"
	screen >&2
	return 1
}
# wait until the screen no longer shows it
no_screen() {
	i=0
	while [ $i -lt 100 ]; do
		if ! screen | grep -Eq -- "$1"; then return 0; fi
		sleep 0.1; i=$((i + 1))
	done
	fail "$2: '$1' is still shown"
}
keys() { $TM send-keys -t top "$@"; }
capture() { [ -n "${TEND_CAPTURE_DIR:-}" ] && screen > "$TEND_CAPTURE_DIR/$1.txt"; :; }
start_agent() {
	"$TEND" watch 2>>"$WS/agent.err" &
	AGENT=$!
	$CTL ready || fail "agent ready"
}

mkdir -p src/d kept
printf 'alpha\n' > src/alpha; printf 'beta\n' > src/d/beta
printf 'x\n' > kept/x; printf 'y\n' > kept/y
cat > tend.conf <<'CONF'
[tend]
	debounce = 0
[app "site"]
	source = src
	target = dir:out
[app "shout"]
	source = src
	target = dir:shout
	declare = "exec if grep -q fail \"$TEND_SOURCE\"; then echo \"bad input $TEND_PATH: it says fail\" >&2; exit 3; fi; tr a-z A-Z"
[app "keep"]
	source = kept
	target = dir:kept-out
	max-delete = 0
CONF

# no agent: say so, tell how to start one
run top
expect_rc 1 "top without an agent"
expect_in "$ERR" "no agent runs" "top without an agent"
expect_in "$ERR" "tend watch --tui" "top without an agent"

start_agent
WATCHES=$($CTL send status | python3 -c 'import json,sys; print(json.load(sys.stdin)["watches"])')

# an interactive shell in the pane: q must give it back intact
$TM new-session -d -s top -x 120 -y 40 "env -u NO_COLOR TERM=xterm-256color PS1='prompt$ ' sh"
keys "cd '$WS' && '$TEND' top" Enter
wait_screen "agent $AGENT watching" "header"
wait_screen "watches $WATCHES " "header watches"
wait_screen "site +components 3 +states 2 " "apps panel counts"
wait_screen "nothing pending" "pending empty"
capture overview

# paused: a change shows up as pending, with its source file as the why
keys p
wait_screen "agent $AGENT PAUSED" "paused"
printf 'alpha two\n' > src/alpha
wait_screen "~ site +out/alpha +source alpha changed [0-9a-f]+ ->" "pending update"
wait_screen "~ shout +shout/alpha" "pending update of the exec app"
wait_screen "Pending \(2\) - paused" "pending title"
capture pending
keys Enter
wait_screen "why: +source alpha changed" "detail: why"
wait_screen "declared by: +/site/@files/alpha" "detail: component"
wait_screen "reconcile: +1 previous record, may be missing: no" "detail: reconcile inputs"
capture detail
keys Escape
no_screen "declared by:" "detail closed"

# s: applied while paused; the actions move to the activity panel
keys s
wait_screen "[0-9:]{8} ~ site +out/alpha +source alpha changed" "activity after sync"
wait_screen "Pending \(0\)" "pending emptied"
expect_file out/alpha "alpha two"
keys p
wait_screen "agent $AGENT watching" "resumed"

# a failing exec: its stderr in the detail
printf 'this will fail\n' > src/boom
wait_screen "E shout +/shout/@files/boom +exec" "failed exec in activity"
keys Tab
wait_screen "^Activity.*" "activity focused"
keys Home Enter
wait_screen "bad input boom: it says fail" "failed exec stderr in detail"
capture error
keys Escape

# the tracking tree: expand with Enter, narrow with /
keys Tab
keys Enter
wait_screen "\[-\] app site" "tree: app expanded"
wait_screen "\[\+\] out/ +\(3\)" "tree: container listed"
keys j Enter
wait_screen "alpha +/site/@files/alpha +01[0-9a-f]{10}" "tree: entries listed"
wait_screen "\[\+\] d/ +\(1\)" "tree: subdirectory folded"
keys j j j Enter
wait_screen "beta +/site/@files/d/beta" "tree: subdirectory expanded"
capture tree
keys / b e t a Enter
wait_screen "filter: beta, 1 shown" "filter narrows"
no_screen "alpha +/site/@files/alpha" "filtered out"
keys Escape
wait_screen "alpha +/site/@files/alpha" "filter cleared"

# the delete brake holds deletes back: shown as HELD, a approves
rm kept/x kept/y
wait_screen "^- HELD keep +kept-out/x +source x deleted" "held delete shown"
wait_screen "2 deletes HELD by the delete brake" "held title"
[ -f kept-out/x ] || fail "a held delete was applied"
capture held
keys a
wait_screen "[0-9:]{8} - keep +kept-out/x +source x deleted" "approved delete applied"
wait_screen "Pending \(0\)" "nothing held after approval"
expect_gone kept-out/x
expect_gone kept-out/y

# help overlay
keys ?
wait_screen "approve the deletes the delete brake holds" "help"
keys ?
no_screen "approve the deletes the delete brake holds" "help closed"

# 80x24 still shows the header, the panels and the keys
$TM resize-window -t top -x 80 -y 24
wait_screen "^Tracked states" "80x24: tree panel"
wait_screen "^q quit  \? help" "80x24: status line"
wait_screen "agent $AGENT watching" "80x24: header"
[ "$(screen | wc -l)" -le 24 ] || fail "80x24: more than 24 lines"
capture small

# the agent goes away, then comes back
OLD=$AGENT
stop_agent
wait_screen "DISCONNECTED" "agent killed"
capture disconnected
start_agent
wait_screen "agent $AGENT watching" "reconnected to the new agent"
[ "$OLD" != "$AGENT" ] || fail "a new agent has a new pid"

# q: the shell is back, the dashboard gone
keys q
wait_screen '^prompt\$ *$' "shell prompt after q"
keys "echo still-here-\$((40+2))" Enter
wait_screen "still-here-42" "the shell works after q"
no_screen "Tracked states" "the dashboard is gone"

# a crash signal still restores the terminal (echo back on)
keys clear Enter
keys "'$TEND' top" Enter
wait_screen "agent $AGENT watching" "top again"
TOP=$(pgrep -P "$($TM display -p -t top '#{pane_pid}')")
kill -SEGV "$TOP"
wait_screen '^prompt\$ *$' "shell prompt after a crash"
keys "stty -a | tr ' ' '\\n' | grep -x -- -*echo" Enter
wait_screen "^echo$" "terminal echo restored after a crash"
stop_agent

# tend watch --tui: agent and dashboard in one process; q stops both
keys clear Enter
keys "'$TEND' watch --tui" Enter
wait_screen "agent [0-9]+ watching" "watch --tui"
TUI=$(pgrep -P "$($TM display -p -t top '#{pane_pid}')")
wait_screen "agent $TUI watching" "watch --tui: the agent is this process"
printf 'alpha three\n' > src/alpha
wait_screen "~ site +out/alpha +source alpha changed" "watch --tui applies changes"
keys q
wait_screen '^prompt\$ *$' "shell prompt after watch --tui"
[ ! -e .tend/agent.sock ] || fail "watch --tui: the agent still runs after q"
# (the shell may show its prompt a moment before the pid is gone)
i=0; while kill -0 "$TUI" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
kill -0 "$TUI" 2>/dev/null && fail "watch --tui: the process is still there"
[ -s .tend/agent.log ] || fail "watch --tui: nothing in agent.log"
expect_file out/alpha "alpha three"
finish
