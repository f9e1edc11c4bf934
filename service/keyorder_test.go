package service_test

import (
	"slices"
	"testing"

	"github.com/hourglass-go/hourglass/service"
)

// TestKeyCompare checks the order of keys in a round: by name, "" last,
// and the round after a cursor (KeyAfter) wrapping round.
func TestKeyCompare(t *testing.T) {
	keys := []string{"c", "", "a", "b", "B", "a-1"}
	slices.SortFunc(keys, service.KeyCompare)
	if want := []string{"B", "a", "a-1", "b", "c", ""}; !slices.Equal(keys, want) {
		t.Fatalf("sorted %q; want %q", keys, want)
	}
	for _, c := range []struct {
		key, cursor string
		after       bool
	}{
		{"a", "", false}, {"", "", false}, {"b", "a", true}, {"a", "a", false},
		{"", "c", true}, {"a", "c", false}, {"d", "c", true},
	} {
		if got := service.KeyLess(c.cursor, c.key); got != c.after {
			t.Errorf("KeyLess(%q, %q) = %v, want %v", c.cursor, c.key, got, c.after)
		}
		if got := service.KeyAfter(c.key, c.cursor); got != c.after {
			t.Errorf("KeyAfter(%q, %q) = %v, want %v", c.key, c.cursor, got, c.after)
		}
	}
}
