package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/policyreport"
	"github.com/virtstation/virtstation/render"
)

// renderUsage is render's usage: rendering manifests, or auditing VMs.
const renderUsage = `usage: virtstation render -f vm.yaml [--objects objects.yaml] [-n namespace] [-o yaml|json] [--policy DIR] [--no-policies] [--generate-name-suffix SUFFIX] [--architecture amd64|arm64|s390x]
       virtstation render --report --objects objects.yaml [-f vm.yaml] [--report-api wgpolicyk8s.io/v1alpha2|openreports.io/v1alpha1] [-n namespace] [-o yaml|json] [--policy DIR]`

func runRender(ctx context.Context, args []string, s streams) int {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	fs.SetOutput(s.err)
	file := fs.String("f", "", "manifest file to render (- for stdin)")
	objects := fs.String("objects", "", "multi-document YAML of the objects that already exist in the cluster (other VMs, DataVolumes, PVCs, Secrets)")
	namespace := fs.String("n", "default", "namespace of objects that set none")
	output := fs.String("o", "yaml", "output format: yaml or json")
	policyDir := fs.String("policy", "", "directory of operator Rego modules (*.rego) to evaluate with the shipped policies")
	noPolicies := fs.Bool("no-policies", false, "skip the validating policies (mutation only)")
	suffix := fs.String("generate-name-suffix", "", "render VMs that have only metadata.generateName as named <generateName>SUFFIX (the API server appends 5 random characters; the MAC derives from the request UID, for which render uses SUFFIX)")
	arch := fs.String("architecture", "", "the cluster's default architecture (amd64, arm64 or s390x), for VMs that name none; default: a KubeVirt CR's among the objects, else amd64")
	report := fs.Bool("report", false, "audit the managed VMs among --objects (after admitting -f onto them, if given) as the webhook's policy audit does, and print one policy report per namespace instead of the VMs")
	reportAPI := fs.String("report-api", reportAPIs[0].api, "with --report, the reports' API: "+reportAPINames())
	if err := fs.Parse(args); err != nil {
		return exitBadInput
	}
	if fs.NArg() > 0 || (!*report && *file == "") || (*report && *file == "" && *objects == "") {
		fmt.Fprintln(s.err, renderUsage)
		return exitBadInput
	}
	if _, ok := api.LookupArch(*arch); *arch != "" && !ok {
		fmt.Fprintf(s.err, "render: --architecture %q: want one of %s\n", *arch, strings.Join(api.Architectures, ", "))
		return exitBadInput
	}
	if *output != "yaml" && *output != "json" {
		fmt.Fprintf(s.err, "render: -o %q: want yaml or json\n", *output)
		return exitBadInput
	}
	gvk, msg := reportKind(*report, *reportAPI, flagSet(fs, "report-api"), *noPolicies)
	if msg != "" {
		fmt.Fprintf(s.err, "render: %s\n", msg)
		return exitBadInput
	}
	// render is offline and holds nothing that needs cleaning up, so on
	// SIGINT or SIGTERM it stops at once, whatever it is doing (reading a
	// manifest from a stdin that never closes, evaluating a policy): the
	// work runs in its own goroutine and is abandoned.
	type outcome struct {
		verdicts []render.Verdict
		reports  []policyreport.Report
		err      error
	}
	done := make(chan outcome, 1)
	go func() {
		a := renderArgs{file: *file, objects: *objects, namespace: *namespace, policyDir: *policyDir, noPolicies: *noPolicies, suffix: *suffix, arch: *arch}
		var o outcome
		if *report {
			o.verdicts, o.reports, o.err = auditObjects(ctx, a, s.in)
		} else {
			o.verdicts, o.err = renderManifests(ctx, a, s.in)
		}
		done <- o
	}()
	var o outcome
	select {
	case o = <-done:
		if o.err != nil {
			fmt.Fprintf(s.err, "render: %v\n", o.err)
			return exitBadInput
		}
	case <-ctx.Done():
		fmt.Fprintln(s.err, "render: interrupted")
		return exitInterrupted
	}

	code := exitOK
	var admitted []render.Object
	for _, v := range o.verdicts {
		for _, w := range v.Warnings {
			fmt.Fprintf(s.err, "warning: %s/%s: %s\n", v.Namespace, v.Name, w)
		}
		for _, e := range v.Events {
			fmt.Fprintf(s.err, "event: %s/%s: %s\n", v.Namespace, v.Name, e)
		}
		for _, d := range v.Denied {
			fmt.Fprintf(s.err, "denied: %s/%s: %s\n", v.Namespace, v.Name, d.Error())
			code = exitDenied
		}
		if v.Object != nil {
			admitted = append(admitted, v.Object)
			admitted = append(admitted, v.Secrets...)
		}
	}
	if *report {
		return printReports(s, o.reports, gvk, *output, code)
	}
	if err := writeObjects(s.out, admitted, *output); err != nil {
		fmt.Fprintf(s.err, "render: %v\n", err)
		return exitFailure
	}
	return code
}

// renderArgs are render's flags.
type renderArgs struct {
	file, objects, namespace, policyDir string
	noPolicies                          bool
	// suffix is --generate-name-suffix.
	suffix string
	// arch is --architecture.
	arch string
}

// renderManifests reads the manifests and the cluster's objects, loads the
// policies, and renders.
func renderManifests(ctx context.Context, a renderArgs, stdin io.Reader) ([]render.Verdict, error) {
	opts, err := renderOptions(ctx, a, stdin)
	if err != nil {
		return nil, err
	}
	return render.Render(ctx, opts)
}

// renderOptions reads the manifests (none without -f) and the cluster's
// objects, and loads the policies.
func renderOptions(ctx context.Context, a renderArgs, stdin io.Reader) (render.Options, error) {
	opts := render.Options{Namespace: a.namespace, GenerateNameSuffix: a.suffix, DefaultArchitecture: a.arch}
	var err error
	if a.file != "" {
		if opts.Manifests, err = readObjectsFrom(a.file, stdin); err != nil {
			return opts, fmt.Errorf("%s: %w", a.file, err)
		}
	}
	if a.objects != "" {
		if opts.Cluster, err = readObjectsFrom(a.objects, stdin); err != nil {
			return opts, fmt.Errorf("%s: %w", a.objects, err)
		}
	}
	if !a.noPolicies {
		cms := policyConfigMaps(append(append([]render.Object(nil), opts.Cluster...), opts.Manifests...))
		if opts.Policies, err = loadEngine(ctx, a.policyDir, cms...); err != nil {
			return opts, err
		}
	}
	return opts, nil
}

func readObjectsFrom(path string, stdin io.Reader) ([]render.Object, error) {
	if path == "-" {
		return render.ReadObjects(stdin)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read-only
	return render.ReadObjects(f)
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
