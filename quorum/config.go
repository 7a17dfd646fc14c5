package quorum

// Config is a flexible-quorum CASPaxos acceptor configuration: a proposer
// gathers promises from a quorum of Prepare and acknowledgements from a quorum
// of Accept. Paxos needs only that every prepare quorum intersect every accept
// quorum (FPaxos); two prepare quorums, or two accept quorums, may be
// disjoint. During a membership change the two sets have different members.
type Config struct {
	Prepare Set
	Accept  Set
}

// MajorityConfig returns the classic configuration: the same simple majority
// of ids for both phases.
func MajorityConfig(ids ...ID) Config {
	m := Majority(ids...)
	return Config{Prepare: m, Accept: Set{Members: sortedUnique(m.Members), Threshold: m.Threshold}}
}

// Validate reports whether both sets are valid and every prepare quorum
// intersects every accept quorum. Errors name the set; a disjointness error is
// a *DisjointQuorumsError carrying a witness pair.
func (c Config) Validate() error {
	if err := c.Prepare.validate("Config.Prepare"); err != nil {
		return err
	}
	if err := c.Accept.validate("Config.Accept"); err != nil {
		return err
	}
	return disjointError("Config.Prepare", c.Prepare, "Config.Accept", c.Accept)
}

// disjointError returns a *DisjointQuorumsError if a and b have disjoint
// quorums, nil otherwise. Both sets must be valid.
func disjointError(nameA string, a Set, nameB string, b Set) error {
	qa, qb, ok := DisjointQuorums(a, b)
	if !ok {
		return nil
	}
	return &DisjointQuorumsError{NameA: nameA, A: a, NameB: nameB, B: b, QuorumA: qa, QuorumB: qb}
}

// Acceptors returns the sorted union of both member lists as a fresh slice:
// every acceptor a proposer under c must send messages to.
func (c Config) Acceptors() []ID {
	out := make([]ID, 0, len(c.Prepare.Members)+len(c.Accept.Members))
	out = append(out, c.Prepare.Members...)
	out = append(out, c.Accept.Members...)
	return sortedUnique(out)
}

// Equal reports whether both sets are equal (threshold and member list).
func (c Config) Equal(o Config) bool {
	return c.Prepare.Equal(o.Prepare) && c.Accept.Equal(o.Accept)
}

// String renders c as "prepare=2-of-{1,2,3} accept=3-of-{1,2,3,4}".
func (c Config) String() string {
	return "prepare=" + c.Prepare.String() + " accept=" + c.Accept.String()
}

// isMajority reports whether c is MajorityConfig of its members.
func (c Config) isMajority() bool {
	return c.Equal(MajorityConfig(c.Prepare.Members...))
}
