package sim

import (
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

// beatChange is the core change function of a beat.
func beatChange(slots, slot int, n uint64) caspaxos.Change {
	return caspaxos.ChangeFunc(func(cur caspaxos.Value) (caspaxos.Value, error) {
		next, changed := applyBeat(string(cur.Data), slots, slot, n)
		if !changed {
			return cur, nil
		}
		return cur.Next([]byte(next)), nil
	})
}
