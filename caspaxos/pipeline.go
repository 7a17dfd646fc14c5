package caspaxos

// PipelineStore is a Store that takes the next batch before the last one
// is durable, so that an acceptor can hand its stepped groups to the store
// as they form instead of one Apply at a time (the wait between one
// commit's fsync and the next commit's start then leaves the critical
// path, and a store with its own group commit merges what queued).
//
// Submit queues b behind every batch submitted before it and returns
// without waiting for the disk. The contract the acceptor relies on:
//
//   - Order: batches land in Submit order. After a crash the store holds
//     the batches of some prefix of the Submit sequence, each whole (a
//     later batch never survives without every earlier one), so a record
//     written twice can never fall back to its older copy.
//   - Durability: wait returns nil only once b and every batch submitted
//     before it are durable (fsynced). A reply that depends on b may leave
//     then, and not before (rule 3).
//   - Failure: if a commit fails, wait returns the error for that batch and
//     every later one, and the store refuses further writes (it cannot
//     know what the failed fsync left on disk).
//
// Submit validates b like Apply (an invalid batch changes nothing and
// returns the error). An empty batch writes nothing and its wait may
// return at once, so a caller that orders replies after earlier batches
// waits for those batches' waits first, in order. Submit may block while the store's queue is full
// (backpressure). Callers must call every wait they are given, once;
// concurrent Submit calls are ordered by whichever enters first, so a
// caller that needs an order submits from one goroutine.
type PipelineStore interface {
	Store
	Submit(b Batch) (wait func() error, err error)
}

// durableNow is the wait of a batch that was durable when Submit returned.
func durableNow() error { return nil }
