// Command virtstation is Virtstation's command-line tool:
//
//	virtstation render -f FILENAME [-f FILENAME…] [-R] [--objects FILENAME] [-n NAMESPACE] [-o yaml|json]
//	virtstation render --report --objects FILENAME [-f FILENAME] [-o yaml|json]
//	virtstation policy test [DIR]
//	virtstation version (or --version)
//	virtstation completion bash|zsh|fish|powershell
//
// render shows, offline, what the webhooks would do to a manifest, and with
// --report which existing VMs the policies flag, as PolicyReports; policy
// test runs Rego policy tests. Both work offline, on Linux, macOS and
// Windows, as platform engineers run kyverno or gator in CI and on their
// laptops. The demo, which needs a local control plane, is a command of its
// own (cmd/virtstation-demo).
//
// The command line follows kubectl's conventions (it is built with cobra):
// every short flag has a long form (-f/--filename, -n/--namespace,
// -o/--output, -R/--recursive); -f takes a file, a directory (its own
// .json, .yaml and .yml files, or with -R every one below it) or - for
// stdin, and may be repeated; --help prints help on stdout; warnings about
// the input (an unknown virtstation.io/ key, a key given twice in one YAML
// mapping) go to stderr prefixed "Warning: ".
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes; scripts rely on them.
const (
	exitOK = 0
	// exitFailure: the command failed (policy tests that fail, …).
	exitFailure = 1
	// exitBadInput: unreadable input, bad flags or an unknown command.
	exitBadInput = 2
	// exitDenied: render denied at least one object.
	exitDenied = 3
	// exitInterrupted: stopped by SIGINT or SIGTERM (128 + SIGINT, as a
	// shell reports an interrupted command).
	exitInterrupted = 130
)

// streams are the command's standard streams.
type streams struct {
	in       io.Reader
	out, err io.Writer
}

// exitError carries a command's exit code out of cobra; the command has
// already said why on stderr.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// exitWith turns a command's exit code into what a cobra RunE returns.
func exitWith(code int) error {
	if code == exitOK {
		return nil
	}
	return &exitError{code: code}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], streams{in: os.Stdin, out: os.Stdout, err: os.Stderr})
	stop()
	os.Exit(code)
}

// run runs the command line args and returns the exit code.
func run(ctx context.Context, args []string, s streams) int {
	root := newRootCommand(s) //nolint:contextcheck // the commands take ctx from cobra (ExecuteContextC below)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	var exit *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &exit):
		return exit.code
	}
	// cobra's own errors: an unknown command or flag, a missing or extra
	// argument. kubectl prints them as "error: …" and points to --help.
	fmt.Fprintf(s.err, "error: %v\nSee '%s --help' for usage.\n", err, cmd.CommandPath())
	return exitBadInput
}

// newRootCommand builds the command tree, writing to s.
func newRootCommand(s streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "virtstation",
		Short: "Virtstation's command-line tool: render manifests and test policies offline",
		Long: `virtstation shows, offline, what Virtstation's webhooks would do to
VirtualMachine manifests (render), which existing VMs the policies flag
(render --report), and runs Rego policy tests (policy test).`,
		Version:       versionLine(version, readBuildInfo()),
		SilenceErrors: true,
		SilenceUsage:  true,
		// Without a command it is bad input, as before: usage on stderr.
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(s.err)
			_ = cmd.Usage()
			return exitWith(exitBadInput)
		},
	}
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	root.SetVersionTemplate("{{.Version}}\n")
	root.Flags().Bool("version", false, "print the version this binary was built from and exit")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return err })
	root.AddCommand(newRenderCommand(s), newPolicyCommand(s), newVersionCommand(s))
	return root
}
