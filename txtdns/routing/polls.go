package routing

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/fmnode/fmnode/txtdns"
)

// pollBoard shares a pending failover's polls among the concurrent
// operations of one partition in a Client (Exec). While one operation's
// poll of a live region is in flight, the others with the same target
// (partition, region, epoch) wait for its answer instead of sending their
// own, and take it if it is a redirect (it answers them alike). And while
// two or more operations of the partition are polling, one that wants to
// poll within gap (3/4 RedirectPoll, a lone operation's own spacing) of
// the last poll waits for the next one rather than sending one more. So a
// partition's polls stay at about one per gap however many operations
// wait on it, every waiter learns of a commit when the poll that finds it
// returns, and a lone operation polls as it would alone.
type pollBoard struct {
	gap time.Duration
	mu  sync.Mutex
	m   map[uint32]*pollPart
}

// pollPart is one partition's polling operations and latest poll.
type pollPart struct {
	ops int       // operations of the partition polling (enter/leave)
	cur *pollSlot // the latest poll, while its gap or flight lasts
}

// pollSlot is one poll.
type pollSlot struct {
	region string
	epoch  uint64
	sent   time.Time
	// done is closed once ans is set (nil once answered).
	done chan struct{}
	ans  error
}

func newPollBoard(gap time.Duration) *pollBoard {
	return &pollBoard{gap: gap, m: make(map[uint32]*pollPart)}
}

// enter counts an operation of partition p that polls; it must leave.
func (b *pollBoard) enter(p uint32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	pp := b.m[p]
	if pp == nil {
		pp = &pollPart{}
		b.m[p] = pp
	}
	pp.ops++
}

// leave ends an enter.
func (b *pollBoard) leave(p uint32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if pp := b.m[p]; pp != nil {
		pp.ops--
		if pp.ops <= 0 {
			delete(b.m, p) // a poll in flight still answers its waiters
		}
	}
}

// join returns the slot of the poll the caller (entered for t.Partition)
// must now send, then report with answered; or nil and another
// operation's redirect answering poll t. An error of ctx ends the wait
// (returned as the answer).
func (b *pollBoard) join(ctx context.Context, clock txtdns.Clock, t Target) (*pollSlot, error) {
	for {
		now := clock.Now()
		b.mu.Lock()
		pp := b.m[t.Partition]
		if pp == nil { // not entered: poll alone
			b.mu.Unlock()
			return &pollSlot{region: t.Region, epoch: t.Epoch, sent: now, done: make(chan struct{})}, nil
		}
		s := pp.cur
		same := s != nil && s.region == t.Region && s.epoch == t.Epoch
		switch {
		case same && s.done != nil:
			ch := s.done
			b.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			var rd Redirect
			if errors.As(s.ans, &rd) {
				return nil, s.ans
			}
			continue // no answer to share: maybe lead
		case same && pp.ops > 1 && now.Sub(s.sent) < b.gap:
			d := s.sent.Add(b.gap).Sub(now)
			b.mu.Unlock()
			if err := clock.Sleep(ctx, d); err != nil {
				return nil, err
			}
			continue
		}
		s = &pollSlot{region: t.Region, epoch: t.Epoch, sent: now, done: make(chan struct{})}
		pp.cur = s
		b.mu.Unlock()
		return s, nil
	}
}

// answered publishes the answer of the poll s the caller sent. Only a
// redirect that moved nothing ("not yet") keeps the slot (its gap);
// after any other answer the next operation polls at once.
func (b *pollBoard) answered(t Target, s *pollSlot, ans error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s.ans = ans
	close(s.done)
	s.done = nil
	var rd Redirect
	keep := errors.As(ans, &rd)
	if keep {
		_, epoch, _ := rd.RedirectTo()
		keep = epoch <= t.Epoch
	}
	if pp := b.m[t.Partition]; pp != nil && pp.cur == s && !keep {
		pp.cur = nil
	}
}
