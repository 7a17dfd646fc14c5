package clusterspec

import (
	"fmt"
	"strings"

	"github.com/fmnode/fmnode/failover"
)

// base returns failover's profile the spec's profile starts from.
func (p Profile) base() (failover.Config, error) {
	switch {
	case p.Name == ProfilePaper || p.Name == ProfileCustom && (p.Base == "" || p.Base == ProfilePaper):
		return failover.DefaultConfig(), nil
	case p.Name == ProfileFast || p.Name == ProfileCustom && p.Base == ProfileFast:
		return failover.FastConfig(), nil
	}
	return failover.Config{}, fmt.Errorf("profile %s base %s", show(p.Name), show(p.Base))
}

// FailoverConfig is the failover configuration the spec gives every
// node: the profile, its overrides, and BlastRadius, validated by
// failover's own rules (lease above heartbeat plus drift, and the rest).
func (s Spec) FailoverConfig() (failover.Config, error) {
	var p problems
	s.validateProfile(&p)
	if err := p.err(); err != nil {
		return failover.Config{}, err
	}
	return s.failoverConfig()
}

// failoverConfig builds and validates the failover config of a profile
// whose fields have been checked.
func (s Spec) failoverConfig() (failover.Config, error) {
	c, err := s.Profile.base()
	if err != nil {
		return failover.Config{}, &FieldError{Field: "profile", Problem: err.Error(), Err: err}
	}
	for _, o := range overrides() {
		o.apply(&s.Profile, &c)
	}
	if s.BlastRadius > 0 {
		c.MaxConcurrentPerTarget = s.BlastRadius
	}
	if err := c.Validate(); err != nil {
		return failover.Config{}, &FieldError{Field: failoverField(err), Problem: err.Error(), Err: err}
	}
	return c, nil
}

// failoverField names the spec key of the failover.Config field a
// validation error of failover names ("...: LeaseDuration: ..." is
// profile.lease_duration), so that an operator sees the key to change;
// "profile" if it names none it knows.
func failoverField(err error) string {
	rest, ok := strings.CutPrefix(err.Error(), failover.ErrInvalidConfig.Error()+": ")
	if !ok {
		return "profile"
	}
	name, _, _ := strings.Cut(rest, ":")
	if name == "MaxConcurrentPerTarget" {
		return "blast_radius"
	}
	var b strings.Builder
	for i, r := range name {
		if 'A' <= r && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	for _, o := range overrides() {
		if o.key == b.String() {
			return "profile." + o.key
		}
	}
	return "profile"
}

// validateProfile checks the profile's own fields (the relations are
// failover's, checked by failoverConfig).
func (s Spec) validateProfile(p *problems) {
	pr := &s.Profile
	switch pr.Name {
	case ProfilePaper, ProfileFast:
		if pr.Base != "" {
			p.add("profile.base", "only for profile.name custom, not %s", pr.Name)
		}
		for _, o := range overrides() {
			if o.isSet(pr) {
				p.add("profile."+o.key, "set, but profile.name is %s: overrides need profile.name custom (a named profile is exactly failover's)", pr.Name)
			}
		}
		return
	case ProfileCustom:
		if pr.Base != "" && pr.Base != ProfilePaper && pr.Base != ProfileFast {
			p.add("profile.base", "must be paper or fast (empty: paper), got %s", show(pr.Base))
		}
	default:
		p.add("profile.name", "must be paper, fast or custom, got %s", show(pr.Name))
		return
	}
	for _, o := range overrides() {
		if problem := o.check(pr); problem != "" {
			p.add("profile."+o.key, "%s", problem)
		}
	}
}
