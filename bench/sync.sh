#!/bin/sh
# bench/sync.sh N [RUNS] - tend sync beside rsync -a --delete, in one run,
# on a generated tree of N files (copy declaration, dir target):
#   cold sync, no-op re-sync, 10 files changed, and 10 changed + 5 deleted
#   + 5 renamed + 5 new; then a full verify, nothing changed (tend sync
#   --full beside rsync -a --delete --checksum: both read every file on
#   both sides). Prints medians (hyperfine) and tend/rsync ratios,
#   and tend's peak RSS for the cold and no-op syncs.
# Needs: hyperfine, rsync, python3, a built tend (TEND=, default build/).
set -eu
N=${1:-10000}
RUNS=${2:-5}
here=$(cd "$(dirname "$0")" && pwd)
TEND=${TEND:-$here/../build/agent/tend}
TEND=$(cd "$(dirname "$TEND")" && pwd)/$(basename "$TEND")
W=${BENCH_DIR:-/tmp/tend-bench-$N}
if [ -n "${BENCH_REUSE:-}" ] && [ -d "$W/src" ]; then
	cd "$W"; rm -rf out .tend rdst   # reuse a generated tree
else
	rm -rf "$W"; mkdir -p "$W"; cd "$W"
	python3 "$here/gentree.py" gen src -n "$N"
fi
printf '[app "mirror"]\n\tsource = src\n\ttarget = dir:out\n' > tend.conf
echo 0 > .round
# changes for one measured run; each tool catches up in a warmup first
mut="r=\$(cat .round); echo \$((r+1)) > .round; python3 $here/gentree.py mutate src --round \$r"
sleep 0.1 # leave the racy window: every file is as old as in real use

# A cold run starts from nothing, but the previous run's outputs are
# moved aside, not deleted, until the end: on ext4 every new inode is
# checked against the inodes freed in the last minute or so
# (recently_deleted), and deleting 100k files right before a run made
# that run 2-4x slower, by how much depending on the moment.
aside="sh -c 'mkdir -p .aside; for d in out .tend rdst; do [ ! -e \$d ] || mv \$d .aside/\$d.\$(date +%s%N); done'"
hf() { # name, runs, prepare, warmup
	hyperfine -N --style basic --runs "$2" --warmup "$4" --prepare "$3" \
		--export-json "$W/$1.json" \
		-n tend "$TEND sync -q" \
		-n rsync "rsync -a --delete src/ rdst/" >/dev/null
}
# cold: both start from nothing
hf cold 3 "$aside" 0
# bring both up to date, then time the no-op
"$TEND" sync -q; rsync -a --delete src/ rdst/
hf noop "$RUNS" "true" 1
hf changed10 "$RUNS" "sh -c '$mut --modify 10'" 1
hf mixed "$RUNS" "sh -c '$mut --modify 10 --delete 5 --rename 5 --create 5'" 1
hyperfine -N --style basic --runs "$RUNS" --warmup 1 \
	--export-json "$W/full.json" \
	-n tend "$TEND sync -q --full" \
	-n rsync "rsync -a --delete --checksum src/ rdst/" >/dev/null
# peak RSS (KiB) of a cold and a no-op sync
rm -rf out .tend
cold_rss=$(/usr/bin/time -f %M "$TEND" sync -q 2>&1 >/dev/null | tail -1)
noop_rss=$(/usr/bin/time -f %M "$TEND" sync -q 2>&1 >/dev/null | tail -1)
diff -r src out >/dev/null && same=yes || same=NO
rm -rf .aside

python3 - "$W" "$N" "$cold_rss" "$noop_rss" "$same" <<'PY'
import json, statistics, sys
w, n, cold_rss, noop_rss, same = sys.argv[1:]
print(f"tend sync vs rsync -a --delete, {int(n):,} files (medians, seconds)")
print(f"{'workload':<34} {'tend':>8} {'rsync':>8} {'ratio':>7}")
for key, label in [("cold", "cold sync"), ("noop", "no-op re-sync"),
                   ("changed10", "10 files changed"),
                   ("mixed", "10 mod + 5 del + 5 ren + 5 new"),
                   ("full", "verify all: --full vs --checksum")]:
    r = {x["command"]: statistics.median(x["times"])
         for x in json.load(open(f"{w}/{key}.json"))["results"]}
    print(f"{label:<34} {r['tend']:8.3f} {r['rsync']:8.3f} {r['tend']/r['rsync']:6.2f}x")
print(f"tend peak RSS: cold {int(cold_rss)/1024:.1f} MiB, no-op {int(noop_rss)/1024:.1f} MiB")
print(f"target equals source after the runs: {same}")
PY
