package otelhourglass_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps_OnlyImporters: the timer library, the Go client and worker,
// the wire types and the server's command do not depend on
// OpenTelemetry; only this package's importers do.
func TestDeps_OnlyImporters(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to list the dependencies with: %v", err)
	}
	for _, pkg := range []string{"..", "../client", "../worker", "../api", "../cmd/hourglass"} {
		out, err := exec.Command(gobin, "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "go.opentelemetry.io/") {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}
