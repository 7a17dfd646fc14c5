package kv

import (
	"context"
	"fmt"
	"net/http"

	"github.com/fmnode/fmnode/txtdns/routing"
)

// Session is a sequence of operations that sees its own writes and never
// reads back in time (read-your-writes, monotonic reads), on top of
// routing's session tokens: every write and read merges the agent's
// Fm-Session token of the key's partition into the session, and every
// read sends the partition's token, so a replica that has not applied it
// answers 503 stale and routing reads at another region, ending with the
// write region. Use ConsistencySession for reads that rely on it; strong
// reads keep it too, eventual ones do not wait for it. Safe for
// concurrent use; a session holds tokens for at most
// routing.DefaultMaxSessionPartitions partitions (past that, new
// partitions' tokens are dropped and logged by routing).
type Session struct {
	c *Client
	s *routing.Session
}

// NewSession starts an empty session.
func (c *Client) NewSession() *Session {
	s, err := routing.NewSession(0)
	if err != nil { // routing.NewSession fails only for a bound out of range, and 0 is the default
		panic("kv: routing.NewSession(0): " + err.Error())
	}
	return &Session{c: c, s: s}
}

// ResumeSession continues a session another process (or an earlier
// request) encoded with Session.Encode.
func (c *Client) ResumeSession(enc string) (*Session, error) {
	s, err := routing.DecodeSession(enc, 0)
	if err != nil {
		return nil, fmt.Errorf("kv: resume session: %w", err)
	}
	return &Session{c: c, s: s}, nil
}

// Encode returns the session's tokens, to carry it across processes (a
// cookie, a header); ResumeSession decodes it.
func (s *Session) Encode() string { return s.s.Encode() }

// Token returns the session's token for key's partition (zero if none).
func (s *Session) Token(key string) routing.SessionToken {
	return s.s.Token(s.c.rc.Partition(key))
}

// Put is Client.Put within the session.
func (s *Session) Put(ctx context.Context, key string, value []byte) error {
	return s.c.write(ctx, s.s, http.MethodPut, key, value)
}

// CompareAndSet is Client.CompareAndSet within the session.
func (s *Session) CompareAndSet(ctx context.Context, key string, expected routing.SessionToken, value []byte) error {
	return s.c.cas(ctx, s.s, http.MethodPut, key, expected, value)
}

// CompareAndDelete is Client.CompareAndDelete within the session.
func (s *Session) CompareAndDelete(ctx context.Context, key string, expected routing.SessionToken) error {
	if expected.IsZero() {
		return fmt.Errorf("%w: compare-and-delete needs a version", ErrInvalidRequest)
	}
	return s.c.cas(ctx, s.s, http.MethodDelete, key, expected, nil)
}

// Delete is Client.Delete within the session.
func (s *Session) Delete(ctx context.Context, key string) error {
	return s.c.write(ctx, s.s, http.MethodDelete, key, nil)
}

// Get is Client.Get within the session.
func (s *Session) Get(ctx context.Context, key string, cons routing.Consistency) ([]byte, bool, error) {
	it, found, err := s.c.read(ctx, s.s, key, cons)
	return it.Value, found, err
}

// GetItem is Client.GetItem within the session.
func (s *Session) GetItem(ctx context.Context, key string, cons routing.Consistency) (Item, bool, error) {
	return s.c.read(ctx, s.s, key, cons)
}
