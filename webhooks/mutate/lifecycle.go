package mutate

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtstation/virtstation/api"
)

// checkLifecycle validates the idle-stop annotations (api/lifecycle.go),
// which the lifecycle controller acts on: a value that does not parse is
// denied here, at kubectl apply, rather than ignored later. A keep-running
// lease may reach at most max-keep-running past this admission (the VM's
// own annotation, else the default; the controller caps it again with the
// namespace's defaults). An idle timeout under api.ShortIdleTimeout is
// admitted with a warning.
func checkLifecycle(m *mutation) error {
	fld := field.NewPath("metadata", "annotations")
	p, errs := api.ParseLifecycle(m.in.VM.Annotations, api.LifecycleDefaults{MaxKeepRunning: api.DefaultMaxKeepRunning}, fld)
	if len(errs) > 0 {
		m.deny(errs, api.RuleLifecycle, "give a Go duration such as 30m or 2h (an RFC 3339 time for "+api.AnnotationKeepRunningUntil+"), or remove the annotation")
		return nil
	}
	if !m.in.Now.IsZero() && !p.KeepRunningUntil.IsZero() {
		if limit := m.in.Now.Add(p.MaxKeepRunning); p.KeepRunningUntil.After(limit) {
			v := m.in.VM.Annotations[api.AnnotationKeepRunningUntil]
			m.deny(field.ErrorList{field.Invalid(fld.Key(api.AnnotationKeepRunningUntil), v,
				fmt.Sprintf("a keep-running lease may last at most max-keep-running (%s) from now", p.MaxKeepRunning))},
				api.RuleLifecycle, "set a time before "+limit.UTC().Format(time.RFC3339))
			return nil
		}
	}
	if _, ok := m.in.VM.Annotations[api.AnnotationIdleTimeout]; ok && p.IdleTimeout < api.ShortIdleTimeout {
		m.warnings = append(m.warnings, fmt.Sprintf("%s is %s: the VM stops after that long without input, which may be before its user reaches it", api.AnnotationIdleTimeout, p.IdleTimeout))
	}
	return nil
}
