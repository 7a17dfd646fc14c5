package partition

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// grantTestLevel is the grant tests' bounded-staleness level (K = 20 ops,
// T = 2 s, writes held 300 ms before ErrStalenessBound) and the window
// after which any grant has surely ended (T plus the drift margin).
func grantTestLevel() (Level, time.Duration) {
	lvl := Level{Consistency: BoundedStaleness, StalenessOps: 20, StalenessTime: 2 * time.Second, StalenessHold: 300 * time.Millisecond}
	return lvl, time.Duration(float64(lvl.StalenessTime) * (1 + DefaultDriftMargin))
}

// writeReadBounded is the grant tests' client: until until, it writes at
// writer (epoch) and reads at reader with bounded staleness, in turn. A
// write may be held and rejected (ErrStalenessBound) and a read refused
// (ErrNotFresh); a read served must miss at most k acknowledged ops. It
// returns the highest acknowledged LSN, the writes held and the reads
// served. since (the change under test) is only for the failure message.
func writeReadBounded(t *testing.T, c *Cluster, writer, reader Region, epoch Epoch, since, until time.Duration, k uint64) (acked LSN, held, served int) {
	t.Helper()
	ref := ClientRef(100)
	for c.Now() < until {
		ref++
		c.Write(writer, WriteRequest{Partition: 7, Epoch: epoch, Ref: ref, Key: []byte("k"), Value: []byte(fmt.Sprint(ref))})
		if r, ok := waitReply(t, c, ref, time.Second); ok {
			if r.Reply.Err == nil {
				acked = max(acked, r.Reply.Token.LSN)
			} else {
				require.ErrorIs(t, r.Reply.Err, ErrStalenessBound)
				held++
			}
		}
		ref++
		rep := mustRead(t, c, reader, ReadRequest{Partition: 7, Ref: ref, Key: []byte("k"), Consistency: BoundedStaleness})
		if rep.Err != nil {
			require.ErrorIs(t, rep.Err, ErrNotFresh)
			continue
		}
		served++
		missing := acked - min(acked, rep.Token.LSN)
		require.LessOrEqual(t, uint64(missing), k,
			"at %v %s served a read at %v missing %d acknowledged ops (%s at %d, changed at %v)",
			c.Now(), reader, rep.Token, missing, writer, acked, since)
	}
	return acked, held, served
}
