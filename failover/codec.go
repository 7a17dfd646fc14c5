package failover

import (
	"encoding/binary"
	"fmt"
	"time"
	"unique"

	"github.com/fmnode/fmnode/progress"
	"github.com/fmnode/fmnode/quorum"
)

// stateFormatV1 and stateFormatV2 are the first byte of an encoded State.
// V2 adds the write-quorum hysteresis; V1 values (without it) still
// decode. A register written by a newer binary with another format is
// refused, never misread.
const (
	stateFormatV1 = 1
	stateFormatV2 = 2
)

// MaxStateBytes bounds an encoded state; it is a register value.
const MaxStateBytes = 16 << 10

// Encode appends the compact binary form of s (the register value).
func Encode(dst []byte, s State) ([]byte, error) {
	if err := s.Validate(); err != nil {
		return dst, err
	}
	start := len(dst)
	dst = append(dst, stateFormatV2)
	dst = appendStr(dst, s.Partition)
	dst = binary.AppendUvarint(dst, uint64(s.Epoch))
	dst = appendStr(dst, string(s.WriteRegion))
	dst = append(dst, byte(s.Phase), byte(s.Consistency))
	dst = appendStr(dst, string(s.Target))
	dst = binary.AppendVarint(dst, int64(s.PhaseSince))
	dst = appendBool(dst, s.FenceRecorded)
	dst = binary.AppendUvarint(dst, uint64(s.SwitchoverLSN))
	dst = appendRegions(dst, s.Priority)
	dst = appendRegions(dst, s.NeverPromote)
	dst = appendRegions(dst, s.WriteQuorum.Members)
	dst = binary.AppendUvarint(dst, uint64(s.WriteQuorum.MinDurability))
	dst = binary.AppendUvarint(dst, uint64(len(s.Progress)))
	for _, p := range s.Progress {
		dst = appendStr(dst, string(p.Region))
		dst = binary.AppendUvarint(dst, uint64(p.Epoch))
		dst = binary.AppendUvarint(dst, uint64(p.LSN))
	}
	tbl, err := progress.Encode(nil, s.Table)
	if err != nil {
		return dst[:start], err
	}
	dst = appendStr(dst, string(tbl))
	dst = appendBool(dst, s.Paused)
	dst = appendStr(dst, s.PauseReason)
	dst = binary.AppendUvarint(dst, uint64(len(s.Failovers)))
	for _, t := range s.Failovers {
		dst = binary.AppendVarint(dst, int64(t))
	}
	dst = binary.AppendVarint(dst, int64(s.HoldOffUntil))
	dst = binary.AppendUvarint(dst, uint64(len(s.History)))
	for _, t := range s.History {
		dst = binary.AppendUvarint(dst, uint64(t.Epoch))
		dst = binary.AppendVarint(dst, int64(t.At))
		dst = append(dst, byte(t.Kind))
		dst = appendStr(dst, string(t.From))
		dst = appendStr(dst, string(t.To))
		dst = appendStr(dst, string(t.Proposer))
		dst = appendStr(dst, t.Reason)
	}
	// V2: the write-quorum hysteresis.
	dst = binary.AppendUvarint(dst, uint64(len(s.QuorumFlaps)))
	for _, f := range s.QuorumFlaps {
		dst = appendStr(dst, string(f.Region))
		dst = binary.AppendUvarint(dst, uint64(len(f.Shrinks)))
		for _, t := range f.Shrinks {
			dst = binary.AppendVarint(dst, int64(t))
		}
		dst = binary.AppendVarint(dst, int64(f.GrowAfter))
	}
	if len(dst)-start > MaxStateBytes {
		return dst[:start], fmt.Errorf("%w: partition %q encodes to %d bytes (max %d)", ErrInvalidState, s.Partition, len(dst)-start, MaxStateBytes)
	}
	return dst, nil
}

func appendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, 1)
	}
	return append(dst, 0)
}

func appendStr(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendRegions(dst []byte, rs []Region) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(rs)))
	for _, r := range rs {
		dst = appendStr(dst, string(r))
	}
	return dst
}

// Decode parses a register value written by Encode and validates it.
func Decode(b []byte) (State, error) {
	if len(b) > MaxStateBytes {
		return State{}, fmt.Errorf("%w: %d bytes (max %d)", ErrInvalidState, len(b), MaxStateBytes)
	}
	d := reader{b: b}
	format := d.byte("format")
	if d.err == nil && format != stateFormatV1 && format != stateFormatV2 {
		return State{}, fmt.Errorf("%w: unknown format %d", ErrInvalidState, format)
	}
	var s State
	s.Partition = d.str("partition", progress.MaxPartitionBytes)
	s.Epoch = Epoch(d.uvarint("epoch"))
	s.WriteRegion = d.region("write region")
	s.Phase = Phase(d.byte("phase"))
	s.Consistency = Consistency(d.byte("consistency"))
	s.Target = d.region("target")
	s.PhaseSince = time.Duration(d.varint("phase since"))
	s.FenceRecorded = d.bool("fence recorded")
	s.SwitchoverLSN = LSN(d.uvarint("switchover LSN"))
	s.Priority = d.regions("priority")
	s.NeverPromote = d.regions("never-promote")
	members := d.regions("write quorum")
	minDur := int(d.count("minimum durability", MaxRegions))
	n := d.count("progress", MaxRegions)
	for i := 0; i < n && d.err == nil; i++ {
		s.Progress = append(s.Progress, RegionProgress{
			Region: d.region("progress region"),
			Epoch:  Epoch(d.uvarint("progress epoch")),
			LSN:    LSN(d.uvarint("progress LSN")),
		})
	}
	tblBytes := d.str("progress table", MaxStateBytes)
	s.Paused = d.bool("paused")
	s.PauseReason = d.str("pause reason", MaxReasonBytes)
	n = d.count("failovers", MaxFlapRecords)
	for i := 0; i < n && d.err == nil; i++ {
		s.Failovers = append(s.Failovers, time.Duration(d.varint("failover time")))
	}
	s.HoldOffUntil = time.Duration(d.varint("hold-off"))
	n = d.count("history", MaxHistory)
	for i := 0; i < n && d.err == nil; i++ {
		s.History = append(s.History, Transition{
			Epoch:    Epoch(d.uvarint("history epoch")),
			At:       time.Duration(d.varint("history time")),
			Kind:     DecisionKind(d.byte("history kind")),
			From:     d.region("history from"),
			To:       d.region("history to"),
			Proposer: d.region("history proposer"),
			Reason:   d.str("history reason", MaxReasonBytes),
		})
	}
	if format >= stateFormatV2 {
		n = d.count("quorum flaps", MaxRegions)
		for i := 0; i < n && d.err == nil; i++ {
			f := QuorumFlap{Region: d.region("quorum flap region")}
			k := d.count("quorum flap shrinks", MaxFlapRecords)
			for j := 0; j < k && d.err == nil; j++ {
				f.Shrinks = append(f.Shrinks, time.Duration(d.varint("quorum flap shrink")))
			}
			f.GrowAfter = time.Duration(d.varint("quorum flap grow after"))
			s.QuorumFlaps = append(s.QuorumFlaps, f)
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return State{}, fmt.Errorf("%w: %w", ErrInvalidState, d.err)
	}
	tbl, err := progress.Decode([]byte(tblBytes))
	if err != nil {
		return State{}, fmt.Errorf("%w: %w", ErrInvalidState, err)
	}
	s.Table = tbl
	replicas := make([]Region, len(s.Priority))
	copy(replicas, s.Priority)
	sortRegions(replicas)
	s.WriteQuorum = quorum.WriteQuorum{Replicas: replicas, WriteRegion: s.WriteRegion, Members: members, MinDurability: minDur}
	if err := s.Validate(); err != nil {
		return State{}, err
	}
	return s, nil
}

type reader struct {
	b   []byte
	err error
}

func (d *reader) fail(what, why string) {
	if d.err == nil {
		d.err = fmt.Errorf("%s: %s", what, why)
	}
}

func (d *reader) byte(what string) byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail(what, "truncated")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *reader) bool(what string) bool {
	switch d.byte(what) {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail(what, "not a boolean")
	return false
}

func (d *reader) uvarint(what string) uint64 {
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

func (d *reader) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(what, "bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *reader) count(what string, max int) int {
	n := d.uvarint(what)
	if d.err == nil && n > uint64(max) {
		d.fail(what, fmt.Sprintf("%d exceeds %d", n, max))
		return 0
	}
	return int(n)
}

func (d *reader) str(what string, max int) string {
	n := d.count(what, max)
	if d.err != nil {
		return ""
	}
	if len(d.b) < n {
		d.fail(what, "truncated")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// region reads a region name, interned: thousands of registers name the
// same few regions, and a decoded state is kept per partition per node.
func (d *reader) region(what string) Region {
	s := d.str(what, progress.MaxRegionBytes)
	if s == "" {
		return ""
	}
	return Region(unique.Make(s).Value())
}

func (d *reader) regions(what string) []Region {
	n := d.count(what, MaxRegions)
	var out []Region
	for i := 0; i < n && d.err == nil; i++ {
		out = append(out, d.region(what))
	}
	return out
}

func sortRegions(rs []Region) {
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && rs[j] < rs[j-1]; j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}
