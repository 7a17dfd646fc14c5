package agent

import (
	"embed"
	"net/http"
)

// PathUI is the status page: the admin port serves it (GET), and it
// polls PathDashboard at most once a second. It is under the API's rule
// for TLS (a client certificate signed by the cluster CA: an operator's
// browser presents one); the page itself holds no data, and its JSON
// calls carry the admin bearer token when one is configured (the page
// asks for it and keeps it in the tab's sessionStorage).
const PathUI = "/ui/"

// uiAssets are the page's files, in the binary: it needs no internet.
// (A package variable only because go:embed needs one; never written.)
//
//go:embed ui/index.html ui/app.js ui/style.css
var uiAssets embed.FS

// uiPolicy keeps the page to its own origin: its embedded script and
// style only, no frames (it is not to be framed either), no forms.
const uiPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// uiHandler serves the embedded files under PathUI (the URL path /ui/x
// is the embedded file ui/x; /ui/ is ui/index.html).
func uiHandler() http.Handler {
	files := http.FileServerFS(uiAssets)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !requireMethod(w, r, http.MethodGet, http.MethodHead) {
			return
		}
		w.Header().Set("Content-Security-Policy", uiPolicy)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Referrer-Policy", "no-referrer")
		// The files change with the binary: always revalidate.
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
