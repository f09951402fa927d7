#!/bin/sh
# exec declarations: failures keep the previous entry, timeouts, $TEND_OUT
# many-entry output growing and shrinking, the environment, aggregates.
. "$(dirname "$0")/lib.sh"

mkdir src
printf 'one\n' > src/a.in
printf 'two\n' > src/b.in
old src/*
cat > tend.conf <<'CONF'
[app "up"]
	source = src
	target = dir:out
	name = {stem}.out
	timeout = 2s
	# in git-config syntax ';' starts a comment unless quoted
	declare = "exec if grep -q fail; then echo \"bad input $TEND_PATH\" >&2; exit 3; fi; cat \"$TEND_SOURCE\" | tr a-z A-Z; printf '%s' \"$TEND_APP\" >&2"

CONF
run sync; expect_rc 0 "exec sync"
expect_file out/a.out ONE
expect_file out/b.out TWO

# a failing item keeps its previous entry; the others apply; exit 1
printf 'fail\n' > src/a.in
printf 'three\n' > src/b.in
run sync; expect_rc 1 "failing exec"
expect_file out/a.out ONE
expect_file out/b.out THREE
expect_in "$ERR" "exit status 3: bad input a.in" "stderr of the command in the error"
# fixed: it applies on the next pass
printf 'four\n' > src/a.in
run sync; expect_rc 0 "after the fix"; expect_file out/a.out FOUR

# timeout
cat > tend.conf <<'CONF'
[app "up"]
	source = src
	target = dir:out
	name = {stem}.out
	timeout = 300ms
	declare = "exec if grep -q slow; then sleep 5; fi; tr a-z A-Z"
CONF
printf 'slow\n' > src/b.in
start=$(date +%s)
run sync; expect_rc 1 "timeout"
expect_in "$ERR" "timed out after 300 ms" "timeout message"
[ $(( $(date +%s) - start )) -lt 4 ] || fail "the timeout did not kill the command"
expect_file out/b.out THREE

# $TEND_OUT: zero, one or many entries per item
rm -rf src out .tend; mkdir src
printf '3\n' > src/n
cat > tend.conf <<'CONF'
[app "split"]
	source = src
	target = dir:out
	declare = "exec n=$(cat); mkdir \"$TEND_OUT\"; i=0; while [ $i -lt $n ]; do echo \"part $i\" > \"$TEND_OUT/p$i\"; i=$((i+1)); done"
CONF
run sync; expect_rc 0 "TEND_OUT"
expect_file out/p0 "part 0"; expect_file out/p2 "part 2"
printf '5\n' > src/n
run sync; expect_rc 0 "grows"; expect_file out/p4 "part 4"
printf '1\n' > src/n
run sync; expect_rc 0 "shrinks"
expect_file out/p0 "part 0"; expect_gone out/p1; expect_gone out/p4
printf '0\n' > src/n
run sync; expect_rc 0 "zero entries"; expect_gone out/p0

# what is not a file in $TEND_OUT (a symlink, a FIFO) was left out without
# a word (a new user's trial): the item fails, saying what
printf 'x\n' > src/n
cat > tend.conf <<'CONF'
[app "split"]
	source = src
	target = dir:out
	declare = "exec mkdir \"$TEND_OUT\"; echo f > \"$TEND_OUT/f\"; ln -s f \"$TEND_OUT/l\""
CONF
run sync; expect_rc 1 "a symlink in TEND_OUT"
expect_in "$ERR" "left a symlink in \$TEND_OUT, l: tend declares its files only" "the symlink named"
sed -i 's|ln -s f \\"$TEND_OUT/l\\"|mkfifo \\"$TEND_OUT/p\\"|' tend.conf
run sync; expect_rc 1 "a FIFO in TEND_OUT"
expect_in "$ERR" "1 entry in \$TEND_OUT that is neither a file nor a directory" "the FIFO counted"

# exec items run concurrently (jobs = 2): each command waits until the
# other has started, which only works if they overlap
rm -rf src out .tend; mkdir src marks
printf 'a' > src/a; printf 'b' > src/b
cat > tend.conf <<CONF
[app "par"]
	source = src
	target = dir:out
	jobs = 2
	timeout = 10s
	declare = "exec touch $WS/marks/\$TEND_PATH; i=0; while [ \$(ls $WS/marks | wc -l) -lt 2 ] && [ \$i -lt 100 ]; do sleep 0.05; i=\$((i+1)); done; [ \$i -lt 100 ] && cat"
CONF
run sync; expect_rc 0 "two exec items overlap"
expect_file out/a a; expect_file out/b b

# aggregate: one file from all sources
rm -rf src out .tend; mkdir src
printf 'x' > src/one.md; printf 'y' > src/two.md
cat > tend.conf <<'CONF'
[app "index"]
	source = src
	include = *.md
	declare = "exec for f in \"$@\"; do echo \"$f\"; done"
	target = file:index.txt
CONF
run sync; expect_rc 0 "aggregate"
expect_file index.txt "$(printf 'one.md\ntwo.md')"
printf 'z' > src/three.md
run sync; expect_rc 0 "aggregate again"
expect_file index.txt "$(printf 'one.md\nthree.md\ntwo.md')"
# a source named like an option: `exec cat` failed the whole aggregate
# ("cat: invalid option -- 'd'", a new user's trial); it goes as ./-d.md
printf 'dash\n' > src/-d.md
cat > tend.conf <<'CONF'
[app "index"]
	source = src
	include = *.md
	declare = exec cat
	target = file:index.txt
CONF
run sync; expect_rc 0 "exec cat with a source named -d.md"
expect_file index.txt "$(printf 'dash\nxzy')"
finish
