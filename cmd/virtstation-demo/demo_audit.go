package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/internal/testenv"
	"github.com/virtstation/virtstation/policyreport"
)

// The demo's audited rule: examples/95-policy-audit.yaml, which flags
// ml-dave.
const (
	demoAuditRule = "gpu-cost-center"
	demoAuditWait = 30 * time.Second
)

// showAudit waits for the policy audit to report the operator's rule on the
// demo namespace's VMs, and prints the PolicyReport as a table: one line per
// VM and rule, failures with the webhook's message.
func showAudit(ctx context.Context, env *testenv.Env, out io.Writer) error {
	var rep policyreport.Report
	deadline := time.Now().Add(demoAuditWait)
	for {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(policyreport.WGPolicy)
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: demoNamespace, Name: policyreport.ReportName}, u)
		if err == nil {
			if rep, err = policyreport.FromObject(u); err != nil {
				return err
			}
			if hasRule(rep, demoAuditRule) {
				break
			}
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("the policy audit did not report rule %s in namespace %s within %s: %w", demoAuditRule, demoNamespace, demoAuditWait, err)
			}
			return fmt.Errorf("the policy audit did not report rule %s in namespace %s within %s", demoAuditRule, demoNamespace, demoAuditWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	fmt.Fprintf(out, "\nPolicy audit: PolicyReport %s/%s (wgpolicyk8s.io/v1alpha2), %d pass, %d fail, %d warn, %d error\n",
		demoNamespace, rep.Name, rep.Summary.Pass, rep.Summary.Fail, rep.Summary.Warn, rep.Summary.Error)
	fmt.Fprintf(out, "  (kubectl get policyreports -n %s; the results that are not pass:)\n", demoNamespace)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  VM\tRULE\tRESULT\tMODE\tMESSAGE")
	for _, r := range rep.Results {
		if r.Result == policyreport.Pass {
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", r.Subjects[0].Name, r.Rule, r.Result, r.Properties[policyreport.PropMode], strings.ReplaceAll(r.Description, "\n", "; "))
	}
	return tw.Flush()
}

func hasRule(r policyreport.Report, rule string) bool {
	for _, res := range r.Results {
		if res.Rule == rule {
			return true
		}
	}
	return false
}
