package txtdns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// Server defaults and bounds.
const (
	DefaultReadTimeout   = 2 * time.Second
	DefaultWriteTimeout  = 2 * time.Second
	DefaultIdleTimeout   = 8 * time.Second // RFC 7766 suggests seconds, not minutes
	DefaultMaxTCPConns   = 256
	DefaultMaxTCPQueries = 128
	DefaultMaxInFlight   = 4096
	// MaxUDPResponse is the largest UDP response the server sends, whatever
	// the EDNS buffer size a client advertises (the DNS Flag Day 2020 value).
	MaxUDPResponse = 1232
	// DefaultShutdownTimeout bounds the graceful shutdown in Serve.
	DefaultShutdownTimeout = 5 * time.Second
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// Addr is "host:port" for both UDP and TCP; port 0 picks a free port
	// (the same for both).
	Addr string
	// Authority holds the zone; usually a *Publisher.
	Authority Authority
	// ReadTimeout and WriteTimeout bound one read and one write on a
	// connection. Default 2 s.
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	// IdleTimeout closes idle TCP connections. Default 8 s.
	IdleTimeout time.Duration
	// MaxTCPConns bounds open TCP connections; more wait in the kernel's
	// accept queue. Default 256.
	MaxTCPConns int
	// MaxTCPQueries bounds queries on one TCP connection. Default 128.
	MaxTCPQueries int
	// MaxInFlight bounds the queries being answered at once (miekg/dns
	// runs each UDP query in its own goroutine); beyond it queries are
	// dropped unanswered and counted, and clients retry. Default 4096.
	MaxInFlight int
	// ShutdownTimeout bounds the graceful shutdown when Serve's context
	// ends. Default 5 s.
	ShutdownTimeout time.Duration
	// Logger; default discards.
	Logger *slog.Logger
	// Registerer receives the server's metrics; nil registers nothing.
	Registerer prometheus.Registerer
}

func (c *ServerConfig) setDefaults() error {
	if c.Authority == nil {
		return configErr("Authority", "required")
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return configErr("Addr", "%q: %v", c.Addr, err)
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"ReadTimeout", &c.ReadTimeout, DefaultReadTimeout},
		{"WriteTimeout", &c.WriteTimeout, DefaultWriteTimeout},
		{"IdleTimeout", &c.IdleTimeout, DefaultIdleTimeout},
		{"ShutdownTimeout", &c.ShutdownTimeout, DefaultShutdownTimeout},
	} {
		if *d.v == 0 {
			*d.v = d.def
		}
		if *d.v < time.Millisecond || *d.v > time.Hour {
			return configErr(d.name, "%v: must be in [1ms, 1h]", *d.v)
		}
	}
	if c.MaxTCPConns == 0 {
		c.MaxTCPConns = DefaultMaxTCPConns
	}
	if c.MaxTCPConns < 1 || c.MaxTCPConns > 65536 {
		return configErr("MaxTCPConns", "%d: must be in [1, 65536]", c.MaxTCPConns)
	}
	if c.MaxTCPQueries == 0 {
		c.MaxTCPQueries = DefaultMaxTCPQueries
	}
	if c.MaxTCPQueries < 1 || c.MaxTCPQueries > 1<<20 {
		return configErr("MaxTCPQueries", "%d: must be in [1, %d]", c.MaxTCPQueries, 1<<20)
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxInFlight < 1 || c.MaxInFlight > 1<<20 {
		return configErr("MaxInFlight", "%d: must be in [1, %d]", c.MaxInFlight, 1<<20)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Server is an authoritative DNS server for one zone over UDP and TCP,
// built on github.com/miekg/dns. It answers TXT (and ANY) queries from its
// Authority with AA set, NXDOMAIN (with the SOA, for negative caching) for
// names of the zone that do not exist, NODATA for other types at existing
// names, the SOA at the apex, and REFUSED outside the zone. UDP answers are
// truncated (TC) to the client's EDNS buffer (512 bytes without EDNS, at
// most MaxUDPResponse); clients retry over TCP.
type Server struct {
	cfg  ServerConfig
	auth Authority
	log  *slog.Logger
	m    *serverMetrics

	inFlight atomic.Int64

	mu  sync.Mutex
	pc  net.PacketConn
	ln  net.Listener
	ran bool
}

// NewServer validates cfg.
func NewServer(cfg ServerConfig) (*Server, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, auth: cfg.Authority, log: cfg.Logger, m: newServerMetrics(cfg.Registerer)}, nil
}

// Listen binds the UDP socket and the TCP listener on the same port.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pc != nil {
		return nil
	}
	host, port, _ := net.SplitHostPort(s.cfg.Addr)
	var lastErr error
	for range 16 { // with port 0, the UDP port may be taken for TCP: retry
		pc, err := net.ListenPacket("udp", s.cfg.Addr)
		if err != nil {
			return fmt.Errorf("txtdns: listen udp %s: %w", s.cfg.Addr, err)
		}
		udpPort := strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port)
		ln, err := net.Listen("tcp", net.JoinHostPort(host, udpPort))
		if err == nil {
			if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
				// Bound to one address, replies need no source selection:
				// hiding the *net.UDPConn makes miekg/dns use plain
				// recvfrom/sendto instead of per-packet control messages.
				pc = boundPacketConn{pc}
			}
			s.pc, s.ln = pc, newLimitListener(ln, s.cfg.MaxTCPConns, s.m.tcpConns)
			return nil
		}
		pc.Close()
		lastErr = err
		if port != "0" {
			break
		}
	}
	return fmt.Errorf("txtdns: listen tcp on the udp port: %w", lastErr)
}

// Addr returns the bound "host:port" (UDP and TCP), or "" before Listen.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pc == nil {
		return ""
	}
	return s.pc.LocalAddr().String()
}

// Serve answers queries until ctx is done, then shuts down gracefully
// (bounded by ShutdownTimeout) and returns nil; it returns an error if a
// listener fails. Call Listen first. Serve runs once.
func (s *Server) Serve(ctx context.Context) error {
	s.mu.Lock()
	pc, ln, ran := s.pc, s.ln, s.ran
	s.ran = true
	s.mu.Unlock()
	if pc == nil {
		return ErrNotListening
	}
	if ran {
		return errors.New("txtdns: Serve called twice")
	}
	servers := []*dns.Server{
		{
			PacketConn:   pc,
			Handler:      handler{s: s, tcp: false},
			UDPSize:      dns.MinMsgSize * 2,
			ReadTimeout:  s.cfg.ReadTimeout,
			WriteTimeout: s.cfg.WriteTimeout,
		},
		{
			Listener:      ln,
			Handler:       handler{s: s, tcp: true},
			ReadTimeout:   s.cfg.ReadTimeout,
			WriteTimeout:  s.cfg.WriteTimeout,
			IdleTimeout:   func() time.Duration { return s.cfg.IdleTimeout },
			MaxTCPQueries: s.cfg.MaxTCPQueries,
		},
	}
	errc := make(chan error, len(servers))
	started := make(chan struct{}, len(servers))
	for _, srv := range servers {
		srv.NotifyStartedFunc = func() { started <- struct{}{} }
		go func() { errc <- srv.ActivateAndServe() }()
	}
	// Wait until both run (so Shutdown finds them started) or one fails.
	var serveErr error
	running, exited := 0, 0
	for running+exited < len(servers) {
		select {
		case <-started:
			running++
		case err := <-errc:
			exited++
			serveErr = errors.Join(serveErr, err)
		}
	}
	s.log.Info("dns server listening", "addr", pc.LocalAddr().String(), "zone", s.auth.Zone())
	if exited == 0 {
		select {
		case <-ctx.Done():
		case err := <-errc:
			exited++
			serveErr = err
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	for _, srv := range servers {
		if err := srv.ShutdownContext(sctx); err != nil && !isNotStarted(err) {
			s.log.Warn("dns server shutdown", "err", err)
		}
	}
	for ; exited < len(servers); exited++ {
		if err := <-errc; err != nil && serveErr == nil && ctx.Err() == nil {
			serveErr = err
		}
	}
	if serveErr != nil && ctx.Err() == nil {
		return fmt.Errorf("txtdns: serve: %w", serveErr)
	}
	return nil
}

func isNotStarted(err error) bool {
	return err != nil && err.Error() == "dns: server not started"
}

type handler struct {
	s   *Server
	tcp bool
}

// ServeDNS implements dns.Handler.
func (h handler) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	n := h.s.inFlight.Add(1)
	defer h.s.inFlight.Add(-1)
	if n > int64(h.s.cfg.MaxInFlight) {
		h.s.m.dropped.Inc()
		return
	}
	resp := h.s.Respond(req, h.tcp)
	t := transportUDP
	if h.tcp {
		t = transportTCP
	}
	h.s.m.queries[t][rcodeIndex(resp.Rcode)].Inc()
	if resp.Truncated {
		h.s.m.trunc.Inc()
	}
	if err := w.WriteMsg(resp); err != nil {
		h.s.log.Debug("dns write failed", "err", err, "remote", w.RemoteAddr().String())
	}
}

func rcodeIndex(rc int) int {
	switch rc {
	case dns.RcodeSuccess:
		return rcNoError
	case dns.RcodeNameError:
		return rcNXDomain
	case dns.RcodeRefused:
		return rcRefused
	case dns.RcodeFormatError:
		return rcFormErr
	case dns.RcodeNotImplemented:
		return rcNotImp
	default:
		return rcOther
	}
}

// Respond computes the response to req. It is pure apart from reading the
// authority, so it is fuzzed directly. tcp selects the size limit: 65535
// bytes over TCP, the client's EDNS buffer (at least 512, at most
// MaxUDPResponse) over UDP.
func (s *Server) Respond(req *dns.Msg, tcp bool) *dns.Msg {
	resp := new(dns.Msg)
	resp.SetReply(req)
	if req.Opcode != dns.OpcodeQuery {
		resp.Rcode = dns.RcodeNotImplemented
		return resp
	}
	if len(req.Question) != 1 {
		resp.Rcode = dns.RcodeFormatError
		return resp
	}
	size := dns.MinMsgSize
	if opt := req.IsEdns0(); opt != nil {
		if opt.Version() != 0 {
			resp.SetEdns0(MaxUDPResponse, false)
			resp.Rcode = dns.RcodeBadVers
			return resp
		}
		size = max(size, min(int(opt.UDPSize()), MaxUDPResponse))
		resp.SetEdns0(MaxUDPResponse, false)
	}
	if tcp {
		size = dns.MaxMsgSize
	}
	q := req.Question[0]
	if q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY {
		resp.Rcode = dns.RcodeRefused
		return resp
	}
	ans, err := s.auth.LookupTXT(q.Name)
	switch {
	case errors.Is(err, ErrRefused):
		resp.Rcode = dns.RcodeRefused
		return resp
	case errors.Is(err, ErrNXDomain):
		resp.Authoritative = true
		resp.Rcode = dns.RcodeNameError
		resp.Ns = []dns.RR{s.soa()}
		return resp
	case err != nil:
		resp.Rcode = dns.RcodeServerFailure
		return resp
	}
	resp.Authoritative = true
	ttl := uint32(ans.TTL / time.Second)
	switch {
	case q.Qtype == dns.TypeTXT || q.Qtype == dns.TypeANY:
		resp.Answer = make([]dns.RR, 0, len(ans.Records))
		for _, txt := range ans.Records {
			resp.Answer = append(resp.Answer, &dns.TXT{
				Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: ttl},
				Txt: txt,
			})
		}
	case q.Qtype == dns.TypeSOA && ans.Name.Kind == NameApex:
		soa := s.soa()
		soa.Hdr.Name = q.Name
		resp.Answer = []dns.RR{soa}
	default:
		resp.Ns = []dns.RR{s.soa()} // NODATA
	}
	resp.Truncate(size)
	return resp
}

func (s *Server) soa() *dns.SOA {
	zone := s.auth.Zone()
	ttl := uint32(s.auth.TTL() / time.Second)
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: ttl},
		Ns:      "ns." + zone,
		Mbox:    "hostmaster." + zone,
		Serial:  s.auth.Serial(),
		Refresh: 60,
		Retry:   10,
		Expire:  600,
		Minttl:  ttl,
	}
}

// boundPacketConn hides the concrete *net.UDPConn from miekg/dns.
type boundPacketConn struct{ net.PacketConn }

// limitListener bounds the connections accepted and not yet closed.
type limitListener struct {
	net.Listener
	sem   chan struct{}
	done  chan struct{}
	once  sync.Once
	conns prometheus.Gauge
}

func newLimitListener(l net.Listener, n int, g prometheus.Gauge) *limitListener {
	return &limitListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{}), conns: g}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	l.conns.Inc()
	return &limitConn{Conn: c, l: l}, nil
}

func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.conns.Dec()
		<-c.l.sem
	})
	return err
}
