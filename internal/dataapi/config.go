package dataapi

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fmnode/fmnode/partition"
)

// ErrInvalidConfig: a Config, MemConfig or ServerConfig failed validation;
// the error names the field.
var ErrInvalidConfig = errors.New("dataapi: invalid config")

// Defaults.
const (
	DefaultMaxInFlight    = 1024
	DefaultRequestTimeout = 15 * time.Second // above partition.DefaultCommitTimeout
	DefaultRetryAfter     = time.Second

	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultMaxHeaderBytes    = 32 << 10 // an escaped key of HardMaxKeyBytes fits
)

// Config configures a Handler.
type Config struct {
	// Backend serves the requests (required).
	Backend Backend
	// Region is this agent's region (required): the write region a
	// successful write or strong read reports in Fm-Write-Region.
	Region partition.Region
	// Partitioner maps keys to partitions. Nil means the routing SDK's
	// hash over Partitions (NewHashPartitioner).
	Partitioner Partitioner
	// Partitions is the partition count for the default Partitioner
	// (required when Partitioner is nil).
	Partitions uint32
	// MaxKeyBytes bounds a key (unescaped); default
	// partition.DefaultMaxKeyBytes, at most partition.HardMaxKeyBytes.
	MaxKeyBytes int
	// MaxOpBytes bounds key plus value, so the request body; default
	// partition.DefaultMaxOpBytes, at most partition.HardMaxOpBytes.
	MaxOpBytes int
	// MaxInFlight bounds the requests served at once; beyond it a request
	// gets 503 "overloaded" at once. Default DefaultMaxInFlight.
	MaxInFlight int
	// RequestTimeout bounds a request's backend call (504 "timeout").
	// Default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// RetryAfter is the Retry-After of retryable errors, rounded up to
	// whole seconds (at least 1). Default DefaultRetryAfter.
	RetryAfter time.Duration
	// Logger; nil discards.
	Logger *slog.Logger
	// Registerer, when set, receives the fmnode_dataapi_* metrics.
	Registerer prometheus.Registerer
}

func (c Config) withDefaults() (Config, error) {
	if c.Backend == nil {
		return c, configErr("Config.Backend", "must be set")
	}
	if c.Region == "" {
		return c, configErr("Config.Region", "must be set")
	}
	if c.Partitioner == nil {
		p, err := NewHashPartitioner(c.Partitions)
		if err != nil {
			return c, configErr("Config.Partitions", "%v (or set Config.Partitioner)", err)
		}
		c.Partitioner = p
	}
	var err error
	if c.MaxKeyBytes, err = bound("Config.MaxKeyBytes", c.MaxKeyBytes, partition.DefaultMaxKeyBytes, partition.HardMaxKeyBytes); err != nil {
		return c, err
	}
	if c.MaxOpBytes, err = bound("Config.MaxOpBytes", c.MaxOpBytes, partition.DefaultMaxOpBytes, partition.HardMaxOpBytes); err != nil {
		return c, err
	}
	if c.MaxOpBytes < c.MaxKeyBytes {
		return c, configErr("Config.MaxOpBytes", "%d is below MaxKeyBytes %d", c.MaxOpBytes, c.MaxKeyBytes)
	}
	if c.MaxInFlight, err = bound("Config.MaxInFlight", c.MaxInFlight, DefaultMaxInFlight, 1<<20); err != nil {
		return c, err
	}
	if c.RequestTimeout, err = durBound("Config.RequestTimeout", c.RequestTimeout, DefaultRequestTimeout, time.Hour); err != nil {
		return c, err
	}
	if c.RetryAfter, err = durBound("Config.RetryAfter", c.RetryAfter, DefaultRetryAfter, time.Hour); err != nil {
		return c, err
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// DefaultMaxConcurrentStreams bounds the requests one HTTP/2 connection
// carries at once: as many as a node serves at once (DefaultMaxInFlight),
// so that one client's connection carries the whole burst a failover
// sends it. With 256, the burst of a 1000-partition failover in fmnode
// demo went past it on the new write region's agents, the client opened
// another connection in the middle of the burst, and the writers waiting
// for its TLS handshake waited up to 0.35 s (conn_wait_s p99).
const DefaultMaxConcurrentStreams = DefaultMaxInFlight

// ServerConfig configures the http.Server NewServer returns. Zero
// durations and sizes take the defaults; the server speaks HTTP/1.1, and
// with TLS HTTP/2 as well (ALPN h2 first).
type ServerConfig struct {
	// Addr is the listen address, for ListenAndServe(TLS).
	Addr string
	// Handler is the data API handler (required).
	Handler http.Handler
	// TLSConfig, when set, is the server's TLS configuration: serve with
	// ServeTLS(ln, "", "") or ListenAndServeTLS("", ""). The server uses a
	// clone whose NextProtos is "h2", "http/1.1".
	TLSConfig *tls.Config
	// ReadHeaderTimeout bounds reading the request line and headers (a
	// slow-loris client); default DefaultReadHeaderTimeout.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading the whole request, body included;
	// default DefaultReadTimeout.
	ReadTimeout time.Duration
	// WriteTimeout bounds the time from the end of the request headers
	// to the end of the response; it must exceed the handler's
	// RequestTimeout. Default DefaultWriteTimeout.
	WriteTimeout time.Duration
	// IdleTimeout bounds a keep-alive connection's wait for its next
	// request; default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line plus headers; default
	// DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	// Logger receives the server's own errors (TLS handshakes, panics);
	// nil discards.
	Logger *slog.Logger
}

// NewServer validates cfg and returns an http.Server with its timeouts
// and header bound set. The caller listens (on TLS if it gave a
// TLSConfig) and calls Shutdown.
func NewServer(cfg ServerConfig) (*http.Server, error) {
	if cfg.Handler == nil {
		return nil, configErr("ServerConfig.Handler", "must be set")
	}
	var err error
	for _, d := range []struct {
		field string
		v     *time.Duration
		def   time.Duration
	}{
		{"ServerConfig.ReadHeaderTimeout", &cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout},
		{"ServerConfig.ReadTimeout", &cfg.ReadTimeout, DefaultReadTimeout},
		{"ServerConfig.WriteTimeout", &cfg.WriteTimeout, DefaultWriteTimeout},
		{"ServerConfig.IdleTimeout", &cfg.IdleTimeout, DefaultIdleTimeout},
	} {
		if *d.v, err = durBound(d.field, *d.v, d.def, time.Hour); err != nil {
			return nil, err
		}
	}
	if cfg.MaxHeaderBytes, err = bound("ServerConfig.MaxHeaderBytes", cfg.MaxHeaderBytes, DefaultMaxHeaderBytes, 1<<20); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	var protos http.Protocols
	protos.SetHTTP1(true)
	if cfg.TLSConfig != nil {
		// HTTP/2 over TLS (ALPN h2, then http/1.1): a client's
		// operations share one connection per agent instead of one
		// each. Over HTTP/1.1 every operation in flight holds its own
		// connection, so when a failover moves the clients of many
		// partitions to other agents at once, each of them pays a TLS
		// handshake on both sides at the moment the agents are busiest:
		// 1000 writers waited 2.2 s p50 for their connections after a
		// region's kill in the demo. A 421 reaches the client as is:
		// Go's HTTP/2 transport does not retry it on its own.
		cfg.TLSConfig = cfg.TLSConfig.Clone()
		cfg.TLSConfig.NextProtos = []string{"h2", "http/1.1"}
		protos.SetHTTP2(true)
	}
	return &http.Server{
		Addr:              cfg.Addr,
		Handler:           cfg.Handler,
		TLSConfig:         cfg.TLSConfig,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		Protocols:         &protos,
		// The streams one HTTP/2 connection carries at once (a client
		// with more opens another connection); the handler's
		// MaxInFlight bounds the node's requests over all of them.
		HTTP2:    &http.HTTP2Config{MaxConcurrentStreams: DefaultMaxConcurrentStreams},
		ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}, nil
}

func configErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
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
