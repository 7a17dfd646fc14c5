// Command jepsen-style runs real `fmnode agent` processes under a seeded
// nemesis and checks, from the outside, what their clients saw and what
// their stores hold. The simulator (sim/) tests the cores and the node's
// composition on a simulated network and disk; this tests the rest: the
// TCP transport, the goroutine drivers, bbolt's and pebble's fsyncs, the
// restart path, memberlist, the HTTP APIs and the Go client.
//
//	go run ./jepsen-style --runs 3 --duration 30s --seed 1 --nodes 6
//	go run ./jepsen-style --print-schedule --seed 1 --duration 30s
//	go run ./jepsen-style --explain /tmp/jepsen-style-*/run-1/history.json
//	bash jepsen-style/ci.sh   # what .ci/run runs: 2 runs + the negative control
//
// # The cluster
//
// Agent i binds 127.0.1.i (node transport, API, gossip; the first node
// of each region serves DNS) and dials its peers from that address
// (source_ip: the node transport, agent-to-agent API calls and gossip
// streams; gossip packets leave from the bound gossip socket, on the same
// address). Its node transport, API and gossip are advertised at its
// proxies on 127.0.2.i, and its peers join it there (retry_join), so
// every byte between two agents, gossip included, and between the
// clients and an agent, goes through a userspace L4 proxy (proxy.go; for
// gossip a TCP and a UDP proxy on one port, proxy_udp.go). A proxy tells
// callers apart by source address, so each direction of each pair (and
// of clients to each agent) has its own rule: cut (a TCP proxy holds the
// data, as TCP does across a partition; the UDP proxy loses the packet),
// delay with jitter, drop (a TCP chunk waits a retransmission timeout, a
// packet is lost) and a bandwidth cap. A partition therefore cuts the
// membership gossip as well as the node transport: the cut nodes turn
// dead in each other's view (TestPartitionCutsGossip). The clients' DNS
// (their route lookups, TXT records the agents serve) goes through a DNS
// proxy per DNS server too (UDP relayed back to the querying client, TCP
// for a truncated answer), so a client cut or a lossy link reaches route
// lookups as it does requests. Each run's JSON shows that they did
// (evidence.go): "gossip" counts memberlist's UDP packets the proxies
// forwarded, cut and dropped and the "member dead" lines an agent logged
// about a peer a partition separated it from while nothing stopped that
// peer (member_dead_across_cut); "dns" counts the clients' DNS packets
// forwarded, cut and dropped. The cluster is mutual TLS throughout
// (a CA, a certificate per node and one for the clients), the fast
// timing profile, strong consistency, min durability 2 over three
// regions. The harness's own operator calls (init, switchover, drain,
// pause) reach the agents' bound API addresses directly, out of band.
//
// The guard (guard.go) refuses to listen on, dial, or proxy to anything
// outside 127.0.0.0/8, host names included. Every agent runs in its own
// process group, is SIGKILLed if the harness dies (parent-death signal)
// and after a lifetime, and every run kills all of them at its end,
// whatever happened; each invocation is bounded in time and each run in
// operations (--max-ops).
//
// # The nemesis
//
// The schedule is drawn from the seed alone (--print-schedule shows it;
// the same seed, duration and cluster size give the same schedule): one
// fault at a time, 3 to 8 s each with 1 to 3 s between, from
// partition-one, partition-region, partition-majority, partition-ring
// (each node sees a majority, no two the same), partition-bridge (two
// halves and one node in both), partition-oneway, client-cut,
// link-delay, link-drop, link-slow, kill (kill -9 and restart), kill-all
// (every agent at once: a power loss), pause (SIGSTOP, SIGCONT),
// clock-skew (a restart with clock_offset within the profile's
// max_clock_drift) and disk-full (the last node's data dir is a 128 MiB
// tmpfs the nemesis fills; skipped, and said so, when it cannot mount
// one). Operator actions (switchover of a random partition to a random
// region, drain of a region, a global pause) come at random moments,
// overlapping the faults. --clock-beyond replaces the schedule: node 1's
// clock runs at rate 0.2 (clock_rate; an offset would change nothing,
// the node measures its lease as local durations) and node 1 is cut from
// its peers, not its clients, for 6-9 s at a time: its lease outlives the
// takeover. The checker flags that run "unsafe" and must find a
// violation in it (--expect-fail): the system's assumption is broken, so
// what it shows proves the checks, not a bug. At the end every
// fault is healed: links, stopped and dead agents, full disks.
//
// # The workload
//
// Up to 10 clients (porcupine's cost grows with clients per key), each a
// Go client (txtdns/kv) routed by the agents' DNS with a session of its
// own, over 2 keys per partition: puts of values unique in the run
// (25%), compare-and-sets (12%: a strong GetItem, recorded as a strong
// read, then CompareAndSet on the version it returned with a new unique
// value), deletes (4%), compare-and-deletes (4%: the strong GetItem,
// then CompareAndDelete on its version; none when the key is absent),
// strong reads (30%), session reads (15%), bounded-staleness reads
// (10%). A delete is named by a value unique in the run (never stored),
// so the checks order it as a write. Each operation records its invoke and complete times on
// the harness's clock; a write the client reports as an unknown outcome
// gets an infinite return time.
//
// # The checker
//
// It reads only the clients' history and, once every agent is dead,
// copies of their partition stores (pebble's open may replay its WAL;
// the copies keep the originals as the agents left them):
//
//   - porcupine per key over the puts, the CASes (acknowledged: the key
//     held the expected value and now holds the new one; 412: it did not,
//     nothing changed; unknown: either, at any point after the call) and
//     the strong reads (and the read-back); a timeout (Unknown) fails the
//     run;
//   - no acknowledged put lost: after the heal every key is read back
//     strongly, and a value that certainly precedes an acknowledged put
//     (or absence) is a lost write; a value no client wrote is a phantom;
//   - at most one writer per epoch, from the data plane's own records: no
//     two replicas hold different ops at one (partition, epoch, LSN), and
//     no replica's log goes back in epoch;
//   - sessions: a session read never returns a value older than one the
//     session wrote or read (read-your-writes, monotonic reads);
//   - bounded staleness: a bounded read never returns a value an
//     acknowledged put had superseded more than the bound before;
//   - convergence: every agent ready and every key read back within
//     --converge of the heal (recovery_s);
//   - fail-stop: an agent incarnation whose system-register acceptor
//     stopped (a failed store write) stopped too (the agents' logs).
//
// Acknowledged CASes are writes for the lost-write, session, staleness
// and store checks; acknowledged deletes and compare-and-deletes for the
// lost-write (the deleted value reads back), session and staleness
// checks, and porcupine's model has a deleted key read absent. With
// deletes, absence is older than a write only when no delete that may
// have applied could come after it.
//
// On a failure the run's directory keeps porcupine.html, schedule.json,
// history.json, result.json, harness.log, every agent's log
// (n*/agent.log, all its incarnations) and REPLAY, the command that
// replays the schedule.
//
// # The negative control
//
// Built with -tags fmnode_negative_control (never in the normal binary),
// the agent's partition store lives in memory: every reply that depends
// on a replica's persisted state leaves without an fsync, and a kill -9
// loses it. --negative-control runs that build and forces a kill-all a
// third of the way in; the checker must catch it (ci.sh requires it).
package main
