package sim

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/fmnode/fmnode/caspaxos"
)

// A heartbeat register holds one counter per proposer slot, encoded as
// "n0,n1,...". A beat raises its own slot to at least n: applying it twice
// changes nothing the second time. That is the shape of the failover
// manager's state updates (a lease or liveness table), and it matters: a
// proposer may re-apply a change whose earlier accept another proposer
// carried over, so only idempotent changes are exactly-once from outside.

// beatSlots parses a heartbeat table; a register never written has none.
func beatSlots(data string, slots int) []uint64 {
	out := make([]uint64, slots)
	if data == "" {
		return out
	}
	for i, f := range strings.Split(data, ",") {
		if i >= slots {
			break
		}
		n, err := strconv.ParseUint(f, 10, 64)
		if err == nil {
			out[i] = n
		}
	}
	return out
}

func formatSlots(s []uint64) string {
	var b strings.Builder
	for i, n := range s {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(n, 10))
	}
	return b.String()
}

// applyBeat returns the table data after beat (slot, n), and whether it changed.
func applyBeat(data string, slots, slot int, n uint64) (string, bool) {
	s := beatSlots(data, slots)
	if s[slot] >= n {
		return data, false
	}
	s[slot] = n
	return formatSlots(s), true
}

// beatChange is the core change function of a beat. It is forwardable
// (caspaxos.ForwardableChange): a beat is idempotent, so a forwarded beat
// applied by its leader and again by its fallback changes the table once.
func beatChange(slots, slot int, n uint64) caspaxos.Change {
	return beat{slots: slots, slot: slot, n: n}
}

type beat struct {
	slots, slot int
	n           uint64
}

func (b beat) Apply(cur caspaxos.Value) (caspaxos.Value, error) {
	next, changed := applyBeat(string(cur.Data), b.slots, b.slot, b.n)
	if !changed {
		return cur, nil
	}
	return cur.Next([]byte(next)), nil
}

func (beat) Mutates() bool { return true }

// EncodeChange is 'B' then slots, slot and n as uvarints.
func (b beat) EncodeChange() []byte {
	out := []byte{'B'}
	out = binary.AppendUvarint(out, uint64(b.slots))
	out = binary.AppendUvarint(out, uint64(b.slot))
	return binary.AppendUvarint(out, b.n)
}

// changeCodec decodes the changes the simulator's proposers forward:
// beats, and the built-in CAS.
type changeCodec struct{}

func (changeCodec) DecodeChange(b []byte) (caspaxos.Change, error) {
	if len(b) == 0 || b[0] != 'B' {
		return caspaxos.BuiltinCodec{}.DecodeChange(b)
	}
	var f [3]uint64
	rest := b[1:]
	for i := range f {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			return nil, fmt.Errorf("sim: forwarded beat field %d: %w", i, caspaxos.ErrCorrupt)
		}
		f[i], rest = v, rest[n:]
	}
	if f[0] == 0 || f[0] > MaxProposers || f[1] >= f[0] {
		return nil, fmt.Errorf("sim: forwarded beat slot %d of %d: %w", f[1], f[0], caspaxos.ErrCorrupt)
	}
	return beat{slots: int(f[0]), slot: int(f[1]), n: f[2]}, nil
}
