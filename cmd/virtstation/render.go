package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/policyreport"
	"github.com/virtstation/virtstation/render"
)

// renderUsage is render's usage: rendering manifests, or auditing VMs.
const renderUsage = `usage: virtstation render -f FILENAME [-f FILENAME…] [-R] [--objects FILENAME…] [-n NAMESPACE] [-o yaml|json] [--policy DIR] [--no-policies] [--generate-name-suffix SUFFIX] [--architecture amd64|arm64|s390x]
       virtstation render --report --objects FILENAME [-f FILENAME…] [-R] [--report-api wgpolicyk8s.io/v1alpha2|openreports.io/v1alpha1] [-n NAMESPACE] [-o yaml|json] [--policy DIR]`

// renderExample is render's --help example.
const renderExample = `  # Render one manifest as the webhooks would admit it
  virtstation render -f vm.yaml

  # Every manifest under a directory, against the objects that exist
  virtstation render -f manifests/ -R --objects cluster.yaml

  # From stdin, as JSON
  kubectl get vm dev-alice -o yaml | virtstation render -f - -o json

  # The policy reports of the VMs in the cluster
  virtstation render --report --objects cluster.yaml`

// renderArgs are render's flags.
type renderArgs struct {
	// files and objects are -f and --objects: files, directories or "-".
	files, objects []string
	// recursive is -R: descend into the directories of files and objects.
	recursive            bool
	namespace, policyDir string
	noPolicies           bool
	// suffix is --generate-name-suffix.
	suffix string
	// arch is --architecture.
	arch   string
	output string
	// report and reportAPI are --report and --report-api.
	report    bool
	reportAPI string
}

// newRenderCommand is `virtstation render`.
func newRenderCommand(s streams) *cobra.Command {
	var a renderArgs
	cmd := &cobra.Command{
		Use:   "render -f FILENAME",
		Short: "Print VirtualMachines as the webhooks would admit them (offline)",
		Long: `render admits the manifests of -f in order, offline, as the API server would
with Virtstation's webhooks installed, and prints the admitted objects on
stdout; denials, warnings and the Events the reconcilers would emit go to
stderr. With --report it prints the policy reports of the managed VMs among
--objects (after admitting -f onto them) instead.

Exit status: 0 admitted, 1 failure, 2 bad input, 3 denied (or a report
result failed), 130 interrupted.`,
		Example: renderExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return exitWith(runRender(cmd.Context(), a, cmd.Flags().Changed("report-api"), s))
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&a.files, "filename", "f", nil, "the manifests to render: a file, a directory (its .json, .yaml and .yml files) or - for stdin; may be repeated")
	f.BoolVarP(&a.recursive, "recursive", "R", false, "descend into the directories -f and --objects name")
	f.StringArrayVar(&a.objects, "objects", nil, "the objects that already exist in the cluster (other VMs, DataVolumes, PVCs, Secrets), as multi-document YAML: a file, a directory or -; may be repeated")
	f.StringVarP(&a.namespace, "namespace", "n", "default", "namespace of objects that set none")
	f.StringVarP(&a.output, "output", "o", "yaml", "output format: yaml or json")
	f.StringVar(&a.policyDir, "policy", "", "directory of operator Rego modules (*.rego) to evaluate with the shipped policies")
	f.BoolVar(&a.noPolicies, "no-policies", false, "skip the validating policies (mutation only)")
	f.StringVar(&a.suffix, "generate-name-suffix", "", "render VMs that have only metadata.generateName as named <generateName>SUFFIX (the API server appends 5 random characters; the MAC derives from the request UID, for which render uses SUFFIX)")
	f.StringVar(&a.arch, "architecture", "", "the cluster's default architecture (amd64, arm64 or s390x), for VMs that name none; default: a KubeVirt CR's among the objects, else amd64")
	f.BoolVar(&a.report, "report", false, "audit the managed VMs among --objects (after admitting -f onto them, if given) as the webhook's policy audit does, and print one policy report per namespace instead of the VMs")
	f.StringVar(&a.reportAPI, "report-api", reportAPIs[0].api, "with --report, the reports' API: "+reportAPINames())
	registerRenderCompletions(cmd)
	return cmd
}

// registerRenderCompletions offers the values of render's enumerated flags
// and files or directories for the others, in every shell.
func registerRenderCompletions(cmd *cobra.Command) {
	fixed := func(values ...string) cobra.CompletionFunc {
		return cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp)
	}
	apis := make([]string, len(reportAPIs))
	for i, a := range reportAPIs {
		apis[i] = a.api
	}
	_ = cmd.RegisterFlagCompletionFunc("output", fixed("yaml", "json"))
	_ = cmd.RegisterFlagCompletionFunc("architecture", fixed(api.Architectures...))
	_ = cmd.RegisterFlagCompletionFunc("report-api", fixed(apis...))
	_ = cmd.MarkFlagFilename("filename", fileExtensions...)
	_ = cmd.MarkFlagFilename("objects", fileExtensions...)
	_ = cmd.MarkFlagDirname("policy")
}

// checkRenderArgs checks the flags together; it returns a message for
// stderr when they do not fit, and the report kind --report-api names.
func checkRenderArgs(a renderArgs, apiSet bool) (schema.GroupVersionKind, string) {
	if (!a.report && len(a.files) == 0) || (a.report && len(a.files) == 0 && len(a.objects) == 0) {
		return schema.GroupVersionKind{}, renderUsage
	}
	if _, ok := api.LookupArch(a.arch); a.arch != "" && !ok {
		return schema.GroupVersionKind{}, fmt.Sprintf("render: --architecture %q: want one of %s", a.arch, strings.Join(api.Architectures, ", "))
	}
	if a.output != "yaml" && a.output != "json" {
		return schema.GroupVersionKind{}, fmt.Sprintf("render: -o %q: want yaml or json", a.output)
	}
	gvk, msg := reportKind(a.report, a.reportAPI, apiSet, a.noPolicies)
	if msg != "" {
		return gvk, "render: " + msg
	}
	return gvk, ""
}

// renderOutcome is what rendering or auditing produced.
type renderOutcome struct {
	verdicts []render.Verdict
	reports  []policyreport.Report
	// warnings are about the input (unknown keys, duplicate keys).
	warnings []string
	err      error
}

// runRender is `virtstation render`; apiSet says whether --report-api was
// given.
func runRender(ctx context.Context, a renderArgs, apiSet bool, s streams) int {
	gvk, msg := checkRenderArgs(a, apiSet)
	if msg != "" {
		fmt.Fprintln(s.err, msg)
		return exitBadInput
	}
	// render is offline and holds nothing that needs cleaning up, so on
	// SIGINT or SIGTERM it stops at once, whatever it is doing (reading a
	// manifest from a stdin that never closes, evaluating a policy): the
	// work runs in its own goroutine and is abandoned.
	done := make(chan renderOutcome, 1)
	go func() {
		var o renderOutcome
		if a.report {
			o.verdicts, o.reports, o.warnings, o.err = auditObjects(ctx, a, s.in)
		} else {
			o.verdicts, o.warnings, o.err = renderManifests(ctx, a, s.in)
		}
		done <- o
	}()
	var o renderOutcome
	select {
	case o = <-done:
	case <-ctx.Done():
		fmt.Fprintln(s.err, "render: interrupted")
		return exitInterrupted
	}
	for _, w := range o.warnings {
		fmt.Fprintf(s.err, "Warning: %s\n", w)
	}
	if o.err != nil {
		fmt.Fprintf(s.err, "render: %v\n", o.err)
		return exitBadInput
	}
	admitted, code := printVerdicts(s.err, o.verdicts)
	if a.report {
		return printReports(s, o.reports, gvk, a.output, code)
	}
	if err := writeObjects(s.out, admitted, a.output); err != nil {
		fmt.Fprintf(s.err, "render: %v\n", err)
		return exitFailure
	}
	return code
}

// printVerdicts prints the verdicts' warnings, Events and denials to w, and
// returns the admitted objects (with the Secrets the reconcilers would
// write) and exitDenied if any was denied, else exitOK.
func printVerdicts(w io.Writer, verdicts []render.Verdict) ([]render.Object, int) {
	code := exitOK
	var admitted []render.Object
	for _, v := range verdicts {
		for _, m := range v.Warnings {
			fmt.Fprintf(w, "warning: %s/%s: %s\n", v.Namespace, v.Name, m)
		}
		for _, e := range v.Events {
			fmt.Fprintf(w, "event: %s/%s: %s\n", v.Namespace, v.Name, e)
		}
		for _, d := range v.Denied {
			fmt.Fprintf(w, "denied: %s/%s: %s\n", v.Namespace, v.Name, d.Error())
			code = exitDenied
		}
		if v.Object != nil {
			admitted = append(admitted, v.Object)
			admitted = append(admitted, v.Secrets...)
		}
	}
	return admitted, code
}

// renderManifests reads the manifests and the cluster's objects, loads the
// policies, and renders. It also returns the warnings about the input.
func renderManifests(ctx context.Context, a renderArgs, stdin io.Reader) ([]render.Verdict, []string, error) {
	opts, warnings, err := renderOptions(ctx, a, stdin)
	if err != nil {
		return nil, warnings, err
	}
	verdicts, err := render.Render(ctx, opts)
	return verdicts, warnings, err
}

// renderOptions reads the manifests (none without -f) and the cluster's
// objects, and loads the policies. It also returns the warnings about the
// input.
func renderOptions(ctx context.Context, a renderArgs, stdin io.Reader) (render.Options, []string, error) {
	opts := render.Options{Namespace: a.namespace, GenerateNameSuffix: a.suffix, DefaultArchitecture: a.arch}
	r := &inputReader{stdin: stdin, recursive: a.recursive, namespace: a.namespace}
	var err error
	if opts.Manifests, err = r.read(a.files); err != nil {
		return opts, r.warnings, err
	}
	if opts.Cluster, err = r.read(a.objects); err != nil {
		return opts, r.warnings, err
	}
	if !a.noPolicies {
		cms := policyConfigMaps(append(append([]render.Object(nil), opts.Cluster...), opts.Manifests...))
		if opts.Policies, err = loadEngine(ctx, a.policyDir, cms...); err != nil {
			return opts, r.warnings, err
		}
	}
	return opts, r.warnings, nil
}

// writeObjects prints objects as multi-document YAML, or as JSON: the object
// itself when there is one, a v1 List otherwise (as kubectl prints).
func writeObjects(w io.Writer, objs []render.Object, format string) error {
	if format == "json" {
		var v any = map[string]any{"apiVersion": "v1", "kind": "List", "items": objs}
		if len(objs) == 1 {
			v = objs[0]
		}
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	for i, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}
