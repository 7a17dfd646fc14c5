package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/partition/pebblestore"
	"github.com/fmnode/fmnode/txtdns/routing"
)

// The checker trusts nothing the agents say about themselves: it reads
// the clients' history and, after the agents are dead, their stores.

// verdict is what the checker found in one run.
type verdict struct {
	Linearizable      string  `json:"linearizable"` // ok, illegal, unknown (a failure), skipped
	LostAckedWrites   int     `json:"lost_acked_writes"`
	DualWriters       int     `json:"dual_writers"`
	EpochRegressions  int     `json:"epoch_regressions"`
	SessionViolations int     `json:"session_violations"`
	StalenessViol     int     `json:"staleness_violations"`
	Converged         bool    `json:"converged"`
	RecoveryS         float64 `json:"recovery_s"`
	// AckedNotStored counts acknowledged puts that no agent's store holds
	// in its log, where no replica of the partition compacted its log:
	// acknowledged, then gone from every disk.
	AckedNotStored int `json:"acked_not_stored"`
	StoresRead     int `json:"stores_read"`
	// AcceptorStops counts system-register acceptors that stopped on a
	// store failure (agents' logs); AcceptorRanOn those whose agent did
	// not then stop (checkFailStop).
	AcceptorStops int `json:"acceptor_stops"`
	AcceptorRanOn int `json:"acceptor_ran_on"`
	LogOpsRead    int `json:"log_ops_read"`
	// MaxEpochs is the highest epoch in any store's log, per partition
	// (epoch 1 is the initial write region: each step above is a
	// failover or switchover the data plane recorded).
	MaxEpochs  map[uint32]uint64 `json:"max_epochs,omitempty"`
	Violations []string          `json:"violations"`
	Unsafe     []string          `json:"unsafe,omitempty"` // conditions outside the system's assumptions
	VizPath    string            `json:"porcupine_html,omitempty"`
}

const maxViolationsListed = 40

func (v *verdict) violate(format string, args ...any) {
	if len(v.Violations) < maxViolationsListed {
		v.Violations = append(v.Violations, fmt.Sprintf(format, args...))
	}
}

func (v *verdict) failed() bool {
	return v.Linearizable != "ok" || v.LostAckedWrites > 0 || v.AckedNotStored > 0 || v.DualWriters > 0 || v.EpochRegressions > 0 || v.AcceptorRanOn > 0 ||
		v.SessionViolations > 0 || v.StalenessViol > 0 || !v.Converged || len(v.Violations) > 0
}

// writes indexes the writes by their unique value (a delete's name),
// and the deletes that may have applied by key.
type writes struct {
	byValue map[string]histOp
	dels    map[string][]histOp
}

func indexWrites(ops []histOp) writes {
	w := writes{byValue: map[string]histOp{}, dels: map[string][]histOp{}}
	for _, op := range ops {
		if op.isWrite() {
			w.byValue[op.Value] = op
		}
		if op.isDelete() && (op.Result == resOK || op.Result == resUnknown) {
			w.dels[op.Key] = append(w.dels[op.Key], op)
		}
	}
	return w
}

// before reports whether what a read of a ("" absent) returned certainly
// took effect before the write b (a value or a delete's name) began, so
// that a later read returning it is older than b. A value: its write
// completed before b was invoked. Absence never precedes a delete; it
// precedes a put or CAS b unless some delete of the key that may have
// applied could come after b (it did not complete before b began).
func (w writes) before(a, b string) bool {
	wb, okB := w.byValue[b]
	if !okB {
		return false
	}
	if a == "" {
		if wb.isDelete() {
			return false
		}
		for _, d := range w.dels[wb.Key] {
			if d.Result == resUnknown || d.Complete >= wb.Invoke {
				return false
			}
		}
		return true
	}
	wa, okA := w.byValue[a]
	return okA && wa.Result == resOK && wa.Complete < wb.Invoke
}

// checkLinearizable runs porcupine per key; on a failure it writes the
// HTML visualisation into dir.
func checkLinearizable(ops []histOp, timeout time.Duration, dir string, v *verdict) {
	pops := porcupineOps(ops)
	if len(pops) == 0 {
		v.Linearizable = "skipped"
		return
	}
	model := kvModel()
	switch porcupine.CheckOperationsTimeout(model, pops, timeout) {
	case porcupine.Ok:
		v.Linearizable = "ok"
		return
	case porcupine.Illegal:
		v.Linearizable = "illegal"
		v.violate("porcupine: the strong operations are not linearizable; keys: %v", illegalKeys(model, pops, timeout))
	default:
		v.Linearizable = "unknown"
		v.violate("porcupine: no verdict within %v (counted as a failure)", timeout)
	}
	_, info := porcupine.CheckOperationsVerbose(model, pops, timeout)
	path := filepath.Join(dir, "porcupine.html")
	if err := porcupine.VisualizePath(model, info, path); err == nil {
		v.VizPath = path
	}
}

// illegalKeys names the keys whose histories alone are not linearizable.
func illegalKeys(model porcupine.Model, pops []porcupine.Operation, timeout time.Duration) []string {
	var keys []string
	for _, part := range model.Partition(pops) {
		if porcupine.CheckOperationsTimeout(model, part, timeout) != porcupine.Ok {
			keys = append(keys, part[0].Input.(kvIn).Key)
		}
	}
	return keys
}

// checkLostWrites: after the heal every key is read back strongly; an
// acknowledged put is lost when the value read back certainly precedes
// it (or the key reads absent), and a value no put wrote is a phantom.
func checkLostWrites(ops []histOp, final map[string]histOp, keys []string, v *verdict) {
	w := indexWrites(ops)
	for _, key := range keys {
		f, ok := final[key]
		if !ok {
			continue // not converged: reported there
		}
		got := ""
		if f.Found {
			got = f.Value
			if _, known := w.byValue[got]; !known || strings.HasPrefix(got, delPrefix) {
				v.violate("key %s reads back %q, which no client wrote", key, got)
			}
		}
		for _, op := range ops {
			if op.isWrite() && op.Key == key && op.Result == resOK && w.before(got, op.Value) {
				v.LostAckedWrites++
				v.violate("acknowledged %s %s=%s (client %d, done at %v) lost: the read-back after the heal is %q",
					op.Kind, key, op.Value, op.Client, time.Duration(op.Complete), got)
			}
		}
	}
}

// checkSessions: within a client's session, a session read never
// returns a value older than what the session wrote (acknowledged) or
// read before on that key: read-your-writes and monotonic reads.
func checkSessions(ops []histOp, v *verdict) {
	w := indexWrites(ops)
	type ck struct {
		client int
		key    string
	}
	floor := map[ck]string{}
	sorted := append([]histOp(nil), ops...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Invoke < sorted[j].Invoke })
	for _, op := range sorted {
		if op.Result != resOK || op.Client == 0 {
			continue
		}
		k := ck{op.Client, op.Key}
		got := ""
		if op.Found {
			got = op.Value
		}
		switch op.Kind {
		case kindPut, kindCAS, kindDelete, kindCAD:
			floor[k] = op.Value
		case kindSession:
			if f, ok := floor[k]; ok && w.before(got, f) {
				v.SessionViolations++
				v.violate("session of client %d read %s=%q at %v, older than %q it had written or read", op.Client, op.Key, got, time.Duration(op.Invoke), f)
			}
			if got != "" {
				floor[k] = got
			}
		case kindStrong:
			if got != "" {
				floor[k] = got
			}
		}
	}
}

// checkStaleness: a bounded-staleness read returns no value that an
// acknowledged put had certainly superseded more than bound before the
// read began.
func checkStaleness(ops []histOp, bound time.Duration, v *verdict) {
	w := indexWrites(ops)
	byKey := map[string][]histOp{}
	for _, op := range ops {
		if op.isWrite() && op.Result == resOK {
			byKey[op.Key] = append(byKey[op.Key], op)
		}
	}
	for _, op := range ops {
		if op.Kind != kindBounded || op.Result != resOK {
			continue
		}
		got := ""
		if op.Found {
			got = op.Value
		}
		for _, p := range byKey[op.Key] {
			if p.Complete < op.Invoke-int64(bound) && w.before(got, p.Value) {
				v.StalenessViol++
				v.violate("bounded read of %s at %v returned %q, superseded by %s acknowledged at %v (bound %v)",
					op.Key, time.Duration(op.Invoke), got, p.Value, time.Duration(p.Complete), bound)
				break
			}
		}
	}
}

// storeOp is one log op as one agent's store holds it.
type storeOp struct {
	node  string
	epoch partition.Epoch
	del   bool
	key   string
	value string
}

// maxStoreOps bounds what the checker reads from the stores.
const maxStoreOps = 2_000_000

// checkStores reads every agent's partition store after the agents are
// dead, from a copy (pebble's open replays its WAL; the original stays
// as the agent left it), and checks the data plane's own records: one
// op per (partition, epoch, LSN) across all replicas (at most one writer
// per epoch), and epochs that never go back along a replica's log (no
// replica took a stale epoch's op after a newer one's).
func checkStores(c *cluster, tmp string, ops []histOp, v *verdict) {
	type pos struct {
		p   partition.ID
		lsn partition.LSN
	}
	seen := map[pos][]storeOp{}
	stored := map[[2]string]bool{}       // (key, value) in some store's log
	compacted := map[partition.ID]bool{} // some replica's log starts above LSN 0
	total := 0
	for _, n := range c.nodes {
		src := filepath.Join(n.dataDir, "partitions")
		if _, err := os.Stat(src); err != nil {
			v.violate("%s: no partition store to read: %v", n.name, err)
			continue
		}
		dst := filepath.Join(tmp, n.name+"-partitions")
		if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
			v.violate("%s: copy the store: %v %s", n.name, err, out)
			continue
		}
		st, err := pebblestore.Open(pebblestore.Options{Dir: dst})
		if err != nil {
			v.violate("%s: open the store's copy: %v", n.name, err)
			continue
		}
		v.StoresRead++
		parts, err := st.Partitions()
		if err != nil {
			v.violate("%s: list partitions: %v", n.name, err)
		}
		for _, p := range parts {
			rec, err := st.Load(p)
			if err != nil {
				v.violate("%s: load partition %d: %v", n.name, p, err)
				continue
			}
			from := rec.Meta.LogBase + 1
			if rec.Meta.LogBase > 0 {
				compacted[p] = true
			}
			var last partition.Epoch
			for total < maxStoreOps {
				ops, err := st.ReadLog(p, from, 1024, 1<<20)
				if err != nil {
					v.violate("%s: read partition %d's log from %d: %v", n.name, p, from, err)
					break
				}
				if len(ops) == 0 {
					break
				}
				for _, op := range ops {
					total++
					if op.Epoch < last {
						v.EpochRegressions++
						v.violate("%s: partition %d's log goes back from epoch %d to %d at LSN %d", n.name, p, last, op.Epoch, op.LSN)
					}
					last = max(last, op.Epoch)
					if v.MaxEpochs == nil {
						v.MaxEpochs = map[uint32]uint64{}
					}
					v.MaxEpochs[uint32(p)] = max(v.MaxEpochs[uint32(p)], uint64(op.Epoch))
					stored[[2]string{string(op.Key), string(op.Value)}] = true
					k := pos{p, op.LSN}
					seen[k] = append(seen[k], storeOp{node: n.name, epoch: op.Epoch, del: op.Delete, key: string(op.Key), value: string(op.Value)})
				}
				from = ops[len(ops)-1].LSN + 1
			}
		}
		_ = st.Close()
	}
	v.LogOpsRead = total
	hp, err := routing.NewOneBasedHashPartitioner(uint32(c.cfg.Partitions))
	if err == nil {
		for _, op := range ops {
			// A delete stores no value to find (and one of an absent key
			// may store nothing): only puts and CASes are looked for.
			if !op.isWrite() || op.isDelete() || op.Result != resOK || stored[[2]string{op.Key, op.Value}] ||
				compacted[partition.ID(hp.Partition(op.Key))] {
				continue
			}
			v.AckedNotStored++
			if v.AckedNotStored <= 5 {
				v.violate("acknowledged %s %s=%s (client %d) is in no agent's store", op.Kind, op.Key, op.Value, op.Client)
			}
		}
	}
	var dual []string
	for k, ops := range seen {
		for i := 1; i < len(ops); i++ {
			a, b := ops[0], ops[i]
			if a.epoch == b.epoch && (a.key != b.key || a.value != b.value || a.del != b.del) {
				dual = append(dual, fmt.Sprintf("partition %d epoch %d LSN %d: %s holds %s=%s, %s holds %s=%s (two writers in one epoch)",
					k.p, a.epoch, k.lsn, a.node, a.key, a.value, b.node, b.key, b.value))
				break
			}
		}
	}
	sort.Strings(dual)
	v.DualWriters = len(dual)
	for _, d := range dual {
		v.violate("%s", d)
	}
}
