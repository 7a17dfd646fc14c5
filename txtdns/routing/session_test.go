package routing

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSessionToken(t *testing.T) {
	tests := []struct {
		in   string
		want SessionToken
		ok   bool
	}{
		{"7:1234", SessionToken{7, 1234}, true},
		{"0:0", SessionToken{}, true},
		{"18446744073709551615:1", SessionToken{1<<64 - 1, 1}, true},
		{"18446744073709551616:1", SessionToken{}, false},
		{"07:1", SessionToken{}, false},
		{"7", SessionToken{}, false},
		{"7:", SessionToken{}, false},
		{"7:1:2", SessionToken{}, false},
		{"-1:2", SessionToken{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseSessionToken(tc.in)
			if !tc.ok {
				assert.ErrorIs(t, err, ErrMalformedToken)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.in, got.String())
		})
	}
	assert.True(t, SessionToken{2, 8}.Less(SessionToken{1, 9}), "LSN first")
	assert.True(t, SessionToken{1, 9}.Less(SessionToken{2, 9}), "then epoch")
	assert.False(t, SessionToken{2, 9}.Less(SessionToken{2, 9}))
}

func TestSessionMergeAndEncode(t *testing.T) {
	s, err := NewSession(2)
	require.NoError(t, err)
	require.NoError(t, s.Observe(5, SessionToken{3, 10}))
	require.NoError(t, s.Observe(5, SessionToken{4, 9}), "older token ignored")
	require.NoError(t, s.Observe(1, SessionToken{1, 1}))
	assert.ErrorIs(t, s.Observe(9, SessionToken{1, 1}), ErrSessionFull)
	require.NoError(t, s.Observe(9, SessionToken{}), "zero token is a no-op")
	assert.Equal(t, SessionToken{3, 10}, s.Token(5))
	assert.Equal(t, "1=1:1;5=3:10", s.Encode())

	back, err := DecodeSession(s.Encode(), 2)
	require.NoError(t, err)
	assert.Equal(t, s.Encode(), back.Encode())

	for _, bad := range []string{"x", "1=", "=1:1", "1=1:1;", "4294967296=1:1", "1=1:1;2=2:2;3=3:3"} {
		_, err := DecodeSession(bad, 2)
		assert.Error(t, err, bad)
	}
}

func FuzzParseSessionToken(f *testing.F) {
	f.Add("7:1234")
	f.Add("0:0")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseSessionToken(s)
		if err != nil {
			return
		}
		if tok.String() != s {
			t.Fatalf("not canonical: %q -> %q", s, tok.String())
		}
	})
}

func FuzzDecodeSession(f *testing.F) {
	f.Add("1=1:1;5=3:10")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		sess, err := DecodeSession(s, 16)
		if err != nil {
			return
		}
		if sess.Len() > 16 {
			t.Fatalf("session over its bound")
		}
		back, err := DecodeSession(sess.Encode(), 16)
		if err != nil || back.Encode() != sess.Encode() {
			t.Fatalf("round trip: %q -> %q, %v", s, sess.Encode(), err)
		}
	})
}
