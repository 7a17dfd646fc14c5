// Package noderun runs one node.Node for real: the daemon's driver. One
// loop goroutine owns the node; the transport's reader goroutines and the
// client API hand it batches and requests through a bounded inbox; a
// committer goroutine makes each Ready's writes durable (the acceptor
// records in the bbolt store and the partition writes in the pebble store,
// in parallel, each with its own fsync) and runs its reads, in Ready
// order, while the loop goes on.
//
// Group commit needs no timer: while a commit is in flight the node keeps
// taking input, and the next Ready carries all of it. Up to MaxInflight
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
