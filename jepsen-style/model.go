package main

import (
	"fmt"
	"sort"

	"github.com/anishathalye/porcupine"
)

// The sequential specification of one key of the data plane: blind puts
// of unique values, compare-and-sets, deletes, compare-and-deletes and
// strong reads, absent until the first write; a deleted key reads as
// absent. The simulator's models (sim/model.go,
// sim/failover_client.go) are unexported, and their register shape
// (versions, heartbeat tables) is not the data API's; this one is the
// data API's put, conditional put and get.
//
// A CAS's condition is a version (If-Match: <epoch>:<lsn>, or
// If-None-Match: * for "absent"); the workload takes it from a strong
// read and records the value that read returned as Expect. Every write
// stores a value unique in the run, so "the key's version is the one
// read" is "the key holds the value read": the model compares values.
type kvIn struct {
	Key    string
	Op     string // opGet, opPut, opCAS, opDel, opCAD
	Value  string // written (put, CAS)
	Expect string // CAS, CAD: the value the condition names; "" absent (CAS only)
}

const (
	opGet = "get"
	opPut = "put"
	opCAS = "cas"
	opDel = "delete"
	opCAD = "cad" // compare-and-delete: deletes if the key holds Expect
)

// kvOut is a read's answer (Found, Value) or a CAS's outcome: applied,
// refused (CASFailed: 412, a definite non-effect) or unknown (Unknown:
// it may have been applied at any point after its invocation).
type kvOut struct {
	Found     bool
	Value     string
	CASFailed bool
	Unknown   bool
}

// kvState is one key's value; Found false is absent.
type kvState struct {
	Found bool
	Value string
}

func (s kvState) holds(expect string) bool {
	if expect == "" {
		return !s.Found
	}
	return s.Found && s.Value == expect
}

func kvModel() porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			by := map[string][]porcupine.Operation{}
			for _, op := range history {
				k := op.Input.(kvIn).Key
				by[k] = append(by[k], op)
			}
			keys := make([]string, 0, len(by))
			for k := range by {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			out := make([][]porcupine.Operation, 0, len(keys))
			for _, k := range keys {
				out = append(out, by[k])
			}
			return out
		},
		Init: func() any { return kvState{} },
		Step: func(state, input, output any) (bool, any) {
			st, in, out := state.(kvState), input.(kvIn), output.(kvOut)
			switch in.Op {
			case opPut:
				return true, kvState{Found: true, Value: in.Value}
			case opDel:
				// Unknown or not, it may apply: one never applied is the
				// linearization after every other op, as for a put.
				return true, kvState{}
			case opCAS, opCAD:
				match := st.holds(in.Expect)
				if in.Op == opCAD && in.Expect == "" {
					match = false // the client never sends one (no version to name)
				}
				next := kvState{Found: true, Value: in.Value}
				if in.Op == opCAD {
					next = kvState{}
				}
				switch {
				case out.Unknown:
					// Linearized where its condition holds it took
					// effect; where it does not, it had none. Not applied
					// at all is the linearization after every other op.
					if match {
						return true, next
					}
					return true, st
				case out.CASFailed:
					return !match, st
				default:
					if !match {
						return false, st
					}
					return true, next
				}
			default:
				return out.Found == st.Found && out.Value == st.Value, st
			}
		},
		Equal: func(a, b any) bool { return a.(kvState) == b.(kvState) },
		DescribeOperation: func(input, output any) string {
			in, out := input.(kvIn), output.(kvOut)
			switch in.Op {
			case opPut:
				return fmt.Sprintf("put(%s, %s)", in.Key, in.Value)
			case opDel:
				if out.Unknown {
					return fmt.Sprintf("delete(%s) -> unknown", in.Key)
				}
				return fmt.Sprintf("delete(%s)", in.Key)
			case opCAS, opCAD:
				exp := in.Expect
				if exp == "" {
					exp = "absent"
				}
				res := "ok"
				if out.CASFailed {
					res = "condition failed"
				} else if out.Unknown {
					res = "unknown"
				}
				if in.Op == opCAD {
					return fmt.Sprintf("cad(%s, %s) -> %s", in.Key, exp, res)
				}
				return fmt.Sprintf("cas(%s, %s -> %s) -> %s", in.Key, exp, in.Value, res)
			}
			if !out.Found {
				return fmt.Sprintf("get(%s) -> absent", in.Key)
			}
			return fmt.Sprintf("get(%s) -> %s", in.Key, out.Value)
		},
		DescribeState: func(state any) string {
			s := state.(kvState)
			if !s.Found {
				return "absent"
			}
			return s.Value
		},
	}
}

// infiniteReturn is an unknown outcome's return time: it may take
// effect at any point after its invocation.
const infiniteReturn = int64(1) << 62

// porcupineOps are the operations porcupine checks: writes (puts, CASes,
// deletes, compare-and-deletes) that
// were acknowledged or whose outcome is unknown, CASes refused on their
// condition (the key did not hold the expected value at some point of
// the call), strong reads that answered, and the final read-back. Writes
// that failed otherwise were not applied (the client's contract: a read
// that sees one is a violation, which the model shows as an illegal
// read), failed reads constrain nothing; session and bounded reads are
// not linearizable by design and have their own checks.
func porcupineOps(ops []histOp) []porcupine.Operation {
	var out []porcupine.Operation
	for _, op := range ops {
		switch {
		case op.isWrite() && (op.Result == resOK || op.Result == resUnknown || op.Result == resCondFailed):
			ret, o := op.Complete, kvOut{}
			switch op.Result {
			case resUnknown:
				ret, o.Unknown = infiniteReturn, true
			case resCondFailed:
				o.CASFailed = true
			}
			in := kvIn{Key: op.Key, Op: opPut, Value: op.Value}
			switch op.Kind {
			case kindCAS:
				in.Op, in.Expect = opCAS, op.Expect
			case kindDelete:
				in = kvIn{Key: op.Key, Op: opDel}
			case kindCAD:
				in = kvIn{Key: op.Key, Op: opCAD, Expect: op.Expect}
			}
			out = append(out, porcupine.Operation{ClientId: op.Client, Input: in, Call: op.Invoke, Output: o, Return: ret})
		case (op.Kind == kindStrong || op.Kind == kindFinal) && op.Result == resOK:
			out = append(out, porcupine.Operation{ClientId: op.Client, Input: kvIn{Key: op.Key, Op: opGet},
				Call: op.Invoke, Output: kvOut{Found: op.Found, Value: op.Value}, Return: op.Complete})
		}
	}
	return out
}
