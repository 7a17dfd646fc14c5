package raftbaseline

import (
	"context"
	"sync/atomic"
	"time"
)

// heartbeatStats counts what a voter's heartbeater sent.
type heartbeatStats struct {
	rounds  atomic.Uint64
	cmds    atomic.Uint64
	records atomic.Uint64
	errors  atomic.Uint64
}

// runHeartbeats writes the region's replica reports through the leader
// every heartbeat interval, as Patroni's members refresh their keys.
func (v *Voter) runHeartbeats(ctx context.Context) {
	t := time.NewTicker(v.cfg.Failover.HeartbeatInterval)
	defer t.Stop()
	var buf []ReplicaStatus
	for {
		buf = v.heartbeatOnce(ctx, buf[:0])
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// heartbeatOnce sends one round: every hosted replica's status, in
// commands of HeartbeatBatch records. A batch that fails (no leader yet,
// an election) is dropped: the next round reports afresh.
func (v *Voter) heartbeatOnce(ctx context.Context, buf []ReplicaStatus) []ReplicaStatus {
	buf = v.cfg.Replicas.Replicas(buf)
	v.hbs.rounds.Add(1)
	rctx, cancel := context.WithTimeout(ctx, v.cfg.Failover.HeartbeatInterval)
	defer cancel()
	for rest := buf; len(rest) > 0; {
		n := min(len(rest), v.cfg.HeartbeatBatch)
		cmd, err := encodeHeartbeats(Heartbeats{Region: v.cfg.Region, Replicas: rest[:n]})
		rest = rest[n:]
		if err == nil {
			_, err = v.Submit(rctx, cmd)
		}
		if err != nil {
			v.hbs.errors.Add(1)
			continue
		}
		v.hbs.cmds.Add(1)
		v.hbs.records.Add(uint64(n))
	}
	return buf
}
