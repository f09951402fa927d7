#!/bin/sh
# bench/check.sh N [RUNS] - tend check of a dir target and of a git target
# beside reading the same bytes once (cat of every source file), in one
# run, on a generated tree of N files. Prints medians (hyperfine), the
# ratios to reading the bytes, and each check's peak RSS.
# Needs: hyperfine, git, python3, a built tend (TEND=, default build/).
set -eu
N=${1:-20000}
RUNS=${2:-5}
here=$(cd "$(dirname "$0")" && pwd)
TEND=${TEND:-$here/../build/agent/tend}
TEND=$(cd "$(dirname "$TEND")" && pwd)/$(basename "$TEND")
W=${BENCH_DIR:-/tmp/tend-bench-check-$N}
rm -rf "$W"; mkdir -p "$W"; cd "$W"
python3 "$here/gentree.py" gen src -n "$N" >/dev/null
git init -q --bare repo.git
cat > tend.conf <<'CONF'
[app "mirror"]
	source = src
	target = dir:out
[app "pub"]
	source = src
	target = git:repo.git
	ref = refs/heads/main
CONF
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@localhost
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@localhost
"$TEND" sync -q
hyperfine -N --style basic --runs "$RUNS" --warmup 1 \
	--export-json "$W/check.json" \
	-n read "sh -c 'find src -type f -print0 | xargs -0 cat >/dev/null'" \
	-n dir "$TEND check -q mirror" \
	-n git "$TEND check -q pub" >/dev/null
dir_rss=$(/usr/bin/time -f %M "$TEND" check -q mirror 2>&1 >/dev/null | tail -1)
git_rss=$(/usr/bin/time -f %M "$TEND" check -q pub 2>&1 >/dev/null | tail -1)
size=$(du -sm src | cut -f1)
python3 - "$W" "$N" "$size" "$dir_rss" "$git_rss" <<'PY'
import json, statistics, sys
w, n, size, dir_rss, git_rss = sys.argv[1:]
r = {x["command"]: statistics.median(x["times"])
     for x in json.load(open(f"{w}/check.json"))["results"]}
print(f"tend check, {int(n):,} files ({size} MB), medians in seconds")
print(f"{'what':<34} {'time':>8} {'vs read':>8}")
for key, label in [("read", "reading the bytes once (cat)"),
                   ("dir", "tend check, dir target"),
                   ("git", "tend check, git target")]:
    print(f"{label:<34} {r[key]:8.3f} {r[key]/r['read']:7.2f}x")
print(f"peak RSS: dir {int(dir_rss)/1024:.1f} MiB, git {int(git_rss)/1024:.1f} MiB")
PY
