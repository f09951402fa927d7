#!/bin/sh
# tend sync on 5,000 files is SIGKILLed at varied moments (KILL_ITERS
# times, default 50); after each kill a following sync must succeed, the
# target must equal the source, no temporary file may remain, and
# tend check must report no drift.
. "$(dirname "$0")/lib.sh"
ITERS=${KILL_ITERS:-50}

d=0
while [ $d -lt 50 ]; do
	mkdir -p src/d$d
	f=0
	while [ $f -lt 100 ]; do printf 'file %d %d\n' $d $f > src/d$d/f$f; f=$((f+1)); done
	d=$((d+1))
done
conf_site ""
killed=0
# how long a --full takes here (it reads every file; it rewrote every one
# until it learned to leave what had not drifted): the odd rounds' kills
# land inside it, whatever the build
ms_of() { t0=$(date +%s%N); "$@" >/dev/null 2>&1; t1=$(date +%s%N); echo $(( (t1 - t0) / 1000000 )); }
"$TEND" sync -q >/dev/null 2>&1
fullms=$(ms_of "$TEND" sync -q --full)
printf 'calibrate\n' >> src/d1/f1
incms=$(ms_of "$TEND" sync -q)
# kills land in the first three quarters of a run's time (a run under
# load takes longer; half of them killed is the least this test takes)
fullms=$(( fullms * 3 / 4 )); incms=$(( incms * 3 / 4 ))
[ $fullms -ge 10 ] || fullms=10
[ $fullms -le 999 ] || fullms=999
[ $incms -ge 5 ] || incms=5
i=1
while [ $i -le $ITERS ]; do
	# change something every round so there is work to interrupt
	j=0
	while [ $j -lt 40 ]; do
		n=$(( (i * 131 + j * 17) % 5000 ))
		printf 'round %d\n' $i >> src/d$((n / 100))/f$((n % 100))
		j=$((j+1))
	done
	rm -f src/d$((i % 50))/new$((i - 1))
	printf 'new %d\n' $i > src/d$((i % 50))/new$i
	# odd rounds re-apply all 5,000 entries (--full), even rounds only
	# the changes: kills land anywhere in both
	if [ $((i % 2)) = 1 ]; then full=--full; span=$fullms; else full=; span=$incms; fi
	"$TEND" sync -q $full >/dev/null 2>&1 &
	pid=$!
	ms=$(( (i * 7919) % span ))
	sleep "$(printf '0.%03d' $ms)"
	kill -9 $pid 2>/dev/null && killed=$((killed+1))
	wait $pid 2>/dev/null
	run sync -q; expect_rc 0 "round $i: sync after the kill"
	diff -r src out >/dev/null || fail "round $i: target differs from source"
	tmp=$(find out -name '.tend-*.tmp' | head -1)
	[ -z "$tmp" ] || fail "round $i: temporary file left: $tmp"
	run check -q; expect_rc 0 "round $i: check after the kill ($OUT)"
	[ "$FAILS" = 0 ] || break
	i=$((i+1))
done
echo "kill rounds: $ITERS, killed while running: $killed"
[ $killed -ge $((ITERS / 2)) ] || fail "only $killed of $ITERS rounds were killed mid-sync"
finish
