package raftbaseline

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/fmnode/fmnode/failover"
)

// Bounds on one command, so a forwarded request or a log entry read back
// cannot make the state machine allocate without limit.
const (
	// MaxCommandBytes bounds an encoded command (a forwarded body too).
	MaxCommandBytes = 4 << 20
	// MaxHeartbeatEntries bounds the replica records of one heartbeat
	// command; a node with more replicas sends several.
	MaxHeartbeatEntries = 1024
	// MaxKeyBytes bounds a partition key, MaxRegionBytes a region name.
	MaxKeyBytes    = 256
	MaxRegionBytes = 64
)

// ErrBadCommand: bytes that do not decode as a command.
var ErrBadCommand = errors.New("raftbaseline: bad command")

type commandKind byte

const (
	cmdPutState   commandKind = 1
	cmdHeartbeats commandKind = 2
)

// PutState sets a partition's failover state if the map still holds
// version Expect of it (0: the partition must not exist yet).
type PutState struct {
	Key    string
	Expect uint64
	State  failover.State
}

// ReplicaStatus is what a region's node reports of one partition replica
// it hosts: the evidence failover.Decide ranks candidates by.
type ReplicaStatus struct {
	Key     string
	Epoch   failover.Epoch
	LastLSN failover.LSN
	Fenced  bool
}

// Heartbeats is one batch of a region's replica reports.
type Heartbeats struct {
	Region   failover.Region
	Replicas []ReplicaStatus
}

// encodePut encodes a PutState command.
func encodePut(p PutState) ([]byte, error) {
	if len(p.Key) == 0 || len(p.Key) > MaxKeyBytes {
		return nil, fmt.Errorf("%w: key of %d bytes", ErrBadCommand, len(p.Key))
	}
	b := []byte{byte(cmdPutState)}
	b = appendString(b, p.Key)
	b = binary.AppendUvarint(b, p.Expect)
	b, err := failover.Encode(b, p.State)
	if err != nil {
		return nil, fmt.Errorf("encode state of %s: %w", p.Key, err)
	}
	if len(b) > MaxCommandBytes {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadCommand, len(b))
	}
	return b, nil
}

// encodeHeartbeats encodes a Heartbeats command.
func encodeHeartbeats(h Heartbeats) ([]byte, error) {
	if len(h.Region) == 0 || len(h.Region) > MaxRegionBytes {
		return nil, fmt.Errorf("%w: region of %d bytes", ErrBadCommand, len(h.Region))
	}
	if len(h.Replicas) > MaxHeartbeatEntries {
		return nil, fmt.Errorf("%w: %d heartbeat entries, at most %d", ErrBadCommand, len(h.Replicas), MaxHeartbeatEntries)
	}
	b := []byte{byte(cmdHeartbeats)}
	b = appendString(b, string(h.Region))
	b = binary.AppendUvarint(b, uint64(len(h.Replicas)))
	for _, r := range h.Replicas {
		if len(r.Key) == 0 || len(r.Key) > MaxKeyBytes {
			return nil, fmt.Errorf("%w: key of %d bytes", ErrBadCommand, len(r.Key))
		}
		b = appendString(b, r.Key)
		b = binary.AppendUvarint(b, uint64(r.Epoch))
		b = binary.AppendUvarint(b, uint64(r.LastLSN))
		if r.Fenced {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	if len(b) > MaxCommandBytes {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadCommand, len(b))
	}
	return b, nil
}

// decodeCommand decodes one command: a *PutState or a *Heartbeats.
// It never panics on outside bytes (a forwarded body, a log entry).
func decodeCommand(b []byte) (any, error) {
	if len(b) == 0 || len(b) > MaxCommandBytes {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadCommand, len(b))
	}
	d := cmdReader{b: b[1:]}
	switch commandKind(b[0]) {
	case cmdPutState:
		var p PutState
		p.Key = d.str("key", MaxKeyBytes)
		p.Expect = d.uvarint("expect")
		if d.err == nil && p.Key == "" {
			d.fail("key", "empty")
		}
		if d.err != nil {
			return nil, d.err
		}
		s, err := failover.Decode(d.b)
		if err != nil {
			return nil, fmt.Errorf("%w: state of %q: %w", ErrBadCommand, p.Key, err)
		}
		p.State = s
		return &p, nil
	case cmdHeartbeats:
		var h Heartbeats
		h.Region = failover.Region(d.str("region", MaxRegionBytes))
		n := d.uvarint("entries")
		if d.err == nil && n > MaxHeartbeatEntries {
			d.fail("entries", fmt.Sprintf("%d, at most %d", n, MaxHeartbeatEntries))
		}
		for i := uint64(0); d.err == nil && i < n; i++ {
			var r ReplicaStatus
			if r.Key = d.str("key", MaxKeyBytes); d.err == nil && r.Key == "" {
				d.fail("key", "empty")
			}
			r.Epoch = failover.Epoch(d.uvarint("epoch"))
			r.LastLSN = failover.LSN(d.uvarint("lsn"))
			r.Fenced = d.bool("fenced")
			h.Replicas = append(h.Replicas, r)
		}
		if d.err == nil && len(d.b) != 0 {
			d.fail("end", fmt.Sprintf("%d trailing bytes", len(d.b)))
		}
		if d.err != nil {
			return nil, d.err
		}
		if h.Region == "" {
			return nil, fmt.Errorf("%w: empty region", ErrBadCommand)
		}
		return &h, nil
	}
	return nil, fmt.Errorf("%w: unknown kind %d", ErrBadCommand, b[0])
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// cmdReader reads fields, keeping the first error.
type cmdReader struct {
	b   []byte
	err error
}

func (d *cmdReader) fail(what, why string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s: %s", ErrBadCommand, what, why)
	}
}

func (d *cmdReader) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(what, "bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *cmdReader) str(what string, max int) string {
	n := d.uvarint(what)
	if d.err != nil {
		return ""
	}
	if n > uint64(max) || n > uint64(len(d.b)) {
		d.fail(what, fmt.Sprintf("length %d (at most %d, %d left)", n, max, len(d.b)))
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *cmdReader) bool(what string) bool {
	if d.err != nil {
		return false
	}
	if len(d.b) == 0 || d.b[0] > 1 {
		d.fail(what, "bad bool")
		return false
	}
	v := d.b[0] == 1
	d.b = d.b[1:]
	return v
}
