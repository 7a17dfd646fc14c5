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

// del is a delete (name a delete's unique name) with the given result.
func del(client int, key, name string, inv, done int64, result string) histOp {
	op := histOp{Client: client, Kind: kindDelete, Key: key, Value: delPrefix + name, Invoke: inv, Complete: done, Result: result}
	if result == resUnknown {
		op.Complete = -1
	}
	return op
}

// cad is a compare-and-delete of expect with the given result.
func cad(client int, key, expect, name string, inv, done int64, result string) histOp {
	op := del(client, key, name, inv, done, result)
	op.Kind, op.Expect = kindCAD, expect
	return op
}

// TestModelDelete: a deleted key reads as absent; deletes and
// compare-and-deletes, acknowledged, refused, unknown or failed.
func TestModelDelete(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []histOp
		want string
	}{
		{"delete then absent", []histOp{put(1, "k", "a", 0, 10), del(2, "k", "d1", 20, 30, resOK),
			get(kindStrong, 3, "k", "", 40, 50)}, "ok"},
		{"the deleted value read after the delete", []histOp{put(1, "k", "a", 0, 10), del(2, "k", "d1", 20, 30, resOK),
			get(kindStrong, 3, "k", "a", 40, 50)}, "illegal"},
		{"a put after a delete", []histOp{put(1, "k", "a", 0, 10), del(2, "k", "d1", 20, 30, resOK),
			put(1, "k", "b", 40, 50), get(kindStrong, 3, "k", "b", 60, 70)}, "ok"},
		{"absent after a delete, then a put lost", []histOp{del(2, "k", "d1", 0, 10, resOK),
			put(1, "k", "b", 20, 30), get(kindStrong, 3, "k", "", 40, 50)}, "illegal"},
		{"a delete concurrent with a read", []histOp{put(1, "k", "a", 0, 10), del(2, "k", "d1", 20, 60, resOK),
			get(kindStrong, 3, "k", "a", 30, 40), get(kindStrong, 3, "k", "", 70, 80)}, "ok"},
		{"unknown delete applied", []histOp{put(1, "k", "a", 0, 10), del(2, "k", "d1", 20, 0, resUnknown),
			get(kindStrong, 3, "k", "a", 40, 50), get(kindStrong, 3, "k", "", 60, 70)}, "ok"},
		{"a failed delete is not applied", []histOp{put(1, "k", "a", 0, 10), del(2, "k", "d1", 20, 30, resFail),
			get(kindStrong, 3, "k", "", 40, 50)}, "illegal"},
		{"cad on the value read", []histOp{put(1, "k", "a", 0, 10), cad(2, "k", "a", "d1", 20, 30, resOK),
			get(kindStrong, 3, "k", "", 40, 50)}, "ok"},
		{"cad applied on an overwritten value", []histOp{put(1, "k", "a", 0, 10), put(1, "k", "b", 20, 30),
			cad(2, "k", "a", "d1", 40, 50, resOK)}, "illegal"},
		{"cad refused after an overwrite, the value stays", []histOp{put(1, "k", "a", 0, 10), put(1, "k", "b", 20, 30),
			cad(2, "k", "a", "d1", 40, 50, resCondFailed), get(kindStrong, 3, "k", "b", 60, 70)}, "ok"},
		{"cad refused on the current value", []histOp{put(1, "k", "a", 0, 10), cad(2, "k", "a", "d1", 20, 30, resCondFailed)}, "illegal"},
		{"two cad on one version both applied", []histOp{put(1, "k", "a", 0, 10), cad(2, "k", "a", "d1", 20, 40, resOK),
			put(1, "k", "a2", 50, 60), cad(3, "k", "a", "d2", 20, 70, resOK)}, "illegal"},
		{"unknown cad on an overwritten value cannot apply", []histOp{put(1, "k", "a", 0, 10), put(1, "k", "b", 20, 30),
			cad(2, "k", "a", "d1", 40, 0, resUnknown), get(kindStrong, 3, "k", "", 60, 70)}, "illegal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &verdict{}
			checkLinearizable(tc.ops, 10*time.Second, t.TempDir(), v)
			assert.Equal(t, tc.want, v.Linearizable)
		})
	}
}

// TestChecksCountDeletes: an acknowledged delete is a write for the
// lost-write, session and staleness checks, and absence is no longer
// older than every write once deletes may have applied.
func TestChecksCountDeletes(t *testing.T) {
	sec := int64(time.Second)
	ops := []histOp{put(1, "k", "a", 0, 10), del(1, "k", "d1", 20, 30, resOK)}
	final := func(val string) map[string]histOp {
		return map[string]histOp{"k": get(kindFinal, 0, "k", val, 100, 110)}
	}

	v := &verdict{}
	checkLostWrites(ops, final("a"), []string{"k"}, v)
	assert.Equal(t, 1, v.LostAckedWrites, "an acknowledged delete lost: the deleted value reads back")
	v = &verdict{}
	checkLostWrites(ops, final(""), []string{"k"}, v)
	assert.Equal(t, 0, v.LostAckedWrites)
	assert.Empty(t, v.Violations)

	// A put, then a delete that may have applied after it: absence is
	// not a lost put; with the delete done before the put began it is.
	racing := []histOp{put(1, "k", "b", 20, 40), del(2, "k", "d1", 30, 50, resOK)}
	v = &verdict{}
	checkLostWrites(racing, final(""), []string{"k"}, v)
	assert.Equal(t, 0, v.LostAckedWrites, "the delete may come after the put")
	unknown := []histOp{del(2, "k", "d1", 0, 0, resUnknown), put(1, "k", "b", 20, 40)}
	v = &verdict{}
	checkLostWrites(unknown, final(""), []string{"k"}, v)
	assert.Equal(t, 0, v.LostAckedWrites, "an unknown delete may apply at any time after its call")
	done := []histOp{del(2, "k", "d1", 0, 10, resOK), put(1, "k", "b", 20, 40)}
	v = &verdict{}
	checkLostWrites(done, final(""), []string{"k"}, v)
	assert.Equal(t, 1, v.LostAckedWrites, "the delete finished before the put began")

	// A delete's name read back is a phantom (no store holds it).
	v = &verdict{}
	checkLostWrites(ops, final(delPrefix+"d1"), []string{"k"}, v)
	assert.NotEmpty(t, v.Violations)

	v = &verdict{}
	checkSessions(append(append([]histOp(nil), ops...), get(kindSession, 1, "k", "a", 40, 50)), v)
	assert.Equal(t, 1, v.SessionViolations, "read-your-writes after a delete")
	v = &verdict{}
	checkSessions(append(append([]histOp(nil), ops...), get(kindSession, 1, "k", "", 40, 50)), v)
	assert.Equal(t, 0, v.SessionViolations)

	v = &verdict{}
	checkStaleness(append(append([]histOp(nil), ops...), get(kindBounded, 2, "k", "a", 3*sec, 3*sec+10)), time.Second, v)
	assert.Equal(t, 1, v.StalenessViol, "superseded by a delete 3 s before")
	v = &verdict{}
	checkStaleness(append(append([]histOp(nil), ops...), get(kindBounded, 2, "k", "", 3*sec, 3*sec+10)), time.Second, v)
	assert.Equal(t, 0, v.StalenessViol)
}
