#!/bin/sh
# bench/scale.sh [N ...] - how tend's costs grow with the workspace, beside
# rsync, in one run per size (default: 10000 100000; the issue's figure is
# 1000000). Each size is a tree of N small files (60-200 bytes) in N/1000
# directories of 1000, generated here. Per size:
#   cold sync (one run each), no-op re-sync and 10 files changed (medians
#   of RUNS, hyperfine), tend status and tend ls (medians), the peak RSS of
#   each tend command (/usr/bin/time: all of it, and the part that is the
#   store's mapped pages, which the kernel can drop at will), and the
#   store's bytes per tracked state.
# Needs: hyperfine, rsync, python3, GNU time, a built tend (TEND=).
set -eu
RUNS=${RUNS:-3}
here=$(cd "$(dirname "$0")" && pwd)
TEND=${TEND:-$here/../build/agent/tend}
TEND=$(cd "$(dirname "$TEND")" && pwd)/$(basename "$TEND")
[ $# -gt 0 ] || set -- 10000 100000
OUT=${BENCH_OUT:-/tmp/tend-bench-scale.txt}
: > "$OUT"

gen() { # DIR N: N files of 60-200 bytes, 1000 per directory
	python3 - "$1" "$2" <<'PY'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(n)
for i in range(n):
    d = os.path.join(root, "d%04d" % (i // 1000))
    if i % 1000 == 0:
        os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%07d.txt" % i), "w") as f:
        f.write("file %d\n" % i + "x" * rng.randrange(50, 190) + "\n")
PY
}

# peak RSS in MiB of a command: total, and of its anonymous memory (the
# rest is the store's pages mapped from the page cache), sampled by the
# tests' maxrss.py
rss() {
	python3 "$here/../tests/e2e/maxrss.py" "$@" 2>&1 >/dev/null |
		awk '/^maxrss / {t = $2} /^maxanon / {a = $2}
		     END {printf "%.0f %.0f\n", t / 1024, a / 1024}'
}

# A cold run starts from nothing, but the previous run's outputs are
# moved aside, not deleted, until the end: on ext4 every new inode is
# checked against the inodes freed in the last minute or so
# (recently_deleted), and deleting 100k files right before a run made
# that run 2-4x slower, by how much depending on the moment.
aside="sh -c 'mkdir -p .aside; for d in out .tend rdst; do [ ! -e \$d ] || mv \$d .aside/\$d.\$(date +%s%N); done'"
for N in "$@"; do
	W=${BENCH_DIR:-/tmp/tend-bench-scale}-$N
	rm -rf "$W"; mkdir -p "$W"; cd "$W"
	gen src "$N"
	printf '[app "m"]\n\tsource = src\n\ttarget = dir:out\n' > tend.conf
	sleep 0.1
	hyperfine -N --style none --runs 1 --export-json cold.json \
		--prepare "$aside" \
		-n tend "$TEND sync -q" -n rsync "rsync -a --delete src/ rdst/" \
		>/dev/null
	"$TEND" sync -q; rsync -a --delete src/ rdst/
	hyperfine -N --style none --runs "$RUNS" --warmup 1 --export-json noop.json \
		-n tend "$TEND sync -q" -n rsync "rsync -a --delete src/ rdst/" \
		>/dev/null
	echo 0 > .round
	hyperfine -N --style none --runs "$RUNS" --warmup 1 --export-json changed.json \
		--prepare "sh -c 'r=\$(cat .round); echo \$((r+1)) > .round; for k in 0 1 2 3 4 5 6 7 8 9; do echo \$r >> src/d0000/f000000\$k.txt; done'" \
		-n tend "$TEND sync -q" -n rsync "rsync -a --delete src/ rdst/" \
		>/dev/null
	hyperfine -N --style none --runs "$RUNS" --warmup 1 --export-json show.json \
		-n status "$TEND status" -n ls "$TEND ls" >/dev/null
	rm -rf out .tend
	cold_rss=$(rss "$TEND" sync -q)
	noop_rss=$(rss "$TEND" sync -q)
	status_rss=$(rss "$TEND" status)
	ls_rss=$(rss "$TEND" ls)
	store=$(stat -c %s .tend/store/data.mdb)
	# the agent: caught up after a restart with 10 files changed while
	# it was stopped (from its start to the last change visible), and
	# its RSS once idle
	agent=$(python3 - "$TEND" <<'PY'
import os, subprocess, sys, time
tend = sys.argv[1]
paths = ["d0000/f000000%d.txt" % k for k in range(10)]
for p in paths:
    with open("src/" + p, "a") as f:
        f.write("restart\n")
want = [open("src/" + p, "rb").read() for p in paths]
t0 = time.monotonic()
a = subprocess.Popen([tend, "watch", "-q"], stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
def caught_up():
    for p, w in zip(paths, want):
        try:
            if open("out/" + p, "rb").read() != w:
                return False
        except OSError:
            return False
    return True
while not caught_up():
    time.sleep(0.002)
t = time.monotonic() - t0
time.sleep(2)
st = {l.split(":")[0]: int(l.split()[1]) for l in open("/proc/%d/status" % a.pid)
      if l.startswith(("VmRSS", "RssAnon"))}
a.terminate()
a.wait()
print("%.3f %.0f %.0f" % (t, st["VmRSS"] / 1024, st["RssAnon"] / 1024))
PY
)
	diff -r src out >/dev/null && same=yes || same=NO
	python3 - "$N" "$store" "$same" "$cold_rss" "$noop_rss" "$status_rss" \
	    "$ls_rss" "$agent" >>"$OUT" <<'PY'
import json, statistics, sys
n, store, same = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rss = [a.split() for a in sys.argv[4:8]]
catch, arss, aanon = sys.argv[8].split()
def med(f):
    return {r["command"]: statistics.median(r["times"])
            for r in json.load(open(f))["results"]}
c, o, ch, sh = med("cold.json"), med("noop.json"), med("changed.json"), med("show.json")
print(f"{n} files: cold {c['tend']:.2f} s vs rsync {c['rsync']:.2f} s "
      f"({c['tend']/c['rsync']:.2f}x); no-op {o['tend']:.3f} vs "
      f"{o['rsync']:.3f} ({o['tend']/o['rsync']:.2f}x); 10 changed "
      f"{ch['tend']:.3f} vs {ch['rsync']:.3f} ({ch['tend']/ch['rsync']:.2f}x); "
      f"status {sh['status']*1000:.1f} ms; ls {sh['ls']:.2f} s; store "
      f"{store/n:.0f} B/state ({store/1e6:.0f} MB); peak RSS MiB "
      f"(total/anon): cold {rss[0][0]}/{rss[0][1]}, no-op {rss[1][0]}/"
      f"{rss[1][1]}, status {rss[2][0]}/{rss[2][1]}, ls {rss[3][0]}/"
      f"{rss[3][1]}; agent catch-up after a restart, 10 changed "
      f"{float(catch):.3f} s ({float(catch)/o['rsync']:.2f}x the rsync no-op), "
      f"idle RSS {arss}/{aanon} MiB; out == src: {same}")
PY
	tail -1 "$OUT"
	cd /; rm -rf "$W"
done
