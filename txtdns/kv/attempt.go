package kv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fmnode/fmnode/txtdns/routing"
)

// maxDrain bounds what is read of a body nobody needs, so the connection
// can be reused; a longer one is closed instead.
const maxDrain = 64 << 10

// op is one Put, Get or Delete across its attempts. Attempts of one op
// never overlap (routing runs them one by one).
type op struct {
	method string
	key    string
	path   string // the escaped request path
	value  []byte
	cons   routing.Consistency
	// cas: a compare-and-set on the key's version expect (zero: the key
	// holds no value).
	cas    bool
	expect routing.SessionToken
	// The answer of a Get's successful attempt.
	item  Item
	found bool
}

func (o *op) write() bool { return o.method != http.MethodGet }

func (o *op) name() string {
	switch {
	case o.cas && o.method == http.MethodDelete:
		return "compare-and-delete"
	case o.cas:
		return "compare-and-set"
	case o.method == http.MethodDelete:
		return "delete"
	}
	return "put"
}

// attempt sends o to t once and maps the answer to what routing acts on:
// nil (with the session token to merge), a routing.RedirectError, a
// StaleRead (*APIError), a routing.Permanent error, or a retryable one.
func (c *Client) attempt(ctx context.Context, o *op, t routing.Target) (routing.SessionToken, error) {
	var zero routing.SessionToken
	if err := ctx.Err(); err != nil {
		return zero, err // not sent
	}
	// An endpoint is host:port; anything that would change the URL's
	// authority or path is a bad record of one region: try the next.
	if strings.ContainsAny(t.Endpoint, "/@?#\\") {
		return zero, fmt.Errorf("%w: endpoint %.64q of region %s is not host:port", ErrInvalidRequest, t.Endpoint, t.Region)
	}
	var tr *sendTrace
	if o.write() {
		tr = &sendTrace{}
		ctx = httptrace.WithClientTrace(ctx, tr.clientTrace())
	}
	req, err := http.NewRequestWithContext(ctx, o.method, c.scheme+t.Endpoint+o.path, nil)
	if err != nil {
		return zero, fmt.Errorf("kv: request to %.64q in %s: %w", t.Endpoint, t.Region, err)
	}
	hd := req.Header
	if (o.write() || o.cons == routing.ConsistencyStrong) && t.Epoch != 0 {
		hd[HeaderEpoch] = []string{strconv.FormatUint(t.Epoch, 10)}
	}
	if o.write() && t.Poll && t.PollWait > 0 {
		// A poll: the live replica may hold it until the route moves.
		hd[HeaderPollWait] = []string{strconv.FormatInt(max(1, t.PollWait.Milliseconds()), 10)}
	}
	if o.cas {
		if o.expect.IsZero() {
			hd[HeaderIfNoneMatch] = []string{"*"}
		} else {
			hd[HeaderIfMatch] = []string{o.expect.String()}
		}
	}
	if !o.write() {
		hd[HeaderConsistency] = []string{consistencyHeader(o.cons)}
		if !t.Session.IsZero() {
			hd[HeaderSession] = []string{t.Session.String()}
		}
	}
	if o.method == http.MethodPut {
		req.Body, req.ContentLength = http.NoBody, int64(len(o.value))
		if len(o.value) > 0 {
			vb := &valueBody{b: o.value}
			defer vb.finish()
			req.Body = vb
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		err = fmt.Errorf("kv: %s %s in %s: %w", o.method, t.Endpoint, t.Region, err)
		if !o.write() || tr.notSent(err) {
			return zero, err
		}
		return zero, routing.Permanent(c.unknown(o, t, nil, err))
	}
	defer drainClose(resp.Body)
	return c.response(ctx, o, t, resp)
}

// response maps an agent's answer.
func (c *Client) response(ctx context.Context, o *op, t routing.Target, resp *http.Response) (routing.SessionToken, error) {
	var zero routing.SessionToken
	h := resp.Header
	if o.write() && resp.StatusCode/100 == 2 { // the API says 204; any 2xx is a success
		return c.written(o, t, h)
	}
	if err := checkPartition(h, o, t, false); err != nil {
		return zero, err
	}
	if !o.write() && resp.StatusCode == http.StatusOK {
		return c.readValue(o, t, resp)
	}
	ae := c.apiError(t, resp)
	if !o.write() && ae.Status == http.StatusNotFound && ae.Code == CodeNotFound {
		tok, err := headerToken(h, HeaderSession)
		if err != nil {
			return zero, err
		}
		o.item, o.found = Item{}, false
		return tok, nil
	}
	return zero, c.failure(ctx, o, t, h, ae)
}

// written is a write's 204. The write was applied: whatever is wrong with
// the headers, it must not be retried, so a malformed token is logged and
// dropped (a Session then cannot promise to read this write) and only a
// partition mismatch, a misconfiguration, is returned.
func (c *Client) written(o *op, t routing.Target, h http.Header) (routing.SessionToken, error) {
	if err := checkPartition(h, o, t, true); err != nil {
		if errors.Is(err, ErrPartitionMismatch) {
			return routing.SessionToken{}, err
		}
		c.log.Warn("kv: write applied, response malformed", "key", o.key, "endpoint", t.Endpoint, "err", err)
	}
	tok, err := headerToken(h, HeaderSession)
	if err != nil {
		c.log.Warn("kv: write applied, session token dropped", "key", o.key, "endpoint", t.Endpoint, "err", err)
	}
	return tok, nil
}

// checkPartition compares Fm-Partition with the partition routing chose.
// A mismatch is permanent: every agent would map the key alike.
func checkPartition(h http.Header, o *op, t routing.Target, applied bool) error {
	p, ok, err := headerPartition(h)
	if err != nil || !ok || p == t.Partition {
		return err
	}
	note := ""
	if applied {
		note = "; the write was applied there"
	}
	return routing.Permanent(fmt.Errorf("%w: %s maps %.64q to partition %d, the client to %d (compare their partition counts)%s",
		ErrPartitionMismatch, t.Endpoint, o.key, p, t.Partition, note))
}

// readValue is a Get's 200: the value, read within MaxValueBytes.
func (c *Client) readValue(o *op, t routing.Target, resp *http.Response) (routing.SessionToken, error) {
	var zero routing.SessionToken
	version, err := headerToken(resp.Header, HeaderVersion)
	if err != nil {
		return zero, err
	}
	tok, err := headerToken(resp.Header, HeaderSession)
	if err != nil {
		return zero, err
	}
	tooLarge := func(n int64) error { // every replica holds the same value: permanent
		return routing.Permanent(fmt.Errorf("%w: %s: value of %d bytes or more, MaxValueBytes %d",
			ErrMalformedResponse, t.Endpoint, n, c.maxValue))
	}
	var value []byte
	if cl := resp.ContentLength; cl >= 0 {
		if cl > int64(c.maxValue) {
			return zero, tooLarge(cl)
		}
		value = make([]byte, cl)
		_, err = io.ReadFull(resp.Body, value)
	} else {
		value, err = io.ReadAll(io.LimitReader(resp.Body, int64(c.maxValue)+1))
		if err == nil && len(value) > c.maxValue {
			return zero, tooLarge(int64(len(value)))
		}
	}
	if err != nil { // the connection broke: another attempt may do
		return zero, fmt.Errorf("kv: read the value from %s in %s: %w", t.Endpoint, t.Region, err)
	}
	o.item, o.found = Item{Value: value, Version: version}, true
	return tok, nil
}

// apiError reads an error response: its body (bounded; what arrived of a
// broken one) and Retry-After.
func (c *Client) apiError(t routing.Target, resp *http.Response) *APIError {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	code, msg := decodeErrorBody(b)
	ae := &APIError{Status: resp.StatusCode, Code: code, Message: msg, Region: t.Region, Endpoint: t.Endpoint}
	if s, ok, err := single(resp.Header, "Retry-After"); err == nil && ok {
		if d, err := parseRetryAfter(s, c.clock.Now()); err == nil {
			ae.RetryAfter = d
		}
	}
	return ae
}

// failure maps an error response.
func (c *Client) failure(ctx context.Context, o *op, t routing.Target, h http.Header, ae *APIError) error {
	st := ae.Status
	switch {
	case st == http.StatusMisdirectedRequest:
		return redirect(t, h, ae)
	case st == http.StatusTooManyRequests:
		return c.backOff(ctx, ae)
	case ae.StaleRead():
		return ae // another region may serve it now: no wait
	case st == http.StatusServiceUnavailable && notApplied(ae.Code):
		return c.backOff(ctx, ae)
	case st == http.StatusNotFound && ae.Code == CodeUnknownPartition:
		return ae // this agent does not host the partition; another may
	case st == http.StatusPreconditionFailed && o.cas && ae.Code == CodeConditionFailed:
		cf := &ConditionFailedError{Key: o.key, Partition: t.Partition, Expected: o.expect, APIError: *ae}
		if v, err := headerToken(h, HeaderVersion); err == nil && !v.IsZero() {
			cf.Found, cf.Version = true, v
		}
		return routing.Permanent(cf)
	case st == http.StatusBadRequest || st == http.StatusRequestEntityTooLarge:
		return routing.Permanent(&RequestError{APIError: *ae})
	case st >= 500 && o.write():
		// 504 unknown_outcome or timeout, 503 canceled, 500, or a 5xx
		// from something in between: the write may have been applied.
		return routing.Permanent(c.unknown(o, t, h, ae))
	case st >= 500:
		return c.backOff(ctx, ae) // a read: retrying is safe
	}
	return routing.Permanent(ae) // the API refused the request: not applied
}

// notApplied reports whether a 503's code says the request was refused
// before it was applied (so a write may be retried).
func notApplied(code string) bool {
	switch code {
	case CodeBackpressure, CodeLeaseExpired, CodeNotReady, CodeStalenessBound, CodeUnavailable, CodeOverloaded:
		return true
	}
	return false
}

// redirect turns a 421 into the routing.RedirectError routing follows. A
// 421 without a usable epoch cannot move the route: it is a failure of the
// region (retried elsewhere).
func redirect(t routing.Target, h http.Header, ae *APIError) error {
	epoch, ok, err := headerEpoch(h)
	if err == nil && !ok {
		err = fmt.Errorf("%w: 421 without %s", ErrMalformedResponse, HeaderEpoch)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ae, err)
	}
	region, err := headerRegion(h)
	if err != nil {
		return fmt.Errorf("%w: %w", ae, err)
	}
	rd := &routing.RedirectError{Partition: t.Partition, Epoch: epoch, WriteRegion: region, Reason: headerReason(h)}
	return fmt.Errorf("kv: %s in %s: %w", t.Endpoint, t.Region, rd)
}

// backOff waits out ae's Retry-After, at most MaxRetryAfter and within
// ctx, then returns ae for routing to retry. Routing has no notion of a
// server's Retry-After (it backs off on its own schedule), so without the
// wait a retry could come sooner than the agent asked.
func (c *Client) backOff(ctx context.Context, ae *APIError) error {
	if d := min(ae.RetryAfter, c.maxRetryAfter); d > 0 {
		if err := c.clock.Sleep(ctx, d); err != nil {
			return fmt.Errorf("%w (waiting out Retry-After: %w)", ae, err)
		}
	}
	return ae
}

// unknown builds the UnknownOutcomeError of a write, with what the
// headers tell (malformed ones tell nothing).
func (c *Client) unknown(o *op, t routing.Target, h http.Header, cause error) *UnknownOutcomeError {
	e := &UnknownOutcomeError{Op: o.name(), Key: o.key, Partition: t.Partition, Region: t.Region, Endpoint: t.Endpoint, Err: cause}
	if h != nil {
		e.WriteToken, _ = headerToken(h, HeaderWriteToken)
		e.Epoch, _, _ = headerEpoch(h)
		e.WriteRegion, _ = headerRegion(h)
	}
	return e
}

// sendTrace records how far a write's request got, so a transport error
// can be told apart: before the request left (a retry is safe) or after
// (the agent may have applied it).
type sendTrace struct {
	gotConn, wroteHeaders, tlsFailed atomic.Bool
}

func (s *sendTrace) clientTrace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GotConn:      func(httptrace.GotConnInfo) { s.gotConn.Store(true) },
		WroteHeaders: func() { s.wroteHeaders.Store(true) },
		TLSHandshakeDone: func(_ tls.ConnectionState, err error) {
			if err != nil {
				s.tlsFailed.Store(true)
			}
		},
	}
}

// notSent reports whether a write that failed with err provably never
// reached an agent: no connection (a dial or TLS failure), or a
// connection but no headers written. Anything else, including a transport
// that reports no trace events, counts as sent.
func (s *sendTrace) notSent(err error) bool {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return true
	}
	return s.tlsFailed.Load() || s.gotConn.Load() && !s.wroteHeaders.Load()
}

// valueBody is a PUT's body over the caller's value. net/http may read
// or close a request body after RoundTrip returned, but Put promises not
// to touch the value once it returns: finish cuts the body off under its
// lock, so no read reaches the value afterwards.
type valueBody struct {
	mu  sync.Mutex
	b   []byte
	off int
	cut bool
}

var errBodyCut = errors.New("kv: request body read after the attempt ended")

func (v *valueBody) Read(p []byte) (int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.cut {
		return 0, errBodyCut
	}
	if v.off >= len(v.b) {
		return 0, io.EOF
	}
	n := copy(p, v.b[v.off:])
	v.off += n
	return n, nil
}

func (v *valueBody) Close() error { return nil }

func (v *valueBody) finish() {
	v.mu.Lock()
	v.cut, v.b = true, nil
	v.mu.Unlock()
}

// drainClose reads what is left of a body (bounded), so the connection
// goes back to the pool, and closes it.
func drainClose(b io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(b, maxDrain))
	_ = b.Close()
}
