package admit

import (
	"net/http"
	"testing"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestDenyNamesEveryFieldAsACause(t *testing.T) {
	fld := field.NewPath("metadata", "annotations").Key("virtstation.io/data-disks")
	errs := field.ErrorList{
		field.NotFound(fld.Index(0).Child("name"), "home"),
		field.Forbidden(fld, "data disks can change only while the VM is stopped (rule: data-disks; fix: stop it)"),
	}
	resp := Deny(errs)
	if resp.Allowed || resp.Result.Code != http.StatusForbidden {
		t.Fatalf("Deny: allowed=%v code=%d, want a 403 denial", resp.Allowed, resp.Result.Code)
	}
	if resp.Result.Message != errs.ToAggregate().Error() {
		t.Errorf("message = %q, want %q", resp.Result.Message, errs.ToAggregate().Error())
	}
	want := []metav1.StatusCause{
		{Type: metav1.CauseType(field.ErrorTypeNotFound), Message: errs[0].ErrorBody(), Field: "metadata.annotations[virtstation.io/data-disks][0].name"},
		{Type: metav1.CauseType(field.ErrorTypeForbidden), Message: errs[1].ErrorBody(), Field: "metadata.annotations[virtstation.io/data-disks]"},
	}
	if got := resp.Result.Details.Causes; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("causes = %+v, want %+v", got, want)
	}
}

func TestInternalKeepsDetailsInTheLog(t *testing.T) {
	resp := Internal("uid-1", "write Secret %s", "vm-ssh-keys")
	if resp.Allowed || resp.Result.Code != http.StatusInternalServerError {
		t.Fatalf("Internal: allowed=%v code=%d, want a 500", resp.Allowed, resp.Result.Code)
	}
	if want := "virtstation could not write Secret vm-ssh-keys; see the webhook log for request uid-1"; resp.Result.Message != want {
		t.Errorf("message = %q, want %q", resp.Result.Message, want)
	}
}

func TestPatched(t *testing.T) {
	tests := map[string]struct {
		ops           []jsonpatch.Operation
		wantPatchType bool
	}{
		"no change is a plain allow": {},
		"a change is a JSON patch":   {ops: []jsonpatch.Operation{{Operation: "add", Path: "/metadata/labels", Value: map[string]any{}}}, wantPatchType: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			resp := Patched(tc.ops)
			if !resp.Allowed || len(resp.Patches) != len(tc.ops) {
				t.Fatalf("Patched: allowed=%v patches=%v, want allowed with %v", resp.Allowed, resp.Patches, tc.ops)
			}
			if got := resp.PatchType != nil && *resp.PatchType == admissionv1.PatchTypeJSONPatch; got != tc.wantPatchType {
				t.Errorf("JSON patch type set = %v, want %v", got, tc.wantPatchType)
			}
		})
	}
}
