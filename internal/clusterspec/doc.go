// Package clusterspec is the cluster spec of the fmnode agent: what every
// agent of a cluster agrees on, as opposed to what is local to one node
// (internal/agentcfg). `fmnode init` validates a Spec and writes its
// canonical encoding into a system register, which stores opaque bytes;
// agents wait for it before hosting anything, then derive from it their
// node.Config (NodeConfig, FailoverConfig, FailoverNodes, Acceptors), the
// partitions they host (Hosted) and, for a partition created at init, its
// data-plane spec and first register value (PartitionSpec, InitialState).
//
// A spec names the regions in priority order, the partition count, the
// consistency level, the minimum durability, the failover timing profile
// ("paper" or "fast" exactly, or "custom" with overrides, validated by
// failover's own rules), the blast-radius cap, the never-promote regions
// and the nodes recorded at init. Validate reports every problem at once,
// each a *FieldError that names the field by its JSON path and matches
// ErrInvalid. Encode and Decode are the only way to and from bytes:
// canonical JSON (one encoding per spec, so agents compare bytes), bounded
// by MaxBytes, with unknown fields, trailing data and other formats
// refused.
//
// Placement is rendezvous (highest-random-weight) hashing of a partition
// over each region's recorded nodes: one replica per region, on the node
// whose weight for the partition is highest. It depends on the spec alone,
// never on live membership, so that every agent computes the same answer
// with no coordination and a dead node's replicas stay put (they are
// failed over from, not silently re-created elsewhere); and adding a node
// to a region of k nodes moves only the ~1/(k+1) of that region's replicas
// the new node wins, removing one moves only its own. The weight function
// is part of the format and pinned by a golden test.
//
// Regions, partitions, nodes and the cluster label are fixed at init:
// placement and every partition's register derive from them. The rest is
// edited at run time by `fmnode config get|set` through Get, Set and Apply
// (several keys at once, for changes that only make sense together),
// which validate the whole result; Keys lists what may be set and Diff
// names what changed between two specs.
package clusterspec
