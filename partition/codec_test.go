package partition

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/quorum"
)

func sampleMeta() Meta {
	rs := []quorum.Region{"a", "b", "c"}
	return Meta{
		Epoch: 7, Role: RoleLeader, WriteRegion: "a",
		Level:   Level{Consistency: BoundedStaleness, StalenessOps: 10, StalenessTime: time.Second, StalenessHold: time.Second},
		Quorum:  quorum.WriteQuorum{Replicas: rs, WriteRegion: "a", Members: rs[:2], MinDurability: 1},
		History: []EpochRange{{1, 0}, {3, 10}, {7, 20}},
		LogBase: 5, LogBaseEpoch: 1, NeedSnapshot: true, ReadableFrom: 9,
	}
}

func TestCodecRoundTrips(t *testing.T) {
	ops := []Op{
		{LSN: 1, Epoch: 1, Key: []byte("k"), Value: []byte("v")},
		{LSN: 1 << 40, Epoch: 1 << 30, Key: []byte("k"), Value: []byte{}},
		{LSN: 3, Epoch: 2, Key: []byte("k"), Delete: true},
	}
	for _, op := range ops {
		b := EncodeLogRecord(nil, &op)
		got, err := DecodeLogRecord(op.LSN, b)
		require.NoError(t, err)
		if len(op.Value) == 0 {
			op.Value = nil
		}
		require.Equal(t, op, got)
		_, err = DecodeLogRecord(op.LSN+1, b)
		require.ErrorIs(t, err, ErrCorrupt, "a record moved to another LSN must not decode")
		c := ConflictRecord{Partition: 3, Op: op, RemovedAt: 9, Reason: ConflictOverwrite}
		cb := EncodeConflict(nil, &c)
		gotc, err := DecodeConflict(3, op.Epoch, op.LSN, cb)
		require.NoError(t, err)
		require.Equal(t, c, gotc)
	}
	m := sampleMeta()
	gm, err := DecodeMeta(EncodeMeta(nil, &m))
	require.NoError(t, err)
	require.Equal(t, m, gm)
	a := ApplyState{Applied: 10, AppliedEpoch: 2, UndoFloor: 4}
	ga, err := DecodeApplyState(EncodeApplyState(nil, &a))
	require.NoError(t, err)
	require.Equal(t, a, ga)
	kv := KV{Key: []byte("key"), Value: []byte("value"), LSN: 4, Epoch: 2}
	gkv, err := DecodeKVValue(kv.Key, EncodeKVValue(nil, &kv))
	require.NoError(t, err)
	require.Equal(t, kv, gkv)
	_, err = DecodeKVValue([]byte("other"), EncodeKVValue(nil, &kv))
	require.ErrorIs(t, err, ErrCorrupt, "a value under another key must not decode")
	u := undoRecord{Key: []byte("k"), Existed: true, Prev: KV{Key: []byte("k"), Value: []byte("old"), LSN: 2, Epoch: 1}}
	gu, err := decodeUndo(5, encodeUndo(nil, 5, &u))
	require.NoError(t, err)
	require.Equal(t, u, gu)
}

func TestCodecRejectsEveryBitFlip(t *testing.T) {
	m := sampleMeta()
	op := Op{LSN: 9, Epoch: 2, Key: []byte("key"), Value: []byte("value")}
	recs := map[string][]byte{
		"meta": EncodeMeta(nil, &m),
		"log":  EncodeLogRecord(nil, &op),
	}
	for name, b := range recs {
		for i := range b {
			for bit := 0; bit < 8; bit++ {
				bad := bytes.Clone(b)
				bad[i] ^= 1 << bit
				var err error
				if name == "meta" {
					_, err = DecodeMeta(bad)
				} else {
					_, err = DecodeLogRecord(9, bad)
				}
				require.ErrorIs(t, err, ErrCorrupt, "%s byte %d bit %d", name, i, bit)
			}
		}
	}
}

func FuzzDecodeLogRecord(f *testing.F) {
	f.Add(uint64(1), EncodeLogRecord(nil, &Op{LSN: 1, Epoch: 1, Key: []byte("k"), Value: []byte("v")}))
	f.Add(uint64(2), EncodeLogRecord(nil, &Op{LSN: 2, Epoch: 3, Key: []byte("k"), Delete: true}))
	f.Add(uint64(0), []byte{})
	f.Fuzz(func(t *testing.T, lsn uint64, b []byte) {
		op, err := DecodeLogRecord(LSN(lsn), b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		if again := EncodeLogRecord(nil, &op); !bytes.Equal(again, b) {
			t.Fatalf("not canonical: %x vs %x", again, b)
		}
	})
}

func FuzzDecodeMeta(f *testing.F) {
	m := sampleMeta()
	f.Add(EncodeMeta(nil, &m))
	m2 := Meta{Epoch: 1, Role: RoleFollower, Level: Level{Consistency: Eventual}}
	f.Add(EncodeMeta(nil, &m2))
	f.Add([]byte{fmtMeta})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMeta(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		m2, err := DecodeMeta(EncodeMeta(nil, &m))
		if err != nil {
			t.Fatalf("re-encoded meta does not decode: %v", err)
		}
		require.Equal(t, m, m2)
	})
}

func FuzzDecodeConflict(f *testing.F) {
	c := ConflictRecord{Partition: 1, Op: Op{LSN: 4, Epoch: 2, Key: []byte("k"), Value: []byte("v")}, RemovedAt: 3, Reason: ConflictTruncate}
	f.Add(uint64(2), uint64(4), EncodeConflict(nil, &c))
	f.Add(uint64(0), uint64(0), []byte{fmtConflict, 0, 0})
	f.Fuzz(func(t *testing.T, e, lsn uint64, b []byte) {
		c, err := DecodeConflict(1, Epoch(e), LSN(lsn), b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		if again := EncodeConflict(nil, &c); !bytes.Equal(again, b) {
			t.Fatalf("not canonical")
		}
	})
}

func FuzzDecodeApplyState(f *testing.F) {
	f.Add(EncodeApplyState(nil, &ApplyState{Applied: 5, AppliedEpoch: 1, UndoFloor: 2}))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := DecodeApplyState(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		if again := EncodeApplyState(nil, &a); !bytes.Equal(again, b) {
			t.Fatalf("not canonical")
		}
	})
}

func FuzzDecodeKVValue(f *testing.F) {
	f.Add([]byte("k"), EncodeKVValue(nil, &KV{Key: []byte("k"), Value: []byte("v"), LSN: 3, Epoch: 1}))
	f.Fuzz(func(t *testing.T, key, b []byte) {
		kv, err := DecodeKVValue(key, b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		if again := EncodeKVValue(nil, &kv); !bytes.Equal(again, b) {
			t.Fatalf("not canonical")
		}
	})
}

func FuzzDecodeUndo(f *testing.F) {
	f.Add(uint64(3), encodeUndo(nil, 3, &undoRecord{Key: []byte("k"), Existed: true, Prev: KV{Value: []byte("v"), LSN: 1, Epoch: 1}}))
	f.Add(uint64(3), encodeUndo(nil, 3, &undoRecord{Key: []byte("k")}))
	f.Fuzz(func(t *testing.T, lsn uint64, b []byte) {
		u, err := decodeUndo(LSN(lsn), b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		if again := encodeUndo(nil, LSN(lsn), &u); !bytes.Equal(again, b) {
			t.Fatalf("not canonical")
		}
	})
}

func TestDefaultConfigValid(t *testing.T) {
	require.NoError(t, DefaultConfig("r", 1).Validate())
	require.NoError(t, testHostConfig().Validate())
}

func TestConfigValidationNamesField(t *testing.T) {
	tests := []struct {
		field string
		mut   func(*Config)
	}{
		{"Region", func(c *Config) { c.Region = "" }},
		{"Boot", func(c *Config) { c.Boot = 0 }},
		{"MaxKeyBytes", func(c *Config) { c.MaxKeyBytes = 0 }},
		{"MaxOpBytes", func(c *Config) { c.MaxOpBytes = HardMaxOpBytes + 1 }},
		{"MaxBatchOps", func(c *Config) { c.MaxBatchOps = 0 }},
		{"MaxInflightOps", func(c *Config) { c.MaxInflightOps = c.MaxBatchOps - 1 }},
		{"MaxPendingWrites", func(c *Config) { c.MaxPendingWrites = 0 }},
		{"MaxLogOps", func(c *Config) { c.MaxLogOps = 1 }},
		{"RetransmitTimeout", func(c *Config) { c.RetransmitTimeout = c.HeartbeatInterval / 2 }},
		{"MaxContactBackoff", func(c *Config) { c.MaxContactBackoff = c.HeartbeatInterval - 1 }},
		{"MaxContactBackoff", func(c *Config) { c.MaxContactBackoff = time.Hour }},
		{"CommitTimeout", func(c *Config) { c.CommitTimeout = 1 }},
		{"SnapshotChunkBytes", func(c *Config) { c.SnapshotChunkBytes = 1 }},
		{"MaxEpochHistory", func(c *Config) { c.MaxEpochHistory = 1 }},
		{"DriftMargin", func(c *Config) { c.DriftMargin = 0.9 }},
	}
	for _, tc := range tests {
		t.Run(tc.field, func(t *testing.T) {
			c := DefaultConfig("r", 1)
			tc.mut(&c)
			err := c.Validate()
			require.ErrorIs(t, err, ErrInvalidConfig)
			require.Contains(t, err.Error(), tc.field)
		})
	}
	lv := []struct {
		field string
		l     Level
	}{
		{"Level.Consistency", Level{}},
		{"Level.StalenessOps", Level{Consistency: BoundedStaleness, StalenessTime: 1, StalenessHold: 1}},
		{"Level.StalenessTime", Level{Consistency: BoundedStaleness, StalenessOps: 1, StalenessHold: 1}},
		{"Level.StalenessHold", Level{Consistency: BoundedStaleness, StalenessOps: 1, StalenessTime: 1}},
		{"Level.StalenessOps", Level{Consistency: Strong, StalenessOps: 1}},
	}
	for _, tc := range lv {
		err := tc.l.Validate()
		require.ErrorIs(t, err, ErrInvalidConfig)
		require.Contains(t, err.Error(), tc.field)
	}
}

// TestEpochAt pins the one reading of an epoch history that the replica,
// replcheck and the simulator's acknowledged-write check share.
func TestEpochAt(t *testing.T) {
	h := []EpochRange{{2, 4}, {3, 10}, {5, 20}}
	tests := []struct {
		name string
		h    []EpochRange
		lsn  LSN
		e    Epoch
		ok   bool
	}{
		{"empty prefix in any history", nil, 0, 0, true},
		{"empty history covers nothing else", nil, 1, 0, false},
		{"at the first row's After: compacted", h, 4, 0, false},
		{"below the first row's After", h, 1, 0, false},
		{"first op of a row", h, 5, 2, true},
		{"a row's After belongs to the row before", h, 10, 2, true},
		{"after the row's After", h, 11, 3, true},
		{"last row runs to the end", h, 1 << 40, 5, true},
	}
	for _, tc := range tests {
		e, ok := EpochAt(tc.h, tc.lsn)
		require.Equal(t, tc.ok, ok, tc.name)
		require.Equal(t, tc.e, e, tc.name)
		he, hok := history(tc.h).epochAt(tc.lsn)
		require.Equal(t, [2]any{e, ok}, [2]any{he, hok}, "history.epochAt is EpochAt: %s", tc.name)
	}
}

func TestHistory(t *testing.T) {
	h := history{{1, 0}, {3, 10}, {5, 20}}
	tests := []struct {
		lsn LSN
		e   Epoch
		ok  bool
	}{{0, 0, true}, {1, 1, true}, {10, 1, true}, {11, 3, true}, {20, 3, true}, {21, 5, true}, {1000, 5, true}}
	for _, tc := range tests {
		e, ok := h.epochAt(tc.lsn)
		require.Equal(t, tc.ok, ok, "lsn %d", tc.lsn)
		require.Equal(t, tc.e, e, "lsn %d", tc.lsn)
	}
	require.Equal(t, LSN(10), h.endOf(1, 30))
	require.Equal(t, LSN(20), h.endOf(3, 30))
	require.Equal(t, LSN(20), h.endOf(4, 30))
	require.Equal(t, LSN(30), h.endOf(5, 30))
	require.Equal(t, history{{1, 0}, {3, 10}}, h.clone().truncate(20))
	require.Equal(t, history{{1, 0}}, h.clone().truncate(10))
	require.Equal(t, history{{3, 10}, {5, 20}}, h.clone().trim(15, 8))
	require.Equal(t, history{{5, 20}}, h.clone().trim(15, 1))
	_, ok := history{{3, 10}}.epochAt(5)
	require.False(t, ok)
	require.Equal(t, history{{1, 0}, {4, 5}}, history{{1, 0}, {3, 5}}.push(4, 5), "an epoch without ops is replaced")
	require.True(t, h.valid())
	require.False(t, history{{3, 0}, {2, 5}}.valid())
}
