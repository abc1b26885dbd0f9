package envtest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
)

// denyWithin is how soon an input past a limit must be denied through the
// API server: well inside the webhook's 5 s timeout. Before the limits, 8000
// GPUs got a 500 after that timeout, and the webhook kept a core busy for
// 14 s more.
const denyWithin = 3 * time.Second

func withGPULimit(q string) vmOption {
	return func(vm *kubevirtv1.VirtualMachine) {
		vm.Spec.Template.Spec.Domain.Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(q)}
	}
}

// gpuEntries is a virtstation.io/gpus value of n entries of one GPU each.
func gpuEntries(n int) string {
	entries := make([]string, n)
	for i := range entries {
		entries[i] = fmt.Sprintf("a.io/g%d=1", i)
	}
	return strings.Join(entries, ",")
}

// TestInputsPastLimitsAreDeniedQuickly creates, and server-side dry-runs,
// VMs past the limits through the API server: each is denied at once, with a
// message that names the field, the limit and the fix, never a 500 or a
// timeout.
func TestInputsPastLimitsAreDeniedQuickly(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "limits")
	cases := map[string]struct {
		opts []vmOption
		want []string
	}{
		"8000 GPUs in domain.resources": {
			opts: []vmOption{withGPULimit("8000")},
			want: []string{"spec.template.spec.domain.resources.limits[nvidia.com/gpu]", "from 0 to 16 devices", "rule: gpus", "fix:"},
		},
		"1e9 GPUs in domain.resources": {
			opts: []vmOption{withGPULimit("1e9")},
			want: []string{"spec.template.spec.domain.resources.limits[nvidia.com/gpu]", "from 0 to 16 devices"},
		},
		"a 12,000-entry virtstation.io/gpus": {
			opts: []vmOption{withAnnotation(api.AnnotationGPUs, gpuEntries(12000))},
			want: []string{"metadata.annotations[virtstation.io/gpus]", "may not be more than 16384 bytes", "rule: limits", "fix:"},
		},
		"17 GPUs from the annotation and domain.resources together": {
			opts: []vmOption{withAnnotation(api.AnnotationGPUs, "nvidia.com/GH100_H200=9"), withGPULimit("8")},
			want: []string{"spec.template.spec.domain.devices.gpus", "must have at most 16 items", "rule: gpus", "fix:"},
		},
	}
	for name, tc := range cases {
		for _, dryRun := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/dryRun=%v", name, dryRun), func(t *testing.T) {
				vm := newVM(ns, fmt.Sprintf("big-%d", time.Now().UnixNano()), append([]vmOption{managed}, tc.opts...)...)
				opts := []client.CreateOption{strict}
				if dryRun {
					opts = append(opts, client.DryRunAll)
				}
				start := time.Now()
				err := env.Client.Create(ctx, vm, opts...)
				took := time.Since(start)
				if err == nil {
					t.Fatal("create succeeded, want a denial")
				}
				if apierrors.IsInternalError(err) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) {
					t.Fatalf("got a 500 or a timeout, want a denial: %v", err)
				}
				if !apierrors.IsForbidden(err) {
					t.Errorf("err = %v, want 403 Forbidden (an admission denial)", err)
				}
				for _, want := range tc.want {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("denial %q does not contain %q", err, want)
					}
				}
				if took > denyWithin {
					t.Errorf("denied after %v, want within %v", took, denyWithin)
				}
				t.Logf("denied in %v", took)
			})
		}
	}
}
