// Package raftbaseline is the centralised failover controller that fmnode
// is measured against (`fmnode bench compare`). It is a baseline, never on
// the product's path: nothing outside cmd/fmnode's bench imports it.
//
// It is the usual way of doing what fmnode does, as Patroni does on etcd
// and Orchestrator on raft: one consensus group (hashicorp/raft, three
// voters, one per region, on raft's NetworkTransport over loopback TCP,
// raft-wal as log and stable store, fsync on every append) holds one
// replicated map with every partition's failover state, the same
// failover.State the product keeps in one CASPaxos register per
// partition.
//
// # Heartbeats through the leader
//
// Each region's node reports the health of every partition replica it
// hosts (epoch, last LSN, fenced) by writing heartbeat records through the
// raft leader, every HeartbeatInterval, as Patroni's members refresh their
// keys: followers forward their batches to the leader over HTTP on
// loopback, the leader Applies them. These are writes to the coordination
// store in steady state, one per replica per interval: O(partitions),
// where fmnode writes none (its heartbeats are per node and never touch a
// register).
//
// # The leader decides
//
// Only the raft leader decides, with the product's rules: for each
// partition it assembles failover.Evidence from the heartbeat records and
// calls failover.Decide, and Applies the decision's next state, guarded by
// the version the decision was made from (a put against another version
// is refused by the state machine, so a deposed leader's decision cannot
// overwrite a newer one). Only the coordination differs from the product.
//
// Liveness is judged by the leader's own clock: a heartbeat record counts
// from when the leader's state machine applied it. Clocks are not
// replicated, so a newly elected leader cannot know how old the records it
// inherited are; like Consul (on hashicorp/raft), which resets every
// session TTL on a leader election, and etcd, which extends every lease on
// a leader change, it counts every record as heard at its election. So a
// region whose node holds the leader and fails is declared failed only
// after an election plus the takeover delay (lease + clock drift), where
// fmnode's observers need the takeover delay alone.
package raftbaseline
