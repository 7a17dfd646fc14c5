package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fmnode/fmnode/txtdns/kv"
	"github.com/fmnode/fmnode/txtdns/routing"
)

// Operation kinds of the workload. Every put writes a value unique in
// the run, so a read names the write it saw.
const (
	kindPut     = "put"
	kindCAS     = "cas" // a compare-and-set on the version a strong read just returned
	kindDelete  = "delete"
	kindCAD     = "cad" // a compare-and-delete on the version a strong read just returned
	kindStrong  = "get-strong"
	kindSession = "get-session"
	kindBounded = "get-bounded"
	kindFinal   = "get-final" // the checker's read-back after the heal
)

// Results of an operation as the client reported it.
const (
	resOK      = "ok"
	resFail    = "fail"    // definitely not applied (a put) / no answer (a read)
	resUnknown = "unknown" // a put that may or may not have been applied
	// resCondFailed is a CAS refused on its condition (412): certainly
	// not applied, and evidence that the key did not hold Expect at some
	// point of the call.
	resCondFailed = "condition-failed"
)

// histOp is one operation as a client saw it: invoke and complete on
// the harness's clock (ns since the run's start); an unknown outcome has
// Complete = -1, an infinite return time for the checker.
type histOp struct {
	Client int    `json:"client"`
	Kind   string `json:"kind"`
	Key    string `json:"key"`
	// Value is what a put or CAS wrote or a read returned ("" and !Found:
	// absent); a delete's is its own name (delPrefix, unique in the run,
	// never stored), so that the checks can order it like a write.
	Value string `json:"value,omitempty"`
	// Expect is a CAS's condition: the value the strong read before it
	// returned with the version it sent ("": absent, If-None-Match: *).
	Expect   string `json:"expect,omitempty"`
	Found    bool   `json:"found,omitempty"`
	Invoke   int64  `json:"invoke_ns"`
	Complete int64  `json:"complete_ns"`
	Result   string `json:"result"`
	Err      string `json:"err,omitempty"`
}

// isWrite: a put, a CAS (both store a value unique in the run), a
// delete or a compare-and-delete (named by a value unique in the run).
func (op histOp) isWrite() bool { return op.Kind == kindPut || op.Kind == kindCAS || op.isDelete() }

// isDelete: a delete or a compare-and-delete (the key reads absent after).
func (op histOp) isDelete() bool { return op.Kind == kindDelete || op.Kind == kindCAD }

// delPrefix starts a delete's name (histOp.Value); no put writes one.
const delPrefix = "del-"

// history is the run's record, bounded by maxOps.
type history struct {
	start  time.Time
	maxOps int
	mu     sync.Mutex
	ops    []histOp
	full   atomic.Bool
}

func (h *history) now() int64 { return int64(time.Since(h.start)) }

func (h *history) add(op histOp) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.ops) >= h.maxOps {
		h.full.Store(true)
		return false
	}
	h.ops = append(h.ops, op)
	return true
}

func (h *history) snapshot() []histOp {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]histOp(nil), h.ops...)
}

// workloadConfig: clients share the keys (keysPerPartition of every
// partition); at most 10 clients, so that porcupine's cost per key stays
// small.
type workloadConfig struct {
	Clients          int
	KeysPerPartition int
	Partitions       int
	OpTimeout        time.Duration
	Seed             uint64
}

// workloadKeys picks KeysPerPartition keys of every partition.
func workloadKeys(parts, perPart int) ([]string, error) {
	hp, err := routing.NewOneBasedHashPartitioner(uint32(parts))
	if err != nil {
		return nil, err
	}
	count := map[uint32]int{}
	var keys []string
	for k := 0; len(keys) < parts*perPart && k < 1_000_000; k++ {
		key := fmt.Sprintf("k%d", k)
		p := hp.Partition(key)
		if count[p] < perPart {
			count[p]++
			keys = append(keys, key)
		}
	}
	if len(keys) < parts*perPart {
		return nil, errors.New("workload: could not spread the keys over the partitions")
	}
	return keys, nil
}

// newClient is the Go client the workload uses: DNS routing through the
// agents' DNS servers, TLS with the harness's client certificate, every
// connection guarded onto loopback (the agents' API addresses it dials
// are their proxies). Client id asks the DNS servers in a rotated order
// (rotatedServers), so the clients' lookups spread over every DNS
// server and a cut of any one of them reaches some clients' lookups,
// not only a cut of the first.
func (c *cluster) newClient(opTimeout time.Duration, id int) (*kv.Client, error) {
	servers := rotatedServers(c.dnsServers(), id)
	for _, s := range servers {
		if err := checkLoopback(s); err != nil {
			return nil, err
		}
	}
	res, err := routing.NewDNSResolver(routing.DNSResolverConfig{Servers: servers, Timeout: 500 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{TLSClientConfig: c.tlsCfg, DialContext: guardedDialContext, MaxIdleConnsPerHost: 16}
	return kv.New(kv.Config{HTTP: &http.Client{Transport: tr}, Timeout: opTimeout,
		Routing: routing.Config{Zone: zone, Resolver: res, PartitionCount: uint32(c.cfg.Partitions)}})
}

// runWorkload runs the clients until ctx ends or the history is full.
func runWorkload(ctx context.Context, c *cluster, wc workloadConfig, keys []string, h *history) (*atomic.Int64, error) {
	var wg sync.WaitGroup
	var seq atomic.Int64
	for id := 1; id <= wc.Clients; id++ {
		cl, err := c.newClient(wc.OpTimeout, id)
		if err != nil {
			return nil, err
		}
		wg.Add(1)
		go func(id int, cl *kv.Client) {
			defer wg.Done()
			runClient(ctx, id, cl, wc, keys, h, &seq)
		}(id, cl)
	}
	wg.Wait()
	return &seq, nil
}

func runClient(ctx context.Context, id int, cl *kv.Client, wc workloadConfig, keys []string, h *history, seq *atomic.Int64) {
	rng := rand.New(rand.NewPCG(wc.Seed, uint64(id)))
	sess := cl.NewSession()
	for ctx.Err() == nil && !h.full.Load() {
		key := keys[rng.IntN(len(keys))]
		op := histOp{Client: id, Key: key}
		x := rng.IntN(100)
		switch {
		case x < 25:
			op.Kind = kindPut
			op.Value = fmt.Sprintf("c%d-%d", id, seq.Add(1))
		case x < 37:
			op.Kind = kindCAS
			op.Value = fmt.Sprintf("c%d-%d", id, seq.Add(1))
		case x < 41:
			op.Kind = kindDelete
			op.Value = fmt.Sprintf("%sc%d-%d", delPrefix, id, seq.Add(1))
		case x < 45:
			op.Kind = kindCAD
			op.Value = fmt.Sprintf("%sc%d-%d", delPrefix, id, seq.Add(1))
		case x < 75:
			op.Kind = kindStrong
		case x < 90:
			op.Kind = kindSession
		default:
			op.Kind = kindBounded
		}
		// The op's own bound: its timeout, not the run's context (an
		// operation cut by the run's end would be an unknown outcome the
		// harness made up).
		octx, cancel := context.WithTimeout(context.Background(), wc.OpTimeout+time.Second)
		op.Invoke = h.now()
		switch op.Kind {
		case kindPut:
			err := sess.Put(octx, key, []byte(op.Value))
			op.Complete = h.now()
			op.setWriteResult(err)
		case kindDelete:
			err := sess.Delete(octx, key)
			op.Complete = h.now()
			op.setWriteResult(err)
		case kindCAS, kindCAD:
			var ok bool
			if op, ok = casOp(octx, sess, op, h); !ok {
				cancel()
				continue
			}
		default:
			cons := map[string]routing.Consistency{kindStrong: routing.ConsistencyStrong, kindSession: routing.ConsistencySession,
				kindBounded: routing.ConsistencyBoundedStaleness}[op.Kind]
			v, found, err := sess.Get(octx, key, cons)
			op.Complete = h.now()
			if err != nil {
				op.Result, op.Err = resFail, err.Error()
			} else {
				op.Result, op.Found, op.Value = resOK, found, string(v)
			}
		}
		cancel()
		if !h.add(op) {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(2+rng.IntN(8)) * time.Millisecond):
		}
	}
}

// casOp is a strong GetItem, recorded as a strong read, then a
// CompareAndSet (kindCAS) or CompareAndDelete (kindCAD) on the version it
// returned, recorded with the value read as its Expect. When the read
// fails, or a CAD's read finds the key absent (there is no version to
// name), there is no CAS or CAD (and false: the read was recorded,
// nothing else is).
func casOp(ctx context.Context, sess *kv.Session, op histOp, h *history) (histOp, bool) {
	rd := histOp{Client: op.Client, Kind: kindStrong, Key: op.Key, Invoke: op.Invoke}
	it, found, err := sess.GetItem(ctx, op.Key, routing.ConsistencyStrong)
	rd.Complete = h.now()
	if err != nil {
		rd.Result, rd.Err = resFail, err.Error()
		h.add(rd)
		return op, false
	}
	rd.Result, rd.Found = resOK, found
	if found {
		rd.Value, op.Expect = string(it.Value), string(it.Value)
	}
	if !h.add(rd) || (op.Kind == kindCAD && !found) {
		return op, false
	}
	op.Invoke = h.now()
	if op.Kind == kindCAD {
		err = sess.CompareAndDelete(ctx, op.Key, it.Version)
		op.Complete = h.now()
		op.setWriteResult(err)
		return op, true
	}
	err = sess.CompareAndSet(ctx, op.Key, it.Version, []byte(op.Value))
	op.Complete = h.now()
	op.setWriteResult(err)
	return op, true
}

// setWriteResult classifies a put's or CAS's error as the client
// contract does: nil applied, unknown outcome (infinite return time), a
// failed condition (not applied, the key held another version), anything
// else not applied.
func (op *histOp) setWriteResult(err error) {
	switch {
	case err == nil:
		op.Result = resOK
	case errors.Is(err, kv.ErrUnknownOutcome):
		op.Result, op.Complete, op.Err = resUnknown, -1, err.Error()
	case errors.Is(err, kv.ErrConditionFailed):
		op.Result, op.Err = resCondFailed, err.Error()
	default:
		op.Result, op.Err = resFail, err.Error()
	}
}

// finalReads reads every key strongly until each answers (or ctx
// ends): the read-back after the heal. It returns when they all did.
func finalReads(ctx context.Context, c *cluster, keys []string, h *history, opTimeout time.Duration) (map[string]histOp, error) {
	cl, err := c.newClient(opTimeout, 0)
	if err != nil {
		return nil, err
	}
	out := map[string]histOp{}
	for _, key := range keys {
		for {
			op := histOp{Client: 0, Kind: kindFinal, Key: key, Invoke: h.now()}
			octx, cancel := context.WithTimeout(ctx, opTimeout)
			v, found, err := cl.Get(octx, key, routing.ConsistencyStrong)
			cancel()
			op.Complete = h.now()
			if err == nil {
				op.Result, op.Found, op.Value = resOK, found, string(v)
				out[key] = op
				break
			}
			if ctx.Err() != nil {
				return out, fmt.Errorf("read-back of %s: %w (last: %v)", key, ctx.Err(), err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return out, nil
}

// rotatedServers is servers starting at the id-th (mod their number):
// the resolver tries its servers in order and moves on only after a
// failure, so with one order for every client all lookups go to the
// first server.
func rotatedServers(servers []string, id int) []string {
	if len(servers) == 0 {
		return nil
	}
	k := ((id % len(servers)) + len(servers)) % len(servers)
	return append(append([]string(nil), servers[k:]...), servers[:k]...)
}
