#!/bin/sh
# tend watch: a real agent on a temp workspace, every step waiting on the
# control socket's pass_finished events (no sleeps).
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
CTL="python3 $HERE/agentctl.py $WS/.tend/agent.sock"
trap 'kill -TERM $AGENT 2>/dev/null; wait $AGENT 2>/dev/null; chmod -R u+rwx "$WS" 2>/dev/null; rm -rf "$WS"' EXIT
until_() { $CTL until "$1" -- "$2" || fail "$3"; }

mkdir -p src/d outside/moved/inner
printf 'a\n' > src/a; printf 'b\n' > src/d/b
printf 'm\n' > outside/moved/inner/m
conf_watch
"$TEND" watch 2>"$WS/agent.err" &
AGENT=$!
$CTL ready || fail "agent ready"
expect_file out/a a; expect_file out/d/b b

until_ '[ "$(cat out/new 2>/dev/null)" = new ]' 'printf "new\n" > src/new' "create"
until_ '[ "$(cat out/a)" = a2 ]' 'printf "a2\n" > src/a' "modify"
until_ '[ ! -e out/new ]' 'rm src/new' "delete"
until_ '[ ! -e out/a ] && [ "$(cat out/d/a2 2>/dev/null)" = a2 ]' 'mv src/a src/d/a2' "rename across directories"
until_ '[ "$(cat out/d/c 2>/dev/null)" = a2 ] && [ ! -e out/d/a2 ]' 'mv src/d/a2 src/d/c' "rename within a directory"
until_ '[ "$(cat out/p/q/r/f 2>/dev/null)" = x ]' 'mkdir -p src/p/q/r && printf "x\n" > src/p/q/r/f' "mkdir -p then write at once"
# a new file is applied when its writer closes it, not half-written (the
# writer holds it open until told to go on through a fifo)
mkfifo "$WS/go"
sh -c 'printf part; read x < "$1"; printf "done\n"' sh "$WS/go" > src/held &
HELD=$!
while [ "$(cat src/held)" != part ]; do sleep 0.01; done
until_ '[ -f out/s1 ]' 'printf "s\n" > src/s1' "a pass while a new file is written"
[ ! -e out/held ] || fail "a file still being written was applied: '$(cat out/held)'"
until_ '[ "$(cat out/held 2>/dev/null)" = partdone ]' "echo > $WS/go" "the new file applied once closed"
wait $HELD
# a hard link has no close: its creation is enough
printf 'h\n' > outside/h
until_ '[ "$(cat out/hl 2>/dev/null)" = h ]' 'ln outside/h src/hl' "a hard link"
until_ '[ "$(cat out/moved/inner/m 2>/dev/null)" = m ]' 'mv outside/moved src/moved' "a populated directory moved in"
until_ '[ ! -e out/moved ]' 'mv src/moved outside/moved' "moved out again"
until_ '[ ! -e out/p ]' 'rm -rf src/p' "rm -rf of a subtree"
# editor saves: write a temp then rename over; vim's backup-and-rename;
# truncate and write
until_ '[ "$(cat out/d/b)" = save1 ]' 'printf "save1\n" > src/d/.b.swp && mv src/d/.b.swp src/d/b' "write-temp-then-rename"
until_ '[ "$(cat out/d/b)" = save2 ]' 'mv src/d/b src/d/b~ && printf "save2\n" > src/d/b && rm src/d/b~' "backup and rename"
until_ '[ "$(cat out/d/b)" = save3 ]' ': > src/d/b && printf "save3\n" >> src/d/b' "truncate and write"
until_ 'diff -r src out >/dev/null' 'true' "target equals source"
[ -z "$(find out -name '*~' -o -name '.b.swp')" ] || fail "editor leftovers synced: $(find out -name '*~')"

# directories are incremental too: a rename within the source re-runs
# only the files under it (not a full pass over the 300 others), and the
# renamed directory stays watched under its new name
mkdir -p src/bulk src/ren/sub
until_ '[ "$(ls out/bulk 2>/dev/null | wc -l)" = 300 ] && [ -f out/ren/sub/y ]' 'i=0; while [ $i -lt 300 ]; do : > src/bulk/f$i; i=$((i+1)); done; printf "x\n" > src/ren/x; printf "y\n" > src/ren/sub/y' "300 files"
until_ '[ -f out/ren2/sub/y ] && [ ! -e out/ren ]' 'mv src/ren src/ren2' "directory renamed within the source"
# the pass that did it saw the 2 files under it (a full pass: 300 more)
FILES=$(run status --json; printf '%s' "$OUT" | python3 -c 'import json,sys; print(json.load(sys.stdin)["agent"]["last"]["files"])')
[ "$FILES" -le 4 ] || fail "a directory rename ran a pass over $FILES files, not just its own"
until_ '[ "$(cat out/ren2/sub/y 2>/dev/null)" = y2 ]' 'printf "y2\n" > src/ren2/sub/y' "edit inside a renamed directory"
# a directory moved in is walked with the source's .gitignore rules
mkdir -p outside/logs/deep && printf 'k\n' > outside/logs/keep.txt && printf 'l\n' > outside/logs/deep/drop.log
until_ '[ -f out/logs/keep.txt ]' 'printf "*.log\n" > src/.gitignore && mv outside/logs src/logs' "directory moved in, .gitignore applied"
[ ! -e out/logs/deep/drop.log ] || fail "an ignored file of a moved-in directory was synced"
# new ignore rules are a full pass: what was ignored is synced now
until_ '[ -f out/logs/deep/drop.log ]' 'printf "*.tmp\n" > src/.gitignore' "a .gitignore edit re-evaluates the tree"
# moved out: gone from the target, and its old watch dropped
until_ '[ ! -e out/ren2 ]' 'mv src/ren2 outside/ren2' "directory moved out"
printf 'late\n' > outside/ren2/late
until_ '[ -f out/sentinel ]' 'printf "s\n" > src/sentinel' "sentinel"
[ ! -e out/ren2 ] || fail "a write in a directory moved out reached the target"

# status from another process, through the socket
run status --json; expect_rc 0 "status --json"; json_ok "$OUT"
expect_in "$OUT" '"state": "watching"' "status reports the agent"
# a second agent is refused with the first one's pid
run watch; expect_rc 2 "second agent"; expect_in "$ERR" "pid $AGENT" "names the pid"
# tend sync asks the agent
run sync; expect_rc 0 "sync through the agent"; expect_in "$OUT" "running agent" "hand-off"

# 20k files while the agent is stopped: the queue overflows, a full pass
# is the truth
kill -STOP $AGENT
mkdir src/many
i=0; while [ $i -lt 20000 ]; do : > src/many/f$i; i=$((i+1)); done
TIMEOUT=120 $CTL until '[ $(ls out/many 2>/dev/null | wc -l) = 20000 ]' --no-ack -- "kill -CONT $AGENT" || fail "20k files after SIGCONT"
run status --json; expect_in "$OUT" '"overflows": ' "overflow counted"

# a config edit re-runs the app
# (it re-applies all 20k files: more time under the sanitizers)
export TIMEOUT=60
until_ '[ "$(stat -c %a out/d/b)" = 600 ]' 'printf "\tfile-mode = 0600\n" >> tend.conf' "config edit"
unset TIMEOUT

# SIGTERM mid-pass: exit 0, the store consistent
printf 'last\n' > src/last
kill -TERM $AGENT; wait $AGENT; rc=$?
[ $rc = 0 ] || fail "SIGTERM exit $rc"
[ ! -e .tend/agent.sock ] || fail "socket left behind"
run sync; expect_rc 0 "sync after the agent stopped"
run check; expect_rc 0 "no drift after SIGTERM"
expect_file out/last last

# an agent's pass settles the signatures of what it read: a restart reads
# nothing again (a debounce longer than the racy window, so they are
# trusted)
sed -i 's/debounce = 0/debounce = 150ms/' tend.conf
"$TEND" watch 2>>"$WS/agent.err" &
AGENT=$!
# (its catch-up walks the 20k files: slow under the sanitizers)
TIMEOUT=60 $CTL ready || fail "agent ready again"
until_ '[ "$(cat out/d/b)" = settled ]' 'printf "settled\n" > src/d/b' "modify with a debounce"
kill -TERM $AGENT; wait $AGENT
run sync; expect_rc 0 "sync after the second agent"
expect_in "$OUT" "(0 read)" "the agent's signatures were kept"

# deletes the brake holds stay held, and counted, through later passes
# about other files: approve then applies every one of them
sed -i 's/debounce = 150ms/debounce = 0/' tend.conf
printf '\tmax-delete = 5\n' >> tend.conf
"$TEND" watch 2>>"$WS/agent.err" &
AGENT=$!
TIMEOUT=60 $CTL ready || fail "agent ready a third time"
mkdir -p src/brake; for i in $(seq 1 30); do echo $i > src/brake/f$i; done
until_ '[ -e out/brake/f30 ]' 'touch src/brake' "30 files applied"
# (the agent stopped while they go: their events then reach one pass,
# not several of 5 or fewer deletes each, which the brake lets through)
until_ '"$TEND" status | grep -q "deletes held"' "kill -STOP $AGENT; rm src/brake/f1* src/brake/f2*; kill -CONT $AGENT" "the brake holds"
held=$("$TEND" status | sed -n 's/.*unsettled, \([0-9]*\) deletes held.*/\1/p')
[ -n "$held" ] && [ "$held" -ge 20 ] || fail "held count: '$held'"
# the agent's log says how to release them where it runs (a plain sync
# --allow-delete is refused beside it)
grep -q "deletes are held back (approve them: key a in tend top, the socket's approve, or tend sync --allow-delete" "$WS/agent.err" ||
	fail "the agent's brake message: $(grep 'held back' "$WS/agent.err")"
until_ '[ "$(cat out/brake/other 2>/dev/null)" = o ]' 'echo o > src/brake/other' "an unrelated change"
expect_in "$("$TEND" status)" "unsettled, $held deletes held" "still held after another pass"
[ -e out/brake/f11 ] || fail "a held delete was applied"
until_ '[ "$(cat out/brake/f11)" = back ]' 'echo back > src/brake/f11' "one comes back"
expect_in "$("$TEND" status)" "unsettled, $((held - 1)) deletes held" "the one back is not held"
expect_in "$($CTL send approve)" "\"approved\": $((held - 1))" "approve counts every held delete"
until_ '[ ! -e out/brake/f12 ] && [ ! -e out/brake/f29 ]' 'true' "approved deletes applied"
[ "$(cat out/brake/f11)" = back ] && [ -e out/brake/f3 ] || fail "approve deleted too much"
# beside the agent, tend sync --allow-delete (what plan says to run)
# approves what the brake holds and hands the pass to the agent (it was
# refused, exit 2: a new user's trial)
mkdir -p src/br3; for i in $(seq 1 30); do echo $i > src/br3/h$i; done
until_ '[ -e out/br3/h30 ]' 'touch src/br3' "br3: 30 files applied"
until_ '"$TEND" status | grep -q "deletes held"' "kill -STOP $AGENT; rm src/br3/h1* src/br3/h2*; kill -CONT $AGENT" "br3: the brake holds"
run sync --allow-delete; expect_rc 0 "br3: sync --allow-delete beside the agent"
expect_in "$OUT" "applied by the running agent" "br3: handed to the agent"
# (one pass approves and syncs: a pass of the approval alone ran first,
# and the sync reported its own, empty one: "0 deleted")
expect_in "$OUT" ", 22 deleted" "br3: the report counts the deletes"
[ ! -e out/br3/h12 ] && [ ! -e out/br3/h29 ] && [ -e out/br3/h3 ] || fail "br3: the approved deletes: $(ls out/br3 | wc -l) files left"
expect_not_in "$("$TEND" status)" "deletes held" "br3: nothing held after"
# thousands held: the plan event that listed every one (450 KB) was past
# what a client may have unread, so every dashboard, sync and approve
# that asked was dropped, and a plain sync was refused with a message
# about options (a new user's trial); the plan lists the first 500 and
# counts the rest
mkdir -p src/lots; i=1; while [ $i -le 3000 ]; do echo $i > src/lots/m$i; i=$((i+1)); done
until_ '[ -e out/lots/m3000 ]' 'touch src/lots' "many: 3000 files applied"
until_ '"$TEND" status | grep -q "unsettled, 3000 deletes held"' "kill -STOP $AGENT; rm -r src/lots; kill -CONT $AGENT" "many: the brake holds 3000"
# a dashboard's subscription: the held plan arrives whole, on one line
sub=$(python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"subscribe\n")
buf, end = b"", time.time() + 10
while b"\"event\": \"plan\"" not in buf and time.time() < end:
    s.settimeout(max(0.01, end - time.time()))
    try:
        d = s.recv(65536)
    except socket.timeout:
        break
    if not d:
        break
    buf += d
for l in buf.decode().splitlines():
    if "\"event\": \"plan\"" in l:
        print(l[:200])' "$WS/.tend/agent.sock")
expect_in "$sub" '"more": 2500, "more_held": 2500' "many: the plan counts what it does not list"
run sync; expect_rc 1 "many: a plain sync beside the agent (held deletes fail it)"
expect_in "$OUT" "applied by the running agent" "many: the agent answered"
expect_in "$ERR" "3000 source items vanished" "many: it says why"
run sync --allow-delete; expect_rc 0 "many: sync --allow-delete beside the agent"
expect_in "$OUT" ", 3000 deleted" "many: the approved deletes"
[ ! -e out/lots ] || fail "many: out/lots left: $(ls out/lots | wc -l) files"
! grep -q "dropping a client" "$WS/agent.err" || fail "many: a client was dropped"
# held, then every one of them back: the hold ends there (a later single
# delete is not held for want of a full pass)
mkdir -p src/br2; for i in $(seq 1 30); do echo $i > src/br2/g$i; done
until_ '[ -e out/br2/g30 ]' 'touch src/br2' "br2: 30 files applied"
until_ '"$TEND" status | grep -q "deletes held"' "kill -STOP $AGENT; mv src/br2 outside/br2; kill -CONT $AGENT" "br2: the brake holds"
until_ '! "$TEND" status | grep -q "deletes held"' 'mv outside/br2 src/br2' "br2: all back"
until_ '[ ! -e out/br2/g7 ]' 'rm src/br2/g7' "br2: a later delete is not held"
# the source directory goes away and is made again (a new directory: the
# old one's watches do not see it): the agent looks for
# it until it is back and follows it again (it waited for ever, watching
# nothing: a new user's trial, 2026-12-06)
until_ '"$TEND" status | grep -q "source src is missing"' 'mv src outside/away' "the source went"
until_ '[ "$(cat out/back 2>/dev/null)" = back ]' 'cp -a outside/away outside/copy && printf "back\n" > outside/copy/back && mv outside/copy src' "the source made again"
until_ '[ "$(cat out/later 2>/dev/null)" = later ]' 'printf "later\n" > src/later' "followed again"
# while it is missing the agent looks every 2 s, no more (a settle's
# wake-up ran a pass at once: ~200 passes a second, each with an fsync),
# and watches nothing (the old directory's watches went with it)
passes() { "$TEND" status | sed -n 's/.* \([0-9]*\) passes.*/\1/p'; }
until_ '"$TEND" status | grep -q "source src is missing"' 'mv src outside/away2' "the source went again"
p1=$(passes); l1=$(wc -l < "$WS/agent.err"); sleep 3; p2=$(passes); l2=$(wc -l < "$WS/agent.err")
[ -n "$p1" ] && [ $((p2 - p1)) -le 3 ] || fail "passes while the source was missing: $p1 then $p2 3 s later"
# ... and said so once, when it went (two lines every 2 s before)
[ "$l2" = "$l1" ] || fail "the agent logged $((l2 - l1)) lines in 3 s of a missing source: $(tail -4 "$WS/agent.err")"
expect_in "$("$TEND" status)" ", 0 watches," "a missing source's watches are dropped"
mv outside/away2 src
until_ '[ "$(cat out/later2 2>/dev/null)" = later2 ]' 'printf "later2\n" > src/later2' "back once more"
kill -TERM $AGENT; wait $AGENT
# the source made again while the pass that found it missing still ran:
# that pass did not walk (nor watch) the new directory, so it is still
# "missing" and the next poll walks it (it was taken as back and nothing
# watched it again: no later pass came)
TEND_FAILPOINTS='source-missing@1=stop' "$TEND" watch 2>>"$WS/agent.err" &
AGENT=$!
TIMEOUT=60 $CTL ready || fail "agent ready, with the failpoint"
mv src outside/away3
stopped $AGENT || fail "the pass did not find the source missing"
cp -a outside/away3 outside/c3 && printf 'again\n' > outside/c3/again && mv outside/c3 src
kill -CONT $AGENT
until_ '[ "$(cat out/again 2>/dev/null)" = again ]' 'true' "made again during the pass that found it missing"
# replaced at once (never seen missing): the old tree's watches go with
# it, and what happens in it is not the source's any more
# (the agent's own answer: tend status gives up on an agent busy for 3 s,
# which a sanitized agent is here, re-checking 20k held deletes a pass)
watches() { $CTL send status | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["watches"])'; }
mkdir outside/old4 && printf 'fresh\n' > outside/old4/fresh
# (renameat2 RENAME_EXCHANGE: src is never missing, not even for a moment)
swap='python3 -c "import ctypes,os; l=ctypes.CDLL(None,use_errno=True); r=l.renameat2(-100,b\"src\",-100,b\"outside/old4\",2); os._exit(0 if r==0 else 1)"'
until_ '[ "$(cat out/fresh 2>/dev/null)" = fresh ]' "$swap" "the source replaced at once"
[ "$(watches)" = 1 ] || fail "watches after the source was replaced: $(watches), want 1"
p1=$(passes); printf 'x\n' > outside/old4/stray; sleep 1; p2=$(passes)
[ "$p1" = "$p2" ] || fail "a file written in the moved-away tree ran $((p2 - p1)) passes"
kill -TERM $AGENT; wait $AGENT
run check; expect_rc 0 "no drift after the approved deletes"
finish
