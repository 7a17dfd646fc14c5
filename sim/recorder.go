package sim

import (
	"errors"
	"time"

	"github.com/fmnode/fmnode/caspaxos"
)

// OpStats counts client operations by outcome.
type OpStats struct {
	Issued   uint64 `json:"issued"`
	OK       uint64 `json:"ok"`        // returned a definite answer (incl. CAS mismatches)
	Mismatch uint64 `json:"mismatch"`  // of OK: CAS that found another version
	Failed   uint64 `json:"failed"`    // certainly took no effect
	Unknown  uint64 `json:"unknown"`   // may or may not have taken effect
	Refused  uint64 `json:"refused"`   // refused at submit (overload, proposer down)
	TimedOut uint64 `json:"timed_out"` // of Failed and Unknown: a phase timeout ended the last round
}

// recorder turns proposer results into history entries; clients, the
// rescan and the final reads all record through it so the checker sees
// every operation that touched a register.
// Calls and returns go into the trace too: a replay that diverges shows it
// in the hash even where no message differs yet.
type recorder struct {
	hist  *History
	stats *OpStats
	tr    *Trace
}

func (rc recorder) call(client int, in regInput, now time.Duration) int {
	rc.stats.Issued++
	rc.tr.Begin(traceCall, now)
	rc.tr.U64(uint64(client))
	rc.tr.Byte(byte(in.Kind))
	rc.tr.Str(in.Key)
	rc.tr.U64(in.Expected)
	return rc.hist.Call(client, in, now)
}

func (rc recorder) traceReturn(i int, status opStatus, version uint64, now time.Duration) {
	rc.tr.Begin(traceReturn, now)
	rc.tr.U64(uint64(i))
	rc.tr.Byte(byte(status))
	rc.tr.U64(version)
}

// done records res for the operation at index i and reports whether it
// succeeded with a definite answer.
func (rc recorder) done(i int, in regInput, res caspaxos.Result, now time.Duration) bool {
	var vm *caspaxos.VersionMismatchError
	if errors.Is(res.Err, caspaxos.ErrTimeout) {
		rc.stats.TimedOut++
	}
	switch {
	case res.Err == nil:
		rc.traceReturn(i, statusOK, res.Value.Version, now)
		rc.stats.OK++
		rc.hist.Return(i, regOutput{Status: statusOK, Version: res.Value.Version, Data: string(res.Value.Data)}, now)
		return true
	case errors.Is(res.Err, caspaxos.ErrUnknownOutcome):
		if in.Kind == opRead {
			rc.stats.Failed++
			rc.hist.Discard(i)
			return false
		}
		rc.traceReturn(i, statusUnknown, 0, now)
		rc.stats.Unknown++
		rc.hist.Return(i, regOutput{Status: statusUnknown}, now)
		return false
	case errors.As(res.Err, &vm):
		rc.traceReturn(i, statusMismatch, vm.Current.Version, now)
		rc.stats.OK++
		rc.stats.Mismatch++
		rc.hist.Return(i, regOutput{Status: statusMismatch, Version: vm.Current.Version, Data: string(vm.Current.Data)}, now)
		return true
	default:
		rc.traceReturn(i, 0, 0, now)
		rc.stats.Failed++
		rc.hist.Discard(i)
		return false
	}
}

// lost records an operation whose proposer crashed under it.
func (rc recorder) lost(i int, in regInput, now time.Duration) {
	rc.traceReturn(i, statusUnknown, 0, now)
	if in.Kind == opRead {
		rc.stats.Failed++
		rc.hist.Discard(i)
		return
	}
	rc.stats.Unknown++
	rc.hist.Return(i, regOutput{Status: statusUnknown}, now)
}
