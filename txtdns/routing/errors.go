package routing

import (
	"errors"
	"fmt"

	"github.com/fmnode/fmnode/txtdns"
)

// Sentinel errors. They are wrapped with context; test with errors.Is.
var (
	// ErrInvalidConfig is txtdns.ErrInvalidConfig: a configuration field
	// is invalid; the message names it.
	ErrInvalidConfig = txtdns.ErrInvalidConfig
	// ErrUnknownPartition: DNS says the partition does not exist (NXDOMAIN)
	// and nothing is cached for it.
	ErrUnknownPartition = errors.New("routing: unknown partition")
	// ErrNoEndpoint: the region has no endpoint record.
	ErrNoEndpoint = errors.New("routing: region has no endpoint")
	// ErrBadAnswer: a DNS answer did not decode or did not describe the
	// partition or region asked for.
	ErrBadAnswer = errors.New("routing: bad answer")
	// ErrCircuitOpen: the breaker of every candidate region is open.
	ErrCircuitOpen = errors.New("routing: every candidate region's breaker is open")
	// ErrTooManyRedirects: the data plane redirected more than MaxRedirects times.
	ErrTooManyRedirects = errors.New("routing: too many redirects")
	// ErrExhausted: the attempts ran out; see ExhaustedError.
	ErrExhausted = errors.New("routing: attempts exhausted")
	// ErrSessionFull: a Session holds tokens for its maximum of partitions.
	ErrSessionFull = errors.New("routing: session full")
	// ErrServerFailure: the DNS server answered with an error code other
	// than NXDOMAIN (SERVFAIL, REFUSED, ...), or an answer could not be read.
	ErrServerFailure = errors.New("routing: dns server failure")
	// ErrMalformedToken: a session token or session did not decode.
	ErrMalformedToken = errors.New("routing: malformed session token")
)

// ExhaustedError reports an operation that ran out of attempts or
// redirects; Last is the last error seen.
type ExhaustedError struct {
	Partition uint32
	Attempts  int
	Redirects int
	Last      error
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("routing: partition %d: gave up after %d attempts and %d redirects: %v",
		e.Partition, e.Attempts, e.Redirects, e.Last)
}

// Unwrap returns the last error, so errors.Is/As see through it.
func (e *ExhaustedError) Unwrap() error { return e.Last }

// Is makes errors.Is(err, ErrExhausted) hold.
func (e *ExhaustedError) Is(target error) bool { return target == ErrExhausted }

// Redirect is what the data plane returns when a request reached a replica
// that is not the partition's write region, or carried a stale epoch: the
// current epoch and write region. The client finds it with errors.As,
// updates its cache at once (if the epoch is not older than the cached one)
// and retries there. The data plane's typed error satisfies it.
type Redirect interface {
	error
	RedirectTo() (partition uint32, epoch uint64, writeRegion string)
}

// StaleRead is what a replica returns when it cannot serve a read at the
// consistency asked (its lag exceeds the staleness bound, or it has not
// applied the session token yet). The client tries another region,
// ending with the write region, without counting a breaker failure.
type StaleRead interface {
	error
	StaleRead() bool
}

// RedirectError is a concrete Redirect, for tests, tools and data planes
// that have none of their own.
type RedirectError struct {
	Partition   uint32
	Epoch       uint64
	WriteRegion string
	// Reason is free text ("stale epoch", "not write region").
	Reason string
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("redirect: partition %d: %s: write region %s at epoch %d", e.Partition, e.Reason, e.WriteRegion, e.Epoch)
}

// RedirectTo implements Redirect.
func (e *RedirectError) RedirectTo() (uint32, uint64, string) {
	return e.Partition, e.Epoch, e.WriteRegion
}

// StaleReadError is a concrete StaleRead.
type StaleReadError struct {
	Region string
	Reason string
}

func (e *StaleReadError) Error() string {
	return fmt.Sprintf("stale read in %s: %s", e.Region, e.Reason)
}

// StaleRead implements StaleRead.
func (e *StaleReadError) StaleRead() bool { return true }

// PermanentError marks an operation error that retrying cannot fix (a
// constraint violation, a bad request); Do returns it at once.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err so Do does not retry it. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

func configErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}
