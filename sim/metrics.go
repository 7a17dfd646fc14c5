package sim

// clusterMetrics adds the proposer and network counters to a run's metrics.
func clusterMetrics(e *env, cl *Cluster) {
	s := cl.ProposerStats()
	m := e.metrics
	m["rounds"] = float64(s.Rounds)
	m["naks"] = float64(s.NAKs)
	m["timeouts"] = float64(s.Timeouts)
	m["fast_path_rounds"] = float64(s.FastPath)
	if s.Rounds > 0 {
		m["conflict_rate"] = float64(s.NAKs) / float64(s.Rounds)
	}
	if e.ops.Issued > 0 {
		m["availability"] = float64(e.ops.OK) / float64(e.ops.Issued)
	}
	ns := cl.net.Stats
	m["messages_sent"] = float64(ns.Sent)
	m["messages_dropped"] = float64(ns.Dropped())
	m["fsyncs_lost"] = float64(cl.lostSyncs)
	m["paused_overflow"] = float64(e.w.HeldOverflow())
}
