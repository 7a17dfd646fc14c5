package agent

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/internal/browsertest"
)

// TestStatusPageAtScale loads the embedded page in headless Chromium
// against a dashboard of 4300 partitions (served here, so the page's
// rendering is checked apart from a cluster's speed): every cell is
// drawn in its region's legend colour, the grid fits the window without
// scrolling, cells are large enough to point at; an update recolours a
// cell in place and marks a region outage on its partitions and in the
// in-progress list; the admin token is asked for on a 401 and sent once
// given.
func TestStatusPageAtScale(t *testing.T) {
	bin := browsertest.Require(t)
	const parts = 4300
	const token = "page-token"
	d := Dashboard{Answered: "n1", Cluster: "scale", SpecVersion: 3, At: time.Now(), Partitions: parts,
		Regions: []DashRegion{{Name: "east", Preferred: true, Nodes: []string{"n1"}}, {Name: "north", Nodes: []string{"n2"}}, {Name: "west", Nodes: []string{"n3"}}},
		Write:   make([]int, parts), Epoch: make([]uint64, parts), Flags: make([]int, parts), InProgress: []DashOp{}, Transitions: []PartitionTransition{}}
	for i := range parts {
		d.Write[i], d.Epoch[i] = i%3, 1
		d.Regions[i%3].Writes++
	}
	lease := &LeaseView{Valid: true, Until: time.Now().Add(time.Hour)}
	d.Nodes = []ClusterNode{
		{NodeView: NodeView{ID: 1, Name: "n1", Region: "east", Membership: "alive", Failover: "self", Self: true}, Reached: true, Lease: lease},
		{NodeView: NodeView{ID: 2, Name: "n2", Region: "north", Membership: "alive", Failover: "alive"}, Reached: true, Lease: lease},
		{NodeView: NodeView{ID: 3, Name: "n3", Region: "west", Membership: "alive", Failover: "alive"}, Reached: true, Lease: lease},
	}
	var mu sync.Mutex
	polls := 0
	mux := http.NewServeMux()
	mux.Handle(PathUI, uiHandler())
	mux.HandleFunc(PathDashboard, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			writeError(w, http.StatusUnauthorized, CodeUnauthorized, "agent: admin calls need `Authorization: Bearer <token>`")
			return
		}
		mu.Lock()
		defer mu.Unlock()
		polls++
		writeJSON(w, http.StatusOK, d)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	b := browsertest.Start(t, browsertest.Options{Path: bin, Width: 1400, Height: 1000})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pg := b.NewPage(ctx)
	require.NoError(t, pg.Navigate(ctx, srv.URL+PathUI), b.Tail())

	// Without the token: the page asks for it.
	require.NoError(t, pg.WaitTrue(ctx, `!document.getElementById('auth').hidden && document.getElementById('conn').textContent.includes('Bearer')`, 10*time.Second))
	require.NoError(t, pg.Eval(ctx, fmt.Sprintf(`document.getElementById('token').value = %q; document.getElementById('authform').requestSubmit()`, token), nil))
	require.NoError(t, pg.WaitTrue(ctx, fmt.Sprintf(`fmnodeUI.ok && fmnodeUI.n === %d && document.getElementById('auth').hidden`, parts), 15*time.Second),
		"the page never drew the dashboard; errors %v", pg.Errors())

	type cell struct {
		P      int     `json:"p"`
		Region string  `json:"region"`
		Colour string  `json:"colour"`
		W      float64 `json:"w"`
		Bottom float64 `json:"bottom"`
	}
	cells := func() []cell {
		var cs []cell
		require.NoError(t, pg.Eval(ctx, `Array.from(document.querySelectorAll('#grid .cell')).map(c => { const r = c.getBoundingClientRect();
			return {p: Number(c.dataset.p), region: c.dataset.region, colour: getComputedStyle(c).backgroundColor, w: r.width, bottom: r.bottom + window.scrollY}; })`, &cs))
		return cs
	}
	var legend map[string]string
	require.NoError(t, pg.Eval(ctx, `Object.fromEntries(Array.from(document.querySelectorAll('#legend .key[data-region]')).map(k =>
		[k.dataset.region, getComputedStyle(k.querySelector('.swatch')).backgroundColor]))`, &legend))
	require.Len(t, legend, 3)
	var gridTop float64
	require.NoError(t, pg.Eval(ctx, `document.getElementById('grid').getBoundingClientRect().top + window.scrollY`, &gridTop))
	cs := cells()
	require.Len(t, cs, parts)
	for i, c := range cs {
		region := d.Regions[i%3].Name
		require.Equal(t, region, c.Region, "partition %d", c.P)
		require.Equal(t, legend[region], c.Colour, "partition %d", c.P)
		require.GreaterOrEqual(t, c.W, 6.0, "a cell one can point at")
	}
	height := cs[len(cs)-1].Bottom - gridTop
	t.Logf("%d partitions: cells %.0f px, grid %.0f px high", parts, cs[0].W, height)
	assert.Less(t, height, 600.0, "the grid fits a screen with the regions above it")

	// A switchover completes and east's node dies: recoloured in place,
	// marked, listed.
	mu.Lock()
	require.Equal(t, 1, d.Write[40])
	d.Write[40] = 2 // partition 41: north -> west
	d.Epoch[40] = 2
	for i := range parts {
		if d.Write[i] == 0 {
			d.Flags[i] = FlagWriteRegionDown
		}
	}
	d.Nodes[0].Failover, d.Nodes[0].Reached, d.Nodes[0].Error = "dead", false, "dial tcp: connection refused"
	d.InProgress = append(d.InProgress, DashOp{Partition: 1, Kind: "failover", From: "east", Why: "n1, the write region's node, is dead in n2's failover view (membership: dead)"})
	d.InProgressTotal = parts / 3
	d.Transitions = append(d.Transitions, PartitionTransition{Partition: 41, TransitionView: TransitionView{Epoch: 2, At: time.Now(), Kind: "complete-switchover", From: "north", To: "west", Who: "west", Why: "target holds every LSN up to 9"}})
	mu.Unlock()
	require.NoError(t, pg.WaitTrue(ctx, fmt.Sprintf(`(() => { const c = document.querySelector('#grid .cell[data-p="41"]');
		return c.dataset.region === 'west' && getComputedStyle(c).backgroundColor === %q; })()`, legend["west"]), 5*time.Second))
	var marked struct {
		Down, InProgress int
		Dead             string
		Transition       string
	}
	require.NoError(t, pg.WaitTrue(ctx, `document.querySelectorAll('#progress tbody tr[data-p]').length === 1`, 5*time.Second))
	require.NoError(t, pg.Eval(ctx, `({Down: document.querySelectorAll('#grid .cell.down').length,
		InProgress: document.querySelectorAll('#progress tbody tr[data-p]').length,
		Dead: document.querySelector('#regions tr[data-node="n1"]').dataset.state,
		Transition: document.querySelector('#transitions tbody tr[data-p="41"]').textContent})`, &marked))
	assert.Equal(t, (parts+2)/3, marked.Down, "every partition written in east is marked")
	assert.Equal(t, 1, marked.InProgress)
	assert.Equal(t, "unreached", marked.Dead)
	assert.Contains(t, marked.Transition, "target holds every LSN up to 9")

	// At most one poll a second (counted here over a window: a single
	// interval seen by the server also carries the browser's delays).
	mu.Lock()
	before := polls
	mu.Unlock()
	const window = 3 * time.Second
	time.Sleep(window)
	mu.Lock()
	during := polls - before
	mu.Unlock()
	assert.LessOrEqual(t, during, int(window/time.Second)+1, "polls in %v", window)
	assert.GreaterOrEqual(t, during, 2, "the page keeps polling")

	png, err := pg.Screenshot(ctx)
	require.NoError(t, err)
	path := filepath.Join(t.ArtifactDir(), "status-page-4300.png")
	require.NoError(t, os.WriteFile(path, png, 0o644))
	var docHeight int
	require.NoError(t, pg.Eval(ctx, `document.documentElement.scrollHeight`, &docHeight))
	t.Logf("screenshot: %s (%d bytes; document %d px high)", path, len(png), docHeight)
	assert.Empty(t, pg.Errors())
}
