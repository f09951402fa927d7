#!/bin/sh
# tend init (issue 18): a commented tend.conf that loads and suggests
# what is there; never over an existing one.
. "$(dirname "$0")/lib.sh"
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t

# a git repository with a docs folder
mkdir -p proj/docs proj/zz && echo hello > proj/docs/a.md
git init -q proj
run init proj; expect_rc 0 "init proj"
expect_in "$OUT" "proj/tend.conf (source docs)" "init says what it wrote"
conf=$(cat proj/tend.conf)
expect_in "$conf" '[app "docs"]' "an app named after its source"
expect_in "$conf" "	source = docs" "the usual source folder found"
expect_in "$conf" "	target = dir:public" "a new dir target"
expect_in "$conf" '#[app "pages"]' "a git app, commented out, in a git repository"
run -C proj plan; expect_rc 3 "the written tend.conf loads and plans"
expect_in "$OUT" "+ docs public/a.md" "plan copies docs"
# every commented key loads once uncommented (the git app's below)
sed 's/^# \[tend\]/[tend]/; s/^#\(	[a-z]* = \)/\1/' proj/tend.conf |
	sed '/^#\[app "pages"\]/,$d' > proj/all.conf
run -C proj -c "$WS/proj/all.conf" plan; expect_rc 3 "the template's keys, all uncommented ($ERR)"
# its git app, uncommented, works as written
sed -i 's/^#\[app "pages"\]/[app "pages"]/; s/^#\(	source = docs\)/\1/; s/^#\(	target = git:.git\)/\1/; s/^#\(	ref = \)/\1/; s/^#\(	tag = \)/\1/' proj/tend.conf
run -C proj sync -q; expect_rc 0 "sync with the suggested git app"
[ "$(git -C proj show refs/heads/pages:a.md)" = hello ] || fail "pages branch lacks a.md"
expect_file proj/public/a.md hello
# never over a tend.conf: exit 2, the file untouched
before=$(cat proj/tend.conf)
run init proj; expect_rc 2 "init over a tend.conf"
expect_in "$ERR" "already exists" "says why"
[ "$(cat proj/tend.conf)" = "$before" ] || fail "tend.conf changed by a refused init"

# an empty directory: a template that says to make a source folder
mkdir empty
run -C empty init; expect_rc 0 "init in an empty directory"
expect_in "$(cat empty/tend.conf)" "no folder here yet" "the template says to make one"
expect_not_in "$(cat empty/tend.conf)" "git:" "no git app outside a repository"
run -C empty plan; expect_rc 1 "plan before the source exists"
expect_in "$ERR" "source src is missing" "plan names the folder to make"
mkdir empty/src && echo x > empty/src/x
run -C empty sync -q; expect_rc 0 "then it syncs"
expect_file empty/public/x x
# a folder with an unusual name is found, a name tend.conf cannot hold
# unquoted is not
mkdir -p other/"my notes" other/pages && echo x > other/pages/p
run init other; expect_rc 0 "init other"
expect_in "$(cat other/tend.conf)" "	source = pages" "the first plain folder"
run init nowhere; expect_rc 2 "init of a missing directory"
run init a b; expect_rc 2 "init of two directories"
finish
