#!/bin/sh
# bench/watch.sh [TREE] - the agent: write-to-visible latency (1000
# samples, debounce 0 and the default 20 ms), idle CPU over 60 s, and, on
# a generated 100k-file tree (TREE, default: generate one), watches, RSS
# and the catch-up after a restart with 10 changed files beside an rsync
# -a --delete no-op. Not a test.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
TEND=${TEND:-$here/../build/agent/tend}
LAT=${LAT:-$here/../build/bench/bench-latency}
W=$(mktemp -d)
trap 'kill -TERM $(cat "$W"/*/.tend/agent.pid 2>/dev/null) 2>/dev/null; rm -rf "$W"' EXIT
for deb in 0 20ms; do
	mkdir -p "$W/lat$deb/src"; cd "$W/lat$deb"
	printf '[tend]\n\tdebounce = %s\n[app "l"]\n\tsource = src\n\ttarget = dir:out\n' "$deb" > tend.conf
	i=0; while [ $i -lt 10 ]; do echo $i > src/f$i; i=$((i+1)); done
	"$TEND" watch --daemon >/dev/null
	printf 'debounce %s: ' "$deb"; "$LAT" src out 1000
	if [ "$deb" = 0 ]; then
		pid=$(cat .tend/agent.pid)
		t0=$(awk '{print $14 + $15}' /proc/$pid/stat)
		sleep 60
		t1=$(awk '{print $14 + $15}' /proc/$pid/stat)
		echo "idle CPU over 60 s: $((t1 - t0)) ticks ($(getconf CLK_TCK)/s)"
	fi
	kill -TERM $(cat .tend/agent.pid); sleep 0.2
done
TREE=${1:-}
if [ -z "$TREE" ]; then
	TREE="$W/big"; python3 "$here/gentree.py" gen "$TREE/src" -n 100000
fi
cd "$TREE"
printf '[app "mirror"]\n\tsource = src\n\ttarget = dir:out\n' > tend.conf
"$TEND" sync -q
"$TEND" watch --daemon >/dev/null
pid=$(cat .tend/agent.pid)
echo "100k files: $("$TEND" status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["agent"]["watches"])') watches, RSS $(awk '/VmRSS/ {print $2/1024 " MiB"}' /proc/$pid/status)"
kill -TERM $pid; sleep 0.5
python3 "$here/gentree.py" mutate src --round 999 --modify 10
rsync -a --delete src/ "$W/rdst/" 2>/dev/null || true
hyperfine -N --style basic --runs 5 --export-json "$W/catchup.json" \
	--prepare "sh -c 'kill -TERM \$(cat .tend/agent.pid 2>/dev/null) 2>/dev/null; sleep 0.3; python3 $here/gentree.py mutate src --round \$(date +%N) --modify 10'" \
	-n tend "$TEND watch --daemon" -n rsync "rsync -a --delete src/ $W/rdst/" >/dev/null
kill -TERM $(cat .tend/agent.pid) 2>/dev/null || true
python3 - "$W/catchup.json" <<'PY'
import json, statistics, sys
r = {x["command"]: statistics.median(x["times"]) for x in json.load(open(sys.argv[1]))["results"]}
print(f"catch-up after a restart, 10 changed in 100k: tend {r['tend']:.3f} s, rsync no-op {r['rsync']:.3f} s ({r['tend']/r['rsync']:.2f}x)")
PY
