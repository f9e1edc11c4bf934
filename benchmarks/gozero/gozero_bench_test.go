// Package gozero_test compares hourglass's Keyed with go-zero's
// collection.TimingWheel, the timing wheel of a popular Go framework, on
// the operation both are built for: moving the pending timeout of an
// existing key. It is a module of its own so that go-zero and its
// dependencies stay out of hourglass's go.mod.
package gozero_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass"
	"github.com/zeromicro/go-zero/core/collection"
)

var sizes = []int{10_000, 1_000_000}

// timeout is where every Set moves its key: an idle timeout pushed back.
const timeout = 30 * time.Second

func noop() {}

// keyStream returns 2^22 picks of keys below n, drawn before timing: more
// than there are keys, so that the moves reach keys all over the storage
// (a short list read in a cycle would move the same few keys, whose
// entries stay in cache).
func keyStream(n int) []uint64 {
	ks := make([]uint64, 1<<22)
	for i := range ks {
		ks[i] = uint64(rand.IntN(n))
	}
	return ks
}

// BenchmarkKeyed_Set_Existing moves the pending timeout of a random one of
// n keys 30 s ahead: hourglass's Keyed.Set (hierarchical wheel, 1 ms
// tick), a map[uint64]*time.Timer and Reset, and go-zero's
// TimingWheel.MoveTimer (1 s interval, 300 slots, as go-zero's own
// collection.Cache uses it).
//
// go-zero's TimingWheel does its work on a goroutine of its own: MoveTimer
// sends the move over an unbuffered channel and returns once that
// goroutine has taken it, while it may still be applying the move before.
// So what is measured for it is what a caller pays: the hand-off, which
// waits for the previous move to be applied, plus boxing the key in an
// interface (an allocation for keys of 256 and up). The CPU of the wheel's
// goroutine runs on another core and shows only through that wait. Keyed
// and the runtime apply the move in the call.
func BenchmarkKeyed_Set_Existing(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("runtime/n=%d", n), func(b *testing.B) {
			m := make(map[uint64]*time.Timer, n)
			for i := range uint64(n) {
				m[i] = time.AfterFunc(timeout, noop)
			}
			ks := keyStream(n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				m[ks[i&(len(ks)-1)]].Reset(timeout)
				i++
			}
			b.StopTimer()
			for _, t := range m {
				t.Stop()
			}
		})
		b.Run(fmt.Sprintf("keyed/n=%d", n), func(b *testing.B) {
			k := hourglass.NewKeyed(func(uint64) {})
			for i := range uint64(n) {
				if err := k.Set(i, timeout); err != nil {
					b.Fatal(err)
				}
			}
			ks := keyStream(n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				k.Set(ks[i&(len(ks)-1)], timeout)
				i++
			}
			b.StopTimer()
			k.Stop()
		})
		b.Run(fmt.Sprintf("gozero/n=%d", n), func(b *testing.B) {
			tw, err := collection.NewTimingWheel(time.Second, 300, func(key, value any) {})
			if err != nil {
				b.Fatal(err)
			}
			for i := range uint64(n) {
				if err := tw.SetTimer(i, nil, timeout); err != nil {
					b.Fatal(err)
				}
			}
			ks := keyStream(n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				tw.MoveTimer(ks[i&(len(ks)-1)], timeout)
				i++
			}
			b.StopTimer()
			tw.Stop()
		})
	}
}
