package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/virtstation/virtstation/policyreport"
	"github.com/virtstation/virtstation/render"
)

// now is when `render --report` stamps its results and judges claims
// (a variable so tests print fixed timestamps).
var now = time.Now

// reportAPIs are the report kinds --report-api selects, the default first.
var reportAPIs = []struct {
	api string
	gvk schema.GroupVersionKind
}{
	{policyreport.WGPolicy.GroupVersion().String(), policyreport.WGPolicy},
	{policyreport.OpenReports.GroupVersion().String(), policyreport.OpenReports},
}

func reportAPINames() string {
	names := make([]string, len(reportAPIs))
	for i, a := range reportAPIs {
		names[i] = a.api + " (" + a.gvk.Kind + ")"
	}
	return strings.Join(names, " or ")
}

// reportKind checks the report flags: the kind --report-api names, or a
// message saying what is wrong with them.
func reportKind(report bool, reportAPI string, apiSet, noPolicies bool) (schema.GroupVersionKind, string) {
	switch {
	case !report && apiSet:
		return schema.GroupVersionKind{}, "--report-api applies to --report only (fix: add --report, or drop --report-api)"
	case !report:
		return schema.GroupVersionKind{}, ""
	case noPolicies:
		return schema.GroupVersionKind{}, "--report evaluates the policies, --no-policies skips them (fix: drop one)"
	}
	for _, a := range reportAPIs {
		if a.api == reportAPI {
			return a.gvk, ""
		}
	}
	return schema.GroupVersionKind{}, fmt.Sprintf("--report-api %q: want %s", reportAPI, reportAPINames())
}

// auditObjects renders the manifests (if any), for their denials and
// warnings, and audits the world they leave. It also returns the warnings
// about the input.
func auditObjects(ctx context.Context, a renderArgs, stdin io.Reader) ([]render.Verdict, []policyreport.Report, []string, error) {
	opts, warnings, err := renderOptions(ctx, a, stdin)
	if err != nil {
		return nil, nil, warnings, err
	}
	opts.Now = now()
	var verdicts []render.Verdict
	if len(opts.Manifests) > 0 {
		if verdicts, err = render.Render(ctx, opts); err != nil {
			return nil, nil, warnings, err
		}
	}
	reports, err := render.Audit(ctx, opts)
	if err != nil {
		return nil, nil, warnings, err
	}
	return verdicts, reports, warnings, nil
}

// printReports prints the reports as objects of kind gvk (multi-document
// YAML, or a JSON v1 List) and a summary line per report on stderr. It
// returns exitDenied when a result failed or errored, else code.
func printReports(s streams, reports []policyreport.Report, gvk schema.GroupVersionKind, format string, code int) int {
	objs := make([]render.Object, 0, len(reports))
	for _, r := range reports {
		u, err := policyreport.Object(r, gvk)
		if err != nil {
			fmt.Fprintf(s.err, "render: %v\n", err)
			return exitFailure
		}
		objs = append(objs, u.Object)
		fmt.Fprintf(s.err, "report: %s %s/%s: %d pass, %d fail, %d warn, %d error\n",
			gvk.Kind, r.Namespace, r.Name, r.Summary.Pass, r.Summary.Fail, r.Summary.Warn, r.Summary.Error)
		if r.Summary.Fail > 0 || r.Summary.Error > 0 {
			code = exitDenied
		}
	}
	if len(reports) == 0 {
		fmt.Fprintln(s.err, "report: no managed VirtualMachines (label virtstation.io/managed: \"true\") among the objects")
	}
	var err error
	if format == "json" {
		err = writeList(s.out, objs)
	} else {
		err = writeObjects(s.out, objs, format)
	}
	if err != nil {
		fmt.Fprintf(s.err, "render: %v\n", err)
		return exitFailure
	}
	return code
}

// writeList prints objects as a JSON v1 List, even one or none, so scripts
// read .items whatever the count.
func writeList(w io.Writer, objs []render.Object) error {
	b, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "items": objs}, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
