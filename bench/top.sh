#!/bin/sh
# bench/top.sh [SECONDS] - the dashboard's cost: `tend top` in a tmux
# pane (120x40) follows an agent while a writer rewrites 1000 source
# files a second (10 every 10 ms, round robin over 2000 files), so the
# agent applies about 1000 actions a second, each one an action_pending
# and an action_applied event for the dashboard. Reports the CPU of the
# dashboard and of the agent as a share of one core (from
# /proc/PID/stat), and the actions the agent applied. Target: the
# dashboard <= 5% of one core. Not a test.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
TEND=${TEND:-$here/../build/agent/tend}
SECS=${1:-30}
W=$(mktemp -d)
TM="tmux -L tend-bench-$$ -f /dev/null"
trap '$TM kill-server 2>/dev/null; kill -TERM $(cat "$W/.tend/agent.pid" 2>/dev/null) 2>/dev/null; rm -rf "$W"' EXIT
cd "$W"
mkdir src
i=0; while [ $i -lt 2000 ]; do echo "first $i" > src/f$i; i=$((i + 1)); done
printf '[tend]\n\tdebounce = 0\n[app "b"]\n\tsource = src\n\ttarget = dir:out\n' > tend.conf
"$TEND" watch --daemon >/dev/null
agent=$(cat .tend/agent.pid)
$TM new-session -d -s top -x 120 -y 40 "TERM=xterm-256color '$TEND' top"
sleep 1
top=$(pgrep -P "$($TM display -p -t top '#{pane_pid}')" || $TM display -p -t top '#{pane_pid}')
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
a0=$(ticks "$agent"); t0=$(ticks "$top")
n0=$("$TEND" status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["agent"]["applied"])')
start=$(date +%s.%N)
python3 - "$SECS" <<'PY'
import sys, time
secs = float(sys.argv[1]); n = 0; t = time.monotonic(); end = t + secs
while time.monotonic() < end:
    for _ in range(10):
        with open(f"src/f{n % 2000}", "w") as f:
            f.write(f"{n}\n")
        n += 1
    t += 0.01
    d = t - time.monotonic()
    if d > 0:
        time.sleep(d)
print(f"writer: {n} writes in {secs:.0f} s ({n / secs:.0f}/s)")
PY
end=$(date +%s.%N)
a1=$(ticks "$agent"); t1=$(ticks "$top")
n1=$("$TEND" status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["agent"]["applied"])')
$TM capture-pane -p -t top | head -12
python3 - "$start" "$end" "$a0" "$a1" "$t0" "$t1" "$hz" "$n0" "$n1" <<'PY'
import sys
s, e, a0, a1, t0, t1, hz, n0, n1 = map(float, sys.argv[1:])
el = e - s
print(f"elapsed {el:.1f} s: the agent applied {n1 - n0:.0f} actions ({(n1 - n0) / el:.0f}/s)")
print(f"dashboard CPU: {100 * (t1 - t0) / hz / el:.1f}% of one core (target <= 5%)")
print(f"agent CPU:     {100 * (a1 - a0) / hz / el:.1f}% of one core")
PY
