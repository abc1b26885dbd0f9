package mutate

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtstation/virtstation/api"
)

// TestMutateLongVMNames admits VMs whose names leave no room, or just
// enough, for the suffix of the per-VM Secrets (-userdata, -ssh-keys; 9
// characters each) within the 253 characters of a Secret name.
func TestMutateLongVMNames(t *testing.T) {
	longest := strings.Repeat("a", 253-len("-userdata"))
	tooLong := longest + "b"
	cases := map[string]struct {
		name    string
		ann     map[string]string
		spec    specParts
		wantErr field.ErrorList
	}{
		"ssh keys Secret fits": {
			name: longest, ann: stepAnn(api.AnnotationSSHUser, "alice"),
		},
		"ssh keys Secret too long": {
			name: tooLong, ann: stepAnn(api.AnnotationSSHUser, "alice"),
			wantErr: field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), tooLong, secretNameDetail(tooLong, tooLong+"-ssh-keys"))},
		},
		"user-data Secret too long": {
			name: tooLong, ann: stepAnn(api.AnnotationSSHUser, "alice", api.AnnotationSSHPropagation, api.PropagationCloudInit),
			spec:    specParts{volumes: jsonList(noCloud("cloudinitdisk", jsonObj("userData", string(userScript(2000)))))},
			wantErr: field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), tooLong, secretNameDetail(tooLong, tooLong+"-userdata"))},
		},
		"no Secret needed": {
			name: tooLong, ann: stepAnn(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := mutateInput(t, admissionv1.Create, vmJSON(tc.ann, tc.spec.String()), "")
			in.Name = tc.name
			c := NewStaticCluster(nil)
			c.CollectKeys = fakeCollectKeys
			c.AddSecret(testKeySecret())
			res, err := Mutate(stepContext, in, c)
			if err != nil {
				t.Fatal(err)
			}
			if toJSON(res.Denied) != toJSON(tc.wantErr) {
				t.Errorf("Denied = %s, want %s", toJSON(res.Denied), toJSON(tc.wantErr))
			}
		})
	}
}
