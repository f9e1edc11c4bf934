package beanstalk_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hourglass-go/hourglass/beanstalk"
	"github.com/hourglass-go/hourglass/task"
)

// TestWatch_BoundAndNothingMade: a watch list holds at most
// task.MaxWatch tubes, a watch past it is answered OUT_OF_MEMORY and
// changes nothing, and tubes watched and reserved from (waiting or not)
// make no queue, on both engines.
func TestWatch_BoundAndNothingMade(t *testing.T) {
	eachBackend(t, func(t *testing.T, start func(testing.TB, beanstalk.Options) *testServer) {
		s := start(t, beanstalk.Options{})
		c := dial(t, s.addr)
		var b strings.Builder
		for i := 1; i < task.MaxWatch; i++ { // "default" is the first
			fmt.Fprintf(&b, "watch w%d\r\n", i)
		}
		c.send(b.String())
		for i := 1; i < task.MaxWatch; i++ {
			if got, want := c.read(5e9), fmt.Sprintf("WATCHING %d\r\n", i+1); got != want {
				t.Fatalf("watch %d: %q, want %q", i, got, want)
			}
		}
		c.must("watch one-too-many", "OUT_OF_MEMORY")
		c.must("watch w1", fmt.Sprintf("WATCHING %d", task.MaxWatch)) // watched already: fine
		c.must("ignore w1", fmt.Sprintf("WATCHING %d", task.MaxWatch-1))
		c.must("watch one-more", fmt.Sprintf("WATCHING %d", task.MaxWatch))
		c.must("reserve-with-timeout 0", "TIMED_OUT")
		c.must("reserve-with-timeout 1", "TIMED_OUT")
		qs, err := s.b.Queues(context.Background())
		if err != nil || len(qs) != 0 {
			t.Errorf("queues after watches and reserves: %d, %v; want none", len(qs), err)
		}
	})
}

// TestTube_CountersGoWithTube: a tube no connection refers to and that
// holds no job is freed with its counters, as beanstalkd frees it: used
// again, its cmd-delete starts from 0. The server keeps nothing for it
// meanwhile.
func TestTube_CountersGoWithTube(t *testing.T) {
	eachBackend(t, func(t *testing.T, start func(testing.TB, beanstalk.Options) *testServer) {
		s := start(t, beanstalk.Options{})
		c := dial(t, s.addr)
		c.must("use gone", "USING gone")
		c.must("watch gone", "WATCHING 2")
		id := c.put(0, 0, 60, "x")
		if got := c.do("reserve-with-timeout 5"); !strings.HasPrefix(got, fmt.Sprintf("RESERVED %d ", id)) {
			t.Fatalf("reserve: %q", got)
		}
		c.must(fmt.Sprintf("delete %d", id), "DELETED")
		if got := yamlField(c.do("stats-tube gone"), "cmd-delete"); got != "1" {
			t.Fatalf("cmd-delete of the tube in use: %q, want 1", got)
		}
		c.must("ignore gone", "WATCHING 1")
		c.must("use default", "USING default")
		c.must("stats-tube gone", "NOT_FOUND")
		c.must("use gone", "USING gone")
		if got := yamlField(c.do("stats-tube gone"), "cmd-delete"); got != "0" {
			t.Errorf("cmd-delete of the tube made again: %q, want 0 (beanstalkd's)", got)
		}
	})
}
