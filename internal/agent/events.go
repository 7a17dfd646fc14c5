package agent

import (
	"context"
	"time"

	"github.com/fmnode/fmnode/failover"
	"github.com/fmnode/fmnode/internal/node"
)

// eventLogInterval is how often the agent copies the failover manager's
// new events into its log.
const eventLogInterval = time.Second

// logEvents writes every decision the failover manager records (the same
// reasons `fmnode explain` and `fmnode history` give) to the agent's log,
// so that why something happened is in the log an operator already
// collects: proposals and outcomes at info, suppressed decisions at
// debug. The manager keeps a bounded ring; a burst larger than it between
// two passes loses its oldest events from the log (counted).
func (h *host) logEvents(ctx context.Context) {
	log := h.a.log.With("component", "failover")
	var lastAt time.Duration
	seenAt := map[string]bool{} // events at lastAt already logged
	t := time.NewTicker(eventLogInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var evs []failover.Event
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := h.drv.Do(dctx, func(_ time.Duration, n *node.Node) error {
			evs = n.Manager().Events()
			return nil
		})
		cancel()
		if err != nil {
			continue
		}
		for _, e := range evs {
			key := e.Partition + "\x00" + e.Text
			if e.At < lastAt || (e.At == lastAt && seenAt[key]) {
				continue
			}
			if e.At > lastAt {
				lastAt = e.At
				clear(seenAt)
			}
			seenAt[key] = true
			at := time.Unix(0, int64(e.At)).UTC()
			if e.Kind == failover.DecideNone {
				log.Debug("decision", "partition", e.Partition, "kind", e.Kind.String(), "why", e.Text, "at", at)
			} else {
				log.Info("decision", "partition", e.Partition, "kind", e.Kind.String(), "why", e.Text, "at", at)
			}
		}
	}
}
