package mutate

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/policy"
)

// checkLifecycle validates the idle-stop annotations (api/lifecycle.go),
// which the lifecycle controller acts on: a value that does not parse is
// denied here, at kubectl apply, rather than ignored later. A keep-running
// lease may reach at most max-keep-running past the admission that sets or
// changes it (the VM's own annotation, else its namespace's defaults as
// the controller reads them; the controller caps it again). An idle
// timeout under api.ShortIdleTimeout is admitted with a warning.
func checkLifecycle(m *mutation) error {
	fld := field.NewPath("metadata", "annotations")
	p, errs := api.ParseLifecycle(m.in.VM.Annotations, api.LifecycleDefaults{MaxKeepRunning: api.DefaultMaxKeepRunning}, fld)
	if len(errs) > 0 {
		m.deny(errs, policy.RuleLifecycle, "give a Go duration such as 30m or 2h (an RFC 3339 time for "+api.AnnotationKeepRunningUntil+"), or remove the annotation")
		return nil
	}
	if !m.in.Now.IsZero() && !p.KeepRunningUntil.IsZero() && m.leaseSet() {
		maxKeep, err := m.maxKeepRunning(p)
		if err != nil {
			return err
		}
		if limit := m.in.Now.Add(maxKeep); p.KeepRunningUntil.After(limit) {
			v := m.in.VM.Annotations[api.AnnotationKeepRunningUntil]
			m.deny(field.ErrorList{field.Invalid(fld.Key(api.AnnotationKeepRunningUntil), v,
				fmt.Sprintf("a keep-running lease may last at most max-keep-running (%s) from now", maxKeep))},
				policy.RuleLifecycle, "set a time before "+limit.UTC().Format(time.RFC3339))
			return nil
		}
	}
	if _, ok := m.in.VM.Annotations[api.AnnotationIdleTimeout]; ok && p.IdleTimeout < api.ShortIdleTimeout {
		m.warnings = append(m.warnings, fmt.Sprintf("%s is %s: the VM stops after that long without input, which may be before its user reaches it", api.AnnotationIdleTimeout, p.IdleTimeout))
	}
	return nil
}

// leaseSet says whether the request sets the keep-running lease: a CREATE
// with one, or an UPDATE that changes it. A lease admitted earlier is not
// judged again, so that a lower max-keep-running set since (in the
// namespace's ConfigMap) does not deny every later write to the VM, the
// lifecycle controller's and KubeVirt's stop among them.
func (m *mutation) leaseSet() bool {
	if m.in.OldVM == nil {
		return true
	}
	old, had := m.in.OldVM.Annotations[api.AnnotationKeepRunningUntil]
	return !had || old != m.in.VM.Annotations[api.AnnotationKeepRunningUntil]
}

// maxKeepRunning caps a keep-running lease: the VM's own max-keep-running
// (in p), else its namespace's lifecycle defaults. A lifecycle ConfigMap
// that does not parse gives what did, with a warning, and never fails the
// admission; only a fault reading them does.
func (m *mutation) maxKeepRunning(p api.LifecyclePolicy) (time.Duration, error) {
	if _, own := m.in.VM.Annotations[api.AnnotationMaxKeepRunning]; own {
		return p.MaxKeepRunning, nil
	}
	d, invalid, err := m.cluster.LifecycleDefaults(m.ctx, m.in.Namespace)
	if err != nil {
		return 0, fmt.Errorf("lifecycle defaults: %w", err)
	}
	if invalid != nil {
		m.warnings = append(m.warnings, fmt.Sprintf("lifecycle defaults: %v; %s is judged with what parsed (max-keep-running %s)", invalid, api.AnnotationKeepRunningUntil, d.MaxKeepRunning))
	}
	return d.MaxKeepRunning, nil
}
