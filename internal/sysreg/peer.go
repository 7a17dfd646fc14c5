package sysreg

import (
	"net"
	"slices"
	"strconv"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/quorum"
)

// Protocol constants.
const (
	// Path is where the agent mounts the Acceptor on its HTTP API server.
	Path = "/v1/internal/sysreg"
	// Key is the one register the endpoint serves; requests about any
	// other key are refused, so the endpoint is not a general store.
	Key = "cluster/spec"
	// MaxBodyBytes bounds a request or reply body (413 beyond it).
	MaxBodyBytes = 1 << 20
	// MaxValueBytes bounds the register's value (the encoded cluster
	// spec); it leaves MaxBodyBytes room for the message's framing.
	MaxValueBytes = 512 << 10
	// MaxPeers bounds the acceptor set of one operation.
	MaxPeers = 32
)

// Peer is one acceptor of the system register: its id (the caspaxos
// NodeID it answers as; a request for another id is refused) and the
// host:port of its agent's API server.
type Peer struct {
	ID   uint64
	Addr string
}

// checkPeers validates an operation's acceptor set and returns its ids
// sorted. Errors name the argument (peers[i].Field).
func checkPeers(peers []Peer) ([]caspaxos.NodeID, error) {
	if len(peers) == 0 {
		return nil, argErr("peers", "must not be empty")
	}
	if len(peers) > MaxPeers {
		return nil, argErr("peers", "%d peers exceed %d", len(peers), MaxPeers)
	}
	ids := make([]caspaxos.NodeID, 0, len(peers))
	addrs := make(map[string]int, len(peers))
	for i, p := range peers {
		if p.ID == 0 {
			return nil, argErr(peerField(i, "ID"), "must be non-zero")
		}
		if slices.Contains(ids, caspaxos.NodeID(p.ID)) {
			return nil, argErr(peerField(i, "ID"), "%d listed twice", p.ID)
		}
		if _, _, err := net.SplitHostPort(p.Addr); err != nil || p.Addr == "" {
			return nil, argErr(peerField(i, "Addr"), "%q is not host:port", p.Addr)
		}
		if j, dup := addrs[p.Addr]; dup {
			return nil, argErr(peerField(i, "Addr"), "%q also used by peers[%d]", p.Addr, j)
		}
		addrs[p.Addr] = i
		ids = append(ids, caspaxos.NodeID(p.ID))
	}
	slices.Sort(ids)
	return ids, nil
}

func peerField(i int, field string) string {
	return "peers[" + strconv.Itoa(i) + "]." + field
}

// initQuorum is Init's configuration: every listed acceptor in both
// phases (see the package doc for why bootstrap needs all of them).
func initQuorum(ids []caspaxos.NodeID) quorum.Config {
	all := quorum.Set{Members: slices.Clone(ids), Threshold: len(ids)}
	return quorum.Config{Prepare: all, Accept: quorum.Set{Members: slices.Clone(ids), Threshold: len(ids)}}
}

// majorityQuorum is Read's and CAS's configuration.
func majorityQuorum(ids []caspaxos.NodeID) quorum.Config {
	return quorum.MajorityConfig(ids...)
}

func checkValue(value []byte) error {
	if len(value) == 0 {
		return argErr("value", "must not be empty")
	}
	if len(value) > MaxValueBytes {
		return argErr("value", "%d bytes exceed %d", len(value), MaxValueBytes)
	}
	return nil
}
