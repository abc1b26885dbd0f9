package mutate

import (
	"reflect"
	"testing"

	"github.com/virtstation/virtstation/api"
)

// TestGuardControllerAnnotations: only the lifecycle controller's user
// changes its annotations; anyone else's change goes back to the trusted
// (stored, managed) value or is removed.
func TestGuardControllerAnnotations(t *testing.T) {
	const ctl, tenant = "system:serviceaccount:virtstation-system:virtstation-webhook", "alice"
	stored := map[string]string{api.AnnotationIdleStop: `{"action":"stopped"}`, "other": "x"}
	tests := map[string]struct {
		requester, controller string
		trusted, got          map[string]string
		want                  []annotationUndo
	}{
		"the controller sets a notice": {requester: ctl, controller: ctl, trusted: stored,
			got: map[string]string{api.AnnotationIdleStop: `{"action":"stopped"}`, api.AnnotationIdleStopAt: "2026-12-06T18:00:00Z"}},
		"the controller removes both": {requester: ctl, controller: ctl, trusted: map[string]string{api.AnnotationIdleStop: "r", api.AnnotationIdleStopAt: "t"}},
		"a tenant changes nothing of them": {requester: tenant, controller: ctl, trusted: stored,
			got: map[string]string{api.AnnotationIdleStop: `{"action":"stopped"}`}},
		"a tenant sets a notice": {requester: tenant, controller: ctl, trusted: stored,
			got:  map[string]string{api.AnnotationIdleStop: `{"action":"stopped"}`, api.AnnotationIdleStopAt: "2026-12-06T18:00:00Z"},
			want: []annotationUndo{{key: api.AnnotationIdleStopAt}}},
		"a tenant rewrites the record": {requester: tenant, controller: ctl, trusted: stored,
			got:  map[string]string{api.AnnotationIdleStop: `{"action":"skipped"}`},
			want: []annotationUndo{{key: api.AnnotationIdleStop, value: `{"action":"stopped"}`, restore: true}}},
		"a tenant removes the record and the notice": {requester: tenant, controller: ctl,
			trusted: map[string]string{api.AnnotationIdleStop: "r", api.AnnotationIdleStopAt: "t"},
			want: []annotationUndo{
				{key: api.AnnotationIdleStop, value: "r", restore: true},
				{key: api.AnnotationIdleStopAt, value: "t", restore: true},
			}},
		"a tenant empties the record": {requester: tenant, controller: ctl, trusted: stored,
			got:  map[string]string{api.AnnotationIdleStop: ""},
			want: []annotationUndo{{key: api.AnnotationIdleStop, value: `{"action":"stopped"}`, restore: true}}},
		"a CREATE with both (copied from another cluster)": {requester: tenant, controller: ctl,
			got:  map[string]string{api.AnnotationIdleStop: "r", api.AnnotationIdleStopAt: "t"},
			want: []annotationUndo{{key: api.AnnotationIdleStop}, {key: api.AnnotationIdleStopAt}}},
		"no controller named: even an empty requester is guarded": {
			got:  map[string]string{api.AnnotationIdleStopAt: "t"},
			want: []annotationUndo{{key: api.AnnotationIdleStopAt}}},
		"an empty requester is not the controller": {controller: ctl, trusted: stored,
			got:  map[string]string{},
			want: []annotationUndo{{key: api.AnnotationIdleStop, value: `{"action":"stopped"}`, restore: true}}},
		"other annotations are not guarded": {requester: tenant, controller: ctl, trusted: stored,
			got: map[string]string{api.AnnotationIdleStop: `{"action":"stopped"}`, "other": "y"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := guardControllerAnnotations(tc.requester, tc.controller, tc.trusted, tc.got)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("undo %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestGuardLifecycleAnnotationsWarns: each undone change is named in a
// warning that says the lifecycle controller writes it, and the object
// gets the stored value back.
func TestGuardLifecycleAnnotationsWarns(t *testing.T) {
	vm := `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"web","namespace":"ns",
		"labels":{"virtstation.io/managed":"true"},
		"annotations":{"virtstation.io/mac":"off","virtstation.io/idle-stop":"{\"action\":\"skipped\"}","virtstation.io/idle-stop-at":"2026-12-06T18:00:00Z"}},
		"spec":{"runStrategy":"Halted","template":{"spec":{"domain":{"devices":{}}}}}}`
	old := `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"web","namespace":"ns",
		"labels":{"virtstation.io/managed":"true"},
		"annotations":{"virtstation.io/mac":"off","virtstation.io/idle-stop":"{\"action\":\"stopped\"}"}},
		"spec":{"runStrategy":"Halted","template":{"spec":{"domain":{"devices":{}}}}}}`
	in := mutateInput(t, "UPDATE", vm, old)
	in.Requester, in.Controller = "alice", "virtstation"
	res, err := Mutate(stepContext, in, NewStaticCluster(nil))
	if err != nil || len(res.Denied) > 0 {
		t.Fatalf("Mutate: %v %v", err, res.Denied)
	}
	want := []string{
		api.AnnotationIdleStop + " is written by the lifecycle controller only: the change to it is undone and the stored value kept",
		api.AnnotationIdleStopAt + " is written by the lifecycle controller only: it is removed",
	}
	if !reflect.DeepEqual(res.Warnings, want) {
		t.Errorf("warnings %q, want %q", res.Warnings, want)
	}
	ann, _ := getMap(res.Object, pathAnnotations)
	if ann[api.AnnotationIdleStop] != `{"action":"stopped"}` || ann[api.AnnotationIdleStopAt] != nil {
		t.Errorf("annotations %v", ann)
	}
	in.Requester = "virtstation"
	if res, err := Mutate(stepContext, in, NewStaticCluster(nil)); err != nil || len(res.Warnings) > 0 || !reflect.DeepEqual(res.Object, asObject(in.Object)) {
		t.Errorf("the controller's own change: %v %q\n%s", err, res.Warnings, toJSON(res.Object))
	}
}
