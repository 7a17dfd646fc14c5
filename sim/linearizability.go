package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/anishathalye/porcupine"
)

// Linearizability verdicts as runs report them.
const (
	LinOK      = "ok"
	LinIllegal = "illegal"
	LinUnknown = "unknown" // the checker timed out: counted as a failure
	LinSkipped = "skipped" // no history (a run that failed before its workload)
)

// checkLinearizable runs porcupine over ops. On an illegal (or unknown)
// verdict it writes porcupine's HTML visualisation to dir and returns its
// path, so a failure comes with a picture of the history.
func checkLinearizable(ops []porcupine.Operation, timeout time.Duration, dir, name string) (verdict, vizPath string, err error) {
	return checkLinearizableModel(registerModel(), ops, timeout, dir, name)
}

// checkLinearizableModel is checkLinearizable for another model (the
// failover scenarios' key-value model).
func checkLinearizableModel(model porcupine.Model, ops []porcupine.Operation, timeout time.Duration, dir, name string) (verdict, vizPath string, err error) {
	if len(ops) == 0 {
		return LinOK, "", nil
	}
	// The plain check decides; the verbose one (which also records partial
	// linearisations, and is slower) runs only to draw a failure.
	switch porcupine.CheckOperationsTimeout(model, ops, timeout) {
	case porcupine.Ok:
		return LinOK, "", nil
	case porcupine.Illegal:
		verdict = LinIllegal
	default:
		verdict = LinUnknown
	}
	_, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	if dir == "" {
		dir = os.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return verdict, "", fmt.Errorf("sim: visualisation dir: %w", err)
	}
	vizPath = filepath.Join(dir, name+".html")
	if err := porcupine.VisualizePath(model, info, vizPath); err != nil {
		return verdict, "", fmt.Errorf("sim: write visualisation %s: %w", vizPath, err)
	}
	return verdict, vizPath, nil
}
