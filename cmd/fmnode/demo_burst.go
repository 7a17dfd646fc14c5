package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fmnode/fmnode/txtdns/kv"
	"github.com/fmnode/fmnode/txtdns/routing"
)

// The prediction's service time. fmnode demo's agents and its writers
// share this machine's cores and disk, and the burst of writes after a
// failover's commit (every writer of the affected partitions within one
// poll interval) queues on them. The simulator models that as one queue
// the nodes share (sim.FailoverLayout's ServiceSlots and
// RequestService); the demo measures its service time before the kill,
// so that the prediction is made from what the run saw before the outage
// and nothing after it, as its round trip is.
//
// It is measured on a burst like the one after the commit, not on the
// steady load: the agents batch what arrives together (one Ready, one
// fsync, one replication message for many writes), so a write of the
// steady load, which arrives alone, costs three to four times the CPU of
// one in a burst. calibrationBurst writes one key of every partition at
// the same instant, with the steady writers still running; the service
// time is the burst's drain time divided by the writes acknowledged in
// it (the burst's and the steady writers'), one slot: a queue that drains
// a burst as fast as this machine did. Measured CPU would say less (the
// 2-core machine drained 1000 writes in 0.36 s on 0.56 ms of CPU each, so
// not at full use of its cores: fsyncs and replication wait too), and a
// model of it drained the burst a fifth faster than the machine had.

// burstSample is an instant of the burst and the writes acknowledged by
// then.
type burstSample struct {
	at   time.Time
	acks uint64
}

// Bound of the measured service time (sim's RequestService bound).
const demoMaxRequestService = 100 * time.Millisecond

// requestService is the burst's drain time per write acknowledged between
// b0 and b1; 0 when nothing was acknowledged (the prediction then models
// no queue).
func requestService(b0, b1 burstSample) time.Duration {
	d := b1.at.Sub(b0.at)
	if d <= 0 || b1.acks <= b0.acks {
		return 0
	}
	return min(demoMaxRequestService, d/time.Duration(b1.acks-b0.acks))
}

// calibrationBurst writes one key of every partition at once (keys apart
// from the writers' and the preload's, so nothing the drill checks
// changes) and returns the writes acknowledged. A write that fails is not
// retried: the burst measures how fast writes drain, not their success.
func calibrationBurst(ctx context.Context, cl *kv.Client, partitions, valueBytes int) (uint64, error) {
	hp, err := routing.NewOneBasedHashPartitioner(uint32(partitions))
	if err != nil {
		return 0, err
	}
	var acked atomic.Uint64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, k := range keyPerPartition(hp, "demo-burst-", partitions) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if cl.Put(ctx, k, agentBenchValue(k, valueBytes)) == nil {
				acked.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	return acked.Load(), ctx.Err()
}
