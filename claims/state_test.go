package claims

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/virtstation/virtstation/api"
)

func annotated(a map[string]string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "disk", Annotations: a}}
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestRead(t *testing.T) {
	tests := map[string]struct {
		annotations map[string]string
		want        State
	}{
		"no annotations": {},
		"writable claim": {
			annotations: map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: "2026-03-01T12:00:00Z"},
			want:        State{ClaimedBy: "ns/a", ClaimedAt: t0},
		},
		"shared, unsorted with blanks and duplicates": {
			annotations: map[string]string{api.AnnotationSharedBy: " ns/c, ns/a,,ns/c ,", api.AnnotationClaimedAt: "2026-03-01T13:00:00+01:00"},
			want:        State{SharedBy: []string{"ns/a", "ns/c"}, ClaimedAt: t0},
		},
		"unparseable time is zero": {
			annotations: map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: "yesterday"},
			want:        State{ClaimedBy: "ns/a"},
		},
		"blank claimed-by": {
			annotations: map[string]string{api.AnnotationClaimedBy: "  ", api.AnnotationSharedBy: " "},
		},
		"uids of the holders": {
			annotations: map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationSharedBy: "ns/b", api.AnnotationClaimUIDs: " ns/b=u-b , ns/a=u-a"},
			want:        State{ClaimedBy: "ns/a", SharedBy: []string{"ns/b"}, UIDs: map[string]types.UID{"ns/a": "u-a", "ns/b": "u-b"}},
		},
		"uids of non-holders and malformed entries dropped": {
			annotations: map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimUIDs: "ns/x=u-x,ns/a,ns/a=,=u"},
			want:        State{ClaimedBy: "ns/a"},
		},
		"other annotations ignored": {
			annotations: map[string]string{"virtstation.io/injected": "{}", api.AnnotationClaimedBy: "ns/a"},
			want:        State{ClaimedBy: "ns/a"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Read(annotated(tc.annotations))
			if !got.ClaimedAt.Equal(tc.want.ClaimedAt) {
				t.Errorf("ClaimedAt = %v, want %v", got.ClaimedAt, tc.want.ClaimedAt)
			}
			got.ClaimedAt, tc.want.ClaimedAt = time.Time{}, time.Time{}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Read = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestHoldersAndHolds(t *testing.T) {
	tests := map[string]struct {
		state       State
		holders     []string
		vm          string
		held, ro    bool
		wantIsEmpty bool
	}{
		"empty":  {state: State{}, holders: []string{}, vm: "ns/a", wantIsEmpty: true},
		"writer": {state: State{ClaimedBy: "ns/a"}, holders: []string{"ns/a"}, vm: "ns/a", held: true},
		"reader": {state: State{SharedBy: []string{"ns/a", "ns/b"}}, holders: []string{"ns/a", "ns/b"}, vm: "ns/b", held: true, ro: true},
		"writer and readers": {
			state: State{ClaimedBy: "ns/w", SharedBy: []string{"ns/a"}}, holders: []string{"ns/w", "ns/a"}, vm: "ns/x",
		},
		"writer also listed as reader counts once, writable": {
			state: State{ClaimedBy: "ns/a", SharedBy: []string{"ns/a", "ns/b"}}, holders: []string{"ns/a", "ns/b"}, vm: "ns/a", held: true,
		},
		"empty name holds nothing": {state: State{ClaimedBy: "ns/a"}, holders: []string{"ns/a"}, vm: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.state.Holders(); !reflect.DeepEqual(got, tc.holders) {
				t.Errorf("Holders = %q, want %q", got, tc.holders)
			}
			held, ro := tc.state.Holds(tc.vm)
			if held != tc.held || ro != tc.ro {
				t.Errorf("Holds(%q) = %v, %v; want %v, %v", tc.vm, held, ro, tc.held, tc.ro)
			}
			if got := tc.state.Empty(); got != tc.wantIsEmpty {
				t.Errorf("Empty = %v, want %v", got, tc.wantIsEmpty)
			}
		})
	}
}

func TestParseName(t *testing.T) {
	tests := map[string]struct {
		in   string
		want types.NamespacedName
		ok   bool
	}{
		"namespaced":  {in: "ns/vm", want: types.NamespacedName{Namespace: "ns", Name: "vm"}, ok: true},
		"no slash":    {in: "vm"},
		"no name":     {in: "ns/"},
		"no ns":       {in: "/vm"},
		"two slashes": {in: "a/b/c"},
		"empty":       {},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := ParseName(tc.in)
			if got != tc.want || ok != tc.ok {
				t.Errorf("ParseName(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
			}
			if ok && Name(got) != tc.in {
				t.Errorf("Name(%v) = %q, want %q", got, Name(got), tc.in)
			}
		})
	}
}

func TestApplyKeepsOtherAnnotations(t *testing.T) {
	a := State{ClaimedBy: "ns/a", SharedBy: nil, ClaimedAt: t0}.apply(map[string]string{"x": "y", api.AnnotationSharedBy: "ns/old"})
	want := map[string]string{"x": "y", api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: "2026-03-01T12:00:00Z"}
	if !reflect.DeepEqual(a, want) {
		t.Errorf("apply = %v, want %v", a, want)
	}
	if got := (State{}).apply(map[string]string{api.AnnotationClaimedBy: "ns/a", api.AnnotationClaimedAt: "x"}); got != nil {
		t.Errorf("apply of an empty state = %v, want nil", got)
	}
}

// FuzzRead checks that Read never panics and that what it reads survives a
// write and a second read unchanged.
func FuzzRead(f *testing.F) {
	f.Add("ns/a", "ns/b,ns/c", "2026-03-01T12:00:00Z")
	f.Add("", " , ,ns/a,ns/a", "garbage")
	f.Add("ns/a", "ns/a", "2026-03-01T13:00:00.5+01:00")
	f.Fuzz(func(t *testing.T, by, shared, at string) {
		s := Read(annotated(map[string]string{api.AnnotationClaimedBy: by, api.AnnotationSharedBy: shared, api.AnnotationClaimedAt: at,
			api.AnnotationClaimUIDs: by + "=u," + shared + "=v"}))
		again := Read(annotated(s.apply(nil)))
		if !again.equal(s) {
			t.Fatalf("round trip changed %+v into %+v", s, again)
		}
	})
}
