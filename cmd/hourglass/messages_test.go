package main

import (
	"strings"
	"testing"
)

// TestParseServe_TokenWhiteSpace checks that a token no client can
// present, from the flag or the environment, is refused at start, saying
// why.
func TestParseServe_TokenWhiteSpace(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
	}{
		{[]string{"--token", "abc "}, ""},
		{[]string{"--token", " abc"}, ""},
		{[]string{"--token", "abc\n"}, ""},
		{nil, "abc\n"},
		{nil, "\tabc"},
		{[]string{"--token", "a\x01c"}, ""},
	} {
		_, _, err := parseServe(tc.args, env(map[string]string{tokenEnv: tc.env}))
		if err == nil || !strings.Contains(err.Error(), "token") {
			t.Errorf("%q (env %q): %v, want an error about the token", tc.args, tc.env, err)
		}
	}
	if _, _, err := parseServe([]string{"--token", "a b"}, env(nil)); err != nil {
		t.Errorf("a space inside the token: %v", err)
	}
}

// TestErrorsHaveOnePrefix checks that the command's errors carry one
// "hourglass: " prefix, those of package client included, and that a
// server address without a scheme is answered with the URL to give.
func TestErrorsHaveOnePrefix(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"put", "q", `"x"`, "--server", "127.0.0.1:7072"}, "want a URL such as http://127.0.0.1:7072"},
		{[]string{"put", "q", "x"}, "PAYLOAD is not JSON"},
		{[]string{"queues", "--server", "localhost:7070"}, "want a URL such as http://localhost:7070"},
		{[]string{"reserve", "q", "--server", "ftp://example.com"}, "want a URL such as http://127.0.0.1:7070"},
		{[]string{"queues", "--server", "http://127.0.0.1:1", "--token", "t"}, "connection refused"},
		{[]string{"nosuch"}, "unknown subcommand"},
	} {
		var stdout, stderr strings.Builder
		run(tc.args, &stdout, &stderr)
		got := stderr.String()
		if !strings.HasPrefix(got, "hourglass: ") || strings.Count(got, "hourglass: ") != 1 || !strings.Contains(got, tc.want) {
			t.Errorf("%q: stderr %q, want one %q prefix and %q", tc.args, got, "hourglass: ", tc.want)
		}
	}
}
