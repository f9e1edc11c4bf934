package e2e_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Tasks of TestDamage_PayloadBlock: each payload is about twice Pebble's
// 4 KiB data block, so that it lies in a block of its own, and random,
// so that it is stored as written (Snappy finds nothing to compress) and
// can be found in the table file.
const (
	damageTasks   = 10
	damagePayload = 8 << 10
	damagedTask   = damageTasks / 2 // not the first nor the last of the era's payloads: their blocks may hold records and list entries
)

// TestDamage_PayloadBlock flips a byte in the table block that holds one
// task's payload, and checks that the task does not block its queue:
// every reserve answers, the others are handed out (the damaged one has
// the best priority, so each reserve meets it first), the damaged one is
// dead with the damage logged, and it can be deleted. Before issue 27's
// fix each reserve reaching it answered 500, and so did its delete.
func TestDamage_PayloadBlock(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	rng := rand.New(rand.NewPCG(27, 27))
	payloads := make([]string, damageTasks)
	for i := range payloads {
		raw := make([]byte, damagePayload*3/4)
		for j := range raw {
			raw[j] = byte(rng.Uint32())
		}
		payloads[i] = base64.StdEncoding.EncodeToString(raw)
		prio := 1
		if i == damagedTask {
			prio = 0
		}
		a := s.call("POST", "/v1/queues/q/tasks", fmt.Sprintf(`{"id":"t%d","payload":%q,"priority":%d}`, i, payloads[i], prio))
		if a.status != http.StatusCreated {
			t.Fatalf("put t%d: %v", i, a)
		}
	}
	// A restart replays the WAL into a table; a clean stop then leaves
	// every payload in a table file.
	s.kill()
	s.start()
	s.stop()
	table, off := findInTables(t, s.data, payloads[damagedTask][1000:1100])
	damage(t, table, off+50, 1)

	s.start()
	var got []string
	for range damageTasks {
		a := s.call("POST", "/v1/queues/q/reserve", `{"max":1}`)
		if a.status != http.StatusOK {
			t.Fatalf("reserve with a damaged payload in the queue: %v; want 200", a)
		}
		var r struct {
			Tasks []struct {
				ID      string `json:"id"`
				Payload string `json:"payload"`
			} `json:"tasks"`
		}
		if err := json.Unmarshal(a.body, &r); err != nil {
			t.Fatalf("reserve: %v: %s", err, a.body)
		}
		if len(r.Tasks) == 0 {
			break
		}
		for _, tk := range r.Tasks {
			got = append(got, tk.ID)
			var i int
			fmt.Sscanf(tk.ID, "t%d", &i)
			if tk.Payload != payloads[i] {
				t.Errorf("task %s handed out with a payload other than its own", tk.ID)
			}
		}
	}
	if len(got) != damageTasks-1 || strings.Contains(strings.Join(got, ","), fmt.Sprintf("t%d", damagedTask)) {
		t.Errorf("reserved %v; want every task but t%d", got, damagedTask)
	}
	if a := s.call("GET", "/v1/queues", ""); !strings.Contains(string(a.body), `"dead":1`) {
		t.Errorf("queues after the reserves: %v; want one dead", a)
	}
	if !s.logged("task damaged in the store") || !s.logged(fmt.Sprintf(`"id":"t%d"`, damagedTask)) {
		t.Errorf("no log line naming the damaged task:\n%s", s.logText())
	}
	if a := s.call("DELETE", fmt.Sprintf("/v1/queues/q/tasks/t%d", damagedTask), ""); a.status != http.StatusNoContent {
		t.Errorf("delete of the damaged task: %v; want 204", a)
	}
	if a := s.call("GET", fmt.Sprintf("/v1/queues/q/tasks/t%d", damagedTask), ""); a.status != http.StatusNotFound && !(a.status == http.StatusOK && strings.Contains(string(a.body), `"state":"finished"`)) {
		t.Errorf("get of the deleted task: %v; want its finished record, or 404 (a damaged record has none)", a)
	}
}

// findInTables returns the Pebble table file in dir holding text, and
// where; it fails t unless exactly one holds it once.
func findInTables(t *testing.T, dir, text string) (string, int64) {
	t.Helper()
	tables, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil {
		t.Fatal(err)
	}
	found, at := "", int64(-1)
	for _, f := range tables {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(b, []byte(text)); i >= 0 {
			if found != "" || bytes.Count(b, []byte(text)) > 1 {
				t.Fatalf("the payload is in more than one place (%s, %s)", found, f)
			}
			found, at = f, int64(i)
		}
	}
	if found == "" {
		t.Fatalf("no table in %s holds the payload (tables %v)", dir, tables)
	}
	return found, at
}
