package broker

import (
	"math/rand/v2"
	"testing"

	"github.com/hourglass-go/hourglass/task"
)

// TestSlots_Model runs random puts (new ids, increasing, as the broker
// gives them), updates and deletes of live ids, and re-sets of old ids
// (requeues, recovery) against a map, checking every lookup, the count and
// a full visit, and that pages are freed as they empty.
func TestSlots_Model(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 1))
		var ss slots
		model := map[uint64]slot{}
		var live []uint64
		next := uint64(1 + r.IntN(5000))
		mk := func() slot {
			return slot{due: r.Int64(), prio: r.Uint32(), qs: uint32(r.IntN(8))<<3 | uint32(1+r.IntN(4))}
		}
		check := func(op int) {
			t.Helper()
			if ss.len() != len(model) {
				t.Fatalf("seed %d op %d: len %d, model %d", seed, op, ss.len(), len(model))
			}
		}
		for op := range 20000 {
			switch x := r.IntN(100); {
			case x < 45: // put: a new id, sometimes after a gap
				if r.IntN(50) == 0 {
					next += uint64(r.IntN(3 * slotsPerPage))
				}
				s := mk()
				ss.set(next, s)
				model[next] = s
				live = append(live, next)
				next++
			case x < 85 && len(live) > 0: // delete, mostly older ids
				i := r.IntN(len(live))
				if r.IntN(2) == 0 {
					i = r.IntN(len(live)/4 + 1)
				}
				j := live[i]
				live[i] = live[len(live)-1]
				live = live[:len(live)-1]
				ss.del(j)
				delete(model, j)
				ss.del(j) // twice: nothing
			case x < 95 && len(live) > 0: // update in place
				j := live[r.IntN(len(live))]
				s := mk()
				ss.set(j, s)
				model[j] = s
			default: // an id never given, or given and gone
				j := uint64(r.IntN(int(next) + 10))
				if _, ok := model[j]; !ok {
					if _, ok := ss.get(j); ok {
						t.Fatalf("seed %d op %d: dead id %d found", seed, op, j)
					}
				}
			}
			check(op)
		}
		for j, want := range model {
			if got, ok := ss.get(j); !ok || got != want {
				t.Fatalf("seed %d: get(%d) = %v %v, want %v", seed, j, got, ok, want)
			}
		}
		seen := map[uint64]bool{}
		ss.each(func(j uint64, s slot) bool {
			if seen[j] || model[j] != s {
				t.Fatalf("seed %d: each gave %d %v (seen %v, model %v)", seed, j, s, seen[j], model[j])
			}
			seen[j] = true
			return true
		})
		if len(seen) != len(model) {
			t.Fatalf("seed %d: each visited %d, model %d", seed, len(seen), len(model))
		}
		// Every page but the newest keeps at least a quarter of its slots.
		for k, p := range ss.pages[:len(ss.pages)-1] {
			if p != nil && p.live < slotsSparseBelow {
				t.Fatalf("seed %d: page %d kept with %d live", seed, k, p.live)
			}
		}
		ss.compact()
		for j, want := range model {
			if got, ok := ss.get(j); !ok || got != want {
				t.Fatalf("seed %d: after compact get(%d) = %v %v, want %v", seed, j, got, ok, want)
			}
		}
	}
}

// TestSlots_Recovery: ids arriving in increasing order with gaps (what is
// left of a long run) open pages, and compact frees the thin ones.
func TestSlots_Recovery(t *testing.T) {
	var ss slots
	// 10 thin pages (one id each), then 4 full ones.
	for k := range uint64(10) {
		ss.set(k*slotsPerPage+5, slot{qs: uint32(task.Delayed)})
	}
	for j := uint64(10 * slotsPerPage); j < 14*slotsPerPage; j++ {
		ss.set(j, slot{qs: uint32(task.Ready)})
	}
	ss.compact()
	if len(ss.sparse) != 10 {
		t.Fatalf("sparse holds %d, want the 10 thin pages' ids", len(ss.sparse))
	}
	live := 0
	for _, p := range ss.pages {
		if p != nil {
			live += p.live
		}
	}
	if live != 4*slotsPerPage || ss.len() != live+10 {
		t.Fatalf("pages hold %d, len %d", live, ss.len())
	}
	if len(ss.pages) > 5 {
		t.Fatalf("%d pages for 4 full ones: the freed pages were not dropped", len(ss.pages))
	}
	// An old id set again stays sparse; a new one past the newest page
	// opens a page.
	ss.set(5, slot{qs: uint32(task.Ready)})
	if _, ok := ss.sparse[5]; !ok {
		t.Fatal("old id 5 not in the sparse map")
	}
	n := len(ss.pages)
	ss.set(20*slotsPerPage, slot{qs: uint32(task.Ready)})
	if got := ss.base + uint64(len(ss.pages))<<slotsPageBits; got != 21*slotsPerPage || ss.pages[len(ss.pages)-1] == nil || len(ss.pages) != n+7 {
		t.Fatalf("pages end at %d (%d pages, were %d), want 21 pages' worth with the newest open", got, len(ss.pages), n)
	}
}
