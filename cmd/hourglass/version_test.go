package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersion runs `hourglass version` and `--version` in this binary:
// the module's path and version, and a revision line, whatever the build
// recorded.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var stdout, stderr strings.Builder
		if code := run(args, &stdout, &stderr); code != 0 || stderr.Len() != 0 {
			t.Fatalf("%v: exit %d, stderr %q", args, code, stderr.String())
		}
		lines := strings.Split(stdout.String(), "\n")
		if len(lines) < 4 || !strings.HasPrefix(lines[0], "hourglass ") ||
			!strings.HasPrefix(lines[1], "module github.com/hourglass-go/hourglass ") ||
			!strings.HasPrefix(lines[2], "revision ") {
			t.Errorf("%v printed %q, want hourglass VERSION, module PATH VERSION and revision lines", args, stdout.String())
		}
	}
	var stdout, stderr strings.Builder
	if code := run([]string{"version", "extra"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), versionUsage) {
		t.Errorf("version extra: exit %d, stderr %q", code, stderr.String())
	}
}

// TestVersionText checks the lines printed for the build infos of a
// release, a build from a modified checkout, a build without VCS
// stamping, and hourglass built as another module's dependency.
func TestVersionText(t *testing.T) {
	// parse reads build info in the form of `go version -m`.
	parse := func(s string) *debug.BuildInfo {
		t.Helper()
		bi, err := debug.ParseBuildInfo(s)
		if err != nil {
			t.Fatal(err)
		}
		bi.GoVersion = "go1.26.8" // ParseBuildInfo leaves it out
		return bi
	}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"checkout", parse(`go	go1.26.8
path	github.com/hourglass-go/hourglass/cmd/hourglass
mod	github.com/hourglass-go/hourglass	v0.0.0-20261206202000-2952112c6065+dirty
build	GOARCH=amd64
build	GOOS=linux
build	vcs=git
build	vcs.revision=2952112c606590b0d052c72f6216ccaf8ab24f24
build	vcs.time=2026-12-06T20:20:00Z
build	vcs.modified=true
`), `hourglass v0.0.0-20261206202000-2952112c6065+dirty
module github.com/hourglass-go/hourglass v0.0.0-20261206202000-2952112c6065+dirty
revision 2952112c606590b0d052c72f6216ccaf8ab24f24 (modified)
committed 2026-12-06T20:20:00Z
go go1.26.8 linux/amd64
`},
		{"release", parse(`go	go1.26.8
path	github.com/hourglass-go/hourglass/cmd/hourglass
mod	github.com/hourglass-go/hourglass	v1.2.0	h1:abc=
build	GOARCH=arm64
build	GOOS=darwin
`), `hourglass v1.2.0
module github.com/hourglass-go/hourglass v1.2.0
revision unknown
go go1.26.8 darwin/arm64
`},
		{"devel, clean", parse(`go	go1.26.8
path	github.com/hourglass-go/hourglass/cmd/hourglass
mod	github.com/hourglass-go/hourglass	(devel)
build	vcs.revision=abc123
build	vcs.modified=false
`), `hourglass (devel)
module github.com/hourglass-go/hourglass (devel)
revision abc123
go go1.26.8
`},
		{"dependency", parse(`go	go1.26.8
path	example.com/app
mod	example.com/app	(devel)
dep	github.com/hourglass-go/hourglass	v1.3.1	h1:abc=
`), `hourglass v1.3.1
module github.com/hourglass-go/hourglass v1.3.1
revision unknown
go go1.26.8
`},
		{"none", nil, "hourglass (devel)\nmodule github.com/hourglass-go/hourglass (devel)\nrevision unknown\ngo unknown\n"},
	} {
		if got := versionText(tc.bi); got != tc.want {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.name, got, tc.want)
		}
	}
}
