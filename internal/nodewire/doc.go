// Package nodewire is what one node sends another: the Batch, its binary
// encoding (Encode, Decode) and its framing on the node transport
// (AppendFrame, ReadFrame, which reuse caspaxos/wire's frames: magic,
// version, a length bounded before allocation, CRC-32C). It is pure: no IO
// beyond the *bufio.Reader handed to ReadFrame, no goroutines, no state.
//
// Batch encoding, format version 2 (version 1 had no learn acks section). Integers are uvarints in their shortest
// form, durations zigzag varints (binary.AppendVarint) in theirs; a longer
// encoding is refused, so every batch has exactly one encoding and a
// decoded batch re-encodes to the same bytes:
//
//	format      byte     (formatV2)
//	from, to    uvarint
//	cas         count uvarint, then each: uvarint length, one caspaxos/wire
//	            message (wire.AppendMessage)
//	data        count uvarint, then each partition.Message:
//	  type      byte     (a known partition.MsgType)
//	  mask      uvarint  bits 0-5 the flags Member, WantAck, Success,
//	                     NeedSnapshot, WantGrant, Last; bits 6-30 say which
//	                     fields follow, in this order: Partition, Epoch,
//	                     From, To, Prev, PrevEpoch, Entries, Commit, Stable,
//	                     LeaderLast, EchoBoot, Echo, Grant, Match, Hint,
//	                     HintEpoch, ProbeBoot, Probe, Seq, Base, BaseEpoch,
//	                     ConsistentAt, History, KVs, WriteRegion. Higher bits
//	                     are refused.
//	  fields    a field is present exactly when it is non-zero (a present
//	            zero is refused): integers as uvarints (Partition and Seq
//	            within 32 bits), Echo, Grant and Probe as varints, regions
//	            as uvarint length (1..MaxRegionBytes) and bytes, lists as a
//	            count (at least one) and the items:
//	    op      uvarint LSN, uvarint Epoch, flags byte (bit 0 Delete, the
//	            rest refused), key (uvarint length, at most MaxKeyBytes,
//	            bytes), value (the same, key plus value at most MaxOpBytes;
//	            a delete carries none)
//	    history uvarint Epoch, uvarint After
//	    kv      key (as an op's), value (uvarint length, at most
//	            MaxOpBytes, bytes), uvarint LSN, uvarint Epoch
//	heartbeats  count uvarint (at most MaxBatchHeartbeats), then each:
//	  kind      byte     (a known failover.HeartbeatKind)
//	  from, to, seq, view seq  uvarint
//	  sent at   varint
//	  suspects, gray, withheld  each a count (at most MaxNodeList), the
//	            first id, then the gaps to each next id (at least one: the
//	            lists are strictly ascending, Encode refuses others)
//	learns      count uvarint, then each: key (uvarint length, at most
//	            MaxLearnKeyBytes, bytes), uvarint version, data (uvarint
//	            length, at most MaxLearnDataBytes, bytes)
//	learn acks  count uvarint, then each: key (as a learn's), uvarint
//	            version
//
// Nothing may follow the last section. The five counts together are at
// most MaxBatchMessages, and every count is checked against the bytes left
// (each item takes at least a few bytes) before anything is allocated, so a
// hostile count costs no more than the bytes that carry it.
//
// Canonical forms: an empty slice or byte string (nil or not) decodes as
// nil, so a round trip preserves a value up to that. Decoded byte slices
// never alias the payload: each partition message's keys and values are
// copied into one allocation of their own (the core retains a message's
// ops together, and a retained op then pins neither the frame nor other
// messages), each Learn's data into its own, and wire copies CAS messages.
package nodewire
