package pusher_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/hourglass-go/hourglass/pusher"
	"github.com/hourglass-go/hourglass/task"
)

// TestTargets_Check refuses link-local literals whatever the list, and
// with a list what is outside it.
func TestTargets_Check(t *testing.T) {
	open, err := pusher.ParseTargets("")
	if err != nil {
		t.Fatal(err)
	}
	list, err := pusher.ParseTargets("app.internal, 10.0.0.0/8, 127.0.0.1,::1")
	if err != nil {
		t.Fatal(err)
	}
	names, err := pusher.ParseTargets("app.internal")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		targets *pusher.Targets
		url     string
		ok      bool
	}{
		{open, "http://example.com/", true},
		{open, "http://127.0.0.1:8080/", true},
		{open, "http://10.1.2.3/", true},
		{nil, "http://10.1.2.3/", true},
		{open, "http://169.254.169.254/latest/meta-data", false},
		{nil, "http://169.254.169.254/", false},
		{open, "http://[fe80::1]/", false},
		{open, "http://[::ffff:169.254.169.254]/", false},
		{list, "http://169.254.169.254/", false},
		{list, "https://APP.internal./x", true},
		{list, "http://10.9.9.9:99/", true},
		{list, "http://127.0.0.1/", true},
		{list, "http://127.0.0.2/", false},
		{list, "http://[::1]/", true},
		{list, "http://other.internal/", true}, // may resolve into 10.0.0.0/8: checked at dial
		{names, "http://other.internal/", false},
		{names, "http://10.1.2.3/", false},
		{names, "http://app.internal/", true},
	} {
		err := tc.targets.Check(tc.url)
		if tc.ok != (err == nil) || err != nil && (!errors.Is(err, task.ErrInvalid) || !strings.Contains(err.Error(), "push.url")) {
			t.Errorf("Check(%s): %v, want ok %v", tc.url, err, tc.ok)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "http://x", "x:80", "a b"} {
		if _, err := pusher.ParseTargets(bad); err == nil {
			t.Errorf("ParseTargets(%q): no error", bad)
		}
	}
}
