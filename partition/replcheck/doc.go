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
// With Config.FailoverEvery set, the write region also moves: the runner
// plays a simplified failover manager (stop renewing the write region's
// lease, wait until it has expired, fence every reachable replica at the
// next epoch, promote the target after its last LSN), and clients follow
// the route. Strong must then still be linearizable and lose no
// acknowledged write; the session and bounded-staleness checks only owe
// clients the writes that the lineage kept (weaker levels may lose writes
// in a failover, as in Cosmos DB).
//
// Run is what `fmnode sim --scenario replication` calls (DefaultConfig(seed)
// is the scenario's mix); the partition package's property tests call it
// over many seeds, and with CanaryReadLevel set to prove the checks fail
// when reads are weaker than promised.
package replcheck
