#!/bin/sh
# A declaration plugin (many entries, nested directories, failure), the
# logic fingerprint following the .so's bytes, a program embedding
# tend_main with an app in code, and the manifest attachment.
. "$(dirname "$0")/lib.sh"
PLUGIN=${PLUGIN:?} EMBED=${EMBED:?} PLUGIN_V2=${PLUGIN_V2:?}
CTL="python3 $(cd "$(dirname "$0")" && pwd)/agentctl.py"
AGENT=
trap '[ -n "$AGENT" ] && kill -TERM $AGENT 2>/dev/null; wait 2>/dev/null; chmod -R u+rwx "$WS" 2>/dev/null; rm -rf "$WS"' EXIT

mkdir src
printf 'a\nb\n' > src/two.txt
printf 'x\n' > src/one.txt
cp "$PLUGIN" ./lines.so
conf_site "	declare = plugin lines.so lines_declare"
run sync; expect_rc 0 "plugin sync"
expect_file out/two.txt "$(printf 'a\nb')"
expect_file out/stats/two.txt.lines 2
expect_file out/stats/one.txt.lines 1
printf '#skip\n' > src/one.txt
printf '#fail\n' > src/two.txt
run sync; expect_rc 1 "a failing plugin call"
expect_in "$ERR" "two.txt asks to fail" "the plugin's message"
expect_gone out/one.txt; expect_gone out/stats/one.txt.lines   # skipped: zero entries
expect_file out/stats/two.txt.lines 2                         # failed: kept
# a rebuilt plugin is new logic: everything is declared again
printf 'a\n' > src/two.txt
run sync; expect_rc 0 "fixed"
cp "$PLUGIN" lines.so && printf 'changed' >> lines.so
run sync --json; expect_rc 0 "changed plugin bytes"
expect_in "$OUT" '"files": 2' "json"
run check; expect_rc 0 "check after plugin"
# a missing symbol is a clear error
conf_site "	declare = plugin lines.so no_such_symbol"
run sync; expect_rc 1 "missing symbol"; expect_in "$ERR" "no symbol no_such_symbol" "symbol message"

# an app defined in code, through tend_main
rm -rf out .tend src; mkdir src
printf '1\n2\n3\n' > src/n.txt
printf '# no app here: it marks the workspace\n' > tend.conf
OUT=$("$EMBED" sync 2>&1); RC=$?
expect_rc 0 "embedded tend_main"
expect_file reversed/n.txt "$(printf '3\n2\n1')"
OUT=$("$EMBED" plan 2>&1); RC=$?; expect_rc 0 "embedded plan: nothing pending"

# the manifest attachment: every entry with its digest
rm -rf out .tend src reversed; mkdir -p src/d
printf 'p' > src/p; printf 'q' > src/d/q
conf_site "	manifest = true"
run sync; expect_rc 0 "manifest on"
[ "$(wc -l < out/.tend-manifest)" = 2 ] || fail "manifest lines: $(cat out/.tend-manifest)"
expect_in "$(cat out/.tend-manifest)" "  d/q" "manifest lists d/q"
printf 'r' > src/r
run sync; expect_rc 0 "manifest grows"
[ "$(wc -l < out/.tend-manifest)" = 3 ] || fail "manifest after a new file"
# names with a newline or a backslash: one line each, as sha256sum
# writes them (a name with a newline took two lines: a new user's trial)
printf 'nl' > "src/$(printf 'a\nb')"; printf 'bs' > 'src/c\d'
run sync; expect_rc 0 "manifest with odd names"
[ "$(wc -l < out/.tend-manifest)" = 5 ] || fail "manifest lines with odd names: $(cat out/.tend-manifest)"
grep -q '^\\[0-9a-f]\{32\}  a\\nb$' out/.tend-manifest || fail "a newline in a name: $(cat out/.tend-manifest)"
grep -q '^\\[0-9a-f]\{32\}  c\\\\d$' out/.tend-manifest || fail "a backslash in a name: $(cat out/.tend-manifest)"
grep -q '^[0-9a-f]\{32\}  d/q$' out/.tend-manifest || fail "a plain name: $(cat out/.tend-manifest)"
rm "src/$(printf 'a\nb')" 'src/c\d'
# a name two sources declare (a conflict) is not listed: which holds it
# is not known (it was listed twice, and the file was not there)
conf_site "	manifest = true
	name = {stem}.out"
printf 'md' > src/x.md; printf 'txt' > src/x.txt
run sync; expect_rc 1 "manifest beside a conflict"
expect_gone out/x.out
grep -q '  x\.out$' out/.tend-manifest && fail "the manifest lists the conflicted name: $(cat out/.tend-manifest)"
grep -q '  p\.out$' out/.tend-manifest || fail "the manifest lists the others: $(cat out/.tend-manifest)"
rm src/x.md src/x.txt
conf_site ""
run sync; expect_rc 0 "manifest off"
expect_gone out/.tend-manifest
expect_file out/p p

# the agent follows a rebuilt plugin: the new code is loaded (a private
# copy, so overwriting the .so in place cannot crash the agent) and
# every item is declared again
rm -rf out .tend src; mkdir src
printf 'a\nb\n' > src/two.txt
cp "$PLUGIN" lines.so
printf '[tend]\n\tdebounce = 0\n[app "site"]\n\tsource = src\n\ttarget = dir:out\n\tdeclare = plugin lines.so lines_declare\n' > tend.conf
"$TEND" watch 2>"$WS/agent.err" &
AGENT=$!
$CTL "$WS/.tend/agent.sock" ready || fail "agent with a plugin"
expect_file out/stats/two.txt.lines 2
$CTL "$WS/.tend/agent.sock" until '[ "$(cat out/stats/two.txt.lines)" = "v2 2" ]' -- "cp '$PLUGIN_V2' lines.so" || fail "the agent loads a rebuilt plugin"
$CTL "$WS/.tend/agent.sock" until '[ "$(cat out/stats/one.txt.lines 2>/dev/null)" = "v2 1" ]' -- "printf 'x\n' > src/one.txt" || fail "the rebuilt plugin declares new items"
kill -TERM $AGENT; wait $AGENT; AGENT=

# a source that is the workspace root itself: the config's watch on the
# root must not take the source's events away (deletes, creates)
rm -rf out .tend src lines.so
printf '[tend]\n\tdebounce = 0\n[app "root"]\n\tsource = .\n\tinclude = *.txt\n\ttarget = dir:out\n' > tend.conf
"$TEND" watch 2>"$WS/agent.err" &
AGENT=$!
$CTL "$WS/.tend/agent.sock" ready || fail "agent on the root"
$CTL "$WS/.tend/agent.sock" until '[ -f out/r.txt ]' -- "printf 'r\n' > r.txt" || fail "a file created at the root"
$CTL "$WS/.tend/agent.sock" until '[ ! -e out/r.txt ]' -- "rm r.txt" || fail "a file deleted at the root"
$CTL "$WS/.tend/agent.sock" until '[ -f out/nd/n.txt ]' -- "mkdir nd && printf 'n\n' > nd/n.txt" || fail "a directory created at the root"
kill -TERM $AGENT; wait $AGENT; AGENT=
finish
