package membership

import (
	"fmt"
	"log"
	"net"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
)

// sourceBoundTransport is memberlist's own NetTransport whose stream
// dials (push/pull, the TCP fallback probe, joins) leave from a fixed
// source IP instead of the kernel's choice. Packets (UDP probes and
// gossip) already leave from the bound UDP socket, so with SourceIP equal
// to BindAddr every byte this node sends, stream or packet, carries one
// source address: a per-pair L4 proxy (the jepsen-style harness) can then
// tell the callers apart and cut, delay or drop each pair's gossip, as it
// does the node transport's (nodenet.Config.LocalIP). Everything else is
// NetTransport's code.
type sourceBoundTransport struct {
	*memberlist.NetTransport
	source net.IP
}

var _ memberlist.NodeAwareTransport = (*sourceBoundTransport)(nil)

// DialTimeout is NetTransport's with the source bound; memberlist calls
// DialAddressTimeout, which NetTransport's DialTimeout would bypass.
func (t *sourceBoundTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// DialAddressTimeout dials a.Addr over TCP from the source IP.
func (t *sourceBoundTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout, LocalAddr: &net.TCPAddr{IP: t.source}}
	return d.Dial("tcp", a.Addr)
}

// autoBindRetries is memberlist's own: binding TCP and UDP to one
// kernel-chosen port races other processes, so a port-0 bind retries.
const autoBindRetries = 10

// newSourceBoundTransport binds what memberlist.Create would bind for mc
// (BindAddr, BindPort; port 0 retried as memberlist does) and returns it
// with its dials bound to source. It sets mc.BindPort and
// mc.AdvertisePort to the chosen port when mc.BindPort was 0, as
// memberlist does for its own transport.
func newSourceBoundTransport(mc *memberlist.Config, source net.IP, logger *log.Logger) (*sourceBoundTransport, error) {
	nc := &memberlist.NetTransportConfig{BindAddrs: []string{mc.BindAddr}, BindPort: mc.BindPort, Logger: logger}
	limit := 1
	if mc.BindPort == 0 {
		limit = autoBindRetries
	}
	var err error
	for range limit {
		var nt *memberlist.NetTransport
		if nt, err = memberlist.NewNetTransport(nc); err == nil {
			if mc.BindPort == 0 {
				port := nt.GetAutoBindPort()
				mc.BindPort, mc.AdvertisePort = port, port
			}
			return &sourceBoundTransport{NetTransport: nt, source: source}, nil
		}
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, fmt.Errorf("membership: gossip transport on %s:%d: %w", mc.BindAddr, mc.BindPort, err)
}
