// Package kv is the Go client applications use to read and write keys
// through fmnode agents' HTTP data API (internal/dataapi's package doc is
// the contract). It is the thin HTTP layer under the routing SDK
// (txtdns/routing): routing finds each key's partition, its write region
// and an agent endpoint there, follows redirects and failovers, retries
// across regions with bounded attempts and backoff, and keeps breakers and
// session tokens; kv sends each attempt and maps the agent's answer to
// what routing acts on.
//
//	c, err := kv.New(kv.Config{
//		Routing: routing.Config{Zone: "fm.example.", Resolver: res, PartitionCount: 4096,
//			PreferredRegions: []string{"westus"}},
//		HTTP: &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}},
//	})
//	if err != nil { ... }
//	err = c.Put(ctx, "tenant-42/profile", data)
//	var uo *kv.UnknownOutcomeError
//	if errors.As(err, &uo) {
//		// Not retried for us: learn what happened, then decide.
//		it, found, rerr := c.GetItem(ctx, "tenant-42/profile", routing.ConsistencyStrong)
//		applied := rerr == nil && found && it.Version == uo.WriteToken && !uo.WriteToken.IsZero()
//		...
//	}
//	v, found, err := c.Get(ctx, "tenant-42/profile", routing.ConsistencyEventual)
//
//	s := c.NewSession() // read-your-writes, monotonic reads
//	_ = s.Put(ctx, "cart/7", item)
//	v, found, err = s.Get(ctx, "cart/7", routing.ConsistencySession) // sees the Put
//
// # Requests
//
// Put, Get and Delete are PUT, GET and DELETE of /v1/kv/<key, escaped> at
// routing's Target.Endpoint, over Config.Scheme (https by default, with
// the caller's http.Client). Writes and strong reads carry Fm-Epoch
// (Target.Epoch), so a replica with a newer epoch fences them; reads
// carry Fm-Consistency and, within a Session, Fm-Session (the partition's
// token). Values are bounded by Config.MaxValueBytes both ways; keys by
// HardMaxKeyBytes; bodies are always drained (bounded) and closed.
//
// # Responses
//
//	204 (write), 200 (read)     success; Fm-Session merged into the Session
//	404 not_found (read)        found == false, no error; Fm-Session merged
//	421 redirect                routing.RedirectError from Fm-Partition, Fm-Epoch,
//	                            Fm-Write-Region: routing moves its cache and
//	                            retries at the write region at once
//	503 stale (read)            *APIError satisfying routing.StaleRead: the
//	                            next region at once, ending at the write region
//	429, 503 backpressure, lease_expired, not_ready, staleness_bound,
//	unavailable, overloaded     *APIError, retried by routing (backoff, next
//	                            region) after waiting out Retry-After, at
//	                            most Config.MaxRetryAfter
//	404 unknown_partition       *APIError, retried elsewhere
//	400, 413                    *RequestError: not applied, never retried
//	other 5xx (write)           *UnknownOutcomeError (504 unknown_outcome with
//	                            its Fm-Write-Token, 504 timeout, 503 canceled,
//	                            500, a proxy's 502): never retried
//	other 5xx (read)            *APIError, retried (reads are idempotent)
//	other statuses              *APIError, not retried
//
// A write whose connection broke (or whose context ended) after its
// request headers were sent is an *UnknownOutcomeError too; one that
// provably never left (a dial or TLS failure, no headers written) is
// retried. Errors routing gave up on come inside a *routing.ExhaustedError
// (errors.As finds the *APIError). A response whose Fm-Partition differs
// from the client's partition is ErrPartitionMismatch: client and agents
// disagree on the partition count. Malformed Fm-* headers make a read's
// attempt fail (ErrMalformedResponse, retried); after an applied write
// they are logged, not returned.
//
// # Bounds
//
// Config.Timeout bounds each operation, attempts and waits included, on
// top of the caller's context; routing bounds the attempts (MaxAttempts,
// MaxRedirects) and, with Routing.AttemptTimeout, each attempt. Error
// bodies are read up to a few KiB, Retry-After is obeyed up to
// MaxRetryAfter per attempt.
package kv
