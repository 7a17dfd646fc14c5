package partition

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMemKVMatchesMap drives memKV and a plain map with the same random
// sets, deletes, range deletes and rolled-back batches, and compares their
// ordered contents (forward and reverse) after every step.
func TestMemKVMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	// Keys share 6-byte bucket prefixes, as the store's keys do; their
	// tails vary in length around the 8 bytes a key word covers (short
	// keys, zero bytes, long keys with equal words).
	tails := []string{"", "\x00", "\x00\x00", "a", "a\x00", "ab", "abcdefgh", "abcdefgh\x00", "abcdefghi", "abcdefghj", "abcdefgh\x00\x01", "abcdefg"}
	key := func() string {
		switch rng.IntN(3) {
		case 0:
			return fmt.Sprintf("p%d", rng.IntN(3)) // shorter than a bucket prefix
		case 1:
			return fmt.Sprintf("p%05d", rng.IntN(3)) + tails[rng.IntN(len(tails))]
		}
		return fmt.Sprintf("p%05d/%03d", rng.IntN(3), rng.IntN(60))
	}
	kv := memKV{buckets: map[uint64]*memBucket{}}
	ref := map[string]string{}
	check := func(step int) {
		var fwd, rev []string
		kv.each([]byte("p"), []byte("q"), false, func(k string, v []byte) bool { fwd = append(fwd, k+"="+string(v)); return true })
		kv.each([]byte("p"), []byte("q"), true, func(k string, v []byte) bool { rev = append(rev, k+"="+string(v)); return true })
		var want []string
		for _, k := range slices.Sorted(maps.Keys(ref)) {
			want = append(want, k+"="+ref[k])
		}
		require.Equal(t, want, fwd, "step %d", step)
		slices.Reverse(want)
		require.Equal(t, want, rev, "step %d (reverse)", step)
	}
	for step := range 3000 {
		switch op := rng.IntN(10); {
		case op < 5:
			k, v := key(), fmt.Sprint(step)
			require.NoError(t, kv.Set([]byte(k), []byte(v)))
			ref[k] = v
		case op < 7:
			k := key()
			require.NoError(t, kv.Delete([]byte(k)))
			delete(ref, k)
		case op < 8:
			lo, hi := key(), key()
			require.NoError(t, kv.DeleteRange([]byte(lo), []byte(hi)))
			for k := range ref {
				if k >= lo && k < hi {
					delete(ref, k)
				}
			}
		default:
			// A batch of changes, then a rollback: nothing may remain.
			b := &memBatch{kv: &kv}
			for range 1 + rng.IntN(8) {
				switch rng.IntN(3) {
				case 0:
					require.NoError(t, b.Set([]byte(key()), []byte("x")))
				case 1:
					require.NoError(t, b.Delete([]byte(key())))
				default:
					lo, hi := key(), key()
					require.NoError(t, b.DeleteRange([]byte(lo), []byte(hi)))
				}
			}
			b.rollback()
		}
		check(step)
		if k := key(); true {
			v, ok, err := kv.Get([]byte(k))
			require.NoError(t, err)
			w, wok := ref[k]
			require.Equal(t, wok, ok, "get %s", k)
			require.Equal(t, w, string(v))
		}
	}
}

// TestPrefixListMatchesSortedSlice: the chunked prefix set keeps order
// and answers range queries like a sorted slice, across chunk splits.
func TestPrefixListMatchesSortedSlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var l prefixList
	var ref []string
	for range 5000 {
		s := fmt.Sprintf("%06d", rng.IntN(1_000_000))
		if i, found := slices.BinarySearch(ref, s); !found {
			ref = slices.Insert(ref, i, s)
			l.insert(s)
		}
	}
	require.Greater(t, len(l.chunks), 4, "no chunk was split")
	require.Equal(t, ref, l.between("", "999999999", nil))
	for range 200 {
		lo, hi := fmt.Sprintf("%06d", rng.IntN(1_000_000)), fmt.Sprintf("%06d", rng.IntN(1_000_000))
		var want []string
		for _, s := range ref {
			if s >= lo && s < hi {
				want = append(want, s)
			}
		}
		require.Equal(t, want, l.between(lo, hi, nil), "[%s, %s)", lo, hi)
	}
	c := l.clone()
	c.insert("zzzzzz")
	require.Equal(t, ref, l.between("", "999999999", nil), "a clone shares chunks")
}

// BenchmarkMemKVCommitShape is a drill's store traffic on one node: in
// random partition order (thousands of partitions, so each bucket is cold
// in the cache), append a log record and overwrite the client's key in a
// state section that also holds eight preloaded keys.
func BenchmarkMemKVCommitShape(b *testing.B) {
	const parts = 8192
	kv := memKV{buckets: map[uint64]*memBucket{}}
	v := make([]byte, 64)
	var k []byte
	for p := ID(1); p <= parts; p++ {
		for i := range 8 {
			k = AppendKVKey(k[:0], p, fmt.Appendf(nil, "pre/%06d", i))
			kv.set(string(k), v)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	lsn := make([]LSN, parts+1)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		p := ID(1 + rng.IntN(parts))
		lsn[p]++
		k = AppendLogKey(k[:0], p, lsn[p])
		kv.swap(string(k), v)
		k = AppendKVKey(k[:0], p, []byte("k"))
		kv.swap(string(k), v)
	}
}
