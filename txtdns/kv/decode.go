package kv

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fmnode/fmnode/txtdns"
	"github.com/fmnode/fmnode/txtdns/routing"
)

// Header names of the data API (canonical MIME form, as net/http keys
// them).
const (
	HeaderConsistency    = "Fm-Consistency"
	HeaderEpoch          = "Fm-Epoch"
	HeaderSession        = "Fm-Session"
	HeaderWriteRegion    = "Fm-Write-Region"
	HeaderPartition      = "Fm-Partition"
	HeaderVersion        = "Fm-Version"
	HeaderRedirectReason = "Fm-Redirect-Reason"
	HeaderWriteToken     = "Fm-Write-Token"
	HeaderIfMatch        = "If-Match"
	HeaderIfNoneMatch    = "If-None-Match"
	HeaderPollWait       = "Fm-Poll-Wait"
)

// Decoding bounds: what an agent sends is outside input.
const (
	maxEpochLen      = 20   // the digits of 2^64-1
	maxPartitionLen  = 10   // the digits of 2^32-1
	maxReasonLen     = 32   // the longest reason is "not_write_region"
	maxRetryAfterLen = 64   // an HTTP-date is 29 bytes
	maxCodeLen       = 32   // the longest code is "method_not_allowed"
	maxMessageLen    = 1024 // the server bounds its text so
	// maxErrorBody bounds the error body read: a message of maxMessageLen
	// bytes, each JSON-escaped to at most 6, plus the code.
	maxErrorBody = 6*maxMessageLen + 256
	// maxRetryAfterSecs bounds the delta-seconds decoded (a day), so the
	// Duration cannot overflow; MaxRetryAfter bounds the wait far lower.
	maxRetryAfterSecs = 24 * 60 * 60
)

// single returns the one value of header name; a header given twice is
// malformed (the server sets each once, and two values would make the
// client guess which one counts).
func single(h http.Header, name string) (string, bool, error) {
	vs := h[name]
	switch len(vs) {
	case 0:
		return "", false, nil
	case 1:
		return vs[0], true, nil
	}
	return "", false, fmt.Errorf("%w: %s given %d times", ErrMalformedResponse, name, len(vs))
}

// canonicalDec decodes a canonical decimal (no sign, no leading zero) of
// at most maxLen digits that fits bits.
func canonicalDec(s string, maxLen, bits int) (uint64, bool) {
	if s == "" || len(s) > maxLen || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(s, 10, bits)
	return v, err == nil
}

// headerEpoch decodes Fm-Epoch (0, false if absent).
func headerEpoch(h http.Header) (uint64, bool, error) {
	s, ok, err := single(h, HeaderEpoch)
	if err != nil || !ok {
		return 0, false, err
	}
	v, ok := canonicalDec(s, maxEpochLen, 64)
	if !ok || v == 0 {
		return 0, false, fmt.Errorf("%w: %s %.*q is not a positive canonical decimal", ErrMalformedResponse, HeaderEpoch, maxEpochLen+2, s)
	}
	return v, true, nil
}

// headerPartition decodes Fm-Partition (false if absent).
func headerPartition(h http.Header) (uint32, bool, error) {
	s, ok, err := single(h, HeaderPartition)
	if err != nil || !ok {
		return 0, false, err
	}
	v, ok := canonicalDec(s, maxPartitionLen, 32)
	if !ok {
		return 0, false, fmt.Errorf("%w: %s %.*q is not a canonical decimal", ErrMalformedResponse, HeaderPartition, maxPartitionLen+2, s)
	}
	return uint32(v), true, nil
}

// headerToken decodes an "<epoch>:<lsn>" header (Fm-Session, Fm-Version,
// Fm-Write-Token) with the routing SDK's decoder, the server's too; zero
// if absent.
func headerToken(h http.Header, name string) (routing.SessionToken, error) {
	s, ok, err := single(h, name)
	if err != nil || !ok {
		return routing.SessionToken{}, err
	}
	t, err := routing.ParseSessionToken(s)
	if err != nil {
		return routing.SessionToken{}, fmt.Errorf("%w: %s: %w", ErrMalformedResponse, name, err)
	}
	return t, nil
}

// headerRegion decodes Fm-Write-Region ("" if absent): a region name as
// txtdns validates them, since routing will look its endpoints up.
func headerRegion(h http.Header) (string, error) {
	s, ok, err := single(h, HeaderWriteRegion)
	if err != nil || !ok {
		return "", err
	}
	if err := txtdns.ValidateRegion(s); err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrMalformedResponse, HeaderWriteRegion, err)
	}
	return s, nil
}

// headerReason returns Fm-Redirect-Reason as free text for the redirect's
// message, bounded and made printable (it is never branched on).
func headerReason(h http.Header) string {
	s := h.Get(HeaderRedirectReason)
	if s == "" {
		return "redirect"
	}
	return printable(s, maxReasonLen)
}

// parseRetryAfter decodes a Retry-After value: delta-seconds, or an
// HTTP-date measured from now (a date in the past is no wait). The result
// is at most a day; the caller bounds its wait further.
func parseRetryAfter(s string, now time.Time) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > maxRetryAfterLen {
		return 0, fmt.Errorf("%w: Retry-After of %d bytes", ErrMalformedResponse, len(s))
	}
	if s[0] >= '0' && s[0] <= '9' {
		n := 0
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return 0, fmt.Errorf("%w: Retry-After %q is not delta-seconds", ErrMalformedResponse, s)
			}
			if n < maxRetryAfterSecs {
				n = n*10 + int(s[i]-'0')
			}
		}
		return time.Duration(min(n, maxRetryAfterSecs)) * time.Second, nil
	}
	t, err := http.ParseTime(s)
	if err != nil {
		return 0, fmt.Errorf("%w: Retry-After %q: %w", ErrMalformedResponse, s, err)
	}
	return min(max(t.Sub(now), 0), maxRetryAfterSecs*time.Second), nil
}

// errorBody is the JSON error body of the data API.
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// decodeErrorBody returns the code and message of an error body. A body
// that is not the API's JSON (a proxy's page, a truncated read) gives no
// code and its text as the message; a code outside [a-z_] or over its
// bound is dropped, so callers never branch on a garbled one.
func decodeErrorBody(b []byte) (code, msg string) {
	var eb errorBody
	if err := json.Unmarshal(b, &eb); err != nil {
		return "", printable(string(b), maxMessageLen)
	}
	if validCode(eb.Code) {
		code = eb.Code
	}
	return code, printable(eb.Error, maxMessageLen)
}

func validCode(s string) bool {
	if s == "" || len(s) > maxCodeLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= 'a' && s[i] <= 'z' || s[i] == '_') {
			return false
		}
	}
	return true
}

// printable bounds s to n bytes of valid UTF-8 with control characters
// replaced, so server text cannot garble a log line or an error message.
func printable(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) { // not inside a rune
			cut--
		}
		s = s[:cut]
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r == utf8.RuneError:
			return '?' // one byte for each invalid byte: the bound holds
		case unicode.IsControl(r):
			return ' '
		}
		return r
	}, s)
}
