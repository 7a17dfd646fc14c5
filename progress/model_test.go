package progress

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The reference model: regions hold explicit logs of ops, an op being
// identified by (epoch, LSN) because the write region of an epoch writes
// each LSN at most once. Replication follows log matching (truncate to the
// common prefix with the source, then copy from it), the write region
// appends, and a deposed write region that has not followed anyone newer
// may keep appending in its old epoch (an ungraceful failover with the old
// write region cut off: its writes are the false progress). The lineage is
// the current write region's log; the true divergence point of a replica is
// the length of its longest common prefix with the lineage. The progress
// table never sees the logs, only positions, and must agree.

type modelRegion struct {
	name  string
	log   []Epoch // log[i] is the epoch of the op at LSN i+1
	epoch Epoch   // epoch of the write region whose log this log is a prefix of (0: none)
}

type position struct {
	epoch Epoch
	last  LSN
}

// joined reports the epoch the region last followed (or led).
func (r *modelRegion) joined() position { return position{r.epoch, LSN(len(r.log))} }

// lastOp reports the epoch of the region's last op; (0, 0) for an empty log.
func (r *modelRegion) lastOp() position {
	if len(r.log) == 0 {
		return position{}
	}
	return position{r.log[len(r.log)-1], LSN(len(r.log))}
}

func (r *modelRegion) positions() [2]position { return [2]position{r.joined(), r.lastOp()} }

type modelLimits struct {
	regions      int
	maxLSN       int   // no log grows beyond this
	maxFailovers int   // failovers per history
	gaps         []int // epoch steps a failover may take
	syncCopies   []int // ops a sync copies beyond the common prefix; -1: all
}

type model struct {
	lim       modelLimits
	regions   []modelRegion
	writer    int
	cur       Epoch
	writerOf  []int8 // writerOf[e]: region index of epoch e's write region, -1 if none
	failovers int

	full Table // only the MaxEpochs cap ever drops epochs
	comp Table // compacted after every step at the minimum common LSN
	// forced is set once Open has dropped an epoch some replica may still
	// be in; from then on NeedsSnapshot is an acceptable answer for such
	// replicas.
	forced bool
	hist   *histNode // the actions so far, newest first
	stats  *modelStats
}

// modelStats counts which rules a search exercised, so that a test can
// insist that every interesting case actually happened.
type modelStats struct {
	reasons        [ReasonFalseProgress + 1]int
	behind         int // promotions through CandidateBehindError + OpenBehind
	forcedSnapshot int // NeedsSnapshot answers after forced drops
	compacted      int // states where the compacted table dropped epochs
}

// histNode is a persistent list, so cloning a model does not copy its history.
type histNode struct {
	prev *histNode
	a    action
}

func regionName(i int) string { return string(rune('A' + i)) }

func newModel(lim modelLimits) *model {
	m := &model{lim: lim, cur: 1, writerOf: []int8{-1, 0}, stats: &modelStats{}}
	for i := range lim.regions {
		m.regions = append(m.regions, modelRegion{name: regionName(i), epoch: 1})
	}
	t, err := New("p", EpochRange{Epoch: 1, Open: true, WriteRegion: regionName(0)})
	if err != nil {
		panic(err)
	}
	m.full, m.comp = t, t
	return m
}

func (m *model) clone() *model {
	c := *m
	c.regions = make([]modelRegion, len(m.regions))
	for i, r := range m.regions {
		c.regions[i] = r
		c.regions[i].log = slices.Clone(r.log)
	}
	c.writerOf = slices.Clone(m.writerOf)
	return &c
}

func lcp(a, b []Epoch) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func (m *model) lineage() []Epoch { return m.regions[m.writer].log }

func (m *model) truth(i int) int { return lcp(m.regions[i].log, m.lineage()) }

// active reports whether region i is the write region of the epoch it is
// in: the current write region, or a deposed one still writing.
func (m *model) active(i int) bool {
	e := m.regions[i].epoch
	return int(e) < len(m.writerOf) && int(m.writerOf[e]) == i
}

// action is one step of a history. kind: 'w' write, 'z' zombie write,
// 's' sync (region a from region b, copying n), 'f' failover (to a, epoch
// step n).
type action struct {
	kind byte
	a, b int
	n    int
}

func (a action) String() string {
	switch a.kind {
	case 'w':
		return "write"
	case 'z':
		return fmt.Sprintf("zombie(%s)", regionName(a.a))
	case 's':
		return fmt.Sprintf("sync(%s<-%s,%d)", regionName(a.a), regionName(a.b), a.n)
	default:
		return fmt.Sprintf("failover(%s,+%d)", regionName(a.a), a.n)
	}
}

// actions lists every action enabled in the current state.
func (m *model) actions() []action {
	var out []action
	if len(m.lineage()) < m.lim.maxLSN {
		out = append(out, action{kind: 'w'})
	}
	for i, r := range m.regions {
		if i != m.writer && r.epoch < m.cur && m.active(i) && len(r.log) < m.lim.maxLSN {
			out = append(out, action{kind: 'z', a: i})
		}
	}
	for f := range m.regions {
		for src := range m.regions {
			if f == src || !m.active(src) || m.regions[f].epoch > m.regions[src].epoch {
				continue
			}
			for _, n := range m.lim.syncCopies {
				out = append(out, action{kind: 's', a: f, b: src, n: n})
			}
		}
	}
	if m.failovers < m.lim.maxFailovers {
		for c := range m.regions {
			for _, g := range m.lim.gaps {
				out = append(out, action{kind: 'f', a: c, n: g})
			}
		}
	}
	return out
}

// apply performs a; ok is false when the tables legitimately refuse it
// (only possible after forced drops), err reports a disagreement.
func (m *model) apply(a action) (ok bool, err error) {
	m.hist = &histNode{prev: m.hist, a: a}
	switch a.kind {
	case 'w':
		w := &m.regions[m.writer]
		w.log = append(w.log, m.cur)
	case 'z':
		r := &m.regions[a.a]
		r.log = append(r.log, r.epoch)
	case 's':
		f, src := &m.regions[a.a], &m.regions[a.b]
		n := len(src.log)
		if a.n >= 0 {
			n = min(n, lcp(f.log, src.log)+a.n)
		}
		f.log = slices.Clone(src.log[:n])
		f.epoch = src.epoch
	case 'f':
		ok, err := m.failover(a.a, Epoch(a.n))
		if !ok || err != nil {
			return ok, err
		}
	}
	minCommon := LSN(m.lim.maxLSN)
	for i := range m.regions {
		minCommon = min(minCommon, LSN(m.truth(i)))
	}
	comp, err := m.comp.Compact(minCommon, MaxEpochs)
	if err != nil {
		return false, fmt.Errorf("compact: %w", err)
	}
	m.comp = comp
	return true, nil
}

// failover promotes region c. The true start of the new epoch is c's common
// prefix with the lineage; both tables must find it from c's positions
// alone, through Promote or, if c is behind the current epoch's start,
// CandidateBehindError and OpenBehind.
func (m *model) failover(c int, gap Epoch) (bool, error) {
	want := LSN(m.truth(c))
	newEpoch := m.cur + gap
	cand := &m.regions[c]
	var next [2]Table
	for ti, tb := range []Table{m.full, m.comp} {
		for pi, p := range cand.positions() {
			nt, d, err := tb.Promote(newEpoch, cand.name, p.epoch, p.last)
			var behind *CandidateBehindError
			switch {
			case errors.As(err, &behind):
				if behind.CommonLSN != want || want >= tb.Current().StartLSN {
					return false, fmt.Errorf("table %d pos %v: %v, true common %d", ti, p, err, want)
				}
				m.stats.behind++
				nt, err = tb.OpenBehind(newEpoch, cand.name, want)
				if err != nil {
					if m.forced && errors.Is(err, ErrLSNRegression) {
						return false, nil
					}
					return false, fmt.Errorf("table %d: open behind: %w", ti, err)
				}
			case errors.Is(err, ErrSnapshotRequired):
				if !m.forced || p.epoch >= tb.BaseEpoch {
					return false, fmt.Errorf("table %d pos %v: unexpected %w", ti, p, err)
				}
				return false, nil
			case err != nil:
				return false, fmt.Errorf("table %d pos %v: %w", ti, p, err)
			default:
				if d.CommonLSN != want || d.FalseProgress != (LSNRange{want, p.last}) || !d.Delta.Empty() {
					return false, fmt.Errorf("table %d pos %v: promote divergence %+v, true common %d", ti, p, d, want)
				}
			}
			if got := nt.Current(); got.Epoch != newEpoch || got.StartLSN != want || got.WriteRegion != cand.name {
				return false, fmt.Errorf("table %d pos %v: opened %+v, want start %d", ti, p, got, want)
			}
			if pi == 0 {
				next[ti] = nt
			} else if !tablesEqual(nt, next[ti]) {
				return false, fmt.Errorf("table %d: positions %v give different tables:\n%v\n%v", ti, cand.positions(), next[ti], nt)
			}
		}
	}
	if len(m.full.Epochs) == MaxEpochs {
		m.forced = true // Open dropped the oldest epoch
	}
	m.full, m.comp = next[0], next[1]
	cand.log = cand.log[:want]
	cand.epoch = newEpoch
	for Epoch(len(m.writerOf)) <= newEpoch {
		m.writerOf = append(m.writerOf, -1)
	}
	m.writerOf[newEpoch] = int8(c)
	m.writer = c
	m.cur = newEpoch
	m.failovers++
	return true, nil
}

func tablesEqual(a, b Table) bool {
	return a.Partition == b.Partition && a.BaseEpoch == b.BaseEpoch && slices.Equal(a.Epochs, b.Epochs)
}

// check compares every table's answer for every region, under both ways of
// reporting a position, with the logs.
func (m *model) check() error {
	lineageLast := LSN(len(m.lineage()))
	for ti, tb := range []Table{m.full, m.comp} {
		if err := tb.Validate(); err != nil {
			return fmt.Errorf("table %d: %w", ti, err)
		}
		if cur := tb.Current(); cur.Epoch != m.cur || cur.WriteRegion != m.regions[m.writer].name {
			return fmt.Errorf("table %d: current %+v, want epoch %d region %s", ti, cur, m.cur, m.regions[m.writer].name)
		}
		if err := roundTrip(tb); err != nil {
			return fmt.Errorf("table %d: %w", ti, err)
		}
		if err := m.checkTable(tb, m.forced, lineageLast); err != nil {
			return fmt.Errorf("table %d: %w", ti, err)
		}
	}
	if m.comp.BaseEpoch > 1 {
		m.stats.compacted++
	}
	// Forced compaction to any smaller bound: answers stay right or become
	// NeedsSnapshot, and never for a replica past the compacted range.
	for keep := 1; keep < len(m.full.Epochs); keep++ {
		fc, err := m.full.Compact(0, keep)
		if err != nil {
			return err
		}
		if err := m.checkTable(fc, true, lineageLast); err != nil {
			return fmt.Errorf("forced compaction to %d epochs: %w", keep, err)
		}
	}
	return nil
}

func (m *model) checkTable(tb Table, snapshotOK bool, lineageLast LSN) error {
	for i := range m.regions {
		r := &m.regions[i]
		want := LSN(m.truth(i))
		for _, p := range r.positions() {
			d, err := tb.Diverge(p.epoch, p.last, lineageLast)
			if err != nil {
				return fmt.Errorf("region %s pos %v: %w", r.name, p, err)
			}
			m.stats.reasons[d.Reason]++
			if d.NeedsSnapshot {
				m.stats.forcedSnapshot++
				if !snapshotOK || p.epoch >= tb.BaseEpoch || want >= tb.BaseLSN() && want > 0 {
					return fmt.Errorf("region %s pos %v: unexpected snapshot (base epoch %d, base LSN %d, true common %d): %s",
						r.name, p, tb.BaseEpoch, tb.BaseLSN(), want, d.Why())
				}
				continue
			}
			wantD := Divergence{
				CommonLSN:        want,
				FalseProgress:    LSNRange{want, p.last},
				FalseProgressOps: uint64(p.last - want),
				Delta:            LSNRange{want, lineageLast},
			}
			if d.CommonLSN != wantD.CommonLSN || d.FalseProgress != wantD.FalseProgress ||
				d.FalseProgressOps != wantD.FalseProgressOps || d.Delta != wantD.Delta || d.NeedsSnapshot {
				return fmt.Errorf("region %s pos %v: got %+v, want %+v", r.name, p, d, wantD)
			}
		}
	}
	return nil
}

func roundTrip(tb Table) error {
	b, err := Encode(nil, tb)
	if err != nil {
		return err
	}
	got, err := Decode(b)
	if err != nil {
		return err
	}
	if !tablesEqual(got, tb) {
		return fmt.Errorf("round trip: %v != %v", got, tb)
	}
	return nil
}

// key identifies a model state for the exhaustive search's visited set.
// Region epochs and writers are covered by the regions' fields and the
// full table (which names the write region of every epoch).
// Small bounds keep every number below 256.
func (m *model) key(buf []byte) []byte {
	for _, r := range m.regions {
		buf = append(buf, byte(r.epoch), byte(len(r.log)))
		for _, e := range r.log {
			buf = append(buf, byte(e))
		}
	}
	buf = append(buf, byte(m.writer), byte(m.failovers))
	buf, _ = Encode(buf, m.full)
	buf, _ = Encode(buf, m.comp)
	return buf
}

func (s *modelStats) String() string {
	var b strings.Builder
	for r := ReasonEmptyLog; r <= ReasonFalseProgress; r++ {
		fmt.Fprintf(&b, "%v=%d ", r, s.reasons[r])
	}
	fmt.Fprintf(&b, "behind=%d snapshots=%d compactedStates=%d", s.behind, s.forcedSnapshot, s.compacted)
	return b.String()
}

// missing lists the rules a search never exercised.
func (s *modelStats) missing(wantSnapshots bool) []string {
	var out []string
	for r := ReasonEmptyLog; r <= ReasonFalseProgress; r++ {
		if s.reasons[r] == 0 && (r != ReasonCompacted || wantSnapshots) {
			out = append(out, r.String())
		}
	}
	if s.behind == 0 {
		out = append(out, "behind")
	}
	if s.compacted == 0 {
		out = append(out, "compacted")
	}
	return out
}

func (m *model) String() string {
	var as []string
	for h := m.hist; h != nil; h = h.prev {
		as = append(as, h.a.String())
	}
	slices.Reverse(as)
	return strings.Join(as, " ")
}
