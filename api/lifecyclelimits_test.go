package api

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestLifecycleLimits: the install namespace's limits bound the
// namespace's defaults and the VM's annotations; a namespace's ConfigMap
// cannot set them.
func TestLifecycleLimits(t *testing.T) {
	cluster := map[string]string{LifecycleKeyMinMode: ModeEnforce, LifecycleKeyLimitIdleTimeout: "8h", LifecycleKeyLimitIdleGracePeriod: "30m", LifecycleKeyLimitMaxKeepRunning: "4h"}
	read := func(ns map[string]string) LifecycleConfigMapData {
		return func(namespace string) (map[string]string, bool, error) {
			if namespace == "vs" {
				return cluster, true, nil
			}
			return ns, ns != nil, nil
		}
	}
	fld := field.NewPath("metadata", "annotations")
	for name, tc := range map[string]struct {
		namespace, annotations map[string]string
		want                   LifecyclePolicy
		cut                    int
		invalid                string
	}{
		"a VM with no idle timeout gets the limit": {
			want: LifecyclePolicy{Mode: ModeEnforce, IdleTimeout: 8 * time.Hour, IdleGracePeriod: 15 * time.Minute, MaxKeepRunning: 4 * time.Hour},
		},
		"the VM's annotations over the limits are cut": {
			annotations: map[string]string{AnnotationIdleTimeout: "720h", AnnotationIdleGracePeriod: "2h", AnnotationMaxKeepRunning: "720h"},
			want:        LifecyclePolicy{Mode: ModeEnforce, IdleTimeout: 8 * time.Hour, IdleGracePeriod: 30 * time.Minute, MaxKeepRunning: 4 * time.Hour},
			cut:         3,
		},
		"within the limits nothing changes": {
			annotations: map[string]string{AnnotationIdleTimeout: "1h", AnnotationIdleGracePeriod: "5m", AnnotationMaxKeepRunning: "2h"},
			want:        LifecyclePolicy{Mode: ModeEnforce, IdleTimeout: time.Hour, IdleGracePeriod: 5 * time.Minute, MaxKeepRunning: 2 * time.Hour},
		},
		"a namespace cannot turn the lifecycle off below min-mode": {
			namespace: map[string]string{LifecycleKeyMode: ModeOff, LifecycleKeyIdleTimeout: "1h"},
			want:      LifecyclePolicy{Mode: ModeEnforce, IdleTimeout: time.Hour, IdleGracePeriod: 15 * time.Minute, MaxKeepRunning: 4 * time.Hour},
		},
		"a namespace cannot raise the limits": {
			namespace: map[string]string{LifecycleKeyLimitIdleTimeout: "720h", LifecycleKeyMinMode: ModeOff, LifecycleKeyIdleTimeout: "100h"},
			want:      LifecyclePolicy{Mode: ModeEnforce, IdleTimeout: 8 * time.Hour, IdleGracePeriod: 15 * time.Minute, MaxKeepRunning: 4 * time.Hour},
			invalid:   "only the install namespace's",
		},
	} {
		t.Run(name, func(t *testing.T) {
			d, invalid, err := LayerLifecycleDefaults("vs", "team-a", read(tc.namespace))
			if err != nil {
				t.Fatal(err)
			}
			if tc.invalid == "" && invalid != nil || tc.invalid != "" && (invalid == nil || !strings.Contains(invalid.Error(), tc.invalid)) {
				t.Errorf("invalid = %v, want %q", invalid, tc.invalid)
			}
			p, errs := ParseLifecycle(tc.annotations, d, fld)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			if len(p.Limited) != tc.cut {
				t.Errorf("cut %q, want %d", p.Limited, tc.cut)
			}
			p.Limited = nil
			if !reflect.DeepEqual(p, tc.want) {
				t.Errorf("policy = %+v, want %+v", p, tc.want)
			}
		})
	}
}
