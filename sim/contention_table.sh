#!/usr/bin/env bash
# The contention table of docs/BENCHMARKS.md (issue 18): both shapes of the
# contention scenario over a seed range, one row per backoff, pooled over
# the seeds. conflict_rate = NAKs / rounds (conflicts per proposal attempt),
# split into first attempts (first_naks / proposals) and retries; "warm"
# leaves out each run's first 10 minutes; p99 is the mean of the per-seed
# p99s (and the worst seed's); goodput the mean commits per second; "gave
# up" the proposals that failed after 5 attempts (failed updates per update,
# the other reading of the paper's figure).
# Usage: sim/contention_table.sh [seeds, default 1..20] [extra fmnode sim flags...]
set -euo pipefail
seeds="${1:-1..20}"
shift || true
bin="$(mktemp -d)/fmnode"
go build -o "$bin" ./cmd/fmnode
for sc in ${SCENARIOS:-contention contention-burst}; do
	echo "== fmnode sim --scenario $sc --faults none --seeds $seeds --json $*"
	"$bin" sim --scenario "$sc" --faults none --seeds "$seeds" --json --workers 1 "$@" | jq -rs '
		[.[] | select(.summary | not)] as $runs
		| ($runs | length) as $n
		| def tot(k): [$runs[].metrics[k] // 0] | add;
		  def mean(k): tot(k) / $n;
		  def mx(k): [$runs[].metrics[k] // 0] | max;
		  def pct(a; b): if b > 0 then (10000 * 100 * a / b | round) / 10000 | tostring + "%" else "-" end;
		"seeds \($n), violations \([$runs[].violations | length] | add)",
		"backoff | rounds | NAKs (first/retry) | conflict rate | first-attempt rate | retry rate | after warm-up | gave up (of proposals) | goodput/s | p50 ms | p99 ms (worst seed)",
		(["none", "exponential", "adaptive", "turns"][] as $k
		| "\($k) | \(tot("rounds_" + $k)) | \(tot("naks_" + $k)) (\(tot("first_attempt_naks_" + $k))/\(tot("retry_naks_" + $k))) | \(pct(tot("naks_" + $k); tot("rounds_" + $k))) | \(pct(tot("first_attempt_naks_" + $k); tot("proposals_" + $k))) | \(pct(tot("retry_naks_" + $k); tot("rounds_" + $k) - tot("proposals_" + $k))) | \(pct(tot("naks_warm_" + $k); tot("rounds_warm_" + $k))) | \(tot("failures_" + $k)) (\(pct(tot("failures_" + $k); tot("proposals_" + $k)))) | \(mean("goodput_per_second_" + $k) * 100000 | round / 100000) | \(mean("latency_p50_ms_" + $k) | round) | \(mean("latency_p99_ms_" + $k) | round) (\(mx("latency_p99_ms_" + $k) | round))")'
done
