package clusterspec

import (
	"bytes"
	"encoding/json"
	"slices"
)

// Encode validates the spec and returns its canonical encoding: JSON,
// compact, with fields in declaration order, Nodes sorted by id and
// NeverPromote in the priority order of Regions. Two specs that say the
// same thing encode to the same bytes, so an agent can tell a changed
// spec from a rewritten one by comparing bytes.
func Encode(s Spec) ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(s.canonical())
	if err != nil {
		return nil, &FieldError{Field: "spec", Problem: err.Error(), Err: err}
	}
	if len(b) > MaxBytes {
		return nil, fieldErr("spec", "encodes to %d bytes, more than %d", len(b), MaxBytes)
	}
	return b, nil
}

// Decode reads an encoded spec: at most MaxBytes, JSON with no unknown
// field and nothing after the value, of a Format it knows, valid. The
// spec it returns is in canonical form (as Encode would write it).
// Whatever the bytes, the error matches ErrInvalid.
func Decode(b []byte) (Spec, error) {
	if len(b) > MaxBytes {
		return Spec{}, fieldErr("spec", "%d bytes, more than %d", len(b), MaxBytes)
	}
	// The version first, leniently: a spec of a later format is likely
	// to have fields this build does not know, and "unknown field" would
	// hide the reason. Unmarshal also refuses anything after the value,
	// which the streaming decoder below would not.
	var v struct {
		Format *int `json:"format"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return Spec{}, &FieldError{Field: "spec", Problem: "not JSON: " + clip(err.Error()), Err: err}
	}
	if v.Format == nil {
		return Spec{}, fieldErr("format", "missing: not a cluster spec")
	}
	if *v.Format != Format {
		return Spec{}, fieldErr("format", "version %d, this build reads %d", *v.Format, Format)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return Spec{}, &FieldError{Field: "spec", Problem: clip(err.Error()), Err: err}
	}
	// Validate before canonical: the problems name fields by their place
	// in the input.
	if err := s.Validate(); err != nil {
		return Spec{}, err
	}
	return s.canonical(), nil
}

// canonical returns the spec in canonical form, sharing nothing with s:
// Nodes sorted by id, NeverPromote in Regions order, empty lists nil.
func (s Spec) canonical() Spec {
	c := s.Clone()
	slices.SortFunc(c.Nodes, func(a, b Node) int { return int(a.ID) - int(b.ID) })
	c.NeverPromote = s.canonicalNeverPromote()
	if len(c.Nodes) == 0 {
		c.Nodes = nil
	}
	if len(c.Regions) == 0 {
		c.Regions = nil
	}
	return c
}

// Clone returns a deep copy: the slices and the profile's overrides are
// the copy's own.
func (s Spec) Clone() Spec {
	c := s
	c.Regions = slices.Clone(s.Regions)
	c.NeverPromote = slices.Clone(s.NeverPromote)
	c.Nodes = slices.Clone(s.Nodes)
	c.Profile = s.Profile.clone()
	return c
}

func (p Profile) clone() Profile {
	c := p
	for _, o := range overrides() {
		o.clone(&c)
	}
	return c
}
