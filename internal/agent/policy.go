package agent

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/fmnode/fmnode/internal/clusterspec"
	"github.com/fmnode/fmnode/internal/node"
	"github.com/fmnode/fmnode/partition"
)

// notLive says why a spec key cannot change on a running cluster (the
// keys absent here are applied by running agents: never_promote,
// blast_radius and min_durability). The reasons are what `fmnode config
// set` prints.
func notLive(key string) (string, bool) {
	switch {
	case key == "never_promote" || key == "blast_radius" || key == "min_durability":
		return "", false
	case key == "consistency" || key == "max_staleness" || key == "max_staleness_ops" || key == "staleness_hold":
		return "every partition's register and replicas record the consistency level at init; changing it on a running cluster is not supported yet", true
	case len(key) > len("profile.") && key[:len("profile.")] == "profile.":
		return "lease safety needs every node on the same timing, so the profile cannot change while agents run (not supported yet)", true
	}
	return "", false
}

// blastRadius is the cap the spec asks for (its profile's default when 0).
func blastRadius(s clusterspec.Spec) (int, error) {
	if s.BlastRadius > 0 {
		return s.BlastRadius, nil
	}
	f, err := s.FailoverConfig()
	if err != nil {
		return 0, err
	}
	return f.MaxConcurrentPerTarget, nil
}

// applyPolicy brings the running node in line with the spec's run-time
// policy: the blast-radius cap, the global pause, and the never-promote
// regions and minimum durability of every partition this node is the
// write region of (one proposer per partition; the others learn the new
// register value). A minimum durability above a partition's write quorum
// is refused by the core's guard (its members hold every acknowledged
// write) and logged; it is asked again at the next pass, once the quorum
// has grown. A partition with
// a proposal in flight is done at the next pass: the spec loop calls this
// after every read of the register.
func (h *host) applyPolicy(ctx context.Context, c committed) {
	br, err := blastRadius(c.spec)
	if err != nil {
		h.a.log.Error("cluster spec: blast radius", "err", err)
		return
	}
	want := make([]partition.Region, 0, len(c.spec.NeverPromote))
	for _, r := range c.spec.NeverPromote {
		want = append(want, partition.Region(r))
	}
	slices.Sort(want)
	reason := fmt.Sprintf("cluster spec version %d", c.version)
	var changed, pending, mdProposed, mdPending, mdRefused int
	var mdWhy error
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pause := c.spec.Pause
	err = h.drv.Do(ctx, func(now time.Duration, n *node.Node) error {
		if err := n.SetBlastRadius(br); err != nil {
			return err
		}
		n.SetGlobalPause(pause != "", pause)
		var err error
		changed, pending, err = n.ApplyNeverPromote(now, want, reason)
		if err != nil {
			return err
		}
		mdProposed, mdPending, mdRefused, mdWhy = n.ApplyMinDurability(now, c.spec.MinDurability, reason)
		return nil
	})
	if err != nil {
		h.a.log.Warn("apply the cluster spec's policy", "err", err)
		return
	}
	if changed+pending > 0 {
		h.a.log.Info("applying the cluster spec's never-promote regions", "version", c.version, "never_promote", c.spec.NeverPromote,
			"proposed", changed, "retry_later", pending)
	}
	if mdProposed+mdPending+mdRefused > 0 {
		h.a.log.Info("applying the cluster spec's minimum durability", "version", c.version, "min_durability", c.spec.MinDurability,
			"proposed", mdProposed, "retry_later", mdPending, "refused", mdRefused, "first_refusal", mdWhy)
	}
}

// applyPause applies the spec's global pause alone (serveLocalPause: the
// answer must not wait for never-promote proposals).
func (h *host) applyPause(ctx context.Context, c committed) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return h.drv.Do(ctx, func(_ time.Duration, n *node.Node) error {
		n.SetGlobalPause(c.spec.Pause != "", c.spec.Pause)
		return nil
	})
}
