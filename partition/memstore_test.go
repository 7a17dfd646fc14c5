package partition_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/partition/storetest"
)

func TestMemStoreConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) partition.Store { return partition.NewMemStore() },
		Reopen: func(t *testing.T, st partition.Store) partition.Store {
			return st.(*partition.MemStore).Reopen()
		},
		RawSet: func(t *testing.T, st partition.Store, k, v []byte) { st.(*partition.MemStore).RawSet(k, v) },
		RawGet: func(t *testing.T, st partition.Store, k []byte) []byte {
			v, ok := st.(*partition.MemStore).RawGet(k)
			require.True(t, ok)
			return v
		},
	})
}
