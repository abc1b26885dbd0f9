package claims

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/virtstation/virtstation/api"
)

func testScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(kubevirtv1.AddToScheme(s))
	utilruntime.Must(cdiv1beta1.AddToScheme(s))
	return s
}

// fakeClient returns a fake client holding objs and a counter of the
// patches sent through it.
func fakeClient(objs ...client.Object) (client.Client, *int) {
	patches := new(int)
	c := fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			*patches++
			return c.Patch(ctx, obj, patch, opts...)
		}}).Build()
	return c, patches
}

func diskPVC(a map[string]string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: "disk", Labels: map[string]string{api.LabelDataDisk: api.LabelTrue}, Annotations: a,
	}}
}

func claimedAt(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func vmKey(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: "ns", Name: name}
}

func TestClaim(t *testing.T) {
	fresh, stale := claimedAt(t0.Add(-RefreshAfter/2)), claimedAt(t0.Add(-RefreshAfter))
	tests := map[string]struct {
		before   map[string]string
		vm       string
		readOnly bool
		opts     []ClaimOption
		want     map[string]string // annotations after
		wantErr  *ClaimedError
		writes   int
	}{
		"writable on a free disk": {
			vm:   "a",
			want: map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: claimedAt(t0)}, writes: 1,
		},
		"read-only on a free disk": {
			vm: "a", readOnly: true,
			want: map[string]string{api.AnnotationSharedBy: "ns/a", api.AnnotationClaimedAt: claimedAt(t0)}, writes: 1,
		},
		"already held, fresh: no write": {
			before: map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: fresh},
			vm:     "a",
			want:   map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: fresh},
		},
		"already shared, fresh: no write": {
			before: map[string]string{api.AnnotationSharedBy: "ns/a,ns/b", api.AnnotationClaimedAt: fresh},
			vm:     "b", readOnly: true,
			want: map[string]string{api.AnnotationSharedBy: "ns/a,ns/b", api.AnnotationClaimedAt: fresh},
		},
		"already held for RefreshAfter: claimed-at rewritten": {
			before: map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: stale},
			vm:     "a",
			want:   map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: claimedAt(t0)}, writes: 1,
		},
		"held without claimed-at: claimed-at written": {
			before: map[string]string{api.AnnotationClaimedBy: "ns/a"},
			vm:     "a",
			want:   map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: claimedAt(t0)}, writes: 1,
		},
		"another VM holds it writable": {
			before:  map[string]string{api.AnnotationClaimedBy: "ns/b", api.AnnotationClaimedAt: fresh},
			vm:      "a",
			want:    map[string]string{api.AnnotationClaimedBy: "ns/b", api.AnnotationClaimedAt: fresh},
			wantErr: &ClaimedError{Holders: []string{"ns/b"}, Writable: true},
		},
		"read-only next to another VM's writable claim": {
			before: map[string]string{api.AnnotationClaimedBy: "ns/b", api.AnnotationClaimedAt: fresh},
			vm:     "a", readOnly: true,
			want:    map[string]string{api.AnnotationClaimedBy: "ns/b", api.AnnotationClaimedAt: fresh},
			wantErr: &ClaimedError{Holders: []string{"ns/b"}, Writable: true},
		},
		"writable next to read-only claims": {
			before:  map[string]string{api.AnnotationSharedBy: "ns/b,ns/c", api.AnnotationClaimedAt: fresh},
			vm:      "a",
			want:    map[string]string{api.AnnotationSharedBy: "ns/b,ns/c", api.AnnotationClaimedAt: fresh},
			wantErr: &ClaimedError{Holders: []string{"ns/b", "ns/c"}},
		},
		"read-only joins, sorted": {
			before: map[string]string{api.AnnotationSharedBy: "ns/a,ns/c", api.AnnotationClaimedAt: fresh, "other": "kept"},
			vm:     "b", readOnly: true,
			want: map[string]string{api.AnnotationSharedBy: "ns/a,ns/b,ns/c", api.AnnotationClaimedAt: claimedAt(t0), "other": "kept"}, writes: 1,
		},
		"writer switches to read-only": {
			before: map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: fresh},
			vm:     "a", readOnly: true,
			want: map[string]string{api.AnnotationSharedBy: "ns/a", api.AnnotationClaimedAt: claimedAt(t0)}, writes: 1,
		},
		"sole reader switches to writable": {
			before: map[string]string{api.AnnotationSharedBy: "ns/a", api.AnnotationClaimedAt: fresh},
			vm:     "a",
			want:   map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: claimedAt(t0)}, writes: 1,
		},
		"replacing a stale writer": {
			before: map[string]string{api.AnnotationClaimedBy: "ns/b", api.AnnotationClaimedAt: stale},
			vm:     "a", opts: []ClaimOption{Replacing("ns/b")},
			want: map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: claimedAt(t0)}, writes: 1,
		},
		"replacing stale readers, keeping live ones": {
			before: map[string]string{api.AnnotationSharedBy: "ns/b,ns/c,ns/d", api.AnnotationClaimedAt: fresh},
			vm:     "a", readOnly: true, opts: []ClaimOption{Replacing("ns/c", "ns/gone"), Replacing("ns/d")},
			want: map[string]string{api.AnnotationSharedBy: "ns/a,ns/b", api.AnnotationClaimedAt: claimedAt(t0)}, writes: 1,
		},
		"replacing a stale reader while holding the claim: written": {
			before: map[string]string{api.AnnotationSharedBy: "ns/a,ns/b", api.AnnotationClaimedAt: fresh},
			vm:     "a", readOnly: true, opts: []ClaimOption{Replacing("ns/b")},
			want: map[string]string{api.AnnotationSharedBy: "ns/a", api.AnnotationClaimedAt: claimedAt(t0)}, writes: 1,
		},
		"bound to a uid on a free disk": {
			vm: "a", opts: []ClaimOption{WithUID("u-a")},
			want: map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: claimedAt(t0), api.AnnotationClaimUIDs: "ns/a=u-a"}, writes: 1,
		},
		"already held with the uid, fresh: no write": {
			before: map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: fresh, api.AnnotationClaimUIDs: "ns/a=u-a"},
			vm:     "a", opts: []ClaimOption{WithUID("u-a")},
			want: map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: fresh, api.AnnotationClaimUIDs: "ns/a=u-a"},
		},
		"held without a uid (written before uids), fresh: bound": {
			before: map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: fresh},
			vm:     "a", opts: []ClaimOption{WithUID("u-a")},
			want: map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: claimedAt(t0), api.AnnotationClaimUIDs: "ns/a=u-a"}, writes: 1,
		},
		"held by an earlier VM of the name: rebound to this one": {
			before: map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: fresh, api.AnnotationClaimUIDs: "ns/a=u-old"},
			vm:     "a", opts: []ClaimOption{WithUID("u-a")},
			want: map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: claimedAt(t0), api.AnnotationClaimUIDs: "ns/a=u-a"}, writes: 1,
		},
		"replacing a stale holder drops its uid": {
			before: map[string]string{api.AnnotationClaimedBy: "ns/b", api.AnnotationClaimedAt: fresh, api.AnnotationClaimUIDs: "ns/b=u-b"},
			vm:     "a", opts: []ClaimOption{WithUID("u-a"), Replacing("ns/b")},
			want: map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: claimedAt(t0), api.AnnotationClaimUIDs: "ns/a=u-a"}, writes: 1,
		},
		"replacing itself is ignored": {
			before: map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: fresh},
			vm:     "a", opts: []ClaimOption{Replacing("ns/a")},
			want: map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: fresh},
		},
		"replacing someone else does not clear the way": {
			before: map[string]string{api.AnnotationClaimedBy: "ns/b", api.AnnotationClaimedAt: fresh},
			vm:     "a", opts: []ClaimOption{Replacing("ns/c")},
			want:    map[string]string{api.AnnotationClaimedBy: "ns/b", api.AnnotationClaimedAt: fresh},
			wantErr: &ClaimedError{Holders: []string{"ns/b"}, Writable: true},
		},
		"recorded as writer and reader: normalised": {
			before: map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationSharedBy: "ns/a", api.AnnotationClaimedAt: fresh},
			vm:     "a",
			want:   map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: claimedAt(t0)}, writes: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c, patches := fakeClient(diskPVC(tc.before))
			var obj corev1.PersistentVolumeClaim
			if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "disk"}, &obj); err != nil {
				t.Fatal(err)
			}
			err := Claim(ctx, c, &obj, vmKey(tc.vm), tc.readOnly, t0, tc.opts...)
			if tc.wantErr == nil && err != nil {
				t.Fatalf("Claim: %v", err)
			}
			if tc.wantErr != nil {
				var ce *ClaimedError
				if !errors.Is(err, ErrClaimed) || !errors.As(err, &ce) || !reflect.DeepEqual(ce, tc.wantErr) {
					t.Fatalf("Claim error = %v, want ErrClaimed %+v", err, tc.wantErr)
				}
			}
			if *patches != tc.writes {
				t.Errorf("%d writes, want %d", *patches, tc.writes)
			}
			var got corev1.PersistentVolumeClaim
			if err := c.Get(ctx, client.ObjectKeyFromObject(&obj), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Annotations, tc.want) {
				t.Errorf("annotations = %v, want %v", got.Annotations, tc.want)
			}
			if !reflect.DeepEqual(obj.Annotations, tc.want) {
				t.Errorf("the caller's object has annotations %v, want %v", obj.Annotations, tc.want)
			}
		})
	}
}

func TestClaimedErrorNamesTheHolder(t *testing.T) {
	err := error(&ClaimedError{Holders: []string{"ns/winner"}, Writable: true})
	if got, want := err.Error(), "disk is claimed by another VM: ns/winner holds it writable"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	err = &ClaimedError{Holders: []string{"ns/a", "ns/b"}}
	if got, want := err.Error(), "disk is claimed by another VM: ns/a, ns/b share it read-only"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// bump changes the stored disk behind the caller's back.
func bump(ctx context.Context, t *testing.T, c client.Client, key client.ObjectKey, obj client.Object) {
	t.Helper()
	if err := c.Get(ctx, key, obj); err != nil {
		t.Fatal(err)
	}
	obj.SetLabels(map[string]string{api.LabelDataDisk: api.LabelTrue, "bumped": "yes"})
	if err := c.Update(ctx, obj); err != nil {
		t.Fatal(err)
	}
}

func TestClaimAndReleaseConflict(t *testing.T) {
	ctx := context.Background()
	tests := map[string]struct {
		before map[string]string
		write  func(client.Client, client.Object) error
	}{
		"claim": {
			write: func(c client.Client, obj client.Object) error { return Claim(ctx, c, obj, vmKey("a"), false, t0) },
		},
		"release": {
			before: map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: claimedAt(t0)},
			write:  func(c client.Client, obj client.Object) error { return Release(ctx, c, obj, vmKey("a")) },
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, _ := fakeClient(diskPVC(tc.before))
			key := client.ObjectKey{Namespace: "ns", Name: "disk"}
			var read corev1.PersistentVolumeClaim
			if err := c.Get(ctx, key, &read); err != nil {
				t.Fatal(err)
			}
			bump(ctx, t, c, key, &corev1.PersistentVolumeClaim{})
			err := tc.write(c, &read)
			if !errors.Is(err, ErrConflict) || !apierrors.IsConflict(err) {
				t.Fatalf("err = %v, want ErrConflict wrapping the API server's Conflict", err)
			}
			if !reflect.DeepEqual(read.Annotations, tc.before) {
				t.Errorf("the caller's object has annotations %v, want them as read: %v", read.Annotations, tc.before)
			}
			var got corev1.PersistentVolumeClaim
			if err := c.Get(ctx, key, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Annotations, tc.before) {
				t.Errorf("stored annotations %v, want them unchanged: %v", got.Annotations, tc.before)
			}
		})
	}
}

func TestClaimNeedsResourceVersion(t *testing.T) {
	c, patches := fakeClient(diskPVC(nil))
	err := Claim(context.Background(), c, diskPVC(nil), vmKey("a"), false, t0)
	if err == nil || *patches != 0 {
		t.Fatalf("Claim on an object never read: err = %v, %d writes; want an error and no write", err, *patches)
	}
}

func TestClaimDataVolume(t *testing.T) {
	ctx := context.Background()
	dv := &cdiv1beta1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "home"}}
	c, _ := fakeClient(dv)
	var read cdiv1beta1.DataVolume
	if err := c.Get(ctx, client.ObjectKeyFromObject(dv), &read); err != nil {
		t.Fatal(err)
	}
	if err := Claim(ctx, c, &read, vmKey("a"), false, t0); err != nil {
		t.Fatal(err)
	}
	err := Claim(ctx, c, &read, vmKey("b"), false, t0)
	if !errors.Is(err, ErrClaimed) {
		t.Fatalf("second claim: %v, want ErrClaimed", err)
	}
	if want := "claim DataVolume ns/home for ns/b: disk is claimed by another VM: ns/a holds it writable"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
}

func TestRelease(t *testing.T) {
	at := claimedAt(t0)
	tests := map[string]struct {
		before map[string]string
		vm     string
		want   map[string]string
		writes int
	}{
		"writer": {
			before: map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: at, "other": "kept"},
			vm:     "a", want: map[string]string{"other": "kept"}, writes: 1,
		},
		"last claim removes every annotation": {
			before: map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: at},
			vm:     "a", writes: 1,
		},
		"one reader of several": {
			before: map[string]string{api.AnnotationSharedBy: "ns/a,ns/b,ns/c", api.AnnotationClaimedAt: at},
			vm:     "b", want: map[string]string{api.AnnotationSharedBy: "ns/a,ns/c", api.AnnotationClaimedAt: at}, writes: 1,
		},
		"writer recorded as reader too": {
			before: map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationSharedBy: "ns/a", api.AnnotationClaimedAt: at},
			vm:     "a", writes: 1,
		},
		"not held: no write": {
			before: map[string]string{api.AnnotationClaimedBy: "ns/b", api.AnnotationClaimedAt: at},
			vm:     "a", want: map[string]string{api.AnnotationClaimedBy: "ns/b", api.AnnotationClaimedAt: at},
		},
		"no claims: no write": {vm: "a"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c, patches := fakeClient(diskPVC(tc.before))
			var obj corev1.PersistentVolumeClaim
			if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "disk"}, &obj); err != nil {
				t.Fatal(err)
			}
			if err := Release(ctx, c, &obj, vmKey(tc.vm)); err != nil {
				t.Fatal(err)
			}
			if *patches != tc.writes {
				t.Errorf("%d writes, want %d", *patches, tc.writes)
			}
			var got corev1.PersistentVolumeClaim
			if err := c.Get(ctx, client.ObjectKeyFromObject(&obj), &got); err != nil {
				t.Fatal(err)
			}
			if len(got.Annotations) != 0 || len(tc.want) != 0 {
				if !reflect.DeepEqual(got.Annotations, tc.want) {
					t.Errorf("annotations = %v, want %v", got.Annotations, tc.want)
				}
			}
		})
	}
}

func TestGraceOrDefault(t *testing.T) {
	tests := map[string]struct {
		set, want time.Duration
	}{
		"zero is the default":       {set: 0, want: DefaultGrace},
		"a negative is the default": {set: -time.Second, want: DefaultGrace},
		"a setting is kept":         {set: time.Minute, want: time.Minute},
		"a short setting is kept":   {set: time.Millisecond, want: time.Millisecond},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := GraceOrDefault(tc.set); got != tc.want {
				t.Errorf("GraceOrDefault(%v) = %v, want %v", tc.set, got, tc.want)
			}
		})
	}
}
