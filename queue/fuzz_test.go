package queue_test

import (
	"testing"
	"time"
)

// fuzzEntries is the number of entries a fuzzed stream works on: five bits
// of each operation's first byte.
const fuzzEntries = 32

// decodeOps turns fuzz input into operations, two bytes each. The first
// byte is the kind (low 3 bits, the eighth kind being another add) and the
// entry (high 5 bits), which for advances also picks the fire reaction. The
// second byte is the delta: a scale (high 3 bits) times 0 to 31 (low 5
// bits), so one byte reaches from a nanosecond to 2^63.
func decodeOps(data []byte) []op {
	// The fuzzer minimizes each new input by trying O(len²) shorter ones,
	// which at 256 ops took the whole of a one-minute run; 64 ops keep it
	// to seconds. TestModel runs the long streams.
	const maxOps = 64
	ops := make([]op, 0, min(len(data)/2, maxOps))
	for k := 0; k+1 < len(data) && len(ops) < maxOps; k += 2 {
		a, b := data[k], data[k+1]
		kind := opKind(a & 7)
		if kind >= numOpKinds {
			kind = opAdd
		}
		i := int(a >> 3)
		ops = append(ops, op{
			kind:  kind,
			i:     i,
			delta: uint64(b&31) * scales[b>>5],
			react: reaction(i % int(numReactions)),
		})
	}
	return ops
}

// fuzzStructures are the structures fuzzed: one of each, and the two
// configurations with the most edge cases, the hierarchical wheel with a
// 1ns tick (11 levels, the top one partly used) and the hashed wheel with
// one slot (every entry rounds away but the next tick's).
var fuzzStructures = append(structures(), hierarchicalWheel(time.Nanosecond), hashedWheel(time.Millisecond, 1))

// FuzzQueues runs fuzzed operation streams against every structure and the
// reference model of model_test.go. As a normal test it runs the seeds:
//
//	go test -fuzz=FuzzQueues -fuzztime=60s ./queue
func FuzzQueues(f *testing.F) {
	const (
		add, addPast, addFar, remove, adv, advBack, advNext = 0, 1, 2, 3, 4, 5, 6
		ns, us, milli, hundredMs, sec, hour, year, huge     = 0 << 5, 1 << 5, 2 << 5, 3 << 5, 4 << 5, 5 << 5, 6 << 5, 7 << 5
	)
	entry := func(i byte) byte { return i << 3 }
	// Add two entries a few milliseconds out and advance past them.
	f.Add([]byte{add | entry(0), milli | 3, add | entry(1), milli | 5, adv, milli | 4, adv, milli | 4})
	// Equal deadlines, one removed, time moving back.
	f.Add([]byte{add | entry(0), milli | 2, add | entry(1), milli | 2, add | entry(2), milli | 2,
		remove | entry(1), 0, advBack, sec | 1, adv, milli | 2, adv, 0})
	// Far and past deadlines, driven by Next through cascades.
	f.Add([]byte{add | entry(0), hour | 7, add | entry(1), year | 3, addFar | entry(2), ns | 1, addFar | entry(3), 0,
		addPast | entry(4), sec | 9, advNext, 0, advNext, 0, advNext, 0, advNext, 0, advNext, 0, advNext, 0})
	// Fire callbacks that re-add (entry 1 mod 3) and remove (entry 2 mod 3).
	f.Add([]byte{add | entry(0), milli | 1, add | entry(1), milli | 1, add | entry(2), milli | 1,
		adv | entry(1), milli | 1, adv | entry(2), milli | 1, adv | entry(1), milli | 3, adv, hundredMs | 1})
	// Huge leaps of time with deadlines in sub-millisecond ticks.
	f.Add([]byte{add | entry(5), us | 31, add | entry(6), ns | 31, adv, huge | 1, add | entry(5), us | 1,
		adv, huge | 31, add | entry(7), 0, adv, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		ops := decodeOps(data)
		for _, s := range fuzzStructures {
			runOps(t, s, fuzzEntries, ops)
		}
	})
}
