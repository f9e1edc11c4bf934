package hourglass_test

// Keys of several types, and a Keyed that keeps no reference to a key
// it is done with.

import (
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/hourglass-go/hourglass"
)

// keyLog counts the expiries of each key. It is safe for concurrent use.
type keyLog[K comparable] struct {
	mu sync.Mutex
	n  map[K]int
}

func newKeyLog[K comparable]() *keyLog[K] { return &keyLog[K]{n: make(map[K]int)} }

func (l *keyLog[K]) expire(key K) {
	l.mu.Lock()
	l.n[key]++
	l.mu.Unlock()
}

func (l *keyLog[K]) count(key K) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[key]
}

// endpoint is a key without pointers; session is one with a string in it.
type (
	endpoint struct {
		ip   [4]byte
		port uint16
	}
	session struct {
		user string
		id   int
	}
)

// checkKeyType runs many keys of one type through a Keyed: more than a
// page of the Keyed's tables (4096 ids), some removed, some moved, some
// pending at Stop, with ids freed and reused, and checks that each key
// ends the way it should, with its own identity.
func checkKeyType[K comparable](t *testing.T, s structure, key func(i int) K) {
	const n = 6000
	l := newKeyLog[K]()
	k := newKeyed(t, s, l.expire)
	for i := range n {
		set(t, k, key(i), time.Duration(i%50+1)*ms)
	}
	for i := 0; i < n; i += 3 {
		if !k.Remove(key(i)) {
			t.Fatalf("Remove(%v) = false", key(i))
		}
	}
	for i := 1; i < n; i += 3 {
		set(t, k, key(i), time.Hour) // pending at Stop
	}
	for i := n; i < n+n/3; i++ {
		set(t, k, key(i), 100*ms) // reuses the removed keys' ids
	}
	checkLen(t, k, n-(n+2)/3+n/3)
	checkDeadline(t, k, key(4), time.Now().Add(time.Hour))
	advance(100*ms + s.tolerance)

	stopped := make(map[K]int)
	for _, kk := range k.Stop() {
		stopped[kk]++
	}
	for i := range n + n/3 {
		var wantExpired, wantStopped int
		switch {
		case i >= n || i%3 == 2:
			wantExpired = 1
		case i%3 == 1:
			wantStopped = 1
		}
		if got, st := l.count(key(i)), stopped[key(i)]; got != wantExpired || st != wantStopped {
			t.Fatalf("key %v expired %d times and was returned by Stop %d times, want %d and %d", key(i), got, st, wantExpired, wantStopped)
		}
	}
	if len(stopped) != (n+1)/3 {
		t.Errorf("Stop returned %d keys, want %d", len(stopped), (n+1)/3)
	}
}

// TestKeyed_KeyTypes checks keys of several types: strings, which hold
// pointers, built at run time; a struct without pointers; a struct with a
// string.
func TestKeyed_KeyTypes(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		checkKeyType(t, s, func(i int) string { return "conn-" + strconv.Itoa(i) })
		checkKeyType(t, s, func(i int) endpoint {
			return endpoint{ip: [4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}, port: uint16(i % 7)}
		})
		checkKeyType(t, s, func(i int) session { return session{user: "user" + strconv.Itoa(i%97), id: i} })
	})
}

// TestKeyed_ReleasesKeys checks that a Keyed keeps no reference to a key
// whose timeout has ended, removed, expired or returned by Stop, so that
// whatever the key points to can be collected.
func TestKeyed_ReleasesKeys(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		k := newKeyed(t, s, func(*session) {}, hourglass.WithExecutor(hourglass.Inline))
		ws := setPointerKeys(t, k)
		advance(10 * ms) // the second key expires
		k.Stop()         // returns the third, which the test drops
		runtime.GC()
		for i, w := range ws {
			if w.Value() != nil {
				t.Errorf("key %d is still reachable after its timeout ended", i)
			}
		}
	})
}

// setPointerKeys sets three fresh pointer keys on k, removes the first
// and returns weak pointers to them, keeping no strong ones.
// The keys point to sessions, which hold a pointer and so are not tiny
// allocations, whose block another object could keep alive.
func setPointerKeys(t *testing.T, k *hourglass.Keyed[*session]) []weak.Pointer[session] {
	t.Helper()
	var ws []weak.Pointer[session]
	for i, d := range []time.Duration{time.Hour, ms, time.Hour} {
		p := &session{user: strconv.Itoa(i), id: i}
		ws = append(ws, weak.Make(p))
		set(t, k, p, d)
		if i == 0 && !k.Remove(p) {
			t.Error("Remove of a pointer key = false")
		}
	}
	return ws
}
