package txtdns

import (
	"errors"
	"fmt"
)

// Sentinel errors. They are wrapped with context; test with errors.Is.
var (
	// ErrInvalidConfig: a configuration field is invalid; the message names it.
	ErrInvalidConfig = errors.New("txtdns: invalid config")
	// ErrMalformed: a TXT record, a name or a route does not follow the format.
	ErrMalformed = errors.New("txtdns: malformed record")
	// ErrTooLarge: a record or one of its strings exceeds its size bound.
	ErrTooLarge = errors.New("txtdns: record too large")
	// ErrUnsupportedVersion: a record carries a format version this code
	// does not read.
	ErrUnsupportedVersion = errors.New("txtdns: unsupported record format version")
	// ErrInvalidRoute: a Route or RegionInfo handed to the publisher is invalid.
	ErrInvalidRoute = errors.New("txtdns: invalid route")
	// ErrFull: a bound on published partitions or regions is reached.
	ErrFull = errors.New("txtdns: publisher full")
	// ErrNXDomain: the name does not exist in the zone (DNS NXDOMAIN).
	// Returned unwrapped by Publisher.LookupTXT so the hot path allocates nothing.
	ErrNXDomain = errors.New("txtdns: no such name")
	// ErrRefused: the name is outside the zone (DNS REFUSED).
	ErrRefused = errors.New("txtdns: refused, name outside zone")
	// ErrFeedClosed: ChanFeed.Next after Close (and the queue drained).
	ErrFeedClosed = errors.New("txtdns: feed closed")
	// ErrNotListening: Serve was called before Listen.
	ErrNotListening = errors.New("txtdns: server not listening")
)

// RecordError describes why a record did not decode or encode: the key
// (field) at fault and the reason. It wraps one of ErrMalformed, ErrTooLarge
// or ErrUnsupportedVersion.
type RecordError struct {
	Key    string
	Reason string
	Err    error
}

func (e *RecordError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("%v: %s", e.Err, e.Reason)
	}
	return fmt.Sprintf("%v: key %q: %s", e.Err, e.Key, e.Reason)
}

// Unwrap returns the sentinel.
func (e *RecordError) Unwrap() error { return e.Err }

func malformed(key, format string, args ...any) error {
	return &RecordError{Key: key, Reason: fmt.Sprintf(format, args...), Err: ErrMalformed}
}

func tooLarge(key, format string, args ...any) error {
	return &RecordError{Key: key, Reason: fmt.Sprintf(format, args...), Err: ErrTooLarge}
}

func configErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}
