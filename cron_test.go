package hourglass_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass"
)

func TestCron_Next(t *testing.T) {
	est := time.FixedZone("EST", -5*60*60)
	jst := time.FixedZone("JST", 9*60*60)
	utc := func(month time.Month, day, hour, min, sec, nsec int) time.Time {
		return time.Date(2025, month, day, hour, min, sec, nsec, time.UTC)
	}
	for _, tc := range []struct {
		expr  string
		start time.Time
		want  []time.Time // successive activations after start
	}{
		{"*/5 * * * *", utc(3, 10, 12, 3, 30, 0),
			[]time.Time{utc(3, 10, 12, 5, 0, 0), utc(3, 10, 12, 10, 0, 0)}},
		// Next is strictly after its argument, even on an activation.
		{"*/5 * * * *", utc(3, 10, 12, 5, 0, 0),
			[]time.Time{utc(3, 10, 12, 10, 0, 0), utc(3, 10, 12, 15, 0, 0)}},
		{"@hourly", utc(3, 10, 23, 59, 59, 900_000_000),
			[]time.Time{utc(3, 11, 0, 0, 0, 0), utc(3, 11, 1, 0, 0, 0)}},
		// @every drops the start's fraction of a second.
		{"@every 90s", utc(3, 10, 12, 0, 0, 250_000_000),
			[]time.Time{utc(3, 10, 12, 1, 30, 0), utc(3, 10, 12, 3, 0, 0)}},
		{"@every 1h30m", utc(3, 10, 12, 0, 0, 0),
			[]time.Time{utc(3, 10, 13, 30, 0, 0), utc(3, 10, 15, 0, 0, 0)}},
		// Friday 10:00 UTC, given in EST: the next weekdays at 09:00 UTC
		// are Monday and Tuesday, returned in EST.
		{"CRON_TZ=UTC 0 9 * * 1-5", utc(3, 7, 10, 0, 0, 0).In(est),
			[]time.Time{utc(3, 10, 9, 0, 0, 0).In(est), utc(3, 11, 9, 0, 0, 0).In(est)}},
		{"TZ=UTC @daily", utc(3, 10, 12, 0, 0, 0).In(jst),
			[]time.Time{utc(3, 11, 0, 0, 0, 0).In(jst), utc(3, 12, 0, 0, 0, 0).In(jst)}},
		// Without a prefix the fields are read in the start's location.
		{"0 9 * * MON-FRI", time.Date(2025, 3, 7, 10, 0, 0, 0, jst),
			[]time.Time{time.Date(2025, 3, 10, 9, 0, 0, 0, jst), time.Date(2025, 3, 11, 9, 0, 0, 0, jst)}},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			s, err := hourglass.Cron(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			at := tc.start
			for i, want := range tc.want {
				got := s.Next(at)
				if !got.Equal(want) {
					t.Fatalf("activation %d: Next(%v) = %v, want %v", i, at, got, want)
				}
				if got.Location() != tc.start.Location() {
					t.Fatalf("activation %d: Next(%v) is in %v, want %v", i, at, got.Location(), tc.start.Location())
				}
				at = got
			}
		})
	}
}

func TestCron_BadLines(t *testing.T) {
	for _, expr := range []string{
		"",
		"* * *",
		"61 * * * *",
		"bogus",
		"* * * * * *", // seconds are not a standard field
		"@fortnightly",
		"@every soon",
		"CRON_TZ=Nowhere/Atlantis * * * * *",
		// robfig/cron v3.0.1 panics on these; Cron must not.
		"TZ=UTC",
		"CRON_TZ=UTC",
		"TZ=",
	} {
		t.Run(expr, func(t *testing.T) {
			s, err := hourglass.Cron(expr)
			if err == nil {
				t.Fatalf("Cron(%q) = %v, nil; want an error", expr, s)
			}
			if prefix := fmt.Sprintf("hourglass: bad cron line %q: ", expr); !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("error %q does not start with %q", err, prefix)
			}
			if errors.Unwrap(err) == nil {
				t.Errorf("error %q wraps nothing", err)
			}
			if s != nil {
				t.Errorf("Cron(%q) returned a schedule with its error", expr)
			}
		})
	}
}

func TestCron_NeverFiresReturnsZero(t *testing.T) {
	s, err := hourglass.Cron("0 0 30 2 *") // February 30th
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := s.Next(start); !got.IsZero() {
		t.Fatalf("Next(%v) = %v, want the zero time", start, got)
	}
}

// TestCron_GivesUpAfterFiveYears pins the limit Cron's documentation
// describes: robfig/cron searches five years ahead and no further.
func TestCron_GivesUpAfterFiveYears(t *testing.T) {
	s, err := hourglass.Cron("0 0 29 2 *")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	if got, want := s.Next(start), time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("Next(%v) = %v, want %v", start, got, want)
	}
	// 2100 is not a leap year, so the next February 29th after 2096 is in
	// 2104, more than five years past 2097.
	start = time.Date(2097, 3, 1, 0, 0, 0, 0, time.UTC)
	if got := s.Next(start); !got.IsZero() {
		t.Fatalf("Next(%v) = %v, want the zero time", start, got)
	}
}

func FuzzCron(f *testing.F) {
	for _, seed := range []string{
		"*/5 * * * *", "@hourly", "@every 90s", "CRON_TZ=UTC 0 9 * * 1-5",
		"0 0 30 2 *", "", "TZ=UTC", "TZ=TZ=TZ=", "61 * * * *", "1-5/2 * * JAN-MAR SUN",
	} {
		f.Add(seed)
	}
	start := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, expr string) {
		s, err := hourglass.Cron(expr)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "hourglass: bad cron line ") || errors.Unwrap(err) == nil {
				t.Fatalf("Cron(%q): malformed error %q", expr, err)
			}
			return
		}
		if next := s.Next(start); !next.IsZero() && !next.After(start) {
			t.Fatalf("Cron(%q).Next(%v) = %v, not after it", expr, start, next)
		}
	})
}

func ExampleCron() {
	s, err := hourglass.Cron("30 9 * * MON-FRI")
	if err != nil {
		panic(err)
	}
	t := time.Date(2025, 3, 7, 12, 0, 0, 0, time.UTC) // a Friday
	for range 2 {
		t = s.Next(t)
		fmt.Println(t.Format(time.RFC1123))
	}
	// Output:
	// Mon, 10 Mar 2025 09:30:00 UTC
	// Tue, 11 Mar 2025 09:30:00 UTC
}
