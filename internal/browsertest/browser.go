package browsertest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fmnode/fmnode/internal/proctest"
)

// maxMessage bounds one protocol message read from the browser (a full
// page screenshot is the largest).
const maxMessage = 64 << 20

// ErrNoChromium: no Chromium executable was found.
var ErrNoChromium = errors.New("browsertest: no Chromium found (apt-get install chromium, or set FMNODE_CHROMIUM)")

// Find returns the Chromium executable to use: FMNODE_CHROMIUM when set,
// else the first of Chromium's usual names on PATH.
func Find() (string, error) {
	if p := os.Getenv("FMNODE_CHROMIUM"); p != "" {
		return exec.LookPath(p)
	}
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", ErrNoChromium
}

// Require returns the Chromium executable, or skips the test saying how
// to install it; under CI=true a missing Chromium fails the test (CI
// installs it, see .ci/run).
func Require(t testing.TB) string {
	t.Helper()
	p, err := Find()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v: CI must run this test", err)
		}
		t.Skipf("%v: skipping the browser test", err)
	}
	return p
}

// Options configure Start.
type Options struct {
	// Path is the Chromium executable (Require's); required.
	Path string
	// Width and Height are the window's size in CSS pixels (default
	// 1400 x 1000).
	Width, Height int
	// Timeout bounds the browser's life (default 2 minutes, cut to the
	// test's deadline by proctest).
	Timeout time.Duration
}

// Browser is a running headless Chromium.
type Browser struct {
	t    testing.TB
	proc *proctest.Proc
	in   *os.File // the browser's descriptor 3: our commands
	dir  string   // its profile and HOME

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan reply
	pages   map[string]*Page // by session id
	readErr error
	done    chan struct{} // closed when the reader stops
}

type reply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// message is anything the browser sends: an answer (ID) or an event.
type message struct {
	ID        int64           `json:"id"`
	SessionID string          `json:"sessionId"`
	Method    string          `json:"method"`
	Params    json.RawMessage `json:"params"`
	reply
}

// Start runs Chromium headless with the DevTools protocol on a pipe. The
// test fails if it does not start; it is killed at the test's end.
func Start(t testing.TB, opts Options) *Browser {
	t.Helper()
	if opts.Path == "" {
		t.Fatalf("browsertest: Options.Path is required (browsertest.Require)")
	}
	if opts.Width <= 0 || opts.Height <= 0 {
		opts.Width, opts.Height = 1400, 1000
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Minute
	}
	dir := t.TempDir()
	// Descriptor 3 is what the browser reads, 4 what it writes.
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatalf("browsertest: %v", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatalf("browsertest: %v", err)
	}
	args := []string{
		"--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir=" + filepath.Join(dir, "profile"), "--no-first-run", "--no-default-browser-check",
		// Nothing of Chromium's own reaches out: no updates, sync, safe
		// browsing, translation, metrics or name look-ups beyond
		// localhost (IP literals such as 127.0.0.1 need none).
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-default-apps",
		"--disable-extensions", "--disable-domain-reliability", "--no-pings", "--metrics-recording-only",
		"--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication",
		"--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost , EXCLUDE 127.0.0.1",
		"--hide-scrollbars", "--mute-audio",
		// No crash reports (the handler still starts; see sweep).
		"--disable-breakpad", "--disable-crash-reporter",
		fmt.Sprintf("--window-size=%d,%d", opts.Width, opts.Height),
		"about:blank",
	}
	env := []string{"HOME=" + dir, "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "XDG_CACHE_HOME=" + filepath.Join(dir, "cache")}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "HOME" && !strings.HasPrefix(k, "XDG_") {
			env = append(env, kv)
		}
	}
	// Registered before proctest's cleanup, so run after it: what left
	// the process group (Chromium's crash handler starts itself in a
	// group of its own) is found by the profile directory it names.
	t.Cleanup(func() { sweep(t, dir) })
	proc := proctest.Start(t, proctest.ProcSpec{Name: "chromium", Path: opts.Path, Args: args, Env: env,
		ExtraFiles: []*os.File{cmdR, outW}, Timeout: opts.Timeout})
	// The child has its copies: ours would keep its output open after
	// it dies.
	cmdR.Close()
	outW.Close()
	b := &Browser{t: t, proc: proc, in: cmdW, dir: dir, pending: map[int64]chan reply{}, pages: map[string]*Page{}, done: make(chan struct{})}
	go b.read(outR)
	t.Cleanup(func() {
		b.in.Close() // the browser exits on EOF; proctest kills what is left
	})
	return b
}

// read delivers answers to their callers and keeps the pages' errors,
// until the browser closes its end.
func (b *Browser) read(r *os.File) {
	defer close(b.done)
	defer r.Close()
	br := bufio.NewReaderSize(r, 1<<20)
	var err error
	for {
		var raw []byte
		raw, err = readMessage(br)
		if err != nil {
			break
		}
		var m message
		if json.Unmarshal(raw, &m) != nil {
			continue
		}
		b.mu.Lock()
		if m.ID != 0 {
			if ch, ok := b.pending[m.ID]; ok {
				delete(b.pending, m.ID)
				ch <- m.reply
			}
		} else if p := b.pages[m.SessionID]; p != nil {
			p.event(m.Method, m.Params)
		}
		b.mu.Unlock()
	}
	b.mu.Lock()
	b.readErr = fmt.Errorf("browsertest: the browser's output ended: %w", err)
	for id, ch := range b.pending {
		delete(b.pending, id)
		close(ch)
	}
	b.mu.Unlock()
}

// readMessage reads one NUL-terminated message, at most maxMessage
// bytes.
func readMessage(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice(0)
		buf = append(buf, chunk...)
		if len(buf) > maxMessage {
			return nil, fmt.Errorf("browsertest: a message over %d bytes", maxMessage)
		}
		switch {
		case err == nil:
			return buf[:len(buf)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, err
		}
	}
}

// call sends one command (to the browser when session is empty, else to
// that page) and decodes its result into out (when set).
func (b *Browser) call(ctx context.Context, session, method string, params, out any) error {
	b.mu.Lock()
	if b.readErr != nil {
		err := b.readErr
		b.mu.Unlock()
		return err
	}
	b.nextID++
	id := b.nextID
	ch := make(chan reply, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	raw, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	if _, err := b.in.Write(append(raw, 0)); err != nil {
		return fmt.Errorf("browsertest: %s: %w", method, err)
	}
	select {
	case rep, ok := <-ch:
		if !ok {
			b.mu.Lock()
			defer b.mu.Unlock()
			return fmt.Errorf("browsertest: %s: %w", method, b.readErr)
		}
		if rep.Error != nil {
			return fmt.Errorf("browsertest: %s: %s (%d)", method, rep.Error.Message, rep.Error.Code)
		}
		if out != nil {
			return json.Unmarshal(rep.Result, out)
		}
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		delete(b.pending, id)
		b.mu.Unlock()
		return fmt.Errorf("browsertest: %s: %w", method, ctx.Err())
	}
}

// NewPage opens a tab and attaches to it; the test fails if it cannot.
func (b *Browser) NewPage(ctx context.Context) *Page {
	b.t.Helper()
	var created struct {
		TargetID string `json:"targetId"`
	}
	if err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &created); err != nil {
		b.t.Fatalf("%v\n%s", err, b.proc.Tail())
	}
	var att struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": created.TargetID, "flatten": true}, &att); err != nil {
		b.t.Fatalf("%v\n%s", err, b.proc.Tail())
	}
	p := &Page{b: b, session: att.SessionID}
	b.mu.Lock()
	b.pages[p.session] = p
	b.mu.Unlock()
	for _, m := range []string{"Page.enable", "Runtime.enable"} {
		if err := p.call(ctx, m, nil, nil); err != nil {
			b.t.Fatalf("%v", err)
		}
	}
	return p
}

// Page is one tab.
type Page struct {
	b       *Browser
	session string
	errs    []string // uncaught exceptions and console errors; under b.mu
}

// maxErrors bounds the page errors kept.
const maxErrors = 100

func (p *Page) call(ctx context.Context, method string, params, out any) error {
	return p.b.call(ctx, p.session, method, params, out)
}

// event keeps the page's errors (called by the reader under b.mu).
func (p *Page) event(method string, params json.RawMessage) {
	var text string
	switch method {
	case "Runtime.exceptionThrown":
		var ev struct {
			Details struct {
				Text      string `json:"text"`
				Exception struct {
					Description string `json:"description"`
				} `json:"exception"`
				URL  string `json:"url"`
				Line int    `json:"lineNumber"`
			} `json:"exceptionDetails"`
		}
		if json.Unmarshal(params, &ev) == nil {
			d := ev.Details
			text = fmt.Sprintf("uncaught: %s %s (%s:%d)", d.Text, d.Exception.Description, d.URL, d.Line)
		}
	case "Runtime.consoleAPICalled":
		var ev struct {
			Type string `json:"type"`
			Args []struct {
				Value       any    `json:"value"`
				Description string `json:"description"`
			} `json:"args"`
		}
		if json.Unmarshal(params, &ev) == nil && (ev.Type == "error" || ev.Type == "assert") {
			parts := []string{"console." + ev.Type + ":"}
			for _, a := range ev.Args {
				if a.Value != nil {
					parts = append(parts, fmt.Sprint(a.Value))
				} else {
					parts = append(parts, a.Description)
				}
			}
			text = strings.Join(parts, " ")
		}
	}
	if text != "" && len(p.errs) < maxErrors {
		p.errs = append(p.errs, text)
	}
}

// Errors are the page's uncaught exceptions and console errors so far.
func (p *Page) Errors() []string {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	return append([]string(nil), p.errs...)
}

// Navigate loads url and waits until the document is complete.
func (p *Page) Navigate(ctx context.Context, url string) error {
	var nav struct {
		ErrorText string `json:"errorText"`
	}
	if err := p.call(ctx, "Page.navigate", map[string]any{"url": url}, &nav); err != nil {
		return err
	}
	if nav.ErrorText != "" {
		return fmt.Errorf("browsertest: navigate to %s: %s", url, nav.ErrorText)
	}
	return p.WaitTrue(ctx, "document.readyState === 'complete'", 30*time.Second)
}

// Eval evaluates a JavaScript expression in the page (awaiting it when
// it is a promise) and decodes its value, as JSON, into out (when set).
func (p *Page) Eval(ctx context.Context, expr string, out any) error {
	var res struct {
		Result struct {
			Type  string          `json:"type"`
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	err := p.call(ctx, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &res)
	if err != nil {
		return err
	}
	if res.Exception != nil {
		return fmt.Errorf("browsertest: %s: %s %s", expr, res.Exception.Text, res.Exception.Exception.Description)
	}
	if out == nil {
		return nil
	}
	if len(res.Result.Value) == 0 {
		return fmt.Errorf("browsertest: %s: no value (%s)", expr, res.Result.Type)
	}
	return json.Unmarshal(res.Result.Value, out)
}

// WaitTrue polls expr every 50 ms until it evaluates to true, within d.
func (p *Page) WaitTrue(ctx context.Context, expr string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var last error
	for {
		var ok bool
		err := p.Eval(ctx, expr, &ok)
		if err == nil && ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("browsertest: %q not true within %v (last error: %v)", expr, d, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Screenshot is a PNG of the whole page, beyond the window if it is
// longer.
func (p *Page) Screenshot(ctx context.Context) ([]byte, error) {
	var res struct {
		Data string `json:"data"`
	}
	if err := p.call(ctx, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true}, &res); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(res.Data)
}

// Tail is the end of the browser's own output (for a failure message).
func (b *Browser) Tail() string { return b.proc.Tail() }

// sweep SIGKILLs every process whose command line names dir (this
// browser's temporary profile and HOME, unique to the test) and waits,
// bounded, until none is left; the test fails if one stays.
func sweep(t testing.TB, dir string) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := processesNaming(dir)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("browsertest: processes naming %s still running after SIGKILL: %v", dir, left)
			return
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// processesNaming lists the live (not zombie) processes whose command
// line contains s.
func processesNaming(s string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmd) == 0 || !bytes.Contains(cmd, []byte(s)) {
			continue // a zombie's command line is empty
		}
		out = append(out, pid)
	}
	return out
}
