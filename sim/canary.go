package sim

import "github.com/fmnode/fmnode/caspaxos"

// AcceptorFactory builds an acceptor from what its disk recovered. The
// simulator uses NewAcceptor; --canary swaps in ForgetfulAcceptor.
type AcceptorFactory func(id caspaxos.NodeID, st caspaxos.State) (*caspaxos.Acceptor, error)

// NewAcceptor is the real acceptor.
func NewAcceptor(id caspaxos.NodeID, st caspaxos.State) (*caspaxos.Acceptor, error) {
	return caspaxos.NewAcceptor(id, st)
}

// ForgetfulAcceptor is the canary: a deliberately broken acceptor that, on
// restart, recovers its accepted values but forgets every promise not yet
// followed by an accept (as if promises were written without fsync). It
// then grants a prepare below a ballot it had promised, so two proposers
// can both commit over the same version: a lost update that the
// linearizability checker must catch. A simulator that runs it and passes
// is a simulator that cannot find this class of bug.
func ForgetfulAcceptor(id caspaxos.NodeID, st caspaxos.State) (*caspaxos.Acceptor, error) {
	for i := range st.Records {
		st.Records[i].Promised = st.Records[i].Accepted
	}
	return caspaxos.NewAcceptor(id, st)
}
