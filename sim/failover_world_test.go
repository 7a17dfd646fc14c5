package sim

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/failover"
)

// TestClientsOf: a partition's clients are found by index (the metrics
// look them up at every failover commit), and they are exactly its own.
func TestClientsOf(t *testing.T) {
	tests := []struct {
		name  string
		parts int
	}{
		{"one", 1},
		{"fifty", 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fw, err := newFoWorld(Config{Seed: 1}, failoverScenario{fault: foRegionOutage}.spec(tt.parts, failover.FastConfig()))
			require.NoError(t, err)
			seen := 0
			for i := range fw.parts {
				cs := fw.clientsOf(i)
				require.Len(t, cs, fw.spec.clientsPerPartition)
				for _, c := range cs {
					require.Equal(t, i, c.part)
				}
				seen += len(cs)
			}
			require.Equal(t, len(fw.clients), seen)
		})
	}
}
