package nodewire

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/caspaxos/wire"
)

// Mixed versions, as designed: a batch of another format is refused,
// never half-read. Format 1 ended after the learns; format 2 appends the
// learn acks. The node transport's hello carries the format
// (nodenet.ProtocolVersion) so that two such nodes never exchange a batch,
// and these refusals are the codec's own guard behind it.
func TestMixedFormatVersionsAreRefused(t *testing.T) {
	t.Run("a frame of format 1 to this decoder", func(t *testing.T) {
		// From node 1 to node 2: no cas, no data, no heartbeats, one learn.
		v1 := cat([]byte{1}, uv(1), uv(2), []byte{0, 0, 0}, uv(1), uv(3), []byte("p/1"), uv(7), uv(1), []byte("v"))
		_, err := Decode(v1)
		require.ErrorIs(t, err, ErrCorrupt)
		require.ErrorContains(t, err, "unknown format version 1")
		_, _, err = ReadFrame(bufio.NewReader(bytes.NewReader(wire.AppendFrame(nil, v1))), DefaultMaxFrameBytes, nil)
		require.ErrorIs(t, err, ErrCorrupt)
		require.ErrorContains(t, err, "unknown format version 1")
	})
	t.Run("a batch of format 2 with learn acks to a format 1 decoder", func(t *testing.T) {
		// Format 1's decoder read byte 0 as the format and took only 1;
		// format 2 writes FormatVersion there in every batch, with or
		// without learn acks (an empty acks section is still a byte a
		// format 1 decoder would call trailing).
		for _, b := range []Batch{
			{From: 1, To: 2, LearnAcks: []LearnAck{{Key: "p/1", Version: 7}}},
			{From: 1, To: 2, Learns: []Learn{{Key: "p/1", Version: 7, Data: []byte("v")}}},
		} {
			p, err := Encode(nil, &b)
			require.NoError(t, err)
			require.Equal(t, FormatVersion, p[0])
			require.NotEqual(t, byte(1), p[0], "a format 1 decoder must refuse it, not misread it")
			got, err := Decode(p)
			require.NoError(t, err)
			require.Equal(t, b, got)
		}
	})
}
