package dashboard_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/hourglass-go/hourglass/dashboard"
)

// get serves one request on h.
func get(h http.Handler, method, path string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestHandlerFiles serves the page and every file it names, with their
// types, the security headers and revalidation by ETag.
func TestHandlerFiles(t *testing.T) {
	h := dashboard.Handler()
	page := get(h, "GET", "/")
	if page.Code != 200 || page.Header().Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET /: %d %q", page.Code, page.Header().Get("Content-Type"))
	}
	for _, k := range []string{"Content-Security-Policy", "X-Content-Type-Options", "ETag", "Cache-Control"} {
		if page.Header().Get(k) == "" {
			t.Errorf("GET /: no %s header", k)
		}
	}
	if csp := page.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
		t.Errorf("Content-Security-Policy %q", csp)
	}

	// Every file the page and the modules name is served with its type.
	html := page.Body.String()
	files := regexp.MustCompile(`(?:href|src)="(/assets/[^"]+)"`).FindAllStringSubmatch(html, -1)
	if len(files) < 3 {
		t.Fatalf("the page names %d files: %v", len(files), files)
	}
	seen := map[string]bool{}
	var queue []string
	for _, f := range files {
		queue = append(queue, f[1])
	}
	imports := regexp.MustCompile(`from '\./([a-z]+\.js)'`)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		w := get(h, "GET", p)
		if w.Code != 200 {
			t.Errorf("GET %s: %d", p, w.Code)
			continue
		}
		want := map[string]string{".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml"}
		for ext, ct := range want {
			if strings.HasSuffix(p, ext) && w.Header().Get("Content-Type") != ct {
				t.Errorf("GET %s: Content-Type %q, want %q", p, w.Header().Get("Content-Type"), ct)
			}
		}
		for _, m := range imports.FindAllStringSubmatch(w.Body.String(), -1) {
			queue = append(queue, "/assets/js/"+m[1])
		}
	}
	for _, js := range []string{"main", "api", "dom", "charts", "dialogs", "overview", "queue", "schedules"} {
		if !seen["/assets/js/"+js+".js"] {
			t.Errorf("%s.js is not reached from the page", js)
		}
	}

	// Revalidation: the same ETag answers 304 without a body.
	etag := page.Header().Get("ETag")
	if w := get(h, "GET", "/", "If-None-Match", etag); w.Code != http.StatusNotModified || w.Body.Len() != 0 {
		t.Errorf("GET / with its ETag: %d, %d bytes", w.Code, w.Body.Len())
	}
	if w := get(h, "HEAD", "/assets/app.css"); w.Code != 200 || w.Body.Len() != 0 {
		t.Errorf("HEAD: %d, %d bytes", w.Code, w.Body.Len())
	}

	for _, p := range []string{"/index.html", "/assets/", "/assets/js/nope.js", "/static/index.html", "/v1/queues"} {
		if w := get(h, "GET", p); w.Code != 404 {
			t.Errorf("GET %s: %d, want 404", p, w.Code)
		}
	}
	if w := get(h, "POST", "/"); w.Code != 405 || w.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /: %d, Allow %q", w.Code, w.Header().Get("Allow"))
	}
}

// TestWith sends the page and its files to the dashboard and everything
// else to the API.
func TestWith(t *testing.T) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "api "+r.Method+" "+r.URL.Path)
	})
	h := dashboard.With(api)
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/", "<!doctype html>"},
		{"HEAD", "/", ""},
		{"GET", "/assets/app.css", "/* hourglass dashboard"},
		{"GET", "/v1/queues", "api GET /v1/queues"},
		{"POST", "/v1/queues/q/tasks", "api POST /v1/queues/q/tasks"},
		{"GET", "/healthz", "api GET /healthz"},
		{"GET", "/metrics", "api GET /metrics"},
		{"POST", "/", "api POST /"},
		{"GET", "/index.html", "api GET /index.html"},
	} {
		w := get(h, c.method, c.path)
		if body := w.Body.String(); !strings.HasPrefix(body, c.want) {
			t.Errorf("%s %s: %.40q, want it to start with %q", c.method, c.path, body, c.want)
		}
	}
}
