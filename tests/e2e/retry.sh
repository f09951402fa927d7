#!/bin/sh
# The agent after a failure (a new user's trial: a target made read-only
# for a while): it retries on its own, without a change of the sources,
# and says meanwhile what is unsettled and when it retries; a tend.conf
# it refused is in its status (the dashboard shows it), until fixed.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
CTL="python3 $HERE/agentctl.py $WS/.tend/agent.sock"
trap 'kill -TERM $AGENT 2>/dev/null; wait $AGENT 2>/dev/null; rm -rf "$WS"' EXIT
until_() { $CTL until "$1" -- "$2" || fail "$3"; }
# field APP KEY: a number of the app in the agent's status (a script:
# the predicates of until_ run in a shell of their own)
cat > "$WS/field" <<EOF
#!/bin/sh
$CTL send status | python3 -c '
import json, sys
for line in sys.stdin:
    j = json.loads(line)
    if j.get("event") == "status":
        for a in j["apps"]:
            if a["name"] == sys.argv[1]:
                print(a[sys.argv[2]])' "\$1" "\$2"
EOF
cat > "$WS/status" <<EOF
#!/bin/sh
$CTL send status
EOF
chmod +x "$WS/field" "$WS/status"
field() { "$WS/field" "$@"; }

mkdir src
printf 'a\n' > src/a
printf 'b\n' > src/bfile
conf_watch
# the 2nd and 3rd writes of bfile fail: the first retry fails too
TEND_FAILPOINTS='write~bfile@2=EIO,write~bfile@3=EIO' "$TEND" watch -v 2>"$WS/agent.err" &
AGENT=$!
$CTL ready || fail "agent ready"
expect_file out/bfile b

printf 'b2\n' > src/bfile
until_ '[ "$(./field w unsettled)" = 1 ]' 'true' "the failed write is unsettled in the status"
R=$(field w retry_in_ms)
[ "$R" -ge 0 ] && [ "$R" -le 4000 ] || fail "no retry planned after a failure: retry_in_ms $R"
# no change of the sources from here on
until_ '[ "$(cat out/bfile)" = b2 ]' 'true' "the failed write retried by the agent on its own"
until_ '[ "$(./field w unsettled)" = 0 ]' 'true' "settled after the retry"
[ "$(field w retry_in_ms)" = -1 ] || fail "a retry still planned after a clean pass"
run check; expect_in "$OUT" "no drift" "check after the retry"
# two failed passes, then one clean: 3 passes after the catch-up at most
# 2 s and 4 s apart (not a loop)
N=$(grep -c " w: " "$WS/agent.err")
[ "$N" -le 5 ] || fail "the agent retried $N times: $(cat "$WS/agent.err")"

# a tend.conf it cannot load: kept, and said in the status until fixed
cp tend.conf tend.conf.good
printf '[app "broken\n' >> tend.conf
kill -HUP $AGENT
until_ './status | grep -q "config_error.*unterminated"' 'true' "a refused tend.conf in the status"
grep -q "keeping the previous config: tend.conf:" "$WS/agent.err" ||
	fail "the log does not say why on one line: $(cat "$WS/agent.err")"
# tend status cannot load it either, but says the agent still runs on the
# previous one (it said only the error: new users' trials)
run status; expect_rc 2 "status with a tend.conf that does not load"
expect_in "$ERR" "the agent (pid $AGENT, watching) runs with the tend.conf it loaded before this one (it refused this one too)" "status names the running agent"
mv tend.conf.good tend.conf
kill -HUP $AGENT
until_ '! ./status | grep -q config_error' 'true' "the config error gone once fixed"

# a declaration that fails on its input (an exec) is an error, not a
# failed action: not retried (its source's next change runs it again)
mkdir xs; echo x > xs/a
cat >> tend.conf <<'CONF'
[app "x"]
	source = xs
	declare = exec false
	target = dir:xout
CONF
kill -HUP $AGENT
until_ '[ "$(./field x errors)" = 1 ]' 'true' "the failing exec is an error of x"
[ "$(./field x retry_in_ms)" = -1 ] || fail "a failed declaration is retried: $(./field x retry_in_ms)"

# the source of an app moved away: nothing done, and an error of the
# app's (a new user's trial: the agent said errors 0, the dashboard
# "targets match the sources", components 1 beside 1 state), not retried
# (its return is an event); it goes once the source is back
printf 'c\n' > src/c
until_ '[ -f out/c ]' 'true' "w: c before the source goes"
C=$(field w components)
mv src src.away
until_ '[ "$(./field w errors)" = 1 ]' 'true' "a missing source is an error of w"
[ "$(field w retry_in_ms)" = -1 ] || fail "a missing source is retried by timer: $(field w retry_in_ms)"
[ "$(field w components)" = "$C" ] || fail "a missing source changed w's components: $C -> $(field w components)"
expect_file out/c c
mv src.away src
printf 'c2\n' > src/c
until_ '[ "$(cat out/c)" = c2 ] && [ "$(./field w errors)" = 0 ]' 'true' "w back once its source is"

# tend status beside an agent busy in a long pass (a new user's trial:
# it hung until the pass ended): it answers within a second or two
mkdir slow; echo s > slow/a
cat >> tend.conf <<'CONF'
[app "slow"]
	source = slow
	declare = "exec sleep 7; cat"
	target = dir:slowout
CONF
kill -HUP $AGENT
sleep 0.5
t0=$(date +%s%N)
run status
t1=$(date +%s%N)
[ $(( (t1 - t0) / 1000000 )) -lt 5500 ] || fail "status took $(( (t1 - t0) / 1000000 )) ms beside a busy agent"
expect_in "$OUT" "busy: no answer within 3 s" "status says the agent is busy"
until_ '[ -f slowout/a ]' 'true' "the slow pass ends"

# tend stop: the agent finishes and goes; a second stop has nothing to do
run stop; expect_rc 0 "tend stop"
expect_in "$OUT" "agent (pid $AGENT) stopped" "tend stop says which"
kill -0 $AGENT 2>/dev/null && fail "the agent still runs after tend stop"
wait $AGENT; [ $? = 0 ] || fail "the agent's exit after tend stop"
AGENT=
[ ! -S .tend/agent.sock ] || fail "the socket stayed after tend stop"
run stop; expect_rc 0 "tend stop without an agent"
expect_in "$OUT" "no agent runs" "tend stop without an agent says so"
run sync w; expect_rc 0 "a one-shot sync once the agent stopped"
finish
