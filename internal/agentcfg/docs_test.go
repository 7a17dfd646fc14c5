package agentcfg

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOperationsDocumentsEveryField: docs/OPERATIONS.md's config
// reference has a row for every field of Config.
func TestOperationsDocumentsEveryField(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "OPERATIONS.md"))
	require.NoError(t, err)
	doc := string(b)
	for _, f := range fields() {
		require.True(t, strings.Contains(doc, "| `"+f.path+"` |"), "docs/OPERATIONS.md's config reference lacks %s", f.path)
	}
}
