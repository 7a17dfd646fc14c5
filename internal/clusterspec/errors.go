package clusterspec

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// ErrInvalid: a spec is malformed or fails validation. Every error of
// Validate, Encode, Decode, Set and Apply that is about the spec matches
// it with errors.Is.
var ErrInvalid = errors.New("invalid cluster spec")

// FieldError is one problem of a spec, naming the field by its JSON path
// (regions[1], profile.lease_duration, nodes[2].api_addr), which is
// also its key for Get and Set where it has one.
type FieldError struct {
	Field   string
	Problem string
	// Err is an underlying cause (failover's validation of the timing
	// profile, the JSON decoder), or nil.
	Err error
}

func (e *FieldError) Error() string {
	return "clusterspec: " + e.Field + ": " + e.Problem
}

// Unwrap matches ErrInvalid, and the cause if there is one.
func (e *FieldError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalid, e.Err}
	}
	return []error{ErrInvalid}
}

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// problems collects every problem of a spec, so that an operator fixes
// them in one pass rather than one per attempt.
type problems []error

func (p *problems) add(field, format string, args ...any) {
	*p = append(*p, fieldErr(field, format, args...))
}

func (p problems) err() error { return errors.Join(p...) }

// show quotes a value for an error message, bounded: a hostile spec must
// not make an error message as large as the spec.
func show(s string) string {
	const max = 64
	if len(s) > max {
		s = s[:max]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		return strconv.Quote(s) + "..."
	}
	return strconv.Quote(s)
}

// clip bounds a message built from outside bytes (the JSON decoder quotes
// an unknown field's name whole).
func clip(s string) string {
	const max = 256
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
}
