package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRenderReport: `render --report` prints the policy reports of the
// managed VMs among the objects, and exits 3 when a result fails.
func TestRenderReport(t *testing.T) {
	fixed := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	now = func() time.Time { return fixed }
	t.Cleanup(func() { now = time.Now })

	cases := map[string]struct {
		args     []string
		wantCode int
	}{
		// A passing VM and a mount under /etc in team-a; shared memory
		// under a dryrun rule in team-b; an unmanaged VM left out.
		"report":             {args: []string{"--report", "--objects", "report-objects.yaml"}, wantCode: exitDenied},
		"report-json":        {args: []string{"--report", "--objects", "report-objects.yaml", "-o", "json"}, wantCode: exitDenied},
		"report-openreports": {args: []string{"--report", "--objects", "report-objects.yaml", "--report-api", "openreports.io/v1alpha1"}, wantCode: exitDenied},
		// -f is admitted onto the objects first: its fixes (UPDATEs, which
		// keep the VMs' UIDs) make every result pass.
		"report-fixed-by-manifests": {args: []string{"--report", "--objects", "report-objects.yaml", "-f", "report-fix.yaml"}, wantCode: exitOK},
		// An operator policy's rules get results too.
		"report-operator-policy": {args: []string{"--report", "--objects", "vm.yaml", "--policy", "policies-ok"}, wantCode: exitOK},
		// Policy ConfigMaps among the objects load as the webhook's loader
		// loads them; the manifest is admitted in dryrun mode and fails.
		"report-policy-configmaps": {args: []string{"--report", "--objects", "report-policy-configmaps.yaml", "-f", "vm.yaml"}, wantCode: exitDenied},
		"report-none-managed":      {args: []string{"--report", "--objects", "claimed.yaml", "-o", "json"}, wantCode: exitOK},
		"report-bad-modes":         {args: []string{"--report", "--objects", "report-bad-modes.yaml"}, wantCode: exitBadInput},
		"report-no-objects":        {args: []string{"--report"}, wantCode: exitBadInput},
		"report-no-policies":       {args: []string{"--report", "--objects", "vm.yaml", "--no-policies"}, wantCode: exitBadInput},
		"report-api-unknown":       {args: []string{"--report", "--objects", "vm.yaml", "--report-api", "wgpolicyk8s.io/v1beta1"}, wantCode: exitBadInput},
		"report-api-alone":         {args: []string{"-f", "vm.yaml", "--report-api", "openreports.io/v1alpha1"}, wantCode: exitBadInput},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Chdir(filepath.Join("testdata", "render"))
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append([]string{"render"}, tc.args...),
				streams{in: strings.NewReader(""), out: &stdout, err: &stderr})
			if code != tc.wantCode {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", code, tc.wantCode, stderr.String())
			}
			golden(t, name+".stdout.golden", stdout.Bytes())
			golden(t, name+".stderr.golden", stderr.Bytes())
		})
	}
}
