package caspaxos

import (
	"errors"
	"fmt"
	"slices"
)

// ErrWatchOverflow: a subscriber fell further behind than its bound; it must
// subscribe again from the last version it processed.
var ErrWatchOverflow = errors.New("caspaxos: watch subscriber overflowed")

// WatchEvent is one committed value of a register.
type WatchEvent struct {
	Key   string
	Value Value
	// Gap reports that versions between the subscriber's previous event
	// for this key (or its resume point) and this one were committed but
	// not observed here (or were compacted out of the history). The value
	// is still the newest; consumers that need every step re-read state.
	Gap bool
}

// SubID identifies a watch subscription.
type SubID uint64

// Watch fans committed register values out to subscribers in version order,
// keeping a bounded history per key so a subscriber can resume from a
// version. It is a pure data structure: drivers feed it every committed
// value they learn (proposal results, reads, values learned from peers) and
// pull events with Drain. Older or repeated versions are dropped, so feeding
// it from several sources is safe.
type Watch struct {
	maxHistory int
	maxPending int
	keys       map[string]*watchedKey
	subs       map[SubID]*subscriber
	nextID     SubID
}

type watchedKey struct {
	history []Value // ascending versions, at most maxHistory
}

type subscriber struct {
	key        string // "" = every key
	pending    []WatchEvent
	lastSeen   map[string]uint64
	overflowed bool
}

// NewWatch bounds the history kept per key and the events queued per subscriber.
func NewWatch(maxHistoryPerKey, maxPendingPerSub int) (*Watch, error) {
	if maxHistoryPerKey < 1 {
		return nil, configErr("maxHistoryPerKey", "must be at least 1, got %d", maxHistoryPerKey)
	}
	if maxPendingPerSub < 1 {
		return nil, configErr("maxPendingPerSub", "must be at least 1, got %d", maxPendingPerSub)
	}
	return &Watch{
		maxHistory: maxHistoryPerKey,
		maxPending: maxPendingPerSub,
		keys:       make(map[string]*watchedKey),
		subs:       make(map[SubID]*subscriber),
	}, nil
}

// Latest returns the newest observed value of key.
func (w *Watch) Latest(key string) (Value, bool) {
	k := w.keys[key]
	if k == nil || len(k.history) == 0 {
		return Value{}, false
	}
	return k.history[len(k.history)-1], true
}

// Observe records a committed value. It returns false if the value is not
// newer than what was already observed for key.
func (w *Watch) Observe(key string, v Value) bool {
	k := w.keys[key]
	if k == nil {
		k = &watchedKey{}
		w.keys[key] = k
	}
	if n := len(k.history); n > 0 && v.Version <= k.history[n-1].Version {
		return false
	}
	if len(k.history) == w.maxHistory {
		copy(k.history, k.history[1:])
		k.history = k.history[:len(k.history)-1]
	}
	k.history = append(k.history, v)
	for _, s := range w.subs {
		if s.key != "" && s.key != key {
			continue
		}
		s.push(w.maxPending, key, v)
	}
	return true
}

func (s *subscriber) push(max int, key string, v Value) {
	if s.overflowed {
		return
	}
	if len(s.pending) >= max {
		s.overflowed = true
		s.pending = nil
		return
	}
	last, seen := s.lastSeen[key]
	s.pending = append(s.pending, WatchEvent{Key: key, Value: v, Gap: seen && v.Version != last+1})
	s.lastSeen[key] = v.Version
}

// Subscribe registers a subscriber for key ("" for every key) that has
// processed versions up to fromVersion (0: from the start). Retained history
// newer than fromVersion is queued at once; a first event flagged Gap means
// part of the requested range is no longer retained.
func (w *Watch) Subscribe(key string, fromVersion uint64) SubID {
	w.nextID++
	s := &subscriber{key: key, lastSeen: make(map[string]uint64)}
	w.subs[w.nextID] = s
	backlog := func(k string, wk *watchedKey) {
		s.lastSeen[k] = fromVersion
		for _, v := range wk.history {
			if v.Version > fromVersion {
				s.push(w.maxPending, k, v)
			}
		}
		if fromVersion == 0 {
			// A fresh subscriber has seen nothing, so no gap is reported
			// for its first value of a key.
			for i := range s.pending {
				if s.pending[i].Key == k {
					s.pending[i].Gap = false
					break
				}
			}
		}
	}
	if key != "" {
		if wk := w.keys[key]; wk != nil {
			backlog(key, wk)
		}
		return w.nextID
	}
	for _, k := range sortedKeys(w.keys) {
		backlog(k, w.keys[k])
	}
	return w.nextID
}

// Unsubscribe removes a subscriber.
func (w *Watch) Unsubscribe(id SubID) { delete(w.subs, id) }

// Drain returns the events queued for id.
func (w *Watch) Drain(id SubID) ([]WatchEvent, error) {
	s := w.subs[id]
	if s == nil {
		return nil, fmt.Errorf("caspaxos: unknown watch subscription %d", id)
	}
	if s.overflowed {
		delete(w.subs, id)
		return nil, fmt.Errorf("%w: more than %d events queued", ErrWatchOverflow, w.maxPending)
	}
	ev := s.pending
	s.pending = nil
	return ev, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
