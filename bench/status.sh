#!/bin/sh
# bench/status.sh N [RUNS] - the time of `tend status` (and of `tend
# status --json`) on a synced workspace of N generated files (one dir
# app), as a median of RUNS runs (hyperfine), beside `tend help` (what
# starting the program costs). status reads each app's counters from the
# store: its time should not grow with N.
# Needs: hyperfine, python3, a built tend (TEND=, default build/).
# The workspace is kept between runs (BENCH_DIR=, default
# /tmp/tend-bench-status-N): the tree is generated and synced once, and
# each run starts with a no-op sync by TEND, so that two builds can be
# compared on one store (a store an older tend wrote last has no
# counters: this tend's first write recounts them).
set -eu
N=${1:-10000}
RUNS=${2:-20}
here=$(cd "$(dirname "$0")" && pwd)
TEND=${TEND:-$here/../build/agent/tend}
TEND=$(cd "$(dirname "$TEND")" && pwd)/$(basename "$TEND")
W=${BENCH_DIR:-/tmp/tend-bench-status-$N}
if [ ! -f "$W/synced" ]; then
	rm -rf "$W"; mkdir -p "$W"
	(cd "$W" && python3 "$here/gentree.py" gen src -n "$N" >/dev/null)
	cat > "$W/tend.conf" <<'CONF'
[app "mirror"]
	source = src
	target = dir:out
CONF
	"$TEND" -C "$W" sync -q
	touch "$W/synced"
fi
cd "$W"
"$TEND" sync -q
hyperfine -N --style basic --runs "$RUNS" --warmup 2 \
	--export-json "$W/status.json" \
	-n floor "$TEND help" \
	-n text "$TEND status" \
	-n json "$TEND status --json" >/dev/null
python3 - "$W" "$N" <<'PY'
import json, statistics, sys
w, n = sys.argv[1:]
r = {x["command"]: x["times"] for x in json.load(open(f"{w}/status.json"))["results"]}
print(f"tend status, {int(n):,} files, median of {len(r['text'])} runs")
for k, label in (("floor", "tend help (start-up)"), ("text", "tend status"),
                 ("json", "tend status --json")):
    t = sorted(r[k])
    print(f"  {label:<22} {statistics.median(t) * 1000:8.2f} ms  "
          f"(min {t[0] * 1000:.2f}, max {t[-1] * 1000:.2f})")
PY
