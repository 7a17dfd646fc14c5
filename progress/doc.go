// Package progress is the per-partition progress table of the failover
// manager: the lineage of a partition's log as a short list of epochs,
// {Partition, Epochs: [{Epoch, StartLSN, EndLSN, WriteRegion}]}, as in the
// paper "Implementing Decentralized Per-Partition Automatic Failover in
// Azure Cosmos DB" (arXiv 2505.14900). It lives inside the partition's
// CASPaxos register value, next to the current epoch and write region, so
// it is small (a few bytes per epoch encoded), bounded (MaxEpochs) and pure:
// no goroutines, clocks, randomness or IO; every method returns a new value.
//
// Epoch e is the period in which one region was the write region. Its ops
// that belong to the lineage have LSNs in (StartLSN, EndLSN]: StartLSN is
// the last LSN the region inherited when it was promoted, and EndLSN is
// where the next write region picked up. The current epoch is open. At a
// failover the decision closes the current epoch and opens the next one at
// the promoted region's LSN (Open, or Promote from the candidate's reported
// position). Under an ungraceful failover the old write region may have
// written past that LSN; those ops never reached the new lineage. They are
// its false progress.
//
// When a replica returns it reports its position: the epoch of the write
// region it last followed (or of its last op) and its last LSN. Because
// replication keeps logs matching, the replica agrees with the lineage up
// to min(lastLSN, EndLSN of that epoch). That is its divergence point.
// Everything above it is FalseProgress, which is set aside, not replayed.
// Everything the lineage has above it is the Delta to ship. This turns
// "copy the whole partition" (hours) into "ship the missing range"
// (minutes) after a failover, which is the paper's point. A replica that
// reports an epoch after the current one, or more ops in the current epoch
// than the write region has, is an invariant violation and an error, never
// a guess.
//
// The table is bounded. Once every replica's common LSN is past an epoch,
// nobody can ask about that epoch again, and Compact drops it. BaseEpoch
// records the oldest dropped epoch that still ended at the new base, so
// answers for replicas past the compacted range do not change. A hard cap
// of MaxEpochs is enforced even when a replica is stuck far behind: the
// oldest epochs go, and replicas from them get NeedsSnapshot instead of a
// wrong delta. Compaction can make an answer pessimistic, never wrong.
//
// Rarely, the only region that can be promoted is behind the start of the
// current epoch (the previous promotion was itself lost before the others
// caught up). Open refuses this and Promote returns *CandidateBehindError.
// OpenBehind cuts the lineage deliberately: it clips every epoch at the new
// start, so the lost ops show up as false progress on every replica that
// holds them.
//
// The tests compare everything against a brute-force model that keeps each
// region's log as a list of (epoch, LSN) ops. The model replicates with log
// matching, lets deposed write regions keep writing, and computes divergence
// by comparing logs directly. Every small history is explored exhaustively,
// and longer ones are sampled at random.
package progress
