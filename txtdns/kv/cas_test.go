package kv_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/txtdns/kv"
	"github.com/fmnode/fmnode/txtdns/routing"
)

// CompareAndSet against agents: create on absent, replace on the version a
// read returned, a mismatch is a typed, unretried ConditionFailedError
// with the key's current version; across a failover it is redirected (not
// applied) and lands at the new write region.
func TestCompareAndSet(t *testing.T) {
	w := newWorld(t, worldOpts{})
	ctx := opCtx(t)
	c := w.client
	var zero routing.SessionToken

	require.NoError(t, c.CompareAndSet(ctx, "k", zero, []byte("v1")), "absent: created")
	err := c.CompareAndSet(ctx, "k", zero, []byte("x"))
	var cf *kv.ConditionFailedError
	require.ErrorAs(t, err, &cf)
	require.ErrorIs(t, err, kv.ErrConditionFailed)
	assert.True(t, cf.Found)
	assert.Equal(t, http.StatusPreconditionFailed, cf.APIError.Status)
	hits := w.regions["a"].seen.count(http.StatusPreconditionFailed)
	assert.Equal(t, 1, hits, "a failed condition is not retried")

	it, found, err := c.GetItem(ctx, "k", routing.ConsistencyStrong)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, cf.Version, it.Version, "the error names the key's current version")
	require.NoError(t, c.CompareAndSet(ctx, "k", it.Version, []byte("v2")))
	err = c.CompareAndSet(ctx, "k", it.Version, []byte("v3"))
	require.ErrorAs(t, err, &cf)
	assert.NotEqual(t, it.Version, cf.Version)
	v, _ := w.stored(t, "a", "k")
	assert.Equal(t, []byte("v2"), v)

	// The retry with the version the error gave succeeds.
	require.NoError(t, c.CompareAndSet(ctx, "k", cf.Version, []byte("v3")))

	w.failover(t, 2, "b")
	err = c.CompareAndSet(ctx, "moved", zero, []byte("m"))
	require.NoError(t, err, "redirected to b, not applied at a")
	_, inA := w.stored(t, "a", "moved")
	assert.False(t, inA)
	got, inB := w.stored(t, "b", "moved")
	assert.True(t, inB)
	assert.Equal(t, []byte("m"), got)

	it, _, err = c.GetItem(ctx, "moved", routing.ConsistencyStrong)
	require.NoError(t, err)
	require.NoError(t, c.CompareAndDelete(ctx, "moved", it.Version))
	_, found, err = c.Get(ctx, "moved", routing.ConsistencyStrong)
	require.NoError(t, err)
	assert.False(t, found)
	assert.True(t, errors.Is(c.CompareAndDelete(ctx, "moved", zero), kv.ErrInvalidRequest))
}

// A session's CompareAndDelete deletes on the version read, refuses a
// stale one, and the session then reads its own delete.
func TestSessionCompareAndDelete(t *testing.T) {
	w := newWorld(t, worldOpts{})
	ctx := opCtx(t)
	s := w.client.NewSession()
	require.NoError(t, s.Put(ctx, "k", []byte("v1")))
	it, found, err := s.GetItem(ctx, "k", routing.ConsistencyStrong)
	require.NoError(t, err)
	require.True(t, found)
	require.NoError(t, s.Put(ctx, "k", []byte("v2")))
	require.ErrorIs(t, s.CompareAndDelete(ctx, "k", it.Version), kv.ErrConditionFailed, "a stale version")
	it, _, err = s.GetItem(ctx, "k", routing.ConsistencyStrong)
	require.NoError(t, err)
	require.NoError(t, s.CompareAndDelete(ctx, "k", it.Version))
	_, found, err = s.Get(ctx, "k", routing.ConsistencySession)
	require.NoError(t, err)
	assert.False(t, found, "the session reads its own delete")
	var zero routing.SessionToken
	assert.ErrorIs(t, s.CompareAndDelete(ctx, "k", zero), kv.ErrInvalidRequest)
}
