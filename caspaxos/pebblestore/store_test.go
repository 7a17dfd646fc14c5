package pebblestore

import (
	"bytes"
	"context"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/storetest"
)

func openAt(t *testing.T, dir string) caspaxos.Store {
	t.Helper()
	s, err := Open(filepath.Join(dir, "acceptor"), Options{})
	require.NoError(t, err)
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, openAt)
}

// rawPebble writes keys into a pebble database directly, for databases
// the store must refuse.
func rawPebble(t *testing.T, dir string, kv map[string][]byte) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{Logger: slogLogger{log: slog.New(slog.DiscardHandler)}})
	require.NoError(t, err)
	for k, v := range kv {
		require.NoError(t, db.Set([]byte(k), v, pebble.Sync))
	}
	require.NoError(t, db.Close())
}

// validStore creates a store with one record, then writes kv over it raw.
func validStore(t *testing.T, dir string, kv map[string][]byte, del ...string) {
	t.Helper()
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	require.NoError(t, s.Apply(caspaxos.Batch{Put: []caspaxos.Record{{Key: "k", Value: caspaxos.Value{Version: 1, Data: []byte("v")}}}, AgeFloor: 3}))
	require.NoError(t, s.Close())
	rawPebble(t, dir, kv)
	if len(del) > 0 {
		db, err := pebble.Open(dir, &pebble.Options{Logger: slogLogger{log: slog.New(slog.DiscardHandler)}})
		require.NoError(t, err)
		for _, k := range del {
			require.NoError(t, db.Delete([]byte(k), pebble.Sync))
		}
		require.NoError(t, db.Close())
	}
}

func TestOpenRejects(t *testing.T) {
	tests := []struct {
		name string
		make func(t *testing.T, dir string) string // returns the path to open
		want error
		msg  string
	}{
		{
			name: "empty dir name",
			make: func(t *testing.T, dir string) string { return "" },
			want: caspaxos.ErrInvalidConfig,
		},
		{
			name: "a file",
			make: func(t *testing.T, dir string) string {
				p := filepath.Join(dir, "file")
				require.NoError(t, os.WriteFile(p, []byte("x"), 0o600))
				return p
			},
			want: caspaxos.ErrInvalidConfig,
			msg:  "not a directory",
		},
		{
			name: "foreign files",
			make: func(t *testing.T, dir string) string {
				require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello"), 0o600))
				return dir
			},
			want: caspaxos.ErrCorrupt,
			msg:  "holds files but no pebble database",
		},
		{
			name: "foreign pebble database",
			make: func(t *testing.T, dir string) string {
				rawPebble(t, dir, map[string][]byte{"log/1": []byte("entry")})
				return dir
			},
			want: caspaxos.ErrCorrupt,
			msg:  `unexpected key "log/1"`,
		},
		{
			name: "records without marker",
			make: func(t *testing.T, dir string) string {
				rawPebble(t, dir, map[string][]byte{"rk": caspaxos.EncodeRecord(nil, caspaxos.Record{Key: "k"})})
				return dir
			},
			want: caspaxos.ErrCorrupt,
			msg:  "no format marker",
		},
		{
			name: "wrong magic",
			make: func(t *testing.T, dir string) string {
				validStore(t, dir, map[string][]byte{metaFormat: []byte("fmnode/caspaxos/pebblestore v9")})
				return dir
			},
			want: caspaxos.ErrCorrupt,
			msg:  "format",
		},
		{
			name: "undecodable record",
			make: func(t *testing.T, dir string) string {
				validStore(t, dir, map[string][]byte{"rbad": []byte("garbage")})
				return dir
			},
			want: caspaxos.ErrCorrupt,
			msg:  `key "bad"`,
		},
		{
			name: "misplaced record",
			make: func(t *testing.T, dir string) string {
				validStore(t, dir, map[string][]byte{"rk": caspaxos.EncodeRecord(nil, caspaxos.Record{Key: "other"})})
				return dir
			},
			want: caspaxos.ErrCorrupt,
			msg:  `key "k" holds the record of key "other"`,
		},
		{
			name: "damaged age floor",
			make: func(t *testing.T, dir string) string {
				validStore(t, dir, map[string][]byte{metaAgeFloor: {1, 2}})
				return dir
			},
			want: caspaxos.ErrCorrupt,
			msg:  "m/agefloor",
		},
		{
			name: "lost age floor",
			make: func(t *testing.T, dir string) string {
				validStore(t, dir, nil, metaAgeFloor)
				return dir
			},
			want: caspaxos.ErrCorrupt,
			msg:  "age floor missing",
		},
		{
			name: "initialised store without keys",
			make: func(t *testing.T, dir string) string {
				rawPebble(t, dir, nil)
				require.NoError(t, os.WriteFile(filepath.Join(dir, initFile), []byte(formatMagic), 0o600))
				return dir
			},
			want: caspaxos.ErrCorrupt,
			msg:  "its data is lost",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.make(t, t.TempDir())
			_, err := Open(path, Options{})
			require.ErrorIs(t, err, tt.want)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), tt.msg)
		})
	}
}

// TestOpenInitialisesEmptyDatabase: a pebble database with no keys at all
// and no init file is a store whose creation crashed before its marker was
// durable; nothing was acknowledged from it, so Open finishes the job.
func TestOpenInitialisesEmptyDatabase(t *testing.T) {
	dir := t.TempDir()
	rawPebble(t, dir, nil)
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	require.NoError(t, s.Apply(caspaxos.Batch{AgeFloor: 2}))
	require.NoError(t, s.Close())
	s, err = Open(dir, Options{})
	require.NoError(t, err)
	defer s.Close()
	st, err := s.Load()
	require.NoError(t, err)
	assert.Equal(t, uint64(2), st.AgeFloor)
	assert.Equal(t, dir, s.Dir())
}

// TestOpenRestoresLostInitFile: a crash between the durable marker and the
// init file leaves a complete store; Open recreates the file.
func TestOpenRestoresLostInitFile(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, os.Remove(filepath.Join(dir, initFile)))
	s, err = Open(dir, Options{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	assert.FileExists(t, filepath.Join(dir, initFile))
}

func TestCounters(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	require.NoError(t, err)
	defer s.Close()
	base := s.Fsyncs()
	require.NoError(t, s.Apply(caspaxos.Batch{}))
	assert.Zero(t, s.Commits(), "an empty batch commits nothing")
	assert.Equal(t, base, s.Fsyncs(), "an empty batch costs no fsync")
	for i := range 3 {
		require.NoError(t, s.Apply(caspaxos.Batch{AgeFloor: uint64(i + 1)}))
	}
	assert.Equal(t, uint64(3), s.Commits())
	assert.GreaterOrEqual(t, s.Fsyncs()-base, uint64(3), "each serial synced commit syncs the WAL")
}

// captureHandler records slog records for the logger test.
type captureHandler struct {
	level   slog.Level
	records *[]slog.Record
}

func (h captureHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }
func (h captureHandler) Handle(_ context.Context, r slog.Record) error {
	*h.records = append(*h.records, r)
	return nil
}
func (h captureHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h captureHandler) WithGroup(string) slog.Handler      { return h }

func TestLoggerQuietAtInfo(t *testing.T) {
	tests := []struct {
		name  string
		level slog.Level
		want  int
	}{
		{name: "info drops pebble chatter", level: slog.LevelInfo, want: 0},
		{name: "debug keeps it", level: slog.LevelDebug, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []slog.Record
			l := slogLogger{log: slog.New(captureHandler{level: tt.level, records: &got})}
			l.Infof("flushed %d", 1)
			assert.Len(t, got, tt.want)
		})
	}
	var got []slog.Record
	l := slogLogger{log: slog.New(captureHandler{level: slog.LevelInfo, records: &got})}
	assert.PanicsWithValue(t, "pebblestore: pebble fatal: disk gone", func() { l.Fatalf("disk %s", "gone") })
	require.Len(t, got, 1)
	assert.Equal(t, slog.LevelError, got[0].Level)
}

// TestOpenLogsNothingToStdlog: pebble's default logger writes through the
// standard library's log package to stderr; the store must route pebble's
// logging away from it. (The test swaps log's output, so it must not run
// in parallel.)
func TestOpenLogsNothingToStdlog(t *testing.T) {
	var out bytes.Buffer
	orig := log.Writer()
	log.SetOutput(&out)
	defer log.SetOutput(orig)
	dir := t.TempDir()
	for range 2 { // the second open replays the WAL, which pebble logs
		s, err := Open(dir, Options{})
		require.NoError(t, err)
		require.NoError(t, s.Apply(caspaxos.Batch{Put: []caspaxos.Record{{Key: "k"}}}))
		require.NoError(t, s.Close())
	}
	assert.Empty(t, out.String())
}
