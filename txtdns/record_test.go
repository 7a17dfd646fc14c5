package txtdns

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sampleRun() Run {
	return Run{Lo: 0, Hi: 255, Epoch: 7, WriteRegion: "eastus", Priority: []string{"eastus", "westus", "northeu"}, ConfigVersion: 3}
}

func TestEncodeRunFormat(t *testing.T) {
	txt, err := EncodeRun(sampleRun())
	require.NoError(t, err)
	assert.Equal(t, []string{"v=1", "lo=0", "hi=255", "e=7", "w=eastus", "pr=eastus,westus,northeu", "cv=3"}, txt)
}

func TestRunRoundTrip(t *testing.T) {
	long := func(c byte) string { return strings.Repeat(string(c), MaxRegionLen) }
	widest := Run{Lo: 1<<32 - 1, Hi: 1<<32 - 1, Epoch: 1<<64 - 1, WriteRegion: long('a'), ConfigVersion: 1<<64 - 1,
		Priority: []string{long('a'), long('b'), long('c'), long('d'), long('e'), long('f'), long('g'), long('h')}}
	tests := []struct {
		name string
		run  Run
	}{
		{"sample", sampleRun()},
		{"single partition", Run{Lo: 42, Hi: 42, Epoch: 1, WriteRegion: "a", Priority: []string{"a"}}},
		{"widest record fits", widest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			txt, err := EncodeRun(tc.run)
			require.NoError(t, err)
			assert.LessOrEqual(t, RecordSize(txt), MaxRecordBytes)
			got, err := DecodeRun(txt)
			require.NoError(t, err)
			assert.Equal(t, tc.run, got)
		})
	}
}

func TestDecodeRunRejects(t *testing.T) {
	base := []string{"v=1", "lo=0", "hi=255", "e=7", "w=eastus", "pr=eastus,westus", "cv=3"}
	with := func(i int, s string) []string {
		out := append([]string(nil), base...)
		out[i] = s
		return out
	}
	without := func(i int) []string {
		out := append([]string(nil), base[:i]...)
		return append(out, base[i+1:]...)
	}
	tests := []struct {
		name string
		in   []string
		want error
		key  string
	}{
		{"empty", nil, ErrMalformed, ""},
		{"version not first", append(base[1:], "v=1"), ErrMalformed, "v"},
		{"version 2", with(0, "v=2"), ErrUnsupportedVersion, "v"},
		{"version repeated", append(base, "v=1"), ErrMalformed, "v"},
		{"missing epoch", without(3), ErrMalformed, "e"},
		{"missing cv", without(6), ErrMalformed, "cv"},
		{"repeated key", append(base, "e=8"), ErrMalformed, "e"},
		{"repeated key other case", append(base, "E=8"), ErrMalformed, "e"},
		{"leading zero", with(3, "e=07"), ErrMalformed, "e"},
		{"negative", with(3, "e=-7"), ErrMalformed, "e"},
		{"hex", with(3, "e=0x7"), ErrMalformed, "e"},
		{"epoch zero", with(3, "e=0"), ErrMalformed, "e"},
		{"lo out of range", with(1, "lo=4294967296"), ErrMalformed, "lo"},
		{"lo above hi", with(1, "lo=300"), ErrMalformed, "lo"},
		{"write not in priority", with(4, "w=northeu"), ErrMalformed, "pr"},
		{"bad region byte", with(4, "w=East_US"), ErrMalformed, "w"},
		{"region dash edge", with(5, "pr=eastus,-west"), ErrMalformed, "pr"},
		{"region listed twice", with(5, "pr=eastus,eastus"), ErrMalformed, "pr"},
		{"empty priority item", with(5, "pr=eastus,"), ErrMalformed, "pr"},
		{"too many regions", with(5, "pr=eastus,a,b,c,d,e,f,g,h"), ErrTooLarge, "pr"},
		{"key without value", with(4, "w"), ErrMalformed, "w"},
		{"empty key", append(base, "=x"), ErrMalformed, ""},
		{"unprintable key", append(base, "k\x01=x"), ErrMalformed, ""},
		{"string too long", append(base, "x="+strings.Repeat("a", 254)), ErrTooLarge, "x"},
		{"record too large", append(base, "x="+strings.Repeat("a", 200), "y="+strings.Repeat("a", 200)), ErrTooLarge, ""},
		{"too many strings", append(base, "a", "b", "c", "d", "e1", "f", "g", "h", "i", "j"), ErrTooLarge, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeRun(tc.in)
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.want)
			var re *RecordError
			require.True(t, errors.As(err, &re), "want a *RecordError, got %T", err)
			assert.Equal(t, tc.key, re.Key, "error: %v", err)
		})
	}
}

func TestDecodeRunTolerates(t *testing.T) {
	tests := []struct {
		name string
		in   []string
	}{
		{"unknown keys ignored", []string{"v=1", "zz=whatever", "lo=0", "hi=255", "e=7", "flag", "w=eastus", "pr=eastus,westus,northeu", "cv=3"}},
		{"keys case-insensitive, any order", []string{"V=1", "CV=3", "PR=eastus,westus,northeu", "W=eastus", "E=7", "HI=255", "Lo=0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeRun(tc.in)
			require.NoError(t, err)
			assert.Equal(t, sampleRun(), got)
		})
	}
}

func TestRegionRoundTrip(t *testing.T) {
	eps := make([]string, MaxEndpoints)
	for i := range eps {
		eps[i] = "host-" + strings.Repeat("x", 20) + ".example.net:7000"
	}
	tests := []struct {
		name    string
		ri      RegionInfo
		strings int
	}{
		{"one endpoint", RegionInfo{Region: "eastus", Endpoints: []string{"127.0.0.21:7000"}, ConfigVersion: 2}, 4},
		{"split over strings", RegionInfo{Region: "eastus", Endpoints: eps, ConfigVersion: 9}, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			txt, err := EncodeRegion(tc.ri)
			require.NoError(t, err)
			assert.Len(t, txt, tc.strings)
			got, err := DecodeRegion(txt)
			require.NoError(t, err)
			assert.Equal(t, tc.ri, got)
		})
	}
}

func TestRegionRejects(t *testing.T) {
	tests := []struct {
		name string
		ri   RegionInfo
		want error
	}{
		{"no endpoints", RegionInfo{Region: "a"}, ErrMalformed},
		{"comma in endpoint", RegionInfo{Region: "a", Endpoints: []string{"x,y"}}, ErrMalformed},
		{"space in endpoint", RegionInfo{Region: "a", Endpoints: []string{"x y"}}, ErrMalformed},
		{"endpoint too long", RegionInfo{Region: "a", Endpoints: []string{strings.Repeat("x", MaxEndpointLen+1)}}, ErrTooLarge},
		{"too many endpoints", RegionInfo{Region: "a", Endpoints: make([]string, MaxEndpoints+1)}, ErrTooLarge},
		{"bad region", RegionInfo{Region: "A", Endpoints: []string{"x:1"}}, ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := EncodeRegion(tc.ri)
			assert.ErrorIs(t, err, tc.want)
		})
	}
	_, err := DecodeRegion([]string{"v=1", "r=a", "cv=1"})
	assert.ErrorIs(t, err, ErrMalformed, "no ep key")
	_, err = DecodeRegion([]string{"v=1", "r=a", "ep=x:1"})
	assert.ErrorIs(t, err, ErrMalformed, "no cv key")
}

func TestMetaRoundTrip(t *testing.T) {
	m := Meta{BlockSize: 256, Partitions: 100000, Regions: []string{"eastus", "northeu", "westus"}}
	txt, err := EncodeMeta(m)
	require.NoError(t, err)
	assert.Equal(t, []string{"v=1", "bs=256", "np=100000", "rg=eastus,northeu,westus"}, txt)
	got, err := DecodeMeta(txt)
	require.NoError(t, err)
	assert.Equal(t, m, got)

	_, err = DecodeMeta([]string{"v=1", "np=3"})
	assert.ErrorIs(t, err, ErrMalformed)
	_, err = DecodeMeta([]string{"v=1", "bs=0", "np=3"})
	assert.ErrorIs(t, err, ErrMalformed)
}

// splitRecord turns fuzz input into TXT strings separated by NUL bytes.
func splitRecord(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}

func fuzzSeeds(f *testing.F, recs ...[]string) {
	for _, r := range recs {
		f.Add(strings.Join(r, "\x00"))
	}
	f.Add("v=1")
	f.Add("v=1\x00lo=\x00hi=99999999999999999999")
}

func FuzzDecodeRun(f *testing.F) {
	txt, _ := EncodeRun(sampleRun())
	fuzzSeeds(f, txt)
	f.Fuzz(func(t *testing.T, s string) {
		r, err := DecodeRun(splitRecord(s))
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrUnsupportedVersion) {
				t.Fatalf("error without a sentinel: %v", err)
			}
			return
		}
		enc, err := EncodeRun(r)
		if err != nil {
			t.Fatalf("decoded run does not re-encode: %v (%+v)", err, r)
		}
		back, err := DecodeRun(enc)
		if err != nil || !back.SameRoute(r) || back.Lo != r.Lo || back.Hi != r.Hi {
			t.Fatalf("round trip: %+v -> %q -> %+v, %v", r, enc, back, err)
		}
	})
}

func FuzzDecodeRegion(f *testing.F) {
	txt, _ := EncodeRegion(RegionInfo{Region: "eastus", Endpoints: []string{"a:1", "b:2"}, ConfigVersion: 4})
	fuzzSeeds(f, txt)
	f.Fuzz(func(t *testing.T, s string) {
		ri, err := DecodeRegion(splitRecord(s))
		if err != nil {
			return
		}
		enc, err := EncodeRegion(ri)
		if err != nil {
			t.Fatalf("decoded region does not re-encode: %v (%+v)", err, ri)
		}
		if RecordSize(enc) > MaxRecordBytes {
			t.Fatalf("re-encoded region too large")
		}
		back, err := DecodeRegion(enc)
		if err != nil || back.Region != ri.Region || back.ConfigVersion != ri.ConfigVersion || len(back.Endpoints) != len(ri.Endpoints) {
			t.Fatalf("round trip: %+v -> %+v, %v", ri, back, err)
		}
	})
}

func FuzzDecodeMeta(f *testing.F) {
	txt, _ := EncodeMeta(Meta{BlockSize: 256, Partitions: 10, Regions: []string{"a", "b"}})
	fuzzSeeds(f, txt)
	f.Fuzz(func(t *testing.T, s string) {
		m, err := DecodeMeta(splitRecord(s))
		if err != nil {
			return
		}
		enc, err := EncodeMeta(m)
		if err != nil {
			t.Fatalf("decoded meta does not re-encode: %v (%+v)", err, m)
		}
		if _, err := DecodeMeta(enc); err != nil {
			t.Fatalf("round trip: %v", err)
		}
	})
}
