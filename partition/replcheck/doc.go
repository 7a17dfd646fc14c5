// Package replcheck runs the replication scenario on partitiontest.Cluster: a
// deterministic, seeded workload of clients writing and reading at every
// consistency level with a fixed write region, under message loss, delay,
// duplication, link cuts and crash-restart of any region (the write region
// too, including right after a commit), followed by a healed liveness
// phase. It checks, from the clients' point of view:
//
//   - strong partitions: every key's history is linearizable (porcupine;
//     writes with unknown outcome get an infinite return time, an Unknown
//     verdict counts as a failure), and no acknowledged write is lost (a
//     final read of every key is part of the history, and every
//     acknowledged (epoch, LSN) is in every replica's lineage at the end);
//   - session partitions: read-your-writes and monotonic reads per client;
//   - bounded-staleness partitions: a read never lags the acknowledged
//     writes by more than K ops or T time;
//   - everywhere: the cluster's own safety checks (an (epoch, LSN) names
//     one op on every replica, applied positions are contiguous and move
//     back only through truncation, host invariants).
//
// With Config.FailoverEvery set, the write region also moves, through the
// failover core's pure functions rather than a manager of the runner's
// own: each partition has a failover.State (a single in-memory register
// value only the runner writes, standing in for CASPaxos). A move is a
// graceful switchover (failover.RequestSwitchover, then Decide's fence,
// catch-up and completion or abort steps) or a takeover: the runner stops
// renewing the write region's lease and, once Config.Failover's lease plus
// drift bound has passed, asks failover.Decide with the write region
// declared failed, which picks the candidate by its rules (and may decline
// by hysteresis or for want of a candidate: counted in Report.Suppressed).
// Between moves Decide also shrinks and grows the write quorum. Every
// committed state is applied to every reachable replica by
// failover.Reconcile and internal/node.Do, the daemon's and simulator's
// mapping of failover actions onto the data plane; clients follow the
// register's route. Strong must then still be linearizable and lose no
// acknowledged write; the session and bounded-staleness checks only owe
// clients the writes that the lineage kept (weaker levels may lose writes
// in a failover, as in Cosmos DB).
//
// Run is what `fmnode sim --scenario replication` calls (DefaultConfig(seed)
// is the scenario's mix); the partition package's property tests call it
// over many seeds, and with CanaryReadLevel set to prove the checks fail
// when reads are weaker than promised.
package replcheck
