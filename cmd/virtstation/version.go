package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at release builds: -ldflags "-X main.version=v1.2.3".
var version = ""

// newVersionCommand is `virtstation version`, which prints what
// `virtstation --version` prints: the release (or the module version go
// install recorded), the commit and the platform.
func newVersionCommand(s streams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version this binary was built from",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintln(s.out, versionLine(version, readBuildInfo()))
			return nil
		},
	}
}

// buildInfo is what the binary knows of its build.
type buildInfo struct {
	module, revision string
	modified         bool
}

func readBuildInfo() buildInfo {
	var b buildInfo
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.module = bi.Main.Version
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.revision = s.Value
		case "vcs.modified":
			b.modified = s.Value == "true"
		}
	}
	return b
}

// versionLine is the pure formatting of the version.
func versionLine(release string, b buildInfo) string {
	v := release
	if v == "" {
		v = b.module
	}
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	line := "virtstation " + v
	if b.revision != "" {
		rev := b.revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if b.modified {
			rev += "-dirty"
		}
		line += " (" + rev + ")"
	}
	return line + " " + runtime.GOOS + "/" + runtime.GOARCH
}
