package sim

import (
	"fmt"
	"strings"
	"time"
)

// azScenario models availability zones: every region has foAZs nodes, one
// per zone, and a partition's replicas sit in the same zone slot of each
// region (slot = partition index mod foAZs). One zone of the write-heavy
// region is powered off for --outage. Expected: only the partitions whose
// write replica is in that zone fail over (a third of the region's); the
// ones with a follower there drop it from their write quorum and keep
// their write region and epoch; no other partition moves. Each partition
// has a single replica per region, so a region never keeps a quorum of a
// partition's replicas inside itself: no partition rides the zone loss out
// within its region.
type azScenario struct{}

// foAZs is the zones per region.
const foAZs = 3

func (azScenario) Name() string { return "az-outage" }
func (azScenario) Description() string {
	return "three zones (nodes) per region; one zone of the write-heavy region powered off for --outage: only partitions written in that zone fail over, the rest keep write region and epoch"
}
func (s azScenario) Run(cfg Config) (Result, error) {
	res, _, err := runScripted(s, cfg)
	return res, err
}

func (azScenario) profile() string                   { return "paper" }
func (azScenario) shape(spec *foSpec)                { spec.nodesPerRegion = foAZs }
func (azScenario) run(r *foRun, until time.Duration) { r.fw.e.run(until) }
func (azScenario) heal(r *foRun)                     { r.healDown() }
func (azScenario) settle(*foRun)                     {}

// AZFigures is what the zone outage measures.
type AZFigures struct {
	Zones int `json:"zones_per_region"`
	// Affected partitions had their write replica in the lost zone;
	// FollowerOnly had only a follower there; Moved counts partitions
	// not affected that changed write region or epoch (expected 0).
	Affected     int `json:"affected"`
	FollowerOnly int `json:"follower_only"`
	Moved        int `json:"unaffected_moved"`
}

func (f *AZFigures) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-34s %d zones per region; %d partitions written in the lost zone, %d with a follower there; %d others moved\n",
		"availability-zone outage", f.Zones, f.Affected, f.FollowerOnly, f.Moved)
	return b.String()
}

func (azScenario) inject(r *foRun) {
	fw := r.fw
	zone := fw.busiestWriteNode(0)
	r.down[zone] = true
	f := &AZFigures{Zones: foAZs}
	r.fig.AZ = f
	f.Affected = fw.m.startOutage(fw, r.down, fw.now())
	for i := range fw.parts {
		if fw.m.affected[i] {
			continue
		}
		for _, n := range fw.parts[i].nodeOfReg {
			if r.down[n] {
				f.FollowerOnly++
			}
		}
	}
	r.crashDown()
}

func (azScenario) check(r *foRun) {
	fw := r.fw
	f := r.fig.AZ
	r.requireFailedOver()
	for i := range fw.parts {
		if fw.m.affected[i] || !fw.alone() { // background faults move others too
			continue
		}
		if st := fw.reg[i].state; st.Epoch != 1 || st.WriteRegion != fw.parts[i].initial {
			f.Moved++
			r.violation(ViolationInvariant, "partition %s moved to epoch %d/%s though its write replica was not in the lost zone",
				fw.parts[i].name, st.Epoch, st.WriteRegion)
		}
	}
	if f.Affected == 0 || f.FollowerOnly == 0 {
		r.violation(ViolationInvariant, "the lost zone held %d write replicas and %d followers: nothing to show", f.Affected, f.FollowerOnly)
	}
}
