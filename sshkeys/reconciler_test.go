package sshkeys

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/virtstation/virtstation/api"
)

// writes counts the Secret writes a fake client saw.
type writes struct{ creates, updates int }

// newFake returns a reconciler over a fake client holding objs; failUpdate,
// when not nil, answers every Update.
func newFake(t *testing.T, failUpdate error, objs ...client.Object) (*Reconciler, *events.FakeRecorder, *writes, client.Client) {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := kubevirtv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	w := &writes{}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			w.creates++
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			w.updates++
			if failUpdate != nil {
				return failUpdate
			}
			return c.Update(ctx, obj, opts...)
		},
	}).Build()
	rec := events.NewFakeRecorder(100)
	return &Reconciler{Client: c, Reader: c, Recorder: rec}, rec, w, c
}

func wantingVM() *kubevirtv1.VirtualMachine {
	return &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: "dev", UID: "uid-1",
		Labels:      map[string]string{api.LabelManaged: api.LabelTrue},
		Annotations: map[string]string{api.AnnotationSSHUser: "dev"},
	}}
}

// drain returns the events recorded so far.
func drain(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func countPrefix(list []string, prefix string) int {
	n := 0
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

func reconcileVM(t *testing.T, r *Reconciler) ctrl.Result {
	t.Helper()
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "dev"}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestReconcileWritesOnlyWhatDiffers(t *testing.T) {
	ed := testKeys()["ed25519"]
	src := keySecret("team", map[string]string{DataKey: ed + " a\nnot a key\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----\n"})
	r, rec, w, c := newFake(t, nil, wantingVM(), &src)

	reconcileVM(t, r)
	var got corev1.Secret
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "dev-ssh-keys"}, &got); err != nil {
		t.Fatal(err)
	}
	if string(got.Data[DataKey]) != ed+" a\n" || metav1.GetControllerOf(&got) == nil || metav1.GetControllerOf(&got).UID != "uid-1" {
		t.Fatalf("secret = %q owned by %+v, want the key, owned by the VM", got.Data[DataKey], got.OwnerReferences)
	}
	first := drain(rec)
	if countPrefix(first, "Warning "+ReasonInvalidKey+" 2 line(s) skipped") != 1 || countPrefix(first, "Normal "+ReasonSynced) != 1 {
		t.Fatalf("events = %q, want one invalid-line warning and one sync", first)
	}
	for _, e := range first {
		if strings.HasPrefix(e, "Warning "+ReasonInvalidKey) && (!strings.Contains(e, "line 2: ") || !strings.Contains(e, "line 3: a PEM block")) {
			t.Errorf("warning %q does not name both line 2 and the private key at line 3", e)
		}
	}

	for range 3 {
		reconcileVM(t, r)
	}
	if w.creates != 1 || w.updates != 0 {
		t.Fatalf("after settling: %d creates, %d updates; want 1 and 0", w.creates, w.updates)
	}
	if again := drain(rec); len(again) != 0 {
		t.Fatalf("repeat reconciles emitted %q", again)
	}
}

func TestReconcileLeavesForeignSecretAlone(t *testing.T) {
	taken := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "dev-ssh-keys"}, Data: map[string][]byte{"x": []byte("mine")}}
	r, rec, w, _ := newFake(t, nil, wantingVM(), taken)
	if res := reconcileVM(t, r); res.RequeueAfter != recheckTaken {
		t.Errorf("RequeueAfter = %v, want %v", res.RequeueAfter, recheckTaken)
	}
	reconcileVM(t, r)
	if w.creates != 0 || w.updates != 0 {
		t.Fatalf("foreign secret written: %d creates, %d updates", w.creates, w.updates)
	}
	if evs := drain(rec); len(evs) != 1 || countPrefix(evs, "Warning "+ReasonSecretTaken) != 1 {
		t.Fatalf("events = %q, want one %s warning", evs, ReasonSecretTaken)
	}
}

func TestReconcileReturnsConflicts(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, "dev-ssh-keys", nil)
	empty := Desired(&kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "dev"}}, nil)
	src := keySecret("team", map[string]string{DataKey: testKeys()["ed25519"]})
	r, _, _, _ := newFake(t, conflict, wantingVM(), empty, &src)
	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "dev"}})
	if !apierrors.IsConflict(err) {
		t.Fatalf("Reconcile = %v, want the conflict back so the VM is requeued", err)
	}
}

func TestReconcileIgnoresVMsThatDoNotWantKeys(t *testing.T) {
	vm := wantingVM()
	vm.Annotations[api.AnnotationSSHPropagation] = api.PropagationCloudInit
	src := keySecret("team", map[string]string{DataKey: testKeys()["ed25519"]})
	r, _, w, _ := newFake(t, nil, vm, &src)
	reconcileVM(t, r)
	if w.creates != 0 || w.updates != 0 {
		t.Fatalf("cloudInit VM got a secret: %d creates, %d updates", w.creates, w.updates)
	}
}

// keySecretCache is a client whose Secret reads, like a cache restricted to
// key Secrets, never find the per-VM Secret.
type keySecretCache struct{ client.Client }

func (c keySecretCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Secret); ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func TestReconcileReadsTheSecretThroughAPIReader(t *testing.T) {
	fromWebhook := Desired(&kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "dev"}}, nil)
	src := keySecret("team", map[string]string{DataKey: testKeys()["ed25519"]})
	r, _, w, c := newFake(t, nil, wantingVM(), fromWebhook, &src)
	r.Client, r.APIReader = keySecretCache{c}, c
	reconcileVM(t, r)
	if w.creates != 0 || w.updates != 1 {
		t.Fatalf("%d creates, %d updates; want the existing secret adopted with one update", w.creates, w.updates)
	}
}
