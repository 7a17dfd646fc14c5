package kv

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/internal/dataapi"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/txtdns/routing"
)

// The client's copy of the contract is the server's: header names, codes,
// bounds and the key's path.
func TestContract(t *testing.T) {
	for _, pair := range [][2]string{
		{HeaderConsistency, dataapi.HeaderConsistency}, {HeaderEpoch, dataapi.HeaderEpoch},
		{HeaderSession, dataapi.HeaderSession}, {HeaderWriteRegion, dataapi.HeaderWriteRegion},
		{HeaderPartition, dataapi.HeaderPartition}, {HeaderVersion, dataapi.HeaderVersion},
		{HeaderRedirectReason, dataapi.HeaderRedirectReason}, {HeaderWriteToken, dataapi.HeaderWriteToken},
		{HeaderPollWait, dataapi.HeaderPollWait},
		{CodeRedirect, dataapi.CodeRedirect}, {CodeBackpressure, dataapi.CodeBackpressure},
		{CodeLeaseExpired, dataapi.CodeLeaseExpired}, {CodeNotReady, dataapi.CodeNotReady},
		{CodeStale, dataapi.CodeStale}, {CodeStalenessBound, dataapi.CodeStalenessBound},
		{CodeUnavailable, dataapi.CodeUnavailable}, {CodeOverloaded, dataapi.CodeOverloaded},
		{CodeUnknownOutcome, dataapi.CodeUnknownOutcome}, {CodeTimeout, dataapi.CodeTimeout},
		{CodeCanceled, dataapi.CodeCanceled}, {CodeTooLarge, dataapi.CodeTooLarge},
		{CodeBadHeader, dataapi.CodeBadHeader}, {CodeBadPath, dataapi.CodeBadPath},
		{CodeBadBody, dataapi.CodeBadBody}, {CodeBadRequest, dataapi.CodeBadRequest},
		{CodeNotFound, dataapi.CodeNotFound}, {CodeUnknownPartition, dataapi.CodeUnknownPartition},
		{CodeNoRoute, dataapi.CodeNoRoute}, {CodeMethodNotAllowed, dataapi.CodeMethodNotAllowed},
		{CodeInternal, dataapi.CodeInternal}, {CodeConditionFailed, dataapi.CodeConditionFailed},
		{HeaderIfMatch, dataapi.HeaderIfMatch}, {HeaderIfNoneMatch, dataapi.HeaderIfNoneMatch},
	} {
		assert.Equal(t, pair[1], pair[0])
		if strings.HasPrefix(pair[0], "Fm-") || strings.HasPrefix(pair[0], "If-") {
			assert.Equal(t, http.CanonicalHeaderKey(pair[0]), pair[0])
		} else {
			assert.True(t, validCode(pair[0]), pair[0])
		}
	}
	assert.Equal(t, partition.DefaultMaxOpBytes, DefaultMaxValueBytes)
	assert.Equal(t, partition.HardMaxOpBytes, HardMaxValueBytes)
	assert.Equal(t, partition.HardMaxKeyBytes, HardMaxKeyBytes)
	assert.Equal(t, dataapi.MaxEpochLen, maxEpochLen)
	for _, k := range []string{"k", "a/b", "sp ace", "%", "é", "?#&"} {
		assert.Equal(t, dataapi.KeyPath([]byte(k)), keyPath(k))
	}
	for c := routing.ConsistencyStrong; c <= routing.ConsistencyEventual; c++ {
		pc, err := dataapi.ParseConsistency(consistencyHeader(c))
		require.NoError(t, err, c)
		assert.Equal(t, uint8(c)+1, uint8(pc), "routing and partition order the levels alike")
	}
	assert.Empty(t, consistencyHeader(routing.ConsistencyEventual+1))
	for _, r := range []partition.RedirectReason{partition.ReasonStaleEpoch, partition.ReasonNotWriteRegion,
		partition.ReasonPaused, partition.ReasonReplicaBehind} {
		assert.LessOrEqual(t, len(dataapi.FormatReason(r)), maxReasonLen)
	}
}

func TestHeaderDecoders(t *testing.T) {
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			out.Add(kv[i], kv[i+1])
		}
		return out
	}
	for _, tc := range []struct {
		name string
		h    http.Header
		// want* are the decoded values; bad* the headers that fail.
		epoch      uint64
		part       uint32
		hasPart    bool
		session    routing.SessionToken
		region     string
		badEpoch   bool
		badPart    bool
		badSession bool
		badRegion  bool
	}{
		{name: "absent", h: h()},
		{name: "all good", h: h(HeaderEpoch, "7", HeaderPartition, "0", HeaderSession, "7:12", HeaderWriteRegion, "eu-west"),
			epoch: 7, hasPart: true, session: routing.SessionToken{Epoch: 7, LSN: 12}, region: "eu-west"},
		{name: "largest", h: h(HeaderEpoch, "18446744073709551615", HeaderPartition, "4294967295"),
			epoch: 1<<64 - 1, part: 1<<32 - 1, hasPart: true},
		{name: "overflow", h: h(HeaderEpoch, "18446744073709551616", HeaderPartition, "4294967296"), badEpoch: true, badPart: true},
		{name: "leading zeros", h: h(HeaderEpoch, "07", HeaderPartition, "01", HeaderSession, "1:01"),
			badEpoch: true, badPart: true, badSession: true},
		{name: "signs and spaces", h: h(HeaderEpoch, "+1", HeaderPartition, " 1", HeaderSession, "-1:1", HeaderWriteRegion, "eu west"),
			badEpoch: true, badPart: true, badSession: true, badRegion: true},
		{name: "epoch zero", h: h(HeaderEpoch, "0"), badEpoch: true},
		{name: "repeated", h: h(HeaderEpoch, "1", HeaderEpoch, "2", HeaderPartition, "1", HeaderPartition, "1",
			HeaderSession, "1:1", HeaderSession, "1:1", HeaderWriteRegion, "a", HeaderWriteRegion, "b"),
			badEpoch: true, badPart: true, badSession: true, badRegion: true},
		{name: "too long", h: h(HeaderEpoch, strings.Repeat("9", 21), HeaderSession, "1:"+strings.Repeat("9", 40),
			HeaderWriteRegion, strings.Repeat("a", 31)), badEpoch: true, badSession: true, badRegion: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _, err := headerEpoch(tc.h)
			checkDecoded(t, tc.badEpoch, err, tc.epoch, e)
			p, ok, err := headerPartition(tc.h)
			checkDecoded(t, tc.badPart, err, tc.part, p)
			if !tc.badPart {
				assert.Equal(t, tc.hasPart, ok)
			}
			s, err := headerToken(tc.h, HeaderSession)
			checkDecoded(t, tc.badSession, err, tc.session, s)
			r, err := headerRegion(tc.h)
			checkDecoded(t, tc.badRegion, err, tc.region, r)
		})
	}
}

func checkDecoded[T comparable](t *testing.T, bad bool, err error, want, got T) {
	t.Helper()
	if bad {
		assert.ErrorIs(t, err, ErrMalformedResponse)
		return
	}
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "1", want: time.Second},
		{in: " 3 ", want: 3 * time.Second},
		{in: "0", want: 0},
		{in: "86401", want: 24 * time.Hour},
		{in: strings.Repeat("9", 60), want: 24 * time.Hour},
		{in: now.Add(90 * time.Second).Format(http.TimeFormat), want: 90 * time.Second},
		{in: now.Add(-time.Hour).Format(http.TimeFormat), want: 0},
		{in: now.Add(1000 * time.Hour).Format(http.TimeFormat), want: 24 * time.Hour},
		{in: "", bad: true},
		{in: "-1", bad: true},
		{in: "1.5", bad: true},
		{in: "soon", bad: true},
		{in: strings.Repeat("1", 65), bad: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			d, err := parseRetryAfter(tc.in, now)
			if tc.bad {
				assert.ErrorIs(t, err, ErrMalformedResponse)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, d)
		})
	}
}

func TestDecodeErrorBody(t *testing.T) {
	long := strings.Repeat("é", maxMessageLen) // 2 bytes each: cut on a rune boundary
	for _, tc := range []struct {
		name, body, code, msg string
	}{
		{"api", `{"error":"dataapi: busy","code":"backpressure"}` + "\n", CodeBackpressure, "dataapi: busy"},
		{"no code", `{"error":"x"}`, "", "x"},
		{"garbled code", `{"error":"x","code":"Back pressure"}`, "", "x"},
		{"code too long", `{"error":"x","code":"` + strings.Repeat("a", 33) + `"}`, "", "x"},
		{"not json", "<html>502</html>", "", "<html>502</html>"},
		{"truncated", `{"error":"dataapi: bu`, "", `{"error":"dataapi: bu`},
		{"control characters", "{\"error\":\"a\\nb\\u0000c\",\"code\":\"internal\"}", CodeInternal, "a b c"},
		{"invalid utf-8", "\xff\xfebad", "", "??bad"},
		{"long", `{"error":"` + long + `","code":"internal"}`, CodeInternal, long[:maxMessageLen]},
		{"empty", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, msg := decodeErrorBody([]byte(tc.body))
			assert.Equal(t, tc.code, code)
			assert.Equal(t, tc.msg, msg)
		})
	}
	// The server's own body decodes to its code and text.
	b, err := json.Marshal(dataapi.ErrorBody{Error: "dataapi: stale", Code: dataapi.CodeStale})
	require.NoError(t, err)
	code, msg := decodeErrorBody(b)
	assert.Equal(t, CodeStale, code)
	assert.Equal(t, "dataapi: stale", msg)
}

// A PUT body cut off by the end of its attempt reads nothing more.
func TestValueBodyCut(t *testing.T) {
	v := &valueBody{b: []byte("hello")}
	buf := make([]byte, 2)
	n, err := v.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	v.finish()
	_, err = v.Read(buf)
	assert.ErrorIs(t, err, errBodyCut)
	v = &valueBody{b: []byte("hi")}
	got, err := io.ReadAll(v)
	require.NoError(t, err)
	assert.Equal(t, []byte("hi"), got)
}

func TestUnknownOutcomeErrorIs(t *testing.T) {
	cause := errors.New("cause")
	err := error(&UnknownOutcomeError{Op: "put", Key: "k", Err: cause})
	assert.ErrorIs(t, err, ErrUnknownOutcome)
	assert.ErrorIs(t, err, cause)
	assert.NotErrorIs(t, &APIError{Status: 504}, ErrUnknownOutcome)
}

// FuzzResponseHeaders: the Fm-* response headers and Retry-After are an
// agent's (or a proxy's) bytes: decoding never panics, what decodes
// re-encodes to the same text, and failures wrap ErrMalformedResponse.
func FuzzResponseHeaders(f *testing.F) {
	for _, s := range []string{"1", "0", "7:12", "18446744073709551615", "4294967295", "1:01", "eu-west",
		"Sun, 06 Nov 1994 08:49:37 GMT", "", "-1", " 3", "\xff", "1:1:1"} {
		f.Add(s)
	}
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		h := http.Header{}
		for _, name := range []string{HeaderEpoch, HeaderPartition, HeaderSession, HeaderVersion, HeaderWriteToken, HeaderWriteRegion, HeaderRedirectReason} {
			h[name] = []string{s}
		}
		malformed := func(err error) {
			if err != nil && !errors.Is(err, ErrMalformedResponse) {
				t.Fatalf("%q: %v does not wrap ErrMalformedResponse", s, err)
			}
		}
		if e, ok, err := headerEpoch(h); err == nil && ok && (e == 0 || formatUint(e) != s) {
			t.Fatalf("epoch %q decoded to %d", s, e)
		} else {
			malformed(err)
		}
		if p, ok, err := headerPartition(h); err == nil && ok && formatUint(uint64(p)) != s {
			t.Fatalf("partition %q decoded to %d", s, p)
		} else {
			malformed(err)
		}
		for _, name := range []string{HeaderSession, HeaderVersion, HeaderWriteToken} {
			if tok, err := headerToken(h, name); err == nil && tok.String() != s {
				t.Fatalf("%s %q decoded to %v", name, s, tok)
			} else {
				malformed(err)
			}
		}
		if r, err := headerRegion(h); err == nil && r != s {
			t.Fatalf("region %q decoded to %q", s, r)
		} else {
			malformed(err)
		}
		if r := headerReason(h); len(r) > maxReasonLen || !utf8.ValidString(r) {
			t.Fatalf("reason %q from %q", r, s)
		}
		d, err := parseRetryAfter(s, now)
		malformed(err)
		if d < 0 || d > maxRetryAfterSecs*time.Second {
			t.Fatalf("Retry-After %q decoded to %v", s, d)
		}
	})
}

// FuzzErrorBody: an error body is an agent's (or a proxy's) bytes: any
// decodes to a code the client can branch on or none, and a bounded,
// printable message.
func FuzzErrorBody(f *testing.F) {
	for _, s := range []string{`{"error":"x","code":"stale"}`, `{"code":1}`, "<html>", "", "\x00\xff", `{"error":"\u0000"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		code, msg := decodeErrorBody(b)
		if code != "" && !validCode(code) {
			t.Fatalf("code %q", code)
		}
		if len(msg) > maxMessageLen || !utf8.ValidString(msg) {
			t.Fatalf("message of %d bytes, valid UTF-8 %v", len(msg), utf8.ValidString(msg))
		}
		for _, r := range msg {
			if r < ' ' || r == 0x7f {
				t.Fatalf("control character %q in %q", r, msg)
			}
		}
	})
}

func formatUint(v uint64) string { return strconv.FormatUint(v, 10) }
