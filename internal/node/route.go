package node

import (
	"time"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/txtdns"
)

// RouteOf is the DNS route of partition p's committed failover state, as
// its TXT record publishes it. at is when the node learned it (on the
// node's clock, for the publish-lag histogram).
func RouteOf(p partition.ID, s failover.State, at time.Duration) txtdns.Route {
	prio := make([]string, 0, len(s.Priority))
	for _, r := range s.Priority {
		prio = append(prio, string(r))
	}
	return txtdns.Route{Partition: uint32(p), Epoch: uint64(s.Epoch), WriteRegion: string(s.WriteRegion),
		Priority: prio, ConfigVersion: 1, CommittedAt: RouteTime(at)}
}

// RouteTime maps a node-clock instant onto the wall-clock type Route
// carries: a fixed origin, so that equal instants give equal routes in
// every driver.
func RouteTime(d time.Duration) time.Time {
	return time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).Add(d)
}
