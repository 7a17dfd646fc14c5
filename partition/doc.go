// Package partition is the data plane of one partition: a durable,
// replicated, LSN-ordered log and the key-value state it produces, one
// replica per region, one of them the write region of the current epoch.
// It is what a failover moves, what the progress table measures and what
// clients write to.
//
// Like package caspaxos it is a pure core: a Host (one per region's node)
// multiplexes many partition Replicas and turns messages, client requests,
// control operations, store read results and time into a Ready: writes to
// persist, reads to run, messages to send only once the writes are durable,
// and client replies. It has no goroutines, clock, randomness, network or
// disk. Drivers: the deterministic harness in package partitiontest (used
// by the property tests and by `fmnode sim --scenario replication` through
// package replcheck) and the runtime in package node (pebble store from
// package pebblestore, group commit, pipelined fsyncs).
//
// # Identity and records
//
// A partition is an ID (uint32; its failover register is "p/<id>"). An op
// is (LSN, Epoch, Key, Value or delete); an (epoch, LSN) pair names one op
// everywhere, because an epoch has exactly one write region (decided by the
// failover register), which assigns each LSN of its epoch once and sends an
// op only after it is durable, so even a crashed and restarted write region
// never reassigns an LSN that anyone else has seen.
//
// Each replica keeps an epoch history (rows "ops of epoch E have LSNs after
// A", the replica-local view of the progress table): the epoch of any op in
// its log follows from it. Stored per partition under a key prefix of one
// shared store (see codec.go for the layout): the log, the applied state,
// undo records, conflict records, Meta (epoch, role, quorum, history, log
// base) and ApplyState (applied LSN). Every record carries a CRC-32C that
// also covers its key's identity; a damaged record fails the load or read
// with ErrCorrupt naming the partition and record, and nothing is reset.
//
// # Write path
//
// A client write carries (partition, epoch). The leading write region of
// that epoch, or of a later one (a client that learns of a failover by
// reaching the new write region is served at once, in the current epoch,
// and learns the route from the reply's token), assigns the next LSN and
// appends the op; any other replica, a higher epoch or none answers with a
// *RedirectError carrying the current epoch and write region (the routing
// client's redirect, compare Cosmos DB's 403.3). A write marked as a poll
// (WriteRequest.PollWait) that a follower would redirect with nothing new
// is held there, bounded, until the follower's route moves, so a failover's
// commit reaches the polling client at once (poll.go). Ops go to every other replica in MsgAppend with the
// (LSN, epoch) of the op before them; a follower accepts only if its log
// holds that op (Raft's log matching), answers with the position up to
// which its log equals the write region's, and otherwise hints where the
// logs can still agree (its last LSN whose epoch is at most the expected
// one), so the write region finds the divergence point in one round per
// epoch. A follower's ops that conflict with the write region's are moved
// to conflict records, never dropped. Each follower has a bounded window
// of ops in flight; unacknowledged ops are resent after RetransmitTimeout;
// ops no longer in memory are fetched from the store (Fetch); a follower
// behind the log's base gets a snapshot.
//
// Commit rule, per partition level:
//
//   - strong: durable in every member of the write quorum and in at least
//     MinDurability replicas (quorum.WriteQuorum.Commits over the members'
//     acknowledged positions). The write quorum shrinks and grows by
//     SetWriteQuorum as the failover manager decides.
//   - bounded staleness: durable in the write region; but a write is held
//     back while accepting it would put a bounded follower (a member, or a
//     follower that may still hold a freshness grant) more than K ops
//     behind, or while one lacks an op older than T; held longer than
//     StalenessHold it is rejected with a *StalenessError (never applied).
//   - session and eventual: durable in the write region; replicated
//     asynchronously.
//
// A write is acknowledged with its session token (epoch, LSN) once
// committed; a write assigned but then cut off by a newer epoch, or not
// committed within CommitTimeout, gets ErrUnknownOutcome. Committed ops are
// applied to the state in LSN order, on every replica (followers learn the
// commit position from the write region's messages).
//
// # Fencing
//
// Every message carries (partition, epoch). A replica never acts on a
// message of a lower epoch (it answers MsgStale with its epoch and write
// region); a message of a higher epoch makes it adopt that epoch as a
// follower first, so a write region that hears of its successor stops at
// once and its pending writes get ErrUnknownOutcome. Nothing from a stale
// epoch is applied; two write regions in one epoch are an invariant
// violation. The epoch and role are persisted before anything that depends
// on them is sent.
//
// # Reads
//
//   - strong: only the write region, only while its lease holds (SetLease;
//     the failover issue provides real leases), and after a restart or a
//     promotion only once everything it holds is committed again. Not a
//     paused write region: the switchover it paused for may commit, and
//     its successor acknowledge writes, before it hears of it (a
//     switchover does not wait for its lease), so it redirects
//     (ReasonPaused) as it does writes.
//   - bounded staleness: the leading write region (under its lease; not a
//     paused one, for the same reason: ErrNotFresh), or a follower
//     in the write quorum holding a valid freshness grant: the follower's
//     responses carry a probe (its own clock), the write region echoes a
//     member's latest probe with its last LSN (never a non-member's: it
//     would serve nothing on it, yet its lag would hold writes for T), and
//     once the follower has applied that LSN it may serve reads until
//     probe + T (shortened by the drift margin). Every op it lacks was
//     assigned after its probe was sent, so nothing older than T is
//     missing; the write-side hold keeps it within K ops. A follower
//     without a grant answers ErrNotFresh and asks for one.
//   - session: any replica whose applied position has reached the token
//     and that holds the token's op at that LSN (same lineage).
//   - eventual: any replica.
//
// A freshness grant is the write region's promise that its last LSN
// covered every op of the partition when the echo left, and only its lease
// backs that promise: another region takes over after the lease plus the
// drift bound, and the follower may not hear of it. So a grant is issued
// only by a leading (not paused) write region whose lease holds and, on a
// host that gates leases (SetLeaseGen), is validated for the current run
// and epoch: the lease conditions of its own strong reads. Its length is
// min(T, what remains of the lease) (Message.Grant); the follower counts it
// from its probe, sent before the echo, and shortens it by the drift
// margin, so a grant never outlives the granting lease, and a takeover
// waits a further drift bound. A paused write region grants nothing: the
// switchover it paused for may already have installed a successor it has
// not heard of. Grants already held run to their end (they were issued
// under the lease).
//
// So a promotion that did not wait out the previous write region's lease
// may find grants of an earlier write region still running, on followers
// it cannot yet reach: after a completed or aborted switchover or a reopen
// after a fence, and after a takeover right after one of those (its
// predecessor's lease may end before the paused region's grants). The
// failover register knows which (failover.Action.Graceful); such a
// promotion (Host.PromoteGraceful) counts every follower, but the previous
// write region if it heard it lead (it dropped its grants when it took its
// epoch; a target merely named may not have), as one that may hold a
// grant, from an unknown position, until the follower answers in the new
// epoch (adopting an epoch drops every grant of an older one) or T
// lengthened by the drift margin has passed: its lag holds writes as a
// member's does. The cost: after a switchover, bounded-staleness writes
// are held (and rejected after StalenessHold) for up to that long while a
// follower does not answer. Any other takeover (Promote) waits out the
// lease plus the drift bound, and with it every grant: it pays nothing.
// Likewise a write region recovered after a restart has forgotten which
// followers it granted: it counts every follower as granted at the
// restart (an answer in the same epoch proves nothing about a grant of
// that epoch), so its bounded-staleness writes are held for up to T while
// a follower lags.
//
// A follower learns that it left the write quorum or the replica set only
// by a message of the write region, and the change is usually made because
// it cannot be reached: it goes on serving bounded reads until its grant
// ends. So the write region forgets no grant with the follower state. A
// follower dropped from the write quorum stays a follower: it gets no new
// grant, but the one it may hold counts (its lag holds writes) until T
// lengthened by the drift margin after it was sent. A follower dropped
// from the replica set hears nothing more; the write region keeps its last
// known match and grant deadline and counts its lag until that deadline
// (it is not asked to acknowledge the change: it is most likely the failed
// region). A graceful promotion whose quorum leaves out a region of the
// quorum the promoted replica knew counts that region as it counts the
// others (match 0, until T plus the margin). The cost: after such a
// change, bounded-staleness writes that would put the dropped follower
// more than K ops behind are held (and rejected after StalenessHold) for
// at most T plus the drift margin; a change that drops no grant costs
// nothing. Not covered: a write region restarted after the change
// (departed followers are not persisted), and a graceful promotion of a
// replica whose known quorum lacks a region added and removed since.
//
// Reads run after the Ready's writes, and every reply carries the position
// of the state read merged with the version (epoch, LSN) of the value, for
// the client to merge into its session token.
//
// # Failover operations
//
// Progress reports (epoch, role, last, commit, applied, stable, history).
// Fence(e) stops writes: at the replica's own epoch the write region
// pauses (pending writes still replicate and commit: graceful failover); at
// a newer epoch it becomes a follower. Promote(e, after, quorum) makes a
// replica the write region of a newer epoch, its log ending at after (ops
// above go to conflict records, reason truncate). Truncate(after) removes a
// follower's ops above after into conflict records. ExportConflicts and
// PurgeConflicts let an operator list, export and then delete them.
//
// Applied ops that a failover may still truncate are undoable: under the
// weaker levels each applied op not yet durable on every replica (above the
// stable position) gets an undo record holding the value it replaced, so a
// truncation restores the state exactly. A strong partition never
// truncates committed ops (that is an invariant violation) and writes no
// undo records. A truncation below what a replica can undo records all its
// ops as conflicts and waits for a snapshot (Progress.NeedSnapshot).
//
// # Log compaction and snapshots
//
// The log keeps RetainLogOps ops below the stable position (durable on
// every replica) for delta catch-up, and at most MaxLogOps ops in all;
// beyond that it is compacted anyway and a replica that needed the ops
// gets a snapshot: the write region reads its state in chunks of at most
// SnapshotChunkBytes, one chunk in flight, resent identically until
// acknowledged. Chunks are read at increasing applied positions (a fuzzy
// snapshot); the follower replays the log from the snapshot's base, and
// since ops are blind puts and deletes the state converges; reads wait
// until the last chunk's position is applied. The follower first moves
// every op of its log that is not in the write region's lineage to the
// conflict records.
//
// # Bounds
//
// Key and op size (MaxKeyBytes, MaxOpBytes: ErrTooLarge), ops and bytes
// per message (MaxBatchOps, MaxBatchBytes), the replication window
// (MaxInflightOps), pending writes per partition (MaxPendingWrites:
// ErrBackpressure), reads per Ready (MaxPendingReads), the in-memory tail
// (MaxTailOps), the log (MaxLogOps), snapshot chunks, the epoch history
// (MaxEpochHistory). Decoders refuse anything beyond the hard bounds.
//
// # Memory
//
// An idle partition costs a Replica struct, a short history and (on the
// write region) a follower entry per replica; quorum slices are interned;
// applied state lives only in the store; the tail of ops is released once
// applied and acknowledged. `fmnode bench partition` measures it.
package partition
