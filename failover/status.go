package failover

import dataplane "github.com/fmnode/fmnode/partition"

// StatusFromProgress is what the Manager needs to know of a local replica,
// read from the data plane's progress report. Both drivers (the simulator
// and the daemon) feed the Manager through it, so they judge replicas alike.
//
// A follower is caught up when it holds everything the write region has
// assigned and needs no snapshot. It is in sync only when, in addition, the
// write region counts it in its commit rule (its local write quorum) and it
// holds every committed LSN: from then on no write commits without it, so
// the register may list it as a write-quorum member (an RPO-0 candidate)
// without ever having acknowledged a write it lacks. A caught-up follower
// outside the rule is not in sync: writes keep committing without it.
func StatusFromProgress(pr dataplane.Progress, self Region) ReplicaStatus {
	return StatusFromProgressInto(pr, self, nil)
}

// StatusFromProgressInto is StatusFromProgress with the followers appended
// to buf[:0]: a driver that reports after every change reuses one buffer
// (UpdateReplica copies what it keeps).
func StatusFromProgressInto(pr dataplane.Progress, self Region, buf []FollowerStatus) ReplicaStatus {
	st := ReplicaStatus{
		Epoch:       Epoch(pr.Epoch),
		LastLSN:     LSN(pr.LastLSN),
		Unsynced:    LSN(pr.LastLSN - min(pr.DurableLSN, pr.LastLSN)),
		CommitLSN:   LSN(pr.CommitLSN),
		WriteRegion: pr.Role != dataplane.RoleFollower && pr.WriteRegion == self,
		// Fenced once the fenced tail is durable: the fence's final LSN
		// is where the next epoch starts, so its write region must keep it.
		Fenced:      pr.Role == dataplane.RolePaused && pr.DurableLSN >= pr.LastLSN,
		WriteQuorum: pr.Quorum.Members,
		// The commit rule's minimum durability, as the replica holds it.
		MinDurability: pr.Quorum.MinDurability,
	}
	if st.WriteRegion {
		if len(pr.Followers) > 0 {
			st.Followers = buf[:0]
		}
		for _, f := range pr.Followers {
			st.Followers = append(st.Followers, FollowerStatus{
				Region:   f.Region,
				MatchLSN: LSN(f.Match),
				InRule:   pr.Quorum.IsMember(f.Region),
				CaughtUp: f.Match >= pr.LastLSN && !f.Snapshot,
				InSync:   pr.Quorum.IsMember(f.Region) && f.Match >= pr.CommitLSN && !f.Snapshot,
			})
		}
	}
	return st
}
