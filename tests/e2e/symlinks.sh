#!/bin/sh
# Symlinks in a source (issue 15): skipped and counted by default;
# `symlinks = copy` writes them as symlinks (never followed) into a dir
# target and as 120000 entries into a git tree, refusing one that leads
# out of the source unless `symlinks = copy-any`.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
CTL="python3 $HERE/agentctl.py $WS/.tend/agent.sock"
AGENT=
trap '[ -n "$AGENT" ] && { kill -TERM $AGENT 2>/dev/null; wait $AGENT 2>/dev/null; }; chmod -R u+rwx "$WS" 2>/dev/null; rm -rf "$WS"' EXIT

mkdir -p src/d
echo A > src/a; ln -s a src/l1; ln -s ../a src/d/l2
git init -q --bare repo.git
write_conf() {
	cat > tend.conf <<CONF
[app "site"]
	source = src
	target = dir:out
	symlinks = $1
[app "pages"]
	source = src
	target = git:repo.git
	ref = refs/heads/pages
	symlinks = $1
CONF
}
write_conf skip
run sync; expect_rc 0 "default: skip"
expect_in "$OUT" "site: 1 created, 0 updated, 0 deleted, 2 symlinks skipped" "skipped links are reported"
expect_gone out/l1
run sync --json; json_ok "$OUT"; expect_in "$OUT" '"symlinks_skipped": 2' "in --json too"

write_conf copy
run sync; expect_rc 0 "copy"
[ -L out/l1 ] && [ "$(readlink out/l1)" = a ] || fail "out/l1 is not a link to a"
[ -L out/d/l2 ] && [ "$(readlink out/d/l2)" = ../a ] || fail "out/d/l2 is not a link to ../a"
expect_in "$(git -C repo.git ls-tree pages l1)" "120000 blob $(printf a | git hash-object --stdin)	l1" "a 120000 entry of the link's text"
expect_in "$(git -C repo.git ls-tree -r pages d/l2)" "120000" "nested link in git"
run check; expect_rc 0 "no drift"
run plan; expect_rc 0 "converged"
# retargeted by hand: drift, repaired by --full
rm out/l1; ln -s nowhere out/l1
run check; expect_rc 1 "a retargeted link is drift"
expect_in "$OUT" "drift out/l1: the link points elsewhere" "named"
run sync --full; expect_rc 0 "repair"
[ "$(readlink out/l1)" = a ] || fail "not repaired: $(readlink out/l1)"
# a link replaced by a file in the target: drift too
rm out/l1; echo x > out/l1
run check; expect_rc 1 "a file instead of the link"
expect_in "$OUT" "drift out/l1: not a symlink" "named"
run sync --full; [ -L out/l1 ] || fail "the link is not back"
# the source link changes: updated
rm src/l1; ln -s d src/l1
run sync; expect_rc 0 "retarget in the source"
[ "$(readlink out/l1)" = d ] || fail "out/l1 -> $(readlink out/l1), want d"
[ -d out/l1 ] && [ ! -e out/d/l2/x ] || true

# out of the source: refused, named; copy-any copies it
ln -s /etc/passwd src/abs; ln -s ../../x src/d/up
run sync; expect_rc 1 "links out of the source are refused"
expect_in "$ERR" "src/abs: the symlink leads out of the source (to /etc/passwd)" "absolute named"
expect_in "$ERR" "src/d/up: the symlink leads out of the source (to ../../x)" "relative named"
expect_gone out/abs
write_conf copy-any
run sync; expect_rc 0 "copy-any"
[ "$(readlink out/abs)" = /etc/passwd ] || fail "copy-any: out/abs"
[ -f /etc/passwd ] && [ "$(readlink out/d/up)" = ../../x ] || fail "copy-any: out/d/up"
rm src/abs src/d/up
run sync; expect_rc 0 "links deleted"; expect_gone out/abs

# only with declare = copy
cat >> tend.conf <<'CONF'
[app "ex"]
	source = src
	target = dir:ex
	declare = exec cat
	symlinks = copy
CONF
run sync; expect_rc 2 "symlinks = copy with exec"
expect_in "$ERR" "symlinks = copy needs declare = copy" "says why"

# the agent: a link made while it runs
write_conf copy
printf '[tend]\n\tdebounce = 0\n' >> tend.conf
"$TEND" watch 2>"$WS/agent.err" &
AGENT=$!
$CTL ready || fail "agent ready"
$CTL until '[ "$(readlink out/new 2>/dev/null)" = a ]' -- 'ln -s a src/new' || fail "the agent copies a new link"
kill -TERM $AGENT; wait $AGENT; AGENT=
finish
