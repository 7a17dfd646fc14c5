// Package sim is the deterministic simulator: it runs the project's real
// cores (caspaxos, quorum, failover, partition, progress and the txtdns
// routing) on a simulated clock, network and disk, all driven by one seed,
// checks what they did, and replays any run exactly. `fmnode sim` is its
// command line.
//
// # One thread, one clock, one seed
//
// A run is a World: a Scheduler (a binary heap of events ordered by virtual
// time, then by the order they were scheduled), the nodes of a Topology, the
// fault state of the links between them (Links), and a Trace. World.Run pops
// one event at a time and fires it; nothing runs concurrently, nothing reads
// the wall clock (Run measures wall time around a run, never inside it), and
// every random choice comes from a PCG stream derived from the seed, one
// stream per component (see Stream and NewRand), so that a component drawing
// more numbers does not shift the others. Maps are looked up, never iterated
// into an outcome, and there is no select. So a seed at a commit replays the
// same run.
//
// The Trace proves it: an FNV-64a hash folded over every message delivery
// and drop, fault and heal, client call and return, crash, restart, pause,
// resume, fsync and phase change. Result.TraceHash is the same for the same
// seed at the same commit, whatever else runs beside it, and anything that
// only observes a run must leave it unchanged (the tests compare hashes
// with and without Config.Progress and Config.RerouteTrace).
//
// Scheduling an event allocates nothing once the event slab has grown, and
// costs O(log pending); in-flight messages live in the Network's slab, keyed
// by the event's argument. That is what lets the paper's drill (4300
// partitions, millions of events) run in one process in reasonable time.
//
// # What is simulated
//
//   - Network (Network, Links): per-region-pair latency (DefaultWAN: three
//     regions, about 20, 70 and 150 ms round trips, 1 ms inside a region) with
//     an exponential tail; FIFO per link; loss, duplication, reordering and
//     delay spikes; partitions as counted directed cuts, so overlapping
//     partitions heal independently: one node, one region, majority/minority,
//     a ring of overlapping majorities, a bridge, one-way cuts.
//   - Processes (World.Crash, Restart, Pause, Resume): a crash drops all
//     volatile state and every fsync in progress; a restart rebuilds from the
//     simulated disk only; a pause holds the node's events (at most
//     MaxHeldEvents) until it resumes. Each node's clock drifts within a
//     bound and the cores only ever see their node's local time.
//   - Disk: an acceptor's Ready batch becomes durable (Disk) after a
//     simulated fsync, with occasional slow ones; its replies are sent only
//     then, and fsyncs complete in order, which is the acceptor's Ready
//     contract. Partition replicas keep their log in an in-memory
//     partition store behind the same kind of simulated fsync.
//
// # Fault levels
//
// In the CASPaxos scenarios the Nemesis draws fault episodes from a
// FaultProfile chosen by --faults (ParseFaultLevel): none, light, heavy, or
// swarm, where each seed turns fault kinds on and off and picks its own
// intensities (swarm testing: a kind that is always on can hide the bugs
// another would expose). Every injection is counted by FaultKind and
// reported, so a fault injector that injects nothing shows. The replication
// scenario maps the level onto its own harness's loss, duplication, crash
// and cut rates. The failover scenarios run no nemesis: their fault is the
// script (a region powered off, cut off, a disk stall...), reported as
// faults "scripted".
//
// # Scenarios
//
// Scenarios returns the table (`fmnode sim --help` prints it); each
// implements Scenario.
//
//   - register, contention, membership: CASPaxos proposers and acceptors
//     (the sim Cluster) under a random CAS workload over many keys, under
//     9 proposers beating one heartbeat register (conflict rate for no,
//     exponential and adaptive backoff side by side), and under membership
//     changes 3 -> 4 -> 5 -> 3 acceptors with the quorum package's plans and
//     rescans. Each runs a safety phase under faults, then a liveness phase
//     in which every fault heals, crashed nodes restart, and the system must
//     converge within Config.LivenessBound.
//   - replication: the partition data plane's own deterministic harness
//     (package partition/replcheck) at every consistency level, folded into
//     the same trace hash and result.
//   - region-outage, node-failure, write-region-isolated, two-region,
//     flapping, failback, graceful-drain, gray-failure, az-outage: the whole
//     failover system on one world: per node an internal/node.Node (its
//     CASPaxos acceptor and proposer, failover.Manager, partition.Host and
//     register watch: the same composition the daemon's driver runs),
//     exchanging nodewire.Batch values over one simulated network; simulated
//     DNS publishers fed by the routes each node learns, and resolvers;
//     closed-loop clients routing by the txtdns records. The world adds only
//     the network, the disks, the clocks, the faults, the clients and the
//     checkers: no node acts on anything another node could not tell it. A run sets up the registers, warms up, runs the fault for
//     --outage, heals, waits for the re-sync, stops the clients and waits
//     for convergence. region-outage is the paper's drill: the command
//     defaults to DrillPartitions partitions, a DrillOutage outage and
//     DrillWarmup of warm-up; the scenario's own defaults are a small drill
//     for tests and sweeps.
//
// # Checks
//
// Failures are Violations, by kind: an invariant a core asserts (the
// acceptor's, the manager's, a host's), a message a core refused, a node
// that cannot restart from its disk, a liveness or convergence failure, the
// linearizability verdict, and the simulator's own bounds (a full
// scheduler). The failover scenarios add theirs: one region promoted per
// (partition, epoch) and epochs that only grow, no acknowledged write lost
// (the lineage check behind the RPO figure), no write acknowledged by a
// cut-off write region after its lease (write-region-isolated, flapping),
// and each script's own checks.
//
// Linearizability is checked with porcupine over the client history of the
// run, partitioned by key. Operations whose outcome is unknown (the proposer
// said so, or crashed under them) get an infinite return time; an Unknown
// verdict (timeout, Config.CheckTimeout) is a failure. Unknown writes no one
// ever observed are left out, as etcd's robustness tests do: they cannot
// explain anything, and each one multiplies the checker's search. A failing
// CASPaxos run writes porcupine's HTML visualisation (to Config.OutDir,
// default the temp dir) and the command prints its path.
//
// The canary (Config.Canary, `fmnode sim --canary`, register only) swaps in
// ForgetfulAcceptor, which forgets its promises on restart, under
// CanaryProfile, a fault mix of frequent acceptor restarts: every run must
// fail, or the checks are blind. Config.CanaryControl runs the same mix with
// the real acceptor, which must pass.
//
// # Running, sweeping, replaying
//
// Run executes one seed and returns a Result (the JSON schema of `fmnode
// sim --json`); Sweep runs a range of seeds on several goroutines, each run
// independent and single-threaded, and hands the results back in seed
// order, so a sweep's output does not depend on its worker count. Every
// Result carries Replay, the exact command that reruns it (ReplayCommand,
// e.g. `go run ./cmd/fmnode sim --scenario register --seed 7 --faults
// heavy`), which the command prints under a failing run. Config.Progress
// lets a caller watch a long run (ProgressReport, every ProgressEvery
// events and at each stage); the command turns it into a progress line on a
// terminal. sim/ci.sh is the simulator's share of CI: sweeps of every
// scenario, a rerun that must print the same trace hashes, and the canary,
// which must fail.
package sim
