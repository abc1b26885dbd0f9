package mutate

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/policy"
)

// checkLifecycle validates the idle-stop annotations (api/lifecycle.go),
// which the lifecycle controller acts on: a value that does not parse is
// denied here, at kubectl apply, rather than ignored later. A VM that sets
// any of them is read within its namespace's defaults and the cluster's
// limits, as the controller reads it: a value over a limit is admitted
// with a warning saying the limit applies, and a keep-running lease may
// reach at most its max-keep-running past the admission that sets or
// changes it. An idle timeout under api.ShortIdleTimeout is admitted with
// a warning.
func checkLifecycle(m *mutation) error {
	fld := field.NewPath("metadata", "annotations")
	ann := m.in.VM.Annotations
	if _, errs := api.ParseLifecycle(ann, api.LifecycleDefaults{MaxKeepRunning: api.DefaultMaxKeepRunning}, fld); len(errs) > 0 {
		m.deny(errs, policy.RuleLifecycle, "give a Go duration such as 30m or 2h (an RFC 3339 time for "+api.AnnotationKeepRunningUntil+"), or remove the annotation")
		return nil
	}
	if !slices.ContainsFunc(lifecycleAnnotations, func(k string) bool { _, ok := ann[k]; return ok }) {
		return nil
	}
	d, err := m.lifecycleDefaults()
	if err != nil {
		return err
	}
	p, _ := api.ParseLifecycle(ann, d, fld)
	m.warnings = append(m.warnings, p.Limited...)
	if !m.in.Now.IsZero() && !p.KeepRunningUntil.IsZero() && m.leaseSet() {
		if limit := m.in.Now.Add(p.MaxKeepRunning); p.KeepRunningUntil.After(limit) {
			m.deny(field.ErrorList{field.Invalid(fld.Key(api.AnnotationKeepRunningUntil), ann[api.AnnotationKeepRunningUntil],
				fmt.Sprintf("a keep-running lease may last at most max-keep-running (%s) from now", p.MaxKeepRunning))},
				policy.RuleLifecycle, "set a time before "+limit.UTC().Format(time.RFC3339))
			return nil
		}
	}
	if _, ok := ann[api.AnnotationIdleTimeout]; ok && p.IdleTimeout < api.ShortIdleTimeout {
		m.warnings = append(m.warnings, fmt.Sprintf("%s is %s: the VM stops after that long without input, which may be before its user reaches it", api.AnnotationIdleTimeout, p.IdleTimeout))
	}
	return nil
}

// lifecycleAnnotations are the annotations checkLifecycle reads within the
// namespace's defaults and the cluster's limits.
var lifecycleAnnotations = []string{api.AnnotationIdleTimeout, api.AnnotationIdleGracePeriod, api.AnnotationMaxKeepRunning, api.AnnotationKeepRunningUntil}

// leaseSet says whether the request sets the keep-running lease: a CREATE
// with one, an UPDATE that changes it, or one that makes the VM managed
// (the webhook was not called while it was not, so a lease set then is
// judged now). A lease admitted earlier is not judged again, so that a
// lower max-keep-running set since (in the namespace's ConfigMap) does not
// deny every later write to the VM, the lifecycle controller's and
// KubeVirt's stop among them.
func (m *mutation) leaseSet() bool {
	if m.in.OldVM == nil || m.in.OldVM.Labels[api.LabelManaged] != api.LabelTrue {
		return true
	}
	old, had := m.in.OldVM.Annotations[api.AnnotationKeepRunningUntil]
	return !had || old != m.in.VM.Annotations[api.AnnotationKeepRunningUntil]
}

// lifecycleDefaults reads the VM's namespace's lifecycle defaults and the
// cluster's limits. A lifecycle ConfigMap that does not parse gives what
// did, with a warning, and never fails the admission; only a fault reading
// them does.
func (m *mutation) lifecycleDefaults() (api.LifecycleDefaults, error) {
	d, invalid, err := m.cluster.LifecycleDefaults(m.ctx, m.in.Namespace)
	if err != nil {
		return d, fmt.Errorf("lifecycle defaults: %w", err)
	}
	if invalid != nil {
		m.warnings = append(m.warnings, fmt.Sprintf("lifecycle defaults: %v; the lifecycle annotations are judged with what parsed", invalid))
	}
	return d, nil
}
