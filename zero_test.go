package hourglass_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass"
)

// TestZeroValue_PanicsOnCaller checks that using a Timer or a Keyed not
// made by New or NewKeyed fails at once, on the caller's goroutine, with a
// panic that says so, as time.Timer's Stop does for a Timer not made by
// NewTimer: never an error that looks like a configuration problem, a
// quiet no-op, or a crash in a background goroutine later.
func TestZeroValue_PanicsOnCaller(t *testing.T) {
	f := func() {}
	calls := []struct {
		name, want string
		call       func()
	}{
		{"Timer.AfterFunc", "uninitialized Timer", func() { new(hourglass.Timer).AfterFunc(time.Millisecond, f) }},
		{"Timer.AtFunc", "uninitialized Timer", func() { new(hourglass.Timer).AtFunc(time.Now(), f) }},
		{"Timer.ScheduleAtFixedRate", "uninitialized Timer", func() { new(hourglass.Timer).ScheduleAtFixedRate(0, time.Second, f) }},
		{"Timer.ScheduleWithFixedDelay", "uninitialized Timer", func() { new(hourglass.Timer).ScheduleWithFixedDelay(0, time.Second, f) }},
		{"Timer.Schedule", "uninitialized Timer", func() { new(hourglass.Timer).Schedule(every(time.Second), f) }},
		{"Timer.Stop", "uninitialized Timer", func() { new(hourglass.Timer).Stop() }},
		{"Timer.Pending", "uninitialized Timer", func() { new(hourglass.Timer).Pending() }},
		{"Timer.Stats", "uninitialized Timer", func() { new(hourglass.Timer).Stats() }},
		{"Keyed.Set", "uninitialized Keyed", func() { new(hourglass.Keyed[int]).Set(1, time.Millisecond) }},
		{"Keyed.SetMany", "uninitialized Keyed", func() { new(hourglass.Keyed[int]).SetMany([]int{1}, time.Millisecond) }},
		{"Keyed.Remove", "uninitialized Keyed", func() { new(hourglass.Keyed[int]).Remove(1) }},
		{"Keyed.Deadline", "uninitialized Keyed", func() { new(hourglass.Keyed[int]).Deadline(1) }},
		{"Keyed.Len", "uninitialized Keyed", func() { new(hourglass.Keyed[int]).Len() }},
		{"Keyed.Stop", "uninitialized Keyed", func() { new(hourglass.Keyed[int]).Stop() }},
		{"Keyed.Stats", "uninitialized Keyed", func() { new(hourglass.Keyed[int]).Stats() }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			v := panicOf(c.call)
			s, _ := v.(string)
			method := c.name[strings.IndexByte(c.name, '.')+1:]
			if !strings.HasPrefix(s, "hourglass: ") || !strings.Contains(s, c.want) || !strings.Contains(s, method) {
				t.Errorf("%s on a zero value panicked with %#v, want a string naming %s and %q", c.name, v, method, c.want)
			}
		})
	}
}

// panicOf calls f and returns the value it panicked with, or nil.
func panicOf(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}
