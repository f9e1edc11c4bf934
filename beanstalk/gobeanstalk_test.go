package beanstalk_test

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	gobeanstalk "github.com/beanstalkd/go-beanstalk"

	"github.com/hourglass-go/hourglass/beanstalk"
)

// These tests drive the server with go-beanstalk, a client written for
// beanstalkd, over each backend (a broker on a Pebble store, a cluster
// node): what its users do must work unchanged.

func goClient(t *testing.T, addr string) *gobeanstalk.Conn {
	t.Helper()
	c, err := gobeanstalk.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// is reports whether err is a go-beanstalk ConnError recording want.
func is(err, want error) bool { return errors.Is(err, want) }

func TestGoBeanstalk(t *testing.T) {
	t.Parallel()
	eachBackend(t, testGoBeanstalk)
}

func testGoBeanstalk(t *testing.T, start func(testing.TB, beanstalk.Options) *testServer) {
	ts := start(t, beanstalk.Options{})

	t.Run("PutReserveDelete", func(t *testing.T) {
		t.Parallel()
		c := goClient(t, ts.addr)
		tube := gobeanstalk.NewTube(c, "prd")
		id, err := tube.Put([]byte("hello"), 1, 0, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		ws := gobeanstalk.NewTubeSet(c, "prd")
		got, body, err := ws.Reserve(time.Second)
		if err != nil || got != id || string(body) != "hello" {
			t.Fatalf("Reserve = %d, %q, %v; want %d, hello", got, body, err, id)
		}
		if err := c.Delete(id); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(id); !is(err, gobeanstalk.ErrNotFound) {
			t.Fatalf("second Delete: %v, want not found", err)
		}
		if _, _, err := ws.Reserve(0); !is(err, gobeanstalk.ErrTimeout) {
			t.Fatalf("Reserve of an empty tube: %v, want timeout", err)
		}
	})

	t.Run("Delay", func(t *testing.T) {
		t.Parallel()
		c := goClient(t, ts.addr)
		tube := gobeanstalk.NewTube(c, "delay")
		start := time.Now()
		id, err := tube.Put([]byte("later"), 1, time.Second, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if pid, _, err := tube.PeekDelayed(); err != nil || pid != id {
			t.Fatalf("PeekDelayed = %d, %v", pid, err)
		}
		ws := gobeanstalk.NewTubeSet(c, "delay")
		if _, _, err := ws.Reserve(0); !is(err, gobeanstalk.ErrTimeout) {
			t.Fatalf("Reserve before the delay: %v, want timeout", err)
		}
		got, _, err := ws.Reserve(5 * time.Second)
		if err != nil || got != id {
			t.Fatalf("Reserve = %d, %v", got, err)
		}
		if took := time.Since(start); took < time.Second {
			t.Fatalf("delayed job reserved after %v, before its delay of 1s", took)
		}
		c.Delete(id)
	})

	t.Run("PriorityOrder", func(t *testing.T) {
		t.Parallel()
		c := goClient(t, ts.addr)
		tube := gobeanstalk.NewTube(c, "prio")
		// ids[i] is the job put i-th. Other subtests put jobs meanwhile, so
		// the ids need not be consecutive.
		var ids []uint64
		for _, pri := range []uint32{50, 10, 4294967295, 0, 10} {
			id, err := tube.Put([]byte(strconv.Itoa(int(pri))), pri, 0, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		want := []uint64{ids[3], ids[1], ids[4], ids[0], ids[2]}
		ws := gobeanstalk.NewTubeSet(c, "prio")
		for i, w := range want {
			id, _, err := ws.Reserve(time.Second)
			if err != nil || id != w {
				t.Fatalf("reserve %d: %d, %v; want %d", i, id, err, w)
			}
			c.Delete(id)
		}
	})

	t.Run("ReleaseWithDelay", func(t *testing.T) {
		t.Parallel()
		c := goClient(t, ts.addr)
		tube := gobeanstalk.NewTube(c, "release")
		id, _ := tube.Put([]byte("r"), 5, 0, time.Minute)
		ws := gobeanstalk.NewTubeSet(c, "release")
		if _, _, err := ws.Reserve(time.Second); err != nil {
			t.Fatal(err)
		}
		if err := c.Release(id, 3, time.Second); err != nil {
			t.Fatal(err)
		}
		st, err := c.StatsJob(id)
		if err != nil || st["state"] != "delayed" || st["pri"] != "3" || st["releases"] != "1" {
			t.Fatalf("StatsJob after release: %v, %v", st, err)
		}
		if _, _, err := ws.Reserve(0); !is(err, gobeanstalk.ErrTimeout) {
			t.Fatalf("Reserve during the release delay: %v", err)
		}
		got, _, err := ws.Reserve(5 * time.Second)
		if err != nil || got != id {
			t.Fatalf("Reserve after the delay = %d, %v", got, err)
		}
		if err := c.Release(id+1000, 0, 0); !is(err, gobeanstalk.ErrNotFound) {
			t.Fatalf("Release of an unknown job: %v", err)
		}
		c.Delete(id)
	})

	t.Run("BuryKick", func(t *testing.T) {
		t.Parallel()
		c := goClient(t, ts.addr)
		tube := gobeanstalk.NewTube(c, "bury")
		ws := gobeanstalk.NewTubeSet(c, "bury")
		a, _ := tube.Put([]byte("a"), 1, 0, time.Minute)
		b, _ := tube.Put([]byte("b"), 1, 0, time.Minute)
		for range 2 {
			id, _, err := ws.Reserve(time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Bury(id, 7); err != nil {
				t.Fatal(err)
			}
		}
		if id, _, err := tube.PeekBuried(); err != nil || id != a {
			t.Fatalf("PeekBuried = %d, %v; want %d", id, err, a)
		}
		if n, err := tube.Kick(1); err != nil || n != 1 {
			t.Fatalf("Kick(1) = %d, %v", n, err)
		}
		if err := c.KickJob(b); err != nil {
			t.Fatal(err)
		}
		if err := c.KickJob(b); !is(err, gobeanstalk.ErrNotFound) {
			t.Fatalf("KickJob of a ready job: %v", err)
		}
		st, _ := c.StatsJob(a)
		if st["buries"] != "1" || st["kicks"] != "1" || st["state"] != "ready" || st["pri"] != "7" {
			t.Fatalf("StatsJob: %v", st)
		}
		for range 2 {
			id, _, err := ws.Reserve(time.Second)
			if err != nil {
				t.Fatal(err)
			}
			c.Delete(id)
		}
	})

	t.Run("TTR", func(t *testing.T) {
		t.Parallel()
		c := goClient(t, ts.addr)
		tube := gobeanstalk.NewTube(c, "ttr")
		ws := gobeanstalk.NewTubeSet(c, "ttr")
		id, _ := tube.Put([]byte("t"), 1, 0, 2*time.Second)
		if _, _, err := ws.Reserve(time.Second); err != nil {
			t.Fatal(err)
		}
		// A waiting reserve reaches the job's last second.
		start := time.Now()
		if _, _, err := ws.Reserve(10 * time.Second); !is(err, gobeanstalk.ErrDeadline) {
			t.Fatalf("Reserve in the TTR's last second: %v, want deadline soon", err)
		}
		if took := time.Since(start); took < 500*time.Millisecond || took > 1800*time.Millisecond {
			t.Fatalf("DEADLINE_SOON after %v, want about 1s", took)
		}
		if err := c.Touch(id); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ws.Reserve(0); !is(err, gobeanstalk.ErrTimeout) {
			t.Fatalf("Reserve after a touch: %v, want timeout", err)
		}
		// Expiry: another connection gets the job back.
		other := gobeanstalk.NewTubeSet(goClient(t, ts.addr), "ttr")
		got, _, err := other.Reserve(5 * time.Second)
		if err != nil || got != id {
			t.Fatalf("Reserve of the timed-out job = %d, %v", got, err)
		}
		st, _ := other.Conn.StatsJob(id)
		if st["timeouts"] != "1" || st["reserves"] != "2" || st["state"] != "reserved" {
			t.Fatalf("StatsJob: %v", st)
		}
		if err := c.Delete(id); !is(err, gobeanstalk.ErrNotFound) {
			t.Fatalf("Delete by the first holder: %v, want not found", err)
		}
		if err := other.Conn.Delete(id); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("Stats", func(t *testing.T) {
		t.Parallel()
		c := goClient(t, ts.addr)
		tube := gobeanstalk.NewTube(c, "stats")
		tube.Put([]byte("s"), 1, 0, time.Minute)
		tube.Put([]byte("s"), 2000, 0, time.Minute)
		tube.Put([]byte("s"), 1, 100*time.Second, time.Minute)
		st, err := tube.Stats()
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"name": "stats", "current-jobs-ready": "2", "current-jobs-urgent": "1",
			"current-jobs-delayed": "1", "total-jobs": "3", "current-using": "1"}
		for k, v := range want {
			if st[k] != v {
				t.Errorf("stats-tube %s = %q, want %q", k, st[k], v)
			}
		}
		all, err := c.Stats()
		if err != nil || all["current-connections"] == "" || all["max-job-size"] != "65535" {
			t.Fatalf("Stats = %v, %v", all, err)
		}
		tubes, err := c.ListTubes()
		if err != nil || !slices.Contains(tubes, "stats") || !slices.Contains(tubes, "default") {
			t.Fatalf("ListTubes = %v, %v", tubes, err)
		}
	})

	t.Run("PauseTube", func(t *testing.T) {
		t.Parallel()
		c := goClient(t, ts.addr)
		tube := gobeanstalk.NewTube(c, "pause")
		id, _ := tube.Put([]byte("p"), 1, 0, time.Minute)
		start := time.Now()
		if err := tube.Pause(time.Second); err != nil {
			t.Fatal(err)
		}
		ws := gobeanstalk.NewTubeSet(c, "pause")
		got, _, err := ws.Reserve(5 * time.Second)
		if err != nil || got != id {
			t.Fatalf("Reserve = %d, %v", got, err)
		}
		if took := time.Since(start); took < 900*time.Millisecond {
			t.Fatalf("reserved from a tube paused for 1s after %v", took)
		}
		c.Delete(id)
		if err := gobeanstalk.NewTube(c, "nosuch").Pause(time.Second); !is(err, gobeanstalk.ErrNotFound) {
			t.Fatalf("Pause of a missing tube: %v", err)
		}
	})

	t.Run("Body60kB", func(t *testing.T) {
		t.Parallel()
		c := goClient(t, ts.addr)
		body := bytes.Repeat([]byte("0123456789\r\n\x00\xff"), 60000/14+1)[:60000]
		tube := gobeanstalk.NewTube(c, "big")
		id, err := tube.Put(body, 1, 0, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := c.Peek(id); err != nil || !bytes.Equal(got, body) {
			t.Fatalf("Peek: %d bytes, %v", len(got), err)
		}
		_, got, err := gobeanstalk.NewTubeSet(c, "big").Reserve(time.Second)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("Reserve: %d bytes, %v", len(got), err)
		}
		c.Delete(id)
		if _, err := tube.Put(make([]byte, 65536), 1, 0, time.Minute); !is(err, gobeanstalk.ErrJobTooBig) {
			t.Fatalf("Put of 65536 bytes: %v, want job too big", err)
		}
	})
}
