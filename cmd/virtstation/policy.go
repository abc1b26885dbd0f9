package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/virtstation/virtstation/webhooks/validate"
)

// offlineEvalTimeout bounds one policy evaluation in the CLI.
const offlineEvalTimeout = 5 * time.Second

// runPolicy dispatches `virtstation policy <sub>`.
func runPolicy(ctx context.Context, args []string, s streams) int {
	if len(args) == 0 || args[0] != "test" {
		fmt.Fprintln(s.err, "usage: virtstation policy test [DIR]")
		return exitBadInput
	}
	fs := flag.NewFlagSet("policy test", flag.ContinueOnError)
	fs.SetOutput(s.err)
	if err := fs.Parse(args[1:]); err != nil {
		return exitBadInput
	}
	var extra []validate.Module
	if fs.NArg() > 1 {
		fmt.Fprintln(s.err, "usage: virtstation policy test [DIR]")
		return exitBadInput
	}
	if fs.NArg() == 1 {
		var err error
		if extra, err = readModules(fs.Arg(0)); err != nil {
			fmt.Fprintf(s.err, "policy test: %v\n", err)
			return exitBadInput
		}
	}
	modules := validate.Merge(validate.ShippedModules(), extra)
	if err := validate.RunTests(ctx, modules); err != nil {
		fmt.Fprintf(s.err, "policy test: %v\n", err)
		return exitFailure
	}
	if err := validate.CheckBudget(ctx, modules, validate.PolicyBudget); err != nil {
		fmt.Fprintf(s.err, "policy test: %v (the webhook refuses such a policy ConfigMap; fix: make the module faster)\n", err)
		return exitFailure
	}
	fmt.Fprintf(s.out, "policy test: %d modules, all tests passed, each sample input evaluated within %s\n", len(modules), validate.PolicyBudget)
	return exitOK
}

// readModules reads every *.rego file in dir as a module.
func readModules(dir string) ([]validate.Module, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.rego"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no *.rego files in %s", dir)
	}
	sort.Strings(files)
	out := make([]validate.Module, 0, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, validate.Module{Name: filepath.Base(f), Source: string(b)})
	}
	return out, nil
}

// loadEngine prepares the shipped policies plus those in dir (if any).
func loadEngine(ctx context.Context, dir string) (*validate.Engine, error) {
	var extra []validate.Module
	if dir != "" {
		var err error
		if extra, err = readModules(dir); err != nil {
			return nil, err
		}
	}
	e := validate.NewEngine(offlineEvalTimeout)
	if _, err := e.Load(ctx, validate.Merge(validate.ShippedModules(), extra)); err != nil {
		return nil, fmt.Errorf("load policies: %w", err)
	}
	return e, nil
}
