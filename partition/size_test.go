package partition

import (
	"testing"
	"unsafe"
)

// TestIdleFootprint keeps the per-partition structs small: an idle hosted
// partition must cost well under 4 KiB (the benchmark measures the whole).
func TestIdleFootprint(t *testing.T) {
	rep := unsafe.Sizeof(Replica{})
	ls := unsafe.Sizeof(leaderState{})
	fo := unsafe.Sizeof(follower{})
	t.Logf("Replica %d B, leaderState %d B, follower %d B", rep, ls, fo)
	if rep+ls+2*fo > 1024 {
		t.Fatalf("a leading replica with two followers takes %d B of structs", rep+ls+2*fo)
	}
}
