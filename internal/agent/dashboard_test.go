package agent

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/failover"
)

// TestStatusPageAndDashboard: three agents with an admin token. The page
// and its assets are served from the binary with a same-origin policy;
// the dashboard needs the token, shows every partition with the write
// region the register names (as /v1/admin/status does), every node
// reached, and after a switchover the new write region and the
// transitions with the operator's reason.
func TestStatusPageAndDashboard(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets, fsyncs and gossip")
	}
	as, _ := startTokenCluster(t)
	api := func(i int) string { return "http://" + as[i].cfg.Bind.APIAddr }

	t.Run("page", func(t *testing.T) {
		tests := []struct {
			method, path string
			status       int
			ctype, body  string
		}{
			{"GET", "/ui/", http.StatusOK, "text/html", `src="app.js"`},
			{"GET", "/ui/app.js", http.StatusOK, "javascript", "v1/admin/"},
			{"GET", "/ui/style.css", http.StatusOK, "text/css", ".cell"},
			{"HEAD", "/ui/", http.StatusOK, "text/html", ""},
			{"POST", "/ui/", http.StatusMethodNotAllowed, "", ""},
			{"GET", "/ui/nothing.js", http.StatusNotFound, "", ""},
		}
		for _, tt := range tests {
			req, err := http.NewRequest(tt.method, api(0)+tt.path, nil)
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, tt.status, resp.StatusCode, "%s %s: %s", tt.method, tt.path, b)
			assert.Contains(t, resp.Header.Get("Content-Type"), tt.ctype, "%s %s", tt.method, tt.path)
			assert.Contains(t, string(b), tt.body, "%s %s", tt.method, tt.path)
			if tt.status == http.StatusOK {
				assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'none'", tt.path)
				assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), tt.path)
			}
		}
	})

	t.Run("token", func(t *testing.T) {
		assert.Equal(t, http.StatusUnauthorized, adminCall(t, "GET", api(1)+PathDashboard, "", nil, nil))
		assert.Equal(t, http.StatusForbidden, adminCall(t, "GET", api(1)+PathDashboard, "wrong", nil, nil))
	})

	dash := func(i int) Dashboard {
		var d Dashboard
		require.Equal(t, http.StatusOK, adminCall(t, "GET", api(i)+PathDashboard, testToken, nil, &d))
		return d
	}
	var st ClusterStatus
	require.Equal(t, http.StatusOK, adminCall(t, "GET", api(1)+PathStatus, testToken, nil, &st))
	require.Len(t, st.Partitions, 4)

	t.Run("every partition and node", func(t *testing.T) {
		d := dash(1)
		assert.Equal(t, "n2", d.Answered)
		assert.Equal(t, "test", d.Cluster)
		require.Equal(t, 4, d.Partitions)
		require.Len(t, d.Write, 4)
		require.Len(t, d.Epoch, 4)
		require.Len(t, d.Flags, 4)
		var names []string
		for _, r := range d.Regions {
			names = append(names, r.Name)
		}
		require.Equal(t, testRegions, names)
		for _, p := range st.Partitions {
			w := d.Write[p.ID-1]
			require.GreaterOrEqual(t, w, 0, "partition %d not reported", p.ID)
			assert.Equal(t, p.WriteRegion, d.Regions[w].Name, "partition %d", p.ID)
			assert.Equal(t, p.Epoch, d.Epoch[p.ID-1], "partition %d", p.ID)
		}
		writes := 0
		for _, r := range d.Regions {
			writes += r.Writes
			assert.Len(t, r.Nodes, 1, r.Name)
		}
		assert.Equal(t, 4, writes)
		require.Len(t, d.Nodes, 3)
		for _, n := range d.Nodes {
			assert.True(t, n.Reached, "%s: %s", n.Name, n.Error)
			require.NotNil(t, n.Lease, n.Name)
			assert.True(t, n.Lease.Valid, "%s's lease", n.Name)
			if n.Name == "n2" {
				assert.Equal(t, "self", n.Failover)
			} else {
				assert.Equal(t, "alive", n.Failover, n.Name)
			}
		}
		assert.Empty(t, d.InProgress)
	})

	t.Run("switchover shows", func(t *testing.T) {
		// Right after init a switchover may be refused for a moment (the
		// target not yet known in sync): an operator would retry.
		var rb RefusedBody
		code := 0
		if !assert.Eventually(t, func() bool {
			rb = RefusedBody{}
			code = adminCall(t, "POST", api(2)+PathSwitchover, testToken, SwitchoverRequest{Partition: 3, To: "west", Reason: "dashboard test"}, &rb)
			return code == http.StatusAccepted
		}, 10*time.Second, 200*time.Millisecond) {
			t.Fatalf("switchover of partition 3 to west: %d %+v", code, rb)
		}
		var last Dashboard
		ok := assert.Eventually(t, func() bool {
			last = dash(0)
			return last.Write[2] == 2 && last.Flags[2]&FlagSwitchover == 0
		}, 20*time.Second, 100*time.Millisecond)
		if !ok {
			t.Fatalf("partition 3 never showed west: %+v", last)
		}
		var kinds []string
		for _, tr := range last.Transitions {
			if tr.Partition == 3 {
				kinds = append(kinds, tr.Kind)
				if tr.Kind == "start-switchover" {
					assert.Contains(t, tr.Why, "dashboard test", "the operator's reason is shown")
				}
			}
		}
		assert.Contains(t, kinds, "start-switchover")
		assert.Contains(t, kinds, "complete-switchover")
		assert.True(t, slices.IsSortedFunc(last.Transitions, func(x, y PartitionTransition) int { return y.At.Compare(x.At) }), "newest first")
	})
}

// TestStatusPageNeedsClientCert: under TLS the page is behind the same
// rule as every admin path: no verified client certificate, 401.
func TestStatusPageNeedsClientCert(t *testing.T) {
	a := &Agent{certs: &certs{}}
	mux := http.NewServeMux()
	mux.Handle(PathUI, uiHandler())
	h := a.requireClientCert(mux)
	for _, tt := range []struct {
		name   string
		tls    *tls.ConnectionState
		status int
	}{
		{"plain", nil, http.StatusUnauthorized},
		{"TLS without a client certificate", &tls.ConnectionState{}, http.StatusUnauthorized},
		{"verified client certificate", &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{}}}}, http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", PathUI, nil)
			req.TLS = tt.tls
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			assert.Equal(t, tt.status, rec.Code, rec.Body.String())
		})
	}
}

// TestDashboardMerge: the newest version of each partition wins, a
// proposal in flight anywhere counts, a region the answering agent does
// not know and a malformed answer are not taken as evidence.
func TestDashboardMerge(t *testing.T) {
	regions := []string{"east", "north", "west"}
	d := Dashboard{Partitions: 4}
	for _, r := range regions {
		d.Regions = append(d.Regions, DashRegion{Name: r})
	}
	idx := map[string]int{"east": 0, "north": 1, "west": 2}
	reported := map[uint16]*DashboardLocal{
		1: {Regions: regions, IDs: []uint32{1, 2, 3}, Versions: []uint64{5, 3, 1}, Epochs: []uint64{2, 1, 1}, Write: []int{1, 0, 0}, Flags: []int{0, FlagProposing, 0}},
		// Another order of regions: the names count, not the indexes.
		2: {Regions: []string{"west", "east", "north"}, IDs: []uint32{1, 2, 3}, Versions: []uint64{4, 6, 2}, Epochs: []uint64{1, 3, 4}, Write: []int{1, 0, 5}, Flags: []int{FlagSwitchover, 0, 0}},
		3: {Regions: regions, IDs: []uint32{4}, Versions: []uint64{9}, Epochs: []uint64{7}, Write: []int{2, 2}, Flags: []int{0}},
	}
	d.mergePartitions(reported, idx)
	assert.Equal(t, []int{1, 2, -1, -1}, d.Write, "1: n1's v5 (north); 2: n2's v6 (west); 3: n2's v2, a region out of its list; 4: malformed")
	assert.Equal(t, []uint64{2, 3, 4, 0}, d.Epoch)
	assert.Equal(t, []int{0, FlagProposing, 0, 0}, d.Flags, "the older version's switchover flag is not shown; a proposal in flight is")
	assert.Equal(t, []int{0, 1, 1}, []int{d.Regions[0].Writes, d.Regions[1].Writes, d.Regions[2].Writes})
}

// TestTransitionHeapKeepsTheNewest: against a reference (sort all,
// newest first, take maxDashTransitions).
func TestTransitionHeapKeepsTheNewest(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		var th transitionHeap
		type ref struct {
			p  uint32
			at time.Duration
		}
		var all []ref
		parts := rng.IntN(300)
		for p := range parts {
			var hist []failover.Transition
			at := time.Duration(rng.IntN(1000)) * time.Millisecond
			for e := range rng.IntN(failover.MaxHistory + 1) {
				at += time.Duration(1+rng.IntN(1000)) * time.Millisecond
				hist = append(hist, failover.Transition{Epoch: failover.Epoch(e + 1), At: at, Kind: failover.DecideFailover})
				all = append(all, ref{uint32(p + 1), at})
			}
			th.offer(uint32(p+1), hist)
		}
		got := th.newestFirst()
		slices.SortStableFunc(all, func(x, y ref) int { return int(y.at - x.at) })
		want := min(len(all), maxDashTransitions)
		require.Len(t, got, want, "round %d", round)
		for i := range got {
			assert.Equal(t, wall(all[i].at), got[i].At, "round %d, #%d", round, i)
		}
	}
}

// TestDashboardSizeIsBounded: at 4300 partitions, with every list full,
// the page's answer and an agent's part stay small.
func TestDashboardSizeIsBounded(t *testing.T) {
	const parts = 4300
	regions := []string{"east", "north", "west"}
	ld := DashboardLocal{Name: "n1", Regions: regions}
	d := Dashboard{Partitions: parts, Write: make([]int, parts), Epoch: make([]uint64, parts), Flags: make([]int, parts), InProgressTotal: parts}
	for i := range parts {
		ld.IDs = append(ld.IDs, uint32(i+1))
		ld.Versions, ld.Epochs = append(ld.Versions, 123456), append(ld.Epochs, 1234)
		ld.Write, ld.Flags = append(ld.Write, i%3), append(ld.Flags, FlagSwitchover|FlagProposing)
		d.Write[i], d.Epoch[i], d.Flags[i] = i%3, 1234, FlagSwitchover|FlagWriteRegionDown
	}
	why := strings.Repeat("x", failover.MaxReasonBytes)
	for i := range maxDashTransitions {
		tr := PartitionTransition{Partition: uint32(i + 1), TransitionView: TransitionView{Epoch: 9, At: time.Now(), Kind: "complete-switchover", From: "north", To: "east", Who: "north", Why: why}}
		ld.Transitions, d.Transitions = append(ld.Transitions, tr), append(d.Transitions, tr)
	}
	for i := range maxDashInProgress {
		ld.Switchovers = append(ld.Switchovers, PartitionBrief{ID: uint32(i + 1), Epoch: 3, WriteRegion: "east", Phase: "switchover", Target: "north", Since: time.Now(), Version: 99})
		d.InProgress = append(d.InProgress, DashOp{Partition: uint32(i + 1), Kind: "failover", From: "east", Why: fmt.Sprintf("n%d, the write region's node, is dead in n2's failover view (membership: dead)", i)})
	}
	for _, v := range []any{ld, d} {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		t.Logf("%T at %d partitions: %d bytes", v, parts, len(b))
		assert.Less(t, len(b), 160<<10, "%T", v)
	}
}

// BenchmarkDashboardAggregate is the answering agent's work per
// dashboard at 4300 partitions on three agents (every agent hosts every
// partition): decode the two other agents' parts, merge the three, list
// what is in progress and the newest transitions, encode the answer.
//
//	go test -run '^$' -bench DashboardAggregate -benchmem ./internal/agent/
func BenchmarkDashboardAggregate(b *testing.B) {
	const parts = 4300
	regions := []string{"east", "north", "west"}
	var raws [][]byte
	var self DashboardLocal
	for a := range 3 {
		ld := DashboardLocal{Name: fmt.Sprintf("n%d", a+1), Regions: regions}
		for i := range parts {
			ld.IDs = append(ld.IDs, uint32(i+1))
			ld.Versions, ld.Epochs = append(ld.Versions, uint64(100+i%7+a)), append(ld.Epochs, uint64(3+i%5))
			ld.Write, ld.Flags = append(ld.Write, i%3), append(ld.Flags, 0)
		}
		for i := range maxDashTransitions {
			ld.Transitions = append(ld.Transitions, PartitionTransition{Partition: uint32(i*97%parts + 1),
				TransitionView: TransitionView{Epoch: 3, At: time.Unix(int64(1000+i), 0), Kind: "failover", From: "east", To: "north", Who: "north", Why: strings.Repeat("r", 120)}})
		}
		if a == 0 {
			self = ld
			continue
		}
		raw, err := json.Marshal(ld)
		require.NoError(b, err)
		raws = append(raws, raw)
	}
	idx := map[string]int{"east": 0, "north": 1, "west": 2}
	b.ReportAllocs()
	var size int
	for b.Loop() {
		reported := map[uint16]*DashboardLocal{1: &self}
		for i, raw := range raws {
			var ld DashboardLocal
			if err := json.Unmarshal(raw, &ld); err != nil {
				b.Fatal(err)
			}
			reported[uint16(i+2)] = &ld
		}
		d := Dashboard{Partitions: parts, Transitions: []PartitionTransition{}, InProgress: []DashOp{}}
		for _, r := range regions {
			d.Regions = append(d.Regions, DashRegion{Name: r})
		}
		d.mergePartitions(reported, idx)
		d.collectInProgress(nil, reported)
		d.mergeTransitions(reported)
		out, err := json.Marshal(d)
		if err != nil {
			b.Fatal(err)
		}
		size = len(out)
	}
	b.ReportMetric(float64(size), "answer-bytes")
	b.ReportMetric(float64(len(raws[0])), "part-bytes")
}

// FuzzDashboardMerge: another agent's part is outside bytes; whatever
// they hold, merging never panics, every partition's region index names
// a region or is -1, and the regions' counts add up.
func FuzzDashboardMerge(f *testing.F) {
	f.Add([]byte(`{"regions":["east","north"],"ids":[1,2],"versions":[3,4],"epochs":[1,2],"write":[0,1],"flags":[1,8],
		"switchovers":[{"id":1,"target":"north","version":3}],"transitions":[{"partition":2,"epoch":2,"at":"2026-01-01T00:00:00Z","kind":"failover"}]}`))
	f.Add([]byte(`{"regions":["mars"],"ids":[0,4294967295,3],"versions":[1,1,1],"epochs":[1,1,1],"write":[-7,0,99],"flags":[-1,0,255]}`))
	f.Add([]byte(`{"ids":[1],"versions":[],"write":[0]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var ld DashboardLocal
		if json.Unmarshal(raw, &ld) != nil {
			return
		}
		self := DashboardLocal{Regions: []string{"east", "north", "west"}, IDs: []uint32{1, 2, 3}, Versions: []uint64{2, 2, 2},
			Epochs: []uint64{1, 1, 1}, Write: []int{0, 1, 2}, Flags: []int{0, 0, 0}}
		d := Dashboard{Partitions: 3, Transitions: []PartitionTransition{}, InProgress: []DashOp{}}
		for _, r := range self.Regions {
			d.Regions = append(d.Regions, DashRegion{Name: r})
		}
		reported := map[uint16]*DashboardLocal{1: &self, 2: &ld}
		d.mergePartitions(reported, map[string]int{"east": 0, "north": 1, "west": 2})
		d.mergeTransitions(reported)
		d.collectInProgress(nil, reported)
		total := 0
		for _, r := range d.Regions {
			total += r.Writes
		}
		known := 0
		for p, w := range d.Write {
			if w < -1 || w >= len(d.Regions) {
				t.Fatalf("partition %d: region index %d of %d", p+1, w, len(d.Regions))
			}
			if w >= 0 {
				known++
			}
		}
		if total != known {
			t.Fatalf("regions count %d writes, %d partitions have a region", total, known)
		}
		if len(d.Transitions) > maxDashTransitions || len(d.InProgress) > maxDashInProgress {
			t.Fatalf("lists over their bounds: %d transitions, %d in progress", len(d.Transitions), len(d.InProgress))
		}
	})
}
