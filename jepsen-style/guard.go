package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// ErrNotLoopback: an address outside 127.0.0.0/8. The harness never
// listens on, dials or proxies one: its agents, proxies and clients live
// on the loopback interface, and a typo must not reach the network.
var ErrNotLoopback = errors.New("not a loopback address (127.0.0.0/8)")

var loopback = netip.MustParsePrefix("127.0.0.0/8")

// checkLoopback accepts host:port whose host is an IPv4 literal in
// 127.0.0.0/8. Host names are refused too: "localhost" may resolve to
// anything, and the guard does not resolve.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("guard: %q: %w", addr, err)
	}
	return checkLoopbackIP(host)
}

func checkLoopbackIP(host string) error {
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("guard: %q: %w (only IP literals)", host, ErrNotLoopback)
	}
	if !ip.Is4() || !loopback.Contains(ip) {
		return fmt.Errorf("guard: %s: %w", host, ErrNotLoopback)
	}
	return nil
}

// listenLoopback listens on addr after the guard passed it.
func listenLoopback(addr string) (net.Listener, error) {
	if err := checkLoopback(addr); err != nil {
		return nil, err
	}
	return net.Listen("tcp", addr)
}

// dialLoopback dials addr after the guard passed it (and the source IP,
// when set), within timeout.
func dialLoopback(ctx context.Context, addr, sourceIP string, timeout time.Duration) (net.Conn, error) {
	if err := checkLoopback(addr); err != nil {
		return nil, err
	}
	d := &net.Dialer{Timeout: timeout}
	if sourceIP != "" {
		if err := checkLoopbackIP(sourceIP); err != nil {
			return nil, err
		}
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(sourceIP)}
	}
	return d.DialContext(ctx, "tcp", addr)
}

// guardedDialContext is an http.Transport DialContext that refuses
// anything off loopback (the harness's clients use it).
func guardedDialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if network != "tcp" && network != "tcp4" {
		return nil, fmt.Errorf("guard: network %s: %w", network, ErrNotLoopback)
	}
	return dialLoopback(ctx, addr, "", 5*time.Second)
}

// listenPacketLoopback listens for UDP on addr after the guard passed it
// (the gossip proxies).
func listenPacketLoopback(addr string) (*net.UDPConn, error) {
	if err := checkLoopback(addr); err != nil {
		return nil, err
	}
	ua, err := net.ResolveUDPAddr("udp4", addr)
	if err != nil {
		return nil, err
	}
	return net.ListenUDP("udp4", ua)
}
