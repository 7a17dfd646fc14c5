package sim

import (
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/quorum"
)

// Client error reports, the clients' half of gray-failure detection: a
// client whose attempt got no answer from a region (a timeout or an
// unknown outcome) tells the next replica it reaches, which hands it to
// its node's failover.Manager (ReportClientError). The manager weighs it
// against its own replica's commit LSN.

// foClientErr is one client's error not yet reported.
type foClientErr struct {
	region  quorum.Region
	epoch   partition.Epoch
	pending bool
}

// noteClientError records that c's attempt at region r got no answer.
func (fw *foWorld) noteClientError(c *foClient, r quorum.Region) {
	c.grayErr = foClientErr{region: r, epoch: partition.Epoch(c.sentEpoch), pending: true}
}

// reportClientError hands c's pending error to the node its attempt reached.
func (fw *foWorld) reportClientError(c *foClient, n *foNode) {
	if !c.grayErr.pending || n.node == nil {
		return
	}
	e := c.grayErr
	c.grayErr.pending = false
	n.node.ClientError(n.local(), fw.parts[c.part].id, e.region, e.epoch)
}
