#!/bin/sh
# The per-app counters tend status reads (issue 17): after syncs that
# create, change and delete, after syncs and drops killed midway (at
# failpoints and at random moments), after a target moves (its
# container goes), an app leaves tend.conf and is dropped, `tend status
# --json` counts, per app, as many states and unsettled states as `tend
# ls` lists, and `tend check` finds no disagreement between the counters
# and the rows. A store whose counters an older tend did not keep (made
# with store_tool) is still counted right, and recounted by its next
# write; a counter that is wrong is reported by check and recounted by
# sync --full. The agent's status counts from them too.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
STORE_TOOL=${STORE_TOOL:?path to store_tool}
CTL="python3 $HERE/agentctl.py $WS/.tend/agent.sock"
AGENT=
trap 'if [ -n "$AGENT" ]; then kill -TERM $AGENT 2>/dev/null; wait $AGENT 2>/dev/null; fi; chmod -R u+rwx "$WS" 2>/dev/null; rm -rf "$WS"' EXIT
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t

# agree WHAT: every app status lists has the counts ls lists for it, and
# check reports no counter of any app (drift of the targets is allowed:
# a killed sync leaves unsettled states)
agree() {
	"$TEND" status --json >"$WS/.st" 2>&1 || { fail "$1: status: $(cat "$WS/.st")"; return; }
	for app in $(python3 -c '
import json, sys
for a in json.load(open(sys.argv[1]))["apps"]:
    print(a["app"])' "$WS/.st"); do
		"$TEND" ls --json "$app" >"$WS/.ls" 2>&1 || { fail "$1: ls $app: $(cat "$WS/.ls")"; continue; }
		python3 -c '
import json, sys
st, ls, app = sys.argv[1:]
a = [x for x in json.load(open(st))["apps"] if x["app"] == app][0]
s = json.load(open(ls))["states"]
want = (len(s), sum(1 for x in s if x["pending"]))
got = (a["states"], a["pending"])
sys.exit(0 if got == want else
         "%s: status says %d states, %d unsettled; ls lists %d, %d" % ((app,) + got + want))' \
			"$WS/.st" "$WS/.ls" "$app" 2>"$WS/.aerr" || fail "$1: $(cat "$WS/.aerr")"
	done
	run check --json
	expect_not_in "$OUT" '"counters": true' "$1: check finds the counters right"
}
# clean WHAT: agree, and check reports nothing at all
clean() {
	agree "$1"
	run check -q; expect_rc 0 "$1: check"
}
# states APP: what status counts for APP
states() {
	"$TEND" status --json | python3 -c '
import json, sys
print(sum(a["states"] for a in json.load(sys.stdin)["apps"] if a["app"] == sys.argv[1]))' "$1"
}

d=0
while [ $d -lt 10 ]; do
	mkdir -p src/d$d
	f=0
	while [ $f -lt 30 ]; do printf 'file %d %d\n' $d $f > src/d$d/f$f.txt; f=$((f+1)); done
	printf 'md %d\n' $d > src/d$d/note.md
	d=$((d+1))
done
git init -q --bare repo.git
cat > tend.conf <<'CONF'
[app "a"]
	source = src
	target = dir:out
[app "b"]
	source = src
	include = *.md
	target = dir:out-b
[app "g"]
	source = src
	target = git:repo.git
	ref = refs/heads/main
	tag = latest
CONF
run sync -q; expect_rc 0 "first sync"
clean "first sync"
[ "$(states a)" = 311 ] || fail "a counts $(states a) states, want 311 (300 + 10 + the directory)"

# ---- changes and deletes ----
for d in 1 2 3; do
	printf 'changed\n' >> src/d$d/f1.txt
	rm src/d$d/f2.txt src/d$d/note.md
	printf 'new\n' > src/d$d/new.txt
done
rm -r src/d9
run sync -q; expect_rc 0 "sync of changes and deletes"
clean "changes and deletes"

# ---- kills at failpoints: in a sink (pending records stay), at the
# settle's commit, in the git target ----
i=0
for fp in write@30=kill lmdb-commit~settle=kill rename@5=kill git-ref-update=kill; do
	i=$((i+1))
	printf 'kill %d\n' $i > src/d0/k$i.txt
	j=0
	while [ $j -lt 30 ]; do printf 'round %d\n' $i >> src/d$((j % 9))/f$j.txt; j=$((j+1)); done
	TEND_FAILPOINTS=$fp "$TEND" sync -q >/dev/null 2>&1
	[ $? -ge 128 ] || fail "$fp: the sync was not killed"
	agree "killed at $fp"
	if [ $fp = write@30=kill ]; then
		n=$("$TEND" status --json | python3 -c '
import json, sys; print(sum(a["pending"] for a in json.load(sys.stdin)["apps"]))')
		[ "$n" -gt 0 ] || fail "a sink killed midway leaves nothing unsettled"
	fi
	run sync -q; expect_rc 0 "sync after the kill at $fp"
	clean "after the kill at $fp"
done
unsettled=$("$TEND" status --json | python3 -c '
import json, sys; print(sum(a["pending"] for a in json.load(sys.stdin)["apps"]))')
[ "$unsettled" = 0 ] || fail "unsettled after the syncs: $unsettled"

# ---- kills at random moments, full re-applies and plain syncs ----
i=1
while [ $i -le 6 ]; do
	j=0
	while [ $j -lt 60 ]; do printf 'r %d\n' $i >> src/d$((j % 9))/f$((j % 30)).txt; j=$((j+1)); done
	rm -f src/d$((i % 9))/r$((i - 1)).txt
	printf 'r %d\n' $i > src/d$((i % 9))/r$i.txt
	if [ $((i % 2)) = 1 ]; then full=--full; else full=; fi
	"$TEND" sync -q $full >/dev/null 2>&1 &
	pid=$!
	sleep "$(printf '0.%03d' $(( (i * 7919) % 300 )))"
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
	agree "random kill $i"
	run sync -q; expect_rc 0 "sync after random kill $i"
	clean "after random kill $i"
	i=$((i+1))
done

# ---- a target that moves: the old container and its entries go ----
sed -i 's/target = dir:out$/target = dir:moved/' tend.conf
run sync -q; expect_rc 0 "sync after the move"
clean "after the target moved"
[ ! -e out ] || fail "the old target stays"

# ---- a drop killed midway, then finished ----
TEND_FAILPOINTS=unlink@50=kill "$TEND" drop a >/dev/null 2>&1
[ $? -ge 128 ] || fail "the drop was not killed"
agree "killed drop"
run drop a; expect_rc 0 "drop a"
[ "$(states a)" = 0 ] || fail "a counts $(states a) states after its drop"
agree "after the drop"

# ---- an app that leaves tend.conf is still counted, until dropped ----
sed -i '/^\[app "b"\]/,/target = dir:out-b/d' tend.conf
grep -q 'app "b"' tend.conf && fail "b is still in tend.conf"
run status; expect_in "$OUT" "b (not in tend.conf" "status lists b as tracked"
expect_in "$OUT" "b (not in tend.conf: tend drop b removes it): 7 target states" "status counts b"
agree "b left tend.conf"
run drop b; expect_rc 0 "drop b"
run status; expect_not_in "$OUT" "b (not" "status after b's drop"
clean "b dropped"

# ---- a store an older tend wrote: no counters ----
run sync -q; expect_rc 0 "sync a again"
want=$("$TEND" status --json | python3 -c 'import json,sys; print([(a["app"], a["states"], a["pending"]) for a in json.load(sys.stdin)["apps"]])')
"$STORE_TOOL" unmark .tend/store || fail "store_tool unmark"
"$STORE_TOOL" valid .tend/store; [ $? = 3 ] || fail "counters still trusted after unmark"
got=$("$TEND" status --json | python3 -c 'import json,sys; print([(a["app"], a["states"], a["pending"]) for a in json.load(sys.stdin)["apps"]])')
[ "$got" = "$want" ] || fail "status of a store without counters: $got, want $want"
agree "no counters (scanned)"
run check -q; expect_rc 0 "check of a store without counters"
"$STORE_TOOL" valid .tend/store; [ $? = 3 ] || fail "status or check wrote the counters"
# the next write recounts them (a sync with nothing to do writes its
# last pass)
run sync -q; expect_rc 0 "sync of the store without counters"
"$STORE_TOOL" valid .tend/store || fail "the first write did not recount"
clean "recounted"

# ---- an app no longer in tend.conf, in an old store ----
cat >> tend.conf <<'CONF'
[app "c"]
	source = src
	include = *.md
	target = dir:out-c
CONF
run sync -q; expect_rc 0 "sync c"
sed -i '/^\[app "c"\]/,/target = dir:out-c/d' tend.conf
"$STORE_TOOL" unmark .tend/store || fail "store_tool unmark"
run status; expect_in "$OUT" "c (not in tend.conf: tend drop c removes it): 7 target states" "old store: c tracked"
run sync -q; expect_rc 0 "sync recounts"
run status; expect_in "$OUT" "c (not in tend.conf: tend drop c removes it): 7 target states" "recounted: c tracked"
clean "c tracked, recounted"
# check compares the counters of an app out of tend.conf too
"$STORE_TOOL" skew .tend/store c || fail "store_tool skew c"
run check; expect_rc 1 "check of c's wrong counter"
expect_in "$OUT" "counters of c: the store counts 8 target states" "check names c's counter"
run sync -q --full; expect_rc 0 "sync --full recounts c"
clean "c recounted"
run drop c; expect_rc 0 "drop c"

# the engine's recount, on its own (what times it at scale)
"$STORE_TOOL" unmark .tend/store || fail "store_tool unmark"
"$STORE_TOOL" recount .tend >/dev/null || fail "store_tool recount"
"$STORE_TOOL" valid .tend/store || fail "recount left them untrusted"
clean "recounted by store_tool"

# ---- a wrong counter: check says so, sync --full recounts ----
"$STORE_TOOL" skew .tend/store g || fail "store_tool skew"
before=$(states g)
run check; expect_rc 1 "check of a wrong counter"
expect_in "$OUT" "counters of g: the store counts $before target states" "check names the counter"
run check --json; expect_rc 1 "check --json of a wrong counter"
expect_in "$OUT" '"counters": true' "check --json names the counter"
run sync -q --full; expect_rc 0 "sync --full"
[ "$(states g)" = $((before - 1)) ] || fail "sync --full did not recount g: $(states g)"
clean "after sync --full"

# ---- the agent counts from them ----
start_agent() {
	"$TEND" watch "$@" 2>"$WS/agent.err" &
	AGENT=$!
	$CTL ready || fail "agent ready"
}
start_agent
printf 'agent\n' > src/d0/agent.txt
$CTL until "test -f moved/d0/agent.txt" -- true >/dev/null || fail "agent applied"
# a file that holds the declared bytes already is adopted: said so by the
# pass, and counted as a state (the agent counted only creates)
printf 'same\n' > moved/d1/adopt.txt
$CTL until "\"$TEND\" status --json | grep -q '\"adopted\": 1'" -- "printf 'same\\n' > src/d1/adopt.txt" >/dev/null ||
	fail "the agent's pass says it adopted the file"
line=$($CTL send status)
# every state ls lists, the root's container too, as status counts them
n=$("$TEND" ls --json a | python3 -c '
import json, sys; print(len(json.load(sys.stdin)["states"]))')
printf '%s' "$line" | python3 -c '
import json, sys
a = [x for x in json.loads(sys.stdin.read())["apps"] if x["name"] == "a"][0]
sys.exit(0 if a["states"] == int(sys.argv[1]) else "agent counts %d, ls %s" % (a["states"], sys.argv[1]))' "$n" ||
	fail "the agent's status counts what ls lists"
agree "beside the agent"
kill -TERM $AGENT; wait $AGENT; AGENT=
finish
