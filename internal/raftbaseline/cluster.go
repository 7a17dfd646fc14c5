package raftbaseline

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/fmnode/fmnode/failover"
)

// ClusterConfig configures a loopback cluster: one voter per region, in
// this process, on raft's TCP transport over 127.0.0.1.
type ClusterConfig struct {
	Regions []failover.Region
	Dir     string
	// Voter is the template of every voter's Config; ID, Region and Dir
	// are set per voter.
	Voter Config
}

// Cluster is a running loopback cluster.
type Cluster struct {
	Voters []*Voter
}

// StartLoopback starts one voter per region and waits until they agree
// on a leader (or ctx ends). It closes what it started on error.
func StartLoopback(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	if len(cfg.Regions) < 1 || len(cfg.Regions) > 9 {
		return nil, fmt.Errorf("%w: ClusterConfig.Regions: %d regions, want 1..9", ErrInvalidConfig, len(cfg.Regions))
	}
	c := &Cluster{}
	ok := false
	defer func() {
		if !ok {
			_ = c.Close()
		}
	}()
	var peers []Peer
	for i, r := range cfg.Regions {
		vc := cfg.Voter
		vc.ID, vc.Region, vc.Dir = fmt.Sprintf("voter-%d-%s", i+1, r), r, filepath.Join(cfg.Dir, string(r))
		v, err := New(vc)
		if err != nil {
			return nil, err
		}
		c.Voters = append(c.Voters, v)
		peers = append(peers, v.Peer())
	}
	for _, v := range c.Voters {
		if err := v.Start(peers); err != nil {
			return nil, err
		}
	}
	if _, err := c.Leader(ctx); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// Leader waits for a live voter that leads and returns it.
func (c *Cluster) Leader(ctx context.Context) (*Voter, error) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		for _, v := range c.Voters {
			if v.IsLeader() {
				return v, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrNoLeader, ctx.Err())
		case <-t.C:
		}
	}
}

// Create puts the initial state of every partition named in states
// (version 0 to 1) through the leader, at most maxInflight at once.
func (c *Cluster) Create(ctx context.Context, states []failover.State, maxInflight int) error {
	sem := make(chan struct{}, max(maxInflight, 1))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, s := range states {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			var err error
			for attempt := 0; attempt < 50; attempt++ {
				var l *Voter
				if l, err = c.Leader(ctx); err != nil {
					break
				}
				_, err = l.PutState(ctx, PutState{Key: s.Partition, Expect: 0, State: s})
				if attempt > 0 && errors.Is(err, ErrVersionMismatch) {
					// An earlier attempt whose outcome was lost with
					// the leadership did commit.
					err = nil
				}
				if err == nil || !errors.Is(err, ErrNoLeader) {
					break
				}
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("create %s: %w", s.Partition, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close stops every voter.
func (c *Cluster) Close() error {
	var errs []error
	for _, v := range c.Voters {
		errs = append(errs, v.Close())
	}
	return errors.Join(errs...)
}
