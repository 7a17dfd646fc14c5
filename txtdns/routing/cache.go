package routing

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fmnode/fmnode/txtdns"
)

// Entry is the cached route of one partition. The fields a warm lookup
// reads come first, so they share one cache line.
type Entry struct {
	// Expires is when the entry needs a refresh from DNS.
	Expires     time.Time
	WriteRegion string
	Epoch       uint64
	Partition   uint32
	// FromRedirect: the epoch and write region came from a redirect.
	FromRedirect  bool
	ConfigVersion uint64
	// Priority is the failover priority list; shared and read-only. It may
	// be nil for a partition learnt only from a redirect.
	Priority []string
	// Checked is when an answer or redirect about the partition was last
	// processed (accepted or not).
	Checked time.Time
}

// Fresh reports whether the entry has not expired at now.
func (e Entry) Fresh(now time.Time) bool { return now.Before(e.Expires) }

// Outcome is what the cache did with an answer or a redirect.
type Outcome uint8

// Outcomes.
const (
	// Inserted: the partition was not cached.
	Inserted Outcome = iota
	// Updated: the route replaced an older (or equal-epoch) one.
	Updated
	// Refreshed: the route equals the cached one; its expiry moved.
	Refreshed
	// RejectedOlder: the route is older than the cached one (a stale
	// resolver or replica); the cached route stays.
	RejectedOlder
	// RejectedFull: the partition is beyond the cache's partition count.
	RejectedFull
	numOutcomes
)

func (o Outcome) String() string {
	switch o {
	case Inserted:
		return "inserted"
	case Updated:
		return "updated"
	case Refreshed:
		return "refreshed"
	case RejectedOlder:
		return "rejected_older"
	case RejectedFull:
		return "rejected_full"
	default:
		return "unknown"
	}
}

// Accepted reports whether the route is now the cached one.
func (o Outcome) Accepted() bool { return o == Inserted || o == Updated || o == Refreshed }

const (
	pageBits      = 12
	pageSize      = 1 << pageBits
	numWriteLocks = 64
	// MaxPartitions bounds the partition count a Cache (and a Client) serves.
	MaxPartitions = 1 << 26
)

// Cache holds each partition's route and never moves a partition
// backwards: an answer is accepted only if its epoch is at least the
// cached one (and, at the same epoch, its config version too). It is a
// pure data structure: no goroutines, no clock (callers pass now), safe for
// concurrent use.
//
// Layout: a page table over the partition space, pages of 4096 entry
// pointers allocated on first write, each entry immutable (replaced, never
// modified). Get is two atomic loads, lock-free and allocation-free;
// writers serialise on one of 64 striped locks so the monotonic check and
// the store are atomic. Memory is bounded by the partition count.
type Cache struct {
	partitions uint32
	pages      []atomic.Pointer[cachePage]
	locks      [numWriteLocks]paddedMutex
}

type cachePage [pageSize]atomic.Pointer[Entry]

type paddedMutex struct {
	sync.Mutex
	_ [56]byte
}

// NewCache returns an empty cache for partitions 0 .. partitions-1.
func NewCache(partitions uint32) (*Cache, error) {
	if partitions < 1 || partitions > MaxPartitions {
		return nil, configErr("PartitionCount", "%d: must be in [1, %d]", partitions, MaxPartitions)
	}
	return &Cache{partitions: partitions, pages: make([]atomic.Pointer[cachePage], (partitions+pageSize-1)/pageSize)}, nil
}

// Get returns partition p's cached route, fresh or not. The entry is shared
// and read-only.
func (c *Cache) Get(p uint32) (*Entry, bool) {
	if p >= c.partitions {
		return nil, false
	}
	pg := c.pages[p>>pageBits].Load()
	if pg == nil {
		return nil, false
	}
	e := pg[p&(pageSize-1)].Load()
	return e, e != nil
}

// Len returns the number of cached partitions (a linear scan).
func (c *Cache) Len() int {
	n := 0
	for i := range c.pages {
		if pg := c.pages[i].Load(); pg != nil {
			for j := range pg {
				if pg[j].Load() != nil {
					n++
				}
			}
		}
	}
	return n
}

// slot returns partition p's entry pointer, allocating its page; callers
// hold p's write lock.
func (c *Cache) slot(p uint32) *atomic.Pointer[Entry] {
	ptr := &c.pages[p>>pageBits]
	pg := ptr.Load()
	if pg == nil {
		fresh := new(cachePage)
		if ptr.CompareAndSwap(nil, fresh) {
			pg = fresh
		} else {
			pg = ptr.Load()
		}
	}
	return &pg[p&(pageSize-1)]
}

func (c *Cache) lock(p uint32) *paddedMutex { return &c.locks[p%numWriteLocks] }

// Offer proposes a route learnt from DNS, valid until expires.
func (c *Cache) Offer(r txtdns.Route, expires, now time.Time) Outcome {
	if r.Partition >= c.partitions {
		return RejectedFull
	}
	l := c.lock(r.Partition)
	l.Lock()
	defer l.Unlock()
	slot := c.slot(r.Partition)
	next := &Entry{Partition: r.Partition, Epoch: r.Epoch, ConfigVersion: r.ConfigVersion,
		WriteRegion: r.WriteRegion, Priority: r.Priority, Expires: expires, Checked: now}
	cur := slot.Load()
	if cur == nil {
		slot.Store(next)
		return Inserted
	}
	if r.Epoch < cur.Epoch || (r.Epoch == cur.Epoch && r.ConfigVersion < cur.ConfigVersion) {
		// Older than what we know (a stale resolver or cache): keep ours,
		// and trust it for another TTL; a redirect corrects it if needed.
		kept := *cur
		kept.Checked, kept.Expires = now, later(cur.Expires, expires)
		slot.Store(&kept)
		return RejectedOlder
	}
	out := Updated
	if r.Epoch == cur.Epoch && r.ConfigVersion == cur.ConfigVersion && r.WriteRegion == cur.WriteRegion &&
		!cur.FromRedirect && slices.Equal(r.Priority, cur.Priority) {
		out = Refreshed
		next.Priority = cur.Priority
	}
	slot.Store(next)
	return out
}

// Redirect applies a redirect from the data plane: partition p's write
// region is region at epoch. It is accepted if epoch is newer than the
// cached one; the same epoch and region changes nothing (Refreshed); an
// older epoch, or the same epoch naming another region, is rejected.
func (c *Cache) Redirect(p uint32, epoch uint64, region string, expires, now time.Time) Outcome {
	if p >= c.partitions {
		return RejectedFull
	}
	l := c.lock(p)
	l.Lock()
	defer l.Unlock()
	slot := c.slot(p)
	cur := slot.Load()
	if cur == nil {
		slot.Store(&Entry{Partition: p, Epoch: epoch, WriteRegion: region, Expires: expires, Checked: now, FromRedirect: true})
		return Inserted
	}
	next := *cur
	next.Checked = now
	out := RejectedOlder
	switch {
	case epoch > cur.Epoch:
		next.Epoch, next.WriteRegion, next.FromRedirect = epoch, region, true
		next.Expires = later(cur.Expires, expires)
		out = Updated
	case epoch == cur.Epoch && region == cur.WriteRegion:
		out = Refreshed
	}
	slot.Store(&next)
	return out
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
