package agentcfg

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

func configErr(field, format string, args ...any) error {
	return fmt.Errorf("agentcfg: %s: %s: %w", field, fmt.Sprintf(format, args...), ErrInvalid)
}

// problems collects every validation error, so that an operator fixes
// them in one pass.
type problems []error

func (p *problems) add(field, format string, args ...any) {
	*p = append(*p, configErr(field, format, args...))
}

func (p problems) err() error { return errors.Join(p...) }

// show quotes an operator's value for an error message, bounded.
func show(s string) string {
	const max = 64
	if len(s) > max {
		s = s[:max]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		return strconv.Quote(s) + "..."
	}
	return strconv.Quote(s)
}

// Validate checks every field and the relations between them, with no
// filesystem access (see Check). The error joins one error per problem,
// each naming the field by its YAML path and matching ErrInvalid.
func (c Config) Validate() error {
	var p problems
	p.label("name", c.Name)
	if c.NodeID == 0 {
		p.add("node_id", "must be in 1..65535 (the node's id in the cluster)")
	}
	p.label("region", c.Region)
	p.label("zone", c.Zone)
	p.label("cluster", c.Cluster)
	if c.DataDir == "" {
		p.add("data_dir", "must be set")
	} else {
		p.path("data_dir", c.DataDir)
	}
	c.validateAddrs(&p)
	c.validateRetryJoin(&p)
	c.validateSecurity(&p)

	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		p.add("log.level", "must be debug, info, warn or error, got %s", show(c.Log.Level))
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		p.add("log.format", "must be text or json, got %s", show(c.Log.Format))
	}

	if c.DNS.Zone != "" {
		if err := validDNSName(c.DNS.Zone, true); err != nil {
			p.add("dns.zone", "%v", err)
		} else if c.Bind.DNSAddr == "" {
			p.add("dns.zone", "set, but bind.dns_addr is empty (no DNS server)")
		}
	} else if c.Bind.DNSAddr != "" {
		p.add("dns.zone", "must be set with bind.dns_addr")
	}
	if c.DNS.TTL < MinDNSTTL || c.DNS.TTL > MaxDNSTTL {
		p.add("dns.ttl", "must be in %v..%v, got %v", MinDNSTTL, MaxDNSTTL, c.DNS.TTL)
	}
	if c.ShutdownTimeout < MinShutdownTimeout || c.ShutdownTimeout > MaxShutdownTimeout {
		p.add("shutdown_timeout", "must be in %v..%v, got %v", MinShutdownTimeout, MaxShutdownTimeout, c.ShutdownTimeout)
	}
	if c.SourceIP != "" {
		if ip := net.ParseIP(c.SourceIP); ip == nil || ip.IsUnspecified() {
			p.add("source_ip", "must be an IP literal other than 0.0.0.0 or ::, got %s", show(c.SourceIP))
		}
	}
	if c.ClockOffset < -MaxClockOffset || c.ClockOffset > MaxClockOffset {
		p.add("clock_offset", "must be within ±%v, got %v", MaxClockOffset, c.ClockOffset)
	}
	if c.ClockRate != 0 && !(c.ClockRate >= MinClockRate && c.ClockRate <= MaxClockRate) {
		p.add("clock_rate", "must be 0 (real time) or within %v..%v, got %v", MinClockRate, MaxClockRate, c.ClockRate)
	}
	return p.err()
}

// label: required, 1..MaxLabelLen of [a-z0-9-], no '-' at either end (it
// may appear in DNS names and metric labels).
// CheckLabel checks s against the rule for name, region, zone and
// cluster ([a-z0-9-], 1..MaxLabelLen, no '-' at either end); the error
// names field. Tools that must produce a valid name (a node certificate's
// CommonName) use it.
func CheckLabel(field, s string) error {
	var p problems
	p.label(field, s)
	return p.err()
}

func (p *problems) label(field, s string) {
	if s == "" {
		p.add(field, "must be set")
		return
	}
	if len(s) > MaxLabelLen {
		p.add(field, "longer than %d characters", MaxLabelLen)
		return
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if !('a' <= ch && ch <= 'z' || '0' <= ch && ch <= '9' || ch == '-') {
			p.add(field, "must be of [a-z0-9-], got %s", show(s))
			return
		}
	}
	if s[0] == '-' || s[len(s)-1] == '-' {
		p.add(field, "must not start or end with '-', got %s", show(s))
	}
}

// path: bounded, printable UTF-8.
func (p *problems) path(field, s string) {
	if len(s) > MaxPathLen {
		p.add(field, "longer than %d bytes", MaxPathLen)
		return
	}
	if !utf8.ValidString(s) {
		p.add(field, "not valid UTF-8")
		return
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			p.add(field, "has a control or non-printing character: %s", show(s))
			return
		}
	}
}

type addrField struct {
	name string // bind.X; advertise.X is its twin
	bind string
	adv  string
	// required when binding.
	required bool
}

func (c Config) addrFields() []addrField {
	return []addrField{
		{"node_addr", c.Bind.NodeAddr, c.Advertise.NodeAddr, true},
		{"api_addr", c.Bind.APIAddr, c.Advertise.APIAddr, true},
		{"dns_addr", c.Bind.DNSAddr, c.Advertise.DNSAddr, false},
		{"gossip_addr", c.Bind.GossipAddr, c.Advertise.GossipAddr, true},
	}
}

func (c Config) validateAddrs(p *problems) {
	type bound struct {
		field string
		hp    hostPort
	}
	var binds []bound
	for _, a := range c.addrFields() {
		bf, af := "bind."+a.name, "advertise."+a.name
		var bhp hostPort
		bok := false
		switch {
		case a.bind == "" && a.required:
			p.add(bf, "must be set")
		case a.bind != "":
			hp, err := parseHostPort(a.bind, true)
			if err != nil {
				p.add(bf, "%v", err)
				break
			}
			bhp, bok = hp, true
			for _, o := range binds {
				if hp.conflicts(o.hp) {
					p.add(bf, "%s: port %d is also bound by %s %s", show(a.bind), hp.port, o.field, show(o.hp.s))
				}
			}
			binds = append(binds, bound{bf, hp})
		}
		switch {
		case a.adv != "" && a.bind == "":
			p.add(af, "set, but %s is empty", bf)
		case a.adv != "":
			hp, err := parseHostPort(a.adv, false)
			if err != nil {
				p.add(af, "%v", err)
			} else if hp.port == 0 {
				p.add(af, "%s: port 0 cannot be reached", show(a.adv))
			}
		case bok && bhp.wildcard():
			p.add(af, "must be set: %s %s listens on every interface, so peers need an address to reach", bf, show(a.bind))
		}
	}
}

func (c Config) validateRetryJoin(p *problems) {
	if len(c.RetryJoin) > MaxRetryJoin {
		p.add("retry_join", "%d entries, more than %d", len(c.RetryJoin), MaxRetryJoin)
		return
	}
	seen := make(map[string]int, len(c.RetryJoin))
	for i, s := range c.RetryJoin {
		f := fmt.Sprintf("retry_join[%d]", i)
		hp, err := parseHostPort(s, false)
		if err != nil {
			p.add(f, "%v", err)
			continue
		}
		if hp.port == 0 {
			p.add(f, "%s: port 0 cannot be reached", show(s))
			continue
		}
		k := hp.key()
		if j, ok := seen[k]; ok {
			p.add(f, "%s repeats retry_join[%d]", show(s), j)
			continue
		}
		seen[k] = i
	}
}

func (c Config) validateSecurity(p *problems) {
	if c.GossipKey == "" {
		if !c.Insecure {
			p.add("gossip_key", "must be set unless insecure: true (base64 of 16, 24 or 32 bytes)")
		}
	} else if n, err := gossipKeyLen(c.GossipKey); err != nil {
		// Never echo the key: it is a secret.
		p.add("gossip_key", "not valid base64")
	} else if n != 16 && n != 24 && n != 32 {
		p.add("gossip_key", "decodes to %d bytes, want 16, 24 or 32", n)
	}

	files := []struct{ field, v string }{
		{"tls.cert_file", c.TLS.CertFile},
		{"tls.key_file", c.TLS.KeyFile},
		{"tls.ca_file", c.TLS.CAFile},
	}
	set := 0
	for _, f := range files {
		if f.v != "" {
			set++
			p.path(f.field, f.v)
		}
	}
	switch {
	case set == 0 && !c.Insecure:
		p.add("tls", "tls.cert_file, tls.key_file and tls.ca_file must be set unless insecure: true")
	case set > 0 && set < len(files):
		for _, f := range files {
			if f.v == "" {
				p.add(f.field, "must be set with the other TLS files (all three or none)")
			}
		}
	}
	if c.Admin.TokenFile != "" {
		p.path("admin.token_file", c.Admin.TokenFile)
	}
	if c.Admin.EnablePprof && set == 0 && c.Admin.TokenFile == "" {
		p.add("admin.enable_pprof", "true without TLS and without admin.token_file: any caller could read the profiles; set admin.token_file or turn TLS on")
	}
	if c.Insecure && set == len(files) && c.GossipKey != "" {
		p.add("insecure", "true, but TLS and the gossip key are both set: remove it")
	}
}

func gossipKeyLen(s string) (int, error) {
	if len(s) > base64.StdEncoding.EncodedLen(64) {
		return 0, errors.New("too long")
	}
	b, err := base64.StdEncoding.DecodeString(s)
	return len(b), err
}

// hostPort is a parsed address.
type hostPort struct {
	s    string
	host string // lower-cased; an IP in its canonical form
	ip   netip.Addr
	port uint16
}

// parseHostPort parses host:port with a numeric port in 0..65535. The host
// is an IP address or a DNS name; it may be empty (every interface) only
// if bind.
func parseHostPort(s string, bind bool) (hostPort, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return hostPort{}, fmt.Errorf("%s: not host:port", show(s))
	}
	if port == "" || len(port) > 5 || strings.TrimLeft(port, "0123456789") != "" {
		return hostPort{}, fmt.Errorf("%s: port must be a number in 0..65535", show(s))
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return hostPort{}, fmt.Errorf("%s: port must be a number in 0..65535", show(s))
	}
	hp := hostPort{s: s, port: uint16(n)}
	if host == "" {
		if !bind {
			return hostPort{}, fmt.Errorf("%s: needs a host", show(s))
		}
		return hp, nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if strings.HasPrefix(s, "[") != ip.Is6() {
			return hostPort{}, fmt.Errorf("%s: an IPv6 address and only one goes in brackets", show(s))
		}
		hp.ip = ip.Unmap()
		hp.host = hp.ip.String()
		if !bind && hp.ip.IsUnspecified() {
			return hostPort{}, fmt.Errorf("%s: %s is not an address to reach", show(s), host)
		}
		return hp, nil
	}
	if strings.HasPrefix(s, "[") {
		return hostPort{}, fmt.Errorf("%s: an IPv6 address and only one goes in brackets", show(s))
	}
	if err := validDNSName(host, false); err != nil {
		return hostPort{}, fmt.Errorf("%s: host: %w", show(s), err)
	}
	hp.host = toLowerASCII(host)
	return hp, nil
}

// wildcard: listens on every interface.
func (h hostPort) wildcard() bool {
	return h.host == "" || h.ip.IsValid() && h.ip.IsUnspecified()
}

func (h hostPort) key() string { return net.JoinHostPort(h.host, strconv.Itoa(int(h.port))) }

// conflicts: the two listeners would collide (same port, and the same host
// or either on every interface). Port 0 never collides: it picks a free
// port.
func (h hostPort) conflicts(o hostPort) bool {
	if h.port == 0 || h.port != o.port {
		return false
	}
	return h.host == o.host || h.wildcard() || o.wildcard()
}

// validDNSName checks a DNS name: at most MaxDNSNameLen, labels of 1..63
// letters, digits and '-' with no '-' at either end, a last label not all
// digits (so a mistyped IPv4 address is not taken for a name). A final dot
// is allowed if absolute.
func validDNSName(s string, absolute bool) error {
	if absolute && strings.HasSuffix(s, ".") {
		s = s[:len(s)-1]
	}
	if s == "" {
		return errors.New("empty DNS name")
	}
	if len(s) > MaxDNSNameLen {
		return fmt.Errorf("DNS name longer than %d characters", MaxDNSNameLen)
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return fmt.Errorf("%s: DNS labels must be 1..63 characters", show(s))
		}
		for i := 0; i < len(l); i++ {
			ch := l[i]
			if !('a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' || '0' <= ch && ch <= '9' || ch == '-') {
				return fmt.Errorf("%s: DNS labels are letters, digits and '-'", show(s))
			}
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("%s: a DNS label must not start or end with '-'", show(s))
		}
	}
	if strings.TrimLeft(labels[len(labels)-1], "0123456789") == "" {
		return fmt.Errorf("%s: not an IP address, and not a DNS name (the last label is all digits)", show(s))
	}
	return nil
}
