// Command virtstation is Virtstation's command-line tool:
//
//	virtstation render -f vm.yaml [--objects objects.yaml] [-n namespace] [-o yaml|json]
//	virtstation render --report --objects objects.yaml [-f vm.yaml] [-o yaml|json]
//	virtstation policy test [DIR]
//	virtstation version
//
// render shows, offline, what the webhooks would do to a manifest, and with
// --report which existing VMs the policies flag, as PolicyReports; policy
// test runs Rego policy tests. Both work offline, on Linux, macOS and
// Windows, as platform engineers run kyverno or gator in CI and on their
// laptops. The demo, which needs a local control plane, is a command of its
// own (cmd/virtstation-demo).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// Exit codes; scripts rely on them.
const (
	exitOK = 0
	// exitFailure: the command failed (policy tests that fail, …).
	exitFailure = 1
	// exitBadInput: unreadable input or bad flags.
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

// command runs one subcommand and returns its exit code.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, s streams) int
}

var commands = map[string]command{
	"render":  {"print VirtualMachines as the webhooks would admit them (offline)", runRender},
	"version": {"print the version this binary was built from", runVersion},
	"policy":  {"run the shipped Rego policy tests and those in a directory (policy test [DIR])", runPolicy},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], streams{in: os.Stdin, out: os.Stdout, err: os.Stderr})
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, s streams) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(s.err)
		return exitBadInput
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(s.err, "virtstation: unknown command %q\n", args[0])
		usage(s.err)
		return exitBadInput
	}
	return cmd.run(ctx, args[1:], s)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: virtstation <command> [flags]")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
}
