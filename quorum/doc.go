// Package quorum holds the quorum systems of fmnode: the acceptor
// configurations of the CASPaxos control plane, the plans that change their
// membership safely, and the synchronous write quorum of the data plane.
// Everything here is a pure function of its arguments.
//
// # Flexible quorums
//
// A Set is a threshold family: any Threshold of its Members form a quorum. A
// Config names one Set for CASPaxos' prepare phase and one for its accept
// phase. Paxos is safe as long as every prepare quorum intersects every accept
// quorum (FPaxos, and the CASPaxos paper's "flexible quorums"): a proposer's
// promises then always include at least one acceptor that holds the latest
// committed value, and the highest ballot among the replies identifies it. Two
// prepare quorums, or two accept quorums, need not meet. For threshold sets
// the question has a closed form (Intersects): disjoint quorums exist iff
// max(0, ta-|A\B|) + max(0, tb-|B\A|) <= |A∩B|. IsQuorum and CanReach count
// votes on the proposer's hot path without allocating.
//
// # Membership change and the rescan
//
// Proposers cannot switch configuration atomically, so a change proceeds in
// steps (Step, PlanGrow, PlanShrink, PlanChange) and, while proposers move
// from one step to the next, both configs run side by side. Each move must
// satisfy three checks:
//
//  1. the new config is valid on its own;
//  2. mixed proposers are safe: Intersects(old.Prepare, new.Accept) and
//     Intersects(new.Prepare, old.Accept);
//  3. the new prepare quorums see every latest value committed earlier.
//
// Check 3 needs a model of the past. A plan knows only that its starting
// config is safe: every key's latest value was accepted by some quorum that
// all of the starting prepare quorums meet. It may have been committed by an
// older configuration through a weak accept quorum (as weak as
// (|P|-tp+1)-of-P for prepare set P), because earlier changes that needed no
// rescan leave such values behind. A new prepare set sees all of those exactly
// when each of its quorums contains an old prepare quorum (Covers; proved by
// enumeration in the tests). Values committed during the plan come from the
// accept sets of the steps taken so far. When check 3 fails, an identity
// change over every key (a rescan), run under the previous step once every
// proposer uses it, rewrites each latest value into that step's accept
// quorums with a higher ballot; afterwards only that accept set matters, and
// check 2 already covers it. RescanBefore marks exactly the steps where check
// 3 fails, and the tests prove every such flag necessary by clearing it and
// watching a brute-force checker fail.
//
// Growing follows Rystsov's paper: add the acceptor to the accept set (it
// starts receiving values while prepare quorums stay the ones that see
// everything), rescan if needed, then add it to the prepare set. Shrinking
// reverses this: leave the prepare set, rescan if needed, leave the accept
// set.
//
// Finding: between majority configs, a rescan is needed exactly when the new
// acceptor count is odd. Growing 2F+2 -> 2F+3 rescans under the intermediate
// config before the prepare set grows, because a value may sit on only F+1 of
// the 2F+2 old acceptors and a prepare quorum of F+2 out of 2F+3 can avoid
// them. Shrinking 2F+2 -> 2F+1 rescans under the starting config before the
// prepare set shrinks, for the same reason. Growing to an even size
// (2F+1 -> 2F+2) or shrinking to one (2F+1 -> 2F) never needs one: the new
// majority covers the old one (maj(n+1)-1 >= maj(n) when growing,
// maj(n-1) >= maj(n) when shrinking) only when the new size is even. This matches
// the issue's "rescan when growing to an odd size" and the brief's "adding to
// an even-sized set needs a rescan". The paper puts the rescan of a grow one
// step earlier, in 2F+1 -> 2F+2, so that the next grow 2F+2 -> 2F+3 can be
// a single jump that treats the new acceptor as one that was always down; the
// total work is the same, but a plan here cannot assume how its starting
// config was reached, so it pays where the risk arises. The paper's warning
// that replacing every acceptor one by one without rescans loses all data is
// a test case. SafeTransition answers the same questions for one pair of
// configs under the same model.
//
// # Minimum durability
//
// The data plane replicates each partition's writes synchronously to a write
// quorum (WriteQuorum.Members) that always contains the write region; a write
// commits once it is durable in every member, and in at least MinDurability
// regions. This is Kafka's in-sync replica set with min.insync.replicas,
// PacificA's configuration, and what Cosmos DB calls minimum durability. When
// a member fails, writes stall until it is shrunk out (Shrink), which is
// allowed while at least MinDurability members remain; with fewer live members
// writes stop rather than commit with less durability than configured
// (BelowMinDurabilityError). A region rejoins (Grow) only when it holds every
// committed write. Together these keep the invariant that every committed
// write is durable in every member, so any member can be promoted to write
// region without losing a committed write (CanPromote), and a region outside
// the quorum never can. With MinDurability 1 two regions keep writing after
// one is lost; three regions with MinDurability 2 tolerate the loss of a
// region and still keep two copies of every write.
package quorum
