package progress

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// divergeTable: epoch 2 was compacted and ended at 100; epoch 3 (A) wrote
// 101..120; epoch 4 (B) never wrote; epoch 5 (A) wrote 121..150; epoch 6
// was never committed (a burnt epoch number); epoch 7 (C) is current.
func divergeTable() Table {
	return Table{Partition: "p", BaseEpoch: 2, Epochs: []EpochRange{
		closed(3, 100, 120, "A"), closed(4, 120, 120, "B"), closed(5, 120, 150, "A"), open(7, 150, "C"),
	}}
}

func TestDiverge(t *testing.T) {
	tb := divergeTable()
	require.NoError(t, tb.Validate())
	cases := []struct {
		name    string
		epoch   Epoch
		last    LSN
		lineage LSN
		want    Divergence
		err     error
	}{
		{"current epoch, lagging", 7, 160, 170,
			Divergence{CommonLSN: 160, FalseProgress: LSNRange{160, 160}, Delta: LSNRange{160, 170}, Reason: ReasonCurrentEpoch, Epoch: 7}, nil},
		{"current epoch, caught up", 7, 170, 170,
			Divergence{CommonLSN: 170, FalseProgress: LSNRange{170, 170}, Delta: LSNRange{170, 170}, Reason: ReasonCurrentEpoch, Epoch: 7}, nil},
		{"current epoch, joined before any op", 7, 140, 170,
			Divergence{CommonLSN: 140, FalseProgress: LSNRange{140, 140}, Delta: LSNRange{140, 170}, Reason: ReasonCurrentEpoch, Epoch: 7}, nil},
		{"old epoch, stopped before its end", 5, 140, 170,
			Divergence{CommonLSN: 140, FalseProgress: LSNRange{140, 140}, Delta: LSNRange{140, 170}, Reason: ReasonWithinEpoch, Epoch: 5, EpochEnd: 150}, nil},
		{"old epoch, exactly at its end", 5, 150, 170,
			Divergence{CommonLSN: 150, FalseProgress: LSNRange{150, 150}, Delta: LSNRange{150, 170}, Reason: ReasonWithinEpoch, Epoch: 5, EpochEnd: 150}, nil},
		{"old write region with false progress", 5, 155, 170,
			Divergence{CommonLSN: 150, FalseProgress: LSNRange{150, 155}, FalseProgressOps: 5, Delta: LSNRange{150, 170}, Reason: ReasonFalseProgress, Epoch: 5, EpochEnd: 150}, nil},
		{"false progress beyond the lineage's end", 5, 190, 170,
			Divergence{CommonLSN: 150, FalseProgress: LSNRange{150, 190}, FalseProgressOps: 40, Delta: LSNRange{150, 170}, Reason: ReasonFalseProgress, Epoch: 5, EpochEnd: 150}, nil},
		{"write region that never got a write through", 4, 125, 170,
			Divergence{CommonLSN: 120, FalseProgress: LSNRange{120, 125}, FalseProgressOps: 5, Delta: LSNRange{120, 170}, Reason: ReasonFalseProgress, Epoch: 4, EpochEnd: 120}, nil},
		{"joined an epoch below its start", 4, 110, 170,
			Divergence{CommonLSN: 110, FalseProgress: LSNRange{110, 110}, Delta: LSNRange{110, 170}, Reason: ReasonWithinEpoch, Epoch: 4, EpochEnd: 120}, nil},
		{"oldest kept epoch", 3, 130, 170,
			Divergence{CommonLSN: 120, FalseProgress: LSNRange{120, 130}, FalseProgressOps: 10, Delta: LSNRange{120, 170}, Reason: ReasonFalseProgress, Epoch: 3, EpochEnd: 120}, nil},
		{"compacted epoch that ended at the base", 2, 105, 170,
			Divergence{CommonLSN: 100, FalseProgress: LSNRange{100, 105}, FalseProgressOps: 5, Delta: LSNRange{100, 170}, Reason: ReasonFalseProgress, Epoch: 2, EpochEnd: 100}, nil},
		{"compacted epoch, behind the base", 2, 90, 170,
			Divergence{CommonLSN: 90, FalseProgress: LSNRange{90, 90}, Delta: LSNRange{90, 170}, Reason: ReasonWithinEpoch, Epoch: 2, EpochEnd: 100}, nil},
		{"forgotten epoch needs a snapshot", 1, 50, 170,
			Divergence{Delta: LSNRange{0, 170}, NeedsSnapshot: true, Reason: ReasonCompacted, Epoch: 1}, nil},
		{"forgotten epoch with an empty log", 1, 0, 170,
			Divergence{Delta: LSNRange{0, 170}, Reason: ReasonEmptyLog, Epoch: 1}, nil},
		{"empty log", 0, 0, 170,
			Divergence{Delta: LSNRange{0, 170}, Reason: ReasonEmptyLog}, nil},
		{"epoch after the current one", 8, 150, 170, Divergence{}, ErrReplicaAhead},
		{"more ops than the write region", 7, 171, 170, Divergence{}, ErrReplicaAhead},
		{"epoch no write region had", 6, 150, 170, Divergence{}, ErrUnknownEpoch},
		{"epoch 0 with ops", 0, 5, 170, Divergence{}, ErrInvalidPosition},
		{"lineage shorter than the current start", 5, 140, 149, Divergence{}, ErrLineageTooShort},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tb.Diverge(tc.epoch, tc.last, tc.lineage)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.NotEmpty(t, got.Why())
		})
	}
	t.Run("invalid table", func(t *testing.T) {
		_, err := Table{Partition: "p"}.Diverge(0, 0, 0)
		require.ErrorIs(t, err, ErrInvalidTable)
	})
}

func TestDivergenceWhy(t *testing.T) {
	tb := divergeTable()
	cases := []struct {
		epoch Epoch
		last  LSN
		want  []string
	}{
		{0, 0, []string{"empty log", "(0, 170]"}},
		{7, 160, []string{"current epoch 7", "(160, 170]"}},
		{1, 50, []string{"epoch 1", "snapshot"}},
		{5, 140, []string{"epoch 5 ended at LSN 150", "stopped at 140", "no false progress"}},
		{5, 155, []string{"epoch 5 ended at LSN 150", "5 ops", "false progress (150, 155]", "(150, 170]"}},
	}
	for _, tc := range cases {
		d, err := tb.Diverge(tc.epoch, tc.last, 170)
		require.NoError(t, err)
		for _, w := range tc.want {
			assert.Contains(t, d.Why(), w)
		}
	}
	assert.Equal(t, "reason(0)", Divergence{}.Why())
	assert.Equal(t, "false-progress", ReasonFalseProgress.String())
}

func TestLSNRange(t *testing.T) {
	cases := []struct {
		r      LSNRange
		len    uint64
		in     []LSN
		out    []LSN
		string string
	}{
		{LSNRange{3, 6}, 3, []LSN{4, 5, 6}, []LSN{0, 3, 7}, "(3, 6]"},
		{LSNRange{3, 3}, 0, nil, []LSN{2, 3, 4}, "(3, 3]"},
		{LSNRange{5, 2}, 0, nil, []LSN{2, 3, 5}, "(5, 2]"},
		{LSNRange{}, 0, nil, []LSN{0, 1}, "(0, 0]"},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.len, tc.r.Len(), tc.string)
		assert.Equal(t, tc.len == 0, tc.r.Empty(), tc.string)
		assert.Equal(t, tc.string, tc.r.String())
		for _, l := range tc.in {
			assert.True(t, tc.r.Contains(l), "%v contains %d", tc.r, l)
		}
		for _, l := range tc.out {
			assert.False(t, tc.r.Contains(l), "%v contains %d", tc.r, l)
		}
	}
}

// TestCompactionKeepsAnswers: for every position a replica can report
// against a table (every epoch the table has, every LSN in range) and every
// compaction, the answer is unchanged for replicas past the compacted
// range (CommonLSN >= the new BaseLSN) and otherwise unchanged or
// NeedsSnapshot — never a different divergence point.
func TestCompactionKeepsAnswers(t *testing.T) {
	tb := mustTable(t, open(1, 0, "A"), open(2, 3, "B"), open(3, 3, "A"), open(4, 7, "C"), open(5, 7, "B"), open(6, 9, "A"), open(7, 12, "C"))
	const lineage = 14
	epochs := []Epoch{0, 1, 2, 3, 4, 5, 6, 7}
	checked := 0
	for minLSN := LSN(0); minLSN <= lineage; minLSN++ {
		for keep := 1; keep <= len(tb.Epochs); keep++ {
			c, err := tb.Compact(minLSN, keep)
			require.NoError(t, err)
			for _, e := range epochs {
				for last := LSN(0); last <= lineage+3; last++ {
					before, errBefore := tb.Diverge(e, last, lineage)
					after, errAfter := c.Diverge(e, last, lineage)
					if errBefore != nil {
						require.Error(t, errAfter, "epoch %d last %d", e, last)
						continue
					}
					require.NoError(t, errAfter)
					checked++
					if after.NeedsSnapshot {
						assert.Less(t, before.CommonLSN, c.BaseLSN(), "snapshot for a replica past the base: epoch %d last %d min %d keep %d", e, last, minLSN, keep)
						assert.Less(t, e, c.BaseEpoch)
						continue
					}
					assert.Equal(t, before, after, "epoch %d last %d min %d keep %d", e, last, minLSN, keep)
				}
			}
		}
	}
	t.Logf("%d answers compared", checked)
}
