package replcheck

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/partition/partitiontest"
)

// Config shapes one run. Zero fields take the defaults of DefaultConfig.
type Config struct {
	Seed    uint64
	Regions []partition.Region // the first is the write region
	// Levels lists one partition per entry (ids 1, 2, ...).
	Levels []partition.Level
	// Keys per partition and clients per partition (<= 10 per key keeps
	// the linearizability check fast).
	Keys, Clients int
	// Duration of the fault phase and of the healed liveness phase.
	Duration, Heal time.Duration
	// Think is the mean pause between a client's operations.
	Think time.Duration
	// ClientTimeout: a request without a reply after this is given up
	// (a write's outcome is then unknown).
	ClientTimeout time.Duration

	// Network and disk faults (see partitiontest.ClusterConfig).
	MinDelay, MaxDelay   time.Duration
	LossRate, DupRate    float64
	MinDisk, MaxDisk     time.Duration
	CrashAfterCommitRate float64
	// CrashEvery and CutEvery are the mean intervals between crashes and
	// link cuts (0 disables them); Downtime bounds how long either lasts.
	CrashEvery, CutEvery time.Duration
	Downtime             time.Duration

	Host partition.Config
	// FailoverEvery, if set, moves the write region of every partition at
	// about this interval through the failover core (see register.go): a
	// graceful switchover (failover.RequestSwitchover) or a takeover
	// (failover.Decide once the write region's lease plus the drift bound
	// has run out), committed to the partition's failover.State and
	// carried out on every reachable replica by failover.Reconcile and
	// node.Do. The write quorum then also shrinks and grows as Decide says.
	FailoverEvery time.Duration
	// Failover is the failover configuration of those moves (leases,
	// hold-offs, graceful timeout); zero means SoakFailoverConfig().
	Failover failover.Config
	// CanaryReadLevel, if set, makes clients read at this level from any
	// region while the checks still expect their partition's level: a run
	// that must fail, proving the checks detect violations.
	CanaryReadLevel partition.Consistency
	// Observe, if set, is installed as the cluster's observer (tracing).
	Observe func(partitiontest.ObservedEvent)
	// LinearizabilityTimeout bounds porcupine per run.
	LinearizabilityTimeout time.Duration
}

// DefaultConfig returns a three-region run with one partition per level.
func DefaultConfig(seed uint64) Config {
	host := partition.DefaultConfig("x", 1)
	host.MaxTailOps = 32
	host.RetainLogOps = 32
	host.CompactStepOps = 16
	host.MaxBatchOps = 16
	host.MaxInflightOps = 64
	host.MaxPendingWrites = 128
	host.MaxLogOps = 4096
	host.CommitTimeout = 3 * time.Second
	host.SnapshotChunkBytes = partition.DefaultMaxOpBytes + 64
	host.MaxEpochHistory = 8
	return Config{
		Seed:    seed,
		Regions: []partition.Region{"r1", "r2", "r3"},
		Levels: []partition.Level{
			{Consistency: partition.Strong},
			{Consistency: partition.BoundedStaleness, StalenessOps: 8, StalenessTime: 400 * time.Millisecond, StalenessHold: 300 * time.Millisecond},
			{Consistency: partition.Session},
			{Consistency: partition.Eventual},
		},
		Keys: 4, Clients: 5,
		Duration: 20 * time.Second, Heal: 10 * time.Second,
		Think:         20 * time.Millisecond,
		ClientTimeout: 2 * time.Second,
		MinDelay:      time.Millisecond, MaxDelay: 15 * time.Millisecond,
		LossRate: 0.02, DupRate: 0.01,
		MinDisk: 200 * time.Microsecond, MaxDisk: 3 * time.Millisecond,
		CrashAfterCommitRate:   0.002,
		CrashEvery:             3 * time.Second,
		CutEvery:               2 * time.Second,
		Downtime:               1500 * time.Millisecond,
		Host:                   host,
		LinearizabilityTimeout: 20 * time.Second,
	}
}

// Report summarises a run. Err (from Run) says what failed, if anything.
type Report struct {
	Seed             uint64
	Writes, WritesOK int
	WritesUnknown    int // timed out or ErrUnknownOutcome
	WritesRefused    int // redirect, backpressure, staleness bound: not applied
	// Failovers counts committed moves of a write region: Takeovers
	// (Decide's failover) plus Switchovers (completed graceful moves).
	Failovers, Takeovers, Switchovers int
	// Transitions counts committed register values by decision kind;
	// Suppressed counts the moves that Decide or RequestSwitchover
	// declined, by reason (hysteresis, no candidate, refused, ...).
	Transitions, Suppressed map[string]int
	// ActionErrors counts failover actions the data plane refused (they
	// are retried at the next evaluation).
	ActionErrors   int
	Reads, ReadsOK int
	ReadsRefused   int
	StrongOps      int // operations checked for linearizability
	SessionReads   int
	BoundedReads   int
	Cluster        partitiontest.ClusterStats
	// Refusals counts refused operations by level and error class.
	Refusals map[string]int
	FinalLSN map[partition.ID]partition.LSN
}

func (r Report) String() string {
	return fmt.Sprintf("seed %d: writes %d ok %d unknown %d refused %d; reads %d ok %d refused %d; strong ops %d; session reads %d; bounded reads %d; failovers %d (takeovers %d, switchovers %d) suppressed %v transitions %v action errors %d; crashes %d (after commit %d); msgs delivered %d lost %d cut %d",
		r.Seed, r.Writes, r.WritesOK, r.WritesUnknown, r.WritesRefused, r.Reads, r.ReadsOK, r.ReadsRefused,
		r.StrongOps, r.SessionReads, r.BoundedReads, r.Failovers, r.Takeovers, r.Switchovers, r.Suppressed, r.Transitions, r.ActionErrors,
		r.Cluster.Crashes, r.Cluster.CrashesAfterCommit, r.Cluster.Delivered, r.Cluster.Lost, r.Cluster.Cut)
}

// ErrCheck wraps every failure Run reports.
var ErrCheck = errors.New("replcheck: check failed")

type opKind uint8

const (
	opWrite opKind = iota + 1
	opRead
)

type client struct {
	id    int
	p     *part
	level partition.Consistency
	// outstanding op
	busy     bool
	kind     opKind
	ref      partition.ClientRef
	key      string
	value    string
	region   partition.Region
	invoked  time.Duration
	deadline time.Duration
	token    partition.Token // session token at invocation
	next     time.Duration

	session   partition.Token
	ownWrite  map[string]partition.Token // latest acked own write per key
	lastSeen  map[string]partition.Token // latest version read per key
	readLevel partition.Consistency
}

type part struct {
	id      partition.ID
	level   partition.Level
	ops     []porcupine.Operation // strong only
	acked   []ackedWrite
	session []sessionRead
	bounded []boundedRead
	starts  map[partition.Epoch]epochStart
	reg     register
}

// sessionRead is checked after the run, against the final lineage: only
// writes that survived (were not truncated by a failover) are owed.
type sessionRead struct {
	client  int
	key     string
	own     partition.Token // latest acknowledged own write of key
	seen    partition.Token // latest version this client read of key before
	version partition.Token // version returned
	found   bool
	at      partition.Token // position of the state read
	region  partition.Region
}

type boundedRead struct {
	invoked time.Duration
	at      partition.Token
	epoch   partition.Epoch // the serving replica's epoch
	region  partition.Region
}

// epochStart is the lineage an epoch's write region inherited.
type epochStart struct {
	after partition.LSN
	hist  []partition.EpochRange
}

// owed reports whether write w belongs to the lineage of epoch e.
func (es epochStart) owed(e partition.Epoch, w partition.Token) bool {
	if w.Epoch == e {
		return true
	}
	if w.LSN > es.after {
		return false
	}
	we, ok := partition.EpochAt(es.hist, w.LSN)
	return !ok || we == w.Epoch
}

type ackedWrite struct {
	token partition.Token
	at    time.Duration
}

type kvInput struct {
	key   string
	put   bool
	value string
}

type runner struct {
	cfg     Config
	rng     *rand.Rand
	c       *partitiontest.Cluster
	parts   []*part
	clients []*client
	byRef   map[partition.ClientRef]*client
	nextRef partition.ClientRef
	rep     Report
	errs    []error
	down    map[partition.Region]time.Duration // restart time
	cuts    []cut
	faults  bool
	evalAt  time.Duration // next evaluation of the failover registers
}

type cut struct {
	a, b  partition.Region
	until time.Duration
}

func (cfg *Config) fill() {
	d := DefaultConfig(cfg.Seed)
	if len(cfg.Regions) == 0 {
		cfg.Regions = d.Regions
	}
	if len(cfg.Levels) == 0 {
		cfg.Levels = d.Levels
	}
	if cfg.Keys == 0 {
		cfg.Keys = d.Keys
	}
	if cfg.Clients == 0 {
		cfg.Clients = d.Clients
	}
	if cfg.Duration == 0 {
		cfg.Duration = d.Duration
	}
	if cfg.Heal == 0 {
		cfg.Heal = d.Heal
	}
	if cfg.Think == 0 {
		cfg.Think = d.Think
	}
	if cfg.ClientTimeout == 0 {
		cfg.ClientTimeout = d.ClientTimeout
	}
	if cfg.Host.Region == "" {
		cfg.Host = d.Host
	}
	if cfg.LinearizabilityTimeout == 0 {
		cfg.LinearizabilityTimeout = d.LinearizabilityTimeout
	}
	if cfg.Downtime == 0 {
		cfg.Downtime = d.Downtime
	}
	if cfg.Failover.LeaseDuration == 0 {
		cfg.Failover = SoakFailoverConfig()
	}
}

// Run runs the scenario and checks it. The error wraps ErrCheck (or
// partition.ErrInvariant) with the first problem found.
func Run(cfg Config) (Report, error) {
	cfg.fill()
	if err := cfg.Failover.Validate(); err != nil {
		return Report{}, fmt.Errorf("replcheck: Config.Failover: %w", err)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed*0x9e3779b97f4a7c15+1))
	c, err := partitiontest.NewCluster(partitiontest.ClusterConfig{
		Regions: cfg.Regions, Host: cfg.Host,
		MinDelay: cfg.MinDelay, MaxDelay: cfg.MaxDelay, LossRate: cfg.LossRate, DupRate: cfg.DupRate,
		MinDisk: cfg.MinDisk, MaxDisk: cfg.MaxDisk, CrashAfterCommitRate: cfg.CrashAfterCommitRate,
		Lease: clusterLease(cfg),
	}, rand.New(rand.NewPCG(cfg.Seed^0x5bd1e995, cfg.Seed+7)))
	if err != nil {
		return Report{}, err
	}
	c.Observe = cfg.Observe
	r := &runner{cfg: cfg, rng: rng, c: c, byRef: map[partition.ClientRef]*client{}, down: map[partition.Region]time.Duration{},
		rep: Report{Seed: cfg.Seed, FinalLSN: map[partition.ID]partition.LSN{}, Refusals: map[string]int{},
			Transitions: map[string]int{}, Suppressed: map[string]int{}}}
	if err := r.setup(); err != nil {
		return r.rep, err
	}
	r.faults = true
	r.loop(cfg.Duration)
	r.healAll()
	r.faults = false
	r.loop(cfg.Duration + cfg.Heal)
	r.finish()
	r.rep.Cluster = c.Stats()
	// A message storm is a bug even when nothing unsafe happens.
	if ops := r.rep.Writes + r.rep.Reads; ops > 0 && r.rep.Cluster.Delivered > uint64(100*ops+100000) {
		r.fail("message storm: %d messages delivered for %d client operations", r.rep.Cluster.Delivered, ops)
	}
	if err := c.Violation(); err != nil {
		return r.rep, fmt.Errorf("seed %d: %w", cfg.Seed, err)
	}
	if len(r.errs) > 0 {
		return r.rep, fmt.Errorf("%w: seed %d: %w (and %d more)", ErrCheck, cfg.Seed, errors.Join(r.errs[:min(len(r.errs), 8)]...), len(r.errs)-1)
	}
	return r.rep, nil
}

func clusterLease(cfg Config) time.Duration {
	if cfg.FailoverEvery > 0 {
		return 0 // the runner grants and renews leases
	}
	return 1000 * time.Hour
}

func (r *runner) fail(format string, args ...any) {
	if len(r.errs) < 100 {
		r.errs = append(r.errs, fmt.Errorf(format, args...))
	}
}

func (r *runner) setup() error {
	// Creation is the control plane's job and retried until durable; keep
	// it out of the fault model.
	r.c.SetCrashAfterCommitRate(0)
	defer r.c.SetCrashAfterCommitRate(r.cfg.CrashAfterCommitRate)
	for i, lvl := range r.cfg.Levels {
		p := &part{id: partition.ID(i + 1), level: lvl, starts: map[partition.Epoch]epochStart{1: {}}}
		// The first region is the write region of epoch 1, every region
		// in the write quorum.
		st, err := failover.NewState("p"+strconv.Itoa(int(p.id)), r.cfg.Regions[0], r.cfg.Regions, lvl.Consistency, 1)
		if err != nil {
			return fmt.Errorf("replcheck: partition %d: %w", p.id, err)
		}
		p.reg = register{st: st, wrOf: map[failover.Epoch]partition.Region{1: st.WriteRegion}}
		r.parts = append(r.parts, p)
		if err := r.c.Create(p.id, partition.Spec{Level: lvl, Quorum: st.WriteQuorum, Epoch: 1}); err != nil {
			return err
		}
		for j := 0; j < r.cfg.Clients; j++ {
			cl := &client{id: len(r.clients), p: p, level: lvl.Consistency,
				ownWrite: map[string]partition.Token{}, lastSeen: map[string]partition.Token{}}
			cl.next = r.think()
			r.clients = append(r.clients, cl)
		}
	}
	r.c.RunFor(50 * time.Millisecond)
	return nil
}

func (r *runner) think() time.Duration {
	return r.c.Now() + time.Duration(r.rng.ExpFloat64()*float64(r.cfg.Think)) + time.Millisecond
}

// loop runs clients and the nemesis until the virtual time reaches end.
func (r *runner) loop(end time.Duration) {
	nextCrash, nextCut := r.nextFault(r.cfg.CrashEvery), r.nextFault(r.cfg.CutEvery)
	nextMove := r.nextFault(r.cfg.FailoverEvery)
	const quantum = 2 * time.Millisecond
	for r.c.Now() < end {
		r.c.RunUntil(min(r.c.Now()+quantum, end))
		now := r.c.Now()
		r.collect()
		if r.faults {
			if r.cfg.CrashEvery > 0 && now >= nextCrash {
				r.crash()
				nextCrash = r.nextFault(r.cfg.CrashEvery)
			}
			if r.cfg.CutEvery > 0 && now >= nextCut {
				r.cutLink()
				nextCut = r.nextFault(r.cfg.CutEvery)
			}
		}
		r.heal(false)
		if r.faults && r.cfg.FailoverEvery > 0 && now >= nextMove {
			r.startMoves(now)
			nextMove = r.nextFault(r.cfg.FailoverEvery)
		}
		r.evaluate(now)
		for _, cl := range r.clients {
			if cl.busy && now >= cl.deadline {
				r.timeout(cl)
			}
			if !cl.busy && now >= cl.next {
				r.issue(cl)
			}
		}
	}
}

func (r *runner) nextFault(every time.Duration) time.Duration {
	if every <= 0 {
		return math.MaxInt64
	}
	return r.c.Now() + time.Duration(r.rng.ExpFloat64()*float64(every))
}

func (r *runner) crash() {
	reg := r.cfg.Regions[r.rng.IntN(len(r.cfg.Regions))]
	if !r.c.Up(reg) || len(r.down) > 0 {
		return
	}
	r.c.Crash(reg)
	r.down[reg] = r.c.Now() + time.Duration(r.rng.Int64N(int64(r.cfg.Downtime))+1)
}

func (r *runner) cutLink() {
	a := r.cfg.Regions[r.rng.IntN(len(r.cfg.Regions))]
	until := r.c.Now() + time.Duration(r.rng.Int64N(int64(r.cfg.Downtime))+1)
	if r.rng.IntN(3) == 0 {
		r.c.Isolate(a)
		for _, b := range r.cfg.Regions {
			if b != a {
				r.cuts = append(r.cuts, cut{a, b, until}, cut{b, a, until})
			}
		}
		return
	}
	b := r.cfg.Regions[r.rng.IntN(len(r.cfg.Regions))]
	if a != b {
		r.c.Cut(a, b)
		r.cuts = append(r.cuts, cut{a, b, until})
	}
}

// heal restarts crashed regions and lifts cuts whose time has come (all if force).
func (r *runner) heal(force bool) {
	now := r.c.Now()
	for _, reg := range r.cfg.Regions {
		if _, ok := r.down[reg]; !ok && !r.c.Up(reg) {
			// Crashed by the cluster itself (right after a commit).
			r.down[reg] = now + time.Duration(r.rng.Int64N(int64(r.cfg.Downtime))+1)
		}
	}
	for _, reg := range r.cfg.Regions {
		at, ok := r.down[reg]
		if !ok {
			continue
		}
		if force || now >= at {
			if err := r.c.Restart(reg); err != nil {
				r.fail("restart %s: %v", reg, err)
			}
			delete(r.down, reg)
		}
	}
	if len(r.cuts) == 0 {
		return
	}
	keep := r.cuts[:0]
	changed := false
	for _, ct := range r.cuts {
		if force || now >= ct.until {
			changed = true
			continue
		}
		keep = append(keep, ct)
	}
	r.cuts = keep
	if changed {
		r.c.Heal()
		for _, ct := range r.cuts {
			r.c.Cut(ct.a, ct.b)
		}
	}
}

func (r *runner) healAll() {
	r.c.SetLoss(0)
	r.c.SetCrashAfterCommitRate(0)
	r.heal(true)
}

func (r *runner) issue(cl *client) {
	r.nextRef++
	cl.ref = r.nextRef
	r.byRef[cl.ref] = cl
	cl.busy = true
	cl.invoked = r.c.Now()
	cl.deadline = cl.invoked + r.cfg.ClientTimeout
	cl.key = "k" + strconv.Itoa(r.rng.IntN(r.cfg.Keys))
	cl.token = cl.session
	p := cl.p
	if r.rng.IntN(2) == 0 {
		cl.kind = opWrite
		cl.value = fmt.Sprintf("c%d-%d", cl.id, cl.ref)
		cl.region = p.writeRegion()
		r.rep.Writes++
		r.c.Write(cl.region, partition.WriteRequest{Partition: p.id, Epoch: p.epoch(), Ref: cl.ref, Key: []byte(cl.key), Value: []byte(cl.value)})
		return
	}
	cl.kind = opRead
	r.rep.Reads++
	cl.readLevel = cl.level
	cl.region = r.cfg.Regions[r.rng.IntN(len(r.cfg.Regions))]
	if cl.level == partition.Strong {
		cl.region = p.writeRegion()
	}
	if r.cfg.CanaryReadLevel != 0 {
		cl.readLevel = r.cfg.CanaryReadLevel
		cl.region = r.cfg.Regions[r.rng.IntN(len(r.cfg.Regions))]
	}
	r.c.Read(cl.region, partition.ReadRequest{Partition: p.id, Ref: cl.ref, Key: []byte(cl.key),
		Consistency: cl.readLevel, Epoch: p.epoch(), Token: cl.session})
}

func (r *runner) collect() {
	for _, cr := range r.c.Replies() {
		cl := r.byRef[cr.Reply.Ref]
		if cl == nil || !cl.busy || cl.ref != cr.Reply.Ref {
			continue // timed out already, or a control reply
		}
		delete(r.byRef, cl.ref)
		r.complete(cl, cr)
	}
}

func (r *runner) timeout(cl *client) {
	delete(r.byRef, cl.ref)
	if cl.kind == opWrite {
		r.rep.WritesUnknown++
		r.unknownWrite(cl)
	}
	r.done(cl)
}

func (r *runner) done(cl *client) {
	cl.busy = false
	cl.next = r.think()
}

func (r *runner) unknownWrite(cl *client) {
	if cl.level == partition.Strong {
		cl.p.ops = append(cl.p.ops, porcupine.Operation{ClientId: cl.id, Input: kvInput{key: cl.key, put: true, value: cl.value},
			Call: int64(cl.invoked), Output: "", Return: math.MaxInt64})
	}
}

func (r *runner) complete(cl *client, cr partitiontest.ClientReply) {
	defer r.done(cl)
	rep := cr.Reply
	now := cr.At
	if cl.kind == opWrite {
		if rep.Err != nil {
			if errors.Is(rep.Err, partition.ErrUnknownOutcome) {
				r.rep.WritesUnknown++
				r.unknownWrite(cl)
			} else {
				r.rep.WritesRefused++
				r.rep.Refusals["write/"+cl.level.String()+"/"+errClass(rep.Err)]++
			}
			return
		}
		r.rep.WritesOK++
		if rep.Token.Epoch == 0 || rep.Token.Epoch > cl.p.epoch() || rep.Token.LSN == 0 {
			r.fail("partition %d: write acked with token %v", cl.p.id, rep.Token)
		}
		cl.p.acked = append(cl.p.acked, ackedWrite{token: rep.Token, at: now})
		cl.session = cl.session.Max(rep.Token)
		cl.ownWrite[cl.key] = cl.ownWrite[cl.key].Max(rep.Token)
		if cl.level == partition.Strong {
			cl.p.ops = append(cl.p.ops, porcupine.Operation{ClientId: cl.id, Input: kvInput{key: cl.key, put: true, value: cl.value},
				Call: int64(cl.invoked), Output: "", Return: int64(now)})
		}
		return
	}
	if rep.Err != nil {
		r.rep.ReadsRefused++
		r.rep.Refusals["read/"+cl.readLevel.String()+"/"+errClass(rep.Err)]++
		return
	}
	r.rep.ReadsOK++
	value := ""
	if rep.Found {
		value = string(rep.Value)
	}
	switch cl.level {
	case partition.Strong:
		cl.p.ops = append(cl.p.ops, porcupine.Operation{ClientId: cl.id, Input: kvInput{key: cl.key},
			Call: int64(cl.invoked), Output: value, Return: int64(now)})
	case partition.Session:
		r.rep.SessionReads++
		if rep.Token.Less(cl.token) {
			r.fail("partition %d client %d: session read at %s returned position %v below the session token %v", cl.p.id, cl.id, cl.region, rep.Token, cl.token)
		}
		cl.p.session = append(cl.p.session, sessionRead{client: cl.id, key: cl.key, own: cl.ownWrite[cl.key],
			seen: cl.lastSeen[cl.key], version: rep.Version, found: rep.Found, at: rep.Token, region: cl.region})
	case partition.BoundedStaleness:
		r.rep.BoundedReads++
		cl.p.bounded = append(cl.p.bounded, boundedRead{invoked: cl.invoked, at: rep.Token, epoch: rep.Epoch, region: cl.region})
	}
	if rep.Found {
		cl.lastSeen[cl.key] = cl.lastSeen[cl.key].Max(rep.Version)
	}
	cl.session = cl.session.Max(rep.Token)
}

// lineage is the final lineage of a partition (its write region's log).
type lineage struct {
	hist []partition.EpochRange
	last partition.LSN
	base partition.LSN
}

// survived reports whether the op at t is in the final lineage; ok is
// false when the lineage no longer knows (compacted history).
func (l lineage) survived(t partition.Token) (in, ok bool) {
	if t.LSN == 0 {
		return true, true
	}
	if t.LSN > l.last {
		return false, true
	}
	e, known := partition.EpochAt(l.hist, t.LSN)
	if !known {
		return false, false
	}
	return e == t.Epoch, true
}

// checkSession: read-your-writes and monotonic reads, for the writes and
// reads that the final lineage kept.
func (r *runner) checkSession(p *part, l lineage) {
	for _, s := range p.session {
		if in, ok := l.survived(s.at); !ok || !in {
			continue // the state read was later truncated by a failover
		}
		if in, ok := l.survived(s.own); ok && in && s.own.LSN > 0 && (!s.found || s.version.LSN < s.own.LSN) {
			r.fail("partition %d client %d: read-your-writes: read of %s at %s (position %v) returned version %v (found %v), own write at %v",
				p.id, s.client, s.key, s.region, s.at, s.version, s.found, s.own)
		}
		if in, ok := l.survived(s.seen); ok && in && s.seen.LSN > 0 && s.version.LSN < s.seen.LSN {
			r.fail("partition %d client %d: monotonic reads: read of %s at %s returned version %v after version %v",
				p.id, s.client, s.key, s.region, s.version, s.seen)
		}
	}
}

// checkBounded: a bounded-staleness read (of the state at position a) may
// lack at most K writes acknowledged before it was invoked, and none
// acknowledged more than T before it. Writes that a failover truncated
// are not owed.
func (r *runner) checkBounded(p *part, l lineage) {
	lvl := p.level
	for _, b := range p.bounded {
		missing := 0
		var oldest time.Duration = -1
		for _, w := range p.acked {
			if w.at >= b.invoked || w.token.LSN <= b.at.LSN {
				continue
			}
			if in, ok := l.survived(w.token); !ok || !in {
				continue
			}
			// A write owed to the read is one in the lineage the serving
			// replica's epoch builds on (a failover may drop writes and a
			// later one may bring them back).
			if es, ok := p.starts[b.epoch]; !ok || !es.owed(b.epoch, w.token) {
				continue
			}
			missing++
			if oldest < 0 || w.at < oldest {
				oldest = w.at
			}
		}
		if uint64(missing) > lvl.StalenessOps {
			r.fail("partition %d: bounded read at %s (applied %v) lacks %d acknowledged writes, bound %d",
				p.id, b.region, b.at, missing, lvl.StalenessOps)
		}
		if oldest >= 0 && b.invoked-oldest > lvl.StalenessTime {
			r.fail("partition %d: bounded read at %s (applied %v) at %v lacks a write acknowledged at %v (%v before), bound %v",
				p.id, b.region, b.at, b.invoked, oldest, b.invoked-oldest, lvl.StalenessTime)
		}
	}
}

// finish waits for every replica to converge, reads every key of every
// strong partition, and runs the history checks.
func (r *runner) finish() {
	for _, cl := range r.clients {
		if cl.busy {
			r.timeout(cl)
		}
	}
	// Convergence: every replica applies what the write region has.
	deadline := r.c.Now() + r.cfg.Heal
	for r.c.Now() < deadline && !r.converged() {
		r.heal(true)
		r.c.RunFor(10 * time.Millisecond)
		r.evaluate(r.c.Now())
	}
	if !r.converged() {
		for _, p := range r.parts {
			for _, reg := range r.cfg.Regions {
				if h := r.c.Host(reg); h != nil {
					pr, _ := h.Progress(p.id)
					r.fail("not converged after healing: partition %d %s: epoch %d %s last %d commit %d applied %d base %d snap %v followers %+v", p.id, reg, pr.Epoch, pr.Role, pr.LastLSN, pr.CommitLSN, pr.AppliedLSN, pr.LogBase, pr.NeedSnapshot, pr.Followers)
				}
			}
		}
	}
	for _, p := range r.parts {
		var l lineage
		if h := r.c.Host(p.writeRegion()); h != nil {
			if pr, err := h.Progress(p.id); err == nil {
				l = lineage{hist: pr.History, last: pr.LastLSN, base: pr.LogBase}
			}
		}
		if p.level.Consistency == partition.Strong || r.cfg.FailoverEvery == 0 {
			// Weaker levels may lose acknowledged writes in a failover
			// (bounded by their level); strong never may.
			r.checkAckedInLineage(p)
		}
		switch p.level.Consistency {
		case partition.Strong:
			r.finalReads(p)
			r.checkLinearizable(p)
		case partition.Session:
			r.checkSession(p, l)
		case partition.BoundedStaleness:
			r.checkBounded(p, l)
		}
	}
}

func (r *runner) converged() bool {
	for _, p := range r.parts {
		leader := r.c.Host(p.writeRegion())
		if leader == nil {
			return false
		}
		lp, err := leader.Progress(p.id)
		if err != nil || lp.CommitLSN != lp.LastLSN {
			return false
		}
		r.rep.FinalLSN[p.id] = lp.LastLSN
		for _, reg := range r.cfg.Regions {
			h := r.c.Host(reg)
			if h == nil {
				return false
			}
			pr, err := h.Progress(p.id)
			if err != nil || pr.AppliedLSN != lp.LastLSN || pr.LastLSN != lp.LastLSN {
				return false
			}
		}
	}
	return true
}

// checkAckedInLineage: every acknowledged write is in every replica's log
// lineage (nothing acknowledged was truncated or lost).
func (r *runner) checkAckedInLineage(p *part) {
	for _, reg := range r.cfg.Regions {
		h := r.c.Host(reg)
		if h == nil {
			continue
		}
		pr, err := h.Progress(p.id)
		if err != nil {
			r.fail("partition %d %s: %v", p.id, reg, err)
			continue
		}
		for _, w := range p.acked {
			if w.token.LSN > pr.LastLSN {
				r.fail("partition %d %s: acknowledged write %v beyond the log end %d", p.id, reg, w.token, pr.LastLSN)
				continue
			}
			if e, ok := partition.EpochAt(pr.History, w.token.LSN); ok && e != w.token.Epoch {
				r.fail("partition %d %s: acknowledged write %v replaced by an op of epoch %d", p.id, reg, w.token, e)
			}
		}
	}
}

func (r *runner) finalReads(p *part) {
	for k := 0; k < r.cfg.Keys; k++ {
		key := "k" + strconv.Itoa(k)
		r.nextRef++
		ref := r.nextRef
		start := r.c.Now()
		r.evaluate(r.c.Now()) // keep the write region's lease
		r.c.Read(p.writeRegion(), partition.ReadRequest{Partition: p.id, Ref: ref, Key: []byte(key), Consistency: partition.Strong, Epoch: p.epoch()})
		var got *partitiontest.ClientReply
		for i := 0; i < 1000 && got == nil; i++ {
			r.c.RunFor(time.Millisecond)
			for _, cr := range r.c.Replies() {
				if cr.Reply.Ref == ref {
					cr := cr
					got = &cr
				}
			}
		}
		if got == nil || got.Reply.Err != nil {
			r.fail("partition %d: final strong read of %s failed: %v", p.id, key, got)
			continue
		}
		v := ""
		if got.Reply.Found {
			v = string(got.Reply.Value)
		}
		p.ops = append(p.ops, porcupine.Operation{ClientId: 1000, Input: kvInput{key: key}, Call: int64(start), Output: v, Return: int64(got.At)})
	}
}

// kvModel is a map of registers, partitioned by key.
func kvModel() porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			by := map[string][]porcupine.Operation{}
			var keys []string
			for _, op := range history {
				k := op.Input.(kvInput).key
				if _, ok := by[k]; !ok {
					keys = append(keys, k)
				}
				by[k] = append(by[k], op)
			}
			sort.Strings(keys)
			out := make([][]porcupine.Operation, 0, len(keys))
			for _, k := range keys {
				out = append(out, by[k])
			}
			return out
		},
		Init: func() any { return "" },
		Step: func(state, input, output any) (bool, any) {
			in := input.(kvInput)
			if in.put {
				return true, in.value
			}
			return output.(string) == state.(string), state
		},
		DescribeOperation: func(input, output any) string {
			in := input.(kvInput)
			if in.put {
				return fmt.Sprintf("put(%s, %s)", in.key, in.value)
			}
			return fmt.Sprintf("get(%s) -> %q", in.key, output)
		},
	}
}

// CheckLinearizable checks a key-value history (exported for tests that
// prove the checker catches a bad history).
func CheckLinearizable(ops []porcupine.Operation, timeout time.Duration) porcupine.CheckResult {
	return porcupine.CheckOperationsTimeout(kvModel(), ops, timeout)
}

// PutOp and GetOp build history operations for CheckLinearizable.
func PutOp(client int, key, value string, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: kvInput{key: key, put: true, value: value}, Call: call, Output: "", Return: ret}
}

// GetOp builds a read operation for CheckLinearizable.
func GetOp(client int, key, value string, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: kvInput{key: key}, Call: call, Output: value, Return: ret}
}

func (r *runner) checkLinearizable(p *part) {
	r.rep.StrongOps += len(p.ops)
	res := CheckLinearizable(p.ops, r.cfg.LinearizabilityTimeout)
	if res != porcupine.Ok {
		r.fail("partition %d: strong history of %d ops is %s (not linearizable or not decided in %v)",
			p.id, len(p.ops), res, r.cfg.LinearizabilityTimeout)
	}
}

func errClass(err error) string {
	for _, e := range []error{partition.ErrStaleEpoch, partition.ErrNotWriteRegion, partition.ErrReplicaBehind,
		partition.ErrStalenessBound, partition.ErrBackpressure, partition.ErrLeaseExpired, partition.ErrNotReady,
		partition.ErrSessionUnavailable, partition.ErrNotFresh, partition.ErrUnknownPartition, partition.ErrTooLarge} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return err.Error()
}
