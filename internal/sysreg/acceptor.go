package sysreg

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/wire"
)

// DefaultAcceptorInFlight is AcceptorConfig.MaxInFlight's default.
const DefaultAcceptorInFlight = 8

// maxErrorBody bounds the text of an error response (and what a client
// reads of one).
const maxErrorBody = 1 << 10

// AcceptorConfig configures an Acceptor.
type AcceptorConfig struct {
	// ID is this acceptor's id, the caspaxos NodeID proposers address
	// (required, non-zero). A request for another id is refused (421).
	ID uint64
	// Store holds the acceptor's state (required). The agent passes a
	// boltstore opened on system.db in its data directory; Apply must be
	// durable when it returns. The caller opens and closes it.
	Store caspaxos.Store
	// MaxInFlight bounds the requests being served at once, each holding
	// at most MaxBodyBytes; beyond it a request gets 503 at once.
	// Default DefaultAcceptorInFlight.
	MaxInFlight int
	// Logger; nil discards.
	Logger *slog.Logger
}

// Acceptor is the system register's acceptor as an http.Handler: POST
// Path with one wire-encoded caspaxos request as the body; the reply
// message is the response body. Mount it on the agent's API server.
//
// Steps are serialised by a lock held from Step through Store.Apply to
// Ready: at this register's rate (a write per operator command, a read
// per agent start) group commit buys nothing, and one lock makes the
// ordering argument trivial: batches reach the store in step order, and
// no reply leaves before its own batch and every earlier one is durable.
// transport's acceptor core would give group commit, but it routes
// replies through its own connections; the lock is simpler than adapting it.
type Acceptor struct {
	id    caspaxos.NodeID
	store caspaxos.Store
	log   *slog.Logger
	slots chan struct{} // MaxInFlight
	lock  chan struct{} // capacity 1: the step lock, acquirable under a context
	// stopped is closed when the acceptor fails: it serves nothing until
	// the process restarts, so the process must learn it (Stopped).
	stopped chan struct{}

	// Guarded by lock.
	acc    *caspaxos.Acceptor
	failed error
}

var _ http.Handler = (*Acceptor)(nil)

// NewAcceptor recovers the acceptor from cfg.Store.
func NewAcceptor(cfg AcceptorConfig) (*Acceptor, error) {
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = DefaultAcceptorInFlight
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case cfg.ID == 0:
		return nil, configErr("AcceptorConfig.ID", "must be non-zero")
	case cfg.Store == nil:
		return nil, configErr("AcceptorConfig.Store", "must not be nil")
	case cfg.MaxInFlight < 1:
		return nil, configErr("AcceptorConfig.MaxInFlight", "must be at least 1, got %d", cfg.MaxInFlight)
	}
	st, err := cfg.Store.Load()
	if err != nil {
		return nil, fmt.Errorf("sysreg: acceptor %d: load: %w", cfg.ID, err)
	}
	acc, err := caspaxos.NewAcceptor(caspaxos.NodeID(cfg.ID), st)
	if err != nil {
		return nil, fmt.Errorf("sysreg: acceptor %d: recover: %w", cfg.ID, err)
	}
	return &Acceptor{
		id:      caspaxos.NodeID(cfg.ID),
		store:   cfg.Store,
		log:     cfg.Logger.With("sysreg_acceptor", cfg.ID),
		slots:   make(chan struct{}, cfg.MaxInFlight),
		lock:    make(chan struct{}, 1),
		stopped: make(chan struct{}),
		acc:     acc,
	}, nil
}

// ID returns the acceptor's id.
func (a *Acceptor) ID() uint64 { return uint64(a.id) }

// Local returns the value this acceptor has accepted for Key, if it holds
// a live one. It is a hint, not a read: the value may never have been
// committed (a failed Init leaves it on some acceptors), and a newer one
// may be committed elsewhere. A starting agent uses it to learn the
// candidate spec, and so the acceptor set to Read through.
func (a *Acceptor) Local() (value []byte, ok bool) {
	a.lock <- struct{}{}
	defer func() { <-a.lock }()
	rec, found := a.acc.Get(Key)
	if !found || !rec.Value.Exists() {
		return nil, false
	}
	spec, err := liveSpec(rec.Value)
	if err != nil {
		a.log.Warn("sysreg acceptor holds an undecodable value", "err", err)
		return nil, false
	}
	return spec, true
}

// Err returns the store failure that stopped the acceptor, if any
// (wrapping ErrAcceptorFailed). The agent should treat it as fatal.
func (a *Acceptor) Err() error {
	a.lock <- struct{}{}
	defer func() { <-a.lock }()
	return a.failed
}

// Stopped is closed when the acceptor has failed (Err then says why).
// From then on it answers every request 503 and would until the process
// restarts and recovers it from its store; an agent that kept running
// would be one system-register acceptor short, silently, so the agent
// stops on it (fail-stop, as on a partition store failure) and its
// supervisor restarts it.
func (a *Acceptor) Stopped() <-chan struct{} { return a.stopped }

// statusError is a refusal with its HTTP status.
type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return e.msg }

func refuse(status int, format string, args ...any) error {
	return &statusError{status: status, msg: fmt.Sprintf(format, args...)}
}

// ServeHTTP implements http.Handler.
func (a *Acceptor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		a.writeError(w, refuse(http.StatusMethodNotAllowed, "method %s not allowed, use POST", r.Method))
		return
	}
	select {
	case a.slots <- struct{}{}:
		defer func() { <-a.slots }()
	default:
		w.Header().Set("Retry-After", "1")
		a.writeError(w, refuse(http.StatusServiceUnavailable, "acceptor busy"))
		return
	}
	if r.ContentLength > MaxBodyBytes {
		a.writeError(w, refuse(http.StatusRequestEntityTooLarge, "body of %d bytes exceeds %d", r.ContentLength, MaxBodyBytes))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			a.writeError(w, refuse(http.StatusRequestEntityTooLarge, "body exceeds %d bytes", MaxBodyBytes))
			return
		}
		a.writeError(w, refuse(http.StatusBadRequest, "read body: %v", err))
		return
	}
	select {
	case a.lock <- struct{}{}:
	case <-r.Context().Done():
		a.writeError(w, refuse(http.StatusServiceUnavailable, "request ended while waiting: %v", r.Context().Err()))
		return
	}
	reply, err := a.handleLocked(body)
	<-a.lock
	if err != nil {
		a.writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(reply)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(reply)
}

func (a *Acceptor) writeError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	var se *statusError
	if errors.As(err, &se) {
		status = se.status
	}
	if errors.Is(err, ErrAcceptorFailed) {
		status = http.StatusServiceUnavailable
	}
	msg := err.Error()
	if len(msg) > maxErrorBody {
		msg = msg[:maxErrorBody]
	}
	if status >= 500 {
		a.log.Warn("sysreg request failed", "status", status, "err", msg)
	} else {
		a.log.Debug("sysreg request refused", "status", status, "err", msg)
	}
	http.Error(w, msg, status)
}

// handleLocked decodes one request, steps it, makes its writes durable
// and returns the encoded reply. The caller holds the step lock.
func (a *Acceptor) handleLocked(body []byte) ([]byte, error) {
	if a.failed != nil {
		return nil, a.failed
	}
	m, err := wire.DecodeMessage(body)
	if err != nil {
		return nil, refuse(http.StatusBadRequest, "malformed message: %v", err)
	}
	if err := a.checkRequest(m); err != nil {
		return nil, err
	}
	if err := a.acc.Step(m); err != nil {
		return nil, refuse(http.StatusBadRequest, "%v", err)
	}
	batch, msgs := a.acc.Ready()
	if err := a.acc.Violation(); err != nil {
		return nil, a.fail(err)
	}
	if !batch.Empty() {
		if err := a.store.Apply(batch); err != nil {
			// The acceptor's memory is now ahead of its disk: answering
			// on could promise what a restart forgets.
			return nil, a.fail(fmt.Errorf("store apply: %w", err))
		}
	}
	if len(msgs) != 1 {
		return nil, a.fail(fmt.Errorf("one request gave %d replies", len(msgs)))
	}
	reply, err := wire.AppendMessage(nil, msgs[0])
	if err != nil {
		return nil, fmt.Errorf("sysreg: encode reply: %w", err)
	}
	return reply, nil
}

func (a *Acceptor) fail(err error) error {
	if a.failed == nil {
		close(a.stopped)
	}
	a.failed = fmt.Errorf("%w: acceptor %d: %w", ErrAcceptorFailed, a.id, err)
	a.log.Error("sysreg acceptor stopped", "err", a.failed)
	return a.failed
}

// checkRequest admits only what the system register's proposers send:
// a Prepare or Accept for this acceptor about Key alone, whose value is
// empty (version 0: a read of the empty register) or a well-formed
// register value (see value.go). Register GC (RaiseAge, Erase) and
// tombstones are refused: the cluster spec is never deleted.
func (a *Acceptor) checkRequest(m caspaxos.Message) error {
	switch {
	case m.Type != caspaxos.MsgPrepare && m.Type != caspaxos.MsgAccept:
		return refuse(http.StatusBadRequest, "message type %v not served", m.Type)
	case m.To != a.id:
		return refuse(http.StatusMisdirectedRequest, "request for acceptor %d reached acceptor %d", m.To, a.id)
	case m.From == 0:
		return refuse(http.StatusBadRequest, "request from proposer 0")
	case len(m.Items) != 1:
		return refuse(http.StatusBadRequest, "%d items, want 1", len(m.Items))
	}
	it := &m.Items[0]
	switch {
	case it.Key != Key:
		return refuse(http.StatusBadRequest, "key %.64q not served (only %q)", it.Key, Key)
	case it.Value.Tombstone:
		return refuse(http.StatusBadRequest, "tombstones not served")
	case len(it.Value.Data) > maxEncodedValue:
		return refuse(http.StatusBadRequest, "value of %d bytes exceeds %d", len(it.Value.Data), maxEncodedValue)
	case it.Value.Version == 0 && len(it.Value.Data) > 0:
		return refuse(http.StatusBadRequest, "data at version 0")
	}
	if it.Value.Version > 0 {
		if _, _, err := decodeValue(it.Value.Data); err != nil {
			return refuse(http.StatusBadRequest, "%v", err)
		}
	}
	return nil
}
