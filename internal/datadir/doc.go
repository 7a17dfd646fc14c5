// Package datadir is the fmnode agent's data directory: the one place a
// node keeps what must survive a restart, guarded so that exactly one agent
// uses it and only the node it belongs to.
//
// Layout of a data directory (created 0700 when missing):
//
//	LOCK           exclusive flock held while an agent runs; holds the
//	               holder's pid (decimal, newline) for the error a second
//	               agent gets. The lock, not the pid, is what excludes.
//	IDENTITY       the node identity and boot counter (format below);
//	               replaced only by write-temp, fsync, rename, fsync-dir.
//	IDENTITY.tmp   transient: the next IDENTITY before its rename. A stale
//	               one (a crash before the rename) is removed by Open and
//	               never read.
//	acceptor.db    the register acceptor's bbolt store (caspaxos/boltstore).
//	partitions/    the partition replicas' pebble store (partition/pebblestore).
//
// IDENTITY format, version 1 (all integers big-endian):
//
//	offset  size  field
//	0       8     magic "fmnodeID"
//	8       1     format version (1)
//	9       2     node id
//	11      8     boot counter (1..MaxBoot)
//	19      1+n   cluster: length byte n (1..255), UTF-8 bytes
//	        1+n   name: length byte n (1..255), UTF-8 bytes
//	        1+n   region: length byte n (0..255), UTF-8 bytes
//	        4     CRC-32C (Castagnoli) of every byte before it
//
// The file is at most MaxIdentityBytes long. Decoding is strict: a file
// decodes only if encoding what it holds gives back exactly its bytes, so
// a torn, truncated, padded or unknown-version file is refused as corrupt,
// never guessed at, reset or rewritten.
//
// Every Open increments the boot counter and makes it durable before it
// returns, so each incarnation of a node gets a boot number (and thus a
// proposer id) strictly greater than every earlier one. An agent pointed
// at another node's directory (a different cluster, node id, name or
// region) refuses to start instead of adopting it.
package datadir
