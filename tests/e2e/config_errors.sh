#!/bin/sh
# Configurations that would make apps fight or cut a command are refused
# when tend.conf is loaded, by every command, naming both apps and both
# tend.conf:LINE, exit 2, nothing written (issue 15, items 2 and 6).
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
CTL="python3 $HERE/agentctl.py $WS/.tend/agent.sock"
AGENT=
trap 'if [ -n "$AGENT" ]; then kill -TERM $AGENT 2>/dev/null; wait $AGENT 2>/dev/null; fi; chmod -R u+rwx "$WS" 2>/dev/null; rm -rf "$WS"' EXIT

mkdir -p src docs
printf 'ac\n' > src/a.md
printf 'd\n' > docs/d.md
git init -q repo

# refused: exit 2 from COMMAND, every wanted text on stderr, no target
# (watch and top would run on: a timeout ends them where they are not
# refused)
refused() {
	what=$1; cmd=$2; shift 2
	OUT=$(timeout 10 "$TEND" $cmd </dev/null 2>"$WS/.err"); RC=$?; ERR=$(cat "$WS/.err")
	expect_rc 2 "$what: $cmd"
	for w in "$@"; do expect_in "$ERR" "$w" "$what: $cmd"; done
	expect_not_in "$ERR" "component" "$what: no internal component path"
}
# every command that loads tend.conf refuses it
refused_everywhere() {
	what=$1; shift
	for cmd in sync plan check status ls "drop a" watch top; do
		refused "$what" "$cmd" "$@"
	done
	expect_gone out; expect_gone .tend/store
}

# nested directory targets: app b's entries land in app a's target
cat > tend.conf <<'CONF'
[app "a"]
	source = src
	target = dir:out
[app "b"]
	source = docs
	target = dir:out/sub
CONF
refused_everywhere "dir in dir" \
	'tend.conf:6: app.b.target: dir:out/sub is inside dir:out, the target of app "a" (tend.conf:3)'

# a file target inside a directory target
cat > tend.conf <<'CONF'
[app "a"]
	source = src
	target = dir:out
[app "b"]
	source = docs
	declare = exec cat
	target = file:out/a.md
CONF
refused_everywhere "file in dir" \
	'tend.conf:7: app.b.target: file:out/a.md is inside dir:out, the target of app "a" (tend.conf:3)'

# two aggregates writing one file
cat > tend.conf <<'CONF'
[app "a"]
	source = src
	declare = exec cat
	target = file:out
[app "b"]
	source = docs
	declare = exec cat
	target = file:out
CONF
refused "one file" sync \
	'tend.conf:8: app.b.target: file:out is file:out, the target of app "a" (tend.conf:4)'
expect_gone out

# through a symbolic link to a directory
mkdir out; ln -s out link
cat > tend.conf <<'CONF'
[app "a"]
	source = src
	target = dir:out
[app "b"]
	source = docs
	target = dir:link/sub
CONF
refused "symlink" sync \
	'tend.conf:6: app.b.target: dir:link/sub is inside dir:out, the target of app "a" (tend.conf:3)'
[ -z "$(ls out)" ] || fail "symlink: something written into out/"
rm -rf out link

# git: one repository, one ref, nested prefixes or a whole tree
cat > tend.conf <<'CONF'
[app "a"]
	source = src
	target = git:repo
	ref = refs/heads/pages
	prefix = site
[app "b"]
	source = docs
	target = git:repo/.git
	ref = refs/heads/pages
	prefix = site/x
[app "c"]
	source = docs
	target = git:./repo
	ref = refs/heads/pages
CONF
refused "git prefixes" sync \
	'tend.conf:10: app.b.prefix: prefix "site/x" of refs/heads/pages in git:repo/.git is inside prefix "site" of app "a" (tend.conf:5)' \
	'tend.conf:14: app.c.ref: the whole tree of refs/heads/pages in git:./repo holds prefix "site" of app "a" (tend.conf:5)'
git -C repo rev-parse -q --verify refs/heads/pages >/dev/null && fail "git prefixes: a commit was written"
# other refs and repositories do not overlap, nor a dir target inside the
# working tree
git init -q repo2
cat > tend.conf <<'CONF'
[app "a"]
	source = src
	target = git:repo
	ref = refs/heads/pages
[app "b"]
	source = docs
	target = git:repo
	ref = refs/heads/other
[app "c"]
	source = docs
	target = git:repo2
	ref = refs/heads/pages
[app "d"]
	source = docs
	target = dir:repo/out
CONF
rm -rf .tend
run sync; expect_rc 0 "git apps side by side"
[ "$(git -C repo show refs/heads/pages:a.md)" = ac ] || fail "git apps side by side: a's commit"
[ "$(git -C repo show refs/heads/other:d.md)" = d ] || fail "git apps side by side: b's commit"
expect_file repo/out/d.md d
rm -rf .tend repo repo2; git init -q repo

# a bad ref: at load time with its line, not at sync time deep in a pass
cat > tend.conf <<'CONF'
[app "g"]
	source = src
	target = git:repo
	ref = refs/heads/a..b
	tag = "latest build"
CONF
refused "bad ref" sync \
	'tend.conf:4: app.g.ref: "refs/heads/a..b" is not a valid git ref' \
	'tend.conf:5: app.g.tag: "latest build" is not a valid git tag name'
refused "bad ref" plan 'tend.conf:4: app.g.ref'
printf '[app "g"]\n\tsource = src\n\ttarget = git:repo\n\tref = pages\n' > tend.conf
refused "ref outside refs/" sync 'tend.conf:4: app.g.ref: "pages" is not a valid git ref: a ref is a full name under refs/'

# feedback loops: a target that is its source, or two apps each writing
# into the other's source
cat > tend.conf <<'CONF'
[app "a"]
	source = src
	target = dir:src
CONF
refused "own source" sync \
	"tend.conf:3: app.a.target: dir:src is the app's own source \"src\" (tend.conf:2)"
cat > tend.conf <<'CONF'
[app "a"]
	source = src
	target = dir:docs/from-src
[app "b"]
	source = docs
	target = dir:src/from-docs
CONF
refused "loop" sync \
	'tend.conf:3: app.a.target: dir:docs/from-src is inside the source "docs" of app "b" (tend.conf:5), whose target dir:src/from-docs is inside the source "src" of this app (tend.conf:2): a feedback loop'
expect_gone docs/from-src; expect_gone src/from-docs
# a pipeline is fine (a target that is the next app's source), and so is
# a target inside the app's own source (the walk skips it)
cat > tend.conf <<'CONF'
[app "root"]
	source = .
	include = *.txt
	target = dir:txt
[app "html"]
	source = src
	target = dir:public
[app "pages"]
	source = public
	target = git:repo
	ref = refs/heads/pages
CONF
printf 't\n' > top.txt
run sync; expect_rc 0 "pipeline"
expect_file txt/top.txt t
[ "$(git -C repo show refs/heads/pages:a.md 2>/dev/null)" = ac ] || fail "pipeline: public/a.md committed"
rm -rf .tend txt public top.txt

# item 6: ';' and '#' in an exec command start a comment and cut it
cat > tend.conf <<'CONF'
[app "e"]
	source = src
	target = dir:out
	declare = exec touch ran; sed 's/a/b/;s/c/d/'
CONF
refused "exec ;" plan \
	"tend.conf:4: app.e.declare: the command is cut at ';'" \
	"the shell would run \"touch ran\"" \
	"declare = \"exec sed 's/a/b/;s/c/d/'\""
expect_gone src/ran
refused "exec ;" sync "tend.conf:4: app.e.declare: the command is cut at ';'"
expect_gone src/ran
cat > tend.conf <<'CONF'
[app "e"]
	source = src
	target = dir:out
	declare = exec sed 's/a/b/;s/c/d/'
CONF
refused "exec quote" plan "tend.conf:4: app.e.declare: the command is cut at ';'" "(with a ' left open)"
cat > tend.conf <<'CONF'
[app "e"]
	source = src
	declare = exec touch ran   # and a comment
	target = dir:out
CONF
refused "exec #" plan "tend.conf:3: app.e.declare: the command is cut at '#'"
expect_gone src/ran
# the advice works: the whole value in double quotes; comments after
# other values, and after a wholly quoted one, stay allowed
cat > tend.conf <<'CONF'
[app "e"]
	source = src   # the sources
	include = *.md ; markdown
	declare = "exec sed 's/a/b/;s/c/d/'"   # quoted: whole
	target = dir:out
CONF
run sync; expect_rc 0 "quoted exec"
expect_file out/a.md bd
rm -rf .tend out
# several bad escapes on a line: one message
printf '[app "e"]\n\tsource = src\n\ttarget = dir:out\n\tdeclare = exec sed s/\\./x/\\q\n' > tend.conf
run plan; expect_rc 2 "bad escapes"
[ "$(printf '%s\n' "$ERR" | grep -c 'unknown escape')" = 1 ] || fail "bad escapes: one message per line, got: $ERR"

# a value checked after parsing names its own line and key, not the
# section's (a new user's trial: "tend.conf:1: app.a: symlinks must be")
cat > tend.conf <<'CONF'
[app "a"]
	source = src
	target = dir:out
	symlinks = follow
	executable = sometimes
CONF
refused "enum values" plan "tend.conf:4: app.a.symlinks: symlinks must be skip, copy or copy-any" \
	"tend.conf:5: app.a.executable: executable must be keep, never or always"
# a name template's placeholder that does not exist (it became part of
# every entry's name)
printf '[app "a"]\n\tsource = src\n\ttarget = dir:out\n\tname = {dir}/{foo}.md\n' > tend.conf
refused "unknown placeholder" plan "tend.conf:4: app.a.name: unknown placeholder {foo}"

# the documented examples load: README's two app blocks together, the
# manual's, and the bundled workspace
ROOT=$HERE/../..
awk '/^```ini/{on=1; next} /^```/{on=0} on' "$ROOT/README.md" > tend.conf
grep -q '^\[app "site"\]' tend.conf && grep -q '^\[app "pages"\]' tend.conf || fail "README's examples not found"
# its connector plugin example: the SQLite one, where the README puts it
if [ -n "${SQLITE_PLUGIN:-}" ]; then
	mkdir -p plugins && cp "$SQLITE_PLUGIN" plugins/tend-sqlite.so
else
	# (built without libsqlite3: the example's plugin is not there)
	awk '/^\[plugin "sqlite"\]/{skip=1} /^\[app "notes"\]/{skip=1}
	     /^\[app "/ && !/notes/{skip=0} !skip' tend.conf > t && mv t tend.conf
fi
run ls; expect_rc 0 "README's example config"
awk '/^\[app "site"\]/{on=1} /^\.RE/{on=0} on' "$ROOT/docs/tend.1" > tend.conf
grep -q 'declare' tend.conf || fail "tend.1's example not found"
run ls; expect_rc 0 "tend.1's example config"
cp -r "$ROOT/examples/workspace" ex; rm -rf ex/.tend ex/public ex/shout ex/public-index.tsv
run -C ex plan; expect_rc 3 "the bundled workspace plans"
rm -rf ex

# an agent given a bad config keeps the previous one
rm -rf .tend out
conf_watch
"$TEND" watch 2>"$WS/agent.err" &
AGENT=$!
$CTL ready || fail "agent ready"
expect_file out/a.md ac
$CTL until "grep -q 'keeping the previous config' '$WS/agent.err'" -- \
	"printf '[app \"b\"]\n\tsource = docs\n\ttarget = dir:out/sub\n' >> tend.conf" ||
	fail "the agent reloads the bad config"
expect_in "$(cat "$WS/agent.err")" 'tend.conf:8: app.b.target: dir:out/sub is inside dir:out, the target of app "w" (tend.conf:5)' "agent reload"
$CTL until '[ "$(cat out/new.md 2>/dev/null)" = new ]' -- 'printf "new\n" > src/new.md' || fail "the agent goes on with the previous config"
expect_gone out/sub
kill -TERM $AGENT; wait $AGENT; AGENT=
# double quotes inside an unquoted exec command are tend.conf's: refused
mkdir -p qsrc; echo "a b" > qsrc/f
cat > tend.conf <<'CONF'
[app "q"]
	source = qsrc
	target = dir:qout
	declare = exec grep "a b"
CONF
run sync; expect_rc 2 "quotes eaten by tend.conf"
expect_in "$ERR" "tend.conf:4: app.q.declare: the double quotes in this exec value are tend.conf's quoting" "named"
expect_gone qout
cat > tend.conf <<'CONF'
[app "q"]
	source = qsrc
	target = dir:qout
	declare = "exec grep \"a b\""
CONF
run sync; expect_rc 0 "the advice works"; expect_file qout/f "a b"
# a single-valued key given twice (here in a repeated section, which
# merges into the first) was the last one silently: both lines are named,
# nothing is written; repeatable keys stay repeatable
rm -rf out .tend
cat > tend.conf <<'CONF'
[app "twice"]
	source = src
	target = dir:out-a
	exclude = x
[app "twice"]
	target = dir:out-b
	exclude = y
CONF
refused_everywhere "a key given twice" "tend.conf:6: app.twice.target: given twice (line 3 sets it already)"
expect_gone out-a; expect_gone out-b
finish
