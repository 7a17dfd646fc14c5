package failover

import dataplane "github.com/fmnode/fmnode/partition"

// StatusFromProgress is what the Manager needs to know of a local replica,
// read from the data plane's progress report. Both drivers (the simulator
// and the daemon) feed the Manager through it, so they judge replicas alike.
//
// A follower counts as in sync when it holds everything the write region
// has assigned and needs no snapshot: adding it back to the write quorum
// then loses nothing committed. (The write region does not yet hold such a
// follower in its commit rule before the register grows the quorum; a
// write committed between this report and the grow could miss it.)
func StatusFromProgress(pr dataplane.Progress, self Region) ReplicaStatus {
	st := ReplicaStatus{
		Epoch:       Epoch(pr.Epoch),
		LastLSN:     LSN(pr.LastLSN),
		CommitLSN:   LSN(pr.CommitLSN),
		WriteRegion: pr.Role != dataplane.RoleFollower && pr.WriteRegion == self,
		Fenced:      pr.Role == dataplane.RolePaused,
		WriteQuorum: pr.Quorum.Members,
	}
	if st.WriteRegion {
		for _, f := range pr.Followers {
			st.Followers = append(st.Followers, FollowerStatus{
				Region: f.Region, MatchLSN: LSN(f.Match), InSync: f.Match >= pr.LastLSN && !f.Snapshot,
			})
		}
	}
	return st
}
