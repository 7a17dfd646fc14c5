package main

import (
	"fmt"
	"sort"

	"github.com/anishathalye/porcupine"
)

// The sequential specification of one key of the data plane: blind puts
// of unique values and strong reads, absent until the first put. The
// simulator's models (sim/model.go, sim/failover_client.go) are
// unexported, and their register shape (versions, CAS, heartbeat
// tables) is not the data API's; this one is the data API's put and get.
type kvIn struct {
	Key   string
	Put   bool
	Value string
}

type kvOut struct {
	Found bool
	Value string
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
		Init: func() any { return kvOut{} },
		Step: func(state, input, output any) (bool, any) {
			st, in := state.(kvOut), input.(kvIn)
			if in.Put {
				return true, kvOut{Found: true, Value: in.Value}
			}
			return output.(kvOut) == st, st
		},
		Equal: func(a, b any) bool { return a.(kvOut) == b.(kvOut) },
		DescribeOperation: func(input, output any) string {
			in, out := input.(kvIn), output.(kvOut)
			if in.Put {
				return fmt.Sprintf("put(%s, %s)", in.Key, in.Value)
			}
			if !out.Found {
				return fmt.Sprintf("get(%s) -> absent", in.Key)
			}
			return fmt.Sprintf("get(%s) -> %s", in.Key, out.Value)
		},
		DescribeState: func(state any) string {
			s := state.(kvOut)
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

// porcupineOps are the operations porcupine checks: puts that were
// acknowledged or whose outcome is unknown, strong reads that answered,
// and the final read-back. Failed puts were not applied (the client's
// contract: a read that sees one is a violation, which the model shows
// as an illegal read), failed reads constrain nothing; session and
// bounded reads are not linearizable by design and have their own checks.
func porcupineOps(ops []histOp) []porcupine.Operation {
	var out []porcupine.Operation
	for _, op := range ops {
		switch {
		case op.Kind == kindPut && op.Result != resFail:
			ret := op.Complete
			if op.Result == resUnknown {
				ret = infiniteReturn
			}
			out = append(out, porcupine.Operation{ClientId: op.Client, Input: kvIn{Key: op.Key, Put: true, Value: op.Value},
				Call: op.Invoke, Output: kvOut{}, Return: ret})
		case (op.Kind == kindStrong || op.Kind == kindFinal) && op.Result == resOK:
			out = append(out, porcupine.Operation{ClientId: op.Client, Input: kvIn{Key: op.Key},
				Call: op.Invoke, Output: kvOut{Found: op.Found, Value: op.Value}, Return: op.Complete})
		}
	}
	return out
}
