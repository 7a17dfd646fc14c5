package routing

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCandidates(t *testing.T) {
	e := Entry{WriteRegion: "westus", Priority: []string{"eastus", "westus", "northeu"}}
	tests := []struct {
		name      string
		e         Entry
		req       Request
		preferred []string
		want      []string
	}{
		{"write", e, Request{Write: true}, []string{"northeu"}, []string{"westus", "eastus", "northeu"}},
		{"strong read", e, Request{Consistency: ConsistencyStrong}, []string{"northeu"}, []string{"westus", "eastus", "northeu"}},
		{"session read", e, Request{Consistency: ConsistencySession}, []string{"northeu"}, []string{"northeu", "westus", "eastus"}},
		{"bounded read", e, Request{Consistency: ConsistencyBoundedStaleness}, []string{"northeu"}, []string{"northeu", "westus", "eastus"}},
		{"eventual read", e, Request{Consistency: ConsistencyEventual}, []string{"northeu"}, []string{"northeu", "eastus", "westus"}},
		{"preferred region not in priority skipped", e, Request{Consistency: ConsistencyEventual}, []string{"japan"}, []string{"eastus", "westus", "northeu"}},
		{"redirect-only entry", Entry{WriteRegion: "westus"}, Request{Write: true}, nil, []string{"westus"}},
		{"redirect-only entry read", Entry{WriteRegion: "westus"}, Request{Consistency: ConsistencySession}, []string{"japan"}, []string{"japan", "westus"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf [maxCandidates]string
			assert.Equal(t, tc.want, Candidates(buf[:], tc.e, tc.req, tc.preferred))
		})
	}
}
