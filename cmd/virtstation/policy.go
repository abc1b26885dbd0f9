package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/render"
	"github.com/virtstation/virtstation/webhooks/validate"
)

// policyConfigMaps are the ConfigMaps among objs labelled as policy
// modules (virtstation.io/policy=true), in any namespace: offline there is
// no install namespace to restrict them to.
func policyConfigMaps(objs []render.Object) []corev1.ConfigMap {
	var out []corev1.ConfigMap
	for _, o := range objs {
		u := &unstructured.Unstructured{Object: o}
		if u.GetAPIVersion() != "v1" || u.GetKind() != "ConfigMap" || u.GetLabels()[api.LabelPolicy] != api.LabelTrue {
			continue
		}
		var cm corev1.ConfigMap
		if runtime.DefaultUnstructuredConverter.FromUnstructured(o, &cm) == nil {
			out = append(out, cm)
		}
	}
	return out
}

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

// loadEngine prepares the shipped policies plus those of the policy
// ConfigMaps cms (as the webhook's loader merges them), then those in dir
// (if any), which win over both.
func loadEngine(ctx context.Context, dir string, cms ...corev1.ConfigMap) (*validate.Engine, error) {
	extra, _ := validate.OperatorModules(cms)
	if dir != "" {
		fromDir, err := readModules(dir)
		if err != nil {
			return nil, err
		}
		extra = validate.Merge(extra, fromDir)
	}
	e := validate.NewEngine(offlineEvalTimeout)
	if _, err := e.Load(ctx, validate.Merge(validate.ShippedModules(), extra)); err != nil {
		return nil, fmt.Errorf("load policies: %w", err)
	}
	return e, nil
}
