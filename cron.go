package hourglass

import (
	"errors"
	"fmt"
	"strings"

	"github.com/robfig/cron/v3"
)

// Cron parses a standard 5-field cron line into a [Schedule], using
// github.com/robfig/cron/v3's ParseStandard. The fields are minute, hour,
// day of month, month and day of week, each a number, a range, a list or a
// step ("*/5", "1-5", "MON-FRI"). Descriptors stand for whole lines:
// @yearly, @monthly, @weekly, @daily (or @midnight), @hourly, and
// @every DURATION in [time.ParseDuration] syntax, such as "@every 1h30m".
// An optional CRON_TZ=ZONE or TZ=ZONE prefix, separated by a space, fixes
// the time zone the fields are read in; without it they are read in the
// location of the time passed to Next. Zone names other than UTC and Local need the
// system's zone database or an import of time/tzdata.
//
// The schedule's Next(t) returns the first activation strictly after t, in
// t's location, truncated to the second; it returns the zero time when a
// line never fires, such as "0 0 30 2 *" (February 30th). robfig/cron gives
// up after searching five years ahead, so a line whose next activation lies
// further away also reports none: "0 0 29 2 *" asked on 2097-03-01 returns
// zero, since 2100 is not a leap year and its next activation, 2104-02-29,
// is seven years away.
//
// An @every schedule fires at t plus the duration, with t's fraction of a
// second dropped. Its duration is truncated to whole seconds, and anything
// under one second, zero and negative included, becomes one second; it never
// returns the zero time.
//
// Cron's errors read `hourglass: bad cron line "EXPR": REASON` and wrap the
// parser's error. Next costs O(1) for @every and, for the others, a bounded
// walk over at most five years of months, days, hours and minutes. The
// Schedule holds no mutable state and is safe for simultaneous use by
// multiple goroutines.
func Cron(expr string) (Schedule, error) {
	if missingFields(expr) {
		return nil, fmt.Errorf("hourglass: bad cron line %q: %w", expr, errZoneOnly)
	}
	s, err := cron.ParseStandard(expr)
	if err != nil {
		return nil, fmt.Errorf("hourglass: bad cron line %q: %w", expr, err)
	}
	return s, nil
}

// errZoneOnly is the reason Cron gives for a zone prefix with no fields.
var errZoneOnly = errors.New("time zone prefix without a schedule")

// missingFields reports whether expr is a zone prefix with nothing after it,
// such as "TZ=UTC". robfig/cron v3.0.1 finds the end of the zone name with
// strings.Index(spec, " ") and slices with the -1 it gets when there is no
// space, panicking instead of returning an error
// (https://github.com/robfig/cron/issues/554, unfixed upstream).
func missingFields(expr string) bool {
	return (strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=")) &&
		!strings.Contains(expr, " ")
}

// Compile-time check that robfig's schedules are Schedules, so Cron can
// return them as they are.
var _ Schedule = cron.Schedule(nil)
