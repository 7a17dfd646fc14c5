package sim

// Scenario is one kind of simulated run. Later issues add theirs (partition
// replicas, region outage, DNS routing) by implementing it and listing it
// in Scenarios.
type Scenario interface {
	Name() string
	// Description is one line for `fmnode sim --help`.
	Description() string
	// Run executes one seed: build the system on a world, run the safety
	// phase under faults, heal, run the liveness phase, check.
	Run(cfg Config) (Result, error)
}

// Scenarios lists every scenario in the order help shows them. It builds
// the list on each call: there is no package-level registry to mutate.
func Scenarios() []Scenario {
	return append([]Scenario{
		registerScenario{},
		contentionScenario{},
		contentionScenario{burst: true},
		membershipScenario{},
		replicationScenario{},
	}, failoverScenarios()...)
}

// Scripted reports whether scenario name scripts its own fault (the
// failover scenarios): --faults then adds background faults to the script,
// and a command line that names no level runs the script alone.
func Scripted(name string) bool {
	for _, s := range failoverScenarios() {
		if s.Name() == name {
			return true
		}
	}
	return false
}

// Lookup finds a scenario by name.
func Lookup(name string) (Scenario, bool) {
	for _, s := range Scenarios() {
		if s.Name() == name {
			return s, true
		}
	}
	return nil, false
}

// ScenarioNames lists the scenario names.
func ScenarioNames() []string {
	var out []string
	for _, s := range Scenarios() {
		out = append(out, s.Name())
	}
	return out
}
