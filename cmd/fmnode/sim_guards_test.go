package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fmnode/fmnode/guard"
)

// --check-guards sums guards_fired over the summaries only and fails,
// naming them, while a required guard has no count.
func TestSimCheckGuards(t *testing.T) {
	path := filepath.Join(t.TempDir(), "summaries.jsonl")
	req := guard.Required()
	require.Greater(t, len(req), 2)
	half := map[string]uint64{}
	rest := map[string]uint64{}
	for i, n := range req {
		if i%2 == 0 {
			half[n.String()] = uint64(i + 1)
		} else {
			rest[n.String()] = 1
		}
	}
	write := func(objs ...any) {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		require.NoError(t, err)
		for _, o := range objs {
			require.NoError(t, json.NewEncoder(f).Encode(o))
		}
		require.NoError(t, f.Close())
	}
	check := func() (int, string) {
		var out, errb bytes.Buffer
		code := runSim(context.Background(), []string{"--check-guards", path}, &out, &errb)
		return code, out.String() + errb.String()
	}
	// A run object's guards do not count: only the summaries do.
	write(map[string]any{"seed": 1, "guards_fired": rest},
		simSummary{Summary: true, GuardsFired: half})
	code, out := check()
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "required guards never fired")
	assert.Contains(t, out, req[1].String())
	require.NoError(t, appendSummary(path, simSummary{Summary: true, GuardsFired: rest}))
	code, out = check()
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "every required guard fired")

	code, out = check2(t, filepath.Join(t.TempDir(), "absent"))
	assert.Equal(t, 2, code, out)
	empty := filepath.Join(t.TempDir(), "empty")
	require.NoError(t, os.WriteFile(empty, []byte("{\"seed\":1}\n"), 0o644))
	code, out = check2(t, empty)
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, "no summary object")
}

func check2(t *testing.T, path string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runSim(context.Background(), []string{"--check-guards", path}, &out, &errb)
	return code, out.String() + errb.String()
}
