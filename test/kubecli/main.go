package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	"kubevirt.io/client-go/kubecli"
)

// errUsage marks a command line that cannot run; main exits 2 on it.
var errUsage = errors.New("usage")

const usage = `usage: kubecli-peer [--kubeconfig F] [-n NS] COMMAND [NAME] [flags]
commands:
  console NAME [--timeout D]
  vnc NAME [--preserve-session]
  screenshot NAME --file F [--move-cursor]
  vmi NAME
  version`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, err)
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "kubecli-peer:", err)
		os.Exit(1)
	}
}

// peer is what every command needs: the client, its namespace and the
// process's standard streams.
type peer struct {
	client    kubecli.KubevirtClient
	namespace string
	stdin     io.Reader
	stdout    io.Writer
	stderr    io.Writer
}

// command is one subcommand: its flags, bound by flags, and its body.
type command struct {
	needsName bool
	flags     func(fs *flag.FlagSet)
	run       func(ctx context.Context, p *peer, name string) error
}

// commands is the dispatch table of the subcommands.
func commands() map[string]*command {
	return map[string]*command{
		"console":    consoleCommand(),
		"vnc":        vncCommand(),
		"screenshot": screenshotCommand(),
		"vmi":        {needsName: true, run: printPhase},
		"version":    {run: printVersion},
	}
}

// run parses args as `[global flags] COMMAND [NAME] [flags]` (flags may
// come before or after NAME, as with virtctl's cobra) and runs the command.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	global := flag.NewFlagSet("kubecli-peer", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	kubeconfig := global.String("kubeconfig", "", "path to the kubeconfig file")
	var namespace string
	global.StringVar(&namespace, "namespace", "", "namespace of the VMI (default: the kubeconfig context's)")
	global.StringVar(&namespace, "n", "", "shorthand for --namespace")
	if err := global.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if global.NArg() == 0 {
		return fmt.Errorf("%w: no command", errUsage)
	}
	name := global.Arg(0)
	cmd, ok := commands()[name]
	if !ok {
		return fmt.Errorf("%w: unknown command %q", errUsage, name)
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	positional, err := parseInterleaved(fs, global.Args()[1:])
	if err != nil {
		return fmt.Errorf("%w: %s: %w", errUsage, name, err)
	}
	want := 0
	if cmd.needsName {
		want = 1
	}
	if len(positional) != want {
		return fmt.Errorf("%w: %s takes %d argument(s), got %q", errUsage, name, want, strings.Join(positional, " "))
	}
	p, err := newPeer(*kubeconfig, namespace)
	if err != nil {
		return err
	}
	p.stdin, p.stdout, p.stderr = stdin, stdout, stderr
	vmi := ""
	if want == 1 {
		vmi = positional[0]
	}
	return cmd.run(ctx, p, vmi)
}

// parseInterleaved parses fs from args where flags and positional
// arguments mix, and returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// newPeer builds the KubeVirt client as virtctl does (kubecli.DefaultClientConfig
// minus the flags the tests do not use): clientcmd's loading rules with an
// explicit path, a namespace override, then GetKubevirtClientFromClientConfig.
func newPeer(kubeconfig, namespace string) (*peer, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	overrides := &clientcmd.ConfigOverrides{ClusterDefaults: clientcmd.ClusterDefaults}
	overrides.Context.Namespace = namespace
	clientConfig := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	client, err := kubecli.GetKubevirtClientFromClientConfig(clientConfig)
	if err != nil {
		return nil, fmt.Errorf("cannot obtain KubeVirt client: %w", err)
	}
	ns, _, err := clientConfig.Namespace()
	if err != nil {
		return nil, fmt.Errorf("namespace from the kubeconfig: %w", err)
	}
	return &peer{client: client, namespace: ns}, nil
}
