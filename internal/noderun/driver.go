package noderun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fmnode/fmnode/internal/node"
	"github.com/fmnode/fmnode/internal/nodewire"
	"github.com/fmnode/fmnode/partition"
)

// Driver runs one node (see the package doc).
type Driver struct {
	cfg   Config
	log   *slog.Logger
	n     *node.Node
	inbox chan event
	done  chan struct{}

	mu  sync.Mutex // guards err
	err error

	running atomic.Bool
	stats   Stats

	// Owned by the loop goroutine.
	pending map[partition.ClientRef]chan partition.Reply
	nextRef partition.ClientRef
}

// Stats counts what a driver did.
type Stats struct {
	Readys        atomic.Uint64
	Commits       atomic.Uint64
	CommitNanos   atomic.Uint64
	Dropped       atomic.Uint64 // deliveries dropped on a full inbox
	StepErrors    atomic.Uint64 // batches that broke a protocol rule
	SendErrors    atomic.Uint64 // batches the transport refused (queue full)
	UrgentBatches atomic.Uint64 // batches sent while the disk was busy
	// DataBytesReceived: keys and values of the ops and snapshot pairs
	// in the replication messages stepped (partition.Op.Size), the
	// measure the simulator's re-sync figure uses.
	DataBytesReceived atomic.Uint64
}

type eventKind uint8

const (
	evBatch eventKind = iota + 1
	evWrite
	evRead
	evDo
)

type event struct {
	kind  eventKind
	batch nodewire.Batch
	write partition.WriteRequest
	read  partition.ReadRequest
	do    func(now time.Duration, n *node.Node) error
	reply chan partition.Reply
	errc  chan error
}

// New opens the node from its stores: the acceptor's records, and every
// partition replica the store holds (a partition of cfg.Partitions the
// store lacks is created from its Spec).
func New(c Config) (*Driver, error) {
	cfg, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	st, err := cfg.AcceptorStore.Load()
	if err != nil {
		return nil, fmt.Errorf("noderun: load the acceptor store: %w", err)
	}
	ncfg := cfg.Node
	ncfg.AcceptorState = st
	n, err := node.New(ncfg)
	if err != nil {
		return nil, err
	}
	d := &Driver{cfg: cfg, log: cfg.Logger.With("node", ncfg.ID), n: n, inbox: make(chan event, cfg.InboxSize),
		done: make(chan struct{}), pending: make(map[partition.ClientRef]chan partition.Reply)}
	if err := d.openPartitions(); err != nil {
		return nil, err
	}
	d.running.Store(true) // requests queue in the inbox until Run starts
	return d, nil
}

func (d *Driver) openPartitions() error {
	have, err := d.cfg.PartitionStore.Partitions()
	if err != nil {
		return fmt.Errorf("noderun: list the partition store: %w", err)
	}
	stored := make(map[partition.ID]bool, len(have))
	for _, id := range have {
		stored[id] = true
	}
	now := d.cfg.Clock()
	for i, p := range d.cfg.Partitions {
		id := p.Placement.ID
		if stored[id] {
			rec, err := d.cfg.PartitionStore.Load(id)
			if err != nil {
				return fmt.Errorf("noderun: load partition %d: %w", id, err)
			}
			if err := d.n.OpenPartition(now, p.Placement, rec); err != nil {
				return err
			}
		} else if err := d.n.CreatePartition(now, p.Placement, p.Spec); err != nil {
			return fmt.Errorf("noderun: Config.Partitions[%d]: %w", i, err)
		}
		if p.Register != nil {
			if err := d.n.CreateRegister(id, *p.Register); err != nil {
				return fmt.Errorf("noderun: Config.Partitions[%d]: %w", i, err)
			}
		}
	}
	return nil
}

// Deliver hands the node a batch from a peer (the transport's Handler).
// It never blocks: on a full inbox the batch is dropped and counted.
func (d *Driver) Deliver(from node.NodeID, b nodewire.Batch) {
	select {
	case d.inbox <- event{kind: evBatch, batch: b}:
	default:
		d.stats.Dropped.Add(1)
	}
}

// Write submits a client write and waits for its reply (the write is
// durable on the write quorum when the reply has no error).
func (d *Driver) Write(ctx context.Context, req partition.WriteRequest) (partition.Reply, error) {
	return d.call(ctx, event{kind: evWrite, write: req})
}

// Read submits a client read and waits for its reply.
func (d *Driver) Read(ctx context.Context, req partition.ReadRequest) (partition.Reply, error) {
	return d.call(ctx, event{kind: evRead, read: req})
}

func (d *Driver) call(ctx context.Context, ev event) (partition.Reply, error) {
	ev.reply = make(chan partition.Reply, 1)
	if err := d.submit(ctx, ev); err != nil {
		return partition.Reply{}, err
	}
	select {
	case r := <-ev.reply:
		return r, nil
	case <-d.done:
		return partition.Reply{}, d.stopErr()
	case <-ctx.Done():
		return partition.Reply{}, ctx.Err()
	}
}

// Do runs fn on the node in the loop (operator actions, inspection) and
// returns its error. fn must not keep the node.
func (d *Driver) Do(ctx context.Context, fn func(now time.Duration, n *node.Node) error) error {
	ev := event{kind: evDo, do: fn, errc: make(chan error, 1)}
	if err := d.submit(ctx, ev); err != nil {
		return err
	}
	select {
	case err := <-ev.errc:
		return err
	case <-d.done:
		return d.stopErr()
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *Driver) submit(ctx context.Context, ev event) error {
	if !d.running.Load() {
		return d.stopErr()
	}
	select {
	case d.inbox <- ev:
		return nil
	case <-d.done:
		return d.stopErr()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stats returns the driver's counters.
func (d *Driver) Stats() *Stats { return &d.stats }

// Done is closed when Run has returned.
func (d *Driver) Done() <-chan struct{} { return d.done }

// Err is why the driver stopped (nil while it runs).
func (d *Driver) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

func (d *Driver) stopErr() error {
	if err := d.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w: %w", ErrStopped, err)
	}
	return ErrStopped
}
