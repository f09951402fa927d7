#!/bin/sh
# What `meson install` adds to a user's system (issue 18): shell
# completions that know the commands, options and the workspace's apps;
# the systemd user unit; the agent's log levels, as words on a terminal
# and as priorities in the journal.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
SRC=$(cd "$HERE/../.." && pwd)
CTL="python3 $HERE/agentctl.py $WS/.tend/agent.sock"

mkdir -p src/deep/er && echo a > src/a
cat > tend.conf <<'CONF'
[tend]
	debounce = 0
[app "site"]
	source = src
	target = dir:out
[app "pages"]
	source = src
	target = dir:pub
CONF

# ---- bash: `complete -p tend`, then what it offers ----
command -v bash >/dev/null || { echo "no bash: skipped"; finish; }
got=$(bash -c ". '$SRC/config/shell/tend.bash'; complete -p tend")
[ "$got" = "complete -F _tend tend" ] || fail "complete -p tend: $got"
comp() { # DIR WORDS...: what bash offers for the last word
	(cd "$1" && shift && bash -c '. "$0"; COMP_WORDS=("$@");
		COMP_CWORD=$(($# - 1)); _tend; printf "%s\n" "${COMPREPLY[@]}"' \
		"$SRC/config/shell/tend.bash" "$@") | sort | tr '\n' ' '
}
[ "$(comp . tend s)" = "status stop sync " ] || fail "commands: $(comp . tend s)"
[ "$(comp . tend sync '')" = "pages site " ] || fail "apps: $(comp . tend sync '')"
[ "$(comp src/deep/er tend plan p)" = "pages " ] || fail "apps from a subdirectory: $(comp src/deep/er tend plan p)"
[ "$(comp /tmp tend -C "$WS" drop s)" = "site " ] || fail "apps with -C: $(comp /tmp tend -C "$WS" drop s)"
case "$(comp . tend sync --d)" in *--dry-run*) ;; *) fail "sync's options: $(comp . tend sync --d)";; esac
[ "$(comp . tend help c)" = "check config " ] || fail "help topics: $(comp . tend help c)"
# --color takes its value after '=': split there as bash does, or not
[ "$(comp . tend --color = a)" = "always auto " ] || fail "--color values: $(comp . tend --color = a)"
[ "$(comp . tend sync --color=n)" = "--color=never " ] || fail "--color=n: $(comp . tend sync --color=n)"
# every command the binary knows is offered, and nothing else
cmds=$("$TEND" --help | sed -n '/^Commands:/,/^$/p' | awk 'NR>1 && /^  [a-z]/{print $1}' | sort | tr '\n' ' ')
[ "$(comp . tend '')" = "$cmds" ] || fail "bash offers '$(comp . tend '')', tend --help lists '$cmds'"
# zsh and fish: their files parse, where the shells are
if command -v zsh >/dev/null; then zsh -n "$SRC/config/shell/_tend" || fail "zsh -n _tend"; fi
if command -v fish >/dev/null; then fish -n "$SRC/config/shell/tend.fish" || fail "fish -n tend.fish"; fi

# ---- the systemd user unit ----
unit="$WS/units/tend@.service"
mkdir -p "$WS/units"
sed "s|@BINDIR@|$(dirname "$TEND")|" "$SRC/config/systemd/tend@.service.in" > "$unit"
grep -q "^ExecStart=$(dirname "$TEND")/tend -C %I watch$" "$unit" || fail "ExecStart: $(grep ExecStart "$unit")"
if command -v systemd-analyze >/dev/null; then
	inst="$WS/units/tend@$(systemd-escape --path "$WS").service"
	cp "$unit" "$inst"
	out=$(systemd-analyze verify --man=no "$inst" 2>&1) ||
		fail "systemd-analyze verify: $out"
	case "$out" in *"$(basename "$inst")"*) fail "systemd-analyze warns: $out";; esac
fi

# ---- log levels: words on a terminal, priorities in the journal ----
"$TEND" watch 2>"$WS/agent.err" &
AGENT=$!
$CTL ready || fail "agent ready"
grep -Eq '^tend watch: [0-9]{2}:[0-9]{2}:[0-9]{2} site: ' "$WS/agent.err" || fail "a pass line, plain: $(cat "$WS/agent.err")"
echo '[app "broken"' >> tend.conf
$CTL until "grep -q 'keeping the previous config' '$WS/agent.err'" -- 'true' ||
	fail "the bad tend.conf is logged: $(cat "$WS/agent.err")"
grep -q '^tend watch: error: tend.conf: keeping the previous config' "$WS/agent.err" || fail "an error says so: $(cat "$WS/agent.err")"
kill -TERM $AGENT; wait $AGENT
sed -i '$d' tend.conf
# stderr is the journal when JOURNAL_STREAM names its device and inode
: > "$WS/journal"
js=$(stat -c '%d:%i' "$WS/journal")
JOURNAL_STREAM=$js "$TEND" watch 2>>"$WS/journal" &
AGENT=$!
$CTL ready || fail "agent ready under a journal"
echo '[app "broken"' >> tend.conf
$CTL until "grep -q 'keeping the previous config' '$WS/journal'" -- 'true' ||
	fail "the bad tend.conf is logged: $(cat "$WS/journal")"
grep -Eq '^<6>tend watch: [0-9]{2}:[0-9]{2}:[0-9]{2} site: ' "$WS/journal" || fail "a pass line at priority 6: $(cat "$WS/journal")"
grep -q '^<3>tend watch: tend.conf: keeping the previous config' "$WS/journal" || fail "an error at priority 3: $(cat "$WS/journal")"
kill -TERM $AGENT; wait $AGENT
finish
