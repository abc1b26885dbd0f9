package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/spf13/cobra"
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

// newPolicyCommand is `virtstation policy`, whose one command is test.
func newPolicyCommand(s streams) *cobra.Command {
	policy := &cobra.Command{
		Use:   "policy",
		Short: "Run the shipped Rego policy tests and those in a directory",
		// Without a command, or with an unknown one, it is bad input.
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(s.err)
			_ = cmd.Usage()
			return exitWith(exitBadInput)
		},
	}
	policy.AddCommand(&cobra.Command{
		Use:   "test [DIR]",
		Short: "Run the shipped Rego policy tests and those of the *.rego files in DIR",
		Long: `policy test runs the shipped policies' tests, with the operator modules
(*.rego, tests in *_test.rego) of DIR merged in as the webhook merges a
policy ConfigMap, and checks that every module evaluates the sample inputs
within the webhook's time budget.`,
		Example: "  virtstation policy test ./policies",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return exitWith(runPolicyTest(cmd.Context(), args, s))
		},
	})
	return policy
}

// runPolicyTest is `virtstation policy test [DIR]`.
func runPolicyTest(ctx context.Context, args []string, s streams) int {
	var extra []validate.Module
	if len(args) == 1 {
		var err error
		if extra, err = readModules(args[0]); err != nil {
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
