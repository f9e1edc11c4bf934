package main

import (
	"strings"
	"testing"
)

// TestUsageErrors checks that a bad invocation fails with status 2,
// naming the bad value on stderr after the "hourglass:" prefix and
// following it with the usage lines.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", nil, "missing subcommand"},
		{"unknown subcommand", []string{"benc"}, `"benc"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			if code := run(tc.args, &stdout, &stderr); code != 2 {
				t.Errorf("exit status %d, want 2", code)
			}
			msg := stderr.String()
			if !strings.HasPrefix(msg, "hourglass: ") || !strings.Contains(msg, tc.want) || !strings.Contains(msg, commandsUsage) {
				t.Errorf("stderr = %q, want hourglass: ... %s ... and the usage lines", msg, tc.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout = %q, want nothing", stdout.String())
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}} {
		var stdout, stderr strings.Builder
		if code := run(args, &stdout, &stderr); code != 0 {
			t.Errorf("%v: exit status %d, want 0", args, code)
		}
		if !strings.Contains(stdout.String(), commandsUsage) {
			t.Errorf("%v: stdout = %q, want the usage lines", args, stdout.String())
		}
	}
}

// TestBench_Moved checks that `hourglass bench`, whatever its flags,
// runs nothing and answers with one line naming hourglass-bench and
// status 2.
func TestBench_Moved(t *testing.T) {
	for _, args := range [][]string{{"bench"}, {"bench", "--scenario", "serve"}, {"bench", "-h"}} {
		var stdout, stderr strings.Builder
		if code := run(args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit status %d, want 2", args, code)
		}
		msg := stderr.String()
		if !strings.HasPrefix(msg, "hourglass: ") || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "go run ./cmd/hourglass-bench") {
			t.Errorf("%v: stderr = %q, want one line naming go run ./cmd/hourglass-bench", args, msg)
		}
		if stdout.Len() != 0 {
			t.Errorf("%v: stdout = %q, want nothing", args, stdout.String())
		}
	}
}
