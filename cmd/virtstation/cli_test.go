package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCLI runs the command line with stdin and returns its exit code and
// output.
func runCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, streams{in: strings.NewReader(stdin), out: &out, err: &errOut})
	return code, out.String(), errOut.String()
}

// TestHelp: --help (and `help CMD`) prints help on stdout and exits 0, as
// kubectl does.
func TestHelp(t *testing.T) {
	cases := map[string]struct {
		args []string
		want string
	}{
		"root --help":        {args: []string{"--help"}, want: "Available Commands:"},
		"root -h":            {args: []string{"-h"}, want: "render"},
		"render --help":      {args: []string{"render", "--help"}, want: "-f, --filename"},
		"help render":        {args: []string{"help", "render"}, want: "-R, --recursive"},
		"policy --help":      {args: []string{"policy", "--help"}, want: "test"},
		"policy test --help": {args: []string{"policy", "test", "--help"}, want: "virtstation policy test [DIR]"},
		"version --help":     {args: []string{"version", "--help"}, want: "virtstation version"},
		"completion --help":  {args: []string{"completion", "--help"}, want: "bash"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", tc.args...)
			if code != exitOK || stderr != "" {
				t.Fatalf("exit %d, want 0; stderr:\n%s", code, stderr)
			}
			if !strings.Contains(stdout, "Usage:") || !strings.Contains(stdout, tc.want) {
				t.Fatalf("stdout lacks Usage: and %q:\n%s", tc.want, stdout)
			}
		})
	}
}

// TestVersionFlag: --version prints what `version` prints.
func TestVersionFlag(t *testing.T) {
	want := versionLine(version, readBuildInfo()) + "\n"
	for _, args := range [][]string{{"--version"}, {"version"}} {
		code, stdout, stderr := runCLI(t, "", args...)
		if code != exitOK || stdout != want || stderr != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 0, %q, nothing", args, code, stdout, stderr, want)
		}
	}
}

// TestCompletion: each shell gets a completion script on stdout.
func TestCompletion(t *testing.T) {
	for shell, marker := range map[string]string{
		"bash":       "# bash completion V2 for virtstation",
		"zsh":        "#compdef virtstation",
		"fish":       "complete -c virtstation",
		"powershell": "Register-ArgumentCompleter",
	} {
		t.Run(shell, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", "completion", shell)
			if code != exitOK || stderr != "" {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr)
			}
			if !strings.Contains(stdout, marker) {
				t.Fatalf("the %s script lacks %q:\n%.500s", shell, marker, stdout)
			}
		})
	}
	// The script asks the binary itself; it offers -o's values.
	code, stdout, _ := runCLI(t, "", "__complete", "render", "-o", "")
	if code != exitOK || !strings.Contains(stdout, "yaml\njson\n") {
		t.Errorf("__complete render -o: exit %d:\n%s", code, stdout)
	}
}

// TestBadInvocation: unknown commands and flags, and missing or extra
// arguments, are bad input (exit 2), said on stderr.
func TestBadInvocation(t *testing.T) {
	cases := map[string]struct {
		args []string
		want string
	}{
		"unknown flag":           {args: []string{"render", "--bogus"}, want: "error: unknown flag: --bogus\nSee 'virtstation render --help' for usage.\n"},
		"unknown shorthand flag": {args: []string{"render", "-x"}, want: "unknown shorthand flag: 'x' in -x"},
		"unknown command":        {args: []string{"rendr"}, want: "unknown command \"rendr\" for \"virtstation\"\n\nDid you mean this?\n\trender"},
		"no command":             {args: nil, want: "Usage:"},
		"policy without test":    {args: []string{"policy"}, want: "Usage:"},
		"argument to render":     {args: []string{"render", "vm.yaml"}, want: "unknown command \"vm.yaml\" for \"virtstation render\""},
		"argument to version":    {args: []string{"version", "now"}, want: "unknown command"},
		"flag without value":     {args: []string{"render", "-f"}, want: "flag needs an argument: 'f' in -f"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", tc.args...)
			if code != exitBadInput || stdout != "" {
				t.Fatalf("exit %d, stdout %q; want %d and nothing", code, stdout, exitBadInput)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Fatalf("stderr lacks %q:\n%s", tc.want, stderr)
			}
		})
	}
}

// testVM is a managed VM manifest named name.
func testVM(name string) string {
	return fmt.Sprintf("apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: %s, labels: {virtstation.io/managed: \"true\"}}\nspec: {template: {spec: {domain: {devices: {}}}}}\n", name)
}

// writeFiles writes name -> content under dir, making directories.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// renderedNames are the metadata.name lines of render's YAML output.
func renderedNames(stdout string) []string {
	var out []string
	for _, line := range strings.Split(stdout, "\n") {
		if name, ok := strings.CutPrefix(line, "  name: "); ok {
			out = append(out, name)
		}
	}
	return out
}
