package bridge

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
)

// TestMaxKeepRunning: the browser's keep-running lease is capped by the
// VM's own max-keep-running, or the default without a valid one.
func TestMaxKeepRunning(t *testing.T) {
	for name, tc := range map[string]struct {
		annotations map[string]string
		want        time.Duration
	}{
		"none":                   {want: api.DefaultMaxKeepRunning},
		"the VM's own":           {annotations: map[string]string{api.AnnotationMaxKeepRunning: "1h"}, want: time.Hour},
		"not parseable":          {annotations: map[string]string{api.AnnotationMaxKeepRunning: "soon"}, want: api.DefaultMaxKeepRunning},
		"another annotation bad": {annotations: map[string]string{api.AnnotationMaxKeepRunning: "1h", api.AnnotationIdleTimeout: "x"}, want: time.Hour},
	} {
		t.Run(name, func(t *testing.T) {
			vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}}
			if got := maxKeepRunning(vm); got != tc.want {
				t.Errorf("maxKeepRunning = %v, want %v", got, tc.want)
			}
		})
	}
}
