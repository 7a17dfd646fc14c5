package kv

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/fmnode/fmnode/txtdns"
	"github.com/fmnode/fmnode/txtdns/routing"
)

// Defaults and bounds of Config.
const (
	DefaultScheme = "https"
	// DefaultMaxValueBytes is the agents' default bound on key plus value
	// (partition.DefaultMaxOpBytes).
	DefaultMaxValueBytes = 256 << 10
	// HardMaxValueBytes is the most any agent accepts
	// (partition.HardMaxOpBytes).
	HardMaxValueBytes = 4 << 20
	// HardMaxKeyBytes is the longest key any agent accepts
	// (partition.HardMaxKeyBytes); longer ones are refused unsent.
	HardMaxKeyBytes = 4 << 10
	// DefaultMaxRetryAfter bounds the wait a Retry-After asks of one
	// attempt; MaxMaxRetryAfter bounds the setting.
	DefaultMaxRetryAfter = 5 * time.Second
	MaxMaxRetryAfter     = time.Minute
	// DefaultTimeout bounds one operation, all its attempts and waits
	// included; MaxTimeout bounds the setting.
	DefaultTimeout = 30 * time.Second
	MaxTimeout     = time.Hour
	// DefaultMaxIdleConnsPerAgent is how many idle connections the
	// default transport keeps per agent: the operations one application
	// runs at once against one agent over HTTP/1.1 (one connection
	// each: plain HTTP, or an agent that does not offer h2).
	DefaultMaxIdleConnsPerAgent = 1024
)

// Config configures a Client.
type Config struct {
	// Routing configures the routing client (zone, resolver, partition
	// count, preferred regions, attempts, backoff, breakers); see
	// routing.Config. Routing.AttemptTimeout bounds each attempt; keep it
	// above the agents' request timeout, or slow writes end as unknown
	// outcomes rather than as the agent's own 504. (Routing's quick
	// probes, Breaker.ProbeDeadline, cut their attempt short the same way:
	// a write sent as one and cut is an unknown outcome too.)
	Routing routing.Config
	// HTTP is the client requests go through (its Transport carries the
	// caller's TLS configuration). Nil means NewTransport(nil): HTTP/2
	// over TLS, as the agents speak it (with Scheme "http", HTTP/1.1
	// keeping DefaultMaxIdleConnsPerAgent idle connections per agent). A caller with its own TLS
	// configuration (a client certificate) should use
	// NewTransport(itsConfig); a Transport of its own should speak HTTP/2
	// (Protocols) or, over HTTP/1.1, keep as many idle connections per
	// agent as it runs operations at once (see NewTransport). The client
	// uses a shallow copy that never follows HTTP redirects: the API
	// redirects with 421, through routing.
	HTTP *http.Client
	// Scheme is "https" (default) or "http".
	Scheme string
	// MaxValueBytes bounds a Put's value and a Get's response body.
	// Default DefaultMaxValueBytes, at most HardMaxValueBytes.
	MaxValueBytes int
	// MaxRetryAfter bounds the wait one attempt spends on a 429 or 503's
	// Retry-After before routing's own backoff and next attempt. Default
	// DefaultMaxRetryAfter, at most MaxMaxRetryAfter.
	MaxRetryAfter time.Duration
	// Timeout bounds each operation (Put, Get, Delete), on top of the
	// caller's context. Default DefaultTimeout, at most MaxTimeout.
	Timeout time.Duration
	// Logger receives what the client cannot return (a write that was
	// applied but answered with malformed headers); nil discards.
	Logger *slog.Logger
}

// Client reads and writes keys through the data API of fmnode agents,
// routed by a routing.Client: each key goes to its partition's write
// region (writes, strong reads) or a suitable read region, following
// redirects and failovers. Safe for concurrent use; it starts no
// goroutines.
type Client struct {
	rc            *routing.Client
	http          *http.Client
	scheme        string // "https://" or "http://"
	maxValue      int
	maxRetryAfter time.Duration
	timeout       time.Duration
	clock         txtdns.Clock
	log           *slog.Logger
}

// New validates cfg and returns a client with an empty route cache.
func New(cfg Config) (*Client, error) {
	switch cfg.Scheme {
	case "":
		cfg.Scheme = DefaultScheme
	case "https", "http":
	default:
		return nil, configErr("Scheme", "%q: must be https or http", cfg.Scheme)
	}
	var err error
	if cfg.MaxValueBytes, err = bound("MaxValueBytes", cfg.MaxValueBytes, DefaultMaxValueBytes, HardMaxValueBytes); err != nil {
		return nil, err
	}
	if cfg.MaxRetryAfter, err = durBound("MaxRetryAfter", cfg.MaxRetryAfter, DefaultMaxRetryAfter, MaxMaxRetryAfter); err != nil {
		return nil, err
	}
	if cfg.Timeout, err = durBound("Timeout", cfg.Timeout, DefaultTimeout, MaxTimeout); err != nil {
		return nil, err
	}
	if cfg.Routing.Partitioner == nil && cfg.Routing.PartitionCount > 0 {
		// fmnode's partitions are 1..n: the agents map keys with the
		// same one-based hash (dataapi.NewHashPartitioner).
		hp, err := routing.NewOneBasedHashPartitioner(cfg.Routing.PartitionCount)
		if err != nil {
			return nil, fmt.Errorf("%w: Routing: %w", ErrInvalidConfig, err)
		}
		cfg.Routing.Partitioner, cfg.Routing.PartitionCount = hp, 0
	}
	rc, err := routing.New(cfg.Routing)
	if err != nil {
		return nil, fmt.Errorf("%w: Routing: %w", ErrInvalidConfig, err)
	}
	var hc http.Client
	if cfg.HTTP != nil {
		hc = *cfg.HTTP
	} else {
		if cfg.Scheme == "http" {
			hc.Transport = newTransport(nil, false)
		} else {
			hc.Transport = NewTransport(nil)
		}
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	clock := cfg.Routing.Clock
	if clock == nil {
		clock = txtdns.SystemClock{}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{rc: rc, http: &hc, scheme: cfg.Scheme + "://", maxValue: cfg.MaxValueBytes,
		maxRetryAfter: cfg.MaxRetryAfter, timeout: cfg.Timeout, clock: clock, log: log}, nil
}

// Routing returns the routing client (to Warm its cache, read its
// breakers, apply a redirect learnt elsewhere).
func (c *Client) Routing() *routing.Client { return c.rc }

// Item is a value read with its version.
type Item struct {
	Value []byte
	// Version is the (epoch, lsn) of the write that stored Value
	// (Fm-Version): equal to an UnknownOutcomeError's WriteToken when that
	// write survived.
	Version routing.SessionToken
}

// Put writes value under key at the key's write region. It does not
// retain value. A write that may have been applied is an
// *UnknownOutcomeError and is not retried; a refused one (400, 413) a
// *RequestError.
func (c *Client) Put(ctx context.Context, key string, value []byte) error {
	return c.write(ctx, nil, http.MethodPut, key, value)
}

// CompareAndSet writes value under key only if the key's current version is
// expected: an Item.Version a read returned, or the zero token for "the key
// holds no value" (what GetItem returns for a missing key). The write
// region decides in the order of its log, so of many CompareAndSets on one
// version at most one is applied. A version that does not match is a
// *ConditionFailedError (errors.Is ErrConditionFailed) carrying the key's
// current version; nothing was written and it is not retried. Other errors
// as Put's: an *UnknownOutcomeError may or may not have been applied.
func (c *Client) CompareAndSet(ctx context.Context, key string, expected routing.SessionToken, value []byte) error {
	return c.cas(ctx, nil, http.MethodPut, key, expected, value)
}

// CompareAndDelete removes key only if its current version is expected
// (not zero: deleting an absent key needs no condition). Errors as
// CompareAndSet's.
func (c *Client) CompareAndDelete(ctx context.Context, key string, expected routing.SessionToken) error {
	if expected.IsZero() {
		return fmt.Errorf("%w: compare-and-delete needs a version", ErrInvalidRequest)
	}
	return c.cas(ctx, nil, http.MethodDelete, key, expected, nil)
}

// Delete removes key (deleting a missing key succeeds). Errors as Put's.
func (c *Client) Delete(ctx context.Context, key string) error {
	return c.write(ctx, nil, http.MethodDelete, key, nil)
}

// Get reads key at consistency cons. A missing key is found == false
// with a nil error. Bounded-staleness reads use the agents' configured
// bound (the API carries none per request).
func (c *Client) Get(ctx context.Context, key string, cons routing.Consistency) (value []byte, found bool, err error) {
	it, found, err := c.read(ctx, nil, key, cons)
	return it.Value, found, err
}

// GetItem is Get with the value's version.
func (c *Client) GetItem(ctx context.Context, key string, cons routing.Consistency) (Item, bool, error) {
	return c.read(ctx, nil, key, cons)
}

func (c *Client) write(ctx context.Context, s *routing.Session, method, key string, value []byte) error {
	if err := c.checkKey(key); err != nil {
		return err
	}
	if len(value) > c.maxValue {
		return fmt.Errorf("%w: value of %d bytes, MaxValueBytes %d", ErrInvalidRequest, len(value), c.maxValue)
	}
	o := &op{method: method, key: key, path: keyPath(key), value: value}
	return c.exec(ctx, routing.Request{Write: true, Session: s}, o)
}

func (c *Client) cas(ctx context.Context, s *routing.Session, method, key string, expected routing.SessionToken, value []byte) error {
	if err := c.checkKey(key); err != nil {
		return err
	}
	if len(value) > c.maxValue {
		return fmt.Errorf("%w: value of %d bytes, MaxValueBytes %d", ErrInvalidRequest, len(value), c.maxValue)
	}
	o := &op{method: method, key: key, path: keyPath(key), value: value, cas: true, expect: expected}
	return c.exec(ctx, routing.Request{Write: true, Session: s}, o)
}

func (c *Client) read(ctx context.Context, s *routing.Session, key string, cons routing.Consistency) (Item, bool, error) {
	if err := c.checkKey(key); err != nil {
		return Item{}, false, err
	}
	if consistencyHeader(cons) == "" {
		return Item{}, false, fmt.Errorf("%w: consistency %d", ErrInvalidRequest, cons)
	}
	o := &op{method: http.MethodGet, key: key, path: keyPath(key), cons: cons}
	if err := c.exec(ctx, routing.Request{Consistency: cons, Session: s}, o); err != nil {
		return Item{}, false, err
	}
	return o.item, o.found, nil
}

func (c *Client) checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidRequest)
	}
	if len(key) > HardMaxKeyBytes {
		return fmt.Errorf("%w: key of %d bytes, at most %d", ErrInvalidRequest, len(key), HardMaxKeyBytes)
	}
	return nil
}

// exec runs o through routing. Errors come back as the attempt returned
// them: routing.Permanent's wrapper, which only told routing to stop, is
// taken off.
func (c *Client) exec(ctx context.Context, req routing.Request, o *op) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	err := c.rc.Exec(ctx, o.key, req, func(ctx context.Context, t routing.Target) (routing.SessionToken, error) {
		return c.attempt(ctx, o, t)
	})
	if pe, ok := err.(*routing.PermanentError); ok {
		return pe.Err
	}
	return err
}

// keyPath is the request path of key: the key path-escaped (a '/' in it
// becomes %2F), as the agents decode it.
func keyPath(key string) string { return "/v1/kv/" + url.PathEscape(key) }

// consistencyHeader is the Fm-Consistency value of cons ("" if unknown).
func consistencyHeader(cons routing.Consistency) string {
	switch cons {
	case routing.ConsistencyStrong:
		return "strong"
	case routing.ConsistencyBoundedStaleness:
		return "bounded"
	case routing.ConsistencySession:
		return "session"
	case routing.ConsistencyEventual:
		return "eventual"
	}
	return ""
}

// bound applies a default to a zero int and checks it is in [1, hi].
func bound(field string, v, def, hi int) (int, error) {
	if v == 0 {
		v = def
	}
	if v < 1 || v > hi {
		return 0, configErr(field, "%d: must be in [1, %d]", v, hi)
	}
	return v, nil
}

func durBound(field string, v, def, hi time.Duration) (time.Duration, error) {
	if v == 0 {
		v = def
	}
	if v <= 0 || v > hi {
		return 0, configErr(field, "%v: must be in (0, %v]", v, hi)
	}
	return v, nil
}

// NewTransport is the transport a Client of agents over TLS (https)
// should use: tlsCfg (nil: the system's roots, no client certificate),
// HTTP/2, at most MaxDialsPerAgent connections being opened to one agent
// at a time.
//
// HTTP/2 because of what a failover does to the connections: over
// HTTP/1.1 every operation in flight holds a connection of its own, so
// when a failover moves the clients of many partitions to other agents
// at once each operation opens a new connection there, a TLS handshake
// on both sides at the moment the agents are busiest (the demo's 1000
// writers waited 2.2 s p50 for their connections after a region's kill,
// longer than the failover itself). Over HTTP/2 they share one
// connection per agent (another per dataapi.DefaultMaxConcurrentStreams
// operations at once). The dial bound is what makes them share it: a
// burst to an agent the client has no connection to yet would otherwise
// dial once per operation before the first handshake ends (300 at once
// opened 121 connections); with it the rest wait for the first
// connection and multiplex on it. For HTTP/2 the bound counts the dials
// in progress, not the connections. A Go HTTP/2 transport hands a 421 to
// the caller as HTTP/1.1 does, so routing still sees every redirect.
//
// The agents of this version offer h2 over TLS; against one that speaks
// HTTP/1.1 only the bound would limit the operations in flight to it to
// MaxDialsPerAgent: give such a cluster a transport of its own (as for
// plain HTTP, where kv.New's default keeps no bound).
func NewTransport(tlsCfg *tls.Config) *http.Transport { return newTransport(tlsCfg, true) }

// MaxDialsPerAgent bounds the connections NewTransport opens to one
// agent at a time.
const MaxDialsPerAgent = 2

// newTransport: h2 is NewTransport's; without it, HTTP/1.1 keeping up to
// DefaultMaxIdleConnsPerAgent idle connections per agent and no cap in
// all (http.DefaultTransport's 100 in all closed what a burst opened, and
// the next burst paid a handshake per operation again).
func newTransport(tlsCfg *tls.Config, h2 bool) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if tlsCfg != nil {
		tr.TLSClientConfig = tlsCfg.Clone()
	}
	tr.MaxIdleConns = 0
	tr.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerAgent
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetHTTP1(true)
	if h2 {
		tr.Protocols.SetHTTP2(true)
		tr.MaxConnsPerHost = MaxDialsPerAgent
	}
	return tr
}
