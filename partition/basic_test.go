package partition_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
)

func TestBasicWriteReadEveryLevel(t *testing.T) {
	for _, lvl := range []partition.Consistency{partition.Strong, partition.BoundedStaleness, partition.Session, partition.Eventual} {
		t.Run(lvl.String(), func(t *testing.T) {
			c := newTestCluster(t, 1, nil)
			require.NoError(t, c.Create(7, partition.Spec{Level: partition.LevelOf(lvl), Quorum: partition.SampleQuorum("a"), Epoch: 1}))
			c.RunFor(10 * time.Millisecond)
			var tok partition.Token
			for i := 1; i <= 50; i++ {
				tok = mustWrite(t, c, "a", 7, 1, partition.ClientRef(i), "k", "v"+string(rune('0'+i%10)))
				require.Equal(t, partition.LSN(i), tok.LSN)
				require.Equal(t, partition.Epoch(1), tok.Epoch)
			}
			rep := mustRead(t, c, "a", partition.ReadRequest{Partition: 7, Ref: 1000, Key: []byte("k"), Epoch: 1})
			require.NoError(t, rep.Err)
			require.True(t, rep.Found)
			require.Equal(t, "v0", string(rep.Value))
			// Session read at a follower after replication.
			c.RunFor(200 * time.Millisecond)
			rep = mustRead(t, c, "b", partition.ReadRequest{Partition: 7, Ref: 1001, Key: []byte("k"), Consistency: partition.Session, Token: tok})
			require.NoError(t, rep.Err)
			require.Equal(t, "v0", string(rep.Value))
			for _, reg := range partition.SampleRegions {
				p := progressOf(t, c, reg, 7)
				require.Equal(t, partition.LSN(50), p.AppliedLSN, fmtProgress(p))
			}
			require.NoError(t, c.Violation())
		})
	}
}
