package dataapi

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/txtdns/routing"
)

func TestHashPartitionerIsTheSDKs(t *testing.T) {
	p, err := NewHashPartitioner(7)
	require.NoError(t, err)
	sdk, err := routing.NewOneBasedHashPartitioner(7)
	require.NoError(t, err)
	for _, k := range []string{"", "a", "user/42", strings.Repeat("x", 300)} {
		assert.Equal(t, partition.ID(sdk.Partition(k)), p.Partition([]byte(k)), k)
	}
	_, err = NewHashPartitioner(0)
	assert.ErrorIs(t, err, routing.ErrInvalidConfig)
}

func TestMemConfig(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   MemConfig
		field string
	}{
		{"no region", MemConfig{}, "MemConfig.Region"},
		{"bad level", MemConfig{Region: "a", Level: 9}, "MemConfig.Level"},
		{"key bound", MemConfig{Region: "a", MaxKeyBytes: partition.HardMaxKeyBytes + 1}, "MemConfig.MaxKeyBytes"},
		{"op bound", MemConfig{Region: "a", MaxOpBytes: -1}, "MemConfig.MaxOpBytes"},
		{"keys", MemConfig{Region: "a", MaxKeys: -1}, "MemConfig.MaxKeys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewMemBackend(tc.cfg)
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.field)
		})
	}
}

func TestMemBackend(t *testing.T) {
	ctx := context.Background()
	m, err := NewMemBackend(MemConfig{Region: "eu", Epoch: 2, MaxKeys: 2, MaxKeyBytes: 4, MaxOpBytes: 8})
	require.NoError(t, err)

	w := func(epoch partition.Epoch, key, value string, del bool) partition.Reply {
		r, err := m.Write(ctx, partition.WriteRequest{Partition: 1, Epoch: epoch, Key: []byte(key), Value: []byte(value), Delete: del})
		require.NoError(t, err)
		return r
	}
	read := func(c partition.Consistency, epoch partition.Epoch, tok partition.Token, key string) partition.Reply {
		r, err := m.Read(ctx, partition.ReadRequest{Partition: 1, Consistency: c, Epoch: epoch, Token: tok, Key: []byte(key)})
		require.NoError(t, err)
		return r
	}
	redirect := func(t *testing.T, err error, reason partition.RedirectReason, epoch partition.Epoch, region partition.Region) {
		t.Helper()
		var rd *partition.RedirectError
		require.ErrorAs(t, err, &rd)
		assert.Equal(t, reason, rd.Reason)
		assert.Equal(t, epoch, rd.Epoch)
		assert.Equal(t, region, rd.WriteRegion)
	}

	r := w(2, "a", "1", false)
	require.NoError(t, r.Err)
	assert.Equal(t, partition.Token{Epoch: 2, LSN: 1}, r.Token)
	old := w(1, "a", "1", false) // an older epoch at the write region: served in epoch 2
	require.NoError(t, old.Err)
	assert.Equal(t, partition.Token{Epoch: 2, LSN: 2}, old.Token)
	redirect(t, w(0, "a", "1", false).Err, partition.ReasonStaleEpoch, 2, "eu")
	redirect(t, w(3, "a", "1", false).Err, partition.ReasonReplicaBehind, 2, "eu")
	assert.ErrorIs(t, w(2, "abcde", "", false).Err, partition.ErrTooLarge)
	assert.ErrorIs(t, w(2, "ab", "1234567", false).Err, partition.ErrTooLarge)
	require.NoError(t, w(2, "b", "2", false).Err)
	assert.ErrorIs(t, w(2, "c", "3", false).Err, partition.ErrBackpressure, "MaxKeys")
	require.NoError(t, w(2, "a", "4", false).Err, "an existing key is not a new one")

	got := read(partition.Strong, 2, partition.Token{}, "a")
	require.NoError(t, got.Err)
	assert.True(t, got.Found)
	assert.Equal(t, "4", string(got.Value))
	assert.Equal(t, partition.Token{Epoch: 2, LSN: 4}, got.Version)
	assert.Equal(t, partition.Token{Epoch: 2, LSN: 4}, got.Token)
	assert.ErrorIs(t, read(partition.Session, 0, partition.Token{Epoch: 2, LSN: 5}, "a").Err, partition.ErrSessionUnavailable)
	assert.NoError(t, read(partition.Session, 0, partition.Token{Epoch: 2, LSN: 4}, "a").Err)

	// A failover to another region: this one is a follower now.
	require.NoError(t, m.SetWriteRegion(3, "us"))
	require.ErrorIs(t, m.SetWriteRegion(2, "eu"), partition.ErrBadRequest)
	redirect(t, w(3, "a", "1", false).Err, partition.ReasonNotWriteRegion, 3, "us")
	redirect(t, w(2, "a", "1", false).Err, partition.ReasonStaleEpoch, 3, "us")
	redirect(t, read(partition.Strong, 3, partition.Token{}, "a").Err, partition.ReasonNotWriteRegion, 3, "us")
	for _, c := range []partition.Consistency{partition.BoundedStaleness, partition.Session, partition.Eventual, 0} {
		got := read(c, 0, partition.Token{}, "a")
		require.NoError(t, got.Err, c)
		assert.Equal(t, "4", string(got.Value), c)
	}
	require.NoError(t, m.SetWriteRegion(4, "eu"))
	require.NoError(t, w(4, "a", "", true).Err)
	got = read(partition.Eventual, 0, partition.Token{}, "a")
	assert.False(t, got.Found)
	assert.Equal(t, partition.Token{Epoch: 4, LSN: 5}, got.Token)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = m.Write(cctx, partition.WriteRequest{Partition: 1, Epoch: 4, Key: []byte("a")})
	assert.ErrorIs(t, err, context.Canceled)
}
