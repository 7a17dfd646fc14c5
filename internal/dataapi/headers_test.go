package dataapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/txtdns/routing"
)

func TestParseToken(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want partition.Token
		ok   bool
	}{
		{"0:0", partition.Token{}, true},
		{"3:17", partition.Token{Epoch: 3, LSN: 17}, true},
		{"18446744073709551615:18446744073709551615", partition.Token{Epoch: 1<<64 - 1, LSN: 1<<64 - 1}, true},
		{"18446744073709551616:1", partition.Token{}, false}, // overflow
		{"", partition.Token{}, false},
		{"3", partition.Token{}, false},
		{"3.17", partition.Token{}, false},
		{"03:17", partition.Token{}, false},
		{"3:+17", partition.Token{}, false},
		{" 3:17", partition.Token{}, false},
		{"3:17:1", partition.Token{}, false},
		{strings.Repeat("1", MaxTokenLen) + ":1", partition.Token{}, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseToken(tc.in)
			if !tc.ok {
				require.ErrorIs(t, err, ErrMalformed)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.in, FormatToken(got))
			assert.Equal(t, tc.in, got.String(), "the partition's own encoding")
		})
	}
}

func TestParseEpoch(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want partition.Epoch
		ok   bool
	}{
		{"0", 0, true},
		{"7", 7, true},
		{"18446744073709551615", 1<<64 - 1, true},
		{"18446744073709551616", 0, false},
		{"", 0, false},
		{"07", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{"1e3", 0, false},
		{"0x10", 0, false},
		{strings.Repeat("1", 40), 0, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseEpoch(tc.in)
			if !tc.ok {
				require.ErrorIs(t, err, ErrMalformed)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.in, FormatEpoch(got))
		})
	}
}

func TestParseConsistency(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want partition.Consistency
		ok   bool
	}{
		{"strong", partition.Strong, true},
		{"bounded", partition.BoundedStaleness, true},
		{"session", partition.Session, true},
		{"eventual", partition.Eventual, true},
		{"bounded-staleness", 0, false}, // partition's alias: not canonical
		{"Strong", 0, false},
		{"", 0, false},
		{"linearizable", 0, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseConsistency(tc.in)
			if !tc.ok {
				require.ErrorIs(t, err, ErrMalformed)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseReason(t *testing.T) {
	for r := partition.ReasonStaleEpoch; r <= partition.ReasonReplicaBehind; r++ {
		got, err := ParseReason(FormatReason(r))
		require.NoError(t, err)
		assert.Equal(t, r, got)
	}
	_, err := ParseReason("moved")
	assert.ErrorIs(t, err, ErrMalformed)
}

func TestParseRequestHeaders(t *testing.T) {
	for _, tc := range []struct {
		name   string
		h      http.Header
		want   RequestHeaders
		header string // the header the error names; "" for no error
	}{
		{"none", http.Header{}, RequestHeaders{}, ""},
		{"all", http.Header{HeaderConsistency: {"session"}, HeaderEpoch: {"4"}, HeaderSession: {"4:9"}},
			RequestHeaders{Consistency: partition.Session, Epoch: 4, Token: partition.Token{Epoch: 4, LSN: 9}}, ""},
		{"bad consistency", http.Header{HeaderConsistency: {"linear"}}, RequestHeaders{}, HeaderConsistency},
		{"bad epoch", http.Header{HeaderEpoch: {"x"}}, RequestHeaders{}, HeaderEpoch},
		{"bad session", http.Header{HeaderSession: {"4.9"}}, RequestHeaders{}, HeaderSession},
		{"repeated epoch", http.Header{HeaderEpoch: {"1", "2"}}, RequestHeaders{}, HeaderEpoch},
		{"repeated session", http.Header{HeaderSession: {"1:1", "1:1"}}, RequestHeaders{}, HeaderSession},
		{"poll wait", http.Header{HeaderEpoch: {"4"}, HeaderPollWait: {"1000"}}, RequestHeaders{Epoch: 4, PollWait: time.Second}, ""},
		{"longest poll wait", http.Header{HeaderPollWait: {"60000"}}, RequestHeaders{PollWait: time.Minute}, ""},
		{"poll wait too long", http.Header{HeaderPollWait: {"60001"}}, RequestHeaders{}, HeaderPollWait},
		{"poll wait zero", http.Header{HeaderPollWait: {"0"}}, RequestHeaders{}, HeaderPollWait},
		{"poll wait leading zero", http.Header{HeaderPollWait: {"0100"}}, RequestHeaders{}, HeaderPollWait},
		{"poll wait not ms", http.Header{HeaderPollWait: {"1s"}}, RequestHeaders{}, HeaderPollWait},
		{"poll wait negative", http.Header{HeaderPollWait: {"-5"}}, RequestHeaders{}, HeaderPollWait},
		{"repeated poll wait", http.Header{HeaderPollWait: {"5", "5"}}, RequestHeaders{}, HeaderPollWait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRequestHeaders(tc.h)
			if tc.header != "" {
				var he *HeaderError
				require.ErrorAs(t, err, &he)
				assert.Equal(t, tc.header, he.Header)
				assert.ErrorIs(t, err, ErrMalformed)
				assert.Contains(t, err.Error(), tc.header)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			h := http.Header{}
			got.Encode(h)
			assert.Equal(t, tc.h, h, "Encode inverts the parse")
		})
	}
}

// FuzzSessionToken: the token decoder never panics, stays bounded, and
// what it accepts re-encodes to the same string (and the SDK agrees).
func FuzzSessionToken(f *testing.F) {
	for _, s := range []string{"0:0", "1:2", "18446744073709551615:18446744073709551615", "01:2", "1:", ":", "1:2:3", "-1:2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseToken(s)
		if err != nil {
			return
		}
		if len(s) > MaxTokenLen {
			t.Fatalf("accepted %d bytes", len(s))
		}
		if got := FormatToken(tok); got != s {
			t.Fatalf("ParseToken(%q) re-encodes to %q", s, got)
		}
		sdk, err := routing.ParseSessionToken(s)
		if err != nil || sdk.Epoch != uint64(tok.Epoch) || sdk.LSN != uint64(tok.LSN) {
			t.Fatalf("the SDK reads %q as %+v, %v; the server as %v", s, sdk, err, tok)
		}
	})
}

// FuzzHeaders: the request header decoder never panics; every header it
// accepts re-encodes to the same string.
func FuzzHeaders(f *testing.F) {
	f.Add("strong", "1", "1:1", "")
	f.Add("bounded-staleness", "01", "1.1", "2")
	f.Add("", "", "", "")
	f.Fuzz(func(t *testing.T, cons, epoch, session, extraEpoch string) {
		h := http.Header{}
		for name, v := range map[string]string{HeaderConsistency: cons, HeaderEpoch: epoch, HeaderSession: session} {
			if v != "" {
				h[name] = []string{v}
			}
		}
		if extraEpoch != "" {
			h[HeaderEpoch] = append(h[HeaderEpoch], extraEpoch)
		}
		rh, err := ParseRequestHeaders(h)
		if err != nil {
			var he *HeaderError
			if !assert.ErrorAs(t, err, &he) || !assert.ErrorIs(t, err, ErrMalformed) {
				t.FailNow()
			}
			return
		}
		if c, ok := h[HeaderConsistency]; ok && rh.Consistency.String() != c[0] {
			t.Fatalf("consistency %q re-encodes to %q", c[0], rh.Consistency)
		}
		if e, ok := h[HeaderEpoch]; ok && FormatEpoch(rh.Epoch) != e[0] {
			t.Fatalf("epoch %q re-encodes to %q", e[0], FormatEpoch(rh.Epoch))
		}
		if s, ok := h[HeaderSession]; ok && FormatToken(rh.Token) != s[0] {
			t.Fatalf("session %q re-encodes to %q", s[0], FormatToken(rh.Token))
		}
	})
}

// FuzzPollWait: the Fm-Poll-Wait decoder never panics, accepts only
// [1 ms, MaxPollWaitMillis], and what it accepts re-encodes to the same
// string.
func FuzzPollWait(f *testing.F) {
	for _, s := range []string{"1", "1000", "60000", "60001", "0", "01", "-1", "1e3", "99999", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParsePollWait(s)
		if err != nil {
			require.ErrorIs(t, err, ErrMalformed)
			return
		}
		if d < time.Millisecond || d > MaxPollWaitMillis*time.Millisecond {
			t.Fatalf("accepted %q as %v", s, d)
		}
		if got := FormatPollWait(d); got != s {
			t.Fatalf("ParsePollWait(%q) re-encodes to %q", s, got)
		}
	})
}
