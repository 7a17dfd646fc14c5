#!/usr/bin/env bash
# The jepsen-style share of CI: three runs of 30 s on 6 real agents under
# the nemesis. Two run the normal binary and must pass every check; one
# runs the negative-control build (-tags fmnode_negative_control: a
# partition store that acknowledges writes it never persists) and the
# checker must catch it, or the harness cannot find what it is for.
# Three runs in all, as the issue asks (2 + the control); measured at
# 5 min 40 s - 5 min 53 s on the shared, loaded 2-core machine (see
# docs/RELIABILITY.md, "CI"), about 2 minutes of it the three builds.
# The workload includes compare-and-set. Seeds are fixed (override with
# JEPSEN_SEED) so a failure replays with the command each run prints.
set -euo pipefail
cd "$(dirname "$0")/.."
seed="${JEPSEN_SEED:-1000}"
work="$(mktemp -d -t jepsen-ci-XXXXXX)"
trap 'rm -rf "$work"' EXIT
go build -o "$work/jepsen" ./jepsen-style
go build -o "$work/fmnode" ./cmd/fmnode
go build -tags fmnode_negative_control -o "$work/fmnode-negative" ./cmd/fmnode
keep="${JEPSEN_DIR:-${TMPDIR:-/tmp}/jepsen-ci-failures}"

echo "-- jepsen-style: 2 runs x 30 s, 6 agents, seeds $seed..$((seed + 1)) (must pass)"
if ! nice "$work/jepsen" --runs 2 --duration 30s --seed "$seed" --nodes 6 --bin "$work/fmnode" --dir "$keep"; then
	echo "jepsen-style: a run failed; its artifacts (porcupine.html, schedule.json, agent logs, REPLAY) are under $keep" >&2
	exit 1
fi
echo "-- jepsen-style: negative control, 1 run x 30 s (must be caught)"
if ! nice "$work/jepsen" --runs 1 --duration 30s --seed "$((seed + 7))" --nodes 6 --negative-control --converge 15s \
	--bin "$work/fmnode-negative" --dir "$work/negative" --expect-fail; then
	echo "jepsen-style: the negative control was NOT caught: the checks cannot find lost acknowledged writes" >&2
	exit 1
fi
echo "jepsen-style: ok (2 runs passed, the negative control was caught)"
