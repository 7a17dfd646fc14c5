package routing

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOneBasedHashPartitioner: the same spread as HashPartitioner, one
// higher, never 0 and always below Partitions.
func TestOneBasedHashPartitioner(t *testing.T) {
	h, err := NewHashPartitioner(7)
	require.NoError(t, err)
	o, err := NewOneBasedHashPartitioner(7)
	require.NoError(t, err)
	require.Equal(t, uint32(8), o.Partitions())
	seen := map[uint32]bool{}
	for i := range 1000 {
		k := fmt.Sprint("key-", i)
		p := o.Partition(k)
		require.Equal(t, h.Partition(k)+1, p)
		require.True(t, p >= 1 && p < o.Partitions(), "partition %d", p)
		seen[p] = true
	}
	require.Len(t, seen, 7)
	_, err = NewOneBasedHashPartitioner(0)
	require.ErrorIs(t, err, ErrInvalidConfig)
}
