// Package failover is fmnode's partition-level automatic failover: which
// region of a partition is its write region, when that changes, and what
// each replica does about it.
//
// # The register
//
// Each partition's failover state is a State, the value of its own
// CASPaxos register: the epoch and the write region serving it, the write
// quorum (the regions a write is durable in before it commits), the phase
// (steady, or a switchover to a target under way), the priority list that
// ranks candidates and names the region to fail back to, the epochs'
// progress table, the hysteresis records, pause flags and a bounded
// history of transitions with their reasons. Everything a decision depends
// on is in the value or in the evidence a node holds, so any node can
// recompute a decision, and every change is a compare-and-set against the
// version it was decided from: of competing proposals at most one commits,
// and the losers decide again from the value that won. The steady state
// writes nothing: heartbeats are per node, never per partition.
//
// # The manager
//
// A Manager runs failover for every partition replica on one node. It is a
// pure state machine, like the protocol cores: it does no I/O and reads no
// clock. Its inputs are the local replica's status from the partition host
// (UpdateReplica, UpdateReplicaAt), heartbeats from the peers
// (StepHeartbeat, kept in its Liveness view), the register's results
// (CASDone and ReadDone for the operations it asked for, ObserveState for
// every committed value the driver learns of), client errors
// (ReportClientError), the driver's Create and RequestRead, operator
// requests, and time (Tick at NextDeadline, Evaluate after other inputs).
// Its outputs come out of Ready as a ManagerReady: heartbeats to send,
// proposals and reads for the register, local actions per partition
// replica, and changes of its peers' reachability for the partition host.
// A partition is evaluated only when something it depends on changed or a
// timer it armed fired, and not even then when its last decision provably
// stands (see VerifySkips).
//
// Evaluating a partition assembles the node's Evidence (which replicas are
// live and healthy since when, the local replica's epoch and LSN, the
// followers the write region sees, stalls, whether the write region's node
// is declared failed and why) and calls Decide. Decide is pure: from a
// State and Evidence it computes the next State, if any, with its reasons.
// It fails over when the write region failed, ranking the candidates
// (Rank: eligible first; under strong consistency only write-quorum
// members are eligible and priority decides, under weaker levels progress
// decides first), and otherwise runs a switchover's steps, reopens a
// fenced write region, shrinks failed or stalled regions out of the write
// quorum and grows caught-up ones back, and fails back to the preferred
// region. Pauses and hysteresis hold automatic failover and failback back;
// the write-quorum hysteresis holds back growing a region that flapped.
// The preferred proposer (the target of a failover or of a switchover's
// completion, else the write region) proposes first; the others back it up
// after a stagger that grows with their rank.
//
// Reconcile maps a committed State to the actions that bring the local
// replica in line with it: promote (becoming write region of the new
// epoch, setting aside ops above the epoch's start), fence (a switchover
// under way), follow the write region from the point where the progress
// table says the replica's lineage diverged, setting the ops past it aside
// as false progress (or from a snapshot when the delta cannot be sent),
// and set the write quorum. The manager adds ActValidateLease, below.
//
// # Leases
//
// A node's Liveness holds a lease while enough observers outside its
// region acknowledge its heartbeat rounds; a write region whose lease
// lapsed stops acknowledging writes (partition.Config.LeaseGatesWrites,
// which the failover drivers turn on). Another region takes over only
// after the write region's node is declared failed: a majority of the
// observers outside its region, over a majority of the other regions, have
// not heard from it for the lease plus the clock-drift bound
// (Config.TakeoverDelay), in views still fresh. The lease quorum and the
// vote quorum share an observer; it acks no heartbeat of a node it
// suspects, and suspects one only after that long a silence, so whatever
// lease it granted has run out, on every clock within the drift bound,
// before a takeover can be decided: the old write region has stopped
// acknowledging writes before the new one is promoted. A gray-failed write
// region (alive, but its commit LSN stalled while clients see errors) is
// handled through the same quorum: observers withhold its lease acks, and
// once they have for the takeover delay they vote against it like a silent
// node. A lease regained after a lapse says nothing about the register:
// the node first rewrites, unchanged, the register value of each partition
// it is write region of (a reassert), and its replica counts the new lease
// run only once a register write proposed within the run has committed
// (ActValidateLease).
//
// # The admission window, drains and switchovers
//
// The register operations a manager has with the driver are bounded
// (ManagerConfig.MaxInFlight); the rest wait in priority order (failovers,
// then creates and reads, then every other transition) and none is dropped
// while it waits; drains start their switchovers on top of it. Failovers
// into one target region are capped as well
// (Config.MaxConcurrentPerTarget). A switchover moves a write region
// gracefully: the write region is fenced, records its last LSN, and the
// target becomes write region of the next epoch once it holds it; the
// switchover aborts and unfences after GracefulTimeout. Switchover and
// SetPaused serve operators for one partition, SetGlobalPause for all;
// Drain moves every partition out of a region by switchovers, a bounded
// number at a time and at a bounded rate, resumably.
//
// Explain renders, for operators, a partition's state, the evidence and
// the decision they lead to: the candidate ranking with each region's lag
// and eligibility, and the policy that blocks an action if one does.
package failover
