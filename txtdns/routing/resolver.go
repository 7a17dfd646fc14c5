package routing

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/fmnode/fmnode/txtdns"
)

// TXTResult is the TXT records of one name: one list of strings per record,
// and the smallest TTL among them.
type TXTResult struct {
	Records [][]string
	TTL     time.Duration
}

// TXTResolver looks up TXT records. It returns an error wrapping
// txtdns.ErrNXDomain when the name does not exist. Implementations: DNSResolver
// (the network), AuthorityResolver (a publisher in the same process) and
// MapResolver (a table, for tests and the simulator).
type TXTResolver interface {
	LookupTXT(ctx context.Context, name string) (TXTResult, error)
}

// DNSResolverConfig configures a DNSResolver.
type DNSResolverConfig struct {
	// Servers are "host:port" addresses, tried in order (rotating after a
	// failure). Required, at most 16.
	Servers []string
	// Timeout bounds one exchange. Default 1 s.
	Timeout time.Duration
	// UDPSize is the EDNS buffer size advertised. Default 1232.
	UDPSize uint16
}

// DNSResolver queries DNS servers with github.com/miekg/dns: UDP first, TCP
// when the answer is truncated.
type DNSResolver struct {
	servers []string
	udp     *dns.Client
	tcp     *dns.Client
	size    uint16
	mu      sync.Mutex
	next    int
}

// NewDNSResolver validates cfg.
func NewDNSResolver(cfg DNSResolverConfig) (*DNSResolver, error) {
	if len(cfg.Servers) == 0 || len(cfg.Servers) > 16 {
		return nil, configErr("Servers", "%d servers: need 1 to 16", len(cfg.Servers))
	}
	for _, s := range cfg.Servers {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return nil, configErr("Servers", "%q: %v", s, err)
		}
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Second
	}
	if cfg.Timeout < time.Millisecond || cfg.Timeout > time.Minute {
		return nil, configErr("Timeout", "%v: must be in [1ms, 1m]", cfg.Timeout)
	}
	if cfg.UDPSize == 0 {
		cfg.UDPSize = 1232
	}
	if cfg.UDPSize < dns.MinMsgSize {
		return nil, configErr("UDPSize", "%d: at least %d", cfg.UDPSize, dns.MinMsgSize)
	}
	return &DNSResolver{
		servers: append([]string(nil), cfg.Servers...),
		udp:     &dns.Client{Net: "udp", Timeout: cfg.Timeout, UDPSize: cfg.UDPSize},
		tcp:     &dns.Client{Net: "tcp", Timeout: cfg.Timeout},
		size:    cfg.UDPSize,
	}, nil
}

// LookupTXT implements TXTResolver. Each server is tried at most once.
func (r *DNSResolver) LookupTXT(ctx context.Context, name string) (TXTResult, error) {
	r.mu.Lock()
	start := r.next
	r.mu.Unlock()
	var errs []error
	for i := range r.servers {
		idx := (start + i) % len(r.servers)
		res, err := r.exchange(ctx, r.servers[idx], name)
		if err == nil || errors.Is(err, txtdns.ErrNXDomain) {
			return res, err
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
		r.mu.Lock()
		r.next = (idx + 1) % len(r.servers)
		r.mu.Unlock()
	}
	return TXTResult{}, errors.Join(errs...)
}

func (r *DNSResolver) exchange(ctx context.Context, server, name string) (TXTResult, error) {
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), dns.TypeTXT)
	q.RecursionDesired = false
	q.SetEdns0(r.size, false)
	resp, _, err := r.udp.ExchangeContext(ctx, q, server)
	if err == nil && resp.Truncated {
		resp, _, err = r.tcp.ExchangeContext(ctx, q, server)
	}
	if err != nil {
		return TXTResult{}, fmt.Errorf("routing: query %s at %s: %w", name, server, err)
	}
	switch resp.Rcode {
	case dns.RcodeSuccess:
	case dns.RcodeNameError:
		return TXTResult{}, fmt.Errorf("%w: %s at %s", txtdns.ErrNXDomain, name, server)
	default:
		return TXTResult{}, fmt.Errorf("%w: %s at %s: rcode %s", ErrServerFailure, name, server, dns.RcodeToString[resp.Rcode])
	}
	var res TXTResult
	for _, rr := range resp.Answer {
		txt, ok := rr.(*dns.TXT)
		if !ok || !strings.EqualFold(txt.Hdr.Name, q.Question[0].Name) {
			continue
		}
		ttl := time.Duration(txt.Hdr.Ttl) * time.Second
		if len(res.Records) == 0 || ttl < res.TTL {
			res.TTL = ttl
		}
		res.Records = append(res.Records, txt.Txt)
	}
	return res, nil
}

// AuthorityResolver answers from a txtdns.Authority (a Publisher) in the
// same process: the in-memory twin of DNSResolver, serving exactly the
// records the DNS server would.
type AuthorityResolver struct {
	Authority txtdns.Authority
}

// LookupTXT implements TXTResolver.
func (r AuthorityResolver) LookupTXT(ctx context.Context, name string) (TXTResult, error) {
	if err := ctx.Err(); err != nil {
		return TXTResult{}, err
	}
	ans, err := r.Authority.LookupTXT(name)
	switch {
	case errors.Is(err, txtdns.ErrNXDomain):
		return TXTResult{}, fmt.Errorf("%w: %s", txtdns.ErrNXDomain, name)
	case err != nil:
		return TXTResult{}, fmt.Errorf("%w: %s: %w", ErrServerFailure, name, err)
	}
	return TXTResult{Records: ans.Records, TTL: ans.TTL}, nil
}

// MapResolver answers from a table that tests and the simulator set; names
// it does not hold are NXDOMAIN. Safe for concurrent use.
type MapResolver struct {
	mu      sync.Mutex
	answers map[string]mapAnswer
	lookups int
}

type mapAnswer struct {
	res TXTResult
	err error
}

// NewMapResolver returns an empty table.
func NewMapResolver() *MapResolver { return &MapResolver{answers: make(map[string]mapAnswer)} }

// Set makes name answer records with ttl.
func (m *MapResolver) Set(name string, ttl time.Duration, records ...[]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.answers[strings.ToLower(dns.Fqdn(name))] = mapAnswer{res: TXTResult{Records: records, TTL: ttl}}
}

// SetError makes name fail with err.
func (m *MapResolver) SetError(name string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.answers[strings.ToLower(dns.Fqdn(name))] = mapAnswer{err: err}
}

// Delete makes name NXDOMAIN.
func (m *MapResolver) Delete(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.answers, strings.ToLower(dns.Fqdn(name)))
}

// Lookups returns how many lookups were made.
func (m *MapResolver) Lookups() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lookups
}

// LookupTXT implements TXTResolver.
func (m *MapResolver) LookupTXT(ctx context.Context, name string) (TXTResult, error) {
	if err := ctx.Err(); err != nil {
		return TXTResult{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lookups++
	a, ok := m.answers[strings.ToLower(dns.Fqdn(name))]
	if !ok {
		return TXTResult{}, fmt.Errorf("%w: %s", txtdns.ErrNXDomain, name)
	}
	return a.res, a.err
}
