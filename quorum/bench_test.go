package quorum

import "testing"

var benchSink bool

func BenchmarkIsQuorum(b *testing.B) {
	s := Majority(1, 2, 3, 4, 5)
	votes := [6]bool{false, false, true, false, true, true}
	vote := func(id ID) bool { return votes[id] }
	b.ReportAllocs()
	for b.Loop() {
		benchSink = s.IsQuorum(vote)
	}
}

func BenchmarkCanReach(b *testing.B) {
	s := Majority(1, 2, 3, 4, 5)
	rejected := [6]bool{false, true, true, false, false, false}
	reject := func(id ID) bool { return rejected[id] }
	b.ReportAllocs()
	for b.Loop() {
		benchSink = s.CanReach(reject)
	}
}

func BenchmarkIntersects(b *testing.B) {
	p, a := Majority(1, 2, 3, 4, 5), Majority(1, 2, 3, 4, 5, 6)
	b.ReportAllocs()
	for b.Loop() {
		benchSink = Intersects(p, a)
	}
}

func BenchmarkCommits(b *testing.B) {
	w := wq3(2)
	durable := func(r Region) bool { return r != "" }
	b.ReportAllocs()
	for b.Loop() {
		benchSink = w.Commits(durable)
	}
}
