// Package dataapi is the HTTP/JSON data API of one fmnode agent: the
// endpoints applications (through the routing SDK, txtdns/routing) write
// and read keys with. Handler is a plain http.Handler over a Backend (the
// node driver in the agent, MemBackend in tests); NewServer returns the
// http.Server to run it on, with its timeouts set, HTTP/1.1 and, over
// TLS, HTTP/2 (TLS is the caller's: pass a *tls.Config in ServerConfig).
//
// # Endpoints
//
//	PUT    /v1/kv/{key}   body: the value (raw bytes)   204 No Content
//	GET    /v1/kv/{key}                                 200 body: the value, or 404 "not_found"
//	DELETE /v1/kv/{key}                                 204 No Content (also for a missing key)
//
// The key is the path after /v1/kv/, path-escaped (KeyPath builds it; a
// '/' may be sent raw or as %2F, the two are the same key). It must not be
// empty and is at most Config.MaxKeyBytes bytes unescaped (default
// partition.DefaultMaxKeyBytes, 1 KiB); the value is at most
// Config.MaxOpBytes minus the key (default partition.DefaultMaxOpBytes,
// 256 KiB). The partition is Config.Partitioner's, by default the routing
// SDK's one-based hash (NewHashPartitioner: partitions are 1..n), so server and SDK agree.
//
// # Request headers
//
//	Fm-Consistency  strong | bounded | session | eventual (GET; absent: the
//	                partition's level; validated but unused on writes)
//	Fm-Epoch        the partition epoch the client knows, canonical decimal
//	                (writes and strong reads; absent, ahead, or old at a
//	                replica that is not the write region: 421 with the
//	                current one; old at the write region: served in the
//	                current epoch, which the response's Fm-Epoch and
//	                Fm-Session carry)
//	Fm-Session      the session token of the key's partition, "<epoch>:<lsn>"
//	                in canonical decimal, at most 41 bytes (session reads)
//	If-Match        PUT and DELETE: compare-and-set, applied only if the
//	                key's current version is "<epoch>:<lsn>" (a GET's
//	                Fm-Version; may be quoted as an ETag; not 0:0)
//	If-None-Match   PUT and DELETE: "*" only, applied only if the key holds
//	                no value; at most one of the two, never on a GET (400)
//	Fm-Poll-Wait    PUT and DELETE: the write is a client's poll for a
//	                pending failover; a replica that would redirect it
//	                with nothing new may hold it up to this many
//	                milliseconds (1..60000, canonical decimal; the node's
//	                partition.Config.MaxPollWait clamps it) and answers when
//	                the partition's route moves: served if it was just
//	                promoted, else the 421 naming the new write region.
//	                Never on a GET (400)
//
// A condition is decided by the write region in the order of its log,
// against the key's committed state, so of many writes conditioned on one
// version at most one is applied. A failed one is 412 condition_failed:
// certainly not applied, answered only once the state it compared against
// is committed and under the write region's lease (like a strong read),
// with that state's Fm-Version (absent: the key holds no value).
//
// A malformed or repeated header is 400 "bad_header", the message naming it.
//
// # Response headers
//
//	Fm-Partition     the key's partition (every response once the key parsed)
//	Fm-Epoch         the replica's epoch; after a write, the write's epoch
//	Fm-Write-Region  the write region of Fm-Epoch, when known: after a
//	                 write, a strong read, a 421 and a 504 unknown_outcome
//	Fm-Session       the token to merge into the session (writes, reads,
//	                 and a GET's 404)
//	Fm-Version       GET 200 and 412: "<epoch>:<lsn>" of the op that wrote
//	                 the value (on a 412, absent when the key has none)
//	Fm-Redirect-Reason  421: stale_epoch | not_write_region | paused | replica_behind
//	Fm-Write-Token   504 unknown_outcome: "<epoch>:<lsn>" the write was
//	                 assigned (not a session token: do not merge it; a
//	                 later GET whose Fm-Version equals it proves the write
//	                 survived)
//
// # Errors
//
// Every error has a JSON body {"error": "<text>", "code": "<code>"}
// (ErrorBody) whose code is stable:
//
//	421 redirect           not the write region of the request's epoch (or of a
//	                       later one), or the epoch is absent/ahead: not
//	                       applied; go to Fm-Write-Region at Fm-Epoch now
//	429 backpressure       too many pending writes: not applied; Retry-After
//	503 lease_expired      the write region's lease lapsed: not applied; Retry-After
//	503 not_ready          the replica is recovering: not applied; Retry-After
//	503 stale              a bounded or session read this replica cannot serve
//	                       (not provably fresh, session token not applied yet):
//	                       read at another region or retry; Retry-After
//	503 staleness_bound    bounded staleness held the write back and rejected
//	                       it: not applied; Retry-After
//	503 unavailable        any other failed read; Retry-After
//	503 overloaded         Config.MaxInFlight requests in flight: refused at
//	                       once, not applied; Retry-After
//	503 canceled           the client went away before the answer (for a
//	                       write the outcome is unknown)
//	504 unknown_outcome    the write may or may not have been applied: do not
//	                       retry blindly, read to learn (Fm-Write-Token)
//	504 timeout            no answer within Config.RequestTimeout; for a write
//	                       the outcome is unknown, as for unknown_outcome
//	412 condition_failed   If-Match / If-None-Match did not hold: not applied,
//	                       not to be retried as is; Fm-Version is the key's
//	                       current version (absent: no value)
//	413 too_large          key, value or body over its bound
//	400 bad_header         a malformed or repeated Fm-* header (named)
//	400 bad_path           an empty or badly escaped key
//	400 bad_body           the body could not be read
//	400 bad_request        the partition refused the request as malformed
//	404 not_found          GET of a missing key
//	404 unknown_partition  the key's partition is not hosted by this agent
//	404 no_route           a path outside /v1/kv/
//	405 method_not_allowed not GET, PUT or DELETE (Allow lists them)
//	500 internal           anything else, with the error text; for a write
//	                       the outcome is unknown
//
// Retry-After is in whole seconds, at least 1 (Config.RetryAfter rounded up).
// What a reply means follows node.ClassifyReply, the rule every client of a
// node applies; the errors the partition package documents as "not applied"
// are mapped to their retryable code first.
//
// # The redirect contract
//
// A 421 carries Fm-Partition, Fm-Epoch and Fm-Write-Region (absent when the
// replica does not know the write region) of the replica's current
// knowledge: exactly the (partition, epoch, writeRegion) of the routing
// SDK's Redirect interface (routing.Redirect.RedirectTo, satisfied by
// partition.RedirectError), so a client turns the response into a
// routing.RedirectError and hands it to the router, which moves its cache
// at once if the epoch is not older than the cached one and retries at the
// write region. The request was not applied. Over HTTP/2 too the 421
// reaches the client as is (Go's HTTP/2 transport does not retry a 421 on
// another connection; RFC 9110 lets a client do so, which would only ask
// the same agent again).
//
// # Bounds and timeouts
//
// Requests in flight are bounded (Config.MaxInFlight; memory for bodies is
// at most MaxInFlight × MaxOpBytes); each backend call by
// Config.RequestTimeout (default above the partition's commit timeout, so
// a stuck commit reports unknown_outcome first). NewServer sets
// ReadHeaderTimeout, ReadTimeout, WriteTimeout (keep it above
// RequestTimeout), IdleTimeout and MaxHeaderBytes.
//
// # Metrics
//
// With Config.Registerer: fmnode_dataapi_requests_total{method,class},
// fmnode_dataapi_request_duration_seconds{method},
// fmnode_dataapi_errors_total{code}, fmnode_dataapi_redirects_total and
// fmnode_dataapi_in_flight_requests.
package dataapi
