package agent

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Codes of the admin API's authentication errors.
const (
	CodeUnauthorized = "unauthorized"
	CodeForbidden    = "forbidden"
)

// ErrAdminToken: the admin token file is missing, unreadable or empty.
var ErrAdminToken = errors.New("agent: admin.token_file")

// maxTokenBytes bounds the admin token file.
const maxTokenBytes = 4 << 10

// adminState is what the admin API keeps: the bearer token (its SHA-256;
// nil when admin.token_file is unset) and the client it forwards and fans
// out with.
type adminState struct {
	token atomic.Pointer[[sha256.Size]byte]
	path  atomic.Pointer[string]

	once   sync.Once
	client *http.Client
}

// loadToken reads the token file (nothing when path is empty: no token
// is required then). The token is the file's content without surrounding
// white space; an empty one is refused.
func (s *adminState) loadToken(path string) error {
	if path == "" {
		s.token.Store(nil)
		s.path.Store(&path)
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrAdminToken, err)
	}
	if len(b) > maxTokenBytes {
		return fmt.Errorf("%w: %s: over %d bytes", ErrAdminToken, path, maxTokenBytes)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return fmt.Errorf("%w: %s: empty (an empty token would let any caller through)", ErrAdminToken, path)
	}
	sum := sha256.Sum256(b)
	s.token.Store(&sum)
	s.path.Store(&path)
	return nil
}

// reloadToken is SIGHUP's: the file is read again (a rotated token) and
// a new path applies at once. A bad file keeps the old token.
func (s *adminState) reloadToken(path string) (applied string, err error) {
	if err := s.loadToken(path); err != nil {
		return "", err
	}
	return "admin.token_file", nil
}

// authed wraps an admin handler: with a token configured, the request
// must carry it as a bearer token (401 without one, 403 with a wrong
// one), compared in constant time over the hashes.
func (a *Agent) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		want := a.admin.token.Load()
		if want == nil {
			h(w, r)
			return
		}
		hdr := r.Header.Get("Authorization")
		if hdr == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="fmnode admin"`)
			writeError(w, http.StatusUnauthorized, CodeUnauthorized, "agent: admin calls need `Authorization: Bearer <token>` (the agent's admin.token_file; fmnode --token-file)")
			return
		}
		tok, ok := strings.CutPrefix(hdr, "Bearer ")
		got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
		if !ok || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			a.log.Warn("admin call refused: wrong bearer token", "path", r.URL.Path, "remote", r.RemoteAddr)
			writeError(w, http.StatusForbidden, CodeForbidden, "agent: the bearer token is not this agent's admin token")
			return
		}
		h(w, r)
	}
}

// adminClient is the client the agent calls other agents' admin API with
// (forwarding and fan-out): the node certificate as client certificate
// when TLS is on; the caller's bearer token is passed on per request.
func (a *Agent) adminClient() *http.Client {
	a.admin.once.Do(func() {
		tr := &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute, ResponseHeaderTimeout: 15 * time.Second,
			DialContext: a.peerDialer().DialContext}
		if a.certs != nil {
			tr.TLSClientConfig = a.certs.client()
		}
		a.admin.client = &http.Client{Transport: tr, Timeout: 20 * time.Second}
	})
	return a.admin.client
}

func (a *Agent) apiScheme() string {
	if a.certs != nil {
		return "https"
	}
	return "http"
}
