package clusterspec

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Duration is a time.Duration that JSON spells as a Go duration string
// ("500ms", "1m0s"), so that an operator reads and writes the spec
// without counting nanoseconds. Encode writes time.Duration.String,
// which parses back to the same value.
type Duration time.Duration

// maxDurationText bounds a duration string: no valid duration needs more,
// and the parser should never see an unbounded one.
const maxDurationText = 32

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string, and nothing else: a bare number
// would be nanoseconds, which nobody means.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New(`a duration is a string such as "500ms" or "45s"`)
	}
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// parseDuration parses a Go duration string, bounded.
func parseDuration(s string) (time.Duration, error) {
	if len(s) > maxDurationText {
		return 0, fmt.Errorf("duration %s longer than %d characters", show(s), maxDurationText)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s is not a duration such as \"500ms\" or \"45s\"", show(s))
	}
	return v, nil
}
