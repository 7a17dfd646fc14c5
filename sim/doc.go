// Package sim is the deterministic simulator: it runs the project's real
// cores (caspaxos and quorum now; partition, failover, progress and txtdns
// add scenarios in their own issues) on a simulated clock, network and disk,
// all driven by one seed, finds bugs, and replays any of them exactly.
//
// # One thread, one clock, one seed
//
// A run is a World: a Scheduler (a binary heap of events ordered by virtual
// time, then by the order they were scheduled), the nodes of a Topology, the
// fault state of the links between them (Links), and a Trace. Run pops one
// event at a time and fires it; nothing runs concurrently, nothing reads the
// wall clock, and every random choice comes from a PCG stream derived from the
// seed (one stream per component, see Stream, so a component drawing more
// numbers does not shift the others). Maps are only looked up, never iterated
// into an outcome, and there is no select. So a seed at a commit replays the
// same run, and the Trace (FNV-64a over every delivery, drop, fault, crash and
// phase change) proves it: the same seed must print the same trace_hash.
//
// Scheduling an event allocates nothing once the event slab has grown, and
// costs O(log pending); in-flight messages live in the Network's slab, keyed
// by the event's argument. That is the budget the region-outage scenario of
// the failover issue needs (thousands of partitions at 100 simulated seconds
// per wall second).
//
// # What is simulated
//
//   - Network (Network, Links): per-region-pair latency (DefaultWAN: three
//     regions, about 20, 70 and 150 ms round trips, 1 ms inside a region) with
//     an exponential tail; FIFO per link; loss, duplication, reordering, delay
//     spikes per region; partitions as counted directed cuts, so overlapping
//     partitions heal independently: one node, one region, majority/minority,
//     a ring of overlapping majorities, a bridge, one-way cuts.
//   - Processes (World.Crash, Restart, Pause, Resume): a crash drops all
//     volatile state and every fsync in progress; a restart rebuilds from the
//     simulated Disk only; a pause holds the node's events (bounded) until it
//     resumes. Each node's clock drifts within a bound and the cores only ever
//     see their node's local time.
//   - Disk: the acceptor's Ready batch becomes durable after a simulated fsync
//     (with occasional slow ones); its replies are sent only then, and fsyncs
//     complete in order, which is the acceptor's Ready contract.
//
// The Nemesis draws fault episodes from a FaultProfile: none, light, heavy, or
// swarm, where each seed turns fault kinds on and off and picks its own
// intensities (swarm testing: a kind that is always on can hide the bugs
// another would expose). Every injection is counted by kind.
//
// # Runs, phases and checks
//
// A Scenario builds a system on a world and runs two phases: a safety phase
// with faults and a liveness phase in which every fault heals, crashed nodes
// restart, and the system must converge within Config.LivenessBound: every
// pending operation returns, a final linearizable read of every key succeeds,
// and every acceptor of the current configuration holds the value read.
// Failures are Violations: an invariant a core asserts (Acceptor.Violation),
// a message a core refused, a node that cannot restart from its disk, a
// liveness or convergence failure, and the linearizability verdict.
//
// Linearizability is checked with porcupine over the client history of the
// run, partitioned by key. Operations whose outcome is unknown (the proposer
// said so, or crashed under them) get an infinite return time; an Unknown
// verdict (timeout) is a failure. Unknown writes no one ever observed are
// left out, as etcd's robustness tests do: they cannot explain anything, and
// each one multiplies the checker's search. A failing run writes porcupine's
// HTML visualisation and prints its seed and the command that replays it.
//
// The canary (Config.Canary) swaps in ForgetfulAcceptor, which forgets its
// promises on restart, under a fault mix of frequent acceptor restarts: the
// run must fail. Config.CanaryControl runs the same mix with the real
// acceptor, which must pass.
//
// # Scenarios
//
// Scenarios returns the table: register (random CAS and reads over many keys
// and proposers), contention (9 proposers in 3 regions beat one heartbeat
// table; the conflict rate, rounds answered with a NAK over all rounds, for
// no, exponential and adaptive backoff side by side), and membership (grow
// the acceptor set 3 -> 4 -> 5 and shrink it back under load, with the quorum
// package's plans and rescans). Later issues add theirs by implementing
// Scenario and listing it there; the cluster, workload and env helpers are
// shared.
//
// Sweep runs a range of seeds on several goroutines, each run independent and
// single-threaded, and hands the results back in seed order. `fmnode sim` is
// the command line over Run and Sweep.
package sim
