package progress

import (
	"bytes"
	"encoding/hex"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func goldenTable() Table {
	return Table{Partition: "p", BaseEpoch: 1, Epochs: []EpochRange{
		closed(1, 0, 10, "eastus"), closed(2, 10, 10, "westus"), open(3, 10, "eastus"),
	}}
}

// goldenHex pins format version 1; changing it needs a new format byte.
const goldenHex = "01" + "0170" + "01" + "00" + "00" + // format, partition "p", first epoch 1, base delta 0, base LSN 0
	"02" + "06" + "656173747573" + "06" + "776573747573" + // regions: eastus, westus
	"03" + "000a" + "000100" + "0000" // epochs: (A, 10), (+1, B, 0), (+1, A)

func TestEncodeGolden(t *testing.T) {
	b, err := Encode(nil, goldenTable())
	require.NoError(t, err)
	assert.Equal(t, goldenHex, hex.EncodeToString(b))
	got, err := Decode(b)
	require.NoError(t, err)
	assert.Equal(t, goldenTable(), got)
}

func TestEncodeAppends(t *testing.T) {
	b, err := Encode([]byte("prefix"), goldenTable())
	require.NoError(t, err)
	assert.Equal(t, "prefix", string(b[:6]))
	assert.Equal(t, goldenHex, hex.EncodeToString(b[6:]))
}

func maxTable() Table {
	tb := Table{Partition: strings.Repeat("p", MaxPartitionBytes), BaseEpoch: 1}
	start, epoch := LSN(math.MaxUint64-MaxEpochs*(1<<40)), Epoch(math.MaxUint64-MaxEpochs*(1<<40))
	for i := range MaxEpochs {
		region := strings.Repeat(string(rune('a'+i%26)), MaxRegionBytes-1) + string(rune('A'+i))
		r := EpochRange{Epoch: epoch, StartLSN: start, WriteRegion: region}
		if i == MaxEpochs-1 {
			r.Open = true
		} else {
			r.EndLSN = start + 1<<40 - 1
		}
		tb.Epochs = append(tb.Epochs, r)
		start, epoch = r.EndLSN, epoch+1<<40-1
	}
	return tb
}

func TestRoundTrip(t *testing.T) {
	cases := map[string]Table{
		"golden":          goldenTable(),
		"single epoch":    {Partition: "p", BaseEpoch: 1, Epochs: []EpochRange{open(1, 0, "A")}},
		"compacted":       divergeTable(),
		"large numbers":   {Partition: "p", BaseEpoch: 1, Epochs: []EpochRange{closed(math.MaxUint64-1, 5, math.MaxUint64, "A"), open(math.MaxUint64, math.MaxUint64, "B")}},
		"every bound hit": maxTable(),
	}
	for name, tb := range cases {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, tb.Validate())
			b, err := Encode(nil, tb)
			require.NoError(t, err)
			assert.LessOrEqual(t, len(b), MaxEncodedLen)
			got, err := Decode(b)
			require.NoError(t, err)
			assert.Equal(t, tb, got)
		})
	}
}

// TestEncodedSize: the table is rewritten with every failover, so it must
// stay small. 32 epochs bouncing between three regions fit in about 100
// bytes: a few bytes per epoch.
func TestEncodedSize(t *testing.T) {
	tb := mustTable(t, open(1, 0, "eastus2"))
	var err error
	for e := Epoch(2); e <= MaxEpochs; e++ {
		tb, err = tb.Open(e, []string{"eastus2", "westus2", "northeurope"}[e%3], LSN(e)*100)
		require.NoError(t, err)
	}
	b, err := Encode(nil, tb)
	require.NoError(t, err)
	t.Logf("%d epochs: %d bytes", len(tb.Epochs), len(b))
	assert.LessOrEqual(t, len(b), 1+2+3+3+1+(1+11)*3+1+MaxEpochs*4)
}

func TestEncodeRefusesInvalid(t *testing.T) {
	tb := goldenTable()
	tb.Epochs[1].StartLSN = 9
	b, err := Encode([]byte("x"), tb)
	require.ErrorIs(t, err, ErrInvalidTable)
	assert.Equal(t, []byte("x"), b)
}

func TestDecodeRejects(t *testing.T) {
	golden, err := hex.DecodeString(goldenHex)
	require.NoError(t, err)
	h := func(s string) []byte {
		b, err := hex.DecodeString(s)
		require.NoError(t, err)
		return b
	}
	cases := []struct {
		name string
		b    []byte
		err  error
	}{
		{"empty", nil, ErrCorrupt},
		{"unknown version", append([]byte{2}, golden[1:]...), ErrUnknownVersion},
		{"trailing byte", append(bytes.Clone(golden), 0), ErrCorrupt},
		{"too long", make([]byte, MaxEncodedLen+1), ErrCorrupt},
		{"non-minimal uvarint", h("01" + "0170" + "8100" + "00" + "00" + "01" + "0141" + "01" + "00"), ErrCorrupt},
		{"empty partition", h("01" + "00" + "01" + "00" + "00" + "01" + "0141" + "01" + "00"), ErrCorrupt},
		{"epoch 0", h("01" + "0170" + "00" + "00" + "00" + "01" + "0141" + "01" + "00"), ErrCorrupt},
		{"base epoch 0", h("01" + "0170" + "02" + "02" + "00" + "01" + "0141" + "01" + "00"), ErrCorrupt},
		{"no regions", h("01" + "0170" + "01" + "00" + "00" + "00" + "01" + "00"), ErrCorrupt},
		{"empty region", h("01" + "0170" + "01" + "00" + "00" + "01" + "00" + "01" + "00"), ErrCorrupt},
		{"no epochs", h("01" + "0170" + "01" + "00" + "00" + "01" + "0141" + "00"), ErrCorrupt},
		{"33 epochs", h("01" + "0170" + "01" + "00" + "00" + "01" + "0141" + "21"), ErrCorrupt},
		{"region index out of range", h("01" + "0170" + "01" + "00" + "00" + "01" + "0141" + "01" + "01"), ErrCorrupt},
		{"regions not in first-use order", h("01" + "0170" + "01" + "00" + "00" + "02" + "0141" + "0142" + "02" + "0100" + "0000"), ErrCorrupt},
		{"unused region", h("01" + "0170" + "01" + "00" + "00" + "02" + "0141" + "0142" + "02" + "0000" + "0000"), ErrCorrupt},
		{"duplicate region", h("01" + "0170" + "01" + "00" + "00" + "02" + "0141" + "0141" + "02" + "0000" + "0001"), ErrCorrupt},
		{"more regions than epochs", h("01" + "0170" + "01" + "00" + "00" + "02" + "0141" + "0142" + "01" + "00"), ErrCorrupt},
		{"epoch overflows", h("01" + "0170" + "ffffffffffffffffff01" + "00" + "00" + "01" + "0141" + "02" + "0000" + "0000"), ErrCorrupt},
		{"LSN overflows", h("01" + "0170" + "01" + "00" + "ffffffffffffffffff01" + "01" + "0141" + "02" + "0001" + "0000"), ErrCorrupt},
		{"uvarint over 64 bits", h("01" + "0170" + "ffffffffffffffffff7f"), ErrCorrupt},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.b)
			require.ErrorIs(t, err, ErrCorrupt)
			require.ErrorIs(t, err, tc.err)
		})
	}
	t.Run("every truncation", func(t *testing.T) {
		for n := range len(golden) {
			_, err := Decode(golden[:n])
			require.ErrorIs(t, err, ErrCorrupt, "%d bytes", n)
		}
	})
	t.Run("result does not alias input", func(t *testing.T) {
		b := bytes.Clone(golden)
		tb, err := Decode(b)
		require.NoError(t, err)
		for i := range b {
			b[i] = 0xff
		}
		assert.Equal(t, goldenTable(), tb)
	})
}
