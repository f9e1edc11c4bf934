package main

import (
	"os/exec"
	"strings"
	"testing"
)

// benchOnly are the import paths, and prefixes of paths ending in "/",
// that only the benchmarks need: the server binary must link none of
// them (cmd/hourglass-bench runs them).
var benchOnly = []string{
	"gonum.org/",
	"github.com/hourglass-go/hourglass/internal/bench",
	"github.com/hourglass-go/hourglass/internal/clusterbench",
	"github.com/hourglass-go/hourglass/internal/loadgen",
	"github.com/hourglass-go/hourglass/internal/pgtest",
}

// TestDeps_NoBenchHarness checks with go list -deps that the server
// binary depends on no package of the benchmark harness: the chart
// library, the scenarios, the load generators, the PostgreSQL launcher.
func TestDeps_NoBenchHarness(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to list the dependencies with: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %q, want the binary's dependencies", deps)
	}
	for _, dep := range deps {
		for _, b := range benchOnly {
			if dep == b || strings.HasPrefix(dep, b+"/") || strings.HasSuffix(b, "/") && strings.HasPrefix(dep, b) {
				t.Errorf("cmd/hourglass depends on %s, which only the benchmarks need", dep)
			}
		}
	}
}
