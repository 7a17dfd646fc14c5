#!/usr/bin/env bash
# The contention table of docs/BENCHMARKS.md (issue 18): both shapes of the
# contention scenario over a seed range, one row per backoff, pooled over
# the seeds. conflict_rate = NAKs / rounds (conflicts per proposal attempt);
# with forwarding a round carries a batch of proposals, so rounds and
# proposals differ and each rate names its denominator: "per proposal" is
# NAKs / proposals, "first-attempt" first_attempt_naks / first_rounds (the
# rounds that were a request's first), "retry" retry_naks / (rounds -
# first_rounds); "warm" leaves out each run's first 10 minutes (NAKs /
# rounds after it, and the proposals after it); p99 is the mean of the
# per-seed p99s (and the worst seed's); goodput the mean commits per
# second; "gave up" the proposals that failed after 5 attempts (failed
# updates per update, the other reading of the paper's figure), and of
# them after the warm-up. "rounds/proposal" is rounds / proposals (below 1:
# forwarded changes share the leader's rounds); "warm-up NAKs" are the NAKs
# of each run's first 10 minutes (naks - naks_warm), the first events, when
# the proposers had not seen each other yet.
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
		"backoff | proposals | rounds | rounds/proposal | NAKs (first/retry) | warm-up NAKs | conflict rate (per round) | per proposal | first-attempt (of first rounds) | retry (of retry rounds) | after warm-up (NAKs of rounds; proposals) | gave up (of proposals; after warm-up) | goodput/s | p50 ms | p99 ms (worst seed)",
		(["none", "exponential", "adaptive", "turns", "deadleader"][] as $k
		| (tot("naks_" + $k)) as $naks | (tot("rounds_" + $k)) as $rounds | (tot("proposals_" + $k)) as $props
		| (tot("first_rounds_" + $k)) as $first
		| "\($k) | \($props) | \($rounds) | \(if $props > 0 then (1000 * $rounds / $props | round) / 1000 else "-" end) | \($naks) (\(tot("first_attempt_naks_" + $k))/\(tot("retry_naks_" + $k))) | \($naks - tot("naks_warm_" + $k)) | \(pct($naks; $rounds)) | \(pct($naks; $props)) | \(pct(tot("first_attempt_naks_" + $k); $first)) | \(pct(tot("retry_naks_" + $k); $rounds - $first)) | \(pct(tot("naks_warm_" + $k); tot("rounds_warm_" + $k))) (\(tot("naks_warm_" + $k)) of \(tot("rounds_warm_" + $k)); \(tot("proposals_warm_" + $k))) | \(tot("failures_" + $k)) (\(pct(tot("failures_" + $k); $props)); \(tot("failures_warm_" + $k))) | \(mean("goodput_per_second_" + $k) * 100000 | round / 100000) | \(mean("latency_p50_ms_" + $k) | round) | \(mean("latency_p99_ms_" + $k) | round) (\(mx("latency_p99_ms_" + $k) | round))")'
done
