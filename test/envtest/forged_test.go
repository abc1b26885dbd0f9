package envtest_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/sshkeys"
	"github.com/virtstation/virtstation/webhooks/mutate"
)

// TestForgedMutatingReviewsReadAndWriteNothing (issue 27, findings 1–3 and
// 8): AdmissionReviews POSTed straight to the mutating webhook, with every
// field a tenant controls set to another tenant's names (namespace, VM name,
// uid and resourceVersion, the injected record, the cloud-init secretRef,
// the user-data annotation, dry-run or not), change nothing anywhere, and no
// byte of any Secret in the cluster appears in any response.
func TestForgedMutatingReviewsReadAndWriteNothing(t *testing.T) {
	ctx := context.Background()
	victim := newNamespace(t, "victim")
	mallory := newNamespace(t, "mallory")
	createPVC(t, victim, "carol-home", true)
	waitCached(t, pvcRef(victim, "carol-home"))
	// Carol's secrets: her own user data, and her namespace's SSH keys.
	own := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: victim, Name: "carol-own"},
		Data: map[string][]byte{"userdata": []byte("#!/bin/sh\necho carol-only-secret-token-7f3a\n")}}
	keys := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: victim, Name: "carol-keys", Labels: map[string]string{api.LabelSSHPublicKey: api.LabelTrue}},
		Data: map[string][]byte{"authorized_keys": []byte(testPublicKey + "\n")}}
	for _, s := range []*corev1.Secret{own, keys} {
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	carol := newVM(victim, "dev-carol", managed, withAnnotation(api.AnnotationDataDisks, "carol-home:/home/carol"),
		withAnnotation(api.AnnotationSSHUser, "carol"), withUserDataSecret("carol-own"))
	if err := env.Client.Create(ctx, carol); err != nil {
		t.Fatal(err)
	}
	userDataKey := client.ObjectKey{Namespace: victim, Name: mutate.UserDataSecretName("dev-carol")}
	keysKey := client.ObjectKey{Namespace: victim, Name: sshkeys.SecretName("dev-carol")}
	eventually(t, 15*time.Second, func() error {
		for _, k := range []client.ObjectKey{userDataKey, keysKey} {
			if err := env.Client.Get(ctx, k, &corev1.Secret{}); err != nil {
				return fmt.Errorf("the reconcilers have not written %s: %w", k, err)
			}
		}
		return nil
	})
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(carol), carol); err != nil {
		t.Fatal(err)
	}
	before := clusterState(t)

	// What Mallory sends: Carol's names, Carol's uid and resourceVersion
	// (readable with get), and records pointing at Carol's Secrets.
	injected := fmt.Sprintf(`{"cloudInit":{"volume":"ci","secret":%q,"userSecret":"carol-own"},"sshKeys":{"user":"carol","propagation":"cloudInit","secret":%q}}`,
		userDataKey.Name, keysKey.Name)
	forge := func(ns, name string, opts ...vmOption) *kubevirtv1.VirtualMachine {
		opts = append([]vmOption{managed,
			withAnnotation(api.AnnotationInjected, injected),
			withAnnotation(api.AnnotationUserData, `{"secretRef":"carol-own"}`),
			withAnnotation(api.AnnotationDataDisks, "carol-home:/home/carol"),
		}, opts...)
		vm := newVM(ns, name, opts...)
		vm.UID, vm.ResourceVersion = carol.UID, carol.ResourceVersion
		return vm
	}
	ourSecretRef := withUserDataSecret(userDataKey.Name)
	cloudInitKeys := func(vm *kubevirtv1.VirtualMachine) {
		vm.Annotations[api.AnnotationSSHUser] = "carol"
		vm.Annotations[api.AnnotationSSHPropagation] = api.PropagationCloudInit
	}
	cases := map[string]struct {
		op     admissionv1.Operation
		dryRun bool
		vm     *kubevirtv1.VirtualMachine
		ns     string // the request's namespace, when not the object's
	}{
		"dry-run CREATE naming Carol's Secrets":             {op: admissionv1.Create, dryRun: true, vm: forge(victim, "mallory-1", ourSecretRef)},
		"dry-run CREATE of Carol's own name":                {op: admissionv1.Create, dryRun: true, vm: forge(victim, "dev-carol", ourSecretRef)},
		"CREATE of Carol's own name":                        {op: admissionv1.Create, vm: forge(victim, "dev-carol", ourSecretRef, cloudInitKeys)},
		"UPDATE of Carol's VM with her uid":                 {op: admissionv1.Update, vm: forge(victim, "dev-carol", withUserData(forgedRunCmd))},
		"UPDATE of Carol's VM keeping her secretRef":        {op: admissionv1.Update, vm: forge(victim, "dev-carol", ourSecretRef, cloudInitKeys)},
		"object in Mallory's namespace, request in Carol's": {op: admissionv1.Create, vm: forge(mallory, "dev-carol", ourSecretRef), ns: victim},
		"object in Carol's namespace, request in Mallory's": {op: admissionv1.Create, vm: forge(victim, "dev-carol", ourSecretRef), ns: mallory},
	}
	secrets := secretValues(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ns := tc.vm.Namespace
			if tc.ns != "" {
				ns = tc.ns
			}
			resp, body := postForged(t, mutate.Path, ns, tc.op, tc.dryRun, tc.vm)
			for _, v := range secrets {
				if bytes.Contains(body, v.raw) || bytes.Contains(body, []byte(v.b64)) {
					t.Errorf("the response carries the data of Secret %s (allowed %v):\n%s", v.name, resp.Allowed, body)
				}
			}
			if strings.Contains(string(body), mallory) && tc.vm.Namespace != mallory && ns != mallory {
				t.Errorf("the response names namespace %s", mallory)
			}
		})
	}
	if after := clusterState(t); after != before {
		t.Fatalf("forged reviews changed the cluster:\nbefore %s\nafter  %s", before, after)
	}
}

// testPublicKey is a valid SSH public key (ed25519) for key Secrets.
const testPublicKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIL+1YQmejgEbok4avfbtVjS02uJ3R8o5Y93hdeGH4vgP carol@laptop"

// secretValue is one data value of a Secret in the cluster, raw and base64.
type secretValue struct {
	name string
	raw  []byte
	b64  string
}

// secretValues lists every data value of 8 bytes or more of every Secret in
// the cluster (shorter ones match by chance).
func secretValues(t *testing.T) []secretValue {
	t.Helper()
	var list corev1.SecretList
	if err := env.Client.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	var out []secretValue
	for _, s := range list.Items {
		for k, v := range s.Data {
			if len(v) >= 8 {
				out = append(out, secretValue{name: s.Namespace + "/" + s.Name + "[" + k + "]", raw: v, b64: base64.StdEncoding.EncodeToString(v)})
			}
		}
	}
	return out
}

// clusterState is the name and resourceVersion of every Secret, PVC and VM
// in the cluster, as one string: equal states mean nothing was written.
func clusterState(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	var secrets corev1.SecretList
	var pvcs corev1.PersistentVolumeClaimList
	var vms kubevirtv1.VirtualMachineList
	for _, l := range []client.ObjectList{&secrets, &pvcs, &vms} {
		if err := env.Client.List(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range secrets.Items {
		fmt.Fprintf(&b, "secret %s/%s@%s ", s.Namespace, s.Name, s.ResourceVersion)
	}
	for _, p := range pvcs.Items {
		fmt.Fprintf(&b, "pvc %s/%s@%s ", p.Namespace, p.Name, p.ResourceVersion)
	}
	for _, v := range vms.Items {
		fmt.Fprintf(&b, "vm %s/%s@%s ", v.Namespace, v.Name, v.ResourceVersion)
	}
	return b.String()
}

// postForged POSTs an AdmissionReview for vm, in namespace ns, straight to
// the webhook server, bypassing the API server, and returns its response
// and the raw body. On UPDATE the old object is vm itself.
func postForged(t *testing.T, path, ns string, op admissionv1.Operation, dryRun bool, vm *kubevirtv1.VirtualMachine) (*admissionv1.AdmissionResponse, []byte) {
	t.Helper()
	raw, err := json.Marshal(vm)
	if err != nil {
		t.Fatal(err)
	}
	req := &admissionv1.AdmissionRequest{
		UID:       types.UID("forged-" + strings.ReplaceAll(t.Name(), "/", "-")),
		Kind:      metav1.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: "VirtualMachine"},
		Resource:  metav1.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"},
		Namespace: ns, Name: vm.Name, Operation: op, DryRun: &dryRun,
		UserInfo: authenticationv1.UserInfo{Username: "system:admin", Groups: []string{"system:masters"}},
		Object:   runtime.RawExtension{Raw: raw},
	}
	if op == admissionv1.Update {
		req.OldObject = runtime.RawExtension{Raw: raw}
	}
	review := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req}
	body, err := json.Marshal(review)
	if err != nil {
		t.Fatal(err)
	}
	url, _ := env.WebhookURL(path)
	// With the API server's client certificate: the design must hold for
	// a caller that has one (or where the webhook is not configured to
	// require it), not only because the TLS handshake refuses the rest.
	hc := env.WebhookHTTPClient(10 * time.Second)
	resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var review2 admissionv1.AdmissionReview
	if err := json.Unmarshal(out, &review2); err != nil || review2.Response == nil {
		t.Fatalf("HTTP %d: not a review with a response: %v\n%s", resp.StatusCode, err, out)
	}
	// Patches travel base64-encoded in the review: decode them too.
	return review2.Response, append(out, review2.Response.Patch...)
}
