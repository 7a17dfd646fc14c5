package membership

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// State is a member's gossip state as this node last heard it.
//
// There is no suspect state: memberlist marks a node suspect without
// calling any delegate, and the only way to read it (Memberlist.Members)
// hands out pointers into memberlist's node table, whose State field it
// changes under a private lock, so reading it is a data race. A suspicion
// that clears (the node refutes it) is invisible here; one that does not
// ends as StateDead.
type State uint8

// Member states.
const (
	// StateAlive: the node is gossiping (this includes memberlist's
	// suspect, see State).
	StateAlive State = iota + 1
	// StateDead: memberlist's failure detector declared it dead (or it
	// left but this node missed its Leaving update, see Leave).
	StateDead
	// StateLeft: the node left gracefully (Leave): its last meta had
	// Leaving set.
	StateLeft
)

func (s State) String() string {
	switch s {
	case StateAlive:
		return "alive"
	case StateDead:
		return "dead"
	case StateLeft:
		return "left"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// EventKind says what happened to a member.
type EventKind uint8

// Event kinds. There is no suspect event (see State).
const (
	// EventJoin: a node is alive that was unknown, dead or left.
	EventJoin EventKind = iota + 1
	// EventUpdate: an alive node's meta changed.
	EventUpdate
	// EventLeave: a node left gracefully (StateLeft).
	EventLeave
	// EventDead: a node was declared dead (StateDead).
	EventDead
)

func (k EventKind) String() string {
	switch k {
	case EventJoin:
		return "join"
	case EventUpdate:
		return "update"
	case EventLeave:
		return "leave"
	case EventDead:
		return "dead"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Member is one node as gossip tells of it.
type Member struct {
	Meta
	State State
	// Addr is the node's gossip host:port.
	Addr string
}

// Event is a change of a member's state or meta; Member is the member
// after the change.
type Event struct {
	Kind   EventKind
	Member Member
}

// Stats counts what the membership did and dropped.
type Stats struct {
	// EventsDropped counts events dropped from a full Events channel.
	EventsDropped uint64
	// Refused counts alive messages and merges refused (see Start).
	Refused uint64
	// JoinAttempts and JoinFailures count join attempts, one per address
	// tried.
	JoinAttempts, JoinFailures uint64
}

// Sentinel errors.
var (
	// ErrRefused: a peer was refused; the message says why.
	ErrRefused = errors.New("membership: peer refused")
	// ErrShutdown: the membership was shut down.
	ErrShutdown = errors.New("membership: shut down")
)

const (
	// refuseLogEvery limits the refusal log to one line per node per
	// interval: a refused node keeps gossiping.
	refuseLogEvery = time.Minute
	maxRefuseLog   = 128
)

// Membership is this node's gossip membership. Its methods are safe for
// concurrent use.
type Membership struct {
	cfg  Config
	log  *slog.Logger
	rand func() float64
	ml   *memberlist.Memberlist

	mu        sync.Mutex
	meta      []byte             // what NodeMeta gossips
	members   map[string]*Member // by name
	changed   map[string]time.Time
	byID      map[uint16]string // alive members only
	selfAddr  string
	events    chan Event
	closed    bool
	stats     Stats
	refuseLog map[string]time.Time

	life     sync.Mutex // orders Leave and Shutdown
	shut     bool
	left     bool
	stopOnce sync.Once
	stop     chan struct{}
	joinDone chan struct{}
}

// Start validates cfg, starts memberlist on BindAddr:BindPort and, if
// RetryJoin is set, a goroutine that joins it.
//
// The join goroutine tries the RetryJoin addresses in order, one at a
// time (so at most len(RetryJoin) attempts a round, each bounded by
// TCPTimeout), while this node sees no other alive member: before the
// first join succeeds and again whenever it finds itself alone. Between
// rounds it waits a backoff that starts at RetryJoinMin, doubles after a
// round that left it alone, is capped at RetryJoinMax, resets after a
// round that joined, and is jittered to [1/2, 1) of itself.
//
// Every alive message and every push/pull merge is checked against this
// node's table (the refusal rule): a node is refused, and the refusal
// logged with the reason, when its meta does not decode, names another
// cluster or another node name than it gossips under, carries a node id
// an alive member of another name holds (the first to be seen keeps it
// until it is dead or left), or would grow the table past MaxMembers.
func Start(cfg Config) (*Membership, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newMembership(cfg)
	if err != nil {
		return nil, err
	}
	mc, err := cfg.memberlistConfig(m.delegate())
	if err != nil {
		return nil, err
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		if mc.Transport != nil {
			_ = mc.Transport.Shutdown() // Create may not have
		}
		return nil, fmt.Errorf("membership: start memberlist on %s:%d: %w", cfg.BindAddr, cfg.BindPort, err)
	}
	m.ml = ml
	go m.joinLoop()
	return m, nil
}

// memberlistConfig is the memberlist config for cfg (validated) with d as
// every delegate. Without SourceIP its Transport is nil: memberlist builds
// and binds its own. With it, the transport is bound here.
func (cfg Config) memberlistConfig(d *delegate) (*memberlist.Config, error) {
	mc := cfg.memberlistTiming()
	mc.Name = cfg.Name
	mc.BindAddr = cfg.BindAddr
	mc.BindPort = cfg.BindPort
	mc.AdvertiseAddr = cfg.AdvertiseAddr
	mc.AdvertisePort = cfg.AdvertisePort
	if cfg.AdvertisePort == 0 {
		mc.AdvertisePort = cfg.BindPort
	}
	mc.Label = cfg.Cluster
	mc.SecretKey = cfg.GossipKey
	mc.Delegate = d
	mc.Events = d
	mc.Alive = d
	mc.Merge = d
	mc.Logger = log.New(slogWriter{cfg.Logger.With("component", "memberlist")}, "", 0)
	if cfg.SourceIP != "" {
		// Otherwise (production) memberlist builds its own transport.
		t, err := newSourceBoundTransport(mc, net.ParseIP(cfg.SourceIP), mc.Logger)
		if err != nil {
			return nil, err
		}
		mc.Transport = t
	}
	return mc, nil
}

// newMembership builds a Membership without memberlist (cfg validated).
func newMembership(cfg Config) (*Membership, error) {
	meta, err := cfg.localMeta().MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("membership: local meta: %w", err)
	}
	m := &Membership{
		cfg:       cfg,
		log:       cfg.Logger,
		rand:      cfg.Rand,
		meta:      meta,
		members:   make(map[string]*Member),
		changed:   make(map[string]time.Time),
		byID:      make(map[uint16]string),
		events:    make(chan Event, cfg.EventBuffer),
		refuseLog: make(map[string]time.Time),
		stop:      make(chan struct{}),
		joinDone:  make(chan struct{}),
	}
	if m.rand == nil {
		m.rand = rand.Float64
	}
	return m, nil
}

func (m *Membership) delegate() *delegate { return &delegate{m: m} }

// Addr is this node's advertised gossip host:port (the bound port when
// BindPort was 0), for others' RetryJoin.
func (m *Membership) Addr() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.selfAddr
}

// Members returns the members this node knows of, itself included, sorted
// by node id (then name). Dead and left members stay for DeadRetention.
func (m *Membership) Members() []Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruneLocked()
	out := make([]Member, 0, len(m.members))
	for _, mem := range m.members {
		out = append(out, *mem)
	}
	slices.SortFunc(out, func(a, b Member) int {
		return cmp.Or(cmp.Compare(a.NodeID, b.NodeID), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// Events returns the member events, this node's own join first. The
// channel holds up to Config.EventBuffer events; when it is full the
// oldest event is dropped to make room and counted (Stats.EventsDropped),
// so a slow reader loses history, never the latest news, and never slows
// gossip. Members is the state to resync from after a drop. The channel is
// closed by Shutdown.
func (m *Membership) Events() <-chan Event { return m.events }

// Stats returns the counters.
func (m *Membership) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}

// Leave stops the join goroutine and leaves the cluster gracefully, in
// up to timeout (DefaultLeaveTimeout if not positive): it first gossips
// its meta with Leaving set and waits for that update to go out, then
// sends memberlist's leave and waits for it to go out. A member that saw
// the update records the node as left; one that missed it (gossip order
// is not guaranteed) records it as dead. Call Shutdown after it; a second
// Leave does nothing.
func (m *Membership) Leave(timeout time.Duration) error {
	if timeout <= 0 {
		timeout = DefaultLeaveTimeout
	}
	deadline := time.Now().Add(timeout)
	m.life.Lock()
	defer m.life.Unlock()
	if m.shut {
		return ErrShutdown
	}
	if m.left {
		return nil
	}
	m.left = true
	m.stopJoin()
	leaving := m.cfg.localMeta()
	leaving.Leaving = true
	raw, err := leaving.MarshalBinary()
	if err != nil {
		return fmt.Errorf("membership: leave: %w", err)
	}
	m.mu.Lock()
	m.meta = raw
	m.mu.Unlock()
	if err := m.ml.UpdateNode(timeout); err != nil {
		return fmt.Errorf("membership: leave: announce leaving: %w", err)
	}
	if err := m.ml.Leave(max(time.Until(deadline), time.Millisecond)); err != nil {
		return fmt.Errorf("membership: leave: %w", err)
	}
	return nil
}

// Shutdown stops gossip at once (without Leave the others find this node
// dead), waits for the join goroutine and closes Events. It is idempotent.
func (m *Membership) Shutdown() error {
	m.life.Lock()
	defer m.life.Unlock()
	if m.shut {
		return nil
	}
	m.shut = true
	m.stopJoin()
	err := m.ml.Shutdown()
	<-m.joinDone
	m.mu.Lock()
	m.closed = true
	close(m.events)
	m.mu.Unlock()
	if err != nil {
		return fmt.Errorf("membership: shutdown: %w", err)
	}
	return nil
}

func (m *Membership) stopJoin() { m.stopOnce.Do(func() { close(m.stop) }) }

func (m *Membership) joinLoop() {
	defer close(m.joinDone)
	if len(m.cfg.RetryJoin) == 0 {
		return
	}
	backoff := m.cfg.RetryJoinMin
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-timer.C:
		}
		if m.ml.NumMembers() <= 1 {
			m.joinRound()
			if m.ml.NumMembers() > 1 {
				backoff = m.cfg.RetryJoinMin
			} else {
				backoff = min(2*backoff, m.cfg.RetryJoinMax)
			}
		}
		timer.Reset(time.Duration((0.5 + m.rand()/2) * float64(backoff)))
	}
}

// joinRound tries each RetryJoin address once, stopping early on Shutdown
// or Leave.
func (m *Membership) joinRound() {
	for _, addr := range m.cfg.RetryJoin {
		select {
		case <-m.stop:
			return
		default:
		}
		_, err := m.ml.Join([]string{addr})
		m.mu.Lock()
		m.stats.JoinAttempts++
		if err != nil {
			m.stats.JoinFailures++
		}
		m.mu.Unlock()
		if err != nil {
			m.log.Debug("membership: join failed", "addr", addr, "err", err)
			continue
		}
		m.log.Info("membership: joined", "addr", addr)
	}
}

// pruneLocked forgets dead and left members older than DeadRetention.
func (m *Membership) pruneLocked() {
	now := m.cfg.Now()
	for name, mem := range m.members {
		if mem.State != StateAlive && now.Sub(m.changed[name]) > m.cfg.DeadRetention {
			delete(m.members, name)
			delete(m.changed, name)
		}
	}
}

// checkLocked applies the refusal rule to an alive node.
func (m *Membership) checkLocked(name string, raw []byte) (Meta, error) {
	meta, err := DecodeMeta(raw)
	if err != nil {
		return Meta{}, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	switch holder, held := m.byID[meta.NodeID]; {
	case meta.Name != name:
		return Meta{}, fmt.Errorf("%w: meta names %q", ErrRefused, meta.Name)
	case meta.Cluster != m.cfg.Cluster:
		return Meta{}, fmt.Errorf("%w: cluster %q, not %q", ErrRefused, meta.Cluster, m.cfg.Cluster)
	case held && holder != name:
		return Meta{}, fmt.Errorf("%w: node id %d is held by %q", ErrRefused, meta.NodeID, holder)
	}
	if _, known := m.members[name]; !known && len(m.members) >= m.cfg.MaxMembers {
		m.pruneLocked()
		if len(m.members) >= m.cfg.MaxMembers {
			return Meta{}, fmt.Errorf("%w: member table full (%d)", ErrRefused, m.cfg.MaxMembers)
		}
	}
	return meta, nil
}

func (m *Membership) refusedLocked(name, addr string, err error) {
	m.stats.Refused++
	now := m.cfg.Now()
	if last, ok := m.refuseLog[name]; ok && now.Sub(last) < refuseLogEvery {
		return
	}
	if len(m.refuseLog) >= maxRefuseLog {
		clear(m.refuseLog)
	}
	m.refuseLog[name] = now
	m.log.Warn("membership: refused node", "name", name, "addr", addr, "err", err)
}

// setLocked records a member's new state and emits kind.
func (m *Membership) setLocked(kind EventKind, mem Member) {
	if old, ok := m.members[mem.Name]; ok && m.byID[old.NodeID] == mem.Name {
		delete(m.byID, old.NodeID)
	}
	if mem.State == StateAlive {
		if _, held := m.byID[mem.NodeID]; !held {
			m.byID[mem.NodeID] = mem.Name
		}
	}
	m.members[mem.Name] = &mem
	m.changed[mem.Name] = m.cfg.Now()
	if mem.Name == m.cfg.Name && m.selfAddr == "" {
		m.selfAddr = mem.Addr
	}
	m.emitLocked(Event{Kind: kind, Member: mem})
}

// emitLocked sends e, dropping the oldest queued event if the channel is
// full. Every send happens under mu, so after one receive there is room.
func (m *Membership) emitLocked(e Event) {
	if m.closed {
		return
	}
	select {
	case m.events <- e:
		return
	default:
	}
	select {
	case <-m.events:
	default:
	}
	m.stats.EventsDropped++
	select {
	case m.events <- e:
	default:
		m.stats.EventsDropped++
	}
}

// delegate implements memberlist's delegates, kept off Membership's
// method set. memberlist calls them holding its node lock: they must not
// block or call back into memberlist.
type delegate struct{ m *Membership }

func (d *delegate) NodeMeta(limit int) []byte {
	d.m.mu.Lock()
	defer d.m.mu.Unlock()
	if len(d.m.meta) > limit {
		return nil // cannot happen: MaxMetaBytes < memberlist.MetaMaxSize
	}
	return d.m.meta
}

func (d *delegate) NotifyMsg([]byte)                           {}
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}

func (d *delegate) NotifyAlive(peer *memberlist.Node) error {
	m := d.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.checkLocked(peer.Name, peer.Meta); err != nil {
		m.refusedLocked(peer.Name, peer.Address(), err)
		return err
	}
	return nil
}

func (d *delegate) NotifyMerge(peers []*memberlist.Node) error {
	m := d.m
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make(map[uint16]string, len(peers))
	for _, p := range peers {
		if p.State != memberlist.StateAlive && p.State != memberlist.StateSuspect {
			continue
		}
		meta, err := m.checkLocked(p.Name, p.Meta)
		if err == nil {
			if other, dup := ids[meta.NodeID]; dup && other != p.Name {
				err = fmt.Errorf("%w: node id %d is also claimed by %q", ErrRefused, meta.NodeID, other)
			}
			ids[meta.NodeID] = p.Name
		}
		if err != nil {
			err = fmt.Errorf("merge refused: %w", err)
			m.refusedLocked(p.Name, p.Address(), err)
			return err
		}
	}
	return nil
}

func (d *delegate) NotifyJoin(n *memberlist.Node) { d.notify(false, n) }

func (d *delegate) NotifyUpdate(n *memberlist.Node) { d.notify(true, n) }

// NotifyLeave: memberlist calls it for a death and a graceful leave alike,
// and the node's State field it passes is not maintained (memberlist keeps
// the state in a field of its own that shadows it), so the Leaving flag of
// the node's last meta tells the two apart.
func (d *delegate) NotifyLeave(n *memberlist.Node) {
	m := d.m
	m.mu.Lock()
	defer m.mu.Unlock()
	mem := Member{Addr: n.Address(), State: StateDead}
	old, known := m.members[n.Name]
	if meta, err := DecodeMeta(n.Meta); err == nil {
		mem.Meta = meta
	} else if known {
		mem.Meta = old.Meta
	} else {
		return // never admitted
	}
	kind := EventDead
	if mem.Leaving || (known && old.Leaving) {
		mem.State, kind = StateLeft, EventLeave
	}
	m.setLocked(kind, mem)
}

func (d *delegate) notify(update bool, n *memberlist.Node) {
	m := d.m
	m.mu.Lock()
	defer m.mu.Unlock()
	meta, err := DecodeMeta(n.Meta)
	if err != nil {
		// NotifyAlive refuses undecodable meta, so this is not expected.
		m.log.Warn("membership: member with bad meta", "name", n.Name, "err", err)
		return
	}
	kind := EventJoin
	if update {
		kind = EventUpdate
	}
	m.setLocked(kind, Member{Meta: meta, State: StateAlive, Addr: n.Address()})
}

// slogWriter bridges memberlist's *log.Logger to slog at debug level.
type slogWriter struct{ log *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	if w.log.Enabled(context.Background(), slog.LevelDebug) {
		w.log.Debug(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}
