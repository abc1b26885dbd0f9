package userdata

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/cloudinit"
)

// testVM is a managed VM whose cloud-init volume reads <vm>-userdata, with
// the given annotations.
func testVM(ann map[string]string) *kubevirtv1.VirtualMachine {
	return &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "dev", UID: "uid-1",
			Labels: map[string]string{api.LabelManaged: api.LabelTrue}, Annotations: ann},
		Spec: kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
			Volumes: []kubevirtv1.Volume{{Name: "ci", VolumeSource: kubevirtv1.VolumeSource{
				CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: "dev-userdata"}},
			}}},
		}}},
	}
}

func TestCompute(t *testing.T) {
	rec := `{"dataDisks":[{"name":"home","kind":"DataVolume","disk":"vs-home","serial":"home","type":"disk","bus":"virtio","mountPath":"/home"}],"cloudInit":{"volume":"ci","secret":"dev-userdata"}}`
	own := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mine"}, Data: map[string][]byte{"userdata": []byte("#!/bin/sh\necho mine\n")}}
	get := func(name string) (*corev1.Secret, error) {
		if name == own.Name {
			return own, nil
		}
		return nil, nil
	}
	noKeys := func() ([]corev1.Secret, error) { return nil, nil }
	cases := map[string]struct {
		ann      map[string]string
		wantUser string // the user's part of the merged data; "" with wantErr or wantNone
		wantErr  string
		wantNone bool
	}{
		"inline user-data from the annotation": {
			ann: map[string]string{api.AnnotationInjected: rec, api.AnnotationUserData: `{"userData":"#!/bin/sh\necho inline\n"}`}, wantUser: "#!/bin/sh\necho inline\n",
		},
		"the user's own Secret": {
			ann: map[string]string{api.AnnotationInjected: rec, api.AnnotationUserData: `{"secretRef":"mine"}`}, wantUser: "#!/bin/sh\necho mine\n",
		},
		"the user's Secret is missing": {
			ann: map[string]string{api.AnnotationInjected: rec, api.AnnotationUserData: `{"secretRef":"gone"}`}, wantErr: "gone",
		},
		"an annotation that does not parse": {
			ann: map[string]string{api.AnnotationInjected: rec, api.AnnotationUserData: `{`}, wantErr: api.AnnotationUserData,
		},
		"no annotation and no record: the user's own Secret of that name": {
			ann: map[string]string{}, wantNone: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := Compute(testVM(tc.ann), get, noKeys)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Compute error = %v, want one naming %q", err, tc.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			case tc.wantNone:
				if s != nil {
					t.Fatalf("Compute = %v, want no Secret", s.Name)
				}
				return
			}
			if s.Name != "dev-userdata" || s.Namespace != "ns" || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != "uid-1" {
				t.Fatalf("Secret %s/%s owners %v, want ns/dev-userdata controlled by the VM", s.Namespace, s.Name, s.OwnerReferences)
			}
			user, ours, err := cloudinit.Split(s.Data[DataKey])
			if err != nil || !ours || string(user) != tc.wantUser {
				t.Fatalf("user part = %q (ours %v, %v), want %q", user, ours, err, tc.wantUser)
			}
			if !strings.Contains(string(s.Data[DataKey]), "mount_disk 'home' '/home'") {
				t.Errorf("merged user-data lacks the home mount:\n%s", s.Data[DataKey])
			}
		})
	}
	var missing *SourceMissingError
	if _, err := Compute(testVM(map[string]string{api.AnnotationInjected: rec, api.AnnotationUserData: `{"secretRef":"gone"}`}), get, noKeys); !errors.As(err, &missing) {
		t.Errorf("a missing Secret is %T, want *SourceMissingError", err)
	}
}
