// Package apitest holds tests to the HTTP API's contract, the OpenAPI
// document api/openapi.yaml: a [Validator] checks each request a test
// sends and each answer it gets against the document with kin-openapi's
// openapi3filter, as an [http.RoundTripper] around a client's transport
// ([Validator.Transport], for black-box tests) or an [http.Handler]
// around the server ([Validator.Handler], for tests that call it in
// process).
//
// The rules, for an exchange whose path is in the API's namespace (/v1/...
// and the document's other paths):
//
//   - An answer must be one the document lists for its operation: its
//     status, its headers, and its body against the schema, where every
//     object forbids fields it does not name (additionalProperties: false).
//   - A request the document refuses (a field it does not name, a value
//     out of its range, a path it does not have) must be refused by the
//     server: any answer under 400 fails the test, except, on an
//     operation marked x-hourglass-item-errors (a batch answered item by
//     item), a 200 that answers an error for at least one item. A
//     request the document takes may still be refused (an unknown task, a
//     stale lease): the document cannot say everything the server checks.
//   - A path or method the document does not have must answer 4xx with
//     an Error body.
//
// Paths outside the namespace (the dashboard's page and assets) are not
// checked. Every mismatch fails the test (t.Errorf) with the method, the
// path, the status and what the document says.
//
// Set HOURGLASS_APITEST_REPORT=FILE to find every mismatch of a run at
// once instead: they are appended to FILE, each distinct one once per
// process, and no test fails for them. HOURGLASS_APITEST_COVERAGE=FILE
// appends each operation and status the tests met ("GET /v1/queues 200"),
// once per process, to see what the document lists that no test sends.
//
// A Validator is safe for concurrent use by multiple goroutines: its
// checks share one router, read-only. Each check decodes the bodies once,
// O(size of the bodies) besides the schema's walk.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/hourglass-go/hourglass/api"
)

// ReportEnv names the variable that turns failures into lines of a report
// file (see the package doc).
const ReportEnv = "HOURGLASS_APITEST_REPORT"

// CoverageEnv names the variable that lists the operations and statuses
// met in a file (see the package doc).
const CoverageEnv = "HOURGLASS_APITEST_COVERAGE"

// contract is the document, loaded and checked once per process.
var contract = sync.OnceValues(func() (*contractDoc, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData([]byte(api.OpenAPI))
	if err != nil {
		return nil, fmt.Errorf("apitest: loading api/openapi.yaml: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("apitest: api/openapi.yaml is not a valid OpenAPI document: %w", err)
	}
	// The router's copy matches any host: the tests' servers listen on
	// ports of their own, not on the document's example server. And it
	// says 3.0, so that openapi3filter checks bodies with kin-openapi's
	// own schema validator: for a 3.1 document it takes the JSON Schema
	// 2020-12 one, which compiles the schema anew at every call, too slow
	// for suites of thousands of exchanges (BenchmarkValidator_Check_Put).
	// The document uses only keywords both read alike
	// (TestDocument_Keywords: no const, which kin-openapi's ignores).
	routed := *doc
	routed.Servers = nil
	routed.OpenAPI = "3.0.3"
	router, err := gorillamux.NewRouter(&routed)
	if err != nil {
		return nil, fmt.Errorf("apitest: routing api/openapi.yaml: %w", err)
	}
	return &contractDoc{doc: doc, routed: &routed, router: router}, nil
})

// contractDoc is the loaded document, its copy for validation (routed)
// and that copy's router.
type contractDoc struct {
	doc, routed *openapi3.T
	router      routers.Router
}

// Document returns the API's OpenAPI document, loaded and validated; it
// fails t if the document does not load or is not valid OpenAPI.
func Document(t testing.TB) *openapi3.T {
	t.Helper()
	c, err := contract()
	if err != nil {
		t.Fatal(err)
	}
	return c.doc
}

// Validator checks the exchanges of one test against the document.
type Validator struct {
	t testing.TB
	c *contractDoc

	mu sync.Mutex
	// done is set when t's cleanup runs: a mismatch found later (a
	// client's goroutine outliving the test) goes to stderr. Guarded by mu.
	done bool
}

// New returns a Validator that fails t on a mismatch; it fails t at once
// if the document does not load.
func New(t testing.TB) *Validator {
	t.Helper()
	c, err := contract()
	if err != nil {
		t.Fatal(err)
	}
	v := &Validator{t: t, c: c}
	t.Cleanup(func() {
		v.mu.Lock()
		v.done = true
		v.mu.Unlock()
	})
	return v
}

// Transport returns a RoundTripper that sends each request through rt
// and checks it and its answer. It reads the answer's body whole before
// returning it, so that a long poll answers as before but a stream would
// wait for its end (the API has none).
func (v *Validator) Transport(rt http.RoundTripper) http.RoundTripper {
	return transport{v, rt}
}

// transport is Transport's RoundTripper.
type transport struct {
	v  *Validator
	rt http.RoundTripper
}

// RoundTrip sends req and checks the exchange.
func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(answer))
	if err != nil {
		return resp, nil // the caller meets the short body; nothing whole to check
	}
	t.v.Check(req, body, resp.StatusCode, resp.Header, answer)
	return resp, nil
}

// Handler returns h behind a check of each request it serves and of its
// answer. It reads the request's body whole before h does.
func (v *Validator) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		if r.Body != nil && r.Body != http.NoBody {
			body, _ = io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		rec := &recorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		v.Check(r, body, rec.status, w.Header(), rec.body.Bytes())
	})
}

// recorder passes an answer on and keeps its status and body.
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Check checks one exchange: req with its body (nil for none), and the
// answer's status, header and body. It reports each mismatch as the
// package doc says.
func (v *Validator) Check(req *http.Request, reqBody []byte, status int, header http.Header, body []byte) {
	for _, p := range v.c.check(req, reqBody, status, header, body) {
		v.fail(fmt.Sprintf("openapi: %s %s → %d: %s", req.Method, req.URL.RequestURI(), status, p))
	}
}

// CheckPush checks a request a push endpoint received, and its body,
// against the document's webhook "push" (webhooks.push.post), reporting
// each mismatch as the package doc says. O(size of the body).
func (v *Validator) CheckPush(req *http.Request, body []byte) {
	if err := v.c.checkPush(req, body); err != nil {
		v.fail(fmt.Sprintf("openapi: push %s %s: the request is not the one webhooks.push gives: %s", req.Method, req.URL.RequestURI(), short(err)))
	}
}

// checkPush returns what is wrong with a push request, nil when it is as
// the document's webhook "push" says.
func (c *contractDoc) checkPush(req *http.Request, body []byte) error {
	item := c.routed.Webhooks["push"]
	if item == nil || item.Post == nil {
		return errors.New("the document has no webhooks.push.post")
	}
	if req.Method != http.MethodPost {
		return fmt.Errorf("method %s, not POST", req.Method)
	}
	r := req.Clone(context.Background())
	r.Body = io.NopCloser(bytes.NewReader(body))
	route := &routers.Route{Spec: c.routed, Path: "push", PathItem: item, Method: http.MethodPost, Operation: item.Post}
	opts := &openapi3filter.Options{MultiError: true, SkipSettingDefaults: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}
	opts.WithCustomSchemaErrorFunc(schemaError)
	return openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{Request: r, Route: route, Options: opts})
}

// fail reports one mismatch.
func (v *Validator) fail(msg string) {
	if file := os.Getenv(ReportEnv); file != "" {
		report(file, msg)
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.done {
		fmt.Fprintf(os.Stderr, "%s (after %s ended)\n", msg, v.t.Name())
		return
	}
	v.t.Errorf("%s", msg)
}

// reported holds the lines written to the report files by this process,
// each once.
var reported struct {
	sync.Mutex
	seen map[string]bool
}

// report appends msg to file once per process.
func report(file, msg string) {
	reported.Lock()
	defer reported.Unlock()
	if reported.seen[file+"\x00"+msg] {
		return
	}
	if reported.seen == nil {
		reported.seen = map[string]bool{}
	}
	reported.seen[file+"\x00"+msg] = true
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintf(os.Stderr, "apitest: %v; %s\n", err, msg)
		return
	}
	defer f.Close()
	fmt.Fprintln(f, strings.ReplaceAll(msg, "\n", " "))
}

// maxMessage bounds a mismatch's text: a schema error can quote a whole
// body.
const maxMessage = 600

// check returns what is wrong with one exchange, nothing when it is as
// the document says.
func (c *contractDoc) check(req *http.Request, reqBody []byte, status int, header http.Header, body []byte) []string {
	if !c.inScope(req.URL.Path) {
		return nil
	}
	// A copy of the request to route and read: HEAD is answered as GET
	// without a body, and a body without a Content-Type is read as JSON,
	// as the server reads every body.
	r := req.Clone(context.Background())
	head := r.Method == http.MethodHead
	if head {
		r.Method = http.MethodGet
	}
	r.Body = http.NoBody
	if len(reqBody) > 0 {
		r.Body = io.NopCloser(bytes.NewReader(reqBody))
		if r.Header.Get("Content-Type") == "" {
			r.Header.Set("Content-Type", "application/json")
		}
	}
	route, params, err := c.router.FindRoute(r)
	if err != nil {
		if status < 400 || status >= 500 {
			return []string{fmt.Sprintf("%v in the document, but the server answered %d: an undocumented route?", err, status)}
		}
		if !head {
			if bad := c.isError(header, body); bad != nil {
				return []string{fmt.Sprintf("%v in the document, and the answer is not an Error: %v", err, bad)}
			}
		}
		return nil
	}
	opts := &openapi3filter.Options{
		MultiError:          true,
		SkipSettingDefaults: true,
		AuthenticationFunc:  openapi3filter.NoopAuthenticationFunc,
	}
	opts.WithCustomSchemaErrorFunc(schemaError)
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route, Options: opts}
	var out []string
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil && status < 400 && !itemRefused(route.Operation, body) {
		out = append(out, "the document refuses the request, but the server took it: "+short(err))
	}
	respOpts := *opts
	respOpts.IncludeResponseStatus = true
	respOpts.ExcludeResponseBody = head
	respIn := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 status,
		Header:                 header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &respOpts,
	}
	if file := os.Getenv(CoverageEnv); file != "" {
		report(file, fmt.Sprintf("%s %s %d", route.Method, route.Path, status))
	}
	if err := openapi3filter.ValidateResponse(context.Background(), respIn); err != nil {
		out = append(out, fmt.Sprintf("the answer is not one the document gives for %s %s: %s (body %s)", route.Method, route.Path, short(err), shortBody(body)))
	}
	return out
}

// itemRefused reports whether op answers the items of a batch alone
// (x-hourglass-item-errors) and body, its answer, refuses one of them:
// {"results": [..., {"error": "..."}, ...]}.
func itemRefused(op *openapi3.Operation, body []byte) bool {
	if op.Extensions["x-hourglass-item-errors"] != true {
		return false
	}
	var answer struct {
		Results []struct {
			Error string `json:"error"`
		} `json:"results"`
	}
	if json.Unmarshal(body, &answer) != nil {
		return false
	}
	for _, r := range answer.Results {
		if r.Error != "" {
			return true
		}
	}
	return false
}

// inScope reports whether path is the API's to check: /v1 and the
// document's own paths.
func (c *contractDoc) inScope(path string) bool {
	return strings.HasPrefix(path, "/v1/") || path == "/v1" || c.doc.Paths.Value(path) != nil
}

// isError checks that an answer is a JSON Error body.
func (c *contractDoc) isError(header http.Header, body []byte) error {
	if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return fmt.Errorf("Content-Type %q", ct)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return err
	}
	return c.doc.Components.Schemas["Error"].Value.VisitJSON(v)
}

// schemaError shortens kin-openapi's schema errors to the place and the
// reason, without the schema and the value it quotes.
func schemaError(err *openapi3.SchemaError) string {
	if p := err.JSONPointer(); len(p) > 0 {
		return "/" + strings.Join(p, "/") + ": " + err.Reason
	}
	return err.Reason
}

// short returns err's text on one line, bounded.
func short(err error) string {
	var me openapi3.MultiError
	msg := err.Error()
	if errors.As(err, &me) {
		parts := make([]string, len(me))
		for i, e := range me {
			parts[i] = e.Error()
		}
		msg = strings.Join(parts, "; ")
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > maxMessage {
		msg = msg[:maxMessage] + "..."
	}
	return msg
}

// shortBody returns a body for a message, bounded.
func shortBody(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
