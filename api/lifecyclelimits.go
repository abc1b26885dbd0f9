package api

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The operator's bounds on the lifecycle: keys of the install namespace's
// lifecycle ConfigMap only (a namespace's ConfigMap, which its tenants may
// write, cannot set them). Neither a namespace's defaults nor a VM's
// annotations go past them.
const (
	// LifecycleKeyMinMode is the weakest mode a namespace may choose:
	// off (no bound, the default), observe or enforce.
	LifecycleKeyMinMode = "min-mode"
	// LifecycleKeyLimitIdleTimeout is the longest idle timeout. A VM with
	// none (never stopped for idleness) gets this one.
	LifecycleKeyLimitIdleTimeout = "limit-idle-timeout"
	// LifecycleKeyLimitIdleGracePeriod is the longest notice.
	LifecycleKeyLimitIdleGracePeriod = "limit-idle-grace-period"
	// LifecycleKeyLimitMaxKeepRunning is the longest keep-running lease.
	LifecycleKeyLimitMaxKeepRunning = "limit-max-keep-running"
)

// lifecycleLimitKeys are the keys only the install namespace's ConfigMap
// may set.
var lifecycleLimitKeys = []string{LifecycleKeyLimitIdleGracePeriod, LifecycleKeyLimitIdleTimeout, LifecycleKeyLimitMaxKeepRunning, LifecycleKeyMinMode}

// LifecycleLimits are the operator's bounds; zero values bound nothing.
type LifecycleLimits struct {
	MinMode                                      string
	IdleTimeout, IdleGracePeriod, MaxKeepRunning time.Duration
}

// modeStrength orders the modes: a stronger one stops more.
var modeStrength = map[string]int{ModeOff: 0, ModeObserve: 1, ModeEnforce: 2}

// Apply bounds p, and says what it cut of the VM's own annotations, for a
// warning: the annotation, the value asked for and the limit that applies.
func (l LifecycleLimits) Apply(p LifecyclePolicy, annotations map[string]string) (LifecyclePolicy, []string) {
	var cut []string
	if modeStrength[p.Mode] < modeStrength[l.MinMode] {
		p.Mode = l.MinMode
	}
	for _, b := range []struct {
		key   string
		limit time.Duration
		v     *time.Duration
	}{
		{AnnotationIdleTimeout, l.IdleTimeout, &p.IdleTimeout},
		{AnnotationIdleGracePeriod, l.IdleGracePeriod, &p.IdleGracePeriod},
		{AnnotationMaxKeepRunning, l.MaxKeepRunning, &p.MaxKeepRunning},
	} {
		if b.limit <= 0 || (*b.v > 0 && *b.v <= b.limit) {
			continue
		}
		if _, own := annotations[b.key]; own && *b.v > 0 {
			cut = append(cut, fmt.Sprintf("%s %s is over the cluster's limit of %s, which applies", b.key, *b.v, b.limit))
		}
		*b.v = b.limit
	}
	return p, cut
}

// parseLifecycleLimit sets the limit of key k in l from v; ok is false for
// a key that is not a limit's.
func parseLifecycleLimit(l *LifecycleLimits, k, v string, fld *field.Path) (err *field.Error, ok bool) {
	switch k {
	case LifecycleKeyMinMode:
		if _, known := modeStrength[v]; !known {
			return field.NotSupported(fld.Key(k), v, []string{ModeOff, ModeObserve, ModeEnforce}), true
		}
		l.MinMode = v
		return nil, true
	case LifecycleKeyLimitIdleTimeout:
		return setDuration(&l.IdleTimeout, v, fld.Key(k), time.Nanosecond), true
	case LifecycleKeyLimitIdleGracePeriod:
		return setDuration(&l.IdleGracePeriod, v, fld.Key(k), 0), true
	case LifecycleKeyLimitMaxKeepRunning:
		return setDuration(&l.MaxKeepRunning, v, fld.Key(k), 0), true
	}
	return nil, false
}

// withoutLimits is a namespace's ConfigMap data without the keys only the
// install namespace's may set, and the errors that name them.
func withoutLimits(data map[string]string, fld *field.Path) (map[string]string, field.ErrorList) {
	var errs field.ErrorList
	out := make(map[string]string, len(data))
	for k, v := range data {
		out[k] = v
	}
	for _, k := range lifecycleLimitKeys {
		if _, ok := data[k]; ok {
			errs = append(errs, field.Forbidden(fld.Key(k), "only the install namespace's "+LifecycleConfigMap+" ConfigMap sets the cluster's limits"))
			delete(out, k)
		}
	}
	return out, errs
}
