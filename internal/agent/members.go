package agent

import (
	"encoding/base64"
	"fmt"
	"net"
	"strconv"

	"github.com/fmnode/fmnode/internal/membership"
)

// startMembership joins the gossip. Membership is evidence, never a
// verdict: its events are logged, refresh the node transport's peer
// addresses and ask the failover core to probe the node at once, but
// leases and failovers come only from the core's own heartbeats.
func (a *Agent) startMembership() error {
	host, port, err := splitHostPort("bind.gossip_addr", a.cfg.Bind.GossipAddr)
	if err != nil {
		return err
	}
	adv := a.cfg.Advertised()
	ahost, aport, err := splitHostPort("advertise.gossip_addr", adv.GossipAddr)
	if err != nil {
		return err
	}
	var key []byte
	if a.cfg.GossipKey != "" {
		if key, err = base64.StdEncoding.DecodeString(a.cfg.GossipKey); err != nil {
			return fmt.Errorf("gossip_key: %w", err)
		}
	}
	mc := membership.Config{
		Name: a.cfg.Name, NodeID: uint16(a.cfg.NodeID), Region: a.cfg.Region, Zone: a.cfg.Zone, Cluster: a.cfg.Cluster,
		BindAddr: host, BindPort: port, AdvertiseAddr: ahost, AdvertisePort: aport,
		SourceIP:  a.cfg.SourceIP, // gossip streams dial from it too (empty: the kernel's choice)
		RetryJoin: a.cfg.RetryJoin, GossipKey: key, Insecure: a.cfg.Insecure,
		NodeAddr: adv.NodeAddr, APIAddr: adv.APIAddr, DNSAddr: adv.DNSAddr, Version: a.opts.Version,
		Logger: a.log.With("component", "membership"),
	}
	if isLoopback(host) {
		mc.Profile = membership.ProfileLocal
	}
	m, err := membership.Start(mc)
	if err != nil {
		return err
	}
	a.members = m
	go a.watchMembers(m)
	return nil
}

// watchMembers turns membership events into evidence for the node.
func (a *Agent) watchMembers(m *membership.Membership) {
	for ev := range m.Events() {
		a.log.Info("member "+ev.Kind.String(), "member", ev.Member.Name, "node_id", ev.Member.NodeID,
			"region", ev.Member.Region, "state", ev.Member.State.String())
		if h := a.host.Load(); h != nil {
			h.memberEvent(ev)
		}
	}
}

func splitHostPort(field, addr string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("%s: %w", field, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("%s: port %q: %w", field, p, err)
	}
	return h, port, nil
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
