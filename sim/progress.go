package sim

import "time"

// ProgressReport is a snapshot of a running simulation for a progress
// display (`fmnode sim` on a terminal). It is read from the run, never fed
// back into it: a run with Config.Progress set is the same run as one
// without (same events, same trace hash).
type ProgressReport struct {
	Seed     uint64
	Scenario string
	// SimNow is the virtual time reached.
	SimNow time.Duration
	// Total is the virtual time the run is planned to end at: the stages'
	// fixed lengths plus the bounds of the open-ended waits still ahead,
	// recomputed at each stage, so it can only shrink as waits end early
	// (a script's extra wait may still take a run past it). 0: unknown.
	Total time.Duration
	// Phase is the stage of the run: setup, warm-up, outage (fault for
	// the scripted failover scenarios), recovery, settle, check for the
	// failover scenarios; safety, liveness, check for the register-type
	// ones; empty where a scenario has none (replication).
	Phase string
	// Events is the number of events fired so far.
	Events uint64
}

// ProgressEvery is how many events the scheduler loop fires between two
// calls of Config.Progress (a power of two: the check is a mask of the
// event counter). Stage changes report as well.
const ProgressEvery = 1 << 16

// progressStage is one stage of a run's progress plan: its name and its
// length, or for an open-ended wait the bound on it.
type progressStage struct {
	name   string
	length time.Duration
}

// planStages sets the stages the run goes through, in order, for the
// Total of its progress reports.
func (e *env) planStages(stages ...progressStage) { e.stages = stages }

// stage names the part of the run progress reports show from now on and
// recomputes their Total from the plan; it reports at once. Unlike mark
// it touches neither the trace nor the world, so naming stages, or a
// progress callback, cannot change a run.
func (e *env) stage(name string) {
	e.stageName = name
	for i, s := range e.stages {
		if s.name != name {
			continue
		}
		e.total = e.w.Now()
		for _, s := range e.stages[i:] {
			e.total += s.length
		}
		break
	}
	e.report()
}

// report hands the callback the run's state (nothing when there is none).
func (e *env) report() {
	if e.cfg.Progress == nil {
		return
	}
	phase := e.stageName
	if phase == "" {
		phase = e.phase
	}
	e.cfg.Progress(ProgressReport{
		Seed: e.cfg.Seed, Scenario: e.cfg.Scenario, SimNow: e.w.Now(), Total: e.total,
		Phase: phase, Events: e.w.Events(),
	})
}
