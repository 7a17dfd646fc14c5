package boltstore

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/storetest"
)

// TestLogCompactionBounds drives the log layout through workloads that
// stress compaction and checks its bounds after every commit: no commit
// compacts more than CompactChunk entries, the log stays within a small
// factor of the live keys, the file stops growing, and a reopen recovers
// exactly the applied state.
func TestLogCompactionBounds(t *testing.T) {
	const (
		slack   = 32
		chunk   = minCompactChunk
		commits = 1200
	)
	rec := func(key string, n uint64) caspaxos.Record {
		b := caspaxos.Ballot{Counter: n, Proposer: 1}
		return caspaxos.Record{Key: key, Promised: b, Accepted: b, Value: caspaxos.Value{Version: n, Data: make([]byte, 40)}}
	}
	tests := []struct {
		name  string
		batch func(rng *rand.Rand, n uint64) caspaxos.Batch
	}{
		{
			// Cold keys written once sit at the head of the log: the
			// first compaction passes find them all live.
			name: "one hot key over 300 cold",
			batch: func(_ *rand.Rand, n uint64) caspaxos.Batch {
				if n <= 300 {
					return caspaxos.Batch{Put: []caspaxos.Record{rec(fmt.Sprintf("cold/%03d", n), n)}}
				}
				return caspaxos.Batch{Put: []caspaxos.Record{rec("hot", n)}}
			},
		},
		{
			name: "uniform over 200 keys, 30 per commit",
			batch: func(rng *rand.Rand, n uint64) caspaxos.Batch {
				var b caspaxos.Batch
				for range 30 {
					b.Put = append(b.Put, rec(fmt.Sprintf("k/%03d", rng.IntN(200)), n))
				}
				return b
			},
		},
		{
			name: "puts and deletes, erase floor under the empty key",
			batch: func(rng *rand.Rand, n uint64) caspaxos.Batch {
				b := caspaxos.Batch{Put: []caspaxos.Record{rec("", n)}}
				for range 5 {
					k := fmt.Sprintf("k/%03d", rng.IntN(100))
					if rng.IntN(3) == 0 {
						b.Delete = append(b.Delete, k)
					} else {
						b.Put = append(b.Put, rec(k, n))
					}
				}
				return b
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "acceptor.db")
			opts := Options{Layout: LayoutLog, CompactSlack: slack, CompactChunk: chunk}
			s, err := Open(path, opts)
			require.NoError(t, err)
			defer s.Close()
			rng := rand.New(rand.NewPCG(1, 2))
			h := storetest.NewHistory()
			var maxEntries, maxOver uint64
			var sizeMid int64
			for n := uint64(1); n <= commits; n++ {
				b := tt.batch(rng, n)
				require.NoError(t, s.Apply(b))
				h.Apply(b)
				ls := s.lg
				require.LessOrEqual(t, ls.lastCompacted, chunk, "commit %d compacted beyond the chunk bound", n)
				live := uint64(len(ls.index))
				require.Equal(t, len(h.Latest().Records), int(live), "index size = live keys")
				maxEntries = max(maxEntries, ls.entries())
				if bound := 2*live + slack; ls.entries() > bound {
					maxOver = max(maxOver, ls.entries()-bound)
				}
				// The log may overshoot 2x live + slack only while a pass
				// rewrites live entries: by at most a quarter of the live
				// keys plus one chunk (see compactChunk).
				require.LessOrEqual(t, ls.entries(), 2*live+slack+live/4+chunk+uint64(len(b.Put)+len(b.Delete)), "commit %d", n)
				if n == commits/3 {
					fi, err := os.Stat(path)
					require.NoError(t, err)
					sizeMid = fi.Size()
				}
			}
			fi, err := os.Stat(path)
			require.NoError(t, err)
			t.Logf("live %d, log entries %d (max %d, max over 2x live + slack %d), file %d bytes (%d at a third)",
				len(s.lg.index), s.lg.entries(), maxEntries, maxOver, fi.Size(), sizeMid)
			assert.LessOrEqual(t, fi.Size(), 2*sizeMid, "the file stops growing once compaction runs")
			require.NoError(t, s.Close())

			r, err := Open(path, opts)
			require.NoError(t, err)
			defer r.Close()
			st, err := r.Load()
			require.NoError(t, err)
			storetest.AssertState(t, h.Latest(), st)
		})
	}
}

// TestOpenWrongLayout: an explicit layout that contradicts the file is
// refused with ErrWrongLayout naming the file, and the file is untouched;
// LayoutAuto opens either.
func TestOpenWrongLayout(t *testing.T) {
	tests := []struct {
		name       string
		create     Layout
		ask        Layout
		wantErr    bool
		wantLayout Layout
	}{
		{name: "log file, in-place asked", create: LayoutLog, ask: LayoutInPlace, wantErr: true},
		{name: "in-place file, log asked", create: LayoutInPlace, ask: LayoutLog, wantErr: true},
		{name: "log file, auto", create: LayoutLog, ask: LayoutAuto, wantLayout: LayoutLog},
		{name: "in-place file, auto", create: LayoutInPlace, ask: LayoutAuto, wantLayout: LayoutInPlace},
		{name: "new file, auto", create: LayoutAuto, ask: LayoutAuto, wantLayout: LayoutLog},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "acceptor.db")
			rec := caspaxos.Record{Key: "k", Value: caspaxos.Value{Version: 1, Data: []byte("v")}}
			if tt.create != LayoutAuto {
				s, err := Open(path, Options{Layout: tt.create})
				require.NoError(t, err)
				require.NoError(t, s.Apply(caspaxos.Batch{Put: []caspaxos.Record{rec}}))
				require.NoError(t, s.Close())
			}
			before, _ := os.ReadFile(path)
			s, err := Open(path, Options{Layout: tt.ask})
			if tt.wantErr {
				require.ErrorIs(t, err, ErrWrongLayout)
				assert.NotErrorIs(t, err, caspaxos.ErrCorrupt)
				assert.Contains(t, err.Error(), path)
				after, rerr := os.ReadFile(path)
				require.NoError(t, rerr)
				assert.Equal(t, before, after, "Open must not modify a file it refuses")
				return
			}
			require.NoError(t, err)
			defer s.Close()
			assert.Equal(t, tt.wantLayout, s.layout)
			st, err := s.Load()
			require.NoError(t, err)
			if tt.create != LayoutAuto {
				storetest.AssertState(t, caspaxos.State{Records: []caspaxos.Record{rec}}, st)
			}
		})
	}
}

func TestParseLayout(t *testing.T) {
	for _, l := range []Layout{LayoutAuto, LayoutLog, LayoutInPlace} {
		got, err := ParseLayout(l.String())
		require.NoError(t, err)
		assert.Equal(t, l, got)
	}
	_, err := ParseLayout("sideways")
	assert.ErrorIs(t, err, caspaxos.ErrInvalidConfig)
}

func TestLogEntryRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		enc  []byte
		want logEntry
	}{
		{
			name: "put",
			enc:  appendPutEntry(nil, 7, caspaxos.Record{Key: "k", Value: caspaxos.Value{Version: 3, Data: []byte("v")}}),
			want: logEntry{put: true, key: "k", record: caspaxos.Record{Key: "k", Value: caspaxos.Value{Version: 3, Data: []byte("v")}}},
		},
		{name: "put of the empty key", enc: appendPutEntry(nil, 7, caspaxos.Record{}), want: logEntry{put: true}},
		{name: "delete", enc: appendDeleteEntry(nil, 7, "k"), want: logEntry{key: "k"}},
		{name: "delete of the empty key", enc: appendDeleteEntry(nil, 7, ""), want: logEntry{}},
		{name: "re-sequenced", enc: reseqEntry(nil, 7, appendDeleteEntry(nil, 3, "k")), want: logEntry{key: "k"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeLogEntry(7, tt.enc)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			_, err = decodeLogEntry(8, tt.enc)
			assert.ErrorIs(t, err, caspaxos.ErrCorrupt, "an entry does not verify at another sequence number")
		})
	}
}

// FuzzDecodeLogEntry: log entries come from a file that may be damaged.
// Decoding never panics, and what decodes re-encodes to an entry that
// decodes the same.
func FuzzDecodeLogEntry(f *testing.F) {
	f.Add(uint64(0), appendPutEntry(nil, 0, caspaxos.Record{Key: "k", Value: caspaxos.Value{Version: 1, Data: []byte("v")}}))
	f.Add(uint64(5), appendDeleteEntry(nil, 5, "partition/1"))
	f.Add(uint64(1), []byte{entryDelete, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 0})
	f.Add(uint64(1), []byte{})
	f.Fuzz(func(t *testing.T, seq uint64, b []byte) {
		e, err := decodeLogEntry(seq, b)
		if err != nil {
			require.ErrorIs(t, err, caspaxos.ErrCorrupt)
			return
		}
		var enc []byte
		if e.put {
			require.Equal(t, e.key, e.record.Key)
			enc = appendPutEntry(nil, seq, e.record)
		} else {
			enc = appendDeleteEntry(nil, seq, e.key)
		}
		again, err := decodeLogEntry(seq, enc)
		require.NoError(t, err)
		require.Equal(t, e, again)
	})
}

// FuzzDecodeLogRange: the log range comes from the file too.
func FuzzDecodeLogRange(f *testing.F) {
	f.Add(encodeLogRange(0, 0))
	f.Add(encodeLogRange(3, 1<<40))
	f.Add([]byte{logRangeFormatV1})
	f.Fuzz(func(t *testing.T, b []byte) {
		lo, hi, err := decodeLogRange(b)
		if err != nil {
			require.ErrorIs(t, err, caspaxos.ErrCorrupt)
			return
		}
		require.LessOrEqual(t, lo, hi)
		require.Equal(t, b, encodeLogRange(lo, hi))
	})
}

// FuzzDecodeDigest: the in-place layout's digest comes from the file too.
func FuzzDecodeDigest(f *testing.F) {
	f.Add(digest{}.encode())
	f.Add(digest{count: 3, xor: 0xfeed}.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := decodeDigest(b)
		if err != nil {
			require.ErrorIs(t, err, caspaxos.ErrCorrupt)
			return
		}
		require.Equal(t, b, d.encode())
	})
}

// TestLogCompactionByteBound: with large records, a commit compacts no
// more than MaxGroupBytes of entries (plus the one that crosses it), and
// compaction still keeps the log bounded.
func TestLogCompactionByteBound(t *testing.T) {
	const (
		maxBytes  = 2000
		dataBytes = 700 // an entry is ~720 bytes: 3 entries cross the bound
		keys      = 10
	)
	path := filepath.Join(t.TempDir(), "acceptor.db")
	opts := Options{Layout: LayoutLog, CompactSlack: 1, CompactChunk: minCompactChunk, MaxGroupBytes: maxBytes}
	s, err := Open(path, opts)
	require.NoError(t, err)
	defer s.Close()
	h := storetest.NewHistory()
	maxChunk := 0
	for n := uint64(1); n <= 400; n++ {
		r := caspaxos.Record{Key: fmt.Sprintf("k/%d", n%keys), Value: caspaxos.Value{Version: n, Data: make([]byte, dataBytes)}}
		b := caspaxos.Batch{Put: []caspaxos.Record{r}}
		require.NoError(t, s.Apply(b))
		h.Apply(b)
		maxChunk = max(maxChunk, s.lg.lastCompacted)
		require.LessOrEqual(t, s.lg.lastCompacted, 3, "commit %d", n)
		require.LessOrEqual(t, s.lg.entries(), uint64(2*keys+1+4), "commit %d", n)
	}
	assert.Equal(t, 3, maxChunk)
	require.NoError(t, s.Close())
	r, err := Open(path, opts)
	require.NoError(t, err)
	defer r.Close()
	st, err := r.Load()
	require.NoError(t, err)
	storetest.AssertState(t, h.Latest(), st)
}
