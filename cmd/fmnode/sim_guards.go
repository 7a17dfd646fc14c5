package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/fmnode/fmnode/guard"
)

// maxSummaryLine bounds one line of a --check-guards file (a summary
// object is a few KiB; a run object with a long trace may be larger and is
// skipped by its size, not read whole).
const maxSummaryLine = 4 << 20

// appendSummary appends the sweep's summary object, one JSON line, to
// path (--summary-out): CI collects every sweep's summary in one file and
// checks the guards over all of them (--check-guards).
func appendSummary(path string, sum simSummary) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("summary-out: %w", err)
	}
	if err := json.NewEncoder(f).Encode(sum); err != nil {
		_ = f.Close()
		return fmt.Errorf("summary-out: %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("summary-out: %s: %w", path, err)
	}
	return nil
}

// checkGuards is `fmnode sim --check-guards FILE`: it sums guards_fired
// over the summary objects in FILE (JSON lines, as --summary-out or --json
// write them; run objects are skipped), prints every guard with its count
// and reach, and exits 1 when a guard the sweep must reach (guard.Required)
// never fired, naming it.
func checkGuards(path string, stdout, stderr io.Writer) int {
	fired, sweeps, err := readGuardsFired(path)
	if err != nil {
		fmt.Fprintf(stderr, "fmnode sim: check-guards: %v\n", err)
		return 2
	}
	if sweeps == 0 {
		fmt.Fprintf(stderr, "fmnode sim: check-guards: %s holds no summary object\n", path)
		return 2
	}
	fmt.Fprintf(stdout, "guards over %d sweeps:\n", sweeps)
	for _, in := range guard.Infos() {
		note := ""
		switch {
		case in.Reach != guard.ReachSweep && fired[in.Key] > 0:
			note = "  (fired: may be required)"
		case in.Reach != guard.ReachSweep:
			note = "  (" + in.Why + ")"
		}
		fmt.Fprintf(stdout, "  %-32s %-5s %10d%s\n", in.Key, in.Reach, fired[in.Key], note)
	}
	for k := range fired {
		if _, ok := guard.Lookup(k); !ok {
			fmt.Fprintf(stdout, "  unknown guard %q in the summaries (a newer or older binary?)\n", k)
		}
	}
	missing := guard.Missing(fired)
	if len(missing) == 0 {
		fmt.Fprintf(stdout, "every required guard fired (%d)\n", len(guard.Required()))
		return 0
	}
	fmt.Fprintf(stdout, "FAIL: %d required guards never fired across the sweeps:\n", len(missing))
	for _, in := range missing {
		fmt.Fprintf(stdout, "  %s (%s): %s\n", in.Key, in.Core, in.Doc)
	}
	return 1
}

// readGuardsFired sums guards_fired over the summary objects of path.
func readGuardsFired(path string) (map[string]uint64, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fired := make(map[string]uint64)
	sweeps := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxSummaryLine)
	for line := 1; sc.Scan(); line++ {
		var s struct {
			Summary     bool              `json:"summary"`
			GuardsFired map[string]uint64 `json:"guards_fired"`
		}
		if len(sc.Bytes()) == 0 {
			continue
		}
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			return nil, 0, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if !s.Summary {
			continue
		}
		sweeps++
		for k, v := range s.GuardsFired {
			fired[k] += v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	return fired, sweeps, nil
}
