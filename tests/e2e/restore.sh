#!/bin/sh
# A source deleted and brought back with the same content, after the
# delete was interrupted (SIGKILL between the unlink and its settle) or
# failed: the next sync re-creates the entry, and plan and check then
# tell the truth about the bytes on disk (issue 14).
. "$(dirname "$0")/lib.sh"
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t

git init -q --bare repo.git
mkdir -p src
cat > tend.conf <<'CONF'
[app "site"]
	source = src
	target = dir:out
[app "gen"]
	source = src
	declare = exec sed s/^/gen:/
	target = dir:gen
[app "pub"]
	source = src
	target = git:repo.git
	ref = refs/heads/pages
CONF
printf 'A\n' > src/a.md; printf 'B\n' > src/b.md
run sync -q; expect_rc 0 "first sync"

converged() {
	expect_file out/a.md A; expect_file out/b.md B
	expect_file gen/a.md gen:A; expect_file gen/b.md gen:B
	[ "$(git -C repo.git show refs/heads/pages:a.md 2>&1)" = A ] ||
		fail "$1: a.md missing from refs/heads/pages"
	run plan; expect_rc 0 "$1: plan"
	expect_in "$OUT" "No changes" "$1: plan"
	run check -q; expect_rc 0 "$1: check ($OUT)"
}

# killed at the settle that follows the deletes (the unlinks ran)
cp src/a.md a.saved; rm src/a.md
TEND_FAILPOINTS='lmdb-commit~settle@2=kill' "$TEND" sync >/dev/null 2>&1
[ $? = 137 ] || fail "the failpoint should kill the sync"
expect_gone out/a.md
cp a.saved src/a.md
run sync -q; expect_rc 0 "sync after the restore"
converged "after a killed delete"

# the delete itself fails (its unlink, after nothing was written)
rm src/a.md
TEND_FAILPOINTS='unlink~a.md=EACCES' "$TEND" sync -q >/dev/null 2>&1
cp a.saved src/a.md
run sync -q; expect_rc 0 "sync after a failed delete and a restore"
converged "after a failed delete"

# the same file back under another name, after a killed delete
rm src/a.md
TEND_FAILPOINTS='lmdb-commit~settle@2=kill' "$TEND" sync >/dev/null 2>&1
cp a.saved src/c.md; cp a.saved src/a.md
run sync -q; expect_rc 0 "sync after a restore under two names"
expect_file out/c.md A; expect_file gen/c.md gen:A
converged "after a restore under two names"

# a tend killed inside libgit2's ref update leaves refs/heads/pages.lock:
# the kill comes at the update (the lock it takes and the commit it
# writes are listed by then), the lock file stands for libgit2's
# half-done write: empty, or with tend's commit in it. The next sync
# clears it and commits. A lock with anything else in it is another
# program's, even in a lock tend listed (a git that took the ref after
# tend died): kept and named, never broken.
for how in empty ours theirs; do
	printf 'A2 %s\n' $how > src/a.md
	TEND_FAILPOINTS='git-ref-update=kill' "$TEND" sync >/dev/null 2>&1
	[ $? = 137 ] || fail "$how: the git-ref-update failpoint should kill the sync"
	listed=$(sed -n 's|.*/refs/heads/pages.lock ||p' .tend/git-locks)
	case $how in
	empty) : > repo.git/refs/heads/pages.lock ;;
	ours) echo "$listed" > repo.git/refs/heads/pages.lock ;;
	theirs) git -C repo.git rev-parse refs/heads/pages > repo.git/refs/heads/pages.lock ;;
	esac
	run sync
	if [ $how = theirs ]; then
		expect_rc 1 "theirs: a git's lock in a listed path fails the app"
		expect_in "$ERR" "pages.lock exists" "theirs: the lock is named"
		[ -e repo.git/refs/heads/pages.lock ] || fail "theirs: another program's lock was broken"
		rm repo.git/refs/heads/pages.lock
		run sync -q; expect_rc 0 "theirs: sync once the lock is gone"
	else
		expect_rc 0 "$how: sync after a kill that left the ref's lock"
		expect_in "$ERR" "pages.lock, left by an interrupted tend" "$how: the lock's removal is said"
	fi
	expect_gone repo.git/refs/heads/pages.lock
	[ "$(git -C repo.git show refs/heads/pages:a.md)" = "A2 $how" ] || fail "$how: the commit after the lock"
done
# the tend that left the lock is dead but still seen: a zombie not yet
# reaped (an agent's push child, killed with the agent, until init reaps
# it). Its locks are a dead process's: cleared, not "failed to lock"
# (the agent torture, seed 1796513305)
printf 'A2 zombie\n' > src/a.md
TEND_FAILPOINTS='git-ref-update=kill' "$TEND" sync >/dev/null 2>&1
[ $? = 137 ] || fail "zombie: the git-ref-update failpoint should kill the sync"
: > repo.git/refs/heads/pages.lock
python3 - "$TEND" <<'PY' || fail "zombie: the sync with a zombie's lock"
import os, subprocess, sys, time
pid = os.fork()
if pid == 0:
    os._exit(0)
time.sleep(0.2)   # a zombie now: this process does not reap it yet
lines = open(".tend/git-locks").read().splitlines()
open(".tend/git-locks", "w").write("\n".join([str(pid)] + lines[1:]) + "\n")
r = subprocess.run([sys.argv[1], "sync"], stderr=subprocess.PIPE)
os.waitpid(pid, 0)
err = r.stderr.decode()
if r.returncode != 0 or "left by an interrupted tend" not in err:
    sys.exit("exit %d: %s" % (r.returncode, err))
PY
expect_gone repo.git/refs/heads/pages.lock
[ "$(git -C repo.git show refs/heads/pages:a.md)" = "A2 zombie" ] || fail "zombie: the commit after the lock"
printf 'A3\n' > src/a.md
: > repo.git/refs/heads/pages.lock
run sync; expect_rc 1 "a foreign lock fails the git app"
expect_in "$ERR" "pages.lock" "the foreign lock is named"
[ -e repo.git/refs/heads/pages.lock ] || fail "a foreign lock was broken"
rm repo.git/refs/heads/pages.lock
run sync -q; expect_rc 0 "sync once the foreign lock is gone"
[ "$(git -C repo.git show refs/heads/pages:a.md)" = A3 ] || fail "the commit after the foreign lock"

# a kill after a new source's component committed but before the source
# rows a full pass writes after the run: the next pass runs it again (its
# memo would leave what it declared unknown), so check finds no stray in
# an exclusive target and the manifest lists it
rm -rf .tend out src && mkdir src && echo a > src/a && echo b > src/b
cat > tend.conf <<'CONF'
[app "site"]
	source = src
	target = dir:out
	exclusive = true
	manifest = true
CONF
run sync -q; expect_rc 0 "exclusive app"
for n in 1 2 3 4; do
	echo "new $n" > src/new$n
	TEND_FAILPOINTS="lmdb-commit~settle@$n=kill" "$TEND" sync >/dev/null 2>&1
	run sync; expect_rc 0 "sync after a kill at settle $n"
	run check; expect_rc 0 "settle $n: no drift (no false stray)"
	grep -q "new$n" out/.tend-manifest || fail "settle $n: the manifest lacks new$n"
	run plan; expect_rc 0 "settle $n: plan"
done

# a drop killed halfway, then a sync: the app is still declared, so every
# entry comes back (the drop forgot the sources' rows first: nothing lets
# the sync skip a source whose entry the drop deleted)
rm -rf .tend out src && mkdir src && echo a > src/a && echo b > src/b && echo c > src/c
conf_site
run sync -q; expect_rc 0 "before the killed drop"
sleep 2   # out of the racy window: the next sync trusts the signatures
run sync -q; expect_rc 0 "the signatures trusted"
TEND_FAILPOINTS='unlink@2=kill' "$TEND" drop site >/dev/null 2>&1
run sync; expect_rc 0 "sync after a killed drop"
expect_file out/a a; expect_file out/b b; expect_file out/c c
run plan; expect_rc 0 "plan after the killed drop and a sync"
expect_in "$OUT" "No changes" "plan says so"
run check; expect_rc 0 "no drift after the killed drop and a sync"

# a repair by sync --full that fails is not forgotten: the state stays
# unsettled, plan shows it, the next plain sync retries it
rm -rf .tend out src && mkdir src && echo a > src/a.txt
conf_site
run sync -q; expect_rc 0 "before the failed repair"
echo tampered > out/a.txt
TEND_FAILPOINTS=write=EIO "$TEND" sync --full >/dev/null 2>&1
run plan; expect_rc 3 "plan after a failed repair"
expect_in "$OUT" "~ site out/a.txt" "the repair is pending"
run sync; expect_rc 0 "a plain sync retries the repair"
expect_file out/a.txt a
run check; expect_rc 0 "no drift after the retried repair"

# a sync --full killed halfway, then a plain sync: nothing is left
# unsettled under a source kept without a look
rm -rf .tend out src && mkdir src
for i in 1 2 3 4 5 6 7 8; do echo $i > src/f$i; done
conf_site
run sync -q; expect_rc 0 "before the killed --full"
sleep 2; run sync -q; expect_rc 0 "signatures trusted"
TEND_FAILPOINTS='rename@3=kill' "$TEND" sync --full >/dev/null 2>&1
run sync; expect_rc 0 "a plain sync after the killed --full"
run check; expect_rc 0 "no drift after the killed --full and a sync"
run status; expect_in "$OUT" "0 unsettled" "nothing unsettled"
# a killed process's exec outputs (state/tmp/<pid>/...) are never another
# pass's: pids are reused, and a new process with the dead one's pid took
# its TEND_OUT directory, outputs and all (the torture, seed 9: a `gen`
# entry declared from `multi`'s leftovers of another source)
rm -rf .tend out gen src && mkdir src
echo x > src/one.txt
cat > tend.conf <<'CONF'
[app "gen"]
	source = src
	declare = exec sed s/^/gen:/
	target = dir:gen
CONF
mkdir -p .tend/tmp
# the next pids (likely the sync's own), and pids of processes that have
# exited (certainly dead: the sweep must remove theirs)
last=$(cat /proc/sys/kernel/ns_last_pid 2>/dev/null || echo 100)
dead="$(sh -c 'echo $$') $(sh -c 'echo $$') $(sh -c 'echo $$')"
pids="$(seq $((last + 1)) $((last + 400))) $dead"
(cd .tend/tmp && for p in $pids; do echo $p/1/one.txt.d; done | xargs mkdir -p)
for p in $pids; do echo stale > .tend/tmp/$p/1/one.txt.d/a; done
run sync -q; expect_rc 0 "sync beside a dead process's exec outputs"
expect_file gen/one.txt gen:x
[ -z "$(find gen -type f ! -name one.txt)" ] ||
	fail "a dead process's exec outputs declared: $(find gen -type f)"
# (a directory of the next pids may stay: another process may have one)
for p in $dead; do
	[ ! -e .tend/tmp/$p ] || fail "dead process $p's exec outputs kept"
done
# status after a killed agent: its passes applied, so "never synced" is
# not true (an agent keeps each pass in the store as the pass settles;
# a request to it, here "ready"'s status, settles the last one)
rm -rf .tend out gen src && mkdir src && echo x > src/x
printf '[app "site"]\n\tsource = src\n\ttarget = dir:out\n' > tend.conf
run status; expect_in "$OUT" "site: 0 target states, 0 unsettled; never synced" "a new app"
"$TEND" watch 2>/dev/null &
agent=$!
python3 "$(dirname "$0")/agentctl.py" "$WS/.tend/agent.sock" ready || fail "agent ready"
kill -KILL $agent; wait $agent 2>/dev/null
expect_file out/x x
run status
expect_not_in "$OUT" "never synced" "status after a killed agent"
expect_in "$OUT" "site: 2 target states, 0 unsettled; last pass " "shows the agent's pass"
expect_in "$OUT" ": 1 created, 0 updated, 0 deleted;" "the agent's pass"
# an apply killed after its pending record, then the source's declaration
# fails: the state stays unsettled (nothing declares a value to settle
# it with), check says so, and the first pass whose declaration succeeds
# settles it (the agent torture, seed 809815)
rm -rf .tend out gen src && mkdir src && echo x > src/x
printf 'c=$(cat)\ncase "$c" in FAIL*) exit 3;; esac\necho "gen:$c"\n' > gen.sh
printf '[app "gen"]\n\tsource = src\n\tdeclare = exec sh ../gen.sh\n\ttarget = dir:gen\n' > tend.conf
TEND_FAILPOINTS='rename@1=kill' "$TEND" sync >/dev/null 2>&1
[ $? = 137 ] || fail "the failpoint should kill the first apply"
expect_gone gen/x
echo FAIL > src/x
run sync; expect_rc 1 "the declaration fails"
run check; expect_rc 1 "check: the interrupted apply is unsettled"
expect_in "$OUT" "drift gen/x: a failed or interrupted apply" "check names it"
echo y > src/x
run sync; expect_rc 0 "the declaration succeeds again"
expect_file gen/x gen:y
run check; expect_rc 0 "settled"
run plan; expect_rc 0 "nothing pending"
# the pass's sinks wrote, then its settle failed: the states are unsettled
# but their targets hold what the pass wrote; check reads them and finds
# no drift (it used to say "a failed or interrupted apply" of bytes that
# were right), a changed target is still drift, and the next sync
# settles them. (The first settling commit is the container's, the
# second the files'.)
for target in dir git; do
	rm -rf .tend out src repo.git && mkdir src && git init -q --bare repo.git
	printf 'one\n' > src/a.md; printf 'two\n' > src/b.md
	if [ $target = dir ]; then
		printf '[app "site"]\n\tsource = src\n\ttarget = dir:out\n' > tend.conf
	else
		printf '[app "site"]\n\tsource = src\n\ttarget = git:repo.git\n\tref = refs/heads/pages\n' > tend.conf
	fi
	body() { if [ $target = dir ]; then cat "out/$1"; else git -C repo.git show "refs/heads/pages:$1"; fi; }
	TEND_FAILPOINTS='lmdb-commit~settle@2' run sync
	expect_rc 1 "$target: the settle fails"
	expect_in "$OUT" "site: 2 created" "$target: the report counts what the sink wrote"
	[ "$(body a.md)" = one ] || fail "$target: the pass wrote a.md"
	run status
	expect_in "$OUT" "site: 3 target states, 2 unsettled" "$target: status: unsettled"
	run check; expect_rc 0 "$target: check: unsettled and right is no drift"
	expect_in "$OUT" "no drift" "$target: check says so"
	if [ $target = dir ]; then
		# no write of b.md was confirmed: bytes that are none of
		# its records are not known to be tend's, so they are in
		# the way (owner.sh), not overwritten
		printf 'changed\n' > out/b.md
		run check; expect_rc 1 "$target: check: unsettled and changed is drift"
		expect_in "$OUT" "drift out/b.md: in the way" "$target: check names it"
		run sync; expect_rc 1 "$target: the changed file stays"
		expect_file out/b.md changed
		rm out/b.md
	fi
	run sync; expect_rc 0 "$target: the next sync"
	[ "$(body b.md)" = two ] || fail "$target: b.md after the next sync"
	run status
	expect_in "$OUT" "site: 3 target states, 0 unsettled" "$target: status: settled"
	run check; expect_rc 0 "$target: settled"
done
finish
