package proctest

import "sync"

// ring keeps the last max bytes written to it, and counts what it
// dropped, so that a failure message shows the end of a long log.
type ring struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	dropped int64
}

func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(p)
	if len(p) >= r.max {
		r.dropped += int64(len(r.buf) + len(p) - r.max)
		r.buf = append(r.buf[:0], p[len(p)-r.max:]...)
		return n, nil
	}
	if over := len(r.buf) + len(p) - r.max; over > 0 {
		r.dropped += int64(over)
		r.buf = append(r.buf[:0], r.buf[over:]...)
	}
	r.buf = append(r.buf, p...)
	return n, nil
}

// String is the kept bytes.
func (r *ring) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return string(r.buf)
}

// tail is the kept bytes and how many were dropped before them.
func (r *ring) tail() (string, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return string(r.buf), r.dropped
}
