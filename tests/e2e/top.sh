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
# wait until the screen shows the pattern (a grep -E regex); that screen
# is left in $SCREEN, for what must show at the same time
wait_screen() {
	i=0
	while [ $i -lt 100 ]; do
		SCREEN=$(screen)
		if printf '%s\n' "$SCREEN" | grep -Eq -- "$1"; then return 0; fi
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
# $SCREEN shows the pattern too
on_screen() { printf '%s\n' "$SCREEN" | grep -Eq -- "$1" || { fail "$2: '$1' not shown with the rest; the screen was:"; printf '%s\n' "$SCREEN" >&2; }; }
# the first row of the apps panel in $SCREEN
first_app() { printf '%s\n' "$SCREEN" | grep -A1 '^Apps (' | sed -n 2p | cut -d' ' -f1; }
# the CPU ticks (user + system) of a process so far
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null; }
# wait until a process is gone; if it is not, say how busy it is and end it
gone_or_kill() {
	i=0
	while [ $i -lt 50 ] && [ -e "/proc/$1" ]; do sleep 0.1; i=$((i + 1)); done
	[ -e "/proc/$1" ] || return 0
	t0=$(ticks "$1"); sleep 1; t1=$(ticks "$1")
	fail "$2: still running 5 s after its terminal went away, $((t1 - t0)) CPU ticks in the last second"
	kill -KILL "$1" 2>/dev/null
}
capture() { [ -n "${TEND_CAPTURE_DIR:-}" ] && screen > "$TEND_CAPTURE_DIR/$1.txt"; :; }
start_agent() {
	"$TEND" watch 2>>"$WS/agent.err" &
	AGENT=$!
	$CTL ready || fail "agent ready"
}

mkdir -p src/d kept notes pages
printf 'alpha\n' > src/alpha; printf 'beta\n' > src/d/beta
printf 'x\n' > kept/x; printf 'y\n' > kept/y
printf 'n\n' > notes/n; printf 'p\n' > pages/p
# five apps, the one that will fail last: a panel of four rows hid it
cat > tend.conf <<'CONF'
[tend]
	debounce = 0
[app "site"]
	source = src
	target = dir:out
[app "keep"]
	source = kept
	target = dir:kept-out
	declare = "exec mkdir \"$TEND_OUT\" && tee \"$TEND_OUT/$TEND_PATH\" > \"$TEND_OUT/$TEND_PATH.bak\""
	max-delete = 0
[app "notes"]
	source = notes
	target = dir:notes-out
[app "pages"]
	source = pages
	target = dir:pages-out
[app "shout"]
	source = src
	target = dir:shout
	declare = "exec if grep -q fail \"$TEND_SOURCE\"; then echo \"bad input $TEND_PATH: it says fail\" >&2; exit 3; fi; tr a-z A-Z"
CONF

# an interactive shell in the pane: q must give it back intact
$TM new-session -d -s top -x 120 -y 40 "env -u NO_COLOR TERM=xterm-256color PS1='prompt$ ' sh"
keys "cd '$WS'" Enter

# no agent: say so, tell how to start one
keys "clear; '$TEND' top; echo \"rc1=\$?\"" Enter
wait_screen "^rc1=1$" "top without an agent"
on_screen "no agent runs" "top without an agent"
on_screen "tend watch --tui" "top without an agent"

start_agent
WATCHES=$($CTL send status | python3 -c 'import json,sys; print(json.load(sys.stdin)["watches"])')

# without a terminal: a usage error at once (with an agent to talk to,
# `tend top </dev/null >file` ran at 96% CPU until killed)
OUT=$(timeout 5 "$TEND" top </dev/null 2>"$WS/.err"); RC=$?; ERR=$(cat "$WS/.err")
expect_rc 2 "top without a terminal"
expect_in "$ERR" "tend top: standard input and output are not a terminal" "top without a terminal"
[ -z "$OUT" ] || fail "top without a terminal wrote to stdout: $OUT"
OUT=$(timeout 5 "$TEND" watch --tui </dev/null 2>"$WS/.err"); RC=$?; ERR=$(cat "$WS/.err")
expect_rc 2 "watch --tui without a terminal"
expect_in "$ERR" "tend watch --tui: standard input and output are not a terminal" "watch --tui without a terminal"
# a terminal on one side only is not enough either
keys "clear; '$TEND' top </dev/null; echo \"rc2=\$?\"" Enter
wait_screen "^rc2=[0-9]+$" "top with stdin not a terminal"
on_screen "^rc2=2$" "top with stdin not a terminal"
on_screen "tend top: standard input is not a terminal" "top with stdin not a terminal"
keys "clear; '$TEND' top >top.out; echo \"rc3=\$?\"" Enter
wait_screen "^rc3=[0-9]+$" "top with stdout not a terminal"
on_screen "^rc3=2$" "top with stdout not a terminal"
on_screen "tend top: standard output is not a terminal" "top with stdout not a terminal"
[ -s top.out ] && fail "top with stdout not a terminal wrote to it: $(cat top.out)"
keys clear Enter

keys "'$TEND' top" Enter
wait_screen "agent $AGENT watching" "header"
wait_screen "watches $WATCHES " "header watches"
# the states status counts (the root's container too: top said one
# fewer than status and ls, a new user's trial)
nst=$("$TEND" status | sed -n 's/^site: \([0-9]*\) target states.*/\1/p')
[ "$nst" = 3 ] || fail "status counts $nst states of site"
wait_screen "site +components 3 +states $nst " "apps panel counts"
wait_screen "nothing pending" "pending empty"
# every app has its row
wait_screen "^Apps \(5\)" "apps title"
for app in site keep notes pages shout; do
	on_screen "^$app +components" "apps panel: a row for $app"
done
capture overview

# paused: a change shows up as pending, with its source file as the why
keys p
wait_screen "agent $AGENT PAUSED" "paused"
# nothing pending yet: no hint that s or p applies it
wait_screen "^Pending \(0\) +\|" "paused, nothing pending: a bare title"
printf 'alpha two\n' > src/alpha
wait_screen "~ site +out/alpha +source alpha changed [0-9a-f]+ ->" "pending update"
wait_screen "~ shout +shout/alpha" "pending update of the exec app"
wait_screen "Pending \(2\) - paused: s or p applies them" "pending title"
# the header's queue is the agent's now, not as of its last status
on_screen "PAUSED  .*  queue 2(  |$)" "the queue with the pending actions"
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
wait_screen "^Pending \(0\) +\|" "pending emptied, no hint left"
wait_screen "PAUSED  .*  queue 0(  |$)" "the queue emptied by the sync"
expect_file out/alpha "alpha two"
keys p
wait_screen "agent $AGENT watching" "resumed"

# a failing exec: its stderr in the detail
printf 'this will fail\n' > src/boom
wait_screen "E shout +/shout/@files/boom +exec" "failed exec in activity"
# the app with errors comes first in the apps panel
wait_screen "^shout +components [0-9]+ +states [0-9]+ +pending [0-9]+ +errors 1 " "apps: shout's error"
[ "$(first_app)" = shout ] || fail "apps: the app with errors is not first"
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

# the delete brake holds deletes back: shown as HELD, a approves. Two
# sources with two entries each: 4 deletes (the agent counts 2 items)
rm kept/x kept/y
wait_screen "^- HELD keep +kept-out/x +source x deleted" "held delete shown"
wait_screen "4 deletes HELD by the delete brake" "held title"
[ -f kept-out/x ] || fail "a held delete was applied"
capture held
keys a
wait_screen "approved 4 held deletes: the next pass applies them" "approval says what was held"
capture approved
wait_screen "[0-9:]{8} - keep +kept-out/x +source x deleted" "approved delete applied"
wait_screen "Pending \(0\)" "nothing held after approval"
expect_gone kept-out/x
expect_gone kept-out/x.bak
expect_gone kept-out/y
expect_gone kept-out/y.bak

# help overlay
keys ?
wait_screen "approve the deletes the delete brake holds" "help"
keys ?
no_screen "approve the deletes the delete brake holds" "help closed"

# 80x24 still shows the header, the panels and the keys
$TM resize-window -t top -x 80 -y 24
wait_screen "^Tracked states" "80x24: tree panel"
wait_screen "^q quit \? help .* a approve" "80x24: status line, whole (it was cut at 'a a')"
wait_screen "agent $AGENT watching" "80x24: header"
[ "$(screen | wc -l)" -le 24 ] || fail "80x24: more than 24 lines"
# every field of the header whole (queue and passes were cut), each
# line wrapped between fields
for field in "tend top" "agent $AGENT watching" "up [0-9a-z]+" "queue 0" \
    "passes [0-9]+" "watches $WATCHES" "overflows 0"; do
	on_screen "(^|  )$field(  |$)" "80x24: header field '$field'"
done
on_screen "^last pass  keep: \+0 ~0 -4, 0 failed, 0 held, 0 files \(0 read\) in [0-9]+ ms$" "80x24: the last pass"
# and every app, the one with errors first
on_screen "^Apps \(5\)" "80x24: apps title"
for app in site keep notes pages shout; do
	on_screen "^$app +components" "80x24: a row for $app"
done
[ "$(first_app)" = shout ] || fail "80x24: the app with errors is not first"
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
wait_screen '^prompt\$ *$' "a clear screen before watch --tui"
keys "'$TEND' watch --tui" Enter
wait_screen "agent [0-9]+ watching" "watch --tui"
TUI=$(pgrep -P "$($TM display -p -t top '#{pane_pid}')")
wait_screen "agent $TUI watching" "watch --tui: the agent is this process"
printf 'alpha three\n' > src/alpha
wait_screen "~ site +out/alpha +source alpha changed" "watch --tui applies changes"
keys q
wait_screen '^prompt\$ *$' "shell prompt after watch --tui"
# (the prompt is the shell's once the process has joined its agent; a
# screen restored by the terminal is allowed a moment: a loaded ASan run
# once saw the socket here)
i=0; while [ -e .tend/agent.sock ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
[ ! -e .tend/agent.sock ] || fail "watch --tui: the agent still runs after q"
pgrep -f "$TEND watch --tui" >/dev/null 2>&1 && fail "watch --tui: the process still runs after q"
# (the shell may show its prompt a moment before the pid is gone)
i=0; while kill -0 "$TUI" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
kill -0 "$TUI" 2>/dev/null && fail "watch --tui: the process is still there"
[ -s .tend/agent.log ] || fail "watch --tui: nothing in agent.log"
expect_file out/alpha "alpha three"

# The terminal hangs up. No key will come again and polling it returns
# at once: the dashboard must end, not spin (it used all of a core).
# watch --tui takes SIGHUP as the agent's "reload the config", so only
# the hangup itself can end it.
$TM new-session -d -s hup -x 80 -y 24 "cd '$WS' && exec env TERM=xterm-256color '$TEND' watch --tui"
TUI=$($TM display -p -t hup '#{pane_pid}')
i=0; until $TM capture-pane -p -t hup | grep -q "agent $TUI watching" || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
[ $i -lt 100 ] || fail "watch --tui for the hangup: not started"
$TM kill-session -t hup
gone_or_kill "$TUI" "watch --tui after a hangup"
[ ! -e .tend/agent.sock ] || fail "watch --tui after a hangup: the agent still runs"

# tend top in a session of its own (as under setsid or nohup) gets no
# SIGHUP either; its CPU time, measured by the shell, stays low
if command -v setsid >/dev/null; then
	start_agent
	cat > hup.sh <<EOF
echo \$\$ > '$WS/hup.pid'
env TERM=xterm-256color '$TEND' top 2>'$WS/hup.err'
rc=\$?
{ echo "rc=\$rc"; times; } > '$WS/hup.tmp'
mv '$WS/hup.tmp' '$WS/hup.out'
EOF
	$TM new-session -d -s hup -x 80 -y 24 "setsid -w sh '$WS/hup.sh'"
	i=0; until $TM capture-pane -p -t hup | grep -q "agent $AGENT watching" || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
	[ $i -lt 100 ] || fail "top for the hangup: not started"
	$TM kill-session -t hup
	i=0; while [ ! -e hup.out ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	if [ -e hup.out ]; then
		expect_in "$(cat hup.out)" "rc=1" "top after a hangup: exit status"
		expect_in "$(cat hup.err)" "the terminal is gone" "top after a hangup"
		# the second line of `times`: the children's user and system time
		CPU=$(sed -n 3p hup.out | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); t += a[1] * 60 + a[2] } print t }')
		awk "BEGIN { exit !($CPU < 0.5) }" || fail "top after a hangup: ${CPU}s of CPU"
	else
		gone_or_kill "$(pgrep -P "$(cat hup.pid)")" "top after a hangup"
	fi
	stop_agent
else
	echo "setsid is not installed: the hangup of tend top in a session of its own is not tested"
fi
finish
