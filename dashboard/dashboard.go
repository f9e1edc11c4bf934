// Package dashboard is the web page `hourglass serve` shows at "/": every
// queue with its counts and rates, delivery lateness in its two parts (the
// server's own, due to ready, apart from ready tasks' wait for a worker)
// and the next hour's due times as charts, a queue's pause (pause and
// resume it) and policy (a push queue's endpoint among it), every time
// with its zone,
// its tasks by state with a reserved task's lease end and a failed task's
// last error (find, show with its attempts, delete, kick the dead), its
// history (the tasks that left it, by outcome), and the cron schedules
// with their next times.
//
// The page is static: HTML, CSS and JavaScript modules in static/,
// embedded in the binary, with no build step and nothing fetched from
// elsewhere at run time. It reads and changes the server only through the
// HTTP API under /v1 (package api, api/observe.go for the routes it adds),
// polling every few seconds; with a token the page asks for it once and
// keeps it in the browser's session storage. So [Handler] needs nothing
// from the server, and the page shows what any client of the API would
// see.
//
// The files:
//
//	static/index.html             the shell: header, main, footer, two dialogs
//	static/assets/app.css         layout, light and dark themes (prefers-color-scheme)
//	static/assets/js/main.js      routing (#/, #/queues/NAME/STATE, #/schedules), polling, the token
//	static/assets/js/api.js       fetch with the token; errors as ApiError
//	static/assets/js/dom.js       element builders, formats of times, durations and rates
//	static/assets/js/charts.js    the two SVG charts, each with a table of its data
//	static/assets/js/dialogs.js   the confirmation and the task's details
//	static/assets/js/history.js   a task's attempts, a queue's history
//	static/assets/js/overview.js  #/
//	static/assets/js/queue.js     #/queues/NAME/STATE, with the queue's pause and policy
//	static/assets/js/schedules.js #/schedules
package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// csp is the Content-Security-Policy of every answer. It allows only this
// origin's files: no inline script or style and no frames, so that a
// payload shown on the page cannot run as code, and the page cannot be
// framed.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// types are the Content-Types of the embedded files by extension, not
// left to the host's MIME tables.
var types = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
}

// file is one embedded file, read once.
type file struct {
	body  []byte
	ctype string
	etag  string
}

// handler serves the embedded files.
type handler struct {
	files map[string]file // by URL path: "/" and "/assets/..."
}

// Handler returns the dashboard: GET or HEAD "/" answers the page, and
// "/assets/..." its files; any other path is 404. Files are revalidated on
// each load (no-cache with an ETag of their content), so that a new
// binary's page is never mixed with an old one's scripts. Mount it beside
// the API with [With], or on a mux as "GET /{$}" and "GET /assets/".
//
// The handler is safe for concurrent use.
func Handler() http.Handler {
	h := &handler{files: map[string]file{}}
	err := fs.WalkDir(static, "static", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := static.ReadFile(name)
		if err != nil {
			return err
		}
		url := strings.TrimPrefix(name, "static")
		if url == "/index.html" {
			url = "/"
		}
		ctype, ok := types[path.Ext(name)]
		if !ok {
			ctype = "application/octet-stream"
		}
		sum := sha256.Sum256(body)
		h.files[url] = file{body: body, ctype: ctype, etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		panic("dashboard: reading the embedded files: " + err.Error()) // cannot happen with a built binary
	}
	return h
}

// ServeHTTP answers one request for a file.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", csp)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	f, ok := h.files[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "405 method not allowed", http.StatusMethodNotAllowed)
		return
	}
	hdr.Set("Content-Type", f.ctype)
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("ETag", f.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
}

// With returns a handler that serves the dashboard's page ("/") and files
// ("/assets/...") and passes every other request to api, the server's
// HTTP API (an httpapi.Server), so that one address serves both:
//
//	http.Server{Handler: dashboard.With(apiServer)}
func With(api http.Handler) http.Handler {
	mux := http.NewServeMux()
	d := Handler()
	mux.Handle("GET /{$}", d)
	mux.Handle("GET /assets/", d)
	mux.Handle("/", api)
	return mux
}
