package pebblestore

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/storetest"
)

// crash simulates power loss on a strict in-memory FS: everything not
// synced is gone. Close runs with syncs ignored, so nothing it flushes
// becomes durable either (the usage pebble's vfs.NewStrictMem documents).
func crash(t *testing.T, fs *vfs.MemFS, s *Store) {
	t.Helper()
	fs.SetIgnoreSyncs(true)
	require.NoError(t, s.Close())
	fs.ResetToSyncedState()
	fs.SetIgnoreSyncs(false)
}

func randomBatch(rng *rand.Rand, n uint64) caspaxos.Batch {
	var b caspaxos.Batch
	for range 1 + rng.IntN(3) {
		data := make([]byte, rng.IntN(300))
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		bal := caspaxos.Ballot{Counter: n, Proposer: caspaxos.NodeID(1 + rng.Uint64N(3))}
		b.Put = append(b.Put, caspaxos.Record{
			Key:      fmt.Sprintf("partition/%03d", rng.IntN(80)),
			Promised: bal, Accepted: bal,
			Value: caspaxos.Value{Version: n, Data: data},
		})
	}
	if rng.IntN(4) == 0 {
		b.Delete = append(b.Delete, fmt.Sprintf("partition/%03d", rng.IntN(80)))
	}
	if rng.IntN(10) == 0 {
		b.AgeFloor = n
	}
	return b
}

// TestCrashRecoversExactlyWhatWasSynced: after each simulated power loss
// the store holds every acknowledged batch, and nothing else.
func TestCrashRecoversExactlyWhatWasSynced(t *testing.T) {
	fs := vfs.NewStrictMem()
	const dir = "/acceptor"
	rng := rand.New(rand.NewPCG(41, 43))
	h := storetest.NewHistory()
	var n uint64
	for cycle := range 5 {
		s, err := Open(dir, Options{FS: fs})
		require.NoError(t, err, "cycle %d", cycle)
		st, err := s.Load()
		require.NoError(t, err)
		storetest.AssertState(t, h.Latest(), st)
		for range 30 {
			n++
			b := randomBatch(rng, n)
			require.NoError(t, s.Apply(b))
			h.Apply(b)
		}
		crash(t, fs, s)
	}
}

// TestCrashConcurrentAppliesSurvive: acknowledged Apply calls from many
// goroutines (sharing WAL syncs) all survive a power loss right after.
func TestCrashConcurrentAppliesSurvive(t *testing.T) {
	fs := vfs.NewStrictMem()
	const dir = "/acceptor"
	s, err := Open(dir, Options{FS: fs})
	require.NoError(t, err)
	const writers, perWriter = 32, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*perWriter)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				r := caspaxos.Record{Key: fmt.Sprintf("w%02d/%d", w, i), Value: caspaxos.Value{Version: uint64(i + 1), Data: []byte("x")}}
				if err := s.Apply(caspaxos.Batch{Put: []caspaxos.Record{r}}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	crash(t, fs, s)
	s, err = Open(dir, Options{FS: fs})
	require.NoError(t, err)
	defer s.Close()
	st, err := s.Load()
	require.NoError(t, err)
	assert.Len(t, st.Records, writers*perWriter)
}

// TestCrashHarnessDropsUnsynced is the canary for the two tests above: a
// write committed without sync must vanish in a simulated crash, or the
// harness proves nothing.
func TestCrashHarnessDropsUnsynced(t *testing.T) {
	fs := vfs.NewStrictMem()
	const dir = "/acceptor"
	s, err := Open(dir, Options{FS: fs})
	require.NoError(t, err)
	require.NoError(t, s.Apply(caspaxos.Batch{Put: []caspaxos.Record{{Key: "synced"}}}))
	unsynced := caspaxos.EncodeRecord(nil, caspaxos.Record{Key: "unsynced"})
	require.NoError(t, s.db.Set([]byte("runsynced"), unsynced, pebble.NoSync))
	st, err := s.Load()
	require.NoError(t, err)
	require.Len(t, st.Records, 2, "visible before the crash")
	crash(t, fs, s)

	s, err = Open(dir, Options{FS: fs})
	require.NoError(t, err)
	defer s.Close()
	st, err = s.Load()
	require.NoError(t, err)
	require.Len(t, st.Records, 1)
	assert.Equal(t, "synced", st.Records[0].Key)
}

// walFixture writes a random history to an on-disk store and closes it;
// pebble does not flush the memtable on Close, so the records live in the
// WAL. It returns the dir, the WAL path and the history.
func walFixture(t *testing.T) (string, string, *storetest.History) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "acceptor")
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(47, 53))
	h := storetest.NewHistory()
	for i := range 80 {
		b := randomBatch(rng, uint64(i+1))
		require.NoError(t, s.Apply(b))
		h.Apply(b)
	}
	require.NoError(t, s.Close())
	var wal string
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			wal = filepath.Join(dir, e.Name()) // the newest sorts last
		}
	}
	require.NotEmpty(t, wal)
	return dir, wal, h
}

// copyDir copies a store directory so each damage variant starts fresh.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy")
	require.NoError(t, os.CopyFS(dst, os.DirFS(src)))
	return dst
}

// openDamaged opens a damaged copy: it must fail with ErrCorrupt naming the
// dir, or recover a state the store held. It returns the history index.
func openDamaged(t *testing.T, dir string, h *storetest.History, what string) int {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		require.ErrorIs(t, err, caspaxos.ErrCorrupt, what)
		require.Contains(t, err.Error(), dir, what)
		return -1
	}
	defer s.Close()
	st, err := s.Load()
	require.NoError(t, err, what)
	i := h.Index(st)
	require.GreaterOrEqual(t, i, 0, "%s: recovered a state the store never held", what)
	return i
}

// TestCrashTornWAL cuts the WAL at many lengths (a crash mid-append) and
// flips bytes in it: recovery yields a state the store held (a prefix of
// the history) or a clean ErrCorrupt, never a panic or an invented record.
func TestCrashTornWAL(t *testing.T) {
	src, wal, h := walFixture(t)
	img, err := os.ReadFile(wal)
	require.NoError(t, err)
	rel, err := filepath.Rel(src, wal)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(59, 61))

	type damage struct {
		what string
		edit func([]byte) []byte
	}
	var damages []damage
	for _, l := range []int{0, 1, 7, len(img) / 3, len(img) / 2, len(img) - 1} {
		damages = append(damages, damage{fmt.Sprintf("truncate to %d of %d", l, len(img)), func(b []byte) []byte { return b[:l] }})
	}
	for range 6 {
		off := rng.IntN(len(img))
		damages = append(damages, damage{fmt.Sprintf("flip at %d of %d", off, len(img)), func(b []byte) []byte {
			b[off] ^= 0x40
			return b
		}})
	}
	outcomes := map[string]int{}
	for _, d := range damages {
		dir := copyDir(t, src)
		require.NoError(t, os.WriteFile(filepath.Join(dir, rel), d.edit(append([]byte(nil), img...)), 0o600))
		switch i := openDamaged(t, dir, h, d.what); {
		case i < 0:
			outcomes["refused"]++
		case i == h.Len()-1:
			outcomes["latest"]++
		default:
			outcomes["prefix"]++
		}
	}
	t.Logf("WAL %d bytes: %v", len(img), outcomes)
	assert.Positive(t, outcomes["prefix"], "a torn WAL tail recovers a prefix")
}
