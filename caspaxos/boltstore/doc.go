// Package boltstore is the default durable caspaxos.Store: one bbolt file
// per acceptor, with a group committer so that concurrent Apply calls share
// one transaction and one fsync.
//
// Two layouts, told apart by the format magic in the meta bucket; a file is
// always opened in the layout it holds, never migrated:
//
// LayoutLog (format v2, the default for new files): records are appended to
// a log under increasing sequence numbers, with bounded compaction inside
// the committer; see logstore.go. A commit of ~35 records over 1000 keys
// writes ~6 pages instead of ~25-33.
//
// LayoutInPlace (format v1): bucket "records" maps 'r'+key to
// caspaxos.EncodeRecord bytes (the prefix exists because bbolt refuses
// empty keys, and the acceptor keeps its erase floor under the empty key);
// bucket "meta" holds the format magic, the age floor and a digest of the
// records (see digest).
//
// Every value carries its own CRC-32C, so corruption inside a page, which
// bbolt does not checksum, is still caught.
//
// Damage handling: Open vets the meta pages and walks the whole page graph
// with bounds-checked reads (checkFile, checkPages) before bbolt maps the
// file, decodes every record, and checks the digest. A damaged file fails
// with caspaxos.ErrCorrupt naming it; bbolt never gets to fault, panic or
// loop on it, and Open never re-initialises a file it cannot read.
//
// Crash safety of a commit, and of the commit pipeline. Every write goes
// through the one committer goroutine (committer.go), which commits a
// group of queued batches as one bbolt read-write transaction. bbolt's
// commit writes the transaction's dirty pages to free space (never over a
// page the last committed tree uses), fdatasyncs, then writes the meta page
// naming the new root and fdatasyncs again; at open bbolt takes the valid
// meta page with the higher transaction id. A crash before the second
// fdatasync completes leaves the old meta page in charge of an intact old
// tree; after it, the new tree is complete on disk. So each group survives
// whole or not at all, and only once its commit returned does the
// committer signal its batches' callers. Both fdatasyncs are needed: with
// one (NoSync plus our own flush) the meta page can reach the disk before
// pages it points to (docs/BENCHMARKS.md explains the failure).
//
// Apply blocks until its group's commit returned. Submit
// (caspaxos.PipelineStore, pipeline.go) queues the batch and returns at
// once; its wait blocks until the same signal. The queue is FIFO with one
// consumer and groups commit one at a time in queue order, so batches
// land in Submit order and a crash keeps a prefix of them: a later group
// is committed only after every earlier group's transaction, both
// fdatasyncs included, completed. An acceptor that sends a reply only
// after the wait of its group returned therefore never replies on a record
// a restart could lose (rule 3), and two records of one key can never land
// older-over-newer. A failed commit fails the store: its batch's wait and
// every later one return the error, and nothing more is written until a
// restart reads what the disk really holds.
package boltstore
