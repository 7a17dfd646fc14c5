package transport

import (
	"testing"
	"time"
)

// testWait bounds every wait of these tests on a gated store or a channel:
// a test whose acceptor never reaches the gate fails with what it waited
// for, not by running into the package timeout.
const testWait = 10 * time.Second

// recvWithin receives from ch or fails the test naming what it waited for.
func recvWithin[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testWait):
		t.Fatalf("waited %v for %s", testWait, what)
	}
	var zero T
	return zero
}

// sendWithin sends v on ch or fails the test naming what it tried.
func sendWithin[T any](t *testing.T, ch chan<- T, v T, what string) {
	t.Helper()
	select {
	case ch <- v:
	case <-time.After(testWait):
		t.Fatalf("waited %v to %s: nothing took it", testWait, what)
	}
}
