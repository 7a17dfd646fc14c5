package membership

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/stretchr/testify/require"
)

// --- unit tests on the delegates, without memberlist ---

func newUnit(t *testing.T, edit func(*Config)) *Membership {
	t.Helper()
	c := validConfig()
	if edit != nil {
		edit(&c)
	}
	c, err := c.withDefaults()
	require.NoError(t, err)
	m, err := newMembership(c)
	require.NoError(t, err)
	return m
}

func node(t *testing.T, name string, edit func(*Meta)) *memberlist.Node {
	t.Helper()
	meta := Meta{Cluster: "test", Name: name, NodeID: 2, Region: "eu", NodeAddr: "127.0.0.1:7001"}
	if edit != nil {
		edit(&meta)
	}
	raw, err := meta.MarshalBinary()
	require.NoError(t, err)
	return &memberlist.Node{Name: name, Addr: net.IPv4(127, 0, 0, 1), Port: 7946, Meta: raw, State: memberlist.StateAlive}
}

func TestRefusalRule(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, d *delegate) // runs after self joined
		peer  func(t *testing.T) *memberlist.Node
		want  string // empty: accepted
	}{
		{"accepted", nil, func(t *testing.T) *memberlist.Node { return node(t, "n2", nil) }, ""},
		{"self", nil, func(t *testing.T) *memberlist.Node {
			return node(t, "n1", func(m *Meta) { m.NodeID = 1 })
		}, ""},
		{"other cluster", nil, func(t *testing.T) *memberlist.Node {
			return node(t, "n2", func(m *Meta) { m.Cluster = "other" })
		}, `cluster "other", not "test"`},
		{"name mismatch", nil, func(t *testing.T) *memberlist.Node {
			n := node(t, "n2", nil)
			n.Name = "n3"
			return n
		}, `meta names "n2"`},
		{"bad meta", nil, func(t *testing.T) *memberlist.Node {
			n := node(t, "n2", nil)
			n.Meta = append(n.Meta, 0)
			return n
		}, "trailing bytes"},
		{"no meta", nil, func(t *testing.T) *memberlist.Node {
			n := node(t, "n2", nil)
			n.Meta = nil
			return n
		}, "too short"},
		{"id of self", nil, func(t *testing.T) *memberlist.Node {
			return node(t, "n9", func(m *Meta) { m.NodeID = 1 })
		}, `node id 1 is held by "n1"`},
		{"id of alive peer", func(t *testing.T, d *delegate) {
			d.NotifyJoin(node(t, "n2", nil))
		}, func(t *testing.T) *memberlist.Node { return node(t, "d", nil) }, `node id 2 is held by "n2"`},
		{"id of dead peer is free", func(t *testing.T, d *delegate) {
			n := node(t, "n2", nil)
			d.NotifyJoin(n)
			n.State = memberlist.StateDead
			d.NotifyLeave(n)
		}, func(t *testing.T) *memberlist.Node { return node(t, "d", nil) }, ""},
		{"id of left peer is free", func(t *testing.T, d *delegate) {
			n := node(t, "n2", func(m *Meta) { m.Leaving = true })
			d.NotifyJoin(n)
			d.NotifyLeave(n)
		}, func(t *testing.T) *memberlist.Node { return node(t, "d", nil) }, ""},
		{"id freed by update", func(t *testing.T, d *delegate) {
			d.NotifyJoin(node(t, "n2", nil))
			d.NotifyUpdate(node(t, "n2", func(m *Meta) { m.NodeID = 3 }))
		}, func(t *testing.T) *memberlist.Node { return node(t, "d", nil) }, ""},
		{"table full", func(t *testing.T, d *delegate) {
			d.NotifyJoin(node(t, "n2", nil))
			d.NotifyJoin(node(t, "n3", func(m *Meta) { m.NodeID = 3 }))
		}, func(t *testing.T) *memberlist.Node {
			return node(t, "n4", func(m *Meta) { m.NodeID = 4 })
		}, "member table full (3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			m := newUnit(t, func(c *Config) { c.MaxMembers = 3; c.Logger = slog.New(rec) })
			d := m.delegate()
			d.NotifyJoin(node(t, "n1", func(m *Meta) { m.NodeID = 1 }))
			if tc.setup != nil {
				tc.setup(t, d)
			}
			peer := tc.peer(t)
			errAlive := d.NotifyAlive(peer)
			errMerge := d.NotifyMerge([]*memberlist.Node{peer})
			if tc.want == "" {
				require.NoError(t, errAlive)
				require.NoError(t, errMerge)
				require.Zero(t, m.Stats().Refused)
				return
			}
			for _, err := range []error{errAlive, errMerge} {
				require.ErrorIs(t, err, ErrRefused)
				require.Contains(t, err.Error(), tc.want)
			}
			require.Equal(t, uint64(2), m.Stats().Refused)
			// Logged once with the reason: the second refusal is rate-limited.
			logs := rec.messages(slog.LevelWarn)
			require.Len(t, logs, 1)
			require.Contains(t, logs[0], tc.want)
		})
	}
}

func TestMergeRefusesDuplicateIDsAmongPeers(t *testing.T) {
	m := newUnit(t, nil)
	d := m.delegate()
	d.NotifyJoin(node(t, "n1", func(m *Meta) { m.NodeID = 1 }))
	a := node(t, "a", func(m *Meta) { m.NodeID = 5 })
	b := node(t, "b", func(m *Meta) { m.NodeID = 5 })
	err := d.NotifyMerge([]*memberlist.Node{a, b})
	require.ErrorIs(t, err, ErrRefused)
	require.Contains(t, err.Error(), `node id 5 is also claimed by "a"`)
	// A dead peer in the push/pull is not checked.
	b.State = memberlist.StateDead
	b.Meta = nil
	require.NoError(t, d.NotifyMerge([]*memberlist.Node{a, b}))
}

func TestEventsDropOldest(t *testing.T) {
	m := newUnit(t, func(c *Config) { c.EventBuffer = 2 })
	d := m.delegate()
	for i := uint16(1); i <= 4; i++ {
		d.NotifyJoin(node(t, "n"+strconv.Itoa(int(i)), func(m *Meta) { m.NodeID = i }))
	}
	require.Equal(t, uint64(2), m.Stats().EventsDropped)
	require.Equal(t, "n3", (<-m.Events()).Member.Name)
	require.Equal(t, "n4", (<-m.Events()).Member.Name)
	require.Len(t, m.Members(), 4)
}

func TestMembersSortedAndPruned(t *testing.T) {
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	m := newUnit(t, func(c *Config) { c.Now = clock; c.DeadRetention = time.Minute })
	d := m.delegate()
	for _, id := range []uint16{3, 1, 2} {
		d.NotifyJoin(node(t, "n"+strconv.Itoa(int(id)), func(m *Meta) { m.NodeID = id }))
	}
	d.NotifyUpdate(node(t, "n2", func(m *Meta) { m.NodeID, m.Leaving = 2, true }))
	d.NotifyLeave(node(t, "n2", func(m *Meta) { m.NodeID = 2 })) // the flag was seen before
	d.NotifyLeave(node(t, "n3", func(m *Meta) { m.NodeID = 3 }))
	got := m.Members()
	require.Len(t, got, 3)
	for i, want := range []struct {
		id    uint16
		state State
	}{{1, StateAlive}, {2, StateLeft}, {3, StateDead}} {
		require.Equal(t, want.id, got[i].NodeID)
		require.Equal(t, want.state, got[i].State)
		require.Equal(t, "127.0.0.1:7946", got[i].Addr)
	}
	mu.Lock()
	now = now.Add(time.Minute + time.Second)
	mu.Unlock()
	d.NotifyJoin(node(t, "n3", func(m *Meta) { m.NodeID = 3 })) // back, so kept
	got = m.Members()
	require.Len(t, got, 2)
	require.Equal(t, []uint16{1, 3}, []uint16{got[0].NodeID, got[1].NodeID})
	require.Equal(t, StateAlive, got[1].State)
}

// --- real memberlist instances on 127.0.0.1 ---

var testKey = bytes.Repeat([]byte{0x42}, 16)

// realConfig is a fast local profile: a silent member is dead within
// DeadBound(3), about 3 s.
func realConfig(name string, id uint16, port int, join ...string) Config {
	return Config{
		Name: name, NodeID: id, Region: "eu", Zone: "eu-" + name, Cluster: "test",
		BindAddr: "127.0.0.1", BindPort: port, RetryJoin: join,
		RetryJoinMin: 20 * time.Millisecond, RetryJoinMax: 300 * time.Millisecond,
		GossipKey: testKey,
		NodeAddr:  "127.0.0.1:" + strconv.Itoa(7000+int(id)), APIAddr: "127.0.0.1:" + strconv.Itoa(8000+int(id)),
		Version: "test",
		Profile: ProfileLocal, ProbeInterval: 250 * time.Millisecond, ProbeTimeout: 150 * time.Millisecond,
		GossipInterval: 50 * time.Millisecond, SuspicionMult: 3, SuspicionMaxTimeoutMult: 2,
		TCPTimeout: 500 * time.Millisecond,
	}
}

func start(t *testing.T, c Config) *Membership {
	t.Helper()
	m, err := Start(c)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Shutdown()) })
	return m
}

// freePort finds a port free for both TCP and UDP on 127.0.0.1.
func freePort(t *testing.T) int {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		require.NoError(t, l.Close())
		if err == nil {
			require.NoError(t, u.Close())
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

func addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

func stateOf(m *Membership, name string) State {
	for _, mem := range m.Members() {
		if mem.Name == name {
			return mem.State
		}
	}
	return 0
}

func aliveNames(m *Membership) []string {
	var out []string
	for _, mem := range m.Members() {
		if mem.State == StateAlive {
			out = append(out, mem.Name)
		}
	}
	return out
}

// cluster starts three nodes whose RetryJoin lists the other two (so the
// first to start retries alone until the others are up) and waits until
// each sees all three.
func cluster(t *testing.T) []*Membership {
	t.Helper()
	ports := []int{freePort(t), freePort(t), freePort(t)}
	var ms []*Membership
	for i, name := range []string{"a", "b", "c"} {
		var join []string
		for j, p := range ports {
			if j != i {
				join = append(join, addr(p))
			}
		}
		ms = append(ms, start(t, realConfig(name, uint16(i+1), ports[i], join...)))
	}
	require.Eventually(t, func() bool {
		for _, m := range ms {
			if len(aliveNames(m)) != 3 {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "three nodes did not converge")
	return ms
}

// waitEvent reads events until one of kind for name arrives.
func waitEvent(t *testing.T, m *Membership, kind EventKind, name string, within time.Duration) Event {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		select {
		case e, ok := <-m.Events():
			require.True(t, ok, "events closed")
			if e.Kind == kind && e.Member.Name == name {
				return e
			}
		case <-timer.C:
			t.Fatalf("no %v event for %s within %v", kind, name, within)
		}
	}
}

func TestThreeNodesJoin(t *testing.T) {
	if testing.Short() {
		t.Skip("real gossip")
	}
	ms := cluster(t)
	for _, m := range ms {
		got := m.Members()
		require.Len(t, got, 3)
		for i, mem := range got {
			want := realConfig([]string{"a", "b", "c"}[i], uint16(i+1), 0)
			require.Equal(t, want.localMeta(), mem.Meta)
			require.Equal(t, StateAlive, mem.State)
			require.Equal(t, ms[i].Addr(), mem.Addr)
		}
		joined := map[string]Meta{}
		for len(joined) < 3 {
			select {
			case e := <-m.Events():
				require.Equal(t, EventJoin, e.Kind)
				joined[e.Member.Name] = e.Member.Meta
			case <-time.After(time.Second):
				t.Fatalf("%s saw joins of %v only", m.cfg.Name, joined)
			}
		}
		for _, other := range ms {
			require.Equal(t, other.cfg.localMeta(), joined[other.cfg.Name])
		}
	}
}

func TestLeaveIsSeenAsLeft(t *testing.T) {
	if testing.Short() {
		t.Skip("real gossip")
	}
	ms := cluster(t)
	c := ms[2]
	require.NoError(t, c.Leave(time.Second))
	require.NoError(t, c.Shutdown())
	bound := c.cfg.DeadBound(3)
	for _, m := range ms[:2] {
		require.Eventually(t, func() bool { return stateOf(m, "c") == StateLeft }, bound, 20*time.Millisecond,
			"%s sees c %v", m.cfg.Name, stateOf(m, "c"))
		e := waitEvent(t, m, EventLeave, "c", time.Second)
		require.Equal(t, StateLeft, e.Member.State)
		require.Equal(t, uint16(3), e.Member.NodeID)
	}
	require.ErrorIs(t, c.Leave(time.Second), ErrShutdown)
	require.NoError(t, c.Shutdown(), "Shutdown is idempotent")
	for range c.Events() { // drains, then sees the channel closed
	}
}

func TestShutdownIsSeenAsDead(t *testing.T) {
	if testing.Short() {
		t.Skip("real gossip")
	}
	ms := cluster(t)
	c := ms[2]
	require.NoError(t, c.Shutdown())
	t0 := time.Now()
	bound := c.cfg.DeadBound(3)
	for _, m := range ms[:2] {
		require.Eventually(t, func() bool { return stateOf(m, "c") == StateDead }, bound, 20*time.Millisecond,
			"c not dead within DeadBound(3) = %v", bound)
		waitEvent(t, m, EventDead, "c", time.Second)
	}
	t.Logf("dead seen after %v (bound %v)", time.Since(t0), bound)
}

func TestJoinRetriesUntilPeerIsUp(t *testing.T) {
	if testing.Short() {
		t.Skip("real gossip")
	}
	port := freePort(t)
	b := start(t, realConfig("b", 2, 0, addr(port)))
	require.Eventually(t, func() bool { return b.Stats().JoinFailures >= 2 }, 5*time.Second, 10*time.Millisecond)
	a := start(t, realConfig("a", 1, port))
	require.Eventually(t, func() bool { return len(aliveNames(a)) == 2 && len(aliveNames(b)) == 2 },
		5*time.Second, 20*time.Millisecond)
}

// notMerged waits until b has tried to join a a few times, then checks
// that neither sees the other.
func notMerged(t *testing.T, a, b *Membership) {
	t.Helper()
	require.Eventually(t, func() bool { return b.Stats().JoinFailures >= 3 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, []string{a.cfg.Name}, aliveNames(a))
	require.Equal(t, []string{b.cfg.Name}, aliveNames(b))
}

func TestOtherClusterDoesNotMerge(t *testing.T) {
	if testing.Short() {
		t.Skip("real gossip")
	}
	a := start(t, realConfig("a", 1, 0))
	cb := realConfig("b", 2, 0, a.Addr())
	cb.Cluster = "other"
	notMerged(t, a, start(t, cb))
}

func TestWrongGossipKeyDoesNotMerge(t *testing.T) {
	if testing.Short() {
		t.Skip("real gossip")
	}
	a := start(t, realConfig("a", 1, 0))
	cb := realConfig("b", 2, 0, a.Addr())
	cb.GossipKey = bytes.Repeat([]byte{0x43}, 32)
	notMerged(t, a, start(t, cb))
	ci := realConfig("i", 3, 0, a.Addr())
	ci.GossipKey, ci.Insecure = nil, true
	notMerged(t, a, start(t, ci))
}

func TestDuplicateNodeIDRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("real gossip")
	}
	rec := &recorder{}
	ca := realConfig("a", 1, 0)
	ca.Logger = slog.New(rec)
	a := start(t, ca)
	b := start(t, realConfig("b", 2, 0, a.Addr()))
	require.Eventually(t, func() bool { return len(aliveNames(a)) == 2 }, 5*time.Second, 20*time.Millisecond)
	d := start(t, realConfig("d", 2, 0, a.Addr())) // b's id, another name
	require.Eventually(t, func() bool { return d.Stats().JoinFailures >= 3 }, 5*time.Second, 10*time.Millisecond)
	require.Positive(t, a.Stats().Refused)
	require.Equal(t, []string{"a", "b"}, aliveNames(a))
	require.Equal(t, []string{"a", "b"}, aliveNames(b))
	require.Equal(t, []string{"d"}, aliveNames(d))
	var found bool
	for _, msg := range rec.messages(slog.LevelWarn) {
		found = found || bytes.Contains([]byte(msg), []byte(`node id 2 is held by "b"`))
	}
	require.True(t, found, "refusal logged with its reason: %q", rec.messages(slog.LevelWarn))
}

// recorder is a slog.Handler that keeps records (message and attrs).
type recorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Clone())
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

// messages renders the records at level or above as "msg k=v ...".
func (r *recorder) messages(level slog.Level) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.recs {
		if rec.Level < level {
			continue
		}
		s := rec.Message
		rec.Attrs(func(a slog.Attr) bool { s += " " + a.String(); return true })
		out = append(out, s)
	}
	return out
}
