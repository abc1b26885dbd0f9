package render

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/virtstation/virtstation/webhooks/mutate"
)

// TestRenderGenerateName: a VM with only generateName renders as the
// webhook admits it (no name at mutation, the MAC from the prefix and the
// request UID, which render takes from the suffix), named as the API server
// names it.
func TestRenderGenerateName(t *testing.T) {
	const suffix = "x7k2q"
	raw := `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"generateName":"dev-","namespace":"ns","labels":{"virtstation.io/managed":"true"}},
		"spec":{"runStrategy":"Halted","template":{"spec":{"domain":{"devices":{}}}}}}`
	var manifest Object
	if err := json.Unmarshal([]byte(raw), &manifest); err != nil {
		t.Fatal(err)
	}
	verdicts, err := Render(context.Background(), Options{Manifests: []Object{manifest}, GenerateNameSuffix: suffix})
	if err != nil {
		t.Fatal(err)
	}
	if len(verdicts) != 1 || verdicts[0].Name != "dev-"+suffix || len(verdicts[0].Denied) > 0 {
		t.Fatalf("verdicts = %+v, want dev-%s admitted", verdicts, suffix)
	}

	vm, err := mutate.DecodeVM([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	res, err := mutate.Mutate(context.Background(), mutate.Input{Operation: admissionv1.Create, Namespace: "ns", RequestUID: suffix, Object: []byte(raw), VM: vm}, mutate.NewStaticCluster(nil))
	if err != nil || len(res.Denied) > 0 {
		t.Fatalf("Mutate: %v %v", err, res.Denied)
	}
	want := withName(res.Object, "dev-"+suffix)
	if !reflect.DeepEqual(verdicts[0].Object, want) {
		t.Errorf("render:\n%v\nwebhook:\n%v", verdicts[0].Object, want)
	}

	if _, err := Render(context.Background(), Options{Manifests: []Object{manifest}}); err == nil {
		t.Error("Render without a suffix: want an error naming --generate-name-suffix")
	}
}

func TestGeneratedName(t *testing.T) {
	long := "a234567890b234567890c234567890d234567890e234567890f2345678TOOLONG-"
	for prefix, want := range map[string]string{
		"dev-": "dev-x7k2q",
		long:   long[:58] + "x7k2q",
	} {
		if got := GeneratedName(prefix, "x7k2q"); got != want {
			t.Errorf("GeneratedName(%q) = %q, want %q", prefix, got, want)
		}
	}
}
