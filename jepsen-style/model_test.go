package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// cas is a CAS from expect to val with the given result.
func cas(client int, key, expect, val string, inv, done int64, result string) histOp {
	op := histOp{Client: client, Kind: kindCAS, Key: key, Expect: expect, Value: val, Invoke: inv, Complete: done, Result: result}
	if result == resUnknown {
		op.Complete = -1
	}
	return op
}

// TestModelCAS: small hand-made histories of puts, CASes and strong
// reads, legal and not, through the same path as a run's history.
func TestModelCAS(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []histOp
		want string
	}{
		{"cas on the value read", []histOp{put(1, "k", "a", 0, 10), cas(2, "k", "a", "b", 20, 30, resOK),
			get(kindStrong, 3, "k", "b", 40, 50)}, "ok"},
		{"cas on absent", []histOp{cas(1, "k", "", "a", 0, 10, resOK), get(kindStrong, 2, "k", "a", 20, 30)}, "ok"},
		{"cas succeeded against a value already overwritten", []histOp{put(1, "k", "a", 0, 10), put(1, "k", "b", 20, 30),
			cas(2, "k", "a", "c", 40, 50, resOK)}, "illegal"},
		{"cas on absent after an acknowledged put", []histOp{put(1, "k", "a", 0, 10), cas(2, "k", "", "b", 20, 30, resOK)}, "illegal"},
		{"two cas on one version both applied", []histOp{put(1, "k", "a", 0, 10), cas(2, "k", "a", "b", 20, 40, resOK),
			cas(3, "k", "a", "c", 20, 40, resOK)}, "illegal"},
		{"two concurrent cas on one version: one refused", []histOp{put(1, "k", "a", 0, 10), cas(2, "k", "a", "b", 20, 40, resOK),
			cas(3, "k", "a", "c", 20, 40, resCondFailed), get(kindStrong, 1, "k", "b", 50, 60)}, "ok"},
		{"condition failed on the current value", []histOp{put(1, "k", "a", 0, 10), cas(2, "k", "a", "b", 20, 30, resCondFailed)}, "illegal"},
		{"condition failed after an overwrite", []histOp{put(1, "k", "a", 0, 10), put(1, "k", "b", 20, 30),
			cas(2, "k", "a", "c", 40, 50, resCondFailed)}, "ok"},
		{"a refused cas is not applied", []histOp{put(1, "k", "a", 0, 10), put(1, "k", "b", 20, 30),
			cas(2, "k", "a", "c", 40, 50, resCondFailed), get(kindStrong, 3, "k", "c", 60, 70)}, "illegal"},
		{"unknown cas applied late", []histOp{put(1, "k", "a", 0, 10), cas(2, "k", "a", "b", 20, 0, resUnknown),
			get(kindStrong, 3, "k", "a", 40, 50), get(kindStrong, 3, "k", "b", 60, 70)}, "ok"},
		{"unknown cas never applied", []histOp{put(1, "k", "a", 0, 10), cas(2, "k", "a", "b", 20, 0, resUnknown),
			get(kindStrong, 3, "k", "a", 40, 50)}, "ok"},
		{"unknown cas applied against an overwritten value", []histOp{put(1, "k", "a", 0, 10), put(1, "k", "x", 20, 30),
			cas(2, "k", "a", "b", 40, 0, resUnknown), get(kindStrong, 3, "k", "b", 60, 70)}, "illegal"},
		{"a cas that failed otherwise is not applied", []histOp{put(1, "k", "a", 0, 10), cas(2, "k", "a", "b", 20, 30, resFail),
			get(kindStrong, 3, "k", "b", 40, 50)}, "illegal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &verdict{}
			checkLinearizable(tc.ops, 10*time.Second, t.TempDir(), v)
			assert.Equal(t, tc.want, v.Linearizable)
		})
	}
}

// TestChecksCountCAS: an acknowledged CAS is a write for the lost-write,
// session, staleness and durable-store checks.
func TestChecksCountCAS(t *testing.T) {
	sec := int64(time.Second)
	ops := []histOp{put(1, "k", "a", 0, 10), cas(1, "k", "a", "b", 20, 30, resOK)}

	v := &verdict{}
	checkLostWrites(ops, map[string]histOp{"k": get(kindFinal, 0, "k", "a", 100, 110)}, []string{"k"}, v)
	assert.Equal(t, 1, v.LostAckedWrites, "an acknowledged cas lost")
	v = &verdict{}
	checkLostWrites(ops, map[string]histOp{"k": get(kindFinal, 0, "k", "b", 100, 110)}, []string{"k"}, v)
	assert.Equal(t, 0, v.LostAckedWrites)

	v = &verdict{}
	checkSessions(append(append([]histOp(nil), ops...), get(kindSession, 1, "k", "a", 40, 50)), v)
	assert.Equal(t, 1, v.SessionViolations, "read-your-writes after a cas")

	v = &verdict{}
	checkStaleness(append(append([]histOp(nil), ops...), get(kindBounded, 2, "k", "a", 3*sec, 3*sec+10)), time.Second, v)
	assert.Equal(t, 1, v.StalenessViol, "superseded by a cas 3 s before")

	// A refused CAS's value read back is a write nobody made.
	v = &verdict{}
	refused := []histOp{put(1, "k", "a", 0, 10), cas(1, "k", "x", "b", 20, 30, resCondFailed)}
	checkLinearizable(append(refused, get(kindFinal, 0, "k", "b", 100, 110)), 10*time.Second, t.TempDir(), v)
	assert.Equal(t, "illegal", v.Linearizable)
}
