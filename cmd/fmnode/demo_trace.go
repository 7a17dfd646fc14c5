package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fmnode/fmnode/internal/dataapi"
	"github.com/fmnode/fmnode/sim"
)

// demoTracer is the demo's per-writer trace of the HTTP attempts its
// writers make from the kill on (every attempt the Go client makes, not
// only the Puts the writers see): when each started and ended, whether it
// waited for a connection, its status and the epoch it was answered with.
// From it the reroute splits into the nodes' part (commit to promotion),
// the time until the writer asks, and the request's service time.
type demoTracer struct {
	next     http.RoundTripper
	outageAt atomic.Int64 // unix nanos of the kill; 0: not tracing yet

	mu       sync.Mutex
	attempts map[uint32][]demoAttempt // by writer id (= partition)
}

// demoMaxAttempts bounds the attempts kept per writer (the first ones
// from the kill: a writer reroutes within a few).
const demoMaxAttempts = 64

// demoAttempt is one HTTP attempt of a writer.
type demoAttempt struct {
	start, gotConn, end time.Time
	status              int // 0: a transport error
	epoch               uint64
	// host is the agent the attempt went to; reused whether it went on a
	// connection the transport already had (false: one dialled for it,
	// or one another request was dialling).
	host   string
	reused bool
}

func newDemoTracer(next http.RoundTripper) *demoTracer {
	return &demoTracer{next: next, attempts: map[uint32][]demoAttempt{}}
}

// writerOf is the writer id in a demo key's path (/v1/kv/d<id>-<n>).
func writerOf(path string) (uint32, bool) {
	k, ok := strings.CutPrefix(path, dataapi.PathPrefix)
	if !ok {
		return 0, false
	}
	k, ok = strings.CutPrefix(k, "d")
	if !ok {
		return 0, false
	}
	id, _, ok := strings.Cut(k, "-")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(id, 10, 32)
	return uint32(v), err == nil
}

func (t *demoTracer) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.outageAt.Load() == 0 || r.Method != http.MethodPut {
		return t.next.RoundTrip(r)
	}
	id, ok := writerOf(r.URL.Path)
	if !ok {
		return t.next.RoundTrip(r)
	}
	a := demoAttempt{start: time.Now(), host: r.URL.Host}
	var gotConn atomic.Int64
	var reused atomic.Bool
	ctx := httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) {
			if gotConn.CompareAndSwap(0, time.Now().UnixNano()) {
				reused.Store(i.Reused)
			}
		},
	})
	resp, err := t.next.RoundTrip(r.WithContext(ctx))
	a.end = time.Now()
	a.reused = reused.Load()
	if g := gotConn.Load(); g != 0 {
		a.gotConn = time.Unix(0, g)
	}
	if err == nil {
		a.status = resp.StatusCode
		a.epoch, _ = strconv.ParseUint(resp.Header.Get(dataapi.HeaderEpoch), 10, 64)
	}
	t.mu.Lock()
	if l := t.attempts[id]; len(l) < demoMaxAttempts {
		t.attempts[id] = append(l, a)
	}
	t.mu.Unlock()
	return resp, err
}

// demoRerouteSplit is the reroute of the writers, split at the events
// of their first acknowledged write in the new epoch, in seconds.
type demoRerouteSplit struct {
	// Known: from the commit to the new write region's replica knowing
	// it is write region (promoted_at): the nodes' part.
	Known sim.Dist `json:"known_s"`
	// Ask: from then until the writer sent the attempt that was
	// acknowledged (its poll phase, a redirect or a refused attempt
	// before it, the client's own backoff).
	Ask sim.Dist `json:"ask_s"`
	// Service: that attempt's time from sending to its answer, and of
	// it the wait for a connection (dial and TLS handshake, or a pooled
	// one).
	Service  sim.Dist `json:"service_s"`
	ConnWait sim.Dist `json:"conn_wait_s"`

	// AttemptsAfterCommit: HTTP attempts the writer made from the commit
	// to its acknowledged write, that one included.
	AttemptsAfterCommit sim.Dist `json:"attempts_after_commit"`
	// Failed: of those, how many ended without a 2xx, by status (0: a
	// transport error).
	Failed map[string]int `json:"failed_by_status"`
	// Traced: the writers whose acknowledged attempt was found.
	Traced int `json:"traced"`
}

// split computes the reroute's parts over the writers that rerouted:
// commit is the partition's commit, promoted the new write region's
// promotion (zero: unknown, the commit taken), acked the writer's first
// acknowledgement in the new epoch.
func (t *demoTracer) split(writers map[uint32]demoRerouteEvents) demoRerouteSplit {
	t.mu.Lock()
	defer t.mu.Unlock()
	var known, ask, service, wait, attempts []float64
	out := demoRerouteSplit{Failed: map[string]int{}}
	for id, ev := range writers {
		if ev.commit.IsZero() || ev.acked.IsZero() {
			continue
		}
		from := ev.commit
		if !ev.promoted.IsZero() && ev.promoted.After(from) {
			from = ev.promoted
		}
		// The acknowledged attempt: the last 2xx that ended by the
		// writer's acknowledgement.
		l := t.attempts[id]
		ack := -1
		for i, a := range l {
			if a.status/100 == 2 && !a.end.After(ev.acked) {
				ack = i
			}
		}
		if ack < 0 {
			continue
		}
		a := l[ack]
		out.Traced++
		known = append(known, from.Sub(ev.commit).Seconds())
		ask = append(ask, max(0, a.start.Sub(from).Seconds()))
		service = append(service, a.end.Sub(a.start).Seconds())
		if !a.gotConn.IsZero() {
			wait = append(wait, a.gotConn.Sub(a.start).Seconds())
		}
		n := 0
		for _, b := range l[:ack+1] {
			if b.end.Before(ev.commit) {
				continue
			}
			n++
			if b.status/100 != 2 {
				out.Failed[strconv.Itoa(b.status)]++
			}
		}
		attempts = append(attempts, float64(n))
	}
	out.Known, out.Ask, out.Service, out.ConnWait, out.AttemptsAfterCommit = demoDist(known), demoDist(ask), demoDist(service), demoDist(wait), demoDist(attempts)
	return out
}

// demoRerouteEvents are one writer's partition's events for split.
type demoRerouteEvents struct{ commit, promoted, acked time.Time }

// dump writes every traced attempt (milliseconds from the kill) as JSON
// lines: writer, start, got connection, end, status, epoch, agent,
// connection reused.
func (t *demoTracer) dump(w io.Writer) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.outageAt.Load()
	ms := func(x time.Time) float64 {
		if x.IsZero() {
			return -1
		}
		return float64(x.UnixNano()-out) / 1e6
	}
	enc := json.NewEncoder(w)
	for id, l := range t.attempts {
		for _, a := range l {
			if err := enc.Encode([]any{id, ms(a.start), ms(a.gotConn), ms(a.end), a.status, a.epoch, a.host, a.reused}); err != nil {
				return err
			}
		}
	}
	return nil
}
