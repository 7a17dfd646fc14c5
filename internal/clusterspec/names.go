package clusterspec

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// label checks a name: 1..max of [a-z0-9-], no '-' at either end. Names
// appear in DNS names, TXT records and metric labels, and agentcfg spells
// them alike, so that a node's local config and the spec agree byte for
// byte. It reports whether the name is valid.
func (p *problems) label(field, s string, max int) bool {
	if s == "" {
		p.add(field, "must be set")
		return false
	}
	if len(s) > max {
		p.add(field, "longer than %d characters: %s", max, show(s))
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if !('a' <= ch && ch <= 'z' || '0' <= ch && ch <= '9' || ch == '-') {
			p.add(field, "must be of [a-z0-9-], got %s", show(s))
			return false
		}
	}
	if s[0] == '-' || s[len(s)-1] == '-' {
		p.add(field, "must not start or end with '-', got %s", show(s))
		return false
	}
	return true
}

// addrKey checks an address other nodes dial (host:port, a numeric port
// in 1..65535, a host that is an IP address other than the unspecified
// one, or a DNS name) and returns its canonical form, to find two nodes
// at one address however they are spelled.
func addrKey(s string) (string, error) {
	if len(s) > MaxAddrLen {
		return "", fmt.Errorf("longer than %d characters: %s", MaxAddrLen, show(s))
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return "", fmt.Errorf("%s: not host:port", show(s))
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 || strings.TrimLeft(port, "0123456789") != "" || port[0] == '0' {
		return "", fmt.Errorf("%s: port must be a number in 1..65535", show(s))
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" || strings.HasPrefix(s, "[") != ip.Is6() {
			return "", fmt.Errorf("%s: an IPv6 address, with no zone, and only it goes in brackets", show(s))
		}
		if ip.Unmap().IsUnspecified() {
			return "", fmt.Errorf("%s: %s is not an address to reach", show(s), host)
		}
		return net.JoinHostPort(ip.Unmap().String(), port), nil
	}
	if strings.HasPrefix(s, "[") {
		return "", fmt.Errorf("%s: only an IPv6 address goes in brackets", show(s))
	}
	if err := dnsName(host); err != nil {
		return "", fmt.Errorf("%s: host: %w", show(s), err)
	}
	return net.JoinHostPort(strings.ToLower(host), port), nil
}

// dnsName checks a relative DNS name: at most 253, labels of 1..63
// letters, digits and '-' with no '-' at either end, the last not all
// digits (a mistyped IPv4 address is not a name).
func dnsName(s string) error {
	if len(s) > 253 {
		return fmt.Errorf("DNS name longer than 253 characters")
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return fmt.Errorf("DNS labels must be 1..63 characters")
		}
		for i := 0; i < len(l); i++ {
			ch := l[i]
			if !('a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' || '0' <= ch && ch <= '9' || ch == '-') {
				return fmt.Errorf("DNS labels are letters, digits and '-'")
			}
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("a DNS label must not start or end with '-'")
		}
	}
	if strings.TrimLeft(labels[len(labels)-1], "0123456789") == "" {
		return fmt.Errorf("not an IP address, and not a DNS name (the last label is all digits)")
	}
	return nil
}
