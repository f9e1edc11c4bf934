package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyCommandsUsageErrors checks that every bad invocation of the
// lease, queue and schedule subcommands exits 2 before calling anything,
// saying what is wrong, with the subcommand's usage line.
func TestPolicyCommandsUsageErrors(t *testing.T) {
	usage := func(name string) string {
		if tc, ok := taskCommands[name]; ok {
			return tc.usage
		}
		return queueCommands[name].usage
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"nack", "q", "id", "lease", "--delay", "-1s"}, "0s or more"},
		{[]string{"nack", "q", "id", "lease", "--delay", "5"}, "duration"},
		{[]string{"nack", "q", "id"}, "missing QUEUE, ID or LEASE"},
		{[]string{"release", "q", "id"}, "missing QUEUE, ID or LEASE"},
		{[]string{"release", "q", "id", "lease", "--delay", "-5s"}, "0s or more"},
		{[]string{"release", "q", "id", "lease", "--error", "x"}, "-error"},
		{[]string{"bury", "q", "id", "lease", "more"}, `"more"`},
		{[]string{"bury", "q", "id", "lease", "--delay", "1s"}, "-delay"},
		{[]string{"pause"}, "missing QUEUE"},
		{[]string{"pause", "q", "--for", "0s"}, "more than 0s"},
		{[]string{"pause", "q", "--for", "-1m"}, "more than 0s"},
		{[]string{"pause", "q", "--for", "10"}, "duration"},
		{[]string{"resume", "q", "r"}, `"r"`},
		{[]string{"resume", "q", "--for", "1s"}, "-for"},
		{[]string{"policy"}, "missing QUEUE"},
		{[]string{"policy", "q", "--set", `{"max_attempts":3}`, "--delete"}, "give one of"},
		{[]string{"policy", "q", "--set", `{"colour":"red"}`}, `unknown field "colour"`},
		{[]string{"policy", "q", "--set", `{"ttr":30}`}, "not a number"},
		{[]string{"policy", "q", "--set", `{"max_attempts":3`}, "policy:"},
		{[]string{"policy", "q", "--set", `{} {}`}, "trailing data"},
		{[]string{"policy", "q", "--replace"}, "--replace goes with --set"},
		{[]string{"policy", "q", "--replace", "--delete"}, "--replace goes with --set"},
		{[]string{"policy", "q", "--set", `null`}, "a merge patch is a JSON object"},
		{[]string{"policy", "q", "--set", `{"push":{"url":"http://h","secret_set":true}}`}, "push.secret_set is answered by the server"},
		{[]string{"policy", "q", "--set", `{"concurrency":0}`}, "policy: concurrency 0: give at least 1"},
		{[]string{"policy", "q", "--set-file", filepath.Join(t.TempDir(), "none.json")}, "none.json"},
		{[]string{"schedule", "--cron", "@hourly", "--queue", "q"}, "missing NAME"},
		{[]string{"schedule", "--delete"}, "missing NAME"},
		{[]string{"schedule", "nightly", "--cron", "@daily"}, "--cron and --queue"},
		{[]string{"schedule", "nightly", "--queue", "q"}, "--cron and --queue"},
		{[]string{"schedule", "nightly", "--cron", "@daily", "--queue", "q", "--delete"}, "not both"},
		{[]string{"schedule", "a", "b"}, `"b"`},
	} {
		var stdout, stderr strings.Builder
		if code := run(tc.args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", tc.args, code, stderr.String())
		}
		msg := stderr.String()
		if !strings.HasPrefix(msg, "hourglass: ") || strings.Count(msg, "hourglass: ") != 1 || !strings.Contains(msg, tc.want) || !strings.Contains(msg, usage(tc.args[0])) {
			t.Errorf("%v: stderr %q, want hourglass: ... %s ... and the usage line", tc.args, msg, tc.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("%v: stdout %q", tc.args, stdout.String())
		}
	}
}

// TestPolicyCommandsHelp checks that `hourglass help` lists every new
// subcommand's usage line and that each answers -h.
func TestPolicyCommandsHelp(t *testing.T) {
	for _, name := range []string{"nack", "release", "bury", "pause", "resume", "policy", "schedule"} {
		var stdout, stderr strings.Builder
		if code := run([]string{name, "-h"}, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "usage: hourglass "+name) {
			t.Errorf("%s -h: exit %d, stdout %q", name, code, stdout.String())
		}
		if !strings.Contains(commandsUsage, "usage: hourglass "+name+" ") {
			t.Errorf("hourglass help lacks %s", name)
		}
	}
}

// TestPolicyCommandsCalls runs each subcommand against a server that
// records the requests and answers as the API does: the method, path and
// body of each call, what is printed, and a server's error exiting 1.
func TestPolicyCommandsCalls(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, strings.TrimSpace(r.Method+" "+r.URL.EscapedPath()+" "+strings.TrimSpace(string(body))))
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/missing/policy") && r.Method == "PATCH":
			w.WriteHeader(400)
			io.WriteString(w, `{"error":"hourglass: invalid request: policy: retry.initial 0s out of range: give more than 0s, at most 8760h0m0s"}`)
		case strings.HasSuffix(r.URL.Path, "/pause"), strings.HasSuffix(r.URL.Path, "/resume"),
			r.Method == "DELETE":
			w.WriteHeader(204)
		case strings.HasSuffix(r.URL.Path, "/policy"):
			io.WriteString(w, `{"max_attempts":3,"effective":{"retry":{"initial":"1s","max":"1h0m0s","multiplier":2,"jitter":0.1},"max_attempts":3,"ttr":"1m0s"}}`)
		case r.URL.Path == "/v1/schedules":
			io.WriteString(w, `{"schedules":[{"name":"a","cron":"@hourly","queue":"q"},{"name":"nightly","cron":"0 3 * * *","queue":"q"}]}`)
		case r.Method == "GET" && r.URL.Path == "/v1/schedules/other":
			w.WriteHeader(404)
			io.WriteString(w, `{"error":"hourglass: no such schedule"}`)
		case strings.HasPrefix(r.URL.Path, "/v1/schedules/"):
			io.WriteString(w, `{"name":"nightly","cron":"0 3 * * *","queue":"q","payload":{"k":1}}`)
		default:
			io.WriteString(w, `{"id":"a","job_id":1,"queue":"q","state":"dead","payload":null,"priority":1024,"due":"2030-01-01T00:00:00Z","ttr":"1m0s","attempts":1,"max_attempts":0,"created":"2030-01-01T00:00:00Z","last_error":"boom"}`)
		}
	}))
	defer srv.Close()
	policyFile := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(policyFile, []byte(`{"concurrency":2}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args       []string
		code       int
		req, print string
	}{
		{[]string{"nack", "q", "a", "L"}, 0, `POST /v1/queues/q/tasks/a/nack {"lease":"L"}`, `"last_error":"boom"`},
		{[]string{"nack", "q", "a", "L", "--delay", "0s", "--error", "smtp: 550"}, 0, `POST /v1/queues/q/tasks/a/nack {"lease":"L","delay":"0s","error":"smtp: 550"}`, `"state":"dead"`},
		{[]string{"release", "q", "a", "L", "--delay", "2s"}, 0, `POST /v1/queues/q/tasks/a/release {"lease":"L","delay":"2s"}`, `"id":"a"`},
		{[]string{"release", "q", "a", "L"}, 0, `POST /v1/queues/q/tasks/a/release {"lease":"L"}`, `"id":"a"`},
		{[]string{"bury", "q", "a", "L", "--error", "bad input"}, 0, `POST /v1/queues/q/tasks/a/bury {"lease":"L","error":"bad input"}`, `"id":"a"`},
		{[]string{"pause", "q"}, 0, `POST /v1/queues/q/pause {}`, ``},
		{[]string{"pause", "q", "--for", "10m"}, 0, `POST /v1/queues/q/pause {"for":"10m0s"}`, ``},
		{[]string{"resume", "q"}, 0, `POST /v1/queues/q/resume`, ``},
		{[]string{"policy", "q"}, 0, `GET /v1/queues/q/policy`, `"effective":{"retry":{"initial":"1s","max":"1h0m0s","multiplier":2,"jitter":0.1},"max_attempts":3,"ttr":"1m0s"}`},
		{[]string{"policy", "q", "--set", `{"max_attempts":3}`, "--replace"}, 0, `PUT /v1/queues/q/policy {"max_attempts":3}`, `{"max_attempts":3,`},
		{[]string{"policy", "q", "--set-file", policyFile, "--replace"}, 0, `PUT /v1/queues/q/policy {"concurrency":2}`, `{"max_attempts":3,`},
		// Without --replace, a GET and the PUT of the merge.
		{[]string{"policy", "q", "--set", `{"max_attempts":5}`}, 0, `PATCH /v1/queues/q/policy {"max_attempts":5}`, `{"max_attempts":3,`},
		{[]string{"policy", "q", "--set-file", policyFile}, 0, `PATCH /v1/queues/q/policy {"concurrency":2}`, `{"max_attempts":3,`},
		{[]string{"policy", "q", "--delete"}, 0, `DELETE /v1/queues/q/policy`, ``},
		{[]string{"policy", "missing", "--set", `{"retry":{"initial":"0s","max":"1s","multiplier":1,"jitter":0}}`}, 1, `PATCH /v1/queues/missing/policy {"retry":{"initial":"0s","max":"1s","multiplier":1,"jitter":0}}`, ``},
		{[]string{"schedule"}, 0, `GET /v1/schedules`, `"name":"nightly"`},
		{[]string{"schedule", "nightly"}, 0, `GET /v1/schedules/nightly`, `"name":"nightly"`},
		{[]string{"schedule", "other"}, 1, `GET /v1/schedules/other`, ``},
		{[]string{"schedule", "nightly", "--cron", "0 3 * * *", "--queue", "q", "--payload", `{"k":1}`}, 0, `PUT /v1/schedules/nightly {"cron":"0 3 * * *","queue":"q","payload":{"k":1}}`, `"payload":{"k":1}`},
		{[]string{"schedule", "nightly", "--delete"}, 0, `DELETE /v1/schedules/nightly`, ``},
		{[]string{"schedule", "nightly", "--pause"}, 0, `POST /v1/schedules/nightly/pause {}`, ``},
		{[]string{"schedule", "nightly", "--resume"}, 0, `POST /v1/schedules/nightly/resume {}`, ``},
		{[]string{"schedule", "nightly", "--cron", "@every 1s", "--queue", "q", "--misfire", "all", "--catch-up", "1h", "--overlap", "skip", "--priority", "7", "--ttr", "30s", "--max-attempts", "3", "--paused"}, 0,
			`PUT /v1/schedules/nightly {"cron":"@every 1s","queue":"q","misfire":"all","catch_up":"1h0m0s","overlap":"skip","priority":7,"ttr":"30s","max_attempts":3,"paused":true}`, `"name":"nightly"`},
	} {
		got = nil
		var stdout, stderr strings.Builder
		code := run(append(tc.args, "--server", srv.URL), &stdout, &stderr)
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d; stderr %q", tc.args, code, tc.code, stderr.String())
		}
		if strings.Join(got, " | ") != tc.req {
			t.Errorf("%v: requests %q, want %q", tc.args, got, tc.req)
		}
		if !strings.Contains(stdout.String(), tc.print) || tc.print == "" && stdout.Len() != 0 {
			t.Errorf("%v: printed %q, want %s", tc.args, stdout.String(), tc.print)
		}
		if tc.code == 1 && (!strings.HasPrefix(stderr.String(), "hourglass: ") || strings.Count(stderr.String(), "\n") != 1) {
			t.Errorf("%v: stderr %q, want one line hourglass: ...", tc.args, stderr.String())
		}
	}
	// The schedule listing prints one line a schedule.
	var stdout, stderr strings.Builder
	if run([]string{"schedule", "--server", srv.URL}, &stdout, &stderr); strings.Count(stdout.String(), "\n") != 2 {
		t.Errorf("schedule: %q, want two lines", stdout.String())
	}
}
