package proctest

import (
	"debug/buildinfo"
	"os"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuild(t *testing.T) {
	bin := Build(t, "./testdata/hello")
	st, err := os.Stat(bin)
	require.NoError(t, err)

	again := Build(t, "./testdata/hello")
	assert.Equal(t, bin, again, "built once per run")
	st2, err := os.Stat(again)
	require.NoError(t, err)
	assert.Equal(t, st.ModTime(), st2.ModTime(), "not rebuilt")

	// The child is built as the test was: same toolchain, same -race.
	bi, err := buildinfo.ReadFile(bin)
	require.NoError(t, err)
	assert.Equal(t, runtime.Version(), bi.GoVersion)
	self, ok := debug.ReadBuildInfo()
	require.True(t, ok)
	setting := func(bi *debug.BuildInfo, key string) string {
		for _, s := range bi.Settings {
			if s.Key == key {
				return s.Value
			}
		}
		return ""
	}
	assert.Equal(t, setting(self, "-race"), setting(bi, "-race"))
	assert.Equal(t, setting(self, "-tags"), setting(bi, "-tags"))

	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"succeeds", nil, 0},
		{"fails", []string{"fail"}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Start(t, ProcSpec{Name: "hello", Path: bin, Args: tc.args})
			code, err := p.Wait(waitFor)
			require.NoError(t, err)
			assert.Equal(t, tc.code, code)
			waitOutput(t, p, "hello from "+runtime.Version())
		})
	}
}

func TestBuildFails(t *testing.T) {
	cases := []struct {
		name, pkg string
		want      []string
	}{
		{"no package", "", []string{"pkg must be set"}},
		{"missing package", "./testdata/missing", []string{"build -o", "./testdata/missing", "testdata/missing"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := fatalOf(newFake(t), func(tb testing.TB) { Build(tb, tc.pkg) })
			for _, w := range tc.want {
				assert.Contains(t, errs, w)
			}
		})
	}
}

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"fmnode": "fmnode", "a b/c": "a_b_c", "": "pkg", ".": "pkg", "..": "pkg", "x.y-z_1": "x.y-z_1",
	} {
		assert.Equal(t, want, sanitize(in), in)
	}
}
