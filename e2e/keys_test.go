package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

// TestKeys_Put: a task's "key", put single, in a batch or by the CLI's
// --key, is kept across a restart and shown by GET, a reserve, a list
// and the CLI; GET .../tasks?key= and `hourglass tasks --key` find a
// key's tasks; a bad key is 400 naming it, the task not put.
func TestKeys_Put(t *testing.T) { engines(t, testKeysPut) }

func testKeysPut(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	if a := s.call("POST", "/v1/queues/ky/tasks", `{"id":"a","key":"tenant-42","payload":1}`); a.status != 201 || !strings.Contains(string(a.body), `"key":"tenant-42"`) {
		t.Fatalf("put with a key: %s", a)
	}
	if a := s.call("POST", "/v1/queues/ky/tasks:batch", `{"tasks":[{"id":"b","key":"tenant-7"},{"id":"c"},{"id":"bad","key":"a b"}]}`); a.status != 200 {
		t.Fatalf("batch put: %s", a)
	} else {
		var res api.BatchResponse
		if err := json.Unmarshal(a.body, &res); err != nil || len(res.Results) != 3 || res.Results[0].Task == nil || res.Results[0].Task.Key != "tenant-7" ||
			res.Results[1].Task == nil || res.Results[1].Task.Key != "" || res.Results[2].Task != nil || !strings.Contains(res.Results[2].Error, "key") {
			t.Fatalf("batch put: %s", a)
		}
	}
	for _, body := range []string{`{"id":"x","key":"a/b"}`, `{"id":"x","key":"` + strings.Repeat("k", 201) + `"}`} {
		if a := s.call("POST", "/v1/queues/ky/tasks", body); a.status != 400 || !strings.Contains(string(a.body), `"error":"hourglass: `) || !strings.Contains(string(a.body), "key") {
			t.Errorf("put %s: %s; want 400 naming the key", body, a)
		}
	}
	_, stderr, code := runCLI(t, nil, "put", "ky", "7", "--id", "d", "--key", "tenant-42", "--server", s.url())
	if code != 0 {
		t.Fatalf("hourglass put --key: %d %q", code, stderr)
	}

	s.stop()
	s.start()
	c := s.client()
	ctx := context.Background()
	want := map[string]string{"a": "tenant-42", "b": "tenant-7", "c": "", "d": "tenant-42"}
	for id, k := range want {
		tk, err := c.Get(ctx, "ky", id)
		if err != nil || tk.Key != k {
			t.Fatalf("GET %s after a restart: key %q, %v; want %q", id, tk.Key, err, k)
		}
	}
	if _, err := c.Get(ctx, "ky", "x"); err == nil {
		t.Fatal("a task with a bad key was put")
	}
	ids := func(path string) string {
		t.Helper()
		a := s.call("GET", path, "")
		var res api.TasksResponse
		if a.status != 200 || json.Unmarshal(a.body, &res) != nil {
			t.Fatalf("GET %s: %s", path, a)
		}
		var out []string
		for _, tk := range res.Tasks {
			out = append(out, tk.ID+"="+tk.Key)
		}
		return strings.Join(out, " ")
	}
	if got := ids("/v1/queues/ky/tasks?key=tenant-42"); got != "a=tenant-42 d=tenant-42" {
		t.Errorf("?key=tenant-42: %q", got)
	}
	if got := ids("/v1/queues/ky/tasks?key=tenant-7&state=ready"); got != "b=tenant-7" {
		t.Errorf("?key=tenant-7&state=ready: %q", got)
	}
	if got := ids("/v1/queues/ky/tasks"); got != "a=tenant-42 b=tenant-7 c= d=tenant-42" {
		t.Errorf("the plain list: %q", got)
	}
	if a := s.call("GET", "/v1/queues/ky/tasks?key=a%2Fb", ""); a.status != 400 || !strings.Contains(string(a.body), "key") {
		t.Errorf("?key=a/b: %s; want 400 naming the key", a)
	}
	out, stderr, code := runCLI(t, nil, "tasks", "ky", "--key", "tenant-7", "--server", s.url())
	if code != 0 || !strings.Contains(out, `"id":"b"`) || !strings.Contains(out, `"key":"tenant-7"`) || strings.Contains(out, `"id":"a"`) {
		t.Errorf("hourglass tasks --key: %d %q %q", code, out, stderr)
	}
	ts, err := c.Reserve(ctx, "ky", 10, 5*time.Second)
	if err != nil || len(ts) != len(want) {
		t.Fatalf("reserve: %d tasks, %v", len(ts), err)
	}
	for _, tk := range ts {
		if tk.Key != want[tk.ID] {
			t.Errorf("reserve: task %s has key %q, want %q", tk.ID, tk.Key, want[tk.ID])
		}
	}

	// GET .../keys: busiest first, in pages that chain.
	var got []string
	path := "/v1/queues/ky/keys?limit=2"
	for range 4 {
		a := s.call("GET", path, "")
		var res api.KeysResponse
		if a.status != 200 || json.Unmarshal(a.body, &res) != nil {
			t.Fatalf("GET %s: %s", path, a)
		}
		for _, k := range res.Keys {
			got = append(got, fmt.Sprintf("%s:%d/%d/%d", k.Key, k.Ready, k.Reserved, k.Delayed))
		}
		if res.Next == "" {
			break
		}
		path = "/v1/queues/ky/keys?limit=2&after=" + url.QueryEscape(res.Next)
	}
	if g := strings.Join(got, " "); g != "tenant-42:0/2/0 :0/1/0 tenant-7:0/1/0" {
		t.Errorf("keys: %q", g)
	}
	if ks, next, err := c.Keys(ctx, "ky", "", 1); err != nil || len(ks) != 1 || ks[0].Key != "tenant-42" || ks[0].Reserved != 2 || next != "2/tenant-42" {
		t.Errorf("client Keys: %+v %q %v", ks, next, err)
	}
	for _, path := range []string{"/v1/queues/ky/keys?limit=0", "/v1/queues/ky/keys?after=nope"} {
		if a := s.call("GET", path, ""); a.status != 400 || !strings.Contains(string(a.body), `"error":"hourglass: `) {
			t.Errorf("GET %s: %s; want 400", path, a)
		}
	}
}
