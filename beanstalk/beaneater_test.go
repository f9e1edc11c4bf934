package beanstalk_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/beanstalk"
)

// TestBeaneater drives the server with beaneater, Ruby's beanstalkd
// client, from testdata/beaneater.rb, over each backend.
func TestBeaneater(t *testing.T) {
	ruby := lookPath(t, "ruby", "ruby")
	if err := exec.Command(ruby, "-e", "require 'beaneater'").Run(); err != nil {
		t.Skip("Ruby cannot load beaneater: install the Debian package ruby-beaneater")
	}
	t.Parallel()
	eachBackend(t, func(t *testing.T, start func(testing.TB, beanstalk.Options) *testServer) {
		ts := start(t, beanstalk.Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, ruby, "testdata/beaneater.rb", ts.addr).CombinedOutput()
		t.Logf("beaneater.rb:\n%s", out)
		if err != nil {
			t.Fatalf("beaneater.rb: %v", err)
		}
	})
}
