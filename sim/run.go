package sim

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// ErrConfig reports an invalid run configuration.
var ErrConfig = errors.New("sim: invalid run config")

// Config is one run: a scenario, a seed and the knobs of the command line.
type Config struct {
	Scenario string
	Seed     uint64
	Faults   FaultLevel
	// Canary swaps in the broken acceptor and the canary fault mix.
	Canary bool
	// CanaryControl runs the canary's workload and fault mix with the real
	// acceptor: it must pass, which shows the canary fails for the broken
	// acceptor and not for the harsh setting.
	CanaryControl bool
	// Duration is the safety phase (0: the scenario's default).
	Duration time.Duration
	// LivenessBound is how long the healed system may take to converge.
	LivenessBound time.Duration
	// Keys and Proposers override the scenario's defaults when positive.
	Keys      int
	Proposers int
	// Interval is the contention scenario's heartbeat interval.
	Interval time.Duration
	// DisableFastPath runs proposers without the one-round-trip path.
	DisableFastPath bool
	// UnknownWriters runs the contention scenario's adaptive variant
	// without telling its proposers the key's writers up front
	// (ClusterConfig.KnownWriters off: session 10's forwarding, which
	// learns the writers from ballots), for the before/after table.
	UnknownWriters bool
	// OutDir receives porcupine visualisations (default os.TempDir()).
	OutDir string
	// CheckTimeout bounds the linearizability check.
	CheckTimeout time.Duration
	// Logger receives progress at debug level (nil: discard).
	Logger *slog.Logger
	// Progress, if set, receives a ProgressReport every ProgressEvery
	// events and at each stage of the run, synchronously on the run's
	// goroutine (a Sweep calls it from each of its workers at once, so it
	// must be safe for concurrent use, and it should return quickly). It
	// only observes: a run with it is the same run as without (same trace
	// hash). The simulator never reads the wall clock, so rate-limiting a
	// display is the callback's business.
	Progress func(ProgressReport)

	// Partitions, FailoverProfile ("paper" or "fast") and Outage shape the
	// failover scenarios (0 or "": the scenario's default).
	Partitions      int
	FailoverProfile string
	Outage          time.Duration
	// DNSTTL and DNSStale shape the failover scenarios' DNS path: the
	// records' TTL (0: 5 s, the server's default) and how long past it a
	// client's resolver keeps serving an answer (0: 10 s).
	DNSTTL   time.Duration
	DNSStale time.Duration
	// PreloadBytes is the data each partition holds before the clients
	// start (bulk-loaded into every replica), so that a full copy has a
	// size to compare a re-sync with: 0 is the scenario's default
	// (DefaultPreloadBytes), negative none.
	PreloadBytes int
	// Layout, if set, gives the region-outage scenario the shape of a
	// real cluster instead of its own (fmnode demo's prediction of the
	// cluster it runs): see FailoverLayout.
	Layout *FailoverLayout
	// RerouteTrace, if positive, makes the failover scenarios keep every
	// watched client's routing steps and report those of the
	// RerouteTrace slowest reroutes (FailoverReport.ClientRerouteTrace).
	RerouteTrace int
	// testDoublePromote is a test hook of the failover scenarios: the
	// one-writer-per-epoch checker must fire.
	testDoublePromote bool
	// testProposerMaxInFlight, when positive, lowers every failover
	// world proposer's bound on keys in flight: a test hook that squeezes
	// the 100k-partition drill's overload into a small world.
	testProposerMaxInFlight int

	// BreakLiveness is a test hook: the liveness phase cuts every link
	// instead of healing, so the run must report a liveness violation.
	BreakLiveness bool
}

// Default bounds.
const (
	DefaultLivenessBound = 60 * time.Second
	DefaultCheckTimeout  = 30 * time.Second
	// MaxDuration bounds a safety phase (a week of virtual time).
	MaxDuration = 7 * 24 * time.Hour
	// MaxKeys bounds --keys.
	MaxKeys = 100000
)

func (c *Config) normalize() error {
	if c.Duration < 0 || c.Duration > MaxDuration {
		return fmt.Errorf("%w: duration %v (0..%v)", ErrConfig, c.Duration, MaxDuration)
	}
	if c.LivenessBound <= 0 {
		c.LivenessBound = DefaultLivenessBound
	}
	if c.CheckTimeout <= 0 {
		c.CheckTimeout = DefaultCheckTimeout
	}
	if c.Keys < 0 || c.Keys > MaxKeys {
		return fmt.Errorf("%w: keys %d (0..%d)", ErrConfig, c.Keys, MaxKeys)
	}
	if c.Proposers < 0 || c.Proposers > MaxProposers {
		return fmt.Errorf("%w: proposers %d (0..%d)", ErrConfig, c.Proposers, MaxProposers)
	}
	if c.Partitions < 0 || c.Partitions > foMaxPartitions {
		return fmt.Errorf("%w: partitions %d (0..%d)", ErrConfig, c.Partitions, foMaxPartitions)
	}
	if c.Outage < 0 || c.Outage > MaxDuration {
		return fmt.Errorf("%w: outage %v (0..%v)", ErrConfig, c.Outage, MaxDuration)
	}
	if c.PreloadBytes > MaxPreloadBytes {
		return fmt.Errorf("%w: preload bytes %d (at most %d per partition)", ErrConfig, c.PreloadBytes, MaxPreloadBytes)
	}
	if c.Layout != nil {
		if err := c.Layout.validate(); err != nil {
			return err
		}
		if c.Scenario != "region-outage" {
			return fmt.Errorf("%w: a layout shapes the region-outage scenario only, not %s", ErrConfig, c.Scenario)
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Result is what one run reports. The JSON names are the command's schema.
type Result struct {
	Seed           uint64             `json:"seed"`
	Scenario       string             `json:"scenario"`
	Faults         string             `json:"faults"`
	Profile        string             `json:"profile"`
	Canary         bool               `json:"canary,omitempty"`
	SimSeconds     float64            `json:"sim_seconds"`
	WallSeconds    float64            `json:"wall_seconds"`
	Events         uint64             `json:"events"`
	FaultsInjected map[string]uint64  `json:"faults_injected"`
	Violations     []string           `json:"violations"`
	Linearizable   string             `json:"linearizable"`
	TraceHash      string             `json:"trace_hash"`
	Ops            OpStats            `json:"ops"`
	Metrics        map[string]float64 `json:"metrics,omitempty"`
	// GuardsFired counts, by name, the cores' guards and reject paths
	// that fired in the run (package guard; failover and cluster
	// scenarios).
	GuardsFired   map[string]uint64 `json:"guards_fired,omitempty"`
	Visualization string            `json:"visualization,omitempty"`
	Replay        string            `json:"replay"`
	// SimPerWall is simulated seconds per wall-clock second.
	SimPerWall float64 `json:"sim_seconds_per_wall_second,omitempty"`
	// ExpectedUnsafe: the run drives the system past a bound it is
	// configured for (cluster-edge-drift-beyond), so a checker must find
	// it unsafe; UnsafeFound says one did. Such a run passes only then.
	ExpectedUnsafe bool `json:"expected_unsafe,omitempty"`
	UnsafeFound    bool `json:"unsafe_found,omitempty"`
	// FailoverReport holds the failover scenarios' figures (its keys are
	// top-level in the JSON).
	*FailoverReport
	// ScenarioFigures holds the re-sync accounting and the figures of the
	// failback, drain, gray-failure and az-outage scripts (top-level keys).
	*ScenarioFigures
}

// Failed reports whether the run found anything wrong.
func (r *Result) Failed() bool {
	if r.ExpectedUnsafe {
		return !r.UnsafeFound
	}
	return len(r.Violations) > 0 || (r.Linearizable != LinOK && r.Linearizable != LinSkipped)
}

// ReplayCommand is the exact command that reruns cfg.
func ReplayCommand(cfg Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "go run ./cmd/fmnode sim --scenario %s --seed %d --faults %s", cfg.Scenario, cfg.Seed, cfg.Faults)
	if cfg.Canary {
		b.WriteString(" --canary")
	}
	if cfg.CanaryControl {
		b.WriteString(" --canary-control")
	}
	if cfg.Duration > 0 {
		fmt.Fprintf(&b, " --duration %v", cfg.Duration)
	}
	if cfg.Keys > 0 {
		fmt.Fprintf(&b, " --keys %d", cfg.Keys)
	}
	if cfg.Proposers > 0 {
		fmt.Fprintf(&b, " --proposers %d", cfg.Proposers)
	}
	if cfg.DisableFastPath {
		b.WriteString(" --no-fast-path")
	}
	if cfg.UnknownWriters {
		b.WriteString(" --no-known-writers")
	}
	if cfg.Interval > 0 {
		fmt.Fprintf(&b, " --interval %v", cfg.Interval)
	}
	if cfg.Partitions > 0 {
		fmt.Fprintf(&b, " --partitions %d", cfg.Partitions)
	}
	if cfg.FailoverProfile != "" {
		fmt.Fprintf(&b, " --profile %s", cfg.FailoverProfile)
	}
	if cfg.Outage > 0 {
		fmt.Fprintf(&b, " --outage %v", cfg.Outage)
	}
	if cfg.PreloadBytes != 0 {
		fmt.Fprintf(&b, " --preload-bytes %d", cfg.PreloadBytes)
	}
	if l := cfg.Layout; l != nil {
		fmt.Fprintf(&b, " --regions %d --nodes-per-region %d --min-durability %d --rtt %v", l.Regions, l.NodesPerRegion, l.MinDurability, l.RTT)
		if l.FirstRegionWrites {
			b.WriteString(" --first-region-writes")
		}
		if l.ProcessKill {
			b.WriteString(" --process-kill")
		}
		if l.ServiceSlots > 0 {
			fmt.Fprintf(&b, " --service-slots %d --request-service %v", l.ServiceSlots, l.RequestService)
			if l.HeldPollService > 0 {
				fmt.Fprintf(&b, " --held-poll-service %v", l.HeldPollService)
			}
		}
		if l.NoPollWait {
			b.WriteString(" --no-poll-wait")
		}
	}
	// These shape the run too: without them the command would replay
	// another run.
	if cfg.DNSTTL > 0 {
		fmt.Fprintf(&b, " --dns-ttl %v", cfg.DNSTTL)
	}
	if cfg.DNSStale > 0 {
		fmt.Fprintf(&b, " --dns-stale %v", cfg.DNSStale)
	}
	if cfg.LivenessBound > 0 && cfg.LivenessBound != DefaultLivenessBound {
		fmt.Fprintf(&b, " --liveness %v", cfg.LivenessBound)
	}
	return b.String()
}

// Run executes one seed of a scenario. The error reports a configuration
// problem; what the run found is in the Result.
func Run(cfg Config) (Result, error) {
	if err := cfg.normalize(); err != nil {
		return Result{}, err
	}
	sc, ok := Lookup(cfg.Scenario)
	if !ok {
		return Result{}, fmt.Errorf("%w: unknown scenario %q (have %s)", ErrConfig, cfg.Scenario, strings.Join(ScenarioNames(), ", "))
	}
	start := time.Now() // wall time is measured around the run, never inside it
	res, err := sc.Run(cfg)
	if err != nil {
		return Result{}, fmt.Errorf("sim: scenario %s seed %d: %w", cfg.Scenario, cfg.Seed, err)
	}
	res.WallSeconds = time.Since(start).Seconds()
	res.Replay = ReplayCommand(cfg)
	if res.WallSeconds > 0 {
		res.SimPerWall = res.SimSeconds / res.WallSeconds
	}
	return res, nil
}
