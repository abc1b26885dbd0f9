package sshkeys

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
)

func TestWants(t *testing.T) {
	managed := map[string]string{api.LabelManaged: api.LabelTrue}
	cases := map[string]struct {
		labels      map[string]string
		annotations map[string]string
		want        bool
	}{
		"user, default propagation": {labels: managed, annotations: map[string]string{api.AnnotationSSHUser: "dev"}, want: true},
		"user, qemuGuestAgent": {labels: managed, annotations: map[string]string{
			api.AnnotationSSHUser: "dev", api.AnnotationSSHPropagation: api.PropagationQemuGuestAgent}, want: true},
		"user, cloudInit": {labels: managed, annotations: map[string]string{
			api.AnnotationSSHUser: "dev", api.AnnotationSSHPropagation: api.PropagationCloudInit}},
		"user, unknown propagation": {labels: managed, annotations: map[string]string{
			api.AnnotationSSHUser: "dev", api.AnnotationSSHPropagation: "QemuGuestAgent"}},
		"no user":        {labels: managed, annotations: map[string]string{api.AnnotationSSHPropagation: api.PropagationQemuGuestAgent}},
		"empty user":     {labels: managed, annotations: map[string]string{api.AnnotationSSHUser: ""}},
		"not managed":    {annotations: map[string]string{api.AnnotationSSHUser: "dev"}},
		"managed=false":  {labels: map[string]string{api.LabelManaged: "false"}, annotations: map[string]string{api.AnnotationSSHUser: "dev"}},
		"no annotations": {labels: managed},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels, Annotations: tc.annotations}}
			if got := Wants(vm); got != tc.want {
				t.Errorf("Wants = %v, want %v", got, tc.want)
			}
		})
	}
}
