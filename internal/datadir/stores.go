package datadir

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble"

	"github.com/fmnode/fmnode/caspaxos"
	"github.com/fmnode/fmnode/caspaxos/boltstore"
	"github.com/fmnode/fmnode/partition"
	"github.com/fmnode/fmnode/partition/pebblestore"
)

// OpenStores opens (creating them in a new directory) the acceptor store
// at AcceptorPath and the partition store at PartitionsPath. parts.Dir
// must be empty or PartitionsPath. The caller closes both stores, before
// Close.
//
// A damaged store fails with an error naming its path and saying that the
// agent refuses to start and did not modify it; it wraps the
// store's own error (caspaxos.ErrCorrupt, partition.ErrCorrupt,
// pebblestore.ErrNotStore or pebble's corruption error) and ErrCorrupt.
func (d *Dir) OpenStores(acc boltstore.Options, parts pebblestore.Options) (*boltstore.Store, *pebblestore.Store, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, nil, fmt.Errorf("datadir: %s: open stores: %w", d.path, ErrClosed)
	}
	if parts.Dir != "" && parts.Dir != d.PartitionsPath() {
		return nil, nil, fmt.Errorf("%w: pebblestore.Options.Dir %s: the partition store lives at %s", ErrInvalid, parts.Dir, d.PartitionsPath())
	}
	parts.Dir = d.PartitionsPath()

	accPath := d.AcceptorPath()
	as, err := boltstore.Open(accPath, acc)
	if err != nil {
		return nil, nil, storeErr("acceptor store", accPath, "did not modify the file", err, errors.Is(err, caspaxos.ErrCorrupt))
	}
	// pebble creates the directory without syncing its parent; creating
	// it here makes the entry durable before any commit is acknowledged.
	if err := mkdirDurable(parts.Dir); err != nil {
		_ = as.Close()
		return nil, nil, err
	}
	ps, err := pebblestore.Open(parts)
	if err != nil {
		_ = as.Close()
		corrupt := errors.Is(err, partition.ErrCorrupt) || errors.Is(err, pebblestore.ErrNotStore) || pebble.IsCorruptionError(err)
		// pebble's own open may already have replayed its log into new
		// files (the keys stay the same); pebblestore writes nothing more.
		return nil, nil, storeErr("partition store", parts.Dir, "wrote nothing into it", err, corrupt)
	}
	return as, ps, nil
}

// storeErr wraps a store's Open error for an operator; untouched says
// what the agent left alone.
func storeErr(what, path, untouched string, err error, corrupt bool) error {
	if corrupt {
		return fmt.Errorf("%w: %s %s is damaged: the agent refuses to start and %s (a node must not come back with lost or older state: replace it under a new node id with a fresh data directory): %w",
			ErrCorrupt, what, path, untouched, err)
	}
	return fmt.Errorf("datadir: open %s %s: %w", what, path, err)
}
