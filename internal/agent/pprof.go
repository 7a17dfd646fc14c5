package agent

import (
	"net/http"
	"net/http/pprof"
	"runtime"
)

// PathPprof is where Go's runtime profiles are served when
// admin.enable_pprof is set: /debug/pprof/ (the index), profile (CPU,
// ?seconds=N), trace, heap, goroutine, mutex, block, allocs,
// threadcreate, cmdline and symbol, as net/http/pprof names them, so that
// `go tool pprof` reads them directly (with -tls_cert, -tls_key and
// -tls_ca for the client certificate). Unset, nothing is registered and
// the paths are 404.
const PathPprof = "/debug/pprof/"

// Sampling of the contention profiles while pprof is on: one mutex
// contention event in pprofMutexFraction, and blocking events sampled
// about once per pprofBlockRateNs nanoseconds blocked. Both are off in
// the runtime by default (the mutex and block profiles would be empty);
// at these rates their cost is well under a percent of the process's CPU.
const (
	pprofMutexFraction = 100
	pprofBlockRateNs   = 100_000
)

// pprofRoutes registers the profiles on mux behind the admin rules (the
// client certificate of requireClientCert around the whole mux, and the
// bearer token of authed), when the config turns them on. The CPU
// profile's and the trace's ?seconds= are bounded by the API server's
// WriteTimeout (net/http/pprof refuses a longer one), and the runtime
// runs one CPU profile at a time (a second caller gets 500 meanwhile).
func (a *Agent) pprofRoutes(mux *http.ServeMux) {
	if !a.cfg.Admin.EnablePprof {
		return
	}
	runtime.SetMutexProfileFraction(pprofMutexFraction)
	runtime.SetBlockProfileRate(pprofBlockRateNs)
	mux.HandleFunc(PathPprof, a.authed(pprof.Index)) // the named profiles too: /debug/pprof/heap, ...
	mux.HandleFunc(PathPprof+"cmdline", a.authed(pprof.Cmdline))
	mux.HandleFunc(PathPprof+"profile", a.authed(pprof.Profile))
	mux.HandleFunc(PathPprof+"symbol", a.authed(pprof.Symbol))
	mux.HandleFunc(PathPprof+"trace", a.authed(pprof.Trace))
}
