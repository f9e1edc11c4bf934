package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// TestHistoryCommandsUsageErrors checks that every bad invocation of
// attempts and history exits 2 before calling anything, saying what is
// wrong, with the subcommand's usage line.
func TestHistoryCommandsUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"attempts", "q"}, "missing QUEUE or ID"},
		{[]string{"attempts", "q", "id", "more"}, `"more"`},
		{[]string{"attempts", "q", "id", "--limit", "3"}, "-limit"},
		{[]string{"history"}, "missing QUEUE"},
		{[]string{"history", "q", "r"}, `"r"`},
		{[]string{"history", "q", "--outcome", "done"}, "acked, dead, deleted or cancelled"},
		{[]string{"history", "q", "--outcome", ""}, "acked, dead, deleted or cancelled"},
		{[]string{"history", "q", "--after", "-1"}, "-after"},
		{[]string{"history", "q", "--limit", "0"}, "1 to 1000"},
		{[]string{"history", "q", "--limit", "1001"}, "1 to 1000"},
		{[]string{"history", "q", "--state", "dead"}, "-state"},
	} {
		var stdout, stderr strings.Builder
		if code := run(tc.args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", tc.args, code, stderr.String())
		}
		msg := stderr.String()
		if !strings.HasPrefix(msg, "hourglass: ") || strings.Count(msg, "hourglass: ") != 1 || !strings.Contains(msg, tc.want) || !strings.Contains(msg, historyCommands[tc.args[0]].usage) {
			t.Errorf("%v: stderr %q, want hourglass: ... %s ... and the usage line", tc.args, msg, tc.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("%v: stdout %q", tc.args, stdout.String())
		}
	}
}

// TestHistoryCommandsHelp checks that `hourglass help` lists both usage
// lines and that each subcommand answers -h.
func TestHistoryCommandsHelp(t *testing.T) {
	for _, name := range []string{"attempts", "history"} {
		var stdout, stderr strings.Builder
		if code := run([]string{name, "-h"}, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "usage: hourglass "+name+" ") {
			t.Errorf("%s -h: exit %d, stdout %q", name, code, stdout.String())
		}
		if !strings.Contains(commandsUsage, historyCommands[name].usage+"\n") {
			t.Errorf("hourglass help lacks %s", name)
		}
	}
}

// TestHistoryCommandsCalls runs attempts and history against a server
// that records the requests and answers as the API does: the request of
// each, what is printed (a line of JSON per attempt or task, history's
// cursor last), and a server's error exiting 1.
func TestHistoryCommandsCalls(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.RequestURI())
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.Contains(r.URL.Path, "/tasks/gone/"):
			w.WriteHeader(404)
			io.WriteString(w, `{"error":"hourglass: task \"gone\" not found"}`)
		case strings.HasSuffix(r.URL.Path, "/attempts"):
			io.WriteString(w, `{"attempts":[{"attempt":1,"started":"2030-01-01T00:00:00Z","ended":"2030-01-01T00:00:01Z","outcome":"nacked","error":"boom","duration":"1s"},{"attempt":2,"started":"2030-01-01T00:00:02Z","duration":"3s"}]}`)
		default:
			io.WriteString(w, `{"tasks":[{"id":"b","job_id":2,"outcome":"dead","finished":"2030-01-01T00:00:02Z","attempts":3,"last_error":"boom"},{"id":"a","job_id":1,"outcome":"acked","finished":"2030-01-01T00:00:01Z","attempts":1}],"next":1}`)
		}
	}))
	defer srv.Close()
	for _, tc := range []struct {
		args  []string
		code  int
		req   string
		lines []string
	}{
		{[]string{"attempts", "q", "a/b"}, 0, "GET /v1/queues/q/tasks/a%2Fb/attempts", []string{
			`{"attempt":1,"started":"2030-01-01T00:00:00Z","ended":"2030-01-01T00:00:01Z","outcome":"nacked","error":"boom","duration":"1s"}`,
			`{"attempt":2,"started":"2030-01-01T00:00:02Z","duration":"3s"}`,
		}},
		{[]string{"attempts", "q", "gone"}, 1, "GET /v1/queues/q/tasks/gone/attempts", nil},
		{[]string{"history", "q"}, 0, "GET /v1/queues/q/history?limit=100", []string{
			`{"id":"b","job_id":2,"outcome":"dead","finished":"2030-01-01T00:00:02Z","attempts":3,"last_error":"boom"}`,
			`{"id":"a","job_id":1,"outcome":"acked","finished":"2030-01-01T00:00:01Z","attempts":1}`,
			`{"next":1}`,
		}},
		{[]string{"history", "q", "--outcome", "deleted", "--after", "7", "--limit", "2"}, 0, "GET /v1/queues/q/history?after=7&limit=2&outcome=deleted", nil},
	} {
		got = nil
		var stdout, stderr strings.Builder
		code := run(append(tc.args, "--server", srv.URL), &stdout, &stderr)
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d; stderr %q", tc.args, code, tc.code, stderr.String())
		}
		if len(got) != 1 || got[0] != tc.req {
			t.Errorf("%v: requests %q, want %q", tc.args, got, tc.req)
		}
		if tc.lines != nil {
			if want := strings.Join(tc.lines, "\n") + "\n"; stdout.String() != want {
				t.Errorf("%v: printed\n%s\nwant\n%s", tc.args, stdout.String(), want)
			}
		}
		if tc.code == 1 && (stdout.Len() != 0 || !strings.HasPrefix(stderr.String(), "hourglass: ") || strings.Count(stderr.String(), "\n") != 1) {
			t.Errorf("%v: stdout %q, stderr %q, want one line hourglass: ...", tc.args, stdout.String(), stderr.String())
		}
	}
}

// TestParseServeHistory checks serve's --history: the default, a
// duration, 0 (keep none) and a negative value refused; and what each
// gives the engines, whose zero is the default and negative keeps none.
func TestParseServeHistory(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		want   time.Duration
		engine time.Duration
	}{
		{nil, task.DefaultHistory, task.DefaultHistory},
		{[]string{"--history", "72h"}, 72 * time.Hour, 72 * time.Hour},
		{[]string{"--history", "0"}, 0, -1},
		{[]string{"--history", "0s"}, 0, -1},
	} {
		o, _, err := parseServe(tc.args, env(nil))
		if err != nil || o.history != tc.want || engineHistory(o.history) != tc.engine {
			t.Errorf("%v: history %v (engines %v), %v; want %v (%v)", tc.args, o.history, engineHistory(o.history), err, tc.want, tc.engine)
		}
	}
	for _, args := range [][]string{{"--history", "-1h"}, {"--history", "1d"}, {"--history", "24"}} {
		if _, _, err := parseServe(args, env(nil)); err == nil || !strings.Contains(err.Error(), "history") {
			t.Errorf("%v: %v, want an error naming --history", args, err)
		}
	}
	if !strings.Contains(serveUsage, "[--history D]") {
		t.Errorf("serve's usage line lacks --history")
	}
}
