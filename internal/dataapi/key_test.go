package dataapi

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseKey(t *testing.T) {
	for _, tc := range []struct {
		esc    string
		want   string
		status int // 0: ok
	}{
		{"k", "k", 0},
		{"a%2Fb", "a/b", 0},
		{"a/b", "a/b", 0},
		{"%00%FF", "\x00\xff", 0},
		{"..", "..", 0},
		{"", "", http.StatusBadRequest},
		{"%zz", "", http.StatusBadRequest},
		{"%", "", http.StatusBadRequest},
		{strings.Repeat("k", 9), "", http.StatusRequestEntityTooLarge},
		{strings.Repeat("%41", 9), "", http.StatusRequestEntityTooLarge},
		{strings.Repeat("%41", 8), "AAAAAAAA", 0},
	} {
		t.Run(tc.esc, func(t *testing.T) {
			got, ae := parseKey(tc.esc, 8)
			if tc.status != 0 {
				require.NotNil(t, ae)
				assert.Equal(t, tc.status, ae.status)
				return
			}
			require.Nil(t, ae)
			assert.Equal(t, tc.want, string(got))
		})
	}
}

// FuzzKeyPath: the key decoder never panics, bounds the key, and a key it
// accepts path-escapes back to itself.
func FuzzKeyPath(f *testing.F) {
	for _, s := range []string{"k", "a%2Fb", "%", "%zz", "a/b", "%00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, esc string) {
		key, ae := parseKey(esc, 64)
		if ae != nil {
			return
		}
		if len(key) == 0 || len(key) > 64 {
			t.Fatalf("key of %d bytes accepted", len(key))
		}
		again, ae := parseKey(url.PathEscape(string(key)), 64)
		if ae != nil || string(again) != string(key) {
			t.Fatalf("%q: escaped %q decodes to %q, %v", key, url.PathEscape(string(key)), again, ae)
		}
	})
}
