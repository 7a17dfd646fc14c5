package sysreg

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// MemPeers is the in-memory twin of the agents' HTTPS API for the system
// register: an http.RoundTripper that hands each request to the handler
// registered for its URL's host:port, in process, without sockets. The
// agent's unit tests run N Acceptors on one MemPeers and give
// HTTPClient() to their Clients (with Scheme "http" or "https": the
// scheme is ignored). Bodies are copied both ways, bounded by
// MaxBodyBytes like on the wire. Fault injection: SetDown makes a host
// refuse requests as if it were unreachable; Remove unregisters it.
type MemPeers struct {
	mu    sync.Mutex
	hosts map[string]http.Handler
	down  map[string]bool
}

var _ http.RoundTripper = (*MemPeers)(nil)

// NewMemPeers returns an empty network.
func NewMemPeers() *MemPeers {
	return &MemPeers{hosts: make(map[string]http.Handler), down: make(map[string]bool)}
}

// Handle serves addr (host:port) with h, replacing any handler there.
// h sees requests at their full path, so pass an Acceptor directly or a
// mux that mounts one at Path.
func (n *MemPeers) Handle(addr string, h http.Handler) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.hosts[addr] = h
}

// Remove unregisters addr.
func (n *MemPeers) Remove(addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.hosts, addr)
}

// SetDown makes addr unreachable (down) or reachable again.
func (n *MemPeers) SetDown(addr string, down bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if down {
		n.down[addr] = true
	} else {
		delete(n.down, addr)
	}
}

// HTTPClient returns a client whose transport is n.
func (n *MemPeers) HTTPClient() *http.Client { return &http.Client{Transport: n} }

// RoundTrip implements http.RoundTripper.
func (n *MemPeers) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := readBody(req)
	if err != nil {
		return nil, err
	}
	host := req.URL.Host
	n.mu.Lock()
	h, down := n.hosts[host], n.down[host]
	n.mu.Unlock()
	switch {
	case h == nil:
		return nil, fmt.Errorf("sysreg mem: dial %s: no such host", host)
	case down:
		return nil, fmt.Errorf("sysreg mem: dial %s: connection refused", host)
	}
	ctx := req.Context()
	sreq := req.Clone(ctx)
	sreq.Body = io.NopCloser(bytes.NewReader(body))
	sreq.ContentLength = int64(len(body))
	sreq.Host = host
	sreq.RequestURI = req.URL.RequestURI()
	sreq.RemoteAddr = "127.0.0.1:1"
	w := &memResponse{header: make(http.Header)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(w, sreq)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		// The handler finishes on its own (it is bounded by its own
		// locks and the store); nobody reads its response.
		return nil, ctx.Err()
	}
	status := w.status
	if status == 0 {
		status = http.StatusOK
	}
	return &http.Response{
		Status:        strconv.Itoa(status) + " " + http.StatusText(status),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.header,
		Body:          io.NopCloser(bytes.NewReader(w.body.Bytes())),
		ContentLength: int64(w.body.Len()),
		Request:       req,
	}, nil
}

// readBody takes the request body, at most one byte more than
// MaxBodyBytes (so the handler still sees an oversized body as one), and
// closes it as a RoundTripper must.
func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	defer func() { _ = req.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(req.Body, MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("sysreg mem: read request body: %w", err)
	}
	return b, nil
}

// memResponse is a minimal http.ResponseWriter that keeps what is
// written, up to MaxBodyBytes+maxErrorBody (the largest reply a handler
// of this package writes); beyond it writes fail.
type memResponse struct {
	mu     sync.Mutex
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *memResponse) Header() http.Header { return w.header }

func (w *memResponse) WriteHeader(status int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.status == 0 {
		w.status = status
	}
}

func (w *memResponse) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.body.Len()+len(p) > MaxBodyBytes+maxErrorBody {
		return 0, fmt.Errorf("sysreg mem: response exceeds %d bytes", MaxBodyBytes+maxErrorBody)
	}
	return w.body.Write(p)
}
