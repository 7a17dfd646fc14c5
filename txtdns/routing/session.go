package routing

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// SessionToken is the progress a session has observed in one partition:
// the log position (LSN) of its latest write or read and the epoch in
// which that LSN was assigned, as the data plane reports them. LSNs
// continue across epochs within a partition's lineage, so tokens order by
// LSN, then epoch (as the data plane's tokens do). The zero token asks
// nothing.
type SessionToken struct {
	Epoch uint64
	LSN   uint64
}

// IsZero reports whether t is the zero token.
func (t SessionToken) IsZero() bool { return t.Epoch == 0 && t.LSN == 0 }

// Less orders tokens by LSN, then epoch.
func (t SessionToken) Less(o SessionToken) bool {
	if t.LSN != o.LSN {
		return t.LSN < o.LSN
	}
	return t.Epoch < o.Epoch
}

// String encodes the token as "<epoch>:<lsn>".
func (t SessionToken) String() string {
	return strconv.FormatUint(t.Epoch, 10) + ":" + strconv.FormatUint(t.LSN, 10)
}

// MaxTokenLen bounds an encoded token.
const MaxTokenLen = 41

// ParseSessionToken decodes "<epoch>:<lsn>" (canonical decimals).
func ParseSessionToken(s string) (SessionToken, error) {
	if len(s) > MaxTokenLen {
		return SessionToken{}, fmt.Errorf("%w: %d bytes, at most %d", ErrMalformedToken, len(s), MaxTokenLen)
	}
	es, ls, ok := strings.Cut(s, ":")
	if !ok {
		return SessionToken{}, fmt.Errorf("%w: %q: want <epoch>:<lsn>", ErrMalformedToken, s)
	}
	e, err := parseDec(es)
	if err != nil {
		return SessionToken{}, fmt.Errorf("%w: epoch: %w", ErrMalformedToken, err)
	}
	l, err := parseDec(ls)
	if err != nil {
		return SessionToken{}, fmt.Errorf("%w: lsn: %w", ErrMalformedToken, err)
	}
	return SessionToken{Epoch: e, LSN: l}, nil
}

func parseDec(s string) (uint64, error) {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%q is not a canonical decimal", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q is not a canonical decimal", s)
		}
	}
	return strconv.ParseUint(s, 10, 64)
}

// DefaultMaxSessionPartitions bounds a Session made by NewSession(0).
const DefaultMaxSessionPartitions = 1024

// Session carries a caller's session tokens, one per partition it touched,
// so reads at Session consistency see the caller's own writes. The client
// merges the token every operation returns and hands the partition's token
// to every session read. Encode/DecodeSession carry a session across
// processes (an HTTP header, a cookie). Safe for concurrent use.
type Session struct {
	mu     sync.Mutex
	max    int
	tokens map[uint32]SessionToken
}

// NewSession returns an empty session holding tokens for at most
// maxPartitions partitions (0 means DefaultMaxSessionPartitions).
func NewSession(maxPartitions int) (*Session, error) {
	if maxPartitions == 0 {
		maxPartitions = DefaultMaxSessionPartitions
	}
	if maxPartitions < 1 || maxPartitions > 1<<20 {
		return nil, configErr("maxPartitions", "%d: must be in [1, %d]", maxPartitions, 1<<20)
	}
	return &Session{max: maxPartitions, tokens: make(map[uint32]SessionToken)}, nil
}

// Token returns the session's token for partition p (zero if none).
func (s *Session) Token(p uint32) SessionToken {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokens[p]
}

// Observe merges t into partition p's token (the greater wins). It fails
// with ErrSessionFull when p is new and the session is at its bound.
func (s *Session) Observe(p uint32, t SessionToken) error {
	if t.IsZero() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.tokens[p]
	if !ok && len(s.tokens) >= s.max {
		return fmt.Errorf("%w: %d partitions", ErrSessionFull, s.max)
	}
	if !ok || cur.Less(t) {
		s.tokens[p] = t
	}
	return nil
}

// Len returns the partitions the session holds tokens for.
func (s *Session) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tokens)
}

// Encode returns the session as "<partition>=<epoch>:<lsn>" items joined
// by ';', sorted by partition; "" for an empty session.
func (s *Session) Encode() string {
	s.mu.Lock()
	parts := make([]uint32, 0, len(s.tokens))
	for p := range s.tokens {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(strconv.FormatUint(uint64(p), 10))
		b.WriteByte('=')
		b.WriteString(s.tokens[p].String())
	}
	s.mu.Unlock()
	return b.String()
}

// DecodeSession parses Encode's format into a session bounded to
// maxPartitions (0 means DefaultMaxSessionPartitions). Repeated partitions
// keep the greater token.
func DecodeSession(enc string, maxPartitions int) (*Session, error) {
	s, err := NewSession(maxPartitions)
	if err != nil {
		return nil, err
	}
	if enc == "" {
		return s, nil
	}
	if len(enc) > s.max*(11+MaxTokenLen+1) {
		return nil, fmt.Errorf("%w: session of %d bytes is too long", ErrMalformedToken, len(enc))
	}
	for item := range strings.SplitSeq(enc, ";") {
		ps, ts, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("%w: item %q: want <partition>=<epoch>:<lsn>", ErrMalformedToken, item)
		}
		p, err := parseDec(ps)
		if err != nil || p > 1<<32-1 {
			return nil, fmt.Errorf("%w: item %q: bad partition", ErrMalformedToken, item)
		}
		t, err := ParseSessionToken(ts)
		if err != nil {
			return nil, fmt.Errorf("item %q: %w", item, err)
		}
		if err := s.Observe(uint32(p), t); err != nil {
			return nil, err
		}
	}
	return s, nil
}
