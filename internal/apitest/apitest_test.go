package apitest_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/hourglass-go/hourglass/internal/apitest"
)

// TestDocument checks that api/openapi.yaml loads and is valid OpenAPI
// 3.1, examples included.
func TestDocument(t *testing.T) {
	doc := apitest.Document(t)
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
}

// TestDocument_Keywords checks that no schema of the document uses const,
// which the schema validator apitest runs ignores (see contract): enum
// with one value says the same.
func TestDocument_Keywords(t *testing.T) {
	doc := apitest.Document(t)
	var walk func(name string, s *openapi3.SchemaRef, depth int)
	walk = func(name string, s *openapi3.SchemaRef, depth int) {
		if s == nil || s.Value == nil || depth > 8 {
			return
		}
		if s.Value.Const != nil {
			t.Errorf("schema %s uses const: write enum: [value]", name)
		}
		for k, p := range s.Value.Properties {
			walk(name+"."+k, p, depth+1)
		}
		walk(name+"[]", s.Value.Items, depth+1)
	}
	for name, s := range doc.Components.Schemas {
		walk(name, s, 0)
	}
}

// failures is a testing.TB that keeps what Errorf reports.
type failures struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (f *failures) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

// task is a Task body as the server writes one.
const task = `{"id":"a","job_id":1,"queue":"q","state":"ready","payload":{"x":1},"priority":1024,` +
	`"due":"2026-03-01T12:00:00Z","ttr":"1m0s","attempts":0,"max_attempts":0,"created":"2026-03-01T12:00:00Z"}`

// TestValidator runs exchanges through a Validator around a handler that
// answers what each case says, and checks which ones it reports.
func TestValidator(t *testing.T) {
	t.Setenv(apitest.ReportEnv, "")
	for _, c := range []struct {
		name, method, path, body string
		status                   int
		answer                   string
		want                     string // in the failure; "" for none
	}{
		{"a task", "POST", "/v1/queues/q/tasks", `{"id":"a","payload":{"x":1}}`, 201, task, ""},
		{"an error", "GET", "/v1/queues/q/tasks/a", "", 404, `{"error":"hourglass: no such task"}`, ""},
		{"an undocumented field", "GET", "/v1/queues/q/tasks/a", "", 200,
			strings.Replace(task, `"id":"a"`, `"id":"a","colour":"red"`, 1), `"colour" is unsupported`},
		{"a missing field", "GET", "/v1/queues/q/tasks/a", "", 200,
			strings.Replace(task, `"job_id":1,`, ``, 1), `"job_id"`},
		{"an undocumented status", "GET", "/v1/queues/q/tasks/a", "", 409, `{"error":"hourglass: conflict"}`, "status is not supported"},
		{"an error without the prefix", "GET", "/v1/queues/q/tasks/a", "", 404, `{"error":"no such task"}`, `"^hourglass: "`},
		{"a time that is not one", "GET", "/v1/queues/q/tasks/a", "", 200,
			strings.Replace(task, `"due":"2026-03-01T12:00:00Z"`, `"due":"soon"`, 1), "/due"},
		{"a duration as a number", "GET", "/v1/queues/q/tasks/a", "", 200,
			strings.Replace(task, `"ttr":"1m0s"`, `"ttr":60`, 1), "/ttr"},
		{"a null payload", "GET", "/v1/queues/q/tasks/a", "", 200,
			strings.Replace(task, `"payload":{"x":1}`, `"payload":null`, 1), ""},
		{"a state that is none", "GET", "/v1/queues/q/tasks/a", "", 200,
			strings.Replace(task, `"state":"ready"`, `"state":"gone"`, 1), "/state"},
		{"a refused request taken", "POST", "/v1/queues/q/tasks", `{"colour":"red"}`, 201, task, "the document refuses the request"},
		{"a refused request refused", "POST", "/v1/queues/q/tasks", `{"colour":"red"}`, 400, `{"error":"hourglass: unknown field \"colour\""}`, ""},
		{"a refused batch item answered alone", "POST", "/v1/queues/q/tasks:batch", `{"tasks":[{"colour":"red"}]}`, 200,
			`{"results":[{"error":"hourglass: unknown field \"colour\""}]}`, ""},
		{"a refused batch item put", "POST", "/v1/queues/q/tasks:batch", `{"tasks":[{"colour":"red"}]}`, 200,
			`{"results":[{"task":` + task + `}]}`, "the document refuses the request"},
		{"an undocumented route answered", "GET", "/v1/nothing", "", 200, `{}`, "an undocumented route"},
		{"an undocumented route refused", "GET", "/v1/nothing", "", 404, `{"error":"hourglass: no such route"}`, ""},
		{"an undocumented method refused", "PATCH", "/v1/queues/q/tasks/a", "", 405, `{"error":"hourglass: method not allowed"}`, ""},
		{"outside the API", "GET", "/assets/app.css", "", 200, `body{}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &failures{TB: t}
			v := apitest.New(f)
			h := v.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(c.status)
				fmt.Fprint(w, c.answer)
			}))
			var body *strings.Reader
			if c.body != "" {
				body = strings.NewReader(c.body)
			}
			r := httptest.NewRequest(c.method, c.path, nil)
			if body != nil {
				r = httptest.NewRequest(c.method, c.path, body)
				r.Header.Set("Content-Type", "application/json")
			}
			h.ServeHTTP(httptest.NewRecorder(), r)
			got := strings.Join(f.errs, "\n")
			switch {
			case c.want == "" && got != "":
				t.Errorf("reported %s", got)
			case c.want != "" && !strings.Contains(got, c.want):
				t.Errorf("reported %q, want a failure with %q", got, c.want)
			}
		})
	}
}

// TestTransport checks the RoundTripper: the caller reads the answer as
// sent, and a mismatch is reported.
func TestTransport(t *testing.T) {
	t.Setenv(apitest.ReportEnv, "")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"sick"}`)
	}))
	defer srv.Close()
	f := &failures{TB: t}
	hc := &http.Client{Transport: apitest.New(f).Transport(http.DefaultTransport)}
	resp, err := hc.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, err := io.ReadAll(resp.Body); err != nil || string(b) != `{"status":"sick"}` {
		t.Errorf("the caller read %q, %v", b, err)
	}
	if len(f.errs) != 1 || !strings.Contains(f.errs[0], "GET /healthz → 200") {
		t.Errorf("reported %q, want one failure of GET /healthz", f.errs)
	}
}

// TestValidator_Concurrent checks exchanges from several goroutines at
// once, as a worker's and a producer's clients make them (run with -race).
func TestValidator_Concurrent(t *testing.T) {
	t.Setenv(apitest.ReportEnv, "")
	f := &failures{TB: t}
	h := apitest.New(f).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, task)
	}))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				r := httptest.NewRequest("POST", "/v1/queues/q/tasks", strings.NewReader(`{"id":"a","delay":"1s"}`))
				r.Header.Set("Content-Type", "application/json")
				h.ServeHTTP(httptest.NewRecorder(), r)
			}
		})
	}
	wg.Wait()
	if len(f.errs) > 0 {
		t.Errorf("reported %q", f.errs)
	}
}

// TestDocument_Policy checks what the document says of a policy against
// what the service takes (service.CheckPolicy): an immediate retry
// ("initial": "0s", max and multiplier 0 or absent), unlimited attempts
// (-1), a next_secret, and an "effective" in a body are taken; a back-off
// without its max or multiplier, or a multiplier below 1 with an initial
// above 0s, or max_attempts below -1, are refused. Answers carry
// "effective".
func TestDocument_Policy(t *testing.T) {
	t.Setenv(apitest.ReportEnv, "")
	const effective = `"effective":{"retry":{"initial":"0s","max":"0s","multiplier":0,"jitter":0},"max_attempts":-1,"ttr":"1m0s"}`
	answer := `{"retry":{"initial":"0s","max":"0s","multiplier":0,"jitter":0},"max_attempts":-1,` + effective + `}`
	for _, c := range []struct {
		body  string
		taken bool
	}{
		{`{"retry":{"initial":"0s"}}`, true},
		{`{"retry":{"initial":"0s","max":"0s","multiplier":0,"jitter":0}}`, true},
		{`{"retry":{"initial":"0s","multiplier":2}}`, true},
		{`{"retry":{"initial":"1s","max":"1h","multiplier":2}}`, true},
		{`{"max_attempts":-1}`, true},
		{`{"max_attempts":-1,` + effective + `}`, true},
		{`{"push":{"url":"http://127.0.0.1:1/run","secret":"whsec_AAAA","next_secret":"whsec_BBBB"}}`, true},
		{`{"retry":{"initial":"1s"}}`, false},
		{`{"retry":{"initial":"1s","max":"1h","multiplier":0}}`, false},
		{`{"retry":{"initial":"1s","max":"1h"}}`, false},
		{`{"retry":{"initial":"0s","max":"1h","multiplier":0}}`, false},
		{`{"retry":{"initial":"0s","multiplier":0.5}}`, false},
		{`{"max_attempts":-2}`, false},
		{`{"push":{"url":"http://127.0.0.1:1/run","secret":"` + strings.Repeat("x", 257) + `"}}`, false},
	} {
		f := &failures{TB: t}
		h := apitest.New(f).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, answer)
		}))
		r := httptest.NewRequest("PUT", "/v1/queues/q/policy", strings.NewReader(c.body))
		r.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(httptest.NewRecorder(), r)
		got := strings.Join(f.errs, "\n")
		switch refused := strings.Contains(got, "the document refuses the request"); {
		case c.taken && got != "":
			t.Errorf("PUT %s: reported %s", c.body, got)
		case !c.taken && !refused:
			t.Errorf("PUT %s: the document takes it; the service refuses it", c.body)
		}
	}
}
