#!/bin/bash
# SPDX-License-Identifier: MIT
# make bench: every benchmark in tests/bench, one after the other, each with --json into $OUT,
# its printed table into $OUT/<name>.log, then tests/bench/report.py writes $OUT/REPORT.md and
# the PNGs. Called by the `bench` target (Makefile.am) with:
#   PYTHON3, PINION_BUILDDIR, PINION_SRCDIR   as for every benchmark
#   OUT            where the JSON, logs, REPORT.md and PNGs go
#   BENCH_QUICK=1  tiny settings (seconds per benchmark: the CI smoke test), not figures to read
#   BENCH_ONLY     names to run (default: all): fleet soak soak-leak zkreg zkreg-batch podsdir identity workload-api
#                  configsync podnet node-watch cluster runtime memory memory-v2 reclaim reclaim-v2 (node-watch,
#                  cluster: need root for their network namespaces, exit 77 without is listed as
#                  skipped; memory-v2, reclaim-v2: the memory and reclaim benchmarks on cgroup v2, in
#                  the VM suite's guest through tests/vm/run; exit 77 there — no QEMU or no
#                  guest image here — is listed, not counted as a failure)
#   SOAK_LEAK_BUILDDIR  an --enable-sanitizers build of the same tree: the soak's leak check runs
#                  there under LeakSanitizer. Without it, in a normal build, the leak check runs
#                  the same soak with the agent under valgrind; in a sanitizer build the soak
#                  itself is the leak check and soak-leak is not run.
#   BENCH_<NAME>_FLAGS, SOAK_FLAGS  appended to the settings below (the last one wins).
# A benchmark that fails does not stop the others; the report lists it. Exit status: 1 if any
# failed, 0 otherwise.
set -u
: "${PYTHON3:=python3}" "${OUT:?}" "${PINION_BUILDDIR:?}" "${PINION_SRCDIR:?}"
BENCH="$PINION_SRCDIR/tests/bench"
ALL="fleet soak soak-leak zkreg zkreg-batch podsdir identity workload-api configsync podnet node-watch cluster runtime memory memory-v2 reclaim reclaim-v2"
ONLY="${BENCH_ONLY:-$ALL}"
export PINION_BUILDDIR PINION_SRCDIR

sanitized() {  # is piniond in this build an ASan build?
	grep -q __asan_init "$1/piniond" 2>/dev/null
}

# The settings per benchmark: full ones sized so that the whole run takes 13-20 minutes on the
# 2-core machine, and the two VM runs about 9 more; quick ones only exercise the path from
# benchmark to report.
if [ "${BENCH_QUICK:-0}" = 1 ]; then
	FLEET="--agents 3 --outage 2s --runs 2 --steady 0.5 --time-limit 30s --backoff-initial 200ms --backoff-max 1s"
	SOAK="--events 600 --rate 1000 --max-pods 40 --bounce-every 200"
	ZKREG="--endpoints 50 --runs 1 --samples 5 --podsdir-samples 3"
	ZKREG_BATCH="--pods 20 --bulk 100 --rate-pods 500 --runs 1"
	PODSDIR="--files 50 --samples 10"
	IDENTITY="--pods 20 --runs 1 --peer-sample 3"
	WORKLOAD_API="--calls 5 --pods 2 --streams 4,10"
	CONFIGSYNC="--files 10 --size 1M --rounds 1 --cycles 20"
	PODNET="--cycles 3"
	NODE_WATCH="--agents 2 --peers 1 --nodes 50 --status-period 10 --warmup 2 --duration 5 --outage 2"
	CLUSTER="--nodes 2 --observers 1 --events 20 --route-rate 50"
	MEMORY="--pods 20 --rounds 1 --settle 0.5"
	MEMORY_V2="--pods 20 --rounds 1 --settle 0.5"
	RUNTIME="--podman-cycles 2 --cri-cycles 3"
	RECLAIM="--reps 1 --limit 32M --stream-factor 2"
	RECLAIM_V2="--reps 1 --limit 32M --stream-factor 2"
else
	FLEET=""
	SOAK="--events 100000"
	# 5 runs of 5,000 creates and deletes each way (zkreg-bench.py's default); the report's
	# headline is the worst run, and every run is listed.
	ZKREG="--runs 5"
	# 5 runs of 250 members after an expiry and 5,000 at start each way (the defaults).
	ZKREG_BATCH="--runs 5"
	PODSDIR=""
	IDENTITY=""
	WORKLOAD_API=""
	CONFIGSYNC=""
	PODNET=""
	# 20 agents with routing = nodes beside 5 without, 2,500 Nodes: about 5 minutes.
	NODE_WATCH=""
	# 50 joins per mode and 2 x 1,000 Node events: about 6 minutes.
	CLUSTER=""
	MEMORY=""
	# One round each way under TCG: about 6 minutes with the boot.
	MEMORY_V2="--rounds 1"
	RUNTIME=""
	RECLAIM="--reps 20"
	# The guest runs under QEMU TCG (5-10x slower than this host): fewer reps, about 3 minutes
	# with the boot.
	RECLAIM_V2="--reps 5"
fi

mkdir -p "$OUT"
rm -f "$OUT"/*.json "$OUT"/*.log "$OUT"/status.txt "$OUT"/REPORT.md "$OUT"/bench-*.png
"$PYTHON3" "$BENCH/report.py" --snapshot "$OUT/machine.json" || exit 1
failed=0

# run NAME SCRIPT ARGS...: one benchmark, timed, its output on the terminal and in the log.
run() {
	local name=$1 script=$2 t0 rc
	shift 2
	case " $ONLY " in *" $name "*) ;; *) return 0 ;; esac
	echo "=== bench $name: $script $* ($(date -u +%H:%M:%S) UTC)"
	t0=$(date +%s.%N)
	"$PYTHON3" "$BENCH/$script" "$@" --json "$OUT/$name.json" 2>&1 | tee "$OUT/$name.log"
	rc=${PIPESTATUS[0]}
	echo "$name $rc $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')" >> "$OUT/status.txt"
	case $rc in
	0) ;;
	77) echo "=== bench $name skipped (see above)" ;;
	*) echo "=== bench $name FAILED (exit $rc)"; failed=1 ;;
	esac
}

# run_vm NAME SCRIPT ARGS...: one benchmark in the VM guest (tests/vm/run: Debian 12, systemd,
# cgroup v2, this tree installed by make install), its JSON copied back through --out. The
# guest has piniond in /usr/sbin, pinionctl in /usr/bin and pinion-cni in /usr/lib/cni; the
# benchmarks find them in PINION_BUILDDIR.
run_vm() {
	local name=$1 script=$2 t0 rc
	shift 2
	case " $ONLY " in *" $name "*) ;; *) return 0 ;; esac
	echo "=== bench $name: $script $* in the VM guest ($(date -u +%H:%M:%S) UTC)"
	t0=$(date +%s.%N)
	rm -rf "$OUT/vm-$name"
	"$PINION_SRCDIR/tests/vm/run" --out "$OUT/vm-$name" --exec "mkdir -p /tmp/pinion-bin &&
		ln -sf /usr/sbin/piniond /usr/bin/pinionctl /usr/lib/cni/pinion-cni /tmp/pinion-bin/ &&
		PINION_BUILDDIR=/tmp/pinion-bin python3 \$PINION_SRCDIR/tests/bench/$script $* --json \$PINION_VM_OUT/$name.json" \
		2>&1 | tee "$OUT/$name.log"
	rc=${PIPESTATUS[0]}
	cp "$OUT/vm-$name/$name.json" "$OUT/$name.json" 2>/dev/null
	echo "$name $rc $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')" >> "$OUT/status.txt"
	case $rc in
	0) ;;
	77) echo "=== bench $name skipped: no VM here (see above)" ;;
	*) echo "=== bench $name FAILED (exit $rc)"; failed=1 ;;
	esac
}

# shellcheck disable=SC2086 # the settings are word lists on purpose
{
run fleet fleet-real.py --builddir "$PINION_BUILDDIR" $FLEET ${BENCH_FLEET_FLAGS:-}
run soak soak.py $SOAK ${SOAK_FLAGS:-}
if [ -n "${SOAK_LEAK_BUILDDIR:-}" ]; then
	PINION_BUILDDIR="$(cd "$SOAK_LEAK_BUILDDIR" && pwd)" run soak-leak soak.py --name soak-leak $SOAK ${SOAK_FLAGS:-}
elif ! sanitized "$PINION_BUILDDIR"; then
	run soak-leak soak.py --name soak-leak --valgrind $SOAK ${SOAK_FLAGS:-}
fi
run zkreg zkreg-bench.py $ZKREG ${BENCH_ZKREG_FLAGS:-}
run zkreg-batch zkreg-batch-bench.py $ZKREG_BATCH ${BENCH_ZKREG_BATCH_FLAGS:-}
run podsdir podsdir-bench.py $PODSDIR ${BENCH_PODSDIR_FLAGS:-}
run identity identity-bench.py $IDENTITY ${BENCH_IDENTITY_FLAGS:-}
run workload-api workload-api-bench.py $WORKLOAD_API ${BENCH_WORKLOAD_API_FLAGS:-}
run configsync configsync-bench.py $CONFIGSYNC ${BENCH_CONFIGSYNC_FLAGS:-}
run podnet podnet-cycles.py $PODNET ${BENCH_PODNET_FLAGS:-}
run node-watch node-watch-fanout.py --builddir "$PINION_BUILDDIR" $NODE_WATCH ${BENCH_NODE_WATCH_FLAGS:-}
run cluster cluster-converge.py $CLUSTER ${BENCH_CLUSTER_FLAGS:-}
run runtime runtime-cycles.py $RUNTIME ${BENCH_RUNTIME_FLAGS:-}
run memory memory-bench.py $MEMORY ${BENCH_MEMORY_FLAGS:-}
run reclaim reclaim-bench.py $RECLAIM ${BENCH_RECLAIM_FLAGS:-}
run_vm memory-v2 memory-bench.py $MEMORY_V2 ${BENCH_MEMORY_V2_FLAGS:-}
run_vm reclaim-v2 reclaim-bench.py $RECLAIM_V2 ${BENCH_RECLAIM_V2_FLAGS:-}
}

jsons=()
for name in $ALL; do
	jsons+=("$OUT/$name.json")
done
"$PYTHON3" "$BENCH/report.py" --machine "$OUT/machine.json" --status "$OUT/status.txt" --out "$OUT" \
	"${jsons[@]}" || failed=1
exit $failed
