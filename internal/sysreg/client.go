package sysreg

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/quorum"
)

// Defaults for Config fields left zero.
const (
	DefaultTimeout      = 10 * time.Second
	DefaultPhaseTimeout = time.Second
	DefaultMaxAttempts  = 5
)

// Config configures a Client.
type Config struct {
	// HTTP carries the requests (required). In production its transport
	// holds the agent's mTLS tls.Config; tests pass an httptest client or
	// MemPeers.HTTPClient.
	HTTP *http.Client
	// Scheme is "https" (default) or "http".
	Scheme string
	// ProposerID is this client's proposer id (required, non-zero). It
	// breaks ballot ties, so it must be unique among all proposers of the
	// register across time: give every process incarnation a fresh one
	// (RandomProposerID), never a fixed per-host id, since a restarted
	// process that reused its id could reissue a ballot it used before
	// with another value. Within an incarnation the Client never reuses a
	// ballot (see the package doc).
	ProposerID uint64
	// Timeout bounds one operation (on top of the caller's context).
	// Default DefaultTimeout.
	Timeout time.Duration
	// PhaseTimeout bounds one CASPaxos phase and one HTTP request.
	// Default DefaultPhaseTimeout.
	PhaseTimeout time.Duration
	// MaxAttempts bounds the rounds of one operation, in [1, 64].
	// Default DefaultMaxAttempts.
	MaxAttempts int
	// PeerInFlight bounds the requests in flight to one peer; default
	// DefaultPeerInFlight.
	PeerInFlight int
	// Logger; nil discards.
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.Scheme == "" {
		c.Scheme = DefaultScheme
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.PhaseTimeout == 0 {
		c.PhaseTimeout = DefaultPhaseTimeout
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.PeerInFlight == 0 {
		c.PeerInFlight = DefaultPeerInFlight
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.HTTP == nil:
		return c, configErr("Config.HTTP", "must not be nil")
	case c.Scheme != "https" && c.Scheme != "http":
		return c, configErr("Config.Scheme", "must be https or http, got %q", c.Scheme)
	case c.ProposerID == 0:
		return c, configErr("Config.ProposerID", "must be non-zero (use RandomProposerID)")
	case c.Timeout < 0:
		return c, configErr("Config.Timeout", "must be positive, got %v", c.Timeout)
	case c.PhaseTimeout < 0:
		return c, configErr("Config.PhaseTimeout", "must be positive, got %v", c.PhaseTimeout)
	case c.MaxAttempts < 1 || c.MaxAttempts > 64:
		return c, configErr("Config.MaxAttempts", "must be in [1, 64], got %d", c.MaxAttempts)
	case c.PeerInFlight < 1:
		return c, configErr("Config.PeerInFlight", "must be at least 1, got %d", c.PeerInFlight)
	}
	return c, nil
}

// RandomProposerID returns a random non-zero proposer id from
// crypto/rand: a fresh id per process incarnation, with a negligible
// chance (2^-64 per pair) of two incarnations sharing one.
func RandomProposerID() uint64 {
	var b [8]byte
	for {
		_, _ = crand.Read(b[:]) // never fails (crypto/rand since Go 1.24)
		if id := binary.LittleEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}

// Client is the system register's proposer. Its operations are safe for
// concurrent use but run one at a time (the register is written by
// operator commands and read at agent start; serialising them is what
// keeps the client's ballots unique, see the package doc). Each takes the
// acceptor set, so the caller can follow the spec's membership.
type Client struct {
	cfg  Config
	log  *slog.Logger
	turn chan struct{} // capacity 1: the operation in progress

	// Guarded by turn.
	rng         *rand.Rand
	lastCounter uint64 // greatest ballot counter this client has sent
	writes      uint64 // writes started, numbering their tags
}

// NewClient validates cfg.
func NewClient(cfg Config) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Client{
		cfg:  cfg,
		log:  cfg.Logger.With("sysreg_proposer", cfg.ProposerID),
		turn: make(chan struct{}, 1),
		rng:  rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}, nil
}

// Init writes value if the register is empty. Every peer must accept, in
// both phases: this is what makes two Inits with different (intersecting)
// peer lists unable to both commit. It returns the new version (1).
//
// Errors: *AlreadyInitializedError (ErrAlreadyInitialized) with the
// committed value if the register holds one; *UnreachableError
// (ErrNoQuorum) naming the peers that did not answer; ErrUnknownOutcome
// when the value may have been written (Read, or Init again: a second
// Init then reports the value it finds).
func (c *Client) Init(ctx context.Context, peers []Peer, value []byte) (version uint64, err error) {
	ids, err := checkPeers(peers)
	if err != nil {
		return 0, err
	}
	if err := checkValue(value); err != nil {
		return 0, err
	}
	v, err := c.run(ctx, peers, initQuorum(ids), func(tag writeTag) caspaxos.Change {
		return initChange{tag: tag, data: encodeValue(tag, value)}
	})
	if err != nil {
		err = resolve(err, 1)
		c.log.Warn("sysreg init failed", "peers", len(peers), "err", err)
		return 0, err
	}
	c.log.Info("sysreg initialized", "version", v.Version, "bytes", len(value), "peers", len(peers))
	return v.Version, nil
}

// Read returns the register's committed value and version: a linearizable
// read (the identity change, committed through a majority of peers).
// ErrEmpty if the register was never written.
func (c *Client) Read(ctx context.Context, peers []Peer) (value []byte, version uint64, err error) {
	ids, err := checkPeers(peers)
	if err != nil {
		return nil, 0, err
	}
	v, err := c.run(ctx, peers, majorityQuorum(ids), nil)
	if err != nil {
		err = resolve(err, 0)
		c.log.Debug("sysreg read failed", "err", err)
		return nil, 0, err
	}
	if !v.Exists() {
		return nil, 0, ErrEmpty
	}
	spec, err := liveSpec(v)
	if err != nil {
		return nil, 0, fmt.Errorf("sysreg: read: %w", err)
	}
	return spec, v.Version, nil
}

// CAS replaces the value if the register is at expectVersion (at least 1:
// the first write is Init's, with all peers) and returns the new version,
// expectVersion+1. It needs a majority of peers.
//
// Errors: *ConflictError (ErrConflict) with the committed version and
// value if the version moved; *UnreachableError (ErrNoQuorum);
// ErrUnknownOutcome when the value may have been written.
func (c *Client) CAS(ctx context.Context, peers []Peer, expectVersion uint64, value []byte) (newVersion uint64, err error) {
	ids, err := checkPeers(peers)
	if err != nil {
		return 0, err
	}
	if expectVersion == 0 {
		return 0, argErr("expectVersion", "must be at least 1 (the first write is Init)")
	}
	if expectVersion == math.MaxUint64 {
		return 0, argErr("expectVersion", "is the greatest version")
	}
	if err := checkValue(value); err != nil {
		return 0, err
	}
	v, err := c.run(ctx, peers, majorityQuorum(ids), func(tag writeTag) caspaxos.Change {
		return casChange{expected: expectVersion, tag: tag, data: encodeValue(tag, value)}
	})
	if err != nil {
		err = resolve(err, expectVersion+1)
		c.log.Warn("sysreg cas failed", "expect", expectVersion, "err", err)
		return 0, err
	}
	c.log.Info("sysreg written", "version", v.Version, "bytes", len(value))
	return v.Version, nil
}

// resolve maps the driver's error to the package's. A write whose
// outcome the proposer calls unknown (an earlier round of it sent an
// accept) but whose change was then refused by the register at version V
// is known to have failed when V <= want, the version the write would
// have made: had it been chosen, the refusing round (at a ballot above
// all the write's own) would have found it or a later version, and the
// change function accepts its own value (by its tag) at want as success.
func resolve(err error, want uint64) error {
	unknown := errors.Is(err, caspaxos.ErrUnknownOutcome)
	var ae *AlreadyInitializedError
	var ce *ConflictError
	switch {
	case errors.As(err, &ae):
		if !unknown || ae.Version <= want {
			return ae
		}
		return unknownAt(ae.Version, err)
	case errors.As(err, &ce):
		if !unknown || ce.Current <= want {
			return ce
		}
		return unknownAt(ce.Current, err)
	}
	var ue *UnreachableError
	if errors.As(err, &ue) {
		return ue
	}
	switch {
	case errors.Is(err, caspaxos.ErrNoQuorum) && unknown:
		return fmt.Errorf("%w: %w: %w", ErrUnknownOutcome, ErrNoQuorum, err)
	case errors.Is(err, caspaxos.ErrNoQuorum):
		return fmt.Errorf("%w: %w", ErrNoQuorum, err)
	case unknown:
		return fmt.Errorf("%w: %w", ErrUnknownOutcome, err)
	}
	return err
}

// unknownAt reports a write whose refusal does not rule it out. The
// refusal is kept as text only, so that the error matches
// ErrUnknownOutcome but neither ErrConflict nor ErrAlreadyInitialized.
func unknownAt(version uint64, err error) error {
	return fmt.Errorf("%w: the register is at version %d, which may include this write (%v)", ErrUnknownOutcome, version, err)
}

// run proposes a change on Key through peers under q and returns the
// committed value: the change write builds for the write's tag, or the
// identity (a read) when write is nil. One operation runs at a time; it
// gets a fresh caspaxos.Proposer (the quorum differs between operations)
// over a fresh HTTPTransport.
func (c *Client) run(ctx context.Context, peers []Peer, q quorum.Config, write func(writeTag) caspaxos.Change) (caspaxos.Value, error) {
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		return caspaxos.Value{}, ctx.Err()
	}
	defer func() { <-c.turn }()
	ch := caspaxos.Read()
	if write != nil {
		c.writes++
		ch = write(writeTag{writer: c.cfg.ProposerID, seq: c.writes})
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()

	clock, err := c.clock()
	if err != nil {
		return caspaxos.Value{}, err
	}
	tr, err := NewHTTPTransport(TransportConfig{
		HTTP:           c.cfg.HTTP,
		Scheme:         c.cfg.Scheme,
		Peers:          peers,
		PeerInFlight:   c.cfg.PeerInFlight,
		RequestTimeout: c.cfg.PhaseTimeout,
		Logger:         c.log,
	})
	if err != nil {
		return caspaxos.Value{}, err
	}
	defer func() { _ = tr.Close() }()

	pc := caspaxos.DefaultProposerConfig(caspaxos.NodeID(c.cfg.ProposerID), q)
	pc.Phase1Timeout, pc.Phase2Timeout = c.cfg.PhaseTimeout, c.cfg.PhaseTimeout
	pc.MaxAttempts = c.cfg.MaxAttempts
	pc.BackoffBase, pc.BackoffMax = max(c.cfg.PhaseTimeout/10, time.Millisecond), c.cfg.PhaseTimeout
	pc.DisableFastPath = true // the proposer lives for one operation: a cached promise is never used
	pc.MaxInFlight, pc.MaxQueuePerKey, pc.MaxCachedKeys = 1, 0, 0
	pc.MaxValueBytes = maxEncodedValue
	p, err := caspaxos.NewProposer(pc, c.rng)
	if err != nil {
		return caspaxos.Value{}, fmt.Errorf("sysreg: proposer: %w", err)
	}
	obs := newObserver(peers)
	if err := p.Propose(clock(), 1, Key, ch); err != nil {
		return caspaxos.Value{}, fmt.Errorf("sysreg: propose: %w", err)
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := clock()
		p.Tick(now)
		msgs, results := p.Ready()
		for _, m := range msgs {
			for _, it := range m.Items {
				c.lastCounter = max(c.lastCounter, it.Ballot.Counter, it.Next.Counter)
			}
			obs.sent(m)
			if err := tr.Send(m); err != nil {
				c.log.Debug("sysreg message dropped", "to", uint64(m.To), "type", m.Type, "err", err)
			}
		}
		if len(results) > 0 {
			r := results[0]
			if r.Err != nil {
				return r.Value, obs.explain(r.Err, tr)
			}
			return r.Value, nil
		}
		d, ok := p.NextDeadline()
		if !ok {
			return caspaxos.Value{}, errors.New("sysreg: proposer idle without a result (bug)")
		}
		timer.Reset(max(d-clock(), 0))
		select {
		case m := <-tr.Replies():
			obs.replied(m)
			p.Step(clock(), m)
		case <-timer.C:
		case <-ctx.Done():
			if ch.Mutates() && obs.accepted {
				return caspaxos.Value{}, fmt.Errorf("%w: %w", caspaxos.ErrUnknownOutcome, ctx.Err())
			}
			return caspaxos.Value{}, ctx.Err()
		}
	}
}

// maxClockCounter is the greatest ballot counter the driver's clock (in
// nanoseconds, a time.Duration) can start a round above, with 2^32 ms
// (about 50 days) left for the operation to run in. Real counters are
// Unix milliseconds, three orders of magnitude below it.
const maxClockCounter = uint64(math.MaxInt64/int64(time.Millisecond)) - 1<<32

// clock returns the proposer's clock for one operation: the wall clock
// (so ballot counters, which start at its milliseconds, are comparable
// across proposers), but never below one millisecond past the greatest
// ballot counter this client has sent. A fresh proposer's first ballot
// is therefore above every ballot of the client's earlier operations,
// even one pushed past the wall clock by a conflict, and the client
// never sends one ballot twice.
func (c *Client) clock() (func() time.Duration, error) {
	if c.lastCounter > maxClockCounter {
		return nil, fmt.Errorf("sysreg: %w: counter %d", caspaxos.ErrBallotOverflow, c.lastCounter)
	}
	start := time.Now()
	wall := time.Duration(start.UnixNano())
	floor := time.Duration(c.lastCounter+1) * time.Millisecond
	off := max(floor-wall, 0)
	return func() time.Duration { return wall + off + time.Since(start) }, nil
}

// observer follows, per peer, the latest request sent and whether it was
// answered, to name the peers an operation that found no quorum waited for.
type observer struct {
	peers    []Peer
	last     map[caspaxos.NodeID]sentReq
	accepted bool // an Accept was sent
}

type sentReq struct {
	typ      caspaxos.MsgType
	ballot   caspaxos.Ballot
	answered bool
}

func newObserver(peers []Peer) *observer {
	sorted := slices.Clone(peers)
	slices.SortFunc(sorted, func(a, b Peer) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return &observer{peers: sorted, last: make(map[caspaxos.NodeID]sentReq, len(peers))}
}

func (o *observer) sent(m caspaxos.Message) {
	if m.Type == caspaxos.MsgAccept {
		o.accepted = true
	}
	var b caspaxos.Ballot
	if len(m.Items) > 0 {
		b = m.Items[0].Ballot
	}
	o.last[m.To] = sentReq{typ: m.Type, ballot: b}
}

func (o *observer) replied(m caspaxos.Message) {
	r, ok := o.last[m.From]
	if !ok || m.Type != r.typ+1 || len(m.Items) == 0 || m.Items[0].Ballot != r.ballot {
		return
	}
	r.answered = true
	o.last[m.From] = r
}

// explain wraps a proposer error that found no quorum into an
// *UnreachableError naming the peers whose latest request went
// unanswered. Other errors pass through.
func (o *observer) explain(err error, tr *HTTPTransport) error {
	if !errors.Is(err, caspaxos.ErrNoQuorum) {
		return err
	}
	ue := &UnreachableError{Unknown: errors.Is(err, caspaxos.ErrUnknownOutcome), Err: err}
	for _, p := range o.peers {
		r, ok := o.last[caspaxos.NodeID(p.ID)]
		if !ok || r.answered {
			continue
		}
		reason := "no reply"
		if perr := tr.PeerError(p.ID); perr != nil {
			reason = perr.Error()
		}
		ue.Peers = append(ue.Peers, p)
		ue.Reasons = append(ue.Reasons, reason)
	}
	if len(ue.Peers) == 0 {
		return err
	}
	return ue
}

// initChange writes data (encoded, carrying tag) if the register holds no
// live value. Finding its own value at version 1 (committed by an earlier
// round of the same Init, or adopted by another proposer) is success.
type initChange struct {
	tag  writeTag
	data []byte
}

func (c initChange) Apply(cur caspaxos.Value) (caspaxos.Value, error) {
	if !cur.Exists() {
		return caspaxos.Value{Version: cur.Version + 1, Data: c.data}, nil
	}
	tag, spec, err := decodeValue(cur.Data)
	if err != nil {
		return cur, fmt.Errorf("sysreg: register at version %d: %w", cur.Version, err)
	}
	if cur.Version == 1 && tag == c.tag {
		return cur, nil
	}
	// Wrapping caspaxos.ErrExists lets the proposer flag a refusal
	// after one of its own accepts as an unknown outcome.
	return cur, fmt.Errorf("%w: %w", caspaxos.ErrExists,
		&AlreadyInitializedError{Value: bytes.Clone(spec), Version: cur.Version})
}

func (initChange) Mutates() bool { return true }

// casChange writes data (encoded, carrying tag) if the register holds a
// live value at expected; finding its own value at expected+1 is success.
type casChange struct {
	expected uint64
	tag      writeTag
	data     []byte
}

func (c casChange) Apply(cur caspaxos.Value) (caspaxos.Value, error) {
	if !cur.Exists() {
		return cur, fmt.Errorf("%w: %w", caspaxos.ErrVersionMismatch, &ConflictError{Expected: c.expected})
	}
	tag, spec, err := decodeValue(cur.Data)
	if err != nil {
		return cur, fmt.Errorf("sysreg: register at version %d: %w", cur.Version, err)
	}
	switch {
	case cur.Version == c.expected:
		return caspaxos.Value{Version: cur.Version + 1, Data: c.data}, nil
	case cur.Version == c.expected+1 && tag == c.tag:
		return cur, nil
	}
	return cur, fmt.Errorf("%w: %w", caspaxos.ErrVersionMismatch,
		&ConflictError{Expected: c.expected, Current: cur.Version, Value: bytes.Clone(spec)})
}

func (casChange) Mutates() bool { return true }
