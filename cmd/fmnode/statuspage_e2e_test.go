package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/internal/agent"
	"github.com/fmnode/fmnode/internal/browsertest"
)

// statusPagePartitions is the test cluster's partition count;
// FMNODE_STATUS_PAGE_PARTITIONS changes it (4300 shows the page at the
// paper's scale; it takes longer to initialise).
const statusPagePartitions = 96

// statusPageCell is one partition cell as the browser renders it.
type statusPageCell struct {
	P      int    `json:"p"`
	Region string `json:"region"`
	Colour string `json:"colour"`
}

// TestStatusPageInChromium runs three `fmnode agent` processes (mutual
// TLS, one per region), loads an agent's status page in headless
// Chromium and checks through the DOM that every partition is shown
// with the write region the cluster reports, in its region's legend
// colour; then a switchover through the CLI must change the cell's
// colour within 2 s of the CLI's return. The page's screenshots go to
// the test's artifact directory (kept with `go test -artifacts`).
//
// Chromium reaches the agent through a loopback reverse proxy in this
// test that presents the operator's client certificate: the agent's rule
// (no page without a verified client certificate) is checked first
// against the agent itself, without and with one; a headless Chromium
// has no way to pick a client certificate from its store without a
// system-wide policy file.
func TestStatusPageInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("real agent processes and a browser")
	}
	chromium := browsertest.Require(t)
	parts := statusPagePartitions
	if s := os.Getenv("FMNODE_STATUS_PAGE_PARTITIONS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "FMNODE_STATUS_PAGE_PARTITIONS")
		parts = n
	}
	began := time.Now()
	c := newE2ECluster(t, 3)
	for _, n := range c.nodes {
		c.start(n)
	}
	for _, n := range c.nodes {
		c.waitUp(n)
	}
	west := c.nodes[2]
	out, code := c.run(append([]string{"init"}, append(c.adminArgs(west), "--partitions", strconv.Itoa(parts), "--profile", "fast",
		"--regions", "east,north,west", "--expect-nodes", "3", "--wait", "60s")...)...)
	require.Equal(t, 0, code, out)
	for _, n := range c.nodes {
		c.waitReady(n, 90*time.Second)
	}
	t.Logf("cluster of 3 agents with %d partitions ready in %v", parts, time.Since(began).Round(time.Millisecond))

	// The page is under the API's client-certificate rule.
	pageURL := "https://" + west.api + agent.PathUI
	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: c.lc.tlsCfg.RootCAs}}, Timeout: 10 * time.Second}
	for _, tt := range []struct {
		name   string
		client *http.Client
		status int
	}{
		{"no client certificate", noCert, http.StatusUnauthorized},
		{"the operator's client certificate", c.lc.client, http.StatusOK},
	} {
		resp, err := tt.client.Get(pageURL)
		require.NoError(t, err, tt.name)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, tt.status, resp.StatusCode, "%s: %s", tt.name, b)
	}

	target, err := url.Parse("https://" + west.api)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = c.lc.client.Transport
	proxy := httptest.NewServer(rp)
	defer proxy.Close()

	b := browsertest.Start(t, browsertest.Options{Path: chromium, Width: 1400, Height: 1100})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg := b.NewPage(ctx)
	require.NoError(t, pg.Navigate(ctx, proxy.URL+agent.PathUI), b.Tail())
	require.NoError(t, pg.WaitTrue(ctx, fmt.Sprintf(`window.fmnodeUI && fmnodeUI.ok && fmnodeUI.n === %d &&
		Array.from(document.querySelectorAll('#grid .cell')).every(c => c.dataset.region !== '')`, parts), 30*time.Second),
		"the page never showed every partition's region; page errors: %v", pg.Errors())

	// What the cluster says of every partition, as `fmnode status` does.
	var st agent.ClusterStatus
	resp, err := c.lc.client.Get("https://" + west.api + agent.PathStatus)
	require.NoError(t, err)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	resp.Body.Close()
	require.Len(t, st.Partitions, parts)
	want := map[int]string{}
	for _, p := range st.Partitions {
		want[int(p.ID)] = p.WriteRegion
	}

	legend := func() map[string]string {
		var keys []struct{ Region, Colour string }
		require.NoError(t, pg.Eval(ctx, `Array.from(document.querySelectorAll('#legend .key[data-region]')).map(k =>
			({Region: k.dataset.region, Colour: getComputedStyle(k.querySelector('.swatch')).backgroundColor}))`, &keys))
		out := map[string]string{}
		for _, k := range keys {
			out[k.Region] = k.Colour
		}
		return out
	}
	cells := func() []statusPageCell {
		var cs []statusPageCell
		require.NoError(t, pg.Eval(ctx, `Array.from(document.querySelectorAll('#grid .cell')).map(c =>
			({p: Number(c.dataset.p), region: c.dataset.region, colour: getComputedStyle(c).backgroundColor}))`, &cs))
		return cs
	}
	colours := legend()
	require.Len(t, colours, 3, "one legend key per region: %v", colours)
	seen := map[string]bool{}
	for r, col := range colours {
		require.False(t, seen[col], "regions share the colour %s: %v", col, colours)
		seen[col] = true
		_ = r
	}
	shown := cells()
	require.Len(t, shown, parts, "one cell per partition")
	for i, cell := range shown {
		require.Equal(t, i+1, cell.P, "cells in partition order")
		require.Equal(t, want[cell.P], cell.Region, "partition %d's region", cell.P)
		require.Equal(t, colours[cell.Region], cell.Colour, "partition %d's colour is its region's", cell.P)
	}
	// Every node as west's agent sees it (on a loaded machine a node
	// may be suspect for a moment: the page shows what the agent says).
	nodesAlive := `(() => { const s = Object.fromEntries(Array.from(document.querySelectorAll('#regions tr[data-node]')).map(r => [r.dataset.node, r.dataset.state]));
		return s.n1 === 'alive' && s.n2 === 'alive' && s.n3 === 'self'; })()`
	if err := pg.WaitTrue(ctx, nodesAlive, 20*time.Second); err != nil {
		var nodes map[string]string
		_ = pg.Eval(ctx, `Object.fromEntries(Array.from(document.querySelectorAll('#regions tr[data-node]')).map(r => [r.dataset.node, r.dataset.state]))`, &nodes)
		t.Fatalf("the nodes never all showed alive (west's is self): %v: %v", nodes, err)
	}
	shot(t, pg, ctx, "status-page-before.png")

	// A switchover through the CLI: the cell changes colour within 2 s
	// of the CLI seeing it done.
	const p = 7
	from := want[p]
	to := "north"
	if from == to {
		to = "west"
	}
	require.NotEqual(t, colours[from], colours[to])
	asked := time.Now()
	// A refusal because the partition has a register proposal in flight
	// (the write quorum settling after init) is retried, as an operator
	// would; any other refusal fails.
	for {
		out, code = c.run(append([]string{"switchover", strconv.Itoa(p), "--to", to, "--reason", "status page test", "--wait"}, c.adminArgs(west)...)...)
		if code == 0 || !strings.Contains(out, "proposal in flight") || time.Since(asked) > 20*time.Second {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.Equal(t, 0, code, out)
	done := time.Now()
	var last []statusPageCell
	changed := false
	for time.Since(done) < 2*time.Second {
		require.NoError(t, pg.Eval(ctx, fmt.Sprintf(`[document.querySelector('#grid .cell[data-p="%d"]')].map(c =>
			({p: Number(c.dataset.p), region: c.dataset.region, colour: getComputedStyle(c).backgroundColor}))`, p), &last))
		if len(last) == 1 && last[0].Region == to && last[0].Colour == colours[to] {
			changed = true
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	shown2 := time.Now()
	if !changed {
		shot(t, pg, ctx, "status-page-unchanged.png")
		t.Fatalf("partition %d's cell still %+v 2 s after `fmnode switchover --wait` returned (it moved %s -> %s); page: ok=%v, errors %v",
			p, last, from, to, pg.Eval(ctx, "fmnodeUI.ok", nil) == nil, pg.Errors())
	}
	t.Logf("partition %d %s -> %s: the CLI took %v; the cell changed colour %v after it returned",
		p, from, to, done.Sub(asked).Round(time.Millisecond), shown2.Sub(done).Round(time.Millisecond))

	// The transition and its reason are listed; the other cells kept
	// their colour.
	require.NoError(t, pg.WaitTrue(ctx, fmt.Sprintf(`Array.from(document.querySelectorAll('#transitions tbody tr[data-p="%d"]')).some(r => r.textContent.includes('status page test'))`, p), 5*time.Second),
		"the switchover's reason is not in the transitions table")
	for _, cell := range cells() {
		if cell.P != p {
			require.Equal(t, want[cell.P], cell.Region, "partition %d", cell.P)
		}
	}
	// The explanation, as `fmnode explain` gives it, on a click.
	require.NoError(t, pg.Eval(ctx, fmt.Sprintf(`document.querySelector('#grid .cell[data-p="%d"]').click()`, p), nil))
	require.NoError(t, pg.WaitTrue(ctx, `document.getElementById('dexplain').textContent.includes('sees it:')`, 10*time.Second),
		"no explanation on a click")
	shot(t, pg, ctx, "status-page-after.png")
	assert.Empty(t, pg.Errors(), "the page logged errors")
	t.Logf("whole test %v", time.Since(began).Round(time.Millisecond))
}

// shot saves a screenshot of the page under the test's artifact
// directory and logs where.
func shot(t *testing.T, pg *browsertest.Page, ctx context.Context, name string) {
	t.Helper()
	png, err := pg.Screenshot(ctx)
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(t.ArtifactDir(), name)
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
}
