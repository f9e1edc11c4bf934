package cluster

import (
	"io"
	"log/slog"
	"testing"
	"time"
)

// TestHeldThrough: a partition counts as held throughout a statement only
// while nothing held changed since the statement began and its lease
// surely runs on for more than a renewal period.
func TestHeldThrough(t *testing.T) {
	const lease = 3 * time.Second
	m := newMembership(nil, "a", "i", 4, lease, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil, memberHandlers{dropped: func([]int) {}})
	now := time.Now()
	m.owned[0], m.owned[1] = 7, 7
	m.renewed([]int32{0, 1}, []int64{7, 7}, now)
	m.gen = 1
	gen := m.generation()
	if !m.heldThrough(0, gen) {
		t.Fatal("partition 0, renewed just now, not held throughout")
	}
	if m.heldThrough(2, gen) {
		t.Error("partition 2, never held, held throughout")
	}
	// Renewed at an epoch no longer held: passed over.
	m.renewed([]int32{1}, []int64{6}, now.Add(-lease))
	if !m.heldThrough(1, gen) {
		t.Error("a renewal at an old epoch shortened the lease held")
	}
	// A lease that runs out within a renewal period is not sure.
	m.renewed([]int32{1}, []int64{7}, now.Add(-lease+lease/renewBound))
	if m.heldThrough(1, gen) {
		t.Error("partition 1, its lease ending within a renewal period, held throughout")
	}
	// Any partition dropped meanwhile: the generation moved on.
	m.drop([]int{1})
	if m.heldThrough(0, gen) {
		t.Error("partition 0 held throughout a drop")
	}
	if !m.heldThrough(0, m.generation()) {
		t.Error("partition 0 not held from the new generation")
	}
}
