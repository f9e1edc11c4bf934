package main

import (
	"strings"
	"testing"
)

// TestParseServe_PushAllow reads --push-allow, repeated or with commas,
// into the pusher's targets, and refuses a bad entry naming it.
func TestParseServe_PushAllow(t *testing.T) {
	o, _, err := parseServe(nil, env(nil))
	if err != nil || o.push.targets != nil {
		t.Fatalf("default: %+v, %v; want no list", o.push, err)
	}
	if err := o.push.targets.Check("http://169.254.169.254/"); err == nil {
		t.Error("default: a link-local target allowed")
	}
	if err := o.push.targets.Check("http://10.0.0.1/"); err != nil {
		t.Errorf("default: %v", err)
	}
	o, _, err = parseServe([]string{"--push-allow", "10.0.0.0/8, app.internal", "--push-allow", "127.0.0.1"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	for url, ok := range map[string]bool{
		"http://10.1.2.3/": true, "https://app.internal/x": true, "http://127.0.0.1:8080/": true,
		"http://127.0.0.2/": false, "http://192.168.0.1/": false, "http://169.254.169.254/": false,
	} {
		if err := o.push.targets.Check(url); (err == nil) != ok {
			t.Errorf("--push-allow 10.0.0.0/8,app.internal,127.0.0.1: Check(%s) = %v, want ok %v", url, err, ok)
		}
	}
	if _, _, err := parseServe([]string{"--push-allow", "10.0.0.0/33"}, env(nil)); err == nil || !strings.Contains(err.Error(), "10.0.0.0/33") {
		t.Errorf("bad CIDR: %v", err)
	}
}
