package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// `hourglass version` (or --version) prints what the binary was built
// from, as the Go toolchain recorded it in the build info:
//
//	hourglass v1.2.0
//	module github.com/hourglass-go/hourglass v1.2.0
//	revision 2952112c606590b0d052c72f6216ccaf8ab24f24 (modified)
//	committed 2026-12-06T20:20:00Z
//	go go1.26.8 linux/amd64
//
// The version is the module's: v1.2.0 for `go install ...@v1.2.0`, a
// pseudo-version or "(devel)" for a build from a checkout. The revision
// and its time are the VCS commit the build was made from, "(modified)"
// when the work tree had changes; a build without VCS stamping (go
// install of a module version, -buildvcs=false, a copy of the source
// without its repository) says "revision unknown" and no time.

const versionUsage = "usage: hourglass version"

// modulePath is hourglass's module path, looked up among the build
// info's dependencies when another module's main package was built.
const modulePath = "github.com/hourglass-go/hourglass"

// runVersion prints the version lines; it takes no arguments.
func runVersion(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
			fmt.Fprintln(stdout, versionUsage)
			return 0
		}
		return commandError(stderr, versionUsage, fmt.Errorf("unexpected argument %q", args[0]))
	}
	bi, _ := debug.ReadBuildInfo()
	io.WriteString(stdout, versionText(bi))
	return 0
}

// versionText returns the lines `hourglass version` prints from the
// build info bi (nil: none was recorded).
func versionText(bi *debug.BuildInfo) string {
	version, goVersion := "(devel)", "unknown"
	settings := map[string]string{}
	if bi != nil {
		goVersion = bi.GoVersion
		mod := &bi.Main
		if mod.Path != modulePath {
			for _, d := range bi.Deps {
				if d.Path == modulePath {
					mod = d
				}
			}
		}
		if mod.Replace != nil {
			mod = mod.Replace
		}
		if mod.Version != "" {
			version = mod.Version
		}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "hourglass %s\n", version)
	fmt.Fprintf(&b, "module %s %s\n", modulePath, version)
	if rev := settings["vcs.revision"]; rev != "" {
		modified := ""
		if settings["vcs.modified"] == "true" {
			modified = " (modified)"
		}
		fmt.Fprintf(&b, "revision %s%s\n", rev, modified)
		if t := settings["vcs.time"]; t != "" {
			fmt.Fprintf(&b, "committed %s\n", t)
		}
	} else {
		b.WriteString("revision unknown\n")
	}
	goos, goarch := settings["GOOS"], settings["GOARCH"]
	if goos != "" && goarch != "" {
		fmt.Fprintf(&b, "go %s %s/%s\n", goVersion, goos, goarch)
	} else {
		fmt.Fprintf(&b, "go %s\n", goVersion)
	}
	return b.String()
}
