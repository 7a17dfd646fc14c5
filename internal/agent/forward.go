package agent

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/fmnode/fmnode/internal/dataapi"
	"github.com/fmnode/fmnode/internal/node"
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
	tr := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute, ResponseHeaderTimeout: dataapi.DefaultRequestTimeout + 5*time.Second,
		DialContext: h.a.peerDialer().DialContext}
	scheme := "http"
	if h.a.certs != nil {
		tr.TLSClientConfig = h.a.certs.client()
		scheme = "https"
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			target := pr.In.Context().Value(forwardTo{}).(string)
			pr.SetURL(&url.URL{Scheme: scheme, Host: target})
			pr.Out.Header.Set(headerForwarded, h.self.Name)
		},
		Transport: tr,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			h.a.log.Warn("forward to the hosting node", "err", err)
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, dataapi.CodeUnavailable, "agent: the node hosting this partition in the region did not answer: "+err.Error())
		},
	}
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

type forwardTo struct{}

func withForward(r *http.Request, addr string) context.Context {
	return context.WithValue(r.Context(), forwardTo{}, addr)
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
