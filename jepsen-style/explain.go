package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"time"
)

// explain prints, for a failed run's history.json, every key whose
// history is not linearizable and that key's operations in invocation
// order: the first thing to read after porcupine.html.
func explain(path string, w io.Writer) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var ops []histOp
	if err := json.Unmarshal(b, &ops); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	model := kvModel()
	bad := illegalKeys(model, porcupineOps(ops), time.Minute)
	if len(bad) == 0 {
		fmt.Fprintln(w, "every key's strong history is linearizable")
		return nil
	}
	for _, key := range bad {
		fmt.Fprintf(w, "key %s is not linearizable:\n  invoke_s complete_s client kind result value\n", key)
		var ko []histOp
		for _, op := range ops {
			if op.Key == key {
				ko = append(ko, op)
			}
		}
		sort.SliceStable(ko, func(i, j int) bool { return ko[i].Invoke < ko[j].Invoke })
		for _, op := range ko {
			val := op.Value
			if !op.isWrite() && !op.Found && op.Result == resOK {
				val = "(absent)"
			}
			if op.Kind == kindCAD {
				val = "delete if " + op.Expect
			}
			if op.Kind == kindCAS {
				exp := op.Expect
				if exp == "" {
					exp = "(absent)"
				}
				val = exp + " -> " + op.Value
			}
			done := "       inf"
			if op.Complete >= 0 {
				done = fmt.Sprintf("%10.3f", float64(op.Complete)/1e9)
			}
			fmt.Fprintf(w, "  %8.3f %s c%-2d %-11s %-7s %s %s\n", float64(op.Invoke)/1e9, done, op.Client, op.Kind, op.Result, val, truncate(op.Err, 160))
		}
	}
	return nil
}
