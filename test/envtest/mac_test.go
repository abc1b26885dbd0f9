package envtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/mac"
	"github.com/virtstation/virtstation/webhooks/mutate"
	"github.com/virtstation/virtstation/webhooks/validate"
)

func derived(t *testing.T, ns, name string) string {
	t.Helper()
	addr, _, err := mac.Derive(ns, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	return addr.String()
}

func TestLabelledVMGetsDerivedMAC(t *testing.T) {
	ctx := context.Background()
	c, _ := newClient(t)
	ns := newNamespace(t, "mac")
	vm := newVM(ns, "dev-1", managed, withPodInterface("default", ""))
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	if got, want := podMAC(vm, "default"), derived(t, ns, "dev-1"); got != want {
		t.Fatalf("macAddress = %q, want derived %q", got, want)
	}
	rec, err := api.ParseInjected(vm.Annotations[api.AnnotationInjected])
	if err != nil || rec.MAC == nil || rec.MAC.Source != api.MACSourceDerived || rec.MAC.Address != podMAC(vm, "default") {
		t.Fatalf("injected record = %+v (%v), want the derived MAC", rec.MAC, err)
	}
	eventually(t, 10*time.Second, func() error {
		for _, e := range eventsFor(t, ns, "dev-1") {
			if e.Reason == mutate.ReasonInjected && strings.Contains(e.Note, podMAC(vm, "default")) {
				return nil
			}
		}
		return fmt.Errorf("no %s event naming the MAC", mutate.ReasonInjected)
	})
}

func TestVMWithoutInterfacesGetsDefaultMasquerade(t *testing.T) {
	ctx := context.Background()
	c, _ := newClient(t)
	ns := newNamespace(t, "mac")
	vm := newVM(ns, "bare", managed)
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	spec := vm.Spec.Template.Spec
	if len(spec.Domain.Devices.Interfaces) != 1 || spec.Domain.Devices.Interfaces[0].Masquerade == nil || spec.Domain.Devices.Interfaces[0].Name != "default" {
		t.Fatalf("interfaces = %+v, want one masquerade interface named default", spec.Domain.Devices.Interfaces)
	}
	if len(spec.Networks) != 1 || spec.Networks[0].Pod == nil || spec.Networks[0].Name != "default" {
		t.Fatalf("networks = %+v, want the pod network named default", spec.Networks)
	}
	if got, want := podMAC(vm, "default"), derived(t, ns, "bare"); got != want {
		t.Fatalf("macAddress = %q, want %q", got, want)
	}

	off := newVM(ns, "no-autoattach", managed, func(vm *kubevirtv1.VirtualMachine) {
		f := false
		vm.Spec.Template.Spec.Domain.Devices.AutoattachPodInterface = &f
	})
	c2, warnings := newClient(t)
	if err := c2.Create(ctx, off); err != nil {
		t.Fatal(err)
	}
	if n := len(off.Spec.Template.Spec.Domain.Devices.Interfaces); n != 0 {
		t.Fatalf("autoattachPodInterface=false: got %d interfaces, want none", n)
	}
	if err := containsAny(warnings.Take(), "MAC not pinned: autoattachPodInterface is false"); err != nil {
		t.Fatal(err)
	}
}

func TestUnlabelledVMNeverReachesWebhook(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "mac")
	before := webhookRequests(t, mutate.Path)
	beforeValidate := webhookRequests(t, validate.VMPath)
	vm := newVM(ns, "plain", withPodInterface("default", ""), withAnnotation(api.AnnotationSharedMemory, "1Gi"))
	if err := env.Client.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	if got := podMAC(vm, "default"); got != "" {
		t.Fatalf("unlabelled VM got MAC %q", got)
	}
	if _, ok := vm.Annotations[api.AnnotationInjected]; ok {
		t.Fatal("unlabelled VM got the injected annotation")
	}
	if after := webhookRequests(t, mutate.Path); after != before {
		t.Fatalf("webhook requests went from %v to %v for an unlabelled VM", before, after)
	}
	if after := webhookRequests(t, validate.VMPath); after != beforeValidate {
		t.Fatalf("validating webhook requests went from %v to %v for an unlabelled VM", beforeValidate, after)
	}
	// The counter does move for a labelled VM, so the check above can fail.
	if err := env.Client.Create(ctx, newVM(ns, "labelled", managed)); err != nil {
		t.Fatal(err)
	}
	if after := webhookRequests(t, mutate.Path); after <= before {
		t.Fatalf("webhook request counter did not move for a labelled VM (%v)", after)
	}
}

func TestServerDryRunChangesNothing(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "mac")
	vm := newVM(ns, "dry", managed, withPodInterface("default", ""))
	if err := env.Client.Create(ctx, vm, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	if got, want := podMAC(vm, "default"), derived(t, ns, "dry"); got != want {
		t.Fatalf("dry-run response macAddress = %q, want %q", got, want)
	}
	err := env.Client.Get(ctx, client.ObjectKeyFromObject(vm), &kubevirtv1.VirtualMachine{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("after a dry-run create, get = %v, want NotFound", err)
	}
	// Give the reporter the time it takes in the labelled test, then check
	// no Event was written for an object that does not exist.
	time.Sleep(2 * time.Second)
	if evs := eventsFor(t, ns, "dry"); len(evs) != 0 {
		t.Fatalf("dry-run create left %d events", len(evs))
	}
}

func TestUpdateNeverChangesExistingMAC(t *testing.T) {
	ctx := context.Background()
	c, warnings := newClient(t)
	ns := newNamespace(t, "mac")
	vm := newVM(ns, "stable", managed, withPodInterface("default", ""))
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	pinned := podMAC(vm, "default")

	// Asking for another MAC through the annotation keeps the pinned one and warns.
	vm.Annotations[api.AnnotationMAC] = "02:aa:bb:cc:dd:ee"
	if err := c.Update(ctx, vm); err != nil {
		t.Fatal(err)
	}
	if got := podMAC(vm, "default"); got != pinned {
		t.Fatalf("after annotation change macAddress = %q, want %q kept", got, pinned)
	}
	if err := containsAny(warnings.Take(), "is never rewritten"); err != nil {
		t.Fatal(err)
	}

	// A replace that drops the MAC (kubectl replace, a GitOps tool) gets the stored one back.
	delete(vm.Annotations, api.AnnotationMAC)
	vm.Spec.Template.Spec.Domain.Devices.Interfaces[0].MacAddress = ""
	if err := c.Update(ctx, vm); err != nil {
		t.Fatal(err)
	}
	if got := podMAC(vm, "default"); got != pinned {
		t.Fatalf("after dropping macAddress got %q, want stored %q", got, pinned)
	}
	rec, _ := api.ParseInjected(vm.Annotations[api.AnnotationInjected])
	if rec.MAC == nil || rec.MAC.Address != pinned {
		t.Fatalf("injected record after restore = %+v, want address %s", rec.MAC, pinned)
	}

	// A user's own MAC on a labelled VM is kept as is.
	own := newVM(ns, "own", managed, withPodInterface("default", "02:12:34:56:78:9a"))
	if err := c.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	if got := podMAC(own, "default"); got != "02:12:34:56:78:9a" {
		t.Fatalf("user MAC rewritten to %q", got)
	}
}

// collidingNames finds two VM names in ns whose first MAC candidates are
// equal. Names are random: FNV-1a spreads sequential names ("vm-1", "vm-2",
// …) so evenly that they almost never collide, while random ones meet the
// birthday bound of 40 hashed bits after about 1.3 million tries.
func collidingNames(t *testing.T, ns string) (string, string) {
	t.Helper()
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	rng := rand.New(rand.NewPCG(1, 2))
	seen := make(map[string]string, 1<<21)
	b := []byte("vm-0123456789")
	for i := 0; i < 1<<23; i++ {
		for j := 3; j < len(b); j++ {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		name := string(b)
		key := mac.Candidate(ns + "/" + name).String()
		if other, ok := seen[key]; ok && other != name {
			return other, name
		}
		seen[key] = name
	}
	t.Fatal("no colliding pair found")
	return "", ""
}

func TestCollidingNamesGetDifferentMACs(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "collide")
	first, second := collidingNames(t, ns)
	vm1 := newVM(ns, first, managed, withPodInterface("default", ""))
	if err := env.Client.Create(ctx, vm1); err != nil {
		t.Fatal(err)
	}
	if got, want := podMAC(vm1, "default"), mac.Candidate(ns+"/"+first).String(); got != want {
		t.Fatalf("first VM MAC = %s, want its first candidate %s", got, want)
	}
	// The webhook sees other VMs through its informer; wait until it has vm1.
	eventually(t, 10*time.Second, func() error {
		return env.Manager.GetCache().Get(ctx, client.ObjectKeyFromObject(vm1), &kubevirtv1.VirtualMachine{})
	})
	vm2 := newVM(ns, second, managed, withPodInterface("default", ""))
	if err := env.Client.Create(ctx, vm2); err != nil {
		t.Fatal(err)
	}
	if podMAC(vm2, "default") == podMAC(vm1, "default") {
		t.Fatalf("%s and %s both got %s", first, second, podMAC(vm1, "default"))
	}
	if got, want := podMAC(vm2, "default"), mac.Candidate(ns+"/"+second+"#1").String(); got != want {
		t.Fatalf("second VM MAC = %s, want the first rehash %s", got, want)
	}
}

func TestInvalidMACAnnotationIsDenied(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "mac")
	cases := map[string]string{
		"not a mac": "02:zz:00:00:00:01",
		"multicast": "03:00:00:00:00:01",
		"reserved":  "02:00:00:00:00:00",
	}
	for name, value := range cases {
		t.Run(name, func(t *testing.T) {
			vm := newVM(ns, "bad-"+strings.ReplaceAll(name, " ", "-"), managed,
				withPodInterface("default", ""), withAnnotation(api.AnnotationMAC, value))
			err := env.Client.Create(ctx, vm)
			if err == nil {
				t.Fatal("create succeeded, want a denial")
			}
			for _, want := range []string{"metadata.annotations[virtstation.io/mac]", "rule: mac", "fix:"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("denial %q does not contain %q", err, want)
				}
			}
			if apierrors.IsInternalError(err) {
				t.Errorf("denial is a 500: %v", err)
			}
		})
	}
}

// TestSchemaRejectsMisspelledField shows the CRDs are structural: with strict
// field validation, a misspelled field is rejected, so a mutation that wrote
// one would fail these tests.
func TestSchemaRejectsMisspelledField(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "schema")
	raw, err := json.Marshal(newVM(ns, "typo"))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(raw, &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetAPIVersion("kubevirt.io/v1")
	u.SetKind("VirtualMachine")
	if err := unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "default", "macAdress": "02:00:00:00:00:01", "masquerade": map[string]any{}}},
		"spec", "template", "spec", "domain", "devices", "interfaces"); err != nil {
		t.Fatal(err)
	}
	err = env.Client.Create(ctx, u, client.FieldValidation("Strict"))
	if err == nil || !strings.Contains(err.Error(), "macAdress") {
		t.Fatalf("strict create with a misspelled field = %v, want an unknown-field error", err)
	}
}

// TestGenerateNameVMsGetDistinctMACs: the API server names a generateName VM
// after the webhooks ran, so the MAC cannot come from the name; two such VMs
// must still get their own MACs.
func TestGenerateNameVMsGetDistinctMACs(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "genname")
	var macs []string
	for i := 0; i < 2; i++ {
		vm := newVM(ns, "", managed, withPodInterface("default", ""))
		vm.GenerateName = "ws-"
		if err := env.Client.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
		got := podMAC(vm, "default")
		addr, err := mac.Parse(got)
		if err != nil || mac.ValidateAssignable(addr) != nil {
			t.Fatalf("%s got MAC %q: %v", vm.Name, got, err)
		}
		macs = append(macs, got)
	}
	if macs[0] == macs[1] {
		t.Fatalf("two generateName VMs share MAC %s", macs[0])
	}
}

// TestDuplicateMACIsWarned: a MAC another VM already uses is allowed, with a
// warning that names that VM.
func TestDuplicateMACIsWarned(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "dup")
	const addr = "02:5e:00:00:00:07"
	first := newVM(ns, "first", withPodInterface("default", addr))
	if err := env.Client.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		return env.Manager.GetCache().Get(ctx, client.ObjectKeyFromObject(first), &kubevirtv1.VirtualMachine{})
	})
	c, warnings := newClient(t)
	second := newVM(ns, "second", managed, withPodInterface("default", ""), withAnnotation(api.AnnotationMAC, addr))
	if err := c.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	if got := podMAC(second, "default"); got != addr {
		t.Fatalf("macAddress = %q, want the annotated %q", got, addr)
	}
	if err := containsAny(warnings.Take(), "also used by VirtualMachine first"); err != nil {
		t.Fatal(err)
	}
}
