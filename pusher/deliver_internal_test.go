package pusher

import (
	"net/http"
	"testing"
	"time"
)

// TestRetryAfter reads delay-seconds and HTTP dates, a date past as 0,
// and nothing else.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"120", 2 * time.Minute, true},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"Sun, 01 Mar 2026 12:00:30 GMT", 30 * time.Second, true},
		{"", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{"99999999999", 0, false},
	} {
		got, ok := retryAfter(tc.v, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("retryAfter(%q) = %v, %v; want %v, %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
}

// TestTrimRune drops only a rune cut short at the end.
func TestTrimRune(t *testing.T) {
	for in, want := range map[string]string{
		"":         "",
		"abc":      "abc",
		"é":        "é",
		"a\xc3":    "a",
		"a€"[:3]:   "a",
		"a\xff":    "a",
		"\xf0\x9f": "",
	} {
		if got := string(trimRune([]byte(in))); got != want {
			t.Errorf("trimRune(%q) = %q, want %q", in, got, want)
		}
	}
}
