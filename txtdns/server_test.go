package txtdns

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startServer runs a live server on a loopback port for the test's duration.
func startServer(t testing.TB, p *Publisher) *Server {
	t.Helper()
	s, err := NewServer(ServerConfig{Addr: "127.0.0.1:0", Authority: p, Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	require.NoError(t, s.Listen())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return s
}

func query(t testing.TB, addr, net, name string, qtype uint16, edns bool) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	if edns {
		m.SetEdns0(4096, false)
	}
	c := &dns.Client{Net: net, Timeout: 2 * time.Second}
	r, _, err := c.Exchange(m, addr)
	require.NoError(t, err)
	return r
}

func txtOf(t testing.TB, r *dns.Msg) [][]string {
	t.Helper()
	var out [][]string
	for _, rr := range r.Answer {
		txt, ok := rr.(*dns.TXT)
		require.True(t, ok, "answer %v is not TXT", rr)
		out = append(out, txt.Txt)
	}
	return out
}

func populated(t testing.TB) *Publisher {
	p := newTestPublisher(t, nil)
	var rs []Route
	for i := range uint32(1000) {
		w := "eastus"
		if i%2 == 1 && i < 256 { // block 0 alternates: 256 runs, too many for UDP
			w = "westus"
		}
		rs = append(rs, route(i, 1, w))
	}
	_, err := p.Apply(rs...)
	require.NoError(t, err)
	_, err = p.SetRegions(RegionInfo{Region: "eastus", Endpoints: []string{"127.0.0.21:7000"}, ConfigVersion: 1})
	require.NoError(t, err)
	return p
}

func TestServerAnswers(t *testing.T) {
	p := populated(t)
	s := startServer(t, p)
	addr := s.Addr()

	for _, netw := range []string{"udp", "tcp"} {
		t.Run(netw, func(t *testing.T) {
			tests := []struct {
				name   string
				qname  string
				qtype  uint16
				rcode  int
				aa     bool
				answer int
				soaNS  bool
			}{
				{"partition", "p-300.fm.example.", dns.TypeTXT, dns.RcodeSuccess, true, 1, false},
				{"partition any case", "P-300.FM.Example.", dns.TypeTXT, dns.RcodeSuccess, true, 1, false},
				{"partition ANY", "p-300.fm.example.", dns.TypeANY, dns.RcodeSuccess, true, 1, false},
				{"region", "r-eastus.fm.example.", dns.TypeTXT, dns.RcodeSuccess, true, 1, false},
				{"apex meta", "fm.example.", dns.TypeTXT, dns.RcodeSuccess, true, 1, false},
				{"apex SOA", "fm.example.", dns.TypeSOA, dns.RcodeSuccess, true, 1, false},
				{"NODATA", "p-300.fm.example.", dns.TypeA, dns.RcodeSuccess, true, 0, true},
				{"unknown partition", "p-5000.fm.example.", dns.TypeTXT, dns.RcodeNameError, true, 0, true},
				{"unknown name", "www.fm.example.", dns.TypeTXT, dns.RcodeNameError, true, 0, true},
				{"outside zone", "p-300.example.org.", dns.TypeTXT, dns.RcodeRefused, false, 0, false},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					r := query(t, addr, netw, tc.qname, tc.qtype, false)
					assert.Equal(t, dns.RcodeToString[tc.rcode], dns.RcodeToString[r.Rcode])
					assert.Equal(t, tc.aa, r.Authoritative)
					assert.Len(t, r.Answer, tc.answer)
					if tc.soaNS {
						require.Len(t, r.Ns, 1)
						soa, ok := r.Ns[0].(*dns.SOA)
						require.True(t, ok)
						assert.Equal(t, uint32(5), soa.Minttl)
						assert.Equal(t, p.Serial(), soa.Serial)
					}
					for _, rr := range r.Answer {
						assert.Equal(t, uint32(5), rr.Header().Ttl, "default TTL is 5 s")
						assert.Equal(t, tc.qname, rr.Header().Name, "owner name echoes the question")
					}
				})
			}
		})
	}

	r := query(t, addr, "udp", "p-300.fm.example.", dns.TypeTXT, false)
	run, err := DecodeRun(txtOf(t, r)[0])
	require.NoError(t, err)
	assert.Equal(t, Run{Lo: 256, Hi: 511, Epoch: 1, WriteRegion: "eastus", Priority: []string{"eastus", "westus", "northeu"}, ConfigVersion: 1}, run)
}

func TestServerTruncatesToUDPAndServesTCP(t *testing.T) {
	p := populated(t)
	s := startServer(t, p)
	tests := []struct {
		name      string
		net       string
		edns      bool
		truncated bool
		maxSize   int
	}{
		{"udp without edns", "udp", false, true, dns.MinMsgSize},
		{"udp with edns", "udp", true, true, MaxUDPResponse},
		{"tcp", "tcp", false, false, dns.MaxMsgSize},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := query(t, s.Addr(), tc.net, "b-0.fm.example.", dns.TypeTXT, tc.edns)
			assert.Equal(t, tc.truncated, r.Truncated)
			r.Compress = true // the server compresses what it truncates
			assert.LessOrEqual(t, r.Len(), tc.maxSize)
			if !tc.truncated {
				assert.Len(t, r.Answer, 256)
			}
			if tc.edns {
				assert.NotNil(t, r.IsEdns0(), "OPT echoed")
			}
		})
	}
	// A uniform block is one record and fits in UDP.
	r := query(t, s.Addr(), "udp", "b-1.fm.example.", dns.TypeTXT, false)
	assert.False(t, r.Truncated)
	assert.Len(t, r.Answer, 1)
}

func TestServerUpdatesQuickly(t *testing.T) {
	p := populated(t)
	s := startServer(t, p)
	c := &dns.Client{Net: "udp", Timeout: time.Second}
	var lags []time.Duration
	for i := range 200 {
		committed := time.Now()
		_, err := p.Apply(Route{Partition: 300, Epoch: uint64(2 + i), WriteRegion: "westus",
			Priority: []string{"eastus", "westus"}, ConfigVersion: 1, CommittedAt: committed})
		require.NoError(t, err)
		for {
			m := new(dns.Msg)
			m.SetQuestion("p-300.fm.example.", dns.TypeTXT)
			r, _, err := c.Exchange(m, s.Addr())
			require.NoError(t, err)
			run, err := DecodeRun(r.Answer[0].(*dns.TXT).Txt)
			require.NoError(t, err)
			if run.Epoch == uint64(2+i) {
				break
			}
			require.Less(t, time.Since(committed), time.Second)
		}
		lags = append(lags, time.Since(committed))
	}
	slices.Sort(lags)
	t.Logf("commit to answer over UDP (Apply + one query): p50 %v p99 %v max %v", lags[len(lags)/2], lags[len(lags)*99/100], lags[len(lags)-1])
	assert.Less(t, lags[len(lags)/2], 10*time.Millisecond)
}

func TestServerConfigErrors(t *testing.T) {
	p := newTestPublisher(t, nil)
	tests := []struct {
		field string
		cfg   ServerConfig
	}{
		{"Authority", ServerConfig{Addr: "127.0.0.1:0"}},
		{"Addr", ServerConfig{Addr: "nope", Authority: p}},
		{"ReadTimeout", ServerConfig{Addr: "127.0.0.1:0", Authority: p, ReadTimeout: -1}},
		{"MaxTCPConns", ServerConfig{Addr: "127.0.0.1:0", Authority: p, MaxTCPConns: -1}},
		{"MaxInFlight", ServerConfig{Addr: "127.0.0.1:0", Authority: p, MaxInFlight: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.field, func(t *testing.T) {
			_, err := NewServer(tc.cfg)
			assert.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.field)
		})
	}
	s, err := NewServer(ServerConfig{Addr: "127.0.0.1:0", Authority: p})
	require.NoError(t, err)
	assert.ErrorIs(t, s.Serve(context.Background()), ErrNotListening)
}

func TestServerStopsPromptly(t *testing.T) {
	p := newTestPublisher(t, nil)
	s, err := NewServer(ServerConfig{Addr: "127.0.0.1:0", Authority: p})
	require.NoError(t, err)
	require.NoError(t, s.Listen())
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // cancelled before Serve starts
	start := time.Now()
	require.NoError(t, s.Serve(ctx))
	assert.Less(t, time.Since(start), 3*time.Second)
}

// TestDig queries the server with dig when it is installed (.ci installs
// dnsutils).
func TestDig(t *testing.T) {
	dig, err := exec.LookPath("dig")
	if err != nil {
		t.Skip("dig not installed")
	}
	p := populated(t)
	s := startServer(t, p)
	host, port, _ := strings.Cut(s.Addr(), ":")
	out, err := exec.Command(dig, "@"+host, "-p", port, "+norecurse", "TXT", "p-300.fm.example.").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "status: NOERROR")
	assert.Contains(t, string(out), `"v=1" "lo=256" "hi=511" "e=1" "w=eastus"`)
	out, err = exec.Command(dig, "@"+host, "-p", port, "TXT", "p-99999.fm.example.").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "status: NXDOMAIN")
	out, err = exec.Command(dig, "@"+host, "-p", port, "TXT", "p-1.example.org.").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "status: REFUSED")
}

// FuzzRespond feeds arbitrary DNS messages to the responder: it must not
// panic and its answer must pack within the transport's size.
func FuzzRespond(f *testing.F) {
	for _, q := range []struct {
		name  string
		qtype uint16
	}{{"p-42.fm.example.", dns.TypeTXT}, {"b-0.fm.example.", dns.TypeTXT}, {"fm.example.", dns.TypeSOA}, {"x.org.", dns.TypeA}} {
		m := new(dns.Msg)
		m.SetQuestion(q.name, q.qtype)
		m.SetEdns0(1232, false)
		b, _ := m.Pack()
		f.Add(b, false)
	}
	p := populated(f)
	s, err := NewServer(ServerConfig{Addr: "127.0.0.1:0", Authority: p})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, b []byte, tcp bool) {
		req := new(dns.Msg)
		if err := req.Unpack(b); err != nil {
			return
		}
		resp := s.Respond(req, tcp)
		out, err := resp.Pack()
		if err != nil {
			t.Fatalf("response does not pack: %v", err)
		}
		limit := MaxUDPResponse
		if tcp {
			limit = dns.MaxMsgSize
		}
		if len(out) > limit && len(resp.Answer) > 0 {
			t.Fatalf("response of %d bytes over the %d limit", len(out), limit)
		}
	})
}
