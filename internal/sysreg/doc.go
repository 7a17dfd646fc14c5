// Package sysreg is the cluster's system register: one CASPaxos register,
// Key "cluster/spec", kept by every agent and holding the cluster spec as
// opaque bytes (the caller encodes and decodes it). `fmnode init` writes
// it once (Client.Init), `fmnode config set` changes it by compare-and-set
// (Client.CAS), agents read it (Client.Read). It is tiny and rarely
// written, so the package prefers simplicity to throughput: it reuses the
// pure cores of package caspaxos and adds only the HTTP edge.
//
// # Protocol
//
// An Acceptor is an http.Handler the agent mounts at Path on its API
// server (mTLS in production). A proposer POSTs one wire-encoded caspaxos
// request (package caspaxos/wire): a Prepare or an Accept, addressed to
// the acceptor's id, with exactly one item, about Key. The 200 response
// body is the reply message. Anything else is refused: another method
// 405, a body over MaxBodyBytes 413, undecodable bytes, another key, more
// items, GC messages or tombstones 400, a request for another acceptor id
// 421, a busy or failed acceptor 503. So the endpoint cannot serve as a
// general store, and the register cannot be deleted. The acceptor steps
// requests one at a time under a lock and writes the reply only after
// Store.Apply of the step's writes returned: an answer never promises
// what a restart would forget. A failed Apply stops it (Err).
//
// The register's value is a caspaxos.Value: Version, the number of
// committed writes (Init makes 1, each CAS adds one; 0 is empty), which
// the caspaxos codecs carry, and Data: a format byte, the write's tag
// (the writing Client's ProposerID and the write's number within it, two
// canonical uvarints) and the spec bytes, 1 to MaxValueBytes (value.go).
// Acceptors refuse accepts whose value does not decode. The tag names the
// write uniquely; it exists so that a write can recognise its own value
// (see Unknown outcomes). Acceptor.Local returns the spec one acceptor
// accepted: a starting agent's hint for the candidate spec (and so for
// the acceptor set to Read through), not proof that it was committed.
//
// A Client runs a fresh caspaxos.Proposer per operation over an
// HTTPTransport (a transport.Transport: Send posts in the background, at
// most a few requests per peer, and drops beyond that, which CASPaxos
// tolerates; replies queue in a bounded channel). Every operation names
// its acceptor set as []Peer.
//
// # Quorums and bootstrap safety
//
// Read and CAS use a majority of the peers for both phases; Init requires
// every listed peer in both phases. By flexible Paxos, mixing proposers is
// safe when every prepare quorum in use meets every accept quorum in use.
// Over one acceptor set of n: all-of-n meets any non-empty quorum, and two
// majorities meet, so all four pairings of Init's and Read/CAS's sets
// intersect and an Init racing a CAS or a Read is safe.
//
// All-of-set is what makes bootstrap safe when two operators run Init with
// different views of the membership, sets A and B. With majorities, A =
// {1,2,3} and B = {3,4,5} have the disjoint quorums {1,2} and {4,5}, and
// both Inits could commit. With all-of-set, Init(A)'s prepare and accept
// quorums are A itself and Init(B)'s are B, so every pairing meets in A∩B:
// two Inits over intersecting sets behave as two proposers of one Paxos
// instance, at most one value is chosen as version 1, and the loser either
// finds it (AlreadyInitializedError) or is refused by an acceptor of A∩B
// that promised the winner's ballot. Sets that do not intersect cannot be
// protected: that is an operator error no protocol detects. Likewise a
// later Read or CAS is safe over the set Init used (or a set changed from
// it by the quorum package's rules), not over an unrelated one. The price
// is that Init needs every listed acceptor up; one that does not answer
// fails it with an *UnreachableError naming it. Init's prepare cannot
// complete without that acceptor, so in the common case (down before
// Init) nothing is accepted anywhere and a later Init succeeds; if it
// fails between the phases, the error says the outcome is unknown.
//
// # Ballots
//
// Ballots are (counter, proposer id); two proposers with one id could
// issue one ballot with two values, which Paxos does not survive. So
// Config.ProposerID must be unique per process incarnation
// (RandomProposerID), and within an incarnation a Client never reuses a
// ballot: its operations run one at a time, and each starts its
// proposer's clock (whose milliseconds seed ballot counters) at least one
// millisecond above the greatest counter the client has sent.
//
// # Unknown outcomes
//
// A write whose accept went out but was not confirmed (a lost reply, a
// NAK from a competing proposer) retries; it does not report an unknown
// outcome (ErrUnknownOutcome) when a later round rules one way:
//
//   - the later round finds the write's own value, by its tag, at the
//     version the write makes (want): it committed, and the change
//     function re-commits it as success;
//   - the later round finds the register at a version <= want holding
//     another write: it cannot have been chosen, since the finding round
//     commits at a ballot above all of the write's own and would have
//     found it or a later version; the refusal (AlreadyInitializedError,
//     ConflictError) is reported as is.
//
// Only a register that moved past want, or a round that found no quorum
// after an accept, leaves the outcome unknown; such an error matches
// ErrUnknownOutcome and neither refusal.
//
// MemPeers is the in-memory twin for the agent's tests: an
// http.RoundTripper dispatching requests to handlers by host:port.
package sysreg
