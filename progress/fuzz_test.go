package progress

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecode: decoding never panics; every error wraps ErrCorrupt; whatever
// decodes is valid, re-encodes to the same bytes (the encoding is
// canonical), and every method works on it and keeps its invariants.
func FuzzDecode(f *testing.F) {
	for _, tb := range []Table{goldenTable(), divergeTable(), maxTable(), {Partition: "p", BaseEpoch: 1, Epochs: []EpochRange{open(1, 0, "A")}}} {
		b, err := Encode(nil, tb)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{1, 1, 'p', 0x81, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		tb, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		if err := tb.Validate(); err != nil {
			t.Fatalf("decoded an invalid table: %v", err)
		}
		enc, err := Encode(nil, tb)
		if err != nil || !bytes.Equal(enc, b) {
			t.Fatalf("not canonical (%v):\n in  %x\n out %x", err, b, enc)
		}
		exerciseTable(t, tb)
	})
}

// exerciseTable runs every method on a valid table and checks what must
// hold whatever the table.
func exerciseTable(t *testing.T, tb Table) {
	cur := tb.Current()
	lineage := cur.StartLSN + 3
	if lineage < cur.StartLSN {
		lineage = cur.StartLSN
	}
	epochs := []Epoch{0, tb.BaseEpoch - 1, tb.BaseEpoch, cur.Epoch, cur.Epoch + 1}
	for _, r := range tb.Epochs {
		epochs = append(epochs, r.Epoch, r.Epoch+1)
	}
	for _, e := range epochs {
		for _, last := range []LSN{0, 1, tb.BaseLSN(), cur.StartLSN, lineage, lineage + 1} {
			d, err := tb.Diverge(e, last, lineage)
			if err != nil {
				continue
			}
			switch {
			case d.NeedsSnapshot:
				if e >= tb.BaseEpoch || last == 0 {
					t.Fatalf("snapshot for epoch %d last %d: %+v", e, last, d)
				}
			case d.CommonLSN > last || d.CommonLSN > lineage ||
				d.FalseProgress != (LSNRange{d.CommonLSN, last}) || d.FalseProgressOps != uint64(last-d.CommonLSN) ||
				d.Delta != (LSNRange{d.CommonLSN, lineage}):
				t.Fatalf("inconsistent divergence for epoch %d last %d: %+v", e, last, d)
			}
			if d.Why() == "" {
				t.Fatal("empty explanation")
			}
		}
	}
	for _, keep := range []int{1, 2, MaxEpochs} {
		c, err := tb.Compact(cur.StartLSN, keep)
		if err != nil || c.Validate() != nil || c.Current() != cur || len(c.Epochs) > keep {
			t.Fatalf("compact to %d: %v", keep, err)
		}
	}
	if cur.Epoch < ^Epoch(0) {
		for _, start := range []LSN{tb.BaseLSN(), cur.StartLSN, lineage} {
			o, err := tb.OpenBehind(cur.Epoch+1, "Z", start)
			if err != nil || o.Validate() != nil || len(o.Epochs) > MaxEpochs {
				t.Fatalf("open behind at %d: %v", start, err)
			}
			if _, err := Encode(nil, o); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// FuzzHistory drives the reference model with fuzzer-chosen actions: every
// byte picks the next action, and after each the tables must agree with the
// logs.
func FuzzHistory(f *testing.F) {
	f.Add([]byte{0, 0, 0, 5, 9, 200, 3, 3, 17, 250, 1})
	f.Add(bytes.Repeat([]byte{7, 0, 31, 2}, 40))
	f.Add([]byte("failover storm: the quick brown fox jumps over the lazy dog, again and again and again"))
	lim := modelLimits{regions: 3, maxLSN: 10, maxFailovers: 40, gaps: []int{1, 2}, syncCopies: []int{0, 1, -1}}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 400 {
			b = b[:400]
		}
		m := newModel(lim)
		for _, c := range b {
			acts := m.actions()
			next := m.clone()
			ok, err := next.apply(acts[int(c)%len(acts)])
			if err != nil {
				t.Fatalf("after %s: %v", next, err)
			}
			if !ok {
				continue
			}
			m = next
			if err := m.check(); err != nil {
				t.Fatalf("after %s: %v", m, err)
			}
		}
	})
}
