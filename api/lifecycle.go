package api

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Annotations a user sets on a managed VirtualMachine to have it stopped
// when idle (the workstation lifecycle, docs/lifecycle.md). Each is a Go
// duration; a VM without an idle timeout, from its annotations or its
// namespace's defaults, is never stopped for idleness.
const (
	// AnnotationIdleTimeout: stop after this long without activity.
	AnnotationIdleTimeout = "virtstation.io/idle-timeout"
	// AnnotationIdleGracePeriod: the notice before the stop, during which
	// activity or a keep-running lease keeps the VM running.
	AnnotationIdleGracePeriod = "virtstation.io/idle-grace-period"
	// AnnotationMaxKeepRunning caps a keep-running lease.
	AnnotationMaxKeepRunning = "virtstation.io/max-keep-running"
	// AnnotationKeepRunningUntil is a keep-running lease a user takes with
	// kubectl annotate: RFC 3339, at most max-keep-running from the
	// admission that sets it.
	AnnotationKeepRunningUntil = "virtstation.io/keep-running-until"
	// AnnotationIdleStopUnsafe, "true", lets the lifecycle stop a VM that
	// would lose data (a writable disk that does not survive a stop, a PVC
	// that is not Bound).
	AnnotationIdleStopUnsafe = "virtstation.io/idle-stop-unsafe"
)

// Annotations the lifecycle controller writes on a managed VirtualMachine,
// and it alone: the mutating webhook undoes anyone else's change to them.
const (
	// AnnotationIdleStopAt, RFC 3339, is set while the VM is pending an
	// idle stop: the notice was given and the stop is due at that time.
	// The bridge reads it to show the browser's banner.
	AnnotationIdleStopAt = "virtstation.io/idle-stop-at"
	// AnnotationIdleStop is the JSON IdleStopRecord of the last idle stop
	// (or, in observe mode, the stop the controller would have made).
	AnnotationIdleStop = "virtstation.io/idle-stop"
)

// The lifecycle's namespace defaults: a ConfigMap of this name in a VM's
// namespace, or else in the install namespace (the cluster's defaults),
// with the data keys below. A VM's own annotations override it.
const (
	LifecycleConfigMap = "virtstation-lifecycle"
	// LifecycleKeyMode is enforce (default), observe or off.
	LifecycleKeyMode = "mode"
	// LifecycleKeyIdleTimeout, LifecycleKeyIdleGracePeriod and
	// LifecycleKeyMaxKeepRunning default the annotations of those names.
	LifecycleKeyIdleTimeout     = "idle-timeout"
	LifecycleKeyIdleGracePeriod = "idle-grace-period"
	LifecycleKeyMaxKeepRunning  = "max-keep-running"
)

// Lifecycle modes.
const (
	// ModeEnforce stops idle VMs.
	ModeEnforce = "enforce"
	// ModeObserve records, as an Event and in AnnotationIdleStop, the
	// notice and the stop it would have made, and changes nothing else.
	ModeObserve = "observe"
	// ModeOff turns the lifecycle off.
	ModeOff = "off"
)

// Lifecycle defaults and bounds.
const (
	DefaultIdleGracePeriod = 15 * time.Minute
	DefaultMaxKeepRunning  = 8 * time.Hour
	// MaxLifecycleDuration bounds every lifecycle duration: 30 days.
	MaxLifecycleDuration = 30 * 24 * time.Hour
	// ShortIdleTimeout is the idle timeout under which admission warns:
	// the VM may stop before its user has reached it.
	ShortIdleTimeout = 5 * time.Minute
)

// The activity record of a VM: one coordination.k8s.io Lease in the
// install namespace (where tenants cannot write), named
// ActivityLeaseName, written by the bridge on user input (at most about
// once a minute a VM, however many replicas) and by the lifecycle
// controller for guest-agent signals. spec.renewTime is the last
// activity, spec.holderIdentity its source.
const (
	// LabelRole marks the Lease's role; RoleActivity is the activity record.
	LabelRole    = "virtstation.io/role"
	RoleActivity = "vm-activity"
	// LabelVM is VMHash of the VM the Lease is about.
	LabelVM = "virtstation.io/vm"
	// AnnotationVMNamespace and AnnotationVMName name that VM.
	AnnotationVMNamespace = "virtstation.io/vm-namespace"
	AnnotationVMName      = "virtstation.io/vm-name"
	// AnnotationKeepRunningUntil (above) on the activity Lease is the lease
	// a user took from the browser's notice; AnnotationKeepRunningBy names
	// that user.
	AnnotationKeepRunningBy = "virtstation.io/keep-running-by"
	// AnnotationKeepRunningAt, RFC 3339, is when that lease was taken: the
	// controller caps it at max-keep-running from then.
	AnnotationKeepRunningAt = "virtstation.io/keep-running-at"
)

// ActivityInterval is how often, at most, the activity record of one VM is
// written.
const ActivityInterval = time.Minute

// VMHash identifies a VM in object names and labels: 16 hex digits of
// sha256("<ns>/<vm>"). Neither part can contain "/", so the input is
// unambiguous; 64 bits make a collision between two VMs negligible.
func VMHash(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return hex.EncodeToString(sum[:8])
}

// ActivityLeaseName is the name of a VM's activity Lease.
func ActivityLeaseName(namespace, name string) string {
	return "vs-activity-" + VMHash(namespace, name)
}

// LifecyclePolicy is a VM's idle-stop policy, its annotations over its
// namespace's defaults.
type LifecyclePolicy struct {
	// Mode is ModeEnforce, ModeObserve or ModeOff.
	Mode string
	// IdleTimeout zero: the VM is never stopped for idleness.
	IdleTimeout     time.Duration
	IdleGracePeriod time.Duration
	MaxKeepRunning  time.Duration
	// KeepRunningUntil is the lease from AnnotationKeepRunningUntil (zero:
	// none).
	KeepRunningUntil time.Time
	// StopUnsafe: AnnotationIdleStopUnsafe is "true".
	StopUnsafe bool
	// Limited says what the cluster's limits cut (LifecycleLimits.Apply).
	Limited []string
}

// Enabled says whether the controller acts on (or observes) the VM.
func (p LifecyclePolicy) Enabled() bool { return p.Mode != ModeOff && p.IdleTimeout > 0 }

// LifecycleDefaults is the parsed defaults ConfigMap data.
type LifecycleDefaults struct {
	Mode                                         string
	IdleTimeout, IdleGracePeriod, MaxKeepRunning time.Duration
	// Limits are the operator's bounds (lifecyclelimits.go), from the
	// install namespace's ConfigMap only.
	Limits LifecycleLimits
}

// ParseLifecycleDefaults reads a lifecycle ConfigMap's data; fld is the
// path of its data. Unknown keys are errors, so a typo is not a silent
// default.
func ParseLifecycleDefaults(data map[string]string, fld *field.Path) (LifecycleDefaults, field.ErrorList) {
	return ParseLifecycleDefaultsOver(LifecycleDefaults{Mode: ModeEnforce, IdleGracePeriod: DefaultIdleGracePeriod, MaxKeepRunning: DefaultMaxKeepRunning}, data, fld)
}

// ParseLifecycleDefaultsOver is ParseLifecycleDefaults over base: a key
// data does not set keeps base's value (a namespace's ConfigMap over the
// cluster's).
func ParseLifecycleDefaultsOver(d LifecycleDefaults, data map[string]string, fld *field.Path) (LifecycleDefaults, field.ErrorList) {
	var errs field.ErrorList
	// In key order, so the errors are too.
	for _, k := range slices.Sorted(maps.Keys(data)) {
		v := data[k]
		var err *field.Error
		switch k {
		case LifecycleKeyMode:
			if v != ModeEnforce && v != ModeObserve && v != ModeOff {
				err = field.NotSupported(fld.Key(k), v, []string{ModeEnforce, ModeObserve, ModeOff})
			} else {
				d.Mode = v
			}
		case LifecycleKeyIdleTimeout:
			err = setDuration(&d.IdleTimeout, v, fld.Key(k), time.Nanosecond)
		case LifecycleKeyIdleGracePeriod:
			err = setDuration(&d.IdleGracePeriod, v, fld.Key(k), 0)
		case LifecycleKeyMaxKeepRunning:
			err = setDuration(&d.MaxKeepRunning, v, fld.Key(k), 0)
		default:
			var limit bool
			if err, limit = parseLifecycleLimit(&d.Limits, k, v, fld); !limit {
				err = field.NotSupported(fld.Key(k), "", append([]string{LifecycleKeyMode, LifecycleKeyIdleTimeout, LifecycleKeyIdleGracePeriod, LifecycleKeyMaxKeepRunning}, lifecycleLimitKeys...))
				err.BadValue = k
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return d, errs
}

// LifecycleConfigMapData reads the data of the lifecycle ConfigMap
// (LifecycleConfigMap) in a namespace: found is false when there is none,
// err a fault reading it.
type LifecycleConfigMapData func(namespace string) (data map[string]string, found bool, err error)

// LayerLifecycleDefaults is the lifecycle defaults of a VM in namespace,
// as the lifecycle controller and the mutating webhook both read them: the
// built-in defaults, the install namespace's ConfigMap over them (the
// cluster's defaults; install "" has none), and namespace's over that. A
// key a ConfigMap does not set keeps the value beneath it.
//
// A ConfigMap that does not parse keeps what did: invalid names each such
// ConfigMap and its problems, and d is still usable. err is a fault of
// read, which stops the layering; d is then what was read before it.
func LayerLifecycleDefaults(install, namespace string, read LifecycleConfigMapData) (d LifecycleDefaults, invalid, err error) {
	d, _ = ParseLifecycleDefaults(nil, nil)
	var bad []error
	for i, ns := range []string{install, namespace} {
		if ns == "" || (i == 1 && ns == install) {
			continue
		}
		data, found, rerr := read(ns)
		if rerr != nil {
			return d, errors.Join(bad...), fmt.Errorf("read ConfigMap %s/%s: %w", ns, LifecycleConfigMap, rerr)
		}
		if !found {
			continue
		}
		var ferrs, limitErrs field.ErrorList
		if i == 1 {
			data, limitErrs = withoutLimits(data, field.NewPath("data"))
		}
		d, ferrs = ParseLifecycleDefaultsOver(d, data, field.NewPath("data"))
		if ferrs = append(limitErrs, ferrs...); len(ferrs) > 0 {
			bad = append(bad, fmt.Errorf("ConfigMap %s/%s: %w", ns, LifecycleConfigMap, ferrs.ToAggregate()))
		}
	}
	return d, errors.Join(bad...), nil
}

// ParseLifecycle reads a VM's lifecycle annotations over defaults, within
// the defaults' Limits; fld is the path of the VM's annotations. Every
// value that does not parse is an error and leaves the default in place.
func ParseLifecycle(annotations map[string]string, defaults LifecycleDefaults, fld *field.Path) (LifecyclePolicy, field.ErrorList) {
	p := LifecyclePolicy{Mode: defaults.Mode, IdleTimeout: defaults.IdleTimeout, IdleGracePeriod: defaults.IdleGracePeriod, MaxKeepRunning: defaults.MaxKeepRunning}
	if p.Mode == "" {
		p.Mode = ModeEnforce
	}
	var errs field.ErrorList
	for _, a := range []struct {
		key string
		min time.Duration
		to  *time.Duration
	}{
		{AnnotationIdleTimeout, time.Nanosecond, &p.IdleTimeout},
		{AnnotationIdleGracePeriod, 0, &p.IdleGracePeriod},
		{AnnotationMaxKeepRunning, 0, &p.MaxKeepRunning},
	} {
		v, ok := annotations[a.key]
		if !ok {
			continue
		}
		d, err := parseLifecycleDuration(v, fld.Key(a.key), a.min)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		*a.to = d
	}
	if v, ok := annotations[AnnotationKeepRunningUntil]; ok && v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			errs = append(errs, field.Invalid(fld.Key(AnnotationKeepRunningUntil), v, "want an RFC 3339 time, such as 2026-12-06T18:00:00Z"))
		} else {
			p.KeepRunningUntil = t
		}
	}
	if v, ok := annotations[AnnotationIdleStopUnsafe]; ok {
		if v != "true" && v != "false" {
			errs = append(errs, field.NotSupported(fld.Key(AnnotationIdleStopUnsafe), v, []string{"true", "false"}))
		}
		p.StopUnsafe = v == "true"
	}
	p, p.Limited = defaults.Limits.Apply(p, annotations)
	return p, errs
}

// setDuration sets *to from v when it parses.
func setDuration(to *time.Duration, v string, fld *field.Path, min time.Duration) *field.Error {
	d, err := parseLifecycleDuration(v, fld, min)
	if err == nil {
		*to = d
	}
	return err
}

// parseLifecycleDuration parses a Go duration in [min, MaxLifecycleDuration].
func parseLifecycleDuration(v string, fld *field.Path, min time.Duration) (time.Duration, *field.Error) {
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return 0, field.Invalid(fld, v, "want a Go duration, such as 30m or 2h")
	case d < min && min > 0:
		return 0, field.Invalid(fld, v, "must be greater than zero")
	case d < min:
		return 0, field.Invalid(fld, v, "must not be negative")
	case d > MaxLifecycleDuration:
		return 0, field.Invalid(fld, v, fmt.Sprintf("must be at most %s", MaxLifecycleDuration))
	}
	return d, nil
}

// EffectiveKeepRunning caps a keep-running lease taken at (or, for one of
// unknown origin, seen at) from: it lasts until until, and no longer than
// max past from.
func EffectiveKeepRunning(until, from time.Time, max time.Duration) time.Time {
	if until.IsZero() {
		return until
	}
	if limit := from.Add(max); until.After(limit) {
		return limit
	}
	return until
}

// IdleStopRecord is AnnotationIdleStop: what the lifecycle did, or in
// observe mode would have done, and why.
type IdleStopRecord struct {
	// At is when, RFC 3339.
	At string `json:"at"`
	// Action is "stopped", "would-stop" (observe mode) or "skipped" (the
	// stop would lose data).
	Action string `json:"action"`
	// Reason says why in words.
	Reason string `json:"reason"`
	// LastActivity is the last activity seen, RFC 3339, and Source what it
	// was ("bridge vnc input", "guest agent: 2 users", …).
	LastActivity string `json:"lastActivity,omitempty"`
	Source       string `json:"source,omitempty"`
	// By is who stopped it: the controller's identity.
	By string `json:"by"`
}

// Idle stop record actions.
const (
	IdleActionStopped   = "stopped"
	IdleActionWouldStop = "would-stop"
	IdleActionSkipped   = "skipped"
)
