// Package routing is the client side of txtdns: how an application finds
// the write region of each partition, quickly and correctly during and
// after a failover. In the spirit of a data-source factory, an application
// adopts it with two calls:
//
//	c, _ := routing.New(routing.Config{Zone: "fm.example.", Resolver: res, PartitionCount: 4096})
//	t, _ := c.WriteEndpoint(ctx, "tenant-42")          // where to write now
//	err := c.Do(ctx, "tenant-42", func(ctx context.Context, t routing.Target) (routing.SessionToken, error) {
//		return db.Write(ctx, t.Endpoint, t.Epoch, ...)  // redirects, retries, breakers handled by Do
//	})
//
// # Cache
//
// Routes come from DNS TXT records (TXTResolver: DNSResolver over the
// network, AuthorityResolver over a Publisher in the same process,
// MapResolver for tests) and live in a Cache that never moves a partition
// backwards: an answer is accepted only if its epoch is at least the cached
// one (at equal epoch, its config version too). Resolvers and caches serve
// stale data; a stale answer is refused and counted, never applied. A
// partition answer is a run, so one lookup caches its neighbours; Warm
// fills the cache with one block lookup per 256 partitions. When DNS fails
// the cache serves a route up to MaxStale past its expiry. A warm lookup
// (WriteEndpoint) is a clock read and three atomic loads (route page, route,
// region snapshot): lock-free and allocation-free.
//
// # Redirects, retries, breakers
//
// The data plane answers a request that reached a region which is not the
// write region, or carried an old epoch, with a typed error satisfying
// Redirect (current epoch and write region); Do updates the cache at once
// and retries there without waiting for a TTL or a backoff. Other failures
// count against a circuit breaker per partition and region (Breakers:
// FailureThreshold consecutive failures open it for OpenFor, then one
// half-open probe), force a DNS refresh, wait a capped exponential backoff
// with jitter and move to the next region in priority order (Candidates),
// whose answer — a redirect or success — is how a client learns of a
// failover before DNS does. Attempts and redirects are bounded.
//
// What an operation learnt under one route says nothing of a newer one:
// when the cache moves a partition to a newer epoch (by redirect or DNS),
// the operation forgets which regions it tried and which failed, and the
// breaker of the new write region is reset (a failover commits only to a
// live, caught-up region, so failures counted before it are stale). A
// graceful switchover's target that did not answer while it was a
// follower (or whose node restarted) is thus tried at once when the new
// epoch names it, instead of sitting behind its breaker for OpenFor. For
// QuickProbeFor after that, the new write region's breaker opens for
// PromotedOpenFor (1 s) rather than OpenFor: a client cut off from it
// (every write of the partition can only go there) probes it about once
// a second, and is back within about 2 s of the cut healing.
//
// A live replica that names the write region an operation failed to reach
// (same epoch: "not yet") says a failover is pending: the region's
// breaker trips, and the client polls the live region that answered (the
// first in priority order, the likely failover target) every RedirectPoll
// (jittered down by up to a quarter) until it names the new epoch; a
// redirect whose epoch the cache already holds (another operation or a DNS
// answer got there first) is followed at once. The tripped region's
// half-open probes (to see whether it came back without a failover) are
// quick: they go only right after a live region's "not yet", are given up
// after ProbeDeadline (Decision.Timeout, Target.Timeout) rather than the
// full attempt timeout, and do not count as the operation's attempts, so
// a failover that commits during a probe costs the client at most that
// deadline. Past QuickProbeFor from the trip, probes take the full
// timeout again (a region that came back slow still closes its breaker).
//
// Such polls (Decision.Poll, Target.Poll) answer every operation of the
// partition alike, so Exec shares them among its concurrent operations of
// one partition: while one poll is in flight the others wait for its
// redirect, and while several poll, the partition's polls are spaced by
// 3/4 RedirectPoll. Many operations waiting on one partition then cost
// about one poll per 3/4 RedirectPoll, not one each (Config.NoPollSharing
// turns this off; fmnode_routing_polls_shared_total counts the polls
// saved). A driver of Calls or Operations of its own does not share.
//
// A poll also asks the replica to hold it (Decision.PollWait,
// RouterConfig.PollWait, 1 s by default; the data API's Fm-Poll-Wait): a
// replica that supports it answers the moment it learns the new route,
// serving the write if it was just promoted, so the commit reaches a
// polling client at once instead of at its next poll. Held polls go to
// the first live region in priority order other than the write region
// (the likely failover target, where the new epoch starts), not to the
// nearest: a poll held at another follower comes back as a redirect when
// that follower learns the epoch and costs a second request. The next
// poll leaves RedirectPoll after the held one was sent, not after its
// answer, and a held poll's time is not taken as the region's round trip.
// With NoPollWait polls are answered at once and go to the nearest live
// region (measured by the redirects). A held poll is a write in flight:
// if its connection breaks, its outcome is unknown, as any write's (it may
// have been served at a promotion).
//
// # Consistency
//
// Reads carry a Consistency (strong, bounded staleness, session, eventual)
// as the data plane defines them. Strong reads go where writes go; session
// and bounded-staleness reads try the PreferredRegions first and fall back
// to the write region when a replica answers StaleRead; eventual reads stay
// local. A Session carries the caller's tokens (epoch, LSN) per partition:
// Do merges the token each operation returns, reads hand it to the replica,
// and Encode/DecodeSession carry it across processes.
//
// # Determinism
//
// The routing rules live in a pure core, Router: the Cache, the Breakers,
// Candidates and Backoff, and Operation, the state machine of one
// operation (Next says whether to resolve, send an attempt to a region or
// wait; Resolved, Report and Unsent feed back what happened). It starts no
// goroutines, reads no clock (callers pass now), takes randomness from an
// injected Rand and does no I/O. The Client drives it with its resolver,
// region records and sleeps (Call, Exec); the simulator drives the same
// Router from its event loop, with DNS answers and data-plane replies
// carried by its simulated network, so what the simulator measures is
// what the Client does. Client starts no goroutines.
package routing
