package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/fmnode/fmnode/internal/dataapi"
	"github.com/fmnode/fmnode/internal/membership"
	"github.com/fmnode/fmnode/internal/sysreg"
)

// Paths of the agent's HTTP API besides the data API (dataapi.PathPrefix).
const (
	PathInit     = "/v1/admin/init"
	PathSpec     = "/v1/admin/spec"
	PathHealthz  = "/healthz"
	PathReadyz   = "/readyz"
	pathSpecPoke = "/v1/internal/spec-changed"

	// maxAdminBody bounds admin request bodies.
	maxAdminBody = 64 << 10
)

// apiState routes the API's requests to what exists at the moment: the
// data API only once the node hosts its partitions.
type apiState struct{ a *Agent }

func (a *Agent) startAPI() error {
	ln, err := net.Listen("tcp", a.cfg.Bind.APIAddr)
	if err != nil {
		return fmt.Errorf("bind.api_addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(dataapi.PathPrefix, http.HandlerFunc(a.serveKV))
	mux.Handle(sysreg.Path, a.sysacc)
	mux.HandleFunc(pathSpecPoke, a.servePoke)
	mux.HandleFunc(PathInit, a.authed(a.serveInit))
	mux.HandleFunc(PathSpec, a.authed(a.serveSpec))
	mux.HandleFunc(PathPartitions, a.authed(a.servePartitions))
	a.adminRoutes(mux)
	a.pprofRoutes(mux)
	mux.HandleFunc(PathHealthz, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc(PathReadyz, a.serveReadyz)
	mux.Handle(PathMetrics, a.metrics.handler())
	srv, err := dataapi.NewServer(dataapi.ServerConfig{Handler: a.requireClientCert(mux), TLSConfig: a.tlsServer(), Logger: a.log.With("component", "api")})
	if err != nil {
		_ = ln.Close()
		return err
	}
	a.api, a.apiLn = srv, ln
	go func() {
		var err error
		if srv.TLSConfig != nil {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("API server stopped", "err", err)
		}
	}()
	return nil
}

func (a *Agent) tlsServer() *tls.Config {
	if a.certs == nil {
		return nil
	}
	return a.certs.apiServer()
}

// requireClientCert answers 401 to a TLS request without a verified
// client certificate, except the probes' paths (see certs.apiServer).
func (a *Agent) requireClientCert(next http.Handler) http.Handler {
	if a.certs == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.openPath(r.URL.Path) && (r.TLS == nil || len(r.TLS.VerifiedChains) == 0) {
			writeError(w, http.StatusUnauthorized, "unauthorized", "agent: a client certificate signed by the cluster CA is required")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// openPath reports whether path is served without a client certificate:
// the probes (a kubelet presents none) and, when the config says so, the
// metrics.
func (a *Agent) openPath(path string) bool {
	return path == PathHealthz || path == PathReadyz || path == PathMetrics && a.cfg.Admin.MetricsWithoutClientCert
}

// stopAPI stops accepting and waits for the requests in flight (their
// commits finish) until ctx ends.
func (a *Agent) stopAPI(ctx context.Context) {
	if a.api == nil {
		return
	}
	if err := a.api.Shutdown(ctx); err != nil {
		a.log.Warn("API shutdown: requests still in flight at the bound were cut", "err", err)
		_ = a.api.Close()
	}
}

// APIAddr is the address the API listens on (useful with port 0).
func (a *Agent) APIAddr() string {
	if a.apiLn == nil {
		return ""
	}
	return a.apiLn.Addr().String()
}

func (a *Agent) serveKV(w http.ResponseWriter, r *http.Request) {
	h := a.host.Load()
	switch {
	case a.draining.Load():
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, dataapi.CodeNotReady, "agent: shutting down; use another node")
	case h == nil:
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, dataapi.CodeNotReady, a.notReadyReason())
	default:
		h.kv.ServeHTTP(w, r)
	}
}

func (a *Agent) notReadyReason() string {
	if a.spec.Load() == nil {
		return "agent: waiting for the cluster spec (run `fmnode init` against any agent)"
	}
	return "agent: starting the node"
}

// Readiness is /readyz's body.
type Readiness struct {
	Ready   bool   `json:"ready"`
	Reason  string `json:"reason,omitempty"`
	Spec    uint64 `json:"spec_version,omitempty"`
	Members int    `json:"members"`
	// Behind counts hosted replicas not yet in their register's epoch, or
	// whose register value the node does not know yet.
	Behind int `json:"behind,omitempty"`
}

// serveReadyz: ready when the agent hosts its partitions, has joined the
// membership (another member alive, unless the spec has this node only)
// and every hosted replica is in its register's epoch. Not ready while
// shutting down.
func (a *Agent) serveReadyz(w http.ResponseWriter, r *http.Request) {
	var rd Readiness
	c := a.spec.Load()
	if c != nil {
		rd.Spec = c.version
	}
	alive := 0
	if a.members != nil {
		for _, m := range a.members.Members() {
			rd.Members++
			if m.State == membership.StateAlive && m.NodeID != uint16(a.cfg.NodeID) {
				alive++
			}
		}
	}
	h := a.host.Load()
	switch {
	case a.draining.Load():
		rd.Reason = "agent: shutting down"
	case h == nil:
		rd.Reason = a.notReadyReason()
	case alive == 0 && len(c.spec.Nodes) > 1:
		rd.Reason = "agent: not joined: no other member is alive in the membership"
	default:
		behind, err := h.behind(r.Context())
		rd.Behind = behind
		switch {
		case err != nil:
			rd.Reason = "agent: the node did not answer: " + err.Error()
		case behind > 0:
			rd.Reason = fmt.Sprintf("agent: %d hosted replicas are not yet in their register's epoch", behind)
		default:
			rd.Ready = true
		}
	}
	status := http.StatusOK
	if !rd.Ready {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, rd)
}

// readJSON decodes a bounded JSON body into v, refusing unknown fields.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, dataapi.CodeTooLarge, fmt.Sprintf("agent: body over %d bytes or unreadable: %v", maxAdminBody, err))
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "bad_body", "agent: "+err.Error())
		return false
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "bad_body", "agent: trailing data after the JSON object")
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, dataapi.ErrorBody{Error: msg, Code: code})
}

func requireMethod(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	w.Header().Set("Allow", fmt.Sprint(methods))
	writeError(w, http.StatusMethodNotAllowed, dataapi.CodeMethodNotAllowed, "agent: method "+r.Method+" not allowed")
	return false
}
