package dataapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Compare-and-set over HTTP: If-None-Match: * creates, If-Match compares
// on the version a GET returned, a mismatch is 412 condition_failed with
// the key's current version, and a CAS is fenced like any write.
func TestCompareAndSetOverHTTP(t *testing.T) {
	srv, m := memServe(t, MemConfig{Epoch: 5}, Config{})
	path := KeyPath([]byte("k"))
	with := func(kv ...string) map[string]string {
		h := map[string]string{HeaderEpoch: "5"}
		for i := 0; i+1 < len(kv); i += 2 {
			h[kv[i]] = kv[i+1]
		}
		return h
	}

	put := do(t, srv, http.MethodPut, path, strings.NewReader("v1"), with(HeaderIfNoneMatch, "*"))
	require.Equal(t, http.StatusNoContent, put.status, string(put.body))
	again := do(t, srv, http.MethodPut, path, strings.NewReader("x"), with(HeaderIfNoneMatch, "*"))
	require.Equal(t, http.StatusPreconditionFailed, again.status, string(again.body))
	assert.Equal(t, CodeConditionFailed, again.err.Code)
	assert.Equal(t, "5:1", again.header.Get(HeaderVersion), "the key's current version")

	get := do(t, srv, http.MethodGet, path, nil, with())
	require.Equal(t, http.StatusOK, get.status)
	v1 := get.header.Get(HeaderVersion)
	put = do(t, srv, http.MethodPut, path, strings.NewReader("v2"), with(HeaderIfMatch, v1))
	require.Equal(t, http.StatusNoContent, put.status, string(put.body))
	stale := do(t, srv, http.MethodPut, path, strings.NewReader("v3"), with(HeaderIfMatch, `"`+v1+`"`))
	require.Equal(t, http.StatusPreconditionFailed, stale.status, string(stale.body))
	assert.Equal(t, "5:2", stale.header.Get(HeaderVersion))
	get = do(t, srv, http.MethodGet, path, nil, with())
	assert.Equal(t, "v2", string(get.body), "a failed condition applies nothing")

	// Compare-and-delete; then the key is absent and a version fails
	// without Fm-Version.
	del := do(t, srv, http.MethodDelete, path, nil, with(HeaderIfMatch, "5:2"))
	require.Equal(t, http.StatusNoContent, del.status, string(del.body))
	gone := do(t, srv, http.MethodPut, path, strings.NewReader("v4"), with(HeaderIfMatch, "5:2"))
	require.Equal(t, http.StatusPreconditionFailed, gone.status)
	assert.Empty(t, gone.header.Get(HeaderVersion))

	// Routed like a write: an older epoch that reaches the write region is
	// served there in the current epoch (the client's epoch only routes),
	// and the condition is still decided; then not the write region.
	old := do(t, srv, http.MethodPut, path, strings.NewReader("v5"), map[string]string{HeaderEpoch: "4", HeaderIfNoneMatch: "*"})
	require.Equal(t, http.StatusNoContent, old.status, string(old.body))
	dup := do(t, srv, http.MethodPut, path, strings.NewReader("v6"), map[string]string{HeaderEpoch: "4", HeaderIfNoneMatch: "*"})
	require.Equal(t, http.StatusPreconditionFailed, dup.status, "the key exists now")
	require.NoError(t, m.SetWriteRegion(6, "us"))
	moved := do(t, srv, http.MethodPut, path, strings.NewReader("v5"), map[string]string{HeaderEpoch: "6", HeaderIfNoneMatch: "*"})
	require.Equal(t, http.StatusMisdirectedRequest, moved.status)
	assert.Equal(t, ReasonNotWriteRegion, moved.header.Get(HeaderRedirectReason))
}

func TestCompareAndSetHeadersRefused(t *testing.T) {
	srv, _ := memServe(t, MemConfig{Epoch: 5}, Config{})
	path := KeyPath([]byte("k"))
	tests := []struct {
		name   string
		method string
		hdr    map[string]string
	}{
		{"both", http.MethodPut, map[string]string{HeaderIfMatch: "5:1", HeaderIfNoneMatch: "*"}},
		{"none-match not star", http.MethodPut, map[string]string{HeaderIfNoneMatch: "5:1"}},
		{"bad version", http.MethodPut, map[string]string{HeaderIfMatch: "5"}},
		{"zero version", http.MethodPut, map[string]string{HeaderIfMatch: "0:0"}},
		{"on a GET", http.MethodGet, map[string]string{HeaderIfMatch: "5:1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.hdr[HeaderEpoch] = "5"
			r := do(t, srv, tc.method, path, strings.NewReader("v"), tc.hdr)
			require.Equal(t, http.StatusBadRequest, r.status, string(r.body))
			assert.Equal(t, CodeBadHeader, r.err.Code)
		})
	}
	get := do(t, srv, http.MethodGet, path, nil, map[string]string{HeaderEpoch: "5"})
	assert.Equal(t, http.StatusNotFound, get.status, "no refused request wrote")
}
