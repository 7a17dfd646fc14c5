package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/partition/pebblestore"
)

// writeStore lays out a node's partition store with ops in partition 1.
func writeStore(t *testing.T, dir string, ops []partition.Op) {
	st, err := pebblestore.Open(pebblestore.Options{Dir: filepath.Join(dir, "partitions")})
	require.NoError(t, err)
	defer st.Close()
	meta := partition.Meta{Epoch: ops[len(ops)-1].Epoch, Role: partition.RoleFollower, WriteRegion: "east",
		Level: partition.Level{Consistency: partition.Strong}, History: []partition.EpochRange{{Epoch: 1}}}
	require.NoError(t, st.Commit([]partition.Write{{Partition: 1, Meta: &meta, Append: ops}}))
}

func op(lsn partition.LSN, epoch partition.Epoch, key, val string) partition.Op {
	return partition.Op{LSN: lsn, Epoch: epoch, Key: []byte(key), Value: []byte(val)}
}

func TestCheckStores(t *testing.T) {
	dir := t.TempDir()
	c := &cluster{cfg: clusterConfig{Partitions: 1}}
	logs := [][]partition.Op{
		{op(1, 1, "k", "a"), op(2, 1, "k", "b")},
		{op(1, 1, "k", "a"), op(2, 2, "k", "c")},                     // LSN 2 of another epoch: false progress, fine
		{op(1, 1, "k", "x"), op(2, 2, "k", "c"), op(3, 1, "k", "d")}, // LSN 1 of epoch 1 differs; epoch goes back at 3
	}
	for i, l := range logs {
		n := &node{name: "n" + string(rune('1'+i)), dataDir: filepath.Join(dir, "n"+string(rune('1'+i)))}
		require.NoError(t, os.MkdirAll(n.dataDir, 0o700))
		writeStore(t, n.dataDir, l)
		c.nodes = append(c.nodes, n)
	}
	acked := []histOp{put(1, "k", "a", 0, 1), put(1, "k", "never-stored", 2, 3)}
	v := &verdict{}
	checkStores(c, t.TempDir(), acked, v)
	assert.Equal(t, 3, v.StoresRead)
	assert.Equal(t, 7, v.LogOpsRead)
	require.Equal(t, 1, v.DualWriters, "%v", v.Violations)
	assert.Contains(t, strings.Join(v.Violations, "\n"), "partition 1 epoch 1 LSN 1:", "the two writers of epoch 1, not LSN 2's false progress")
	assert.Equal(t, 1, v.EpochRegressions, "%v", v.Violations)
	assert.Equal(t, 1, v.AckedNotStored, "%v", v.Violations)
	assert.Equal(t, uint64(2), v.MaxEpochs[1])
}
