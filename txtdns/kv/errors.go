package kv

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/fmnode/fmnode/txtdns/routing"
)

// Sentinel errors. They are wrapped with context; test with errors.Is.
var (
	// ErrInvalidConfig: a Config field is invalid; the message names it.
	ErrInvalidConfig = errors.New("kv: invalid config")
	// ErrInvalidRequest: the client refused the call before sending it
	// (an empty key, a value over MaxValueBytes, an unknown consistency),
	// or an attempt (a region's endpoint record is not host:port; that
	// one is retried at the next region).
	ErrInvalidRequest = errors.New("kv: invalid request")
	// ErrUnknownOutcome: a write may or may not have been applied; see
	// UnknownOutcomeError.
	ErrUnknownOutcome = errors.New("kv: write outcome unknown")
	// ErrMalformedResponse: a response did not decode (an Fm-* header, a
	// value over MaxValueBytes).
	ErrMalformedResponse = errors.New("kv: malformed response")
	// ErrPartitionMismatch: the agent mapped the key to another partition
	// than the client did: their partition counts (or partitioners)
	// disagree, so routing cannot be right. Not retried.
	ErrPartitionMismatch = errors.New("kv: agent and client disagree on the key's partition")
	// ErrConditionFailed: a compare-and-set's expected version was not the
	// key's; nothing was written. See ConditionFailedError.
	ErrConditionFailed = errors.New("kv: condition failed")
)

// Error codes of the data API's JSON error body: stable, so callers may
// branch on APIError.Code (see internal/dataapi's package doc).
const (
	CodeRedirect         = "redirect"
	CodeBackpressure     = "backpressure"
	CodeLeaseExpired     = "lease_expired"
	CodeNotReady         = "not_ready"
	CodeStale            = "stale"
	CodeStalenessBound   = "staleness_bound"
	CodeUnavailable      = "unavailable"
	CodeOverloaded       = "overloaded"
	CodeUnknownOutcome   = "unknown_outcome"
	CodeTimeout          = "timeout"
	CodeCanceled         = "canceled"
	CodeTooLarge         = "too_large"
	CodeBadHeader        = "bad_header"
	CodeBadPath          = "bad_path"
	CodeBadBody          = "bad_body"
	CodeBadRequest       = "bad_request"
	CodeNotFound         = "not_found"
	CodeUnknownPartition = "unknown_partition"
	CodeNoRoute          = "no_route"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeInternal         = "internal"
	CodeConditionFailed  = "condition_failed"
)

// APIError is an error response of an agent. The client retries the
// retryable ones itself (429, most 503s, a 404 unknown_partition, a read's
// 5xx); a caller sees one when the attempts ran out (inside a
// *routing.ExhaustedError: use errors.As) or when retrying cannot help.
type APIError struct {
	Status int
	// Code is the error body's stable code ("" if the body had none, as
	// from a proxy).
	Code    string
	Message string
	// RetryAfter is the server's Retry-After (0 if none), before the
	// client's MaxRetryAfter bound.
	RetryAfter time.Duration
	// Region and Endpoint are where the request went.
	Region   string
	Endpoint string
}

func (e *APIError) Error() string {
	code := e.Code
	if code == "" {
		code = "no code"
	}
	return fmt.Sprintf("kv: %s in %s: %d %s (%s): %s", e.Endpoint, e.Region, e.Status, http.StatusText(e.Status), code, e.Message)
}

// StaleRead implements routing.StaleRead: a 503 "stale" is a replica that
// cannot serve the read at the consistency asked, so routing tries another
// region (ending with the write region) at once and without counting a
// breaker failure.
func (e *APIError) StaleRead() bool {
	return e.Status == http.StatusServiceUnavailable && e.Code == CodeStale
}

// RequestError is a request the agent refused as malformed or too large
// (400, 413). It was not applied, and sending it again cannot help, so it
// is never retried. errors.As finds its APIError too.
type RequestError struct {
	APIError
}

func (e *RequestError) Error() string { return e.APIError.Error() }

// Unwrap returns the APIError.
func (e *RequestError) Unwrap() error { return &e.APIError }

// UnknownOutcomeError is a write (Put or Delete) that may or may not have
// been applied: a 504 unknown_outcome or timeout, a 503 canceled, a 500,
// or a connection lost (or a context that ended) after the request was
// sent. The client never retries it: a blind retry could apply the write
// twice across a failover, or resurrect a value another writer replaced
// in between. The caller decides: read the key to learn (a strong
// GetItem whose Version equals WriteToken proves the write survived),
// or retry if the write is idempotent for the application.
type UnknownOutcomeError struct {
	Op        string // "put" or "delete"
	Key       string
	Partition uint32
	Region    string
	Endpoint  string
	// WriteToken is the (epoch, lsn) the write was assigned
	// (Fm-Write-Token), zero if the agent did not say. It is not a
	// session token and is not merged into a Session.
	WriteToken routing.SessionToken
	// Epoch and WriteRegion are the agent's, when it said (0 and "" else).
	Epoch       uint64
	WriteRegion string
	// Err is the cause: an *APIError, or the transport's or the
	// context's error.
	Err error
}

func (e *UnknownOutcomeError) Error() string {
	s := fmt.Sprintf("kv: %s %.64q (partition %d) at %s in %s: outcome unknown", e.Op, e.Key, e.Partition, e.Endpoint, e.Region)
	if !e.WriteToken.IsZero() {
		s += " (write token " + e.WriteToken.String() + ")"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *UnknownOutcomeError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnknownOutcome) hold.
func (e *UnknownOutcomeError) Is(target error) bool { return target == ErrUnknownOutcome }

func configErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

// ConditionFailedError is a CompareAndSet or CompareAndDelete refused
// because the key's version was not the expected one (412
// condition_failed): certainly not applied, and not retried. Found and
// Version are the key's state the write region compared against, committed
// (Version is zero when the key holds no value), so the caller can retry
// with them without another read.
type ConditionFailedError struct {
	Key       string
	Partition uint32
	Expected  routing.SessionToken // zero: "absent"
	Found     bool
	Version   routing.SessionToken
	APIError  APIError
}

func (e *ConditionFailedError) Error() string {
	exp, cur := "absent", "absent"
	if !e.Expected.IsZero() {
		exp = "version " + e.Expected.String()
	}
	if e.Found {
		cur = "version " + e.Version.String()
	}
	return fmt.Sprintf("kv: compare-and-set %.64q (partition %d): expected %s, key is %s", e.Key, e.Partition, exp, cur)
}

// Unwrap returns the APIError.
func (e *ConditionFailedError) Unwrap() error { return &e.APIError }

// Is makes errors.Is(err, ErrConditionFailed) hold.
func (e *ConditionFailedError) Is(target error) bool { return target == ErrConditionFailed }
