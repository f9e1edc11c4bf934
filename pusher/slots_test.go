package pusher

import (
	"slices"
	"testing"
)

// TestSlots_Shares: a queue alone holds at most half the slots, so that
// a second one finds its share free beside it; a target is shared the
// same way whatever the queues pushing to it; a queue is left out of
// reserves until its room is a quarter of its share.
func TestSlots_Shares(t *testing.T) {
	target := func(q string) string {
		if q == "c" || q == "d" {
			return "http://shared:80"
		}
		return "http://" + q + ":80"
	}
	s := newSlots(64)
	take, n, left := s.plan([]string{"hang"}, target)
	if !slices.Equal(take, []string{"hang"}) || n != 32 || len(left) != 0 {
		t.Fatalf("first plan: %v %d %v, want hang for 32", take, n, left)
	}
	for range n {
		s.started("hang", target("hang"))
	}
	// hang holds its share: left out; a newcomer gets its share of
	// three.
	take, n, left = s.plan([]string{"hang", "ok"}, target)
	if !slices.Equal(take, []string{"ok"}) || n != 21 || !slices.Equal(left, []string{"hang"}) {
		t.Fatalf("beside a hanging queue: %v %d %v, want ok for 21, hang left out", take, n, left)
	}
	s.unused(n - 1)
	// hang is left out until its room is a quarter of its share: a
	// share of 64/3 = 21 once ok pushes, a room of 5 from 16 pushes.
	s.started("ok", target("ok"))
	for range 20 {
		s.done("hang", target("hang"))
		if s.eligibleLeftOut([]string{"hang"}, target) != (s.queues["hang"] <= 21-5) {
			t.Fatalf("hang with %d pushes: eligible %v, want it from 16 (room 5 of a share of 21)", s.queues["hang"], !(s.queues["hang"] <= 16))
		}
	}
	s.done("ok", target("ok"))
	for s.queues["hang"] > 0 {
		s.done("hang", target("hang"))
	}
	if s.free != 64 || len(s.queues) != 0 || len(s.targets) != 0 {
		t.Fatalf("after every push: %+v", s)
	}

	// Two queues to one target share the target's half.
	take, n, _ = s.plan([]string{"c", "d"}, target)
	if len(take) != 2 || n != 32 {
		t.Fatalf("two queues of a target: %v %d", take, n)
	}
	for range 32 {
		s.started("c", target("c"))
	}
	if take, n, _ := s.plan([]string{"d"}, target); n != 0 {
		t.Errorf("queue d beside c, which holds its target's share: plan %v %d, want none", take, n)
	}

	// No free slot: no plan; many queues: a share of 1 each.
	s = newSlots(4)
	for _, q := range []string{"a", "b", "e"} {
		take, n, _ := s.plan([]string{q}, target)
		if n != 1 && q != "a" || q == "a" && n != 2 {
			t.Fatalf("queue %s: plan %v %d", q, take, n)
		}
		for range n {
			s.started(q, target(q))
		}
	}
	if s.free != 0 {
		t.Fatalf("free %d, want 0", s.free)
	}
	if _, n, _ := s.plan([]string{"g"}, target); n != 0 {
		t.Errorf("no free slot: plan of %d", n)
	}
}
