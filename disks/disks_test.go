package disks

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/claims"
)

const ns = "workstations"

var labelled = map[string]string{api.LabelDataDisk: api.LabelTrue}

func dataVolume(name string, labels, annotations map[string]string) *cdiv1beta1.DataVolume {
	return &cdiv1beta1.DataVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: cdiv1beta1.SchemeGroupVersion.String(), Kind: api.KindDataVolume},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: annotations},
	}
}

func pvc(name string, labels map[string]string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: api.KindPVC},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
	}
}

// want is what a lookup reports, less the object.
type want struct {
	ok       bool
	kind     string
	labelled bool
	claims   claims.State
}

func describe(d Disk, ok bool) want {
	return want{ok: ok, kind: d.Kind, labelled: d.Labelled, claims: d.Claims}
}

// TestCacheAndStaticGiveOneAnswer runs each case through the webhooks'
// lookup (Cache, on a controller-runtime client) and render's (Static, on
// the same objects as manifests): the two must name the same object.
func TestCacheAndStaticGiveOneAnswer(t *testing.T) {
	claimedAt := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := map[string]struct {
		objects []client.Object
		name    string
		want    want
	}{
		"a labelled DataVolume, with its claims": {
			objects: []client.Object{dataVolume("home", labelled, map[string]string{
				api.AnnotationClaimedBy: ns + "/alice", api.AnnotationClaimedAt: claimedAt.Format(time.RFC3339),
			})},
			name: "home",
			want: want{ok: true, kind: api.KindDataVolume, labelled: true, claims: claims.State{ClaimedBy: ns + "/alice", ClaimedAt: claimedAt}},
		},
		"a labelled PVC": {
			objects: []client.Object{pvc("scratch", labelled)},
			name:    "scratch",
			want:    want{ok: true, kind: api.KindPVC, labelled: true},
		},
		"the DataVolume, not its PVC, whichever is labelled": {
			objects: []client.Object{pvc("home", labelled), dataVolume("home", nil, nil)},
			name:    "home",
			want:    want{ok: true, kind: api.KindDataVolume},
		},
		"an unlabelled PVC is found, and says so": {
			objects: []client.Object{pvc("team", map[string]string{"team": "a"})},
			name:    "team",
			want:    want{ok: true, kind: api.KindPVC},
		},
		"nothing of that name": {
			objects: []client.Object{pvc("other", labelled)},
			name:    "home",
			want:    want{},
		},
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, cdiv1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cache := Cache{Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.objects...).Build()}
			d, ok, err := cache.Disk(ctx, ns, tc.name)
			if err != nil {
				t.Fatalf("Cache.Disk: %v", err)
			}
			if got := describe(d, ok); !equal(got, tc.want) {
				t.Errorf("Cache.Disk(%s) = %+v, want %+v", tc.name, got, tc.want)
			}

			static := NewStatic()
			for _, obj := range tc.objects {
				m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
				if err != nil {
					t.Fatal(err)
				}
				u := &unstructured.Unstructured{Object: m}
				u.SetNamespace("") // as a manifest that names none
				if !static.Add(u, ns) {
					t.Fatalf("Static.Add(%s %s) recorded nothing", u.GetKind(), u.GetName())
				}
			}
			d, ok, err = static.Disk(ctx, ns, tc.name)
			if err != nil {
				t.Fatalf("Static.Disk: %v", err)
			}
			if got := describe(d, ok); !equal(got, tc.want) {
				t.Errorf("Static.Disk(%s) = %+v, want %+v", tc.name, got, tc.want)
			}
		})
	}
}

func TestCacheWithoutCDIFindsPVCsOnly(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	// Without CDI's types in the scheme, a DataVolume read would fail.
	cache := Cache{Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(pvc("home", labelled)).Build(), NoDataVolumes: true}
	d, ok, err := cache.Disk(context.Background(), ns, "home")
	if err != nil || !ok || d.Kind != api.KindPVC || !d.Labelled {
		t.Fatalf("Cache.Disk without CDI = %+v, %v, %v; want the labelled PVC", describe(d, ok), ok, err)
	}
}

func TestStaticSetClaims(t *testing.T) {
	static := NewStatic()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind(api.KindPVC)
	u.SetName("home")
	u.SetLabels(labelled)
	static.Add(u, ns)
	st := claims.State{SharedBy: []string{ns + "/a", ns + "/b"}}
	static.SetClaims(ns, "home", st)
	static.SetClaims(ns, "absent", st)
	if d, ok, _ := static.Disk(context.Background(), ns, "home"); !ok || !equal(describe(d, ok), want{ok: true, kind: api.KindPVC, labelled: true, claims: st}) {
		t.Errorf("after SetClaims: %+v", describe(d, ok))
	}
	if _, ok, _ := static.Disk(context.Background(), ns, "absent"); ok {
		t.Errorf("SetClaims on a disk that was never added created it")
	}
	if static.Add(&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret"}}, ns) {
		t.Errorf("Static.Add recorded a Secret")
	}
}

func equal(a, b want) bool {
	if a.ok != b.ok || a.kind != b.kind || a.labelled != b.labelled || a.claims.ClaimedBy != b.claims.ClaimedBy || !a.claims.ClaimedAt.Equal(b.claims.ClaimedAt) || len(a.claims.SharedBy) != len(b.claims.SharedBy) {
		return false
	}
	for i := range a.claims.SharedBy {
		if a.claims.SharedBy[i] != b.claims.SharedBy[i] {
			return false
		}
	}
	return true
}
