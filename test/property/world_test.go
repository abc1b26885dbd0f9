package property

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/internal/vmgen"
	"github.com/virtstation/virtstation/render"
	"github.com/virtstation/virtstation/sshkeys"
	"github.com/virtstation/virtstation/userdata"
	"github.com/virtstation/virtstation/webhooks/mutate"
)

// world is the cluster one case is admitted into: the webhook's view of it
// (a StaticCluster, as the handler tests and render use) whose Secrets live
// in a client. The webhook writes nothing; each admitted VM is stored in the
// client and the real reconcilers (userdata, sshkeys) write its Secrets
// there from the stored VM, as in a cluster.
type world struct {
	*mutate.StaticCluster
	client  client.Client
	handler *mutate.Handler

	mu sync.Mutex
	// written are the Secrets the reconcilers wrote, by name, last wins.
	written map[string]*corev1.Secret
}

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, kubevirtv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

func newWorld(c vmgen.Case) (*world, error) {
	var vms []kubevirtv1.VirtualMachine
	var secrets []client.Object
	var disks []func(*mutate.StaticCluster)
	for _, obj := range c.Objects {
		b, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		switch obj["kind"] {
		case "VirtualMachine":
			var vm kubevirtv1.VirtualMachine
			if err := json.Unmarshal(b, &vm); err != nil {
				return nil, fmt.Errorf("decode cluster VM: %w", err)
			}
			vms = append(vms, vm)
		case "Secret":
			var s corev1.Secret
			if err := json.Unmarshal(b, &s); err != nil {
				return nil, fmt.Errorf("decode cluster Secret: %w", err)
			}
			secrets = append(secrets, &s)
		case api.KindDataVolume, api.KindPVC:
			var m metav1.PartialObjectMetadata
			if err := json.Unmarshal(b, &m); err != nil {
				return nil, fmt.Errorf("decode data disk: %w", err)
			}
			kind, _ := obj["kind"].(string)
			disks = append(disks, func(s *mutate.StaticCluster) { s.AddDataDisk(kind, m.Namespace, m.Name, m.Labels) })
		default:
			return nil, fmt.Errorf("cluster object of kind %v", obj["kind"])
		}
	}
	static := mutate.NewStaticCluster(vms)
	// The cluster's KubeVirt CR says the default architecture.
	static.SetDefaultArchitecture(c.Architecture)
	for _, add := range disks {
		add(static)
	}
	for _, s := range secrets {
		static.AddSecret(s.(*corev1.Secret))
	}
	static.CollectKeys = func(s []corev1.Secret) []string { keys, _ := sshkeys.Collect(s); return keys }
	w := &world{
		StaticCluster: static,
		client:        fake.NewClientBuilder().WithScheme(scheme).WithObjects(secrets...).Build(),
		written:       map[string]*corev1.Secret{},
	}
	w.handler = mutate.NewHandler(w)
	return w, nil
}

// Secret implements mutate.Cluster from the client, which holds the
// Secrets admissions wrote.
func (w *world) Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	var s corev1.Secret
	err := w.client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &s)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// storedUID is the UID the API server gives a stored VM in the world.
const storedUID = "0b1c2d3e-0000-4000-8000-000000000001"

// store stores the admitted VM obj in the client, as the API server would,
// and runs the reconcilers that write its Secrets, recording what they
// wrote. A VM without a name (generateName) is named as the API server
// would, from the request uid.
func (w *world) store(ctx context.Context, uid string, obj map[string]any) error {
	raw, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	vm := &kubevirtv1.VirtualMachine{}
	if err := json.Unmarshal(raw, vm); err != nil {
		return err
	}
	if vm.Name == "" {
		// The API server names it after the webhooks, as render does.
		vm.Name = render.GeneratedName(vm.GenerateName, uid)
	}
	vm.UID = storedUID
	var cur kubevirtv1.VirtualMachine
	switch err := w.client.Get(ctx, client.ObjectKeyFromObject(vm), &cur); {
	case apierrors.IsNotFound(err):
		vm.ResourceVersion = ""
		err = w.client.Create(ctx, vm)
		if err != nil {
			return fmt.Errorf("store VM: %w", err)
		}
	case err != nil:
		return err
	default:
		vm.ResourceVersion = cur.ResourceVersion
		if err := w.client.Update(ctx, vm); err != nil {
			return fmt.Errorf("store VM: %w", err)
		}
	}
	rec := events.NewFakeRecorder(100)
	ctx = logf.IntoContext(ctx, logr.Discard())
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(vm)}
	if _, err := (&userdata.Reconciler{Client: w.client, Reader: w.client, APIReader: w.client, Recorder: rec}).Reconcile(ctx, req); err != nil {
		return fmt.Errorf("user-data reconciler: %w", err)
	}
	if _, err := (&sshkeys.Reconciler{Client: w.client, Reader: w.client, APIReader: w.client, Recorder: rec}).Reconcile(ctx, req); err != nil {
		return fmt.Errorf("ssh-key reconciler: %w", err)
	}
	var list corev1.SecretList
	if err := w.client.List(ctx, &list, client.InNamespace(vm.Namespace)); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range list.Items {
		s := &list.Items[i]
		if ref := metav1.GetControllerOf(s); ref != nil && ref.UID == vm.UID {
			w.written[s.Name] = s.DeepCopy()
		}
	}
	return nil
}

// takeWritten returns and forgets the Secrets asked for since the last call.
func (w *world) takeWritten() map[string]map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]map[string]string{}
	for name, s := range w.written {
		out[name] = secretData(s)
	}
	w.written = map[string]*corev1.Secret{}
	return out
}

func secretData(s *corev1.Secret) map[string]string {
	d := map[string]string{}
	for k, v := range s.Data {
		d[k] = string(v)
	}
	for k, v := range s.StringData {
		d[k] = v
	}
	return d
}

// outcome is one admission's answer.
type outcome struct {
	allowed  bool
	code     int32
	message  string
	causes   []string // "field: message", sorted
	warnings []string
	object   map[string]any // the admitted object, patch applied
}

// admit sends one admission request through the real handler, as the API
// server would for op on obj (and old, on UPDATE), and applies the patch.
func (w *world) admit(ctx context.Context, uid string, op admissionv1.Operation, obj, old map[string]any) (outcome, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return outcome{}, err
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       types.UID(uid),
		Kind:      metav1.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: "VirtualMachine"},
		Resource:  metav1.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"},
		Namespace: metaString(obj, "namespace"),
		Name:      metaString(obj, "name"),
		Operation: op,
		Object:    runtime.RawExtension{Raw: raw},
	}}
	if old != nil {
		if req.OldObject.Raw, err = json.Marshal(old); err != nil {
			return outcome{}, err
		}
	}
	resp := w.handler.Handle(ctx, req)
	out := outcome{allowed: resp.Allowed, warnings: resp.Warnings}
	if resp.Result != nil {
		out.code, out.message = resp.Result.Code, resp.Result.Message
		if resp.Result.Details != nil {
			for _, c := range resp.Result.Details.Causes {
				out.causes = append(out.causes, c.Field+": "+c.Message)
			}
			sort.Strings(out.causes)
		}
	}
	if !resp.Allowed {
		return out, nil
	}
	if out.code != 0 && out.code != http.StatusOK {
		return out, fmt.Errorf("allowed with code %d: %s", out.code, out.message)
	}
	patched := raw
	if len(resp.Patches) > 0 {
		pb, err := json.Marshal(resp.Patches)
		if err != nil {
			return outcome{}, err
		}
		p, err := jsonpatch.DecodePatch(pb)
		if err != nil {
			return outcome{}, fmt.Errorf("decode the webhook's patch: %w", err)
		}
		if patched, err = p.Apply(raw); err != nil {
			return outcome{}, fmt.Errorf("apply the webhook's patch: %w", err)
		}
	}
	if err := json.Unmarshal(patched, &out.object); err != nil {
		return outcome{}, err
	}
	if err := w.store(ctx, uid, out.object); err != nil {
		return outcome{}, err
	}
	return out, nil
}

func metaString(obj map[string]any, key string) string {
	md, _ := obj["metadata"].(map[string]any)
	s, _ := md[key].(string)
	return s
}
