package mutate

import (
	"fmt"

	"github.com/virtstation/virtstation/api"
)

// controllerAnnotations are the annotations of a managed VM that only the
// lifecycle controller writes (api/lifecycle.go): its notice and its record.
// A tenant who wrote them could skip a stop or fake a record.
var controllerAnnotations = []string{api.AnnotationIdleStop, api.AnnotationIdleStopAt}

// annotationUndo is a change to one of controllerAnnotations that a request
// may not make, and how it is undone.
type annotationUndo struct {
	key string
	// value is what the annotation goes back to when restore; without
	// restore the annotation is removed.
	value   string
	restore bool
}

// warning is the admission warning that names the undone change.
func (u annotationUndo) warning() string {
	if u.restore {
		return fmt.Sprintf("%s is written by the lifecycle controller only: the change to it is undone and the stored value kept", u.key)
	}
	return fmt.Sprintf("%s is written by the lifecycle controller only: it is removed", u.key)
}

// guardControllerAnnotations decides which changes to controllerAnnotations
// a request undoes, in key order. requester is who sends it, as the API
// server says (the request's userInfo.username, never anything in the
// object); controller is the lifecycle controller's user, whose requests
// change them freely ("" names no one). Anyone else's change is undone:
// back to trusted's value, or removed when trusted has none. trusted is
// the stored VM's annotations on an UPDATE of a managed VM, and nil on a
// CREATE and on the UPDATE that makes a VM managed: no value there was
// written by the controller (a VM copied from another cluster loses that
// cluster's records and keeps working). got is the request's annotations.
func guardControllerAnnotations(requester, controller string, trusted, got map[string]string) []annotationUndo {
	if controller != "" && requester == controller {
		return nil
	}
	var out []annotationUndo
	for _, k := range controllerAnnotations {
		want, had := trusted[k]
		v, has := got[k]
		if has == had && v == want {
			continue
		}
		out = append(out, annotationUndo{key: k, value: want, restore: had})
	}
	return out
}

// guardLifecycleAnnotations undoes, with a warning each, the changes a
// request by anyone but the lifecycle controller makes to the annotations
// the controller alone writes (guardControllerAnnotations). It reads the
// request's annotations from m.vm, where release leaves them as sent.
func guardLifecycleAnnotations(m *mutation) error {
	var trusted map[string]string
	if old := m.in.OldVM; old != nil && old.Labels[api.LabelManaged] == api.LabelTrue {
		trusted = old.Annotations
	}
	got := map[string]string{}
	for _, k := range controllerAnnotations {
		if v, ok := m.vm.Annotations[k]; ok {
			got[k] = v
		}
	}
	for _, u := range guardControllerAnnotations(m.in.Requester, m.in.Controller, trusted, got) {
		if u.restore {
			if m.vm.Annotations == nil {
				m.vm.Annotations = map[string]string{}
			}
			m.vm.Annotations[u.key] = u.value
		} else {
			delete(m.vm.Annotations, u.key)
		}
		m.warnings = append(m.warnings, u.warning())
	}
	return nil
}
