package partition

// history is a replica's epoch history: rows ascending by Epoch with
// non-decreasing After. Row i covers LSNs (rows[i].After, rows[i+1].After];
// the last row covers everything after its After. LSNs at or below the first
// row's After are unknown to the history (the replica keeps the epoch of its
// log base separately). Rows are never shared between replicas' histories.
type history []EpochRange

// epochAt returns the epoch of the op at lsn according to the history, or
// false if the history does not cover lsn.
func (h history) epochAt(lsn LSN) (Epoch, bool) { return EpochAt(h, lsn) }

// EpochAt returns the epoch of the op at lsn according to an epoch history
// (Progress.History: rows ascending by Epoch with non-decreasing After, row
// i covering LSNs (rows[i].After, rows[i+1].After]), or false if the history
// does not cover lsn (lsn at or below the first row's After: compacted or
// never known). LSN 0, the empty prefix, is of epoch 0 in every history.
// It is the one reading of a history; checkers outside the package (the
// simulator, replcheck) use it rather than their own copies.
func EpochAt(h []EpochRange, lsn LSN) (Epoch, bool) {
	if lsn == 0 {
		return 0, true
	}
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].After < lsn {
			return h[i].Epoch, true
		}
	}
	return 0, false
}

// endOf returns the last LSN at or below last whose epoch is at most e: the
// end of the prefix this history shares with any log whose entries up to
// that point are of epochs <= e. Used to find where a follower's log can
// still match (the follower reports an LSN and its epoch there).
func (h history) endOf(e Epoch, last LSN) LSN {
	for i := range h {
		if h[i].Epoch > e {
			if h[i].After < last {
				return h[i].After
			}
			return last
		}
	}
	return last
}

// push records that ops of epoch e start after lsn. A row for an epoch that
// got no ops (same After) is replaced.
func (h history) push(e Epoch, after LSN) history {
	if n := len(h); n > 0 {
		last := h[n-1]
		if last.Epoch == e {
			return h
		}
		if last.After == after {
			h[n-1] = EpochRange{Epoch: e, After: after}
			return h
		}
	}
	return append(h, EpochRange{Epoch: e, After: after})
}

// truncate drops what the history says about LSNs above lsn: rows whose
// ops all lie above lsn.
func (h history) truncate(lsn LSN) history {
	n := len(h)
	for n > 0 && h[n-1].After >= lsn {
		n--
	}
	return h[:n]
}

// trim keeps at most max rows, first dropping rows whose whole range lies
// at or below base (the log base's epoch is kept separately), then the
// oldest rows. LSNs of dropped rows become unknown.
func (h history) trim(base LSN, max int) history {
	drop := 0
	for drop+1 < len(h) && h[drop+1].After <= base {
		drop++
	}
	if len(h)-drop > max {
		drop = len(h) - max
	}
	if drop == 0 {
		return h
	}
	return append(h[:0], h[drop:]...)
}

// clone copies the rows.
func (h history) clone() history {
	if h == nil {
		return nil
	}
	return append(history(nil), h...)
}

// valid reports whether rows ascend by Epoch with non-decreasing After.
func (h history) valid() bool {
	for i := 1; i < len(h); i++ {
		if h[i].Epoch <= h[i-1].Epoch || h[i].After < h[i-1].After {
			return false
		}
	}
	return true
}
