package sim

import (
	"testing"
	"time"
)

// BenchmarkRegionOutage runs the drill at a given size: profile with
// go test -run x -bench RegionOutage -cpuprofile.
func BenchmarkRegionOutage(b *testing.B) {
	for range b.N {
		res, err := Run(Config{Scenario: "region-outage", Seed: 1, Partitions: 1000, FailoverProfile: "paper", Outage: 3 * time.Minute, Duration: 2 * time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(res.SimPerWall, "sim-s/wall-s")
	}
}
