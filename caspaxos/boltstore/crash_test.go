package boltstore

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/storetest"
)

// randomBatch draws a batch of puts and deletes over a small key space,
// with values big enough to spread over many pages and overflow pages.
func randomBatch(rng *rand.Rand, n uint64) caspaxos.Batch {
	var b caspaxos.Batch
	for range 1 + rng.IntN(3) {
		data := make([]byte, rng.IntN(600))
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		if rng.IntN(20) == 0 {
			data = make([]byte, 5000+rng.IntN(5000)) // overflow pages
		}
		bal := caspaxos.Ballot{Counter: n, Proposer: caspaxos.NodeID(1 + rng.Uint64N(3))}
		b.Put = append(b.Put, caspaxos.Record{
			Key:      fmt.Sprintf("partition/%03d", rng.IntN(120)),
			Promised: bal, Accepted: bal,
			Value: caspaxos.Value{Version: n, Data: data},
		})
	}
	if rng.IntN(4) == 0 {
		b.Delete = append(b.Delete, fmt.Sprintf("partition/%03d", rng.IntN(120)))
	}
	if rng.IntN(10) == 0 {
		b.AgeFloor = n
	}
	return b
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.Create(dst)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
}

// TestCrashCopyWhileOpen: the file as it stands right after Apply returns
// (no clean Close, store still open) reopens to exactly the applied state.
// That is what a process kill at that instant leaves behind.
func TestCrashCopyWhileOpen(t *testing.T) {
	for _, l := range testLayouts() {
		t.Run(l.name, func(t *testing.T) { testCrashCopyWhileOpen(t, l.opts) })
	}
}

func testCrashCopyWhileOpen(t *testing.T, opts Options) {
	dir := t.TempDir()
	path := filepath.Join(dir, "acceptor.db")
	s, err := Open(path, opts)
	require.NoError(t, err)
	defer s.Close()
	rng := rand.New(rand.NewPCG(3, 5))
	h := storetest.NewHistory()
	for i := range 150 {
		b := randomBatch(rng, uint64(i+1))
		require.NoError(t, s.Apply(b))
		h.Apply(b)
		if i%15 != 14 {
			continue
		}
		crashed := filepath.Join(dir, fmt.Sprintf("crash-%d.db", i))
		copyFile(t, path, crashed)
		c, err := Open(crashed, opts)
		require.NoError(t, err)
		st, err := c.Load()
		require.NoError(t, err)
		storetest.AssertState(t, h.Latest(), st)
		require.NoError(t, c.Close())
	}
	if opts.Layout == LayoutLog && opts.CompactSlack == 1 {
		require.Positive(t, s.lg.lo, "the crashes happened after compactions")
	}
}

// damagedFixture builds a store through a random history and returns the
// file's bytes (taken while open, like a crash) and the history.
func damagedFixture(t *testing.T, opts Options) ([]byte, *storetest.History) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "acceptor.db")
	s, err := Open(path, opts)
	require.NoError(t, err)
	defer s.Close()
	rng := rand.New(rand.NewPCG(17, 19))
	h := storetest.NewHistory()
	for i := range 150 {
		b := randomBatch(rng, uint64(i+1))
		require.NoError(t, s.Apply(b))
		h.Apply(b)
	}
	if opts.Layout == LayoutLog && opts.CompactSlack == 1 {
		require.Positive(t, s.lg.lo, "the fixture's history includes compaction")
	}
	img, err := os.ReadFile(path)
	require.NoError(t, err)
	return img, h
}

// openDamaged writes img to a fresh file and opens it. The outcome must be
// ErrCorrupt naming the file, or a store whose state is in the history.
// It returns the history index recovered, or -1 on a clean refusal.
func openDamaged(t *testing.T, img []byte, h *storetest.History, what string) int {
	t.Helper()
	path := filepath.Join(t.TempDir(), "damaged.db")
	require.NoError(t, os.WriteFile(path, img, 0o600))
	s, err := Open(path, Options{})
	if err != nil {
		require.ErrorIs(t, err, caspaxos.ErrCorrupt, what)
		require.Contains(t, err.Error(), path, what)
		return -1
	}
	defer s.Close()
	st, err := s.Load()
	require.NoError(t, err, what)
	i := h.Index(st)
	require.GreaterOrEqual(t, i, 0, "%s: recovered a state the store never held", what)
	return i
}

// TestCrashDamagedFile damages one crashed file image in many ways; each
// subtest states what recovery may return.
func TestCrashDamagedFile(t *testing.T) {
	for _, l := range testLayouts() {
		t.Run(l.name, func(t *testing.T) {
			img, h := damagedFixture(t, l.opts)
			t.Run("truncated", func(t *testing.T) { testTruncated(t, img, h) })
			t.Run("flipped bytes", func(t *testing.T) { testFlippedBytes(t, img, h) })
			t.Run("torn meta falls back", func(t *testing.T) { testTornMetaFallsBack(t, img, h) })
		})
	}
}

// testTruncated cuts the file at many lengths: Open must refuse it
// cleanly or recover a state the store held, never panic or fault.
func testTruncated(t *testing.T, img []byte, h *storetest.History) {
	const page = 4096
	lengths := []int{0, 1, 15, 16, 80, page - 1, page, page + 80, 2 * page, 2*page + 1, 3 * page, 4 * page, len(img) - 1}
	for l := 5 * page; l < len(img); l += page * 3 {
		lengths = append(lengths, l, l-1)
	}
	refused, recovered := 0, 0
	for _, l := range lengths {
		if l < 0 || l > len(img) {
			continue
		}
		if openDamaged(t, img[:l], h, fmt.Sprintf("truncated to %d of %d", l, len(img))) < 0 {
			refused++
		} else {
			recovered++
		}
	}
	t.Logf("file %d bytes: %d truncations refused, %d recovered", len(img), refused, recovered)
	assert.Positive(t, refused)

	// Growing the file (a torn preallocation) loses nothing.
	grown := append(append([]byte(nil), img...), make([]byte, 3*page)...)
	assert.Equal(t, h.Len()-1, openDamaged(t, grown, h, "grown"))
}

// testFlippedBytes flips bytes at random offsets and in every page's
// header and first elements: Open refuses or recovers a state the store
// held. (A separate run of 6000 random multi-byte damages, truncations
// included, found no panic, hang or invented state.)
func testFlippedBytes(t *testing.T, img []byte, h *storetest.History) {
	rng := rand.New(rand.NewPCG(23, 29))
	const page = 4096
	var offsets []int
	for p := 0; p*page < len(img); p++ {
		offsets = append(offsets, p*page+8+rng.IntN(8), p*page+pageHeaderBytes+rng.IntN(64)) // header flags/count/overflow, first bytes after
	}
	for range 80 {
		offsets = append(offsets, rng.IntN(len(img)))
	}
	outcomes := map[string]int{}
	for _, off := range offsets {
		damaged := append([]byte(nil), img...)
		damaged[off] ^= byte(1 << rng.IntN(8))
		switch i := openDamaged(t, damaged, h, fmt.Sprintf("flip at %d", off)); {
		case i < 0:
			outcomes["refused"]++
		case i == h.Len()-1:
			outcomes["latest"]++
		default:
			outcomes["earlier"]++
		}
	}
	t.Logf("file %d bytes, %d flips: %v", len(img), len(offsets), outcomes)
	assert.Positive(t, outcomes["refused"])
}

// testTornMetaFallsBack: a damaged current meta page (a torn meta write)
// makes bbolt fall back to the previous transaction, which is the state
// before the last Apply: prefix-consistent.
func testTornMetaFallsBack(t *testing.T, img []byte, h *storetest.History) {
	cur0 := func(b []byte) uint64 { m, _ := parseMeta(b[pageHeaderBytes:]); return m.txid }
	metaOff := 0
	if cur0(img[4096:]) > cur0(img) {
		metaOff = 4096
	}
	damaged := append([]byte(nil), img...)
	damaged[metaOff+pageHeaderBytes+50] ^= 0xff // inside txid: checksum fails
	assert.Equal(t, h.Len()-2, openDamaged(t, damaged, h, "torn meta"))
}

// TestCrashStalePage: a lost write leaves one page of the file as it was
// earlier (bbolt pages carry no checksum). Each page of a later image is
// replaced in turn by the same page of an earlier one. Open must refuse
// the file or recover a state the store held; with a data page stale it
// may only recover the latest state (the page was unreachable) or refuse:
// a stale page must not roll records back. Only a stale meta page may
// fall back to an earlier transaction, which is bbolt's design.
func TestCrashStalePage(t *testing.T) {
	for _, l := range testLayouts() {
		t.Run(l.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "acceptor.db")
			s, err := Open(path, l.opts)
			require.NoError(t, err)
			defer s.Close()
			rng := rand.New(rand.NewPCG(31, 37))
			h := storetest.NewHistory()
			var earlier [][]byte
			for i := range 150 {
				b := randomBatch(rng, uint64(i+1))
				require.NoError(t, s.Apply(b))
				h.Apply(b)
				if i == 100 || i == 140 || i == 148 {
					img, err := os.ReadFile(path)
					require.NoError(t, err)
					earlier = append(earlier, img)
				}
			}
			img, err := os.ReadFile(path)
			require.NoError(t, err)
			const page = 4096
			outcomes := map[string]int{}
			for _, old := range earlier {
				for p := 2; (p+1)*page <= min(len(img), len(old)); p++ {
					if string(img[p*page:(p+1)*page]) == string(old[p*page:(p+1)*page]) {
						continue
					}
					damaged := append([]byte(nil), img...)
					copy(damaged[p*page:], old[p*page:(p+1)*page])
					switch i := openDamaged(t, damaged, h, fmt.Sprintf("stale page %d", p)); {
					case i < 0:
						outcomes["refused"]++
					case i == h.Len()-1:
						outcomes["latest"]++
					default:
						outcomes["rolled back"]++
						t.Errorf("stale page %d rolled the store back to state %d of %d", p, i, h.Len()-1)
					}
				}
			}
			t.Logf("%v", outcomes)
			assert.Positive(t, outcomes["refused"])
		})
	}
}
