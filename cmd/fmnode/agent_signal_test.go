package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/internal/agent"
	"github.com/fmnode/fmnode/internal/proctest"
)

// TestAgentProcessSignals runs one agent process (insecure, no init):
// --print-config shows the effective config with flags over the file;
// SIGHUP reloads the log level from the edited file and says what needs a
// restart; SIGTERM exits 0.
func TestAgentProcessSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("a real agent process")
	}
	bin := proctest.Build(t, "github.com/fmnode/fmnode/cmd/fmnode")
	dir := t.TempDir()
	ports := proctest.FreePorts(t, 3)
	api := fmt.Sprintf("127.0.0.1:%d", ports[1])
	write := func(level string, timeout string) string {
		cfg := fmt.Sprintf("name: solo\nnode_id: 1\nregion: east\nzone: east-a\ncluster: sig\ndata_dir: data\ninsecure: true\n"+
			"bind:\n  node_addr: 127.0.0.1:%d\n  api_addr: %s\n  gossip_addr: 127.0.0.1:%d\nlog:\n  level: %s\nshutdown_timeout: %s\n",
			ports[0], api, ports[2], level, timeout)
		path := filepath.Join(dir, "node.yaml")
		require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
		return path
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FMNODE_") {
			env = append(env, kv)
		}
	}
	path := write("info", "10s")

	p := proctest.Start(t, proctest.ProcSpec{Name: "print-config", Path: bin, Env: env,
		Args: []string{"agent", "--config", path, "--print-config", "--log-level", "warn"}})
	code, err := p.Wait(time.Minute)
	require.NoError(t, err)
	require.Equal(t, 0, code, p.Tail())
	require.Contains(t, p.Tail(), "level: warn", "the flag must win over the file")
	require.Contains(t, p.Tail(), filepath.Join(dir, "data"), "data_dir is resolved against the file's directory")

	a := proctest.Start(t, proctest.ProcSpec{Name: "agent", Path: bin, Env: env, Args: []string{"agent", "--config", path}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, proctest.WaitHTTP(ctx, "http://"+api+agent.PathHealthz, http.DefaultClient), a.Tail())
	require.Contains(t, a.Tail(), "without TLS", "--insecure must warn at start")

	write("debug", "20s")
	require.NoError(t, a.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { return strings.Contains(a.Tail(), "msg=reloaded") }, 10*time.Second, 20*time.Millisecond, a.Tail())
	tail := a.Tail()
	line := tail[strings.Index(tail, "msg=reloaded"):]
	line = line[:strings.IndexByte(line, '\n')]
	require.Contains(t, line, "log.level")
	require.Contains(t, line, "shutdown_timeout", "a field that needs a restart must be named")

	code, err = a.Stop(15 * time.Second)
	require.NoError(t, err, a.Tail())
	require.Equal(t, 0, code, a.Tail())
	require.Contains(t, a.Tail(), "shut down")
}
