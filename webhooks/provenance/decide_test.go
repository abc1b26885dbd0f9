package provenance

import (
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestDecide(t *testing.T) {
	vm := &Object{UID: "u-1", ResourceVersion: "42"}
	cases := map[string]struct {
		op          admissionv1.Operation
		old, stored *Object
		want        Verdict
	}{
		"create of a new name":                {op: admissionv1.Create, want: Genuine},
		"create of an existing name":          {op: admissionv1.Create, stored: vm, want: Exists},
		"update against the stored VM":        {op: admissionv1.Update, old: vm, stored: &Object{UID: "u-1", ResourceVersion: "42"}, want: Genuine},
		"update of another VM of the name":    {op: admissionv1.Update, old: &Object{UID: "u-0", ResourceVersion: "42"}, stored: vm, want: Stale},
		"update replayed with an old version": {op: admissionv1.Update, old: &Object{UID: "u-1", ResourceVersion: "41"}, stored: vm, want: Stale},
		"update of a VM that does not exist":  {op: admissionv1.Update, old: vm, want: Stale},
		"update without an old object":        {op: admissionv1.Update, stored: vm, want: Stale},
		"update whose old object has no UID":  {op: admissionv1.Update, old: &Object{ResourceVersion: "42"}, stored: &Object{ResourceVersion: "42"}, want: Stale},
		"delete is not judged":                {op: admissionv1.Delete, stored: vm, want: Genuine},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Decide(tc.op, tc.old, tc.stored); got != tc.want {
				t.Errorf("Decide = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestResponse(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "dev"}
	cases := map[string]struct {
		v          Verdict
		wantReason metav1.StatusReason
		wantText   string
	}{
		"a taken name is AlreadyExists": {v: Exists, wantReason: metav1.StatusReasonAlreadyExists, wantText: `virtualmachines.kubevirt.io "dev" already exists`},
		"a stale update is a Conflict":  {v: Stale, wantReason: metav1.StatusReasonConflict, wantText: "fix: try again"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resp := Response(tc.v, key)
			if resp.Allowed || resp.Result.Code != http.StatusConflict || resp.Result.Reason != tc.wantReason || !strings.Contains(resp.Result.Message, tc.wantText) {
				t.Errorf("Response = allowed %v, %d %s %q; want refused, 409 %s containing %q", resp.Allowed, resp.Result.Code, resp.Result.Reason, resp.Result.Message, tc.wantReason, tc.wantText)
			}
		})
	}
}
