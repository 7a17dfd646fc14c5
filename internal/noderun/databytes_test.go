package noderun

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/fmnode/fmnode/internal/nodewire"
	"github.com/fmnode/fmnode/partition"
)

// TestDataBytes counts the keys and values of every replicated op and
// snapshot pair in a batch, and nothing else (heartbeats, register
// messages, LSNs).
func TestDataBytes(t *testing.T) {
	b := nodewire.Batch{Data: []partition.Message{
		{Entries: []partition.Op{{LSN: 7, Key: []byte("ab"), Value: []byte("cde")}, {LSN: 8, Delete: true, Key: []byte("f")}}},
		{KVs: []partition.KV{{Key: []byte("gh"), Value: []byte("ijkl"), LSN: 3}}},
		{}, // an empty append: a heartbeat of the data plane
	}}
	assert.Equal(t, uint64(5+1+6), dataBytes(&b))
	assert.Zero(t, dataBytes(&nodewire.Batch{}))
}
