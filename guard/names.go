package guard

// The guards. Add a name here, its Info below, and fire it in the core; the
// sweep reports it and CI checks it by its Reach.
const (
	_ Name = iota

	// caspaxos: the acceptor.
	AcceptorPrepareConflict
	AcceptorAcceptConflict
	AcceptorStaleAge
	AcceptorMalformed
	AcceptorNotTombstone
	// caspaxos: the proposer.
	ProposerNAK
	ProposerTimeout
	ProposerStaleAge
	ProposerNoQuorum
	ProposerUnknownOutcome
	ProposerOverloaded

	// partition: replicas.
	ReplicaStaleEpoch
	ReplicaStaleRoute
	ReplicaNotWriteRegion
	ReplicaPausedRedirect
	ReplicaBehindRedirect
	LeaseGateWrite
	LeaseGateAck
	LeaseGateRead
	LeaseGateGrant
	StrongCommitMemberMissing

	// failover: decisions and the manager.
	HoldPaused
	HoldGlobalPause
	HoldHysteresis
	HoldGrowHysteresis
	HoldBlastRadius
	ShrinkMinDurability
	ShrinkNeedsVerdict
	CandidateNotInWriteQuorum
	CandidateBelowMinDurability
	CandidateStaleState
	CandidateNeverPromote
	NoCandidate
	TakeoverDriftMargin
	RequestRefused

	// NumNames bounds the names (not a guard).
	NumNames
)

// Reach says which runs reach a guard, so CI knows which it may require.
type Reach uint8

const (
	// ReachSweep: the CI sweep (sim/ci.sh) reaches it; CI fails if it
	// never fired across the sweep.
	ReachSweep Reach = iota + 1
	// ReachEdge: only the fault scripts aimed at the edges (issue 13,
	// "Scripts aimed at the edges") reach it. Switch it to ReachSweep when
	// those scripts run in CI.
	ReachEdge
	// ReachNever: a correct run does not reach it (a malformed message, a
	// bound the simulated load never meets); counted, never required.
	ReachNever
)

func (r Reach) String() string {
	switch r {
	case ReachSweep:
		return "sweep"
	case ReachEdge:
		return "edge"
	case ReachNever:
		return "never"
	}
	return "unknown"
}

// Info describes a guard.
type Info struct {
	Name Name
	// Key is its name in guards_fired and in the daemon's metric label.
	Key string
	// Core is the package that fires it.
	Core string
	// Doc says what firing means.
	Doc   string
	Reach Reach
	// Why explains a Reach other than ReachSweep.
	Why string
}

// Infos returns every guard, in Name order.
func Infos() []Info {
	out := make([]Info, 0, NumNames-1)
	for n := Name(1); n < NumNames; n++ {
		out = append(out, n.Info())
	}
	return out
}

// Required returns the guards the CI sweep must fire.
func Required() []Name {
	var out []Name
	for n := Name(1); n < NumNames; n++ {
		if n.Info().Reach == ReachSweep {
			out = append(out, n)
		}
	}
	return out
}

// Info returns n's description (a zero Info for no guard).
func (n Name) Info() Info {
	i := n.info()
	i.Name = n
	return i
}

const edgeWhy = "reached on purpose only by issue 13's edge scripts (another helper's); switch on when they run in CI"

func (n Name) info() Info {
	switch n {
	case AcceptorPrepareConflict:
		return Info{Key: "acceptor_prepare_conflict", Core: "caspaxos", Reach: ReachSweep,
			Doc: "an acceptor refused a Prepare at or below its promise or accepted ballot"}
	case AcceptorAcceptConflict:
		return Info{Key: "acceptor_accept_conflict", Core: "caspaxos", Reach: ReachSweep,
			Doc: "an acceptor refused an Accept below its promise (a competing proposer prepared in between)"}
	case AcceptorStaleAge:
		return Info{Key: "acceptor_stale_age", Core: "caspaxos", Reach: ReachNever,
			Doc: "an acceptor refused a message below its age floor (register GC fence)",
			Why: "the failover scenarios never raise the age floor (no register GC there); the register scenario's GC is not counted"}
	case AcceptorMalformed:
		return Info{Key: "acceptor_malformed", Core: "caspaxos", Reach: ReachNever,
			Doc: "an acceptor refused a malformed item (bad key, a ballot not the sender's, a ballot reused with another value)",
			Why: "only a broken proposer sends one"}
	case AcceptorNotTombstone:
		return Info{Key: "acceptor_not_tombstone", Core: "caspaxos", Reach: ReachNever,
			Doc: "an acceptor refused to erase a register that is not the tombstone at the erase ballot",
			Why: "the failover registers are never erased"}
	case ProposerNAK:
		return Info{Key: "proposer_nak", Core: "caspaxos", Reach: ReachSweep,
			Doc: "a proposer round ended refused by a quorum of conflicts (a NAKed round)"}
	case ProposerTimeout:
		return Info{Key: "proposer_timeout", Core: "caspaxos", Reach: ReachSweep,
			Doc: "a proposer phase timed out without a quorum of answers"}
	case ProposerStaleAge:
		return Info{Key: "proposer_stale_age", Core: "caspaxos", Reach: ReachNever,
			Doc: "a proposer's round was fenced by an acceptor's age floor",
			Why: "as acceptor_stale_age"}
	case ProposerNoQuorum:
		return Info{Key: "proposer_no_quorum", Core: "caspaxos", Reach: ReachSweep,
			Doc: "a proposal ended without a quorum after its attempts"}
	case ProposerUnknownOutcome:
		return Info{Key: "proposer_unknown_outcome", Core: "caspaxos", Reach: ReachSweep,
			Doc: "a proposal ended in doubt: an earlier round's accept may still be chosen"}
	case ProposerOverloaded:
		return Info{Key: "proposer_overloaded", Core: "caspaxos", Reach: ReachNever,
			Doc: "a proposal was refused at the proposer's bound (keys in flight or queue per key)",
			Why: "the cluster scenario's 36 partitions stay far below the bounds; the 100k-partition drill test reaches it"}
	case ReplicaStaleEpoch:
		return Info{Key: "replica_stale_epoch", Core: "partition", Reach: ReachSweep,
			Doc: "a replica fenced a replication message of a stale epoch (answered with where writes go now)"}
	case ReplicaStaleRoute:
		return Info{Key: "replica_stale_route", Core: "partition", Reach: ReachSweep,
			Doc: "a replica redirected a client request or control action carrying an epoch below its own"}
	case ReplicaNotWriteRegion:
		return Info{Key: "replica_not_write_region", Core: "partition", Reach: ReachSweep,
			Doc: "a follower redirected a write or strong read of its own epoch to the write region"}
	case ReplicaPausedRedirect:
		return Info{Key: "replica_paused_redirect", Core: "partition", Reach: ReachSweep,
			Doc: "a write region fenced by a switchover redirected a write"}
	case ReplicaBehindRedirect:
		return Info{Key: "replica_behind_redirect", Core: "partition", Reach: ReachSweep,
			Doc: "a replica refused a request of an epoch above its own (it has not learned it yet)"}
	case LeaseGateWrite:
		return Info{Key: "lease_gate_write", Core: "partition", Reach: ReachSweep,
			Doc: "a write region refused a write: its lease lapsed or is not validated for the epoch"}
	case LeaseGateAck:
		return Info{Key: "lease_gate_ack", Core: "partition", Reach: ReachSweep,
			Doc: "a write region held back acknowledgements of durable writes because its lease did not hold"}
	case LeaseGateRead:
		return Info{Key: "lease_gate_read", Core: "partition", Reach: ReachSweep,
			Doc: "a write region refused a strong or bounded read without a lease that holds"}
	case LeaseGateGrant:
		return Info{Key: "lease_gate_grant", Core: "partition", Reach: ReachSweep,
			Doc: "a write region withheld a follower's freshness grant: no lease that holds"}
	case StrongCommitMemberMissing:
		return Info{Key: "strong_commit_member_missing", Core: "partition", Reach: ReachSweep,
			Doc: "a strong commit waited for the one member of a write quorum of three or more that lacked the op, though the minimum durability was met"}
	case HoldPaused:
		return Info{Key: "hold_paused", Core: "failover", Reach: ReachSweep,
			Doc: "a failover the evidence called for was held: the partition is paused"}
	case HoldGlobalPause:
		return Info{Key: "hold_global_pause", Core: "failover", Reach: ReachNever,
			Doc: "a failover was held by the cluster-wide pause",
			Why: "the simulator's operator pauses partitions, never the whole cluster"}
	case HoldHysteresis:
		return Info{Key: "hold_hysteresis", Core: "failover", Reach: ReachSweep,
			Doc: "a failover was held by the hold-off after repeated failovers within FlapWindow"}
	case HoldGrowHysteresis:
		return Info{Key: "hold_grow_hysteresis", Core: "failover", Reach: ReachSweep,
			Doc: "a caught-up region's grow back into the write quorum was held off after recent shrinks"}
	case HoldBlastRadius:
		return Info{Key: "hold_blast_radius", Core: "failover", Reach: ReachEdge,
			Doc: "a failover was held by the cap on failovers in flight into one region (MaxConcurrentPerTarget)",
			Why: "the sweeps run with the default cap (10,000); " + edgeWhy}
	case ShrinkMinDurability:
		return Info{Key: "shrink_min_durability", Core: "failover", Reach: ReachSweep,
			Doc: "a failed member was kept in the write quorum: dropping it would go below the minimum durability"}
	case ShrinkNeedsVerdict:
		return Info{Key: "shrink_needs_verdict", Core: "failover", Reach: ReachSweep,
			Doc: "a backup did not shrink a region out on its own suspicion: the quorum had not declared its node failed"}
	case CandidateNotInWriteQuorum:
		return Info{Key: "candidate_not_in_write_quorum", Core: "failover", Reach: ReachSweep,
			Doc: "a live candidate was filtered out under strong consistency: not a write-quorum member, it may miss acknowledged writes"}
	case CandidateBelowMinDurability:
		return Info{Key: "candidate_below_min_durability", Core: "failover", Reach: ReachSweep,
			Doc: "a candidate was rejected: promoting it would leave fewer live write-quorum members than the minimum durability"}
	case CandidateStaleState:
		return Info{Key: "candidate_stale_state", Core: "failover", Reach: ReachNever,
			Doc: "a candidate reported an epoch above the register value decided on (the decision waits for the fresh value)",
			Why: "the Manager reads the register back before it decides when a replica reports a newer epoch, so Decide rarely sees one (0 in 36 cluster and 90 failover swarm seeds); TestDecideReportsItsGuards covers it"}
	case CandidateNeverPromote:
		return Info{Key: "candidate_never_promote", Core: "failover", Reach: ReachSweep,
			Doc: "a candidate was skipped by the never-promote policy (a drained region is marked never-promote)"}
	case NoCandidate:
		return Info{Key: "no_candidate", Core: "failover", Reach: ReachSweep,
			Doc: "the write region failed and no candidate qualified: no takeover"}
	case TakeoverDriftMargin:
		return Info{Key: "takeover_drift_margin", Core: "failover", Reach: ReachSweep,
			Doc: "a node silent for longer than the lease was not yet suspected: the clock-drift margin (LeaseDuration + MaxClockDrift) held the takeover back"}
	case RequestRefused:
		return Info{Key: "request_refused", Core: "failover", Reach: ReachSweep,
			Doc: "an operator request (switchover, pause, drain step) was refused by the core with its reason"}
	}
	return Info{}
}
