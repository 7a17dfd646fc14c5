// Package membership is the agent's gossip membership (hashicorp/memberlist):
// which nodes of the cluster are up, where their node transport and API
// listen, and what region and zone they are in.
//
// # Evidence only
//
// Nothing here decides anything about failover. Membership events reach the
// failover core as evidence only: a later change feeds them to the node as
// hints (for example, to probe a peer sooner after it is reported dead, or
// to learn a new node's transport address). Leases still come only from the
// core's own heartbeats over the node transport, and a memberlist suspicion
// or death alone never fences, demotes or promotes anything: gossip failure
// detection has its own timing, its own false positives and no quorum, so
// it may only make the core look sooner, never conclude.
//
// # What it observes
//
// Members are alive, dead or left (State). memberlist's suspect state is not
// observable without a data race (see State), so a suspicion shows only if
// it ends in death. Events (join, update, leave, dead) come from memberlist's
// EventDelegate through a bounded channel that drops its oldest event when
// full (Membership.Events).
//
// # Wire
//
// The node meta each node gossips is a compact versioned binary (Meta,
// DecodeMeta) of at most MaxMetaBytes, under memberlist's 512-byte limit.
// The cluster name is memberlist's label, so two clusters' gossip never
// merges, and it is in the meta too; the gossip key (AES) is required unless
// the config says Insecure. Start's refusal rule keeps out a node whose meta
// is bad or names another cluster, or whose node id another alive node
// holds.
package membership
