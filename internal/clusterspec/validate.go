package clusterspec

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// Validate checks every field and the relations between them. The error
// joins one *FieldError per problem, each naming its field by JSON path
// and matching ErrInvalid. A timing profile that breaks failover's rules
// is reported once, after the fields it is built from are right.
func (s Spec) Validate() error {
	var p problems
	if s.Format != Format {
		p.add("format", "must be %d, got %d", Format, s.Format)
	}
	p.label("cluster", s.Cluster, MaxLabelLen)
	regionsOK := s.validateRegions(&p)
	if regionsOK {
		s.validateNeverPromote(&p)
	}
	if s.Partitions < 1 || s.Partitions > MaxPartitions {
		p.add("partitions", "must be in 1..%d, got %d", MaxPartitions, s.Partitions)
	}
	s.validateConsistency(&p)
	if s.MinDurability < 1 || regionsOK && s.MinDurability > len(s.Regions) {
		p.add("min_durability", "must be in 1..%d (the regions), got %d", len(s.Regions), s.MinDurability)
	}
	if s.BlastRadius < 0 || s.BlastRadius > MaxBlastRadius {
		p.add("blast_radius", "must be in 0..%d (0: the profile's default), got %d", MaxBlastRadius, s.BlastRadius)
	}
	s.validatePause(&p)
	n := len(p)
	s.validateProfile(&p)
	if len(p) == n && s.BlastRadius >= 0 {
		if _, err := s.failoverConfig(); err != nil {
			p = append(p, err)
		}
	}
	s.validateNodes(&p, regionsOK)
	return p.err()
}

// validateRegions reports whether Regions is usable for the checks that
// refer to it.
func (s Spec) validateRegions(p *problems) bool {
	if len(s.Regions) < MinRegions || len(s.Regions) > MaxRegions {
		p.add("regions", "must list %d..%d regions, got %d", MinRegions, MaxRegions, len(s.Regions))
		return false
	}
	ok := true
	for i, r := range s.Regions {
		f := fmt.Sprintf("regions[%d]", i)
		if !p.label(f, r, MaxRegionLen) {
			ok = false
			continue
		}
		if j := slices.Index(s.Regions[:i], r); j >= 0 {
			p.add(f, "%s repeats regions[%d]", show(r), j)
			ok = false
		}
	}
	return ok
}

func (s Spec) validateNeverPromote(p *problems) {
	if len(s.NeverPromote) > len(s.Regions) {
		p.add("never_promote", "lists %d regions, more than regions (%d)", len(s.NeverPromote), len(s.Regions))
		return
	}
	for i, r := range s.NeverPromote {
		f := fmt.Sprintf("never_promote[%d]", i)
		switch {
		case !slices.Contains(s.Regions, r):
			p.add(f, "%s is not in regions", show(r))
		case slices.Contains(s.NeverPromote[:i], r):
			p.add(f, "%s listed twice", show(r))
		}
	}
	if s.preferred() == "" {
		// Some region must be able to take writes: the initial write
		// region is the first promotable one.
		p.add("never_promote", "lists every region: at least one must be promotable")
	}
}

func (s Spec) validateConsistency(p *problems) {
	c := level(s.Consistency)
	if c == 0 {
		p.add("consistency", "must be strong, bounded, session or eventual, got %s", show(s.Consistency))
		return
	}
	if c.String() != ConsistencyBounded {
		// The bounds would be ignored; a spec that says what it does not
		// do misleads whoever reads it.
		for _, f := range []struct {
			name string
			set  bool
		}{{"max_staleness", s.MaxStaleness != 0}, {"max_staleness_ops", s.MaxStalenessOps != 0}, {"staleness_hold", s.StalenessHold != 0}} {
			if f.set {
				p.add(f.name, "only for consistency bounded, not %s (unset it with the same command)", s.Consistency)
			}
		}
		return
	}
	if s.MaxStaleness < Duration(MinMaxStaleness) || s.MaxStaleness > Duration(MaxMaxStaleness) {
		p.add("max_staleness", "consistency bounded needs max_staleness in %v..%v, got %v", MinMaxStaleness, MaxMaxStaleness, s.MaxStaleness)
	}
	if s.MaxStalenessOps > MaxStalenessOpsLimit {
		p.add("max_staleness_ops", "must be in 0..%d (0: %d), got %d", uint64(MaxStalenessOpsLimit), DefaultMaxStalenessOps, s.MaxStalenessOps)
	}
	if s.StalenessHold < 0 || s.StalenessHold > Duration(MaxStalenessHold) {
		p.add("staleness_hold", "must be in 0s..%v (0: %v cut to max_staleness), got %v", MaxStalenessHold, DefaultStalenessHold, s.StalenessHold)
	}
}

func (s Spec) validateNodes(p *problems, regionsOK bool) {
	if len(s.Nodes) == 0 || len(s.Nodes) > MaxNodes {
		p.add("nodes", "must list 1..%d nodes, got %d", MaxNodes, len(s.Nodes))
		if len(s.Nodes) > MaxNodes {
			return
		}
	}
	ids := make(map[uint16]int, len(s.Nodes))
	names := make(map[string]int, len(s.Nodes))
	addrs := make(map[string]string, 3*len(s.Nodes))
	perRegion := make(map[string]int, len(s.Regions))
	for i, n := range s.Nodes {
		f := fmt.Sprintf("nodes[%d]", i)
		if n.ID == 0 {
			p.add(f+".id", "must be in 1..65535")
		} else if j, dup := ids[n.ID]; dup {
			p.add(f+".id", "%d repeats nodes[%d]", n.ID, j)
		} else {
			ids[n.ID] = i
		}
		if p.label(f+".name", n.Name, MaxLabelLen) {
			if j, dup := names[n.Name]; dup {
				p.add(f+".name", "%s repeats nodes[%d]", show(n.Name), j)
			} else {
				names[n.Name] = i
			}
		}
		if p.label(f+".region", n.Region, MaxRegionLen) && regionsOK {
			if !slices.Contains(s.Regions, n.Region) {
				p.add(f+".region", "%s is not in regions", show(n.Region))
			}
			perRegion[n.Region]++
		}
		p.label(f+".zone", n.Zone, MaxLabelLen)
		for _, a := range []struct{ field, v string }{{"node_addr", n.NodeAddr}, {"api_addr", n.APIAddr}, {"dns_addr", n.DNSAddr}} {
			if a.v == "" {
				if a.field != "dns_addr" {
					p.add(f+"."+a.field, "must be set")
				}
				continue
			}
			key, err := addrKey(a.v)
			if err != nil {
				p.add(f+"."+a.field, "%v", err)
				continue
			}
			if other, dup := addrs[key]; dup {
				// Two listeners at one address is a typo in the list.
				p.add(f+"."+a.field, "%s is also %s", show(a.v), other)
				continue
			}
			addrs[key] = f + "." + a.field
		}
	}
	if !regionsOK {
		return
	}
	for i, r := range s.Regions {
		if perRegion[r] == 0 {
			p.add(fmt.Sprintf("regions[%d]", i), "%s has no node: its replicas would have nowhere to live", show(r))
		}
	}
}

// validatePause bounds the reason and keeps it one printable line: it is
// shown in tables, logs and the status page.
func (s Spec) validatePause(p *problems) {
	if len(s.Pause) > MaxPauseReasonLen {
		p.add("pause", "is %d bytes, more than %d", len(s.Pause), MaxPauseReasonLen)
		return
	}
	for _, r := range s.Pause {
		if !unicode.IsPrint(r) {
			p.add("pause", "must be printable text on one line, got %q", r)
			return
		}
	}
	if s.Pause != "" && strings.TrimSpace(s.Pause) == "" {
		p.add("pause", "must say why (not only spaces)")
	}
}
