package service_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// TestCheckPolicy refuses every bad field with an error wrapping
// task.ErrInvalid that names the field, and passes good policies,
// boundaries included.
func TestCheckPolicy(t *testing.T) {
	retry := func(f func(r *task.Retry)) task.Policy {
		r := task.Retry{Initial: time.Second, Max: time.Minute, Multiplier: 2, Jitter: 0.1}
		f(&r)
		return task.Policy{Retry: &r}
	}
	rate := func(f func(r *task.Rate)) task.Policy {
		r := task.Rate{Limit: 5, Per: time.Second}
		f(&r)
		return task.Policy{Rate: &r}
	}
	bad := []struct {
		field string
		p     task.Policy
	}{
		{"retry.max", retry(func(r *task.Retry) { r.Initial = 0 })},
		{"retry.multiplier", retry(func(r *task.Retry) { r.Initial, r.Max, r.Multiplier = 0, 0, 0.5 })},
		{"retry.jitter", retry(func(r *task.Retry) { r.Initial, r.Max, r.Multiplier, r.Jitter = 0, 0, 0, 2 })},
		{"retry.initial", retry(func(r *task.Retry) { r.Initial = -time.Second })},
		{"retry.initial", retry(func(r *task.Retry) { r.Initial, r.Max = task.MaxRetryDelay+1, task.MaxRetryDelay+1 })},
		{"retry.max", retry(func(r *task.Retry) { r.Max = r.Initial - 1 })},
		{"retry.max", retry(func(r *task.Retry) { r.Max = 0 })},
		{"retry.max", retry(func(r *task.Retry) { r.Max = task.MaxRetryDelay + 1 })},
		{"retry.multiplier", retry(func(r *task.Retry) { r.Multiplier = 0 })},
		{"retry.multiplier", retry(func(r *task.Retry) { r.Multiplier = 0.999 })},
		{"retry.multiplier", retry(func(r *task.Retry) { r.Multiplier = math.NaN() })},
		{"retry.multiplier", retry(func(r *task.Retry) { r.Multiplier = math.Inf(1) })},
		{"retry.multiplier", retry(func(r *task.Retry) { r.Multiplier = task.MaxMultiplier + 0.5 })},
		{"retry.jitter", retry(func(r *task.Retry) { r.Jitter = -0.01 })},
		{"retry.jitter", retry(func(r *task.Retry) { r.Jitter = 1.01 })},
		{"retry.jitter", retry(func(r *task.Retry) { r.Jitter = math.NaN() })},
		{"rate.limit", rate(func(r *task.Rate) { r.Limit = 0 })},
		{"rate.limit", rate(func(r *task.Rate) { r.Limit = -1 })},
		{"rate.limit", rate(func(r *task.Rate) { r.Limit = task.MaxRateLimit + 1 })},
		{"rate.per", rate(func(r *task.Rate) { r.Per = 0 })},
		{"rate.per", rate(func(r *task.Rate) { r.Per = -time.Second })},
		{"rate.per", rate(func(r *task.Rate) { r.Per = task.MaxRatePer + 1 })},
		{"rate.burst", rate(func(r *task.Rate) { r.Burst = -1 })},
		{"rate.burst", rate(func(r *task.Rate) { r.Burst = task.MaxRateLimit + 1 })},
		{"concurrency", task.Policy{Concurrency: -1}},
		{"concurrency", task.Policy{Concurrency: task.MaxConcurrency + 1}},
		{"per_key.concurrency", task.Policy{PerKey: &task.PerKey{Concurrency: -1}}},
		{"per_key.concurrency", task.Policy{PerKey: &task.PerKey{Concurrency: task.MaxConcurrency + 1}}},
		{"per_key", task.Policy{PerKey: &task.PerKey{}}},
		{"per_key.rate.limit", task.Policy{PerKey: &task.PerKey{Rate: &task.Rate{Limit: 0, Per: time.Second}}}},
		{"per_key.rate.per", task.Policy{PerKey: &task.PerKey{Rate: &task.Rate{Limit: 1, Per: task.MaxRatePer + 1}}}},
		{"per_key.rate.burst", task.Policy{PerKey: &task.PerKey{Rate: &task.Rate{Limit: 1, Per: time.Second, Burst: -1}}}},
		{"dedupe", task.Policy{Dedupe: -time.Nanosecond}},
		{"dedupe", task.Policy{Dedupe: task.MaxDedupe + 1}},
		{"dead_letter", task.Policy{DeadLetter: "q"}},
		{"dead_letter", task.Policy{DeadLetter: "bad name"}},
		{"dead_letter", task.Policy{DeadLetter: ".."}},
		{"dead_letter", task.Policy{DeadLetter: "q/dead"}},
		{"dead_letter", task.Policy{DeadLetter: strings.Repeat("d", task.MaxNameLen+1)}},
		{"max_attempts", task.Policy{MaxAttempts: -2}},
		{"ttr", task.Policy{TTR: -time.Second}},
		{"ttr", task.Policy{TTR: time.Millisecond - 1}},
		{"ttr", task.Policy{TTR: service.MaxTTR + 1}},
	}
	if math.MaxInt > task.MaxAttemptsLimit {
		over := int64(task.MaxAttemptsLimit) + 1
		bad = append(bad, struct {
			field string
			p     task.Policy
		}{"max_attempts", task.Policy{MaxAttempts: int(over)}})
	}
	for _, c := range bad {
		err := service.CheckPolicy("q", c.p)
		if !errors.Is(err, task.ErrInvalid) {
			t.Errorf("CheckPolicy(%s of %+v) = %v; want ErrInvalid", c.field, c.p, err)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, "policy: "+c.field+" ") && !strings.Contains(msg, "policy: "+c.field+":") {
			t.Errorf("CheckPolicy: %q does not name %s", msg, c.field)
		}
		if strings.Contains(msg, "range 1..") && (c.field == "concurrency" || c.field == "rate.burst") {
			t.Errorf("CheckPolicy: %q: 0 is a valid %s", msg, c.field)
		}
		if strings.Count(msg, "hourglass:") != 1 || !strings.HasPrefix(msg, "hourglass: ") {
			t.Errorf("CheckPolicy: %q: want one prefix \"hourglass: \"", msg)
		}
	}

	good := []task.Policy{
		{},
		{
			Retry:       &task.Retry{Initial: time.Second, Max: time.Minute, Multiplier: 2, Jitter: 0.1},
			MaxAttempts: 5, TTR: 30 * time.Second,
			Rate:        &task.Rate{Limit: 10, Per: time.Second, Burst: 3},
			Concurrency: 4, DeadLetter: "q-dead",
		},
		{Retry: &task.Retry{Initial: 1, Max: 1, Multiplier: 1}},
		{Retry: &task.Retry{Initial: task.MaxRetryDelay, Max: task.MaxRetryDelay, Multiplier: task.MaxMultiplier, Jitter: 1}},
		{MaxAttempts: task.MaxAttemptsLimit},
		{MaxAttempts: task.UnlimitedAttempts},
		{Retry: &task.Retry{}},
		{Retry: &task.Retry{Multiplier: 2, Jitter: 0.5}},
		{TTR: time.Millisecond},
		{TTR: service.MaxTTR},
		{Rate: &task.Rate{Limit: 1, Per: 1}},
		{PerKey: &task.PerKey{Rate: &task.Rate{Limit: 1, Per: time.Second}}},
		{PerKey: &task.PerKey{Concurrency: 1, Rate: &task.Rate{Limit: task.MaxRateLimit, Per: task.MaxRatePer, Burst: 3}}},
		{Rate: &task.Rate{Limit: task.MaxRateLimit, Per: task.MaxRatePer, Burst: task.MaxRateLimit}},
		{Concurrency: task.MaxConcurrency},
		{PerKey: &task.PerKey{Concurrency: 1}},
		{PerKey: &task.PerKey{Concurrency: task.MaxConcurrency}},
		{Dedupe: task.MaxDedupe},
		{Dedupe: time.Nanosecond},
		{DeadLetter: strings.Repeat("d", task.MaxNameLen)},
	}
	for _, p := range good {
		if err := service.CheckPolicy("q", p); err != nil {
			t.Errorf("CheckPolicy(%+v) = %v; want nil", p, err)
		}
	}
}

// TestNormalPolicy fills in a rate's burst without changing the policy
// it was given.
func TestNormalPolicy(t *testing.T) {
	in := task.Policy{Rate: &task.Rate{Limit: 7, Per: time.Second}}
	out := service.NormalPolicy(in)
	if out.Rate.Burst != 7 || out.Rate.Limit != 7 || out.Rate.Per != time.Second {
		t.Fatalf("NormalPolicy rate = %+v; want burst 7", *out.Rate)
	}
	if in.Rate.Burst != 0 {
		t.Fatalf("NormalPolicy changed its argument's rate: %+v", *in.Rate)
	}
	kept := service.NormalPolicy(task.Policy{Rate: &task.Rate{Limit: 7, Per: time.Second, Burst: 2}})
	if kept.Rate.Burst != 2 {
		t.Fatalf("NormalPolicy changed a burst given: %+v", *kept.Rate)
	}
	if p := service.NormalPolicy(task.Policy{}); !p.IsZero() {
		t.Fatalf("NormalPolicy of the zero policy = %+v", p)
	}
}

// TestApplyDefaults: a policy's ttr and max_attempts fill a put that
// gives none, the server's a put whose policy gives none either; a put's
// own values win.
func TestApplyDefaults(t *testing.T) {
	p := task.Policy{TTR: 30 * time.Second, MaxAttempts: 3}
	var r task.PutRequest
	service.ApplyDefaults(&r, p, time.Minute)
	if r.TTR != 30*time.Second || r.MaxAttempts != 3 {
		t.Fatalf("defaults: %+v", r)
	}
	r = task.PutRequest{TTR: time.Second, MaxAttempts: 9}
	service.ApplyDefaults(&r, p, time.Minute)
	if r.TTR != time.Second || r.MaxAttempts != 9 {
		t.Fatalf("a put's own values: %+v", r)
	}
	r = task.PutRequest{}
	service.ApplyDefaults(&r, task.Policy{}, time.Minute)
	if r.TTR != time.Minute || r.MaxAttempts != service.DefaultMaxAttempts {
		t.Fatalf("no policy: %+v; want the server's ttr and max_attempts %d", r, service.DefaultMaxAttempts)
	}
	// UnlimitedAttempts is recorded as 0, no limit, wherever it is given
	// first; a put's own value wins over the policy's.
	for _, c := range []struct{ put, policy, want int }{
		{0, 0, service.DefaultMaxAttempts},
		{task.UnlimitedAttempts, 0, 0},
		{task.UnlimitedAttempts, 3, 0},
		{0, task.UnlimitedAttempts, 0},
		{4, task.UnlimitedAttempts, 4},
		{0, 3, 3},
	} {
		r = task.PutRequest{MaxAttempts: c.put}
		service.ApplyDefaults(&r, task.Policy{MaxAttempts: c.policy}, time.Minute)
		if r.MaxAttempts != c.want {
			t.Errorf("ApplyDefaults(put %d, policy %d): max_attempts %d; want %d", c.put, c.policy, r.MaxAttempts, c.want)
		}
	}
}

// TestEffective fills in each default, and keeps what a policy asks for
// explicitly (immediate retries, unlimited attempts).
func TestEffective(t *testing.T) {
	e := service.Effective(task.Policy{}, time.Minute)
	if e.Retry == nil || *e.Retry != service.DefaultRetry || e.MaxAttempts != service.DefaultMaxAttempts || e.TTR != time.Minute {
		t.Fatalf("Effective of no policy = %+v; want the defaults", e)
	}
	want := task.Retry{Initial: time.Second, Max: time.Hour, Multiplier: 2, Jitter: 0.1}
	if service.DefaultRetry != want || service.DefaultMaxAttempts != 25 {
		t.Fatalf("defaults %+v, %d; want %+v, 25 (the README and package api state them)", service.DefaultRetry, service.DefaultMaxAttempts, want)
	}
	e = service.Effective(task.Policy{Retry: &task.Retry{Multiplier: 2}, MaxAttempts: task.UnlimitedAttempts, TTR: time.Second}, time.Minute)
	if *e.Retry != (task.Retry{}) || e.MaxAttempts != task.UnlimitedAttempts || e.TTR != time.Second {
		t.Fatalf("Effective of immediate retries, unlimited attempts = %+v", e)
	}
	e.Retry.Initial = 1
	if service.DefaultRetry.Initial != time.Second {
		t.Fatal("changing what Effective answered changed DefaultRetry")
	}
}

// TestExpiryDelay: a lease that runs out follows a retry policy given,
// and comes back at once without one (beanstalkd's ttr).
func TestExpiryDelay(t *testing.T) {
	if d := service.ExpiryDelay(task.Policy{}); d != 0 {
		t.Errorf("ExpiryDelay without a retry policy = %v; want 0", d)
	}
	if d := service.ExpiryDelay(task.Policy{Retry: &task.Retry{Initial: time.Second, Max: time.Second, Multiplier: 1}}); d != task.RetryDelay {
		t.Errorf("ExpiryDelay with a retry policy = %v; want task.RetryDelay", d)
	}
}

// near reports whether d is within a few nanoseconds of want: the
// formula is computed in float64.
func near(d, want time.Duration) bool {
	return (d - want).Abs() <= 2
}

// TestRetryDelay checks min(Max, Initial × Multiplier^(n−1)) × [1 − J,
// 1 + J] at the ends and the middle of the jitter's draw, and its
// saturation at Max for any n.
func TestRetryDelay(t *testing.T) {
	r := &task.Retry{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2, Jitter: 0.1}
	almost1 := math.Nextafter(1, 0)
	cases := []struct {
		n    int
		u    float64
		want time.Duration
	}{
		{1, 0, 90 * time.Millisecond},
		{1, 0.5, 100 * time.Millisecond},
		{1, almost1, 110 * time.Millisecond},
		{0, 0.5, 100 * time.Millisecond}, // n < 1 counts as the first
		{2, 0.5, 200 * time.Millisecond},
		{3, 0, 360 * time.Millisecond},
		{4, 0.5, 800 * time.Millisecond},
		{5, 0.5, time.Second}, // 1.6 s capped
		{5, 0, 900 * time.Millisecond},
		{5, almost1, 1100 * time.Millisecond},
		{64, 0.5, time.Second},
		{1 << 20, 0.5, time.Second},
		{math.MaxInt, almost1, 1100 * time.Millisecond},
	}
	for _, c := range cases {
		if got := service.RetryDelay(r, c.n, c.u); !near(got, c.want) {
			t.Errorf("RetryDelay(n %d, u %g) = %v; want %v", c.n, c.u, got, c.want)
		}
	}
	if got := service.RetryDelay(nil, 3, 0.5); got != 4*time.Second {
		t.Errorf("RetryDelay without a policy, third failure = %v; want DefaultRetry's 4s", got)
	}
	for _, n := range []int{1, 2, 1000} {
		if got := service.RetryDelay(&task.Retry{}, n, 0.9); got != 0 {
			t.Errorf("RetryDelay(initial 0s, n %d) = %v; want 0 (immediate)", n, got)
		}
	}
	flat := &task.Retry{Initial: time.Second, Max: time.Hour, Multiplier: 1}
	for _, n := range []int{1, 2, 1000} {
		if got := service.RetryDelay(flat, n, 0.7); got != time.Second {
			t.Errorf("RetryDelay(multiplier 1, jitter 0, n %d) = %v; want 1s", n, got)
		}
	}
	// The largest policy: never negative, never over Max × 2.
	big := &task.Retry{Initial: task.MaxRetryDelay, Max: task.MaxRetryDelay, Multiplier: task.MaxMultiplier, Jitter: 1}
	for _, n := range []int{1, 2, 1000, math.MaxInt} {
		for _, u := range []float64{0, 0.5, almost1} {
			got := service.RetryDelay(big, n, u)
			if got < 0 || got > 2*task.MaxRetryDelay {
				t.Errorf("RetryDelay(largest policy, n %d, u %g) = %v", n, u, got)
			}
		}
	}
	// Any draw stays within the bounds of the back-off.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		n, u := 1+rng.IntN(12), rng.Float64()
		base := min(r.Max, time.Duration(float64(r.Initial)*math.Pow(r.Multiplier, float64(n-1))))
		lo, hi := time.Duration(float64(base)*(1-r.Jitter)), time.Duration(float64(base)*(1+r.Jitter))
		if got := service.RetryDelay(r, n, u); got < lo-2 || got > hi+2 {
			t.Fatalf("RetryDelay(n %d, u %g) = %v; want within [%v, %v]", n, u, got, lo, hi)
		}
	}
}

// TestAfterFailure: dead when the attempts are used up or buried, moved
// to the dead-letter queue named; otherwise the caller's delay, or the
// retry policy's for task.RetryDelay.
func TestAfterFailure(t *testing.T) {
	retry := &task.Retry{Initial: time.Second, Max: time.Minute, Multiplier: 2, Jitter: 0.1}
	p := task.Policy{Retry: retry, DeadLetter: "dead"}
	cases := []struct {
		name          string
		p             task.Policy
		attempts, max int
		delay         time.Duration
		bury          bool
		want          service.Outcome
	}{
		{"last attempt", p, 3, 3, task.RetryDelay, false, service.Outcome{Dead: true, DeadLetter: "dead"}},
		{"past the last attempt", p, 4, 3, 0, false, service.Outcome{Dead: true, DeadLetter: "dead"}},
		{"last attempt, no dead letter", task.Policy{}, 1, 1, 0, false, service.Outcome{Dead: true}},
		{"bury with attempts left", p, 1, 5, task.RetryDelay, true, service.Outcome{Dead: true, DeadLetter: "dead"}},
		{"bury, unlimited", task.Policy{}, 1, 0, 0, true, service.Outcome{Dead: true}},
		{"unlimited attempts", task.Policy{Retry: &task.Retry{}}, 1000, 0, task.RetryDelay, false, service.Outcome{}},
		{"caller's delay wins", p, 2, 5, 5 * time.Second, false, service.Outcome{Delay: 5 * time.Second}},
		{"caller's delay of 0 wins", p, 2, 5, 0, false, service.Outcome{}},
		{"retry policy", p, 2, 5, task.RetryDelay, false, service.Outcome{Delay: service.RetryDelay(retry, 2, 0.25)}},
		{"retry policy, unlimited", p, 7, 0, task.RetryDelay, false, service.Outcome{Delay: service.RetryDelay(retry, 7, 0.25)}},
		{"no retry policy: the default back-off", task.Policy{}, 2, 5, task.RetryDelay, false, service.Outcome{Delay: 1900 * time.Millisecond}},
		{"immediate retries", task.Policy{Retry: &task.Retry{}}, 2, 5, task.RetryDelay, false, service.Outcome{}},
		{"no retry policy, caller's delay", task.Policy{}, 2, 5, 0, false, service.Outcome{}},
	}
	for _, c := range cases {
		got := service.AfterFailure(c.p, c.attempts, c.max, c.delay, c.bury, 0.25)
		if got != c.want {
			t.Errorf("%s: AfterFailure = %+v; want %+v", c.name, got, c.want)
		}
	}
	if d := service.AfterFailure(p, 2, 5, task.RetryDelay, false, 0.25).Delay; !near(d, 1900*time.Millisecond) {
		t.Errorf("second failure's delay %v; want 2s × (0.9 + 0.2 × 0.25) = 1.9s", d)
	}
}

// TestCutError cuts a last error at task.MaxErrorLen bytes on a rune
// boundary and replaces invalid UTF-8.
func TestCutError(t *testing.T) {
	check := func(name, in, want string) {
		t.Helper()
		if got := service.CutError(in); got != want {
			t.Errorf("%s: CutError = %q (%d bytes); want %q (%d bytes)", name, short(got), len(got), short(want), len(want))
		}
	}
	check("empty", "", "")
	check("short", "boom", "boom")
	exact := strings.Repeat("a", task.MaxErrorLen)
	check("exactly the limit", exact, exact)
	check("one byte over", exact+"b", exact)
	check("two-byte runes", strings.Repeat("é", task.MaxErrorLen/2+1), strings.Repeat("é", task.MaxErrorLen/2))
	// "a" then 3-byte runes: the limit falls inside a rune after "a" + 1365 of them.
	check("cut inside a rune", "aa"+strings.Repeat("€", 1400), "aa"+strings.Repeat("€", 1364))
	check("4-byte runes", strings.Repeat("😀", 1100), strings.Repeat("😀", task.MaxErrorLen/4))
	check("invalid byte", "a\xffb", "a\uFFFDb")
	check("truncated rune", "a\xe2\x82", "a\uFFFD\uFFFD")
	check("invalid and long", strings.Repeat("\xff", 5000), strings.Repeat("\uFFFD", task.MaxErrorLen/3))

	rng := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		b := make([]byte, rng.IntN(2*task.MaxErrorLen))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		got, valid := service.CutError(string(b)), string([]rune(string(b)))
		if len(got) > task.MaxErrorLen || !utf8.ValidString(got) || !strings.HasPrefix(valid, got) {
			t.Fatalf("CutError of %d random bytes: %d bytes, valid %v, a prefix of the text made valid %v",
				len(b), len(got), utf8.ValidString(got), strings.HasPrefix(valid, got))
		}
		if len(valid) <= task.MaxErrorLen && got != valid || len(valid) > task.MaxErrorLen && len(got) <= task.MaxErrorLen-utf8.UTFMax {
			t.Fatalf("CutError of %d random bytes (%d made valid) cut at %d", len(b), len(valid), len(got))
		}
	}
}

// short returns s, or its head and length if long, for a message.
func short(s string) string {
	if len(s) > 40 {
		return s[:20] + "..." + s[len(s)-20:]
	}
	return s
}

// TestPausedUntil: now + d, none for d ≤ 0, task.PausedForever's Unix ns
// for a pause until resumed or one that would overflow.
func TestPausedUntil(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC).UnixNano()
	forever := task.PausedForever.UnixNano()
	if forever != math.MaxInt64 {
		t.Fatalf("PausedForever is Unix ns %d; want MaxInt64", forever)
	}
	cases := []struct {
		now  int64
		d    time.Duration
		want int64
	}{
		{now, 0, 0},
		{now, -time.Second, 0},
		{now, time.Second, now + int64(time.Second)},
		{now, task.PauseIndefinitely, forever},
		{now, task.PauseIndefinitely - 1, forever},
		{now, time.Duration(math.MaxInt64 - now), forever},
		{now, time.Duration(math.MaxInt64 - now - 1), math.MaxInt64 - 1},
		{math.MaxInt64 - 10, 11, forever},
		{math.MaxInt64 - 10, 10, forever},
		{math.MaxInt64 - 10, 9, math.MaxInt64 - 1},
	}
	for _, c := range cases {
		if got := service.PausedUntil(c.now, c.d); got != c.want {
			t.Errorf("PausedUntil(%d, %d) = %d; want %d", c.now, int64(c.d), got, c.want)
		}
	}
}

// start is the virtual time of the buckets' tests: a realistic Unix ns
// (a Bucket with At 0 counts as never used).
var start = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC).UnixNano()

// TestBucket: full at first (burst), refilled at limit per period, never
// above the burst, and next says when the next token is due.
func TestBucket(t *testing.T) {
	r := task.Rate{Limit: 5, Per: 500 * time.Millisecond} // a token each 100 ms, burst 5
	var b service.Bucket
	took, next := b.Take(r, start, 20)
	if took != 5 || next != 100*time.Millisecond {
		t.Fatalf("first take = %d, next %v; want the burst of 5, next in 100ms", took, next)
	}
	if took, next = b.Take(r, start+int64(99*time.Millisecond), 1); took != 0 || !near(next, time.Millisecond) {
		t.Fatalf("take at 99ms = %d, next %v; want 0, next in 1ms", took, next)
	}
	if took, next = b.Take(r, start+int64(100*time.Millisecond), 1); took != 1 || next != 0 {
		t.Fatalf("take at 100ms = %d, next %v; want 1", took, next)
	}
	if took, next = b.Take(r, start+int64(350*time.Millisecond), 5); took != 2 || !near(next, 50*time.Millisecond) {
		t.Fatalf("take at 350ms = %d, next %v; want 2, next in 50ms", took, next)
	}
	// An hour idle fills it to the burst, no more.
	if took, _ = b.Take(r, start+int64(time.Hour), 100); took != 5 {
		t.Fatalf("take after an hour = %d; want the burst of 5", took)
	}
	// A clock going back refills nothing and breaks nothing.
	if took, next = b.Take(r, start, 1); took != 0 || next <= 0 {
		t.Fatalf("take back in time = %d, next %v; want 0 and a wait", took, next)
	}
	if took, _ = b.Take(r, start+int64(time.Hour+100*time.Millisecond), 2); took != 1 {
		t.Fatalf("take 100ms after the hour = %d; want 1", took)
	}

	// A burst given: 2 at once, then a token each 200 ms.
	var c service.Bucket
	r = task.Rate{Limit: 5, Per: time.Second, Burst: 2}
	if took, next = c.Take(r, start, 5); took != 2 || next != 200*time.Millisecond {
		t.Fatalf("burst 2: first take = %d, next %v; want 2, next in 200ms", took, next)
	}
	if took, _ = c.Take(r, start+int64(10*time.Second), 5); took != 2 {
		t.Fatalf("burst 2: take after 10s = %d; want 2", took)
	}
	// A take of none takes none and says no wait.
	if took, next = c.Take(r, start+int64(10*time.Second), 0); took != 0 || next != 0 {
		t.Fatalf("take 0 = %d, next %v", took, next)
	}
}

// event is one take of a bucket in virtual time.
type event struct {
	at   int64
	took int
}

// TestBucket_Property takes random amounts at random virtual times and
// checks the token bucket's bound: over any window [a, b], the tokens
// handed out are at most burst + limit × (b − a) / per; and that next is
// exact to the nanosecond: the bucket counts in float64, whose rounding
// puts the token 1 ns either side of next about once in a thousand
// waits, so no token 2 ns before next, one 1 ns after.
func TestBucket_Property(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	for iter := range 300 {
		r := task.Rate{
			Limit: 1 + rng.IntN(20),
			Per:   time.Duration(1 + rng.Int64N(int64(2*time.Second))),
			Burst: rng.IntN(10),
		}
		burst := r.Burst
		if burst == 0 {
			burst = r.Limit
		}
		per := float64(r.Per) / float64(r.Limit)
		var b service.Bucket
		now := start + rng.Int64N(int64(time.Hour))
		var evs []event
		for range 200 {
			n := 1 + rng.IntN(2*burst)
			took, next := b.Take(r, now, n)
			if took < 0 || took > n || took < n && next <= 0 || took == n && next != 0 {
				t.Fatalf("seed %d iter %d rate %+v: Take(%d) = %d, next %v", seed, iter, r, n, took, next)
			}
			if took > 0 {
				evs = append(evs, event{now, took})
			}
			if took < n {
				early, due := b, b
				if got, _ := early.Take(r, now+int64(next)-2, 1); got != 0 && next > 2 {
					t.Fatalf("seed %d iter %d rate %+v: a token 2ns before next (%v)", seed, iter, r, next)
				}
				if got, _ := due.Take(r, now+int64(next)+1, 1); got != 1 {
					t.Fatalf("seed %d iter %d rate %+v: no token 1ns after next (%v), bucket %+v", seed, iter, r, next, b)
				}
			}
			switch rng.IntN(4) {
			case 0: // at once
			case 1: // exactly when the next token is due
				now += int64(next)
			default:
				now += rng.Int64N(int64(3*per) + 1)
			}
		}
		for i := range evs {
			sum := 0
			for j := i; j < len(evs); j++ {
				sum += evs[j].took
				bound := float64(burst) + float64(evs[j].at-evs[i].at)/per
				if float64(sum) > bound+1e-9 {
					t.Fatalf("seed %d iter %d rate %+v: %d tokens in [%d, %d] ns, bound %.3f", seed, iter, r, sum, evs[i].at-start, evs[j].at-start, bound)
				}
			}
		}
	}
}

// TestRefills is Refills' worked example: the same rate keeps its
// tokens whatever else changes; a rate changed, set or removed refills,
// the queue's and the per-key one each on its own.
func TestRefills(t *testing.T) {
	r5 := &task.Rate{Limit: 5, Per: time.Second, Burst: 5}
	r5b := &task.Rate{Limit: 5, Per: time.Second, Burst: 5} // equal, another pointer
	r10 := &task.Rate{Limit: 10, Per: time.Second, Burst: 10}
	cases := []struct {
		name         string
		old, p       task.Policy
		rate, perKey bool
	}{
		{"same", task.Policy{Rate: r5}, task.Policy{Rate: r5b, Concurrency: 2}, false, false},
		{"changed", task.Policy{Rate: r5}, task.Policy{Rate: r10}, true, false},
		{"set", task.Policy{}, task.Policy{Rate: r5}, true, false},
		{"removed", task.Policy{Rate: r5}, task.Policy{}, true, false},
		{"none", task.Policy{MaxAttempts: 3}, task.Policy{}, false, false},
		{"per-key changed", task.Policy{Rate: r5, PerKey: &task.PerKey{Rate: r5}},
			task.Policy{Rate: r5, PerKey: &task.PerKey{Rate: r10}}, false, true},
		{"per-key kept", task.Policy{PerKey: &task.PerKey{Rate: r5}},
			task.Policy{PerKey: &task.PerKey{Rate: r5b, Concurrency: 1}}, false, false},
		{"per-key removed", task.Policy{PerKey: &task.PerKey{Rate: r5}},
			task.Policy{PerKey: &task.PerKey{Concurrency: 1}}, false, true},
	}
	for _, c := range cases {
		if rate, perKey := service.Refills(c.old, c.p); rate != c.rate || perKey != c.perKey {
			t.Errorf("%s: Refills = %v, %v; want %v, %v", c.name, rate, perKey, c.rate, c.perKey)
		}
	}
}
