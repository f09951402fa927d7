#!/bin/sh
# bench/git.sh N [RUNS] - the git target beside `git add -A && git commit`
# in one run, on a generated tree of N files:
#   first full commit into a fresh repository, then 10 changed files.
# tend writes to refs/heads/tend of a bare repository (no working tree);
# git commits its working tree. Medians (hyperfine) and ratios.
set -eu
N=${1:-10000}
RUNS=${2:-5}
here=$(cd "$(dirname "$0")" && pwd)
TEND=${TEND:-$here/../build/agent/tend}
TEND=$(cd "$(dirname "$TEND")" && pwd)/$(basename "$TEND")
W=${BENCH_DIR:-/tmp/tend-gitbench-$N}
if [ -n "${BENCH_REUSE:-}" ] && [ -d "$W/src" ]; then cd "$W"; else
	rm -rf "$W"; mkdir -p "$W"; cd "$W"
	python3 "$here/gentree.py" gen src -n "$N"
fi
printf '[app "pub"]\n\tsource = src\n\ttarget = git:repo.git\n\tref = refs/heads/tend\n' > tend.conf
export GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@b GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@b
echo 0 > .round
mut="r=\$(cat .round); echo \$((r+1)) > .round; python3 $here/gentree.py mutate src --round \$r --modify 10"
# git's working tree is src itself (its .git beside the files)
hyperfine -N --style basic --runs 3 --export-json "$W/full.json" \
	--prepare "sh -c 'rm -rf repo.git .tend src/.git; git init -q --bare repo.git; git -C src init -q'" \
	-n tend "$TEND sync -q" \
	-n git "sh -c 'cd src && git add -A && git commit -qm full'" >/dev/null
# both up to date, then 10 changed files per run (each catches up first)
rm -rf repo.git .tend src/.git; git init -q --bare repo.git; git -C src init -q
"$TEND" sync -q; (cd src && git add -A && git commit -qm base)
hyperfine -N --style basic --runs "$RUNS" --warmup 1 --export-json "$W/inc.json" \
	--prepare "sh -c '$mut'" \
	-n tend "$TEND sync -q" \
	-n git "sh -c 'cd src && git add -A && git commit -qm inc'" >/dev/null
git -C repo.git fsck --strict >/dev/null 2>&1 && ok=clean || ok=ERRORS
python3 - "$W" "$N" "$ok" <<'PY'
import json, statistics, sys
w, n, ok = sys.argv[1:]
print(f"git target vs git add -A && git commit, {int(n):,} files (medians, seconds)")
print(f"{'workload':<28} {'tend':>8} {'git':>8} {'ratio':>7}")
for key, label in [("full", "first full commit"), ("inc", "10 files changed")]:
    r = {x["command"]: statistics.median(x["times"])
         for x in json.load(open(f"{w}/{key}.json"))["results"]}
    print(f"{label:<28} {r['tend']:8.3f} {r['git']:8.3f} {r['tend']/r['git']:6.2f}x")
print(f"git fsck --strict on tend's repository: {ok}")
PY

# The agent knows which paths changed: no walk of the tree. Time until
# tend's commit is on the ref (the pass_finished events of a running
# `tend watch` counting the 10 entries), beside `git add -A && git
# commit` of the same 10 changes, alternately, RUNS times each; with the
# default debounce (20 ms) and with debounce = 0. git's clock starts
# when the 10 files are written, and so does tend's first figure (the
# wait after the last save); the second starts at the first write, so
# it also holds the writing, which tend overlaps with its first pass.
for deb in 20ms 0; do
printf '[tend]\n\tdebounce = %s\n[app "pub"]\n\tsource = src\n\ttarget = git:repo.git\n\tref = refs/heads/tend\n' "$deb" > tend.conf
"$TEND" watch --daemon >/dev/null
python3 - "$W" "$RUNS" "$deb" <<'PY'
import json, os, socket, statistics, subprocess, sys, time
w, runs, deb = sys.argv[1], int(sys.argv[2]), sys.argv[3]
os.chdir(w)
tend_t, tend_w, git_t = [], [], []
for r in range(runs):
    s = socket.socket(socket.AF_UNIX)
    s.connect(".tend/agent.sock")
    s.sendall(b"subscribe\n")
    f = s.makefile("r")
    while json.loads(f.readline()).get("event") != "subscribed":
        pass
    t0 = time.monotonic()
    for i in range(10):
        with open(f"src/agent-bench-{i}.txt", "w") as out:
            out.write(f"round {r} file {i}\n")
    t1 = time.monotonic()
    # done when passes have applied the 10 entries (one commit for them)
    done = 0
    while done < 10:
        ev = json.loads(f.readline())
        if ev.get("event") == "pass_finished":
            done += ev["created"] + ev["updated"]
    t2 = time.monotonic()
    tend_t.append(t2 - t1)
    tend_w.append(t2 - t0)
    s.close()
    t0 = time.monotonic()
    subprocess.run("cd src && git add -A && git commit -qm agent-inc", shell=True, check=True)
    git_t.append(time.monotonic() - t0)
t, tw, g = statistics.median(tend_t), statistics.median(tend_w), statistics.median(git_t)
label = f"10 files, watch, debounce {deb}"
print(f"{label:<28} {t:8.3f} {g:8.3f} {t / g:6.2f}x"
      f"   (from the first write: {tw:.3f}, {tw / g:.2f}x)")
PY
kill -TERM "$(cat .tend/agent.pid)"
sleep 0.5
done
