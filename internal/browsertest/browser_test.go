package browsertest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBrowser: a page served on loopback is loaded, its DOM read after
// its script ran, an exception in an expression is an error, the page's
// own uncaught exception and console error are reported, and the
// screenshot is a PNG.
func TestBrowser(t *testing.T) {
	bin := Require(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><html><body><div id="out"></div><script>
document.getElementById('out').textContent = 'drawn ' + (6 * 7);
console.error('visible', 42);
setTimeout(() => { throw new Error('late boom'); }, 10);
</script></body></html>`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	b := Start(t, Options{Path: bin, Width: 800, Height: 600})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pg := b.NewPage(ctx)
	require.NoError(t, pg.Navigate(ctx, srv.URL+"/"), b.Tail())

	var text string
	require.NoError(t, pg.Eval(ctx, "document.getElementById('out').textContent", &text))
	assert.Equal(t, "drawn 42", text)
	var sum int
	require.NoError(t, pg.Eval(ctx, "Promise.resolve(20 + 22)", &sum), "a promise is awaited")
	assert.Equal(t, 42, sum)
	err := pg.Eval(ctx, "(() => { throw new Error('boom') })()", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "boom")
	require.Error(t, pg.WaitTrue(ctx, "false", 200*time.Millisecond), "WaitTrue gives up")

	require.Eventually(t, func() bool { return len(pg.Errors()) >= 2 }, 5*time.Second, 20*time.Millisecond)
	errs := fmt.Sprint(pg.Errors())
	assert.Contains(t, errs, "console.error: visible 42")
	assert.Contains(t, errs, "late boom")

	png, err := pg.Screenshot(ctx)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")), "a PNG")
	assert.Greater(t, len(png), 1000)
}

// TestNothingOutlivesTheBrowser: once the test that started it ends, no
// process of the browser is left, the crash handler (in a process group
// of its own) included.
func TestNothingOutlivesTheBrowser(t *testing.T) {
	bin := Require(t)
	var dir string
	t.Run("browser", func(t *testing.T) {
		b := Start(t, Options{Path: bin})
		dir = b.dir
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pg := b.NewPage(ctx)
		require.NoError(t, pg.Eval(ctx, "1", nil))
		require.NotEmpty(t, processesNaming(dir), "the browser runs")
	})
	assert.Empty(t, processesNaming(dir), "processes left after the test")
}
