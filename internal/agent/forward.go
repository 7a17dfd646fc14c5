package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fmnode/fmnode/internal/dataapi"
	"github.com/fmnode/fmnode/internal/node"
	"github.com/fmnode/fmnode/txtdns/kv"
)

// headerForwarded marks a request one agent passed to another of its
// region: it is never passed on again, so a stale placement cannot loop.
const headerForwarded = "Fm-Forwarded-By"

// forwarding wraps the data API: a key whose partition another node of
// this region hosts (DNS publishes every node of a region as its
// endpoints, and placement is per partition) is passed to that node's
// API, once. Everything else is served here.
func (h *host) forwarding(api http.Handler) http.Handler {
	part, _ := dataapi.NewHashPartitioner(uint32(h.spec.Partitions))
	tr := newForwardTransport(h.a.peerDialer().DialContext)
	scheme := "http"
	if h.a.certs != nil {
		forwardOverTLS(tr, h.a.certs.client())
		scheme = "https"
	}
	proxy := newForwardProxy(scheme, tr, h.self.Name, h.a.log)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(headerForwarded) == "" {
			if key, ok := kvKey(r); ok {
				p := part.Partition(key)
				if int(p) < len(h.owner) {
					if own := h.owner[p]; own != 0 && own != node.NodeID(h.self.ID) {
						if addr := h.apiAddr(own); addr != "" {
							proxy.ServeHTTP(w, r.WithContext(withForward(r, addr)))
							return
						}
					}
				}
			}
		}
		api.ServeHTTP(w, r)
	})
}

// newForwardTransport is the transport requests are passed to the
// hosting node on. It keeps as many idle connections per peer as the data
// API serves requests at once (dataapi.DefaultMaxInFlight, what one node
// can pass on at once): HTTP/1.1 carries one request per connection, and
// after a failover every client of the moved partitions arrives at once,
// about two thirds of them at a node that passes the request on. With 64
// per peer the rest of such a burst's connections were closed and every
// poll round opened them again, a TLS handshake on both agents per request
// while they were busiest.
//
// Over TLS it speaks HTTP/2 (the agents' API offers h2): the requests to
// one peer share a connection (another per
// dataapi.DefaultMaxConcurrentStreams at once), so the burst after a
// failover opens one connection per peer instead of one per request.
func newForwardTransport(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Transport {
	tr := &http.Transport{MaxIdleConns: 0, MaxIdleConnsPerHost: dataapi.DefaultMaxInFlight, IdleConnTimeout: time.Minute,
		ResponseHeaderTimeout: dataapi.DefaultRequestTimeout + 5*time.Second, DialContext: dial}
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetHTTP1(true)
	tr.Protocols.SetHTTP2(true)
	return tr
}

// forwardOverTLS sets tr up for the peers' API over TLS: HTTP/2 (ALPN),
// and at most kv.MaxDialsPerAgent connections being opened to one peer at
// a time, so that a burst to a peer with no connection yet waits for the
// first one and multiplexes on it instead of dialling once per request
// (for HTTP/2 the bound counts dials in progress, not connections).
func forwardOverTLS(tr *http.Transport, cfg *tls.Config) {
	tr.TLSClientConfig = cfg
	tr.MaxConnsPerHost = kv.MaxDialsPerAgent
}

type forwardTo struct{}

type forwardTraceKey struct{}

// withForward carries the target and a trace of how far the forwarded
// request got (ReverseProxy clones the inbound request's context for the
// outbound one, so the trace sees the outbound send).
func withForward(r *http.Request, addr string) context.Context {
	ft := &forwardTrace{}
	ctx := context.WithValue(r.Context(), forwardTo{}, addr)
	ctx = context.WithValue(ctx, forwardTraceKey{}, ft)
	return httptrace.WithClientTrace(ctx, ft.clientTrace())
}

// newForwardProxy passes a request to the node at the request's
// forwardTo address. When that node does not answer, a read is refused
// as unavailable (retrying it is safe), and so is a write that provably
// never left this agent; a write that may have reached the hosting node
// is an unknown outcome (504 unknown_outcome), exactly as the hosting
// node's own handler would say: answering it "unavailable" told the
// client it was not applied, and a kill -9 of the hosting node between
// its commit and its reply made that a lie (a write the client was told
// had failed showed up in later reads; found by jepsen-style).
func newForwardProxy(scheme string, tr http.RoundTripper, self string, log *slog.Logger) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			target := pr.In.Context().Value(forwardTo{}).(string)
			pr.SetURL(&url.URL{Scheme: scheme, Host: target})
			pr.Out.Header.Set(headerForwarded, self)
		},
		Transport: tr,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			log.Warn("forward to the hosting node", "method", r.Method, "err", err)
			ft, _ := r.Context().Value(forwardTraceKey{}).(*forwardTrace)
			if r.Method != http.MethodGet && r.Method != http.MethodHead && (ft == nil || !ft.notSent(err)) {
				writeError(w, http.StatusGatewayTimeout, dataapi.CodeUnknownOutcome,
					"agent: the node hosting this partition in the region did not answer a write passed to it: it may or may not have been applied: "+err.Error())
				return
			}
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, dataapi.CodeUnavailable, "agent: the node hosting this partition in the region did not answer: "+err.Error())
		},
	}
}

// forwardTrace records how far a forwarded request got: a failure
// before its headers were written never reached the hosting node.
type forwardTrace struct {
	gotConn, wroteHeaders, tlsFailed atomic.Bool
}

func (f *forwardTrace) clientTrace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GotConn:      func(httptrace.GotConnInfo) { f.gotConn.Store(true) },
		WroteHeaders: func() { f.wroteHeaders.Store(true) },
		TLSHandshakeDone: func(_ tls.ConnectionState, err error) {
			if err != nil {
				f.tlsFailed.Store(true)
			}
		},
	}
}

// notSent: a dial or TLS failure, or a connection without headers
// written; anything else may have been received.
func (f *forwardTrace) notSent(err error) bool {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return true
	}
	return f.tlsFailed.Load() || f.gotConn.Load() && !f.wroteHeaders.Load()
}

// kvKey is the key of a data API path; ok is false for anything the
// handler will refuse anyway.
func kvKey(r *http.Request) ([]byte, bool) {
	esc := r.URL.EscapedPath()
	if !strings.HasPrefix(esc, dataapi.PathPrefix) {
		return nil, false
	}
	k, err := url.PathUnescape(esc[len(dataapi.PathPrefix):])
	if err != nil || k == "" {
		return nil, false
	}
	return []byte(k), true
}
