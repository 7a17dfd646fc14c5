package progress

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func open(e Epoch, start LSN, region string) EpochRange {
	return EpochRange{Epoch: e, StartLSN: start, Open: true, WriteRegion: region}
}

func closed(e Epoch, start, end LSN, region string) EpochRange {
	return EpochRange{Epoch: e, StartLSN: start, EndLSN: end, WriteRegion: region}
}

// mustTable applies a sequence of failovers (epoch, region, start) to a new
// table, as the failover layer would.
func mustTable(t *testing.T, first EpochRange, opens ...EpochRange) Table {
	t.Helper()
	tb, err := New("p", first)
	require.NoError(t, err)
	for _, o := range opens {
		tb, err = tb.Open(o.Epoch, o.WriteRegion, o.StartLSN)
		require.NoError(t, err)
	}
	return tb
}

func TestNew(t *testing.T) {
	long := strings.Repeat("x", MaxRegionBytes+1)
	cases := []struct {
		name      string
		partition string
		first     EpochRange
		err       []error
	}{
		{"new partition", "p", open(1, 0, "eastus"), nil},
		{"existing log", "p", open(7, 1000, "eastus"), nil},
		{"longest names", strings.Repeat("p", MaxPartitionBytes), open(1, 0, strings.Repeat("r", MaxRegionBytes)), nil},
		{"empty partition", "", open(1, 0, "eastus"), []error{ErrInvalidTable, ErrInvalidPartition}},
		{"long partition", strings.Repeat("p", MaxPartitionBytes+1), open(1, 0, "eastus"), []error{ErrInvalidPartition}},
		{"epoch 0 is reserved", "p", open(0, 0, "eastus"), []error{ErrInvalidTable}},
		{"first not open", "p", closed(1, 0, 5, "eastus"), []error{ErrInvalidTable}},
		{"open with end", "p", EpochRange{Epoch: 1, EndLSN: 3, Open: true, WriteRegion: "eastus"}, []error{ErrInvalidTable}},
		{"empty region", "p", open(1, 0, ""), []error{ErrInvalidRegion}},
		{"long region", "p", open(1, 0, long), []error{ErrInvalidRegion}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tb, err := New(tc.partition, tc.first)
			for _, want := range tc.err {
				require.ErrorIs(t, err, want)
			}
			if tc.err != nil {
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.first, tb.Current())
			assert.Equal(t, tc.first.Epoch, tb.BaseEpoch)
			assert.Equal(t, tc.first.StartLSN, tb.BaseLSN())
		})
	}
}

func TestValidate(t *testing.T) {
	valid := func() Table {
		return Table{Partition: "p", BaseEpoch: 1, Epochs: []EpochRange{
			closed(2, 10, 20, "A"), closed(3, 20, 20, "B"), open(5, 20, "A"),
		}}
	}
	require.NoError(t, valid().Validate())
	many := Table{Partition: "p", BaseEpoch: 1}
	for i := range MaxEpochs + 1 {
		many.Epochs = append(many.Epochs, closed(Epoch(i+1), 0, 0, "A"))
	}
	many.Epochs[MaxEpochs] = open(MaxEpochs+1, 0, "A")
	cases := []struct {
		name   string
		mutate func(*Table)
		err    error
	}{
		{"no epochs", func(t *Table) { t.Epochs = nil }, ErrInvalidTable},
		{"too many epochs", func(t *Table) { *t = many }, ErrTooManyEpochs},
		{"base epoch zero", func(t *Table) { t.BaseEpoch = 0 }, ErrInvalidTable},
		{"base epoch above first", func(t *Table) { t.BaseEpoch = 3 }, ErrInvalidTable},
		{"epochs equal", func(t *Table) { t.Epochs[1].Epoch = 2 }, ErrEpochNotIncreasing},
		{"epochs decrease", func(t *Table) { t.Epochs[2].Epoch = 1 }, ErrEpochNotIncreasing},
		{"gap between epochs", func(t *Table) { t.Epochs[1].StartLSN = 21; t.Epochs[1].EndLSN = 21 }, ErrLSNRegression},
		{"overlap between epochs", func(t *Table) { t.Epochs[1].StartLSN = 19 }, ErrLSNRegression},
		{"end before start", func(t *Table) { t.Epochs[0].EndLSN = 9 }, ErrLSNRegression},
		{"middle epoch open", func(t *Table) { t.Epochs[1].Open = true }, ErrInvalidTable},
		{"last epoch closed", func(t *Table) { t.Epochs[2].Open = false }, ErrInvalidTable},
		{"open epoch with end", func(t *Table) { t.Epochs[2].EndLSN = 30 }, ErrInvalidTable},
		{"empty region", func(t *Table) { t.Epochs[0].WriteRegion = "" }, ErrInvalidRegion},
		{"empty partition", func(t *Table) { t.Partition = "" }, ErrInvalidPartition},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tb := valid()
			tc.mutate(&tb)
			err := tb.Validate()
			require.ErrorIs(t, err, ErrInvalidTable)
			require.ErrorIs(t, err, tc.err)
		})
	}
}

func TestOpen(t *testing.T) {
	base := mustTable(t, open(1, 0, "A"), open(2, 10, "B"))
	cases := []struct {
		name   string
		epoch  Epoch
		region string
		start  LSN
		want   []EpochRange
		err    error
	}{
		{"failover after writes", 3, "C", 25, []EpochRange{closed(1, 0, 10, "A"), closed(2, 10, 25, "B"), open(3, 25, "C")}, nil},
		{"write region that never wrote", 3, "C", 10, []EpochRange{closed(1, 0, 10, "A"), closed(2, 10, 10, "B"), open(3, 10, "C")}, nil},
		{"back to the previous region", 3, "A", 12, []EpochRange{closed(1, 0, 10, "A"), closed(2, 10, 12, "B"), open(3, 12, "A")}, nil},
		{"same region, new epoch", 3, "B", 12, []EpochRange{closed(1, 0, 10, "A"), closed(2, 10, 12, "B"), open(3, 12, "B")}, nil},
		{"epoch numbers may skip", 9, "C", 12, []EpochRange{closed(1, 0, 10, "A"), closed(2, 10, 12, "B"), open(9, 12, "C")}, nil},
		{"epoch not increasing", 2, "C", 12, nil, ErrEpochNotIncreasing},
		{"epoch going back", 1, "C", 12, nil, ErrEpochNotIncreasing},
		{"start below current start", 3, "C", 9, nil, ErrLSNRegression},
		{"empty region", 3, "", 12, nil, ErrInvalidRegion},
		{"long region", 3, strings.Repeat("r", MaxRegionBytes+1), 12, nil, ErrInvalidRegion},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := base.Open(tc.epoch, tc.region, tc.start)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.NoError(t, got.Validate())
			assert.Equal(t, tc.want, got.Epochs)
			assert.Equal(t, Epoch(1), got.BaseEpoch)
		})
	}
	t.Run("invalid receiver", func(t *testing.T) {
		_, err := Table{Partition: "p"}.Open(2, "A", 0)
		require.ErrorIs(t, err, ErrInvalidTable)
	})
}

// TestRepeatedFailovers: bouncing between two regions, with and without
// writes in between, keeps the ranges touching and answers per epoch.
func TestRepeatedFailovers(t *testing.T) {
	tb := mustTable(t, open(1, 0, "A"),
		open(2, 5, "B"), open(3, 5, "A"), open(4, 8, "B"), open(5, 8, "A"), open(6, 8, "B"))
	require.Len(t, tb.Epochs, 6)
	for i, want := range []LSN{5, 5, 8, 8, 8} {
		end, ok := tb.EndOf(Epoch(i + 1))
		require.True(t, ok)
		assert.Equal(t, want, end, "epoch %d", i+1)
	}
	// A wrote 6..9 in epoch 3 but only 6..8 reached B before epoch 4.
	d, err := tb.Diverge(3, 9, 8)
	require.NoError(t, err)
	assert.Equal(t, LSN(8), d.CommonLSN)
	assert.Equal(t, LSNRange{8, 9}, d.FalseProgress)
	// A again in epoch 5 wrote nothing that survived, but wrote 9, 10 locally.
	d, err = tb.Diverge(5, 10, 8)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), d.FalseProgressOps)
}

func TestOpenDoesNotAliasReceiver(t *testing.T) {
	eps := make([]EpochRange, 1, 8) // spare capacity an append would reuse
	eps[0] = open(1, 0, "A")
	tb := Table{Partition: "p", BaseEpoch: 1, Epochs: eps}
	next, err := tb.Open(2, "B", 4)
	require.NoError(t, err)
	assert.Equal(t, open(1, 0, "A"), tb.Epochs[0], "receiver changed")
	assert.Equal(t, open(1, 0, "A"), eps[:2][0])
	next.Epochs[0].WriteRegion = "Z"
	assert.Equal(t, "A", tb.Epochs[0].WriteRegion, "result shares the receiver's array")

	c, err := next.Compact(100, MaxEpochs)
	require.NoError(t, err)
	c.Epochs[0].WriteRegion = "Y"
	assert.Equal(t, "B", next.Epochs[1].WriteRegion)
}

func TestOpenBehind(t *testing.T) {
	// A wrote 1..10 (epoch 1); B was promoted at 10 and wrote 11..15
	// (epoch 2); C was promoted at 15 (epoch 3). Now only D is left, and D
	// shares the lineage only through 8.
	tb := mustTable(t, open(1, 0, "A"), open(2, 10, "B"), open(3, 15, "C"))
	_, err := tb.Open(4, "D", 8)
	require.ErrorIs(t, err, ErrLSNRegression)

	got, err := tb.OpenBehind(4, "D", 8)
	require.NoError(t, err)
	require.NoError(t, got.Validate())
	assert.Equal(t, []EpochRange{
		closed(1, 0, 8, "A"), closed(2, 8, 8, "B"), closed(3, 8, 8, "C"), open(4, 8, "D"),
	}, got.Epochs)
	// B returns holding A's 9, 10 and its own 11..15: all false progress.
	d, err := got.Diverge(2, 15, 8)
	require.NoError(t, err)
	assert.Equal(t, LSNRange{8, 15}, d.FalseProgress)
	assert.Equal(t, uint64(7), d.FalseProgressOps)

	same, err := tb.OpenBehind(4, "D", 20)
	require.NoError(t, err)
	viaOpen, err := tb.Open(4, "D", 20)
	require.NoError(t, err)
	assert.Equal(t, viaOpen, same, "OpenBehind at or above the current start is Open")

	compacted, err := tb.Compact(10, MaxEpochs)
	require.NoError(t, err)
	require.Equal(t, LSN(10), compacted.BaseLSN())
	_, err = compacted.OpenBehind(4, "D", 8)
	require.ErrorIs(t, err, ErrLSNRegression, "cannot cut below the base")
	_, err = compacted.OpenBehind(4, "D", 10)
	require.NoError(t, err)
	_, err = tb.OpenBehind(3, "D", 8)
	require.ErrorIs(t, err, ErrEpochNotIncreasing)
}

func TestPromote(t *testing.T) {
	// Epoch 1: A wrote 1..10. Epoch 2: C promoted at 8, wrote 9'..12'.
	tb := mustTable(t, open(1, 0, "A"), open(2, 8, "C"))
	cases := []struct {
		name      string
		region    string
		epoch     Epoch
		last      LSN
		wantStart LSN
		wantFP    LSNRange
		err       error
	}{
		// B holds A's 1..10; the naive start (10) would claim C's 9', 10'.
		{"false progress is not promoted", "B", 1, 10, 8, LSNRange{8, 10}, nil},
		{"candidate in current epoch", "D", 2, 11, 11, LSNRange{11, 11}, nil},
		{"candidate at the current start", "B", 1, 8, 8, LSNRange{8, 8}, nil},
		{"candidate behind the current start", "B", 1, 6, 0, LSNRange{}, ErrCandidateBehind},
		{"candidate from the future", "B", 3, 6, 0, LSNRange{}, ErrReplicaAhead},
		{"unknown epoch", "B", 0, 6, 0, LSNRange{}, ErrInvalidPosition},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, d, err := tb.Promote(3, tc.region, tc.epoch, tc.last)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, open(3, tc.wantStart, tc.region), got.Current())
			assert.Equal(t, tc.wantStart, d.CommonLSN)
			assert.Equal(t, tc.wantFP, d.FalseProgress)
			assert.Equal(t, tc.wantFP.Len(), d.FalseProgressOps)
			assert.True(t, d.Delta.Empty())
		})
	}
	t.Run("behind error carries the numbers", func(t *testing.T) {
		_, _, err := tb.Promote(3, "B", 1, 6)
		var behind *CandidateBehindError
		require.True(t, errors.As(err, &behind))
		assert.Equal(t, CandidateBehindError{Region: "B", CommonLSN: 6, CurrentEpoch: 2, CurrentStart: 8}, *behind)
		assert.Contains(t, err.Error(), "2 lineage ops would be lost")
	})
	t.Run("compacted candidate", func(t *testing.T) {
		c, err := mustTable(t, open(1, 0, "A"), open(2, 8, "C"), open(3, 9, "A")).Compact(9, MaxEpochs)
		require.NoError(t, err)
		require.Equal(t, Epoch(2), c.BaseEpoch)
		_, _, err = c.Promote(4, "B", 1, 7)
		require.ErrorIs(t, err, ErrSnapshotRequired)
	})
	t.Run("bad epoch is reported before the candidate", func(t *testing.T) {
		_, _, err := tb.Promote(2, "B", 1, 6)
		require.ErrorIs(t, err, ErrEpochNotIncreasing)
	})
}

func TestEndOf(t *testing.T) {
	tb := Table{Partition: "p", BaseEpoch: 3, Epochs: []EpochRange{
		closed(5, 100, 120, "A"), closed(7, 120, 120, "B"), open(8, 120, "A"),
	}}
	require.NoError(t, tb.Validate())
	cases := []struct {
		epoch Epoch
		end   LSN
		ok    bool
	}{
		{2, 0, false},  // below base epoch: forgotten
		{3, 100, true}, // compacted, ended at the base
		{4, 100, true},
		{5, 120, true},
		{6, 0, false}, // gap: no such epoch
		{7, 120, true},
		{8, 0, false}, // open
		{9, 0, false}, // future
	}
	var zero Table
	assert.Equal(t, EpochRange{}, zero.Current())
	assert.Equal(t, LSN(0), zero.BaseLSN())
	_, ok := zero.EndOf(1)
	assert.False(t, ok)
	for _, tc := range cases {
		end, ok := tb.EndOf(tc.epoch)
		assert.Equal(t, tc.ok, ok, "epoch %d", tc.epoch)
		assert.Equal(t, tc.end, end, "epoch %d", tc.epoch)
	}
}

func TestCompact(t *testing.T) {
	// Ends: 1→10, 2→10 (empty), 3→20, 4→20 (empty), 5→30, 6 open.
	tb := mustTable(t, open(1, 0, "A"), open(2, 10, "B"), open(3, 10, "A"), open(4, 20, "B"), open(5, 20, "C"), open(6, 30, "A"))
	cases := []struct {
		name      string
		min       LSN
		max       int
		first     Epoch
		baseEpoch Epoch
		err       error
	}{
		{"nobody past anything", 9, MaxEpochs, 1, 1, nil},
		{"everyone past the first epoch and the empty one after it", 10, MaxEpochs, 3, 1, nil},
		{"between ends", 15, MaxEpochs, 3, 1, nil},
		{"past epoch 4: base epoch is 3, the oldest ending at 20", 20, MaxEpochs, 5, 3, nil},
		{"everyone at the current start", 30, MaxEpochs, 6, 5, nil},
		{"current epoch is never dropped", 1000, MaxEpochs, 6, 5, nil},
		{"forced to 2 epochs", 0, 2, 5, 3, nil},
		{"forced to 1 epoch", 0, 1, 6, 5, nil},
		{"forced drop of one epoch", 0, 5, 2, 1, nil},
		{"maxEpochs zero", 0, 0, 0, 0, ErrMaxEpochsRange},
		{"maxEpochs above cap", 0, MaxEpochs + 1, 0, 0, ErrMaxEpochsRange},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tb.Compact(tc.min, tc.max)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.NoError(t, got.Validate())
			assert.Equal(t, tc.first, got.Epochs[0].Epoch)
			assert.Equal(t, tc.baseEpoch, got.BaseEpoch)
			assert.Equal(t, tb.Current(), got.Current())
		})
	}
	t.Run("compacting twice", func(t *testing.T) {
		once, err := tb.Compact(10, MaxEpochs)
		require.NoError(t, err)
		twice, err := once.Compact(20, MaxEpochs)
		require.NoError(t, err)
		direct, err := tb.Compact(20, MaxEpochs)
		require.NoError(t, err)
		assert.Equal(t, direct, twice)
	})
	t.Run("dropping empty epochs at the base keeps the base epoch", func(t *testing.T) {
		tb := mustTable(t, open(1, 0, "A"), open(2, 0, "B"), open(3, 0, "C"), open(4, 5, "A"))
		got, err := tb.Compact(0, MaxEpochs) // epochs 1 and 2 ended at 0
		require.NoError(t, err)
		assert.Equal(t, Epoch(3), got.Epochs[0].Epoch)
		assert.Equal(t, Epoch(1), got.BaseEpoch)
		d, err := got.Diverge(1, 3, 5)
		require.NoError(t, err)
		assert.Equal(t, LSNRange{0, 3}, d.FalseProgress)
	})
	t.Run("invalid receiver", func(t *testing.T) {
		_, err := Table{}.Compact(0, 1)
		require.ErrorIs(t, err, ErrInvalidTable)
	})
}

// TestOpenAtMaxEpochs: a failover never fails because the table is full;
// the oldest epoch goes and only replicas still in it need a snapshot.
func TestOpenAtMaxEpochs(t *testing.T) {
	tb := mustTable(t, open(1, 0, "A"))
	var err error
	for e := Epoch(2); e <= MaxEpochs; e++ {
		tb, err = tb.Open(e, []string{"A", "B"}[e%2], LSN(e*10))
		require.NoError(t, err)
	}
	require.Len(t, tb.Epochs, MaxEpochs)
	tb, err = tb.Open(MaxEpochs+1, "C", 1000)
	require.NoError(t, err)
	require.Len(t, tb.Epochs, MaxEpochs)
	assert.Equal(t, Epoch(2), tb.Epochs[0].Epoch)
	assert.Equal(t, Epoch(1), tb.BaseEpoch, "epoch 1 ended at 20, the new base")

	tb, err = tb.Open(MaxEpochs+2, "A", 1001)
	require.NoError(t, err)
	assert.Equal(t, Epoch(2), tb.BaseEpoch)
	d, err := tb.Diverge(1, 15, 1001)
	require.NoError(t, err)
	assert.True(t, d.NeedsSnapshot)
	d, err = tb.Diverge(2, 35, 1001)
	require.NoError(t, err)
	assert.False(t, d.NeedsSnapshot)
	assert.Equal(t, LSN(30), d.CommonLSN)
}
