package sim

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
)

func TestStepRegister(t *testing.T) {
	st := regState{Version: 3, Data: "x"}
	ok := func(v uint64, d string) regOutput { return regOutput{Status: statusOK, Version: v, Data: d} }
	tests := []struct {
		name  string
		in    regInput
		out   regOutput
		legal bool
		next  regState
	}{
		{"read current", regInput{Kind: opRead}, ok(3, "x"), true, st},
		{"stale read", regInput{Kind: opRead}, ok(2, "w"), false, st},
		{"read of a table ignores versions", regInput{Kind: opRead, Slots: 2}, ok(9, "x"), true, st},
		{"cas succeeds", regInput{Kind: opCAS, Expected: 3, Data: "y"}, ok(4, "y"), true, regState{4, "y"}},
		{"cas on a stale version cannot succeed", regInput{Kind: opCAS, Expected: 2, Data: "y"}, ok(3, "y"), false, regState{4, "y"}},
		{"mismatch shows the current value", regInput{Kind: opCAS, Expected: 2, Data: "y"}, regOutput{Status: statusMismatch, Version: 3, Data: "x"}, true, st},
		{"mismatch on the expected version is a lie", regInput{Kind: opCAS, Expected: 3, Data: "y"}, regOutput{Status: statusMismatch, Version: 3, Data: "x"}, false, st},
		{"unknown cas that applies", regInput{Kind: opCAS, Expected: 3, Data: "y"}, regOutput{Status: statusUnknown}, true, regState{4, "y"}},
		{"unknown cas that cannot apply", regInput{Kind: opCAS, Expected: 1, Data: "y"}, regOutput{Status: statusUnknown}, true, st},
		{"beat raises a slot", regInput{Kind: opBeat, Slot: 1, Slots: 2, N: 5}, ok(0, ""), true, regState{4, "0,5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			legal, next := stepRegister(st, tt.in, tt.out)
			assert.Equal(t, tt.legal, legal)
			if legal {
				assert.Equal(t, tt.next, next)
			}
		})
	}
}

func TestApplyBeatIsIdempotent(t *testing.T) {
	d, changed := applyBeat("", 3, 2, 7)
	assert.True(t, changed)
	assert.Equal(t, "0,0,7", d)
	d2, changed := applyBeat(d, 3, 2, 7)
	assert.False(t, changed)
	assert.Equal(t, d, d2)
	_, changed = applyBeat(d, 3, 2, 6)
	assert.False(t, changed, "counts never go back")
}

func TestHistoryPrunesUnobservedUnknowns(t *testing.T) {
	h := NewHistory(100)
	c := h.NewClient()
	at := func(ms int) time.Duration { return time.Duration(ms) * time.Millisecond }
	seen := h.Call(c, regInput{Kind: opCAS, Key: "k", Expected: 0, Data: "a"}, at(1))
	h.Return(seen, regOutput{Status: statusUnknown}, at(2))
	unseen := h.Call(c, regInput{Kind: opCAS, Key: "k", Expected: 1, Data: "b"}, at(3))
	h.Return(unseen, regOutput{Status: statusUnknown}, at(4))
	r := h.Call(c, regInput{Kind: opRead, Key: "k"}, at(5))
	h.Return(r, regOutput{Status: statusOK, Version: 1, Data: "a"}, at(6))
	gone := h.Call(c, regInput{Kind: opCAS, Key: "k", Expected: 1, Data: "c"}, at(7))
	h.Discard(gone)
	h.Call(c, regInput{Kind: opRead, Key: "k"}, at(8)) // never returned
	ops := h.Operations()
	var datas []string
	for _, op := range ops {
		datas = append(datas, op.Input.(regInput).Data)
	}
	assert.Equal(t, []string{"a", ""}, datas, "the observed unknown and the read stay")
	assert.Equal(t, infiniteReturn, ops[0].Return, "unknown outcomes return at infinity")
	assert.Equal(t, porcupine.Ok, porcupine.CheckOperationsTimeout(registerModel(), ops, time.Second))
}

func TestCheckLinearizableWritesVisualisation(t *testing.T) {
	h := NewHistory(10)
	c := h.NewClient()
	i := h.Call(c, regInput{Kind: opCAS, Key: "k", Data: "a"}, 1)
	h.Return(i, regOutput{Status: statusOK, Version: 1, Data: "a"}, 2)
	j := h.Call(c, regInput{Kind: opRead, Key: "k"}, 3)
	h.Return(j, regOutput{Status: statusOK, Version: 0}, 4) // reads the past: illegal
	dir := t.TempDir()
	verdict, path, err := checkLinearizable(h.Operations(), time.Second, dir, "x")
	assert.NoError(t, err)
	assert.Equal(t, LinIllegal, verdict)
	assert.FileExists(t, path)
	verdict, path, err = checkLinearizable(h.Operations()[:1], time.Second, dir, "y")
	assert.NoError(t, err)
	assert.Equal(t, LinOK, verdict)
	assert.Empty(t, path)
}
