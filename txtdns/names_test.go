package txtdns

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCanonicalZone(t *testing.T) {
	tests := []struct {
		in, want string
		err      error
	}{
		{"Routes.Example", "routes.example.", nil},
		{"routes.example.", "routes.example.", nil},
		{"_fm.example.", "_fm.example.", nil},
		{".", "", ErrMalformed},
		{"", "", ErrMalformed},
		{"a..b", "", ErrMalformed},
		{"bad zone.", "", ErrMalformed},
		{strings.Repeat("a", 40) + "." + strings.Repeat("b", 30), "", ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := CanonicalZone(tc.in)
			if tc.err != nil {
				assert.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseName(t *testing.T) {
	const zone = "fm.example."
	tests := []struct {
		qname string
		want  Name
		err   error
	}{
		{"fm.example.", Name{Kind: NameApex}, nil},
		{"FM.Example", Name{Kind: NameApex}, nil},
		{"p-42.fm.example.", Name{Kind: NamePartition, ID: 42}, nil},
		{"P-42.FM.EXAMPLE.", Name{Kind: NamePartition, ID: 42}, nil},
		{"p-0.fm.example.", Name{Kind: NamePartition, ID: 0}, nil},
		{"p-4294967295.fm.example.", Name{Kind: NamePartition, ID: 4294967295}, nil},
		{"p-4294967296.fm.example.", Name{Kind: NameOther}, nil},
		{"p-042.fm.example.", Name{Kind: NameOther}, nil},
		{"p-.fm.example.", Name{Kind: NameOther}, nil},
		{"p-4x.fm.example.", Name{Kind: NameOther}, nil},
		{"b-3.fm.example.", Name{Kind: NameBlock, ID: 3}, nil},
		{"r-eastus.fm.example.", Name{Kind: NameRegion, Region: "eastus"}, nil},
		{"R-EastUS.fm.example.", Name{Kind: NameRegion, Region: "eastus"}, nil},
		{"r-east_us.fm.example.", Name{Kind: NameOther}, nil},
		{"x.p-42.fm.example.", Name{Kind: NameOther}, nil},
		{"www.fm.example.", Name{Kind: NameOther}, nil},
		{"example.", Name{}, ErrRefused},
		{"xfm.example.", Name{}, ErrRefused},
		{"p-42.other.", Name{}, ErrRefused},
		{".", Name{}, ErrRefused},
	}
	for _, tc := range tests {
		t.Run(tc.qname, func(t *testing.T) {
			got, err := ParseName(zone, tc.qname)
			if tc.err != nil {
				assert.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestNamesRoundTrip(t *testing.T) {
	const zone = "fm.example."
	n, err := ParseName(zone, PartitionName(zone, 12345))
	require.NoError(t, err)
	assert.Equal(t, Name{Kind: NamePartition, ID: 12345}, n)
	n, err = ParseName(zone, BlockName(zone, 7))
	require.NoError(t, err)
	assert.Equal(t, Name{Kind: NameBlock, ID: 7}, n)
	n, err = ParseName(zone, RegionName(zone, "west-eu2"))
	require.NoError(t, err)
	assert.Equal(t, Name{Kind: NameRegion, Region: "west-eu2"}, n)
}

func TestParseNameAllocatesNothing(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		_, _ = ParseName("fm.example.", "p-42.fm.example.")
		_, _ = ParseName("fm.example.", "r-eastus.fm.example.")
		_, _ = ParseName("fm.example.", "other.")
	})
	assert.Zero(t, allocs)
}

func FuzzParseName(f *testing.F) {
	for _, s := range []string{"p-42.fm.example.", "b-1.fm.example.", "r-eastus.fm.example.", "fm.example.", "x.", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, qname string) {
		n, err := ParseName("fm.example.", qname)
		if err != nil {
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		switch n.Kind {
		case NamePartition:
			back, err := ParseName("fm.example.", PartitionName("fm.example.", n.ID))
			if err != nil || back != n {
				t.Fatalf("partition name round trip: %+v -> %+v", n, back)
			}
		case NameRegion:
			if err := ValidateRegion(n.Region); err != nil {
				t.Fatalf("invalid region parsed: %v", err)
			}
		}
	})
}
