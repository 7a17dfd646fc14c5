// Package caspaxos is the CASPaxos register protocol (Rystsov, arXiv
// 1802.07000) as pure, deterministic state machines. Every partition's
// failover state lives in one register, so this package carries the product:
// it has no goroutines, clocks, randomness, network or disk of its own. The
// deterministic simulator (sim/) and the fmnode runtime (caspaxos/transport)
// drive the same code.
//
// # Protocol
//
// A register is changed by applying a change function to its current value.
// A proposer picks a Ballot (counter, proposer id), greater than any it has
// seen for the key, and sends Prepare to the acceptors. An acceptor refuses
// if it promised or accepted a greater ballot, otherwise it durably promises
// the ballot and returns the value it accepted last, with that value's
// ballot. With promises from a prepare quorum the proposer takes the value
// of the highest accepted ballot, applies the change, and sends Accept. An
// acceptor refuses if it saw a greater ballot, otherwise it durably stores
// the value; acks from an accept quorum commit it. A read is the identity
// change, committed like any other, so reads are linearizable. Every refusal
// carries the conflicting ballot, so the proposer's next ballot jumps past it.
//
// One round trip: each Accept also asks the acceptor to promise the
// proposer's next ballot. If the acks that carry that promise form a prepare
// quorum, the proposer caches the value and its next change of the key goes
// straight to Accept. Any refusal or timeout drops the cache and the
// proposer falls back to two phases. Another proposer's round on the key
// overtakes the cached promise, so the proposer dates those rounds from
// the ballots acceptors report and bets on the cache only while it is
// young compared with how long the key was quiet (FastPathRisk).
//
// Contention: after a refusal or a timeout the proposer backs off. The
// adaptive backoff tracks D, the phase-2 duration, as an EMA with a running
// deviation sigma and waits (EMA + sigma) * U(0, 2^(attempt-1)), so the wait
// follows the real round trip of the deployment. A plain exponential backoff
// and none are selectable for comparison. Backoff acts only after a NAK; a
// first-round collision of two proposers within one round trip is avoided
// only by coordination. The adaptive backoff paces first attempts (not in
// the paper; pacing.go): a proposer whose last proposals on a key saw a
// rival round start after them waits, before its next first attempt, until
// one round after the last rival's start offset, so that proposers reacting
// to the same event settle into a chain instead of colliding. With Turns
// on instead, proposers that see each other on a key start proposals only
// in their own turn of a clock-based cycle.
//
// Quorums are flexible (package quorum): prepare and accept quorums need only
// intersect, and the acceptor set changes one acceptor at a time with an
// identity pass (rescan) where the quorum arithmetic needs one.
//
// # Deletion
//
// Deleting a register is a Delete change (a tombstone) followed by Erase,
// the garbage collection: an identity pass that every acceptor of the accept
// set must accept, then raising every acceptor's age floor (proposers whose
// age is below it are refused and must drop their caches), then erasing the
// record everywhere. An acceptor remembers the greatest ballot promised on
// any register it erased (the erase floor) and refuses ballots up to it on
// absent keys, so a proposer holding a promise from before the erase cannot
// resurrect the value even if it raced the age change. Every step is
// idempotent: a failed Erase is simply run again.
//
// # Driving the cores
//
// Acceptor: Step requests, then Ready returns a Batch to persist and the
// replies that depend on it. The driver makes the batch durable (Store.Apply,
// fsync) before sending the replies; stepping many requests before one Ready
// is group commit. A PipelineStore lets the driver hand over the next
// Ready's batch before the last is durable (Submit keeps the order on
// disk), as long as replies still leave in Ready order after their waits. Proposer: Propose, Step replies, Tick with the driver's
// clock; Ready returns messages (one per acceptor and type, many keys each,
// bounded by MaxBatchItems) and finished Results. NextDeadline tells the
// driver when to Tick next. Time is a time.Duration that drivers should make
// comparable across nodes (Unix time in the runtime, virtual time in the
// simulator): a new round's ballot counter starts at the clock's
// milliseconds when that is ahead of every ballot seen, so a proposer that
// has been idle does not start below the current ballot and get refused.
// The clock does not make ballots unique: a proposer that dropped a key's
// state (idle without a cached promise, evicted) starts the key's next
// round above the greatest counter it sent on any key it forgot, so two
// rounds within one millisecond, or after a conflict pushed the counter
// past the clock, never share a ballot.
// Randomness comes from an injected Rand, so a seeded simulation replays.
//
// Watch fans committed values out to subscribers in version order with a
// bounded history for resuming; the routing and DNS layers consume it.
package caspaxos
