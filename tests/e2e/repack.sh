#!/bin/sh
# The store rewritten in key order (tend_store_repack): after a sync that
# doubled it and after sync --full, a third smaller, the same rows;
# killed before and after its swap, the store is the old one or the new
# one and every command reads it; a sync that opened the store while
# another one repacked it writes into the new one, not the one replaced.
. "$(dirname "$0")/lib.sh"

mkdir -p src/a src/b src/c
for d in a b c; do
	i=1
	while [ $i -le 1000 ]; do
		echo "file $d $i" > src/$d/f$i.txt
		i=$((i + 1))
	done
done
old src/a/* src/b/* src/c/*
conf_site

size() { stat -c %s .tend/store/data.mdb; }
# what the store says: every state, and the counts
listing() { "$TEND" ls site | sort; "$TEND" status | grep '^site:' | sed 's/;.*//'; }

# (the copy in transactions of 1000 rows, not 65536: several here)
TEND_REPACK_TXN_ROWS=1000 "$TEND" sync -q || fail "cold sync"
# 3000 states, hash order: 1300 bytes each before the repack, ~670 after
[ "$(size)" -lt $((3000 * 900)) ] ||
	fail "a cold sync's store was not repacked: $(size) bytes for 3000 states"
# ... and its signatures are 50 bytes, not 123 (668 bytes a state -> 603)
[ "$(size)" -lt $((3000 * 640)) ] ||
	fail "the store holds $(size) bytes for 3000 states: signatures of version 3?"
expect_gone .tend/store.repack
"$STORE_TOOL" valid .tend/store || fail "the counters are not trusted after the repack"
run check; expect_rc 0 "check after the repack: $OUT"
expect_in "$OUT" "no drift" "check after the repack"
BEFORE=$(listing)
expect_in "$BEFORE" "site: 3001 target states, 0 unsettled" "status after the repack"
run sync; expect_in "$OUT" "site: 0 created, 0 updated, 0 deleted; 3000 files (0 read)" \
	"nothing redone after the repack (signatures kept)"

# killed_repack POINT WHEN: sync --full killed at the repack's failpoint
# POINT; the store at the path still lists what it did, check and a sync
# agree, and the next writer removes what is left in store.repack
killed_repack() {
	TEND_FAILPOINTS="repack~$1=kill" "$TEND" sync --full -q 2>/dev/null
	[ -d .tend/store.repack ] || fail "the kill $2 left nothing in store.repack (did it repack?)"
	[ "$(listing)" = "$BEFORE" ] || fail "store after a kill $2: $(listing)"
	run check; expect_in "$OUT" "no drift" "check after a kill $2"
	run sync; expect_in "$OUT" "site: 0 created, 0 updated, 0 deleted" "sync after a kill $2"
	expect_gone .tend/store.repack
}
# after the copy, before the swap: the old store stays, the copy goes
killed_repack copied "before the swap"
# right after the swap: the new store is in place, the old one goes
killed_repack swapped "after the swap"

# a sync that opened the store while another one repacked it (it waits
# for the write lock meanwhile) writes into the new store
TEND_FAILPOINTS='repack~copied=stop' "$TEND" sync --full -q >/dev/null 2>&1 & A=$!
stopped $A || fail "sync --full did not stop at its repack"
echo "changed" > src/b/f7.txt
"$TEND" sync > "$WS/.b" 2>&1 & B=$!
i=0
while [ $i -lt 100 ] && ! grep -q waiting "$WS/.b"; do sleep 0.05; i=$((i + 1)); done
grep -q waiting "$WS/.b" || fail "the second sync did not wait for the first: $(cat "$WS/.b")"
kill -CONT $A; wait $A || fail "sync --full (repacking) failed"
wait $B || fail "the sync that waited failed: $(cat "$WS/.b")"
expect_in "$(cat "$WS/.b")" "site: 0 created, 1 updated, 0 deleted" "the waiting sync's pass"
expect_file out/b/f7.txt "changed"
run check; expect_in "$OUT" "no drift" "check after a sync that waited on a repack"
run sync; expect_in "$OUT" "site: 0 created, 0 updated, 0 deleted" \
	"the waiting sync's records were kept (not written to the store replaced)"
run plan; expect_in "$OUT" "No changes" "plan after a sync that waited on a repack"

# the agent's first pass of a new workspace repacks too
rm -rf .tend out
printf '[tend]\n\tdebounce = 0\n' > tend.conf.new
cat tend.conf >> tend.conf.new && mv tend.conf.new tend.conf
"$TEND" watch --daemon >"$WS/.d" 2>&1 || fail "watch --daemon: $(cat "$WS/.d")"
run sync; expect_rc 0 "sync beside the agent"
i=0
while [ $i -lt 100 ] && [ "$(size)" -ge $((3000 * 900)) ]; do sleep 0.1; i=$((i + 1)); done
[ "$(size)" -lt $((3000 * 900)) ] || fail "the agent did not repack: $(size) bytes"
grep -q "store rewritten in key order" .tend/agent.log || fail "the agent's log does not say it repacked"
echo "again" > src/c/f9.txt
run sync; expect_rc 0 "a sync beside the agent after its repack"
# (the agent may have copied it before the sync asked: no count)
expect_file out/c/f9.txt "again"
P=$(cat .tend/agent.pid)
kill -TERM "$P"
i=0
while [ $i -lt 100 ] && kill -0 "$P" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
run check; expect_in "$OUT" "no drift" "check after the agent repacked"
run status; expect_in "$OUT" "site: 3001 target states, 0 unsettled" "status after the agent repacked"
finish
