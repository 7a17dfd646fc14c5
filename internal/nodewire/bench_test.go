package nodewire

import (
	"fmt"
	"testing"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/partition"
)

// typicalBatch: 16 partition appends of 4 small ops each and 3 CAS
// messages, what a busy node sends a peer per tick.
func typicalBatch() Batch {
	b := Batch{From: 1, To: 2}
	for p := range 16 {
		m := partition.Message{Type: partition.MsgAppend, Partition: partition.ID(p + 1), Epoch: 7,
			From: "us-east", To: "eu-west", Prev: 1000, PrevEpoch: 7, Commit: 998, Stable: 990,
			LeaderLast: 1004, EchoBoot: 3, Echo: 12 * time.Second, Grant: 2 * time.Second, Member: true}
		for i := range 4 {
			m.Entries = append(m.Entries, partition.Op{LSN: partition.LSN(1001 + i), Epoch: 7,
				Key: fmt.Appendf(nil, "user/%06d", p*4+i), Value: make([]byte, 64)})
		}
		b.Data = append(b.Data, m)
	}
	for i := range 3 {
		b.CAS = append(b.CAS, caspaxos.Message{Type: caspaxos.MsgAccept, From: 1, To: 2, Age: 4,
			Items: []caspaxos.Item{{Key: partition.RegisterKey(partition.ID(i)),
				Ballot: caspaxos.Ballot{Counter: 9, Proposer: 1}, Value: caspaxos.Value{Version: 5, Data: make([]byte, 120)}}}})
	}
	return b
}

func BenchmarkEncodeDecode(b *testing.B) {
	batch := typicalBatch()
	buf, err := Encode(nil, &batch)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf, err = Encode(buf[:0], &batch)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
}
