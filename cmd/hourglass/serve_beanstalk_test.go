package main

import (
	"strings"
	"testing"
)

func TestParseServe_Beanstalk(t *testing.T) {
	env := func(string) string { return "" }
	o, _, err := parseServe([]string{"--beanstalk", "127.0.0.1:11300"}, env)
	if err != nil || o.beanstalk != "127.0.0.1:11300" {
		t.Fatalf("loopback: %+v %v", o, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--beanstalk", "0.0.0.0:11300"}, "no authentication"},
		{[]string{"--beanstalk", "nonsense"}, "--beanstalk"},
	} {
		if _, _, err := parseServe(c.args, env); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error naming %q", c.args, err, c.want)
		}
	}
	if _, _, err := parseServe([]string{"--beanstalk", "0.0.0.0:11300", "--insecure"}, env); err != nil {
		t.Errorf("--insecure: %v", err)
	}
	if o, _, err := parseServe([]string{"--beanstalk", "127.0.0.1:11300", "--postgres", "postgres://127.0.0.1/x"}, env); err != nil || o.beanstalk == "" {
		t.Errorf("--beanstalk with --postgres: %+v %v", o, err)
	}
}
