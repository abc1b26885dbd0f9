package main

import (
	"runtime"
	"testing"
)

func TestVersionLine(t *testing.T) {
	platform := " " + runtime.GOOS + "/" + runtime.GOARCH
	cases := map[string]struct {
		release string
		build   buildInfo
		want    string
	}{
		"release build":       {release: "v1.2.3", build: buildInfo{module: "(devel)", revision: "0123456789abcdef"}, want: "virtstation v1.2.3 (0123456789ab)"},
		"go install @version": {build: buildInfo{module: "v0.4.0"}, want: "virtstation v0.4.0"},
		"a dirty checkout":    {build: buildInfo{module: "(devel)", revision: "abc", modified: true}, want: "virtstation devel (abc-dirty)"},
		"no build info":       {want: "virtstation devel"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := versionLine(tc.release, tc.build); got != tc.want+platform {
				t.Fatalf("versionLine = %q, want %q", got, tc.want+platform)
			}
		})
	}
}
