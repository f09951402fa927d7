# Shared helpers for the end-to-end tests: each test gets a fresh
# workspace in a temp dir, removed on exit.
set -u
TEND=${TEND:?path to the tend binary}
WS=$(mktemp -d "${TMPDIR:-/tmp}/tend-e2e-XXXXXX")
trap 'chmod -R u+rwx "$WS" 2>/dev/null; rm -rf "$WS"' EXIT
cd "$WS"
FAILS=0

fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
pass() { :; }
t() { "$TEND" "$@"; }
# run: capture stdout, stderr and the exit code
run() { OUT=$("$TEND" "$@" 2>"$WS/.err"); RC=$?; ERR=$(cat "$WS/.err"); }
expect_rc() { [ "$RC" = "$1" ] || fail "$2: exit $RC, want $1 (stderr: $ERR)"; }
expect_file() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ] || fail "$1 should hold '$2', has '$(cat "$1" 2>/dev/null || echo '<missing>')'"; }
expect_gone() { [ ! -e "$1" ] && [ ! -L "$1" ] || fail "$1 should not exist"; }
expect_in() { case "$1" in *"$2"*) ;; *) fail "$3: '$2' not in: $1";; esac; }
expect_not_in() { case "$1" in *"$2"*) fail "$3: '$2' in: $1";; esac; }
json_ok() { printf '%s' "$1" | python3 -c 'import json,sys; json.load(sys.stdin)' || fail "not JSON: $1"; }
# Out of the racy window: an old mtime, and a ctime 60 ms in the past
# (a file changed within 50 ms of a scan is read again next time).
old() { touch -d '2001-01-01 00:00:00' "$@"; sleep 0.06; }
finish() { if [ "$FAILS" = 0 ]; then echo "1 passed, 0 failed"; exit 0; else echo "0 passed, 1 failed ($FAILS assertions)"; exit 1; fi; }

# wait until a process is stopped (state T) by a failpoint's SIGSTOP
stopped() {
	i=0
	while [ $i -lt 400 ]; do
		[ "$(sed "s/.*) //" "/proc/$1/stat" 2>/dev/null | cut -c1)" = T ] && return 0
		sleep 0.05; i=$((i+1))
	done
	return 1
}

# parked FAILPOINTS FILE CONTENT: run `tend sync` parked at a failpoint
# (=stop), write CONTENT to FILE meanwhile, let it go on; PRC is its exit
# code, POUT what it printed
parked() {
	TEND_FAILPOINTS=$1 "$TEND" sync >"$WS/.parked" 2>&1 & _bg=$!
	if stopped $_bg; then
		printf '%s\n' "$3" > "$2"
	else
		fail "the sync did not reach its failpoint $1"
	fi
	kill -CONT $_bg; wait $_bg; PRC=$?; POUT=$(cat "$WS/.parked")
}

conf_site() {
	cat > tend.conf <<CONF
[app "site"]
	source = src
	target = dir:out
$*
CONF
}

# the agent tests' workspace: one copy app "w", src -> out, no debounce
conf_watch() {
	cat > tend.conf <<'CONF'
[tend]
	debounce = 0
[app "w"]
	source = src
	target = dir:out
CONF
}
