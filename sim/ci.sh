#!/usr/bin/env bash
# The simulator's share of CI (issues 3 and 13), for .ci/run to call from
# the repository root: sweeps across the register, membership, contention
# and replication scenarios, every failover script alone and under
# background faults (200 seeds), 300 seeds of the whole cluster under a
# swarm of faults, determinism reruns (register, failover and cluster
# seeds must replay with the same trace hashes), the canaries (which must
# be caught), the canary control (which must pass) and the guard check
# (every guard package guard lists as reached by the sweep must have fired).
# Every sweep runs even when one fails; the failures are listed at the end.
# Porcupine visualisations of failures go to $SIM_OUT (default: a temp
# dir), printed with the replay command.
set -euo pipefail

out="${SIM_OUT:-$(mktemp -d)}"
bin="$(mktemp -d)/fmnode"
go build -o "$bin" ./cmd/fmnode

# Every sweep appends its summary (guards_fired among it) here; the guard
# check at the end reads them all.
sums="$out/summaries.jsonl"
: >"$sums"
# A failing sweep does not stop CI at once: every sweep runs, each failure
# is listed with its failed seeds, and the script fails at the end.
failures=()

# "scenario faults seed trace_hash" for every run line of the table output.
hashes() { awk '$1 ~ /^[0-9]+$/ { print $2, $3, $1, $NF }' | sort; }

# simrun FILE ARGS...: fmnode sim ARGS into FILE (table output), its last
# lines shown; a failure is recorded with the seeds that failed.
simrun() {
	local file="$1"
	shift
	if ! "$bin" sim "$@" --out "$out" --summary-out "$sums" >"$file"; then
		failures+=("fmnode sim $* -> $(grep -m1 '^failed seeds' "$file" || echo 'exit status nonzero')")
	fi
	tail -n "${TAIL:-1}" "$file"
}

# quarantine ARGS...: a seed with a known, documented bug (docs/BENCHMARKS.md,
# "The merged tree (session 8, lead)"): it runs and its verdict is printed,
# but it does not fail CI until the bug is fixed. Keep this list short.
quarantine() {
	echo "quarantined (known bug, not failing CI): fmnode sim $*"
	"$bin" sim "$@" | grep -E '^(runs|failed seeds)' || true
}

sweep() { # scenario faults seeds
	echo "== fmnode sim --scenario $1 --faults $2 --seeds $3"
	TAIL=3 simrun "$out/sweep-$1-$2.txt" --scenario "$1" --faults "$2" --seeds "$3"
	cat "$out/sweep-$1-$2.txt" >>"$out/sweep.txt"
}

# rerun NAME FIRST ARGS...: run ARGS again (no output kept) and require the
# trace hash of every seed to equal FIRST's (a table output of a sweep
# that covers those seeds).
rerun() {
	local name="$1" first="$2"
	shift 2
	"$bin" sim "$@" | hashes >"$out/rerun-$name.txt" || true
	if [ ! -s "$out/rerun-$name.txt" ] ||
		! join -j1 <(awk '{print $1"/"$2"/"$3, $4}' "$out/rerun-$name.txt" | sort) <(hashes <"$first" | awk '{print $1"/"$2"/"$3, $4}' | sort) |
		awk -v want="$(wc -l <"$out/rerun-$name.txt")" '$2 != $3 { bad = 1; print "hash differs:", $0 } END { if (NR != want) { bad = 1; print NR " of " want " reruns matched" }; exit bad }'; then
		echo "FAIL: $name: a seed replayed with another trace hash (nondeterminism)"
		exit 1
	fi
	echo "$name: $(wc -l <"$out/rerun-$name.txt") reruns, same trace hashes"
}

: >"$out/sweep.txt"
sweep register swarm 1..100
sweep register heavy 1..30
sweep register none 1..10
sweep membership swarm 1..60
sweep membership light 1..20
sweep contention swarm 1..10
sweep contention none 1..10
sweep contention-burst swarm 1..5
sweep contention-burst none 1..5
sweep replication swarm 1..20
sweep replication heavy 1..5

# Failover (issue 5): the region drill at a small size, both profiles;
# every seed checks one writer per epoch, epochs, RPO 0, porcupine and
# convergence.
echo "== fmnode sim --scenario region-outage (small, fast and paper profiles)"
TAIL=3 simrun "$out/outage1.txt" --scenario region-outage --seeds 1..4 --partitions 60 --profile fast --outage 2m --duration 2m
# The failover scenarios drive whole nodes (internal/node): the same seeds
# must replay with the same trace hashes.
rerun region-outage "$out/outage1.txt" --scenario region-outage --seeds 1..4 --partitions 60 --profile fast --outage 2m --duration 2m
TAIL=3 simrun "$out/outage-paper.txt" --scenario region-outage --seeds 1..2 --partitions 60 --profile paper --outage 3m --duration 3m

# The other fault scripts (issue 5), small and fast: one node of a region
# (only its partitions move), the write region cut off from the others
# but not from its clients (no acknowledgement after its lease), two
# regions and a witness (RPO 0), and several minutes of flapping links
# (failovers per partition within the hysteresis bound).
echo "== fmnode sim: node-failure, write-region-isolated, two-region, flapping (small, fast profile)"
for sc in node-failure write-region-isolated two-region; do
	simrun "$out/script-$sc.txt" --scenario "$sc" --seeds 1..2 --partitions 60 --profile fast --outage 2m --duration 2m
done
simrun "$out/script-flapping.txt" --scenario flapping --seeds 1..2 --partitions 40 --profile fast --outage 5m --duration 2m

# Issue 5's other scripts, small and fast: failback (false progress found,
# set aside in the conflict record, only the delta shipped against 8 KiB
# of preloaded data per partition; back to the preferred region only
# after a minute of health).
# graceful-drain: an operator drains the write-heavy region (RPO 0, at most
# DrainConcurrency switchovers at once, DrainBurst at once and DrainRate per
# second started), the node driving it restarts a
# third of the way and the drain resumes.
# gray-failure: the write-heavy region's disk stalls while it heartbeats;
# clients' errors and the stalled commit LSN fail it over.
# az-outage: one of three zones of the write-heavy region powered off:
# only the partitions written in that zone move.
echo "== fmnode sim: failback, graceful-drain, gray-failure, az-outage (small, fast profile)"
simrun "$out/script-failback.txt" --scenario failback --seeds 1..2 --partitions 40 --profile fast --outage 1m --duration 1m
simrun "$out/script-graceful-drain.txt" --scenario graceful-drain --seeds 1..2 --partitions 60 --profile fast --outage 1m --duration 1m
simrun "$out/script-gray-failure.txt" --scenario gray-failure --seeds 1..2 --partitions 40 --profile fast --outage 1m --duration 1m
simrun "$out/script-az-outage.txt" --scenario az-outage --seeds 1..2 --partitions 60 --profile fast --outage 1m --duration 1m

# Background faults under the failover scripts (--faults): loss,
# duplication, reordering, delay spikes, every kind of network partition
# and bounded clock drift while the script's fault lasts. 200 seeds over
# every failover script (issue 13 asks for 100 at least), about 95 CPU s.
# Seeds that fail today are not skipped: docs/BENCHMARKS.md ("The guards
# and the CI sweep") lists them.
echo "== failover scenarios with background faults"
simrun "$out/bg-region-outage.txt" --scenario region-outage --faults swarm --seeds 1..30 --partitions 60 --profile fast --outage 2m --duration 2m
for sc in write-region-isolated two-region; do
	simrun "$out/bg-$sc.txt" --scenario "$sc" --faults swarm --seeds 1..20 --partitions 60 --profile fast --outage 2m --duration 2m
done
simrun "$out/bg-failback.txt" --scenario failback --faults swarm --seeds 1..20 --partitions 40 --profile fast --outage 1m --duration 1m
simrun "$out/bg-node-failure-light.txt" --scenario node-failure --faults light --seeds 1..10 --partitions 40 --profile fast --outage 1m --duration 1m
simrun "$out/bg-node-failure.txt" --scenario node-failure --faults swarm --seeds 1..20 --partitions 40 --profile fast --outage 1m --duration 1m
simrun "$out/bg-az-outage.txt" --scenario az-outage --faults swarm --seeds 1..20 --partitions 40 --profile fast --outage 1m --duration 1m
# Seed 7 (quarantined in session 8) runs again: a failover whose proposer
# never heard it commit left the promoted node a follower of the old epoch
# (no write region); the node now reads the register back after an unknown
# outcome and shares a value a conflict brought back (docs/BENCHMARKS.md,
# "Session 9: the node that missed its promotion").
simrun "$out/bg-graceful-drain.txt" --scenario graceful-drain --faults swarm --seeds 1..20 --partitions 60 --profile fast --outage 1m --duration 1m
simrun "$out/bg-gray-failure.txt" --scenario gray-failure --faults swarm --seeds 1..10 --partitions 40 --profile fast --outage 1m --duration 1m
# Seed 10 (quarantined in session 8) runs again: the same bug as
# graceful-drain seed 7 (central's failover committed unheard, east and west
# learned it from their own conflicting CASes and shared it with nobody).
simrun "$out/bg-flapping.txt" --scenario flapping --faults swarm --seeds 1..10 --partitions 40 --profile fast --outage 5m --duration 2m
# Determinism under background faults: every failover script replays.
rerun bg-region-outage "$out/bg-region-outage.txt" --scenario region-outage --faults swarm --seeds 1..30 --partitions 60 --profile fast --outage 2m --duration 2m
rerun bg-node-failure "$out/bg-node-failure.txt" --scenario node-failure --faults swarm --seeds 1..4 --partitions 40 --profile fast --outage 1m --duration 1m
rerun bg-graceful-drain "$out/bg-graceful-drain.txt" --scenario graceful-drain --faults swarm --seeds 1..4 --partitions 60 --profile fast --outage 1m --duration 1m
# The two seeds of the node that missed its promotion replay too.
rerun bg-graceful-drain-7 "$out/bg-graceful-drain.txt" --scenario graceful-drain --faults swarm --seeds 7..7 --partitions 60 --profile fast --outage 1m --duration 1m
rerun bg-flapping-10 "$out/bg-flapping.txt" --scenario flapping --faults swarm --seeds 10..10 --partitions 40 --profile fast --outage 5m --duration 2m
rerun bg-gray-failure "$out/bg-gray-failure.txt" --scenario gray-failure --faults swarm --seeds 1..2 --partitions 40 --profile fast --outage 1m --duration 1m
rerun bg-failback "$out/bg-failback.txt" --scenario failback --faults swarm --seeds 1..3 --partitions 40 --profile fast --outage 1m --duration 1m
rerun bg-az-outage "$out/bg-az-outage.txt" --scenario az-outage --faults swarm --seeds 1..3 --partitions 40 --profile fast --outage 1m --duration 1m

# The whole system (issue 13): 3 regions of 2-3 nodes, strong, session
# and eventual clients, every network fault, region/zone/node outages,
# crashes, pauses, disk stalls, drift and operator actions, a mix per
# seed; every safety check, then liveness. 300 seeds at about 1.1 CPU s
# each (about 330 CPU s, under 3 minutes on two idle cores);
# docs/BENCHMARKS.md has the figures and the seeds that fail today.
echo "== fmnode sim --scenario cluster --faults swarm --seeds 1..300"
TAIL=4 simrun "$out/cluster1.txt" --scenario cluster --faults swarm --seeds 1..300
simrun "$out/cluster-none.txt" --scenario cluster --faults none --seeds 1..2
# Determinism: the same cluster seeds replay with the same trace hashes.
rerun cluster "$out/cluster1.txt" --scenario cluster --faults swarm --seeds 1..10
# Scripts aimed at the guards' edges (issue 13), a few seeds each (about
# 1.6 CPU s a seed): drift at MaxClockDrift with the write region cut just
# after a lease renewal (takeovers within the margin, never inside the
# deposed lease), lease-straddling pauses, a failover while a follower
# lags, a shrink at minimum durability, the write region cut from its
# followers but not from its clients. drift-beyond drives the clocks past
# the bound: each seed must be found unsafe, and the command exits 0 only
# then.
echo "== cluster edge scripts"
for e in drift wq-lag cut; do
	simrun "$out/edge-$e.txt" --scenario "cluster-edge-$e" --seeds 1..3
done
# lease seed 3 was quarantined: its liveness window was a fixed minute,
# shorter than a grow hold-off after 3 shrinks (1 min); the window now
# follows the failover configuration (sim convergeBound), and it passes.
simrun "$out/edge-lease.txt" --scenario cluster-edge-lease --seeds 1..3
# min-durability seed 2 (quarantined in session 12) runs again: a
# switchover target counted ops still in its store's queue as held, became
# write region of an epoch starting above what it kept after a crash and
# could never promote. The evidence now counts a replica only as far as it
# is durable (failover ReplicaStatus.Durable; docs/BENCHMARKS.md, session 13).
simrun "$out/edge-min-durability.txt" --scenario cluster-edge-min-durability --seeds 1..3
simrun "$out/edge-drift-light.txt" --scenario cluster-edge-drift --faults light --seeds 1..2
simrun "$out/edge-drift-beyond.txt" --scenario cluster-edge-drift-beyond --seeds 1..3
# The cluster canaries, each its own test-only build: a follower applying
# stale-epoch appends, a failover ignoring the write-quorum set and a
# takeover without the drift margin must each be caught within 50 seeds
# (seed k of cluster-edge-drift and of cluster swarm, k = 1..25, two at a
# time; each is caught at k = 1).
echo "== cluster canaries"
go test -tags fmnode_canary_stale -run TestCanaryIsCaught -count=1 ./sim/
go test -tags fmnode_canary_wq -run TestCanaryIsCaught -count=1 ./sim/
go test -tags fmnode_canary_drift -run TestCanaryIsCaught -count=1 ./sim/

echo "== determinism: 10 seeds again, same trace hashes"
rerun register-swarm "$out/sweep.txt" --scenario register --faults swarm --seeds 1..4
rerun register-heavy "$out/sweep.txt" --scenario register --faults heavy --seeds 7..8
rerun membership "$out/sweep.txt" --scenario membership --faults swarm --seeds 11..13
rerun contention "$out/sweep.txt" --scenario contention --faults swarm --seeds 5..5

# The control: the canary's workload and faults with the real acceptor
# must pass, or a caught canary would prove nothing.
echo "== canary control: the same workload with the real acceptor must pass"
simrun "$out/canary-control.txt" --canary-control --seeds 1..5

echo "== canary: the broken acceptor must be caught"
if "$bin" sim --canary --seeds 1..5 --out "$out"; then
	echo "FAIL: the canary was not detected"
	exit 1
fi

# Checks that reach the guards (issue 13): every guard package guard lists
# as reached by this sweep must have fired in it at least once, or the
# sweep proves nothing about the branch a bug would break. The guards only
# the edge scripts reach are listed as "edge" (switch them to "sweep" in
# guard/names.go when those scripts run here).
echo "== guards reached by the sweep"
if ! "$bin" sim --check-guards "$sums"; then
	failures+=("a guard the sweep must reach never fired (above)")
fi

if [ "${#failures[@]}" -gt 0 ]; then
	echo "FAIL: ${#failures[@]} sweeps failed:"
	printf '  %s\n' "${failures[@]}"
	exit 1
fi
echo "sim: ok"
