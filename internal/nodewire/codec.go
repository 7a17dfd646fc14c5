package nodewire

import (
	"encoding/binary"
	"fmt"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/wire"
	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/partition"
)

const (
	// formatV2 added the learn acks section (version 1 ended after the
	// learns).
	formatV2 byte = 2

	// FormatVersion is the batch format Encode writes and the only one
	// Decode reads: a peer of another format can exchange no batch with
	// this one either way (each refuses the other's format byte), so the
	// node transport's hello carries it (nodenet.ProtocolVersion) and a
	// mismatch is refused there, naming both versions, before any batch.
	// Bump it with every change of the encoding.
	FormatVersion = formatV2

	// minCASBytes: a length and wire's smallest message (format, type,
	// from, to, age, item count).
	minCASBytes = 7
)

// Encode appends the encoding of b to dst (the payload of one frame, no
// framing) and returns the extended slice. It refuses, wrapping ErrInvalid,
// exactly what Decode would refuse, so a peer is never sent something it
// must reject; on error dst is returned unchanged.
func Encode(dst []byte, b *Batch) ([]byte, error) {
	if err := checkCounts(b); err != nil {
		return dst, err
	}
	start := len(dst)
	dst = append(dst, formatV2)
	dst = binary.AppendUvarint(dst, uint64(b.From))
	dst = binary.AppendUvarint(dst, uint64(b.To))
	dst, err := appendSections(dst, b)
	if err != nil {
		return dst[:start], fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if n := len(dst) - start; n > MaxPayloadBytes {
		return dst[:start], fmt.Errorf("%w: %d bytes exceed %d", ErrInvalid, n, MaxPayloadBytes)
	}
	return dst, nil
}

func checkCounts(b *Batch) error {
	switch {
	case b.Count() > MaxBatchMessages:
		return fmt.Errorf("%w: %d messages exceed %d", ErrInvalid, b.Count(), MaxBatchMessages)
	case len(b.Heartbeats) > MaxBatchHeartbeats:
		return fmt.Errorf("%w: %d heartbeats exceed %d", ErrInvalid, len(b.Heartbeats), MaxBatchHeartbeats)
	}
	return nil
}

func appendSections(dst []byte, b *Batch) ([]byte, error) {
	var err error
	dst = binary.AppendUvarint(dst, uint64(len(b.CAS)))
	for i := range b.CAS {
		if dst, err = appendCAS(dst, i, b); err != nil {
			return dst, fmt.Errorf("cas message %d: %w", i, err)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(b.Data)))
	for i := range b.Data {
		if dst, err = appendData(dst, &b.Data[i]); err != nil {
			return dst, fmt.Errorf("data message %d: %w", i, err)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(b.Heartbeats)))
	for i := range b.Heartbeats {
		if dst, err = appendHeartbeat(dst, &b.Heartbeats[i]); err != nil {
			return dst, fmt.Errorf("heartbeat %d: %w", i, err)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(b.Learns)))
	for i := range b.Learns {
		if dst, err = appendLearn(dst, &b.Learns[i]); err != nil {
			return dst, fmt.Errorf("learn %d: %w", i, err)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(b.LearnAcks)))
	for i := range b.LearnAcks {
		if dst, err = appendLearnAck(dst, &b.LearnAcks[i]); err != nil {
			return dst, fmt.Errorf("learn ack %d: %w", i, err)
		}
	}
	return dst, nil
}

// appendCAS appends CAS message i length-prefixed. It encodes in place and
// then slides the message right by the prefix's width (known only after
// encoding), which is cheaper than a scratch buffer.
func appendCAS(dst []byte, i int, b *Batch) ([]byte, error) {
	pos := len(dst)
	dst, err := wire.AppendMessage(dst, b.CAS[i])
	if err != nil {
		return dst[:pos], err
	}
	var pre [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(pre[:], uint64(len(dst)-pos))
	dst = append(dst, pre[:k]...)
	copy(dst[pos+k:], dst[pos:len(dst)-k])
	copy(dst[pos:], pre[:k])
	return dst, nil
}

// Decode decodes a payload produced by Encode. Every failure wraps
// ErrCorrupt and says what was wrong and where. The batch shares no memory
// with payload (the transport may reuse its read buffer at once); empty
// slices and byte strings decode as nil.
func Decode(payload []byte) (Batch, error) {
	if len(payload) > MaxPayloadBytes {
		return Batch{}, fmt.Errorf("%w: %d bytes exceed %d", ErrCorrupt, len(payload), MaxPayloadBytes)
	}
	r := reader{b: payload}
	if f := r.byte1("format"); r.err == nil && f != formatV2 {
		return Batch{}, fmt.Errorf("%w: unknown format version %d", ErrCorrupt, f)
	}
	var b Batch
	b.From = NodeID(r.uvarint("from"))
	b.To = NodeID(r.uvarint("to"))
	if err := decodeSections(&r, &b); err != nil {
		return Batch{}, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if r.left() != 0 {
		return Batch{}, fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, r.left())
	}
	return b, nil
}

// decodeSections decodes the five sections; each count is bounded by what
// the batch has left of MaxBatchMessages and by the bytes left.
func decodeSections(r *reader, b *Batch) error {
	budget := MaxBatchMessages
	if n := r.count("cas count", budget, minCASBytes); n > 0 {
		budget -= n
		b.CAS = make([]caspaxos.Message, n)
		for i := range b.CAS {
			if b.CAS[i] = decodeCAS(r); r.err != nil {
				return fmt.Errorf("cas message %d: %w", i, r.err)
			}
		}
	}
	if n := r.count("data count", budget, minDataBytes); n > 0 {
		budget -= n
		b.Data = make([]partition.Message, n)
		for i := range b.Data {
			if decodeData(r, &b.Data[i]); r.err != nil {
				return fmt.Errorf("data message %d: %w", i, r.err)
			}
			own(&b.Data[i])
		}
	}
	if n := r.count("heartbeat count", min(budget, MaxBatchHeartbeats), minHeartbeatBytes); n > 0 {
		budget -= n
		b.Heartbeats = make([]failover.Heartbeat, n)
		for i := range b.Heartbeats {
			if decodeHeartbeat(r, &b.Heartbeats[i]); r.err != nil {
				return fmt.Errorf("heartbeat %d: %w", i, r.err)
			}
		}
	}
	if n := r.count("learn count", budget, minLearnBytes); n > 0 {
		budget -= n
		b.Learns = make([]Learn, n)
		for i := range b.Learns {
			if decodeLearn(r, &b.Learns[i]); r.err != nil {
				return fmt.Errorf("learn %d: %w", i, r.err)
			}
		}
	}
	if n := r.count("learn ack count", budget, minLearnAckBytes); n > 0 {
		b.LearnAcks = make([]LearnAck, n)
		for i := range b.LearnAcks {
			if decodeLearnAck(r, &b.LearnAcks[i]); r.err != nil {
				return fmt.Errorf("learn ack %d: %w", i, r.err)
			}
		}
	}
	return r.err
}

// decodeCAS decodes one length-prefixed CASPaxos message; wire's decoder
// copies everything out of the input.
func decodeCAS(r *reader) caspaxos.Message {
	body := r.bytes("cas message", r.left())
	if r.err != nil {
		return caspaxos.Message{}
	}
	start := r.off - len(body)
	m, err := wire.DecodeMessage(body)
	if err != nil {
		r.err = fmt.Errorf("at offset %d: %w", start, err)
	}
	return m
}
