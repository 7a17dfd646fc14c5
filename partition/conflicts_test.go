package partition

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestExportAndPurgeConflicts(t *testing.T) {
	st := NewMemStore()
	var ops []Op
	for i := 1; i <= 1200; i++ {
		ops = append(ops, Op{LSN: LSN(i), Epoch: 1, Key: []byte("k"), Value: []byte{byte(i)}})
	}
	m := Meta{Epoch: 2, Role: RoleFollower, Level: Level{Consistency: Eventual}}
	require.NoError(t, st.Commit([]Write{{Partition: 5, Meta: &m, Append: ops}}))
	require.NoError(t, st.Commit([]Write{{Partition: 5, Truncate: &Truncation{After: 0, RemovedAt: 2, Reason: ConflictTruncate}}}))
	var buf bytes.Buffer
	n, last, err := ExportConflicts(&buf, st, 5)
	require.NoError(t, err)
	require.Equal(t, 1200, n)
	require.Equal(t, Token{Epoch: 1, LSN: 1200}, last)
	sc := bufio.NewScanner(&buf)
	lines := 0
	for sc.Scan() {
		var c conflictJSON
		require.NoError(t, json.Unmarshal(sc.Bytes(), &c))
		lines++
		require.Equal(t, LSN(lines), c.LSN)
		require.Equal(t, "truncate", c.Reason)
		require.Equal(t, []byte{byte(lines)}, c.Value)
	}
	require.Equal(t, 1200, lines)
	require.NoError(t, PurgeConflicts(st, 5, Token{Epoch: 1, LSN: 1000}))
	left, err := st.Conflicts(5, Token{}, 1000)
	require.NoError(t, err)
	require.Len(t, left, 200)
	require.Equal(t, LSN(1001), left[0].Op.LSN)
}
