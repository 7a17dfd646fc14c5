// Package noderun runs one node.Node for real: the daemon's driver. One
// loop goroutine owns the node; the transport's reader goroutines and the
// client API hand it batches and requests through a bounded inbox. Two
// stages make each Ready durable, in Ready order, while the loop goes on:
// the committer queues its writes on both stores (the acceptor records on
// the bbolt store's group committer, the partition writes on pebble's
// write-ahead log; visible to reads, not yet durable) and runs its reads;
// the syncer waits for both fsyncs and hands the Ready back, and only then
// do its replies and the messages that depend on it leave (rule 3).
//
// Group commit needs no timer: while a commit is in flight the node keeps
// taking input, and the next Ready carries all of it; and since the next
// Ready is queued on the stores while the last one's fsync runs, the
// stores merge the fsyncs of every Ready in flight. Up to MaxInflight
// Readys are in flight; beyond that the loop still sends what depends on no
// write (node.Urgent: heartbeats, register requests, learns), so a stalled
// disk is a gray failure the failover manager sees in its replicas'
// progress, not a silent node.
//
// The clock is the wall clock read once at start plus the monotonic time
// since: comparable across nodes (the failover profile's MaxClockDrift
// bounds how far apart they may be) and immune to wall-clock steps while
// the process runs.
package noderun
