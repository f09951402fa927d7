#!/bin/sh
# push = REMOTE: a bare repository as a file:// remote, git daemon on
# 127.0.0.1 for git://, a pre-receive hook that refuses, another clone
# pushing between passes (no force: every remote update a fast-forward),
# a remote unreachable and back (sync, and the agent by itself), a kill
# between the commit and the push.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
CTL="python3 $HERE/agentctl.py $WS/.tend/agent.sock"
DAEMON=; AGENT=; HTTPD=
stop_daemon() { [ -n "$DAEMON" ] && kill "$DAEMON" 2>/dev/null && wait "$DAEMON" 2>/dev/null; DAEMON=; }
stop_agent() { [ -n "$AGENT" ] && kill -TERM "$AGENT" 2>/dev/null && wait "$AGENT" 2>/dev/null; AGENT=; }
stop_httpd() { [ -n "$HTTPD" ] && kill "$HTTPD" 2>/dev/null && wait "$HTTPD" 2>/dev/null; HTTPD=; }
trap 'stop_agent; stop_daemon; stop_httpd; chmod -R u+rwx "$WS" 2>/dev/null; rm -rf "$WS"' EXIT
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t
export GIT_CONFIG_NOSYSTEM=1 HOME="$WS/home"; mkdir -p "$HOME"
GIT_DAEMON=$(git --exec-path)/git-daemon

# poll for a condition (no fixed sleeps): up to 20 s
wait_for() {
	i=0
	while ! eval "$1"; do
		i=$((i + 1)); [ $i -gt 400 ] && return 1
		sleep 0.05
	done
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
start_daemon() {
	"$GIT_DAEMON" --export-all --enable=receive-pack --reuseaddr \
	    --base-path="$WS/srv" --port="$PORT" --listen=127.0.0.1 "$WS/srv" 2>"$WS/daemon.err" &
	DAEMON=$!
	wait_for 'git ls-remote "git://127.0.0.1:$PORT/site.git" >/dev/null 2>&1' || fail "git daemon did not start: $(cat "$WS/daemon.err")"
}
# the remote's ref, and its file list
rlog() { git --git-dir="$1" rev-parse -q --verify refs/heads/pages 2>/dev/null; }
rfiles() { git --git-dir="$1" ls-tree -r --name-only refs/heads/pages 2>/dev/null | tr '\n' ' '; }
local_tip() { git -C repo rev-parse refs/heads/pages; }
# every update of the remote's ref (its reflog) went forward: the old
# value an ancestor of the new one
all_ff() {
	git -C "$1" reflog show --format='%H' refs/heads/pages > "$WS/.rl" 2>/dev/null || return 1
	[ "$(wc -l < "$WS/.rl")" -ge 2 ] || return 1
	newer=
	while read -r h; do
		if [ -n "$newer" ] && ! git -C "$1" merge-base --is-ancestor "$h" "$newer"; then
			echo "$h -> $newer is not a fast-forward" >&2; return 1
		fi
		newer=$h
	done < "$WS/.rl"
}
# a member of the app's "push" in status --json (null: None), read with
# sed: a python per call costs seconds on a loaded machine
push_json() {
	run status --json
	P=$(printf '%s' "$OUT" | tr -d '\n' | sed -n 's/.*"push": {\(.*\)/\1/p')
	case $1 in
	error) case "$P" in *'"error": null'*) echo None;; *) printf '%s\n' "${P#*\"error\": }";; esac;;
	*) printf '%s' "$P" | sed -n "s/.*\"$1\": \([0-9a-z]*\).*/\1/p";;
	esac
}

git init -q --bare repo
git init -q --bare remote.git; git -C remote.git config core.logAllRefUpdates true
mkdir src; printf 'a\n' > src/a.txt
conf() {
	cat > tend.conf <<CONF
[app "pages"]
	source = src
	target = git:repo
	ref = refs/heads/pages
	prefix = site
	tag = latest
	push = $1
CONF
}

# ---- config: push is checked at load, naming file:line:key ----
cat > tend.conf <<'CONF'
[app "d"]
	source = src
	target = dir:out
	push = origin
[app "g"]
	source = src
	target = git:repo
	push = bad name
[app "h"]
	source = src
	target = git:repo
	ref = refs/heads/h
	push-ref = refs/heads/x
CONF
run sync; expect_rc 2 "push keys refused"
expect_in "$ERR" "tend.conf:4: app.d.push: push needs a git: target" "push on a dir target"
expect_in "$ERR" "tend.conf:8: app.g.push:" "a push that is neither a name nor a URL"
expect_in "$ERR" "tend.conf:13: app.h.push-ref: push-ref without push" "push-ref alone"
expect_gone out

# a remote's name the repository does not have: said, nothing lost
conf nosuch
run sync; expect_rc 1 "unknown remote"
expect_in "$ERR" "push to nosuch failed: the repository has no such remote" "unknown remote named"
[ -n "$(local_tip)" ] || fail "the local commit is made all the same"
git -C repo remote add origin "file://$WS/remote.git"

# ---- file:// remote: pushed after the pass ----
conf origin
run sync; expect_rc 0 "sync pushes to a file:// remote"
[ "$(rlog remote.git)" = "$(local_tip)" ] || fail "the remote has the local tip"
[ "$(rfiles remote.git)" = "site/a.txt " ] || fail "remote files: $(rfiles remote.git)"
[ "$(git -C repo rev-parse refs/remotes/origin/pages)" = "$(local_tip)" ] || fail "tracking ref after the push"
[ "$(push_json ahead)" = 0 ] || fail "ahead after a push: $(push_json ahead)"
[ "$(push_json error)" = None ] || fail "no error after a push"
[ "$(push_json pushed)" != 0 ] || fail "the push's time is kept"
run status; expect_in "$OUT" "push origin refs/heads/pages: 0 ahead, 0 behind; last pushed" "status text"
run sync --json; expect_rc 0 "sync --json"; json_ok "$OUT"
expect_in "$OUT" '"push": {"remote": "origin", "ref": "refs/heads/pages", "ahead": 0' "sync --json has the push"

# ---- another clone pushes between two passes: merged, never forced ----
tmp=$WS/other; git clone -q remote.git "$tmp" 2>/dev/null; git -C "$tmp" checkout -q pages
printf 'theirs\n' > "$tmp/THEIRS"; printf 'mine?\n' > "$tmp/site/theirs.txt"
git -C "$tmp" add -A; git -C "$tmp" commit -qm theirs; git -C "$tmp" push -q origin pages
theirs=$(git -C "$tmp" rev-parse HEAD)
printf 'b\n' > src/b.txt; printf 'a2\n' > src/a.txt
run sync; expect_rc 0 "sync onto a remote that moved"
[ "$(rfiles remote.git)" = "THEIRS site/a.txt site/b.txt site/theirs.txt " ] || fail "both sides' files on the remote: $(rfiles remote.git)"
[ "$(git --git-dir=remote.git show refs/heads/pages:site/a.txt)" = a2 ] || fail "tend's change on the remote"
git --git-dir=remote.git merge-base --is-ancestor "$theirs" refs/heads/pages || fail "their commit is kept"
[ "$(rlog remote.git)" = "$(local_tip)" ] || fail "local and remote agree after the merge"
all_ff remote.git || fail "a remote update was not a fast-forward: $(cat "$WS/.rl")"
[ "$(git -C repo rev-parse refs/tags/latest)" = "$(local_tip)" ] || fail "tend's tag follows the merge"
run check; expect_rc 0 "no drift after the merge"
# a third round: they push again, and tend deletes one of its entries
printf 'more\n' > "$tmp/MORE"; git -C "$tmp" pull -q --no-rebase origin pages 2>/dev/null
git -C "$tmp" add -A; git -C "$tmp" commit -qm more; git -C "$tmp" push -q origin pages
rm src/b.txt
run sync; expect_rc 0 "a delete onto a remote that moved"
[ "$(rfiles remote.git)" = "MORE THEIRS site/a.txt site/theirs.txt " ] || fail "after a delete: $(rfiles remote.git)"
all_ff remote.git || fail "not a fast-forward: $(cat "$WS/.rl")"
git -C repo fsck --strict >/dev/null 2>&1 || fail "fsck of the local repository"
git -C remote.git fsck --strict >/dev/null 2>&1 || fail "fsck of the remote"

# exclusive: the merge takes tend's prefix whole (their stray file under
# it goes), and keeps what they have outside it
mkdir -p ex/src; printf 'e\n' > ex/src/e.txt
git init -q --bare ex/repo; git init -q --bare ex/remote.git
printf '[app "x"]\n\tsource = src\n\ttarget = git:repo\n\tref = refs/heads/pages\n\tprefix = site\n\texclusive = true\n\tpush = file://%s/ex/remote.git\n' "$WS" > ex/tend.conf
run -C ex sync; expect_rc 0 "an exclusive app pushes"
git clone -q ex/remote.git ex/other 2>/dev/null; git -C ex/other checkout -q pages
printf 's\n' > ex/other/site/stray; printf 'o\n' > ex/other/OUT
git -C ex/other add -A; git -C ex/other commit -qm stray; git -C ex/other push -q origin pages
printf 'f\n' > ex/src/f.txt
run -C ex sync; expect_rc 0 "an exclusive app onto a remote that moved"
[ "$(rfiles ex/remote.git)" = "OUT site/e.txt site/f.txt " ] || fail "exclusive merge: $(rfiles ex/remote.git)"

# ---- killed between the commit and the push: the next sync pushes ----
printf 'k\n' > src/k.txt
TEND_FAILPOINTS=git-push=kill "$TEND" sync >/dev/null 2>&1; rc=$?
[ $rc = 137 ] || fail "the failpoint should kill the sync, exit $rc"
git -C repo show refs/heads/pages:site/k.txt >/dev/null 2>&1 || fail "the commit was made before the kill"
git --git-dir=remote.git show refs/heads/pages:site/k.txt >/dev/null 2>&1 && fail "pushed before the kill?"
[ "$(push_json ahead)" = 1 ] || fail "one commit ahead after the kill: $(push_json ahead)"
run sync; expect_rc 0 "the sync after the kill"
git --git-dir=remote.git show refs/heads/pages:site/k.txt >/dev/null 2>&1 || fail "the next sync pushed it"
[ "$(push_json ahead)" = 0 ] || fail "nothing ahead after it"

# ---- unreachable, then back: sync says so, keeps the commit ----
mv remote.git remote.moved
printf 'u\n' > src/u.txt
run sync; expect_rc 1 "a push to an unreachable remote"
expect_in "$ERR" "push to origin failed" "the failure is said"
expect_in "$ERR" "the local commit is kept" "and that the commit stays"
git -C repo show refs/heads/pages:site/u.txt >/dev/null 2>&1 || fail "the local commit stands"
[ "$(push_json ahead)" = 1 ] || fail "ahead while unreachable"
case "$(push_json error)" in *"push to origin failed"*) ;; *) fail "status --json: the error: $(push_json error)";; esac
run status; expect_in "$OUT" "push error" "status text: the error"
mv remote.moved remote.git
run sync; expect_rc 0 "back: the next sync pushes"
git --git-dir=remote.git show refs/heads/pages:site/u.txt >/dev/null 2>&1 || fail "pushed once back"
[ "$(push_json error)" = None ] || fail "the error is over"
all_ff remote.git || fail "not a fast-forward: $(cat "$WS/.rl")"

# a URL rewritten by the repository's url.BASE.insteadOf, as git does
git -C repo config "url.file://$WS/.insteadOf" "mirror:"
conf "mirror:remote.git"
printf 'i\n' > src/i.txt
run sync; expect_rc 0 "a push through insteadOf"
git --git-dir=remote.git show refs/heads/pages:site/i.txt >/dev/null 2>&1 || fail "pushed through insteadOf"

# ---- git:// with git daemon; a pre-receive hook that refuses ----
PORT=$(free_port)
mkdir srv; git init -q --bare srv/site.git; git -C srv/site.git config core.logAllRefUpdates true
start_daemon
conf "git://127.0.0.1:$PORT/site.git"
run sync; expect_rc 0 "sync pushes to git://"
[ "$(rlog srv/site.git)" = "$(local_tip)" ] || fail "git:// remote has the tip"
expect_in "$(rfiles srv/site.git)" "site/u.txt" "git:// remote files"
[ "$(git -C repo for-each-ref --format='%(refname)' refs/tend/remotes/pages | wc -l)" = 2 ] || fail "a tracking ref per URL: $(git -C repo for-each-ref refs/tend/remotes)"
cat > srv/site.git/hooks/pre-receive <<'HOOK'
#!/bin/sh
echo "pages are frozen today" >&2
exit 1
HOOK
chmod +x srv/site.git/hooks/pre-receive
before=$(rlog srv/site.git)
printf 'h\n' > src/h.txt
run sync; expect_rc 1 "a push the hook refuses"
expect_in "$ERR" "push to git://127.0.0.1:$PORT/site.git failed" "the refusal is said"
expect_in "$ERR" "pages are frozen today" "with what the hook said"
[ "$(rlog srv/site.git)" = "$before" ] || fail "the remote did not move"
git -C repo show refs/heads/pages:site/h.txt >/dev/null 2>&1 || fail "the local commit stands"
case "$(push_json error)" in *"frozen"*) ;; *) fail "status shows the hook's error: $(push_json error)";; esac
[ "$(push_json ahead)" = 1 ] || fail "ahead after the refusal: $(push_json ahead)"
rm srv/site.git/hooks/pre-receive
run sync; expect_rc 0 "the hook gone: the next sync pushes"
[ "$(rlog srv/site.git)" = "$(local_tip)" ] || fail "pushed after the hook went"
all_ff srv/site.git || fail "git:// not a fast-forward: $(cat "$WS/.rl")"

# ---- the agent: unreachable (daemon stopped), then back: it pushes by
# itself ----
stop_daemon
cat >> tend.conf <<'CONF'
[tend]
	debounce = 0
CONF
"$TEND" watch 2>"$WS/agent.err" &
AGENT=$!
$CTL ready || fail "agent ready"
printf 'w\n' > src/w.txt
wait_for 'git -C repo show refs/heads/pages:site/w.txt >/dev/null 2>&1' || fail "the agent committed"
wait_for '[ "$(push_json error)" != None ]' || fail "the agent's failed push is in status"
[ "$(push_json ahead)" = 1 ] || fail "ahead while the daemon is down"
git --git-dir=srv/site.git show refs/heads/pages:site/w.txt >/dev/null 2>&1 && fail "pushed to a stopped daemon?"
run status --json; expect_in "$OUT" '"pushing"' "the agent's status has the push"
start_daemon
wait_for 'git --git-dir=srv/site.git show refs/heads/pages:site/w.txt >/dev/null 2>&1' || fail "the agent pushed once the remote came back: $(cat "$WS/agent.err")"
wait_for '[ "$(push_json error)" = None ]' || fail "the error is over"
expect_in "$(cat "$WS/agent.err")" "trying again in" "the agent said it would retry"
# a sync through the agent while the remote is down: exit 1, commit kept
stop_daemon
printf 'x\n' > src/x.txt
run sync; expect_rc 1 "sync through the agent, remote down"
expect_in "$ERR" "push to git://127.0.0.1:$PORT/site.git failed" "the agent's sync says the push failed"
git -C repo show refs/heads/pages:site/x.txt >/dev/null 2>&1 || fail "the commit stands"
stop_agent
all_ff srv/site.git || fail "not a fast-forward: $(cat "$WS/.rl")"
# the remote back, a new agent: its catch-up pushes what the last one
# could not, with no change to the sources
start_daemon
"$TEND" watch 2>"$WS/agent2.err" &
AGENT=$!
wait_for 'git --git-dir=srv/site.git show refs/heads/pages:site/x.txt >/dev/null 2>&1' || fail "the next agent pushed: $(cat "$WS/agent2.err")"
[ "$(rlog srv/site.git)" = "$(local_tip)" ] || fail "the remote has the local tip"
stop_agent
stop_daemon

# ---- http with Basic authentication: credentials from git's credential
# helpers (never a prompt) ----
git init -q --bare srv/http.git
python3 "$HERE/githttp.py" "$WS/srv" "$WS/http.port" tend s3cret &
HTTPD=$!
wait_for '[ -s "$WS/http.port" ]' || fail "the http server did not start"
HPORT=$(cat "$WS/http.port")
sed -i "s|^	push = .*|	push = http://127.0.0.1:$HPORT/http.git|" tend.conf
run sync; expect_rc 1 "http without credentials"
expect_in "$ERR" "no credentials for this remote" "said so"
git config --global credential.helper store
printf 'http://tend:s3cret@127.0.0.1:%s\n' "$HPORT" > "$HOME/.git-credentials"
run sync; expect_rc 0 "http with the credential helper's password"
[ "$(rlog srv/http.git)" = "$(local_tip)" ] || fail "pushed over http"
stop_httpd
# ---- two workspaces push to one file:// remote at once: the remote's
# ref only moves by compare-and-swap from the tip a push built on
# (libgit2's local transport wrote it with force: a minute of two agents
# lost 6 of 379 updates), so every update is a fast-forward and both
# apps' files are there at the end ----
mkdir -p race && git init -q --bare race/remote.git
git -C race/remote.git config core.logAllRefUpdates always
for w in 1 2; do
	mkdir -p race/w$w/src
	git clone -q --bare race/remote.git race/w$w/repo.git 2>/dev/null
	printf '[app "a%s"]\n\tsource = src\n\ttarget = git:repo.git\n\tref = refs/heads/main\n\tprefix = p%s\n\tpush = origin\n' $w $w > race/w$w/tend.conf
done
for w in 1 2; do
	(cd race/w$w && i=0 && while [ $i -lt ${PUSH_RACE_ROUNDS:-25} ]; do
		echo "w$w $i" > src/f$((i % 7)); "$TEND" sync -q >/dev/null 2>&1; i=$((i + 1)); done) &
done
wait
for w in 1 2; do (cd race/w$w && "$TEND" sync -q) || fail "race: w$w's last sync"; done
for w in 1 2; do (cd race/w$w && "$TEND" sync -q) || fail "race: w$w's settling sync"; done
for w in 1 2; do
	want=$(cd race/w$w/src && for f in *; do echo "p$w/$f $(git hash-object "$f")"; done | sort)
	got=$(git -C race/remote.git ls-tree -r refs/heads/main "p$w" | awk '{print $4, $3}' | sort)
	[ "$want" = "$got" ] || fail "race: the remote lacks w$w's files: $got"
done
git -C race/remote.git fsck --strict >/dev/null 2>&1 || fail "race: fsck"
prev=; n=0
for h in $(git -C race/remote.git reflog show --format=%H refs/heads/main | tac); do
	[ -z "$prev" ] || git -C race/remote.git merge-base --is-ancestor "$prev" "$h" ||
		fail "race: the remote's ref went from $prev to $h, not a fast-forward"
	prev=$h; n=$((n + 1))
done
echo "push race: $n updates of the remote's ref, each a fast-forward"
# the first push of each to a remote that has no such ref yet, at once:
# "not there" is checked under the ref's lock (libgit2's create without
# force checked it before taking the lock; once in a sanitizer run of
# this file the second first push overwrote the first one's commit).
# The window is inside libgit2, so this cannot force it; ten fresh
# remotes make it likelier
r=0
while [ $r -lt 10 ]; do
	rm -rf race2; mkdir -p race2 && git init -q --bare race2/remote.git
	git -C race2/remote.git config core.logAllRefUpdates always
	for w in 1 2; do
		mkdir -p race2/w$w/src; echo "w$w $r" > race2/w$w/src/f
		git clone -q --bare race2/remote.git race2/w$w/repo.git 2>/dev/null
		printf '[app "a%s"]\n\tsource = src\n\ttarget = git:repo.git\n\tref = refs/heads/main\n\tprefix = p%s\n\tpush = origin\n' $w $w > race2/w$w/tend.conf
	done
	(cd race2/w1 && "$TEND" sync -q >/dev/null 2>&1) & (cd race2/w2 && "$TEND" sync -q >/dev/null 2>&1) & wait
	prev=
	for h in $(git -C race2/remote.git reflog show --format=%H refs/heads/main | tac); do
		[ -z "$prev" ] || git -C race2/remote.git merge-base --is-ancestor "$prev" "$h" ||
			fail "first pushes, round $r: the remote's ref went from $prev to $h, not a fast-forward"
		prev=$h
	done
	r=$((r + 1))
done
finish
