package agent

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/internal/agentcfg"
)

const testToken = "s3cret-admin-token"

// adminCall sends one admin request with token (none when empty) and
// decodes the answer into out (when set); it returns the status.
func adminCall(t *testing.T, method, url, token string, in, out any) int {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		require.NoError(t, err)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, body)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if out != nil {
		require.NoError(t, json.Unmarshal(b, out), "%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return resp.StatusCode
}

// startTokenCluster is startCluster with admin.token_file set on every
// agent.
func startTokenCluster(t *testing.T) ([]*tagent, string) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "admin.token")
	require.NoError(t, os.WriteFile(file, []byte(testToken+"\n"), 0o600))
	as := startClusterWith(t, 3, func(c *agentcfg.Config) { c.Admin.TokenFile = file }, testToken)
	return as, file
}

// TestAdminOperations: the operator endpoints of three agents with an
// admin token: calls without it or with a wrong one are refused and
// change nothing; status, members, partition, explain and history
// answer; a switchover asked of an agent outside the write region is
// passed there and completes; refused switchovers say why; pause and
// resume, per partition and global; a drain empties its region.
func TestAdminOperations(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets, fsyncs and gossip")
	}
	as, tokenFile := startTokenCluster(t)
	api := func(i int) string { return "http://" + as[i].cfg.Bind.APIAddr }
	tok := testToken
	show := func(i int, p string) PartitionDetail {
		var d PartitionDetail
		require.Equal(t, http.StatusOK, adminCall(t, "GET", api(i)+PathPartition+"?id="+p, tok, nil, &d))
		return d
	}

	t.Run("auth", func(t *testing.T) {
		tests := []struct {
			name, token string
			status      int
			code        string
		}{
			{"no token", "", http.StatusUnauthorized, CodeUnauthorized},
			{"wrong token", "not-the-token", http.StatusForbidden, CodeForbidden},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var eb RefusedBody
				require.Equal(t, tt.status, adminCall(t, "POST", api(0)+PathPause, tt.token, PauseRequest{Partition: 1, Paused: true, Reason: "x"}, &eb))
				assert.Equal(t, tt.code, eb.Code)
				require.Equal(t, tt.status, adminCall(t, "GET", api(1)+PathStatus, tt.token, nil, &eb))
				require.Equal(t, tt.status, adminCall(t, "GET", api(1)+PathSpec, tt.token, nil, &eb))
			})
		}
		// The refused pause did not happen.
		time.Sleep(200 * time.Millisecond)
		assert.False(t, show(0, "1").Paused, "a refused call paused the partition")
		// Health and readiness need no token.
		require.Equal(t, http.StatusOK, adminCall(t, "GET", api(0)+PathReadyz, "", nil, nil))
	})

	t.Run("status", func(t *testing.T) {
		var cs ClusterStatus
		require.Equal(t, http.StatusOK, adminCall(t, "GET", api(1)+PathStatus, tok, nil, &cs))
		assert.Equal(t, "n2", cs.Answered)
		require.Len(t, cs.Nodes, 3)
		for _, n := range cs.Nodes {
			assert.True(t, n.Reached, "%s not reached: %s", n.Name, n.Error)
			assert.Equal(t, "alive", n.Membership, n.Name)
			require.NotNil(t, n.Lease, n.Name)
		}
		require.Len(t, cs.Partitions, 4)
		require.Len(t, cs.Regions, 3)
		assert.Equal(t, "east", cs.Regions[0].Name)
		assert.True(t, cs.Regions[0].Preferred)
		assert.Equal(t, []uint32{1, 2, 3, 4}, cs.Regions[0].WritePartitions)
		assert.Empty(t, cs.InProgress)
	})

	t.Run("members", func(t *testing.T) {
		var mr MembersResponse
		require.Equal(t, http.StatusOK, adminCall(t, "GET", api(2)+PathMembers, tok, nil, &mr))
		require.Len(t, mr.Members, 3)
		for _, m := range mr.Members {
			assert.Equal(t, "alive", m.State)
			assert.True(t, m.InSpec)
		}
	})

	t.Run("partition explain history", func(t *testing.T) {
		d := show(0, "1")
		assert.Equal(t, uint64(1), d.Epoch)
		assert.Equal(t, "east", d.WriteRegion)
		assert.Equal(t, "steady", d.Phase)
		assert.Len(t, d.WriteQuorum, 3)
		require.Len(t, d.Table, 1)
		assert.True(t, d.Table[0].Open)
		require.Len(t, d.Replicas, 3)
		for _, r := range d.Replicas {
			require.NotNil(t, r.Lag, "the write region's node knows every follower's position: %+v", r)
		}
		assert.Empty(t, d.ReplicasFrom, "n1 is the write region's node: its own view")
		// Asked elsewhere, the replicas are the write region's node's view
		// (the followers do not hear each other's progress).
		for _, i := range []int{1, 2} {
			d := show(i, "1")
			assert.Equal(t, "n1", d.ReplicasFrom, as[i].cfg.Name)
			assert.Empty(t, d.ReplicasNote)
			for _, r := range d.Replicas {
				assert.NotNil(t, r.Lag, "asked %s: %+v", as[i].cfg.Name, r)
			}
		}

		var ex ExplainResponse
		require.Equal(t, http.StatusOK, adminCall(t, "GET", api(1)+PathExplain+"?id=1", tok, nil, &ex))
		assert.Equal(t, "none", ex.Decision)
		assert.NotEmpty(t, ex.Candidates)
		assert.Contains(t, ex.Text, "partition p/1")
		assert.Contains(t, ex.Text, "decision:")

		var hr HistoryResponse
		require.Equal(t, http.StatusOK, adminCall(t, "GET", api(0)+PathHistory, tok, nil, &hr))
		assert.Len(t, hr.Partitions, 4)

		var eb RefusedBody
		require.Equal(t, http.StatusBadRequest, adminCall(t, "GET", api(0)+PathPartition+"?id=9", tok, nil, &eb))
		assert.Contains(t, eb.Error, "1..4")
	})

	t.Run("switchover refused", func(t *testing.T) {
		tests := []struct{ to, want string }{
			{"mars", "not a region of this cluster"},
			{"east", "already the write region"},
		}
		for _, tt := range tests {
			var rb RefusedBody
			require.Equal(t, http.StatusConflict, adminCall(t, "POST", api(2)+PathSwitchover, tok, SwitchoverRequest{Partition: 1, To: tt.to}, &rb), tt.to)
			assert.Equal(t, CodeRefused, rb.Code)
			require.NotEmpty(t, rb.Reasons)
			assert.Contains(t, rb.Reasons[0], tt.want)
			assert.Contains(t, rb.Explain, "decision:", "a refusal carries the explanation")
		}
	})

	t.Run("switchover", func(t *testing.T) {
		// Asked of west's agent: passed to east's, which proposes it.
		var sr SwitchoverResponse
		require.Equal(t, http.StatusAccepted, adminCall(t, "POST", api(2)+PathSwitchover, tok, SwitchoverRequest{Partition: 1, To: "north", Reason: "test"}, &sr))
		assert.Equal(t, "east", sr.From)
		assert.Equal(t, "n1", sr.Node)
		require.Eventually(t, func() bool {
			d := show(1, "1")
			return d.WriteRegion == "north" && d.Phase == "steady"
		}, 20*time.Second, 50*time.Millisecond, "the switchover to north never completed")
		var hr HistoryResponse
		require.Equal(t, http.StatusOK, adminCall(t, "GET", api(1)+PathHistory+"?id=1", tok, nil, &hr))
		require.Len(t, hr.Partitions, 1)
		var kinds []string
		for _, tr := range hr.Partitions[0].Transitions {
			kinds = append(kinds, tr.Kind)
			assert.False(t, tr.At.IsZero())
			assert.NotEmpty(t, tr.Who)
		}
		assert.Contains(t, kinds, "start-switchover")
		assert.Contains(t, kinds, "complete-switchover")
	})

	t.Run("pause and resume", func(t *testing.T) {
		var pr PauseResponse
		// The answer waits for the register write: 200 with the version
		// that holds the pause (before, 202 at the proposal, which a lost
		// write left untrue).
		require.Equal(t, http.StatusOK, adminCall(t, "POST", api(1)+PathPause, tok, PauseRequest{Partition: 2, Paused: true, Reason: "maintenance"}, &pr))
		require.True(t, pr.Paused)
		require.Positive(t, pr.Version)
		require.False(t, pr.Already)
		require.Eventually(t, func() bool { d := show(2, "2"); return d.Paused && d.PauseReason == "maintenance" }, 10*time.Second, 50*time.Millisecond)
		again := PauseResponse{}
		require.Equal(t, http.StatusOK, adminCall(t, "POST", api(1)+PathPause, tok, PauseRequest{Partition: 2, Paused: true, Reason: "maintenance"}, &again))
		require.True(t, again.Already, "a second pause writes nothing")
		require.GreaterOrEqual(t, again.Version, pr.Version)
		require.Equal(t, http.StatusOK, adminCall(t, "POST", api(1)+PathPause, tok, PauseRequest{Partition: 2, Paused: false}, &pr))
		require.Positive(t, pr.Version)
		require.Eventually(t, func() bool { return !show(2, "2").Paused }, 10*time.Second, 50*time.Millisecond)

		require.Equal(t, http.StatusOK, adminCall(t, "POST", api(0)+PathPause, tok, PauseRequest{Paused: true, Reason: "global test"}, &pr))
		require.Len(t, pr.Agents, 3)
		for _, ag := range pr.Agents {
			assert.True(t, ag.OK, "%s: %s", ag.Node, ag.Error)
		}
		var cs ClusterStatus
		require.Equal(t, http.StatusOK, adminCall(t, "GET", api(2)+PathStatus, tok, nil, &cs))
		for _, n := range cs.Nodes {
			assert.True(t, n.GlobalPause, n.Name)
			assert.Equal(t, "global test", n.GlobalPauseReason)
		}
		require.Equal(t, http.StatusOK, adminCall(t, "POST", api(0)+PathPause, tok, PauseRequest{Paused: false}, nil))
		var after ClusterStatus // fresh: decoding into cs would keep its omitted fields
		require.Equal(t, http.StatusOK, adminCall(t, "GET", api(2)+PathStatus, tok, nil, &after))
		for _, n := range after.Nodes {
			assert.False(t, n.GlobalPause, n.Name)
		}
	})

	t.Run("drain", func(t *testing.T) {
		var dr DrainResponse
		require.Equal(t, http.StatusOK, adminCall(t, "POST", api(1)+PathDrain, tok, DrainRequest{Region: "east", Reason: "test"}, &dr))
		assert.True(t, dr.Active)
		require.Len(t, dr.Nodes, 1)
		assert.Equal(t, "n1", dr.Nodes[0].Node)
		require.Eventually(t, func() bool {
			require.Equal(t, http.StatusOK, adminCall(t, "GET", api(2)+PathDrain+"?region=east", tok, nil, &dr))
			return dr.Remaining == 0
		}, 30*time.Second, 100*time.Millisecond, "east never drained: %+v", dr)
		for _, p := range []string{"1", "2", "3", "4"} {
			require.Eventually(t, func() bool { d := show(0, p); return d.WriteRegion != "east" && d.Phase == "steady" }, 10*time.Second, 50*time.Millisecond, p)
		}
		require.Equal(t, http.StatusOK, adminCall(t, "POST", api(0)+PathDrain, tok, DrainRequest{Region: "east", Stop: true}, &dr))
		assert.False(t, dr.Active)
		var rb RefusedBody
		require.Equal(t, http.StatusConflict, adminCall(t, "POST", api(0)+PathDrain, tok, DrainRequest{Region: "mars"}, &rb))
		assert.Contains(t, rb.Error, "not a region")
	})

	t.Run("token reload", func(t *testing.T) {
		require.NoError(t, os.WriteFile(tokenFile, []byte("rotated\n"), 0o600))
		applied, _, err := as[0].a.Reload(as[0].cfg)
		require.NoError(t, err)
		assert.Contains(t, applied, "admin.token_file")
		require.Equal(t, http.StatusForbidden, adminCall(t, "GET", api(0)+PathMembers, tok, nil, nil))
		require.Equal(t, http.StatusOK, adminCall(t, "GET", api(0)+PathMembers, "rotated", nil, nil))
	})
}

// TestAdminTokenFileAtStart: a missing or empty token file is refused
// when the agent is made.
func TestAdminTokenFileAtStart(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte(" \n"), 0o600))
	for _, file := range []string{filepath.Join(dir, "missing"), empty} {
		cfg := testConfig(t, 1, []int{1, 2, 3, 4}, dir)
		cfg.Admin.TokenFile = file
		_, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
		require.ErrorIs(t, err, ErrAdminToken, file)
	}
}
