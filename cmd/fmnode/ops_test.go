package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/internal/agent"
)

const cliToken = "cli-token"

// fakeAgent answers the operator endpoints with canned bodies, as an
// agent run with admin.token_file would (401 without the token). The
// switchover is refused towards "west"; --wait sees the new write region
// on the second read.
func fakeAgent(t *testing.T) (addr string, pauses *atomic.Int32) {
	t.Helper()
	pauses = new(atomic.Int32)
	var reads atomic.Int32
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	one := func(v any) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { writeTestJSON(w, http.StatusOK, v) }
	}
	lag := uint64(3)
	mux := http.NewServeMux()
	mux.HandleFunc(agent.PathStatus, one(agent.ClusterStatus{Answered: "n1", SpecVersion: 2,
		Regions: []agent.RegionView{{Name: "east", Preferred: true, Nodes: []string{"n1"}, WritePartitions: []uint32{1, 2}}, {Name: "north", Nodes: []string{"n2"}, WritePartitions: []uint32{}}},
		Nodes: []agent.ClusterNode{
			{NodeView: agent.NodeView{ID: 1, Name: "n1", Region: "east", Membership: "alive", Failover: "self", Self: true}, Reached: true, Lease: &agent.LeaseView{Valid: true, Until: at}},
			{NodeView: agent.NodeView{ID: 2, Name: "n2", Region: "north", Membership: "dead", Failover: "dead"}, Error: "connection refused"},
		},
		Partitions: []agent.PartitionBrief{{ID: 1, Epoch: 1, WriteRegion: "east", Phase: "steady"}, {ID: 2, Epoch: 3, WriteRegion: "east", Phase: "switchover", Target: "north", Since: at}},
		InProgress: []agent.PartitionBrief{{ID: 2, Epoch: 3, WriteRegion: "east", Phase: "switchover", Target: "north", Since: at}},
	}))
	mux.HandleFunc(agent.PathMembers, one(agent.MembersResponse{Answered: "n1", Members: []agent.MemberView{{NodeID: 1, Name: "n1", Region: "east", State: "alive", InSpec: true}}}))
	mux.HandleFunc(agent.PathPartition, func(w http.ResponseWriter, r *http.Request) {
		d := agent.PartitionDetail{ID: 1, Answered: "n1", Epoch: 1, WriteRegion: "east", Phase: "steady", Consistency: "strong",
			WriteQuorum: []string{"east", "north"}, MinDurability: 2, Priority: []string{"east", "north"},
			Table:    []agent.EpochView{{Epoch: 1, WriteRegion: "east", Open: true}},
			Replicas: []agent.ReplicaView{{Region: "east", Node: 1, Live: true, Reported: true, Epoch: 1, LastLSN: 10, Lag: new(uint64), InWriteQuorum: true}, {Region: "north", Node: 2, Live: true, Reported: true, Epoch: 1, LastLSN: 7, Lag: &lag, InWriteQuorum: true}}}
		if reads.Add(1) > 1 {
			d.Epoch, d.WriteRegion = 2, "north"
		}
		writeTestJSON(w, http.StatusOK, d)
	})
	mux.HandleFunc(agent.PathExplain, one(agent.ExplainResponse{ID: 1, Answered: "n1", Decision: "none", Text: "partition p/1: epoch 1, write region east\n  decision: none\n",
		Candidates: []agent.CandidateView{{Region: "north", Eligible: true, Why: "in the write quorum", Priority: 1, LagOps: 3}}, LastDecision: "none", Suppressed: "paused"}))
	mux.HandleFunc(agent.PathHistory, one(agent.HistoryResponse{Answered: "n1", Partitions: []agent.PartitionHistory{{ID: 1, Epoch: 2, WriteRegion: "north",
		Transitions: []agent.TransitionView{{Epoch: 1, At: at, Kind: "start-switchover", From: "east", To: "north", Who: "east", Why: "operator: test"}}}}}))
	mux.HandleFunc(agent.PathSwitchover, func(w http.ResponseWriter, r *http.Request) {
		var req agent.SwitchoverRequest
		require.NoError(t, json.NewDecoder(r.Body).Decode(&req))
		if req.To == "west" {
			writeTestJSON(w, http.StatusConflict, agent.RefusedBody{Code: agent.CodeRefused, Error: "failover: request refused: west is a never-promote region",
				Reasons: []string{"failover: request refused: west is a never-promote region"}, Explain: "partition p/1: epoch 1\n  decision: none\n"})
			return
		}
		writeTestJSON(w, http.StatusAccepted, agent.SwitchoverResponse{Partition: req.Partition, From: "east", To: req.To, Epoch: 1, Node: "n1", RequestedAt: time.Now()})
	})
	mux.HandleFunc(agent.PathDrain, one(agent.DrainResponse{Region: "east", Active: true, Remaining: 0, Nodes: []agent.DrainView{{Region: "east", Node: "n1", Active: true}}}))
	mux.HandleFunc(agent.PathPause, func(w http.ResponseWriter, r *http.Request) {
		pauses.Add(1)
		writeTestJSON(w, http.StatusOK, agent.PauseResponse{Paused: true, Agents: []agent.AgentAnswer{{Node: "n1", OK: true}, {Node: "n2", Error: "timeout"}}})
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+cliToken {
			writeTestJSON(w, http.StatusUnauthorized, agent.RefusedBody{Code: agent.CodeUnauthorized, Error: "agent: admin calls need a bearer token"})
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), pauses
}

func writeTestJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func TestCLIOps(t *testing.T) {
	addr, pauses := fakeAgent(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(cliToken+"\n"), 0o600))
	common := []string{"--addr", addr, "--insecure", "--token-file", tokenFile}
	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     []string
		stderr     []string
		jsonOutput bool
	}{
		{name: "status", args: []string{"status"}, stdout: []string{"REGION", "east", "1,2", "n2", "dead", "no: connection refused", "valid until", "IN PROGRESS"}},
		{name: "status json", args: []string{"status", "-o", "json"}, jsonOutput: true, stdout: []string{`"answered_by": "n1"`}},
		{name: "members", args: []string{"members"}, stdout: []string{"NAME", "n1", "alive"}},
		{name: "partition show", args: []string{"partition", "show", "1"}, stdout: []string{"write region east", "EPOCH", "open", "LAG", "north"}},
		{name: "partition usage", args: []string{"partition", "1"}, code: 2},
		{name: "explain", args: []string{"explain", "1"}, stdout: []string{"decision: none", "CANDIDATE", "north", "blocked by policy: paused"}},
		{name: "explain json", args: []string{"explain", "1", "-o", "json"}, jsonOutput: true, stdout: []string{`"decision": "none"`}},
		{name: "history", args: []string{"history", "1"}, stdout: []string{"WHEN", "start-switchover", "operator: test", "2026-01-02T03:04:05Z"}},
		{name: "switchover refused", args: []string{"switchover", "1", "--to", "west"}, code: 1, stderr: []string{"refused", "never-promote", "decision: none"}},
		{name: "switchover wait", args: []string{"switchover", "1", "--to", "north", "--wait"}, stdout: []string{"proposed by n1", "write region north at epoch 2"}},
		{name: "switchover needs --to", args: []string{"switchover", "1"}, code: 2},
		{name: "drain", args: []string{"drain", "--region", "east", "--wait"}, stdout: []string{"drain of east: active, 0 partitions"}},
		{name: "pause needs a reason", args: []string{"pause"}, code: 2},
		{name: "pause partly applied", args: []string{"pause", "--reason", "maintenance"}, code: 1, stdout: []string{"n2", "no: timeout"}, stderr: []string{"1 of 2 agents did not confirm it", "next read of the spec"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := dispatch(context.Background(), append(tt.args, common...), &out, &errb)
			require.Equal(t, tt.code, code, "stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
			for _, s := range tt.stdout {
				assert.Contains(t, out.String(), s)
			}
			for _, s := range tt.stderr {
				assert.Contains(t, errb.String(), s)
			}
			if tt.jsonOutput {
				var v map[string]any
				require.NoError(t, json.Unmarshal(out.Bytes(), &v), out.String())
			}
		})
	}

	t.Run("no token", func(t *testing.T) {
		before := pauses.Load()
		var out, errb bytes.Buffer
		code := dispatch(context.Background(), []string{"pause", "--reason", "x", "--addr", addr, "--insecure"}, &out, &errb)
		require.Equal(t, 1, code)
		assert.Contains(t, errb.String(), "HTTP 401")
		assert.Equal(t, before, pauses.Load(), "the pause reached the agent without a token")
	})
}
