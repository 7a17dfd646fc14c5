package clusterspec

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Key is a key of Get and Set: a field's JSON path.
type Key struct {
	Name  string
	Usage string
}

func (k Key) String() string { return k.Name + "\t" + k.Usage }

// Change is one key's new value for Apply ("" unsets an optional value).
type Change struct {
	Key, Value string
}

// key is a field of the spec as Get, Set and Diff know it. fixed, if not
// empty, says why it may not be set.
type key struct {
	name, usage, fixed string
	get                func(s *Spec) string
	set                func(s *Spec, v string) error
}

// derived is why the fields placement and registers come from are fixed.
const derived = "fixed at init: placement and every partition's register are derived from it"

// keys lists every key in Spec order (a test checks that none is missing).
func keys() []key {
	ks := []key{
		{name: "format", usage: "codec version", fixed: "written by the codec",
			get: func(s *Spec) string { return strconv.Itoa(s.Format) }},
		{name: "cluster", usage: "cluster label", fixed: "fixed at init: every agent's local config names it",
			get: func(s *Spec) string { return s.Cluster }},
		{name: "regions", usage: "regions in priority order", fixed: derived,
			get: func(s *Spec) string { return strings.Join(s.Regions, ",") }},
		{name: "never_promote", usage: "regions never made write region (comma list; empty: none)",
			get: func(s *Spec) string { return strings.Join(s.canonicalNeverPromote(), ",") },
			set: func(s *Spec, v string) error { s.NeverPromote = splitList(v); return nil }},
		{name: "partitions", usage: "partition count", fixed: derived,
			get: func(s *Spec) string { return strconv.Itoa(s.Partitions) }},
		{name: "consistency", usage: "strong|bounded|session|eventual",
			get: func(s *Spec) string { return s.Consistency },
			set: func(s *Spec, v string) error { s.Consistency = v; return nil }},
		durKey("max_staleness", "bounded only: how far behind a bounded read may be (required)", func(s *Spec) *Duration { return &s.MaxStaleness }),
		{name: "max_staleness_ops", usage: fmt.Sprintf("bounded only: how many ops behind a bounded read may be (0: %d)", DefaultMaxStalenessOps),
			get: func(s *Spec) string { return strconv.FormatUint(s.MaxStalenessOps, 10) },
			set: func(s *Spec, v string) (err error) { s.MaxStalenessOps, err = parseUint(v); return err }},
		durKey("staleness_hold", fmt.Sprintf("bounded only: how long a write that would exceed the bound is held (0: %v cut to max_staleness)", DefaultStalenessHold), func(s *Spec) *Duration { return &s.StalenessHold }),
		intKey("min_durability", "regions a write must be durable in (1..regions)", func(s *Spec) *int { return &s.MinDurability }),
		{name: "profile.name", usage: "failover timing: paper|fast|custom",
			get: func(s *Spec) string { return s.Profile.Name },
			set: func(s *Spec, v string) error { s.Profile.Name = v; return nil }},
		{name: "profile.base", usage: "custom only: the profile overrides apply to, paper|fast (empty: paper)",
			get: func(s *Spec) string { return s.Profile.Base },
			set: func(s *Spec, v string) error { s.Profile.Base = v; return nil }},
	}
	for _, o := range overrides() {
		ks = append(ks, key{name: "profile." + o.key, usage: "custom only: " + o.usage + " (empty: the base's)",
			get: func(s *Spec) string { return o.get(&s.Profile) },
			set: func(s *Spec, v string) error { return o.set(&s.Profile, v) }})
	}
	return append(ks,
		intKey("blast_radius", "failovers in flight into one region (0: the profile's default)", func(s *Spec) *int { return &s.BlastRadius }),
		key{name: "pause", usage: "why automatic failover is suspended everywhere (empty: not paused)",
			get: func(s *Spec) string { return s.Pause },
			set: func(s *Spec, v string) error { s.Pause = v; return nil }},
		key{name: "nodes", usage: "the members recorded at init (JSON)", fixed: derived,
			get: func(s *Spec) string { return nodesText(s.canonical().Nodes) }},
	)
}

func durKey(name, usage string, f func(*Spec) *Duration) key {
	return key{name: name, usage: usage,
		get: func(s *Spec) string { return f(s).String() },
		set: func(s *Spec, v string) error {
			if v == "" {
				*f(s) = 0
				return nil
			}
			d, err := parseDuration(v)
			*f(s) = Duration(d)
			return err
		}}
}

func intKey(name, usage string, f func(*Spec) *int) key {
	return key{name: name, usage: usage,
		get: func(s *Spec) string { return strconv.Itoa(*f(s)) },
		set: func(s *Spec, v string) error {
			n, err := parseUint(v)
			if err == nil && n > 1<<31 {
				return fmt.Errorf("%s is too large", show(v))
			}
			*f(s) = int(n)
			return err
		}}
}

// parseUint parses a decimal count; "" is 0.
func parseUint(v string) (uint64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s is not a whole number", show(v))
	}
	return n, nil
}

// splitList parses a comma list; "" is none.
func splitList(v string) []string {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	parts := strings.Split(v, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

func nodesText(ns []Node) string {
	b, err := json.Marshal(ns)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// canonicalNeverPromote is NeverPromote in Regions order, then any
// region not in Regions (an invalid spec still reads back).
func (s *Spec) canonicalNeverPromote() []string {
	var out []string
	for _, r := range s.Regions {
		for _, n := range s.NeverPromote {
			if n == r {
				out = append(out, r)
				break
			}
		}
	}
	for _, n := range s.NeverPromote {
		found := false
		for _, r := range s.Regions {
			found = found || n == r
		}
		if !found {
			out = append(out, n)
		}
	}
	return out
}

func findKey(name string) (key, bool) {
	for _, k := range keys() {
		if k.name == name {
			return k, true
		}
	}
	return key{}, false
}

// Keys lists the keys Set takes, in spec order, with a line each.
func Keys() []Key {
	var out []Key
	for _, k := range keys() {
		if k.fixed == "" {
			out = append(out, Key{Name: k.name, Usage: k.usage})
		}
	}
	return out
}

// Get returns the value of key, as Set would take it back: durations in
// Go's spelling, lists comma-separated, an unset override empty. It
// reads the fixed keys too (nodes as JSON).
func (s Spec) Get(name string) (string, error) {
	k, ok := findKey(name)
	if !ok {
		return "", fieldErr(name, "unknown key")
	}
	return k.get(&s), nil
}

// Set returns the spec with key set to value, validated whole (a value
// may be fine alone and break a relation). See Apply.
func (s Spec) Set(name, value string) (Spec, error) {
	return s.Apply(Change{Key: name, Value: value})
}

// Apply returns the spec with every change made, then validated whole
// and in canonical form; s is unchanged. Changes that only make sense
// together (consistency=bounded with max_staleness) go in one Apply. The
// error names the key: unknown, fixed (and why), a value that does not
// parse, or the problems of the result.
func (s Spec) Apply(changes ...Change) (Spec, error) {
	next := s.Clone()
	seen := make(map[string]bool, len(changes))
	var names []string
	for _, c := range changes {
		k, ok := findKey(c.Key)
		switch {
		case !ok:
			return Spec{}, fieldErr(c.Key, "unknown key")
		case k.fixed != "":
			return Spec{}, fieldErr(c.Key, "not settable: %s", k.fixed)
		case seen[c.Key]:
			return Spec{}, fieldErr(c.Key, "set twice in one change")
		}
		seen[c.Key] = true
		names = append(names, c.Key)
		if err := k.set(&next, c.Value); err != nil {
			return Spec{}, &FieldError{Field: c.Key, Problem: err.Error(), Err: err}
		}
	}
	if err := next.Validate(); err != nil {
		return Spec{}, fmt.Errorf("clusterspec: set %s: %w", strings.Join(names, ", "), err)
	}
	return next.canonical(), nil
}

// Diff names the keys whose values differ between old and new, in spec
// order (fixed keys included, so that a spec rewritten behind the CLI's
// back shows).
func Diff(old, new Spec) []string {
	var out []string
	for _, k := range keys() {
		if k.get(&old) != k.get(&new) {
			out = append(out, k.name)
		}
	}
	return out
}
