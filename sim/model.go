package sim

import (
	"fmt"
	"sort"

	"github.com/anishathalye/porcupine"
)

// regState is the model's register: comparable, so porcupine's default
// equality works and memoises states.
type regState struct {
	Version uint64
	Data    string
}

// registerModel is the sequential specification of a versioned register
// with read, compare-and-set and heartbeat-table beats, partitioned by key
// (keys are independent registers; checking them apart keeps porcupine's
// search small).
func registerModel() porcupine.Model {
	return porcupine.Model{
		Partition: partitionByKey,
		Init:      func() interface{} { return regState{} },
		Step: func(state, input, output interface{}) (bool, interface{}) {
			return stepRegister(state.(regState), input.(regInput), output.(regOutput))
		},
		DescribeOperation: func(input, output interface{}) string {
			return describeOp(input.(regInput), output.(regOutput))
		},
		DescribeState: func(state interface{}) string {
			s := state.(regState)
			return fmt.Sprintf("v%d %q", s.Version, s.Data)
		},
	}
}

func stepRegister(st regState, in regInput, out regOutput) (bool, interface{}) {
	switch in.Kind {
	case opRead:
		if out.Status == statusUnknown {
			return true, st // a read that never returned constrains nothing
		}
		if in.Slots > 0 {
			return out.Data == st.Data, st // a heartbeat table: data only
		}
		return out.Version == st.Version && out.Data == st.Data, st
	case opCAS:
		switch out.Status {
		case statusOK:
			ok := st.Version == in.Expected && out.Version == st.Version+1
			return ok, regState{Version: st.Version + 1, Data: in.Data}
		case statusMismatch:
			return st.Version != in.Expected && out.Version == st.Version && out.Data == st.Data, st
		default: // unknown: if it took effect here, it behaved as a CAS does
			if st.Version == in.Expected {
				return true, regState{Version: st.Version + 1, Data: in.Data}
			}
			return true, st
		}
	case opBeat:
		// A beat answers only "done": its effect shows in later reads.
		next, changed := applyBeat(st.Data, in.Slots, in.Slot, in.N)
		if !changed {
			return true, st
		}
		return true, regState{Version: st.Version + 1, Data: next}
	}
	return false, st
}

func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	byKey := make(map[string][]porcupine.Operation)
	for _, op := range history {
		k := op.Input.(regInput).Key
		byKey[k] = append(byKey[k], op)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys) // a fixed partition order: the visualisation lists keys the same way every run
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, byKey[k])
	}
	return out
}

func describeOp(in regInput, out regOutput) string {
	res := "?"
	switch out.Status {
	case statusOK:
		res = fmt.Sprintf("v%d %q", out.Version, out.Data)
	case statusMismatch:
		res = fmt.Sprintf("mismatch: at v%d %q", out.Version, out.Data)
	case statusUnknown:
		res = "unknown"
	}
	switch in.Kind {
	case opRead:
		return fmt.Sprintf("read(%s) -> %s", in.Key, res)
	case opCAS:
		return fmt.Sprintf("cas(%s, v%d, %q) -> %s", in.Key, in.Expected, in.Data, res)
	case opBeat:
		return fmt.Sprintf("beat(%s, slot %d to %d) -> %s", in.Key, in.Slot, in.N, res)
	}
	return "?"
}
