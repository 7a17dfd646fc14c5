package dataapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/txtdns/routing"
)

// Header names (canonical MIME form, as net/http stores them).
const (
	// HeaderConsistency (request): the read's consistency level.
	HeaderConsistency = "Fm-Consistency"
	// HeaderEpoch (request): the partition epoch the client knows;
	// (response) the replica's epoch, or after a redirect the current one.
	HeaderEpoch = "Fm-Epoch"
	// HeaderSession (request): the session token of the key's partition;
	// (response) the token to merge into the session.
	HeaderSession = "Fm-Session"
	// HeaderWriteRegion (response): the write region of Fm-Epoch.
	HeaderWriteRegion = "Fm-Write-Region"
	// HeaderPartition (response): the partition the key maps to.
	HeaderPartition = "Fm-Partition"
	// HeaderVersion (response to a GET): the (epoch:lsn) of the op that
	// wrote the value.
	HeaderVersion = "Fm-Version"
	// HeaderRedirectReason (response 421): why the request was redirected.
	HeaderRedirectReason = "Fm-Redirect-Reason"
	// HeaderWriteToken (response 504 unknown_outcome): the (epoch:lsn)
	// the write was assigned. Not a session token: do not merge it.
	HeaderWriteToken = "Fm-Write-Token"
	// HeaderIfMatch (request, PUT and DELETE): compare-and-set on the
	// key's version: applied only if the key holds the value written at
	// this "<epoch>:<lsn>" (a GET's Fm-Version; the ETag form, quoted, is
	// accepted too).
	HeaderIfMatch = "If-Match"
	// HeaderIfNoneMatch (request, PUT and DELETE): "*": applied only if
	// the key holds no value.
	HeaderIfNoneMatch = "If-None-Match"
	// HeaderPollWait (request, PUT and DELETE): the write is a poll for
	// a pending failover (routing's Target.Poll); a follower with nothing
	// new to tell may hold it up to this many milliseconds, until it
	// learns the partition's new route (partition/poll.go).
	HeaderPollWait = "Fm-Poll-Wait"
)

// Encoding bounds.
const (
	// MaxTokenLen bounds an encoded session token (the routing SDK's bound).
	MaxTokenLen = routing.MaxTokenLen
	// MaxEpochLen bounds an encoded epoch (the digits of 2^64-1).
	MaxEpochLen = 20
	// maxConsistencyLen bounds a consistency header ("eventual").
	maxConsistencyLen = 16
	// MaxPollWaitMillis bounds Fm-Poll-Wait (a minute); the partition's
	// MaxPollWait clamps it further.
	MaxPollWaitMillis = 60000
)

// ErrMalformed is wrapped by every header decoding error.
var ErrMalformed = errors.New("dataapi: malformed header")

// FormatToken encodes a session token as "<epoch>:<lsn>" in decimal: the
// encoding of partition.Token.String and of the routing SDK's SessionToken.
func FormatToken(t partition.Token) string {
	b := make([]byte, 0, MaxTokenLen)
	b = strconv.AppendUint(b, uint64(t.Epoch), 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, uint64(t.LSN), 10)
	return string(b)
}

// ParseToken decodes FormatToken's encoding (canonical decimals only, at
// most MaxTokenLen bytes), with the routing SDK's decoder, so a token the
// SDK accepts is one the server accepts and FormatToken(ParseToken(s)) == s.
func ParseToken(s string) (partition.Token, error) {
	t, err := routing.ParseSessionToken(s)
	if err != nil {
		return partition.Token{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return partition.Token{Epoch: partition.Epoch(t.Epoch), LSN: partition.LSN(t.LSN)}, nil
}

// FormatEpoch encodes an epoch in decimal.
func FormatEpoch(e partition.Epoch) string { return strconv.FormatUint(uint64(e), 10) }

// ParseEpoch decodes a canonical decimal epoch (no sign, no leading zero,
// at most MaxEpochLen digits).
func ParseEpoch(s string) (partition.Epoch, error) {
	if s == "" || len(s) > MaxEpochLen || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%w: epoch %.*q is not a canonical decimal", ErrMalformed, MaxEpochLen+2, s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%w: epoch %.*q is not a canonical decimal", ErrMalformed, MaxEpochLen+2, s)
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: epoch: %w", ErrMalformed, err)
	}
	return partition.Epoch(v), nil
}

// FormatPollWait encodes a poll's wait for Fm-Poll-Wait: whole
// milliseconds, at least 1.
func FormatPollWait(d time.Duration) string {
	return strconv.FormatInt(max(1, d.Milliseconds()), 10)
}

// ParsePollWait decodes Fm-Poll-Wait: canonical decimal milliseconds in
// [1, MaxPollWaitMillis].
func ParsePollWait(s string) (time.Duration, error) {
	bad := func() (time.Duration, error) {
		return 0, fmt.Errorf("%w: poll wait %.*q is not milliseconds in [1, %d]", ErrMalformed, 8, s, MaxPollWaitMillis)
	}
	if s == "" || len(s) > 5 || s[0] == '0' {
		return bad()
	}
	v := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return bad()
		}
		v = v*10 + int(s[i]-'0')
	}
	if v > MaxPollWaitMillis {
		return bad()
	}
	return time.Duration(v) * time.Millisecond, nil
}

// ParseConsistency decodes a consistency level by its canonical name
// (strong, bounded, session, eventual): partition.ParseConsistency, minus
// its aliases, so a level re-encodes (Consistency.String) to its header.
func ParseConsistency(s string) (partition.Consistency, error) {
	if len(s) > maxConsistencyLen {
		return 0, fmt.Errorf("%w: consistency of %d bytes", ErrMalformed, len(s))
	}
	c, err := partition.ParseConsistency(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if c.String() != s {
		return 0, fmt.Errorf("%w: consistency %q: use %q", ErrMalformed, s, c.String())
	}
	return c, nil
}

// Redirect reasons as Fm-Redirect-Reason carries them.
const (
	ReasonStaleEpoch     = "stale_epoch"
	ReasonNotWriteRegion = "not_write_region"
	ReasonPaused         = "paused"
	ReasonReplicaBehind  = "replica_behind"
)

// FormatReason names a redirect reason for Fm-Redirect-Reason.
func FormatReason(r partition.RedirectReason) string {
	switch r {
	case partition.ReasonStaleEpoch:
		return ReasonStaleEpoch
	case partition.ReasonNotWriteRegion:
		return ReasonNotWriteRegion
	case partition.ReasonPaused:
		return ReasonPaused
	case partition.ReasonReplicaBehind:
		return ReasonReplicaBehind
	}
	return ""
}

// ParseReason decodes FormatReason's names.
func ParseReason(s string) (partition.RedirectReason, error) {
	for r := partition.ReasonStaleEpoch; r <= partition.ReasonReplicaBehind; r++ {
		if FormatReason(r) == s {
			return r, nil
		}
	}
	return 0, fmt.Errorf("%w: redirect reason %.*q", ErrMalformed, 24, s)
}

// RequestHeaders are the decoded Fm-* request headers. Absent headers
// decode to zero: the partition's level, epoch unknown, no session token.
type RequestHeaders struct {
	Consistency partition.Consistency
	Epoch       partition.Epoch
	Token       partition.Token
	// If is the compare-and-set condition of If-Match or If-None-Match
	// (nil: none; both headers together are malformed).
	If *partition.Condition
	// PollWait is Fm-Poll-Wait's (0: absent).
	PollWait time.Duration
}

// HeaderError is a malformed request header; Header names it.
type HeaderError struct {
	Header string
	Err    error
}

func (e *HeaderError) Error() string { return e.Header + ": " + e.Err.Error() }

// Unwrap returns the decoding error (it wraps ErrMalformed).
func (e *HeaderError) Unwrap() error { return e.Err }

// ParseRequestHeaders decodes the Fm-* request headers. A header given
// more than once is malformed. The error is a *HeaderError.
func ParseRequestHeaders(h http.Header) (RequestHeaders, error) {
	var rh RequestHeaders
	if s, ok, err := single(h, HeaderConsistency); err != nil {
		return rh, err
	} else if ok {
		if rh.Consistency, err = ParseConsistency(s); err != nil {
			return rh, &HeaderError{Header: HeaderConsistency, Err: err}
		}
	}
	if s, ok, err := single(h, HeaderEpoch); err != nil {
		return rh, err
	} else if ok {
		if rh.Epoch, err = ParseEpoch(s); err != nil {
			return rh, &HeaderError{Header: HeaderEpoch, Err: err}
		}
	}
	if s, ok, err := single(h, HeaderSession); err != nil {
		return rh, err
	} else if ok {
		if rh.Token, err = ParseToken(s); err != nil {
			return rh, &HeaderError{Header: HeaderSession, Err: err}
		}
	}
	if s, ok, err := single(h, HeaderPollWait); err != nil {
		return rh, err
	} else if ok {
		if rh.PollWait, err = ParsePollWait(s); err != nil {
			return rh, &HeaderError{Header: HeaderPollWait, Err: err}
		}
	}
	return rh, parseCondition(h, &rh)
}

// parseCondition decodes If-Match ("<epoch>:<lsn>", optionally quoted as
// an ETag) and If-None-Match ("*" only); at most one of them.
func parseCondition(h http.Header, rh *RequestHeaders) error {
	m, okM, err := single(h, HeaderIfMatch)
	if err != nil {
		return err
	}
	n, okN, err := single(h, HeaderIfNoneMatch)
	if err != nil {
		return err
	}
	switch {
	case okM && okN:
		return &HeaderError{Header: HeaderIfNoneMatch, Err: fmt.Errorf("%w: given with %s; a condition is one of them", ErrMalformed, HeaderIfMatch)}
	case okM:
		if len(m) >= 2 && m[0] == '"' && m[len(m)-1] == '"' {
			m = m[1 : len(m)-1]
		}
		t, err := ParseToken(m)
		if err != nil {
			return &HeaderError{Header: HeaderIfMatch, Err: err}
		}
		if t == (partition.Token{}) {
			return &HeaderError{Header: HeaderIfMatch, Err: fmt.Errorf("%w: version 0:0 is no value's (use %s: *)", ErrMalformed, HeaderIfNoneMatch)}
		}
		rh.If = &partition.Condition{Version: t}
	case okN:
		if n != "*" {
			return &HeaderError{Header: HeaderIfNoneMatch, Err: fmt.Errorf("%w: %.*q: only \"*\" (the key holds no value)", ErrMalformed, 24, n)}
		}
		rh.If = &partition.Condition{Absent: true}
	}
	return nil
}

// Encode sets the headers ParseRequestHeaders decodes (zero fields are
// left out).
func (rh RequestHeaders) Encode(h http.Header) {
	if rh.Consistency != 0 {
		h.Set(HeaderConsistency, rh.Consistency.String())
	}
	if rh.Epoch != 0 {
		h.Set(HeaderEpoch, FormatEpoch(rh.Epoch))
	}
	if rh.Token != (partition.Token{}) {
		h.Set(HeaderSession, FormatToken(rh.Token))
	}
	if rh.PollWait > 0 {
		h.Set(HeaderPollWait, FormatPollWait(rh.PollWait))
	}
	switch {
	case rh.If == nil:
	case rh.If.Absent:
		h.Set(HeaderIfNoneMatch, "*")
	default:
		h.Set(HeaderIfMatch, FormatToken(rh.If.Version))
	}
}

func single(h http.Header, name string) (string, bool, error) {
	vs := h[name]
	switch len(vs) {
	case 0:
		return "", false, nil
	case 1:
		return vs[0], true, nil
	}
	return "", false, &HeaderError{Header: name, Err: fmt.Errorf("%w: given %d times", ErrMalformed, len(vs))}
}
